"""Write-behind memory stores: a tick reaches Chroma in at most one upsert and one delete per tier, whatever its
stages write, and Chroma (read afresh by another process) holds exactly what the in-process mirrors hold, after a run
and after SIGKILLs and a resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections import Counter
from dataclasses import replace

import numpy as np

from simulacra.checkpoint import read_checkpoint
from simulacra.config import load_config
from simulacra.memory.chroma import open_chroma
from simulacra.memory.records import MemoryRecord
from simulacra.memory.store import MemoryTier
from simulacra.simulation import Simulation
from tests.conftest import DATA, ROOT, unit
from tests.test_resume import PERCEPT_KINDS, SETTINGS, TICKS, cli, new_run_args, tick_lines

WRITES = ("upsert", "delete", "update", "add")

#: prints {"<owner>/<collection>": {id: [document, metadata without its owner, embedding]}} of a run's town store
DUMP = """
import json, sys
from pathlib import Path
import chromadb
from chromadb.config import Settings
out = {}
client = chromadb.PersistentClient(path=str(Path(sys.argv[1]) / "chroma"),
                                   settings=Settings(anonymized_telemetry=False))
for col in client.list_collections():
    got = client.get_collection(col.name).get(include=["documents", "metadatas", "embeddings"])
    for i, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"]):
        owner = meta.pop("owner")
        out.setdefault(f"{owner}/{col.name}", {})[i] = [doc, meta, [float(x) for x in emb]]
print(json.dumps(out))
"""


class Counting:
    """A Chroma collection that appends ``(label, method)`` to ``log`` for every write call, then makes it."""

    def __init__(self, inner, label: str, log: list):
        self._inner, self._label, self._log = inner, label, log

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name not in WRITES:
            return attr

        def call(*args, **kwargs):
            self._log.append((self._label, name))
            return attr(*args, **kwargs)

        return call


def tiers(sim):
    """``"<agent>/<tier>"`` -> :class:`MemoryTier` of every store of the run."""
    out = {}
    for pid, mem in sim.memories.items():
        assert mem.trash is None  # a run made now keeps no copies of deleted memories
        out.update({f"{pid}/{name}": t for name, t in mem.tiers.items()})
    if sim.shared is not None:
        out["town/shared"] = sim.shared
    return out


def mirror(sim):
    """What the mirrors hold, in :func:`chroma_dump`'s shape (embeddings as float32 bytes)."""
    return {label: {r.id: (r.text, r.to_metadata(), t.embeddings_of([r.id])[0].tobytes()) for r in t.records}
            for label, t in tiers(sim).items() if len(t)}


