"""The stores' journal, ``database/<run>/stores.journal``: what a run wrote since its stores last reached Chroma.

Why: an embedded Chroma write costs about 3.5 ms a call plus 0.5 ms a record (chromadb 1.5, ``docs/scale.md``), and
most of what a town writes is short-term memory that consolidation moves or forgets within one to two game hours
(``memory.consolidation_interval_minutes`` + ``consolidation_age_minutes``). A running simulation therefore writes its
stores to Chroma every ``memory.store_flush_minutes`` game minutes, not every tick
(:meth:`simulacra.simulation.Simulation.step`); in between, each tick appends the memories it wrote (final record
and embedding, as Chroma would hold them) to this journal, which is fsynced with the trace before the tick's
checkpoint. A memory written and gone within one period never reaches Chroma at all. Durability is the same as
writing Chroma every tick: before a checkpoint is written, every memory it lists is in Chroma or in the journal
(:meth:`simulacra.simulation.Simulation.checkpoint`), so a resume finds them all.

Reading: a :class:`~simulacra.memory.store.MemoryTier` opened with a journal applies the journal's memories of its
owner and tier to its mirror after reading Chroma (queued for its next flush); frames of ticks after the checkpoint
(a kill between a frame and its checkpoint) are not applied. A resumed run then rolls its stores back to the
checkpoint (:meth:`~simulacra.memory.stream.AgentMemory.restore`); a reader (a tier not in write-behind mode: a tool
opening a run's stores, ``interview``, ``tune``, ``evaluate``) sees exactly the checkpoint's memories, rows and
access marks (:meth:`StoreJournal.view`): Chroma may still hold what the run deleted since its last write to it.
After a flush with deletes (everything the last checkpoint holds is in Chroma) the journal is emptied
(:meth:`StoreJournal.reset`).

Format: a sequence of frames, each ``b"SJF1"``, the payload's length (u32, little-endian) and its crc32 (u32), then
the payload: the JSON header's length (u32), the JSON header ``{"ticks_done": int, "parts": [{"key":
"<owner>/<tier>", "ids": [...], "documents": [...], "metadatas": [...]}]}`` (metadata as
:meth:`MemoryRecord.to_metadata` gives it to Chroma), and the parts' embeddings as float32 rows, in order. A cut or
spoiled frame (a kill while appending) ends the journal; the next append cuts it off first.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from simulacra.errors import CheckpointError
from simulacra.killpoint import kill_point
from simulacra.memory.records import MemoryRecord

log = logging.getLogger(__name__)

JOURNAL = "stores.journal"
MAGIC = b"SJF1"
_HEAD = struct.Struct("<4sII")
_U32 = struct.Struct("<I")


def journal_key(owner: str, tier: str) -> str:
    """The key of ``owner``'s ``tier`` in the journal (``"ann/short_term"``, ``"town/shared"``)."""
    return f"{owner}/{tier}"


