"""Embedding backends side by side (issue 27): torch, onnx (ONNX Runtime) and onnx-int8, in one run.

For each backend (``embedding.backend``), measured in a child process of its own (so that load time and RSS are
the backend's):

- ``load_s`` (the model built and its first text embedded; an ONNX export already made is reused, ``export_s``
  is the first export's time in a fresh folder) and ``rss_mb`` (peak RSS of the child, MiB);
- throughput in texts per second at batch sizes 1, 8 and 64 (texts of the default day) and over the default day's
  own batches (each agent's new memories of a tick, as ``remember`` embeds them), exact mode as a run uses it
  (``embedding.exact: true``) and batched;
- how close to the machine: the model's multiply-adds per text (6 layers of hidden 384 and feed-forward 1536 over
  each text's token count: 4·n·h² + 2·n·h·f + 2·n²·h per layer) times texts per second, against the GFLOP/s of a
  2048 x 2048 float32 matrix product in torch on the same threads (and of an int8 one, ``torch._int_mm``, where
  this build has it);
- the cosine between torch's vectors and the backend's over the default day's texts (min and mean);
- a whole run: the default day (``--preset seed003``, the run the project's labelled queries are written for),
  wall seconds, and its retrieval quality on those queries as ``simulacra tune`` scores them (recall@k, MRR,
  nDCG@k of the shipped defaults over the backend's own run).

Usage: ``python -m bench.embedding [--out bench/results/embedding.json] [--no-runs]``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BACKENDS = ("torch", "onnx", "onnx-int8")
QUERIES = Path(__file__).resolve().parent.parent / "data" / "queries" / "fernhollow.yaml"


def _day_batches(run_dir: Path) -> list[list[str]]:
    """The default day's ``remember`` batches: per tick and agent, the texts of its new memories, in trace order."""
    from simulacra.trace import read_trace

    _, ticks = read_trace(run_dir)
    out = []
    for t in ticks:
        per_agent: dict[str, list[str]] = {}
        for op in t.get("memory", []):
            if op.get("op") == "add" and op.get("text"):
                per_agent.setdefault(op.get("agent", ""), []).append(op["text"])
        out += [texts for texts in per_agent.values() if texts]
    return out


def _rate(embed, batches: list[list[str]], min_s: float = 3.0) -> float:
    """Texts per second of ``embed`` over ``batches`` (repeated until ``min_s`` seconds have passed)."""
    embed(batches[0])
    n, start = 0, time.perf_counter()
    while True:
        for b in batches:
            embed(b)
            n += len(b)
        if time.perf_counter() - start >= min_s:
            return n / (time.perf_counter() - start)


def _matmul_gflops(threads: int) -> dict[str, float | None]:
    import torch

    torch.set_num_threads(threads)
    a = torch.randn(2048, 2048)
    b = torch.randn(2048, 2048)
    a @ b
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < 2:
        a @ b
        n += 1
    out: dict[str, float | None] = {"float32": 2 * 2048**3 * n / (time.perf_counter() - start) / 1e9, "int8": None}
    try:
        ai = torch.randint(-100, 100, (2048, 2048), dtype=torch.int8)
        bi = torch.randint(-100, 100, (2048, 2048), dtype=torch.int8)
        torch._int_mm(ai, bi)
        n, start = 0, time.perf_counter()
        while time.perf_counter() - start < 2:
            torch._int_mm(ai, bi)
            n += 1
        out["int8"] = 2 * 2048**3 * n / (time.perf_counter() - start) / 1e9
    except Exception:  # noqa: BLE001 - this build has no CPU int8 product: reported as absent
        pass
    return out


