"""Faults of the parts, with real servers stopped and started on 127.0.0.1: the Chroma server, the rater and the
language model's server going away mid-run stop the run cleanly at its last complete tick (nothing half-written;
the message says how to resume), or are waited for when they come back within the retry window; once back, a
resumed run ends exactly like an uninterrupted one. A read-only or nearly full run folder is refused before the
first tick."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import requests

from simulacra.checkpoint import read_checkpoint
from simulacra.config import load_config
from simulacra.errors import RunFolderError
from simulacra.simulation import Simulation
from tests.conftest import DATA, ROOT
from tests.openai_double import OpenAIDouble
from tests.processes import chroma_server, rater_server
from tests.schema_answers import SchemaAnswers
from tests.test_chroma_server import SETTINGS, embedded_stores, server_stores, tick_lines

TICKS = 8


def tiny(db, name, embedder, rater_url, *extra):
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS, *extra])
    return Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=db, run_name=name,
                             embedder=embedder)


def at_tick(n, action):
    """An ``on_tick`` callback doing ``action()`` once tick ``n`` is complete (written and checkpointed)."""
    def on_tick(result):
        if result.record["tick"] == n:
            action()
    return on_tick


def assert_stopped_cleanly(summary, run_dir, part):
    """The run stopped, saying why and how to resume, with the trace and the checkpoint at the same complete tick."""
    assert summary["stopped"] and part in summary["stopped"]
    assert f"simulacra run --resume {run_dir}" in summary["stopped"]
    raw = (run_dir / "trace.jsonl").read_bytes()
    assert raw.endswith(b"\n")  # no half-written line
    lines = [x for x in tick_lines(run_dir) if x]
    ck = read_checkpoint(run_dir)
    assert ck["ticks_done"] == len(lines) == summary["ticks"] and ck["trace_bytes"] == len(raw)
    assert 0 < summary["ticks"] < TICKS
    return ck["ticks_done"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, embedder, rater_url):
    """An uninterrupted run with embedded stores."""
    db = tmp_path_factory.mktemp("ref")
    with tiny(db, "ref", embedder, rater_url) as sim:
        assert not sim.run(TICKS)["stopped"]
    return db / "ref"


@pytest.fixture
def chroma(tmp_path):
    server = chroma_server(tmp_path / "chroma", tmp_path / "chroma.log").start()
    yield server
    server.stop()


# ----------------------------------------------------------------------------------------------- Chroma server
def test_a_chroma_server_crashing_and_restarting_within_the_window_is_waited_for(tmp_path, embedder, rater_url,
                                                                                 reference, chroma):
    threads = []

    def crash_and_restart():
        chroma.stop(signal.SIGKILL)  # a crash: no clean shutdown
        threads.append(threading.Thread(target=lambda: (time.sleep(1.0), chroma.start())))
        threads[0].start()

    url = f"memory.chroma_url={chroma.base}"
    with tiny(tmp_path, "w", embedder, rater_url, url, "memory.chroma_retry_s=120") as sim:
        summary = sim.run(TICKS, at_tick(2, crash_and_restart))
        retries = sim.rt.location.retries
    threads[0].join()
    assert not summary["stopped"] and summary["ticks"] == TICKS
    assert retries > 0  # the run did meet the dead server, and waited
    assert tick_lines(tmp_path / "w") == tick_lines(reference)
    assert server_stores(chroma.base, "w", shared=False) == embedded_stores(reference, shared=False)


def test_a_chroma_server_gone_for_longer_stops_the_run_then_resume_continues_exactly(tmp_path, embedder, rater_url,
                                                                                   reference, chroma):
    run_dir = tmp_path / "g"
    with tiny(tmp_path, "g", embedder, rater_url, f"memory.chroma_url={chroma.base}", "memory.chroma_retry_s=2") as sim:
        summary = sim.run(TICKS, at_tick(3, chroma.stop))
    # tick 4 journals its memories (SETTINGS: the stores reach the server every third tick); tick 5 cannot write
    assert assert_stopped_cleanly(summary, run_dir, "Chroma server") == 5
    chroma.start()  # the same data folder, the same port
    with Simulation.resume(run_dir, embedder=embedder) as sim:
        summary = sim.run(TICKS - sim.ticks_done)
    assert not summary["stopped"] and summary["ticks"] == TICKS
    assert tick_lines(run_dir) == tick_lines(reference)
    assert server_stores(chroma.base, "g", shared=False) == embedded_stores(reference, shared=False)


def test_a_chroma_server_gone_before_the_last_write_leaves_the_memories_in_the_journal(tmp_path, embedder, rater_url,
                                                                                      reference, chroma):
    """Every tick done and checkpointed, the server gone for the run's last write of its stores: a clean stop that
    says how to finish; the resume writes what the store journal held, and the server ends as the reference."""
    run_dir = tmp_path / "e"
    with tiny(tmp_path, "e", embedder, rater_url, f"memory.chroma_url={chroma.base}", "memory.chroma_retry_s=2") as sim:
        summary = sim.run(TICKS, at_tick(TICKS - 1, chroma.stop))
    assert summary["ticks"] == TICKS and "Chroma server" in summary["stopped"]
    assert f"finish with: simulacra run --resume {run_dir}" in summary["stopped"]
    assert read_checkpoint(run_dir)["ticks_done"] == TICKS and (run_dir / "stores.journal").stat().st_size > 0
    chroma.start()
    with Simulation.resume(run_dir, embedder=embedder) as sim:
        assert sim.run(0)["stopped"] is None
    assert (run_dir / "stores.journal").stat().st_size == 0
    assert tick_lines(run_dir) == tick_lines(reference)
    assert server_stores(chroma.base, "e", shared=False) == embedded_stores(reference, shared=False)


# ----------------------------------------------------------------------------------------------- rater
def warm(rater):
    """Wait for the rater's first answer (it fits its offline model then), however slow the machine."""
    assert requests.post(f"{rater.base}/rate", json={"memory": "The kettle is warm."}, timeout=600).ok


