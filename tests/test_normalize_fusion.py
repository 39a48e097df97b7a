"""memory.normalize (none | minmax) and memory.fusion (weighted | rrf): the scoring, the engine (exact in large
tiers), the trace, rescore and inspect."""

import math

import numpy as np
import pytest
from pydantic import ValidationError

from simulacra.config import MemoryConfig
from simulacra.explain import explain_tick, format_explanation
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.scoring import (
    ScoringInputs,
    ScoringParams,
    TermRanges,
    ranks,
    relevance_from_distance,
    rrf_relevance,
    score_memories,
)
from simulacra.memory.selection import RetrievalRule, rank
from simulacra.memory.stream import AgentMemory
from simulacra.rescore import rerank, rescore_run
from simulacra.trace import read_trace
from tests.test_rescore import FROZEN, take_back_writes_after_retrieval, tiny_run

NAN = math.nan


# ----------------------------------------------------------------- the pure function
def test_minmax_rescales_each_term_over_the_tier():
    distance = np.array([0.0, 1.0, 3.0, 1.0])
    rating = np.array([2.0, 10.0, 6.0, NAN])  # the last one is a static fact: no recency, no importance
    created = np.array([100.0, 0.0, 50.0, NAN])
    lt = np.full(4, NAN)
    p = ScoringParams(a_rec=1.0, a_imp=2.0, a_rel=3.0, gamma=0.5, recency_window_minutes=0.0, normalize="minmax")
    t = score_memories(distance, rating, created, lt, 100.0, p)
    raw_rec = 0.5 ** (np.array([0.0, 100.0, 50.0]) / 60)
    rel = 1 / (1 + distance)
    want_rec = (raw_rec - raw_rec.min()) / (raw_rec.max() - raw_rec.min())
    want_imp = (rating[:3] / 10 - 0.2) / 0.8
    want_rel = (rel - rel.min()) / (rel.max() - rel.min())
    assert t.normalized[0][:3] == pytest.approx(want_rec) and math.isnan(t.normalized[0][3])
    assert t.normalized[1][:3] == pytest.approx(want_imp) and math.isnan(t.normalized[1][3])
    assert t.normalized[2] == pytest.approx(want_rel)
    assert t.score[:3] == pytest.approx(want_rec + 2 * want_imp + 3 * want_rel[:3])
    assert t.score[3] == pytest.approx(3 * want_rel[3])  # NaN terms count nothing
    assert t.recency[:3] == pytest.approx(raw_rec) and t.relevance == pytest.approx(rel)  # raw terms kept
    # the weights now mean what they say: equal weights, and the best of each term scores 1 on it
    none = score_memories(distance, rating, created, lt, 100.0, ScoringParams(normalize="none"))
    assert none.normalized is None and none.ranges is None


def test_a_constant_term_is_the_middle_and_a_subset_uses_the_tiers_extremes():
    inputs = ScoringInputs(np.array([0.5, 0.2, 0.9, 0.4]), np.array([5.0, 5.0, 5.0, 5.0]),
                           np.array([0.0, 10.0, 20.0, 30.0]), np.full(4, NAN))
    p = ScoringParams(normalize="minmax")
    whole = inputs.score(40.0, p)
    assert (whole.normalized[1] == 0.5).all()  # every memory equally important: 0.5, not NaN or 0
    rows = np.array([3, 1])
    part = inputs.take(rows).score(40.0, p, whole.ranges)
    assert np.array_equal(part.score, whole.score[rows])  # bit for bit: the same extremes, the same arithmetic
    alone = inputs.take(rows).score(40.0, p)  # without the tier's extremes the two rows would scale differently
    assert not np.allclose(alone.score, whole.score[rows])
    assert whole.ranges == TermRanges.of(whole.recency, whole.importance, whole.relevance)


