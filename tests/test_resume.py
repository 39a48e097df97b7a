"""Checkpoint and resume: a run killed with SIGKILL at chosen moments (real subprocesses) and resumed ends exactly as
an uninterrupted run of the same seed, in its trace and in every memory store."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys

import numpy as np
import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.config import load_config
from simulacra.errors import CheckpointError
from simulacra.simulation import Simulation
from simulacra.trace import TraceWriter
from tests.conftest import DATA, ROOT, TELL_ALL

TICKS = 12
SEED = 3
#: a town where, within 12 ticks, agents talk, consolidation promotes and forgets, and reflections are made; its
#: stores reach Chroma every third tick (memory.store_flush_minutes), the store journal holds the ticks between
SETTINGS = [TELL_ALL, "simulation.conversation_probability=1.0", "reflection.threshold=40",
            "memory.consolidation_interval_minutes=30", "memory.consolidation_age_minutes=20",
            "memory.promote_threshold=0.3", "memory.store_flush_minutes=30", f"simulation.seed={SEED}"]
PERCEPT_KINDS = {"event", "observation"}


def cli(db, rater_url, *args, kill_at=None, kill_log=None):
    env = {k: v for k, v in os.environ.items() if k not in ("SIMULACRA_KILL_AT", "SIMULACRA_KILL_LOG")}
    if kill_at is not None:
        env["SIMULACRA_KILL_AT"] = kill_at
    if kill_log is not None:
        env["SIMULACRA_KILL_LOG"] = str(kill_log)
    return subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--db-dir", str(db), "--rater-url", rater_url,
                           "--quiet", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


def new_run_args(name):
    args = ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--ticks", str(TICKS),
            "--run-name", name]
    for s in SETTINGS:
        args += ["--set", s]
    return args


def tick_lines(run_dir):
    return (run_dir / "trace.jsonl").read_bytes().split(b"\n")[1:]


def stores(run_dir):
    """agent -> tier -> {id: (text, metadata, embedding bytes)}, read straight from Chroma."""
    from tests.conftest import read_stores

    return read_stores(run_dir, ("ann", "ben", "cal"))


#: the order a tick reaches the kill phases in (the deletes, ``forget``, follow the tick's checkpoint)
IN_TICK = ("tick", "remember1", "remember2", "reflect", "rehearse", "consolidate", "journal", "chroma", "persist",
           "trace", "checkpoint", "forget", "marks")
#: what a kill in each phase interrupts: the mirrors' writes, the store journal, Chroma, the trace
KILLED_IN = ("remember1", "remember2", "reflect", "rehearse", "journal", "chroma", "persist", "forget", "trace")


def reachable(ref_dir):
    """(tick, phase) pairs the reference run passed through (``SIMULACRA_KILL_LOG``), in the order reached; the
    ``marks`` of the last whole checkpoint, after the last tick, are left out."""
    lines = (ref_dir.parent / "kill.log").read_text().split()
    out = [(int(t), p) for t, p in zip(lines[::2], lines[1::2]) if t != "None"]
    return [(t, p) for t, p in out if t < TICKS - 1 or p != "marks"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, rater_url):
    """An uninterrupted run of the CLI: its folder and its tick records (the kill points it reached in
    ``kill.log`` beside it, :func:`reachable`)."""
    db = tmp_path_factory.mktemp("ref")
    r = cli(db, rater_url, *new_run_args("ref"), kill_log=db / "kill.log")
    assert r.returncode == 0, r.stderr
    run_dir = db / "ref"
    return run_dir, [json.loads(x) for x in tick_lines(run_dir) if x]


def test_sigkill_at_random_moments_then_resume_ends_byte_identical(tmp_path, rater_url, reference):
    ref_dir, ref_ticks = reference
    points = reachable(ref_dir)
    phases = {p for _, p in points}
    # the run must exercise what the kills are meant to hit
    assert set(KILLED_IN) <= phases
    # Chroma is written every third tick, the journal every tick that wrote a memory
    assert {t for t, p in points if p in ("persist", "chroma", "forget")} == {2, 5, 8, 11}
    assert len({t for t, p in points if p == "journal"} - {2, 5, 8, 11}) >= 6
    rng = random.Random(20261124)
    kills = [rng.choice([x for x in points if x[1] == phase]) for phase in KILLED_IN]
    kills += rng.sample(points, 3)
    kills.sort(key=lambda k: (k[0], IN_TICK.index(k[1])))
    run_dir = tmp_path / "k"
    for i, (tick, phase) in enumerate(kills):
        args = new_run_args("k") if i == 0 else ["--resume", str(run_dir)]
        r = cli(tmp_path, rater_url, *args, kill_at=f"tick={tick}:phase={phase}")
        assert r.returncode == -signal.SIGKILL, (tick, phase, r.returncode, r.stderr[-2000:])
        if phase == "trace":  # killed in the middle of the tick's line
            assert not (run_dir / "trace.jsonl").read_bytes().endswith(b"\n")
        ck = read_checkpoint(run_dir)
        # the killed tick is not in the checkpoint, but for a kill after the tick's checkpoint (deletes, marks)
        assert ck["ticks_done"] == tick + (phase in ("forget", "marks"))
    r = cli(tmp_path, rater_url, "--resume", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert tick_lines(run_dir) == tick_lines(ref_dir)
    got, want = stores(run_dir), stores(ref_dir)
    for agent in want:
        for tier in want[agent]:
            assert got[agent][tier].keys() == want[agent][tier].keys(), (agent, tier)
            assert got[agent][tier] == want[agent][tier], (agent, tier)
    import chromadb  # nothing deleted was copied anywhere: no trash collection
    from chromadb.config import Settings

    from simulacra.runtime import forget_chroma_clients

    client = chromadb.PersistentClient(path=str(run_dir / "chroma"), settings=Settings(anonymized_telemetry=False))
    assert {c.name for c in client.list_collections()} == {"static", "short_term", "long_term"}
    forget_chroma_clients()
    assert sum(len(s["long_term"]) for s in want.values()) > 0


def test_a_kill_while_access_marks_are_saved_resumes_to_the_identical_stores(tmp_path, rater_url, reference):
    """Access marks reach Chroma after a whole checkpoint (the run's last one here); killed halfway through saving
    them, the stores hold some agents' marks and not others': the resume takes them from the checkpoint."""
    ref_dir, _ = reference
    r = cli(tmp_path, rater_url, *new_run_args("m"), kill_at=f"tick={TICKS - 1}:phase=marks")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert read_checkpoint(tmp_path / "m")["ticks_done"] == TICKS
    r = cli(tmp_path, rater_url, "--resume", str(tmp_path / "m"))
    assert r.returncode == 0, r.stderr
    assert tick_lines(tmp_path / "m") == tick_lines(ref_dir)
    got, want = stores(tmp_path / "m"), stores(ref_dir)
    for agent in want:
        for tier in ("static", "short_term", "long_term"):
            assert got[agent][tier] == want[agent][tier], (agent, tier)


def test_checkpoints_every_few_ticks_without_a_journal_hold_the_run_s_last_ticks(tmp_path, rater_url, reference):
    """Checkpoints every 5 ticks and the stores written to Chroma at each (no store journal): the run's last
    checkpoint, after tick 11, lists the memories of ticks 10 and 11, which no checkpoint tick wrote; it writes them
    first, so a kill right after it resumes to the uninterrupted run's end."""
    ref_dir, _ = reference
    args = new_run_args("e") + ["--set", "simulation.checkpoint_every=5", "--set", "memory.store_flush_minutes=0"]
    r = cli(tmp_path, rater_url, *args, kill_at=f"tick={TICKS - 1}:phase=marks")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert read_checkpoint(tmp_path / "e")["ticks_done"] == TICKS
    assert not (tmp_path / "e" / "stores.journal").exists()
    r = cli(tmp_path, rater_url, "--resume", str(tmp_path / "e"))
    assert r.returncode == 0, r.stderr
    assert tick_lines(tmp_path / "e") == tick_lines(ref_dir)
    assert stores(tmp_path / "e") == stores(ref_dir)


def test_an_exception_in_a_stage_stops_the_run_resumably(tmp_path, rater_url, reference):
    ref_dir, ref_ticks = reference
    tick = min(t for t, phase in reachable(ref_dir) if phase == "remember2" and t >= 3)  # half the stores written
    r = cli(tmp_path, rater_url, *new_run_args("x"), kill_at=f"tick={tick}:phase=remember2:mode=raise")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    assert "InjectedFault" in r.stderr and f"simulacra run --resume {tmp_path / 'x'}" in r.stderr
    assert read_checkpoint(tmp_path / "x")["ticks_done"] == tick
    r = cli(tmp_path, rater_url, "--resume", str(tmp_path / "x"))
    assert r.returncode == 0, r.stderr
    assert tick_lines(tmp_path / "x") == tick_lines(ref_dir)


def copy_inputs(tmp_path):
    shutil.copy(DATA / "tiny.yaml", tmp_path / "tiny.yaml")
    shutil.copytree(DATA / "personas", tmp_path / "personas")
    return tmp_path / "tiny.yaml", tmp_path / "personas"


def test_resume_refuses_a_changed_persona_file_unless_allowed(tmp_path, rater_url, embedder):
    world, personas = copy_inputs(tmp_path)
    config = load_config(None, [f"rater.url={rater_url}"])
    with Simulation.create(world, config, personas_dir=personas, db_dir=tmp_path / "db", run_name="c",
                           embedder=embedder) as sim:
        sim.run(2)
    ben = personas / "ben.json"
    ben.write_text(ben.read_text() + "\n")
    with pytest.raises(CheckpointError, match=f"personas file {ben.resolve()} changed.*--allow-changed"):
        Simulation.resume(tmp_path / "db" / "c", embedder=embedder)
    with Simulation.resume(tmp_path / "db" / "c", embedder=embedder, allow_changed=True) as sim:
        assert sim.ticks_done == 2 and sim.state.tick == 2
        sim.run(1)
    world.unlink()
    with pytest.raises(CheckpointError, match=f"world file {world.resolve()} is missing"):
        Simulation.resume(tmp_path / "db" / "c", embedder=embedder)


def test_checkpoint_every_n_ticks_resumes_from_the_last_one(tmp_path, rater_url, reference):
    from simulacra.embeddings import build_embedder

    _, ref_ticks = reference
    embedder = build_embedder()  # as the CLI's run (embedding.exact)
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS, "simulation.checkpoint_every=3"])
    sim = Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                            run_name="n", embedder=embedder)
    with sim:
        for _ in range(5):  # a crash after tick 4: the last checkpoint is after tick 2
            sim.step()
    assert read_checkpoint(tmp_path / "n")["ticks_done"] == 3
    with Simulation.resume(tmp_path / "n", embedder=embedder) as sim:
        assert sim.ticks_done == 3 and len(tick_lines(tmp_path / "n")) == 4  # 3 lines and the final empty split
        sim.run(TICKS - 3)
    assert [json.loads(x) for x in tick_lines(tmp_path / "n") if x] == ref_ticks


