"""The 30-day recall test (issue 22 §2 and §3): ``scenarios/gullhaven-recall-30.yaml`` run with the nightly summaries
and without them, side by side, scored by :mod:`simulacra.evaluation.recall`.

Each variant runs in a child process (its peak RSS its own) with an in-process offline rater on a free port of
127.0.0.1 and batched embedding (``embedding.exact=false``, as ``bench.scale``'s larger cases). Reported per
variant: wall time (set-up and ticks), ticks per second, peak RSS, the trace's and the stores' size, memories per
agent at each probe, and the recall figures: per retrieval profile and kind (fact, event, plan), the share of what
residents knew that retrieval found, by the item's age, and the share the answer stated. The machine's 1-minute
load average is sampled every 30 s.

Variants: ``summary`` (the defaults: nightly summaries on), ``no-summary`` (``memory.day_summary=false``); ``--set``
applies to both. ``--days N`` shortens the scenario to N game days (its probes and tellings after that dropped),
``--agents N`` simulates the tellings' holders and the first others of the world up to N residents; ``--llm local``
thinks and answers with the bundled SmolLM2 (the offline rater rates: the model rates too weakly, docs/llm.md).
A variant whose run folder holds an unfinished run is resumed (``--resume``), so a long run survives a kill. A
variant whose process dies by a signal (chromadb 1.5.9's native code once segfaulted at tick ~4,100 of 4,269, note
48) is resumed from its last checkpoint, at most twice, with a line on stderr (``bench.scale.run_resuming``); the
result's ``resumed_after_signals`` lists the signals, and its ``setup_s`` / ``ticks_s`` are then the last process's
alone, not a whole run's. The trace does not depend on it (a resumed run is identical, ``tests/test_resume.py``).

Writes ``bench/results/recall.json`` (``--out``) and the plot ``docs/memory-recall.png`` (``--plot``; ``--plot ''``:
none).

Usage: ``python -m bench.recall [--days 30] [--variants summary,no-summary] [--db-dir /tmp/recall] [--resume]``;
``python -m bench.recall --markdown bench/results/recall.json`` prints the tables of ``docs/memory.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench.scale import ROOT, dir_bytes, free_port, load_summary, run_resuming  # noqa: E402

SCENARIO = ROOT / "scenarios" / "gullhaven-recall-30.yaml"
RESULTS = ROOT / "bench" / "results" / "recall.json"
PLOT = ROOT / "docs" / "memory-recall.png"
VARIANTS = {"summary": (), "no-summary": ("memory.day_summary=false",)}


def shortened(sc, days: int | None, agents: int | None):
    """``sc`` cut to ``days`` game days (ending at 22:00 of the last; later probes and tellings dropped) and to
    ``agents`` residents (the facts' holders first, then the world's order; a fact told to none of them dropped)."""
    from simulacra.evaluation.scenario import Moment
    from simulacra.world import load_world

    update = {}
    if days is not None:
        until = Moment(day=days, time="22:00")
        facts = [f for f in sc.facts if f.told_at is None or f.told_at.minute < until.minute]
        recall = sc.recall.model_copy(update={"at": [m for m in sc.recall.at if m.minute < until.minute],
                                              "plan_days": [d for d in sc.recall.plan_days if d < days]})
        update.update(until=until, facts=facts, recall=recall)
    if agents is not None:
        world = load_world(sc.world_path)
        facts = update.get("facts", sc.facts)
        holders = list(dict.fromkeys(h for f in facts for h in f.holders))
        chosen = (holders + [p for p in world.personas if p not in holders])[:agents]
        # a fact keeps the holders simulated; one told to nobody simulated is dropped (a control fact stays)
        kept = [f.model_copy(update={"holders": [h for h in f.holders if h in chosen]}) for f in facts]
        update.update(agents=chosen, facts=[f for f, old in zip(kept, facts) if f.holders or not old.holders])
    out = sc.model_copy(update=update)
    out.source, out.world_path = sc.source, sc.world_path
    return out


def run_one(variant: str, args) -> dict:
    """Run (or resume) one variant in this process; its figures."""
    from simulacra.checkpoint import read_checkpoint
    from simulacra.config import load_config
    from simulacra.embeddings import build_embedder
    from simulacra.errors import CheckpointError
    from simulacra.evaluation.metrics import Similarity
    from simulacra.evaluation.recall import Scan, recall_metrics
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.setup import start_run
    from simulacra.evaluation.variants import variant as full
    from simulacra.simulation import Simulation

    sc = shortened(load_scenario(args.scenario), args.days, args.agents)
    overrides = [f"rater.url=http://127.0.0.1:{free_port()}/rate", "embedding.exact=false", *VARIANTS[variant],
                 *args.overrides]
    if args.llm == "local":
        overrides += ["llm.provider=local", "rater.on_weak_model=offline"]
    config = load_config(None, overrides)
    embedder = build_embedder(config.embedding)
    embedder.embed(["warm-up"])
    db = Path(args.db_dir)
    run_dir = db / variant
    t0 = time.perf_counter()
    sim = None
    if args.resume and (run_dir / "checkpoint.json").is_file():
        try:
            read_checkpoint(run_dir)
            sim = Simulation.resume(run_dir, embedder=embedder, rater_url=config.rater.url)
        except CheckpointError as err:
            print(f"bench.recall: {variant}: cannot resume ({err}); starting again", file=sys.stderr)
    if sim is None:
        sim, ticks = start_run(sc, config, full("full"), db, variant, embedder)
        total = ticks
    else:
        total = max(1, (sc.end_minute(sim.world.start_minute) - sim.world.start_minute) // sim.world.tick_minutes)
    setup_s = time.perf_counter() - t0
    per_day = 1440 // sim.world.tick_minutes
    t1 = time.perf_counter()

    def progress(result) -> None:
        if (sim.ticks_done % per_day) == 0:
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"bench.recall: {variant}: {sim.ticks_done}/{total} ticks, {time.perf_counter() - t1:.0f} s, "
                  f"peak RSS {rss:.0f} MB", file=sys.stderr, flush=True)

    with sim:
        summary = sim.run(total - sim.ticks_done, progress)
    ticks_s = time.perf_counter() - t1
    if summary.get("stopped"):
        raise SystemExit(f"bench.recall: {variant}: the run stopped: {summary['stopped']}")
    t2 = time.perf_counter()
    scan = Scan.load(run_dir)
    metrics = recall_metrics(scan, sc, Similarity(embedder))
    score_s = time.perf_counter() - t2
    trace = run_dir / "trace.jsonl"
    n = len(sim.rt.agents)
    return {"variant": variant, "settings": overrides[1:], "agents": n, "days": args.days or 30,
            "ticks": summary["ticks"], "setup_s": round(setup_s, 1), "ticks_s": round(ticks_s, 1),
            "ticks_per_s": round(summary["ticks"] / max(ticks_s, 1e-9), 3), "score_s": round(score_s, 1),
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "trace_mb": round(trace.stat().st_size / 2**20, 1),
            "store_mb_per_agent": round((dir_bytes(run_dir) - trace.stat().st_size) / 2**20 / n, 2),
            "recall": metrics}


def table(results: dict[str, dict]) -> str:
    """The side-by-side summary printed at the end."""
    lines = []
    for name, r in results.items():
        m = r["recall"]
        mem = m["memories_per_agent"][-1] if m["memories_per_agent"] else {}
        lines.append(f"{name}: {r['agents']} agents x {r['days']} days, {r['ticks']} ticks in {r['ticks_s']:.0f} s "
                     f"(set-up {r['setup_s']:.0f} s), peak RSS {r['peak_rss_mb']:.0f} MB, trace {r['trace_mb']} MB, "
                     f"stores {r['store_mb_per_agent']} MB/agent; memories per agent at the last probe: "
                     f"{mem.get('total')} ({mem.get('long_term')} long-term)")
        for p in m["profiles"]:
            lines.append(f"  {p:>14}: " + ", ".join(f"{k} {v:.0%}" if v is not None else f"{k} -"
                                                      for k, v in m["overall"][p].items()))
        for kind in ("fact", "event", "plan"):
            row = m["by_age"][m["interview"]][kind]
            lines.append(f"  {m['interview']} {kind} by age: " + ", ".join(
                f"{b} d {c['found']:.0%} ({c['asked']})" for b, c in row.items() if c["found"] is not None))
    return "\n".join(lines)


def model_answers(args) -> int:
    """The bundled model answers questions of the last probe of the finished run ``--db-dir/<--variants' first>``:
    a seeded sample of ``--sample`` asks per kind (fact, event, plan) of residents who knew the item, each put as
    ``simulacra interview`` puts it at the run's end (the interview's retrieval on the stores as the run left them,
    the mind's interview prompt) and judged as the probes' answers are (:func:`simulacra.evaluation.recall.rows`);
    beside it, the scripted answers the run recorded for the same asks. Adds ``model_answers`` to ``--out``."""
    import random

    from simulacra.config import config_from_dict, load_config, recorded_config
    from simulacra.embeddings import build_embedder
    from simulacra.evaluation.metrics import Similarity
    from simulacra.evaluation.recall import Scan, rows
    from simulacra.evaluation.report import interview_mind
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.interview import interview

    name = args.variants.split(",")[0]
    run_dir = Path(args.db_dir) / name
    sc = shortened(load_scenario(args.scenario), args.days, args.agents)
    scan = Scan.load(run_dir)
    config = config_from_dict(recorded_config(scan.header["config"]), f"{run_dir} header")
    embedder = build_embedder(config.embedding)
    sim = Similarity(embedder)
    last = scan.probes[-1]
    table = rows(Scan(scan.header, scan.ticks, [last], scan.events_seen, scan.plans, scan.texts, scan.evidence),
                 sc, sim)
    rng = random.Random(args.seed)
    chosen = []
    for kind in ("fact", "event", "plan"):
        known = [i for i, r in enumerate(table) if r["known"] and r["kind"] == kind
                 and (kind != "event" or (r["rating"] or 0) >= 6)]
        chosen += sorted(rng.sample(known, min(args.sample, len(known))))
    asks = last["asks"]
    mind, closers = interview_mind(load_config(None, ["llm.provider=local", "cognition.backend=llm"]), run_dir)
    t0 = time.perf_counter()
    answered = []
    try:
        for i in chosen:
            r = table[i]
            ask = next(a for a in asks if a["agent"] == r["agent"] and a["about"] == r["about"])
            got = interview(run_dir, r["agent"], ask["query"], embedder=embedder, mind=mind,
                            trace=(scan.header, [scan.last_tick]))
            answered.append({**ask, "answer": got["answer"], "answer_source": got["source"],
                             "answer_ids": [m["id"] for m in got["used"]], "scripted": ask.get("answer")})
            print(f"bench.recall: {len(answered)}/{len(chosen)} {r['agent']} {r['about']}: {got['answer'][:100]!r}",
                  file=sys.stderr, flush=True)
    finally:
        for c in reversed(closers):
            c()
    seconds = time.perf_counter() - t0
    probe = {**last, "asks": answered}
    model = rows(Scan(scan.header, scan.ticks, [probe], scan.events_seen, scan.plans, scan.texts, scan.evidence),
                 sc, sim)
    scripted = [table[i] for i in chosen]
    sources = [a["answer_source"] for a in answered]
    out = {"variant": name, "time": last["time"], "asked": len(chosen), "seconds": round(seconds, 1),
           "sources": {s: sources.count(s) for s in sorted(set(sources))},
           "by_kind": {k: {"asked": sum(r["kind"] == k for r in model),
                           # over the answers the model gave (an unusable one falls back to the scripted mind's)
                           "model_answered": sum(r["kind"] == k and s == "llm" for r, s in zip(model, sources)),
                           "model_states_it": _share_of([r["answered"] for r, s in zip(model, sources)
                                                         if r["kind"] == k and s == "llm"]),
                           "scripted_states_it": _share_of([r["answered"] for r in scripted if r["kind"] == k]),
                           "retrieval_found_it": _share_of([r["found"][last["interview"]] for r in scripted
                                                            if r["kind"] == k])}
                       for k in ("fact", "event", "plan")},
           "answers": [{k: a[k] for k in ("agent", "about", "query", "answer", "answer_source", "scripted")}
                       for a in answered]}
    path = Path(args.out)
    data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"results": {}}
    data["model_answers"] = out
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k != "answers"}, indent=1))
    return 0


def _share_of(xs) -> float | None:
    return round(sum(bool(x) for x in xs) / len(xs), 3) if xs else None


def score_again(args) -> int:
    """Score the finished runs of ``--out``'s results again from their traces under ``--db-dir`` (run figures kept)."""
    from simulacra.embeddings import build_embedder
    from simulacra.evaluation.metrics import Similarity
    from simulacra.evaluation.recall import Scan, recall_metrics
    from simulacra.evaluation.scenario import load_scenario

    out = Path(args.out)
    data = json.loads(out.read_text(encoding="utf-8"))
    sc = shortened(load_scenario(args.scenario), args.days, args.agents)
    sim = Similarity(build_embedder())
    for name, r in data["results"].items():
        r["recall"] = recall_metrics(Scan.load(Path(args.db_dir) / name), sc, sim)
    out.write_text(json.dumps(data, indent=1), encoding="utf-8")
    print(table(data["results"]))
    return 0


