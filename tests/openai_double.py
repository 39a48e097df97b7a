"""A scripted OpenAI-compatible server on 127.0.0.1 for tests: no paid API, real HTTP, the real openai client.

Serves ``POST /v1/chat/completions`` and ``GET /v1/models`` with werkzeug on a free port in a thread. Each chat
request takes the next scripted response; every request body is recorded. Use the fixture::

    pytest_plugins = ["tests.openai_double"]  # in the test module: registers the openai_double fixture
    from tests.openai_double import reply, status

    def test_something(openai_double):
        openai_double.script([status(429, headers={"Retry-After": "1"}), reply('{"rating": 7}')])
        model = OpenAIChatModel("double-model", base_url=openai_double.url)
        ...
        assert openai_double.requests[0]["seed"] == 3

For the rater, :class:`RatingModel` is a callable that reads the rater's own prompts (one memory, or a numbered
batch) and answers like a small local model: slowly (``latency_s``), with the ratings a function gives, and cut
at ``max_tokens`` (``finish_reason: length``, the last item half written) when the items do not fit.

Scripted responses: :func:`reply` (any content; :func:`json_reply`, :func:`prose_json`, :func:`bare_number`,
:func:`garbage`, :func:`empty`, :func:`null_content` are shorthands), :func:`status` (any HTTP error with optional
headers; :func:`rate_limited`, :func:`server_error`, :func:`rejects_response_format`), :func:`hang` (answer only
after a delay longer than the client's timeout), or any callable ``(request_body) -> response`` for answers that
depend on the request (:func:`if_response_format`). When the script runs out, the double answers
``HTTP 410`` naming the request number, so a test that sends more requests than scripted fails loudly; pass
``then=`` to :meth:`OpenAIDouble.script` to answer every further request the same way instead.

PYTEST_DONT_REWRITE: this module has no asserts; the marker lets a test module import its helpers before
``pytest_plugins`` loads it as a plugin without pytest warning that it cannot rewrite it.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Union

import pytest
from werkzeug.serving import make_server
from werkzeug.wrappers import Request, Response

MODEL = "double-model"


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion. ``None`` token counts are estimated from the request (about 4 characters/token)."""

    content: str | None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str = "stop"
    usage: bool = True
    model: str | None = None
    headers: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Status:
    """An HTTP error with OpenAI's error body ``{"error": {"message", "type", "param", "code"}}`` (or ``raw``)."""

    code: int
    message: str = ""
    headers: dict = field(default_factory=dict)
    error_code: str | None = None
    param: str | None = None
    raw: str | None = None


@dataclass(frozen=True)
class Hang:
    """Wait ``seconds`` before answering ``then`` (a 200 reply by default); released early when the double closes."""

    seconds: float
    then: Any = None


Scripted = Union[Reply, Status, Hang, Callable[[dict], Any]]  # noqa: UP007 - a runtime alias on Python 3.10


def reply(content: str | None, **kw: Any) -> Reply:
    """A 200 answer with ``choices[0].message.content == content`` and a ``usage`` block (see :class:`Reply`)."""
    return Reply(content, **kw)


def json_reply(obj: Any, **kw: Any) -> Reply:
    """Well-formed JSON content."""
    return Reply(json.dumps(obj), **kw)


def prose_json(obj: Any, **kw: Any) -> Reply:
    """JSON inside chatty prose and a code fence, as small local models often answer."""
    return Reply(f"Sure! Here is my answer:\n```json\n{json.dumps(obj, indent=2)}\n```\nLet me know if you need more.",
                 **kw)


def bare_number(n: float, **kw: Any) -> Reply:
    """Just a number, e.g. ``"7"``."""
    return Reply(str(n), **kw)


def garbage(**kw: Any) -> Reply:
    """Content that is no JSON and holds no number."""
    return Reply("As an AI language model I cannot rate memories; they are all important in their own way.", **kw)


def empty(**kw: Any) -> Reply:
    """Empty content, zero completion tokens."""
    return Reply("", completion_tokens=0, **kw)


def null_content(**kw: Any) -> Reply:
    """``"content": null`` (some servers send it with a ``length`` finish)."""
    return Reply(None, completion_tokens=0, **kw)


def status(code: int, message: str = "", headers: dict | None = None, **kw: Any) -> Status:
    """An HTTP error ``code`` with optional ``headers`` (e.g. ``{"Retry-After": "2"}``)."""
    return Status(code, message or f"scripted HTTP {code}", headers or {}, **kw)


