"""Rater backend over a language model (any :class:`simulacra.llm.LanguageModel`).

Importance is asked in the spirit of seed 003's prompt (1 = an ordinary moment of routine, 10 = a turning
point of a life; an explanation and a rating as JSON), in this project's own words. Answers are parsed
defensively (:mod:`rater_server.parsing`: JSON, JSON inside prose, a bare number, a number word) and clamped
to 1..10. A memory whose answer does not parse, or whose call fails after the model's retries, gets the
offline backend's rating instead: the raw answer is logged and the fallback counted (``GET /health``),
never silent. A spent budget (:class:`simulacra.llm.BudgetExceeded`) is not papered over: it propagates so
that the run stops with its message. Identical memories are answered from a cache; a batch request is rated
``batch_size`` memories per call, and only the items of a batch answer that did not parse are asked again
one by one.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

from rater_server.backends import Rating, RatingCache
from rater_server.parsing import parse_insights, parse_rating, parse_ratings
from rater_server.reflection import Insight
from simulacra.llm import BudgetExceeded, LLMError

log = logging.getLogger(__name__)

SYSTEM = (
    "You judge how much a memory would matter to the person who holds it, on a scale from 1 to 10. "
    "1 is an ordinary moment of routine, such as brushing teeth or making the bed; 10 is a turning point of a "
    "life, such as a break-up, being accepted to college, or a death in the family. Answer with JSON only."
)
RATING_SCHEMA = {
    "type": "object",
    "properties": {"explanation": {"type": "string"}, "rating": {"type": "integer", "minimum": 1, "maximum": 10}},
    "required": ["explanation", "rating"],
}
BATCH_SCHEMA = {
    "type": "object",
    "properties": {"ratings": {"type": "array", "items": RATING_SCHEMA}},
    "required": ["ratings"],
}
INSIGHT_SCHEMA = {
    "type": "object",
    "properties": {"insights": {"type": "array", "items": {
        "type": "object",
        "properties": {"text": {"type": "string"}, "evidence": {"type": "array", "items": {"type": "string"}}},
        "required": ["text", "evidence"],
    }}},
    "required": ["insights"],
}
REFLECT_SYSTEM = (
    "You help a person make sense of what they have lived through lately. From their memories you draw a few "
    "high-level insights: patterns, concerns, relationships, what they are likely to care about next. Every "
    "insight must rest on some of the memories, cited by id. Answer with JSON only."
)


def rating_messages(memory: str, agent: str | None = None, context: str | None = None) -> list[dict]:
    """Chat messages asking for one memory's importance."""
    who = f" of {agent}" if agent else ""
    extra = f"Context: {context}\n" if context else ""
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"A memory{who}: \"{memory}\"\n{extra}"
                                        'Reply with one JSON object: {"explanation": "<one short sentence>", '
                                        '"rating": <integer from 1 to 10>}'}]


def batch_messages(memories: Sequence[str], agent: str | None = None) -> list[dict]:
    """Chat messages asking for the importance of several memories in one answer, in order."""
    who = f" of {agent}" if agent else ""
    listed = "\n".join(f"{i}. {m}" for i, m in enumerate(memories, start=1))
    return [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": f"Rate each of these {len(memories)} memories{who}:\n{listed}\n"
                                        'Reply with one JSON object: {"ratings": [{"explanation": "<one short '
                                        'sentence>", "rating": <integer from 1 to 10>}, ...]} with exactly '
                                        f"{len(memories)} entries, in the same order."}]


def reflect_messages(memories: Sequence[dict], agent: str | None, max_insights: int) -> list[dict]:
    """Chat messages asking for at most ``max_insights`` insights citing memory ids."""
    who = agent or "this person"
    listed = "\n".join(
        f"[{m['id']}] {m['text']}" + (f" (importance {m['rating']}/10)" if m.get("rating") else "") for m in memories
    )
    return [{"role": "system", "content": REFLECT_SYSTEM},
            {"role": "user", "content": f"Memories of {who}, each with its id:\n{listed}\n"
                                        f"Draw at most {max_insights} insights about {who}. Reply with one JSON "
                                        'object: {"insights": [{"text": "<one sentence>", "evidence": '
                                        '["<id>", ...]}]}'}]


