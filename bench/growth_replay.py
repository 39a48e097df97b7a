"""Replay a run's long-term memory under other forgetting settings, without running the town again.

A cheap estimate, used to choose ``memory.long_term_decay_per_hour`` and ``memory.rehearse`` before a week run
confirms the choice (``docs/scale.md``, memory growth). From a trace (``trace.jsonl``; a ``bench.memory_growth
--keep DIR`` run keeps it) it takes, per agent and tick, what entered long-term (``move`` operations with their
importance, long-term ``add`` operations with their rating) and what the tick used (the results of its
``retrieve`` operations and the evidence of its ``reflect`` operations, :func:`simulacra.tick.used_memories`),
then applies the forgetting rule of :meth:`simulacra.memory.stream.AgentMemory.forget_decayed` at the end of every
tick: importance ``rating / 10 * decay ** (hours since entering long-term or, with rehearsal, since last used)``
under ``floor`` is forgotten.

It is an estimate: the retrievals are those of the recorded run, so a memory the replay forgets can still be asked
for later. That is what ``lost`` counts: the share of the run's long-term retrieval results (per purpose:
``focus``, ``conversation``, ``plan``, ...) that the replay had already forgotten, i.e. memories a retrieval wanted
and would not have found. Growth exponent and samples as :mod:`bench.memory_growth` (every game hour).

Usage: ``python -m bench.growth_replay TRACE [--decay 0.99 0.95 ...] [--rehearse both|on|off] [--json OUT]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bench.memory_growth import growth_exponent
from bench.scale import DAY, PERCEIVED
from simulacra.tick import used_memories


def read_trace(path: Path) -> tuple[dict, list[dict]]:
    """The header and the tick records of a trace (a cut last line is left out)."""
    ticks = []
    with open(path, encoding="utf-8") as f:
        head = json.loads(next(f))
        for line in f:
            try:
                ticks.append(json.loads(line))
            except json.JSONDecodeError:
                break
    return head, ticks


def replay(head: dict, ticks: list[dict], decay: float, floor: float = 0.1, rehearse: bool = True) -> dict:
    """Long-term memory per agent under ``decay`` (per game hour), ``floor`` and rehearsal; returns ``samples``
    (``game_minute``, ``long_term`` and ``perceived`` means per agent, as :class:`bench.scale.Growth` rows),
    ``lost`` (share of long-term retrieval results already forgotten, overall and per purpose) and ``forgotten``
    (count)."""
    agents, start, step = head["agents"], head["start_minute"], head["tick_minutes"]
    lt: dict[str, dict[str, list[float]]] = {a: {} for a in agents}  # id -> [importance, decay origin]
    gone: dict[str, set[str]] = {a: set() for a in agents}
    perceived: Counter = Counter()
    hits: Counter = Counter()
    lost: Counter = Counter()
    rows = []
    log_decay = math.log(decay)
    for t in ticks:
        now = t["time"]
        for op in t["memory"]:
            a = op.get("agent")
            if op["op"] == "add":
                if op["tier"] == "short_term" and op.get("kind") in PERCEIVED:
                    perceived[a] += 1
                if op["tier"] == "long_term":
                    lt[a][op["id"]] = [op["rating"] / 10.0, now]
            elif op["op"] == "move":
                lt[a][op["id"]] = [op["importance"], now]
            elif op["op"] == "retrieve":
                purpose = op["purpose"].split()[0]
                for r in op["results"]:
                    if r["tier"] == "long_term":
                        hits["all"] += 1
                        hits[purpose] += 1
                        if r["id"] in gone[a]:
                            lost["all"] += 1
                            lost[purpose] += 1
        if rehearse:
            for a, by_reason in used_memories(t["memory"]).items():
                for ids in by_reason.values():
                    for i in ids:
                        if i in lt[a]:
                            lt[a][i][1] = now
        for a in agents:
            out = [i for i, (imp, since) in lt[a].items() if imp * math.exp((now - since) / 60 * log_decay) < floor]
            for i in out:
                del lt[a][i]
            gone[a].update(out)
        minute = now + step
        if (minute - start) % 60 == 0:
            rows.append({"game_minute": minute, "long_term": {"mean": float(np.mean([len(lt[a]) for a in agents]))},
                         "perceived": float(np.mean([perceived[a] for a in agents]))})
    return {"samples": rows, "forgotten": sum(map(len, gone.values())),
            "lost": {k: round(lost[k] / hits[k], 4) for k in hits if hits[k]}}


def summary(head: dict, result: dict) -> dict:
    """Exponents (all samples, from day 2), long-term mean at each whole day and at the end."""
    start, rows = head["start_minute"], result["samples"]
    daily = [round(r["long_term"]["mean"], 1) for r in rows if (r["game_minute"] - start) % DAY == 0]
    if rows and (rows[-1]["game_minute"] - start) % DAY:
        daily.append(round(rows[-1]["long_term"]["mean"], 1))
    exp, later = growth_exponent(rows), growth_exponent(rows, start + DAY)
    return {"exponent": None if exp is None else round(exp, 3),
            "exponent_from_day2": None if later is None else round(later, 3),
            "long_term_per_day": daily, "forgotten": result["forgotten"], "lost": result["lost"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.growth_replay", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a run's trace.jsonl")
    p.add_argument("--decay", type=float, nargs="+", default=[0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92, 0.9],
                   help="long_term_decay_per_hour values [%(default)s]")
    p.add_argument("--floor", type=float, default=0.1, help="forget_floor [%(default)s]")
    p.add_argument("--rehearse", choices=("both", "on", "off"), default="both")
    p.add_argument("--json", default=None, help="write the table here")
    args = p.parse_args(argv)
    head, ticks = read_trace(Path(args.trace))
    if not ticks:
        raise SystemExit(f"bench.growth_replay: {args.trace}: no tick records")
    modes = {"both": (False, True), "on": (True,), "off": (False,)}[args.rehearse]
    table = []
    print(f"{len(ticks)} ticks, {(ticks[-1]['time'] + head['tick_minutes'] - head['start_minute']) / DAY:.2f} game "
          f"days, {len(head['agents'])} agents")
    for rehearse in modes:
        for decay in args.decay:
            s = summary(head, replay(head, ticks, decay, args.floor, rehearse))
            table.append({"decay": decay, "rehearse": rehearse, **s})
            print(f"decay {decay:<6} rehearse {'on ' if rehearse else 'off'}  exponent {s['exponent']:.2f}  from day 2 "
                  f"{s['exponent_from_day2']:.2f}  long-term per day {s['long_term_per_day']}  lost "
                  + " ".join(f"{k} {v:.3f}" for k, v in sorted(s["lost"].items())))
    if args.json:
        Path(args.json).write_text(json.dumps({"trace": str(args.trace), "ticks": len(ticks), "table": table},
                                              indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