def markdown(results: dict[str, dict]) -> str:
    """The tables of ``docs/memory.md``: per variant and profile, the share found by kind, and by age for the facts
    and events together and for the plans; the cost of each variant."""
    from simulacra.evaluation.recall import AGE_BUCKETS

    buckets = [f"{lo:g}-{hi:g}" for lo, hi in AGE_BUCKETS]
    out = ["| variant | profile | facts | events | plan of day 4 | facts + events by age (game days): "
           + " / ".join(buckets) + " | plan by age |", "|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        m = r["recall"]
        for p in m["profiles"]:
            ages = []
            for b in buckets:
                cells = [m["by_age"][p][k].get(b) for k in ("fact", "event")]
                asked = sum(c["asked"] for c in cells if c)
                found = sum(c["asked"] * (c["found"] or 0) for c in cells if c)
                ages.append(f"{found / asked:.0%}" if asked else "-")
            plan = [f"{m['by_age'][p]['plan'][b]['found']:.0%}" if b in m["by_age"][p]["plan"] else "-"
                    for b in buckets]
            o = m["overall"][p]
            out.append(f"| {name} | {p} | {_pc(o['fact'])} | {_pc(o['event'])} | {_pc(o['plan'])} | "
                       + " / ".join(ages) + " | " + " / ".join(plan) + " |")
    out += ["", "| variant | ticks | wall s (set-up + ticks) | load avg (mean, max) | peak RSS MB | trace MB | "
            "stores MB/agent | memories per agent at days 2 / 8 / 16 / 30 (long-term) |",
            "|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        mem = {x["day"]: x for x in r["recall"]["memories_per_agent"]}
        days = " / ".join(f"{mem[d]['total']:.0f} ({mem[d].get('long_term', 0):.0f})" if d in mem else "-"
                          for d in (2, 8, 16, 30))
        load = r.get("load_avg_1min") or {}
        died = r.get("resumed_after_signals") or []
        resumed = f"; the last process's, resumed after signal {', '.join(map(str, died))}" if died else ""
        out.append(f"| {name} | {r['ticks']} | {r['setup_s'] + r['ticks_s']:.0f} ({r['setup_s']:.0f} + "
                   f"{r['ticks_s']:.0f}{resumed}) | {load.get('mean', '-')}, {load.get('max', '-')} | "
                   f"{r['peak_rss_mb']:.0f} | "
                   f"{r['trace_mb']:.0f} | {r['store_mb_per_agent']} | {days} |")
    return "\n".join(out)


def _pc(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", default=str(SCENARIO))
    ap.add_argument("--days", type=int, default=None, help="game days to run [the scenario's 30]")
    ap.add_argument("--agents", type=int, default=None, help="residents simulated [all 25]")
    ap.add_argument("--variants", default=",".join(VARIANTS), help=f"of {', '.join(VARIANTS)}")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE")
    ap.add_argument("--llm", choices=["local"], default=None)
    ap.add_argument("--db-dir", default=str(ROOT / "database" / "recall"))
    ap.add_argument("--resume", action="store_true", help="resume a variant's unfinished run")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--plot", default=str(PLOT))
    ap.add_argument("--markdown", default=None, metavar="RESULTS.json", help="print the docs' tables of a result")
    ap.add_argument("--model-answers", action="store_true",
                    help="the bundled model answers a sample of the last probe's questions of the finished run of "
                         "--db-dir/<first of --variants>")
    ap.add_argument("--sample", type=int, default=20, help="with --model-answers: asks per kind [%(default)s]")
    ap.add_argument("--seed", type=int, default=0, help="with --model-answers: seed of the sample [%(default)s]")
    ap.add_argument("--score-only", action="store_true",
                    help="score the finished runs under --db-dir again (this code's scoring) into --out's results")
    ap.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child: run this variant, print its JSON
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown(json.loads(Path(args.markdown).read_text(encoding="utf-8"))["results"]))
        return 0
    if args.score_only:
        return score_again(args)
    if args.model_answers:
        return model_answers(args)
    if args.one:
        print(json.dumps(run_one(args.one, args)))
        return 0
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in names:
        if v not in VARIANTS:
            raise SystemExit(f"bench.recall: unknown variant {v!r}; expected one of {', '.join(VARIANTS)}")
    given = list(argv if argv is not None else sys.argv[1:])
    passed = []  # the child's arguments: ours but --variants
    skip = False
    for a in given:
        if skip:
            skip = False
        elif a == "--variants":
            skip = True
        elif not a.startswith("--variants="):
            passed.append(a)
    results = {}
    for v in names:
        cmd = [sys.executable, "-m", "bench.recall", *passed, "--one", v]
        stdout, stderr, code, loads, signals = run_resuming(cmd, [] if args.resume else ["--resume"],
                                                            label=f"bench.recall: variant {v}")
        sys.stderr.write(stderr[-4000:] if code else "")
        if code:
            raise SystemExit(f"bench.recall: variant {v} failed (exit {code})")
        results[v] = {**json.loads(stdout.strip().splitlines()[-1]), "load_avg_1min": load_summary(loads),
                      "resumed_after_signals": signals}
        print(table({v: results[v]}), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"scenario": args.scenario, "results": results}, indent=1), encoding="utf-8")
    if args.plot:
        from simulacra.evaluation.recall import plot_recall

        plot_recall({f"{v}": r["recall"] for v, r in results.items()}, args.plot, profiles=["situational", "recall"])
    print(table(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
