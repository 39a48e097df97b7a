"""Held-out evaluation of the offline rater: ``python -m simulacra.rating.evaluate``.

Splits the labelled set with a seeded permutation (80 % to fit, 20 % held out), fits
:class:`~simulacra.rating.backends.EmbeddingRater` on the first part and reports the Spearman correlation and
the mean absolute error of its integer ratings on the held-out part, averaged over several seeds.
"""

from __future__ import annotations

import argparse
import os

import numpy as np
from scipy.stats import spearmanr

from simulacra.rating.backends import EmbeddingRater, load_examples


def evaluate(embedder, seeds=(0, 1, 2, 3, 4), holdout: float = 0.2) -> dict:
    """Mean held-out Spearman correlation and MAE (rating points) over ``seeds``, and per-seed figures."""
    examples = load_examples()
    per_seed = []
    for seed in seeds:
        order = np.random.default_rng(seed).permutation(len(examples))
        cut = int(len(examples) * (1 - holdout))
        train = [examples[i] for i in order[:cut]]
        test = [examples[i] for i in order[cut:]]
        rater = EmbeddingRater(embedder, train)
        predicted = np.array([r.rating for r in rater.rate([t for t, _ in test])], dtype=float)
        truth = np.array([r for _, r in test], dtype=float)
        per_seed.append({"seed": seed, "spearman": float(spearmanr(predicted, truth)[0]),
                         "mae": float(np.abs(predicted - truth).mean()), "n_test": len(test)})
    return {
        "spearman": float(np.mean([s["spearman"] for s in per_seed])),
        "mae": float(np.mean([s["mae"] for s in per_seed])),
        "n_examples": len(examples),
        "per_seed": per_seed,
    }


def main() -> None:  # pragma: no cover - thin CLI
    argparse.ArgumentParser(description=__doc__).parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from simulacra.embeddings import build_embedder

    result = evaluate(build_embedder())
    for s in result["per_seed"]:
        print(f"seed {s['seed']}: Spearman {s['spearman']:.3f}  MAE {s['mae']:.2f}  (n={s['n_test']})")
    print(f"mean over {len(result['per_seed'])} splits of {result['n_examples']} labelled memories: "
          f"Spearman {result['spearman']:.3f}  MAE {result['mae']:.2f}")


if __name__ == "__main__":  # pragma: no cover
    main()
