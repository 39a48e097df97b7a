"""Night ticks against day ticks: what a tick costs when every agent sleeps (simulacra.days) and when none does.

Runs a world from its start on day 1 into the next morning with the scripted mind (the rater in-process on a free
loopback port unless ``--rater-url`` is given), times every :meth:`Simulation.step` (wall time, and this process's
CPU time, which other processes on the machine disturb less), and compares ticks with every agent asleep to ticks
with none asleep. Medians over the ticks of each kind; the checkpoint after each tick is included. Prints and
writes ``bench/results/nights.json``.

Usage: ``python -m bench.nights [--world worlds/fernhollow.yaml] [--until-hour 9]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def free_rater_url() -> str:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/rate"


def measure(world_path: str, until_hour: int, rater_url: str | None) -> dict:
    from simulacra.clock import MINUTES_PER_DAY, MINUTES_PER_HOUR
    from simulacra.config import load_config
    from simulacra.simulation import Simulation

    config = load_config(None, [f"rater.url={rater_url or free_rater_url()}"])
    with tempfile.TemporaryDirectory() as db:
        sim = Simulation.create(world_path, config, db_dir=db, run_name="nights")
        w = sim.world
        minutes = MINUTES_PER_DAY + until_hour * MINUTES_PER_HOUR - w.start_minute  # to the next morning
        rows = []
        with sim:
            n = len(sim.rt.agents)
            for _ in range(minutes // w.tick_minutes):
                t0, c0 = time.perf_counter(), time.process_time()
                r = sim.step()
                rows.append((len(r.record.get("asleep", [])), time.perf_counter() - t0, time.process_time() - c0,
                             sum(1 for op in r.record["memory"] if op["op"] in ("add", "retrieve"))))

    def kind(rows_):
        return {"ticks": len(rows_), "wall_median_ms": round(1000 * statistics.median(r[1] for r in rows_), 1),
                "cpu_median_ms": round(1000 * statistics.median(r[2] for r in rows_), 1),
                "memory_adds_and_retrievals_per_tick": round(statistics.mean(r[3] for r in rows_), 2)}

    night, day = kind([r for r in rows if r[0] == n]), kind([r for r in rows if r[0] == 0])
    return {"world": world_path, "agents": n, "tick_minutes": w.tick_minutes, "ticks": len(rows),
            "night": night, "day": day,
            "night_over_day_wall": round(night["wall_median_ms"] / day["wall_median_ms"], 4),
            "night_over_day_cpu": round(night["cpu_median_ms"] / day["cpu_median_ms"], 4),
            "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "load_average_1min": round(os.getloadavg()[0], 1)}}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.nights", description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", default="worlds/fernhollow.yaml")
    ap.add_argument("--until-hour", type=int, default=9, help="run until this hour of day 2 [%(default)s]")
    ap.add_argument("--rater-url", default=None)
    ap.add_argument("--out", default="bench/results/nights.json")
    args = ap.parse_args(argv)
    result = measure(args.world, args.until_hour, args.rater_url)
    print(json.dumps(result, indent=2))
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
