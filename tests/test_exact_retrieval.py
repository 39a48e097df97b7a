"""Retrieval is exact: the bounded search returns what a brute-force scan of every memory returns."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simulacra.memory.index import MirrorIndex
from simulacra.memory.scoring import ScoringParams


def brute_force_scores(emb, rating, created, accessed, lt_since, q, now, p: ScoringParams, space, recency_from):
    """The score of every memory, written out independently of simulacra's code (float64)."""
    e = emb.astype(np.float64)
    qv = q.astype(np.float64)
    if space == "l2":
        dist = ((e - qv) ** 2).sum(axis=1)
    elif space == "ip":
        dist = 1.0 - e @ qv
    else:
        norms = np.linalg.norm(e, axis=1) * np.linalg.norm(qv)
        dist = 1.0 - np.divide(e @ qv, norms, out=np.zeros(len(e)), where=norms > 0)
    rel = 1.0 / (1.0 + np.maximum(dist, 0.0))
    ref = accessed if recency_from == "last_access" else created
    out = np.empty(len(e))
    for i in range(len(e)):
        s = p.a_rel * rel[i]
        if not math.isnan(ref[i]):
            if p.named is None:
                age = max(now - ref[i], 0.0)
            else:  # a query that names a time: the distance to its window
                age = max(p.named[0] - ref[i], 0.0) + max(ref[i] - p.named[1], 0.0)
            s += p.a_rec * (1.0 if age < p.recency_window_minutes else p.gamma ** (age / 60.0))
        if not math.isnan(rating[i]):
            hours = 0.0 if math.isnan(lt_since[i]) else max(now - lt_since[i], 0.0) / 60.0
            if rating[i] > p.decay_importance_pivot:  # importance-dependent decay: slower above the pivot
                hours *= (p.decay_importance_pivot / rating[i]) ** p.decay_importance_exponent
            s += p.a_imp * rating[i] / 10.0 * p.long_term_decay_per_hour ** hours
        out[i] = s
    return out


def float32_tolerance(emb, q, params) -> float:
    """Scores are exact up to float32 rounding of the dot products (embeddings are stored as float32)."""
    size = max(1.0, float((emb.astype(np.float64) ** 2).sum(axis=1).max()), float(q.astype(np.float64) @ q))
    return 1e-6 * size * max(1.0, params.a_rel)


def assert_same_top(rows, scores, bf, k, tol):
    """``rows`` are the brute-force top ``k`` up to ties within ``tol``, in score order."""
    k = min(k, len(bf))
    assert len(rows) == k
    expected = np.sort(bf)[::-1][:k]
    np.testing.assert_allclose(scores, expected, atol=tol)
    np.testing.assert_allclose(bf[rows], expected, atol=tol)
    if k:
        kth = expected[-1]
        must = set(np.flatnonzero(bf > kth + tol).tolist())
        assert must <= set(rows.tolist())


