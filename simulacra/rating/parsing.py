"""Defensive parsing of LLM answers: importance ratings and reflection insights (pure functions, no I/O).

A language model asked for "a rating from 1 to 10 as JSON" answers in many shapes: the JSON asked for, the
JSON inside a ```json fence or after a sentence of prose, a bare ``7``, ``"7/10"``, ``"Rating: 7"``,
``"Seven out of ten"``, or prose with several numbers in it ("On a scale of 1 to 10, I'd say 3"). The
functions here turn such answers into values or ``None``; they never raise on any text. Callers fall back
explicitly (and log the raw answer) when they get ``None``.

Rating rules (:func:`parse_rating`), tried in this order; the first rule that matches decides, and within a
rule the earliest match in the text does:

1. ``json``: a JSON object with a rating key, found as the whole answer, inside a code fence, or embedded
   in prose (the first object, searched depth-first through nested objects and arrays). Rating keys, in
   priority order: ``rating``, ``poignancy``, ``importance``, ``score``, then any key containing one of
   those words (``importance_score``, ``"Rating (1-10)"``). The value may be a number or a string read by
   rules 2-5 (``"7"``, ``"7/10"``, ``"seven"``). The explanation comes from ``explanation``, ``reason``,
   ``reasoning``, ``rationale``, ``justification`` or ``why``. **An answer holding a JSON object with a
   rating key is judged by its JSON alone**: if no such object has a usable rating, the answer is
   unparseable (the prose around it is not mined for numbers).
2. ``number``: the whole answer is one value: ``7``, ``7.5``, ``**7**``, ``"7."``, ``seven``, ``7/10``.
3. explicit, the earliest of ``label`` (``Rating: 7``, ``my score is 8``, ``**Poignancy:** seven``,
   ``Rating (1-10): 7``), ``fraction`` (``7/10``, ``seven out of ten``, ``4/5``, ``85/100``) and ``verb``
   (``I'd rate it 8``, ``I'd say 3``, ``I would give this memory a 6``).
4. ``leading``: the answer starts with a number followed by a separator (``7 - because ...``,
   ``7: the mill``, ``7. Because``, ``7 because``), as in a numbered batch line.
5. ``lone-number``: exactly one distinct number written in digits is left in the answer.

Before rules 3-5, descriptions of the scale are blanked out: ``on a scale of 1 to 10``, ``(1-10)``,
``from one to ten``, ``between 1 and 10``, ``where 1 is mundane and 10 is extremely poignant``,
``with 10 being the most poignant``.
So "On a scale of 1 to 10, I'd say 3" is 3 (``verb``). Number words (``zero`` .. ``eleven``) count in rules
2-3 only, and only where they end a phrase (``I'd say seven.``), so "one of the saddest days" is no rating;
rule 5 counts digits only, and two different numbers there make the answer ambiguous, hence unparseable.

Values: a fraction ``x/d`` (``d`` = 5, 10 or 100) is rescaled to ``10·x/d``; a value in ``[0, 11]`` is rounded
half up (``7.5`` -> 8, ``6.49`` -> 6) and clamped to 1..10 (``0`` -> 1, ``11`` -> 10); a negative value, one
above 11 (``1000``, ``12``), ``NaN``, infinities and booleans are not ratings: the rule that found them makes
the answer unparseable rather than handing over to a weaker rule. Percentages (``70%``), times (``7:30``),
ordinals (``7th``) and numbers glued to words (``10am``) are not numbers here.

Only the first :data:`MAX_CHARS` characters of an answer are read.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

__all__ = ["MAX_CHARS", "ParsedRating", "parse_insights", "parse_rating", "parse_ratings"]

#: characters of an answer that are read; the rest is ignored (LLM answers are far shorter)
MAX_CHARS = 50_000
#: explanations are cut to this many characters
MAX_EXPLANATION = 500
#: JSON values tried per answer (whole answer, fences, then embedded ``{``/``[`` positions)
_MAX_JSON_STARTS = 200
_MAX_LINE = 2_000  # longer lines are not read as the paper's "1. insight (because of ...)" lines
_MAX_DEPTH = 8  # how deep the search for a rating / insight list goes into a JSON value


@dataclass(frozen=True)
class ParsedRating:
    """A rating read from an answer.

    Attributes:
        rating: 1..10.
        explanation: the model's reason, possibly ``""``; at most :data:`MAX_EXPLANATION` characters.
        how: the rule that matched: ``json``, ``number``, ``label``, ``fraction``, ``verb``, ``leading`` or
            ``lone-number``; for batch items prefixed by the batch rule (``json-array/number``,
            ``numbered/leading``; see :func:`parse_ratings`).
    """

    rating: int
    explanation: str
    how: str


# --------------------------------------------------------------------------------------------- values

_WORDS = {"zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
          "nine": 9, "ten": 10, "eleven": 11}
_DENOMINATORS = {"10": 10, "ten": 10, "5": 5, "five": 5, "100": 100, "hundred": 100, "a hundred": 100,
                 "one hundred": 100}
# digits: not glued to a word or another number, not a percentage, a time or an ordinal
_DIGITS = r"(?<![\w.])-?\d{1,30}(?:\.\d{1,30})?(?![\w%]|\.\d|\s*%|:\d)"
_WORD = r"\b(?:" + "|".join(_WORDS) + r")\b"
_DEN = r"(?:10|100|5|ten|five|a\s+hundred|one\s+hundred|hundred)\b"
# a value: a number, optionally "out of" a denominator
_VALUE = rf"(?P<num>{_DIGITS}|{_WORD})(?:\s*(?:/|out\s+of)\s*(?P<den>{_DEN}))?"
# where a value written as a word (or, after a verb, any value) must end: end, punctuation, or a few words
_END = r"(?=\s*(?:$|[^\w\s]|\b(?:out\s+of|because|since|as|given|for|due|overall|points?|here|in|on)\b))"

_NUMBER_ONLY = re.compile(rf"^[\s*_`'\"(\[]*{_VALUE}[\s*_`'\")\].!]*$", re.I)
_LABEL = re.compile(
    r"\b(?:rating|score|poignancy|importance)\b"
    r"(?:\s*(?:[:=()*_#'\"\u2063]|[-–—](?=\s)|\bis\b|\bof\b|\bwould\b|\bbe\b|\bat\b|\bas\b"
    r"|\baround\b|\babout\b|\bapproximately\b|\broughly\b|\bfinal\b|\bhere\b))*\s*"
    rf"(?P<num>{_DIGITS}|{_WORD}{_END})(?:\s*(?:/|out\s+of)\s*(?P<den>{_DEN}))?",
    re.I,
)
_FRACTION = re.compile(rf"(?P<num>{_DIGITS}|{_WORD})\s*(?:/|out\s+of)\s*(?P<den>{_DEN})", re.I)
_VERB = re.compile(
    r"\b(?:rate|rated|give|gave|giving|assign|assigned|scored?|say|put|choose|pick|go\s+with|settle\s+on)\b"
    r"(?:\s+(?:it|it's|it\s+is|this|that|this\s+memory|the\s+memory|this\s+one|a|an|at|as|of|around|about|roughly"
    r"|approximately|maybe|probably|perhaps|solid|strong|low|high|moderate|rating|score|poignancy|importance"
    r"|me|to|be)\b)*(?:\s*[:=])?\s*"
    rf"{_VALUE}{_END}",
    re.I,
)
_LEADING = re.compile(rf"^[\s*_`'\"(\[]*(?P<num>{_DIGITS})(?:\s*(?:/|out\s+of)\s*(?P<den>{_DEN}))?"
                      r"(?=\s*(?:$|\n|[-–—:;,)\]*]|\.(?:\s|$)|because\b))", re.I)
_ALL_DIGITS = re.compile(_DIGITS)
_SCALE = re.compile(
    r"\b(?:on\s+)?(?:a\s+)?scale\s+(?:of\s+|from\s+)?(?:1|one)\s*(?:-|–|—|to)\s*(?:10|ten)\b"
    r"|\b(?:from\s+)?(?:1|one)\s*(?:-|–|—|to)\s*(?:10|ten)\b|\bbetween\s+(?:1|one)\s+and\s+(?:10|ten)\b"
    # "where 1 is mundane and 10 is extremely poignant", "(1 = mundane, 10 = poignant)", "with 10 being the most"
    r"|(?:(?<=\bwhere\s)|(?<=\bwith\s)|(?<=\band\s)|(?<=\()|(?<=,\s)|(?<=;\s))"
    r"(?:1|one|10|ten)\s*(?:=|is|being|means|for)\s+(?:[\w'-]+\s+){0,4}?"
    r"(?:mundane|poignant|important|significant|trivial|ordinary|boring|momentous|memorable|life|least|most"
    r"|highest|lowest|extremely|very|not|nothing|brushing|breakup|break-up|college|death)[\w-]*",
    re.I,
)
_EXPLANATION_LABEL = re.compile(r"\b(?:explanation|reason(?:ing)?|rationale|justification|why)\b\s*[:\-–—]\s*"
                                r"(?P<text>\S.*)", re.I | re.S)
_RATING_KEYS = ("rating", "poignancy", "importance", "score")
_EXPLANATION_KEYS = ("explanation", "reason", "reasoning", "rationale", "justification", "why", "because",
                     "comment")


def _number(token: str) -> Decimal | None:
    token = token.strip().lower()
    if token in _WORDS:
        return Decimal(_WORDS[token])
    try:
        value = Decimal(token)
    except (InvalidOperation, ValueError):
        return None
    return value if value.is_finite() else None


def _to_rating(value: Decimal | None, den: str | None = None) -> int | None:
    """Rescale ``x/den`` to /10, accept 0..11, round half up, clamp to 1..10; ``None`` otherwise."""
    if value is None:
        return None
    if den:
        value = value * 10 / _DENOMINATORS[re.sub(r"\s+", " ", den.strip().lower())]
    if value < 0 or value > 11:
        return None
    return min(10, max(1, int(value.quantize(Decimal(1), rounding=ROUND_HALF_UP))))


def _from_match(m: re.Match) -> int | None:
    return _to_rating(_number(m.group("num")), m.group("den"))


def _clean(text: str, limit: int = MAX_EXPLANATION) -> str:
    text = re.sub(r"\s+", " ", text).strip(" \t\n-–—:;,.*_`'\"()[]")
    return text[:limit].rstrip()


def _explanation(text: str, span: tuple[int, int], how: str) -> str:
    """The labelled explanation in ``text`` (``Explanation: ...``); else ``text`` without the rating's ``span``
    when that opens or closes the answer (``7 - because ...``, ``... Rating: 6``), or the whole answer."""
    m = _EXPLANATION_LABEL.search(text)
    if m:
        return _clean(m.group("text"))
    if how != "verb":
        before, after = _clean(text[: span[0]]), _clean(text[span[1]:])
        if not before or not after:
            return before or after
    return _clean(text)


_BLANK = "\u2063"  # what a masked scale phrase becomes: no word, no space, so it ends a phrase as punctuation does


def _mask(text: str, pattern: re.Pattern) -> str:
    """``text`` with ``pattern``'s matches blanked (same length, so positions still line up)."""
    return pattern.sub(lambda m: _BLANK * len(m.group(0)), text)


