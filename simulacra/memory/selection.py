"""The retrieval rule, written once: which of the per-tier ranked candidates one retrieval returns.

The engine (:meth:`simulacra.memory.stream.AgentMemory.retrieve`), ``simulacra rescore`` (from the trace's
recorded candidates) and ``simulacra tune`` (from prepared score columns) all call :func:`select`, so the three
agree by construction. Scores come from elsewhere (:mod:`simulacra.memory.scoring`); this module only ranks
within a tier and applies the rule:

* within a tier, best score first; equal scores keep row (insertion) order (:func:`rank`);
* ``cascade`` (seed 003): the tiers in priority order (static, short-term, long-term, then the town's shared
  tier); from each, its best memories while fewer than ``top_k`` were found; a memory scoring under
  ``threshold`` is not used;
* ``merged``: the best ``top_k`` of all tiers by score, at or above ``threshold`` (equal scores: tier order,
  then rank within the tier);
* static budget (``static_top_k`` set): static facts are identity context selected apart from the episodic
  tiers: at most ``static_top_k`` of them scoring at least ``static_threshold`` (default ``threshold``), listed
  after the at most ``top_k`` episodic memories, which the rule above picks from the other tiers.
  ``static_top_k: None`` is seed 003: the static tier is the cascade's first tier (or part of the merged pool)
  and its facts count against ``top_k``.

A later relevance mode (lexical or hybrid) changes how scores are computed, not this rule: :func:`select`
takes any per-tier scores.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from numbers import Real
from typing import Any, NamedTuple

import numpy as np

#: retrieval modes
MODES = ("cascade", "merged")
#: tiers that the static budget applies to (an agent's persona and world facts)
STATIC_TIERS = ("static",)


@dataclass(frozen=True)
class RetrievalRule:
    """The rule of one retrieval (see the module docstring).

    Attributes:
        mode: ``"cascade"`` or ``"merged"``.
        top_k: most episodic memories returned (all memories when ``static_top_k`` is ``None``), >= 0.
        threshold: minimum score of a returned memory (same scale as the score: ``a_rel`` times relevance plus
            the weighted recency and importance); a real number, ``-inf`` for none, never ``nan`` or ``+inf``.
        static_top_k: most static facts returned beside the ``top_k``, >= 0; ``None``: no budget (seed 003).
        static_threshold: minimum score of a budgeted static fact; ``None``: ``threshold``. As ``threshold``.
    Raises:
        TypeError: a threshold that is not a number.
        ValueError: an unknown mode, a negative count, or a threshold that is ``nan`` or ``+inf`` (no memory would
            ever pass it).
    """

    mode: str = "cascade"
    top_k: int = 5
    threshold: float = 0.35
    static_top_k: int | None = None
    static_threshold: float | None = None

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"unknown retrieval mode {self.mode!r} (known: {', '.join(MODES)})")
        if self.top_k < 0 or (self.static_top_k is not None and self.static_top_k < 0):
            raise ValueError(f"top_k and static_top_k must be >= 0, got {self.top_k} and {self.static_top_k}")
        check_threshold(self.threshold, "threshold")
        if self.static_threshold is not None:
            check_threshold(self.static_threshold, "static_threshold")

    @classmethod
    def from_config(cls, memory_config: Any, **overrides: Any) -> RetrievalRule:
        """The rule of a :class:`simulacra.config.MemoryConfig` (fields ``retrieval``, ``top_k``, ``threshold``,
        ``static_top_k``, ``static_threshold``); ``overrides`` that are not ``None`` replace single fields."""
        m = memory_config
        values = {"mode": m.retrieval, "top_k": m.top_k, "threshold": m.threshold,
                  "static_top_k": m.static_top_k, "static_threshold": m.static_threshold}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    @classmethod
    def from_record(cls, op: Mapping[str, Any], run_memory: Mapping[str, Any] | None = None) -> RetrievalRule:
        """The rule a trace ``retrieve`` operation records (:meth:`to_record`).

        A key the operation lacks is taken from ``run_memory`` (the ``memory`` section of the trace header's
        config); ``static_top_k`` / ``static_threshold`` found in neither mean no static budget (traces written
        before the budget existed retrieved as seed 003).

        Raises:
            KeyError: ``mode``, ``top_k`` or ``threshold`` in neither.
        """
        mem = run_memory or {}

        def get(key: str, config_key: str | None = None, required: bool = True) -> Any:
            if key in op:
                return op[key]
            if (config_key or key) in mem:
                return mem[config_key or key]
            if required:
                raise KeyError(f"retrieve operation without {key!r}")
            return None

        return cls(get("mode", "retrieval"), int(get("top_k")), float(get("threshold")),
                   get("static_top_k", required=False), get("static_threshold", required=False))

    def to_record(self) -> dict[str, Any]:
        """The rule as trace fields: ``mode``, ``top_k``, ``threshold``, ``static_top_k``, ``static_threshold``."""
        return {"mode": self.mode, "top_k": self.top_k, "threshold": self.threshold,
                "static_top_k": self.static_top_k, "static_threshold": self.static_threshold}

    def budgeted(self, tier: str) -> bool:
        """Whether ``tier`` is selected under the static budget instead of with the episodic tiers."""
        return self.static_top_k is not None and tier in STATIC_TIERS

    def depth(self, tier: str) -> int:
        """Most memories of ``tier`` this rule can return (``static_top_k`` for a budgeted tier, else ``top_k``):
        a tier's best ``depth`` memories under the retrieval's scores are all :func:`select` can use."""
        return int(self.static_top_k) if self.budgeted(tier) else self.top_k

    @property
    def max_results(self) -> int:
        """Most memories one retrieval returns: ``top_k`` plus the static budget."""
        return self.top_k + (self.static_top_k or 0)


def check_threshold(value: Any, name: str = "threshold") -> None:
    """Refuse a retrieval threshold (``name``) that is not a real number (``TypeError``), or is ``nan`` or ``+inf``
    (``ValueError``: every score compares false with ``nan`` and none reaches ``+inf``, so the retrieval would
    silently return nothing); ``-inf`` (no threshold) and any finite number pass. The one rule, applied by
    :class:`RetrievalRule` (so also to :meth:`simulacra.memory.stream.AgentMemory.retrieve`'s ``threshold``)."""
    if not isinstance(value, Real) or isinstance(value, bool):
        raise TypeError(f"{name}: expected a number (the lowest score a memory may have), got "
                        f"{type(value).__name__} {value!r:.40}")
    if math.isnan(value) or value == math.inf:
        raise ValueError(f"{name}: expected a finite number (or -inf: no threshold), got {value!r}; no memory "
                         f"would ever pass it")


def candidate_depth(top_k: int, static_top_k: int | None = None, max_top_k: int | None = None) -> int:
    """How deep a trace records each tier's candidates (``memory.max_top_k``; ``None``: twice ``top_k``), never
    less than ``top_k`` or ``static_top_k``: re-ranking them serves any ``top_k`` and ``static_top_k`` up to it."""
    wanted = 2 * top_k if max_top_k is None else max_top_k
    return max(wanted, top_k, static_top_k or 0)


@dataclass(frozen=True)
class TierCandidates:
    """Scored memories of one tier: a superset of the tier's best ``n`` that :func:`select` asked for.

    Attributes:
        tier: the tier's name.
        ids: memory ids, shape ``(m,)``.
        scores: their scores, float64 ``(m,)``.
        rows: their row (insertion) order in the tier, any increasing integers, ``(m,)``; ``None``: the order of
            ``ids`` is row order.
    """

    tier: str
    ids: Sequence[str]
    scores: np.ndarray
    rows: np.ndarray | None = None


class Pick(NamedTuple):
    """One selected memory: its tier, its position in that tier's :class:`TierCandidates`, id and score."""

    tier: str
    index: int
    id: str
    score: float


def rank(scores: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
    """Positions of ``scores`` best first; equal scores: lower ``rows`` first (default: position). ``(m,)``."""
    s = np.asarray(scores, dtype=np.float64)
    r = np.arange(len(s)) if rows is None else np.asarray(rows)
    return np.lexsort((r, -s))


#: what :func:`select` calls for a tier's candidates: ``(tier, n) -> TierCandidates`` holding at least its best ``n``
CandidateSource = Callable[[str, int], TierCandidates]


def select(tiers: Sequence[str], candidates: CandidateSource | Mapping[str, TierCandidates],
           rule: RetrievalRule) -> list[Pick]:
    """Apply ``rule`` to the tiers' candidates (see the module docstring); the one retrieval rule.

    Args:
        tiers: tiers asked, in priority order.
        candidates: per tier, its scored memories: a mapping, or a function ``(tier, n)`` returning candidates
            that include the tier's best ``n`` (called lazily, once per tier consulted, so a cascade that stops
            early does not score lower tiers). A tier missing from a mapping has no memories.
    Returns:
        The selected memories: the episodic part (cascade: tier order, each tier best first; merged: best first
        over all tiers), then the budgeted static facts best first. At most :attr:`RetrievalRule.max_results`.
    """
    if isinstance(candidates, Mapping):
        table = candidates

        def fetch(tier: str, n: int) -> TierCandidates:
            return table.get(tier) or TierCandidates(tier, [], np.zeros(0))
    else:
        fetch = candidates

    def best(tier: str, n: int, threshold: float) -> list[Pick]:
        """The tier's best ``n`` scoring at least ``threshold``, best first."""
        if n <= 0:
            return []
        c = fetch(tier, n)
        order = rank(c.scores, c.rows)[:n]
        return [Pick(tier, int(i), c.ids[i], float(c.scores[i])) for i in order if c.scores[i] >= threshold]

    def pool(names: Sequence[str], mode: str, k: int, threshold: float) -> list[Pick]:
        found: list[Pick] = []
        if mode == "merged":
            for name in names:
                found.extend(best(name, k, threshold))
            found.sort(key=lambda p: -p.score)  # stable: equal scores keep tier order, then rank
            return found[:k]
        for name in names:
            need = k - len(found)
            if need <= 0:
                break
            found.extend(best(name, need, threshold))
        return found

    episodic = [t for t in tiers if not rule.budgeted(t)]
    out = pool(episodic, rule.mode, rule.top_k, rule.threshold)
    static = [t for t in tiers if rule.budgeted(t)]
    if static:
        thr = rule.threshold if rule.static_threshold is None else rule.static_threshold
        out += pool(static, "merged", int(rule.static_top_k), thr)
    return out
