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
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from simulacra.clock import MINUTES_PER_DAY, format_game_time, format_hhmm, parse_hhmm
from simulacra.config import SITUATIONAL, MemoryConfig, config_from_dict, load_config, recorded_config
from simulacra.errors import InputError, SimulacraError, read_yaml
from simulacra.memory.records import reinforced_as_add
from simulacra.memory.scoring import ScoringInputs, ScoringParams
from simulacra.memory.selection import MODES, RetrievalRule, TierCandidates, rank, select

#: ``a_rel`` during the search (the weights' scale; the threshold is searched on it)
A_REL = 1.0
METRICS = ("ndcg", "mrr", "recall")
SPLITS = ("train", "heldout")
#: searched parameters, in the order of :class:`Setting`
KEYS = ("a_rec", "a_imp", "gamma", "threshold", "top_k", "retrieval", "static_top_k", "static_threshold",
        "relevance", "hybrid_weight", "fusion", "rrf_k", "normalize")
#: relevance variants of the default grid: dense, lexical, and hybrid (weighted sum) at these weights; the fusion
#: (RRF) and scaling (minmax) options are searched by the ``options`` and ``fine`` grids and the random search
RELEVANCE_GRID = {"relevance": ["dense", "lexical", "hybrid"], "hybrid_weight": [0.25, 0.5, 0.75]}

GRIDS: dict[str, dict[str, list]] = {
    "default": {
        "a_rec": [0.0, 0.25, 0.5, 1.0, 2.0],
        "a_imp": [0.0, 0.25, 0.5, 1.0, 2.0],
        "gamma": [0.9, 0.99, 0.995],
        "threshold": [0.35, 0.5, 0.65, 0.8, 1.0],
        "top_k": [3, 5, 8],
        "retrieval": list(MODES),
        "static_top_k": [None, 0, 3],
        "static_threshold": [None, 0.5],
        **RELEVANCE_GRID,
    },
    # the grid of docs/tuning.md on the 200+ generated labels: fewer weights, every relevance option
    "options": {
        "a_rec": [0.0, 0.25, 1.0],
        "a_imp": [0.0, 0.25, 1.0],
        "gamma": [0.99, 0.995],
        "threshold": [0.35, 0.8],
        "top_k": [5],
        "retrieval": list(MODES),
        "static_top_k": [None],
        "static_threshold": [None],
        "relevance": ["dense", "lexical", "hybrid"],
        "hybrid_weight": [0.25, 0.5, 0.75],
        "fusion": ["weighted", "rrf"],
        "rrf_k": [10.0, 60.0],
        "normalize": ["none", "minmax"],
    },
    # around the options grid's best (merged, threshold 0.35, top_k 5): is a weight at that grid's edge?
    "weights": {
        "a_rec": [0.0, 0.25, 0.5, 1.0, 1.5, 2.0, 3.0],
        "a_imp": [0.0, 0.1, 0.25, 0.5, 1.0],
        "gamma": [0.99, 0.995],
        "threshold": [0.35],
        "top_k": [5],
        "retrieval": ["merged"],
        "static_top_k": [None],
        "static_threshold": [None],
        "relevance": ["dense", "hybrid"],
        "hybrid_weight": [0.1, 0.25, 0.5],
        "fusion": ["weighted"],
        "rrf_k": [60.0],
        "normalize": ["none"],
    },
    "fine": {
        "a_rec": [0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0],
        "a_imp": [0.0, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0],
        "gamma": [0.8, 0.9, 0.95, 0.99, 0.995, 0.999],
        "threshold": [0.3, 0.35, 0.45, 0.55, 0.65, 0.8, 1.0, 1.2],
        "top_k": [1, 3, 5, 8],
        "retrieval": list(MODES),
        "static_top_k": [None, 0, 2, 4],
        "static_threshold": [None, 0.5],
        "relevance": ["dense", "lexical", "hybrid"],
        "hybrid_weight": [0.1, 0.25, 0.4, 0.5, 0.6, 0.75, 0.9],
        "fusion": ["weighted", "rrf"],
        "rrf_k": [10.0, 30.0, 60.0, 100.0],
        "normalize": ["none", "minmax"],
    },
}
#: ranges of the random search (uniform; top_k an integer; floats rounded to 3 decimals)
RANDOM_SPACE = {"a_rec": (0.0, 3.0), "a_imp": (0.0, 3.0), "gamma": (0.8, 1.0), "threshold": (0.2, 1.5),
                "top_k": (1, 10), "static_top_k": (0, 5), "static_threshold": (0.35, 0.8)}


class TuneError(SimulacraError):
    """The run folder cannot be tuned on (missing stores or trace)."""