def rate_limited(retry_after: str | None = "1", **kw: Any) -> Status:
    """429 with ``Retry-After`` (seconds, as OpenAI sends it), or without when ``retry_after`` is None."""
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return Status(429, "Rate limit reached for requests", headers, error_code="rate_limit_exceeded", **kw)


def server_error(code: int = 500, **kw: Any) -> Status:
    """500 / 502 / 503 ..."""
    return Status(code, f"scripted server error {code}", **kw)


def rejects_response_format() -> Status:
    """The 400 a server that does not take ``response_format`` answers (wording after llama.cpp / LM Studio)."""
    return Status(400, "Unsupported response_format type; 'response_format' is not supported by this server",
                  param="response_format", error_code="invalid_request_error")


def hang(seconds: float = 30.0, then: Any = None) -> Hang:
    """Answer only after ``seconds`` (longer than the client's timeout makes it a timeout)."""
    return Hang(seconds, then)


def if_response_format(with_it: Scripted, without_it: Scripted) -> Callable[[dict], Scripted]:
    """Answer ``with_it`` when the request carries ``response_format``, else ``without_it`` (a real server's logic)."""
    return lambda body: with_it if "response_format" in body else without_it


_BATCH_HEAD = re.compile(r"^Rate each of these (\d+) memories")
_LISTED = re.compile(r"^(\d+)\. (.*)$")
_ONE = re.compile(r'A memory(?: of [^:\n]*)?: "(.*)"\n', re.S)


class RatingModel:
    """Answers the rater's rating prompts (``simulacra.rating.llm``) as a scripted local model would.

    Args:
        rating: ``(memory text, 1-based position in the prompt) -> rating``.
        fits: ``(memories asked, max_tokens) -> how many complete items fit`` in a batch answer; fewer than
            asked gives a cut answer: the items that fit, then half an item, ``finish_reason: "length"``.
            Default: all fit.
        latency_s: seconds before each answer (a :class:`Hang`).
        other: the answer to any other prompt (reflection); default a refusal in prose.
        cut: ``False``: when items do not fit, answer only those that do, as complete JSON (``finish_reason:
            "stop"``), like a model that skipped some.
    Attributes:
        rated: ``{memory text: times a complete rating of it was sent}``.
        batches: ``(memories asked, max_tokens, complete items sent)`` per batch prompt, in order.
        singles: memory texts asked one at a time, in order.
    """

    def __init__(self, rating: Callable[[str, int], int], fits: Callable[[int, int], int] | None = None,
                 latency_s: float = 0.0, other: Any = None, cut: bool = True):
        self.rating, self.fits, self.latency_s, self.cut = rating, fits, latency_s, cut
        self.other = other if other is not None else reply("I cannot help with that.")
        self.rated: dict[str, int] = {}
        self.batches: list[tuple[int, int, int]] = []
        self.singles: list[str] = []
        self._lock = threading.Lock()

    def _item(self, text: str, position: int) -> str:
        with self._lock:
            self.rated[text] = self.rated.get(text, 0) + 1
        rating = self.rating(text, position)
        return json.dumps({"explanation": f"memory {position} matters this much", "rating": rating})

    def __call__(self, body: dict) -> Scripted:
        prompt = str(body["messages"][-1].get("content", ""))
        answer = self._answer(prompt, int(body.get("max_tokens") or 256))
        return Hang(self.latency_s, answer) if self.latency_s > 0 else answer

    def _answer(self, prompt: str, max_tokens: int) -> Scripted:
        head = _BATCH_HEAD.match(prompt)
        if head:
            listed = [m for m in (_LISTED.match(line) for line in prompt.splitlines()[1:]) if m]
            texts = [m.group(2) for m in listed][: int(head.group(1))]
            fit = len(texts) if self.fits is None else max(0, min(len(texts), self.fits(len(texts), max_tokens)))
            items = [self._item(t, i) for i, t in enumerate(texts[:fit], start=1)]
            with self._lock:
                self.batches.append((len(texts), max_tokens, fit))
            if fit == len(texts) or not self.cut:
                return reply(json.dumps({"ratings": [json.loads(i) for i in items]}))
            cut = '{"ratings": [' + "".join(i + ", " for i in items) + '{"explanation": "memory ' + str(fit + 1)
            return reply(cut, finish_reason="length", completion_tokens=max_tokens)
        one = _ONE.search(prompt)
        if one:
            with self._lock:
                self.singles.append(one.group(1))
            return reply(self._item(one.group(1), 1))
        return self.other


