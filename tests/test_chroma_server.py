"""A town whose memory lives on a real Chroma server (``chroma run`` on 127.0.0.1): the same retrievals, trace and
stores as the embedded run, and a resume against the server."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulacra import killpoint
from simulacra.config import load_config
from simulacra.errors import RunExistsError, StoreUnavailable
from simulacra.killpoint import InjectedFault
from simulacra.memory.chroma import ChromaServer, collection_name
from simulacra.memory.records import TIERS
from simulacra.rescore import rescore_run
from simulacra.simulation import Simulation
from tests.conftest import DATA, TELL_ALL
from tests.processes import chroma_server, free_port

TICKS = 10
AGENTS = ("ann", "ben", "cal")
#: the settings of tests/test_resume.py: within 10 ticks agents talk, consolidation promotes and forgets, they reflect;
#: the stores reach the server every third tick (2, 5, 8), the store journal holds the ticks between
SETTINGS = [TELL_ALL, "simulation.conversation_probability=1.0", "reflection.threshold=40",
            "memory.consolidation_interval_minutes=30", "memory.consolidation_age_minutes=20",
            "memory.promote_threshold=0.3", "memory.store_flush_minutes=30", "simulation.seed=3"]


@pytest.fixture(scope="module")
def chroma(tmp_path_factory):
    """A Chroma server on a free port, persisting to a temporary folder; stopped at the end of the module."""
    d = tmp_path_factory.mktemp("chroma")
    server = chroma_server(d / "data", d / "chroma.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """tests/data/tiny.yaml with the town's shared memory on and its event public, so that the shared tier is on the
    server too."""
    path = tmp_path_factory.mktemp("world") / "tiny_shared.yaml"
    text = (DATA / "tiny.yaml").read_text(encoding="utf-8")
    assert "shared_memory: false" in text and "    importance_hint: major\n" in text
    text = text.replace("shared_memory: false", "shared_memory: true")
    path.write_text(text.replace("    importance_hint: major\n", "    importance_hint: major\n    public: true\n"),
                    encoding="utf-8")
    return path


def town(world, db, name, embedder, rater_url, *extra, overwrite=False):
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS, *extra])
    return Simulation.create(world, config, personas_dir=DATA / "personas", db_dir=db, run_name=name,
                             embedder=embedder, overwrite=overwrite)


def tick_lines(run_dir):
    return (run_dir / "trace.jsonl").read_bytes().split(b"\n")[1:]


def contents(collection):
    got = collection.get(include=["documents", "metadatas", "embeddings"])
    return {i: (d, m, np.asarray(e, dtype=np.float32).tobytes())
            for i, d, m, e in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"])}


def embedded_stores(run_dir, shared=True):
    """owner -> tier -> {id: (text, metadata, embedding bytes)}, read straight from the run folder's stores."""
    from tests.conftest import read_stores

    out = read_stores(run_dir, AGENTS, TIERS)
    if shared:
        out.update(read_stores(run_dir, ["town"], ("shared",)))
    return out


def server_stores(url, run, shared=True):
    """The same, read straight from the Chroma server by the collection names of the run."""
    import chromadb
    from chromadb.config import Settings

    host, port = url.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    out = {a: {t: contents(client.get_collection(collection_name(run, a, t))) for t in TIERS} for a in AGENTS}
    if shared:
        out["town"] = {"shared": contents(client.get_collection(collection_name(run, "town", "shared")))}
    return out


@pytest.fixture(scope="module")
def embedded(tmp_path_factory, world, embedder, rater_url):
    """The reference: the town with embedded stores."""
    db = tmp_path_factory.mktemp("embedded")
    with town(world, db, "ref", embedder, rater_url) as sim:
        summary = sim.run(TICKS)
    assert summary["ticks"] == TICKS and not summary["stopped"]
    return db / "ref"


def test_collection_names_are_valid_on_the_server_and_never_shared(chroma):
    import chromadb
    from chromadb.config import Settings

    assert collection_name("fernhollow-seed0", "greta_lund", "short_term") == "fernhollow-seed0.greta_lund.short_term"
    odd = [("my run", "ann"), ("my-run", "ann"), ("a" * 80, "ann"), ("a" * 80 + "b", "ann"), ("..", "_x_"),
           ("10.0.0", "1"), ("émile's town", "ann"), ("run", "b" * 40)]
    names = {collection_name(run, owner, "long_term") for run, owner in odd}
    assert len(names) == len(odd)  # different runs or owners never share a collection
    client = chromadb.HttpClient(host="127.0.0.1", port=chroma.port, settings=Settings(anonymized_telemetry=False))
    for name in names:
        assert 3 <= len(name) <= 63 and ".." not in name
        client.get_or_create_collection(name, embedding_function=None)  # the server accepts it
        client.delete_collection(name)


