"""Memory scoring: one pure, vectorised function.

Formula (seed 003, after the Generative Agents paper, Park et al. 2023)::

    score      = a_rec * recency + a_imp * importance + a_rel * relevance
    recency    = 1                              if age < recency_window (60 game minutes)
               = gamma ** (age / 60)            otherwise, age in game minutes (gamma per game hour)
    importance = rating / 10                    rating on 1..10 from the rater
               * decay ** (hours in long-term)  long-term memories only (seed 003: "decay mechanism")
    relevance  = 1 / (1 + distance)             distance as Chroma reports it (squared L2 by default)
               = lexical                        ``memory.relevance: lexical`` (BM25, see below)
               = (1 - w) * dense + w * lexical  ``memory.relevance: hybrid``, w = ``hybrid_weight``

``dense`` is always seed 003's ``1 / (1 + distance)``. ``lexical`` is Okapi BM25 (Robertson et al. 1994, Lucene
variant as in ``bm25s``) of the query's words over the memory texts of the memory's tier, divided by the best BM25
of that tier for the query (so in [0, 1]; 0 for every memory when no query word occurs in the tier); see
:mod:`simulacra.memory.lexical`. The hybrid is a normalised weighted sum (both terms in [0, 1]).

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
    hybrid_weight: float = 0.5

    def __post_init__(self) -> None:
        if self.relevance not in RELEVANCE_MODES:
            raise ValueError(f"unknown relevance {self.relevance!r} (known: {', '.join(RELEVANCE_MODES)})")
        if not 0.0 <= self.hybrid_weight <= 1.0:
            raise ValueError(f"hybrid_weight must be in [0, 1], got {self.hybrid_weight}")

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
        values = {f.name: (str if f.name == "relevance" else float)(get(f.name, f.default)) for f in fields(cls)}
        unknown = set(overrides) - set(values)
        if unknown:
            raise TypeError(f"unknown scoring parameter {sorted(unknown)[0]!r}")
        values.update({k: v if k == "relevance" else float(v) for k, v in overrides.items() if v is not None})
        return cls(**values)

    @property
    def max_recency_importance(self) -> float:
        """Upper bound of ``a_rec * recency + a_imp * importance`` (both terms lie in [0, 1])."""
        return self.a_rec + self.a_imp


@dataclass(frozen=True)
class ScoreTerms:
    """Per-memory score terms, each a float64 array of shape ``(n,)``; NaN where a term does not apply.
    ``relevance`` is the one in the score (fused under hybrid); ``dense`` and ``lexical`` are its two parts,
    ``None`` when the relevance is dense."""

    recency: np.ndarray
    importance: np.ndarray
    relevance: np.ndarray
    score: np.ndarray
    dense: np.ndarray | None = None
    lexical: np.ndarray | None = None


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

    def __len__(self) -> int:
        return len(self.distance)

    def score(self, now: float, params: ScoringParams) -> ScoreTerms:
        """:func:`score_memories` of these inputs at game minute ``now``."""
        return score_memories(self.distance, self.rating, self.reference_time, self.long_term_since, now, params,
                              self.lexical)

    def take(self, rows: np.ndarray) -> ScoringInputs:
        """The inputs of ``rows`` (an index or a boolean mask), copied."""
        return ScoringInputs(self.distance[rows], self.rating[rows], self.reference_time[rows],
                             self.long_term_since[rows], None if self.lexical is None else self.lexical[rows])


def relevance_from_distance(distance: np.ndarray) -> np.ndarray:
    """``1 / (1 + distance)`` (seed 003). ``distance`` >= 0, shape ``(n,)``; result in (0, 1]."""
    d = np.asarray(distance, dtype=np.float64)
    return 1.0 / (1.0 + np.maximum(d, 0.0))


def fuse_relevance(dense: np.ndarray | None, lexical: np.ndarray | None, params: ScoringParams) -> np.ndarray:
    """The relevance term under ``params.relevance`` (module docstring), float64 ``(n,)`` in [0, 1].

    Args:
        dense: ``1 / (1 + distance)`` (:func:`relevance_from_distance`); may be ``None`` under ``lexical``.
        lexical: normalised BM25 in [0, 1]; may be ``None`` under ``dense``.
    Hybrid with weight 0 returns ``dense`` itself and weight 1 ``lexical`` itself (bit for bit).

    Raises:
        ValueError: a term the mode needs is missing.
    """
    mode, w = params.relevance, params.hybrid_weight
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


def decayed_importance(
    rating: np.ndarray, long_term_since: np.ndarray, now: float, decay_per_hour: float
) -> np.ndarray:
    """``rating / 10``, times ``decay_per_hour ** hours`` since the memory entered long-term.

    Args:
        rating: raw rater output on 1..10 (NaN for static memories), shape ``(n,)``.
        long_term_since: game minute the memory entered long-term, NaN while in short-term.
        now: current game time in game minutes.
        decay_per_hour: factor per game hour, in (0, 1].
    Returns:
        importance in [0, 1], NaN where ``rating`` is NaN.
    """
    base = np.asarray(rating, dtype=np.float64) / 10.0
    since = np.asarray(long_term_since, dtype=np.float64)
    hours = np.where(np.isnan(since), 0.0, np.maximum(now - since, 0.0) / 60.0)
    return base * np.exp(hours * math.log(decay_per_hour))


def score_memories(
    distance: np.ndarray,
    rating: np.ndarray,
    reference_time: np.ndarray,
    long_term_since: np.ndarray,
    now: float,
    params: ScoringParams,
    lexical: np.ndarray | None = None,
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
    Returns:
        The three terms and the total, each shape ``(n,)`` (and the dense and lexical parts of the relevance
        when it is not dense).
    Raises:
        ValueError: ``lexical`` missing under ``lexical`` or ``hybrid`` relevance.
    """
    dense = relevance_from_distance(distance)
    relevance = fuse_relevance(dense, lexical, params)
    recency = recency_of(now - np.asarray(reference_time, dtype=np.float64), params.gamma,
                         params.recency_window_minutes)
    importance = decayed_importance(rating, long_term_since, now, params.long_term_decay_per_hour)
    score = recency_importance(recency, importance, params) + params.a_rel * relevance
    if not params.lexical:
        return ScoreTerms(recency=recency, importance=importance, relevance=relevance, score=score)
    return ScoreTerms(recency, importance, relevance, score, dense, np.asarray(lexical, dtype=np.float64))


def recency_importance(recency: np.ndarray, importance: np.ndarray, params: ScoringParams) -> np.ndarray:
    """The query-independent part of the score, ``a_rec * recency + a_imp * importance``; NaN terms count 0.

    :func:`score_memories` adds ``a_rel * relevance`` to exactly this array, so a cached copy of it gives
    bit-identical scores.
    """
    return params.a_rec * np.nan_to_num(recency, nan=0.0) + params.a_imp * np.nan_to_num(importance, nan=0.0)
