"""The in-process mirror of one memory tier, and its exact top-k search.

Chroma is the durable store; this mirror keeps the same embeddings and raw scoring columns (rating,
game timestamps) as contiguous numpy arrays, grown by amortised doubling, so that every retrieval is
exact and vectorised.

Exact top-k without scoring every memory (large tiers)
-----------------------------------------------------
The score of memory ``i`` for query ``q`` is ``c_i + a_rel * rel(q . x_i)`` where
``c_i = a_rec * recency_i + a_imp * importance_i`` costs a few scalar operations and the relevance needs
a ``dim``-long dot product. For tiers of at least ``bound_min_rows`` memories the mirror keeps a
projection of the embeddings onto an orthonormal basis ``P`` of ``rank`` principal directions (fitted on
a sample, refitted when the tier doubles) plus each memory's residual norm. For every memory::

    x . q = mu . q + z . (P q) + r . q_perp,    |r . q_perp| <= ||r|| * ||q_perp||   (Cauchy-Schwarz)

bounds the dot product from both sides at ``rank`` instead of ``dim`` multiplications. Relevance is
monotone in the dot product in every Chroma space, so each memory gets a lower and an upper bound of
its score. With ``L`` the k-th largest lower bound, at least ``k`` memories score ``>= L``, so a memory
whose upper bound is under ``L`` cannot be in the top ``k``; only the rest (typically ~1 % at 100k) is
scored exactly. The result is the same ``top_k`` as a brute-force scan of the whole tier (up to
floating-point ties), which ``tests/test_exact_retrieval.py`` checks on random stores. The bound holds for
any orthonormal ``P``; the principal directions only make it tight. Measured crossover and figures:
``docs/memory.md``.
"""

from __future__ import annotations

import math

import numpy as np

from simulacra.memory.memo import LastAnswer
from simulacra.memory.scoring import (
    ScoreTerms,
    ScoringInputs,
    ScoringParams,
    TermRanges,
    fuse_relevance,
    recency_importance,
    recency_of,
    relevance_from_distance,
)
from simulacra.memory.selection import rank

#: tiers smaller than this are scanned exhaustively. Measured (per query, one OpenBLAS thread, 384-d MiniLM):
#: scan vs bounded 0.09 vs 0.17 ms at 1k, 0.23 vs 0.23 ms at 5k, 0.42 vs 0.29 ms at 10k, 11.9 vs 1.7 ms at 100k
BOUND_MIN_ROWS = 5_000
#: principal directions kept for the bounds (measured at 100k: rank 16 / 32 / 48 / 64 / 96 left 44 / 4.5 / 1.1 /
#: 0.8 / 0.4 % of the rows to score exactly; 48 was fastest overall)
BOUND_RANK = 48
_FIT_SAMPLE = 4096
#: raw columns per row (:meth:`MirrorIndex.columns_of`)
COLUMNS = 6


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def _read_only(x: np.ndarray) -> np.ndarray:
    """``x``, no longer writable (a kept answer is shared by every caller)."""
    x.flags.writeable = False
    return x


def squared_norms(emb: np.ndarray) -> np.ndarray:
    """Squared Euclidean norm of each row of float32 ``emb`` ``(m, dim)``, float32 ``(m,)``: one summation for every
    way a row enters the mirror (``einsum`` gives a row the same bits whatever the batch; ``vec @ vec`` does not), so
    a memory overwritten in place and the same memory reloaded on resume score the same to the last bit."""
    return np.einsum("ij,ij->i", emb, emb)


