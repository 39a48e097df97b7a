"""Embedded Chroma stores in SQLite's write-ahead-log mode: what is written survives a SIGKILL, a store made by an
older run (rollback journal) is switched and keeps its memories, and closing a run empties the logs."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from simulacra.memory.chroma import SQLITE_FILE, EmbeddedChroma, open_chroma, truncate_wal
from simulacra.memory.records import MemoryRecord
from simulacra.memory.store import MemoryTier

ROOT = Path(__file__).resolve().parent.parent
DIM = 4
TEXTS = ["Ines bakes rye bread at dawn.", "The ferry leaves at noon.", "Oskar mends nets on the quay."]

# writes TEXTS to <folder>'s short_term tier and kills itself with SIGKILL (no clean close of anything); with
# "plain", through chromadb.PersistentClient directly (a store as runs before write-ahead logging made it)
WRITER = textwrap.dedent("""
    import os, signal, sys
    import numpy as np
    folder, how = sys.argv[1], sys.argv[2]
    texts = {texts!r}
    vectors = np.eye(len(texts), {dim}, dtype=np.float32)
    if how == "plain":
        import chromadb
        from chromadb.config import Settings
        client = chromadb.PersistentClient(path=folder, settings=Settings(anonymized_telemetry=False))
        col = client.get_or_create_collection("short_term", embedding_function=None,
                                              configuration={{"hnsw": {{"space": "l2"}}}})
        col.upsert(ids=[f"m{{i}}" for i in range(len(texts))], embeddings=vectors, documents=texts,
                   metadatas=[{{"kind": "observation", "rating": i + 1}} for i in range(len(texts))])
    else:
        from simulacra.memory.chroma import open_chroma
        from simulacra.memory.records import MemoryRecord
        from simulacra.memory.store import MemoryTier
        tier = MemoryTier(open_chroma(folder), "short_term", {dim})
        for i, t in enumerate(texts):  # one write each, as ticks make them
            tier.upsert([MemoryRecord(id=f"m{{i}}", text=t, kind="observation", rating=i + 1,
                                      timestamp=float(i), tick=i)], vectors[i:i + 1])
    print("written", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
""").format(texts=TEXTS, dim=DIM)


def write_and_kill(folder: Path, how: str = "simulacra") -> None:
    env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
    proc = subprocess.run([sys.executable, "-c", WRITER, str(folder), how], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert proc.stdout.strip() == "written"


def journal_mode(folder: Path) -> str:
    with sqlite3.connect(folder / SQLITE_FILE) as con:
        return con.execute("PRAGMA journal_mode").fetchone()[0]


def stored(folder: Path) -> dict[str, tuple[str, int]]:
    tier = MemoryTier(open_chroma(folder), "short_term", DIM)
    return {r.id: (r.text, r.rating) for r in tier.records}


def test_writes_go_to_the_log_and_survive_a_kill(tmp_path):
    folder = tmp_path / "greta"
    write_and_kill(folder)
    assert journal_mode(folder) == "wal"
    wal = folder / f"{SQLITE_FILE}-wal"
    assert wal.is_file() and wal.stat().st_size > 0  # the writes are in the log, not yet in the database file
    assert not (folder / f"{SQLITE_FILE}-journal").exists()
    assert stored(folder) == {f"m{i}": (t, i + 1) for i, t in enumerate(TEXTS)}


def test_a_store_of_an_older_run_is_switched_and_keeps_its_memories(tmp_path):
    folder = tmp_path / "old"
    write_and_kill(folder, "plain")
    assert journal_mode(folder) == "delete"  # what chromadb makes on its own
    assert stored(folder) == {f"m{i}": (t, i + 1) for i, t in enumerate(TEXTS)}  # open_chroma switches it
    assert journal_mode(folder) == "wal"
    # and it takes new writes
    tier = MemoryTier(open_chroma(folder), "short_term", DIM)
    tier.upsert([MemoryRecord(id="m9", text="A gull took the bread.", kind="observation", rating=3, timestamp=9.0,
                              tick=9)], np.ones((1, DIM), np.float32))
    assert "m9" in stored(folder)


def test_closing_a_run_empties_the_logs_and_keeps_everything(tmp_path):
    run = tmp_path / "run"
    for owner in ("greta", "ezra"):
        write_and_kill(run / owner)
    wal = run / "greta" / f"{SQLITE_FILE}-wal"
    before = wal.stat().st_size
    assert before > 0
    EmbeddedChroma(run).close()
    for owner in ("greta", "ezra"):
        log = run / owner / f"{SQLITE_FILE}-wal"
        assert not log.exists() or log.stat().st_size == 0  # SQLite deletes an emptied log it alone had open
        assert stored(run / owner) == {f"m{i}": (t, i + 1) for i, t in enumerate(TEXTS)}
    assert truncate_wal(run / "missing") == 0
