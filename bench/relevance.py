"""Retrieval latency under each relevance mode (``memory.relevance``: dense, lexical, hybrid), and the cost of
keeping the BM25 index up to date.

Same stores, queries and method as ``python -m bench`` (:mod:`bench.data`; per query the fastest of
``--repeats`` runs, p50/p95 over the queries; top_k 5 over one tier, without the query embedding). Lexical and
hybrid relevance score every memory of the tier (no bounds). Also measured: the BM25 build over the whole tier
(what the first query after a write pays, :mod:`simulacra.memory.lexical`), and a retrieval right after adding one
memory (build included). Writes ``bench/results/relevance.json``.

Usage: ``python -m bench.relevance [--sizes 1000,10000,100000] [--repeats 5] [--queries 50]``
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

from bench.__main__ import NOW, per_query_fastest  # noqa: E402
from bench.data import synthetic_stores  # noqa: E402

#: the modes measured: (label, memory.relevance, memory.hybrid_weight)
MODES = (("dense", "dense", 0.5), ("lexical", "lexical", 0.5), ("hybrid 0.5", "hybrid", 0.5))


def measure(model, stores, query_texts, query_vectors, repeats: int) -> dict:
    """Per store size and mode: p50/p95 (ms), and for lexical modes the BM25 build (s) and a retrieval right
    after a one-memory write (ms, median of 5)."""
    from simulacra.config import MemoryConfig
    from simulacra.memory.records import MemoryRecord
    from simulacra.memory.stream import AgentMemory

    out: dict = {}
    for n, (texts, vecs, created, ratings) in stores.items():
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as d:
            mem = AgentMemory("bench", Path(d), MemoryConfig(short_term_min_entries=10**9), model.dim)
            for start in range(0, n, 5000):
                stop = min(n, start + 5000)
                mem.add([MemoryRecord(id=f"m{i}", text=texts[i], kind="observation", rating=int(ratings[i]),
                                      timestamp=float(created[i]), tick=i) for i in range(start, stop)],
                        vecs[start:stop])
            tier = mem.short_term
            for label, relevance, weight in MODES:
                mem.config = mem.config.model_copy(update={"relevance": relevance, "hybrid_weight": weight})
                row: dict = {}
                if relevance != "dense":
                    t = time.perf_counter()
                    tier.lexical_relevance(query_texts[0])
                    row["first_query_build_s"] = time.perf_counter() - t  # tokenises and indexes the whole tier
                else:
                    mem.retrieve(query_vectors[0], NOW, tiers=("short_term",))  # fits the bounds' basis

                def ask(j, mem=mem):
                    mem.retrieve(query_vectors[j], NOW, tiers=("short_term",), query_text=query_texts[j])

                scored = []

                def ask_counted(j, ask=ask, scored=scored, tier=tier):
                    ask(j)
                    scored.append(tier.index.last_scored)

                lat = per_query_fastest(ask_counted, len(query_texts), repeats)
                row["scored_fraction"] = float(np.median(scored)) / len(tier)
                row["p50_ms"], row["p95_ms"] = (float(np.percentile(lat, p)) for p in (50, 95))
                if relevance != "dense":
                    after, index_write = [], []
                    for w in range(5):
                        text = f"Hana writes a new note {w} about the bakery"
                        mem.add([MemoryRecord(id=f"new{label}{w}", text=text, kind="observation", rating=5,
                                              timestamp=NOW, tick=n + w)], vecs[w:w + 1])
                        t = time.perf_counter()
                        ask(w)
                        after.append((time.perf_counter() - t) * 1000)
                        t = time.perf_counter()  # the lexical index alone: one write, one query
                        tier.lexical.append([text + " again"])
                        tier.lexical.relevance(query_texts[w])
                        index_write.append((time.perf_counter() - t) * 1000)
                        tier.lexical.keep(np.arange(len(tier.lexical)) < len(tier.lexical) - 1)
                    row["after_write_ms"] = float(np.median(after))
                    row["bm25_write_query_ms"] = float(np.median(index_write))
                out.setdefault(label, {})[str(n)] = row
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--queries", type=int, default=50)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "relevance.json"))
    args, _ = ap.parse_known_args()  # `make bench ARGS=...` passes the memory bench's options too
    sizes = [int(s) for s in args.sizes.split(",")]

    from simulacra.embeddings import SentenceTransformerEmbedder

    model = SentenceTransformerEmbedder(batch_size=64)
    stores, query_texts, query_vectors = synthetic_stores(model, sizes, args.queries)
    res = measure(model, stores, query_texts, query_vectors, args.repeats)
    print(f"retrieval latency by relevance, ms (top_k 5, one tier, without the query embedding; per query fastest "
          f"of {args.repeats}, p50/p95 over {args.queries} queries)")
    print(f"{'mode':<11} {'memories':>9} | {'p50':>7} {'p95':>7} {'scored':>7} | {'BM25 build s':>12} "
          f"{'after a write':>13}")
    for label, by_n in res.items():
        for n, r in by_n.items():
            extra = (f"{r['build_s']:12.3f} {r['after_write_ms']:11.1f}ms" if "build_s" in r
                     else f"{'-':>12} {'-':>13}")
            print(f"{label:<11} {n:>9} | {r['p50_ms']:7.3f} {r['p95_ms']:7.3f} {r['scored_fraction']:7.1%} | {extra}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
              "relevance": {k: {n: {m: round(v, 4) for m, v in r.items()} for n, r in by.items()}
                            for k, by in res.items()},
              "method": f"per query fastest of {args.repeats}, p50/p95 over {args.queries} queries, top_k 5 over one "
                        f"tier at game minute {NOW:g}, without the query embedding; after_write_ms: median of 5 "
                        f"retrievals each right after a one-memory write (BM25 rebuilt)"}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
