"""memory.reinforce_repeats: consolidation reinforces a long-term memory instead of adding a copy of its text."""

import json

import numpy as np
import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.config import load_config
from simulacra.memory.stream import reinforced_id
from simulacra.simulation import Simulation
from tests.conftest import DATA, unit
from tests.test_memory import make, rec
from tests.test_resume import SETTINGS, TICKS, stores, tick_lines

ROUTINE = "Bram is mending nets at the harbour."


def day_of(mem, day, rating=7, extra=()):
    """Four memories at 06:00 + day, one a repeat of ROUTINE; consolidated at 08:00 + day."""
    t = day * 1440 + 360
    recs = [rec("ann", ROUTINE, t, rating)] + [rec("ann", f"other {day} {i}", t + i, 2) for i in range(3)]
    recs += [rec("ann", x, t + 5, 8) for x in extra]
    mem.add(recs, np.stack([unit(1)] + [unit(0, 1, i) for i in range(3)] + [unit(0, 0, 1, i) for i in extra]))
    return mem.consolidate(t + 120, force=True), t


def routine(mem):
    return [r for r in mem.long_term.records if r.text == ROUTINE]


def test_repeated_text_keeps_one_long_term_memory_with_refreshed_decay(tmp_path):
    mem = make(tmp_path, write_behind=True, reinforce_repeats=True)
    ops0, t0 = day_of(mem, 0, rating=6)
    assert [op["op"] for op in ops0 if op["text"] == ROUTINE] == ["move"]
    first = routine(mem)[0]
    ops1, t1 = day_of(mem, 1, rating=9)
    ops2, t2 = day_of(mem, 2, rating=7)
    kept = routine(mem)
    assert len(kept) == 1 and len(mem.short_term) == 0
    r = kept[0]
    assert r.long_term_since == t2 + 120  # decay restarts at the last consolidation
    assert r.timestamp == t2 and r.tick == int(t2 // 10)  # the newest observation
    assert r.rating == 9  # the highest of the three
    assert r.extra["first_observed"] == t0 and r.extra["repeats"] == 3
    # the decayed importance is that of a memory just promoted, not of one two days old
    imp = dict(zip(mem.long_term.ids, mem.long_term.importance(t2 + 120, mem.params)))
    assert imp[r.id] > 0.89
    (op,) = [op for op in ops2 if op["op"] == "reinforce"]
    assert op["id"] == r.id and op["from_ids"] == [rec("ann", ROUTINE, t2, 7).id]
    assert op["replaces"] == [reinforced_id("ann", [first.id, rec("ann", ROUTINE, t1, 9).id])]
    assert not [o for o in ops2 if o["op"] in ("move", "forget") and o["text"] == ROUTINE]
    # the replaced long-term memory waits for the next checkpoint to leave Chroma; a restore can bring it back
    replaced = op["replaces"][0]
    assert replaced not in mem.long_term and mem.long_term.removed(replaced)[0].id == replaced
    mem.flush()
    assert mem.long_term.removed(replaced) is None and not mem.long_term.queued_deletes()


def test_off_by_default_the_copies_accumulate(tmp_path):
    mem = make(tmp_path, long_term_decay_per_hour=0.99, decay_importance_exponent=0)  # none decays away in 3 days
    for d in range(3):
        ops, _ = day_of(mem, d)
        assert not [o for o in ops if o["op"] == "reinforce"]
    assert len(routine(mem)) == 3


def test_repeats_inside_one_consolidation_fold_into_one(tmp_path):
    mem = make(tmp_path, reinforce_repeats=True)
    recs = [rec("ann", ROUTINE, 400 + 10 * i, 6 + i) for i in range(3)] + [rec("ann", "new news", 405, 8)]
    mem.add(recs, np.stack([unit(1)] * 3 + [unit(0, 1)]))
    ops = mem.consolidate(600, force=True)
    assert sorted(op["op"] for op in ops) == ["move", "reinforce"]
    (r,) = routine(mem)
    assert r.rating == 8 and r.timestamp == 420 and r.extra["repeats"] == 3 and r.extra["first_observed"] == 400
    assert len(mem.long_term) == 2 and len(mem.short_term) == 0


def test_unimportant_repeats_are_forgotten_not_reinforced(tmp_path):
    mem = make(tmp_path, reinforce_repeats=True)
    day_of(mem, 0, rating=7)
    ops, _ = day_of(mem, 1, rating=3)
    assert [o["op"] for o in ops if o["text"] == ROUTINE] == ["forget"]
    assert routine(mem)[0].rating == 7 and routine(mem)[0].extra.get("repeats") is None


def test_restore_to_a_snapshot_before_a_reinforce_is_exact(tmp_path):
    mem = make(tmp_path, write_behind=True, reinforce_repeats=True)
    day_of(mem, 0, rating=6)
    t = 1440 + 360
    mem.add([rec("ann", ROUTINE, t, 9)] + [rec("ann", f"x{i}", t + i, 2) for i in range(3)],
            np.stack([unit(1)] + [unit(0, 1, i) for i in range(3)]))
    mem.flush()  # a checkpoint here
    snap = mem.snapshot()
    before = {n: [(r.id, r.rating, r.timestamp, r.long_term_since, r.extra) for r in mem.tier(n).records]
              for n in mem.tiers}
    ops = mem.consolidate(t + 120, force=True)
    assert [o["op"] for o in ops if o["text"] == ROUTINE] == ["reinforce"]
    mem.restore(snap, 0.0, None, None)
    after = {n: [(r.id, r.rating, r.timestamp, r.long_term_since, r.extra) for r in mem.tier(n).records]
             for n in mem.tiers}
    assert after == before
    # and the same consolidation again gives the same memory (same id)
    again = mem.consolidate(t + 120, force=True)
    assert [o for o in again if o["op"] == "reinforce"] == [o for o in ops if o["op"] == "reinforce"]


# ----------------------------------------------------------------- a real run of the tiny town
@pytest.fixture(scope="module")
def runs(tmp_path_factory, rater_url):
    """The tiny town for 12 ticks with reinforcement and a checkpoint every 3 ticks: an uninterrupted run, and a run
    stopped after 5 ticks (last checkpoint after tick 2, so the trash holds what ticks 3-4 replaced) then resumed."""
    from simulacra.embeddings import build_embedder

    db = tmp_path_factory.mktemp("reinforce")
    embedder = build_embedder()
    # consolidated every tick: what is perceived twice in 12 ticks is already in long-term the second time
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS, "memory.reinforce_repeats=true",
                                "memory.promote_threshold=0.1", "memory.consolidation_interval_minutes=10",
                                "memory.consolidation_age_minutes=0", "memory.short_term_min_entries=0",
                                "simulation.checkpoint_every=3"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=db, run_name="ref",
                           embedder=embedder) as sim:
        sim.run(TICKS)
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=db, run_name="cut",
                           embedder=embedder) as sim:
        for _ in range(5):
            sim.step()
    assert read_checkpoint(db / "cut")["ticks_done"] == 3
    with Simulation.resume(db / "cut", embedder=embedder) as sim:
        sim.run(TICKS - 3)
    return db / "ref", db / "cut"


