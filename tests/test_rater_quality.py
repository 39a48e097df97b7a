"""The offline rater's held-out quality must not regress (figures in docs/rater.md)."""

from simulacra.rating.backends import load_examples
from simulacra.rating.evaluate import evaluate


def test_labelled_set_spans_the_scale():
    ratings = [r for _, r in load_examples()]
    assert len(ratings) >= 200
    assert all(ratings.count(k) >= 15 for k in range(1, 11))


def test_held_out_quality(embedder):
    result = evaluate(embedder, seeds=(0, 1, 2))
    assert result["spearman"] >= 0.78, result
    assert result["mae"] <= 1.35, result
