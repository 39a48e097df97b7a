"""Rater backend over a language model (any :class:`simulacra.llm.LanguageModel`).

Importance is asked in the spirit of seed 003's prompt (1 = an ordinary moment of routine, 10 = a turning
point of a life; an explanation and a rating as JSON), in this project's own words. Answers are parsed
defensively (:mod:`simulacra.rating.parsing`: JSON, JSON inside prose, a bare number, a number word) and clamped
to 1..10. A memory whose answer does not parse, or whose call fails after the model's retries, gets the
offline backend's rating instead: the raw answer is logged and the fallback counted (``GET /health``),
never silent. A spent budget (:class:`simulacra.llm.BudgetExceeded`) is not papered over: it propagates so
that the run stops with its message. Identical memories are answered from a cache.

Batches: a request's uncached memories are split into as few calls of at most ``batch_size`` as possible,
of even sizes (17 memories: 9 + 8), each asking for ``ITEM_TOKENS`` completion tokens per memory plus
``BATCH_TOKENS``. An answer cut at ``max_tokens`` (``finish_reason == "length"``) is not asked again whole:
the items it completed are kept (:func:`simulacra.rating.parsing.parse_ratings` reads the complete items of a
cut JSON array) and only the rest is asked, as one batch; when it completed none, the rest is split in two
halves. A complete answer that misses items has those asked one by one. Each truncation is counted
(``truncations`` in ``GET /health`` and in each answer's ``usage``). Worst case, a request for ``n``
memories makes at most ``2n - 1`` model calls (:data:`MODEL_CALLS_PER_MEMORY`): resuming or splitting a
batch of ``m`` costs one call and leaves batches of fewer than ``m`` memories; asking ``m`` missing items
one by one costs ``m``; by induction a batch of ``m`` costs at most ``2m - 1``. With the model's own time
bound per call (:func:`simulacra.llm.call_time_bound_s`) that is what ``GET /health`` publishes as
``limits`` so that clients wait long enough (:class:`simulacra.rater.RaterClient`).

Quality: with a :class:`simulacra.rating.quality.QualityCheck`, :meth:`LLMRater.ensure_checked` rates labelled
memories through the same path once, before serving (``simulacra rater`` and
:func:`simulacra.rater.connect_rater` call it), reports the figures in the log and ``GET /health``
(``quality``), and with ``on_weak_model: offline`` a weak model is no longer asked.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Sequence

from simulacra.llm import BudgetExceeded, Completion, call_time_bound_s
from simulacra.llm.structured import ask_json
from simulacra.rating.backends import Rating, RatingCache
from simulacra.rating.parsing import ParsedRating, parse_insights, parse_rating, parse_ratings
from simulacra.rating.quality import QualityCheck, describe, measure
from simulacra.rating.reflection import Insight

log = logging.getLogger(__name__)

#: completion tokens asked for one memory's rating
ONE_TOKENS = 160
#: completion tokens per memory of a batch, and for the batch's frame
ITEM_TOKENS = 60
BATCH_TOKENS = 60
#: a request for n memories makes at most MODEL_CALLS_PER_MEMORY * n - 1 model calls (module docstring)
MODEL_CALLS_PER_MEMORY = 2

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


def batch_tokens(n: int) -> int:
    """``max_tokens`` of a call rating ``n`` memories: ``ITEM_TOKENS * n + BATCH_TOKENS`` (``ONE_TOKENS`` for 1)."""
    return ONE_TOKENS if n == 1 else ITEM_TOKENS * n + BATCH_TOKENS


def even_chunks(items: Sequence[str], most: int) -> list[list[str]]:
    """``items`` in order, cut into the fewest chunks of at most ``most``, their sizes differing by at most 1."""
    if not items:
        return []
    count = -(-len(items) // most)
    size, extra = divmod(len(items), count)
    out, at = [], 0
    for i in range(count):
        step = size + (1 if i < extra else 0)
        out.append(list(items[at:at + step]))
        at += step
    return out


class LLMRater:
    """Rates and reflects with a language model; the offline backend answers what the model cannot.

    Args:
        model: a :class:`simulacra.llm.LanguageModel` (usually wrapped with retries, budget, recorder, meter).
        fallback: the offline backend (:class:`simulacra.rating.backends.EmbeddingRater`) used when an answer
            does not parse or a call fails; its answers are marked ``fallback`` in the explanation.
        batch_size: most memories per rating call (1 asks one by one).
        cache_size: memories whose ratings are kept.
        check: measure the model at start (:meth:`ensure_checked`); ``None``: no check.
    Attributes:
        quality: the check's figures (:func:`simulacra.rating.quality.measure` plus ``using``, ``seconds``,
            ``model_calls``, ``truncations``), ``{"error": str}`` when the check could not run, or ``None``.
        use_model: ``False`` once a weak model was replaced by the offline backend (``on_weak_model: offline``).
    Raises (from :meth:`rate` / :meth:`reflect`):
        simulacra.llm.BudgetExceeded: the run's call or token budget is spent.
    """

    name = "llm"

    def __init__(self, model, fallback, batch_size: int = 16, cache_size: int = 50_000, *,
                 check: QualityCheck | None = None):
        self.llm = model
        self.model = getattr(model, "name", "?")
        self.fallback = fallback
        self.batch_size = max(1, batch_size)
        self.check = check
        self.quality: dict | None = None
        self.use_model = True
        self._cache = RatingCache(cache_size)
        self._lock = threading.Lock()
        self._check_lock = threading.Lock()
        self.counts: Counter = Counter({k: 0 for k in (
            "llm_calls", "llm_errors", "fallbacks", "batch_items_retried", "truncations", "batch_items_resumed",
            "reflections", "insights", "reflect_fallbacks", "offline_ratings")})

    @classmethod
    def from_config(cls, model, fallback, rater) -> LLMRater:
        """The rater ``rater`` (a :class:`simulacra.config.RaterConfig`) describes: ``llm_batch_size`` and the
        start-up check (``check_sample``, ``min_spearman``, ``on_weak_model``)."""
        return cls(model, fallback, batch_size=rater.llm_batch_size, check=QualityCheck.from_config(rater))

    # ----------------------------------------------------------------- model calls
    def _count(self, key: str, n: float = 1, usage: Counter | None = None) -> None:
        with self._lock:
            self.counts[key] += n
        if usage is not None:
            usage[key] += n

    def _ask(self, messages: list[dict], schema: dict, max_tokens: int, usage: Counter | None = None
             ) -> Completion | None:
        """The model's answer, cut or not (the callers read cut answers themselves), or ``None`` after a failed call
        (logged, counted); truncations counted. Asked by the project's one rule
        (:func:`~simulacra.llm.structured.ask_json`, one call, temperature 0).

        Raises:
            BudgetExceeded, LLMUnreachable: the run stops (an HTTP rater answers 402 / 503).
        """
        asked = ask_json(self.llm, messages, schema, lambda completion: completion, max_tokens=max_tokens,
                         temperature=0.0, retries=0, read="completion", cut_ok=True)
        if usage is not None:
            usage["seconds"] += asked.seconds
        if asked.error is not None:
            log.warning("LLM call failed, using the offline rater: %s", asked.error)
            self._count("llm_errors", usage=usage)
            return None
        self._count("llm_calls", usage=usage)
        if asked.truncated:
            self._count("truncations", usage=usage)
        return asked.value

    def limits(self) -> dict:
        """What a client needs to wait long enough: ``model_call_s`` (seconds one model call can take with
        its retries, :func:`simulacra.llm.call_time_bound_s`; ``None`` if unknown) and
        ``model_calls_per_memory`` (a request for ``n`` memories makes fewer than that times ``n`` calls;
        ``/reflect`` makes one)."""
        bound = call_time_bound_s(self.llm)
        return {"model_call_s": None if bound is None else round(bound, 3),
                "model_calls_per_memory": MODEL_CALLS_PER_MEMORY}

    # ----------------------------------------------------------------- rating by the model alone
    def _ask_one(self, memory: str, agent: str | None, context: str | None, usage: Counter
                 ) -> ParsedRating | str:
        """The model's rating of one memory, or why there is none."""
        answer = self._ask(rating_messages(memory, agent, context), RATING_SCHEMA, ONE_TOKENS, usage)
        if answer is None:
            return "the LLM call failed"
        parsed = parse_rating(answer.text)
        if parsed is None:
            log.warning("no rating in the answer for %r; raw answer: %r", memory[:80], answer.text[:500])
            return "unparseable answer"
        return parsed

    def _ask_chunk(self, chunk: list[str], agent: str | None, context: str | None, usage: Counter
                   ) -> dict[str, ParsedRating | str]:
        """The model's ratings of ``chunk`` (one call, then only what it left out; module docstring)."""
        if len(chunk) == 1 or context:
            return {m: self._ask_one(m, agent, context, usage) for m in chunk}
        answer = self._ask(batch_messages(chunk, agent), BATCH_SCHEMA, batch_tokens(len(chunk)), usage)
        if answer is None:
            return dict.fromkeys(chunk, "the LLM call failed")
        items = parse_ratings(answer.text, len(chunk))
        cut = answer.finish_reason == "length"
        if cut:  # the last item read from prose may itself be cut ("1" of "10"); cut JSON items are whole
            last = max((i for i, p in enumerate(items) if p is not None), default=None)
            if last is not None and not items[last].how.startswith("json"):
                items[last] = None
        got: dict[str, ParsedRating | str] = {m: p for m, p in zip(chunk, items) if p is not None}
        rest = [m for m in chunk if m not in got]
        if not rest:
            return got
        if cut:
            self._count("batch_items_resumed", len(rest), usage)
            log.info("the answer rating %d memories was cut at %d tokens after %d; asking the other %d",
                     len(chunk), batch_tokens(len(chunk)), len(got), len(rest))
            parts = [rest] if got else even_chunks(rest, -(-len(rest) // 2))
            for part in parts:
                got.update(self._ask_chunk(part, agent, None, usage))
        else:
            self._count("batch_items_retried", len(rest), usage)
            got.update({m: self._ask_one(m, agent, None, usage) for m in rest})
        return got

    def _model_ratings(self, memories: Sequence[str], agent: str | None, context: str | None, usage: Counter
                       ) -> dict[str, ParsedRating | str]:
        out: dict[str, ParsedRating | str] = {}
        for chunk in even_chunks(list(dict.fromkeys(memories)), self.batch_size):
            out.update(self._ask_chunk(chunk, agent, context, usage))
        return out

    # ----------------------------------------------------------------- quality check
    def ensure_checked(self) -> dict | None:
        """Run the start-up check once (later calls return its figures): rate the check's labelled sample
        through the model (no cache, no fallback), log the figures (a warning when the model is weak), and
        with ``on_weak_model: offline`` stop asking a weak model. A spent budget during the check is
        reported as ``{"error": ...}`` (the run then stops at its first rating with the budget's message).

        Returns:
            :attr:`quality`; ``None`` without a check.
        """
        with self._check_lock:
            if self.check is None or self.quality is not None:
                return self.quality
            usage: Counter = Counter()
            log.info("measuring the rater's model %s on %d labelled memories", self.model, self.check.sample)

            def rate(texts: list[str]) -> list[int | None]:
                got = self._model_ratings(texts, None, None, usage)
                return [p.rating if isinstance(p, ParsedRating) else None for p in (got[t] for t in texts)]

            try:
                quality = measure(rate, self.check)
            except BudgetExceeded as err:
                self.quality = {"error": f"the LLM budget ran out during the check: {err}"}
                log.warning("the rater's model %s was not measured: %s", self.model, self.quality["error"])
                return self.quality
            weak_offline = quality["weak"] and self.check.on_weak_model == "offline"
            quality.update(using="offline" if weak_offline else "model", seconds=round(usage["seconds"], 3),
                           model_calls=int(usage["llm_calls"] + usage["llm_errors"]),
                           truncations=int(usage["truncations"]))
            self.quality = quality
            self.use_model = not weak_offline
            (log.warning if quality["weak"] else log.info)("the rater's model %s: %s", self.model, describe(quality))
            return quality

    # ----------------------------------------------------------------- the backend protocol
    def _fallback(self, memory: str, reason: str, usage: Counter) -> Rating:
        log.warning("rating of %r falls back to the offline rater (%s)", memory[:80], reason)
        self._count("fallbacks", usage=usage)
        r = self.fallback.rate([memory])[0]
        return Rating(r.rating, f"fallback ({reason}): {r.explanation}")

    def rate_with_usage(self, memories: Sequence[str], agent: str | None = None, context: str | None = None
                        ) -> tuple[list[Rating], dict]:
        """:meth:`rate`, and what it cost: ``{"llm_calls", "llm_errors", "truncations", "fallbacks": int,
        "seconds": float}`` (seconds spent in model calls)."""
        usage: Counter = Counter({k: 0 for k in ("llm_calls", "llm_errors", "truncations", "fallbacks")})
        usage["seconds"] = 0.0
        if not self.use_model:
            self._count("offline_ratings", len(memories))
            return self.fallback.rate(memories, agent=agent, context=context), dict(usage)

        def key(m: str) -> str:
            return m if agent is None and context is None else f"{agent}\x1f{context}\x1f{m}"

        keys = [key(m) for m in memories]
        missing = set(self._cache.missing(keys))
        todo = [m for m in dict.fromkeys(memories) if key(m) in missing]
        fresh: dict[str, Rating] = {}
        for memory, got in self._model_ratings(todo, agent, context, usage).items():
            if isinstance(got, ParsedRating):
                self._count(f"parsed_{got.how}")
                fresh[key(memory)] = Rating(got.rating, got.explanation or f"rated {got.rating} by {self.model}")
            else:
                fresh[key(memory)] = self._fallback(memory, got, usage)
        usage["seconds"] = round(usage["seconds"], 3)
        return self._cache.answer(keys, fresh), dict(usage)

    def fit(self) -> None:
        """Fit the offline fallback now (:meth:`simulacra.rating.backends.EmbeddingRater.fit`), when it can be."""
        if callable(getattr(self.fallback, "fit", None)):
            self.fallback.fit()

    def rate(self, memories: Sequence[str], agent: str | None = None, context: str | None = None) -> list[Rating]:
        """Ratings of ``memories`` (same order); distinct uncached memories are asked in batches of at most
        ``batch_size`` (one by one when a ``context`` is given). ``agent`` and ``context`` go into the prompt
        and the cache key."""
        return self.rate_with_usage(memories, agent, context)[0]

    # ----------------------------------------------------------------- reflection
    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[Insight]:
        """Insights citing the ids of ``memories``; the offline reflector answers when the model's answer has
        no usable insight (logged with the raw answer, counted as ``reflect_fallbacks``), or always once a
        weak model was replaced (``on_weak_model: offline``)."""
        self._count("reflections")
        if not self.use_model:
            insights = self.fallback.reflect(memories, agent=agent, max_insights=max_insights)
            self._count("insights", len(insights))
            return insights
        answer = self._ask(reflect_messages(memories, agent, max_insights), INSIGHT_SCHEMA, 120 * max_insights + 60)
        raw = None if answer is None else answer.text
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

    def health(self) -> dict:
        """Extra ``GET /health`` fields: ``quality`` (:attr:`quality`), ``using`` (``"model"`` or
        ``"offline"``) and ``limits`` (:meth:`limits`)."""
        return {"quality": self.quality, "using": "model" if self.use_model else "offline", "limits": self.limits()}
