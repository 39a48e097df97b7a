"""The stores' journal (simulacra.memory.journal): a run's stores reach Chroma every ``memory.store_flush_minutes``,
the ticks between are journaled; a memory consolidated within one period never costs a Chroma write, and whoever
opens the stores (a resume, a tool on a killed run) sees what the checkpoint lists."""

from __future__ import annotations

import signal
from collections import Counter

import numpy as np
import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.config import load_config
from simulacra.errors import CheckpointError
from simulacra.memory.chroma import open_chroma
from simulacra.memory.journal import JOURNAL, StoreJournal, journal_key, read_frames, store_schedule
from simulacra.memory.records import MemoryRecord
from simulacra.memory.store import MemoryTier
from simulacra.memory.stream import AgentMemory
from simulacra.runtime import store_location
from simulacra.simulation import Simulation
from tests.conftest import DATA, unit
from tests.test_resume import SETTINGS, cli, new_run_args
from tests.test_write_behind import Counting, tiers


def rec(i: str, tick: int, text: str | None = None, **kw) -> MemoryRecord:
    return MemoryRecord(id=i, text=text or f"memory {i}", kind="observation", rating=5, timestamp=10.0 * tick,
                        tick=tick, **kw)


def tier_of(client, journal, owner="ann", name="short_term"):
    return MemoryTier(client, name, 8, write_behind=True, owner=owner, journal=(journal, journal_key(owner, name)))


@pytest.mark.parametrize("minutes,tick,every,want", [(0, 10, 1, (1, False)), (240, 10, 1, (24, True)),
                                                     (25, 10, 1, (3, True)), (240, 15, 1, (16, True)),
                                                     (30, 10, 4, (4, False)), (240, 10, 5, (25, True)),
                                                     (0, 10, 3, (3, False))])
def test_the_flush_period_is_whole_ticks_and_whole_checkpoints(minutes, tick, every, want):
    """Ticks between writes to Chroma, and whether the ticks between are journaled (only when a checkpoint can
    come between two writes)."""
    assert store_schedule(minutes, tick, every) == want


def test_journaled_memories_come_back_on_open_exactly_and_queued_for_chroma(tmp_path):
    (tmp_path / "run").mkdir()
    journal = StoreJournal(tmp_path / "run")
    client = open_chroma(tmp_path / "run" / "chroma")
    t = tier_of(client, journal)
    t.upsert([rec("a", 0)], unit(1.0, 0.5)[None])
    t.flush()  # "a" is in Chroma, then the journal is emptied as a run does after a flush with deletes
    journal.reset([t])
    t.upsert([rec("b", 1), rec("c", 1)], np.stack([unit(0.3, 1.0), unit(0.1, 0.2, 0.9)]))
    assert journal.append(1, [t]) > 0
    t.upsert([rec("b", 1, last_accessed=20.0)], t.embeddings_of(["b"]))  # changed in the next tick: last form wins
    t.upsert([rec("d", 2)], unit(0.7, 0.7)[None])
    t.delete(["c"])  # written and gone between two flushes: never reaches Chroma
    assert journal.append(2, [t]) > 0
    assert journal.append(2, [t]) == 0  # nothing new
    journal.sync()
    # Chroma holds only "a"; a tier opened anew finds the rest in the journal
    assert client.get_collection("short_term").get()["ids"] == ["a"]
    again = tier_of(client, StoreJournal(tmp_path / "run"))
    assert sorted(again.ids) == ["a", "b", "c", "d"]  # the delete of "c" is the checkpoint's to undo (restore)
    for i in ("b", "d"):
        assert again.get(i) == t.get(i)
        assert again.embeddings_of([i]).tobytes() == t.embeddings_of([i]).tobytes()
    assert again.get("b").last_accessed == 20.0
    assert again.get("c") == rec("c", 1)
    assert again.embeddings_of(["c"]).tobytes() == unit(0.1, 0.2, 0.9)[None].tobytes()
    assert again.needs_upsert() and again.pending == 3  # written to Chroma by the next flush
    again.flush()
    assert sorted(client.get_collection("short_term").get()["ids"]) == ["a", "b", "c", "d"]
    # another owner's tier in the same journal sees none of it
    assert len(tier_of(client, StoreJournal(tmp_path / "run"), owner="ben")) == 0


