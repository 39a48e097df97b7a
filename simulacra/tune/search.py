"""The search: each setting scores the prepared queries' columns (:meth:`ScoringInputs.score
<simulacra.memory.scoring.ScoringInputs.score>`), selects with the engine's own rule
(:func:`simulacra.memory.selection.select`) and is measured with :mod:`simulacra.tune.metrics`; settings are ranked
on the train split, and the best and the baselines are also scored on the held-out split."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from simulacra.config import MemoryConfig
from simulacra.memory.scoring import ScoringParams
from simulacra.memory.selection import TierCandidates, rank, select
from simulacra.tune.inputs import PreparedQuery
from simulacra.tune.metrics import METRICS, ndcg_at_k, recall_at_k, reciprocal_rank
from simulacra.tune.run import TuneError
from simulacra.tune.settings import (
    Setting,
    as_dated,
    as_latest,
    baseline_settings,
    dated_target,
    latest_target,
    linked,
)


def _scored(pq: PreparedQuery, params: ScoringParams) -> dict[str, TierCandidates]:
    """Every visible memory of each tier, scored under ``params`` (row order; :func:`select` ranks them), but those a
    speech cue leaves out (:attr:`TierInputs.left_out`), after scoring, as the engine does."""
    out = {}
    for t in pq.tiers:
        score = t.inputs.score(pq.now, params).score
        if t.left_out is None:
            out[t.name] = TierCandidates(t.name, t.ids, score)
        else:
            keep = np.flatnonzero(~t.left_out)
            out[t.name] = TierCandidates(t.name, [t.ids[i] for i in keep], score[keep], keep)
    return out


def query_params(pq: PreparedQuery, s: Setting, run_memory: MemoryConfig) -> ScoringParams:
    """The scoring parameters setting ``s`` retrieves query ``pq`` with, as the engine does
    (:meth:`AgentMemory.dated <simulacra.memory.stream.AgentMemory.dated>`): its dated setting with recency from the
    time the query names when it switches (:meth:`Setting.for_query`), else its own."""
    params = s.for_query(pq.named, pq.latest).params(run_memory)
    window = pq.named_window(s)
    return params if window is None else replace(params, named=window)


def retrieve_ids(pq: PreparedQuery, s: Setting, run_memory: MemoryConfig) -> list[str]:
    """Ids :meth:`AgentMemory.retrieve` returns for this query under setting ``s`` (from the prepared inputs;
    the run's ``run_memory`` gives the parameters that are not searched)."""
    rule = s.for_query(pq.named, pq.latest).rule()
    return [p.id for p in select([t.name for t in pq.tiers], _scored(pq, query_params(pq, s, run_memory)), rule)]


# --------------------------------------------------------------------------------------------- evaluation
@dataclass(frozen=True)
class Result:
    """Mean metrics of one setting over the scored queries."""

    setting: Setting
    recall: float
    mrr: float
    ndcg: float

    def metric(self, name: str) -> float:
        return getattr(self, name)


def evaluate(prepared: Sequence[PreparedQuery], settings: Iterable[Setting], run_memory: MemoryConfig) -> list[Result]:
    """Mean recall@k, MRR and nDCG@k of each setting over the queries with at least one findable memory;
    ``k`` is the most memories the setting returns (``top_k`` plus the static budget).

    Scores depend only on (a_rec, a_imp, gamma and the relevance options) and are computed once per such key and
    query; the rule
    (threshold, ``top_k``, mode, static budget) only selects from them.

    Raises:
        TuneError: no query has a findable expected memory.
    """
    scored = [pq for pq in prepared if pq.relevant]
    if not scored:
        raise TuneError("no query has an expected memory that is still in the stores")
    cache_key, tables = None, []
    out = []
    for s in settings:
        key = (s.a_rec, s.a_imp, s.gamma, s.relevance, s.hybrid_weight, s.fusion, s.rrf_k, s.normalize,
               s.recency_window_minutes, s.dated)
        if key != cache_key:
            tables = [_sorted(_scored(pq, query_params(pq, s, run_memory))) for pq in scored]
            cache_key = key
        rec = rr = nd = 0.0
        for pq, table in zip(scored, tables):
            rule = s.for_query(pq.named, pq.latest).rule()
            k = rule.max_results
            got = [p.id for p in select([t.name for t in pq.tiers], table, rule)]
            rec += recall_at_k(got, pq.relevant, k)
            rr += reciprocal_rank(got, pq.relevant)
            nd += ndcg_at_k(got, pq.relevant, k)
        n = len(scored)
        out.append(Result(s, rec / n, rr / n, nd / n))
    return out


def by_category(prepared: Sequence[PreparedQuery], setting: Setting, run_memory: MemoryConfig) -> dict[str, Result]:
    """``setting``'s metrics per query category (``said``, ``who``, ``when`` ...; ``-`` for queries without one),
    over the queries with a findable memory; categories in order of first appearance."""
    groups: dict[str, list[PreparedQuery]] = {}
    for pq in prepared:
        if pq.relevant:
            groups.setdefault(pq.query.category or "-", []).append(pq)
    return {cat: evaluate(group, [setting], run_memory)[0] for cat, group in groups.items()}


def _sorted(table: dict[str, TierCandidates]) -> dict[str, TierCandidates]:
    """The same candidates in rank order (rows kept), so that :func:`select` re-ranks sorted arrays (faster,
    same result)."""
    out = {}
    for name, c in table.items():
        order = rank(c.scores, c.rows)
        rows = np.arange(len(order)) if c.rows is None else np.asarray(c.rows)
        out[name] = TierCandidates(name, [c.ids[i] for i in order], c.scores[order], rows[order])
    return out


def _rank_key(metric: str) -> Callable[[tuple[int, Result]], tuple]:
    others = [m for m in METRICS if m != metric]

    def key(item: tuple[int, Result]) -> tuple:
        i, r = item
        return (-round(r.metric(metric), 12), -round(sum(r.metric(m) for m in others), 12), r.setting.top_k, i)

    return key



@dataclass
class TuneReport:
    """Results of a search on the train queries, best first; the baselines on the train queries; the best and
    the baselines on the held-out queries (empty without held-out queries)."""

    metric: str
    results: list[Result]  # sorted best first, train queries
    baselines: dict[str, Result]  # train queries
    heldout: dict[str, Result]  # "best" and the baselines' names -> held-out metrics
    prepared: list[PreparedQuery]
    run_memory: MemoryConfig
    searched: int
    #: per relevance variant searched (``dense``, ``lexical``, ``hybrid 0.5`` ...): its best setting on the train
    #: queries, and that setting on the held-out queries (``None`` without held-out queries)
    by_relevance: dict[str, tuple[Result, Result | None]] = field(default_factory=dict)
    #: the retrieval profile tuned (``None``: the memory section's own fields)
    profile: str | None = None

    @property
    def best(self) -> Result:
        return self.results[0]

    @property
    def train(self) -> list[PreparedQuery]:
        return [pq for pq in self.prepared if pq.query.split == "train"]


def for_profile(settings: Sequence[Setting], prepared: Sequence[PreparedQuery], memory: MemoryConfig,
                profile: str | None) -> tuple[list[Setting], list[PreparedQuery]]:
    """The settings and queries that tune retrieval profile ``profile`` of a run's ``memory`` section as the
    engine retrieves with it: a profile that links a dated or a latest profile keeps them for the queries that
    name a time or ask for the latest (each setting gets the run's linked settings, so only the profile's own
    fields are searched); a profile that is itself some profile's dated profile answers only the queries that
    name a time, recency from that time (those queries, each setting :func:`~simulacra.tune.settings.as_dated`),
    and a latest profile only those that ask for the latest (:func:`~simulacra.tune.settings.as_latest`)."""
    if dated_target(memory, profile):
        return [as_dated(s) for s in settings], [pq for pq in prepared if pq.named is not None]
    if latest_target(memory, profile):
        return [as_latest(s) for s in settings], [pq for pq in prepared if pq.latest]
    return [linked(s, memory, profile) for s in settings], list(prepared)


def tune(prepared: Sequence[PreparedQuery], settings: Sequence[Setting], run_memory: MemoryConfig,
         metric: str = "ndcg", profile: str | None = None, section: MemoryConfig | None = None) -> TuneReport:
    """Evaluate ``settings`` and the baselines on the train queries and sort by ``metric`` (ties: the other two
    metrics, smaller ``top_k``, search order); score the best and the baselines on the held-out queries.
    ``profile``: the retrieval profile tuned; the baselines are taken as it retrieves (:func:`baseline_settings`;
    ``run_memory`` should be :func:`profiled` already; ``section``: the run's memory section before that, for its
    dated profile).

    Raises:
        ValueError: an unknown metric.
        TuneError: no train query has a findable expected memory.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    train = [pq for pq in prepared if pq.query.split == "train"]
    heldout = [pq for pq in prepared if pq.query.split == "heldout" and pq.relevant]
    if not train and prepared:
        raise TuneError(f"all {len(prepared)} queries are in the heldout split: tuning needs train queries "
                        "(split: train, the default when a query names no split)")
    results = evaluate(train, settings, run_memory)
    order = sorted(enumerate(results), key=_rank_key(metric))
    baselines = baseline_settings(run_memory, profile, section)
    base_results = dict(zip(baselines, evaluate(train, baselines.values(), run_memory)))
    best = order[0][1]
    held: dict[str, Result] = {}
    per_mode: dict[str, Result] = {}
    for _, r in order:
        per_mode.setdefault(r.setting.relevance_label(), r)
    if heldout:
        named = {"best": best.setting, **baselines}
        held = dict(zip(named, evaluate(heldout, named.values(), run_memory)))
        mode_held = evaluate(heldout, [r.setting for r in per_mode.values()], run_memory)
    else:
        mode_held = [None] * len(per_mode)
    by_relevance = {label: (r, h) for (label, r), h in zip(per_mode.items(), mode_held)}
    return TuneReport(metric, [r for _, r in order], base_results, held, list(prepared), run_memory, len(results),
                      by_relevance, profile)