def test_the_rater_going_away_stops_the_run_then_resume_continues_exactly(tmp_path, embedder):
    rater = rater_server(tmp_path / "rater.log").start()
    try:
        warm(rater)
        url = f"{rater.base}/rate"
        with tiny(tmp_path, "ref", embedder, url, "rater.start_local=false") as sim:
            assert not sim.run(TICKS)["stopped"]
        run_dir = tmp_path / "r"
        with tiny(tmp_path, "r", embedder, url, "rater.start_local=false", "rater.attempts=2") as sim:
            summary = sim.run(TICKS, at_tick(2, rater.stop))
        done = assert_stopped_cleanly(summary, run_dir, "rater at")
        assert done >= 3
        rater.start()  # a new process on the same port
        warm(rater)
        with Simulation.resume(run_dir, embedder=embedder) as sim:
            assert sim.ticks_done == done
            summary = sim.run(TICKS - done)
        assert not summary["stopped"] and summary["ticks"] == TICKS
        assert tick_lines(run_dir) == tick_lines(tmp_path / "ref")
    finally:
        rater.stop()


# ----------------------------------------------------------------------------------------------- language model
def test_the_llm_server_going_away_stops_the_run_then_resume_continues_exactly(tmp_path, embedder, rater_url):
    answers = SchemaAnswers(hooks={"reaction": lambda b, d: {**d, "decision": "continue"}})
    llm = ["llm.model=double-model", "llm.attempts=2", "llm.timeout_s=5", "simulation.news_min_rating=1",
           "cognition.react_min_rating=1"]
    with OpenAIDouble() as double:
        double.script([], then=answers)
        with tiny(tmp_path, "ref", embedder, rater_url, *llm, f"llm.base_url={double.url}") as sim:
            assert not sim.run(TICKS)["stopped"]
    double = OpenAIDouble()
    port = double.port
    double.script([], then=answers)
    run_dir = tmp_path / "l"
    with tiny(tmp_path, "l", embedder, rater_url, *llm, f"llm.base_url={double.url}") as sim:
        summary = sim.run(TICKS, at_tick(1, double.close))
    done = assert_stopped_cleanly(summary, run_dir, "cannot connect")
    with OpenAIDouble(port=port) as again:  # the server is back at the same address
        again.script([], then=answers)
        with Simulation.resume(run_dir, embedder=embedder) as sim:
            assert sim.ticks_done == done
            summary = sim.run(TICKS - done)
        assert again.requests
    assert not summary["stopped"] and summary["ticks"] == TICKS
    assert tick_lines(run_dir) == tick_lines(tmp_path / "ref")