def distances_in(space: str, embeddings: np.ndarray, query: np.ndarray, sqnorm: np.ndarray | None = None
                 ) -> np.ndarray:
    """Distance of each row of ``embeddings`` ``(n, dim)`` to ``query`` ``(dim,)`` in Chroma's ``space``: ``"l2"``
    (squared Euclidean), ``"cosine"`` (``1 - cos``) or ``"ip"`` (``1 - dot``); float64 ``(n,)``. ``sqnorm``: the
    rows' squared norms when already known. The one rule of a tier's distances (:meth:`MirrorIndex.distances`) and
    of anything scored beside them (a forgotten memory in ``simulacra interview``)."""
    emb = np.asarray(embeddings, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    sq = squared_norms(emb) if sqnorm is None else sqnorm
    dots = emb @ q
    if space == "l2":
        return np.maximum((sq + np.float32(q @ q) - 2.0 * dots).astype(np.float64), 0.0)
    if space == "ip":
        return 1.0 - dots.astype(np.float64)
    norms = np.sqrt(sq) * np.float32(np.linalg.norm(q))
    with np.errstate(invalid="ignore", divide="ignore"):
        cos = np.where(norms > 0, dots / norms, 0.0)
    return 1.0 - cos.astype(np.float64)


class MirrorIndex:
    """Embeddings and raw scoring columns of one tier, row-aligned with the tier's record list.

    Args:
        dim: embedding dimension.
        space: ``"l2"`` (squared Euclidean), ``"cosine"`` (``1 - cos``) or ``"ip"`` (``1 - dot``), as Chroma.
        bound_min_rows: tiers at least this large use the bounded exact search; ``None`` never does.
        rank: dimension of the bounding projection (``< dim``).
    """

    def __init__(self, dim: int, space: str = "l2", bound_min_rows: int | None = BOUND_MIN_ROWS,
                 rank: int = BOUND_RANK):
        if space not in ("l2", "cosine", "ip"):
            raise ValueError(f"unknown distance space {space!r}")
        self.dim = dim
        self.space = space
        self.bound_min_rows = bound_min_rows
        self.rank = max(1, min(rank, dim - 1))
        self._n = 0
        self._emb = np.zeros((0, dim), dtype=np.float32)
        self._sqnorm = np.zeros(0, dtype=np.float32)
        # rating, created, accessed, decay origin (decay_since), span start, span end (MemoryRecord.span)
        self._cols = np.zeros((COLUMNS, 0), dtype=np.float64)
        self._basis: np.ndarray | None = None  # (rank, dim)
        self._mu: np.ndarray | None = None
        self._proj = np.zeros((0, self.rank), dtype=np.float32)
        self._resid = np.zeros(0, dtype=np.float32)
        self._fitted_n = 0
        self._version = 0  # bumped by every write; keys the cache of the cheap score part
        # kept until the next write (memo.LastAnswer): the cheap score part (float64, float32) per game time and
        # parameters, the importance per game time and decay, the dense relevance of the last query
        self._cheap_cache: LastAnswer[tuple[np.ndarray, np.ndarray]] = LastAnswer()
        self._importance_cache: LastAnswer[np.ndarray] = LastAnswer()
        self._dense_cache: LastAnswer[np.ndarray] = LastAnswer()
        self.last_scored = 0  # memories scored exactly by the last top() (for tests and benches)

    @property
    def version(self) -> int:
        """A number every write changes: what was computed from the rows holds while it stays."""
        return self._version

    # ----------------------------------------------------------------- columns (views of the first n rows)
    def __len__(self) -> int:
        return self._n

    @property
    def embeddings(self) -> np.ndarray:
        return self._emb[: self._n]

    @property
    def rating(self) -> np.ndarray:
        return self._cols[0, : self._n]

    @property
    def created(self) -> np.ndarray:
        return self._cols[1, : self._n]

    @property
    def accessed(self) -> np.ndarray:
        return self._cols[2, : self._n]

    @property
    def long_term_since(self) -> np.ndarray:
        """Where each row's long-term decay counts from (:attr:`MemoryRecord.decay_since`: entering long-term or
        the last rehearsal, the later); NaN while short-term."""
        return self._cols[3, : self._n]

    @property
    def span(self) -> tuple[np.ndarray, np.ndarray]:
        """The game minutes each row is about, ``(start, end)`` (:attr:`MemoryRecord.span
        <simulacra.memory.records.MemoryRecord.span>`: the hours of the plan it states; the creation minute
        for every other memory; NaN for static ones)."""
        return self._cols[4, : self._n], self._cols[5, : self._n]

    def importance(self, now: float, params: ScoringParams, rows: np.ndarray | None = None) -> np.ndarray:
        """Decayed importance of the rows (all by default) at game minute ``now`` under ``params``
        (:func:`~simulacra.memory.scoring.decayed_importance`), shape ``(n,)``; NaN for static memories. The
        answer for all rows is kept (read-only) until the next write or another game time or decay."""
        if rows is not None:
            return params.importance(self.rating[rows], self.long_term_since[rows], now)
        key = (self._version, now, params.long_term_decay_per_hour, params.decay_importance_exponent,
               params.decay_importance_pivot)  # a tick's retrievals of this tier ask at one game time
        return self._importance_cache.get(key, lambda: _read_only(
            params.importance(self.rating, self.long_term_since, now)))

    # ----------------------------------------------------------------- writes
    @staticmethod
    def columns_of(rating, timestamp, last_accessed, long_term_since,
                   span: tuple[float, float] | None = None) -> tuple[float, ...]:
        """One row of raw columns from a record's fields (``None`` -> NaN); ``accessed`` falls back to creation,
        ``span`` (the game minutes the memory is about) to ``(timestamp, timestamp)``."""
        accessed = last_accessed if last_accessed is not None else timestamp
        lo, hi = span if span is not None else (timestamp, timestamp)
        return _nan(rating), _nan(timestamp), _nan(accessed), _nan(long_term_since), _nan(lo), _nan(hi)

    def _reserve(self, n: int) -> None:
        cap = self._emb.shape[0]
        if n <= cap:
            return
        new = max(n, 2 * cap, 64)
        emb = np.zeros((new, self.dim), dtype=np.float32)
        emb[: self._n] = self._emb[: self._n]
        sq = np.zeros(new, dtype=np.float32)
        sq[: self._n] = self._sqnorm[: self._n]
        cols = np.full((COLUMNS, new), np.nan)
        cols[:, : self._n] = self._cols[:, : self._n]
        self._emb, self._sqnorm, self._cols = emb, sq, cols
        if self._basis is not None:
            proj = np.zeros((new, self.rank), dtype=np.float32)
            proj[: self._n] = self._proj[: self._n]
            resid = np.zeros(new, dtype=np.float32)
            resid[: self._n] = self._resid[: self._n]
            self._proj, self._resid = proj, resid

    def append(self, embeddings: np.ndarray, columns: np.ndarray) -> None:
        """Append rows: ``embeddings`` ``(m, dim)``, ``columns`` ``(m, 6)`` from :meth:`columns_of`."""
        emb = np.asarray(embeddings, dtype=np.float32).reshape(-1, self.dim)
        m = emb.shape[0]
        if m == 0:
            return
        start = self._n
        self._reserve(start + m)
        self._emb[start:start + m] = emb
        self._sqnorm[start:start + m] = squared_norms(emb)
        self._cols[:, start:start + m] = np.asarray(columns, dtype=np.float64).reshape(m, COLUMNS).T
        self._n += m
        self._version += 1
        if self._basis is not None:
            self._project(start, self._n)

    def set_row(self, row: int, embedding: np.ndarray | None, columns: tuple[float, ...]) -> None:
        """Overwrite row ``row``'s columns (:meth:`columns_of`), and its embedding when given."""
        self._version += 1
        self._cols[:, row] = columns
        if embedding is not None:
            vec = np.asarray(embedding, dtype=np.float32).reshape(self.dim)
            self._emb[row] = vec
            self._sqnorm[row] = squared_norms(vec[None])[0]
            if self._basis is not None:
                self._project(row, row + 1)

    def keep(self, mask: np.ndarray) -> None:
        """Drop the rows where ``mask`` (bool, ``(n,)``) is false, keeping order."""
        idx = np.flatnonzero(mask)
        m = len(idx)
        self._version += 1
        self._emb[:m] = self._emb[idx]
        self._sqnorm[:m] = self._sqnorm[idx]
        self._cols[:, :m] = self._cols[:, idx]
        if self._basis is not None:
            self._proj[:m] = self._proj[idx]
            self._resid[:m] = self._resid[idx]
        self._n = m

    # ----------------------------------------------------------------- exact scoring
    def distances(self, query: np.ndarray, rows: np.ndarray | None = None) -> np.ndarray:
        """Distance of each memory (all, or ``rows``) to ``query`` ``(dim,)`` in the tier's space; float64."""
        emb = self.embeddings if rows is None else self._emb[rows]
        sq = self._sqnorm[: self._n] if rows is None else self._sqnorm[rows]
        return distances_in(self.space, emb, query, sq)

    def dense_relevance(self, query: np.ndarray) -> np.ndarray:
        """Dense relevance ``1 / (1 + distance)`` (:func:`~simulacra.memory.scoring.relevance_from_distance`) of
        every row for ``query`` ``(dim,)``, float64 ``(n,)``, read-only. The last query's answer is kept until the
        next write: a retrieval ranks a tier (:meth:`top`) and then records its skyband (:meth:`skyband`) for the
        same query."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        return self._dense_cache.get((self._version, q.tobytes()),
                                     lambda: _read_only(relevance_from_distance(self.distances(q))))

    def _reference(self, recency_from: str) -> np.ndarray:
        return self._cols[2 if recency_from == "last_access" else 1, : self._n]

    def _span_of(self, recency_from: str, rows: np.ndarray | slice = slice(None)
                 ) -> tuple[np.ndarray, np.ndarray] | None:
        """The span of ``rows`` that a named time measures recency from: the rows' :attr:`span` when recency
        counts from creation, ``None`` (the reference time alone) under ``recency_from: last_access``."""
        if recency_from == "last_access":
            return None
        lo, hi = self.span
        return lo[rows], hi[rows]

    def _age(self, now: float, params: ScoringParams, recency_from: str,
             rows: np.ndarray | slice = slice(None)) -> np.ndarray:
        """Recency's age of ``rows`` (all by default) at ``now``, game minutes (:meth:`ScoringParams.age
        <simulacra.memory.scoring.ScoringParams.age>`, with the span under a named time)."""
        span = None if params.named is None else self._span_of(recency_from, rows)
        return params.age(self._reference(recency_from)[rows], now, span)

    def inputs(self, query: np.ndarray, recency_from: str = "created", rows: np.ndarray | None = None,
               lexical: np.ndarray | None = None) -> ScoringInputs:
        """The raw scoring inputs of every memory (or of ``rows``) for ``query``, in row order (copies);
        ``lexical`` (``(n,)``, every row) is the lexical relevance for lexical or hybrid scoring."""
        sel = slice(None) if rows is None else rows
        span = self._span_of(recency_from, sel)
        return ScoringInputs(self.distances(query, rows), self.rating[sel].copy(),
                             self._reference(recency_from)[sel].copy(), self.long_term_since[sel].copy(),
                             None if lexical is None else np.array(lexical[sel], dtype=np.float64),
                             None if span is None else (span[0].copy(), span[1].copy()))

    def score(self, query: np.ndarray, now: float, params: ScoringParams, recency_from: str = "created",
              rows: np.ndarray | None = None, lexical: np.ndarray | None = None) -> ScoreTerms:
        """Exact score terms of every memory (or of ``rows``) for ``query``; see :mod:`simulacra.memory.scoring`."""
        return self.inputs(query, recency_from, rows, lexical).score(now, params)

    def top(self, query: np.ndarray, now: float, params: ScoringParams, k: int,
            recency_from: str = "created", lexical: np.ndarray | None = None) -> tuple[np.ndarray, ScoreTerms]:
        """Rows of the ``k`` best-scoring memories, best first (ties: lower row first), and their terms.

        Exactly the rows a brute-force scan of the whole tier returns. Dense relevance: tiers of at least
        ``bound_min_rows`` rows are searched with the bounds of the module docstring. Lexical and hybrid
        relevance (``lexical``: the lexical relevance of every row, ``(n,)``) score every row; lexical relevance
        computes no distance except for the picked rows (their explanation). The query-independent part of the
        score is cached per game time (see :meth:`_cheap`).

        Raises:
            ValueError: ``lexical`` missing under lexical or hybrid relevance.
        """
        n = self._n
        k = min(k, n)
        if k <= 0:
            empty = np.zeros(0)
            lex = empty if params.lexical else None
            return np.zeros(0, dtype=np.int64), ScoreTerms(empty, empty, empty, empty, lex, lex)
        if params.tier_wide:
            return self._top_whole(query, now, params, k, recency_from, lexical)
        if params.lexical:
            return self._top_lexical(query, now, params, k, recency_from, lexical)
        rows = None
        if self.bound_min_rows is not None and n >= self.bound_min_rows and k < n:
            rows = self._candidates(query, now, params, k, recency_from)
        if rows is None:  # every row: the same sum as score_memories, with the cached cheap part
            index = np.arange(n)
            relevance = self.dense_relevance(query)
            score = self._cheap(now, params, recency_from)[0] + params.a_rel * relevance
        else:
            index = rows
            scored = self.score(query, now, params, recency_from, rows)
            relevance, score = scored.relevance, scored.score
        self.last_scored = len(index)
        if k < len(index):  # every row tied with the k-th best stays in, so ties really break by row
            kth = np.partition(score, len(index) - k)[len(index) - k]
            part = np.flatnonzero(score >= kth)
        else:
            part = np.arange(len(index))
        order = part[rank(score[part], index[part])][:k]  # the one tie-break (selection.rank)
        picked = index[order]
        # the terms of the picked rows; relevance and score are the very numbers that were ranked
        recency = recency_of(self._age(now, params, recency_from, picked), params.gamma,
                             params.recency_window_minutes)
        importance = self.importance(now, params, picked)
        return picked, ScoreTerms(recency=recency, importance=importance, relevance=relevance[order],
                                  score=score[order])

    def _top_whole(self, query: np.ndarray, now: float, params: ScoringParams, k: int, recency_from: str,
                   lexical: np.ndarray | None) -> tuple[np.ndarray, ScoreTerms]:
        """:meth:`top` when a score depends on the whole tier (``normalize: minmax``, RRF): every row is scored
        with :func:`~simulacra.memory.scoring.score_memories` (no bounds), the picked rows' terms returned."""
        n = self._n
        if params.lexical and (lexical is None or len(lexical) != n):
            raise ValueError(f"{params.relevance} relevance needs the lexical relevance of all {n} rows")
        terms = self.score(query, now, params, recency_from, lexical=lexical if params.lexical else None)
        score = terms.score
        self.last_scored = n
        if k < n:
            kth = np.partition(score, n - k)[n - k]
            part = np.flatnonzero(score >= kth)
        else:
            part = np.arange(n)
        picked = part[rank(score[part], part)][:k]
        return picked, terms.take(picked)

    def extremes(self, query: np.ndarray, now: float, params: ScoringParams, recency_from: str = "created",
                 lexical: np.ndarray | None = None) -> list[float | None]:
        """The tier's ``[relevance min, max, importance min, max, age min, max]`` for ``query`` at ``now`` (age in
        game minutes; ``None`` where no memory has the term): what ``simulacra rescore`` needs to redo
        ``normalize: minmax`` under other weights and ``gamma`` (recency is monotone in age)."""
        dense = None if params.relevance == "lexical" else self.dense_relevance(query)
        rel = fuse_relevance(dense, lexical, params)
        imp = self.importance(now, params)
        age = np.maximum(self._age(now, params, recency_from), 0.0)
        out: list[float | None] = []
        for x in (rel, imp, age):
            lo, hi = TermRanges.of(x, x, x).relevance
            out += [None, None] if math.isnan(lo) else [lo, hi]
        return out

    def _top_lexical(self, query: np.ndarray, now: float, params: ScoringParams, k: int, recency_from: str,
                     lexical: np.ndarray | None) -> tuple[np.ndarray, ScoreTerms]:
        """:meth:`top` under lexical or hybrid relevance, the same sum as ``score_memories``. Lexical: every row
        scored (no distance needed). Hybrid: the lexical part ``a_rel * w * lexical`` is exact for every row, so
        in large tiers the dense bounds of the module docstring (scaled by ``a_rel * (1 - w)``) leave out the
        rows that cannot make the top ``k``, as under dense relevance."""
        n = self._n
        if lexical is None or len(lexical) != n:
            raise ValueError(f"{params.relevance} relevance needs the lexical relevance of all {n} rows")
        lex = np.asarray(lexical, dtype=np.float64)
        hybrid = params.relevance == "hybrid" and params.hybrid_weight < 1.0
        rows = None
        if hybrid and self.bound_min_rows is not None and n >= self.bound_min_rows and k < n:
            w = params.hybrid_weight
            rows = self._candidates(query, now, params, k, recency_from, lexical=lex,
                                    rel_scale=params.a_rel * (1.0 - w), extra=params.a_rel * w * lex)
        if rows is None:
            index = np.arange(n)
            dense = self.dense_relevance(query) if hybrid else None
            relevance = fuse_relevance(dense, lex, params)
            score = self._cheap(now, params, recency_from)[0] + params.a_rel * relevance
        else:
            index = rows
            scored = self.score(query, now, params, recency_from, rows, lex)
            dense, relevance, score = scored.dense, scored.relevance, scored.score
        self.last_scored = len(index)
        if k < len(index):
            kth = np.partition(score, len(index) - k)[len(index) - k]
            part = np.flatnonzero(score >= kth)
        else:
            part = np.arange(len(index))
        order = part[rank(score[part], index[part])][:k]
        picked = index[order]
        if dense is None:
            dense_picked = relevance_from_distance(self.distances(query, picked))
        else:
            dense_picked = dense[order]
        recency = recency_of(self._age(now, params, recency_from, picked), params.gamma,
                             params.recency_window_minutes)
        importance = self.importance(now, params, picked)
        return picked, ScoreTerms(recency, importance, relevance[order], score[order], dense_picked, lex[picked])

    def skyband(self, query: np.ndarray, now: float, params: ScoringParams, k: int, recency_from: str = "created",
                limit: int | None = None, lexical: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
        """The memories that can be in the top ``k`` under *some* non-negative weights and *some* recency
        ``gamma`` / window: the k-skyband of (relevance, recency order, importance). Recorded in the trace so
        that ``simulacra rescore`` re-ranks a retrieval exactly under other weights.

        Memory ``j`` surely ranks before ``i`` under every such setting iff it is at least as relevant, at
        least as recent and at least as important, and either comes first in row order (ties break by row)
        or is strictly better on all three. A memory that ``k`` others surely beat cannot be returned.
        Relevance comes from the same full scan as :meth:`top`'s, so re-ranking reproduces its numbers; under
        lexical or hybrid relevance it is the fused relevance (``lexical``: the lexical relevance of every row),
        which re-ranking under other weights keeps.

        Returns:
            ``(rows, relevance, importance, age_minutes)`` in row order (importance and age NaN where the
            memory has none), or ``None`` when the tier has more than ``limit`` memories (O(n^2) check).
        """
        n = self._n
        if limit is not None and n > limit:
            return None
        if params.lexical:
            dense = None if params.relevance == "lexical" else self.dense_relevance(query)
            rel = fuse_relevance(dense, lexical, params)
        else:
            rel = self.dense_relevance(query)
        age = np.maximum(self._age(now, params, recency_from), 0.0)
        imp = self.importance(now, params)
        recent = np.where(np.isnan(age), -np.inf, -age)  # no timestamp: recency 0 under every gamma
        important = np.nan_to_num(imp, nan=0.0)
        keep = np.ones(n, dtype=bool)
        for start in range(0, n, 512):  # blocks of rows i, against every j
            i = np.arange(start, min(n, start + 512))
            ge = ((rel[None, :] >= rel[i, None]) & (recent[None, :] >= recent[i, None])
                  & (important[None, :] >= important[i, None]))
            gt = ((rel[None, :] > rel[i, None]) & (recent[None, :] > recent[i, None])
                  & (important[None, :] > important[i, None]))
            earlier = np.arange(n)[None, :] < i[:, None]
            keep[i] = (ge & (earlier | gt)).sum(axis=1) < k
        rows = np.flatnonzero(keep)
        return rows, rel[rows], imp[rows], age[rows]

    # ----------------------------------------------------------------- bounded search
    def _fit(self) -> None:
        n = self._n
        step = max(1, n // _FIT_SAMPLE)
        sample = self._emb[:n:step].astype(np.float64)
        mu = sample.mean(axis=0)
        _, _, vt = np.linalg.svd(sample - mu, full_matrices=False)
        basis = vt[: self.rank]
        if basis.shape[0] < self.rank:  # fewer samples than rank: pad with zero rows (bound stays valid)
            basis = np.vstack([basis, np.zeros((self.rank - basis.shape[0], self.dim))])
        self._mu = mu.astype(np.float32)
        self._basis = np.ascontiguousarray(basis, dtype=np.float32)
        cap = self._emb.shape[0]
        self._proj = np.zeros((cap, self.rank), dtype=np.float32)
        self._resid = np.zeros(cap, dtype=np.float32)
        self._fitted_n = n
        self._project(0, n)

    def _project(self, start: int, stop: int) -> None:
        centred = self._emb[start:stop] - self._mu
        z = centred @ self._basis.T
        self._proj[start:stop] = z
        total = np.einsum("ij,ij->i", centred, centred)
        self._resid[start:stop] = np.sqrt(np.maximum(total - np.einsum("ij,ij->i", z, z), 0.0))

    def _cheap(self, now: float, params: ScoringParams, recency_from: str) -> tuple[np.ndarray, np.ndarray]:
        """``a_rec * recency + a_imp * importance`` of every row, as float64 and float32 (for the bounds);
        cached until the next write or a change of game time, weights or recency reference, so that one
        tick's retrievals compute it once."""
        key = (self._version, now, params.a_rec, params.a_imp, params.gamma, params.recency_window_minutes,
               params.long_term_decay_per_hour, params.decay_importance_exponent,
               params.decay_importance_pivot, params.named, recency_from)
        def compute() -> tuple[np.ndarray, np.ndarray]:
            rec = recency_of(self._age(now, params, recency_from), params.gamma,
                             params.recency_window_minutes)
            cheap = recency_importance(rec, self.importance(now, params), params)
            return cheap, cheap.astype(np.float32)

        return self._cheap_cache.get(key, compute)

    def _candidates(self, query: np.ndarray, now: float, params: ScoringParams, k: int,
                    recency_from: str, lexical: np.ndarray | None = None, rel_scale: float | None = None,
                    extra: np.ndarray | None = None) -> np.ndarray | None:
        """Rows that may be in the top ``k`` (a superset of it), or ``None`` when scanning all is cheaper.

        Upper bounds are computed in float32 in place (a dozen passes over ``n`` floats); the bar ``L`` is
        the k-th best exact score among the ``4k`` rows with the highest upper bounds, so every row whose
        upper bound is under ``L`` is out. Hybrid relevance: the dense bound is scaled by ``rel_scale``
        (``a_rel * (1 - w)``) instead of ``a_rel`` and the exact lexical part ``extra`` (``(n,)``) is added;
        ``lexical`` is passed on to the exact scoring.
        """
        n = self._n
        if self._basis is None or n >= 2 * self._fitted_n:
            self._fit()
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        pq = self._basis @ q
        qq = float(q @ q)
        q_norm = math.sqrt(qq)
        q_perp = math.sqrt(max(qq - float(pq @ pq), 0.0))
        # slack for float32 rounding in the projection and in the exact path (unit-scale vectors: ~1e-6)
        eps = 1e-4 * (1.0 + q_norm * (math.sqrt(float(self._sqnorm[:n].max())) + 1.0))
        upper = self._proj[:n] @ pq  # the dot product's projected part ...
        upper += np.float32(float(self._mu @ q) + eps)
        upper += self._resid[:n] * np.float32(q_perp)  # ... plus the Cauchy-Schwarz bound: an upper bound of q . x
        if self.space == "l2":  # lower bound of the distance
            upper *= np.float32(-2.0)
            upper += self._sqnorm[:n]
            upper += np.float32(qq)
        elif self.space == "ip":
            np.subtract(np.float32(1.0), upper, out=upper)
        else:
            norms = np.sqrt(self._sqnorm[:n]) * np.float32(q_norm)
            with np.errstate(invalid="ignore", divide="ignore"):
                upper = np.where(norms > 0, 1.0 - upper / norms, 1.0).astype(np.float32)
        np.maximum(upper, np.float32(0.0), out=upper)
        upper += np.float32(1.0)
        np.reciprocal(upper, out=upper)  # upper bound of the relevance
        upper *= np.float32(params.a_rel if rel_scale is None else rel_scale)
        upper += self._cheap(now, params, recency_from)[1]  # upper bound of the score
        if extra is not None:  # hybrid: the lexical part, exact (float32 rounding is covered by the bar's slack)
            upper += extra.astype(np.float32)
        m = min(n, max(4 * k, 64))
        probe = np.argpartition(upper, n - m)[n - m:]
        probe_scores = self.score(query, now, params, recency_from, probe, lexical).score
        bar = np.partition(probe_scores, m - k)[m - k] - 1e-6 * (1.0 + params.a_rel + params.max_recency_importance)
        cand = np.flatnonzero(upper >= bar)
        return None if len(cand) > n // 2 else cand