def chroma_dump(run_dir):
    """What Chroma holds under ``run_dir``, read by a fresh process (no client or cache of this one)."""
    r = subprocess.run([sys.executable, "-c", DUMP, str(run_dir)], capture_output=True, text=True, timeout=300,
                       cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    return {label: {i: (doc, meta, np.asarray(emb, dtype=np.float32).tobytes()) for i, (doc, meta, emb) in got.items()}
            for label, got in json.loads(r.stdout).items()}


def test_a_tier_queues_its_chroma_writes_and_flushes_them_coalesced(tmp_path):
    client = open_chroma(tmp_path / "a")
    tier = MemoryTier(client, "short_term", 8, write_behind=True)
    log: list = []
    tier.collection = Counting(tier.collection, "st", log)
    a, b, c, d = (MemoryRecord(id=x, text=f"memory {x}", kind="observation", rating=5, timestamp=0.0, tick=0)
                  for x in "abcd")
    tier.upsert([a, b], np.stack([unit(1), unit(0, 1)]))
    tier.update_metadata([replace(a, last_accessed=5.0)])
    tier.delete(["b"])
    tier.upsert([c], unit(0, 0, 1)[None])
    # the mirror sees every write at once; Chroma nothing yet
    assert tier.ids == ["a", "c"] and tier.get("a").last_accessed == 5.0 and tier.pending == 3
    assert client.get_collection("short_term").count() == 0 and log == []
    assert tier.flush() == 1 and log == [("st", "upsert")]  # b never reached Chroma: nothing to delete
    got = client.get_collection("short_term").get(include=["metadatas", "embeddings"])
    assert got["ids"] == ["a", "c"] and got["metadatas"][0]["last_accessed"] == 5.0
    np.testing.assert_array_equal(np.asarray(got["embeddings"][1], np.float32), unit(0, 0, 1))
    log.clear()
    tier.update_metadata([a])  # the access mark taken back: the key leaves Chroma's metadata
    tier.delete(["c"])
    tier.upsert([d], unit(1, 1)[None])
    tier.upsert([replace(d, rating=9)], unit(1, 1)[None])  # d twice: one row written
    assert tier.flush() == 2 and log == [("st", "upsert"), ("st", "delete")]
    got = client.get_collection("short_term").get(include=["metadatas"])
    assert dict(zip(got["ids"], got["metadatas"])) == {"a": a.to_metadata(), "d": {**d.to_metadata(), "rating": 9,
                                                                                   "importance_score": 0.9}}
    assert tier.flush() == 0 and tier.pending == 0
    log.clear()
    tier.update_metadata([replace(d, last_accessed=7.0)])  # metadata alone: an update, no embedding sent again
    assert tier.flush() == 1 and log == [("st", "update")]
    assert client.get_collection("short_term").get(ids=["d"])["metadatas"][0]["last_accessed"] == 7.0
    # reopened from Chroma: the same tier
    again = MemoryTier(open_chroma(tmp_path / "a"), "short_term", 8)
    assert sorted(again.ids) == ["a", "d"] and again.get("d") == tier.get("d") and again.get("a").last_accessed is None


def test_a_tick_writes_each_tier_at_most_once_and_chroma_ends_as_the_mirror(tmp_path, rater_url, embedder):
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS])
    sim = Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                            run_name="w", embedder=embedder)
    log: list = []
    for label, tier in tiers(sim).items():
        tier.collection = Counting(tier.collection, label, log)
    per_tick: list[Counter] = []

    def on_tick(_):
        per_tick.append(Counter(log))
        log.clear()

    with sim:
        summary = sim.run(TICKS, on_tick)
        assert summary["ticks"] == TICKS and not summary["stopped"]
        per_tick.append(Counter(log))  # the end of the run: the marks its last whole checkpoint queued
        assert all(t.pending == 0 for t in tiers(sim).values())
        want = mirror(sim)
    ticks = [json.loads(x) for x in tick_lines(tmp_path / "w") if x]
    # the run makes the writes the old store sent one call each: both remember batches into one agent's
    # short-term tier in one tick, rehearsal marks, consolidation moving and forgetting (deletes), reflection
    both = [t["tick"] for t in ticks for pid in ("ann", "ben", "cal")
            if {o["kind"] in PERCEPT_KINDS for o in t["memory"] if o["op"] == "add" and o["agent"] == pid
                and o["tier"] == "short_term"} == {True, False}]
    ops = Counter(o["op"] for t in ticks for o in t["memory"])
    assert both and ops["rehearse"] and ops["move"] and ops["forget"] and ops["reflect"]
    # per tier and tick, for the whole town (every agent's tier is one collection): one write (an upsert, or a
    # metadata update when only access marks changed), one delete
    calls = [Counter((label.split("/")[1], "delete" if method == "delete" else "write")
                     for (label, method), n in c.items() for _ in range(n)) for c in per_tick]
    assert all(n <= 1 for c in calls for n in c.values()), [c for c in calls if max(c.values(), default=0) > 1]
    # the stores reach Chroma every third tick (SETTINGS: memory.store_flush_minutes); the ticks between only journal
    assert [i for i, c in enumerate(per_tick[:TICKS]) if c] == [2, 5, 8, 11]
    assert not any(method == "add" for c in per_tick for _, method in c)
    written = Counter((label.split("/")[1], method) for c in per_tick for label, method in c)
    assert {("short_term", "upsert"), ("long_term", "upsert"), ("long_term", "update"),
            ("short_term", "delete")} <= set(written)
    # the first agent's tiers carry the town's writes: the call counts do not grow with the agents
    assert sum(sum(c.values()) for c in per_tick) <= 4 * len(per_tick)
    assert chroma_dump(tmp_path / "w") == want


def test_chroma_holds_the_mirror_after_sigkills_and_a_resume(tmp_path, rater_url):
    from simulacra.embeddings import build_embedder

    run_dir = tmp_path / "k"
    # the stores reach Chroma at ticks 2, 5, 8 and 11 (SETTINGS), the journal holds the ticks between: killed after
    # tick 5's checkpoint, before the deletes of ticks 3-5, then after the first collection's write of tick 8 (ticks
    # 3, 6 and 9 consolidate: memories move to long-term and are forgotten)
    r = cli(tmp_path, rater_url, *new_run_args("k"), kill_at="tick=5:phase=forget")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert read_checkpoint(run_dir)["ticks_done"] == 6
    r = cli(tmp_path, rater_url, "--resume", str(run_dir), kill_at="tick=8:phase=persist")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    assert read_checkpoint(run_dir)["ticks_done"] == 8
    assert (run_dir / "stores.journal").stat().st_size > 0  # ticks 6 and 7 are in the journal, not in Chroma
    embedder = build_embedder()  # as the CLI's run (embedding.exact)
    with Simulation.resume(run_dir, embedder=embedder) as sim:
        restored = mirror(sim)
        assert sum(len(t) for label, t in restored.items() if label.endswith("/short_term")) > 0
        assert chroma_dump(run_dir) == restored  # the roll-back is in Chroma before the first tick
        sim.run(TICKS - sim.ticks_done)
        want = mirror(sim)
    assert chroma_dump(run_dir) == want
    assert sum(len(t) for label, t in want.items() if label.endswith("/long_term")) > 0



