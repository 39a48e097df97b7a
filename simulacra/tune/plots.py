"""PNG figures of a search (matplotlib, imported inside each function on an Agg canvas: no display needed, and
importing :mod:`simulacra.tune` does not load matplotlib)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from simulacra.tune.search import Result, TuneReport, evaluate
from simulacra.tune.settings import GRIDS, baseline_settings


def plot_heatmap(report: TuneReport, path: str | Path, a_rec: Sequence[float] | None = None,
                 a_imp: Sequence[float] | None = None) -> Path:
    """PNG heatmap of the objective on the train queries over (a_rec, a_imp) at the best setting's gamma,
    threshold, top_k, retrieval mode and static budget (matplotlib, Agg canvas; no display needed)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    best = report.best.setting
    xs = sorted(set(a_rec if a_rec is not None else GRIDS["default"]["a_rec"]) | {best.a_rec})
    ys = sorted(set(a_imp if a_imp is not None else GRIDS["default"]["a_imp"]) | {best.a_imp})
    cells = [replace(best, a_rec=x, a_imp=y) for y in ys for x in xs]
    values = np.array([r.metric(report.metric) for r in evaluate(report.train, cells, report.run_memory)])
    grid = values.reshape(len(ys), len(xs))
    fig = Figure(figsize=(1.0 + 0.8 * len(xs), 1.0 + 0.65 * len(ys)), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    im = ax.imshow(grid, origin="lower", cmap="viridis", vmin=0.0, vmax=max(1e-9, float(values.max())), aspect="auto")
    for (yi, xi), v in np.ndenumerate(grid):
        ax.text(xi, yi, f"{v:.2f}", ha="center", va="center", fontsize=7,
                color="black" if v > 0.6 * values.max() else "white")
    ax.set_xticks(range(len(xs)), [f"{x:g}" for x in xs])
    ax.set_yticks(range(len(ys)), [f"{y:g}" for y in ys])
    ax.set_xlabel("a_rec (a_rel = 1)")
    ax.set_ylabel("a_imp")
    ax.plot(xs.index(best.a_rec), ys.index(best.a_imp), marker="*", ms=16, mfc="none", mec="red", mew=1.5)
    seed = baseline_settings()["seed003"]
    if seed.a_rec in xs and seed.a_imp in ys:
        ax.plot(xs.index(seed.a_rec), ys.index(seed.a_imp), marker="s", ms=14, mfc="none", mec="white", mew=1.2)
    names = {"ndcg": "nDCG@k", "mrr": "MRR", "recall": "recall@k"}
    ax.set_title(f"{names[report.metric]}: gamma {best.gamma:g}, threshold {best.threshold:g}, top_k {best.top_k}, "
                 f"{best.retrieval}\n(star: best; square: a_rec/a_imp of seed003)", fontsize=8)
    fig.colorbar(im, ax=ax, fraction=0.05)
    return _save(fig, path)


def plot_metrics(report: TuneReport, path: str | Path, extra: Mapping[str, Result] | None = None) -> Path:
    """PNG bar chart of recall@k, MRR and nDCG@k on the held-out queries (the train queries when there are none)
    for the baselines, then ``extra`` (name -> result on the same queries, e.g. a shipped retrieval profile), the
    best setting of each relevance variant searched and the overall best (matplotlib, Agg canvas)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    held = bool(report.heldout)
    rows: dict[str, Result] = {}
    for name in report.baselines:
        rows[name] = report.heldout[name] if held else report.baselines[name]
    rows.update(extra or {})
    for label, (train, h) in report.by_relevance.items():
        rows[f"best {label}"] = h if held and h is not None else train
    rows["tuned (best)"] = report.heldout["best"] if held else report.best
    names = list(rows)
    fig = Figure(figsize=(max(6.0, 0.75 * len(names) + 2), 4.2), dpi=110)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot(1, 1, 1)
    x = np.arange(len(names))
    for j, (metric, label) in enumerate((("recall", "recall@k"), ("mrr", "MRR"), ("ndcg", "nDCG@k"))):
        vals = [rows[n].metric(metric) for n in names]
        bars = ax.bar(x + (j - 1) * 0.27, vals, 0.27, label=label)
        for bar, v in zip(bars, vals):
            ax.text(bar.get_x() + bar.get_width() / 2, v + 0.01, f"{v:.2f}", ha="center", fontsize=6, rotation=90)
    ax.set_xticks(x, names, rotation=35, ha="right", fontsize=7)
    ax.set_ylim(0, 1.1)
    n = sum(1 for pq in report.prepared if pq.relevant and (pq.query.split == "heldout") == held)
    ax.set_title(f"{'held-out' if held else 'train'} queries ({n}); settings searched on the train queries",
                 fontsize=9)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, path)


def _save(fig, path: str | Path) -> Path:
    """Lay ``fig`` out and write it as a PNG at ``path`` (its folder made); returns the path."""
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, format="png")
    return p
