"""A generated town in one process, and on 1 and 2 Ray workers, side by side (issue 23 §4, first figures).

``python -m bench.cluster [--residents 100] [--hours 1] [--seed 0] [--out bench/results/cluster.json]``

For each town size: :func:`simulacra.world.generate.write_town` writes the town; then, each in this process one after
the other, the same run (scripted, seed 0, ``--hours`` game hours from 07:00) in one process, on 1 Ray worker and on
2 Ray workers (a local Ray instance with the machine's CPUs, started once). Reported per mode: set-up seconds (model
loading, the rater's fit, the static memories embedded), seconds per game hour of ticks, milliseconds per
agent-tick, peak RSS of this process and (Ray) the workers' RSS at the end, and whether the trace's tick records equal
the one-process run's. On Ray also the barrier's cost (:class:`simulacra.cluster.PhaseCosts`): the share of the run a
shard spends waiting at the phases' barriers for the slowest shard (``wait %``, averaged over the shards), Ray's own
share (``Ray %``: each phase's time beyond its slowest shard's work: sending, scheduling, answers back), the town's
own stages while the shards idle (``town %``), and the bytes moved per tick (pickled sizes of the phases' inputs and
answers: ``KB/tick``). Writes the figures as JSON and prints a table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import tempfile
import time
from pathlib import Path


def rss_mb(pid: int) -> float:
    """Resident set size of process ``pid`` in MB (Linux ``/proc``), 0 when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def one_run(world: Path, db: Path, name: str, ticks: int, workers: int, embedder=None, ray: bool = False) -> dict:
    """One run of ``ticks`` ticks: in this process, or with ``ray`` on ``workers`` actors of the Ray instance this
    process started (``workers`` 1 on Ray: what Ray alone costs)."""
    from simulacra.config import load_config
    from simulacra.simulation import Simulation

    config = load_config(None, ["rater.url=http://127.0.0.1:0/rate"])
    address = None
    if ray:
        import ray as ray_module

        address = ray_module.get_runtime_context().gcs_address
    start = time.perf_counter()
    with Simulation.create(world, config, db_dir=db, run_name=name, embedder=embedder, workers=workers,
                           ray_address=address) as sim:
        setup = time.perf_counter() - start
        if sim.cluster is not None:  # the run's phases only, with the bytes they move
            from simulacra.cluster import PhaseCosts

            sim.cluster.costs = PhaseCosts()
            sim.cluster.measure_bytes = True
        start = time.perf_counter()
        sim.run(ticks)
        ran = time.perf_counter() - start
        agents = len(sim.rt.agents)
        workers_rss = ([round(rss_mb(i["pid"]), 1) for i in sim.cluster.infos] if sim.cluster is not None else [])
        workers_threads = [i["embedding_threads"] for i in sim.cluster.infos] if sim.cluster is not None else []
        costs = sim.cluster.costs.report() if sim.cluster is not None else None
    lines = (db / name / "trace.jsonl").read_bytes().split(b"\n")[1:]
    out = {"workers": workers, "setup_s": round(setup, 1), "run_s": round(ran, 1), "agents": agents, "ticks": ticks,
           "ms_per_agent_tick": round(1000 * ran / (agents * ticks), 2), "workers_rss_mb": workers_rss,
           "workers_embedding_threads": workers_threads,
           "lines": lines}
    if costs is not None:
        # a shard's time at the barriers: waiting for the slowest shard of each phase (averaged over the shards),
        # and Ray's own part of each phase (sending, scheduling, answers back); the town's own stages, during which
        # the shards idle, are the rest of the tick
        out.update(barrier_wait_pct=round(100 * costs["waiting_s"] / workers / ran, 2),
                   transport_pct=round(100 * costs["transport_s"] / ran, 2),
                   town_only_pct=round(100 * (ran - costs["wall_s"]) / ran, 2),
                   kb_moved_per_tick=round((costs["bytes_sent"] + costs["bytes_received"]) / 1024 / ticks, 1),
                   phases=costs["phases"])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.cluster", description=__doc__.split("\n\n")[0])
    p.add_argument("--residents", default="100", help="town sizes, comma-separated [%(default)s]")
    p.add_argument("--hours", type=float, default=1.0, help="game hours per run [%(default)s]")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="bench/results/cluster.json")
    args = p.parse_args(argv)

    import ray

    from simulacra.embeddings import build_embedder
    from simulacra.world.generate import write_town

    ray.init(include_dashboard=False, logging_level="ERROR")
    results = []
    try:
        for n in [int(x) for x in args.residents.split(",")]:
            with tempfile.TemporaryDirectory() as tmp:
                world, _ = write_town(Path(tmp) / f"town{n}.yaml", n, args.seed)
                ticks = max(1, round(args.hours * 60 / 10))
                runs = [one_run(world, Path(tmp) / "db", "one", ticks, 1, build_embedder())]
                for workers in (1, 2):
                    runs.append(one_run(world, Path(tmp) / "db", f"w{workers}", ticks, workers, ray=True))
                base = runs[0]
                for r in runs:
                    r["same_trace"] = r.pop("lines") == base.get("lines", r.get("lines")) if r is not base else True
                base.pop("lines", None)
                for r in runs:
                    r["run_over_one_process"] = round(r["run_s"] / base["run_s"], 2)
                    r["mode"] = "one process" if r is base else f"{r['workers']} Ray worker(s)"
                results.append({"residents": n, "hours": args.hours, "runs": runs})
                print(f"\n{n} residents, {args.hours:g} game hours ({ticks} ticks)")
                print(f"{'mode':>16} | {'set-up s':>8} {'run s':>7} {'x one':>6} {'ms/agent-tick':>13} "
                      f"{'workers RSS MB':>16} {'wait %':>6} {'Ray %':>6} {'town %':>6} {'KB/tick':>8} same trace")
                for r in runs:
                    extra = (f"{r['barrier_wait_pct']:6.2f} {r['transport_pct']:6.2f} {r['town_only_pct']:6.2f} "
                             f"{r['kb_moved_per_tick']:8.1f}" if "phases" in r else f"{'-':>6} {'-':>6} {'-':>6} "
                                                                                    f"{'-':>8}")
                    print(f"{r['mode']:>16} | {r['setup_s']:8.1f} {r['run_s']:7.1f} {r['run_over_one_process']:6.2f} "
                          f"{r['ms_per_agent_tick']:13.2f} {str(r['workers_rss_mb']):>16} {extra} {r['same_trace']}")
    finally:
        ray.shutdown()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
           "load_before": os.getloadavg(), "driver_peak_rss_mb": round(peak, 1), "results": results}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwritten to {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