def _prose(text: str) -> tuple[int | None, str, tuple[int, int] | None] | None:
    """Rules 2-5 on ``text``: ``(rating or None if out of range, how, span)``, or ``None`` when none matches."""
    m = _NUMBER_ONLY.match(text)
    if m:
        return _from_match(m), "number", None
    masked = _mask(text, _SCALE)
    found = []
    for how, pattern in (("label", _LABEL), ("fraction", _FRACTION), ("verb", _VERB)):
        m = pattern.search(masked)
        if m:
            found.append((m.start(), how, m))
    if found:
        _, how, m = min(found, key=lambda f: f[0])
        return _from_match(m), how, m.span()
    m = _LEADING.match(masked)
    if m:
        return _from_match(m), "leading", m.span()
    numbers = list(_ALL_DIGITS.finditer(masked))
    if numbers and len({_number(n.group(0)) for n in numbers}) == 1:
        return _to_rating(_number(numbers[0].group(0))), "lone-number", numbers[0].span()
    return None


# ----------------------------------------------------------------------------------------------- JSON

_FENCE_TAG = re.compile(r"[ \t]*(?:(?:json5?|javascript|js)\b)?", re.I)
_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_DECODER = json.JSONDecoder()
_OPENER = re.compile(r"[{\[]")


def _loads_lenient(text: str):
    """``text`` as JSON, also with curly quotes straightened and trailing commas removed; raises ValueError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("too deep") from None
    except ValueError:
        fixed = _TRAILING_COMMA.sub(r"\1", text.replace("“", '"').replace("”", '"'))
        if fixed == text:
            raise
        try:
            return json.loads(fixed)
        except RecursionError:
            raise ValueError("too deep") from None


def _fences(text: str) -> Iterator[str]:
    """The insides of ```-fenced blocks (language tag dropped), stripped; found without a regex, which
    backtracked quadratically over an unclosed fence followed by blanks."""
    start = text.find("```")
    while start >= 0:
        end = text.find("```", start + 3)
        if end < 0:
            return
        body = text[start + 3: end]
        yield body[_FENCE_TAG.match(body).end():].strip()
        start = text.find("```", end + 3)


