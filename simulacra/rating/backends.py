"""Rater backends behind a small protocol; the default is the offline embedding rater.

The offline backend is real behaviour, not a constant: it embeds a labelled set of rated memories
(``data/rated_memories.jsonl``, written for this project, ratings 1..10) with the same sentence
embedder as the simulation and predicts a new memory's rating from it (:class:`EmbeddingRater`); it
reflects by clustering memories over the same embedder (:class:`simulacra.rating.reflection.OfflineReflector`).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from simulacra.rating.reflection import Insight, OfflineReflector

DATA_PATH = Path(__file__).parent / "data" / "rated_memories.jsonl"


@dataclass(frozen=True)
class Rating:
    """A rater's answer: ``rating`` on 1..10 and a one-sentence ``explanation``."""

    rating: int
    explanation: str

    def to_dict(self) -> dict:
        return {"rating": self.rating, "explanation": self.explanation}


class RatingCache:
    """Thread-safe LRU cache of ratings by key (the memory's text, or text plus prompt hints).

    Args:
        size: keys kept; the least recently used go first.
    Attributes:
        rated, hits: memories answered, and how many of them came from the cache.
    """

    def __init__(self, size: int):
        self.size = size
        self._items: OrderedDict[str, Rating] = OrderedDict()
        self._lock = threading.Lock()
        self.rated = 0
        self.hits = 0

    def __len__(self) -> int:
        return len(self._items)

    def missing(self, keys: Sequence[str]) -> list[str]:
        """The distinct ``keys`` not cached, in first-seen order."""
        with self._lock:
            return [k for k in dict.fromkeys(keys) if k not in self._items]

    def answer(self, keys: Sequence[str], fresh: dict[str, Rating]) -> list[Rating]:
        """Store ``fresh`` and return the rating of every key of ``keys`` (all cached now), counting hits."""
        with self._lock:
            self._items.update(fresh)
            out = []
            for k in keys:
                out.append(self._items[k])
                self._items.move_to_end(k)
            self.rated += len(keys)
            self.hits += len(keys) - len(fresh)
            while len(self._items) > self.size:
                self._items.popitem(last=False)
        return out


class RaterBackend(Protocol):
    """What the Flask app needs of a backend."""

    name: str
    model: str

    def rate(self, memories: Sequence[str], agent: str | None = None, context: str | None = None) -> list[Rating]:
        """Rate each memory (non-empty strings); same length and order as ``memories``. ``agent`` (whose
        memory) and ``context`` (what else matters) are hints a backend may use."""
        ...

    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[Insight]:
        """Up to ``max_insights`` insights about ``memories`` (``{"id", "text", "rating": int 1..10 | None}``,
        ids unique), each citing the ids it rests on; ``[]`` when nothing relates."""
        ...

    def stats(self) -> dict:
        """Counters for ``GET /health``."""
        ...


def load_examples(path: str | Path = DATA_PATH) -> list[tuple[str, int]]:
    """Read ``{"memory": str, "rating": int 1..10}`` lines.

    Raises:
        ValueError: naming the file and line of a malformed entry.
    """
    out = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
            text, rating = item["memory"], item["rating"]
        except (json.JSONDecodeError, KeyError, TypeError) as err:
            raise ValueError(f"{path}: line {n}: expected {{'memory': str, 'rating': int}} ({err})") from None
        if not isinstance(text, str) or not text.strip() or not isinstance(rating, int) or not 1 <= rating <= 10:
            raise ValueError(f"{path}: line {n}: 'memory' must be non-empty text and 'rating' an integer 1..10")
        out.append((text, rating))
    return out


def _ridge(x: np.ndarray, y: np.ndarray, lam: float) -> tuple[np.ndarray, float]:
    """Ridge regression of ``y`` on ``x`` (centred target): weights ``(dim,)`` and the mean."""
    mean = float(y.mean())
    x64 = x.astype(np.float64)
    weights = np.linalg.solve(x64.T @ x64 + lam * np.eye(x.shape[1]), x64.T @ (y - mean))
    return weights, mean


def _blend(v: np.ndarray, x: np.ndarray, y: np.ndarray, weights: np.ndarray, mean: float, k: int):
    """Mean of the ridge and the k-NN estimates for vectors ``v`` against labelled ``x, y``."""
    ridge = v.astype(np.float64) @ weights + mean
    sims = v @ x.T
    k = min(k, len(y))
    idx = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    top = np.take_along_axis(sims, idx, axis=1).astype(np.float64)
    w = np.maximum(top, 0.0) ** 4 + 1e-12
    knn = (w * y[idx]).sum(axis=1) / w.sum(axis=1)
    return (ridge + knn) / 2.0, ridge, knn, idx


