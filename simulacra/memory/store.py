"""One memory tier: a persistent Chroma collection with an in-process numpy mirror.

Chroma is the durable store (seed 003: "all powered by chromadb"); the mirror holds the same
embeddings and raw metadata as contiguous arrays so that scoring is exact and vectorised. Every write
goes to Chroma first, in one call per collection, then to the mirror; on open the mirror is rebuilt
from Chroma, so a restarted run sees exactly what was persisted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence

import numpy as np

from simulacra.memory.records import MemoryRecord, RetrievedMemory
from simulacra.memory.scoring import ScoringParams, decayed_importance, score_memories

log = logging.getLogger(__name__)

_PAGE = 5_000


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _columns(records: Sequence[MemoryRecord]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Mirror columns of ``records``: rating, creation time, recency reference for ``last_access``
    (last access, else creation) and long-term entry time; float64, NaN where absent."""
    rating = np.array([_nan(r.rating) for r in records], dtype=np.float64)
    created = np.array([_nan(r.timestamp) for r in records], dtype=np.float64)
    accessed = np.array([_nan(r.last_accessed if r.last_accessed is not None else r.timestamp) for r in records],
                        dtype=np.float64)
    lt_since = np.array([_nan(r.long_term_since) for r in records], dtype=np.float64)
    return rating, created, accessed, lt_since


