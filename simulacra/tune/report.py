"""A search's results as text (:func:`format_report`), JSON (:func:`report_json`) and a config file holding the
best setting (:func:`write_snippet`)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import yaml

from simulacra.config import SITUATIONAL
from simulacra.tune.search import Result, TuneReport
from simulacra.tune.settings import A_REL

#: how each objective is named in a report
METRIC_NAMES = {"ndcg": "nDCG@k", "mrr": "MRR", "recall": "recall@k"}


def below_defaults(report: TuneReport) -> list[str]:
    """Where the best setting of the search (chosen on the train queries) scores below the shipped defaults (the
    ``defaults`` baseline) on the objective: ``["train nDCG@k 0.886 < 0.935", "held-out nDCG@k 0.820 < 0.900"]``;
    empty when it scores at least as well on the train and the held-out queries. The search does not contain the
    defaults, so a small one (``--random 20``) can end below them: its best is then no improvement."""
    defaults = report.baselines.get("defaults")
    if defaults is None:
        return []
    m, name = report.metric, METRIC_NAMES.get(report.metric, report.metric)
    pairs = [("train", report.best, defaults)]
    if "best" in report.heldout and "defaults" in report.heldout:
        pairs.append(("held-out", report.heldout["best"], report.heldout["defaults"]))
    return [f"{split} {name} {b.metric(m):.3f} < {d.metric(m):.3f}" for split, b, d in pairs
            if round(b.metric(m), 12) < round(d.metric(m), 12)]


def _below_warning(report: TuneReport, worse: list[str]) -> str:
    return (f"the best of the {report.searched} settings searched is NOT an improvement: it scores below the shipped "
            f"defaults ({'; '.join(worse)})")


def format_report(report: TuneReport, top: int = 10) -> str:
    """The table of the ``top`` settings and the baselines (train queries), the best and the baselines on the
    train and held-out queries, and the expected memories that cannot be found."""
    head = (f"{'#':>3}  {'a_rec':>5} {'a_imp':>5} {'gamma':>6} {'thresh':>6} {'top_k':>5} {'retrieval':>9} "
            f"{'static':>6} {'s_thr':>5} {'relevance':>15}  {'recall':>6} {'MRR':>6} {'nDCG':>6}")
    lines = [head, "-" * len(head)]

    def opt(x: float | None, fmt: str) -> str:
        return "-" if x is None else format(x, fmt)

    def row(tag: str, r: Result) -> str:
        s = r.setting
        return (f"{tag:>3}  {s.a_rec:5.3g} {s.a_imp:5.3g} {s.gamma:6.4g} {s.threshold:6.3g} {s.top_k:5d} "
                f"{s.retrieval:>9} {opt(s.static_top_k, 'd'):>6} {opt(s.static_threshold, '.3g'):>5} "
                f"{s.relevance_label():>15}  "
                f"{r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:6.3f}")

    lines += [row(str(i), r) for i, r in enumerate(report.results[:top], start=1)]
    for name, r in report.baselines.items():
        lines.append(row("", r) + f"  <- {name}")
    n_train = sum(1 for pq in report.train if pq.relevant)
    n_held = sum(1 for pq in report.prepared if pq.query.split == "heldout" and pq.relevant)
    m = report.metric
    lines += ["", f"{report.searched} settings on {n_train} train queries (a_rel fixed at {A_REL:g}); objective {m}",
              f"best: {report.best.setting.label()}", "",
              f"{'':<12} {'train (' + str(n_train) + ')':>22}   {'held-out (' + str(n_held) + ')':>22}",
              f"{'':<12} {'recall':>6} {'MRR':>6} {'nDCG':>8}   {'recall':>6} {'MRR':>6} {'nDCG':>8}"]
    for name, r in {"best": report.best, **report.baselines}.items():
        h = report.heldout.get(name)
        held = f"{h.recall:6.3f} {h.mrr:6.3f} {h.ndcg:8.3f}" if h else f"{'-':>6} {'-':>6} {'-':>8}"
        lines.append(f"{name:<12} {r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:8.3f}   {held}")
    worse = below_defaults(report)
    if worse:
        advice = ("keep the defaults, or search more settings (a larger --random N, --grid default)"
                  if worse[0].startswith("train") else
                  "what it gains on the train queries does not carry over to the held-out ones; keep the defaults")
        lines += ["", f"WARNING: {_below_warning(report, worse)}: {advice}."]
    if len(report.by_relevance) > 1:
        lines.append("\nbest setting per relevance (searched on train):")
        for label, (r, h) in report.by_relevance.items():
            held = f"{h.recall:6.3f} {h.mrr:6.3f} {h.ndcg:8.3f}" if h else f"{'-':>6} {'-':>6} {'-':>8}"
            lines.append(f"{label:<12} {r.recall:6.3f} {r.mrr:6.3f} {r.ndcg:8.3f}   {held}   {r.setting.label()}")
    missing = [(pq.query, e, why) for pq in report.prepared for e, why in pq.missing]
    if missing:
        lines.append(f"\n{len(missing)} expected memories cannot be found (left out of the metrics):")
        lines += [f"  query {q.index} ({q.agent}, {q.query!r}): {e}: {why}" for q, e, why in missing]
    skipped = [pq.query for pq in report.prepared if not pq.relevant]
    if skipped:
        lines.append(f"{len(skipped)} queries without a findable memory were not scored: "
                     + ", ".join(str(q.index) for q in skipped))
    return "\n".join(lines)


def write_snippet(report: TuneReport, path: str | Path, source: str = "") -> Path:
    """Write the best setting as a config file (``memory:`` section; under a tuned profile its
    ``memory.profiles.<name>``, beside the run's other profiles, since a config's ``profiles`` replaces them all),
    loadable with ``--config``. A situational best whose ``threshold`` differs from the run's also writes the run's
    profiles, those that inherited the section's threshold given the run's: tuning the situational retrieval does
    not change how the others select. Its comment header gives the best's figures beside the shipped defaults' and
    seed003's, and a warning when the best scores below the defaults (:func:`below_defaults`)."""
    best = report.best
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)

    def figures(r: Result) -> str:
        return f"recall@k {r.recall:.3f}, MRR {r.mrr:.3f}, nDCG@k {r.ndcg:.3f}"

    def beside(results: dict[str, Result]) -> str:
        return "; ".join(f"{name}: {figures(results[name])}" for name in ("defaults", "seed003") if name in results)

    comment = (f"# simulacra tune{(' ' + source) if source else ''}: best of {report.searched} settings by "
               f"{report.metric} on the train queries\n")
    worse = below_defaults(report)
    if worse:
        comment += (f"# WARNING: {_below_warning(report, worse)};\n"
                    f"# running with this file retrieves worse than without it on these queries\n")
    comment += f"# train: {figures(best)} ({beside(report.baselines)})\n"
    if "best" in report.heldout:
        comment += f"# held-out: {figures(report.heldout['best'])} ({beside(report.heldout)})\n"
    fields = best.setting.memory_dict()
    if report.profile not in (None, SITUATIONAL):  # the run's profiles, the tuned one replaced (links kept)
        profiles = {name: p.model_dump(exclude_none=True) for name, p in report.run_memory.profiles.items()}
        own = report.run_memory.profiles.get(report.profile)
        kept = {} if own is None else own.overrides()  # what the search does not set (recency_window_minutes)
        links = {"dated": report.run_memory.dated_link(report.profile),
                 "latest": report.run_memory.latest_link(report.profile)}
        profiles[report.profile] = {**kept, **fields, **{k: v for k, v in links.items() if v is not None}}
        fields = {"profiles": profiles}
    elif fields.get("threshold", report.run_memory.threshold) != report.run_memory.threshold:
        # the section's threshold tuned: a profile that inherited it keeps the run's (it was not tuned, and the
        # tuned one may lie above what its weights can score, which the config then refuses)
        inheriting = {name for name, p in report.run_memory.profiles.items() if p.threshold is None}
        if inheriting:
            fields["profiles"] = {name: {**p.model_dump(exclude_none=True),
                                         **({"threshold": report.run_memory.threshold} if name in inheriting else {})}
                                  for name, p in report.run_memory.profiles.items()}
    p.write_text(comment + yaml.safe_dump({"memory": fields}, sort_keys=False), encoding="utf-8")
    return p



def report_json(report: TuneReport, top: int = 10) -> str:
    """The best ``top`` results and the baselines (train queries), and the held-out figures, as JSON."""
    def d(r: Result) -> dict:
        return {**asdict(r.setting), "a_rel": A_REL, "recall": r.recall, "mrr": r.mrr, "ndcg": r.ndcg}

    return json.dumps({"metric": report.metric, "searched": report.searched, "below_defaults": below_defaults(report),
                       "results": [d(r) for r in report.results[:top]],
                       "baselines": {k: d(r) for k, r in report.baselines.items()},
                       "heldout": {k: d(r) for k, r in report.heldout.items()},
                       "by_relevance": {k: {"train": d(r), "heldout": None if h is None else d(h)}
                                        for k, (r, h) in report.by_relevance.items()}}, indent=2)
