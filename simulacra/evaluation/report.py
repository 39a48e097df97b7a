"""``simulacra evaluate``: a scenario run under each variant for each seed, measured (:mod:`.metrics`), summed up
in ``metrics.json``, ``report.md`` and plots.

Output folder::

    DIR/metrics.json          per variant: per seed the headline metrics, their mean and standard deviation
    DIR/report.md             the protocol, a table of every metric (mean +- sd over seeds), what each variant
                              changed against full, the party's guests and no-show reasons, made-up interview
                              answers, per-seed rows
    DIR/diffusion.png         diffusion of each seeded fact over game time: mean over seeds, band = min..max;
                              dotted: the share told it in person according to the trace; the variants drawn from
                              wide to thin, so equal curves do not hide one another
    DIR/density.png           relationship-network density at start and end per variant (mean, min..max)
    DIR/metrics_table.png     the table of report.md as an image
    DIR/runs/<variant>-seed<S>/   each run (trace, stores, summary.json) and its full metrics.json
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from simulacra.clock import format_game_time
from simulacra.config import load_config
from simulacra.errors import SimulacraError
from simulacra.evaluation.metrics import COST_PER_AGENT_HOUR, KNOWS, SIMILARITY, evaluate_run
from simulacra.evaluation.scenario import Scenario
from simulacra.evaluation.setup import run_scenario
from simulacra.evaluation.variants import Variant

log = logging.getLogger(__name__)

#: the headline metrics (per seed and their mean) in metrics.json and the report's table, in order
HEADLINE = ("density_start", "density_end", "invited", "attended", "hallucination_rate",
            *COST_PER_AGENT_HOUR, "tokens_per_conversation", "early_fact_in_view", "early_fact_survival")

#: the report's column names of the headline metrics
LABELS = {"density_start": "density start", "density_end": "density end", "invited": "invited",
          "attended": "attended", "hallucination_rate": "made up", "llm_calls_per_agent_hour": "calls/agent-h",
          "tokens_per_agent_hour": "tokens/agent-h", "cost_usd_per_agent_hour": "USD/agent-h",
          "tokens_per_conversation": "tokens/conv", "early_fact_in_view": "early facts in view",
          "early_fact_survival": "early facts recalled"}
#: headline metrics that are shares (0..1), shown as percentages
SHARES = ("hallucination_rate", "early_fact_in_view", "early_fact_survival")

#: the per-fact diffusion shares (0..1) of metrics.json: known by retrieval at the start and end, heard (trace),
#: told in person (trace), and, when interviews ran, known and confirmed by the agent's interview answer
DIFFUSION_PARTS = ("start", "end", "heard_end", "told_end", "confirmed_end")

#: the paper's figures (Park et al. 2023, section 7), for the report
PAPER = {"candidacy": (0.04, 0.32), "party": (0.04, 0.52), "density_start": 0.167, "density_end": 0.74,
         "invited": 12, "attended": 5, "hallucination_rate": 6 / 453}


def parse_seeds(text: str) -> list[int]:
    """``"0..4"`` (inclusive), ``"0,2,5"`` or ``"3"`` -> seeds.

    Raises:
        SimulacraError: anything else, or an empty range.
    """
    text = text.strip()
    m = re.fullmatch(r"(\d+)\s*\.\.\s*(\d+)", text)
    if m:
        a, b = int(m.group(1)), int(m.group(2))
        if b < a:
            raise SimulacraError(f"--seeds {text}: the range is empty (write low..high)")
        return list(range(a, b + 1))
    if re.fullmatch(r"\d+(\s*,\s*\d+)*", text):
        return list(dict.fromkeys(int(x) for x in text.split(",")))
    raise SimulacraError(f"--seeds {text!r}: expected a range like 0..4, a list like 0,2,5, or one seed")


def run_name(v: Variant, seed: int) -> str:
    return f"{re.sub(r'[^A-Za-z0-9_-]+', '-', v.name)}-seed{seed}"


def headline(m: dict[str, Any]) -> dict[str, Any]:
    """The per-seed row of metrics.json from :func:`~simulacra.evaluation.metrics.evaluate_run`'s result."""
    row: dict[str, Any] = {}
    if "diffusion" in m:
        row["diffusion"] = {fid: {k: d[k] for k in DIFFUSION_PARTS if k in d} for fid, d in m["diffusion"].items()}
    for key in ("density_start", "density_end", "invited", "attended", "hallucination_rate", *COST_PER_AGENT_HOUR):
        if key in m:
            row[key] = m[key]
    if "history" in m:
        row["tokens_per_conversation"] = m["history"]["tokens_per_conversation"]
        row["early_fact_in_view"] = m["history"]["in_view_share"]
        row["early_fact_survival"] = m["history"]["survival"]
    if "recall" in m:
        row["recall"] = m["recall"]["overall"]
    return row


