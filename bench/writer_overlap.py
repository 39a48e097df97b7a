"""What a Chroma writer process would save (issue 11 §3, the scale target): one town, the same ticks, with the
store's writes made four ways, timed side by side.

simulacra wrote a tick's memories to Chroma in the tick (``persist`` stage, and the deletes after the checkpoint), on
the simulation's thread; this measures that way (``memory.store_flush_minutes=0``: every tick, as in session 8; since
session 9 a run writes Chroma every 480 game minutes and journals the ticks between, ``docs/scale.md``). chromadb's
embedded bindings hold the GIL while they write, so a thread cannot overlap them with the embedding model; only a second
process can. Before building one (it changes how a killed run is survived: the writer may outlive the run), this
measures what it could win on this machine:

- ``inline``: the run as it is.
- ``none``: the writes are dropped (``Collection.upsert``, ``update`` and ``delete`` do nothing): the bound, no
  Chroma cost at all.
- ``process``: each write is handed to a writer process (its own ``PersistentClient`` on a scratch folder, fed
  through a bounded ``multiprocessing`` queue) and the tick goes on at once.
- ``process-nice``: the same, the writer at ``nice 19``, so that it takes a core only when the run leaves one idle.

Only the timing is meaningful: in the ``none`` and ``process`` modes the run's own store is not written (a run made
so cannot be resumed or read). Each mode runs in a fresh child process, after the model is loaded and the town built
(as in :mod:`bench.scale`). Reported per mode: seconds of ticks, seconds the run spent in the embedding model during
them, and for the writer modes the seconds the writer spent in Chroma calls and how long it took to finish after
the last tick (the drain, part of a real run's wall time).

Usage: ``python -m bench.writer_overlap [--agents 100] [--hours 4] [--modes inline,none,process,process-nice]
[--out bench/results/writer_overlap_<agents>x<hours>h.json]``.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import scale  # noqa: E402 - first: it sets the offline environment (HF_HUB_OFFLINE, ...) once for bench/

RESULTS = scale.ROOT / "bench" / "results"
MODES = ("inline", "none", "process", "process-nice")
WRITES = ("upsert", "update", "delete")


def writer(queue, done, path: str, niceness: int) -> None:
    """The writer process: apply ``(collection name, method, keyword arguments)`` items from ``queue`` to a
    ``PersistentClient`` at ``path`` until ``None``; put the seconds spent in Chroma calls on ``done``."""
    os.nice(niceness)
    import chromadb
    from chromadb.config import Settings

    client = chromadb.PersistentClient(path, settings=Settings(anonymized_telemetry=False))
    collections: dict = {}
    busy = 0.0
    while (item := queue.get()) is not None:
        name, method, kwargs = item
        if name not in collections:
            collections[name] = client.get_or_create_collection(name, embedding_function=None)
        t = time.perf_counter()
        getattr(collections[name], method)(**kwargs)
        busy += time.perf_counter() - t
    done.put(busy)


def redirect_writes(queue) -> None:
    """Make chromadb's ``Collection`` writes of this process go to ``queue`` (``None``: nowhere)."""
    from chromadb.api.models.Collection import Collection

    def handing_over(method: str):
        def handed_over(self, **kwargs) -> None:  # simulacra's store passes keyword arguments only
            if queue is not None:
                queue.put((self.name, method, kwargs))
        return handed_over

    for method in WRITES:
        setattr(Collection, method, handing_over(method))