def test_rrf_ranks_and_scale():
    assert list(ranks(np.array([0.3, 0.9, 0.3, 0.1]))) == [2, 1, 2, 4]  # ties share the best rank
    dense = np.array([0.9, 0.5, 0.7, 0.1])
    lexical = np.array([1.0, 0.0, 0.2, 0.6])
    k = 60.0
    got = rrf_relevance(dense, lexical, 0.5, k)
    assert got[0] == 1.0  # first in both
    assert got[1] == pytest.approx((k + 1) * 0.5 / (k + 3))  # no query word: no lexical part
    assert got[2] == pytest.approx((k + 1) * (0.5 / (k + 2) + 0.5 / (k + 3)))
    assert got[3] == pytest.approx((k + 1) * (0.5 / (k + 4) + 0.5 / (k + 2)))
    p = ScoringParams(relevance="hybrid", fusion="rrf", hybrid_weight=0.0, rrf_k=k)
    t = score_memories(np.array([0.1, 1.0, 0.5, 9.0]), np.full(4, NAN), np.full(4, NAN), np.full(4, NAN), 0.0, p,
                       lexical)
    assert list(t.relevance) == pytest.approx([(k + 1) / (k + r) for r in (1, 3, 2, 4)])  # dense ranks only
    with pytest.raises(ValueError, match="rrf"):
        score_memories(np.zeros(2), np.zeros(2), np.zeros(2), np.zeros(2), 0.0, p)  # no lexical relevance


def test_ranks_and_rrf_equal_their_definitions_with_many_ties():
    """The sorted-run computation of ranks and the positive-only lexical ranking equal the definitions written
    out: rank = 1 + how many values are strictly larger, over the whole tier."""
    rng = np.random.default_rng(7)
    assert len(ranks(np.zeros(0))) == 0
    for trial in range(200):
        n = int(rng.integers(1, 120))
        dense = rng.integers(0, 15, n) / 7.0 if trial % 2 else rng.random(n)  # heavy ties on odd trials
        lexical = np.where(rng.random(n) < 0.4, rng.integers(0, 6, n) / 5.0, 0.0)
        by_def = lambda x: np.array([1.0 + np.sum(x > v) for v in x])  # noqa: E731
        assert np.array_equal(ranks(dense), by_def(dense)) and np.array_equal(ranks(lexical), by_def(lexical))
        w, k = float(rng.random()), float(rng.integers(0, 100))
        expected = (k + 1) * ((1 - w) / (k + by_def(dense))
                              + np.where(lexical > 0, w / (k + by_def(lexical)), 0.0))
        assert rrf_relevance(dense, lexical, w, k) == pytest.approx(expected, rel=1e-12, abs=0)


def test_settings_are_validated():
    with pytest.raises(ValueError, match="fusion"):
        ScoringParams(fusion="max")
    with pytest.raises(ValueError, match="normalize"):
        ScoringParams(normalize="zscore")
    with pytest.raises(ValidationError):
        MemoryConfig(normalize="zscore")
    with pytest.raises(ValidationError):
        MemoryConfig(rrf_k=-1)
    p = ScoringParams.from_config(MemoryConfig(relevance="hybrid", fusion="rrf", rrf_k=10, normalize="minmax"))
    assert (p.fusion, p.rrf_k, p.normalize, p.rrf, p.tier_wide) == ("rrf", 10.0, "minmax", True, True)
    assert ScoringParams.from_config({"a_rec": 0.5}).normalize == "none"  # traces written before the setting


# ----------------------------------------------------------------- the engine
@pytest.mark.parametrize("relevance,fusion,normalize", [("dense", "weighted", "minmax"), ("hybrid", "rrf", "none"),
                                                        ("hybrid", "rrf", "minmax"), ("lexical", "weighted", "minmax")])