def _json_values(text: str) -> Iterator[object]:
    """JSON values in ``text``: the whole of it, each code fence, then each embedded object or array."""
    stripped = text.strip()
    if stripped[:1] in ("{", "["):
        try:
            yield _loads_lenient(stripped)
        except ValueError:
            pass
    for body in _fences(text):
        try:
            yield _loads_lenient(body)
        except ValueError:
            pass
    pos, tries = 0, 0
    while tries < _MAX_JSON_STARTS:
        m = _OPENER.search(text, pos)
        if m is None:
            return
        tries += 1
        try:
            value, end = _DECODER.raw_decode(text, m.start())
        except (ValueError, RecursionError):
            pos = m.start() + 1
            continue
        yield value
        pos = max(end, m.start() + 1)


def _key(name: object) -> str:
    return re.sub(r"[\s\-]+", "_", str(name).strip().lower())


def _rating_key(obj: dict) -> object | None:
    """The key of ``obj`` holding its rating, by :data:`_RATING_KEYS` priority, or ``None``."""
    keys = {_key(k): k for k in obj}
    for want in _RATING_KEYS:
        if want in keys:
            return keys[want]
    for want in _RATING_KEYS:
        for norm, k in keys.items():
            if want in norm:
                return k
    return None


def _explanation_of(obj: dict) -> str:
    keys = {_key(k): k for k in obj}
    for want in _EXPLANATION_KEYS:
        if want in keys and isinstance(obj[keys[want]], str):
            return _clean(obj[keys[want]])
    return ""