def run_mode(mode: str, agents: int, hours: float) -> dict:
    """One mode in this process: build the town (:func:`bench.scale.build`), run ``hours`` game hours, time it."""
    with tempfile.TemporaryDirectory(prefix="simulacra-writer-") as tmp:
        tmp = Path(tmp)
        world = scale.town(tmp, agents, scale.WORLD)
        settings = (list(scale.CASE_SETTINGS["100x1"]) if agents >= 100 else []) + ["memory.store_flush_minutes=0"]
        sim, recorder, _, setup_s = scale.build(world, tmp / "database", f"writer-{agents}", settings)
        queue = done = proc = None
        if mode.startswith("process"):
            ctx = mp.get_context("spawn")
            queue, done = ctx.Queue(maxsize=64), ctx.Queue()
            niceness = 19 if mode.endswith("nice") else 0
            proc = ctx.Process(target=writer, args=(queue, done, str(tmp / "writer"), niceness))
            proc.start()
        if mode != "inline":
            redirect_writes(queue)
        model0 = recorder.seconds
        ticks = int(hours * 60) // sim.world.tick_minutes
        t = time.perf_counter()
        sim.run(ticks)
        ticks_s = time.perf_counter() - t
        out = {"mode": mode, "agents": agents, "hours": hours, "ticks": ticks, "settings": settings,
               "setup_s": round(setup_s, 2), "ticks_s": round(ticks_s, 2),
               "model_in_ticks_s": round(recorder.seconds - model0, 2)}
        if proc is not None:
            t = time.perf_counter()
            queue.put(None)
            out["writer_busy_s"] = round(done.get(), 2)
            proc.join()
            out["drain_s"] = round(time.perf_counter() - t, 2)
        out["ticks_plus_drain_s"] = round(ticks_s + out.get("drain_s", 0.0), 2)
        if mode == "inline":
            sim.close()
        return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.writer_overlap", description=__doc__.split("\n\n")[0])
    p.add_argument("--agents", type=int, default=100, help="residents [%(default)s]")
    p.add_argument("--hours", type=float, default=4.0, help="game hours [%(default)s]")
    p.add_argument("--modes", default=",".join(MODES), help=f"comma-separated modes [{','.join(MODES)}]")
    p.add_argument("--out", default=None, help=f"JSON results file [{RESULTS}/writer_overlap_<agents>x<hours>h.json]")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child process: run this mode, JSON to stdout
    args = p.parse_args(argv)
    if args.one:
        print(json.dumps(run_mode(args.one, args.agents, args.hours)), flush=True)
        os._exit(0)  # the modes that dropped writes leave a store that must not be closed (flushed) normally
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"bench.writer_overlap: unknown mode '{m}'; expected one of {', '.join(MODES)}")
    rows = []
    for m in modes:
        print(f"bench.writer_overlap: {m} ...", file=sys.stderr, flush=True)
        cmd = [sys.executable, "-m", "bench.writer_overlap", "--one", m, "--agents", str(args.agents),
               "--hours", str(args.hours)]
        r = subprocess.run(cmd, cwd=scale.ROOT, capture_output=True, text=True)
        if r.returncode != 0:
            sys.stderr.write(r.stderr[-4000:])
            raise SystemExit(f"bench.writer_overlap: mode {m} failed (exit {r.returncode})")
        rows.append(json.loads(r.stdout.strip().splitlines()[-1]))
    base = next((r for r in rows if r["mode"] == "inline"), None)
    print(f"{args.agents} agents x {args.hours:g} game hours, {os.cpu_count()} cores")
    print(f"{'mode':>13}  {'ticks s':>8}  {'+drain s':>8}  {'model s':>8}  {'writer s':>8}  {'vs inline':>9}")
    for r in rows:
        gain = "" if base is None else f"{r['ticks_plus_drain_s'] - base['ticks_s']:+.1f} s"
        print(f"{r['mode']:>13}  {r['ticks_s']:8.1f}  {r['ticks_plus_drain_s']:8.1f}  {r['model_in_ticks_s']:8.1f}  "
              f"{r.get('writer_busy_s', float('nan')):8.1f}  {gain:>9}")
    out = Path(args.out or RESULTS / f"writer_overlap_{args.agents}x{args.hours:g}h.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"runs": rows, "cpus": os.cpu_count()}, indent=1) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
