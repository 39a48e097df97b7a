"""Retrieval quality on the generated labelled queries: the tables of ``docs/tuning.md``.

For every ``data/queries/*.yaml`` whose ``run:`` folder exists under ``--db-dir`` (make the runs first, see
``docs/tuning.md``), prepares the queries (:func:`simulacra.tune.prepare`), searches ``--grid`` on the train split
(:func:`simulacra.tune.tune`) and prints, on the held-out split: seed003, the shipped defaults, the best setting of
each relevance variant and the tuned best; per query category (said, who, when, plan) for seed003, the defaults and
the tuned best; and the same with the memories' game day and time put in their embedded text (``--embed-time``,
:func:`simulacra.tune.timed_text`), for the settings found without it. Writes
``bench/results/retrieval_quality.json`` and, with ``--plot``, the bar chart of :func:`simulacra.tune.plot_metrics`.

Usage: ``python -m bench.retrieval_quality [--db-dir database] [--grid options] [--plot docs/tuning-metrics.png]
[--third-person on|off]``
"""

from __future__ import annotations

import argparse
import json
import os
from dataclasses import replace
from pathlib import Path

from bench import add_query_options, query_choices

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def figures(r) -> dict:
    return {"recall": round(r.recall, 3), "mrr": round(r.mrr, 3), "ndcg": round(r.ndcg, 3)}


def main() -> None:
    import yaml

    from simulacra import tune as t
    from simulacra.embeddings import build_embedder
    from simulacra.errors import SimulacraError

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db-dir", default="database")
    ap.add_argument("--queries", default="data/queries")
    ap.add_argument("--grid", default="options", help="a grid of simulacra.tune.GRIDS, or 'baselines' (no search)")
    ap.add_argument("--plot", default=None)
    ap.add_argument("--no-embed-time", action="store_true", help="skip the day-and-time-in-the-text experiment")
    add_query_options(ap)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "retrieval_quality.json"))
    args = ap.parse_args()

    choices = query_choices(args)
    pairs = []
    for qfile in sorted(Path(args.queries).glob("*.yaml")):
        run = (yaml.safe_load(qfile.read_text(encoding="utf-8")) or {}).get("run")
        if run and (Path(args.db_dir) / run / "trace.jsonl").is_file():
            pairs.append((Path(args.db_dir) / run, qfile))
    if not pairs:
        raise SystemExit(f"no query file of {args.queries} has its run under {args.db_dir}")
    embedder = None
    prepared: dict[bool, list] = {False: [], True: []}
    run_memory = None
    for timed in (False, True) if not args.no_embed_time else (False,):
        for run_dir, qfile in pairs:
            info = t.read_run(run_dir)
            run_memory = run_memory or info.config.memory
            if embedder is None:
                emb = info.config.embedding
                embedder = build_embedder(emb)
            queries = t.load_queries(qfile, info.start_minute)
            try:
                prepared[timed] += t.prepare(run_dir, queries, embedder, qfile, run=info, embed_time=timed,
                                             **choices)
            except SimulacraError as err:  # a file that does not fit its run (or an unfinished run): said, not scored
                print(f"skipped {qfile}: {err}")
    if args.grid == "baselines":  # no search: the baselines and the defaults under each relevance variant
        d = t.baseline_settings()["defaults"]
        settings = [d, t.baseline_settings()["seed003"], replace(d, relevance="lexical"),
                    replace(d, relevance="hybrid", hybrid_weight=0.5), replace(d, normalize="minmax")]
    else:
        settings = t.grid_settings(args.grid)
    out: dict = {"runs": [str(r) for r, _ in pairs], "grid": args.grid, "settings": len(settings),
                 "third_person": args.third_person or "as each run",
                 "speech_roles": args.speech_roles or "as each run"}
    base = t.baseline_settings()
    best = None
    for timed, prep in prepared.items():
        if not prep:
            continue
        if timed:  # the same settings as without the time (the best of each variant searched there), not a search
            report = t.tune(prep, [best.best.setting] + [r.setting for r, _ in best.by_relevance.values()],
                            run_memory)
        else:
            report = best = t.tune(prep, settings, run_memory)
        held = [pq for pq in prep if pq.query.split == "heldout"]
        n_train = sum(1 for pq in prep if pq.query.split == "train" and pq.relevant)
        n_held = sum(1 for pq in held if pq.relevant)
        rows = {"seed003": report.heldout["seed003"], "defaults": report.heldout["defaults"]}
        # the shipped retrieval profile of recalling (interviews, conversations, plans): memory.profiles.recall
        recall = t.baseline_settings(profile="recall")["defaults"]
        rows["defaults, recall profile"] = t.evaluate(held, [recall], run_memory)[0]
        rows.update({f"best {k}": h for k, (_, h) in report.by_relevance.items()})
        rows["tuned"] = report.heldout["best"]
        cats = {name: {c: figures(r) for c, r in t.by_category(held, s, run_memory).items()}
                for name, s in (("seed003", base["seed003"]), ("defaults", base["defaults"]),
                                ("defaults, recall profile", recall), ("tuned", report.best.setting))}
        key = "embed_time" if timed else "plain"
        out[key] = {"train_queries": n_train, "heldout_queries": n_held, "best": report.best.setting.label(),
                    "best_memory": report.best.setting.memory_dict(),
                    "heldout": {k: figures(r) for k, r in rows.items()},
                    "train": {"tuned": figures(report.best), **{k: figures(r) for k, r in report.baselines.items()}},
                    "settings_by_variant": {k: r.setting.label() for k, (r, _) in report.by_relevance.items()},
                    "heldout_by_category": cats}
        print(f"\n== {key}: {len(prep)} queries ({n_train} train, {n_held} held-out with a findable memory), "
              f"{len(settings)} settings; best: {report.best.setting.label()}")
        print(f"{'held-out':<24} {'recall':>6} {'MRR':>6} {'nDCG':>6}")
        for k, r in rows.items():
            print(f"{k:<24} {r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:6.3f}")
        for name, by in cats.items():
            print(f"{name:<10} " + "  ".join(f"{c} {v['ndcg']:.3f}" for c, v in by.items()) + "  (nDCG by category)")
        if args.plot and not timed:
            extra = {"recall profile": rows["defaults, recall profile"]}
            print(f"plot -> {t.plot_metrics(report, args.plot, extra)}")
    p = Path(args.out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(out, indent=2) + "\n")
    print(f"written to {p}")


if __name__ == "__main__":
    main()