@st.composite
def stores(draw):
    n = draw(st.integers(1, 300))
    dim = draw(st.sampled_from([3, 8, 16]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    clusters = rng.normal(size=(draw(st.integers(1, 6)), dim))
    emb = clusters[rng.integers(len(clusters), size=n)] + rng.normal(scale=draw(st.sampled_from([0.0, 0.05, 0.5])),
                                                                     size=(n, dim))
    if draw(st.booleans()):
        emb /= np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12)
    if draw(st.booleans()):  # exact duplicates: ties everywhere
        emb[rng.integers(n, size=n // 3)] = emb[0]
    rating = rng.integers(1, 11, size=n).astype(float)
    created = rng.uniform(0, 3000, size=n)
    static = rng.random(n) < draw(st.sampled_from([0.0, 0.3]))
    rating[static] = np.nan
    created[static] = np.nan
    accessed = np.where(rng.random(n) < 0.5, created + rng.uniform(0, 500, size=n), created)
    lt_since = np.where(rng.random(n) < 0.5, created + 60, np.nan)
    params = ScoringParams(
        a_rec=draw(st.sampled_from([0.0, 0.25, 1.0, 3.0])),
        a_imp=draw(st.sampled_from([0.0, 0.25, 1.0, 3.0])),
        a_rel=draw(st.sampled_from([0.0, 0.5, 1.0, 5.0])),
        gamma=draw(st.sampled_from([0.5, 0.995, 1.0])),
        recency_window_minutes=draw(st.sampled_from([0.0, 60.0])),
        long_term_decay_per_hour=draw(st.sampled_from([0.9, 0.99, 1.0])),
        decay_importance_exponent=draw(st.sampled_from([0.0, 3.0, 8.0])),
        decay_importance_pivot=draw(st.sampled_from([4.0, 6.5])),
        named=draw(st.sampled_from([None, (1000.0, 1000.0), (500.0, 1500.0)])),
    )
    q = rng.normal(size=dim) if not draw(st.booleans()) else emb[rng.integers(n)] + 0.01
    return dict(
        emb=emb.astype(np.float32), rating=rating, created=created, accessed=accessed, lt_since=lt_since,
        q=q.astype(np.float32), now=float(draw(st.sampled_from([0.0, 3000.0, 10_000.0]))), params=params,
        space=draw(st.sampled_from(["l2", "cosine", "ip"])), k=draw(st.integers(1, 12)),
        rank=draw(st.integers(1, dim - 1)), recency_from=draw(st.sampled_from(["created", "last_access"])),
    )


def columns(rating, created, accessed, lt_since) -> np.ndarray:
    """The index's raw rows (:meth:`MirrorIndex.columns_of`, each memory about its creation minute), ``(n, 6)``."""
    return np.array([MirrorIndex.columns_of(*row) for row in zip(rating, created, accessed, lt_since)])


def build(s, bound_min_rows):
    idx = MirrorIndex(s["emb"].shape[1], s["space"], bound_min_rows=bound_min_rows, rank=s["rank"])
    cols = columns(s["rating"], s["created"], s["accessed"], s["lt_since"])
    half = len(cols) // 2  # two writes: rows appended after the basis was fitted are projected too
    idx.append(s["emb"][:half], cols[:half])
    if half:
        idx.top(s["q"], s["now"], s["params"], s["k"], s["recency_from"])
    idx.append(s["emb"][half:], cols[half:])
    return idx


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores())
def test_bounded_search_equals_brute_force(s):
    bf = brute_force_scores(s["emb"], s["rating"], s["created"], s["accessed"], s["lt_since"], s["q"], s["now"],
                            s["params"], s["space"], s["recency_from"])
    for bound in (0, None):  # bounded search forced on every size, and the plain scan
        rows, terms = build(s, bound).top(s["q"], s["now"], s["params"], s["k"], s["recency_from"])
        assert_same_top(rows, terms.score, bf, s["k"], float32_tolerance(s["emb"], s["q"], s["params"]))


@settings(max_examples=60, deadline=None)
@given(stores(), st.data())
def test_exact_after_deletes_and_overwrites(s, data):
    idx = build(s, 0)
    n = len(idx)
    keep = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    if not keep.any():
        keep[0] = True
    idx.keep(keep)
    emb = s["emb"][keep].copy()
    cols = columns(s["rating"], s["created"], s["accessed"], s["lt_since"])[keep]
    row = data.draw(st.integers(0, len(emb) - 1))
    emb[row] = -emb[row]
    cols[row] = MirrorIndex.columns_of(7.0, 100.0, 100.0, math.nan)
    idx.set_row(row, emb[row], tuple(cols[row]))
    bf = brute_force_scores(emb, cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], s["q"], s["now"], s["params"],
                            s["space"], s["recency_from"])
    rows, terms = idx.top(s["q"], s["now"], s["params"], s["k"], s["recency_from"])
    assert_same_top(rows, terms.score, bf, s["k"], float32_tolerance(emb, s["q"], s["params"]))


def test_bounded_search_prunes_on_clustered_embeddings():
    """On embedding-like data the bounds let most memories go unscored, and the answer is still exact."""
    rng = np.random.default_rng(7)
    dim, n = 64, 20_000
    # like sentence embeddings: most variance in a few directions, plus small isotropic noise
    centres = rng.normal(size=(200, 12)) @ rng.normal(size=(12, dim))
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    emb = centres[rng.integers(200, size=n)] + rng.normal(scale=0.01, size=(n, dim))
    emb = (emb / np.linalg.norm(emb, axis=1, keepdims=True)).astype(np.float32)
    rating = rng.integers(1, 11, size=n).astype(float)
    created = rng.uniform(0, 5000, size=n)
    cols = columns(rating, created, created, np.full(n, np.nan))
    idx = MirrorIndex(dim, "l2", bound_min_rows=1000, rank=16)
    idx.append(emb, cols)
    params = ScoringParams()
    scored = []
    for qi in range(20):
        q = (centres[qi] / np.linalg.norm(centres[qi])).astype(np.float32)
        rows, terms = idx.top(q, 6000.0, params, 5)
        scored.append(idx.last_scored)
        bf = brute_force_scores(emb, rating, created, created, cols[:, 3], q, 6000.0, params, "l2", "created")
        assert_same_top(rows, terms.score, bf, 5, 1e-6)
    assert max(scored) < n // 10, scored


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(stores(), st.sampled_from([0.0, 0.3, 0.7, 1.0]), st.sampled_from([0.0, 0.5, 0.9]))
def test_hybrid_bounded_search_equals_brute_force(s, weight, zeros):
    """Hybrid relevance: the dense bounds plus the exact lexical part give the brute-force top k."""
    rng = np.random.default_rng(len(s["emb"]))
    lexical = np.where(rng.random(len(s["emb"])) < zeros, 0.0, rng.random(len(s["emb"])))
    p = s["params"]
    hybrid = ScoringParams(p.a_rec, p.a_imp, p.a_rel, p.gamma, p.recency_window_minutes, p.long_term_decay_per_hour,
                           relevance="hybrid", hybrid_weight=weight,
                           decay_importance_exponent=p.decay_importance_exponent,
                           decay_importance_pivot=p.decay_importance_pivot)
    dense_only = ScoringParams(p.a_rec, p.a_imp, p.a_rel * (1.0 - weight), p.gamma, p.recency_window_minutes,
                               p.long_term_decay_per_hour, decay_importance_exponent=p.decay_importance_exponent,
                               decay_importance_pivot=p.decay_importance_pivot)
    bf = brute_force_scores(s["emb"], s["rating"], s["created"], s["accessed"], s["lt_since"], s["q"], s["now"],
                            dense_only, s["space"], s["recency_from"]) + p.a_rel * weight * lexical
    for bound in (0, None):
        rows, terms = build(s, bound).top(s["q"], s["now"], hybrid, s["k"], s["recency_from"], lexical)
        assert_same_top(rows, terms.score, bf, s["k"], float32_tolerance(s["emb"], s["q"], p))
        np.testing.assert_allclose(terms.lexical, lexical[rows])


def test_cached_terms_follow_queries_writes_and_game_time():
    """A tier keeps its last query's dense relevance and its importance at one game time (a retrieval ranks, then
    records its skyband, with the same ones); a new query, a write or another game time must give fresh numbers."""
    rng = np.random.default_rng(11)
    idx = MirrorIndex(8, "cosine")
    emb = rng.normal(size=(30, 8)).astype(np.float32)
    cols = columns(rng.integers(1, 11, 30), rng.uniform(0, 600, 30), rng.uniform(0, 600, 30),
                   np.where(rng.random(30) < 0.5, 300.0, np.nan))
    idx.append(emb[:20], cols[:20])
    p = ScoringParams(long_term_decay_per_hour=0.9, decay_importance_exponent=8.0)
    q1, q2 = rng.normal(size=8).astype(np.float32), rng.normal(size=8).astype(np.float32)

    def dense(q):  # written out: 1 / (1 + cosine distance)
        e = idx.embeddings.astype(np.float64)
        cos = e @ q / (np.linalg.norm(e, axis=1) * np.linalg.norm(q))
        return 1.0 / (1.0 + (1.0 - cos))

    first = idx.dense_relevance(q1)
    np.testing.assert_allclose(first, dense(q1), rtol=1e-6)
    np.testing.assert_allclose(idx.dense_relevance(q2), dense(q2), rtol=1e-6)  # another query: not q1's answer
    np.testing.assert_allclose(idx.dense_relevance(q1.copy()), first, rtol=0)  # same query again: same numbers
    assert not first.flags.writeable  # callers cannot change the kept answer
    imp = idx.importance(700.0, p)
    later = idx.importance(1300.0, p)
    long_term = ~np.isnan(cols[:20, 3])
    assert (later[long_term] < imp[long_term]).all()  # decayed further: not the kept answer of 700
    np.testing.assert_array_equal(later, p.importance(cols[:20, 0], cols[:20, 3], 1300.0))
    idx.append(emb[20:], cols[20:])  # a write: 30 rows now
    assert len(idx.dense_relevance(q1)) == 30
    np.testing.assert_allclose(idx.dense_relevance(q1), dense(q1), rtol=1e-6)
    assert len(idx.importance(1300.0, p)) == 30
    idx.set_row(0, -emb[0], tuple(cols[0]))  # an overwrite in place
    np.testing.assert_allclose(idx.dense_relevance(q1), dense(q1), rtol=1e-6)