# ----------------------------------------------------------------------------------------------- the run folder
def test_too_little_free_space_is_refused_before_the_first_tick(tmp_path, embedder, rater_url):
    with pytest.raises(RunFolderError, match=r"MB free, less than the 1e\+12 MB a run needs \(simulation.min_free_mb"):
        tiny(tmp_path, "full", embedder, rater_url, "simulation.min_free_mb=1e12")
    assert not (tmp_path / "full").exists()  # the folder made for the run is gone again
    with tiny(tmp_path, "ok", embedder, rater_url, "simulation.min_free_mb=1") as sim:  # what the disk has
        assert sim.run(1)["ticks"] == 1


@contextlib.contextmanager
def read_only(folder):
    """``folder`` and everything in it read-only while the block runs: write permissions removed (chmod a-w) for a
    normal user; for root, whom permissions do not stop, a read-only bind mount (skipped where mounting is not
    allowed)."""
    if os.geteuid() != 0:
        paths = [folder, *folder.rglob("*")]
        modes = {p: p.stat().st_mode for p in paths}
        for p in paths:
            p.chmod(modes[p] & ~0o222)
        try:
            yield
        finally:
            for p in reversed(paths):
                p.chmod(modes[p])
        return
    for argv in (["mount", "--bind", str(folder), str(folder)], ["mount", "-o", "remount,ro,bind", str(folder)]):
        r = subprocess.run(argv, capture_output=True, text=True)
        if r.returncode != 0:
            subprocess.run(["umount", str(folder)], capture_output=True)
            pytest.skip(f"running as root and cannot make a read-only mount: {r.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def test_a_read_only_run_folder_is_refused_before_the_first_tick(tmp_path, embedder, rater_url):
    top = tmp_path / "db"
    with tiny(top, "ro", embedder, rater_url) as sim:
        sim.run(2)
    run_dir = top / "ro"
    before = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with read_only(top):
        for args in (["--resume", str(run_dir)],  # a read-only run folder
                     ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--db-dir",
                      str(top), "--run-name", "new", "--rater-url", rater_url, "--ticks", "1"]):  # a read-only db dir
            r = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--quiet", *args], cwd=ROOT,
                               capture_output=True, text=True, timeout=300)
            assert r.returncode == 2, r.stderr
            assert "Traceback" not in r.stderr
            folder = run_dir if args[0] == "--resume" else top / "new"
            assert f"simulacra: error: the run folder {folder} cannot be" in r.stderr, r.stderr
            assert "Permission denied" in r.stderr or "Read-only file system" in r.stderr
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == before
    assert not (top / "new").exists()
    assert json.loads(before["checkpoint.json"])["ticks_done"] == 2


def test_a_rater_whose_language_model_is_gone_answers_503_and_the_client_gives_up(tmp_path, rater_backend):
    """The rater's model server closed: the rater does not quietly rate offline for the rest of the run; it answers
    503 naming the model, and the run's client, after its retries, raises the RaterError that stops the run."""
    from rater_server import ThreadedServer, create_app
    from simulacra.errors import RaterError
    from simulacra.llm import OpenAIChatModel, RetryingModel
    from simulacra.rater import RaterClient
    from simulacra.rating.llm import LLMRater

    double = OpenAIDouble()
    double.script([], then=SchemaAnswers())
    model = RetryingModel(OpenAIChatModel("double-model", base_url=double.url, timeout_s=2.0), attempts=2,
                          initial_wait_s=0.01, max_wait_s=0.05)
    backend = LLMRater(model, rater_backend, batch_size=4)
    server = ThreadedServer(create_app(backend), "127.0.0.1", 0)
    try:
        client = RaterClient(server.url, timeout_s=10, attempts=2)
        assert len(client.rate_many(["Ann found a coin by the well."])) == 1 and double.requests  # the model rated
        double.close()
        resp = requests.post(server.url, json={"memory": "Ben lost his keys."}, timeout=30)
        assert resp.status_code == 503 and "unreachable" in resp.json()["error"]
        with pytest.raises(RaterError, match="failed after 2 attempts: HTTP 503"):
            client.rate_many(["Cal saw a fox in the field."])
    finally:
        server.close()
        double.close()
