"""The one retrieval rule (simulacra.memory.selection), ScoringParams.from_config, and the seed003 preset."""

from __future__ import annotations

import numpy as np
import pytest

from simulacra.config import Config, MemoryConfig, load_config
from simulacra.errors import ConfigError
from simulacra.memory.scoring import ScoringParams
from simulacra.memory.selection import RetrievalRule, TierCandidates, rank, select
from simulacra.presets import available_presets, preset_path

TIERS = ("static", "short_term", "long_term", "shared")


def cands(tier, scores, rows=None):
    return TierCandidates(tier, [f"{tier[:2]}{i}" for i in range(len(scores))], np.array(scores, dtype=float),
                          None if rows is None else np.array(rows))


def table():
    return {"static": cands("static", [0.6, 0.9, 0.4]),
            "short_term": cands("short_term", [1.2, 0.3, 1.0]),
            "long_term": cands("long_term", [1.1, 1.2]),
            "shared": cands("shared", [0.8])}


def ids(picks):
    return [p.id for p in picks]


def test_rank_breaks_ties_by_row_not_by_position():
    assert rank(np.array([1.0, 2.0, 2.0, 0.5])).tolist() == [1, 2, 0, 3]
    assert rank(np.array([1.0, 2.0, 2.0]), np.array([5, 9, 7])).tolist() == [2, 1, 0]


def test_cascade_is_seed_003():
    # static fills what it can at >= 0.5 (st1 0.9, st0 0.6), then short-term's best (sh0 1.2, sh2 1.0), then
    # long-term's best (lo1 1.2); each tier best first, the tiers in priority order
    got = select(TIERS, table(), RetrievalRule("cascade", 5, 0.5))
    assert ids(got) == ["st1", "st0", "sh0", "sh2", "lo1"]
    assert [p.tier for p in got] == ["static", "static", "short_term", "short_term", "long_term"]
    assert got[4].index == 1 and got[4].score == 1.2
    assert ids(select(TIERS, table(), RetrievalRule("cascade", 2, 0.5))) == ["st1", "st0"]  # static is a wall
    assert ids(select(TIERS, table(), RetrievalRule("cascade", 3, 1.15))) == ["sh0", "lo1"]  # lo0 1.1 fails


def test_cascade_asks_lower_tiers_only_while_top_k_is_not_filled():
    asked = []

    def source(tier, n):
        asked.append((tier, n))
        return table()[tier]

    select(TIERS, source, RetrievalRule("cascade", 3, 0.5))
    assert asked == [("static", 3), ("short_term", 1)]  # 2 static facts passed: 1 more needed, then done


def test_merged_takes_the_best_of_all_tiers_ties_in_tier_order():
    got = select(TIERS, table(), RetrievalRule("merged", 4, 0.5))
    # 1.2 (short_term) and 1.2 (long_term) tie: tier order; then 1.1, 1.0
    assert ids(got) == ["sh0", "lo1", "lo0", "sh2"]
    assert ids(select(TIERS, table(), RetrievalRule("merged", 10, 0.85))) == ["sh0", "lo1", "lo0", "sh2", "st1"]


def test_static_budget_is_apart_from_top_k_and_listed_last():
    rule = RetrievalRule("cascade", 3, 0.5, static_top_k=1, static_threshold=0.65)
    got = select(TIERS, table(), rule)
    # episodic cascade over short-term, long-term, shared; then the best static fact at >= 0.65
    assert ids(got) == ["sh0", "sh2", "lo1", "st1"]
    assert rule.max_results == 4 and rule.depth("static") == 1 and rule.depth("short_term") == 3
    merged = select(TIERS, table(), RetrievalRule("merged", 2, 0.5, static_top_k=2))
    assert ids(merged) == ["sh0", "lo1", "st1", "st0"]  # static_threshold None: the threshold, 0.5
    assert ids(select(TIERS, table(), RetrievalRule("merged", 2, 0.5, static_top_k=2, static_threshold=0.95))) \
        == ["sh0", "lo1"]
    assert ids(select(TIERS, table(), RetrievalRule("cascade", 2, 0.0, static_top_k=0))) == ["sh0", "sh2"]
    # a tier the retrieval does not ask is never selected, budget or not
    assert ids(select(("short_term",), table(), RetrievalRule("merged", 2, 0.0, static_top_k=3))) == ["sh0", "sh2"]


