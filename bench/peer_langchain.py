"""LangChain peer for the memory benchmark: GenerativeAgentMemory + TimeWeightedVectorStoreRetriever over Chroma.

Needs the optional ``bench`` extra (``pip install -e ".[bench]"``). The peer is set up as LangChain's generative-agent
example sets it up, with the stand-ins the benchmark needs to be deterministic and offline:

* vector store: ``langchain_chroma.Chroma`` on a persistent Chroma client in a temporary directory (default ``l2``
  space, so LangChain's relevance is ``1 - squared_l2 / sqrt(2)``);
* embeddings: :class:`LookupEmbeddings`, a ``langchain_core`` ``Embeddings`` that returns the given precomputed vectors
  for the stored texts (no re-embedding) and, for queries, either a precomputed vector or a real MiniLM embedding;
* importance: no LLM. Each memory's metadata ``importance`` is ``rating / 10 * importance_weight``, exactly what
  ``GenerativeAgentMemory.add_memory`` stores when the LLM answers the rating; the memory's ``llm`` is a
  ``FakeListLLM`` that is never called during retrieval;
* time: game minutes map to a fixed naive datetime :data:`EPOCH` (``created_at`` / ``last_accessed_at`` are stored as
  POSIX-seconds floats, the form the retriever reads back with ``datetime.fromtimestamp`` and the only form Chroma
  metadata accepts); retrieval runs through ``GenerativeAgentMemory.fetch_memories(query, now=...)``, which wraps the
  retriever in ``langchain_core.utils.mock_now`` so recency is computed at ``now_minute``, never at the wall clock;
* retrieval: the retriever's ``k`` is :data:`K` (the simulacra ``top_k``), ``search_kwargs`` is LangChain's default
  ``{"k": 100}`` salient candidates; the retriever overwrites ``last_accessed_at`` of the returned memories on every
  read, which is its behaviour and is measured as is.

Method as Mesa's benchmarks: every query is run ``repeats`` times; a query's latency is the fastest of its runs, and
p50 / p95 are taken over the queries. Latencies are in milliseconds, load times in seconds.

Usage: ``python -m bench.peer_langchain [--sizes 1000,10000] [--repeats 5] [--queries 50]``
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import tempfile
import time
import warnings
from collections.abc import Sequence
from importlib import metadata

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

try:
    from langchain_core.embeddings import Embeddings
except ImportError as err:  # pragma: no cover - only without the bench extra
    raise ImportError('the LangChain peer needs the bench extra: pip install -e ".[bench]"') from err

EPOCH = dt.datetime(2024, 1, 1, 0, 0)
"""Naive datetime of game minute 0 (January: no daylight-saving change within a few weeks of game time)."""

K = 5
"""Memories returned per retrieval (the retriever's ``k``), as simulacra's ``top_k``."""

SEARCH_KWARGS = {"k": 100}
"""Vector-store search arguments: LangChain's default for ``TimeWeightedVectorStoreRetriever`` (100 salient docs)."""

DECAY_RATE = 0.01
"""LangChain's default recency decay, ``(1 - decay_rate) ** hours_since_last_access``."""

LOAD_BATCH = 5000
"""Memories per ``add_documents`` call while building a store (capped at the Chroma client's max batch size)."""

PACKAGES = ("langchain-core", "langchain-classic", "langchain-experimental", "langchain-chroma",
            "langchain-community", "chromadb", "sentence-transformers", "torch")


def game_time(minute: float) -> dt.datetime:
    """Datetime of game ``minute`` (minutes since :data:`EPOCH`)."""
    return EPOCH + dt.timedelta(minutes=float(minute))


def game_timestamp(minute: float) -> float:
    """POSIX seconds of game ``minute``, as the retriever reads them back (``datetime.fromtimestamp``, local time)."""
    return game_time(minute).timestamp()


class LookupEmbeddings(Embeddings):
    """LangChain ``Embeddings`` over precomputed vectors, optionally embedding queries with a real model.

    Args:
        texts: stored texts, unique; ``embed_documents`` returns their rows of ``vectors``.
        vectors: float32 ``(len(texts), dim)``, the stored embeddings.
        query_texts: query texts with precomputed vectors.
        query_vectors: float32 ``(len(query_texts), dim)``.
        model: a simulacra embedder (``.embed(list[str]) -> (n, dim)``); when ``live`` is true ``embed_query`` calls
            it instead of looking the query up.
    """

    def __init__(self, texts: Sequence[str], vectors: np.ndarray, query_texts: Sequence[str],
                 query_vectors: np.ndarray, model=None):
        self._rows = {text: i for i, text in enumerate(texts)}
        if len(self._rows) != len(texts):
            raise ValueError("stored texts must be unique for the embedding lookup")
        self._vectors = vectors
        self._queries = {text: np.asarray(vec, dtype=np.float32).tolist()
                         for text, vec in zip(query_texts, query_vectors)}
        self.model = model
        self.live = False
        self.document_calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """The precomputed vectors of ``texts`` (each must be a stored text); never runs a model."""
        self.document_calls += 1
        return self._vectors[[self._rows[t] for t in texts]].tolist()

    def embed_query(self, text: str) -> list[float]:
        """The query vector: a real model embedding when ``live``, else the precomputed one."""
        if self.live:
            return self.model.embed([text])[0].tolist()
        return self._queries[text]


def versions() -> dict[str, str]:
    """Installed versions of the peer's packages and of Python."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = "not installed"
    return out


def build_memory(client, texts: Sequence[str], vectors: np.ndarray, created: np.ndarray, ratings: np.ndarray,
                 embeddings: LookupEmbeddings, name: str = "peer"):
    """A ``GenerativeAgentMemory`` over a new LangChain ``Chroma`` collection holding the given memories.

    Args:
        client: a Chroma client (persistent for the benchmark).
        texts: memory texts, unique.
        vectors: float32 ``(n, dim)`` unit-norm embeddings of ``texts`` (served by ``embeddings``).
        created: game minute of each memory, ``(n,)``; both ``created_at`` and ``last_accessed_at``.
        ratings: importance rating 1..10 of each memory, ``(n,)``.
        embeddings: the lookup embeddings holding ``vectors``.
        name: collection name.

    Returns:
        The memory; its retriever is ``memory.memory_retriever``.
    """
    from langchain_chroma import Chroma
    from langchain_classic.retrievers import TimeWeightedVectorStoreRetriever
    from langchain_core.documents import Document
    from langchain_core.language_models.fake import FakeListLLM
    from langchain_experimental.generative_agents import GenerativeAgentMemory

    store = Chroma(collection_name=name, embedding_function=embeddings, client=client)
    retriever = TimeWeightedVectorStoreRetriever(vectorstore=store, other_score_keys=["importance"], k=K,
                                                 search_kwargs=dict(SEARCH_KWARGS), decay_rate=DECAY_RATE)
    memory = GenerativeAgentMemory(llm=FakeListLLM(responses=["5"]), memory_retriever=retriever,
                                   reflection_threshold=None)
    batch = max(1, min(LOAD_BATCH, client.get_max_batch_size()))
    for start in range(0, len(texts), batch):
        docs = []
        for i in range(start, min(len(texts), start + batch)):
            stamp = game_timestamp(created[i])
            importance = float(ratings[i]) / 10 * memory.importance_weight  # as add_memory scores an LLM answer
            docs.append(Document(id=f"m{i}", page_content=texts[i],
                                 metadata={"importance": importance, "created_at": stamp, "last_accessed_at": stamp}))
        retriever.add_documents(docs)
    return memory


def _latencies(memory, queries: Sequence[str], now: dt.datetime, repeats: int) -> np.ndarray:
    """Per query, the fastest of ``repeats`` ``fetch_memories`` calls, in milliseconds; shape ``(len(queries),)``."""
    lat = np.full((repeats, len(queries)), np.inf)
    for r in range(repeats):
        for j, query in enumerate(queries):
            t = time.perf_counter()
            docs = memory.fetch_memories(query, now=now)
            lat[r, j] = (time.perf_counter() - t) * 1000
            if len(docs) != K:
                raise RuntimeError(f"fetch_memories returned {len(docs)} memories, expected {K}")
    return lat.min(axis=0)


def measure_langchain(stores: dict[int, tuple[list[str], np.ndarray, np.ndarray, np.ndarray]], query_texts: list[str],
                      query_vectors: np.ndarray, now_minute: float, repeats: int, model) -> dict:
    """Retrieval latency of the LangChain peer at each store size.

    Args:
        stores: per size ``n``: (texts, float32 ``(n, dim)`` unit-norm embeddings, created game minutes ``(n,)``,
            int ratings 1..10 ``(n,)``).
        query_texts: the queries.
        query_vectors: ``(len(query_texts), dim)`` precomputed query embeddings (array or list of rows; same model
            as ``model``).
        now_minute: game minute at which recency is computed.
        repeats: runs per query; a query's latency is its fastest run.
        model: a simulacra embedder (``build_embedder``) for the with-embedding figures.

    Returns:
        ``{"version", "p50_ms", "p95_ms", "p50_with_embedding_ms", "p95_with_embedding_ms", "load_s", "notes"}``;
        the figure dicts are keyed by ``str(n)``, latencies in milliseconds, load (building the store through the
        retriever's ``add_documents``) in seconds.
    """
    import chromadb
    from chromadb.config import Settings

    now = game_time(now_minute)
    result: dict = {"version": versions(), "p50_ms": {}, "p95_ms": {}, "p50_with_embedding_ms": {},
                    "p95_with_embedding_ms": {}, "load_s": {}}
    relevance_warnings = 0
    model.embed(list(query_texts[:2]))  # load and warm the model outside the timings
    for n, (texts, vectors, created, ratings) in stores.items():
        key = str(n)
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
            client = chromadb.PersistentClient(path=d, settings=Settings(anonymized_telemetry=False))
            embeddings = LookupEmbeddings(texts, vectors, query_texts, query_vectors, model)
            t = time.perf_counter()
            memory = build_memory(client, texts, vectors, created, ratings, embeddings)
            result["load_s"][key] = time.perf_counter() - t
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                memory.fetch_memories(query_texts[0], now=now)  # warm-up
                without = _latencies(memory, query_texts, now, repeats)
                embeddings.live = True
                memory.fetch_memories(query_texts[0], now=now)  # warm-up
                with_embedding = _latencies(memory, query_texts, now, repeats)
            relevance_warnings += sum("Relevance scores must be between" in str(w.message) for w in caught)
            result["p50_ms"][key] = float(np.percentile(without, 50))
            result["p95_ms"][key] = float(np.percentile(without, 95))
            result["p50_with_embedding_ms"][key] = float(np.percentile(with_embedding, 50))
            result["p95_with_embedding_ms"][key] = float(np.percentile(with_embedding, 95))
            del memory, embeddings, client
    result["notes"] = (
        f"GenerativeAgentMemory.fetch_memories(query, now=EPOCH + now_minute) (mock_now) over "
        f"TimeWeightedVectorStoreRetriever(k={K}, search_kwargs={SEARCH_KWARGS}, decay_rate={DECAY_RATE}, "
        "other_score_keys=['importance']) on langchain_chroma.Chroma (persistent client, l2 space); importance "
        "metadata = rating/10 * 0.15 (as add_memory from an LLM answer), no LLM; stored embeddings passed through a "
        "lookup Embeddings (no re-embedding); query vector precomputed (without) or MiniLM per call (with); "
        f"fastest of {repeats} per query, p50/p95 over {len(query_texts)} queries; the retriever updates "
        f"last_accessed_at of returned memories on every call; {relevance_warnings} calls warned about relevance "
        "scores outside [0, 1]"
    )
    return result


def main() -> None:
    """Build the benchmark's synthetic stores (``bench.data.synthetic_stores``), measure the peer, print the figures."""
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000", help="memories per agent")
    ap.add_argument("--repeats", type=int, default=5, help="runs per query; the fastest counts")
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--now", type=float, default=6000.0, help="game minute of the retrievals")
    ap.add_argument("--json", default=None, help="also write the result to this path")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from bench.data import bench_embedder, synthetic_stores

    model = bench_embedder()
    stores, query_texts, query_vectors = synthetic_stores(model, sizes, args.queries)
    result = measure_langchain(stores, query_texts, query_vectors, args.now, args.repeats, model)
    print("LangChain peer: " + ", ".join(f"{k} {v}" for k, v in result["version"].items()))
    for n in sizes:
        key = str(n)
        print(f"  {n:>7} memories: load {result['load_s'][key]:7.1f} s   "
              f"without query embedding p50 {result['p50_ms'][key]:7.3f} ms  p95 {result['p95_ms'][key]:7.3f} ms   "
              f"with it p50 {result['p50_with_embedding_ms'][key]:7.3f} ms  "
              f"p95 {result['p95_with_embedding_ms'][key]:7.3f} ms")
    print(result["notes"])
    if args.json:
        with open(args.json, "w") as fh:
            fh.write(json.dumps(result, indent=2) + "\n")
        print(f"written to {args.json}")


if __name__ == "__main__":
    main()