MIN_EXAMPLES_FOR_LENGTH = 10
"""Labelled examples needed before :class:`EmbeddingRater` fits its length correction (three terms)."""


def length_design(blend: np.ndarray, texts: Sequence[str], max_words: int) -> np.ndarray:
    """The length correction's design matrix ``(n, 3)``: ``[1, blend, ln(words)]`` per text, ``words`` the
    text's whitespace-separated words, clipped to ``1..max_words`` (the longest labelled example's: the
    correction is not extrapolated to the simulation's longer texts, such as a day's plan of 120 words).
    ``blend`` is the ridge and k-NN mean, ``(n,)``."""
    words = np.array([min(max_words, max(1, len(t.split()))) for t in texts], dtype=np.float64)
    return np.column_stack([np.ones(len(words)), np.asarray(blend, dtype=np.float64), np.log(words)])


class EmbeddingRater:
    """Offline importance rater over sentence embeddings: ridge regression blended with k-NN.

    The prediction is the mean of two estimators fitted on the labelled set:

    * ridge regression of the rating on the embedding (``lam`` = L2 penalty), which generalises over
      wording, and
    * the similarity-weighted mean rating of the ``k`` nearest labelled memories (cosine similarity,
      weights ``max(sim, 0) ** 4``), which anchors it to concrete examples and gives the explanation.

    A long text's embedding averages over all it describes, so both estimators rate long important texts
    low (held out, before this correction: texts of 20 words or more labelled 6 or more came out 1.3
    points low, shorter ones 0.1 to 0.3). The blend is therefore corrected for length by a linear term
    fitted on its 5-fold out-of-fold predictions over the labelled set: ``a + b * blend + c * ln(words)``
    (least squares; ``words`` no more than the longest example's, see :func:`length_design`). Both
    estimators shrink towards the mean rating, so the corrected blend is then calibrated by quantile
    mapping: its out-of-fold values are mapped, rank for rank, onto the labels' distribution (keeps the
    order, restores the spread). Then it is rounded and clamped to 1..10.

    On held-out fifths of the shipped set it reaches a Spearman correlation of about 0.83 with the labels
    and a mean absolute error of about 1.1 rating points; on the shipped worlds' 28 event texts, labelled
    apart and never fitted, 0.78 and 0.9 (``python -m simulacra.rating.evaluate``, ``docs/rater.md``).

    Args:
        embedder: any :class:`simulacra.embeddings.Embedder` (unit-length vectors expected).
        examples: labelled ``(memory, rating)`` pairs; default the shipped set.
        k: neighbours consulted (>= 1).
        lam: ridge penalty (> 0).
        cache_size: memories whose rating is remembered (identical memories are answered from the cache).
        reflector: what :meth:`reflect` delegates to; default an
            :class:`~simulacra.rating.reflection.OfflineReflector` over the same ``embedder``.
    """

    name = "offline-embedding"

    def __init__(self, embedder, examples: Sequence[tuple[str, int]] | None = None, k: int = 11,
                 lam: float = 1.0, cache_size: int = 100_000, reflector: OfflineReflector | None = None):
        self.embedder = embedder
        self.reflector = reflector if reflector is not None else OfflineReflector(embedder)
        self.examples = list(examples) if examples is not None else load_examples()
        if not self.examples:
            raise ValueError("the embedding rater needs at least one labelled example")
        self.k = max(1, min(k, len(self.examples)))
        self.lam = lam
        self.model = f"ridge+knn over {getattr(embedder, 'name', 'embedder')} (k={self.k}, n={len(self.examples)})"
        self._ratings = np.array([r for _, r in self.examples], dtype=np.float64)
        self._max_words = max(len(t.split()) for t, _ in self.examples)
        self._fitted = None
        self._cache = RatingCache(cache_size)
        self._lock = threading.Lock()
        self._fit_lock = threading.Lock()
        self.counts = {"reflections": 0, "insights": 0}

    def fit(self) -> None:
        """Fit now (embedding every example: about 10 s on 2 idle cores with exact embedding, a minute under load)
        instead of at the first rating; a rater started in-process is fitted before the run's first tick
        (:func:`simulacra.rater.connect_rater`). Idempotent and thread-safe: a request that comes while another
        fits waits for that fit instead of starting its own (a client retrying a first rating that timed out used
        to start one fit per retry, and none finished)."""
        self._fit()

    def _fit(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, float, np.ndarray, np.ndarray, np.ndarray]:
        """Embed the examples, fit the ridge, and the length correction and the quantile map from 5-fold
        out-of-fold predictions."""
        if self._fitted is not None:
            return self._fitted
        with self._fit_lock:
            if self._fitted is not None:
                return self._fitted
            x = self.embedder.embed([t for t, _ in self.examples]).astype(np.float32)
            y = self._ratings
            folds = np.arange(len(y)) % 5
            oof = np.empty(len(y))
            for f in range(5):
                tr = folds != f
                if not tr.any():  # fewer than 2 examples: no calibration possible
                    oof[:] = y
                    break
                w, m = _ridge(x[tr], y[tr], self.lam)
                oof[~tr] = _blend(x[~tr], x[tr], y[tr], w, m, self.k)[0]
            design = length_design(oof, [t for t, _ in self.examples], self._max_words)
            if len(y) >= MIN_EXAMPLES_FOR_LENGTH:
                coef = np.linalg.lstsq(design, y, rcond=None)[0]
            else:  # too few to fit three terms: the blend as it is
                coef = np.array([0.0, 1.0, 0.0])
            weights, mean = _ridge(x, y, self.lam)
            self._fitted = (x, y, weights, mean, coef, np.sort(design @ coef), np.sort(y))
        return self._fitted

    def predict(self, vectors: np.ndarray, texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                                       np.ndarray]:
        """Raw predictions for memories ``texts`` embedded as ``vectors`` ``(n, dim)``.

        Returns:
            ``(calibrated blend, ridge, knn, neighbour indices (n, k))``; floats, not yet rounded.
        """
        x, y, weights, mean, coef, fitted_sorted, y_sorted = self._fit()
        blend, ridge, knn, idx = _blend(np.asarray(vectors, dtype=np.float32), x, y, weights, mean, self.k)
        corrected = length_design(blend, texts, self._max_words) @ coef
        return np.interp(corrected, fitted_sorted, y_sorted), ridge, knn, idx

    def rate(self, memories: Sequence[str], agent: str | None = None, context: str | None = None) -> list[Rating]:
        """Offline ratings; ``agent`` and ``context`` are accepted and not used (the labelled set has neither)."""
        todo = self._cache.missing(memories)
        fresh = {}
        if todo:
            blend, ridge, knn, idx = self.predict(self.embedder.embed(todo), todo)
            for i, text in enumerate(todo):
                rating = int(min(10, max(1, round(float(blend[i])))))
                near = "; ".join(f"'{self.examples[j][0]}' ({self.examples[j][1]})" for j in idx[i][:2])
                fresh[text] = Rating(rating, f"Regression says {ridge[i]:.1f}, nearest rated memories "
                                             f"say {knn[i]:.1f} ({near}).")
        return self._cache.answer(memories, fresh)

    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[Insight]:
        """Insights about ``memories`` from the reflector (see
        :meth:`simulacra.rating.reflection.OfflineReflector.reflect`); counted in :meth:`stats` as ``reflections``
        (calls) and ``insights`` (returned)."""
        insights = self.reflector.reflect(memories, agent=agent, max_insights=max_insights)
        with self._lock:
            self.counts["reflections"] += 1
            self.counts["insights"] += len(insights)
        return insights

    def stats(self) -> dict:
        with self._lock:
            return {"cache_size": len(self._cache), "rated": self._cache.rated, "cache_hits": self._cache.hits,
                    **self.counts, "examples": len(self.examples)}


