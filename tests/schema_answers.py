"""Valid answers to any JSON-schema request, for the OpenAI-compatible double (tests and ``make bench``).

A real server constrained by ``response_format: json_schema`` returns an instance of the schema; this module
builds one deterministically from the request alone (never from the order requests arrive in), so a run
against it is reproducible whatever the concurrency. Hooks replace the answer for a schema title
(``day_plan``, ``actions``, ``reaction``, ``line``, ``summary``, ``interview``, ``rating`` ...) to script a
behaviour. Use it as the double's ``then``::

    openai_double.script([], then=SchemaAnswers(hooks={"reaction": lambda body, default: {...}}))

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections.abc import Callable
from typing import Any

from tests.openai_double import Hang, Reply

Hook = Callable[[dict, dict], Any]

MARK = "[model]"  # every free text the double writes starts with it: tests can tell model text from templates


def request_schema(body: dict) -> dict | None:
    rf = body.get("response_format") or {}
    js = rf.get("json_schema") if isinstance(rf, dict) else None
    return js.get("schema") if isinstance(js, dict) else None


def prompt_text(body: dict) -> str:
    return "\n".join(str(m.get("content", "")) for m in body.get("messages", []) if isinstance(m, dict))


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def instance(schema: dict, body: dict, path: str = "") -> Any:
    """A valid instance of ``schema`` chosen from the request's content (deterministic)."""
    text = prompt_text(body)
    kind = schema.get("type")
    if "enum" in schema:
        options = schema["enum"]
        return options[_digest(text + path) % len(options)]
    if kind == "object":
        return {k: instance(v, body, f"{path}.{k}") for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = max(schema.get("minItems", 0), min(schema.get("maxItems", 3), 3))
        items = [instance(schema.get("items", {}), body, f"{path}[{i}]") for i in range(n)]
        if schema.get("items", {}).get("properties", {}).get("start", {}).get("pattern"):  # plan items: HH:MM
            m = re.search(r"from (\d\d):(\d\d)", text)
            start = int(m.group(1)) * 60 + int(m.group(2)) if m else 7 * 60
            for i, item in enumerate(items):
                t = (start + 180 * i) % (24 * 60)
                item["start"] = f"{t // 60:02d}:{t % 60:02d}"
        return items
    if kind == "integer":
        lo = schema.get("minimum", 0)
        return lo if "maximum" not in schema else min(schema["maximum"], max(lo, 30))
    if kind == "number":
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    if kind == "string":
        if schema.get("pattern"):
            return "09:00"
        words = f"{MARK} {path.strip('.').split('.')[-1].split('[')[0]} {_digest(text + path) % 1000}"
        return words[: schema.get("maxLength", 200)]
    return None


class SchemaAnswers:
    """A callable answer for :class:`tests.openai_double.OpenAIDouble`: a valid instance of the requested schema.

    Args:
        hooks: schema title -> ``fn(request_body, default_instance) -> answer`` (a dict to send as JSON, or any
            scripted response of the double: ``reply(...)``, ``status(...)``, ``hang(...)``).
        delay_s: seconds before each answer (``fn(body) -> seconds`` for a per-request delay).
    Attributes:
        titles: schema titles of the requests answered, in arrival order.
    """

    def __init__(self, hooks: dict[str, Hook] | None = None, delay_s: float | Callable[[dict], float] = 0.0):
        self.hooks = hooks or {}
        self.delay_s = delay_s
        self.titles: list[str] = []
        self._lock = threading.Lock()

    def __call__(self, body: dict):
        schema = request_schema(body) or {"type": "object", "properties": {"rating": {"type": "integer",
                                                                                      "minimum": 5}}}
        title = schema.get("title", "")
        with self._lock:
            self.titles.append(title)
        answer: Any = instance(schema, body)
        if title == "reaction":  # as a model that follows the prompt: a "go" says where in its words
            limit = schema["properties"]["activity"].get("maxLength", 200)
            answer["activity"] = f"{answer['activity']} at {answer['place']}"[:limit]
        if title in self.hooks:
            answer = self.hooks[title](body, answer)
        if isinstance(answer, (dict, list)):
            answer = Reply(json.dumps(answer))
        delay = self.delay_s(body) if callable(self.delay_s) else self.delay_s
        return Hang(delay, answer) if delay > 0 else answer


#: plans that put every resident of Tinyvale (``tests/data/tiny.yaml``) at the well from 08:00: they meet at once,
#: whatever the double's default answers make of prompts (which hold retrieved memories, so a change to retrieval
#: moved chance meetings)
TOGETHER: dict[str, Hook] = {
    "day_plan": lambda body, d: {"items": [{"start": "08:00", "activity": f"{MARK} drawing water", "place": "well"}]},
    "actions": lambda body, d: {"actions": [{"minutes": 240, "activity": f"{MARK} drawing water", "place": "well"}]},
}


def talk_to_someone_here(body: dict, default: dict) -> dict:
    """A reaction hook: talk to the first person the request offers as here, else continue."""
    props = request_schema(body)["properties"]
    people = [p for p in props["person"]["enum"] if p != "none"]
    if "talk" in props["decision"]["enum"] and people:
        return {**default, "decision": "talk", "person": people[0]}
    return {**default, "decision": "continue"}