def test_a_run_in_the_per_agent_layout_resumes_with_its_trash_to_the_identical_end(tmp_path, rater_url, embedder,
                                                                                     monkeypatch):
    """A run made before the town store (one Chroma folder per agent, deleted memories copied to a trash) and killed
    with a memory in its trash: the resume finds the layout, brings the memory back from the trash, empties it, and
    ends with the trace and the memories of a run made in the town layout."""
    import chromadb
    from chromadb.config import Settings

    import simulacra.runtime as runtime
    from simulacra.memory.chroma import EmbeddedChroma
    from simulacra.runtime import forget_chroma_clients
    from tests.conftest import read_stores

    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="ref", embedder=embedder) as sim:
        sim.run(TICKS)
    made = runtime.store_location
    monkeypatch.setattr(runtime, "store_location", lambda cfg, run_dir: EmbeddedChroma(run_dir, layout="owners"))
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="old", embedder=embedder) as sim:
        sim.run(6)
    monkeypatch.setattr(runtime, "store_location", made)
    run_dir = tmp_path / "old"
    assert not (run_dir / "chroma").exists() and (run_dir / "ann" / "chroma.sqlite3").is_file()
    # what the old code left when killed between deleting a memory and the next checkpoint: the memory in the trash
    forget_chroma_clients()
    client = chromadb.PersistentClient(path=str(run_dir / "ann"), settings=Settings(anonymized_telemetry=False))
    lt = client.get_collection("long_term")
    got = lt.get(include=["documents", "metadatas", "embeddings"], limit=1)
    assert got["ids"], "the first 6 ticks promote memories to long-term"
    client.get_or_create_collection("trash", embedding_function=None, configuration={"hnsw": {"space": "l2"}}).upsert(
        ids=got["ids"], documents=got["documents"], metadatas=got["metadatas"], embeddings=got["embeddings"])
    lt.delete(ids=got["ids"])
    forget_chroma_clients()
    with Simulation.resume(run_dir, embedder=embedder) as sim:
        assert sim.rt.location.layout == "owners" and sim.memories["ann"].trash is not None
        assert got["ids"][0] in sim.memories["ann"].long_term  # back from the trash
        sim.run(TICKS - sim.ticks_done)
        assert len(sim.memories["ann"].trash) == 0
        old = {pid: {n: {r.id: r for r in t.records} for n, t in mem.tiers.items()}
               for pid, mem in sim.memories.items()}
    assert tick_lines(run_dir) == tick_lines(tmp_path / "ref")
    assert not (run_dir / "chroma").exists()  # written on in its own layout
    ref = read_stores(tmp_path / "ref", ("ann", "ben", "cal"))
    assert {pid: {n: set(t) for n, t in tiers.items()} for pid, tiers in old.items()} == \
        {pid: {n: set(t) for n, t in tiers.items()} for pid, tiers in ref.items()}


def test_a_write_larger_than_chroma_takes_is_split(tmp_path):
    """Chroma refuses a call of more records than its batch size (5,461 embedded: a 100-agent town's static
    memories are more): the flush splits it, and every record arrives."""
    from simulacra.memory.store import flush_tiers

    client = open_chroma(tmp_path / "a")
    tiers = [MemoryTier(client, "short_term", 8, write_behind=True, owner=o) for o in ("ann", "ben")]
    log: list = []
    for t in tiers:
        t.max_batch = 2
        t.collection = Counting(t.collection, t.owner, log)
    for k, t in enumerate(tiers):
        t.upsert([MemoryRecord(id=f"{t.owner}{i}", text=f"m{i}", kind="observation", rating=5, timestamp=0.0, tick=0)
                  for i in range(2 + k)], np.stack([unit(1, i) for i in range(2 + k)]))
    assert flush_tiers(tiers) == 3 and log == [("ann", "upsert")] * 3  # 5 records, 2 per call, on one collection
    tiers[1].delete(["ben0", "ben1", "ben2"])
    assert flush_tiers(tiers) == 2
    again = [MemoryTier(open_chroma(tmp_path / "a"), "short_term", 8, owner=o) for o in ("ann", "ben")]
    assert sorted(again[0].ids) == ["ann0", "ann1"] and again[1].ids == []
