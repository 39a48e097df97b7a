"""Retrieval latency under each relevance mode (``memory.relevance``: dense, lexical, hybrid), and the cost of
keeping the BM25 index up to date.

Same stores, queries and method as ``python -m bench`` (:mod:`bench.data`; per query the fastest of
``--repeats`` runs, p50/p95 over the queries; top_k 5 over one tier, without the query embedding). Lexical and
relevance score every memory of the tier (no bounds); weighted hybrid uses the dense bounds plus the exact lexical
part; RRF and minmax scaling score the whole tier. Also measured: indexing the whole tier for BM25 (the first
lexical query), a retrieval right after adding one memory (the incremental BM25 update included,
:mod:`simulacra.memory.lexical`), one write plus one query of the lexical index alone, and the figure before the
index was incremental. Writes ``bench/results/relevance.json``.

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
from bench.data import bench_embedder, synthetic_stores  # noqa: E402

#: the modes measured: (label, memory settings)
MODES = (("dense", {"relevance": "dense"}), ("lexical", {"relevance": "lexical"}),
         ("hybrid 0.5", {"relevance": "hybrid", "hybrid_weight": 0.5}),
         ("hybrid rrf", {"relevance": "hybrid", "hybrid_weight": 0.5, "fusion": "rrf"}),
         ("dense minmax", {"relevance": "dense", "normalize": "minmax"}))
#: the figures before the BM25 index became incremental (rebuilt on the first query after a write), same method
BEFORE_INCREMENTAL = {"lexical": {"10000": {"after_write_ms": 153.9139}, "100000": {"after_write_ms": 2416.9576}},
                      "hybrid 0.5": {"10000": {"after_write_ms": 169.7606}, "100000": {"after_write_ms": 1958.4253}}}


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
            for label, settings in MODES:
                relevance = settings["relevance"]
                mem.config = MemoryConfig(short_term_min_entries=10**9, **settings)
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

    model = bench_embedder()
    stores, query_texts, query_vectors = synthetic_stores(model, sizes, args.queries)
    res = measure(model, stores, query_texts, query_vectors, args.repeats)
    print(f"retrieval latency by relevance, ms (top_k 5, one tier, without the query embedding; per query fastest "
          f"of {args.repeats}, p50/p95 over {args.queries} queries)")
    print(f"{'mode':<12} {'memories':>9} | {'p50':>7} {'p95':>7} {'scored':>7} | {'first index s':>13} "
          f"{'after a write':>13} {'BM25 write+query':>16} {'before':>9}")
    for label, by_n in res.items():
        for n, r in by_n.items():
            before = BEFORE_INCREMENTAL.get(label, {}).get(n, {}).get("after_write_ms")
            was = "-" if before is None else f"{before:.0f}ms"
            extra = (f"{r['first_query_build_s']:13.3f} {r['after_write_ms']:11.2f}ms "
                     f"{r['bm25_write_query_ms']:14.2f}ms {was:>9}" if "after_write_ms" in r
                     else f"{'-':>13} {'-':>13} {'-':>16} {'-':>9}")
            print(f"{label:<12} {n:>9} | {r['p50_ms']:7.3f} {r['p95_ms']:7.3f} {r['scored_fraction']:7.1%} | {extra}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    result = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
              "relevance": {k: {n: {m: round(v, 4) for m, v in r.items()} for n, r in by.items()}
                            for k, by in res.items()},
              "method": f"per query fastest of {args.repeats}, p50/p95 over {args.queries} queries, top_k 5 over one "
                        f"tier at game minute {NOW:g}, without the query embedding; after_write_ms: median of 5 "
                        f"retrievals each right after a one-memory write (the BM25 index updated incrementally); "
                        f"bm25_write_query_ms: the lexical index alone, one write then one query; "
                        f"before_incremental: after_write_ms when the BM25 matrix was rebuilt after each write",
              "before_incremental": BEFORE_INCREMENTAL}
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
