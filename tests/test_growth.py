"""Bounded memory growth: rehearsal (memories in use restart their long-term decay) and the decay horizon.

Issue 11 §3; the measurement is ``bench/memory_growth.py`` and ``docs/scale.md`` ("Memory growth over a week").
"""

import json
import math

import numpy as np
import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.config import MemoryConfig, load_config
from simulacra.memory.stream import ACCESS_KEY, AgentMemory
from simulacra.simulation import Simulation
from simulacra.tick import used_memories
from tests.conftest import DATA, unit
from tests.test_memory import DIM, make, rec
from tests.test_resume import SETTINGS, stores, tick_lines

HOUR = 60.0


def mk(tmp_path, **cfg):
    """Ann's memory, consolidating however few short-term memories it holds."""
    return make(tmp_path, short_term_min_entries=0, **cfg)


def long_term_pair(mem, t0=600.0, rating=6):
    """Two memories promoted to long-term at ``t0`` (same rating); returns them (in order) and ``t0``."""
    recs = [rec("ann", "Bram mends the nets.", t0 - 120, rating), rec("ann", "The ferry is late.", t0 - 110, rating)]
    mem.add(recs, np.stack([unit(1), unit(0, 1)]))
    ops = mem.consolidate(t0, force=True)
    assert [o["op"] for o in ops] == ["move", "move"]
    return recs, t0


def test_the_shipped_default_rehearses_and_forgets_within_days():
    cfg = MemoryConfig()
    assert cfg.rehearse is True
    # an unused memory of importance 0.6 (the lowest promoted rating) falls under the floor within two days
    # (importance-dependent decay: a rating r above the pivot decays as if (pivot / r) ** p hours passed per hour)
    p, pivot = cfg.decay_importance_exponent, cfg.decay_importance_pivot
    rate = math.log(cfg.long_term_decay_per_hour) * min(1.0, pivot / 6) ** p
    hours = math.log(cfg.forget_floor / 0.6) / rate
    assert 12 < hours < 2 * 24


def test_marking_restarts_the_long_term_decay_clock(tmp_path):
    mem = mk(tmp_path, long_term_decay_per_hour=0.9, decay_importance_exponent=0, forget_floor=0.1)
    (used, unused), t0 = long_term_pair(mem)
    # 0.6 * 0.9 ** h < 0.1 from h = 17.01 game hours on
    ops = mem.mark_accessed([used.id], t0 + 10 * HOUR, "retrieved")
    assert ops == [{"op": "rehearse", "agent": "ann", "ids": [used.id], "tiers": ["long_term"], "reason": "retrieved",
                    "time": t0 + 10 * HOUR}]
    got = mem.long_term.get(used.id)
    assert got.long_term_since == t0 and got.last_accessed == t0 + 10 * HOUR and got.decay_since == t0 + 10 * HOUR
    imp = dict(zip(mem.long_term.ids, mem.long_term.importance(t0 + 12 * HOUR, mem.params)))
    assert imp[used.id] == pytest.approx(0.6 * 0.9 ** 2)
    assert imp[unused.id] == pytest.approx(0.6 * 0.9 ** 12)
    # retrieval scores the importance from the same clock
    hit = {m.id: m for m in mem.retrieve(unit(1), t0 + 12 * HOUR, tiers=["long_term"], top_k=2, threshold=-1)}
    assert hit[used.id].importance == pytest.approx(0.6 * 0.9 ** 2)
    forgot = mem.forget_decayed(t0 + 18 * HOUR)
    assert [(o["id"], o["reason"]) for o in forgot] == [(unused.id, "decayed importance < 0.1")]
    assert used.id in mem.long_term and unused.id not in mem.long_term
    # ... and the rehearsed one goes too once unused for as long
    assert [o["id"] for o in mem.forget_decayed(t0 + 28 * HOUR)] == [used.id]


