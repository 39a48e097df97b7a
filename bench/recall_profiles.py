"""Candidate recall profiles side by side on labelled queries of both horizons (issue 22 §1; ``docs/memory.md``,
"Long horizons"): the shipped situational weights, the shipped recall profile (with its ``dated`` switch: a query
that names a time is scored by the dated profile, recency from that time; and its ``latest`` switch: a query that
asks for the latest is scored by the latest profile), the recall profile without the switches, and the settings
around it, each with the shipped switches; ``--dated-grid`` adds the recall profile with other dated settings,
``--latest-grid`` with other latest settings.

Give one or more ``QUERIES:DB`` pairs: a folder of query files and the folder holding their runs (``run:`` of each
file). The one-/two-day labels are ``simulacra.labels`` files of the runs of ``docs/tuning.md``; the long-horizon
ones come from a finished ``bench.recall`` run (``python -m simulacra.evaluation.recall RUN SCENARIO --out F``:
the last probe's questions, expecting every stored memory that holds the item). Prints and writes, per pair and
setting, recall@k / MRR / nDCG@k over all queries with a findable memory, the held-out ones, the train ones,
the ones that name a time and the ones that ask for the latest (train and held-out), and nDCG@k per category
(``simulacra.tune``'s metrics and selection, which switch per query as the engine does).

Usage: ``python -m bench.recall_profiles data/queries:database /tmp/lh:database/recall [--out FILE]``
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

RESULTS = Path(__file__).parent / "results" / "recall_profiles.json"


def candidates(dated_grid: bool = False, latest_grid: bool = False):
    """Name -> :class:`simulacra.tune.Setting`: the shipped two, the recall profile without its dated switch, the
    settings around the recall profile (each with the shipped dated switch) and, with ``dated_grid``, the shipped
    recall profile with other dated settings (``a_rec`` / ``gamma`` / recency window)."""
    from simulacra import tune as t
    from simulacra.config import MemoryConfig

    d = t.baseline_settings()["defaults"]
    recall = t.baseline_settings(profile="recall")["defaults"]
    dated, latest = recall.dated, recall.latest
    out = {"situational (shipped)": d, "recall (shipped)": recall,
           "recall, no time cue": replace(recall, dated=None, latest=None),
           "recall, no latest switch": replace(recall, latest=None),
           "recall, latest as dated (stop 37)": replace(recall, latest=dated)}
    for name, s in {"a_rec 0, a_imp 0": replace(d, a_rec=0, a_imp=0), "a_rec 0, a_imp 0.25": replace(d, a_rec=0),
                    "a_rec 0.05, a_imp 0.25": replace(d, a_rec=0.05), "a_rec 0.1, a_imp 0.25": replace(d, a_rec=0.1),
                    "a_rec 0, a_imp 0, dense": replace(d, a_rec=0, a_imp=0, relevance="dense"),
                    "a_rec 0, a_imp 0, hybrid 0.5": replace(d, a_rec=0, a_imp=0, hybrid_weight=0.5),
                    "a_rec 0, a_imp 0.1, minmax": replace(d, a_rec=0, a_imp=0.1, normalize="minmax")}.items():
        out[name + " + dated"] = replace(s, dated=dated, latest=latest)
    if dated_grid:
        window = MemoryConfig().recency_window_minutes
        for a_rec in (0.25, 0.5, 1.0):
            for gamma in (0.99, 0.9, 0.5, 0.25):
                for w in (window, 30.0, 10.0):
                    out[f"recall + dated {a_rec:g} / {gamma:g} / {w:g}"] = replace(
                        recall, dated=replace(dated, a_rec=a_rec, gamma=gamma, recency_window_minutes=w))
    if latest_grid:
        for a_rec in (0.05, 0.1, 0.25, 0.5):
            for gamma in (0.99, 0.9, 0.5, 0.25):
                out[f"recall + latest {a_rec:g} / {gamma:g}"] = replace(recall, latest=replace(latest, a_rec=a_rec,
                                                                                               gamma=gamma))
    return out


def measure(qdir: Path, db: Path, embedder, dated_grid: bool = False, latest_grid: bool = False,
            third_person: bool | None = None, speech_roles: bool | None = None) -> dict:
    """Every candidate on the query files of ``qdir`` whose run is under ``db``; ``third_person``: whether the
    queries are put in the third person (``memory.third_person_queries``), ``speech_roles``: whether a query that
    names who spoke or who listened leaves out the lines said the other way (``memory.speech_roles``; ``None``:
    as each run was made). With speech roles on, the shipped recall profile is also measured without them."""
    import yaml

    from simulacra import tune as t

    prepared, run_memory = [], None
    for qfile in sorted(qdir.glob("*.yaml")):
        run = (yaml.safe_load(qfile.read_text(encoding="utf-8")) or {}).get("run")
        if not run or not (db / run / "trace.jsonl").is_file():
            continue
        info = t.read_run(db / run)
        run_memory = run_memory or info.config.memory
        prepared += t.prepare(db / run, t.load_queries(qfile, info.start_minute), embedder, qfile, run=info,
                              third_person=third_person, speech_roles=speech_roles)
    scored = [p for p in prepared if p.relevant]
    held = [p for p in scored if p.query.split == "heldout"]
    if not held:
        raise SystemExit(f"bench.recall_profiles: no held-out query with a findable memory in {qdir} over {db}")
    named = [p for p in scored if p.named is not None]
    latest = [p for p in scored if p.latest]
    out = {"queries": len(scored), "heldout": len(held), "named_time": len(named),
           "named_time_heldout": sum(p.query.split == "heldout" for p in named), "latest": len(latest),
           "latest_heldout": sum(p.query.split == "heldout" for p in latest), "settings": {}}

    def figures(s, queries):
        r = t.evaluate(queries, [s], run_memory)[0] if queries else None
        return None if r is None else [round(r.recall, 3), round(r.mrr, 3), round(r.ndcg, 3)]

    def row(s, scored):
        held = [p for p in scored if p.query.split == "heldout"]
        train = [p for p in scored if p.query.split != "heldout"]
        latest = [p for p in scored if p.latest]
        return {"all": figures(s, scored), "heldout": figures(s, held), "train": figures(s, train),
                "named_time": figures(s, [p for p in scored if p.named is not None]),
                "latest_train": figures(s, [p for p in latest if p.query.split != "heldout"]),
                "latest_heldout": figures(s, [p for p in latest if p.query.split == "heldout"]),
                "ndcg_by_category": {c: round(r.ndcg, 3) for c, r in t.by_category(scored, s, run_memory).items()}}

    settings = candidates(dated_grid, latest_grid)
    for name, s in settings.items():
        out["settings"][name] = row(s, scored)
    if any(tier.left_out is not None for p in scored for tier in p.tiers):  # the lines said the other way kept
        kept = [replace(p, tiers=[replace(tier, left_out=None) for tier in p.tiers]) for p in scored]
        out["settings"]["recall (shipped), no speech roles"] = row(settings["recall (shipped)"], kept)
    return out


def stem_words() -> None:
    """Make ``bm25s.tokenize`` stem every word it returns, for this process (the lexical index and the queries
    both tokenise through it: :func:`simulacra.memory.lexical.tokenize`)."""
    import bm25s

    try:
        import Stemmer
    except ImportError:
        raise SystemExit("bench.recall_profiles --stemmer: pip install PyStemmer") from None
    plain, stemmer = bm25s.tokenize, Stemmer.Stemmer("english")

    def stemmed(texts, **kw):
        return plain(texts, stemmer=stemmer, **kw)

    bm25s.tokenize = stemmed


def main(argv: list[str] | None = None) -> int:
    from simulacra.embeddings import build_embedder

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", metavar="QUERIES:DB")
    ap.add_argument("--out", default=str(RESULTS))
    ap.add_argument("--dated-grid", action="store_true", help="also the shipped recall profile with other dated "
                    "settings (a_rec 0.25 / 0.5 / 1, gamma 0.99 / 0.9 / 0.5 / 0.25, window 60 / 30 / 10)")
    ap.add_argument("--latest-grid", action="store_true", help="also the shipped recall profile with other latest "
                    "settings (a_rec 0.05 / 0.1 / 0.25 / 0.5, gamma 0.99 / 0.9 / 0.5 / 0.25)")
    ap.add_argument("--stemmer", action="store_true", help="BM25 over stemmed words (PyStemmer's Snowball English, "
                    "pip install PyStemmer): what the lexical relevance would score with a stemming tokeniser")
    add_query_options(ap)
    args = ap.parse_args(argv)
    choices = query_choices(args)
    if args.stemmer:
        stem_words()
    embedder = build_embedder()
    results = {}
    for pair in args.pairs:
        qdir, _, db = pair.partition(":")
        r = results[pair] = measure(Path(qdir), Path(db or "database"), embedder, args.dated_grid, args.latest_grid,
                                    **choices)
        print(f"\n== {pair}: {r['queries']} queries with a findable memory, {r['heldout']} held out, "
              f"{r['named_time']} name a time, {r['latest']} ask for the latest ({r['latest_heldout']} held out)")
        print(f"{'setting':<40} {'all: recall / MRR / nDCG':>26} {'held-out':>22} {'naming a time':>22} "
              f"{'latest: train / held-out nDCG':>30}   nDCG by category")
        for name, x in r["settings"].items():
            cats = "  ".join(f"{c} {v:.3f}" for c, v in x["ndcg_by_category"].items())
            timed = " / ".join(f"{v:.3f}" for v in x["named_time"]) if x["named_time"] else "-"
            last = " / ".join("-" if v is None else f"{v[2]:.3f}" for v in (x["latest_train"], x["latest_heldout"]))
            print(f"{name:<40} {' / '.join(f'{v:.3f}' for v in x['all']):>26} "
                  f"{' / '.join(f'{v:.3f}' for v in x['heldout']):>22} {timed:>22} {last:>30}   {cats}")
    Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