def _tokens(text: str) -> int:
    return max(1, (len(text) + 3) // 4) if text else 0


class OpenAIDouble:
    """The server. ``url`` is the API root (``http://127.0.0.1:<port>/v1``) to pass as ``base_url``.

    Attributes:
        requests: JSON bodies of the chat requests received, in order (also those answered with errors or hangs).
        headers: their HTTP headers (lower-case names), same order.
        other_requests: ``(method, path)`` of every other request (``GET /v1/models``, unknown paths).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0):
        logging.getLogger("werkzeug").setLevel(logging.WARNING)
        self._lock = threading.Lock()
        self._script: list[Scripted] = []
        self._then: Scripted | None = None
        self._closing = threading.Event()
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.other_requests: list[tuple[str, str]] = []
        self._server = make_server(host, port, self._app, threaded=True)
        self.host, self.port = host, self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.02},
                                        name="openai-double", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def script(self, responses: Iterable[Scripted], then: Scripted | None = None) -> OpenAIDouble:
        """Answer the next chat requests with ``responses`` in order, then ``then`` for ever (or HTTP 410)."""
        with self._lock:
            self._script = list(responses)
            self._then = then
        return self

    @property
    def pending(self) -> int:
        """Scripted responses not used yet."""
        with self._lock:
            return len(self._script)

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAIDouble:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the WSGI app ---

    @Request.application
    def _app(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        if request.method == "GET" and path == "/v1/models":
            with self._lock:
                self.other_requests.append((request.method, request.path))
            return self._json(200, {"object": "list", "data": [
                {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "openai-double"}]})
        if request.method != "POST" or path != "/v1/chat/completions":
            with self._lock:
                self.other_requests.append((request.method, request.path))
            return self._error(Status(404, f"openai_double: no route {request.method} {request.path}"))
        try:
            body = json.loads(request.get_data(as_text=True))
        except ValueError:
            return self._error(Status(400, "openai_double: the request body is not JSON"))
        with self._lock:
            self.requests.append(body)
            self.headers.append({k.lower(): v for k, v in request.headers.items()})
            number = len(self.requests)
            if self._script:
                scripted: Scripted | None = self._script.pop(0)
            else:
                scripted = self._then
        if scripted is None:
            return self._error(Status(410, f"openai_double: no scripted response left for request #{number}"))
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or "model" not in body:
            return self._error(Status(400, "openai_double: 'model' and a 'messages' list are required"))
        return self._answer(scripted, body, number)

    def _answer(self, scripted: Scripted, body: dict, number: int) -> Response:
        while callable(scripted) and not isinstance(scripted, (Reply, Status, Hang)):
            scripted = scripted(body)
        if isinstance(scripted, Hang):
            self._closing.wait(scripted.seconds)
            return self._answer(scripted.then or Reply("too late"), body, number)
        if isinstance(scripted, Status):
            return self._error(scripted)
        if isinstance(scripted, Reply):
            return self._reply(scripted, body, number)
        raise TypeError(f"openai_double: cannot answer with {scripted!r}")

    def _reply(self, r: Reply, body: dict, number: int) -> Response:
        prompt_text = " ".join(str(m.get("content", "")) for m in body["messages"] if isinstance(m, dict))
        prompt = r.prompt_tokens if r.prompt_tokens is not None else _tokens(prompt_text) + 4 * len(body["messages"])
        completion = r.completion_tokens if r.completion_tokens is not None else _tokens(r.content or "")
        answer: dict[str, Any] = {
            "id": f"chatcmpl-double-{number}",
            "object": "chat.completion",
            "created": 1700000000 + number,
            "model": r.model or str(body.get("model")),
            "system_fingerprint": "fp_double",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": r.content, "refusal": None},
                "logprobs": None,
                "finish_reason": r.finish_reason,
            }],
        }
        if r.usage:
            answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}
        return self._json(200, answer, r.headers)

    def _error(self, s: Status) -> Response:
        if s.raw is not None:
            return Response(s.raw, status=s.code, headers=s.headers, content_type="text/plain")
        err = {"message": s.message, "type": "invalid_request_error" if s.code < 500 else "server_error",
               "param": s.param, "code": s.error_code}
        return self._json(s.code, {"error": err}, s.headers)

    @staticmethod
    def _json(code: int, obj: Any, headers: dict | None = None) -> Response:
        return Response(json.dumps(obj), status=code, headers=headers or {}, content_type="application/json")


@pytest.fixture
def openai_double():
    """A fresh :class:`OpenAIDouble` on a free loopback port, closed after the test."""
    double = OpenAIDouble()
    yield double
    double.close()