def test_trace_resume_checks_the_recorded_length(tmp_path):
    w = TraceWriter(tmp_path / "t.jsonl", {"x": 1})
    w.write({"type": "tick", "tick": 0})
    size = w.size
    w.write({"type": "tick", "tick": 1})
    w.close()
    with pytest.raises(CheckpointError, match="does not end a line"):
        TraceWriter(tmp_path / "t.jsonl", resume_at=size - 1)
    with pytest.raises(CheckpointError, match="shorter than"):
        TraceWriter(tmp_path / "t.jsonl", resume_at=10_000)
    w = TraceWriter(tmp_path / "t.jsonl", resume_at=size)
    w.write({"type": "tick", "tick": 7})
    w.close()
    lines = (tmp_path / "t.jsonl").read_text().splitlines()
    assert [json.loads(x).get("tick") for x in lines] == [None, 0, 7]


def test_restore_brings_back_deleted_memories_and_the_row_order(tmp_path):
    """A memory deleted after a checkpoint stays in Chroma until the stores are flushed with deletes (after the next
    checkpoint): reopened as a resume opens them, the stores give back what the checkpoint lists; once the deletes
    are flushed, only the copies in other tiers can."""
    from simulacra.config import MemoryConfig
    from simulacra.memory.records import MemoryRecord
    from simulacra.memory.stream import AgentMemory
    from simulacra.runtime import forget_chroma_clients
    from tests.conftest import unit

    cfg = MemoryConfig(short_term_min_entries=0, consolidation_age_minutes=60, promote_threshold=0.5)

    def reopen(name):
        forget_chroma_clients()
        return AgentMemory(name, tmp_path / name, cfg, 8, write_behind=True)

    mem = AgentMemory("a", tmp_path / "a", cfg, 8, write_behind=True)
    # ids chosen so that (tick, id) order, which a reopened tier has, differs from the insertion order
    recs = [MemoryRecord(id=i, text=f"memory {i}", kind="observation", rating=r, timestamp=0.0, tick=0)
            for i, r in (("m3", 9), ("m1", 2), ("m2", 7))]
    mem.add(recs, np.stack([unit(1, k) for k in range(3)]))
    mem.flush()
    snap, before = mem.snapshot(), {r.id: r for r in mem.short_term.records}
    assert snap["short_term"] == ["m3", "m1", "m2"]
    ops = mem.consolidate(1000.0, force=True)  # m3, m2 move to long-term, m1 is forgotten
    assert sorted(o["op"] for o in ops) == ["forget", "move", "move"] and len(mem.short_term) == 0
    mem.add([MemoryRecord(id="m9", text="later", kind="observation", rating=5, timestamp=1000.0, tick=6)],
            unit(0, 1)[None])
    assert mem.flush(deletes=False) == 2  # a tick's persist stage: one upsert per tier, no delete
    mem = reopen("a")  # killed before the next checkpoint, then resumed: rows sorted by (tick, id)
    assert mem.short_term.ids == ["m1", "m2", "m3", "m9"] and len(mem.long_term) == 2
    counts = mem.restore(snap, 12.0, None, None)
    assert counts == {"restored": 0, "dropped": 3}  # m9 and the long-term copies dropped
    assert mem.snapshot() == snap and mem.importance_since_reflection == 12.0
    assert {r.id: r for r in mem.short_term.records} == before  # metadata as before
    np.testing.assert_array_equal(mem.short_term.embeddings_of(["m1"])[0], unit(1, 1))
    mem.flush()
    again = reopen("a")  # the restore reached Chroma: rows sorted by (tick, id), nothing else to undo
    assert again.short_term.ids == ["m1", "m2", "m3"] and len(again.long_term) == 0
    assert again.restore(snap, 0.0, None, None) == {"restored": 0, "dropped": 0}
    assert again.short_term.ids == ["m3", "m1", "m2"]
    again.consolidate(2000.0, force=True)
    again.flush()  # a checkpoint passed: the forgotten m1 is now nowhere; m3 and m2 can come back from long-term
    with pytest.raises(CheckpointError, match="memory m1 of a's short_term tier is in the checkpoint"):
        reopen("a").restore(snap, 0.0, None, None)

    b = AgentMemory("b", tmp_path / "b", cfg, 8, write_behind=True)
    b.add(recs[::2], np.stack([unit(1, 0), unit(1, 2)]))  # m3 and m2, both promoted by consolidation
    b.flush()
    snap, before = b.snapshot(), {r.id: r for r in b.short_term.records}
    b.consolidate(1000.0, force=True)
    b.flush()  # only the long-term copies are left
    b = reopen("b")
    assert b.restore(snap, 0.0, None, None) == {"restored": 2, "dropped": 2}
    assert {r.id: r for r in b.short_term.records} == before and len(b.long_term) == 0