def _value_rating(value: object) -> tuple[int | None, str]:
    """A JSON rating value as 1..10 (``None`` if unusable) and the rule that read it."""
    if isinstance(value, bool) or value is None:
        return None, "json"
    if isinstance(value, int):
        return (_to_rating(Decimal(value)) if abs(value) <= 1000 else None), "json"
    if isinstance(value, float):
        return (_to_rating(Decimal(repr(value))) if math.isfinite(value) else None), "json"
    if isinstance(value, str):
        found = _prose(value[:1000])
        return (found[0], "json") if found else (None, "json")
    return None, "json"


def _find_rated(value: object, depth: int = 0) -> dict | None:
    """The first object (depth-first, in document order) in ``value`` that has a rating key."""
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, dict):
        if _rating_key(value) is not None:
            return value
        children = value.values()
    elif isinstance(value, list):
        children = value
    else:
        return None
    for child in children:
        found = _find_rated(child, depth + 1)
        if found is not None:
            return found
    return None


def _rated_object(obj: dict) -> ParsedRating | None:
    rating, how = _value_rating(obj[_rating_key(obj)])
    return None if rating is None else ParsedRating(rating, _explanation_of(obj), how)


# ------------------------------------------------------------------------------------------------ API


def parse_rating(text: str) -> ParsedRating | None:
    """Read one importance rating from an LLM answer (rules in the module docstring).

    Args:
        text: the model's answer, any text (non-strings give ``None``).

    Returns:
        The rating 1..10 with the explanation and the rule that matched, or ``None`` when no rule gives a
        usable rating (empty text, prose without a rating, an out-of-range or ambiguous number). Never raises.
    """
    if not isinstance(text, str):
        return None
    text = text[:MAX_CHARS]
    if not text.strip():
        return None
    json_seen = False
    for value in _json_values(text):
        obj = _find_rated(value)
        if obj is None:
            continue
        json_seen = True
        parsed = _rated_object(obj)
        if parsed is not None:
            return parsed
    if json_seen:
        return None
    found = _prose(text)
    if found is None or found[0] is None:
        return None
    rating, how, span = found
    return ParsedRating(rating, "" if how == "number" else _explanation(text, span, how), how)