class LLMRater:
    """Rates and reflects with a language model; the offline backend answers what the model cannot.

    Args:
        model: a :class:`simulacra.llm.LanguageModel` (usually wrapped with retries, budget, recorder, meter).
        fallback: the offline backend (:class:`rater_server.backends.EmbeddingRater`) used when an answer
            does not parse or a call fails; its answers are marked ``fallback`` in the explanation.
        batch_size: memories per rating call (1 asks one by one).
        cache_size: memories whose ratings are kept.
    Raises (from :meth:`rate` / :meth:`reflect`):
        simulacra.llm.BudgetExceeded: the run's call or token budget is spent.
    """

    name = "llm"

    def __init__(self, model, fallback, batch_size: int = 16, cache_size: int = 50_000):
        self.llm = model
        self.model = getattr(model, "name", "?")
        self.fallback = fallback
        self.batch_size = max(1, batch_size)
        self._cache = RatingCache(cache_size)
        self._lock = threading.Lock()
        self.counts: Counter = Counter({k: 0 for k in (
            "llm_calls", "llm_errors", "fallbacks", "batch_items_retried", "reflections",
            "insights", "reflect_fallbacks")})

    # ----------------------------------------------------------------- rating
    def _ask(self, messages: list[dict], schema: dict, max_tokens: int) -> str | None:
        """The model's answer text, or ``None`` after a failed call (logged, counted)."""
        try:
            answer = self.llm.complete(messages, max_tokens=max_tokens, temperature=0.0, json_schema=schema)
        except BudgetExceeded:
            raise
        except LLMError as err:
            log.warning("LLM call failed, using the offline rater: %s", err)
            self._count("llm_errors")
            return None
        self._count("llm_calls")
        return answer.text

    def _count(self, key: str, n: int = 1) -> None:
        with self._lock:
            self.counts[key] += n

    def _fallback(self, memory: str, reason: str, raw: str | None) -> Rating:
        log.warning("rating of %r falls back to the offline rater (%s); raw answer: %r", memory[:80], reason,
                    None if raw is None else raw[:500])
        self._count("fallbacks")
        r = self.fallback.rate([memory])[0]
        return Rating(r.rating, f"fallback ({reason}): {r.explanation}")

    def _rate_one(self, memory: str, agent: str | None = None, context: str | None = None) -> Rating:
        raw = self._ask(rating_messages(memory, agent, context), RATING_SCHEMA, 160)
        if raw is None:
            return self._fallback(memory, "the LLM call failed", None)
        parsed = parse_rating(raw)
        if parsed is None:
            return self._fallback(memory, "unparseable answer", raw)
        self._count(f"parsed_{parsed.how}")
        return Rating(parsed.rating, parsed.explanation or f"rated {parsed.rating} by {self.model}")

    def _rate_chunk(self, chunk: list[str], agent: str | None, context: str | None) -> dict[str, Rating]:
        if len(chunk) == 1 or context:
            return {m: self._rate_one(m, agent, context) for m in chunk}
        raw = self._ask(batch_messages(chunk, agent), BATCH_SCHEMA, 60 * len(chunk) + 60)
        items = parse_ratings(raw, len(chunk)) if raw is not None else [None] * len(chunk)
        out = {}
        for memory, parsed in zip(chunk, items):
            if parsed is None:  # ask that one again on its own
                self._count("batch_items_retried")
                out[memory] = self._rate_one(memory, agent)
            else:
                self._count(f"parsed_{parsed.how}")
                out[memory] = Rating(parsed.rating, parsed.explanation or f"rated {parsed.rating} by {self.model}")
        return out

    def rate(self, memories: Sequence[str], agent: str | None = None, context: str | None = None) -> list[Rating]:
        """Ratings of ``memories`` (same order); distinct uncached memories are asked ``batch_size`` per call
        (one by one when a ``context`` is given). ``agent`` and ``context`` go into the prompt and the cache key."""
        def key(m: str) -> str:
            return m if agent is None and context is None else f"{agent}\x1f{context}\x1f{m}"

        keys = [key(m) for m in memories]
        missing = set(self._cache.missing(keys))
        todo = [m for m in dict.fromkeys(memories) if key(m) in missing]
        fresh: dict[str, Rating] = {}
        for start in range(0, len(todo), self.batch_size):
            chunk = self._rate_chunk(todo[start:start + self.batch_size], agent, context)
            fresh.update({key(m): r for m, r in chunk.items()})
        return self._cache.answer(keys, fresh)

    # ----------------------------------------------------------------- reflection
    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[Insight]:
        """Insights citing the ids of ``memories``; the offline reflector answers when the model's answer has
        no usable insight (logged with the raw answer, counted as ``reflect_fallbacks``)."""
        self._count("reflections")
        raw = self._ask(reflect_messages(memories, agent, max_insights), INSIGHT_SCHEMA, 120 * max_insights + 60)
        found = parse_insights(raw, {m["id"] for m in memories}) if raw is not None else []
        if not found:
            log.warning("reflection falls back to the offline reflector; raw answer: %r",
                        None if raw is None else raw[:500])
            self._count("reflect_fallbacks")
            insights = self.fallback.reflect(memories, agent=agent, max_insights=max_insights)
        else:
            insights = [Insight(str(i["text"]), list(i["evidence"])) for i in found[:max_insights]]
        self._count("insights", len(insights))
        return insights

    def stats(self) -> dict:
        with self._lock:
            return {"cache_size": len(self._cache), "rated": self._cache.rated, "cache_hits": self._cache.hits,
                    **self.counts}