def test_a_town_on_the_server_matches_the_embedded_run(tmp_path, world, embedder, rater_url, chroma, embedded):
    with town(world, tmp_path, "srv", embedder, rater_url, f"memory.chroma_url={chroma.base}") as sim:
        summary = sim.run(TICKS)
        assert sim.rt.location.remote
    assert summary["ticks"] == TICKS and not summary["stopped"]
    run_dir = tmp_path / "srv"
    # nothing of the stores is in the run folder: only the trace, the checkpoint and the like
    assert not any(p.is_dir() for p in run_dir.iterdir())
    assert tick_lines(run_dir) == tick_lines(embedded)  # the same retrievals, decisions, memory operations
    ticks = [json.loads(x) for x in tick_lines(run_dir) if x]
    ops = {o["op"] for t in ticks for o in t["memory"]}
    assert {"add", "retrieve", "move", "forget", "reflect"} <= ops
    got, want = server_stores(chroma.base, "srv"), embedded_stores(embedded)
    assert got == want
    assert sum(len(s["long_term"]) for a, s in got.items() if a != "town") > 0 and got["town"]["shared"]
    # interview reads the agent's stores on the server: the same answer and memories as from the embedded run
    from simulacra.interview import interview

    asked = [interview(d, "ann", "What happened at the well?", embedder=embedder) for d in (run_dir, embedded)]
    assert asked[0]["retrieved"] and asked[0] == asked[1]
    # rescore reads the trace alone: the same figures for both runs
    report = rescore_run(run_dir, 1, 1, 1)
    assert report["rescored"] > 0 and report["changed"] > 0
    assert {k: v for k, v in report.items() if k != "run"} == {
        k: v for k, v in rescore_run(embedded, 1, 1, 1).items() if k != "run"}


def test_a_crashed_run_resumes_against_the_server(tmp_path, world, embedder, rater_url, chroma, embedded, monkeypatch):
    ticks = [json.loads(x) for x in tick_lines(embedded) if x]
    # a tick that writes the server after three whose consolidation forgot memories: the crash comes after its
    # checkpoint, before its deletes
    crash = min(t["tick"] for t in ticks if t["tick"] >= 3 and (t["tick"] + 1) % 3 == 0
                and any(o["op"] == "forget" for u in ticks[t["tick"] - 2: t["tick"] + 1] for o in u["memory"]))
    url = f"memory.chroma_url={chroma.base}"
    monkeypatch.setenv(killpoint.ENV, f"tick={crash}:phase=forget:mode=raise")
    killpoint._seen.clear()
    with town(world, tmp_path, "res", embedder, rater_url, url) as sim, pytest.raises(InjectedFault):
        sim.run(TICKS)
    monkeypatch.delenv(killpoint.ENV)
    server = ChromaServer(chroma.base, "res")
    assert server.run_collections()  # the half-written tick is on the server
    with Simulation.resume(tmp_path / "res", embedder=embedder) as sim:
        assert sim.ticks_done == crash + 1 and sim.rt.location.remote
        summary = sim.run(TICKS - sim.ticks_done)
    assert summary["ticks"] == TICKS and not summary["stopped"]
    assert tick_lines(tmp_path / "res") == tick_lines(embedded)
    assert server_stores(chroma.base, "res") == embedded_stores(embedded)


def test_a_new_run_does_not_take_over_a_runs_collections(tmp_path, world, embedder, rater_url, chroma):
    url = f"memory.chroma_url={chroma.base}"
    with town(world, tmp_path / "one", "same", embedder, rater_url, url) as sim:
        sim.run(1)
    with pytest.raises(RunExistsError, match="already holds .* collections of a run named same"):
        town(world, tmp_path / "two", "same", embedder, rater_url, url)
    with town(world, tmp_path / "two", "same", embedder, rater_url, url, overwrite=True) as sim:
        assert sim.ticks_done == 0
        assert all(len(m.short_term) == 0 for m in sim.memories.values())  # the old run's memories are gone


def test_no_server_is_a_clear_error_before_the_first_tick(tmp_path, world, embedder, rater_url):
    with pytest.raises(StoreUnavailable, match="Chroma server at http://127.0.0.1:.* did not answer"):
        town(world, tmp_path, "none", embedder, rater_url, f"memory.chroma_url=http://127.0.0.1:{free_port()}",
             "memory.chroma_retry_s=1")
    assert not (tmp_path / "none" / "trace.jsonl").exists()


def test_the_retry_messages_name_the_window_they_use(caplog):
    """Connecting at start retries for at most 10 s of ``memory.chroma_retry_s``: the warnings said "gives up 60 s
    after the first failure" and the error "did not answer for 13 s (memory.chroma_retry_s=10)" (audit of stop 51);
    both now name the window used and where it comes from."""
    import logging

    with caplog.at_level(logging.WARNING, logger="simulacra.memory.chroma"):
        with pytest.raises(StoreUnavailable) as err:
            ChromaServer(f"http://127.0.0.1:{free_port()}", "x", retry_s=60, connect_s=1, initial_wait_s=0.1,
                         timeout_s=1)
    words = "1 s while connecting at start; memory.chroma_retry_s=60 after that"
    assert words in str(err.value)
    assert caplog.records and all(f"gives up 1 s after the first failure: {words}" in r.getMessage()
                                  for r in caplog.records if "try" in r.getMessage())
