"""Embedded Chroma stores made in SQLite's write-ahead-log mode: what is written survives a SIGKILL; a store of an
older run (rollback journal) and a store reopened while in use in the process are left to Chroma and keep working;
a normal exit folds the log into the database."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

from simulacra.memory.chroma import SQLITE_FILE, open_chroma, use_wal
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


def test_a_store_of_an_older_run_keeps_its_journal_and_its_memories(tmp_path):
    folder = tmp_path / "old"
    write_and_kill(folder, "plain")
    assert journal_mode(folder) == "delete"  # what chromadb makes on its own
    assert not use_wal(folder)  # an existing file is never opened by a second SQLite in the process
    tier = MemoryTier(open_chroma(folder), "short_term", DIM)
    tier.upsert([MemoryRecord(id="m9", text="A gull took the bread.", kind="observation", rating=3, timestamp=9.0,
                              tick=9)], np.ones((1, DIM), np.float32))
    assert stored(folder) == {**{f"m{i}": (t, i + 1) for i, t in enumerate(TEXTS)}, "m9": ("A gull took the bread.", 3)}
    assert journal_mode(folder) == "delete"


def test_reopening_a_store_in_use_in_this_process_leaves_it_working(tmp_path):
    """A run closed and resumed in one process reopens stores whose Chroma client is still alive: opening them
    again must not touch their SQLite file from outside Chroma (it broke them: disk I/O error on the next write)."""
    folder = tmp_path / "greta"
    first = MemoryTier(open_chroma(folder), "short_term", DIM)
    vectors = np.eye(len(TEXTS), DIM, dtype=np.float32)
    for i, t in enumerate(TEXTS[:2]):
        first.upsert([MemoryRecord(id=f"m{i}", text=t, kind="observation", rating=i + 1, timestamp=float(i), tick=i)],
                     vectors[i:i + 1])
    again = MemoryTier(open_chroma(folder), "short_term", DIM)
    again.upsert([MemoryRecord(id="m2", text=TEXTS[2], kind="observation", rating=3, timestamp=2.0, tick=2)],
                 vectors[2:3])
    again.delete(["m0"])
    assert stored(folder) == {"m1": (TEXTS[1], 2), "m2": (TEXTS[2], 3)}
    assert journal_mode(folder) == "wal"


def test_a_normal_exit_folds_the_log_into_the_database(tmp_path):
    folder = tmp_path / "ezra"
    script = WRITER.replace("os.kill(os.getpid(), signal.SIGKILL)", "")
    proc = subprocess.run([sys.executable, "-c", script, str(folder), "simulacra"], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (folder / f"{SQLITE_FILE}-wal").exists()
    assert stored(folder) == {f"m{i}": (t, i + 1) for i, t in enumerate(TEXTS)}
