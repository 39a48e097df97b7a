"""Memory benchmark: embedding and write throughput, retrieval latency, and the LangChain peer side by side.

Method (after Mesa's benchmarks): both systems are measured in one run, on the same deterministic synthetic
town-life memories (:mod:`bench.data`). Throughputs are the fastest of ``--repeats`` runs; a retrieval
query's latency is the fastest of its ``--repeats`` runs, and p50/p95 are taken over the queries. Prints a
table with the ratios and writes ``bench/results/memory.json``.

Usage: ``python -m bench [--sizes 1000,10000,100000] [--repeats 5] [--queries 50] [--no-peer]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.data import NOISE_SD, POOL_SIZE, bench_embedder, synthetic_stores, town_memories  # noqa: E402

NOW = 6000.0  # game minute of every benchmark retrieval
WRITE_BATCH = 64  # memories per write, as one busy tick of the default town


def fastest(fn, repeats: int) -> float:
    """Fastest wall time of ``repeats`` calls of ``fn``, in seconds."""
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def per_query_fastest(fn, n_queries: int, repeats: int) -> np.ndarray:
    """Per query, the fastest of ``repeats`` calls ``fn(j)``, in milliseconds; shape ``(n_queries,)``."""
    lat = np.full((repeats, n_queries), np.inf)
    for r in range(repeats):
        for j in range(n_queries):
            t = time.perf_counter()
            fn(j)
            lat[r, j] = (time.perf_counter() - t) * 1000
    return lat.min(axis=0)


def _latencies(mem, model, query_texts, query_vectors, repeats: int):
    """Per-query fastest latencies (ms) without and with the query embedding, and memories scored per query."""
    tier = mem.short_term
    mem.retrieve(query_vectors[0], NOW, tiers=("short_term",))  # warm-up (fits the bounds' basis)
    scored: list[int] = []

    def without(j):
        mem.retrieve(query_vectors[j], NOW, tiers=("short_term",))
        scored.append(tier.index.last_scored)

    def with_embedding(j):
        mem.retrieve(model.embed([query_texts[j]])[0], NOW, tiers=("short_term",))

    calls = iter(range(10**9))

    def cold(j):  # a new game time on every call: the cached recency/importance part is recomputed
        mem.retrieve(query_vectors[j], NOW + next(calls) / 1000, tiers=("short_term",))

    lat = per_query_fastest(without, len(query_texts), repeats)
    lat_c = per_query_fastest(cold, len(query_texts), repeats)
    return lat, per_query_fastest(with_embedding, len(query_texts), repeats), lat_c, scored


def measure_simulacra(model, stores, query_texts, query_vectors, repeats: int) -> dict:
    """Retrieval latency of :meth:`AgentMemory.retrieve` over each store, without and with the query embedding."""
    from simulacra.config import MemoryConfig
    from simulacra.memory.records import MemoryRecord
    from simulacra.memory.stream import AgentMemory

    out = {"p50_ms": {}, "p95_ms": {}, "p50_with_embedding_ms": {}, "p95_with_embedding_ms": {}, "load_s": {},
           "scored_fraction": {}, "p50_cold_ms": {}}
    for n, (texts, vecs, created, ratings) in stores.items():
        key = str(n)
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
            # dense relevance, as the LangChain peer scores (the default is weighted hybrid, which needs the query text;
            # bench.relevance measures the lexical and hybrid modes)
            mem = AgentMemory("bench", Path(d), MemoryConfig(short_term_min_entries=10**9, relevance="dense"),
                              model.dim)
            t = time.perf_counter()
            for start in range(0, n, 5000):
                stop = min(n, start + 5000)
                recs = [MemoryRecord(id=f"m{i}", text=texts[i], kind="observation", rating=int(ratings[i]),
                                     timestamp=float(created[i]), tick=i) for i in range(start, stop)]
                mem.add(recs, vecs[start:stop])
            out["load_s"][key] = time.perf_counter() - t
            lat, lat_e, lat_c, scored = _latencies(mem, model, query_texts, query_vectors, repeats)
            out["p50_cold_ms"][key] = float(np.percentile(lat_c, 50))
            out["p50_ms"][key], out["p95_ms"][key] = (float(np.percentile(lat, p)) for p in (50, 95))
            out["p50_with_embedding_ms"][key], out["p95_with_embedding_ms"][key] = (
                float(np.percentile(lat_e, p)) for p in (50, 95))
            out["scored_fraction"][key] = float(np.median(scored)) / n
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000", help="memories per agent for the retrieval figures")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--no-peer", action="store_true", help="skip the LangChain peer")
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "memory.json"))
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from simulacra.config import MemoryConfig
    from simulacra.memory.records import MemoryRecord, memory_id
    from simulacra.memory.stream import AgentMemory

    model = bench_embedder()
    dim = model.dim
    sample = town_memories(1024, seed=1)
    model.embed(sample[:64])  # load and warm up
    embed_rate = len(sample) / fastest(lambda: model.embed(sample), args.repeats)

    def write_once():  # the real write path: embed a tick's batch, then one Chroma upsert per collection
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
            mem = AgentMemory("bench", Path(d), MemoryConfig(), dim)
            for start in range(0, len(sample), WRITE_BATCH):
                texts = sample[start:start + WRITE_BATCH]
                recs = [MemoryRecord(id=memory_id("bench", start, t), text=t, kind="observation", rating=5,
                                     timestamp=float(start), tick=start) for t in texts]
                mem.add(recs, model.embed(texts))

    write_rate = len(sample) / fastest(write_once, args.repeats)
    print(f"embedding throughput (batch 64):    {embed_rate:8.1f} sentences/s")
    print(f"write throughput (real write path): {write_rate:8.1f} memories/s = {write_rate / embed_rate:.0%} of raw")

    stores, query_texts, query_vectors = synthetic_stores(model, sizes, args.queries)
    reused = [n for n in sizes if n > POOL_SIZE]
    if reused:
        print(f"note: stores of {', '.join(map(str, reused))} memories reuse the embeddings of {POOL_SIZE} really "
              f"embedded sentences, each perturbed by Gaussian noise (sd {NOISE_SD}) and renormalised")
    ours = measure_simulacra(model, stores, query_texts, query_vectors, args.repeats)

    peer = None
    if not args.no_peer:
        try:
            from bench.peer_langchain import measure_langchain
        except ImportError as err:
            print(f"LangChain peer skipped: {err}")
        else:
            peer = measure_langchain(stores, query_texts, list(query_vectors), NOW, args.repeats, model)

    print(f"\nretrieval latency, ms (per query fastest of {args.repeats}, p50/p95 over {args.queries} queries)")
    head = f"{'memories':>9} | {'simulacra p50':>13} {'p95':>7} {'+embed p50':>10} {'new-time p50':>12} | {'scored':>7}"
    if peer:
        head += f" | {'LangChain p50':>13} {'p95':>7} {'+embed p50':>10} | {'speed-up':>8} {'+embed':>7}"
    print(head)
    speedup, speedup_e = {}, {}
    for n in sizes:
        k = str(n)
        line = (f"{n:>9} | {ours['p50_ms'][k]:13.3f} {ours['p95_ms'][k]:7.3f} {ours['p50_with_embedding_ms'][k]:10.3f}"
                f" {ours['p50_cold_ms'][k]:12.3f} | {ours['scored_fraction'][k]:7.1%}")
        if peer:
            speedup[k] = peer["p50_ms"][k] / ours["p50_ms"][k]
            speedup_e[k] = peer["p50_with_embedding_ms"][k] / ours["p50_with_embedding_ms"][k]
            line += (f" | {peer['p50_ms'][k]:13.3f} {peer['p95_ms'][k]:7.3f} {peer['p50_with_embedding_ms'][k]:10.3f}"
                     f" | {speedup[k]:7.1f}x {speedup_e[k]:6.1f}x")
        print(line)
    print("new-time: every query at a new game time, so the cached recency/importance part is recomputed "
          "(the first retrieval of a tick); scored: memories scored exactly per query")
    print("load (s): simulacra " + ", ".join(f"{k}: {v:.1f}" for k, v in ours["load_s"].items())
          + ("" if not peer else "; LangChain " + ", ".join(f"{k}: {v:.1f}" for k, v in peer["load_s"].items())))

    r3 = lambda d: {k: round(v, 3) for k, v in d.items()}  # noqa: E731
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "embed_sentences_per_s": round(embed_rate, 1),
        "write_memories_per_s": round(write_rate, 1),
        "write_ratio": round(write_rate / embed_rate, 3),
        "retrieval_p50_ms": r3(ours["p50_ms"]),
        "retrieval_p95_ms": r3(ours["p95_ms"]),
        "retrieval_with_embedding_p50_ms": r3(ours["p50_with_embedding_ms"]),
        "retrieval_with_embedding_p95_ms": r3(ours["p95_with_embedding_ms"]),
        "retrieval_new_game_time_p50_ms": r3(ours["p50_cold_ms"]),
        "retrieval_scored_fraction": r3(ours["scored_fraction"]),
        "load_s": r3(ours["load_s"]),
        "method": f"throughputs: fastest of {args.repeats}; writes of {WRITE_BATCH} memories (embed + one Chroma "
                  f"upsert); retrieval: per query fastest of {args.repeats}, p50/p95 over {args.queries} queries, "
                  f"top_k 5 at game minute {NOW:g}; stores above {POOL_SIZE} memories reuse {POOL_SIZE} embedded "
                  f"sentences perturbed by Gaussian noise (sd {NOISE_SD}), renormalised",
    }
    if peer:
        result.update({
            "peer": "LangChain GenerativeAgentMemory + TimeWeightedVectorStoreRetriever over Chroma",
            "peer_versions": peer["version"],
            "peer_retrieval_p50_ms": r3(peer["p50_ms"]),
            "peer_retrieval_p95_ms": r3(peer["p95_ms"]),
            "peer_retrieval_with_embedding_p50_ms": r3(peer["p50_with_embedding_ms"]),
            "peer_load_s": r3(peer["load_s"]),
            "speedup_vs_peer": r3(speedup),
            "speedup_vs_peer_with_embedding": r3(speedup_e),
            "speedup_vs_peer_10k": round(speedup["10000"], 2) if "10000" in speedup else None,
            "peer_notes": peer["notes"],
        })
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
