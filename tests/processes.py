"""Real server processes for the fault tests, on 127.0.0.1 and a free port, that a test can stop and start again on
the same port: a Chroma server (``chroma run``, the command the chromadb package installs) and the rater
(``simulacra rater``, waitress). Each waits for its health answer when started and is stopped by its fixture's
finaliser.

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMA = Path(sys.executable).with_name("chroma")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """A server started as ``argv`` (a function of the port), healthy when GET ``health_path`` answers 200.

    Args:
        argv: ``argv(port) -> list[str]``; health_path: the path polled after start; log: file of its output.
    """

    def __init__(self, argv, health_path: str, log: Path, port: int | None = None, start_timeout_s: float = 120.0):
        self._argv = argv
        self.health_path = health_path
        self.log = Path(log)
        self.port = port or free_port()
        self.start_timeout_s = start_timeout_s
        self.proc: subprocess.Popen | None = None

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(self.base + self.health_path, timeout=2) as resp:
                return resp.status == 200
        except OSError:
            return False

    def start(self) -> ServerProcess:
        """Start it (on the same port as before) and wait until it answers its health check.

        Raises:
            RuntimeError: it exited or did not answer within ``start_timeout_s`` (with the end of its log).
        """
        assert self.proc is None, "already running"
        with self.log.open("ab") as out:
            env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
            self.proc = subprocess.Popen(self._argv(self.port), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=env,
                                         start_new_session=True)
        deadline = time.monotonic() + self.start_timeout_s
        while not self.healthy():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"{self._argv(self.port)} did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)
        return self

    def stop(self, sig: int = signal.SIGTERM) -> None:
        """Stop it with ``sig`` (SIGKILL: a crash) and wait until it has exited; nothing if not running."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
        self.proc = None


def chroma_server(path: Path, log: Path) -> ServerProcess:
    """A Chroma server persisting to ``path`` (not started)."""
    return ServerProcess(lambda port: [str(CHROMA), "run", "--path", str(path), "--host", "127.0.0.1", "--port",
                                       str(port)], "/api/v2/heartbeat", log)


def rater_server(log: Path) -> ServerProcess:
    """The rater (``simulacra rater``, offline backend) (not started)."""
    return ServerProcess(lambda port: [sys.executable, "-m", "simulacra.cli", "rater", "--host", "127.0.0.1",
                                       "--port", str(port)], "/health", log)