class MemoryTier:
    """A Chroma collection plus its numpy mirror.

    Args:
        client: a ``chromadb`` client (persistent in runs).
        tier: ``"static"``, ``"short_term"`` or ``"long_term"``; also the collection's name.
        dim: embedding dimension.
        space: Chroma distance space: ``"l2"`` (squared Euclidean, seed 003's default), ``"cosine"``
            (``1 - cos``) or ``"ip"`` (``1 - dot``).
    """

    def __init__(self, client, tier: str, dim: int, space: str = "l2"):
        self.tier = tier
        self.dim = dim
        self.space = space
        self.collection = client.get_or_create_collection(
            name=tier, embedding_function=None, configuration={"hnsw": {"space": space}}
        )
        existing = (self.collection.configuration_json or {}).get("hnsw", {}) or {}
        if existing.get("space", space) != space:
            raise ValueError(
                f"collection '{tier}' was created with distance space {existing.get('space')!r}, config asks {space!r}"
            )
        self._records: list[MemoryRecord] = []
        self._row: dict[str, int] = {}
        self._emb = np.zeros((0, dim), dtype=np.float32)
        self._sqnorm = np.zeros(0, dtype=np.float32)
        self._rating = np.zeros(0)
        self._created = np.zeros(0)
        self._accessed = np.zeros(0)
        self._lt_since = np.zeros(0)
        self._load()

    # ----------------------------------------------------------------- mirror upkeep
    def _load(self) -> None:
        total = self.collection.count()
        records: list[MemoryRecord] = []
        vectors: list[np.ndarray] = []
        for offset in range(0, total, _PAGE):
            got = self.collection.get(
                include=["embeddings", "documents", "metadatas"], limit=_PAGE, offset=offset
            )
            for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                records.append(MemoryRecord.from_metadata(id_, doc or "", meta or {}))
            vectors.append(np.asarray(got["embeddings"], dtype=np.float32).reshape(-1, self.dim))
        order = sorted(range(len(records)), key=lambda i: (records[i].tick, records[i].id))
        emb = np.concatenate(vectors) if vectors else np.zeros((0, self.dim), dtype=np.float32)
        self._set_rows([records[i] for i in order], emb[order] if len(order) else emb)

    def _set_rows(self, records: list[MemoryRecord], emb: np.ndarray) -> None:
        self._records = list(records)
        self._row = {r.id: i for i, r in enumerate(self._records)}
        self._emb = np.ascontiguousarray(emb, dtype=np.float32).reshape(-1, self.dim)
        self._sqnorm = np.einsum("ij,ij->i", self._emb, self._emb)
        self._rating, self._created, self._accessed, self._lt_since = _columns(self._records)

    def _append_rows(self, records: list[MemoryRecord], emb: np.ndarray) -> None:
        """Append new rows, computing columns for the new records only (the write hot path)."""
        start = len(self._records)
        self._records.extend(records)
        for i, rec in enumerate(records, start):
            self._row[rec.id] = i
        emb = np.ascontiguousarray(emb, dtype=np.float32).reshape(-1, self.dim)
        self._emb = np.concatenate([self._emb, emb])
        self._sqnorm = np.concatenate([self._sqnorm, np.einsum("ij,ij->i", emb, emb)])
        cols = _columns(records)
        self._rating, self._created, self._accessed, self._lt_since = (
            np.concatenate([old, new])
            for old, new in zip((self._rating, self._created, self._accessed, self._lt_since), cols)
        )

    def _set_columns(self, row: int, rec: MemoryRecord) -> None:
        self._records[row] = rec
        self._rating[row], self._created[row], self._accessed[row], self._lt_since[row] = (
            c[0] for c in _columns([rec])
        )

    # ----------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._row

    @property
    def records(self) -> list[MemoryRecord]:
        """The tier's records in insertion order (a copy of the list)."""
        return list(self._records)

    def get(self, memory_id: str) -> MemoryRecord | None:
        """The record with this id, or ``None``."""
        row = self._row.get(memory_id)
        return None if row is None else self._records[row]

    def embeddings_of(self, ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of ``ids`` (all present), shape ``(len(ids), dim)``."""
        return self._emb[[self._row[i] for i in ids]] if ids else np.zeros((0, self.dim), np.float32)

    def distances(self, query: np.ndarray) -> np.ndarray:
        """Distance of every memory to ``query`` (shape ``(dim,)``) in the tier's Chroma space, ``(n,)``."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        dots = self._emb @ q
        if self.space == "l2":
            d = self._sqnorm + np.float32(q @ q) - 2.0 * dots
            return np.maximum(d.astype(np.float64), 0.0)
        if self.space == "ip":
            return 1.0 - dots.astype(np.float64)
        norms = np.sqrt(self._sqnorm) * np.float32(np.linalg.norm(q))
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = np.where(norms > 0, dots / norms, 0.0)
        return 1.0 - cos.astype(np.float64)

    def score(self, query: np.ndarray, now: float, params: ScoringParams, recency_from: str = "created"):
        """Score every memory of the tier for ``query`` (exact); returns :class:`ScoreTerms`."""
        reference = self._accessed if recency_from == "last_access" else self._created
        return score_memories(self.distances(query), self._rating, reference, self._lt_since, now, params)

    def top(
        self,
        query: np.ndarray,
        now: float,
        params: ScoringParams,
        n: int,
        recency_from: str = "created",
    ) -> list[RetrievedMemory]:
        """The ``n`` best-scoring memories, best first; ties broken by insertion order (deterministic)."""
        if n <= 0 or not self._records:
            return []
        terms = self.score(query, now, params, recency_from)
        k = min(n, len(self._records))
        if k < len(self._records):
            part = np.argpartition(-terms.score, k - 1)[:k]
        else:
            part = np.arange(len(self._records))
        order = part[np.lexsort((part, -terms.score[part]))]
        out = []
        for i in order:
            rec = self._records[i]
            out.append(
                RetrievedMemory(
                    id=rec.id,
                    text=rec.text,
                    tier=self.tier,
                    kind=rec.kind,
                    recency=None if math.isnan(terms.recency[i]) else float(terms.recency[i]),
                    importance=None if math.isnan(terms.importance[i]) else float(terms.importance[i]),
                    relevance=float(terms.relevance[i]),
                    score=float(terms.score[i]),
                    record=rec,
                )
            )
        return out

    # ----------------------------------------------------------------- writes
    def upsert(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> None:
        """Write ``records`` (one Chroma call); an existing id is overwritten, never duplicated.

        Args:
            records: memories to write; ids must be unique within the call.
            embeddings: float32 ``(len(records), dim)``.
        Raises:
            ValueError: on duplicate ids in one call or a shape mismatch.
        """
        if not records:
            return
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate ids in one write to {self.tier}")
        emb = np.asarray(embeddings, dtype=np.float32).reshape(len(records), self.dim)
        self.collection.upsert(
            ids=ids, embeddings=emb, documents=[r.text for r in records], metadatas=[r.to_metadata() for r in records]
        )
        new_rows = []
        for rec, vec in zip(records, emb):
            row = self._row.get(rec.id)
            if row is None:
                new_rows.append((rec, vec))
            else:
                self._set_columns(row, rec)
                self._emb[row] = vec
                self._sqnorm[row] = vec @ vec
        if new_rows:
            self._append_rows([r for r, _ in new_rows], np.stack([v for _, v in new_rows]))

    def delete(self, ids: Sequence[str]) -> None:
        """Delete ``ids`` (one Chroma call); unknown ids are ignored."""
        present = [i for i in dict.fromkeys(ids) if i in self._row]
        if not present:
            return
        self.collection.delete(ids=present)
        keep = np.ones(len(self._records), dtype=bool)
        keep[[self._row[i] for i in present]] = False
        self._records = [r for r, k in zip(self._records, keep) if k]
        self._row = {r.id: i for i, r in enumerate(self._records)}
        self._emb, self._sqnorm = self._emb[keep], self._sqnorm[keep]
        self._rating, self._created = self._rating[keep], self._created[keep]
        self._accessed, self._lt_since = self._accessed[keep], self._lt_since[keep]

    def update_metadata(self, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the metadata of existing records (one Chroma call), e.g. after marking access."""
        records = [r for r in records if r.id in self._row]
        if not records:
            return
        self.collection.update(ids=[r.id for r in records], metadatas=[r.to_metadata() for r in records])
        for rec in records:
            self._set_columns(self._row[rec.id], rec)

    def importance(self, now: float, decay_per_hour: float) -> np.ndarray:
        """Decayed importance of every memory, in row order (:func:`decayed_importance`), shape ``(n,)``."""
        return decayed_importance(self._rating, self._lt_since, now, decay_per_hour)
