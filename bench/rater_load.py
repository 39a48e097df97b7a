"""Load test of the importance rater over loopback HTTP: the real app, waitress, the offline backend, MiniLM.

The rater app (``create_app`` over ``EmbeddingRater(build_embedder())``, as
``simulacra rater`` builds it) is served by waitress in this process on a free 127.0.0.1 port. Then:

1. **uncached**: ``--clients`` threads, each with its own ``requests.Session``, post ``POST /rate`` with
   distinct memory texts (:func:`bench.data.town_memories`) until ``--requests`` are sent or ``--seconds``
   pass, so every request embeds a new text;
2. **cached**: the same texts again: the rater's cache answers, which measures HTTP, Flask and validation;
3. **batch vs single vs in-process**: one client rates ``--batch-n`` fresh memories one request each, and
   another ``--batch-n`` fresh memories in one ``POST /rate/batch`` (at most 1024 per request); a run's
   in-process rater (no HTTP) rates ``--batch-n`` more with the same backend; memories per second of each, the
   fastest of ``--repeats``, and their ratios.

Every answer is checked (HTTP 200, a rating 1..10); the run exits with status 1 when any request failed.
Prints the figures and writes ``bench/results/rater.json``.

Usage: ``python -m bench.rater_load [--clients 4] [--requests 2000] [--seconds 60] [--batch-n 256]
[--repeats 3] [--server-threads 4]``
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import threading
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import requests  # noqa: E402

from bench.data import town_memories  # noqa: E402

MAX_BATCH = 1024  # the app's limit of memories per /rate/batch request


class Server:
    """The rater app served by waitress on a background thread, on a free loopback port.

    The thread runs waitress's event loop one poll at a time, so that stopping (a flag) and closing the
    sockets happen on that same thread, never under a ``select`` running on another.
    """

    def __init__(self, app, threads: int):
        import waitress

        self._server = waitress.create_server(app, host="127.0.0.1", port=0, threads=threads)
        self.base = f"http://127.0.0.1:{self._server.effective_port}"
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="waitress", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        from waitress import wasyncore

        server = self._server
        while not self._stop.is_set():
            wasyncore.loop(timeout=0.05, map=server._map, use_poll=server.adj.asyncore_use_poll, count=1)
        server.task_dispatcher.shutdown(timeout=5)
        for channel in list(server._map.values()):
            channel.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def _ok(resp: requests.Response, n: int | None = None) -> bool:
    """Whether ``resp`` is a 200 with one rating 1..10 (``n`` None) or ``n`` of them (a batch answer)."""
    if resp.status_code != 200:
        return False
    try:
        body = resp.json()
        items = [body] if n is None else body["ratings"]
        return len(items) == (n or 1) and all(1 <= int(i["rating"]) <= 10 for i in items)
    except (ValueError, KeyError, TypeError):
        return False


def load(url: str, texts: list[str], clients: int, max_requests: int, max_seconds: float) -> dict:
    """``clients`` threads post ``{"memory": text}`` for ``texts`` in turn (each text once) until
    ``max_requests`` or ``max_seconds``; returns requests, seconds, requests/s, p50/p99 latency (ms), errors."""
    texts = texts[:max_requests]
    lock = threading.Lock()
    position = iter(range(len(texts)))
    latencies: list[float] = []
    errors: list[str] = []
    deadline = time.perf_counter() + max_seconds

    def worker():
        with requests.Session() as session:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(position, None)
                if i is None:
                    return
                start = time.perf_counter()
                try:
                    resp = session.post(url, json={"memory": texts[i]}, timeout=60)
                    good = _ok(resp)
                    problem = None if good else f"HTTP {resp.status_code}: {resp.text[:200]}"
                except requests.RequestException as err:
                    problem = f"{type(err).__name__}: {err}"
                elapsed = time.perf_counter() - start
                with lock:
                    latencies.append(elapsed)
                    if problem:
                        errors.append(problem)

    threads = [threading.Thread(target=worker, name=f"client-{c}") for c in range(clients)]
    start = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    lat = np.array(latencies) * 1000
    return {"requests": len(latencies), "seconds": round(seconds, 3), "requests_per_s": round(len(lat) / seconds, 1),
            "p50_ms": round(float(np.percentile(lat, 50)), 2) if len(lat) else None,
            "p99_ms": round(float(np.percentile(lat, 99)), 2) if len(lat) else None,
            "errors": len(errors), "first_errors": errors[:3]}


def batch_vs_single(base: str, texts: list[str], n: int, repeats: int, backend) -> dict:
    """Memories/s rating ``n`` fresh memories one request each vs in ``/rate/batch`` requests, one client, vs a
    run's in-process rater over the same ``backend`` (:class:`simulacra.rater.InProcessRater`, no HTTP); the
    fastest of ``repeats`` (each repeat and each mode on its own fresh texts)."""
    from simulacra.rater import InProcessRater

    single_best = batch_best = local_best = float("inf")
    errors = 0
    local = InProcessRater(backend, wait_report_s=0)
    chunks = iter(texts[i:i + n] for i in range(0, len(texts), n))
    with requests.Session() as session:
        for _ in range(repeats):
            singles, batch, in_process = next(chunks), next(chunks), next(chunks)
            start = time.perf_counter()
            for text in singles:
                errors += not _ok(session.post(base + "/rate", json={"memory": text}, timeout=60))
            single_best = min(single_best, time.perf_counter() - start)
            start = time.perf_counter()
            for i in range(0, n, MAX_BATCH):
                part = batch[i:i + MAX_BATCH]
                errors += not _ok(session.post(base + "/rate/batch", json={"memories": part}, timeout=300), len(part))
            batch_best = min(batch_best, time.perf_counter() - start)
            start = time.perf_counter()
            errors += sum(not 1 <= r <= 10 for r in local.rate_many(in_process))
            local_best = min(local_best, time.perf_counter() - start)
    single, batched, in_proc = n / single_best, n / batch_best, n / local_best
    return {"memories": n, "single_memories_per_s": round(single, 1), "batch_memories_per_s": round(batched, 1),
            "speedup": round(batched / single, 2), "in_process_memories_per_s": round(in_proc, 1),
            "in_process_over_batch": round(in_proc / batched, 2), "errors": errors}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.rater_load", description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=4, help="concurrent client threads [%(default)s]")
    p.add_argument("--requests", type=int, default=2000, help="requests per load phase, at most [%(default)s]")
    p.add_argument("--seconds", type=float, default=60.0, help="seconds per load phase, at most [%(default)s]")
    p.add_argument("--batch-n", type=int, default=256, help="memories for the batch vs single figure [%(default)s]")
    p.add_argument("--repeats", type=int, default=3, help="repeats of batch vs single; the fastest counts "
                                                          "[%(default)s]")
    p.add_argument("--server-threads", type=int, default=4, help="waitress worker threads [%(default)s]")
    p.add_argument("--out", default="bench/results/rater.json", help="result file [%(default)s]")
    args = p.parse_args(argv)
    if min(args.clients, args.requests, args.batch_n, args.repeats, args.server_threads) < 1 or args.seconds <= 0:
        p.error("every count must be at least 1 and --seconds positive")

    from rater_server import create_app
    from simulacra.embeddings import build_embedder
    from simulacra.rating.backends import EmbeddingRater

    logging.getLogger("waitress.queue").setLevel(logging.ERROR)  # "Task queue depth is N": clients outnumber threads
    texts = town_memories(args.requests + 3 * args.repeats * args.batch_n + 8, seed=11)
    warm, load_texts, batch_texts = texts[:8], texts[8:8 + args.requests], texts[8 + args.requests:]
    backend = EmbeddingRater(build_embedder())
    server = Server(create_app(backend), args.server_threads)
    try:
        start = time.perf_counter()
        for text in warm:  # loads the model and fits the rater
            if not _ok(requests.post(server.base + "/rate", json={"memory": text}, timeout=300)):
                print("rater_load: the warm-up request failed", file=sys.stderr)
                return 1
        warmup_s = time.perf_counter() - start
        url = server.base + "/rate"
        uncached = load(url, load_texts, args.clients, args.requests, args.seconds)
        cached = load(url, load_texts[:uncached["requests"]], args.clients, args.requests, args.seconds)
        batch = batch_vs_single(server.base, batch_texts, args.batch_n, args.repeats, backend)
        health = requests.get(server.base + "/health", timeout=10).json()
    finally:
        server.close()

    print(f"rater over loopback: waitress {args.server_threads} threads, {args.clients} client threads, "
          f"offline backend ({health['model']}); warm-up {warmup_s:.1f} s")
    print(f"{'phase':>9} | {'requests':>8} {'seconds':>7} {'req/s':>7} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6}")
    for name, r in (("uncached", uncached), ("cached", cached)):
        print(f"{name:>9} | {r['requests']:8d} {r['seconds']:7.2f} {r['requests_per_s']:7.1f} {r['p50_ms']:7.2f} "
              f"{r['p99_ms']:7.2f} {r['errors']:6d}")
    print(f"batch vs single, {batch['memories']} fresh memories, one client (fastest of {args.repeats}): "
          f"single {batch['single_memories_per_s']:.1f} memories/s, batch {batch['batch_memories_per_s']:.1f} "
          f"memories/s, speed-up {batch['speedup']:.1f}x; in-process (no HTTP) "
          f"{batch['in_process_memories_per_s']:.1f} memories/s, {batch['in_process_over_batch']:.2f}x batch")
    errors = uncached["errors"] + cached["errors"] + batch["errors"]
    result = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "server": f"waitress, {args.server_threads} threads, 127.0.0.1; offline backend, {health['model']}",
        "clients": args.clients,
        "warmup_s": round(warmup_s, 2),
        "uncached": uncached,
        "cached": cached,
        "batch_vs_single": batch,
        "errors": errors,
        "cache_hits": health["counts"].get("cache_hits"),
        "method": f"load phases: {args.clients} client threads, own requests.Session each, POST /rate with "
                  f"distinct town memories, at most {args.requests} requests or {args.seconds:g} s; cached: the "
                  f"same texts again; batch vs single: one client, {args.batch_n} fresh memories per mode, "
                  f"fastest of {args.repeats}",
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"written to {out}")
    if errors:
        print(f"rater_load: {errors} requests failed: {uncached['first_errors'] + cached['first_errors']}",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