def test_rule_from_config_and_from_record():
    m = MemoryConfig(retrieval="cascade", top_k=4, threshold=0.2, static_top_k=2, static_threshold=0.6)
    rule = RetrievalRule.from_config(m, top_k=7, mode=None)
    assert rule == RetrievalRule("cascade", 7, 0.2, 2, 0.6)
    assert RetrievalRule.from_record(rule.to_record()) == rule
    # a trace op from before the static budget: the rule is seed 003's, whatever today's defaults are
    old_op = {"mode": "cascade", "top_k": 5, "threshold": 0.35}
    assert RetrievalRule.from_record(old_op, {"gamma": 0.995}) == RetrievalRule("cascade", 5, 0.35)
    # keys the op lacks come from the run's memory config
    assert RetrievalRule.from_record({"top_k": 3}, Config().memory.model_dump()).mode == Config().memory.retrieval
    with pytest.raises(KeyError, match="threshold"):
        RetrievalRule.from_record({"mode": "merged", "top_k": 3})
    with pytest.raises(ValueError, match="retrieval mode"):
        RetrievalRule("sideways")
    with pytest.raises(ValueError, match=">= 0"):
        RetrievalRule("merged", 3, 0.0, static_top_k=-1)


def test_scoring_params_have_one_builder():
    m = MemoryConfig(a_rec=0.5, gamma=0.9, long_term_decay_per_hour=0.98)
    p = ScoringParams.from_config(m)
    assert (p.a_rec, p.a_imp, p.gamma, p.long_term_decay_per_hour) == (0.5, m.a_imp, 0.9, 0.98)
    assert ScoringParams.from_config(m.model_dump()) == p  # the trace header's JSON form gives the same
    assert ScoringParams.from_config({"a_rel": 2}) == ScoringParams(a_rel=2.0)  # missing: seed values
    assert ScoringParams.from_config(m, a_imp=3, gamma=None) == ScoringParams(
        0.5, 3.0, 1.0, 0.9, 60.0, 0.98, relevance="hybrid", hybrid_weight=0.25,
        decay_importance_exponent=m.decay_importance_exponent)
    with pytest.raises(TypeError, match="colour"):
        ScoringParams.from_config(m, colour=1)


def test_seed003_preset_is_seed_003_exactly():
    cfg = load_config(preset_path("seed003"))
    assert RetrievalRule.from_config(cfg.memory) == RetrievalRule("cascade", 5, 0.35, None, None)
    assert ScoringParams.from_config(cfg.memory) == ScoringParams()  # 0.25 / 0.25 / 1, gamma 0.995, window 60
    assert cfg.memory.distance == "l2" and cfg.memory.recency_from == "created"
    assert cfg.memory.model_dump() != MemoryConfig().model_dump()  # the shipped defaults are not the seed's
    assert "seed003" in available_presets()


def test_preset_flag_loads_the_file_and_names_a_missing_one(capsys):
    from simulacra.cli import build_parser, run_parser

    args = run_parser().parse_args(["--preset", "seed003", "--set", "memory.top_k=3"])
    assert args.config == str(preset_path("seed003"))
    assert load_config(args.config, args.overrides).memory.retrieval == "cascade"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--preset", "seed004"])
    err = capsys.readouterr().err
    assert "'seed004'" in err and "available: seed003" in err
    with pytest.raises(SystemExit):
        run_parser().parse_args(["--preset", "seed003", "--config", "x.yaml"])
    assert "not allowed" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="no preset"):
        preset_path("../presets/seed003")


def test_the_default_reaches_episodic_memory_and_seed003_stops_at_static(tmp_path, rater_url, embedder):
    """The shipped default returns short- or long-term memories in nearly every retrieval; seed 003's cascade,
    whose static facts clear the 0.35 threshold and fill top_k, almost never (docs/tuning.md)."""
    from simulacra.simulation import Simulation
    from simulacra.trace import read_trace
    from tests.conftest import DATA

    share = {}
    for name, path in (("default", None), ("seed003", preset_path("seed003"))):
        config = load_config(path, [f"rater.url={rater_url}"])
        with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                               run_name=name, embedder=embedder) as sim:
            sim.run(12)
        _, ticks = read_trace(sim.run_dir)
        ops = [op for t in ticks for op in t["memory"] if op["op"] == "retrieve"]
        episodic = [op for op in ops if any(m["tier"] in ("short_term", "long_term") for m in op["results"])]
        share[name] = len(episodic) / len(ops)
    # measured on this world: 0.881 (hybrid default; 1.0 under dense relevance) and 0.025; the bar is 0.5
    assert share["default"] >= 0.8 and share["seed003"] <= 0.1


@pytest.mark.parametrize("field, value, error", [
    *[(f, v, ValueError) for f in ("threshold", "static_threshold") for v in (float("nan"), float("inf"))],
    *[(f, v, TypeError) for f in ("threshold", "static_threshold") for v in ("high", True)],
    ("threshold", None, TypeError),  # a static_threshold of None is "as threshold"
])
def test_a_threshold_no_score_can_pass_is_refused(field, value, error):
    """nan compares false with every score (a retrieval silently returned nothing); a str failed inside numpy."""
    with pytest.raises(error, match=f"^{field}: expected"):
        RetrievalRule("merged", 3, **{"threshold": 0.35, field: value})
    assert RetrievalRule("merged", 3, float("-inf")).threshold == float("-inf")  # -inf: no threshold
    assert RetrievalRule("merged", 3, np.float64(0.5), static_threshold=None).threshold == 0.5