_INDEX_KEYS = ("index", "id", "n", "number", "i", "memory_index", "memory_id", "memory", "item")
_LIST_KEYS = ("ratings", "scores", "results", "answers", "items", "memories", "ratings_list")
# (no two whitespace runs without something between them: that would backtrack quadratically on long blanks)
_NUMBERED = re.compile(r"^[ \t]*(?:[-*•][ \t]*)?(?:\*\*)?(?:(?:memory|item|statement)[ \t]*)?(?:[#\[][ \t]*)?"
                       r"(?P<index>\d{1,4})[ \t]*(?:\*\*[ \t]*)?[.):\]\-–—][ \t]*(?:\*\*)?(?P<rest>.*)$",
                       re.I | re.M)


def _int_index(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and re.fullmatch(r"\s*#?\d{1,6}\s*", value):
        return int(value.strip().lstrip("#"))
    return None


def _item_rating(item: object, prefix: str) -> ParsedRating | None:
    """One batch item (number, string or object) as a rating."""
    if isinstance(item, dict):
        key = _rating_key(item)
        if key is None:
            return None
        parsed = _rated_object(item)
        return None if parsed is None else ParsedRating(parsed.rating, parsed.explanation, f"{prefix}/json")
    if isinstance(item, str):
        parsed = parse_rating(item)
        return None if parsed is None else ParsedRating(parsed.rating, parsed.explanation, f"{prefix}/{parsed.how}")
    if isinstance(item, (int, float)) and not isinstance(item, bool):
        rating, _ = _value_rating(item)
        return None if rating is None else ParsedRating(rating, "", f"{prefix}/number")
    return None


def _batch_items(value: object, n: int) -> tuple[str, list[tuple[int, object]]] | None:
    """``(how, [(0-based index, item), ...])`` of a JSON batch answer, or ``None`` if it is not one."""
    if isinstance(value, dict):
        keys = {_key(k): k for k in value}
        for want in _LIST_KEYS:
            if want in keys and isinstance(value[keys[want]], list):
                found = _batch_items(value[keys[want]], n)
                return None if found is None else ("json-object", found[1])
        indexed = [(_int_index(k), v) for k, v in value.items()]
        if indexed and all(i is not None for i, _ in indexed):
            base = 0 if min(i for i, _ in indexed) == 0 else 1
            return "json-index", [(i - base, v) for i, v in indexed]
        if n == 1 and _rating_key(value) is not None:
            return "json-object", [(0, value)]
        return None
    if not isinstance(value, list):
        return None
    indexes = []
    for item in value:
        key = next((k for k in item if _key(k) in _INDEX_KEYS and _int_index(item[k]) is not None), None) \
            if isinstance(item, dict) else None
        indexes.append(None if key is None else _int_index(item[key]))
    if value and all(i is not None for i in indexes):
        base = 0 if min(indexes) == 0 else 1
        return "json-array", [(i - base, item) for i, item in zip(indexes, value)]
    return "json-array", list(enumerate(value))


def parse_ratings(text: str, n: int) -> list[ParsedRating | None]:
    """Read the ratings of ``n`` memories from one LLM answer, item ``i`` for memory ``i``.

    Accepted shapes:

    1. JSON (whole answer, fenced or embedded): an array of numbers, strings or objects (``[7, "3/10",
       {"rating": 5, "explanation": ...}]``); an object holding such an array under ``ratings`` / ``scores`` /
       ``results`` / ``answers`` / ``items``; an object keyed by memory number (``{"1": 7, "2": 3}``). When
       every object of an array carries an ``index`` / ``id`` / ``n`` / ``number`` (an integer), items go
       where their numbers say; otherwise by position.
    1b. The complete leading items of an array cut off before its end (an answer that ran out of tokens:
       ``{"ratings": [{"rating": 3}, {"rating": 7}, {"rat``), read as in 1 (``how`` = ``json-cut/...``).
    2. Numbered blocks: lines starting ``1.``, ``1)``, ``1:``, ``#1 -``, ``Memory 1:``, each block (up to the
       next numbered line) read by :func:`parse_rating` (``1. 7 - because ...``, or ``1. The mill\n
       Rating: 7``).
    3. Exactly ``n`` lines that :func:`parse_rating` can read, in order.

    Each JSON value of a batch shape, then the numbered blocks, then the lines are candidate readings: the
    first that rates all ``n`` memories wins, else the one that rates most (the earliest on a tie), so a
    stray ``[1]`` in the prose does not outvote a numbered list.

    Memory numbers count from 1 (from 0 when some item says 0). Nothing shifts: a missing or unreadable item
    is ``None`` in its place, items beyond ``n`` or numbered outside the range are ignored, and the first of
    two items for the same memory wins. A positional array that skips a memory cannot be told apart from one
    that does not; only numbered answers can be checked.

    Args:
        text: the model's answer.
        n: memories asked about (>= 0).

    Returns:
        ``n`` entries, each a :class:`ParsedRating` (``how`` = ``json-array/...``, ``json-object/...``,
        ``json-index/...``, ``numbered/...`` or ``lines/...``) or ``None``. Never raises on any text.

    Raises:
        ValueError: ``n`` is negative.
    """
    if n < 0:
        raise ValueError(f"n must be >= 0, got {n}")
    out: list[ParsedRating | None] = [None] * n
    if not isinstance(text, str) or n == 0:
        return out
    text = text[:MAX_CHARS]
    best_count = 0
    for filled in _batch_readings(text, n):
        count = sum(r is not None for r in filled)
        if count > best_count:
            out, best_count = filled, count
        if count == n:
            break
    return out


#: array openers tried by :func:`_cut_arrays` (a cut answer's array opens near its start)
_MAX_CUT_STARTS = 5
_BLANKS = re.compile(r"\s*")


def _cut_arrays(text: str) -> Iterator[list]:
    """The complete leading items of each JSON array in ``text`` that is cut off before its ``]``.

    An answer that ran out of tokens (``finish_reason: length``) ends inside its array:
    ``{"ratings": [{"rating": 3, ...}, {"rating": 7, ...}, {"expla``. Items are read one by one from the
    ``[`` and kept while each is followed by ``,`` or ``]``: a value at the very end may itself be cut
    (``1`` of ``10``) and is left out. Arrays that end with their ``]`` are not yielded (:func:`_json_values`
    reads them). Only the first :data:`_MAX_CUT_STARTS` ``[`` are tried.
    """
    pos = 0
    for _ in range(_MAX_CUT_STARTS):
        start = text.find("[", pos)
        if start < 0:
            return
        pos = start + 1
        items, at, whole = [], _BLANKS.match(text, start + 1).end(), False
        while at < len(text):
            try:
                value, end = _DECODER.raw_decode(text, at)
            except (ValueError, RecursionError):
                break
            end = _BLANKS.match(text, end).end()
            if end >= len(text) or text[end] not in ",]":
                break
            items.append(value)
            if text[end] == "]":
                whole = True
                break
            at = _BLANKS.match(text, end + 1).end()
        if items and not whole:
            yield items


def _batch_readings(text: str, n: int) -> Iterator[list[ParsedRating | None]]:
    """Each way of reading ``text`` as ``n`` ratings, in :func:`parse_ratings`' order of preference."""
    whole = ((None, value) for value in _json_values(text))
    cut = (("json-cut", items) for items in _cut_arrays(text))
    for label, value in itertools.chain(whole, cut):
        found = _batch_items(value, n)
        if found is None:
            continue
        how, items = label or found[0], found[1]
        filled: list[ParsedRating | None] = [None] * n
        for index, item in items:
            if 0 <= index < n and filled[index] is None:
                filled[index] = _item_rating(item, how)
        yield filled
    blocks = list(_NUMBERED.finditer(text))
    filled = [None] * n
    for b, nxt in zip(blocks, blocks[1:] + [None]):
        index = int(b.group("index")) - 1
        if not 0 <= index < n or filled[index] is not None:
            continue
        parsed = parse_rating(text[b.start("rest"): nxt.start() if nxt is not None else len(text)])
        if parsed is not None:
            filled[index] = ParsedRating(parsed.rating, parsed.explanation, f"numbered/{parsed.how}")
    yield filled
    lines = [p for p in (parse_rating(line) for line in text.splitlines() if line.strip()) if p is not None]
    if len(lines) == n:
        yield [ParsedRating(p.rating, p.explanation, f"lines/{p.how}") for p in lines]


_INSIGHT_LIST_KEYS = ("insights", "reflections", "results", "items", "statements")
_TEXT_KEYS = ("text", "insight", "statement", "reflection", "summary", "content")
_EVIDENCE_KEYS = ("evidence", "evidence_ids", "evidence_id", "ids", "because_of", "sources", "citations",
                  "memory_ids", "memories")
_PAPER_LINE = re.compile(r"^[ \t]*(?:[-*•][ \t]*)?\d{1,3}[.)][ \t]*(?P<text>.+?)[ \t]*"
                         r"\((?:because\s+of|evidence|based\s+on|from|citing|ids?|sources?)[ \t]*:?[ \t]*"
                         r"(?P<evidence>[^()]*)\)[ \t]*\.?[ \t]*$", re.I)


def _insight_items(value: object, depth: int = 0) -> list | None:
    if depth > 2:
        return None
    if isinstance(value, list):
        return value
    if isinstance(value, dict):
        keys = {_key(k): k for k in value}
        for want in _INSIGHT_LIST_KEYS:
            if want in keys:
                inner = _insight_items(value[keys[want]], depth + 1)
                if inner is not None:
                    return inner
        if any(k in keys for k in _TEXT_KEYS) and any(k in keys for k in _EVIDENCE_KEYS):
            return [value]
    return None


def _evidence_tokens(value: object) -> list[str]:
    if isinstance(value, str):
        return [t for t in re.split(r"[,;\s]+|\band\b", value) if t]
    if isinstance(value, bool):
        return []
    if isinstance(value, (int, str)):
        return [str(value)]
    if isinstance(value, list):
        out = []
        for v in value[:1000]:
            if isinstance(v, str):
                out.append(v.strip())
            elif isinstance(v, int) and not isinstance(v, bool) and abs(v) < 10**30:
                out.append(str(v))
        return out
    return []


def _insight(text: object, evidence: object, ids: set[str]) -> dict | None:
    if not isinstance(text, str) or not text.strip():
        return None
    kept = [e for e in dict.fromkeys(_evidence_tokens(evidence)) if e in ids]
    if not kept:
        return None
    return {"text": re.sub(r"\s+", " ", text).strip(), "evidence": kept}


def parse_insights(text: str, ids: set[str]) -> list[dict]:
    """Read reflection insights, each citing the memories it rests on, from an LLM answer.

    Accepted shapes: JSON (whole answer, fenced or embedded; the first value of an insight shape wins): an
    array of insight objects, an object holding one under ``insights`` / ``reflections`` / ``results`` /
    ``items`` / ``statements``, or a single insight object. An insight object has its text under ``text`` (or
    ``insight``, ``statement``, ``reflection``, ``summary``, ``content``) and its evidence under ``evidence``
    (or ``evidence_ids``, ``ids``, ``because_of``, ``sources``, ``citations``, ``memory_ids``): a list of ids
    (strings, or integers compared as their decimal text) or one string of ids separated by commas or spaces.
    Without JSON, the Generative Agents paper's numbered lines are read: ``1. Bram cares for the mill
    (because of mill-1, mill-3)``.

    Args:
        text: the model's answer.
        ids: the ids of the memories the model was shown; every other cited id is dropped.

    Returns:
        ``[{"text": str (whitespace collapsed), "evidence": [id, ...] (in ids, de-duplicated, in the order
        cited)}, ...]`` in the answer's order; insights with no text or left without evidence are dropped.
        ``[]`` when nothing parses. Never raises on any text.
    """
    if not isinstance(text, str):
        return []
    text = text[:MAX_CHARS]
    ids = {i for i in ids if isinstance(i, str)}
    for value in _json_values(text):
        items = _insight_items(value)
        if items is None or not any(isinstance(i, dict) for i in items):
            continue
        out = []
        for item in items:
            if not isinstance(item, dict):
                continue
            keys = {_key(k): k for k in item}
            body = next((item[keys[k]] for k in _TEXT_KEYS if k in keys), None)
            evidence = next((item[keys[k]] for k in _EVIDENCE_KEYS if k in keys), None)
            insight = _insight(body, evidence, ids)
            if insight is not None:
                out.append(insight)
        return out
    out = []
    for line in text.splitlines():
        m = _PAPER_LINE.match(line) if len(line) <= _MAX_LINE else None
        insight = _insight(m.group("text"), m.group("evidence"), ids) if m else None
        if insight is not None:
            out.append(insight)
    return out
