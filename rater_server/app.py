"""Flask app factory for the importance rater.

Endpoints (all JSON):

* ``POST /rate`` — ``{"memory": str, "agent"?: str, "context"?: str}`` ->
  ``{"rating": 1..10, "explanation": str}`` (seed 003's contract).
* ``POST /rate/batch`` — ``{"memories": [str, ...]}`` -> ``{"ratings": [{"rating", "explanation"}, ...]}``.
* ``POST /reflect`` — ``{"agent"?: str, "memories": [{"id": str, "text": str, "rating"?: 1..10}, ...] (1..500,
  ids unique), "max_insights"?: 1..10 (default 3)}`` -> ``{"insights": [{"text": str, "evidence": [id, ...]}]}``,
  the best first; ``[]`` when no memories relate (seed 003's reflection; :mod:`simulacra.rating.reflection`).
* ``GET /health`` — backend name, model, cache size and counters; a backend with a ``health()`` method adds its
  fields (the LLM backend: ``quality``, ``using``, ``limits``, see :mod:`simulacra.rating.llm`).

A backend with ``rate_with_usage`` (the LLM backend) also says what each rating request cost: both rating
answers then carry ``"usage": {"llm_calls", "llm_errors", "truncations", "fallbacks", "seconds"}``.

Every malformed request gets a 4xx JSON answer ``{"error": "...", "field": ...}``, never a 5xx: a body
that is not ``Content-Type: application/json`` (415), not UTF-8, not JSON, JSON with ``NaN`` / ``Infinity``,
numbers out of range or nesting deeper than :data:`MAX_DEPTH`, a key given twice in one object, text with
unpaired surrogates, a value that is not an object, a missing or wrong field, a memory text with no visible
character (only whitespace, control or zero-width characters) (400), or too large (413).

With ``create_app(backend, token=...)`` every request except ``GET /health`` must carry
``Authorization: Bearer <token>`` (401 otherwise, compared in constant time); ``simulacra rater`` takes the
token from the environment variable ``SIMULACRA_RATER_TOKEN``.
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import re
import threading
import unicodedata
from typing import Annotated, Any

from flask import Flask, jsonify, request
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    StringConstraints,
    ValidationError,
)
from werkzeug.exceptions import HTTPException

from simulacra.errors import DuplicatedKeys, mark_duplicate_keys
from simulacra.rating import MAX_BATCH, MAX_REFLECT

log = logging.getLogger(__name__)

#: JSON nesting deeper than this is refused (the deepest valid body, /reflect's, has depth 3)
MAX_DEPTH = 32
#: integers with more digits than this are refused (no field needs more than two)
MAX_INT_DIGITS = 100
_SURROGATE = re.compile("[\ud800-\udfff]")


def has_visible_text(text: str) -> bool:
    """Whether ``text`` holds a character that shows: one that is not whitespace (``str.isspace``, which also
    covers the control separators \\x1c-\\x1f), not a control character (Unicode category Cc, e.g. ``\\x00``) and
    not a format character (Cf: zero-width space, joiners, the byte-order mark, bidi marks, soft hyphen)."""
    return any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf") for c in text)


def _not_blank(text: str) -> str:
    """The one rule for every text the rater is sent: refused (400 naming the field) when nothing in it shows
    (:func:`has_visible_text`); else the text stripped of surrounding whitespace."""
    if not has_visible_text(text):
        raise ValueError("is blank: no visible character (only whitespace, control or zero-width characters)")
    return text.strip()


MemoryText = Annotated[StrictStr, StringConstraints(strip_whitespace=True, min_length=1, max_length=10_000),
                       AfterValidator(_not_blank)]


class RateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    memory: MemoryText
    agent: StrictStr | None = None
    context: StrictStr | None = None


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    memories: list[MemoryText] = Field(min_length=1, max_length=MAX_BATCH)
    agent: StrictStr | None = None


class ReflectMemory(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: Annotated[StrictStr, StringConstraints(min_length=1, max_length=200)]
    text: MemoryText
    rating: Annotated[StrictInt, Field(ge=1, le=10)] | None = None


class ReflectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    agent: StrictStr | None = None
    memories: list[ReflectMemory] = Field(min_length=1, max_length=MAX_REFLECT)
    max_insights: Annotated[StrictInt, Field(ge=1, le=10)] = 3


def _error(status: int, message: str, field: str | None = None):
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return jsonify(body), status


class _BadJSON(ValueError):
    """A body that is JSON text but not acceptable JSON (NaN, an infinite or huge number)."""


def _no_constant(name: str):
    raise _BadJSON(f"{name} is not a JSON number (numbers must be finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _BadJSON(f"number {text[:40]} is out of range")
    return value


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _BadJSON(f"integer of {len(text.lstrip('-'))} digits is out of range (at most {MAX_INT_DIGITS})")
    return int(text)


def _check_json(data: Any) -> tuple[str, str | None] | None:
    """``(message, field)`` when ``data`` nests deeper than :data:`MAX_DEPTH`, gives a key twice in one object
    (``{"memory": "a", "memory": "b"}``: which one is meant?) or holds a string (key or value) with an unpaired
    surrogate (``"\\ud800"``: not Unicode, and no embedder can read it); else ``None``."""
    stack: list[tuple[Any, str, int]] = [(data, "", 1)]
    while stack:
        value, path, depth = stack.pop()
        path = path if len(path) <= 200 else path[:197] + "..."  # keys are the client's: keep messages short
        if isinstance(value, str):
            if not value.isascii() and _SURROGATE.search(value):
                where = f"field '{path}'" if path else "body"
                return f"{where}: text with an unpaired surrogate (not valid Unicode)", path or None
            continue
        if not isinstance(value, (dict, list)):
            continue
        if depth > MAX_DEPTH:
            return f"malformed JSON: nested deeper than {MAX_DEPTH} levels", path or None
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, child in items:
            if isinstance(key, str) and not key.isascii() and _SURROGATE.search(key):
                where = f"field '{path}'" if path else "body"
                return f"{where}: a key with an unpaired surrogate (not valid Unicode)", path or None
            stack.append((child, f"{path}.{key}" if path else str(key), depth + 1))
        if isinstance(value, DuplicatedKeys):
            field = f"{path}.{value.key}" if path else value.key
            field = field if len(field) <= 200 else field[:197] + "..."
            return f"field '{field}' given twice in one object; send each key once", field
    return None


def _parse(model: type[BaseModel]):
    """Parse the request body as JSON into ``model``; returns (obj, None) or (None, error response)."""
    mimetype = request.mimetype
    if mimetype != "application/json" and not (mimetype.startswith("application/") and mimetype.endswith("+json")):
        got = request.content_type or "none"
        return None, _error(415, f"Content-Type must be application/json, got {got[:100]!r}", "Content-Type")
    charset = request.mimetype_params.get("charset", "utf-8").lower().replace("_", "-")
    if charset not in ("utf-8", "utf8"):
        return None, _error(415, f"JSON must be UTF-8, got charset={charset[:40]!r}", "Content-Type")
    raw = request.get_data(cache=False, as_text=False)
    if not raw:
        return None, _error(400, "empty body: expected a JSON object")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return None, _error(400, f"malformed JSON: the body is not UTF-8 (byte 0x{raw[err.start]:02x} at offset "
                                 f"{err.start})")
    try:
        data = json.loads(text.removeprefix("\ufeff"), parse_constant=_no_constant, parse_float=_finite_float,
                          parse_int=_bounded_int, object_pairs_hook=mark_duplicate_keys)
    except _BadJSON as err:
        return None, _error(400, f"malformed JSON: {err}")
    except json.JSONDecodeError as err:
        return None, _error(400, f"malformed JSON: {err}")
    except RecursionError:
        return None, _error(400, f"malformed JSON: nested deeper than {MAX_DEPTH} levels")
    except ValueError as err:  # e.g. an integer beyond Python's digit limit, before parse_int sees it
        return None, _error(400, f"malformed JSON: {str(err)[:200]}")
    if not isinstance(data, dict):
        return None, _error(400, f"expected a JSON object, got {'null' if data is None else type(data).__name__}")
    bad = _check_json(data)
    if bad is not None:
        return None, _error(400, bad[0], bad[1])
    try:
        return model.model_validate(data), None
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        msg = first["msg"].removeprefix("Value error, ")
        if first["type"] == "missing":
            msg = f"missing field '{field}'"
        elif first["type"] in ("string_too_short", "too_short"):
            msg = f"field '{field}' is empty"
        else:
            msg = f"field '{field}': {msg}"
        return None, _error(400, msg, field)


def check_token(token: str | None) -> str | None:
    """``token`` when it can be sent in an ``Authorization`` header, ``None`` for none.

    Raises:
        ValueError: the token is empty, or holds a space, a control or a non-ASCII character.
    """
    if token is None:
        return None
    if not isinstance(token, str) or not token or not token.isascii() or not token.isprintable() or " " in token:
        raise ValueError("the rater token must be non-empty printable ASCII without spaces")
    return token


def _duplicate_id(memories: list[ReflectMemory]):
    """The 400 answer naming the first memory whose id an earlier one already has, or ``None``."""
    first: dict[str, int] = {}
    for i, memory in enumerate(memories):
        if memory.id in first:
            field = f"memories.{i}.id"
            return _error(400, f"field '{field}': duplicate id {memory.id!r} (also memories.{first[memory.id]}.id)",
                          field)
        first[memory.id] = i
    return None


def _rate(backend, memories: list[str], agent: str | None, context: str | None) -> tuple[list, dict]:
    """The backend's ratings, and ``{"usage": {...}}`` when it says what they cost
    (:func:`simulacra.rating.backends.rate_with_usage`), else ``{}``."""
    from simulacra.rating.backends import rate_with_usage

    ratings, usage = rate_with_usage(backend, memories, agent=agent, context=context)
    return ratings, ({} if usage is None else {"usage": usage})


def create_app(backend=None, token: str | None = None, *, max_body_bytes: int = 1_000_000) -> Flask:
    """Build the rater app.

    Args:
        backend: a :class:`simulacra.rating.backends.RaterBackend`; default the offline k-NN rater over the
            default embedder (loaded on first request).
        token: when given, every request except ``GET /health`` must send ``Authorization: Bearer <token>``
            (401 otherwise); printable ASCII without spaces.
        max_body_bytes: larger requests get 413.

    Raises:
        ValueError: ``token`` is empty or holds characters a header cannot carry.
    """
    token = check_token(token)
    expected = token.encode("ascii") if token is not None else b""
    if backend is None:
        from simulacra.embeddings import build_embedder
        from simulacra.rating.backends import EmbeddingRater

        backend = EmbeddingRater(build_embedder())
    app = Flask("rater_server")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    app.extensions["rater_backend"] = backend
    counts = {"requests": 0, "errors": 0, "unauthorized": 0}
    lock = threading.Lock()

    def count(*names: str) -> None:
        with lock:
            for name in names:
                counts[name] += 1

    @app.before_request
    def _authorize():
        if token is None or (request.path == "/health" and request.method in ("GET", "HEAD")):
            return None
        scheme, _, given = request.headers.get("Authorization", "").strip().partition(" ")
        # WSGI headers are latin-1 text: encoding back gives the bytes sent
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode("latin-1", "replace"), expected):
            return None
        count("unauthorized", "errors")
        problem = "wrong bearer token" if scheme else "missing bearer token"
        response, status = _error(401, f"{problem}: send 'Authorization: Bearer <token>' with the rater's token "
                                       "(SIMULACRA_RATER_TOKEN)", "Authorization")
        response.headers["WWW-Authenticate"] = 'Bearer realm="simulacra-rater"'
        return response, status

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException):
        count("errors")
        response, status = _error(err.code or 500, err.description or err.name)
        allow = dict(err.get_headers()).get("Allow")
        if allow:
            response.headers["Allow"] = allow
        return response, status

    from simulacra.llm import BudgetExceeded
    from simulacra.llm.base import LLMUnreachable

    @app.errorhandler(BudgetExceeded)
    def _budget(err: BudgetExceeded):
        """The LLM budget is spent: 402, not retried by clients, so the run stops with this message."""
        count("errors")
        return _error(402, f"LLM budget exceeded: {err}")

    @app.errorhandler(LLMUnreachable)
    def _unreachable(err: LLMUnreachable):
        """The rater's language model cannot be connected to: 503, so clients retry and then stop their run."""
        count("errors")
        return _error(503, f"the rater's language model is unreachable: {err}")

    @app.errorhandler(Exception)
    def _unexpected(err: Exception):  # pragma: no cover - defensive
        log.exception("rater backend failed")
        count("errors")
        return _error(500, f"rater backend failed: {type(err).__name__}: {err}")

    @app.post("/rate")
    def rate():
        count("requests")
        body, err = _parse(RateRequest)
        if err:
            count("errors")
            return err
        ratings, usage = _rate(backend, [body.memory], body.agent, body.context)
        return jsonify({**ratings[0].to_dict(), **usage})

    @app.post("/rate/batch")
    def rate_batch():
        count("requests")
        body, err = _parse(BatchRequest)
        if err:
            count("errors")
            return err
        ratings, usage = _rate(backend, body.memories, body.agent, None)
        return jsonify({"ratings": [r.to_dict() for r in ratings], **usage})

    @app.post("/reflect")
    def reflect():
        count("requests")
        body, err = _parse(ReflectRequest)
        err = err or _duplicate_id(body.memories)
        if err:
            count("errors")
            return err
        insights = backend.reflect([m.model_dump() for m in body.memories], agent=body.agent,
                                   max_insights=body.max_insights)
        return jsonify({"insights": [i.to_dict() for i in insights]})

    @app.get("/health")
    def health():
        stats = backend.stats()
        with lock:
            mine = dict(counts)
        extra = backend.health() if callable(getattr(backend, "health", None)) else {}
        return jsonify({"status": "ok", "backend": backend.name, "model": backend.model,
                        "token_required": token is not None,
                        "cache_size": stats.get("cache_size", 0),
                        "counts": {**mine, **stats}, **extra})

    return app
