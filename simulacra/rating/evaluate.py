"""Held-out evaluation of the offline rater: ``python -m simulacra.rating.evaluate``.

Splits the labelled set with a seeded permutation (80 % to fit, 20 % held out), fits
:class:`~simulacra.rating.backends.EmbeddingRater` on the first part and reports the Spearman correlation and
the mean absolute error of its integer ratings on the held-out part, averaged over several seeds, and the mean
error of long texts (20 words or more) labelled 6 or more, the ones consolidation must keep (seed 003 promotes a
memory to long-term only when its importance is above 0.5).

Then it fits the whole labelled set and rates the shipped worlds' events (``data/world_events_rated.jsonl``:
every event text of ``worlds/*.yaml``, labelled for this evaluation and never fitted on).
"""

from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from simulacra.config import MemoryConfig
from simulacra.rating.backends import EmbeddingRater, load_examples

WORLD_EVENTS_PATH = Path(__file__).parent / "data" / "world_events_rated.jsonl"
LONG_WORDS = 20
"""A text of at least this many words is long (the world events have 20 to 41)."""
KEPT_RATING = math.floor(MemoryConfig().promote_threshold * 10) + 1
"""The least rating consolidation promotes to long-term memory by default: 6, whose importance (rating / 10) is above
``memory.promote_threshold`` (0.5, seed 003)."""


def _scores(predicted: np.ndarray, truth: np.ndarray) -> dict:
    return {"spearman": float(spearmanr(predicted, truth)[0]), "mae": float(np.abs(predicted - truth).mean()),
            "bias": float((predicted - truth).mean())}


def evaluate(embedder, seeds=(0, 1, 2, 3, 4), holdout: float = 0.2) -> dict:
    """Mean held-out Spearman correlation and MAE (rating points) over ``seeds``, per-seed figures, and
    ``long_kept_bias``: the mean signed error (rating points) of the held-out texts of ``LONG_WORDS`` or more
    words labelled ``KEPT_RATING`` or more, over all seeds (``long_kept_n`` of them)."""
    examples = load_examples()
    per_seed = []
    errors = []
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(examples))
        cut = int(len(examples) * (1 - holdout))
        train = [examples[i] for i in order[:cut]]
        test = [examples[i] for i in order[cut:]]
        rater = EmbeddingRater(embedder, train)
        predicted = np.array([r.rating for r in rater.rate([t for t, _ in test])], dtype=float)
        truth = np.array([r for _, r in test], dtype=float)
        per_seed.append({"seed": seed, **_scores(predicted, truth), "n_test": len(test)})
        errors += [p - r for (t, r), p in zip(test, predicted) if len(t.split()) >= LONG_WORDS and r >= KEPT_RATING]
    return {
        "spearman": float(np.mean([s["spearman"] for s in per_seed])),
        "mae": float(np.mean([s["mae"] for s in per_seed])),
        "long_kept_bias": float(np.mean(errors)) if errors else float("nan"),
        "long_kept_n": len(errors),
        "n_examples": len(examples),
        "per_seed": per_seed,
    }


def evaluate_world_events(embedder, rater: EmbeddingRater | None = None, path: str | Path = WORLD_EVENTS_PATH
                          ) -> dict:
    """The rater fitted on the whole labelled set (or ``rater``) against the labelled world events at ``path``.

    Returns:
        ``{"spearman", "mae", "bias"}`` (rating points), ``"n"``, ``"kept"``: how many labelled ``KEPT_RATING`` or
        more are rated so (``"should_keep"`` of them), ``"kept_wrongly"``: rated so though labelled lower, and
        ``"events"``: ``[{"memory", "world", "rating", "rated"}]``.
    """
    events = load_examples(path)
    rater = rater if rater is not None else EmbeddingRater(embedder)
    rated = np.array([r.rating for r in rater.rate([t for t, _ in events])], dtype=float)
    truth = np.array([r for _, r in events], dtype=float)
    lines = [line for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]
    return {**_scores(rated, truth), "n": len(events),
            "kept": int(((rated >= KEPT_RATING) & (truth >= KEPT_RATING)).sum()),
            "should_keep": int((truth >= KEPT_RATING).sum()),
            "kept_wrongly": int(((rated >= KEPT_RATING) & (truth < KEPT_RATING)).sum()),
            "events": [{"memory": t, "world": json.loads(w).get("world"), "rating": r, "rated": int(p)}
                       for (t, r), p, w in zip(events, rated, lines)]}


def main() -> None:  # pragma: no cover - thin CLI
    argparse.ArgumentParser(description=__doc__).parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from simulacra.embeddings import build_embedder

    embedder = build_embedder()
    result = evaluate(embedder)
    for s in result["per_seed"]:
        print(f"seed {s['seed']}: Spearman {s['spearman']:.3f}  MAE {s['mae']:.2f}  (n={s['n_test']})")
    print(f"mean over {len(result['per_seed'])} splits of {result['n_examples']} labelled memories: "
          f"Spearman {result['spearman']:.3f}  MAE {result['mae']:.2f}; held-out texts of {LONG_WORDS}+ words "
          f"labelled {KEPT_RATING}+: mean error {result['long_kept_bias']:+.2f} (n={result['long_kept_n']})")
    world = evaluate_world_events(embedder)
    print(f"world events ({world['n']}, fitted on the whole set): Spearman {world['spearman']:.3f}  "
          f"MAE {world['mae']:.2f}  mean error {world['bias']:+.2f}; labelled {KEPT_RATING}+ and rated so "
          f"{world['kept']} of {world['should_keep']}, rated so though labelled lower {world['kept_wrongly']}")
    for e in world["events"]:
        print(f"  {e['rating']:>2} -> {e['rated']:>2}  {e['memory'][:90]}")


if __name__ == "__main__":  # pragma: no cover
    main()
