"""One memory tier: a persistent Chroma collection with an in-process numpy mirror.

Chroma is the durable store (seed 003: "all powered by chromadb"); the mirror
(:class:`~simulacra.memory.index.MirrorIndex`) holds the same embeddings and raw metadata as contiguous
arrays so that scoring is exact and vectorised. Every write changes the mirror at once (reads and scoring see
it immediately) and is applied to Chroma by :meth:`MemoryTier.flush`: at the end of the write itself by default,
or, in write-behind mode (``write_behind=True``, a running simulation's stores), when the owner flushes (every
``memory.store_flush_minutes``, :func:`simulacra.tick.persist_stage`), coalesced into at most one upsert and one
delete call however many writes were made since. On open the mirror is rebuilt from Chroma and the run's store
journal (:mod:`simulacra.memory.journal`), so a restarted run sees exactly what was persisted.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np

from simulacra.errors import CheckpointError, SimulacraError
from simulacra.killpoint import kill_point
from simulacra.memory.chroma import OWNER_KEY
from simulacra.memory.index import BOUND_MIN_ROWS, COLUMNS, MirrorIndex
from simulacra.memory.lexical import LexicalIndex
from simulacra.memory.memo import LastAnswer
from simulacra.memory.records import MemoryRecord, RetrievedMemory, remarked
from simulacra.memory.scoring import ScoreTerms, ScoringInputs, ScoringParams
from simulacra.memory.speech import SpeechCue, contradicts

log = logging.getLogger(__name__)

_PAGE = 5_000


#: the most memories a tier may hold for its retrieval candidates to be recorded (the k-skyband check is O(n^2))
CANDIDATE_LIMIT = 2000


def _row_columns(rec: MemoryRecord) -> tuple[float, ...]:
    # the decay column holds where long-term decay counts from (entry or last rehearsal, MemoryRecord.decay_since)
    return MirrorIndex.columns_of(rec.rating, rec.timestamp, rec.last_accessed, rec.decay_since, rec.span)



def check_query_text(params: ScoringParams, query_text: str | None, where: str) -> None:
    """Lexical and hybrid relevance match the query's words: without a text (``None`` or blank) they cannot score.
    The one rule of a tier's scoring and :meth:`AgentMemory.retrieve <simulacra.memory.stream.AgentMemory.retrieve>`.

    Raises:
        ValueError: naming ``query_text`` and ``where`` (the tier or the profile).
    """
    if params.lexical and (query_text is None or not query_text.strip()):
        raise ValueError(f"query_text: {params.relevance} relevance ({where}) matches the query's words, so it needs "
                         f"the query text; got {query_text!r}")

class MemoryTier:
    """A Chroma collection plus its numpy mirror.

    Args:
        client: a ``chromadb`` client (persistent, or an HTTP client of a Chroma server).
        tier: ``"static"``, ``"short_term"``, ``"long_term"``, ``"trash"`` or ``"shared"``; also the collection's
            name unless ``name`` is given.
        dim: embedding dimension.
        space: Chroma distance space: ``"l2"`` (squared Euclidean, seed 003's default), ``"cosine"``
            (``1 - cos``) or ``"ip"`` (``1 - dot``).
        bound_min_rows: size from which retrieval uses the bounded exact search
            (:mod:`simulacra.memory.index`); ``None`` always scans.
        name: the collection's name (default ``tier``; on a Chroma server
            :func:`~simulacra.memory.chroma.collection_name`); metadata: the collection's metadata when it is created.
        retry: how every Chroma call is made: ``retry(fn, what)`` returns ``fn()`` (a server's retrying
            :meth:`~simulacra.memory.chroma.ChromaServer.call`); ``None`` calls directly.
        write_behind: queue the Chroma side of every write until :meth:`flush` (``False``: each write flushes
            before it returns).
        owner: the collection is shared by several owners (a run's embedded town store,
            :class:`~simulacra.memory.chroma.EmbeddedChroma`): this tier is the records whose metadata ``owner``
            (:data:`OWNER_KEY`) is ``owner``; every record written carries it. ``None``: the collection is the tier's
            alone.
        journal: the run's :class:`~simulacra.memory.journal.StoreJournal` and this tier's key in it, ``(journal,
            key)``: on open the journal's memories of the tier are applied to the mirror after Chroma's (queued
            for the next flush), and every write is remembered for the next frame (:meth:`journal_part`).
    Raises:
        ValueError: the collection exists with another distance space.
        StoreUnavailable: with a server's ``retry``, the server did not answer within its retry window.
    """

    def __init__(self, client, tier: str, dim: int, space: str = "l2", bound_min_rows: int | None = BOUND_MIN_ROWS,
                 *, name: str | None = None, metadata: dict | None = None, retry=None, write_behind: bool = False,
                 owner: str | None = None, journal: tuple | None = None):
        self.tier = tier
        self.owner = owner
        self.write_behind = write_behind
        self.dim = dim
        self.space = space
        self.name = name or tier
        self._retry = retry
        self.collection = self._call(lambda: client.get_or_create_collection(
            name=self.name, embedding_function=None, configuration={"hnsw": {"space": space}}, metadata=metadata
        ), "opening")
        existing = (self.collection.configuration_json or {}).get("hnsw", {}) or {}
        if existing.get("space", space) != space:
            raise ValueError(
                f"collection '{tier}' was created with distance space {existing.get('space')!r}, config asks {space!r}"
            )
        self._records: list[MemoryRecord] = []
        self._row: dict[str, int] = {}
        self.index = MirrorIndex(dim, space, bound_min_rows)
        self._left_out: LastAnswer[frozenset[str]] = LastAnswer()  # contradicting()'s last answer
        self.lexical = LexicalIndex()  # BM25 over the texts, row-aligned; built only when lexical relevance is asked
        self._stored: set[str] = set()  # ids Chroma holds (read at open, then as flushed)
        self._dirty: dict[str, None] = {}  # ids written (record and embedding) since the last flush, in order
        self._touched: dict[str, None] = {}  # ids whose metadata alone changed since the last flush
        # ids deleted from the mirror since the last flush with deletes, with their record and embedding (removed)
        self._removed: dict[str, tuple[MemoryRecord, np.ndarray]] = {}
        self._unsaved: dict[str, None] = {}  # ids whose metadata changed by update_local, not yet queued (save_local)
        self.journal, self.journal_key = journal if journal is not None else (None, None)
        self._unjournaled: dict[str, None] = {}  # ids written since the tier's last journal frame
        self._load()
        # records one Chroma call takes at most (chromadb 1.5 embedded: 5,461); flush_tiers splits larger writes
        self.max_batch = int(self._call(client.get_max_batch_size, "asking the batch size of"))

    def _call(self, fn, what: str):
        """``fn()`` through the retrying call when there is one (``what`` names the operation for its message)."""
        return fn() if self._retry is None else self._retry(fn, f"{what} collection {self.name}")

    def _load(self) -> None:
        where = None if self.owner is None else {OWNER_KEY: self.owner}
        records: list[MemoryRecord] = []
        vectors: list[np.ndarray] = []
        offset = 0
        while True:
            got = self._call(lambda offset=offset: self.collection.get(
                where=where, include=["embeddings", "documents", "metadatas"], limit=_PAGE, offset=offset
            ), "reading")
            for id_, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                records.append(MemoryRecord.from_metadata(id_, doc or "", meta or {}))
            got_vectors = np.asarray(got["embeddings"], dtype=np.float32)
            if got_vectors.size and (got_vectors.ndim != 2 or got_vectors.shape[1] != self.dim):
                raise SimulacraError(f"{self.tier}: the store holds embeddings of {got_vectors.shape[-1]} dimensions, "
                                     f"the embedder given makes {self.dim}: open it with the embedding model it was "
                                     f"written with")
            vectors.append(got_vectors.reshape(-1, self.dim))
            if len(got["ids"]) < _PAGE:
                break
            offset += _PAGE
        self._stored = {r.id for r in records}
        if records:
            order = sorted(range(len(records)), key=lambda i: (records[i].tick, records[i].id))
            self._append([records[i] for i in order], np.concatenate(vectors)[order])
        if self.journal is None:
            return
        journaled, emb = self.journal.committed(self.journal_key, self.dim)
        if journaled:  # written since Chroma last had the tier's writes: Chroma gets them at the next flush
            self._put(journaled, emb)
        view = None if self.write_behind else self.journal.view(self.journal_key)
        if view is not None:  # a reader sees the checkpoint's memories (Chroma may hold some deleted since)
            want, marks = view
            lost = [i for i in want if i not in self._row]
            if lost:  # every memory a checkpoint lists is in Chroma or in the journal, unless either was damaged
                raise CheckpointError(
                    f"{self.journal.path}: {len(lost)} memories of {self.journal_key} that the run's checkpoint lists "
                    f"are in neither its Chroma store nor this journal (the first: {lost[0]}): the run folder was "
                    f"changed or damaged outside simulacra, and its memories cannot be shown as the run left them")
            listed = set(want)
            self._hide([i for i in self._row if i not in listed])
            if set(self._row) == listed:
                self.reorder(want)
            self._set_rows(remarked(self._records, marks))

    def _hide(self, ids: Sequence[str]) -> None:
        """Take ``ids`` (present) out of the mirror only, queueing no Chroma delete (:meth:`delete` queues one; a
        reader's view at a checkpoint does not)."""
        if not ids:
            return
        keep = np.ones(len(self._records), dtype=bool)
        keep[[self._row[i] for i in ids]] = False
        self._records = [r for r, k in zip(self._records, keep) if k]
        self._row = {r.id: i for i, r in enumerate(self._records)}
        self.index.keep(keep)
        self.lexical.keep(keep)

    def _append(self, records: list[MemoryRecord], emb: np.ndarray) -> None:
        start = len(self._records)
        self._records.extend(records)
        for i, rec in enumerate(records, start):
            self._row[rec.id] = i
        self.index.append(emb, np.array([_row_columns(r) for r in records], dtype=np.float64).reshape(-1, COLUMNS))
        self.lexical.append([r.text for r in records])

    # ----------------------------------------------------------------- reads
    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, memory_id: str) -> bool:
        return memory_id in self._row

    @property
    def ids(self) -> list[str]:
        """The tier's ids in row order."""
        return [r.id for r in self._records]

    @property
    def records(self) -> list[MemoryRecord]:
        """The tier's records in row order (a copy of the list)."""
        return list(self._records)

    def contradicting(self, cue: SpeechCue | None) -> frozenset[str]:
        """Ids of the memories that state a talk said the other way than ``cue`` asks about
        (:func:`simulacra.memory.speech.contradicts`), which a retrieval with ``memory.speech_roles`` leaves out;
        empty without a cue."""
        if cue is None:
            return frozenset()
        key = (cue, id(self.index), self.index.version, len(self._records))  # a retrieval and its trace record ask
        return self._left_out.get(key, lambda: frozenset(r.id for r in self._records if contradicts(cue, r.text)))

    def formed_from(self, minute: float | None) -> frozenset[str]:
        """Ids of the memories formed at or after game minute ``minute`` (a timestamp of ``minute`` or later;
        a memory without one, a static fact, is never among them), which a retrieval as of ``minute`` leaves out;
        empty for ``None``."""
        if minute is None:
            return frozenset()
        return frozenset(r.id for r in self._records if r.timestamp is not None and r.timestamp >= minute)

    def get(self, memory_id: str) -> MemoryRecord | None:
        """The record with this id, or ``None``."""
        row = self._row.get(memory_id)
        return None if row is None else self._records[row]

    def embeddings_of(self, ids: Sequence[str]) -> np.ndarray:
        """Stored embeddings of ``ids`` (all present), shape ``(len(ids), dim)``."""
        if not ids:
            return np.zeros((0, self.dim), np.float32)
        return self.index.embeddings[[self._row[i] for i in ids]]

    def distances(self, query: np.ndarray) -> np.ndarray:
        """Distance of every memory to ``query`` (shape ``(dim,)``) in the tier's Chroma space, ``(n,)``."""
        return self.index.distances(query)

    def lexical_relevance(self, query_text: str) -> np.ndarray:
        """Normalised BM25 of every memory for ``query_text`` with the tier alone as the corpus
        (:meth:`LexicalIndex.relevance`), ``(n,)`` in [0, 1], in the order of :attr:`records`. An agent's
        retrieval measures it over all the tiers it reads
        (:meth:`~simulacra.memory.stream.AgentMemory.lexical_relevance`) and passes it as ``lexical``."""
        return self.lexical.relevance(query_text)

    def _lexical_for(self, params: ScoringParams, query_text: str | None,
                     lexical: np.ndarray | None = None) -> np.ndarray | None:
        if not params.lexical:
            return None
        check_query_text(params, query_text, f"tier {self.tier}")
        assert query_text is not None
        if lexical is not None:
            if len(lexical) != len(self):
                raise ValueError(f"lexical: expected the relevance of the tier's {len(self)} memories, got "
                                 f"{len(lexical)}")
            return lexical
        return self.lexical_relevance(query_text)

    def scoring_inputs(self, query: np.ndarray, recency_from: str = "created",
                       query_text: str | None = None) -> ScoringInputs:
        """The raw scoring inputs of every memory for ``query``, in the order of :attr:`records` (copies); with
        ``query_text``, also the lexical relevance."""
        lexical = None if query_text is None else self.lexical_relevance(query_text)
        return self.index.inputs(query, recency_from, lexical=lexical)

    def score(self, query: np.ndarray, now: float, params: ScoringParams, recency_from: str = "created",
              query_text: str | None = None, lexical: np.ndarray | None = None) -> ScoreTerms:
        """Score every memory of the tier for ``query`` (exact, row order); returns :class:`ScoreTerms`.
        ``lexical``: the tier's lexical relevance as its agent measures it (``(n,)``; default: the tier alone as
        the corpus, :meth:`lexical_relevance`); the same for :meth:`top`, :meth:`candidates` and :meth:`extremes`.

        Raises:
            ValueError: lexical or hybrid ``params`` without ``query_text``; a ``lexical`` not of the tier's length.
        """
        return self.index.score(query, now, params, recency_from,
                                lexical=self._lexical_for(params, query_text, lexical))

    def top(
        self,
        query: np.ndarray,
        now: float,
        params: ScoringParams,
        n: int,
        recency_from: str = "created",
        query_text: str | None = None,
        lexical: np.ndarray | None = None,
    ) -> list[RetrievedMemory]:
        """The ``n`` best-scoring memories, best first, exactly as scoring every memory would rank them;
        ties are broken by row (insertion) order, so the result is deterministic.

        Raises:
            ValueError: lexical or hybrid ``params`` without ``query_text``.
        """
        rows, terms = self.index.top(query, now, params, n, recency_from,
                                     self._lexical_for(params, query_text, lexical))
        out = []
        for j, i in enumerate(rows):
            rec = self._records[i]
            rec_term, imp_term = terms.recency[j], terms.importance[j]
            parts = {} if terms.lexical is None else {"dense": float(terms.dense[j]),
                                                      "lexical": float(terms.lexical[j])}
            if terms.normalized is not None:  # minmax: the rescaled terms the score sums
                parts["normalized"] = {name: None if math.isnan(x[j]) else float(x[j])
                                       for name, x in zip(("recency", "importance", "relevance"), terms.normalized)}
            out.append(
                RetrievedMemory(
                    id=rec.id,
                    text=rec.text,
                    tier=self.tier,
                    kind=rec.kind,
                    recency=None if math.isnan(rec_term) else float(rec_term),
                    importance=None if math.isnan(imp_term) else float(imp_term),
                    relevance=float(terms.relevance[j]),
                    score=float(terms.score[j]),
                    record=rec,
                    **parts,
                )
            )
        return out

    def candidates(self, query: np.ndarray, now: float, params: ScoringParams, k: int,
                   recency_from: str = "created", limit: int | None = CANDIDATE_LIMIT,
                   query_text: str | None = None, lexical: np.ndarray | None = None) -> list[list] | None:
        """The tier's k-skyband for ``query`` (:meth:`MirrorIndex.skyband`) as ``[id, relevance, importance,
        age_minutes]`` rows in row order (``None`` for a missing term), or ``None`` above ``limit`` memories.
        Under lexical or hybrid relevance (``query_text`` required) the relevance is the fused one."""
        if limit is not None and len(self) > limit:
            return None
        band = self.index.skyband(query, now, params, k, recency_from, limit,
                                  self._lexical_for(params, query_text, lexical))
        if band is None:
            return None
        rows, rel, imp, age = band

        def num(x: float) -> float | None:
            return None if math.isnan(x) else float(x)

        return [[self._records[r].id, float(rl), num(im), num(ag)] for r, rl, im, ag in zip(rows, rel, imp, age)]

    def extremes(self, query: np.ndarray, now: float, params: ScoringParams, recency_from: str = "created",
                 query_text: str | None = None, lexical: np.ndarray | None = None) -> list[float | None]:
        """The tier's extremes of relevance, importance and age for ``query`` (:meth:`MirrorIndex.extremes`)."""
        return self.index.extremes(query, now, params, recency_from, self._lexical_for(params, query_text, lexical))

    # ----------------------------------------------------------------- writes
    def upsert(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> None:
        """Write ``records``; an existing id is overwritten, never duplicated. The mirror changes at once; Chroma at
        the next :meth:`flush` (at once unless :attr:`write_behind`).

        Args:
            records: memories to write; ids must be unique within the call.
            embeddings: float32 ``(len(records), dim)``.
        Raises:
            ValueError: on duplicate ids in one call or a shape mismatch.
            StoreUnavailable: flushing at once, a server that did not answer within its retry window.
        """
        if not records:
            return
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            raise ValueError(f"duplicate ids in one write to {self.tier}")
        vectors = np.asarray(embeddings, dtype=np.float32)
        if vectors.shape not in ((len(records), self.dim), (self.dim,) if len(records) == 1 else None):
            raise ValueError(f"{self.tier}: {len(records)} memories need embeddings of shape ({len(records)}, "
                             f"{self.dim}) (the store's dimension), got {vectors.shape}")
        self._put(records, vectors.reshape(len(records), self.dim))
        if self.journal is not None:
            self._unjournaled.update(dict.fromkeys(ids))
        self._written()

    def _put(self, records: Sequence[MemoryRecord], emb: np.ndarray) -> None:
        """Write ``records`` (unique ids) and their embeddings into the mirror and queue them for Chroma."""
        new = []
        for j, rec in enumerate(records):
            row = self._row.get(rec.id)
            if row is None:
                new.append(j)
            else:
                self._records[row] = rec
                self.index.set_row(row, emb[j], _row_columns(rec))
                self.lexical.set_row(row, rec.text)
        if new:
            self._append([records[j] for j in new], emb[new])
        self._dirty.update(dict.fromkeys(r.id for r in records))

    def delete(self, ids: Sequence[str]) -> None:
        """Delete ``ids`` (unknown ids are ignored): from the mirror at once, from Chroma at the next :meth:`flush`
        (at once unless :attr:`write_behind`)."""
        present = [i for i in dict.fromkeys(ids) if i in self._row]
        if not present:
            return
        for i in present:  # kept until the delete reaches Chroma (removed)
            self._removed[i] = (self._records[self._row[i]], self.index.embeddings[self._row[i]].copy())
        self._hide(present)
        self._written()

    def reorder(self, ids: Sequence[str]) -> None:
        """Put the rows in the order of ``ids`` (exactly the tier's ids), as a checkpoint recorded them: ties in
        retrieval and the order of trace candidates follow row order, and a reopened tier's rows are sorted by
        (tick, id), not by insertion.

        Raises:
            ValueError: ``ids`` is not a permutation of the tier's ids.
        """
        ids = list(ids)
        if len(ids) != len(self._records) or set(ids) != set(self._row):
            raise ValueError(f"reorder of tier {self.tier}: the ids given are not the tier's ids")
        if ids == self.ids:
            return
        rows = [self._row[i] for i in ids]
        records, emb = [self._records[r] for r in rows], self.index.embeddings[rows].copy()
        self._records, self._row = [], {}
        self.index = MirrorIndex(self.dim, self.space, self.index.bound_min_rows)
        self.lexical = LexicalIndex()
        self._append(records, emb)

    def update_metadata(self, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the metadata of existing records (unknown ids are ignored), e.g. after marking access; an optional
        field set to ``None`` (an access mark a restore takes back) is removed from the stored metadata. Chroma
        receives it at the next :meth:`flush` (at once unless :attr:`write_behind`)."""
        records = [r for r in records if r.id in self._row]
        if not records:
            return
        self._set_rows(records)
        self._touched.update(dict.fromkeys(r.id for r in records))
        self._written()

    def _set_rows(self, records: Sequence[MemoryRecord]) -> None:
        for rec in records:
            row = self._row[rec.id]
            self._records[row] = rec
            self.index.set_row(row, None, _row_columns(rec))

    def update_local(self, records: Sequence[MemoryRecord]) -> None:
        """Rewrite the metadata of existing records in the mirror only (retrieval sees it at once); Chroma gets it
        after the next :meth:`save_local` (then :meth:`flush`), or with the record's next upsert. For state a
        checkpoint also holds (the access marks of :meth:`~simulacra.memory.stream.AgentMemory.mark_accessed`): a
        Chroma call per tick and tier for them cost about a fifth of a tick (docs/scale.md). Unknown ids are
        skipped."""
        records = [r for r in records if r.id in self._row]
        self._set_rows(records)
        self._unsaved.update(dict.fromkeys(r.id for r in records))

    def save_local(self) -> None:
        """Queue for Chroma the metadata :meth:`update_local` changed since the last save (written by the next
        :meth:`flush`, at once unless :attr:`write_behind`)."""
        ids = [i for i in self._unsaved if i in self._row]
        self._unsaved.clear()
        if ids:
            self._touched.update(dict.fromkeys(ids))
            self._written()

    # ----------------------------------------------------------------- Chroma
    def _written(self) -> None:
        if not self.write_behind:
            self.flush()

    @property
    def pending(self) -> int:
        """Ids whose Chroma side waits for :meth:`flush` (written, changed or deleted since the last one)."""
        return len(self._dirty.keys() | self._touched.keys() | self._removed.keys())

    def _metadata(self, rec: MemoryRecord) -> dict:
        meta = rec.to_metadata(clear_unset=True)
        if self.owner is not None:
            meta[OWNER_KEY] = self.owner
        return meta

    def _touched_only(self) -> list[str]:
        """Ids in the tier whose metadata alone changed since the last flush (not written since)."""
        return [i for i in self._touched if i in self._row and i not in self._dirty]

    def needs_upsert(self) -> bool:
        """Whether :meth:`queued` has records to send whole: a memory written, or a change to one Chroma lacks."""
        return any(i in self._row for i in self._dirty) or any(i not in self._stored for i in self._touched_only())

    def queued(self, upsert: bool = False) -> _Upsert | _Update | None:
        """What :meth:`flush` would write now, without writing it: an upsert (every memory written or changed,
        final record and mirror embedding, in the order first written; metadata-only changes ride along) when
        :meth:`needs_upsert` or ``upsert`` (another tier of the collection sends one), else the metadata update
        (only access marks changed); ``None`` when nothing is queued.

        Why a metadata-only change is an ``update``: on chromadb 1.5 (embedded, WAL) an update of 5 memories' metadata
        takes about half the time of an upsert of the same 5 with their embeddings (``python -m bench.chroma_writes``,
        ``docs/scale.md``). The metadata is given with its unset optional fields as ``None``
        (:meth:`MemoryRecord.to_metadata` ``clear_unset``): Chroma merges an upserted or updated id's metadata into
        what it holds, so a cleared access mark must be removed explicitly."""
        touched = self._touched_only()
        if upsert or self.needs_upsert():
            ids = ([i for i in self._dirty if i in self._row] + [i for i in touched if i not in self._stored]
                   + [i for i in touched if i in self._stored])
            if not ids:
                return None
            recs, emb = self._rows_of(ids)
            return _Upsert(ids, emb, [r.text for r in recs], [self._metadata(r) for r in recs])
        if touched:
            return _Update(touched, [self._metadata(self._records[self._row[i]]) for i in touched])
        return None

    def _upserted(self) -> None:
        """The writes of :meth:`queued` are in Chroma."""
        self._stored.update(i for i in self._dirty if i in self._row)
        self._stored.update(i for i in self._touched if i in self._row)
        for i in self._dirty:
            self._unsaved.pop(i, None)  # the upsert carried the record's current marks
        self._dirty.clear()
        self._touched.clear()

    def journal_part(self) -> tuple[dict, np.ndarray] | None:
        """The tier's memories written since its last journal frame and still in it, as the journal records them
        (:mod:`simulacra.memory.journal`): ``({"key", "ids", "documents", "metadatas"}, float32 (n, dim))``, or
        ``None`` when there are none; they count as journaled from now on."""
        ids = [i for i in self._unjournaled if i in self._row]
        self._unjournaled.clear()
        if not ids:
            return None
        recs, emb = self._rows_of(ids)
        return ({"key": self.journal_key, "ids": ids, "documents": [r.text for r in recs],
                 "metadatas": [r.to_metadata() for r in recs]}, emb)

    def _rows_of(self, ids: Sequence[str]) -> tuple[list[MemoryRecord], np.ndarray]:
        """The records of ``ids`` (present) and their embeddings, float32 ``(len(ids), dim)``, from the mirror."""
        rows = [self._row[i] for i in ids]
        return [self._records[r] for r in rows], self.index.embeddings[rows]

    def journal_done(self) -> None:
        """Nothing of the tier is left to journal (its writes are all in Chroma: :meth:`StoreJournal.reset`)."""
        self._unjournaled.clear()

    def removed(self, memory_id: str) -> tuple[MemoryRecord, np.ndarray] | None:
        """The record and embedding of a memory deleted from the tier whose delete has not reached Chroma yet (a
        running simulation flushes deletes after a checkpoint), so that a restore to the last checkpoint can put it
        back; ``None`` otherwise (never deleted, deleted for good, or back in the tier)."""
        return None if memory_id in self._row else self._removed.get(memory_id)

    def queued_deletes(self) -> list[str]:
        """The ids a flush with deletes would delete from Chroma: held there, no longer in the tier."""
        return [i for i in self._removed if i in self._stored and i not in self._row]

    def _deleted(self) -> None:
        self._stored.difference_update(i for i in self._removed if i not in self._row)
        self._removed.clear()

    def flush(self, deletes: bool = True) -> int:
        """Apply this tier's queued writes to Chroma (:func:`flush_tiers` of this tier alone); returns the calls made.

        Raises:
            StoreUnavailable: with a server's ``retry``, the server did not answer within its retry window (the
                queue is kept).
        """
        return flush_tiers([self], deletes=deletes)

    def importance(self, now: float, params: ScoringParams) -> np.ndarray:
        """Decayed importance of every memory at game minute ``now``, in row order (:func:`decayed_importance`
        with ``params``' decay and exponent), shape ``(n,)``."""
        return self.index.importance(now, params)



@dataclass
class _Upsert:
    ids: list[str]
    embeddings: np.ndarray
    documents: list[str]
    metadatas: list[dict]


@dataclass
class _Update:
    ids: list[str]
    metadatas: list[dict]


def flush_tiers(tiers: Sequence[MemoryTier], deletes: bool = True, each=None) -> int:
    """Write the queued changes of ``tiers`` to Chroma with as few calls as the collections allow: per collection
    (tiers sharing one, e.g. every agent's short-term memory in a run's embedded town store, are written together)
    one ``upsert``, or one metadata ``update`` when only access marks changed, in the order of ``tiers``; then, with
    ``deletes``, one ``delete`` per collection; a write of more records than Chroma takes in one call
    (:attr:`MemoryTier.max_batch`) is split. Returns the calls made.

    Why grouped: an embedded Chroma write costs about 2.4 ms per call plus 0.5-0.8 ms per record (chromadb 1.5,
    ``docs/scale.md``), and a tick writes a few memories for each of many agents, so one call per collection instead
    of one per agent and tier is most of the store's time saved. Every write is idempotent (upsert, update and delete
    by id), so a call retried after a lost answer, or made again after a kill, changes nothing twice.

    Kill points: ``chroma`` after each upsert or update call, ``each()`` (if given) after each collection's writes,
    ``forget`` before the first delete call.

    Raises:
        StoreUnavailable: a tier's retrying call gave up (the writes not made stay queued in their tiers).
    """
    groups: dict[str, list[MemoryTier]] = {}
    for t in tiers:
        groups.setdefault(str(t.collection.id), []).append(t)
    calls = 0
    for members in groups.values():
        upsert = any(t.needs_upsert() for t in members)
        parts = [p for p in (t.queued(upsert) for t in members) if p is not None]
        if parts:
            columns = {"ids": [i for p in parts for i in p.ids], "metadatas": [m for p in parts for m in p.metadatas]}
            if upsert:
                columns["embeddings"] = np.concatenate([p.embeddings for p in parts])
                columns["documents"] = [d for p in parts for d in p.documents]
            first = members[0]
            calls += _in_batches(first, first.collection.upsert if upsert else first.collection.update,
                                 "writing to" if upsert else "updating", columns, after=lambda: kill_point("chroma"))
        for t in members:
            t._upserted()
        if parts and each is not None:
            each()
    if not deletes:
        return calls
    killed = False
    for members in groups.values():
        gone = [i for t in members for i in t.queued_deletes()]
        if gone:
            if not killed:
                kill_point("forget")
                killed = True
            calls += _in_batches(members[0], members[0].collection.delete, "deleting from", {"ids": gone})
        for t in members:
            t._deleted()
    return calls


def _in_batches(tier: MemoryTier, method, what: str, columns: dict, after=None) -> int:
    """``method(**columns)`` through ``tier``'s retrying call, in slices of at most :attr:`MemoryTier.max_batch`
    records (Chroma refuses larger calls), calling ``after()`` after each; returns the calls made."""
    n = len(columns["ids"])
    calls = 0
    for a in range(0, n, tier.max_batch):
        b = a + tier.max_batch
        tier._call(partial(method, **{k: v[a:b] for k, v in columns.items()}), what)
        calls += 1
        if after is not None:
            after()
    return calls
