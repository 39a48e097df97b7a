"""Deterministic synthetic town-life memories shared by simulacra's benchmark and its LangChain peer."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

PEOPLE = ["Hana", "Bram", "Ruth", "Kofi", "Leila", "Yusuf", "Greta", "Samuel", "Ezra", "Tobias"]
VERBS = ["is baking bread", "is mending a fence", "is reading a letter", "is talking about the storm",
         "is walking to the mill", "is buying apples", "is sweeping the square", "is fixing the wheel",
         "is writing in a notebook", "is feeding the hens", "is arguing about the festival", "is laughing"]
PLACES = ["at the bakery", "at the tavern", "by the river", "in the square", "at the forge", "at the school",
          "at the clinic", "at the mill", "in the orchard", "at home"]

#: sentences really embedded; larger stores reuse their embeddings, perturbed (said in the bench's output)
POOL_SIZE = 2048
#: standard deviation of the Gaussian noise added to a pool embedding before renormalising
NOISE_SD = 0.02


def bench_embedder():
    """The embedder of the memory, relevance and LangChain-peer benches: the default backend, texts batched 64 at a
    time (``embedding.exact: false``), built as a run builds its own (:func:`simulacra.embeddings.build_embedder`),
    without the text cache."""
    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import build_embedder

    return build_embedder(EmbeddingConfig(exact=False, batch_size=64), cached=False)


def town_memories(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct synthetic town-life memories, deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(f"{PEOPLE[rng.integers(len(PEOPLE))]} {VERBS[rng.integers(len(VERBS))]} "
                   f"{PLACES[rng.integers(len(PLACES))]} (moment {i}).")
    return out


def synthetic_stores(model, sizes: Sequence[int], n_queries: int):
    """Stores and queries for the retrieval figures, identical for simulacra and its peer.

    Store embeddings are drawn from a :data:`POOL_SIZE`-sentence embedded pool (``town_memories(2048, seed=2)``)
    with Gaussian noise (sd :data:`NOISE_SD`) and renormalised; each memory's text is its pool sentence tagged
    with its index (unique); created game minute ``i % 5000``; rating ``1 + i % 10``; queries
    ``town_memories(n_queries, seed=3)``, really embedded.

    Args:
        model: an embedder with ``embed(list[str]) -> (n, dim) float32``.
    Returns:
        ``(stores, query_texts, query_vectors)``: ``stores[n] = (texts, embeddings (n, dim) float32, created
        minutes (n,) float64, ratings (n,) int)``.
    """
    pool_texts = town_memories(POOL_SIZE, seed=2)
    pool = model.embed(pool_texts)
    query_texts = town_memories(n_queries, seed=3)
    query_vectors = model.embed(query_texts)
    rng = np.random.default_rng(4)
    stores = {}
    for n in sizes:
        idx = rng.integers(len(pool), size=n)
        vecs = pool[idx] + rng.normal(scale=NOISE_SD, size=(n, pool.shape[1])).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        texts = [f"{pool_texts[j]} [memory {i}]" for i, j in enumerate(idx)]
        created = (np.arange(n) % 5000).astype(np.float64)
        ratings = 1 + np.arange(n) % 10
        stores[n] = (texts, vecs.astype(np.float32), created, ratings)
    return stores, query_texts, query_vectors
