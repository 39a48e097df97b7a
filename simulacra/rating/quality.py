"""How well a rater's language model rates: measured at start on labelled memories (``rater.check_sample``).

A small model can answer every request in valid JSON and still rate nothing: the 16 memories of a batch
rated 1, 2, 3, ... in order, a greeting rated 10. Parsing cannot notice that; comparing with labels can. The
check rates a fixed, seeded sample of the shipped labelled memories (``data/rated_memories.jsonl``, the set
the offline rater is fitted on and :mod:`simulacra.rating.evaluate` scores it on) through the model's own rating
path (the same prompts, batches and parsing as in a run, no offline fallback) and reports:

* ``spearman``: Spearman's rank correlation (scipy) between the model's ratings and the labels, over the
  answers that parsed; ``None`` when fewer than 3 parsed or the model gave one rating to all;
* ``parsed``: how many of the ``sample`` answers parsed; ``mae``: mean absolute error in rating points.

The model is **weak** when fewer than half of the answers parsed, when ``spearman`` is ``None``, or when it
is below ``min_spearman``. For reference, the offline rater reaches 0.82 on held-out labelled memories
(``docs/rater.md``); answers in list order score about 0 and random ratings 0 ± 0.2 on 24 memories.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from simulacra.rating.backends import load_examples

#: seed of the sample's choice and order (fixed: the same sample every run, so figures compare)
CHECK_SEED = 13


@dataclass(frozen=True)
class QualityCheck:
    """Settings of the start-up check (``rater.check_sample``, ``rater.min_spearman``, ``rater.on_weak_model``).

    Attributes:
        sample: labelled memories rated (1..200).
        min_spearman: a Spearman correlation below this makes the model weak (-1..1).
        on_weak_model: ``"warn"``: log a warning and keep using the model; ``"offline"``: rate and reflect
            with the offline backend instead.
    """

    sample: int = 24
    min_spearman: float = 0.3
    on_weak_model: Literal["warn", "offline"] = "warn"

    def __post_init__(self):
        if not 1 <= self.sample <= 200:
            raise ValueError(f"the check's sample must be 1..200 labelled memories, got {self.sample}")
        if self.on_weak_model not in ("warn", "offline"):
            raise ValueError(f"on_weak_model must be 'warn' or 'offline', got {self.on_weak_model!r}")

    @classmethod
    def from_config(cls, rater) -> QualityCheck | None:
        """From a :class:`simulacra.config.RaterConfig`; ``None`` when ``check_sample`` is 0 (no check)."""
        if rater.check_sample == 0:
            return None
        return cls(rater.check_sample, rater.min_spearman, rater.on_weak_model)


def check_sample(n: int, seed: int = CHECK_SEED, examples: Sequence[tuple[str, int]] | None = None
                 ) -> list[tuple[str, int]]:
    """``n`` labelled ``(memory, rating)`` pairs spread over the scale, in a seeded random order.

    Ratings are taken in turn (1, 2, ..., 10, 1, 2, ...; a rating with no example left is skipped), each
    time the next memory of that rating in a seeded permutation; the chosen pairs are then shuffled with the
    same generator, so their order says nothing about their ratings. Deterministic for a given ``seed``.

    Raises:
        ValueError: ``n`` is not 1..len(examples).
    """
    examples = list(load_examples() if examples is None else examples)
    if not 1 <= n <= len(examples):
        raise ValueError(f"the check's sample must be 1..{len(examples)} labelled memories, got {n}")
    rng = np.random.default_rng(seed)
    by_rating: dict[int, list[int]] = {}
    for i in rng.permutation(len(examples)):
        by_rating.setdefault(examples[int(i)][1], []).append(int(i))
    chosen: list[int] = []
    while len(chosen) < n:
        for rating in sorted(by_rating):
            if by_rating[rating] and len(chosen) < n:
                chosen.append(by_rating[rating].pop(0))
    return [examples[chosen[int(j)]] for j in rng.permutation(len(chosen))]


def score(predicted: Sequence[int | None], labels: Sequence[int], min_spearman: float) -> dict:
    """Figures of ratings ``predicted`` (``None`` = the answer did not parse) against ``labels``.

    Returns:
        ``{"sample", "parsed", "spearman": float | None, "mae": float | None, "min_spearman", "weak": bool,
        "reason": str | None}``; ``reason`` says why the model is weak.
    """
    from scipy.stats import spearmanr

    pairs = [(float(p), float(t)) for p, t in zip(predicted, labels) if p is not None]
    n, parsed = len(labels), len(pairs)
    rho = mae = None
    if parsed:
        x, y = np.array(pairs).T
        mae = round(float(np.abs(x - y).mean()), 3)
        if parsed >= 3 and len(set(x)) > 1 and len(set(y)) > 1:
            value = float(spearmanr(x, y)[0])
            rho = round(value, 3) if math.isfinite(value) else None
    reason = None
    if parsed * 2 < n:
        reason = f"only {parsed} of {n} answers parsed"
    elif rho is None:
        reason = "its ratings do not vary" if parsed >= 3 else f"only {parsed} answers parsed"
    elif rho < min_spearman:
        reason = f"Spearman {rho:.2f} is below rater.min_spearman {min_spearman:g}"
    return {"sample": n, "parsed": parsed, "spearman": rho, "mae": mae, "min_spearman": min_spearman,
            "weak": reason is not None, "reason": reason}


def measure(rate: Callable[[list[str]], list[int | None]], check: QualityCheck, seed: int = CHECK_SEED) -> dict:
    """Rate :func:`check_sample` with ``rate`` (texts -> ratings, ``None`` where the answer did not parse) and
    :func:`score` it against the labels; plus ``"on_weak_model"``."""
    sample = check_sample(check.sample, seed)
    predicted = rate([text for text, _ in sample])
    return {**score(predicted, [label for _, label in sample], check.min_spearman),
            "on_weak_model": check.on_weak_model}


def describe(quality: dict | None) -> str:
    """One line for logs, ``simulacra rater --check`` and run summaries, e.g. ``Spearman 0.61 against the labels
    of 24 memories (24 answers parsed, MAE 1.4): ok (floor 0.3)``."""
    if not quality:
        return "not measured (no model, or rater.check_sample = 0)"
    if quality.get("error"):
        return f"not measured: {quality['error']}"
    rho = "n/a" if quality.get("spearman") is None else f"{quality['spearman']:.2f}"
    mae = "" if quality.get("mae") is None else f", MAE {quality['mae']:.1f}"
    line = (f"Spearman {rho} against the labels of {quality['sample']} memories ({quality['parsed']} answers "
            f"parsed{mae})")
    if not quality.get("weak"):
        return f"{line}: ok (floor {quality['min_spearman']:g})"
    then = ("rating and reflecting with the offline backend instead" if quality.get("using") == "offline"
            else "still used (rater.on_weak_model: offline would use the offline backend)")
    return f"{line}: WEAK, {quality['reason']}; {then}"


def format_figures(quality: dict, model: str) -> str:
    """The check's figures, one per line, as ``simulacra rater --check`` prints them."""
    if quality.get("error"):
        return f"rater model:  {model}\nverdict:      {describe(quality)}"
    rho = "n/a" if quality["spearman"] is None else f"{quality['spearman']:.3f}"
    mae = "n/a" if quality["mae"] is None else f"{quality['mae']:.2f}"
    return (f"rater model:  {model}\n"
            f"sample:       {quality['sample']} labelled memories (simulacra/rating/data/rated_memories.jsonl, "
            f"seed {CHECK_SEED})\n"
            f"parsed:       {quality['parsed']} of {quality['sample']} answers\n"
            f"Spearman:     {rho} (floor rater.min_spearman = {quality['min_spearman']:g})\n"
            f"MAE:          {mae} rating points\n"
            f"model calls:  {quality['model_calls']} ({quality['truncations']} cut at max_tokens), "
            f"{quality['seconds']:.1f} s\n"
            f"verdict:      {describe(quality)}")