def _stats(values: Sequence[float]) -> dict[str, float]:
    n = len(values)
    mean = sum(values) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1)) if n > 1 else 0.0
    return {"mean": mean, "sd": sd, "min": min(values), "max": max(values), "n": n}


def aggregate(rows: dict[int, dict[str, Any]]) -> dict[str, Any]:
    """Mean, sd (sample), min and max over seeds of every headline number (``None`` values left out)."""
    out: dict[str, Any] = {}
    for key in HEADLINE:
        vals = [r[key] for r in rows.values() if r.get(key) is not None]
        if vals:
            out[key] = _stats(vals)
    facts = sorted({f for r in rows.values() for f in r.get("diffusion", {})})
    if facts:
        out["diffusion"] = {f: {part: _stats(vals) for part in DIFFUSION_PARTS
                                if (vals := [r["diffusion"][f][part] for r in rows.values()
                                             if part in r.get("diffusion", {}).get(f, {})])}
                            for f in facts}
    return out


def evaluate(sc: Scenario, variants: Sequence[Variant], seeds: Sequence[int], out: str | Path,
             config_path: str | None = None, overrides: Sequence[str] = (), embedder=None, interviews: bool = True,
             threshold: float = SIMILARITY, progress: Callable[[str], None] | None = None,
             reuse: bool = False, workers: int = 1, ray_address: str | None = None) -> dict[str, Any]:
    """Run ``sc`` under every variant for every seed into ``out/runs/``, measure each run, write
    ``out/metrics.json``, ``out/report.md`` and the plots; returns the metrics.json content.

    ``config_path`` and ``overrides`` (``section.field=value``) set the base config (any backend: e.g.
    ``llm.provider=local``); a variant's overrides and the seed come on top. With ``reuse``, a run already finished
    in ``out/runs/`` (:func:`unfinished`) is measured again instead of being run again; any other is run again. With
    ``workers``
    > 1 or a ``ray_address``, each run's agents are shards on Ray actors (:func:`~simulacra.evaluation.setup.start_run`;
    the same runs, scripted, with ``embedding.exact``); the measurements are taken in this process.

    Raises:
        SimulacraError (ConfigError, ...): a bad config or override; what a run raises.
    """
    from simulacra.embeddings import build_embedder

    out = Path(out)
    (out / "runs").mkdir(parents=True, exist_ok=True)
    say = progress or (lambda s: None)
    base = load_config(config_path, list(overrides))
    if embedder is None:
        embedder = build_embedder(base.embedding)
    result: dict[str, Any] = {"scenario": sc.name, "scenario_file": sc.source, "seeds": list(seeds),
                              "similarity_threshold": threshold, "knows": KNOWS, "variants": {}}
    details: dict[str, dict[int, dict[str, Any]]] = {}
    for v in variants:
        rows: dict[int, dict[str, Any]] = {}
        details[v.name] = {}
        for seed in seeds:
            config = load_config(config_path, [*overrides, *v.overrides, f"simulation.seed={seed}"])
            name = run_name(v, seed)
            why = unfinished(out / "runs" / name, sc) if reuse else None
            if reuse and why is None:
                say(f"{sc.name}: variant {v.name}, seed {seed}: measuring the finished run {out / 'runs' / name}")
            else:
                say(f"{sc.name}: variant {v.name}, seed {seed}: running ..."
                    + (f" (the run in {out / 'runs' / name} is not reused: {why})" if why and
                       (out / "runs" / name).exists() else ""))
                summary = run_scenario(sc, config, v, out / "runs", name, embedder, workers=workers,
                                       ray_address=ray_address)
                if summary.get("stopped"):  # a part failed for good: a cut-short run would measure as a finished one
                    raise SimulacraError(f"{sc.name}: variant {v.name}, seed {seed}: the run did not reach the "
                                         f"scenario's end, so no report is written: {summary['stopped']}")
            asks = interviews or "history" in sc.measure  # the model answers interviews and history questions
            mind, closers = interview_mind(config, out / "runs" / name) if asks else (None, [])
            try:
                m = evaluate_run(out / "runs" / name, sc, embedder, mind=mind, interviews=interviews,
                                 threshold=threshold)
            finally:
                for c in reversed(closers):
                    c()
            (out / "runs" / name / "metrics.json").write_text(json.dumps(m, indent=2, ensure_ascii=False),
                                                               encoding="utf-8")
            details[v.name][seed] = m
            rows[seed] = headline(m)
            say(f"{sc.name}: variant {v.name}, seed {seed}: {_one_line(rows[seed])}")
        result["variants"][v.name] = {"variant": v.to_dict(), "seeds": {str(s): r for s, r in rows.items()},
                                      "mean": {k: (x["mean"] if "mean" in x else
                                                   {f: {p: s["mean"] for p, s in parts.items()}
                                                    for f, parts in x.items()})
                                               for k, x in aggregate(rows).items()},
                                      "spread": aggregate(rows)}
    (out / "metrics.json").write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf-8")
    plots = write_plots(result, details, sc, out)
    (out / "report.md").write_text(report_markdown(result, details, sc, plots), encoding="utf-8")
    return result


