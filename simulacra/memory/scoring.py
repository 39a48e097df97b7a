"""Memory scoring: one pure, vectorised function.

Formula (seed 003, after the Generative Agents paper, Park et al. 2023)::

    score      = a_rec * recency + a_imp * importance + a_rel * relevance
    recency    = 1                              if age < recency_window (60 game minutes)
               = gamma ** (age / 60)            otherwise, age in game minutes (gamma per game hour)
    importance = rating / 10                    rating on 1..10 from the rater
               * decay ** (hours * s)           long-term memories only (seed 003: "decay mechanism"), hours
                                                counted from entering long-term or the last rehearsal, the later;
               s = (pivot / max(rating, pivot)) ** p   p = ``decay_importance_exponent``, pivot =
                                                ``decay_importance_pivot``: importance-dependent decay (simulacra's
                                                own rule, :func:`decayed_importance`); p = 0 gives s = 1, seed
                                                003's plain decay, the same for every rating
    relevance  = 1 / (1 + distance)             distance as Chroma reports it (squared L2 by default)
               = lexical                        ``memory.relevance: lexical`` (BM25, see below)
               = (1 - w) * dense + w * lexical  ``memory.relevance: hybrid``, w = ``hybrid_weight``

``dense`` is always seed 003's ``1 / (1 + distance)``. ``lexical`` is Okapi BM25 (Robertson et al. 1994, Lucene
variant as in ``bm25s``) of the query's words over the memory texts of the memory's tier, divided by the best BM25
of that tier for the query (so in [0, 1]; 0 for every memory when no query word occurs in the tier); see
:mod:`simulacra.memory.lexical`. The hybrid fuses the two (``memory.fusion``):

* ``weighted`` (default): the weighted sum above (both terms in [0, 1]);
* ``rrf``: reciprocal-rank fusion (Cormack, Clarke & Buettcher, SIGIR 2009) of the two rankings of the tier,
  weighted and scaled so that a memory first in both gets 1::

      relevance = (k + 1) * ((1 - w) / (k + rank_dense) + w / (k + rank_lexical))

  ``k`` = ``rrf_k`` (60 in the paper); ``rank`` counts from 1 and equal values share the best rank
  (``1 +`` how many memories of the tier score strictly higher); a memory without a query word (lexical 0)
  gets no lexical part, as a document a system did not return.

Term scaling (``memory.normalize``): ``none`` (seed 003) uses the terms as above; ``minmax`` rescales each of
recency, importance and relevance to [0, 1] over the memories the retrieval scores in the tier, ``(x - min) /
(max - min)``, as the Generative Agents implementation does per retrieval, so that the weights compare terms of
equal range; a term equal over the whole tier becomes 0.5 (the middle of the range); NaN terms (static memory)
stay NaN. The extremes are those of the whole tier (:class:`TermRanges`), also when only some rows are scored.

A memory without a rating and timestamp (static memory) scores by relevance alone: its recency and
importance terms are NaN and contribute nothing. Raw values are stored; weights, gamma and decay are
applied here, at query time, so changing a weight rescales every old memory.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

#: relevance modes (``memory.relevance``)
RELEVANCE_MODES = ("dense", "lexical", "hybrid")
#: fusions of dense and lexical relevance under hybrid (``memory.fusion``)
FUSIONS = ("weighted", "rrf")
#: the game minutes memories are about, ``(start, end)``, each float64 ``(n,)`` (:func:`age_from`)
Span = tuple[np.ndarray, np.ndarray]
#: term scalings (``memory.normalize``)
NORMALIZATIONS = ("none", "minmax")


@dataclass(frozen=True)
class ScoringParams:
    """Weights and time constants of :func:`score_memories` (defaults: seed 003 / Generative Agents)."""

    a_rec: float = 0.25
    a_imp: float = 0.25
    a_rel: float = 1.0
    gamma: float = 0.995
    recency_window_minutes: float = 60.0
    long_term_decay_per_hour: float = 0.99
    relevance: str = "dense"
    hybrid_weight: float = 0.25
    fusion: str = "weighted"
    rrf_k: float = 60.0
    normalize: str = "none"
    decay_importance_exponent: float = 0.0
    decay_importance_pivot: float = 6.5
    #: the window ``(start, end)`` in game minutes that the query names (:mod:`simulacra.memory.timecue`), recency
    #: then measured from it (:func:`age_from`); ``None``: from now (seed 003). Set per retrieval, never by a config.
    named: tuple[float, float] | None = None

    def __post_init__(self) -> None:
        for name, known in (("relevance", RELEVANCE_MODES), ("fusion", FUSIONS), ("normalize", NORMALIZATIONS)):
            if getattr(self, name) not in known:
                raise ValueError(f"unknown {name} {getattr(self, name)!r} (known: {', '.join(known)})")
        if not 0.0 <= self.hybrid_weight <= 1.0:
            raise ValueError(f"hybrid_weight must be in [0, 1], got {self.hybrid_weight}")
        if self.rrf_k < 0:
            raise ValueError(f"rrf_k must be >= 0, got {self.rrf_k}")
        if self.decay_importance_exponent < 0:
            raise ValueError(f"decay_importance_exponent must be >= 0, got {self.decay_importance_exponent}")
        if not 0 < self.decay_importance_pivot <= 10:
            raise ValueError(f"decay_importance_pivot must be in (0, 10], got {self.decay_importance_pivot}")
        if self.named is not None and not self.named[0] <= self.named[1]:
            raise ValueError(f"named must be a window (start, end) with start <= end, got {self.named}")

    def age(self, reference_time: np.ndarray, now: float, span: Span | None = None) -> np.ndarray:
        """Recency's age of memories formed (or last accessed) at ``reference_time`` and about ``span``:
        :func:`age_from` with this retrieval's :attr:`named` window. Game minutes, ``(n,)``."""
        return age_from(reference_time, now, self.named, span)

    def importance(self, rating: np.ndarray, long_term_since: np.ndarray, now: float) -> np.ndarray:
        """:func:`decayed_importance` under these params' decay, exponent and pivot."""
        return decayed_importance(rating, long_term_since, now, self.long_term_decay_per_hour,
                                  self.decay_importance_exponent, self.decay_importance_pivot)

    @property
    def rrf(self) -> bool:
        """Whether the relevance is a reciprocal-rank fusion (hybrid with ``fusion: rrf``)."""
        return self.relevance == "hybrid" and self.fusion == "rrf"

    @property
    def tier_wide(self) -> bool:
        """Whether a memory's score depends on the other memories of its tier beyond the lexical statistics
        (``normalize: minmax`` or RRF): then the tier is scored whole, not through the dense bounds."""
        return self.normalize == "minmax" or self.rrf

    @property
    def lexical(self) -> bool:
        """Whether the relevance uses the lexical (BM25) term (``lexical`` or ``hybrid``)."""
        return self.relevance != "dense"

    @classmethod
    def from_config(cls, memory_config: Any, **overrides: float | None) -> ScoringParams:
        """The one way to build scoring parameters: from a :class:`simulacra.config.MemoryConfig`, or from its
        JSON form (the ``memory`` section of a trace header; a missing field keeps the default above).
        ``overrides`` (``a_rec``, ``gamma``, ...) that are not ``None`` replace single fields.

        Raises:
            TypeError: an unknown override.
        """
        m = memory_config
        get = m.get if isinstance(m, Mapping) else lambda key, default: getattr(m, key, default)
        text = ("relevance", "fusion", "normalize")
        values = {f.name: (str if f.name in text else float)(get(f.name, f.default)) for f in fields(cls)
                  if f.name in SCORING_FIELDS}
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(f"unknown scoring parameter {sorted(unknown)[0]!r}")
        values.update({k: v if k in text else float(v) for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def max_recency_importance(self) -> float:
        """Upper bound of ``a_rec * recency + a_imp * importance`` (both terms lie in [0, 1])."""
        return self.a_rec + self.a_imp


#: the fields of :class:`ScoringParams` read from a memory config (and replaced by a retrieval profile); ``named``
#: belongs to one retrieval, not to a config
SCORING_FIELDS = tuple(f.name for f in fields(ScoringParams) if f.name != "named")


@dataclass(frozen=True)
class TermRanges:
    """The extremes ``(min, max)`` of each term over the memories of a tier, for ``normalize: minmax`` (NaN,
    NaN when no memory has the term)."""

    recency: tuple[float, float]
    importance: tuple[float, float]
    relevance: tuple[float, float]

    @classmethod
    def of(cls, recency: np.ndarray, importance: np.ndarray, relevance: np.ndarray) -> TermRanges:
        """The extremes of these per-memory terms (NaN ignored)."""
        return cls(_extremes(recency), _extremes(importance), _extremes(relevance))


def _extremes(x: np.ndarray) -> tuple[float, float]:
    x = np.asarray(x, dtype=np.float64)
    if not len(x) or np.isnan(x).all():
        return math.nan, math.nan
    return float(np.nanmin(x)), float(np.nanmax(x))


def minmax(x: np.ndarray, bounds: tuple[float, float]) -> np.ndarray:
    """``(x - lo) / (hi - lo)`` for ``bounds = (lo, hi)``; 0.5 when ``hi == lo``; NaN stays NaN. ``(n,)``."""
    lo, hi = bounds
    x = np.asarray(x, dtype=np.float64)
    if hi > lo:
        return (x - lo) / (hi - lo)
    return np.where(np.isnan(x), np.nan, 0.5)


@dataclass(frozen=True)
class ScoreTerms:
    """Per-memory score terms, each a float64 array of shape ``(n,)``; NaN where a term does not apply.
    ``relevance`` is the one in the score (fused under hybrid); ``dense`` and ``lexical`` are its two parts,
    ``None`` when the relevance is dense. ``recency``, ``importance`` and ``relevance`` are raw; under
    ``normalize: minmax`` the score sums their rescaled values ``normalized`` (``(recency, importance,
    relevance)``, else ``None``) with the tier's extremes ``ranges``."""

    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray
    score: np.ndarray
    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None
    normalized: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    ranges: TermRanges | None = None

    def take(self, rows: np.ndarray) -> ScoreTerms:
        """The terms of ``rows`` (an index array)."""
        def pick(x):
            return None if x is None else x[rows]

        norm = None if self.normalized is None else tuple(x[rows] for x in self.normalized)
        return ScoreTerms(self.recency[rows], self.importance[rows], self.relevance[rows], self.score[rows],
                          pick(self.dense), pick(self.lexical), norm, self.ranges)


@dataclass(frozen=True)
class ScoringInputs:
    """The raw per-memory inputs of :func:`score_memories` for one query, each float64 ``(n,)``: distance to the
    query, rating (1..10, NaN for static), the game minute recency is measured from (NaN for static) and the
    game minute the memory entered long-term (NaN while short-term), and optionally the lexical relevance in
    [0, 1] (needed by ``lexical`` and ``hybrid`` relevance). Read once, scored under many settings
    (``simulacra tune``)."""

    distance: np.ndarray
    rating: np.ndarray
    reference_time: np.ndarray
    long_term_since: np.ndarray
    lexical: np.ndarray | None = None
    #: the game minutes each memory is about, ``(start, end)`` (:func:`age_from`); ``None``: its reference time
    span: Span | None = None

    def __len__(self) -> int:
        return len(self.distance)

    def score(self, now: float, params: ScoringParams, ranges: TermRanges | None = None) -> ScoreTerms:
        """:func:`score_memories` of these inputs at game minute ``now``."""
        return score_memories(self.distance, self.rating, self.reference_time, self.long_term_since, now, params,
                              self.lexical, ranges, self.span)

    def take(self, rows: np.ndarray) -> ScoringInputs:
        """The inputs of ``rows`` (an index or a boolean mask), copied."""
        return ScoringInputs(self.distance[rows], self.rating[rows], self.reference_time[rows],
                             self.long_term_since[rows], None if self.lexical is None else self.lexical[rows],
                             None if self.span is None else (self.span[0][rows], self.span[1][rows]))


def relevance_from_distance(distance: np.ndarray) -> np.ndarray:
    """``1 / (1 + distance)`` (seed 003). ``distance`` >= 0, shape ``(n,)``; result in (0, 1]."""
    d = np.asarray(distance, dtype=np.float64)
    return 1.0 / (1.0 + np.maximum(d, 0.0))


def ranks(x: np.ndarray) -> np.ndarray:
    """Competition rank of each value, best (largest) first: ``1 +`` how many values are strictly larger; equal
    values share a rank. float64 ``(n,)``.

    One sort and linear passes: in ascending order, ``n -`` the last position of a value's run of equal values
    is how many values are strictly larger, plus one (about 3 ms at 100k values; ``searchsorted`` of every
    value took 12 ms).
    """
    x = np.asarray(x, dtype=np.float64)
    n = len(x)
    if n == 0:
        return np.zeros(0)
    order = np.argsort(x)
    ascending = x[order]
    last = np.empty(n, dtype=bool)  # the last position of each run of equal values
    last[-1] = True
    np.not_equal(ascending[:-1], ascending[1:], out=last[:-1])
    end = np.where(last, np.arange(n), n)
    end = np.minimum.accumulate(end[::-1])[::-1]  # each position: the last position of its run
    out = np.empty(n)
    out[order] = n - end
    return out


def rrf_relevance(dense: np.ndarray, lexical: np.ndarray, weight: float, k: float) -> np.ndarray:
    """Weighted reciprocal-rank fusion of the two relevances over the same memories (module docstring), scaled
    to (0, 1]: ``(k + 1) * ((1 - w) / (k + rank_dense) + w / (k + rank_lexical))``, the lexical part 0 where
    ``lexical`` is 0. Both ``(n,)``; the ranks are over these ``n`` memories (a positive lexical value's rank
    among the positive ones is its rank among all, so only those are ranked)."""
    lex = np.asarray(lexical, dtype=np.float64)
    part_lex = np.zeros(len(lex))
    hit = np.flatnonzero(lex > 0)
    part_lex[hit] = weight / (k + ranks(lex[hit]))
    return (k + 1.0) * ((1.0 - weight) / (k + ranks(dense)) + part_lex)


def fuse_relevance(dense: np.ndarray | None, lexical: np.ndarray | None, params: ScoringParams) -> np.ndarray:
    """The relevance term under ``params.relevance`` and ``params.fusion`` (module docstring), float64 ``(n,)``
    in [0, 1]. Under RRF the arrays must hold the whole tier (the ranks are over them).

    Args:
        dense: ``1 / (1 + distance)`` (:func:`relevance_from_distance`); may be ``None`` under ``lexical``.
        lexical: normalised BM25 in [0, 1]; may be ``None`` under ``dense``.
    Weighted hybrid with weight 0 returns ``dense`` itself and weight 1 ``lexical`` itself (bit for bit).

    Raises:
        ValueError: a term the mode needs is missing.
    """
    mode, w = params.relevance, params.hybrid_weight
    if params.rrf:
        if dense is None or lexical is None:
            raise ValueError("rrf fusion needs the distances and the lexical (BM25) relevance")
        return rrf_relevance(dense, lexical, w, params.rrf_k)
    if mode == "dense" or (mode == "hybrid" and w == 0.0):
        if dense is None:
            raise ValueError("dense relevance needs the distances")
        return np.asarray(dense, dtype=np.float64)
    if lexical is None:
        raise ValueError(f"{mode} relevance needs the lexical (BM25) relevance of the query text")
    if mode == "lexical" or w == 1.0:
        return np.asarray(lexical, dtype=np.float64)
    if dense is None:
        raise ValueError("hybrid relevance needs the distances")
    return (1.0 - w) * np.asarray(dense, dtype=np.float64) + w * np.asarray(lexical, dtype=np.float64)


def recency_of(age_minutes: np.ndarray, gamma: float, window_minutes: float = 60.0) -> np.ndarray:
    """Recency in (0, 1]: 1 under ``window_minutes`` of age, else ``gamma ** (age / 60)``.

    Args:
        age_minutes: game minutes since the memory's reference time, shape ``(n,)``; NaN stays NaN,
            negative ages (a timestamp in the future) count as 0.
        gamma: factor per game hour, in (0, 1].
    """
    age = np.maximum(np.asarray(age_minutes, dtype=np.float64), 0.0)  # NaN stays NaN
    # gamma ** (age / 60) as exp(age * ln(gamma) / 60): the same number, ~5x faster than np.power
    return np.where(age < window_minutes, 1.0, np.exp(age * (math.log(gamma) / 60.0)))


def age_from(reference_time: np.ndarray, now: float, named: tuple[float, float] | None = None,
             span: Span | None = None) -> np.ndarray:
    """Recency's age in game minutes of memories whose reference time (formed, or last accessed) is
    ``reference_time`` (game minutes, ``(n,)``; NaN stays NaN).

    * No time named (``named`` ``None``): ``now - reference_time`` (seed 003).
    * The query names a time (``named``: a window ``(start, end)``, :mod:`simulacra.memory.timecue`): the distance
      from that window to the game minutes each memory is about, 0 where they overlap, so that recency favours
      what was about then (after Berberich et al. 2010, time-sensitive queries). A memory is about its ``span``
      (``(span_start, span_end)``, each ``(n,)``, :attr:`MemoryRecord.span
      <simulacra.memory.records.MemoryRecord.span>`: the hours of the plan it states), or, without one,
      the instant ``reference_time``.

    The one place the age is measured: the engine's scoring, its bounds and skyband, and ``simulacra tune`` call it
    (through :meth:`ScoringParams.age`)."""
    ref = np.asarray(reference_time, dtype=np.float64)
    if named is None:
        return now - ref
    lo, hi = (ref, ref) if span is None else (np.asarray(span[0], dtype=np.float64),
                                              np.asarray(span[1], dtype=np.float64))
    start, end = named
    return np.maximum(start - hi, 0.0) + np.maximum(lo - end, 0.0)


def decayed_importance(
    rating: np.ndarray, long_term_since: np.ndarray, now: float, decay_per_hour: float,
    importance_exponent: float = 0.0, pivot_rating: float = 6.5,
) -> np.ndarray:
    """Long-term importance: ``rating / 10 * decay_per_hour ** (hours * (pivot_rating / max(rating,
    pivot_rating)) ** importance_exponent)``, ``hours`` the game hours since the memory entered long-term or was last
    rehearsed (the later).

    The one place the decay rule is written: retrieval's importance term, :meth:`AgentMemory.forget_decayed`,
    :meth:`AgentMemory.most_important` and ``bench.growth_replay`` all call it.

    With ``importance_exponent`` ``p = 0`` every memory loses the same share per hour (seed 003's plain decay, bit
    for bit). With ``p > 0`` the decay depends on the rating (simulacra's own rule, ``docs/memory.md``; seed 003
    and the Generative Agents paper give plain decay only): a memory rated at or under ``pivot_rating`` decays by
    ``decay_per_hour`` per game hour, one rated ``r`` above it as if ``(pivot_rating / r) ** p`` hours passed per
    game hour. An unused memory rated ``r`` thus falls under a floor ``f`` after ``ln(r / 10 / f) / -ln(decay_per_hour)
    * max(1, r / pivot_rating) ** p`` game hours: the mundane keeps the base horizon, and what was rated above the
    pivot lasts steeply longer (with the defaults 0.93, 8, 6.5 and ``f`` 0.1: 25 game hours at 6, 49 at 7, 151
    at 8, 17 days at 9).

    Args:
        rating: raw rater output on 1..10 (NaN for static memories), shape ``(n,)``.
        long_term_since: game minute the decay counts from (:attr:`MemoryRecord.decay_since`: entering long-term,
            or the last rehearsal when later), NaN while in short-term.
        now: current game time in game minutes.
        decay_per_hour: factor per game hour (of a memory rated at or under ``pivot_rating``), in (0, 1].
        importance_exponent: ``p >= 0`` (``memory.decay_importance_exponent``).
        pivot_rating: in (0, 10] (``memory.decay_importance_pivot``); no effect when ``p = 0``.
    Returns:
        importance in [0, 1], NaN where ``rating`` is NaN.
    """
    rating = np.asarray(rating, dtype=np.float64)
    base = rating / 10.0
    since = np.asarray(long_term_since, dtype=np.float64)
    hours = np.where(np.isnan(since), 0.0, np.maximum(now - since, 0.0) / 60.0)
    if importance_exponent:  # p = 0 skips this, so plain decay stays bit for bit seed 003's
        hours = hours * (pivot_rating / np.maximum(rating, pivot_rating)) ** importance_exponent
    return base * np.exp(hours * math.log(decay_per_hour))


def score_memories(
    distance: np.ndarray,
    rating: np.ndarray,
    reference_time: np.ndarray,
    long_term_since: np.ndarray,
    now: float,
    params: ScoringParams,
    lexical: np.ndarray | None = None,
    ranges: TermRanges | None = None,
    span: Span | None = None,
) -> ScoreTerms:
    """Score ``n`` memories for one query (see the module docstring for the formula and its source).

    Args:
        distance: Chroma-space distance of each memory to the query, shape ``(n,)``.
        rating: importance rating 1..10, NaN for memories without one (static), shape ``(n,)``.
        reference_time: game minute recency is measured from (creation, or last access), NaN for static.
        long_term_since: game minute each memory entered long-term, NaN if it has not.
        now: current game time in game minutes.
        params: weights, time constants and the relevance mode.
        lexical: normalised BM25 of each memory for the query, in [0, 1] (``lexical`` and ``hybrid`` only).
        ranges: under ``normalize: minmax``, the tier's extremes of the terms; ``None``: these ``n`` memories
            are the whole tier and give them. Under RRF the ``n`` memories must be the whole tier.
        span: the game minutes each memory is about, ``(start, end)`` (:func:`age_from`; used when the query names
            a time); ``None``: its reference time.
    Returns:
        The three raw terms and the total, each shape ``(n,)`` (and the dense and lexical parts of the relevance
        when it is not dense; the rescaled terms and the extremes under minmax).
    Raises:
        ValueError: ``lexical`` missing under ``lexical`` or ``hybrid`` relevance.
    """
    dense = relevance_from_distance(distance)
    relevance = fuse_relevance(dense, lexical, params)
    recency = recency_of(params.age(reference_time, now, span), params.gamma, params.recency_window_minutes)
    importance = params.importance(rating, long_term_since, now)
    score, normalized, ranges = combine(recency, importance, relevance, params, ranges)
    lex = None if not params.lexical else np.asarray(lexical, dtype=np.float64)
    return ScoreTerms(recency, importance, relevance, score, dense if params.lexical else None, lex, normalized,
                      ranges)


def combine(recency: np.ndarray, importance: np.ndarray, relevance: np.ndarray, params: ScoringParams,
            ranges: TermRanges | None = None
            ) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray] | None, TermRanges | None]:
    """The score from the three raw terms (``(n,)`` each, NaN where a term does not apply): ``a_rec * recency
    + a_imp * importance + a_rel * relevance``, the terms rescaled first under ``normalize: minmax`` (with
    ``ranges``, default the extremes of these arrays). The one place the terms are summed (the engine,
    ``rescore`` and ``tune`` all come here). Returns ``(score, normalized terms or None, ranges or None)``."""
    if params.normalize != "minmax":
        return recency_importance(recency, importance, params) + params.a_rel * relevance, None, None
    ranges = ranges or TermRanges.of(recency, importance, relevance)
    norm = (minmax(recency, ranges.recency), minmax(importance, ranges.importance),
            minmax(relevance, ranges.relevance))
    return recency_importance(norm[0], norm[1], params) + params.a_rel * norm[2], norm, ranges


def recency_importance(recency: np.ndarray, importance: np.ndarray, params: ScoringParams) -> np.ndarray:
    """The query-independent part of the score, ``a_rec * recency + a_imp * importance``; NaN terms count 0.

    :func:`score_memories` adds ``a_rel * relevance`` to exactly this array, so a cached copy of it gives
    bit-identical scores.
    """
    return params.a_rec * np.nan_to_num(recency, nan=0.0) + params.a_imp * np.nan_to_num(importance, nan=0.0)