def test_a_resumed_run_keeps_the_world_order_of_its_agents(tmp_path, rater_url, embedder):
    """Residents not in alphabetical order (the order of ``agents``, as a world lists them): the checkpoint's JSON
    has sorted keys, and a resumed run must still visit, trace and store its agents in the run's order, so that its
    trace is byte-identical to the uninterrupted run's."""
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS])
    order = ["cal", "ann", "ben"]

    def create(name):
        return Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                                 run_name=name, embedder=embedder, agents=order)

    with create("whole") as sim:
        sim.run(6)
    with create("halves") as sim:
        sim.run(3)
    with Simulation.resume(tmp_path / "halves", embedder=embedder) as sim:
        assert list(sim.state.agents) == order
        sim.run(3)
    whole, halves = tick_lines(tmp_path / "whole"), tick_lines(tmp_path / "halves")
    assert len(whole) == 7 and halves == whole
    focus = [op["agent"] for op in json.loads(halves[4])["memory"] if op["op"] == "retrieve"][:3]
    assert focus == order  # a resumed tick visits its agents in the run's order, not the checkpoint's


def test_a_run_stopped_before_its_first_checkpoint_starts_again_from_its_header(tmp_path, rater_url, reference):
    """Stopped while it was being set up (its trace header written, its first checkpoint not yet renamed into
    place), a run has no tick to resume: ``--resume`` starts it again from the settings its header records, and it
    runs as the uninterrupted run did. A run whose checkpoint is lost after it ran ticks is not started again (that
    would replace them). With no header either, the message says what to do."""
    _, ref_ticks = reference
    r = cli(tmp_path, rater_url, *[a if a != str(TICKS) else "0" for a in new_run_args("early")])
    assert r.returncode == 0, r.stderr
    run_dir = tmp_path / "early"
    (run_dir / "checkpoint.json").unlink()  # what a kill before the first checkpoint's rename leaves
    r = cli(tmp_path, rater_url, "--resume", str(run_dir), "--ticks", "3")
    assert r.returncode == 0, r.stderr
    assert "stopped before its first checkpoint: starting it again" in r.stderr
    assert [json.loads(x) for x in tick_lines(run_dir) if x] == ref_ticks[:3]
    (run_dir / "checkpoint.json").unlink()  # lost after ticks were run: starting again would replace them
    trace = (run_dir / "trace.jsonl").read_bytes()
    r = cli(tmp_path, rater_url, "--resume", str(run_dir), "--ticks", "5")
    assert r.returncode == 2 and "no checkpoint.json, but its trace holds ticks" in r.stderr, r.stderr
    assert "--overwrite" in r.stderr and (run_dir / "trace.jsonl").read_bytes() == trace
    (run_dir / "trace.jsonl").unlink()
    r = cli(tmp_path, rater_url, "--resume", str(run_dir))
    assert r.returncode == 2 and "no checkpoint, no trace header" in r.stderr and "--overwrite" in r.stderr