def unfinished(run_dir: Path, sc: Scenario) -> str | None:
    """Why the run folder ``run_dir`` is not a finished run of ``sc`` that ``evaluate --reuse-runs`` may measure
    again, or ``None`` when it is: no ``summary.json`` (the run was killed, or never made), a summary that records a
    stop (a part failed for good), or a trace with fewer ticks than the scenario's span (cut short)."""
    from simulacra.trace import stream_trace

    path = run_dir / "summary.json"
    if not path.is_file():
        return "it has no summary.json"
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        return f"{path} cannot be read ({err})"
    if not isinstance(summary, dict):
        return f"{path} is not a run summary"
    if summary.get("stopped"):
        return f"it stopped before the scenario's end ({summary['stopped']})"
    try:
        header, ticks = stream_trace(run_dir / "trace.jsonl")
        count = sum(1 for _ in ticks)
        start, tick = int(header["start_minute"]), int(header["tick_minutes"])
    except (SimulacraError, OSError, KeyError, TypeError, ValueError) as err:
        return f"its trace cannot be read ({err})"
    want = sc.ticks(start, tick)
    if count < want:
        return f"its trace holds {count} of the scenario's {want} ticks"
    return None


def interview_mind(config, run_dir: Path):
    """The mind that answers the interviews of a run: the run's model when it has one, else ``None`` (scripted);
    and the closers of what was started for it."""
    from simulacra.runtime import build_language_model, build_mind, uses_language_model

    if not uses_language_model(config):
        return None, []
    closers: list = []
    llm = build_language_model(config, run_dir, closers, interview=True)
    return build_mind(config, llm), closers


def _one_line(row: dict[str, Any]) -> str:
    parts = [f"{f} {d['start']:.0%}->{d['end']:.0%}" for f, d in row.get("diffusion", {}).items()]
    for k in ("density_start", "density_end", "invited", "attended", "hallucination_rate"):
        if k in row:
            parts.append(f"{k} {row[k]:.3g}")
    return ", ".join(parts)