def test_a_frame_cut_by_a_kill_is_ignored_and_cut_off_before_the_next(tmp_path, caplog):
    journal = StoreJournal(tmp_path)
    client = open_chroma(tmp_path / "chroma")
    t = tier_of(client, journal)
    t.upsert([rec("a", 0)], unit(1.0)[None])
    journal.append(1, [t])
    t.upsert([rec("b", 1)], unit(0.0, 1.0)[None])
    journal.append(2, [t])
    journal.close()
    whole = (tmp_path / JOURNAL).read_bytes()
    frames, end = read_frames(tmp_path / JOURNAL)
    assert [f["ticks_done"] for f, _ in frames] == [1, 2] and end == len(whole)
    cut = whole[:-10]  # the second frame cut
    (tmp_path / JOURNAL).write_bytes(cut)
    frames, end = read_frames(tmp_path / JOURNAL)
    assert [f["ticks_done"] for f, _ in frames] == [1] and end < len(cut)
    assert "ignored" in caplog.text
    spoiled = bytearray(whole)
    spoiled[-5] ^= 0xFF  # a flipped byte in the second frame: its checksum fails
    (tmp_path / JOURNAL).write_bytes(bytes(spoiled))
    assert [f["ticks_done"] for f, _ in read_frames(tmp_path / JOURNAL)[0]] == [1]
    # the next append starts where the whole frames end
    (tmp_path / JOURNAL).write_bytes(cut)
    again = StoreJournal(tmp_path)
    t.upsert([rec("c", 2)], unit(0.5, 0.5)[None])
    again.append(3, [t])
    again.close()
    assert [f["ticks_done"] for f, _ in read_frames(tmp_path / JOURNAL)[0]] == [1, 3]
    assert sorted(tier_of(client, StoreJournal(tmp_path)).ids) == ["a", "c"]


def test_a_reader_of_a_killed_run_sees_its_last_checkpoint(tmp_path, rater_url):
    """Killed halfway through tick 7's trace line (Chroma written at ticks 2 and 5, the journal holding ticks 6 and
    7, tick 6's consolidation deleting memories Chroma still holds): a tool that opens the run's stores sees exactly
    the memories, row order and access marks the checkpoint (7 ticks) lists, though Chroma holds more; nothing is
    written to Chroma by looking."""
    from tests.conftest import read_stores

    run_dir = tmp_path / "t"
    r = cli(tmp_path, rater_url, *new_run_args("t"), kill_at="tick=7:phase=trace")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    ck = read_checkpoint(run_dir)
    assert ck["ticks_done"] == 7
    assert [f["ticks_done"] for f, _ in read_frames(run_dir / JOURNAL)[0]][-2:] == [7, 8]
    before = read_stores(run_dir, list(ck["memory"]))
    config = load_config(None, SETTINGS)
    location = store_location(config.memory, run_dir)
    extra = 0
    for pid, snap in ck["memory"].items():
        mem = AgentMemory(pid, run_dir / pid, config.memory, 384, location=location)
        for name in ("static", "short_term", "long_term"):
            assert mem.tiers[name].ids == snap[name], (pid, name)
            extra += len(set(before[pid][name]) - set(snap[name]))
        marks = {r.id: r.last_accessed for name in ("short_term", "long_term") for r in mem.tiers[name].records
                 if r.last_accessed is not None}
        assert marks == snap["last_accessed"], pid
    assert extra > 0  # Chroma holds memories deleted after its last write: the reader does not show them
    assert sum(len(t) for p in ck["memory"].values() for n, t in p.items() if n == "short_term") > 0
    location.journal.close()
    assert read_stores(run_dir, list(ck["memory"])) == before
    # a damaged journal loses memories the checkpoint lists: a reader says so instead of showing fewer (an
    # interview answered from what was left)
    whole = (run_dir / JOURNAL).read_bytes()
    (run_dir / JOURNAL).write_bytes(whole[: len(whole) // 3])
    with pytest.raises(CheckpointError, match="that the run's checkpoint lists are in neither its Chroma store nor"):
        for pid in ck["memory"]:
            AgentMemory(pid, run_dir / pid, config.memory, 384, location=store_location(config.memory, run_dir))


def test_a_memory_gone_within_the_period_never_reaches_chroma(tmp_path, rater_url, embedder):
    """The same 12 ticks with the stores flushed every tick and every 12th: the second writes fewer short-term
    records to Chroma (those consolidated within the period are never written), and both end with the same trace
    and the same Chroma contents."""
    written, ends = {}, {}
    for minutes in (0, 120):
        config = load_config(None, [f"rater.url={rater_url}", *SETTINGS, f"memory.store_flush_minutes={minutes}"])
        sim = Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                                run_name=f"f{minutes}", embedder=embedder)
        records: Counter = Counter()
        for label, tier in tiers(sim).items():
            tier.collection = Recording(tier.collection, label.split("/")[1], records)
        with sim:
            sim.run(12)
            ends[minutes] = {label: sorted(t.ids) for label, t in tiers(sim).items()}
        written[minutes] = records
        journal = tmp_path / f"f{minutes}" / JOURNAL  # none when every tick is flushed; else emptied at the end
        assert journal.exists() == (minutes > 0) and (not journal.exists() or journal.stat().st_size == 0)
    assert ends[0] == ends[120]
    assert written[120]["short_term"] < written[0]["short_term"], written
    lines = [(tmp_path / f"f{m}" / "trace.jsonl").read_bytes().split(b"\n")[1:] for m in (0, 120)]
    assert lines[0] == lines[1]


class Recording(Counting):
    """A Chroma collection counting the records each tier's upserts carry (``counts[tier] += len(ids)``)."""

    def __init__(self, inner, tier: str, counts: Counter):
        super().__init__(inner, tier, [])
        self._counts = counts

    def __getattr__(self, name):
        attr = getattr(self._inner, name)
        if name != "upsert":
            return attr

        def call(*args, **kwargs):
            self._counts[self._label] += len(kwargs["ids"])
            return attr(*args, **kwargs)

        return call