def rate_with_usage(backend, memories: Sequence[str], agent: str | None = None, context: str | None = None
                    ) -> tuple[list[Rating], dict | None]:
    """``backend``'s ratings of ``memories`` (same order), and what they cost when the backend says it
    (``rate_with_usage``, the LLM backend: ``{"llm_calls", "llm_errors", "truncations", "fallbacks": int,
    "seconds": float}``), else ``None``. The one way both the in-process rater
    (:class:`simulacra.rater.InProcessRater`) and the HTTP app (``rater_server``) ask a backend."""
    with_usage = getattr(backend, "rate_with_usage", None)
    if callable(with_usage):
        return with_usage(memories, agent=agent, context=context)
    return backend.rate(memories, agent=agent, context=context), None


def build_backend(rater_config, embedder, llm=None):
    """The rater backend a run or ``simulacra rater`` uses: the offline k-NN rater
    (:class:`EmbeddingRater` over ``embedder`` with ``rater_config.neighbours``), wrapped by the language-model
    rater (:meth:`simulacra.rating.llm.LLMRater.from_config`, the offline rater as its fallback) when ``llm`` is
    a model. ``rater_config`` is a :class:`simulacra.config.RaterConfig`."""
    backend = EmbeddingRater(embedder, k=rater_config.neighbours)
    if llm is None:
        return backend
    from simulacra.rating.llm import LLMRater

    return LLMRater.from_config(llm, backend, rater_config)
