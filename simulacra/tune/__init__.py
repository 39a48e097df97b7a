"""``simulacra tune``: search the retrieval parameters on labelled queries against a finished run.

A labelled query names an agent, a game time, a query text and the memories that should come back (by id or
by text), and belongs to the ``train`` or the ``heldout`` split. Each query text is embedded once; for each
query and tier the raw scoring inputs (distance to the query, rating, timestamps) are read once
(:meth:`MemoryTier.scoring_inputs <simulacra.memory.store.MemoryTier.scoring_inputs>`), and every setting is
then scored with the pure :func:`~simulacra.memory.scoring.score_memories` and selected with the engine's own
retrieval rule, :func:`simulacra.memory.selection.select` (cascade or merged, threshold, ``top_k``, static
budget). Stores are only read.

Searched: ``a_rec``, ``a_imp``, ``gamma``, ``threshold``, ``top_k``, ``retrieval``, ``static_top_k``,
``static_threshold``, ``relevance`` (dense, lexical, hybrid), ``hybrid_weight``, ``fusion`` (weighted, rrf), ``rrf_k``
and ``normalize`` (none, minmax); ``a_rel`` stays 1 (the score is
linear in the three weights, so fixing one only fixes the scale, and the thresholds are searched on that scale).
The search ranks settings on the train queries; the best and the baselines (the shipped defaults,
``presets/seed003.yaml``, the run's config) are also scored on the held-out queries. Metrics (binary relevance,
averaged over the queries): recall@k, MRR and nDCG@k, with ``k`` the most memories the setting returns. Lexical
relevance (BM25) is computed per query over the memories of a tier visible at the query's time, as the engine's
index holds them then. See ``docs/tuning.md``.

The package, by concern (each module imports only those before it):

- :mod:`~simulacra.tune.settings`: :class:`Setting`, the grids, the random search, the baselines, :func:`profiled`;
- :mod:`~simulacra.tune.metrics`: recall@k, the reciprocal rank and nDCG@k (pure functions);
- :mod:`~simulacra.tune.queries`: the labelled query file (:func:`load_queries`);
- :mod:`~simulacra.tune.run`: what the tuner reads of a run's trace (:func:`read_run`, on :mod:`simulacra.trace`)
  and what looks amiss in tuning it on a query file (:func:`query_warnings`);
- :mod:`~simulacra.tune.inputs`: the queries embedded and their stores' columns read once (:func:`prepare`);
- :mod:`~simulacra.tune.search`: scoring, selection and ranking of the settings (:func:`evaluate`, :func:`tune`);
- :mod:`~simulacra.tune.report`: the table, the JSON and the config snippet of a search, and whether its best is
  below the shipped defaults (:func:`below_defaults`);
- :mod:`~simulacra.tune.plots`: its figures (matplotlib, imported only when a figure is drawn).
"""

from simulacra.memory.selection import MODES
from simulacra.tune.inputs import PreparedQuery, TierInputs, prepare, timed_text
from simulacra.tune.metrics import METRICS, ndcg_at_k, recall_at_k, reciprocal_rank
from simulacra.tune.plots import plot_heatmap, plot_metrics
from simulacra.tune.queries import SPLITS, Expected, LabelledQuery, load_queries, load_query_file
from simulacra.tune.report import below_defaults, format_report, report_json, write_snippet
from simulacra.tune.run import RunInfo, TuneError, query_warnings, read_run
from simulacra.tune.search import (
    Result,
    TuneReport,
    by_category,
    evaluate,
    for_profile,
    query_params,
    retrieve_ids,
    tune,
)
from simulacra.tune.settings import (
    A_REL,
    GRIDS,
    KEYS,
    RANDOM_SPACE,
    RELEVANCE_GRID,
    Setting,
    as_dated,
    as_latest,
    baseline_settings,
    dated_target,
    grid_settings,
    latest_target,
    profile_setting,
    profiled,
    random_settings,
)

__all__ = [
    "A_REL",
    "GRIDS",
    "KEYS",
    "METRICS",
    "MODES",
    "RANDOM_SPACE",
    "RELEVANCE_GRID",
    "SPLITS",
    "Expected",
    "LabelledQuery",
    "PreparedQuery",
    "Result",
    "RunInfo",
    "Setting",
    "TierInputs",
    "TuneError",
    "TuneReport",
    "as_dated",
    "as_latest",
    "baseline_settings",
    "below_defaults",
    "by_category",
    "dated_target",
    "evaluate",
    "for_profile",
    "format_report",
    "grid_settings",
    "latest_target",
    "load_queries",
    "load_query_file",
    "ndcg_at_k",
    "plot_heatmap",
    "plot_metrics",
    "prepare",
    "profile_setting",
    "profiled",
    "query_params",
    "query_warnings",
    "random_settings",
    "recall_at_k",
    "read_run",
    "reciprocal_rank",
    "report_json",
    "retrieve_ids",
    "timed_text",
    "tune",
    "write_snippet",
]
