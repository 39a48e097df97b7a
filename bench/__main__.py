"""Memory benchmark: embedding throughput, write throughput through the real write path, retrieval latency.

Method (after Mesa's benchmarks): each figure is the fastest of N repetitions; everything is measured in
one run on the same deterministic synthetic town-life memories. Prints a table and writes
``bench/results/memory.json``.

Usage: ``python -m bench [--sizes 1000,10000] [--repeats 5] [--queries 50]``
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
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

PEOPLE = ["Hana", "Bram", "Ruth", "Kofi", "Leila", "Yusuf", "Greta", "Samuel", "Ezra", "Tobias"]
VERBS = ["is baking bread", "is mending a fence", "is reading a letter", "is talking about the storm",
         "is walking to the mill", "is buying apples", "is sweeping the square", "is fixing the wheel",
         "is writing in a notebook", "is feeding the hens", "is arguing about the festival", "is laughing"]
PLACES = ["at the bakery", "at the tavern", "by the river", "in the square", "at the forge", "at the school",
          "at the clinic", "at the mill", "in the orchard", "at home"]


def town_memories(n: int, seed: int = 0) -> list[str]:
    """``n`` distinct synthetic town-life memories, deterministic for ``seed``."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        out.append(f"{PEOPLE[rng.integers(len(PEOPLE))]} {VERBS[rng.integers(len(VERBS))]} "
                   f"{PLACES[rng.integers(len(PLACES))]} (moment {i}).")
    return out


def fastest(fn, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,10000", help="memories per agent for the retrieval figures")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--queries", type=int, default=50)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    from simulacra.config import MemoryConfig
    from simulacra.embeddings import SentenceTransformerEmbedder
    from simulacra.memory.records import MemoryRecord, memory_id
    from simulacra.memory.stream import AgentMemory

    model = SentenceTransformerEmbedder(batch_size=64)
    dim = model.dim
    sample = town_memories(1024, seed=1)
    model.embed(sample[:64])  # warm-up
    embed_s = fastest(lambda: model.embed(sample), args.repeats)
    embed_rate = len(sample) / embed_s

    # write path: embed a tick's batch + one Chroma upsert per collection, as the simulation does
    def write_once():
        with tempfile.TemporaryDirectory() as d:
            mem = AgentMemory("bench", Path(d), MemoryConfig(), dim)
            for start in range(0, len(sample), 64):
                texts = sample[start:start + 64]
                recs = [MemoryRecord(id=memory_id("bench", start, t), text=t, kind="observation", rating=5,
                                     timestamp=float(start), tick=start) for t in texts]
                mem.add(recs, model.embed(texts))

    write_s = fastest(write_once, args.repeats)
    write_rate = len(sample) / write_s

    # retrieval at each size: embeddings reuse a pool of real ones, deterministically perturbed
    pool = model.embed(town_memories(2048, seed=2))
    queries = model.embed(town_memories(args.queries, seed=3))
    rng = np.random.default_rng(4)
    p50, p95 = {}, {}
    for n in sizes:
        vecs = pool[rng.integers(len(pool), size=n)] + rng.normal(scale=0.02, size=(n, dim)).astype(np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        with tempfile.TemporaryDirectory() as d:
            mem = AgentMemory("bench", Path(d), MemoryConfig(short_term_min_entries=10**9), dim)
            for start in range(0, n, 5000):
                recs = [MemoryRecord(id=f"m{i}", text=f"memory {i}", kind="observation",
                                     rating=int(1 + i % 10), timestamp=float(i % 5000), tick=i)
                        for i in range(start, min(n, start + 5000))]
                mem.add(recs, vecs[start:start + len(recs)])
            lat = []
            for _ in range(args.repeats):
                for q in queries:
                    t = time.perf_counter()
                    mem.retrieve(q, now=6000.0, tiers=("short_term",))
                    lat.append((time.perf_counter() - t) * 1000)
            p50[str(n)] = float(np.percentile(lat, 50))
            p95[str(n)] = float(np.percentile(lat, 95))

    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "embed_sentences_per_s": round(embed_rate, 1),
        "write_memories_per_s": round(write_rate, 1),
        "write_ratio": round(write_rate / embed_rate, 3),
        "retrieval_p50_ms": {k: round(v, 3) for k, v in p50.items()},
        "retrieval_p95_ms": {k: round(v, 3) for k, v in p95.items()},
        "method": f"fastest of {args.repeats}; retrieval over {args.queries} queries x {args.repeats}, "
                  "without the query embedding; store embeddings drawn from a 2048-sentence embedded pool "
                  "with Gaussian noise (sd 0.02), renormalised",
    }
    print(f"embedding throughput (batch 64):   {embed_rate:8.1f} sentences/s")
    print(f"write throughput (real write path): {write_rate:8.1f} memories/s  = {write_rate / embed_rate:.0%} of raw")
    print("retrieval without query embedding (embeddings reused from a 2048-sentence pool, perturbed):")
    for n in sizes:
        print(f"  {n:>7} memories: p50 {p50[str(n)]:7.3f} ms   p95 {p95[str(n)]:7.3f} ms")
    out = Path(__file__).parent / "results" / "memory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