def store_schedule(flush_minutes: int, tick_minutes: int, checkpoint_every: int = 1) -> tuple[int, bool]:
    """When a running simulation writes its stores to Chroma: ``(every, journal)``. ``every``: ticks between two
    writes, ``flush_minutes`` game minutes rounded up to whole ticks and then to a multiple of ``checkpoint_every``
    (deletes reach Chroma only after a checkpoint). ``journal``: whether the ticks between append to the store
    journal, which they need when a checkpoint can come between two writes (``every > checkpoint_every``); else
    (``flush_minutes`` 0, or a period of one checkpoint) every checkpoint writes Chroma before it is written."""
    ticks = max(1, -(-int(flush_minutes) // int(tick_minutes)))
    every = checkpoint_every * -(-ticks // checkpoint_every)
    return every, every > checkpoint_every


def read_frames(path: str | Path) -> tuple[list[tuple[dict, np.ndarray]], int]:
    """The whole frames of the journal at ``path`` (``[(header, its embeddings as one flat float32 array, rows
    times dim)]``, in order) and the byte length they take; reading stops at the first cut or spoiled frame. A
    missing file has none."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return [], 0
    frames, at = [], 0
    while at + _HEAD.size <= len(data):
        magic, size, crc = _HEAD.unpack_from(data, at)
        payload = data[at + _HEAD.size: at + _HEAD.size + size]
        if magic != MAGIC or len(payload) != size or zlib.crc32(payload) != crc:
            break
        (n,) = _U32.unpack_from(payload, 0)
        try:
            header = json.loads(payload[_U32.size: _U32.size + n])
        except ValueError:
            break
        frames.append((header, np.frombuffer(payload[_U32.size + n:], dtype="<f4")))
        at += _HEAD.size + size
    if at < len(data):
        log.warning("%s: %d bytes after the last whole frame are ignored (a run killed while writing it)", path,
                    len(data) - at)
    return frames, at


class StoreJournal:
    """A run's store journal (module docstring). One per run folder and process; not thread-safe.

    Args:
        run_dir: the folder of the journal, ``run_dir / JOURNAL``: the run folder, or a Ray shard's ``shard-<k>/``.
        checkpoint_dir: the run folder, where its checkpoint is (default ``run_dir``): frames of ticks after the
            checkpoint are not applied (:meth:`committed`), and readers see what it lists (:meth:`view`).
    """

    def __init__(self, run_dir: str | Path, checkpoint_dir: str | Path | None = None):
        self.path = Path(run_dir) / JOURNAL
        #: where the run's checkpoint is: its folder (a Ray shard's journal is in ``shard-<k>/`` below it)
        self.checkpoint_dir = Path(run_dir) if checkpoint_dir is None else Path(checkpoint_dir)
        self._fh = None
        self._committed: dict[str, dict[str, tuple[MemoryRecord, np.ndarray]]] | None = None
        self._checkpoint: dict | None | bool = False  # False: not read yet; None: the run has no readable one

    # ----------------------------------------------------------------- reading
    def checkpoint(self) -> dict | None:
        """The run's last checkpoint (:func:`simulacra.checkpoint.read_checkpoint`, read once), ``None`` when it
        has no readable one."""
        if self._checkpoint is False:
            from simulacra.checkpoint import read_checkpoint

            try:
                self._checkpoint = read_checkpoint(self.checkpoint_dir)
            except CheckpointError:
                self._checkpoint = None
        return self._checkpoint

    def view(self, key: str) -> tuple[list[str], dict[str, float]] | None:
        """What the run's last checkpoint lists for tier ``key`` (:func:`journal_key`): its memory ids in row order
        and the access marks of those that have one (``{id: game minute}``); ``None`` when the run has no readable
        checkpoint or it lists no such tier."""
        ck = self.checkpoint()
        if ck is None:
            return None
        owner, _, tier = key.partition("/")
        if owner == "town" and tier == "shared":
            return None if ck.get("shared") is None else (list(ck["shared"]), {})
        snap = (ck.get("memory") or {}).get(owner) or {}
        if tier not in snap:
            return None
        return list(snap[tier]), dict(snap.get("last_accessed") or {})

    def committed(self, key: str, dim: int) -> tuple[list[MemoryRecord], np.ndarray]:
        """The memories the journal holds for tier ``key`` (:func:`journal_key`), each id once in its last written
        form (order of first write), with their embeddings, float32 ``(n, dim)``; only frames of ticks the run's
        checkpoint covers (all frames when the run has no readable checkpoint).

        Raises:
            CheckpointError: a frame's embeddings do not have ``dim`` columns (the journal of another model).
        """
        if self._committed is None:
            self._committed = self._read()
        got = self._committed.get(key, {})
        if not got:
            return [], np.zeros((0, dim), dtype=np.float32)
        recs = [rec for rec, _ in got.values()]
        emb = np.stack([e for _, e in got.values()])
        if emb.shape[1] != dim:
            raise CheckpointError(f"{self.path}: embeddings of {emb.shape[1]} dimensions, the run's model has {dim}")
        return recs, emb.astype(np.float32)

    def _read(self) -> dict[str, dict[str, tuple[MemoryRecord, np.ndarray]]]:
        frames, _ = read_frames(self.path)
        if not frames:
            return {}
        ck = self.checkpoint()
        upto = None if ck is None else int(ck["ticks_done"])
        out: dict[str, dict[str, tuple[MemoryRecord, np.ndarray]]] = {}
        for header, flat in frames:
            if upto is not None and int(header["ticks_done"]) > upto:
                continue
            rows = sum(len(p["ids"]) for p in header["parts"])
            emb = flat.reshape(rows, -1) if rows else flat.reshape(0, 0)
            at = 0
            for part in header["parts"]:
                mine = out.setdefault(part["key"], {})
                for id_, doc, meta in zip(part["ids"], part["documents"], part["metadatas"]):
                    mine[id_] = (MemoryRecord.from_metadata(id_, doc, meta), emb[at])
                    at += 1
        return out

    # ----------------------------------------------------------------- writing
    def append(self, ticks_done: int, tiers: Sequence) -> int:
        """Append one frame: what ``tiers`` (:class:`~simulacra.memory.store.MemoryTier`) wrote since their last
        frame (:meth:`MemoryTier.journal_part`), as of ``ticks_done`` ticks; written and flushed, not fsynced
        (:meth:`sync`, before the checkpoint). Kill point ``journal``: half the frame written. Returns the bytes
        written (0: nothing was written since the last frame)."""
        parts, embs = [], []
        for t in tiers:
            got = t.journal_part()
            if got is not None:
                parts.append(got[0])
                embs.append(got[1])
        if not parts:
            return 0
        head = json.dumps({"ticks_done": int(ticks_done), "parts": parts}, separators=(",", ":")).encode()
        payload = b"".join([_U32.pack(len(head)), head, np.concatenate(embs).astype("<f4").tobytes()])
        data = _HEAD.pack(MAGIC, len(payload), zlib.crc32(payload)) + payload
        fh = self._open()

        def half_frame():
            fh.write(data[: len(data) // 2])
            fh.flush()

        kill_point("journal", before=half_frame)
        fh.write(data)
        fh.flush()
        return len(data)

    def _open(self):
        if self._fh is None:
            _, end = read_frames(self.path)  # a frame cut by a kill is cut off before the next is appended
            self._fh = open(self.path, "ab")
            if self._fh.tell() != end:
                self._fh.truncate(end)
                self._fh.seek(end)
        return self._fh

    def sync(self) -> None:
        """Force the appended frames to disk (``fsync``), before a checkpoint refers to them."""
        if self._fh is not None:
            self._fh.flush()
            os.fsync(self._fh.fileno())

    def reset(self, tiers: Sequence) -> None:
        """Empty the journal (fsynced) and forget what ``tiers`` had left to journal: everything they hold is in
        Chroma, and so is everything the last checkpoint lists."""
        for t in tiers:
            t.journal_done()
        self._committed = None
        self._checkpoint = False
        if self._fh is None:
            if not self.path.exists():
                return
            self._fh = open(self.path, "ab")  # emptied whole: no need to find where its whole frames end (_open)
        fh = self._fh
        if fh.tell():
            fh.truncate(0)
            fh.seek(0)
            os.fsync(fh.fileno())

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