def test_marking_is_explicit_selective_and_idempotent(tmp_path):
    mem = mk(tmp_path)
    (a, b), t0 = long_term_pair(mem)
    fresh = rec("ann", "A gull steals a fish.", t0 + 5, 4)
    mem.add([fresh], np.stack([unit(0, 0, 1)]))
    before = {r.id: r for t in ("short_term", "long_term") for r in mem.tier(t).records}
    mem.retrieve(unit(1), t0 + 30, top_k=3, threshold=-1)  # retrieval alone writes nothing
    assert {r.id: r for t in ("short_term", "long_term") for r in mem.tier(t).records} == before
    ops = mem.mark_accessed([b.id, fresh.id, "static-or-unknown", b.id], t0 + 30, "retrieved")
    assert ops[0]["ids"] == [b.id, fresh.id] and ops[0]["tiers"] == ["long_term", "short_term"]
    assert mem.mark_accessed([b.id, fresh.id], t0 + 30, "retrieved") == []  # already marked at this minute
    assert mem.long_term.get(a.id).last_accessed is None
    # a short-term memory has no decay clock yet; once promoted it decays from the promotion
    assert mem.short_term.get(fresh.id).decay_since is None


def test_a_restore_puts_back_the_marks_of_the_checkpoint(tmp_path):
    mem = mk(tmp_path, write_behind=True, long_term_decay_per_hour=0.9)
    (a, b), t0 = long_term_pair(mem)
    mem.mark_accessed([a.id], t0 + HOUR)
    snap = mem.snapshot()
    assert snap[ACCESS_KEY] == {a.id: t0 + HOUR}
    json.dumps(snap)  # goes into checkpoint.json as it is
    before = [(r.id, r.last_accessed, r.decay_since) for r in mem.long_term.records]
    imp_before = mem.long_term.importance(t0 + 5 * HOUR, mem.params).copy()
    # after the checkpoint: both marked again, one forgotten, then the run is killed
    mem.mark_accessed([a.id, b.id], t0 + 3 * HOUR)
    mem.forget_decayed(t0 + 40 * HOUR)
    assert len(mem.long_term) == 0
    counts = mem.restore(snap, 0.0, None, None)
    assert counts["restored"] == 2
    assert [(r.id, r.last_accessed, r.decay_since) for r in mem.long_term.records] == before
    np.testing.assert_array_equal(mem.long_term.importance(t0 + 5 * HOUR, mem.params), imp_before)
    # a reopened store reads the same marks from Chroma
    mem.save_marks()
    mem.flush()
    again = AgentMemory("ann", tmp_path / "ann", mem.config, DIM, client=mem.client)
    assert [(r.id, r.last_accessed) for r in again.long_term.records] == [(a.id, t0 + HOUR), (b.id, None)]


def test_a_checkpoint_without_marks_clears_them(tmp_path):
    mem = mk(tmp_path)
    (a, _), t0 = long_term_pair(mem)
    snap = {k: v for k, v in mem.snapshot().items() if k != ACCESS_KEY}  # written before marks were recorded
    mem.mark_accessed([a.id], t0 + HOUR)
    mem.restore(snap, 0.0, None, None)
    assert mem.long_term.get(a.id).last_accessed is None


def test_used_memories_are_the_results_and_the_evidence():
    ops = [
        {"op": "add", "agent": "ann", "id": "x"},
        {"op": "retrieve", "agent": "ann", "results": [{"id": "m1"}, {"id": "m2"}]},
        {"op": "retrieve", "agent": "ben", "results": []},
        {"op": "retrieve", "agent": "ann", "results": [{"id": "m2"}, {"id": "m3"}]},
        {"op": "reflect", "agent": "ann", "evidence": ["m9", "m1"], "insights": []},
    ]
    assert used_memories(ops) == {"ann": {"retrieved": ["m1", "m2", "m3"], "reflection evidence": ["m9", "m1"]},
                                  "ben": {"retrieved": []}}


