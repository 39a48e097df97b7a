"""Flask app factory for the importance rater.

Endpoints (all JSON):

* ``POST /rate`` — ``{"memory": str, "agent"?: str, "context"?: str}`` ->
  ``{"rating": 1..10, "explanation": str}`` (seed 003's contract).
* ``POST /rate/batch`` — ``{"memories": [str, ...]}`` -> ``{"ratings": [{"rating", "explanation"}, ...]}``.
* ``POST /reflect`` — ``{"agent"?: str, "memories": [{"id": str, "text": str, "rating"?: 1..10}, ...] (1..500,
  ids unique), "max_insights"?: 1..10 (default 3)}`` -> ``{"insights": [{"text": str, "evidence": [id, ...]}]}``,
  the best first; ``[]`` when no memories relate (seed 003's reflection; :mod:`rater_server.reflection`).
* ``GET /health`` — backend name, model, cache size and counters.

Every malformed request gets a 4xx JSON answer ``{"error": "...", "field": ...}``, never a 5xx.
"""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from flask import Flask, jsonify, request
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, StringConstraints, ValidationError
from werkzeug.exceptions import HTTPException

log = logging.getLogger(__name__)

MemoryText = Annotated[StrictStr, StringConstraints(strip_whitespace=True, min_length=1, max_length=10_000)]


class RateRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    memory: MemoryText
    agent: StrictStr | None = None
    context: StrictStr | None = None


class BatchRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    memories: list[MemoryText] = Field(min_length=1, max_length=1024)
    agent: StrictStr | None = None


class ReflectMemory(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: Annotated[StrictStr, StringConstraints(min_length=1, max_length=200)]
    text: MemoryText
    rating: Annotated[StrictInt, Field(ge=1, le=10)] | None = None


class ReflectRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    agent: StrictStr | None = None
    memories: list[ReflectMemory] = Field(min_length=1, max_length=500)
    max_insights: Annotated[StrictInt, Field(ge=1, le=10)] = 3


def _error(status: int, message: str, field: str | None = None):
    body: dict[str, Any] = {"error": message}
    if field is not None:
        body["field"] = field
    return jsonify(body), status


def _parse(model: type[BaseModel]):
    """Parse the request body as JSON into ``model``; returns (obj, None) or (None, error response)."""
    raw = request.get_data(cache=False, as_text=False)
    if not raw:
        return None, _error(400, "empty body: expected a JSON object")
    try:
        data = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        return None, _error(400, f"malformed JSON: {err}")
    if not isinstance(data, dict):
        return None, _error(400, f"expected a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data), None
    except ValidationError as err:
        first = err.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or None
        msg = first["msg"]
        if first["type"] == "missing":
            msg = f"missing field '{field}'"
        elif first["type"] in ("string_too_short", "too_short"):
            msg = f"field '{field}' is empty"
        else:
            msg = f"field '{field}': {msg}"
        return None, _error(400, msg, field)


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


def create_app(backend=None, *, max_body_bytes: int = 1_000_000) -> Flask:
    """Build the rater app.

    Args:
        backend: a :class:`rater_server.backends.RaterBackend`; default the offline k-NN rater over the
            default embedder (loaded on first request).
        max_body_bytes: larger requests get 413.
    """
    if backend is None:
        from rater_server.backends import EmbeddingRater
        from simulacra.embeddings import SentenceTransformerEmbedder

        backend = EmbeddingRater(SentenceTransformerEmbedder())
    app = Flask("rater_server")
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes
    app.extensions["rater_backend"] = backend
    counts = {"requests": 0, "errors": 0}

    @app.errorhandler(HTTPException)
    def _http_error(err: HTTPException):
        counts["errors"] += 1
        return _error(err.code or 500, err.description or err.name)

    @app.errorhandler(Exception)
    def _unexpected(err: Exception):  # pragma: no cover - defensive
        log.exception("rater backend failed")
        counts["errors"] += 1
        return _error(500, f"rater backend failed: {type(err).__name__}: {err}")

    @app.post("/rate")
    def rate():
        counts["requests"] += 1
        body, err = _parse(RateRequest)
        if err:
            counts["errors"] += 1
            return err
        return jsonify(backend.rate([body.memory])[0].to_dict())

    @app.post("/rate/batch")
    def rate_batch():
        counts["requests"] += 1
        body, err = _parse(BatchRequest)
        if err:
            counts["errors"] += 1
            return err
        return jsonify({"ratings": [r.to_dict() for r in backend.rate(body.memories)]})

    @app.post("/reflect")
    def reflect():
        counts["requests"] += 1
        body, err = _parse(ReflectRequest)
        err = err or _duplicate_id(body.memories)
        if err:
            counts["errors"] += 1
            return err
        insights = backend.reflect([m.model_dump() for m in body.memories], agent=body.agent,
                                   max_insights=body.max_insights)
        return jsonify({"insights": [i.to_dict() for i in insights]})

    @app.get("/health")
    def health():
        stats = backend.stats()
        return jsonify({"status": "ok", "backend": backend.name, "model": backend.model,
                        "cache_size": stats.get("cache_size", 0), "counts": {**counts, **stats}})

    return app
