"""Checkpoint cost: wall time of :meth:`simulacra.simulation.Simulation.checkpoint` against the whole tick, and the
checkpoint's size, over a game day of a town with the scripted backend.

Each tick is timed whole (``step``, checkpoint included) and its checkpoint alone; the checkpoint is split into its
parts (the trace's fsync, the checkpoint's write, emptying the stores' trash). Reports the
median and mean per tick in milliseconds, the checkpoint's share of the tick, and the sizes on disk at the end.
The rater is the offline one, started in-process on a free port.

Usage: ``python -m bench.checkpoint_cost [--world worlds/fernhollow.yaml] [--ticks 144] [--agents a,b,...]``
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Timer:
    """Wraps ``obj.name`` so that every call adds its wall time (seconds) to ``self.spent``."""

    def __init__(self, obj, name: str):
        self.obj, self.name, self.spent = obj, name, 0.0
        self.orig = getattr(obj, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return self.orig(*args, **kwargs)
            finally:
                self.spent += time.perf_counter() - start

        setattr(obj, name, timed)

    def take(self) -> float:
        spent, self.spent = self.spent, 0.0
        return spent


def measure(world: Path, personas: Path | None, ticks: int, agents: list[str] | None) -> dict:
    from simulacra.config import load_config
    from simulacra.memory.stream import AgentMemory
    from simulacra.simulation import Simulation

    config = load_config(None, [f"rater.url=http://127.0.0.1:{free_port()}/rate"])
    with tempfile.TemporaryDirectory() as tmp:
        sim = Simulation.create(world, config, personas_dir=personas, db_dir=tmp, run_name="ck", agents=agents)
        with sim:
            timers = {"checkpoint": Timer(sim, "checkpoint"), "trace_fsync": Timer(sim.trace, "sync"),
                      "empty_trash": Timer(AgentMemory, "empty_trash")}
            writer = getattr(sim, "_writer", None)
            if writer is not None:  # the journal writer (after the first, whole, checkpoint)
                timers["write"] = Timer(writer, "write")
            else:  # an older simulacra: one whole file per checkpoint
                import simulacra.simulation as sim_module

                timers["write"] = Timer(sim_module, "write_checkpoint")
            tick_s: list[float] = []
            spent: dict[str, list[float]] = {k: [] for k in timers}
            for _ in range(ticks):
                start = time.perf_counter()
                sim.step()
                tick_s.append(time.perf_counter() - start)
                for k, t in timers.items():
                    spent[k].append(t.take())
            AgentMemory.empty_trash = timers["empty_trash"].orig
            run = Path(tmp) / "ck"
            sizes = {p.name: p.stat().st_size for p in run.iterdir() if p.is_file()}
            memories = sum(sum(m.counts().values()) for m in sim.memories.values())
            whole = getattr(writer, "wholes", None)
    ck_s = spent.pop("checkpoint")
    ms = lambda xs: round(1000 * statistics.median(xs), 3)  # noqa: E731
    mean = lambda xs: round(1000 * statistics.fmean(xs), 3)  # noqa: E731
    return {
        "world": world.name, "agents": len(sim.rt.agents), "ticks": ticks, "memories_at_end": memories,
        "tick_ms": {"median": ms(tick_s), "mean": mean(tick_s)},
        "checkpoint_ms": {"median": ms(ck_s), "mean": mean(ck_s)},
        "parts_mean_ms": {k: mean(v) for k, v in spent.items()},
        "share_of_tick": round(sum(ck_s) / sum(tick_s), 4),
        "whole_checkpoints": whole,
        "bytes": sizes,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--world", type=Path, default=ROOT / "tests/data/tiny.yaml")
    ap.add_argument("--personas-dir", type=Path, default=None)
    ap.add_argument("--ticks", type=int, default=144, help="ticks to run (144 = a game day of 10-minute ticks)")
    ap.add_argument("--agents", default=None, help="comma-separated resident ids (default: all)")
    ap.add_argument("--out", type=Path, default=None, help="also write the figures to this JSON file")
    args = ap.parse_args(argv)
    personas = args.personas_dir
    if personas is None and args.world.parent.name == "data":
        personas = args.world.parent / "personas"
    result = measure(args.world, personas, args.ticks, args.agents.split(",") if args.agents else None)
    print(json.dumps(result, indent=2))
    if args.out is not None:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