# ----------------------------------------------------------------- a real run of the tiny town
def tiny_config(rater_url, *more):
    # consolidated every tick and a steep decay, so that rehearsal decides what stays within 12 ticks
    return load_config(None, [f"rater.url={rater_url}", *SETTINGS, "memory.promote_threshold=0.1",
                              "memory.consolidation_interval_minutes=10", "memory.consolidation_age_minutes=0",
                              "memory.short_term_min_entries=0", "memory.long_term_decay_per_hour=0.5",
                              "memory.decay_importance_exponent=0", "memory.forget_floor=0.1", *more])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, rater_url):
    """The tiny town for 12 ticks: with rehearsal (uninterrupted, and stopped after 5 ticks with checkpoints every 3
    ticks then resumed), and without."""
    from simulacra.embeddings import build_embedder

    db = tmp_path_factory.mktemp("growth")
    embedder = build_embedder()
    out = {}
    for name, more in (("on", ["simulation.checkpoint_every=3"]), ("off", ["memory.rehearse=false"])):
        with Simulation.create(DATA / "tiny.yaml", tiny_config(rater_url, *more), personas_dir=DATA / "personas",
                               db_dir=db, run_name=name, embedder=embedder) as sim:
            sim.run(12)
        out[name] = db / name
    with Simulation.create(DATA / "tiny.yaml", tiny_config(rater_url, "simulation.checkpoint_every=3"),
                           personas_dir=DATA / "personas", db_dir=db, run_name="cut", embedder=embedder) as sim:
        for _ in range(5):
            sim.step()
    assert read_checkpoint(db / "cut")["ticks_done"] == 3
    with Simulation.resume(db / "cut", embedder=embedder) as sim:
        sim.run(9)
    out["cut"] = db / "cut"
    return out


def ticks_of(run_dir):
    return [json.loads(x) for x in tick_lines(run_dir) if x]


def test_a_run_rehearses_exactly_what_its_ticks_used(runs):
    ticks = ticks_of(runs["on"])
    rehearsed = 0
    for t in ticks:
        used = used_memories(t["memory"])
        ops = [op for op in t["memory"] if op["op"] == "rehearse"]
        for op in ops:
            assert op["time"] == t["time"] and op["reason"] in ("retrieved", "reflection evidence")
            assert set(op["ids"]) <= set(used[op["agent"]][op["reason"]])
            assert set(op["tiers"]) <= {"short_term", "long_term"}
            rehearsed += len(op["ids"])
        # rehearsal comes before the tick's consolidation
        kinds = [op["op"] for op in t["memory"]]
        if "rehearse" in kinds and "forget" in kinds:
            assert max(i for i, k in enumerate(kinds) if k == "rehearse") < min(
                i for i, k in enumerate(kinds) if k == "forget")
    assert rehearsed > 0
    # every episodic memory a retrieval returned carries the mark of its last use
    last: dict[tuple[str, str], float] = {}
    for t in ticks:
        for op in t["memory"]:
            if op["op"] == "rehearse":
                last.update({(op["agent"], i): op["time"] for i in op["ids"]})
    final = stores(runs["on"])
    for agent, tiers in final.items():
        for tier in ("short_term", "long_term"):
            for i, (_, meta, _) in tiers[tier].items():
                assert meta.get("last_accessed") == last.get((agent, i)), (agent, tier, i)
    assert not any(op["op"] == "rehearse" for t in ticks_of(runs["off"]) for op in t["memory"])


def test_access_marks_reach_chroma_at_whole_checkpoints_not_every_tick(tmp_path, rater_url, monkeypatch):
    """Rehearsal marks change the mirror at once; Chroma gets them in one update per tier at a whole checkpoint or
    when a checkpointed run closes (the checkpoints hold them meanwhile), not with one update per agent and tier
    every tick (about a fifth of a tick's time, docs/scale.md)."""
    from chromadb.api.models.Collection import Collection

    from simulacra.embeddings import CachedEmbedder, SentenceTransformerEmbedder

    updates = []
    real = Collection.update

    def counted(self, *args, **kwargs):
        updates.append(self.name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Collection, "update", counted)
    sim = Simulation.create(DATA / "tiny.yaml", tiny_config(rater_url), personas_dir=DATA / "personas",
                            db_dir=tmp_path, run_name="lazy", embedder=CachedEmbedder(SentenceTransformerEmbedder()))
    try:
        for _ in range(8):
            sim.step()  # journal checkpoints only
        marked = sum(1 for t in ticks_of(tmp_path / "lazy") for op in t["memory"] if op["op"] == "rehearse")
        assert marked >= 8 and not updates
        mirror = {pid: {r.id: r.last_accessed for t in ("short_term", "long_term")
                        for r in sim.rt.memories[pid].tier(t).records} for pid in sim.rt.agents}
        assert any(v is not None for m in mirror.values() for v in m.values())
        ck = read_checkpoint(tmp_path / "lazy")["memory"]
        for pid, marks in mirror.items():  # the checkpoint has every mark the mirror has
            assert ck[pid]["last_accessed"] == {i: v for i, v in marks.items() if v is not None}
    finally:
        sim.close()
    assert len(updates) <= 2 * len(mirror)  # one save: at most one update per agent and episodic tier
    for agent, tiers in stores(tmp_path / "lazy").items():
        for tier in ("short_term", "long_term"):
            assert {i: meta.get("last_accessed") for i, (_, meta, _) in tiers[tier].items()} == {
                i: v for i, v in mirror[agent].items() if i in tiers[tier]}, (agent, tier)