# --------------------------------------------------------------------------- plots
def write_plots(result: dict[str, Any], details: dict[str, dict[int, dict]], sc: Scenario,
                out: Path) -> dict[str, str]:
    """Write the plots (matplotlib, Agg); returns name -> file name. Without matplotlib (``pip install
    'simulacra[eval]'``) none are written and the report says so."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log.warning("matplotlib is not installed (pip install 'simulacra[eval]'): no plots")
        return {}
    files: dict[str, str] = {}
    facts = [f for f in sc.facts if not f.control]
    variants = list(result["variants"])
    if any("diffusion" in m for runs in details.values() for m in runs.values()):
        fig, axes = plt.subplots(1, len(facts), figsize=(6 * len(facts), 4), squeeze=False)
        # earlier variants drawn wider (4.5 down to 1.5 points): equal curves show as nested lines, none hidden
        widths = [1.5 + 3.0 * (len(variants) - 1 - i) / max(1, len(variants) - 1) for i in range(len(variants))]
        for ax, f in zip(axes[0], facts):
            for v, lw in zip(variants, widths):
                runs = [m for m in details[v].values() if "diffusion" in m]
                if not runs:
                    continue
                minutes = runs[0]["diffusion"][f.id]["minutes"]
                curves = [m["diffusion"][f.id]["curve"] for m in runs]
                hours = [x / 60 for x in minutes]
                mean = [sum(c[i] for c in curves) / len(curves) for i in range(len(minutes))]
                line, = ax.plot(hours, mean, lw=lw, label=f"{v}: knows (retrieval)")
                ax.fill_between(hours, [min(c[i] for c in curves) for i in range(len(minutes))],
                                [max(c[i] for c in curves) for i in range(len(minutes))], alpha=0.2,
                                color=line.get_color())
                told = [m["diffusion"][f.id]["told_curve"] for m in runs]
                ax.plot(hours, [sum(c[i] for c in told) / len(told) for i in range(len(minutes))], ls=":",
                        lw=lw, color=line.get_color(), label=f"{v}: told in person (trace)")
            ax.set_title(f"{f.id}: agents who know it")
            ax.set_xlabel("game time (hours since day 1 00:00)")
            ax.set_ylabel("share of agents")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "diffusion.png", dpi=110)
        plt.close(fig)
        files["diffusion"] = "diffusion.png"
    spread = {v: result["variants"][v]["spread"] for v in variants}
    if all("density_end" in s for s in spread.values()):
        fig, ax = plt.subplots(figsize=(1.6 * len(variants) + 2, 3.6))
        xs = range(len(variants))
        for off, key, label in ((-0.2, "density_start", "start"), (0.2, "density_end", "end")):
            means = [spread[v][key]["mean"] for v in variants]
            lo = [max(0.0, means[i] - spread[v][key]["min"]) for i, v in enumerate(variants)]
            hi = [max(0.0, spread[v][key]["max"] - means[i]) for i, v in enumerate(variants)]
            ax.bar([x + off for x in xs], means, width=0.4, yerr=[lo, hi], capsize=3, label=label)
        ax.axhline(PAPER["density_end"], ls="--", lw=0.8, color="grey", label="paper, end (0.74)")
        ax.set_xticks(list(xs), variants, rotation=20, fontsize=8)
        ax.set_ylabel("network density")
        ax.set_ylim(0, 1)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "density.png", dpi=110)
        plt.close(fig)
        files["density"] = "density.png"
    recalls = {f"{v}, seed {seed}": m["recall"] for v, runs in details.items() for seed, m in runs.items()
               if "recall" in m}
    if recalls:
        from simulacra.evaluation.recall import plot_recall

        first = next(iter(recalls.values()))
        plot_recall(recalls, out / "recall.png", profiles=[first["interview"]] if len(recalls) > 1 else None)
        files["recall"] = "recall.png"
    header, rows = metric_table(result, sc)
    fig, ax = plt.subplots(figsize=(min(2.0 + 1.55 * len(header), 22), 0.5 + 0.35 * (len(rows) + 1)))
    ax.axis("off")
    table = ax.table(cellText=rows, colLabels=header, loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(7)
    table.scale(1, 1.3)
    fig.tight_layout()
    fig.savefig(out / "metrics_table.png", dpi=120)
    plt.close(fig)
    files["table"] = "metrics_table.png"
    return files


# --------------------------------------------------------------------------- report
def history_section(details: dict[str, dict[int, dict]]) -> list[str]:
    """Report lines on the conversation-history strategies: per variant (all seeds) tokens per conversation, early
    facts of long conversations still in the strategy's end view and recalled when asked after the conversation
    (:func:`~simulacra.evaluation.metrics.history`), and one example answer; nothing when no run had an early
    fact."""
    rows = []
    example = None
    for name, runs in details.items():
        hs = [m["history"] for m in runs.values() if "history" in m]
        probes = [p for h in hs for p in h.get("probes", [])]
        if not probes:
            continue
        viewed = [p for p in probes if p["in_view"] is not None]
        asked = [p for p in probes if p["recalled"] is not None]
        tokens = sum(h["tokens_per_conversation"] for h in hs) / len(hs)
        strategy = next((h["strategy"] for h in hs if h.get("strategy")), "-")
        def share(ps, key):
            return f"{sum(p[key] for p in ps)} of {len(ps)}" if ps else "-"

        rows.append(f"| {name} | {strategy} | {tokens:.0f} | {len(probes)} | {share(viewed, 'in_view')} | "
                    f"{share(asked, 'recalled')} | {share(probes, 'in_summary')} |")
        if example is None and asked:
            example = (name, asked[0])
    if not rows:
        return []
    out = ["## Conversation history: do early facts survive to the end?", "",
           "Early facts: a seeded fact told in the first half of a conversation of at least 4 lines. *In view*: the "
           "history strategy's end view (its summary and the lines it still shows) holds it; *recalled*: the listener, "
           "asked the fact's question from that view alone right after the conversation, answers with it; *stored "
           "summary*: the summary both keep in memory (written from the whole transcript) holds it. A mind without a "
           "history (scripted) has nothing in view and is not asked (-).", "",
           "| variant | strategy | tokens/conversation | early facts | in view | recalled | stored summary |",
           "|---|---|---|---|---|---|---|", *rows, ""]
    if example is not None:
        name, p = example
        out += [f"Example ({name}, minute {p['time']}, {p['listener']} asked about {p['fact']}): "
                f"{(p['answer'] or '')[:200]!r} — {'recalled' if p['recalled'] else 'not recalled'}.", ""]
    return out


def recall_section(details: dict[str, dict[int, dict]], plots: dict[str, str]) -> list[str]:
    """Report lines on the recall test (:mod:`~simulacra.evaluation.recall`): per variant and seed, the share of
    what residents knew that retrieval found, per retrieval profile and kind, by the item's age; nothing when no run
    was probed."""
    from simulacra.evaluation.recall import AGE_BUCKETS, KINDS

    runs = [(name, seed, m["recall"]) for name, rs in details.items() for seed, m in rs.items() if "recall" in m]
    if not runs:
        return []
    buckets = [f"{lo:g}-{hi:g}" for lo, hi in AGE_BUCKETS]
    out = ["## Recall: what residents can still retrieve, by age", "",
           "Every resident was asked, inside the run, each fact's question, each world event it could have seen (by "
           "its text) and its own plans of past days; *found*: a memory holding the item was among what it "
           "recalled (the interview's retrieval, per profile); shares are over the residents who knew the item by "
           "then (the trace's labels), by the item's age in game days (asked / found).", ""]
    for name, seed, r in runs:
        out += [f"**{name}, seed {seed}** (interview profile: {r['interview']}; made-up recall of facts never "
                f"heard: " + ", ".join(f"{p} {_pct(v)}" for p, v in r["found_unknown"].items()) + ")", "",
                "| profile | kind | " + " | ".join(buckets) + " | all |", "|" + "---|" * (len(buckets) + 3)]
        for p in r["profiles"]:
            for kind in KINDS:
                cells = r["by_age"][p][kind]
                if not cells:
                    continue
                row = [f"{cells[b]['asked']} / {_pct(cells[b]['found'])}" if b in cells else "-" for b in buckets]
                out.append(f"| {p} | {kind} | " + " | ".join(row) + f" | {_pct(r['overall'][p][kind])} |")
        ans = r["answered_by_age"]
        if any(ans.values()):
            for kind in KINDS:
                if ans[kind]:
                    row = [f"{ans[kind][b]['asked']} / {_pct(ans[kind][b]['answered'])}" if b in ans[kind] else "-"
                           for b in buckets]
                    out.append(f"| answer states it | {kind} | " + " | ".join(row) + " | |")
        mem = r.get("memories_per_agent") or []
        if mem:
            out += ["", "Memories per agent at each probe: " + "; ".join(
                f"day {x['day']}: {x['total']:g} ({x.get('long_term', 0):g} long-term)" for x in mem) + "."]
        out.append("")
    if plots.get("recall"):
        out += [f"![recall against age]({plots['recall']})", ""]
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0%}"


def _fmt(s: dict[str, float] | None, pct: bool = False) -> str:
    if not s:
        return "-"
    sd = s["sd"] if s["sd"] > 1e-9 * max(1.0, abs(s["mean"])) else 0.0  # float noise of equal values
    if pct:
        return f"{s['mean']:.0%} ± {sd:.0%}" if s["n"] > 1 else f"{s['mean']:.0%}"
    return f"{s['mean']:.3g} ± {sd:.2g}" if s["n"] > 1 else f"{s['mean']:.3g}"


def _num(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def metric_table(result: dict[str, Any], sc: Scenario) -> tuple[list[str], list[list[str]]]:
    """Column names and one row per variant: every metric as mean ± sd over seeds."""
    facts = [f for f in sc.facts]
    confirmed = any("confirmed_end" in d for v in result["variants"].values()
                    for d in v["spread"].get("diffusion", {}).values())
    extra = ["heard_end", "told_end"] + (["confirmed_end"] if confirmed else [])
    header = ["variant"]
    for f in facts:
        header += [f"{f.id} start", f"{f.id} end"] + ([] if f.control else
                                                      [f"{f.id} {p.removesuffix('_end')}" for p in extra])
    keys = [k for k in HEADLINE if any(k in v["spread"] for v in result["variants"].values())]
    header += [LABELS[k] for k in keys]
    rows = []
    for name, v in result["variants"].items():
        s = v["spread"]
        row = [name]
        for f in facts:
            d = s.get("diffusion", {}).get(f.id, {})
            row += [_fmt(d.get("start"), True), _fmt(d.get("end"), True)]
            if not f.control:
                row += [_fmt(d.get(p), True) for p in extra]
        row += [_fmt(s.get(k), k in SHARES) for k in keys]
        rows.append(row)
    return header, rows


def changes_section(result: dict[str, Any], sc: Scenario) -> list[str]:
    """Report lines: what each variant changed against the baseline (``full`` when it was run, else the first
    variant): every mean over seeds that differs, each fact's share known (retrieval) and told in person at the end,
    then the headline metrics; nothing with a single variant."""
    names = list(result["variants"])
    if len(names) < 2:
        return []
    base = "full" if "full" in names else names[0]
    b = result["variants"][base]["spread"]
    out = [f"## What each variant changed (against {base}, means over seeds)", ""]
    for name in names:
        if name == base:
            continue
        v = result["variants"][name]
        s = v["spread"]
        pairs = [(f"{f.id} {label}", b.get("diffusion", {}).get(f.id, {}).get(part),
                  s.get("diffusion", {}).get(f.id, {}).get(part), True)
                 for f in sc.facts for part, label in (("end", "known at end"), ("told_end", "told in person"))]
        pairs += [(LABELS[k], b.get(k), s.get(k), k in SHARES) for k in HEADLINE]
        diffs = [f"{label} {x['mean']:.0%} → {y['mean']:.0%}" if pct else f"{label} {x['mean']:.3g} → {y['mean']:.3g}"
                 for label, x, y, pct in pairs
                 if x and y and abs(x["mean"] - y["mean"]) > 1e-9 * max(1.0, abs(x["mean"]))]
        out.append(f"- **{name}** ({v['variant']['description']}): " + ("; ".join(diffs) or "no measured difference"))
    return out + [""]


def report_markdown(result: dict[str, Any], details: dict[str, dict[int, dict]], sc: Scenario,
                    plots: dict[str, str]) -> str:
    """The report (Markdown)."""
    seeds = result["seeds"]
    lines = [f"# Evaluation: {sc.name}", ""]
    if sc.description:
        lines += [sc.description.strip(), ""]
    lines += [f"Scenario file `{sc.source}`; seeds {', '.join(map(str, seeds))}; variants "
              f"{', '.join(result['variants'])}. Numbers are the mean ± sample standard deviation over seeds.", "",
              "Protocol (details in docs/evaluation.md): an agent *knows* a fact when retrieval for the fact's "
              f"question returns a memory holding it (its news topic, or cosine ≥ {result['similarity_threshold']} "
              "to the fact or a paraphrase), over the agent's whole memory store for every variant (an ablated "
              "agent knows what it stored even when it cannot recall it); *heard* = held it according to the trace "
              "(told in person, or a notice on the town's board), *told* = told in person; *confirmed* = heard it "
              "and claims it when interviewed at the end (interviews go through the variant's ablations: a "
              "no-memory agent answers from its static facts); *invited* = told of the party in person before it "
              "ended, "
              "*attended* = at its place during its window (host excluded); *made up* = interview answers claiming "
              "a fact the agent had not heard according to the trace, over all answers (every agent asked every "
              "fact's question).", ""]
    header, rows = metric_table(result, sc)
    lines += ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    lines += changes_section(result, sc)
    paper = ["Generative Agents (25 agents, two game days): candidacy 4% → 32%, party 4% → 52%, density 0.167 → "
             "0.74, 12 invited / 5 came, 1.3% of interview answers made up (6 of 453)."]
    lines += ["For reference, " + paper[0], ""]
    if plots.get("diffusion"):
        lines += [f"![diffusion over game time]({plots['diffusion']})", ""]
    if plots.get("density"):
        lines += [f"![network density]({plots['density']})", ""]
    if not plots:
        lines += ["(no plots: matplotlib is not installed; `pip install 'simulacra[eval]'`)", ""]
    if sc.party is not None:
        p = sc.party
        lines += ["## The party", "",
                  f"Host {p.host} at {p.place}, {format_game_time(p.start_minute)}–{p.end}.", ""]
        for name, runs in details.items():
            cats: Counter = Counter()
            for m in runs.values():
                c = m.get("coordination")
                if c:
                    cats.update(x["category"] for x in c["no_shows"].values())
            if cats:
                lines.append(f"- **{name}** no-shows by reason (all seeds): "
                             + ", ".join(f"{k} {n}" for k, n in cats.most_common()))
        first = next(iter(details.values()))
        if first:
            seed, m = next(iter(first.items()))
            c = m.get("coordination")
            if c:
                lines += ["", f"{next(iter(details))}, seed {seed}: invited {', '.join(c['invited']) or 'nobody'}; "
                          f"came {', '.join(c['attended']) or 'nobody'}.", ""]
                for a, x in c["no_shows"].items():
                    lines.append(f"- {a}: {x['category']} ({x['reason']})")
        lines.append("")
    made_up = [(name, seed, x) for name, runs in details.items() for seed, m in runs.items()
               for x in (m.get("hallucination") or {}).get("made_up", [])]
    if any("hallucination" in m for runs in details.values() for m in runs.values()):
        lines += ["## Interview answers claiming what the agent never heard", ""]
        if not made_up:
            lines.append("None.")
        for name, seed, x in made_up[:10]:
            lines.append(f"- {name}, seed {seed}, {x['agent']} on {x['fact']}: {x['answer'][:200]!r}")
        unrecalled = {name: sum(len((m.get("hallucination") or {}).get("unrecalled", [])) for m in runs.values())
                      for name, runs in details.items()}
        lines += ["", "Answers that do not claim a fact the agent had heard (*unrecalled*, not made up), all seeds: "
                  + ", ".join(f"{name} {n}" for name, n in unrecalled.items()) + ".", ""]
    lines += history_section(details)
    lines += recall_section(details, plots)
    lines += ["## Per seed", "", "| variant | seed | " + " | ".join(f"{f.id} end" for f in sc.facts)
              + " | density end | invited | attended | made up |", "|" + "---|" * (len(sc.facts) + 6)]
    for name, v in result["variants"].items():
        for seed, r in v["seeds"].items():
            d = r.get("diffusion", {})
            cells = [f"{d[f.id]['end']:.0%}" if f.id in d else "-" for f in sc.facts]
            lines.append(f"| {name} | {seed} | " + " | ".join(cells) + f" | {_num(r.get('density_end'), '.3g')} | "
                         f"{_num(r.get('invited'), 'd')} | {_num(r.get('attended'), 'd')} | "
                         f"{_num(r.get('hallucination_rate'), '.1%')} |")
    if plots.get("table"):
        lines += ["", f"![table]({plots['table']})"]
    return "\n".join(lines) + "\n"
