"""Cognition benchmark: model calls, tokens and tick wall time of the language-model mind over a whole game day.

Method: ``--agents`` residents (Fernhollow's ten, cloned under new names past ten, in a temporary world)
live ``--hours`` game hours with ``cognition.backend: llm`` against an OpenAI-compatible server on 127.0.0.1
that answers a valid instance of every requested schema after ``--latency`` seconds (the test double of
``tests/``, threaded, so concurrent calls overlap as with a real server). The rater stays offline so that the
figures are the mind's. Reported: calls and tokens per agent-game-hour (target: at most 5 calls; the Stanford
town made about 55), calls per decision kind, cache hits, and tick wall time (median, p90, max; target: median
under 3x one call's latency). Shorter runs measure two levers: decomposing one hour per call instead of
``plan_hours_per_call`` hours, and writing each conversation in one call (``cognition.exchange: whole``).
With ``--local-agents N`` (and the local-llm
extra installed) the same town runs N agents for ``--local-hours`` with the bundled SmolLM2 model.

Usage: ``python -m bench.cognition [--agents 25] [--hours 16] [--latency 0.5] [--local-agents 5]``.
Writes ``bench/results/cognition.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import yaml  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # tests.openai_double / tests.schema_answers

EXTRA_NAMES = ["Ada", "Bo", "Cora", "Dmitri", "Elin", "Farid", "Gwen", "Hugo", "Iris", "Jonas", "Kaia", "Lars",
               "Mira", "Nils", "Oona", "Pavel", "Quinn", "Rosa", "Sven", "Talia"]


def town(tmp: Path, n: int) -> Path:
    """A world file with Fernhollow's places and ``n`` residents (clones of the ten past ten, renamed, no
    relationships of their own); returns its path (personas in ``tmp/agent_personalities``)."""
    world = yaml.safe_load((ROOT / "worlds" / "fernhollow.yaml").read_text(encoding="utf-8"))
    src = ROOT / "agent_personalities"
    out = tmp / "agent_personalities"
    out.mkdir(parents=True, exist_ok=True)
    base = list(world["residents"])
    residents = []
    for i in range(n):
        pid = base[i % len(base)]
        data = json.loads((src / f"{pid}.json").read_text(encoding="utf-8"))
        if i >= len(base):
            first = EXTRA_NAMES[(i - len(base)) % len(EXTRA_NAMES)]
            surname = data["name"].split()[-1]
            data["name"] = f"{first} {surname}"
            data["relationships"] = {}
            pid = f"{first.lower()}_{surname.lower()}_{i}"
        else:
            data["relationships"] = {k: v for k, v in data["relationships"].items() if k in base[:n]}
        (out / f"{pid}.json").write_text(json.dumps(data), encoding="utf-8")
        residents.append(pid)
    world["residents"] = residents
    (tmp / "worlds").mkdir(exist_ok=True)
    path = tmp / "worlds" / "bench.yaml"
    path.write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return path


def sane_reaction(body, default):
    """A reaction the double may give: talk to the first person present, go to a place, or continue."""
    props = body["response_format"]["json_schema"]["schema"]["properties"]
    people = [p for p in props["person"]["enum"] if p != "none"]
    if default["decision"] == "talk" and not people:
        default["decision"] = "continue"
    if default["decision"] == "talk":
        default["person"] = people[0]
    if default["decision"] == "go" and default["place"] == "none":
        default["place"] = props["place"]["enum"][0]
    return default


def run_town(world: Path, db: Path, name: str, hours: float, overrides: list[str], personas_dir: Path | None = None,
             double=None) -> dict:
    """One run of ``hours`` game hours; ``personas_dir``: the world's own when ``None`` is given for a generated
    town (``town()``'s folder by default). With the server ``double``, each tick's calls are counted too."""
    from simulacra.config import load_config
    from simulacra.simulation import Simulation

    config = load_config(None, overrides)
    times: list[float] = []
    per_tick: list[int] = []
    setup_start = time.perf_counter()
    folder = world.parent.parent / "agent_personalities" if personas_dir is None else personas_dir
    with Simulation.create(world, config, personas_dir=folder, db_dir=db, run_name=name, overwrite=True) as sim:
        setup_s = time.perf_counter() - setup_start
        ticks = int(round(hours * 60 / sim.world.tick_minutes))
        t0 = time.perf_counter()
        last = [t0]

        seen = [len(double.requests) if double is not None else 0]

        def on_tick(_):
            now = time.perf_counter()
            times.append(now - last[0])
            last[0] = now
            if double is not None:
                per_tick.append(len(double.requests) - seen[0])
                seen[0] = len(double.requests)

        summary = sim.run(ticks, on_tick)
        wall = time.perf_counter() - t0
        if summary.get("stopped"):
            raise SystemExit(f"cognition bench: the run {name} stopped: {summary['stopped']}")
        mind = sim.rt.mind
        usage = dict(getattr(mind, "usage", {}))
        cache = getattr(mind, "model", None)
        hits = getattr(cache, "hits", 0)
        agents = len(sim.rt.agents)
    kinds = sorted({k.rsplit("_calls", 1)[0] for k in usage if k.endswith("_calls")})
    calls = sum(usage.get(f"{k}_calls", 0) for k in kinds)
    tokens = sum(v for k, v in usage.items() if k.endswith("_tokens"))
    history = summary["mind"].get("history", {})
    calls += history.get("summary_calls", 0)
    tokens += history.get("summary_prompt_tokens", 0) + history.get("summary_completion_tokens", 0)
    agent_hours = agents * hours
    return {
        "agents": agents, "game_hours": hours, "ticks": len(times), "wall_s": round(wall, 2),
        "calls": calls, "calls_per_agent_hour": round(calls / agent_hours, 3),
        "tokens_per_agent_hour": round(tokens / agent_hours, 1),
        "calls_by_kind": {k: usage.get(f"{k}_calls", 0) for k in kinds} | (
            {"history_summary": history.get("summary_calls", 0)} if history else {}),
        "cache_hits": hits, "fallbacks": summary["mind"]["fallbacks"],
        "tick_s": {"median": round(statistics.median(times), 3), "p90": round(sorted(times)[int(0.9 * len(times))], 3),
                   "max": round(max(times), 3)},
        "wall_s_per_game_hour": round(wall / hours, 2), "setup_s": round(setup_s, 1),
        "tick_s_each": [round(t, 2) for t in times], "server_calls_each_tick": per_tick,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--agents", type=int, default=25)
    ap.add_argument("--hours", type=float, default=16.0, help="game hours (07:00 to 23:00 is 16)")
    ap.add_argument("--latency", type=float, default=0.5, help="seconds the server takes per answer")
    ap.add_argument("--concurrency", type=int, default=25, help="llm.concurrency")
    ap.add_argument("--lever-hours", type=float, default=4.0, help="game hours of the one-hour-decomposition run")
    ap.add_argument("--local-agents", type=int, default=5, help="agents of the bundled-model run (0: skip)")
    ap.add_argument("--local-hours", type=float, default=1.0)
    ap.add_argument("--generated", type=int, default=0, metavar="N",
                    help="instead: a generated town of N residents (simulacra generate-town, seed 0) for --hours, "
                         "with the model and scripted side by side; writes bench/results/cognition_generated<N>.json")
    args = ap.parse_args()

    from rater_server import ThreadedServer, create_app
    from simulacra.embeddings import build_embedder
    from simulacra.rating.backends import EmbeddingRater
    from tests.openai_double import OpenAIDouble
    from tests.schema_answers import SchemaAnswers

    results: dict = {"latency_s": args.latency}
    rater = ThreadedServer(create_app(EmbeddingRater(build_embedder())),
                             "127.0.0.1", 0)
    double = OpenAIDouble()
    double.script([], then=SchemaAnswers(hooks={"reaction": sane_reaction}, delay_s=args.latency))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            world = town(Path(tmp), args.agents)
            common = [f"rater.url={rater.url}", "llm.model=bench-double", f"llm.base_url={double.url}",
                      f"llm.concurrency={args.concurrency}", "cognition.backend=llm"]
            if args.generated:
                return generated(args, Path(tmp), common, rater.url, double)
            print(f"cognition bench: {args.agents} agents x {args.hours} game hours, {args.latency} s per call ...",
                  file=sys.stderr)
            results["day"] = run_town(world, Path(tmp) / "db", "day", args.hours, common)
            print(json.dumps(results["day"], indent=1), file=sys.stderr)
            hours = args.lever_hours
            results["decompose_4h"] = run_town(world, Path(tmp) / "db", "h4", hours, common)
            results["decompose_1h"] = run_town(world, Path(tmp) / "db", "h1", hours,
                                               common + ["cognition.plan_hours_per_call=1"])
            results["exchange_whole"] = run_town(world, Path(tmp) / "db", "whole", hours,
                                                 common + ["cognition.exchange=whole"])
            if args.local_agents:
                try:
                    local = town(Path(tmp) / "local", args.local_agents)
                    results["local"] = run_town(local, Path(tmp) / "db", "local", args.local_hours,
                                                [f"rater.url={rater.url}", "llm.provider=local",
                                                 "cognition.backend=llm"])
                except Exception as err:  # noqa: BLE001 - the extra may be missing: say so, keep the rest
                    results["local"] = {"skipped": f"{type(err).__name__}: {err}"}
    finally:
        double.close()
        rater.close()
    day = results["day"]
    print(f"\n== cognition: {day['agents']} agents x {day['game_hours']} game hours, server latency "
          f"{args.latency * 1000:.0f} ms")
    print(f"calls per agent-game-hour   {day['calls_per_agent_hour']:.2f}   (target <= 5; Stanford town ~55) "
          f"ratio to target {day['calls_per_agent_hour'] / 5:.2f}")
    print(f"tokens per agent-game-hour  {day['tokens_per_agent_hour']:.0f}")
    print(f"calls by kind               {day['calls_by_kind']}  cache hits {day['cache_hits']}")
    t = day["tick_s"]
    print(f"tick wall time              median {t['median']:.2f} s, p90 {t['p90']:.2f} s, max {t['max']:.2f} s "
          f"(target median < {3 * args.latency:.2f} s: ratio {t['median'] / (3 * args.latency):.2f})")
    h4, h1 = results["decompose_4h"], results["decompose_1h"]
    print(f"decomposition lever over {hours:g} h: {h4['calls_by_kind'].get('next_actions', 0)} calls at "
          f"{4} h per call vs {h1['calls_by_kind'].get('next_actions', 0)} at 1 h per call")
    wh = results["exchange_whole"]
    per_conv = (h4["calls_by_kind"].get("line", 0) + h4["calls_by_kind"].get("summary", 0)) / max(
        1, h4["calls_by_kind"].get("summary", 0))
    print(f"exchange lever over {hours:g} h: {per_conv:.1f} calls per conversation line by line vs 1 whole; "
          f"calls per agent-hour {h4['calls_per_agent_hour']:.2f} vs {wh['calls_per_agent_hour']:.2f}, tick p90 "
          f"{h4['tick_s']['p90']:.2f} s vs {wh['tick_s']['p90']:.2f} s")
    if "local" in results:
        loc = results["local"]
        print("bundled SmolLM2: " + (loc["skipped"] if "skipped" in loc else
              f"{loc['agents']} agents, {loc['wall_s_per_game_hour']:.1f} s wall per game hour, "
              f"{loc['calls_per_agent_hour']:.2f} calls per agent-hour, fallbacks {loc['fallbacks']}"))
    out = ROOT / "bench" / "results" / "cognition.json"
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"\nwritten {out}")


def generated(args, tmp: Path, common: list[str], rater_url: str, double) -> None:
    """A generated town of ``args.generated`` residents for ``args.hours`` game hours: with the model (the double
    at ``args.latency`` s per answer, ``llm.concurrency`` ``args.concurrency``), then scripted (the same town's
    ticks without a model: what the tick costs besides the calls). Reports each tick's seconds and server calls
    against the floor the calls alone set, ``ceil(calls / concurrency) x latency``."""
    import math

    from simulacra.world.generate import write_town

    world, personas = write_town(tmp / "generated.yaml", args.generated, 0)
    print(f"cognition bench: generated town of {args.generated} residents x {args.hours} game hours, "
          f"{args.latency} s per call, llm.concurrency {args.concurrency} ...", file=sys.stderr)
    results: dict = {"residents": args.generated, "latency_s": args.latency, "concurrency": args.concurrency,
                     "machine": f"{os.cpu_count()} cores", "load_at_start": os.getloadavg()[0]}
    results["model"] = run_town(world, tmp / "db", "model", args.hours, common, personas_dir=personas,
                                double=double)
    results["scripted"] = run_town(world, tmp / "db", "scripted", args.hours, [f"rater.url={rater_url}"],
                                   personas_dir=personas)
    results["load_at_end"] = os.getloadavg()[0]
    m, sc = results["model"], results["scripted"]
    print(f"\n== {args.generated} residents, server latency {args.latency * 1000:.0f} ms, llm.concurrency "
          f"{args.concurrency} (set-up: model {m['setup_s']:.0f} s, scripted {sc['setup_s']:.0f} s)")
    print("tick  calls  calls floor s  model tick s  scripted tick s  model - scripted s  x latency")
    for i, (t, c, ts) in enumerate(zip(m["tick_s_each"], m["server_calls_each_tick"], sc["tick_s_each"])):
        floor = math.ceil(c / args.concurrency) * args.latency
        print(f"{i:4d}  {c:5d}  {floor:13.1f}  {t:12.1f}  {ts:15.1f}  {t - ts:18.1f}  {t / args.latency:9.1f}")
    out = ROOT / "bench" / "results" / f"cognition_generated{args.generated}.json"
    out.write_text(json.dumps(results, indent=2), encoding="utf-8")
    print(f"\nwritten {out}")


if __name__ == "__main__":
    main()
