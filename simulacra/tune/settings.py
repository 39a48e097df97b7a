"""The search space of ``simulacra tune``: a :class:`Setting` (one point: weights, gamma, the retrieval rule and
the relevance options), the named grids (:data:`GRIDS`), a seeded random search (:data:`RANDOM_SPACE`) and the
baselines every report shows (the shipped defaults, ``presets/seed003.yaml``, the run's config), each as a
retrieval profile retrieves (:func:`profiled`)."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from simulacra.config import MemoryConfig, load_config
from simulacra.memory.scoring import ScoringParams
from simulacra.memory.selection import MODES, RetrievalRule

_DEFAULT_WINDOW = MemoryConfig.model_fields["recency_window_minutes"].default
#: ``a_rel`` during the search (the weights' scale; the threshold is searched on it)
A_REL = 1.0
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
    #: recency's window in game minutes (``memory.recency_window_minutes``); ``None``: the run's (a config at the
    #: default window gives ``None``, as the grids do)
    recency_window_minutes: float | None = None
    #: the setting a query that names a time is retrieved with, recency measured from that time (a profile's
    #: ``dated`` link, :mod:`simulacra.memory.timecue`); ``None``: every query with this setting, from now
    dated: Setting | None = None
    #: the setting a query that asks for the latest (and names no time) is retrieved with (a profile's ``latest``
    #: link, :func:`simulacra.memory.timecue.asks_latest`); ``None``: such a query with this setting
    latest: Setting | None = None

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
                   m.fusion, m.rrf_k, m.normalize,
                   None if m.recency_window_minutes == _DEFAULT_WINDOW else m.recency_window_minutes)

    def for_query(self, named: object | None, latest: bool = False) -> Setting:
        """The setting a query is retrieved with, as :meth:`MemoryConfig.dated
        <simulacra.config.MemoryConfig.dated>` switches: :attr:`dated` when the query names a time (``named`` not
        ``None``) and this setting has one; :attr:`latest` when it asks for the latest (``latest``) and this
        setting has one; else this setting."""
        if named is not None:
            return self.dated if self.dated is not None else self
        return self.latest if latest and self.latest is not None else self

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
                **({} if self.recency_window_minutes is None
                   else {"recency_window_minutes": float(self.recency_window_minutes)}),
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
        w = self.recency_window_minutes
        window = "" if w in (None, _DEFAULT_WINDOW) else f", window {w:g}"
        if self.dated is None:
            links = ""
        elif self.dated == replace(self, dated=None):  # as_dated
            links = ", recency from the time named"
        else:
            links = f"; dated: {self.dated.label()}"
        if self.latest is not None and self.latest != replace(self, latest=None):  # not as_latest
            links += f"; latest: {self.latest.label()}"
        return (f"a_rec {self.a_rec:g}, a_imp {self.a_imp:g}, gamma {self.gamma:g}{window}, "
                f"threshold {self.threshold:g}, top_k {self.top_k}, {self.retrieval}, {static}, "
                f"{self.relevance_label()} relevance{links}")

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



def profiled(memory: MemoryConfig, profile: str | None) -> MemoryConfig:
    """``memory`` as its retrieval profile ``profile`` retrieves (:meth:`MemoryConfig.for_profile`); its own fields
    when it does not define the profile (``presets/seed003.yaml`` retrieves every purpose with them) or when
    ``profile`` is ``None`` or ``situational``."""
    return memory.for_profile(profile) if profile in memory.profiles else memory


def switched_setting(memory: MemoryConfig, link: str) -> Setting:
    """The setting of ``memory``'s profile ``link``, one that a profile switches to (its ``dated`` or ``latest``
    profile; ``memory`` the section itself, not a profiled copy), its recency window given explicitly: a switched
    query is scored with the section plus that profile, whatever the linking profile's window."""
    m = profiled(memory, link)
    return replace(Setting.from_config(m), recency_window_minutes=m.recency_window_minutes)


def linked(setting: Setting, memory: MemoryConfig, profile: str | None) -> Setting:
    """``setting`` with the settings of the ``dated`` and ``latest`` profiles that ``profile`` of ``memory`` links
    (``None`` where it links none): what the engine switches to for the queries that name a time or ask for the
    latest."""
    dated, latest = memory.dated_link(profile), memory.latest_link(profile)
    return replace(setting, dated=None if dated is None else switched_setting(memory, dated),
                   latest=None if latest is None else switched_setting(memory, latest))


def profile_setting(memory: MemoryConfig, profile: str | None) -> Setting:
    """The setting of retrieval profile ``profile`` of ``memory`` (:func:`profiled`), with its ``dated`` and
    ``latest`` profiles' settings attached when it links them (:func:`linked`)."""
    return linked(Setting.from_config(profiled(memory, profile)), memory, profile)


def dated_target(memory: MemoryConfig, profile: str | None) -> bool:
    """Whether ``profile`` is some profile's ``dated`` profile in ``memory`` (it then retrieves only queries that
    name a time, recency measured from that time)."""
    return profile is not None and profile in memory.dated_profiles()


def latest_target(memory: MemoryConfig, profile: str | None) -> bool:
    """Whether ``profile`` is some profile's ``latest`` profile in ``memory`` (it then retrieves only queries that
    ask for the latest)."""
    return profile is not None and profile in memory.latest_profiles()


def as_dated(setting: Setting) -> Setting:
    """``setting`` used as a dated profile: every query that names a time is retrieved with it, recency from that
    time (what ``simulacra tune --profile <a dated profile>`` scores, on those queries)."""
    return replace(setting, dated=replace(setting, dated=None))


def as_latest(setting: Setting) -> Setting:
    """``setting`` used as a latest profile: every query that asks for the latest is retrieved with it (what
    ``simulacra tune --profile <a latest profile>`` scores, on those queries)."""
    return replace(setting, latest=replace(setting, latest=None))


def baseline_settings(run_memory: MemoryConfig | None = None, profile: str | None = None,
                      section: MemoryConfig | None = None) -> dict[str, Setting]:
    """The settings every report shows: ``defaults`` (the shipped :class:`MemoryConfig`), ``seed003``
    (``presets/seed003.yaml``) and, when it differs from both, ``run config`` (``run_memory`` as given), each as
    retrieval profile ``profile`` retrieves (:func:`profile_setting`: with its dated profile when it links one;
    :func:`as_dated` when ``profile`` is itself a dated profile). ``section``: the run's memory section before
    profiling (``run_memory`` is the profiled copy), from which the run's dated profile is read."""
    from simulacra.presets import preset_path

    seed003 = load_config(preset_path("seed003")).memory
    shipped = MemoryConfig()
    out = {"defaults": profile_setting(shipped, profile),
           "seed003": Setting.from_config(seed003) if not seed003.purposes else profile_setting(seed003, profile)}
    if run_memory is not None and Setting.from_config(run_memory) not in [replace(s, dated=None, latest=None)
                                                                          for s in out.values()]:
        out["run config"] = linked(Setting.from_config(run_memory), section or run_memory, profile)
    if dated_target(run_memory or shipped, profile):
        out = {name: as_dated(s) for name, s in out.items()}
    elif latest_target(run_memory or shipped, profile):
        out = {name: as_latest(s) for name, s in out.items()}
    return out