def reinforce_ops(run_dir):
    ticks = [json.loads(x) for x in tick_lines(run_dir) if x]
    return ticks, [(t["tick"], op) for t in ticks for op in t["memory"] if op["op"] == "reinforce"]


def test_a_run_reinforces_and_resumes_to_the_identical_end(runs):
    ref, cut = runs
    ticks, ops = reinforce_ops(ref)
    assert ops, "the tiny town must repeat a promoted text within 12 ticks"
    assert any(op["replaces"] for _, op in ops)  # an existing long-term memory was reinforced
    assert tick_lines(cut) == tick_lines(ref)
    got, want = stores(cut), stores(ref)
    for agent in want:
        for tier in ("static", "short_term", "long_term"):
            assert got[agent][tier] == want[agent][tier], (agent, tier)
    # one long-term memory per text at the end
    for agent, tiers in want.items():
        texts = [d for d, _, _ in tiers["long_term"].values()]
        assert len(texts) == len(set(texts)), agent


def test_replay_inspect_and_rescore_follow_reinforcements(runs):
    from simulacra.explain import explain_tick, format_explanation
    from simulacra.rescore import rescore_run
    from simulacra.viewer.state import ReplayState

    ref, _ = runs
    ticks, ops = reinforce_ops(ref)
    replay = ReplayState.load(ref)
    final = stores(ref)
    for agent in final:  # the replayed counts at the end are the stores' counts
        counts = replay.state_at(replay.last_tick).agents[agent].counts
        assert counts["short_term"] == len(final[agent]["short_term"])
        assert counts["long_term"] == len(final[agent]["long_term"])
    tick, op = ops[0]
    e = explain_tick(ref, op["agent"], tick)
    assert op["text"] in e["reinforced"]
    assert f"reinforced in long-term: {op['text']}" in format_explanation(e)
    report = rescore_run(ref)  # each retrieval under its own profile
    assert report["retrievals"] > 0 and report["rescored"] == report["retrievals"] and report["changed"] == 0
