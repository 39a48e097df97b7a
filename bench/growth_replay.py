"""Replay a run's long-term memory under other forgetting settings, without running the town again.

A cheap estimate, used to choose ``memory.long_term_decay_per_hour`` and ``memory.rehearse`` before a week run
confirms the choice (``docs/scale.md``, memory growth). From a trace (``trace.jsonl``; a ``bench.memory_growth
--keep DIR`` run keeps it) it takes, per agent and tick, what entered long-term (``move`` operations with their
importance, long-term ``add`` operations with their rating) and what the tick used (the results of its
``retrieve`` operations and the evidence of its ``reflect`` operations, :func:`simulacra.tick.used_memories`),
then applies the forgetting rule of :meth:`simulacra.memory.stream.AgentMemory.forget_decayed` at the end of every
tick: importance (:func:`simulacra.memory.scoring.decayed_importance`: ``rating / 10 * decay ** (hours * (pivot /
max(rating, pivot)) ** exponent)``, hours since entering long-term or, with rehearsal, since last used) under
``floor`` is forgotten. ``exponent`` 0 is plain decay; above 0 the decay slows with the rating above ``pivot``
(``memory.decay_importance_exponent``, ``memory.decay_importance_pivot``).

It is an estimate: the retrievals are those of the recorded run, so a memory the replay forgets can still be asked
for later. That is what ``lost`` counts: the share of the run's long-term retrieval results (per purpose:
``focus``, ``conversation``, ``plan``, ...) that the replay had already forgotten, i.e. memories a retrieval wanted
and would not have found. Growth exponent and samples as :mod:`bench.memory_growth` (every game hour). ``kept``
(:mod:`bench.kept`): at each game day's end, the share of the memories written so far that the replayed long-term
memory holds, by category (witnessed world events, rated >= 7, rating bands) and age.

Usage: ``python -m bench.growth_replay TRACE [--decay 0.99 0.95 ...] [--exponent 0 8 ...] [--pivot 6.5 ...]
[--rehearse both|on|off] [--json OUT]`` (every combination of the listed decays, exponents, pivots and rehearsal
modes).
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections import Counter
from pathlib import Path

import numpy as np

from bench.kept import Kept, kept_at
from bench.memory_growth import growth_exponent
from bench.scale import DAY, PERCEIVED
from simulacra.memory.scoring import decayed_importance
from simulacra.tick import used_memories

#: the kept categories the table shows (all are in the JSON)
SHOWN = ("world events", "world events rated >= 7", "rated >= 7")


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


def replay(head: dict, ticks: list[dict], decay: float, floor: float = 0.1, rehearse: bool = True,
           exponent: float = 0.0, pivot: float = 6.5) -> dict:
    """Long-term memory per agent under ``decay`` (per game hour), ``exponent`` and ``pivot``
    (``decay_importance_exponent``, ``decay_importance_pivot``), ``floor`` and rehearsal; returns ``samples``
    (``game_minute``, ``long_term`` and ``perceived`` means per agent, as :class:`bench.scale.Growth` rows),
    ``lost`` (share of long-term retrieval results already forgotten, overall and per purpose), ``forgotten``
    (count), ``forgotten_at`` (``{agent: {id: game minute}}``) and ``kept`` (:meth:`bench.kept.Kept.result`, at
    each day's end)."""
    agents, start, step = head["agents"], head["start_minute"], head["tick_minutes"]
    lt: dict[str, dict[str, list[float]]] = {a: {} for a in agents}  # id -> [rating, decay origin]
    gone: dict[str, dict[str, float]] = {a: {} for a in agents}  # id -> game minute forgotten
    perceived: Counter = Counter()
    hits: Counter = Counter()
    lost: Counter = Counter()
    kept = Kept(start)
    rows = []
    for t in ticks:
        now = t["time"]
        kept.observe(t["memory"], now)
        for op in t["memory"]:
            a = op.get("agent")
            if op["op"] == "add":
                if op["tier"] == "short_term" and op.get("kind") in PERCEIVED:
                    perceived[a] += 1
                if op["tier"] == "long_term":
                    lt[a][op["id"]] = [float(op["rating"]), now]
            elif op["op"] == "move":  # the importance a move records is the undecayed rating / 10
                lt[a][op["id"]] = [round(op["importance"] * 10.0, 9), now]
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
            if not lt[a]:
                continue
            rating, since = np.array(list(lt[a].values())).T
            imp = decayed_importance(rating, since, now, decay, exponent, pivot)  # the rule forget_decayed applies
            out = [i for i, low in zip(list(lt[a]), imp < floor) if low]
            for i in out:
                del lt[a][i]
            gone[a].update(dict.fromkeys(out, now))
        minute = now + step
        if (minute - start) % 60 == 0:
            rows.append({"game_minute": minute, "long_term": {"mean": float(np.mean([len(lt[a]) for a in agents]))},
                         "perceived": float(np.mean([perceived[a] for a in agents]))})
        if (minute - start) % DAY == 0:
            kept.day_end(minute, lt)
    if ticks and (ticks[-1]["time"] + step - start) % DAY:
        kept.day_end(ticks[-1]["time"] + step, lt)
    return {"samples": rows, "forgotten": sum(map(len, gone.values())), "forgotten_at": gone,
            "lost": {k: round(lost[k] / hits[k], 4) for k in hits if hits[k]}, "kept": kept.result()}


def summary(head: dict, result: dict) -> dict:
    """Exponents (all samples, from day 2), long-term mean at each whole day and at the end, the share of each
    category of :data:`SHOWN` kept at the last day's end, and the whole kept table."""
    start, rows = head["start_minute"], result["samples"]
    daily = [round(r["long_term"]["mean"], 1) for r in rows if (r["game_minute"] - start) % DAY == 0]
    if rows and (rows[-1]["game_minute"] - start) % DAY:
        daily.append(round(rows[-1]["long_term"]["mean"], 1))
    exp, later = growth_exponent(rows), growth_exponent(rows, start + DAY)
    return {"exponent": None if exp is None else round(exp, 3),
            "exponent_from_day2": None if later is None else round(later, 3),
            "long_term_per_day": daily, "forgotten": result["forgotten"], "lost": result["lost"],
            "kept_at_end": {c: kept_at(result["kept"], c) for c in SHOWN}, "kept": result["kept"]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.growth_replay", description=__doc__.split("\n\n")[0])
    p.add_argument("trace", help="a run's trace.jsonl")
    p.add_argument("--decay", type=float, nargs="+", default=[0.99, 0.98, 0.97, 0.96, 0.95, 0.94, 0.93, 0.92, 0.9],
                   help="long_term_decay_per_hour values [%(default)s]")
    p.add_argument("--exponent", type=float, nargs="+", default=[0.0],
                   help="decay_importance_exponent values (0: plain decay) [%(default)s]")
    p.add_argument("--pivot", type=float, nargs="+", default=[6.5], help="decay_importance_pivot values [%(default)s]")
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
    for rehearse, exponent, pivot, decay in itertools.product(modes, args.exponent, args.pivot, args.decay):
        if not exponent and pivot != args.pivot[0]:
            continue  # plain decay: the pivot changes nothing
        s = summary(head, replay(head, ticks, decay, args.floor, rehearse, exponent, pivot))
        table.append({"decay": decay, "decay_importance_exponent": exponent, "decay_importance_pivot": pivot,
                      "rehearse": rehearse, **s})
        print(f"decay {decay:<6} p {exponent:<4g} pivot {pivot:<4g} rehearse {'on ' if rehearse else 'off'}  growth "
              f"exponent {s['exponent']:.2f}  from day 2 {s['exponent_from_day2']:.2f}  long-term per day "
              f"{s['long_term_per_day']}  lost " + " ".join(f"{k} {v:.3f}" for k, v in sorted(s["lost"].items()))
              + "  kept at end " + "  ".join(f"{c} {'n/a' if v is None else f'{100 * v:.0f} %'}"
                                              for c, v in s["kept_at_end"].items()))
    if args.json:
        Path(args.json).write_text(json.dumps({"trace": str(args.trace), "ticks": len(ticks), "table": table},
                                              indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