# --------------------------------------------------------------------------------------------- settings
@dataclass(frozen=True)
class Setting:
    """One point of the search space (``a_rel`` is :data:`A_REL`). ``static_threshold`` is ``None`` unless a
    static budget is set, ``hybrid_weight`` unless ``relevance`` is ``hybrid``, ``rrf_k`` unless ``fusion`` is
    ``rrf`` (they do nothing otherwise); ``fusion`` is ``weighted`` unless ``relevance`` is ``hybrid``."""

    a_rec: float
    a_imp: float
    gamma: float
    threshold: float
    top_k: int
    retrieval: str
    static_top_k: int | None = None
    static_threshold: float | None = None
    relevance: str = "dense"
    hybrid_weight: float | None = None
    fusion: str = "weighted"
    rrf_k: float | None = None
    normalize: str = "none"

    def __post_init__(self) -> None:
        if not self.static_top_k and self.static_threshold is not None:  # no budget, or an empty one
            object.__setattr__(self, "static_threshold", None)
        if self.relevance != "hybrid":
            object.__setattr__(self, "hybrid_weight", None)
            object.__setattr__(self, "fusion", "weighted")
        elif self.hybrid_weight is None:
            object.__setattr__(self, "hybrid_weight", MemoryConfig().hybrid_weight)
        if self.fusion != "rrf":
            object.__setattr__(self, "rrf_k", None)
        elif self.rrf_k is None:
            object.__setattr__(self, "rrf_k", MemoryConfig().rrf_k)

    @classmethod
    def from_config(cls, m: MemoryConfig) -> Setting:
        """The searched parameters of a memory config, rescaled so that ``a_rel`` is :data:`A_REL`."""
        s = A_REL / m.a_rel if m.a_rel > 0 else 1.0
        return cls(m.a_rec * s, m.a_imp * s, m.gamma, m.threshold * s, m.top_k, m.retrieval, m.static_top_k,
                   None if m.static_threshold is None else m.static_threshold * s, m.relevance, m.hybrid_weight,
                   m.fusion, m.rrf_k, m.normalize)

    def memory_dict(self) -> dict[str, Any]:
        """The ``memory:`` section of a config that retrieves like this setting."""
        return {"a_rec": float(self.a_rec), "a_imp": float(self.a_imp), "a_rel": A_REL, "gamma": float(self.gamma),
                "threshold": float(self.threshold), "top_k": int(self.top_k), "retrieval": self.retrieval,
                "static_top_k": self.static_top_k,
                "static_threshold": None if self.static_threshold is None else float(self.static_threshold),
                "relevance": self.relevance,
                **({} if self.hybrid_weight is None else {"hybrid_weight": float(self.hybrid_weight)}),
                **({} if self.relevance != "hybrid" else {"fusion": self.fusion}),
                **({} if self.rrf_k is None else {"rrf_k": float(self.rrf_k)}),
                "normalize": self.normalize}

    def config(self, run_memory: MemoryConfig) -> MemoryConfig:
        """``run_memory`` retrieving like this setting (the fields not searched stay the run's)."""
        return run_memory.model_copy(update=self.memory_dict())

    def params(self, run_memory: MemoryConfig) -> ScoringParams:
        """The scoring parameters of this setting on ``run_memory`` (:meth:`ScoringParams.from_config`)."""
        return ScoringParams.from_config(self.config(run_memory))

    def rule(self) -> RetrievalRule:
        """The retrieval rule of this setting (:class:`RetrievalRule`)."""
        return RetrievalRule(self.retrieval, self.top_k, self.threshold, self.static_top_k, self.static_threshold)

    def label(self) -> str:
        static = "no static budget" if self.static_top_k is None else f"static_top_k {self.static_top_k}"
        if self.static_threshold is not None:
            static += f", static_threshold {self.static_threshold:g}"
        return (f"a_rec {self.a_rec:g}, a_imp {self.a_imp:g}, gamma {self.gamma:g}, threshold {self.threshold:g}, "
                f"top_k {self.top_k}, {self.retrieval}, {static}, {self.relevance_label()} relevance")

    def relevance_label(self) -> str:
        """``dense``, ``lexical``, ``hybrid 0.5`` (with the weight) or ``rrf 0.5 k60``; ``+mm`` under minmax."""
        label = self.relevance if self.hybrid_weight is None else f"{self.relevance} {self.hybrid_weight:g}"
        if self.fusion == "rrf":
            label = f"rrf {self.hybrid_weight:g} k{self.rrf_k:g}"
        return label + ("+mm" if self.normalize == "minmax" else "")