def test_engine_returns_what_scoring_every_memory_gives(tmp_path, relevance, fusion, normalize):
    """A tier large enough for the bounded search: the engine's top k equals ranking the whole tier with the pure
    function, and each result explains its raw and rescaled terms."""
    rng = np.random.default_rng(3)
    n, dim = 700, 8
    words = ["kettle", "market", "park", "bread", "storm", "mill", "letter", "festival"]
    cfg = MemoryConfig(short_term_min_entries=10**6, relevance=relevance, fusion=fusion, normalize=normalize,
                       hybrid_weight=0.4, rrf_k=20)
    mem = AgentMemory("ann", tmp_path / "ann", cfg, dim)
    for tier in mem.tiers.values():
        tier.index.bound_min_rows = 100  # large-tier path
    recs, vecs = [], rng.normal(size=(n, dim)).astype(np.float32)
    for i in range(n):
        text = " ".join(rng.choice(words, size=3)) + f" note {i}"
        recs.append(MemoryRecord(id=memory_id("ann", i, text), text=text, kind="observation",
                                 rating=int(1 + i % 10), timestamp=float(i), tick=i))
    mem.add(recs, vecs)
    q, text, now = rng.normal(size=dim).astype(np.float32), "kettle at the market", float(n + 30)
    got = mem.retrieve(q, now, rule=RetrievalRule("merged", 7, -math.inf), tiers=("short_term",), query_text=text)
    tier = mem.short_term
    terms = tier.scoring_inputs(q, query_text=text).score(now, mem.params)
    want = rank(terms.score)[:7]
    assert [m.id for m in got] == [tier.records[i].id for i in want]
    assert [m.score for m in got] == [float(terms.score[i]) for i in want]
    if normalize == "minmax":
        top = got[0]
        assert set(top.normalized) == {"recency", "importance", "relevance"}
        assert top.to_dict()["normalized"]["relevance"] == pytest.approx(terms.normalized[2][want[0]], abs=1e-6)
        assert top.relevance == pytest.approx(terms.relevance[want[0]])  # the raw term, beside the scaled one
    else:
        assert got[0].normalized is None and "normalized" not in got[0].to_dict()
    if relevance == "dense":
        assert got[0].relevance == pytest.approx(relevance_from_distance(tier.distances(q))[want[0]])


# ----------------------------------------------------------------- trace, rescore, inspect
@pytest.mark.parametrize("relevance,fusion,normalize", [("dense", "weighted", "minmax"), ("hybrid", "rrf", "none"),
                                                        ("hybrid", "rrf", "minmax")])
def test_rescore_equals_live_retrieval(tmp_path, rater_url, embedder, relevance, fusion, normalize):
    extra = [*FROZEN, f"memory.relevance={relevance}", f"memory.fusion={fusion}", f"memory.normalize={normalize}",
             "memory.hybrid_weight=0.5", "memory.retrieval=merged"]
    with tiny_run(tmp_path, rater_url, embedder, f"{relevance}-{fusion}-{normalize}", extra) as sim:
        sim.run(8)
        assert rescore_run(sim.run_dir)["changed"] == 0  # own weights: the same
        _, ticks = read_trace(sim.run_dir)
        last = ticks[-1]
        ops = [op for op in last["memory"] if op["op"] == "retrieve"]
        assert ops
        if normalize == "minmax":
            assert all(op["normalize"] == "minmax" and set(op["ranges"]) == set(op["tiers"]) for op in ops)
        if fusion == "rrf":
            assert all(op["fusion"] == "rrf" and op["rrf_k"] == 60.0 for op in ops)
        take_back_writes_after_retrieval(sim, last)
        changed = 0
        for a_rec, a_imp, a_rel, gamma in [(1, 1, 1, 0.995), (0, 1, 0.05, 0.995), (2, 0, 0.3, 0.5)]:
            params = ScoringParams(a_rec, a_imp, a_rel, gamma, relevance=relevance, hybrid_weight=0.5, fusion=fusion,
                                   normalize=normalize)
            for op in ops:
                memory = sim.memories[op["agent"]]
                memory.config = memory.config.model_copy(update={"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel,
                                                                  "gamma": gamma})
                live = memory.retrieve(embedder.embed([op["query"]])[0], last["time"], query_text=op["query"])
                again = rerank(op["candidates"], op["tiers"], RetrievalRule.from_record(op), params, op.get("ranges"))
                assert [x[0] for x in again] == [r.id for r in live]
                assert [x[2] for x in again] == pytest.approx([r.score for r in live], abs=1e-6)
                changed += [x[0] for x in again] != [r["id"] for r in op["results"]]
        assert changed
    if normalize == "minmax":
        shown = format_explanation(explain_tick(sim.run_dir, ops[0]["agent"], last["tick"]))
        assert "rec/imp/rel minmax" in shown