def measure_backend(backend: str, day_run: Path, onnx_dir: str) -> dict:
    """Everything of one backend but the whole run, in this process."""
    import numpy as np
    import torch

    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import build_embedder

    threads = torch.get_num_threads()
    batches = _day_batches(day_run)
    texts = [t for b in batches for t in b]
    unique = list(dict.fromkeys(texts))
    start = time.perf_counter()
    exact = build_embedder(EmbeddingConfig(backend=backend, exact=True, onnx_dir=onnx_dir), cached=False)
    exact.embed(["the first text"])
    load_s = time.perf_counter() - start
    batched = build_embedder(EmbeddingConfig(backend=backend, exact=False, onnx_dir=onnx_dir), cached=False)
    batched.embed(["warm"])
    out = {"backend": backend, "threads": threads, "load_s": load_s}
    for size in (1, 8, 64):
        chunks = [unique[i:i + size] for i in range(0, min(len(unique), 640), size)]
        out[f"texts_per_s_batch{size}"] = _rate(batched.embed, chunks)
    out["texts_per_s_day_exact"] = _rate(exact.embed, batches[:400])
    out["texts_per_s_day_batched"] = _rate(batched.embed, batches[:400])
    tok = exact._load().tokenizer
    lengths = [len(tok(t)["input_ids"]) for t in unique[:500]]
    h, f, layers = 384, 1536, 6
    macs = float(np.mean([layers * (4 * n * h * h + 2 * n * h * f + 2 * n * n * h) for n in lengths]))
    out["tokens_per_text"] = float(np.mean(lengths))
    out["gflop_per_text"] = 2 * macs / 1e9
    peak = _matmul_gflops(threads)
    out["matmul_gflops"] = peak
    reached = out["texts_per_s_batch64"] * out["gflop_per_text"]
    out["gflops_reached_batch64"] = reached
    out["fraction_of_float32_peak"] = reached / peak["float32"]
    if peak["int8"]:
        out["fraction_of_int8_peak"] = reached / peak["int8"]
    vectors = exact.embed(unique[:1000])
    np.save(Path(onnx_dir) / f"vectors-{backend}.npy", vectors)
    out["rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def quality(run_dir: Path, backend: str, onnx_dir: str) -> dict:
    """Recall@k, MRR and nDCG@k of the shipped defaults on the labelled queries over the torch day run, its
    memories and the queries embedded again by ``backend`` (so that every backend answers the same labelled
    questions over the same memories: a backend's own run may form other reflections than the labels name)."""
    from simulacra import tune as t
    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import build_embedder

    info = t.read_run(run_dir)
    queries = t.load_queries(QUERIES, info.start_minute)
    embedder = build_embedder(EmbeddingConfig(backend=backend, onnx_dir=onnx_dir))
    prepared = t.prepare(run_dir, queries, embedder, QUERIES, run=info, reembed=True)
    base = t.baseline_settings(info.config.memory)["defaults"]
    r = t.evaluate(prepared, [base], info.config.memory)[0]
    return {"recall": r.recall, "mrr": r.mrr, "ndcg": r.ndcg, "queries": len([p for p in prepared if p.relevant])}


def whole_day(backend: str, db: Path, onnx_dir: str) -> dict:
    cmd = [sys.executable, "-m", "simulacra.cli", "run", "--preset", "seed003", "--db-dir", str(db), "--run-name",
           f"day-{backend}", "--overwrite", "--quiet", "--set", f"embedding.backend={backend}", "--set",
           f"embedding.onnx_dir={onnx_dir}"]
    start = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"the day run of {backend} failed: {r.stderr[-2000:]}")
    return {"day_wall_s": time.perf_counter() - start}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.embedding", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="bench/results/embedding.json")
    p.add_argument("--no-runs", action="store_true", help="skip the whole default-day runs (and the quality)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # the child: one backend
    p.add_argument("--day", default=None, help=argparse.SUPPRESS)
    p.add_argument("--onnx-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(measure_backend(args.one, Path(args.day), args.onnx_dir)))
        return 0
    import numpy as np

    work = Path(tempfile.mkdtemp(prefix="bench-embedding-"))
    onnx_dir = str(work / "onnx")
    load_before = os.getloadavg()[0]
    results: dict = {"backends": {}, "machine": {"cpus": os.cpu_count(), "load_avg_1min_before": load_before}}
    # the first export of each ONNX backend, timed in a fresh folder
    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import build_embedder

    for backend in ("onnx", "onnx-int8"):
        start = time.perf_counter()
        build_embedder(EmbeddingConfig(backend=backend, onnx_dir=onnx_dir), cached=False).embed(["export"])
        results["backends"].setdefault(backend, {})["export_s"] = time.perf_counter() - start
    runs = {}
    for backend in BACKENDS:
        if not args.no_runs:
            runs[backend] = whole_day(backend, work / "db", onnx_dir)
            print(f"{backend}: day run {runs[backend]['day_wall_s']:.0f} s", file=sys.stderr)
    day = work / "db" / "day-torch" if not args.no_runs else None
    if day is None:  # the texts of a default day are still needed
        subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--preset", "seed003", "--db-dir",
                        str(work / "db"), "--run-name", "day-torch", "--overwrite", "--quiet"], check=True)
        day = work / "db" / "day-torch"
    for backend in BACKENDS:
        runs.setdefault(backend, {}).update(quality(day, backend, onnx_dir))
        r = subprocess.run([sys.executable, "-m", "bench.embedding", "--one", backend, "--day", str(day),
                            "--onnx-dir", onnx_dir], capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{backend} failed: {r.stderr[-2000:]}")
        results["backends"].setdefault(backend, {}).update(json.loads(r.stdout.strip().splitlines()[-1]))
        results["backends"][backend].update(runs.get(backend, {}))
        print(f"{backend}: measured", file=sys.stderr)
    ref = np.load(Path(onnx_dir) / "vectors-torch.npy")
    for backend in BACKENDS:
        v = np.load(Path(onnx_dir) / f"vectors-{backend}.npy")
        cos = (v * ref).sum(axis=1)
        results["backends"][backend]["cosine_to_torch"] = {"min": float(cos.min()), "mean": float(cos.mean())}
    results["machine"]["load_avg_1min_after"] = os.getloadavg()[0]
    torch_row = results["backends"]["torch"]
    rows = ["backend | batch 1 | 8 | 64 | day exact | day batched | x torch (day exact) | load s | RSS MB | "
            "cos min | nDCG | day run s"]
    for backend, b in results["backends"].items():
        rows.append(f"{backend} | {b['texts_per_s_batch1']:.0f} | {b['texts_per_s_batch8']:.0f} | "
                    f"{b['texts_per_s_batch64']:.0f} | {b['texts_per_s_day_exact']:.0f} | "
                    f"{b['texts_per_s_day_batched']:.0f} | "
                    f"{b['texts_per_s_day_exact'] / torch_row['texts_per_s_day_exact']:.2f} | {b['load_s']:.1f} | "
                    f"{b['rss_mb']:.0f} | {b['cosine_to_torch']['min']:.4f} | "
                    f"{b.get('ndcg', float('nan')):.3f} | {b.get('day_wall_s', float('nan')):.0f}")
    print("\n".join(rows))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"-> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