def test_inspect_tells_what_a_tick_rehearsed(runs):
    from simulacra.explain import explain_tick, format_explanation

    tick, op = next((t["tick"], op) for t in ticks_of(runs["on"]) for op in t["memory"] if op["op"] == "rehearse")
    e = explain_tick(runs["on"], op["agent"], tick)
    assert {"reason": op["reason"], "ids": op["ids"]} in e["rehearsed"]
    assert f"rehearsed {len(op['ids'])} memories ({op['reason']})" in format_explanation(e)


def test_rehearsal_keeps_what_is_used_and_the_rest_is_forgotten(runs):
    def forgotten_used(run_dir):
        """Long-term memories forgotten after a retrieval had returned them, and all long-term forgets."""
        returned, lost, forgets = set(), 0, 0
        for t in ticks_of(run_dir):
            for op in t["memory"]:
                if op["op"] == "retrieve":
                    returned |= {(op["agent"], r["id"]) for r in op["results"]}
                elif op["op"] == "forget" and op["tier"] == "long_term":
                    forgets += 1
                    lost += (op["agent"], op["id"]) in returned
        return lost, forgets

    lost_on, forgets_on = forgotten_used(runs["on"])
    lost_off, forgets_off = forgotten_used(runs["off"])
    assert forgets_off > 0 and lost_off > 0  # the steep decay forgets memories that were in use
    assert lost_on < lost_off and forgets_on < forgets_off


def test_a_resumed_run_rehearses_to_the_identical_end(runs):
    assert tick_lines(runs["cut"]) == tick_lines(runs["on"])
    got, want = stores(runs["cut"]), stores(runs["on"])
    for agent in want:
        for tier in ("static", "short_term", "long_term"):
            assert got[agent][tier] == want[agent][tier], (agent, tier)


def test_rescore_stays_exact_under_rehearsal(runs):
    from simulacra.rescore import rescore_run

    report = rescore_run(runs["on"])  # each retrieval under its own profile
    assert report["retrievals"] > 0 and report["rescored"] == report["retrievals"] and report["changed"] == 0


def test_the_replay_estimate_forgets_by_the_same_rule():
    from bench.growth_replay import replay

    head = {"agents": ["ann"], "start_minute": 0, "tick_minutes": 60}
    ticks = [{"time": 0, "memory": [{"op": "move", "agent": "ann", "id": "a", "importance": 0.6},
                                    {"op": "move", "agent": "ann", "id": "b", "importance": 0.6}]}]
    for h in range(1, 31):
        ops = []
        if h % 10 == 0:  # "a" is used every ten hours; "b" is asked for once, at hour 30
            ops.append({"op": "retrieve", "agent": "ann", "purpose": "focus", "results": [
                {"id": "a", "tier": "long_term"}] + ([{"id": "b", "tier": "long_term"}] if h == 30 else [])})
        ticks.append({"time": h * 60, "memory": ops})
    on = replay(head, ticks, 0.93, rehearse=True)
    off = replay(head, ticks, 0.93, rehearse=False)
    # 0.6 * 0.93 ** h < 0.1 from h = 24.7: without rehearsal both are gone by hour 25, with it only "b"
    assert [r["long_term"]["mean"] for r in on["samples"]][24:27] == [2.0, 1.0, 1.0]  # after hours 24, 25, 26
    assert [r["long_term"]["mean"] for r in off["samples"]][24:27] == [2.0, 0.0, 0.0]
    assert on["forgotten"] == 1 and off["forgotten"] == 2
    # retrieval results at hours 10, 20, 30: 4 long-term hits; "b" at hour 30 is lost either way, "a" only without
    assert on["lost"] == {"all": 0.25, "focus": 0.25} and off["lost"] == {"all": 0.5, "focus": 0.5}
