"""Shared fixtures: one real embedder and one real rater server (127.0.0.1, free port) per session."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import pytest  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
#: the scripted mind tells every news item in every meeting (its gossip rule before graded became the default): for
#: tests of what passing news on does (retelling, ratings of told news, diffusion, kills in the phases it reaches),
#: which need it passed on for sure in a few ticks of a tiny town
TELL_ALL = "simulation.gossip=tell-all"


@pytest.fixture(scope="session")
def embedder():
    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import build_embedder

    return build_embedder(EmbeddingConfig(exact=False))  # the default backend, as runs embed


@pytest.fixture(scope="session")
def rater_backend(embedder):
    from simulacra.rating.backends import EmbeddingRater

    return EmbeddingRater(embedder)


@pytest.fixture(scope="session")
def rater_url(rater_backend):
    """URL of a real rater app served over HTTP on a free loopback port (its model fitted before it serves, so that
    a run's first request does not wait for the fit, which on a loaded machine can outlast the client's timeout)."""
    from rater_server import ThreadedServer, create_app

    rater_backend.rate(["The rater fits its model at its first rating."])

    server = ThreadedServer(create_app(rater_backend), "127.0.0.1", 0)
    yield server.url
    server.close()


def unit(*xs: float, dim: int = 8) -> np.ndarray:
    """A unit vector of ``dim`` floats starting with ``xs`` (hand-made embeddings for exact numbers)."""
    v = np.zeros(dim, dtype=np.float32)
    v[: len(xs)] = xs
    return v / np.linalg.norm(v)


def read_stores(run_dir, owners, tiers=("static", "short_term", "long_term")) -> dict:
    """``owner -> tier -> {id: (document, metadata, embedding bytes)}`` read straight from a run's embedded town
    store (``<run_dir>/chroma``: one collection per tier, records tagged ``owner``; the tag is left out of the
    metadata returned), as a fresh process sees it; a tier without a collection reads as empty."""
    import chromadb
    from chromadb.config import Settings

    from simulacra.runtime import forget_chroma_clients

    client = chromadb.PersistentClient(path=str(Path(run_dir) / "chroma"),
                                       settings=Settings(anonymized_telemetry=False))
    names = {c.name for c in client.list_collections()}
    out = {}
    for owner in owners:
        out[owner] = {}
        for tier in tiers:
            if tier not in names:
                out[owner][tier] = {}
                continue
            got = client.get_collection(tier).get(where={"owner": owner},
                                                  include=["documents", "metadatas", "embeddings"])
            out[owner][tier] = {i: (d, {k: v for k, v in m.items() if k != "owner"},
                                    np.asarray(e, dtype=np.float32).tobytes())
                                for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"],
                                                      got["embeddings"])}
    forget_chroma_clients()
    return out
