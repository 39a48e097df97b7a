"""embedding.backend: torch, onnx (ONNX Runtime) and onnx-int8 give the model's vectors; exact mode's promise holds
for each; the export is made once; a run records its backend and its readers refuse to mix embeddings."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from simulacra.config import EmbeddingConfig
from simulacra.embeddings import EmbeddingError, build_embedder, threads_change_vectors

DATA = Path(__file__).resolve().parent / "data"

#: texts of mixed lengths, so that a batch pads most of them
TEXTS = [f"{name} said at the {place}: " + "the mill wheel stopped and the river rose " * (i % 7) + f"({i})"
         for i, (name, place) in enumerate([("Ezra", "mill"), ("Ruth", "orchard"), ("Greta", "tavern"),
                                            ("Bram", "square"), ("Leila", "school")] * 13)]


@pytest.fixture(scope="module")
def onnx_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("onnx"))


def _embedder(backend: str, onnx_dir: str, exact: bool = True):
    return build_embedder(EmbeddingConfig(backend=backend, exact=exact, onnx_dir=onnx_dir), cached=False)


@pytest.fixture(scope="module")
def torch_vectors():
    return _embedder("torch", "", exact=True).embed(TEXTS)


def test_onnx_gives_the_model_s_vectors_and_batches_do_not_change_them(onnx_dir, torch_vectors):
    e = _embedder("onnx", onnx_dir)
    alone = np.stack([e.embed([t])[0] for t in TEXTS])
    assert float((alone * torch_vectors).sum(axis=1).min()) > 0.99999  # float rounding only
    assert not np.array_equal(alone, torch_vectors)  # a different engine: not the same bits
    batched = _embedder("onnx", onnx_dir, exact=False)
    for size in (2, 7, 16, 64):  # the promise exact mode relies on under onnx: the same bits in any batch
        batched.batch_size = size
        assert np.array_equal(batched.embed(TEXTS), alone), size
    assert np.array_equal(e.embed(TEXTS), alone)  # exact mode batches under onnx


def test_onnx_int8_is_close_and_exact_mode_embeds_each_text_alone(onnx_dir, torch_vectors):
    exact = _embedder("onnx-int8", onnx_dir)
    vectors = exact.embed(TEXTS)
    assert float((vectors * torch_vectors).sum(axis=1).min()) > 0.98  # per-channel int8 weights
    alone = np.stack([exact.embed([t])[0] for t in TEXTS[:10]])
    assert np.array_equal(vectors[:10], alone)
    batched = _embedder("onnx-int8", onnx_dir, exact=False).embed(TEXTS)
    assert not np.array_equal(batched, vectors)  # activations quantised per batch: why exact mode goes one by one


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_onnx_vectors_do_not_depend_on_the_thread_count(onnx_dir, backend):
    """What lets each Ray worker embed with its own share of the cores (simulacra.cluster.shard_threads): ONNX
    Runtime's vectors are the same bits with 1, 2 and 3 threads, alone and batched; torch's are not promised to be
    (threads_change_vectors)."""
    assert not threads_change_vectors(backend) and threads_change_vectors("torch")
    for exact in (True, False):
        vectors = [build_embedder(EmbeddingConfig(backend=backend, exact=exact, onnx_dir=onnx_dir, threads=n),
                                  cached=False).embed(TEXTS) for n in (1, 2, 3)]
        assert all(np.array_equal(vectors[0], v) for v in vectors[1:]), exact


class _Recorder:
    """An ONNX Runtime session that records the attention masks of the forward passes it is asked for."""

    def __init__(self, session):
        self.session, self.masks = session, []

    def run(self, outputs, feeds):
        self.masks.append(feeds["attention_mask"])
        return self.session.run(outputs, feeds)


@pytest.mark.parametrize("size", [64, 4])
def test_onnx_runs_texts_of_equal_token_count_together_unpadded(onnx_dir, size):
    e = _embedder("onnx", onnx_dir, exact=False)
    e.batch_size = size
    alone = np.stack([e.embed([t])[0] for t in TEXTS])
    e._session = recorder = _Recorder(e._session)
    vectors = e.embed(TEXTS)
    counts = [len(e._load().tokenizer(t)["input_ids"]) for t in TEXTS]
    groups = {n: counts.count(n) for n in counts}
    assert len(groups) > 3 and max(groups.values()) > 4  # several groups, some of more than 4 texts
    assert all(m.all() for m in recorder.masks)  # no padded row in any pass
    assert sorted(m.shape[1] for m in recorder.masks) == sorted(
        n for n, k in groups.items() for _ in range(-(-k // size)))  # one pass per group of at most `size`
    assert np.array_equal(vectors, alone)  # in the texts' order, the bits of each text alone


def test_the_export_leaves_the_process_s_logging_and_warnings_alone(tmp_path):
    """torch's exporter warns while tracing, and ONNX Runtime's quantiser logs on the root logger (which would give
    a process without logging set up a handler): neither reaches the user's process."""
    code = ("import logging\n"
            "from simulacra.config import EmbeddingConfig\n"
            "from simulacra.embeddings import build_embedder\n"
            f"e = build_embedder(EmbeddingConfig(backend='onnx-int8', onnx_dir={str(tmp_path)!r}))\n"
            "e.embed(['the mill wheel stopped'])\n"
            "print(e.inner.onnx_file.name, len(logging.getLogger().handlers), len(logging.getLogger().filters))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["model-int8.onnx", "0", "0"]  # exported here; root logger as it was
    assert "Warning" not in r.stderr and "quantization" not in r.stderr, r.stderr[-2000:]


def test_the_export_is_made_once_and_named_by_the_model(onnx_dir):
    e = _embedder("onnx", onnx_dir)
    e.embed(["one"])
    first = e.onnx_file
    assert first.parent.parent == Path(onnx_dir) and first.parent.name.startswith("all-MiniLM-L6-v2-")
    stamp = first.stat().st_mtime_ns
    again = _embedder("onnx", onnx_dir)
    again.embed(["two"])
    assert again.onnx_file == first and first.stat().st_mtime_ns == stamp


def test_a_missing_onnx_package_is_a_clear_error(tmp_path):
    code = ("import sys; sys.modules['onnx'] = None\n"
            "from simulacra.config import EmbeddingConfig\n"
            "from simulacra.embeddings import EmbeddingError, build_embedder, threads_change_vectors\n"
            f"e = build_embedder(EmbeddingConfig(backend='onnx', onnx_dir={str(tmp_path)!r}))\n"
            "try:\n    e.embed(['x'])\nexcept EmbeddingError as err:\n    print(err)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "exports the model once with the onnx package, which is not installed: pip install 'simulacra[onnx]'" \
        in r.stdout


def test_a_run_records_its_backend_and_an_interview_refuses_another(tmp_path, onnx_dir, rater_url):
    from simulacra.interview import interview
    from simulacra.town import Town, open_run

    with Town.create(DATA / "tiny.yaml", personas_dir=DATA / "personas", db_dir=tmp_path, run_name="o",
                     rater={"url": rater_url}, embedding={"backend": "onnx", "onnx_dir": onnx_dir}) as town:
        town.run(ticks=2, progress=False)
        assert town.sim.rt.embedder.inner.backend == "onnx"
    run = open_run(town.run_dir)
    assert run.header["config"]["embedding"]["backend"] == "onnx"
    assert run.interview("ann", "What is at the well?")["answer"]
    with pytest.raises(EmbeddingError, match="embedded with embedding.backend onnx; embedding with torch"):
        interview(town.run_dir, "ann", "What is at the well?", overrides=["embedding.backend=torch"])
    with Town.resume(town.run_dir, rater_url=rater_url) as again:  # a resume embeds with the run's own backend
        assert again.config.embedding.backend == "onnx"


def test_a_header_without_a_backend_was_embedded_with_torch():
    from simulacra.config import config_from_dict, recorded_config

    assert config_from_dict(recorded_config({"embedding": {"model": "all-MiniLM-L6-v2"}})).embedding.backend == \
        "torch"


@pytest.mark.parametrize("cached", [True, False])
def test_embed_refuses_one_string_and_names_a_non_string_item(cached):
    """One str used to be embedded character by character ((9, 384) for "some text"), and None failed inside
    sentence-transformers: a TypeError before the model is loaded."""
    e = build_embedder(EmbeddingConfig(backend="torch"), cached=cached)
    with pytest.raises(TypeError, match=r"texts: expected a list of strings, got one str"):
        e.embed("some text")
    with pytest.raises(TypeError, match=r"texts\[1\]: expected a string, got NoneType"):
        e.embed(["fine", None])
    with pytest.raises(TypeError, match="texts: expected a list of strings, got int"):
        e.embed(5)
    if cached:
        assert len(e) == 0 and e.misses == 0  # nothing cached or counted
    else:
        assert e._model is None  # refused before the model was loaded


@pytest.mark.parametrize("config", ["onnx", {"backend": "torch"}, 3])
def test_build_embedder_asks_for_an_embedding_config(config):
    with pytest.raises(TypeError, match=f"config: expected an EmbeddingConfig.*got {type(config).__name__}"):
        build_embedder(config)
