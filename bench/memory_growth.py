"""Memory growth over a long run (issue 11 §3): does short-term memory stay small, and does long-term memory grow
sublinearly in the events an agent perceives?

Runs Gullhaven's 25 residents with the scripted backend (:func:`bench.scale.run_case`, the scale benchmark's
measured run) for ``--days`` game days, or until ``--budget-minutes`` of wall time, sampling every game hour
the mean and max per agent of the short-term, long-term and total memories, and the mean count of memories
written for what the agent perceived (observations and events). ``--from FILE --case NAME`` takes the samples
recorded by a ``bench.scale`` run instead of running again.

Growth exponent: the least-squares slope of log(long-term mean) against log(perceived mean) over the samples
where both are positive (1 = linear; below 1 = sublinear); also over the samples from the end of the first game
day on (``growth_exponent_from_day2``), which leaves out the first day's warm-up. Per day, ``marginal``: long-term
memories gained per memory perceived that day (:func:`per_day`), the growth curve's slope day by day.

Kept (:mod:`bench.kept`): at the end of each game day, the share of the memories written so far that the agents'
long-term memory still holds, by category (witnessed world events, memories rated >= 7, rating bands) and by age
in game days: what forgetting costs.

Writes ``bench/results/memory_growth.json`` (samples, the per-day table, the exponent, ``kept``) and the plot
``docs/memory_growth.png``.

Usage: ``python -m bench.memory_growth [--days 7] [--budget-minutes 15] [--keep DIR]`` or
``python -m bench.memory_growth --from bench/results/scale.json --case 25x2``, or
``python -m bench.memory_growth --compare before=A.json after=B.json`` (one plot of several results).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path

import numpy as np

from bench.kept import format_rows
from bench.scale import DAY, ROOT, run_case

RESULTS = ROOT / "bench" / "results" / "memory_growth.json"
PLOT = ROOT / "docs" / "memory_growth.png"


def per_day(rows: list[dict], start_minute: int) -> list[dict]:
    """The sample closest after each whole game day since the start (plus the last sample): ``day`` (game days
    run), ``short_term``, ``long_term``, ``total`` (means per agent), ``short_term_max``, ``perceived``, and
    ``marginal``: long-term memories gained per memory perceived since the previous row (since the start for the
    first): the day's slope of the growth curve, which falls towards 0 when growth is sublinear (bounded: 0), stays
    constant when it is linear; ``None`` when nothing was perceived in between."""
    out, next_mark = [], start_minute + DAY
    for i, r in enumerate(rows):
        last = i == len(rows) - 1
        if r["game_minute"] >= next_mark or last:
            prev = out[-1] if out else {"long_term": 0.0, "perceived": 0.0}
            seen = r["perceived"] - prev["perceived"]
            out.append({"days_run": round((r["game_minute"] - start_minute) / DAY, 3),
                        "short_term": r["short_term"]["mean"], "short_term_max": r["short_term"]["max"],
                        "long_term": r["long_term"]["mean"], "total": r["total"]["mean"],
                        "perceived": r["perceived"], "marginal": None if seen <= 0 else
                        round((r["long_term"]["mean"] - prev["long_term"]) / seen, 4)})
            while next_mark <= r["game_minute"]:
                next_mark += DAY
    return out


def growth_exponent(rows: list[dict], from_minute: float | None = None) -> float | None:
    """Slope of log(long-term mean) on log(perceived mean) (see the module docstring), over the samples at or after
    game minute ``from_minute`` (all by default); ``None`` with fewer than 3 usable samples."""
    pts = [(math.log(r["perceived"]), math.log(r["long_term"]["mean"])) for r in rows
           if r["perceived"] > 0 and r["long_term"]["mean"] > 0
           and (from_minute is None or r["game_minute"] >= from_minute)]
    if len(pts) < 3:
        return None
    x, y = np.array(pts).T
    return float(np.polyfit(x, y, 1)[0])


def plot(rows: list[dict], start_minute: int, exponent: float | None, title: str, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    days = [(r["game_minute"] - start_minute) / DAY for r in rows]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    a.plot(days, [r["short_term"]["mean"] for r in rows], label="short-term (mean)")
    a.plot(days, [r["short_term"]["max"] for r in rows], ":", label="short-term (max)")
    a.plot(days, [r["long_term"]["mean"] for r in rows], label="long-term (mean)")
    a.plot(days, [r["total"]["mean"] - r["static"]["mean"] for r in rows], "--", label="short + long (mean)")
    a2 = a.twinx()
    a2.plot(days, [r["perceived"] for r in rows], color="grey", alpha=0.6, label="perceptions written so far (right)")
    a2.set_ylabel("perception memories written so far (mean per agent)")
    a.set_xlabel("game days run")
    a.set_ylabel("memories per agent")
    lines = a.get_legend_handles_labels()
    more = a2.get_legend_handles_labels()
    a.legend(lines[0] + more[0], lines[1] + more[1], fontsize=8, loc="upper left")
    a.grid(alpha=0.3)
    pts = [(r["perceived"], r["long_term"]["mean"]) for r in rows if r["perceived"] > 0 and r["long_term"]["mean"] > 0]
    if pts:
        x, y = np.array(pts).T
        b.loglog(x, y, "o", ms=3, label="samples (every game hour)")
        b.loglog(x, x * (y[-1] / x[-1]), ":", label="linear, through the last sample")
    b.set_xlabel("memories of perceptions written (mean per agent)")
    b.set_ylabel("long-term memories (mean per agent)")
    b.set_title("growth exponent " + ("n/a" if exponent is None else f"{exponent:.2f}"), fontsize=10)
    b.legend(fontsize=8)
    b.grid(alpha=0.3, which="both")
    fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def compare_plot(results: list[tuple[str, dict]], start_minute: int, out: Path, title: str | None = None) -> None:
    """One figure of several ``bench.memory_growth`` results (``(label, result JSON)``): left, short-term and
    long-term means per agent against game days; right, long-term against perception memories written
    (log-log), each labelled with its growth exponent."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 4.5))
    for n, (label, res) in enumerate(results):
        rows, color = res["samples"], f"C{n}"
        days = [(r["game_minute"] - start_minute) / DAY for r in rows]
        a.plot(days, [r["long_term"]["mean"] for r in rows], color=color, label=f"{label}: long-term (mean)")
        a.plot(days, [r["short_term"]["mean"] for r in rows], ":", color=color, label=f"{label}: short-term (mean)")
        pts = [(r["perceived"], r["long_term"]["mean"]) for r in rows
               if r["perceived"] > 0 and r["long_term"]["mean"] > 0]
        if pts:
            x, y = np.array(pts).T
            exp, later = res.get("growth_exponent"), res.get("growth_exponent_from_day2")
            b.loglog(x, y, "o", ms=3, color=color, label=f"{label} (exponent {'n/a' if exp is None else f'{exp:.2f}'}"
                     + ("" if later is None else f", from day 2 {later:.2f}") + ")")
            b.loglog(x, x * (y[-1] / x[-1]), ":", color=color, alpha=0.5)
    a.set_xlabel("game days run")
    a.set_ylabel("memories per agent")
    a.legend(fontsize=8, loc="upper left")
    a.grid(alpha=0.3)
    b.set_xlabel("memories of perceptions written (mean per agent)")
    b.set_ylabel("long-term memories (mean per agent)")
    b.set_title("dotted: linear through each last sample", fontsize=10)
    b.legend(fontsize=8)
    b.grid(alpha=0.3, which="both")
    agents = results[0][1]["agents"]
    fig.suptitle(title or f"Gullhaven, {agents} agents, scripted backend: memory growth of "
                 + ", ".join(label for label, _ in results), fontsize=11)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.memory_growth", description=__doc__.split("\n\n")[0])
    p.add_argument("--days", type=float, default=7, help="game days to run [%(default)s]")
    p.add_argument("--agents", type=int, default=25, help="residents [%(default)s]")
    p.add_argument("--budget-minutes", type=float, default=15, help="wall minutes of ticks at most [%(default)s]")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="config change, e.g. embedding.exact=false (batched embedding, faster; counts unchanged)")
    p.add_argument("--from", dest="source", default=None, help="a bench.scale JSON file to take the samples from")
    p.add_argument("--case", default="25x2", help="with --from: the case [%(default)s]")
    p.add_argument("--keep", default=None, metavar="DIR",
                   help="keep the run folder (trace, stores) under DIR, e.g. for python -m bench.growth_replay")
    p.add_argument("--out", default=str(RESULTS), help="JSON file [%(default)s]")
    p.add_argument("--plot", default=str(PLOT), help="PNG file [%(default)s]")
    p.add_argument("--compare", nargs="+", metavar="LABEL=FILE", default=None,
                   help="plot these result files together (no run), e.g. before=a.json after=b.json")
    p.add_argument("--title", default=None, help="with --compare: the figure's title")
    args = p.parse_args(argv)
    from simulacra.world.model import load_world

    start = load_world(ROOT / "worlds" / "gullhaven.yaml").start_minute
    if args.compare:
        pairs = [x.partition("=") for x in args.compare]
        if any(not sep for _, sep, _ in pairs):
            raise SystemExit("bench.memory_growth: --compare takes LABEL=FILE arguments")
        compare_plot([(label, json.loads(Path(f).read_text(encoding="utf-8"))) for label, _, f in pairs], start,
                     Path(args.plot), args.title)
        print(f"written {args.plot}")
        return 0
    if args.source:
        case = json.loads(Path(args.source).read_text(encoding="utf-8"))["cases"][args.case]
        origin = f"{args.source} case {args.case}"
    else:
        case = run_case(args.agents, int(args.days * DAY), sample=200, budget_s=60 * args.budget_minutes,
                        overrides=args.overrides, db=None if args.keep is None else Path(args.keep))
        origin = (f"run: {args.agents} agents, {args.days:g} game days planned, budget {args.budget_minutes:g} min"
                  + "".join(f", --set {o}" for o in args.overrides))
    rows = case["growth"]
    if not rows:
        raise SystemExit("bench.memory_growth: no samples (the run ended before its first game hour)")
    exponent = growth_exponent(rows)
    later = growth_exponent(rows, start + DAY)
    days = per_day(rows, start)
    result = {"origin": origin, "agents": case["agents"], "ticks": case["ticks"], "wall_s": case["wall_s"],
              "complete": case["complete"], "load_average": [round(x, 2) for x in os.getloadavg()],
              "growth_exponent": None if exponent is None else round(exponent, 3),
              "growth_exponent_from_day2": None if later is None else round(later, 3),
              "per_day": days, "kept": case.get("kept", []), "samples": rows}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    title = (f"Gullhaven, {case['agents']} agents, scripted backend: {days[-1]['days_run']:.2f} game days "
             f"({case['ticks']} ticks, {case['wall_s'] / 60:.0f} min wall)")
    plot(rows, start, exponent, title, Path(args.plot))
    print(f"{'days':>6} {'short':>7} {'st max':>7} {'long':>7} {'total':>7} {'perceived':>10} {'marginal':>9}")
    for d in days:
        marginal = "n/a" if d["marginal"] is None else f"{d['marginal']:.3f}"
        print(f"{d['days_run']:>6.2f} {d['short_term']:>7.1f} {d['short_term_max']:>7} {d['long_term']:>7.1f} "
              f"{d['total']:>7.1f} {d['perceived']:>10.1f} {marginal:>9}")
    print(f"growth exponent (long-term vs perceived): {'n/a' if exponent is None else f'{exponent:.2f}'}, "
          f"from day 2: {'n/a' if later is None else f'{later:.2f}'}")
    if result["kept"]:
        print(format_rows(result["kept"], ("world events", "world events rated >= 7", "rated >= 7")))
    print(f"written {args.out} and {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
