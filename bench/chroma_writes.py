"""What a metadata change costs in an embedded Chroma store (chromadb 1.x, WAL): riding in the tier's one upsert
(record and embedding written again) against a separate ``update`` call of the metadata alone.

Why: a write-behind tier (:meth:`simulacra.memory.store.MemoryTier.flush`) sends a tick's writes in one upsert;
rehearsal changes only the metadata (access marks) of memories Chroma already holds. This measures, on a store of
``--rows`` memories of dimension ``--dim``:

- ``meta_upsert`` / ``meta_update``: ``--changed`` memories' metadata written by an upsert with their embeddings and
  documents, or by ``update(metadatas=...)``;
- ``both_one_upsert`` / ``both_upsert_update``: ``--new`` new memories and ``--changed`` changed ones, in one upsert,
  or an upsert of the new ones plus an update of the changed ones (what the tier would send per tick either way).

Each variant runs ``--rounds`` times, interleaved; the median and mean milliseconds per round are printed as JSON
with the machine's 1-minute load average before and after.

Usage: ``python -m bench.chroma_writes [--rounds 200] [--rows 60] [--new 5] [--changed 5] [--dim 384]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time

os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")

import numpy as np  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=200)
    p.add_argument("--rows", type=int, default=60)
    p.add_argument("--new", type=int, default=5)
    p.add_argument("--changed", type=int, default=5)
    p.add_argument("--dim", type=int, default=384)
    args = p.parse_args(argv)

    from simulacra.memory.chroma import open_chroma

    rng = np.random.default_rng(0)
    load0 = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as d:
        col = open_chroma(d).get_or_create_collection("bench", embedding_function=None)
        ids = [f"m{i}" for i in range(args.rows)]
        emb = rng.standard_normal((args.rows, args.dim)).astype(np.float32)
        docs = [f"memory number {i}" for i in range(args.rows)]

        def meta(i: int, t: int) -> dict:
            return {"kind": "observation", "tick": i, "rating": 5, "last_accessed": float(t)}

        col.upsert(ids=ids, embeddings=emb, documents=docs, metadatas=[meta(i, 0) for i in range(args.rows)])
        counter = [args.rows]

        def new_rows():
            start = counter[0]
            counter[0] += args.new
            n = list(range(start, start + args.new))
            return ([f"m{i}" for i in n], rng.standard_normal((args.new, args.dim)).astype(np.float32),
                    [f"memory number {i}" for i in n], [meta(i, 0) for i in n])

        def changed(t: int):
            pick = sorted(int(x) for x in rng.choice(args.rows, args.changed, replace=False))
            return [ids[i] for i in pick], emb[pick], [docs[i] for i in pick], [meta(i, t) for i in pick]

        def meta_upsert(t):
            i, e, d_, m = changed(t)
            col.upsert(ids=i, embeddings=e, documents=d_, metadatas=m)

        def meta_update(t):
            i, _, _, m = changed(t)
            col.update(ids=i, metadatas=m)

        def both_one_upsert(t):
            ni, ne, nd, nm = new_rows()
            ci, ce, cd, cm = changed(t)
            col.upsert(ids=ni + ci, embeddings=np.concatenate([ne, ce]), documents=nd + cd, metadatas=nm + cm)

        def both_upsert_update(t):
            ni, ne, nd, nm = new_rows()
            ci, _, _, cm = changed(t)
            col.upsert(ids=ni, embeddings=ne, documents=nd, metadatas=nm)
            col.update(ids=ci, metadatas=cm)

        variants = [meta_upsert, meta_update, both_one_upsert, both_upsert_update]
        times: dict[str, list[float]] = {v.__name__: [] for v in variants}
        for r in range(args.rounds):
            for v in (variants if r % 2 == 0 else variants[::-1]):
                t0 = time.perf_counter()
                v(r + 1)
                times[v.__name__].append((time.perf_counter() - t0) * 1000)
    out = {"chromadb": __import__("chromadb").__version__, "rounds": args.rounds, "rows": args.rows,
           "new": args.new, "changed": args.changed, "dim": args.dim,
           "load_avg_1min": [round(load0, 2), round(os.getloadavg()[0], 2)],
           "ms": {k: {"median": round(statistics.median(v), 3), "mean": round(statistics.fmean(v), 3)}
                  for k, v in times.items()}}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