def grid_settings(grid: str | dict[str, list] = "default") -> list[Setting]:
    """Every distinct combination of a grid (a name of :data:`GRIDS` or a dict of the keys :data:`KEYS`; the
    static keys may be left out: no budget), in a fixed order."""
    g = dict(GRIDS[grid] if isinstance(grid, str) else grid)
    g.setdefault("static_top_k", [None])
    g.setdefault("static_threshold", [None])
    g.setdefault("relevance", ["dense"])
    g.setdefault("hybrid_weight", [None])
    g.setdefault("fusion", ["weighted"])
    g.setdefault("rrf_k", [None])
    g.setdefault("normalize", ["none"])
    missing = [k for k in KEYS if not g.get(k)]
    if missing:
        raise ValueError(f"grid lacks values for {', '.join(missing)}")
    return list(dict.fromkeys(Setting(*vals) for vals in itertools.product(*(g[k] for k in KEYS))))


def random_settings(n: int, seed: int = 0) -> list[Setting]:
    """``n`` settings drawn uniformly from :data:`RANDOM_SPACE` with a seeded generator (deterministic); a
    third of them without a static budget; relevance dense, lexical or hybrid (weight uniform on [0, 1]) with
    equal chances."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        u = {k: round(float(rng.uniform(*RANDOM_SPACE[k])), 3) for k in ("a_rec", "a_imp", "threshold",
                                                                        "static_threshold")}
        gamma = min(1.0, max(round(float(rng.uniform(*RANDOM_SPACE["gamma"])), 4), 1e-4))
        top_k = int(rng.integers(RANDOM_SPACE["top_k"][0], RANDOM_SPACE["top_k"][1] + 1))
        mode = MODES[int(rng.integers(2))]
        budget = int(rng.integers(RANDOM_SPACE["static_top_k"][0], RANDOM_SPACE["static_top_k"][1] + 1))
        static = None if rng.random() < 1 / 3 else budget
        relevance = RELEVANCE_GRID["relevance"][int(rng.integers(3))]
        weight = round(float(rng.uniform(0.0, 1.0)), 3)
        fusion = ("weighted", "rrf")[int(rng.integers(2))]
        rrf_k = float(rng.choice([10.0, 30.0, 60.0, 100.0]))
        normalize = ("none", "minmax")[int(rng.integers(2))]
        out.append(Setting(u["a_rec"], u["a_imp"], gamma, u["threshold"], top_k, mode, static,
                           u["static_threshold"], relevance, weight, fusion, rrf_k, normalize))
    return out


# --------------------------------------------------------------------------------------------- metrics
def recall_at_k(returned: Sequence[str], relevant: set[str], k: int) -> float:
    """Fraction of ``relevant`` among the first ``k`` of ``returned`` (0 when nothing is relevant)."""
    if not relevant:
        return 0.0
    return len(set(returned[:k]) & relevant) / len(relevant)


def reciprocal_rank(returned: Sequence[str], relevant: set[str]) -> float:
    """``1 / rank`` of the first relevant memory (rank from 1), 0 when none was returned."""
    for i, mid in enumerate(returned, start=1):
        if mid in relevant:
            return 1.0 / i
    return 0.0


def ndcg_at_k(returned: Sequence[str], relevant: set[str], k: int) -> float:
    """nDCG@k with binary relevance: ``sum 1/log2(rank+1)`` over relevant hits, over its ideal value."""
    if not relevant or k <= 0:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, mid in enumerate(returned[:k], start=1) if mid in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal


# --------------------------------------------------------------------------------------------- query files
@dataclass(frozen=True)
class Expected:
    """One expected memory of a labelled query: ``id`` or ``text`` (exactly one is set)."""

    id: str | None = None
    text: str | None = None

    def __str__(self) -> str:
        return f"id {self.id}" if self.id is not None else f"text {self.text!r}"


@dataclass(frozen=True)
class LabelledQuery:
    """A query of a query file. ``time`` is in game minutes (``None``: the run's last tick)."""

    index: int
    agent: str
    query: str
    time: float | None
    expected: tuple[Expected, ...]
    note: str | None = None
    split: str = "train"
    category: str | None = None


_HEX_ID = re.compile(r"[0-9a-f]{24}")


def _parse_time(value: Any, file: Path, where: str, start_minute: int | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise InputError(file, where, f"expected game minutes or 'HH:MM', got {value!r}")
    if isinstance(value, (int, float)):
        if value < 0:
            raise InputError(file, where, f"game minutes must be >= 0, got {value}")
        return float(value)
    if isinstance(value, str):
        try:
            minute = parse_hhmm(value.strip())
        except ValueError as err:
            raise InputError(file, where, f"expected game minutes or 'HH:MM': {err}") from None
        day = (start_minute or 0) // MINUTES_PER_DAY  # 'HH:MM' is on the run's first day
        return float(day * MINUTES_PER_DAY + minute)
    raise InputError(file, where, f"expected game minutes or 'HH:MM', got {type(value).__name__}")


def load_queries(path: str | Path, start_minute: int | None = None) -> list[LabelledQuery]:
    """Read a query file (``docs/tuning.md``): a mapping with ``queries:``, or a bare list of queries.

    Each query: ``agent``, ``query`` (text), optional ``time`` (game minutes, or ``"HH:MM"`` on the run's first
    day, given by ``start_minute``), ``expected`` (a non-empty list of ``{id: ...}``, ``{text: ...}`` or plain
    strings: a 24-hex id, else a text), optional ``note``, optional ``split`` (``train``, the default, or
    ``heldout``: not searched on, only scored), optional ``category`` (a label such as ``said``, ``who``, ``when``,
    ``plan``: :func:`by_category` reports per category).

    Raises:
        InputError: naming the file and ``queries.<index>.<field>`` of the first problem.
    """
    file = Path(path)
    data = read_yaml(file)
    items = data.get("queries") if isinstance(data, dict) else data
    if not isinstance(items, list) or not items:
        raise InputError(file, "queries", "expected a non-empty list of queries")
    out = []
    for i, item in enumerate(items):
        where = f"queries.{i}"
        if not isinstance(item, dict):
            raise InputError(file, where, f"expected a mapping, got {type(item).__name__}")
        unknown = set(item) - {"agent", "query", "time", "expected", "note", "split", "category"}
        if unknown:
            raise InputError(file, f"{where}.{sorted(unknown)[0]}",
                             "unknown field (known: agent, query, time, expected, note, split, category)")
        category = item.get("category")
        if category is not None and (not isinstance(category, str) or not category.strip()):
            raise InputError(file, f"{where}.category", "expected a non-empty string (said, who, when, plan ...)")
        split = item.get("split", "train")
        if split not in SPLITS:
            raise InputError(file, f"{where}.split", f"expected one of {', '.join(SPLITS)}, got {split!r}")
        for key in ("agent", "query"):
            if not isinstance(item.get(key), str) or not item[key].strip():
                raise InputError(file, f"{where}.{key}", "required, a non-empty string")
        raw = item.get("expected")
        if not isinstance(raw, list) or not raw:
            raise InputError(file, f"{where}.expected", "required, a non-empty list of {id: ...} or {text: ...}")
        expected = []
        for j, e in enumerate(raw):
            ew = f"{where}.expected.{j}"
            if isinstance(e, str) and e.strip():
                e = {"id": e} if _HEX_ID.fullmatch(e.strip()) else {"text": e}
            if not isinstance(e, dict) or len(e) != 1 or next(iter(e)) not in ("id", "text"):
                raise InputError(file, ew, "expected {id: <memory id>} or {text: <memory text>}")
            key, value = next(iter(e.items()))
            if not isinstance(value, str) or not value.strip():
                raise InputError(file, f"{ew}.{key}", "expected a non-empty string")
            expected.append(Expected(**{key: value.strip()}))
        out.append(LabelledQuery(i, item["agent"].strip(), item["query"].strip(),
                                 _parse_time(item.get("time"), file, f"{where}.time", start_minute),
                                 tuple(expected), item.get("note"), split, category))
    return out


# --------------------------------------------------------------------------------------------- prepared inputs
@dataclass
class TierInputs:
    """Raw scoring inputs of one tier for one query (the rows visible at the query's time, in row order)."""

    name: str
    ids: list[str]
    inputs: ScoringInputs


@dataclass
class PreparedQuery:
    """A labelled query with its inputs and the ids of the expected memories that are in the store."""

    query: LabelledQuery
    now: float
    tiers: list[TierInputs]
    relevant: set[str]
    missing: list[tuple[str, str]] = field(default_factory=list)  # (expected, reason)


@dataclass(frozen=True)
class RunInfo:
    """What the tuner needs of a run folder: its memory config, times and the trace's memory operations."""

    run_dir: Path
    config: Any  # simulacra.config.Config
    start_minute: int
    end_minute: float
    agents: list[str]
    added: dict[str, list[dict[str, Any]]]  # owner ('@town' for the shared tier) -> add/post operations


def read_run(run_dir: str | Path) -> RunInfo:
    """Read a run folder's trace: config, agents, game times, and every memory written (to spot forgotten ones).

    Read with :func:`simulacra.trace.iter_trace` (the current trace schema).
    """
    from simulacra.trace import TraceFormatError, iter_trace

    run = Path(run_dir)
    path = run / "trace.jsonl"
    if not path.is_file():
        raise TuneError(f"{run}: not a run folder (no trace.jsonl)")
    header: dict[str, Any] | None = None
    added: dict[str, list[dict[str, Any]]] = {}
    end: float | None = None
    try:
        for n, rec in iter_trace(path):
            if n == 1:
                if not isinstance(rec.get("config"), dict):
                    raise TuneError(f"{path}: line 1 is not a trace header with a config")
                header = rec
                continue
            if "time" in rec:
                end = float(rec["time"])
            for op in rec.get("memory", []):
                if op.get("op") == "add":
                    added.setdefault(op.get("agent"), []).append(op)
                elif op.get("op") == "reinforce":
                    added.setdefault(op.get("agent"), []).append(reinforced_as_add(op))
                elif op.get("op") == "post":
                    added.setdefault("@town", []).append(op)
    except TraceFormatError as err:
        raise TuneError(str(err)) from None
    if header is None:
        raise TuneError(f"{path}: empty trace")
    start = int(header.get("start_minute", 0))
    config = config_from_dict(recorded_config(header["config"]), path)
    return RunInfo(run, config, start, float(start) if end is None else end, list(header.get("agents", [])), added)


def _match_text(texts: Sequence[str], wanted: str) -> list[int]:
    exact = [i for i, t in enumerate(texts) if t == wanted]
    if exact:
        return exact
    w = wanted.casefold()
    return [i for i, t in enumerate(texts) if w in t.casefold()]


def _resolve(q: LabelledQuery, file: Path, records: list, trace_ops: list[dict], now: float,
             hide_future: bool) -> tuple[set[str], list[tuple[str, str]]]:
    """Ids of the expected memories present at ``now``, and the ones that cannot be found, with the reason."""
    relevant: set[str] = set()
    missing: list[tuple[str, str]] = []
    texts = [r.text for r in records]
    for j, e in enumerate(q.expected):
        where = f"queries.{q.index}.expected.{j}"
        if e.id is not None:
            hits = [i for i, r in enumerate(records) if r.id == e.id]
            in_trace = any(op.get("id") == e.id for op in trace_ops)
        else:
            hits = _match_text(texts, e.text)
            if len({texts[i] for i in hits}) > 1:
                shown = "; ".join(repr(texts[i][:70]) for i in hits[:4])
                raise InputError(file, where, f"text {e.text!r} matches {len(hits)} different memories of "
                                              f"{q.agent} ({shown}); give a longer text or an id")
            in_trace = bool(_match_text([op.get("text", "") for op in trace_ops], e.text))
        if not hits:
            if in_trace:
                missing.append((str(e), "forgotten (in the trace, not in the store)"))
                continue
            raise InputError(file, where, f"{e}: no such memory of {q.agent} in the store or the run's trace")
        for i in hits:
            ts = records[i].timestamp
            if hide_future and ts is not None and ts > now:
                missing.append((str(e), f"formed at {format_hhmm(ts)}, after the query time {format_hhmm(now)}"))
            else:
                relevant.add(records[i].id)
    return relevant, missing


def timed_text(text: str, timestamp: float | None) -> str:
    """``text`` preceded by its game day and time (``"day 1 11:40: ..."``), the variant ``--embed-time`` measures;
    unchanged without a timestamp (static memory)."""
    return text if timestamp is None else f"{format_game_time(timestamp)}: {text}"


def prepare(run_dir: str | Path, queries: Sequence[LabelledQuery], embedder, queries_file: str | Path = "<queries>",
            hide_future: bool = True, run: RunInfo | None = None, embed_time: bool = False) -> list[PreparedQuery]:
    """Embed the queries once and read every tier's raw columns once per query (stores are only read).

    Args:
        hide_future: leave out memories formed after a query's time (the stores hold the end of the run).
        embed_time: an experiment: score as if each memory's embedded (and BM25) text began with its game day and
            time (:func:`timed_text`); the memories are embedded again with ``embedder`` (the stores are not
            changed).
    Raises:
        InputError: an unknown agent or expected memory (naming ``queries_file`` and the query index).
        TuneError: a missing store.
    """
    from simulacra.memory.index import MirrorIndex
    from simulacra.memory.lexical import LexicalIndex
    from simulacra.memory.stream import AgentMemory
    from simulacra.runtime import open_shared, store_location

    run = run or read_run(run_dir)
    rdir = Path(run_dir)
    file = Path(queries_file)
    mem_cfg = run.config.memory
    for q in queries:
        if q.agent not in run.agents:
            raise InputError(file, f"queries.{q.index}.agent",
                             f"{q.agent!r} is not an agent of {rdir.name} ({', '.join(run.agents)})")
    dim = int(embedder.dim)
    vectors = embedder.embed(list(dict.fromkeys(q.query for q in queries)))
    vec_of = dict(zip(dict.fromkeys(q.query for q in queries), vectors))
    shared = None
    location = store_location(mem_cfg, rdir)
    if location.has_store("town", "shared"):
        shared = open_shared(location, mem_cfg, dim)
    memories: dict[str, AgentMemory] = {}
    out = []
    for q in queries:
        if q.agent not in memories:
            if not location.has_store(q.agent):
                raise TuneError(f"{rdir / q.agent}: no memory store for agent {q.agent} in {location}")
            memories[q.agent] = AgentMemory(q.agent, rdir / q.agent, mem_cfg, dim, shared=shared, location=location)
        mem = memories[q.agent]
        now = run.end_minute if q.time is None else q.time
        names = mem.readable
        records = [r for name in names for r in mem.tier(name).records]
        trace_ops = run.added.get(q.agent, []) + (run.added.get("@town", []) if shared is not None else [])
        relevant, missing = _resolve(q, file, records, trace_ops, now, hide_future)
        tiers = []
        for name in names:
            tier = mem.tier(name)
            tier_records = tier.records
            created = np.array([np.nan if r.timestamp is None else r.timestamp for r in tier_records], dtype=float)
            keep = ~(created > now) if hide_future else np.ones(len(created), dtype=bool)  # NaN (static) stays
            rows = np.flatnonzero(keep)
            inputs = tier.scoring_inputs(vec_of[q.query], mem_cfg.recency_from).take(rows)
            texts = [tier_records[i].text for i in rows]
            if embed_time:
                texts = [timed_text(tier_records[i].text, tier_records[i].timestamp) for i in rows]
                timed = MirrorIndex(dim, mem_cfg.distance, bound_min_rows=None)
                timed.append(embedder.embed(texts) if texts else np.zeros((0, dim), np.float32),
                             np.zeros((len(texts), 4)))
                inputs = replace(inputs, distance=timed.distances(vec_of[q.query]))
            lexical = LexicalIndex()  # BM25 over the memories of the tier at the query's time
            lexical.append(texts)
            inputs = replace(inputs, lexical=np.array(lexical.relevance(q.query)))
            tiers.append(TierInputs(name, [tier_records[i].id for i in rows], inputs))
        out.append(PreparedQuery(q, now, tiers, relevant, missing))
    return out


# --------------------------------------------------------------------------------------------- retrieval (fast path)
def _scored(pq: PreparedQuery, params: ScoringParams) -> dict[str, TierCandidates]:
    """Every visible memory of each tier, scored under ``params`` (row order; :func:`select` ranks them)."""
    return {t.name: TierCandidates(t.name, t.ids, t.inputs.score(pq.now, params).score) for t in pq.tiers}


def retrieve_ids(pq: PreparedQuery, s: Setting, run_memory: MemoryConfig) -> list[str]:
    """Ids :meth:`AgentMemory.retrieve` returns for this query under setting ``s`` (from the prepared inputs;
    the run's ``run_memory`` gives the parameters that are not searched)."""
    return [p.id for p in select([t.name for t in pq.tiers], _scored(pq, s.params(run_memory)), s.rule())]


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
        key = (s.a_rec, s.a_imp, s.gamma, s.relevance, s.hybrid_weight, s.fusion, s.rrf_k, s.normalize)
        if key != cache_key:
            params = s.params(run_memory)
            tables = [_sorted(_scored(pq, params)) for pq in scored]
            cache_key = key
        rule = s.rule()
        k = rule.max_results
        rec = rr = nd = 0.0
        for pq, table in zip(scored, tables):
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


def profiled(memory: MemoryConfig, profile: str | None) -> MemoryConfig:
    """``memory`` as its retrieval profile ``profile`` retrieves (:meth:`MemoryConfig.for_profile`); its own fields
    when it does not define the profile (``presets/seed003.yaml`` retrieves every purpose with them) or when
    ``profile`` is ``None`` or ``situational``."""
    return memory.for_profile(profile) if profile in memory.profiles else memory


def baseline_settings(run_memory: MemoryConfig | None = None, profile: str | None = None) -> dict[str, Setting]:
    """The settings every report shows: ``defaults`` (the shipped :class:`MemoryConfig`), ``seed003``
    (``presets/seed003.yaml``) and, when it differs from both, ``run config`` (``run_memory`` as given), each as
    retrieval profile ``profile`` retrieves (:func:`profiled`)."""
    from simulacra.presets import preset_path

    seed003 = load_config(preset_path("seed003")).memory
    out = {"defaults": Setting.from_config(profiled(MemoryConfig(), profile)),
           "seed003": Setting.from_config(seed003 if not seed003.purposes else profiled(seed003, profile))}
    if run_memory is not None and Setting.from_config(run_memory) not in out.values():
        out["run config"] = Setting.from_config(run_memory)
    return out


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


def tune(prepared: Sequence[PreparedQuery], settings: Sequence[Setting], run_memory: MemoryConfig,
         metric: str = "ndcg", profile: str | None = None) -> TuneReport:
    """Evaluate ``settings`` and the baselines on the train queries and sort by ``metric`` (ties: the other two
    metrics, smaller ``top_k``, search order); score the best and the baselines on the held-out queries.
    ``profile``: the retrieval profile tuned; the baselines are taken as it retrieves (:func:`baseline_settings`;
    ``run_memory`` should be :func:`profiled` already).

    Raises:
        ValueError: an unknown metric.
        TuneError: no train query has a findable expected memory.
    """
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {', '.join(METRICS)}, got {metric!r}")
    train = [pq for pq in prepared if pq.query.split == "train"]
    heldout = [pq for pq in prepared if pq.query.split == "heldout" and pq.relevant]
    results = evaluate(train, settings, run_memory)
    order = sorted(enumerate(results), key=_rank_key(metric))
    baselines = baseline_settings(run_memory, profile)
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


# --------------------------------------------------------------------------------------------- output
def format_report(report: TuneReport, top: int = 10) -> str:
    """The table of the ``top`` settings and the baselines (train queries), the best and the baselines on the
    train and held-out queries, and the expected memories that cannot be found."""
    head = (f"{'#':>3}  {'a_rec':>5} {'a_imp':>5} {'gamma':>6} {'thresh':>6} {'top_k':>5} {'retrieval':>9} "
            f"{'static':>6} {'s_thr':>5} {'relevance':>15}  {'recall':>6} {'MRR':>6} {'nDCG':>6}")
    lines = [head, "-" * len(head)]

    def opt(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    def row(tag: str, r: Result) -> str:
        s = r.setting
        return (f"{tag:>3}  {s.a_rec:5.3g} {s.a_imp:5.3g} {s.gamma:6.4g} {s.threshold:6.3g} {s.top_k:5d} "
                f"{s.retrieval:>9} {opt(s.static_top_k, 'd'):>6} {opt(s.static_threshold, '.3g'):>5} "
                f"{s.relevance_label():>15}  "
                f"{r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:6.3f}")

    lines += [row(str(i), r) for i, r in enumerate(report.results[:top], start=1)]
    for name, r in report.baselines.items():
        lines.append(row("", r) + f"  <- {name}")
    n_train = sum(1 for pq in report.train if pq.relevant)
    n_held = sum(1 for pq in report.prepared if pq.query.split == "heldout" and pq.relevant)
    m = report.metric
    lines += ["", f"{report.searched} settings on {n_train} train queries (a_rel fixed at {A_REL:g}); objective {m}",
              f"best: {report.best.setting.label()}", "",
              f"{'':<12} {'train (' + str(n_train) + ')':>22}   {'held-out (' + str(n_held) + ')':>22}",
              f"{'':<12} {'recall':>6} {'MRR':>6} {'nDCG':>8}   {'recall':>6} {'MRR':>6} {'nDCG':>8}"]
    for name, r in {"best": report.best, **report.baselines}.items():
        h = report.heldout.get(name)
        held = f"{h.recall:6.3f} {h.mrr:6.3f} {h.ndcg:8.3f}" if h else f"{'-':>6} {'-':>6} {'-':>8}"
        lines.append(f"{name:<12} {r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:8.3f}   {held}")
    if len(report.by_relevance) > 1:
        lines.append("\nbest setting per relevance (searched on train):")
        for label, (r, h) in report.by_relevance.items():
            held = f"{h.recall:6.3f} {h.mrr:6.3f} {h.ndcg:8.3f}" if h else f"{'-':>6} {'-':>6} {'-':>8}"
            lines.append(f"{label:<12} {r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:8.3f}   {held}   {r.setting.label()}")
    missing = [(pq.query, e, why) for pq in report.prepared for e, why in pq.missing]
    if missing:
        lines.append(f"\n{len(missing)} expected memories cannot be found (left out of the metrics):")
        lines += [f"  query {q.index} ({q.agent}, {q.query!r}): {e}: {why}" for q, e, why in missing]
    skipped = [pq.query for pq in report.prepared if not pq.relevant]
    if skipped:
        lines.append(f"{len(skipped)} queries without a findable memory were not scored: "
                     + ", ".join(str(q.index) for q in skipped))
    return "\n".join(lines)


def write_snippet(report: TuneReport, path: str | Path, source: str = "") -> Path:
    """Write the best setting as a config file (``memory:`` section; under a tuned profile its
    ``memory.profiles.<name>``), loadable with ``--config``."""
    best = report.best
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)

    def figures(r: Result) -> str:
        return f"recall@k {r.recall:.3f}, MRR {r.mrr:.3f}, nDCG@k {r.ndcg:.3f}"

    seed = report.baselines["seed003"]
    comment = (f"# simulacra tune{(' ' + source) if source else ''}: best of {report.searched} settings by "
               f"{report.metric}\n# train: {figures(best)} (seed003: {figures(seed)})\n")
    if "best" in report.heldout:
        comment += (f"# held-out: {figures(report.heldout['best'])} "
                    f"(seed003: {figures(report.heldout['seed003'])})\n")
    fields = best.setting.memory_dict()
    if report.profile not in (None, SITUATIONAL):
        fields = {"profiles": {report.profile: fields}}
    p.write_text(comment + yaml.safe_dump({"memory": fields}, sort_keys=False), encoding="utf-8")
    return p


def plot_heatmap(report: TuneReport, path: str | Path, a_rec: Sequence[float] | None = None,
                 a_imp: Sequence[float] | None = None) -> Path:
    """PNG heatmap of the objective on the train queries over (a_rec, a_imp) at the best setting's gamma,
    threshold, top_k, retrieval mode and static budget (matplotlib, Agg canvas; no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = report.best.setting
    xs = sorted(set(a_rec if a_rec is not None else GRIDS["default"]["a_rec"]) | {best.a_rec})
    ys = sorted(set(a_imp if a_imp is not None else GRIDS["default"]["a_imp"]) | {best.a_imp})
    cells = [replace(best, a_rec=x, a_imp=y) for y in ys for x in xs]
    values = np.array([r.metric(report.metric) for r in evaluate(report.train, cells, report.run_memory)])
    grid = values.reshape(len(ys), len(xs))
    fig = Figure(figsize=(1.0 + 0.8 * len(xs), 1.0 + 0.65 * len(ys)), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0.0, vmax=max(1e-9, float(values.max())), aspect="auto")
    for (yi, xi), v in np.ndenumerate(grid):
        ax.text(xi, yi, f"{v:.2f}", ha="center", va="center", fontsize=7,
                color="black" if v > 0.6 * values.max() else "white")
    ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
    ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
    ax.set_xlabel("a_rec (a_rel = 1)")
    ax.set_ylabel("a_imp")
    ax.plot(xs.index(best.a_rec), ys.index(best.a_imp), marker="*", ms=16, mfc="none", mec="red", mew=1.5)
    seed = baseline_settings()["seed003"]
    if seed.a_rec in xs and seed.a_imp in ys:
        ax.plot(xs.index(seed.a_rec), ys.index(seed.a_imp), marker="s", ms=14, mfc="none", mec="white", mew=1.2)
    names = {"ndcg": "nDCG@k", "mrr": "MRR", "recall": "recall@k"}
    ax.set_title(f"{names[report.metric]}: gamma {best.gamma:g}, threshold {best.threshold:g}, top_k {best.top_k}, "
                 f"{best.retrieval}\n(star: best; square: a_rec/a_imp of seed003)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.05)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format="png")
    return p


def plot_metrics(report: TuneReport, path: str | Path) -> Path:
    """PNG bar chart of recall@k, MRR and nDCG@k on the held-out queries (the train queries when there are none)
    for the baselines, the best setting of each relevance variant searched and the overall best (matplotlib,
    Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    held = bool(report.heldout)
    rows: dict[str, Result] = {}
    for name in report.baselines:
        rows[name] = report.heldout[name] if held else report.baselines[name]
    for label, (train, h) in report.by_relevance.items():
        rows[f"best {label}"] = h if held and h is not None else train
    rows["tuned (best)"] = report.heldout["best"] if held else report.best
    names = list(rows)
    fig = Figure(figsize=(max(6.0, 0.75 * len(names) + 2), 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(names))
    for j, (metric, label) in enumerate((("recall", "recall@k"), ("mrr", "MRR"), ("ndcg", "nDCG@k"))):
        vals = [rows[n].metric(metric) for n in names]
        bars = ax.bar(x + (j - 1) * 0.27, vals, 0.27, label=label)
        for bar, v in zip(bars, vals):
            ax.text(bar.get_x() + bar.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", fontsize=6, rotation=90)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=7)
    ax.set_ylim(0, 1.1)
    n = sum(1 for pq in report.prepared if pq.relevant and (pq.query.split == "heldout") == held)
    ax.set_title(f"{'held-out' if held else 'train'} queries ({n}); settings searched on the train queries",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format="png")
    return p


def report_json(report: TuneReport, top: int = 10) -> str:
    """The best ``top`` results and the baselines (train queries), and the held-out figures, as JSON."""
    def d(r: Result) -> dict:
        return {**asdict(r.setting), "a_rel": A_REL, "recall": r.recall, "mrr": r.mrr, "ndcg": r.ndcg}

    return json.dumps({"metric": report.metric, "searched": report.searched,
                       "results": [d(r) for r in report.results[:top]],
                       "baselines": {k: d(r) for k, r in report.baselines.items()},
                       "heldout": {k: d(r) for k, r in report.heldout.items()},
                       "by_relevance": {k: {"train": d(r), "heldout": None if h is None else d(h)}
                                        for k, (r, h) in report.by_relevance.items()}}, indent=2)
