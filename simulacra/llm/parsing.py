"""Reading JSON out of a model's answer without trusting it to be JSON."""

from __future__ import annotations

import json
import re
from typing import Any


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.DOTALL)


def extract_json(text: str | None) -> Any | None:
    """The JSON value in a model's answer, or ``None`` when there is none.

    Tries, in order: the whole answer (``{"rating": 7}``, ``7``, ``"seven"``); the inside of a fenced code
    block (```` ```json ... ``` ````); the first ``{...}`` or ``[...]`` that parses, inside prose
    (``Sure! {"rating": 7} Hope this helps``). ``NaN`` and ``Infinity`` are not JSON. Never raises.

    Args:
        text: the answer's text; ``None`` and ``""`` give ``None``.

    Returns:
        the decoded value (dict, list, number, string, bool), or ``None`` if nothing parses. A JSON ``null``
        also gives ``None``.
    """
    if not isinstance(text, str) or not text.strip():
        return None
    candidates = [text.strip()] + [m.group(1).strip() for m in _FENCE.finditer(text)]
    for candidate in candidates:
        try:
            return json.loads(candidate, parse_constant=_no_constants)
        except ValueError:
            pass
    decoder = json.JSONDecoder(parse_constant=_no_constants)
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                value, _ = decoder.raw_decode(text, i)
            except ValueError:
                continue
            return value
    return None
