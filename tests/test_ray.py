"""Agent shards as Ray actors (simulacra.cluster): a town on 2 and 3 workers writes the same trace and memories as in
one process; a worker killed mid-run stops the run with a message, and the resumed run ends as the uninterrupted one
(also after the driver was killed); the command line runs it. One local Ray
instance (2 CPUs) for the whole module, as Ray's testing guide advises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray")

from simulacra.config import load_config  # noqa: E402
from simulacra.errors import CheckpointError  # noqa: E402
from simulacra.simulation import Simulation  # noqa: E402
from tests.conftest import TELL_ALL  # noqa: E402
from tests.schema_answers import SchemaAnswers  # noqa: E402

pytest_plugins = ["tests.openai_double"]

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[1]
BUSY = [TELL_ALL, "simulation.conversation_probability=1.0", "reflection.threshold=40",
        "memory.consolidation_interval_minutes=30", "memory.consolidation_age_minutes=20",
        "memory.promote_threshold=0.3", "rater.url=http://127.0.0.1:0/rate"]
TICKS = 12


@pytest.fixture(scope="module")
def ray_local():
    ray.init(num_cpus=2, include_dashboard=False)
    yield
    ray.shutdown()


def read_memories(run_dir: Path, workers: int) -> dict:
    """agent -> sorted (id, text, kind, rating, time, metadata) of every tier, read back from the run's Chroma stores
    (one per worker: ``shard-<k>/``, or the run folder's own)."""
    from simulacra.memory.chroma import EmbeddedChroma

    out: dict = {}
    folders = [run_dir] if workers == 1 else [run_dir / f"shard-{k}" for k in range(workers)]
    for folder in folders:
        client = EmbeddedChroma(folder).client("town")
        for coll in client.list_collections():
            if coll.name in ("shared", "trash"):
                continue
            got = coll.get(include=["documents", "metadatas"])
            for i, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                meta = dict(meta)
                owner = meta.pop("owner", None)
                out.setdefault(owner, set()).add((coll.name, i, doc, json.dumps(meta, sort_keys=True)))
    return {k: sorted(v) for k, v in out.items()}


def run(tmp_path, name, workers, embedder=None):
    config = load_config(None, BUSY)
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name=name, embedder=embedder, workers=workers) as sim:
        summary = sim.run(TICKS)
    run_dir = tmp_path / name
    return run_dir.joinpath("trace.jsonl").read_bytes().split(b"\n")[1:], read_memories(run_dir, workers), summary


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, ray_local):
    from simulacra.embeddings import build_embedder

    return run(tmp_path_factory.mktemp("one"), "one", 1, build_embedder())


@pytest.mark.parametrize("workers", [2, 3])
def test_a_town_on_workers_is_the_town_in_one_process(tmp_path, one_process, workers):
    lines, memories, summary = run(tmp_path, f"w{workers}", workers)
    assert (tmp_path / f"w{workers}" / f"shard-{workers - 1}").is_dir()  # each worker its own store
    assert summary["stopped"] is None and len(summary["shards"]) == workers
    assert lines == one_process[0]
    assert memories == one_process[1] and sum(len(v) for v in memories.values()) > 30
    for key in ("agents", "events", "mind", "shared_memory", "ticks", "game_time"):
        assert summary[key] == one_process[2][key], key
    assert any(ev["remembered_by"] for ev in summary["events"])  # asked of every shard's stores
    # the tools that read a finished run find each agent's stores in its shard's folder: the same interview
    from simulacra.interview import interview

    asked = [interview(d, "ann", "What happened at the well?") for d in (tmp_path / f"w{workers}",
                                                                          Path(one_process[2]["run_dir"]))]
    assert asked[0]["retrieved"] and asked[0] == asked[1]


def server_memories(url: str, run: str, agents) -> dict:
    """As :func:`read_memories`, read from the run's collections on a Chroma server."""
    import chromadb
    from chromadb.config import Settings

    from simulacra.memory.chroma import collection_name
    from simulacra.memory.records import TIERS

    host, port = url.removeprefix("http://").split(":")
    client = chromadb.HttpClient(host=host, port=int(port), settings=Settings(anonymized_telemetry=False))
    out: dict = {}
    for agent in agents:
        for tier in TIERS:
            got = client.get_collection(collection_name(run, agent, tier)).get(include=["documents", "metadatas"])
            for i, doc, meta in zip(got["ids"], got["documents"], got["metadatas"]):
                meta = {k: v for k, v in meta.items() if k != "owner"}
                out.setdefault(agent, set()).add((tier, i, doc, json.dumps(meta, sort_keys=True)))
    return {k: sorted(v) for k, v in out.items()}


def test_workers_keep_the_run_on_one_chroma_server(tmp_path, one_process):
    """``--workers 2 --chroma-url``: every shard writes its agents' collections on one real ``chroma run`` server;
    the trace and every agent's memories are those of the run in one process, and ``interview`` reads them there."""
    from simulacra.interview import interview
    from tests.processes import chroma_server

    server = chroma_server(tmp_path / "chroma", tmp_path / "chroma.log").start()
    try:
        config = load_config(None, [*BUSY, f"memory.chroma_url={server.base}"])
        with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                               run_name="srv", workers=2) as sim:
            summary = sim.run(TICKS)
        assert summary["stopped"] is None
        run_dir = tmp_path / "srv"
        assert not list(run_dir.glob("shard-*/*.sqlite3")) and not list(run_dir.glob("shard-*/town"))
        assert run_dir.joinpath("trace.jsonl").read_bytes().split(b"\n")[1:] == one_process[0]
        assert server_memories(server.base, "srv", list(one_process[1])) == one_process[1]
        asked = [interview(d, "ben", "Who did I talk to?") for d in (run_dir, Path(one_process[2]["run_dir"]))]
        assert asked[0]["retrieved"] and asked[0] == asked[1]
    finally:
        server.stop()


def test_the_onnx_backend_on_workers_is_the_onnx_backend_in_one_process(tmp_path, ray_local):
    """``embedding.backend: onnx`` (issue 27): each worker loads the exported model (exported once, under a file
    lock, whichever process comes first) and the run on 2 workers is the run in one process, byte for byte,
    although each worker embeds with its share of the node's 2 CPUs (1 thread) where the process used 2."""
    pytest.importorskip("onnxruntime")
    config = load_config(None, [*BUSY, "embedding.backend=onnx"])
    lines, threads = {}, {}
    for name, workers in (("one", 1), ("two", 2)):
        with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                               run_name=name, workers=workers) as sim:
            sim.run(6)
            threads[name] = ([i["embedding_threads"] for i in sim.cluster.infos] if sim.cluster is not None
                             else sim.rt.embedder.inner.threads or torch.get_num_threads())
        lines[name] = (tmp_path / name / "trace.jsonl").read_bytes().split(b"\n")
    header = json.loads(lines["two"][0])
    assert header["config"]["embedding"]["backend"] == "onnx" and header["workers"] == 2
    assert header["config"]["embedding"]["threads"] == 0  # the run's config is the one it was given
    assert threads == {"one": torch.get_num_threads(), "two": [1, 1]}  # 2 CPUs (ray_local) for 2 workers
    assert lines["two"][1:] == lines["one"][1:] and len(lines["one"]) > 6


def test_resume_with_another_number_of_workers_on_a_chroma_server(tmp_path, one_process):
    """A run on a real ``chroma run`` server taken up in other shapes: 2 workers (one killed mid-run, the other has
    done its part of the next tick) resumed on 3 by the command line, whose process is killed inside tick 5; then in
    one process, then on 2 workers again. Each time the agents' latest memories are only in the old shape's store
    journals, which the new shape does not read: the old shape brings them to the server first. The run ends with
    the trace and memories of the uninterrupted run in one process, and the tools find its agents' stores by the last
    shape. The same run's embedded stores cannot move between shards: refused, naming the shape to resume it in."""
    from simulacra.checkpoint import checkpoint_shards, read_checkpoint
    from simulacra.interview import interview
    from tests.processes import chroma_server

    def journaled(folder: Path) -> bool:
        return (folder / "stores.journal").is_file() and (folder / "stores.journal").stat().st_size > 0

    server = chroma_server(tmp_path / "chroma", tmp_path / "chroma.log").start()
    try:
        config = load_config(None, [*BUSY, f"memory.chroma_url={server.base}"])
        run_dir = tmp_path / "reshaped"
        with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                               run_name="reshaped", workers=2) as sim:
            for _ in range(3):  # ticks, not a run: the stores are not written to the server at a run's end
                sim.step()
            os.kill(sim.cluster.infos[1]["pid"], signal.SIGKILL)
            assert "the worker of shard 1 died" in sim.run(3)["stopped"]
        assert journaled(run_dir / "shard-0") and journaled(run_dir / "shard-1")
        r = _cli("--resume", str(run_dir), "--workers", "3", "--quiet", "--json",
                 env={**os.environ, "SIMULACRA_KILL_AT": "tick=5:phase=trace"})
        assert r.returncode == -signal.SIGKILL, r.stderr
        assert checkpoint_shards(read_checkpoint(run_dir)) == 3
        assert journaled(run_dir / "shard-0") and journaled(run_dir / "shard-1")  # ticks 3 and 4 of ann and ben
        with Simulation.resume(run_dir, workers=1) as sim:  # one process: it reads no shard's journal
            assert sim.cluster is None and sim.ticks_done == 5
            sim.run(4)
        with Simulation.resume(run_dir, workers=2) as sim:
            assert sim.cluster is not None and sim.cluster.n == 2 and sim.ticks_done == 9
            summary = sim.run(TICKS - 9)
        assert summary["stopped"] is None and summary["ticks"] == TICKS
        assert run_dir.joinpath("trace.jsonl").read_bytes().split(b"\n")[1:] == one_process[0]
        assert server_memories(server.base, "reshaped", list(one_process[1])) == one_process[1]
        asked = [interview(d, "cal", "What did I hear today?") for d in (run_dir, Path(one_process[2]["run_dir"]))]
        assert asked[0]["retrieved"] and asked[0] == asked[1]
    finally:
        server.stop()
    embedded = tmp_path / "embedded"
    with Simulation.create(DATA / "tiny.yaml", load_config(None, BUSY), personas_dir=DATA / "personas",
                           db_dir=tmp_path, run_name="embedded", workers=2) as sim:
        sim.run(2)
    with pytest.raises(CheckpointError, match=r"written by 2 workers; resuming it on 3 workers needs its memory on "
                                              r"a Chroma server.*--workers 2"):
        Simulation.resume(embedded, workers=3)


def test_a_scenario_with_recall_probes_goes_on_on_workers(tmp_path, ray_local):
    """The shortened recall scenario started in one process on a Chroma server and taken up half way on 2 workers:
    its tellings and recall probes go on there (each shard probes its agents, the town merges the records), and the
    trace, probes included, is the run's in one process."""
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.setup import run_scenario, start_run
    from simulacra.evaluation.variants import variant
    from tests.processes import chroma_server

    sc = load_scenario(DATA / "week" / "recall-short.yaml")
    base = ["rater.url=http://127.0.0.1:0/rate", "simulation.seed=5"]
    run_scenario(sc, load_config(None, base), variant("full"), tmp_path, "one")
    server = chroma_server(tmp_path / "chroma", tmp_path / "chroma.log").start()
    try:
        sim, ticks = start_run(sc, load_config(None, [*base, f"memory.chroma_url={server.base}"]), variant("full"),
                               tmp_path, "moved")
        with sim:
            sim.run(ticks // 2)
        with Simulation.resume(tmp_path / "moved", workers=2) as sim:
            assert sim.cluster is not None
            assert sim.run(ticks - ticks // 2)["stopped"] is None
    finally:
        server.stop()
    lines = (tmp_path / "moved" / "trace.jsonl").read_bytes().split(b"\n")[1:]
    probed = [json.loads(x)["tick"] for x in lines if b'"probes"' in x]
    assert len(probed) == 3 and probed[-1] > ticks // 2  # the later probes ran on the workers
    assert lines == (tmp_path / "one" / "trace.jsonl").read_bytes().split(b"\n")[1:]


def test_a_killed_worker_stops_the_run_and_resume_ends_as_the_uninterrupted_run(tmp_path, one_process):
    """A worker killed between ticks: the next tick stops with a message saying how to resume (the other shard has
    done its part of that tick meanwhile); the resumed run, on as many new actors, rolls every shard back to the
    checkpoint and ends with the trace and memories of the run in one process."""
    config = load_config(None, BUSY)
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="killed", workers=2) as sim:
        sim.run(2)
        os.kill(sim.cluster.infos[1]["pid"], signal.SIGKILL)
        summary = sim.run(3)
    assert summary["ticks"] == 2 and "the worker of shard 1 died" in summary["stopped"]
    assert "stopped before tick 2" in summary["stopped"]
    assert f"simulacra run --resume {tmp_path / 'killed'}" in summary["stopped"]
    lines = [x for x in (tmp_path / "killed" / "trace.jsonl").read_bytes().split(b"\n")[1:] if x]
    assert [json.loads(x)["tick"] for x in lines] == [0, 1]  # the trace ends at the last complete tick
    with Simulation.resume(tmp_path / "killed") as sim:
        assert sim.cluster is not None and sim.cluster.n == 2 and sim.ticks_done == 2
        summary = sim.run(TICKS - 2)
    assert summary["stopped"] is None
    assert (tmp_path / "killed" / "trace.jsonl").read_bytes().split(b"\n")[1:] == one_process[0]
    assert read_memories(tmp_path / "killed", 2) == one_process[1]


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in (env or os.environ).items() if not k.startswith("RAY_")}
    return subprocess.run([sys.executable, "-m", "simulacra.cli", "run", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_command_line_runs_a_town_on_workers_and_resumes_it_after_the_driver_is_killed(tmp_path, one_process):
    """``simulacra run --workers 2`` (its own Ray instance, in a new process) killed by SIGKILL while it writes
    tick 7's trace line (its shards have done the tick): ``simulacra run --resume`` starts two workers again and the
    run ends as the run in one process, trace and memories."""
    args = ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--ticks", str(TICKS),
            "--db-dir", str(tmp_path), "--run-name", "cli", "--workers", "2", "--quiet", "--json"]
    for item in BUSY:
        args += ["--set", item]
    r = _cli(*args, env={**os.environ, "SIMULACRA_KILL_AT": "tick=7:phase=trace"})
    assert r.returncode == -signal.SIGKILL, r.stderr
    run_dir = tmp_path / "cli"
    header = json.loads((run_dir / "trace.jsonl").read_text().split("\n")[0])
    assert header["workers"] == 2
    cut = (run_dir / "trace.jsonl").read_bytes()
    assert not cut.endswith(b"\n")  # half of tick 7's line
    r = _cli("--resume", str(run_dir), "--quiet", "--json")
    assert r.returncode == 0, r.stderr
    assert (run_dir / "trace.jsonl").read_bytes().split(b"\n")[1:] == one_process[0]
    assert read_memories(run_dir, 2) == one_process[1]
    r = _cli("--resume", str(run_dir), "--workers", "3")  # its memory in each shard's folder: it cannot move
    assert r.returncode == 2 and "needs its memory on a Chroma server" in r.stderr, r.stderr


class SlowServer:
    """Answers as :class:`SchemaAnswers` (from the request alone) after ``delay_s`` seconds of the server's time,
    counting the requests it holds at once (``most``): the run's calls in flight, seen from the server."""

    def __init__(self, delay_s: float):
        import threading

        self.delay_s, self.now, self.most = delay_s, 0, 0
        self.lock, self.answers = threading.Lock(), SchemaAnswers()

    def __call__(self, body: dict):
        import time

        with self.lock:
            self.now += 1
            self.most = max(self.most, self.now)
        try:
            time.sleep(self.delay_s)  # a model's latency, so that calls of the two workers overlap
            return self.answers(body)
        finally:
            with self.lock:
                self.now -= 1


def _recorded_calls(run_dir: Path) -> int:
    return sum(len(f.read_text().splitlines()) for f in run_dir.glob("shard-*/llm_calls.jsonl"))


def test_llm_concurrency_and_the_budget_bound_the_whole_run_not_each_worker(tmp_path, ray_local, openai_double):
    """Two workers, each asking the model from ``llm.concurrency`` threads: the server never holds more than
    ``llm.concurrency`` of the run's requests at once, and ``llm.max_calls`` stops the run after that many calls
    over both workers (not that many per worker)."""
    server = SlowServer(0.15)
    openai_double.script([], then=server)
    llm = ["llm.model=double-model", f"llm.base_url={openai_double.url}", "llm.attempts=1", "llm.timeout_s=20",
           "rater.check_sample=0", "cognition.react_min_rating=1", "simulation.news_min_rating=1",
           "llm.concurrency=2"]
    config = load_config(None, [*BUSY, *llm])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="bound", workers=2) as sim:
        sim.cluster.measure_bytes = True
        summary = sim.run(3)
        costs = sim.cluster.costs.report()
    assert summary["stopped"] is None
    # what the phases cost: one act phase per tick, each answered by both shards, bytes both ways (bench.cluster)
    act = costs["phases"]["shard.act"]
    assert act["calls"] == 3 and act["bytes_sent"] > 0 and act["bytes_received"] > 0
    assert act["wall_s"] >= act["slowest_s"] > 0 and act["busy_s"] >= act["slowest_s"]
    calls = _recorded_calls(tmp_path / "bound")
    assert calls > 8 and summary["model_calls"]["calls"] == calls
    assert 1 <= server.most <= 2 and summary["model_calls"]["most_in_flight"] <= 2

    config = load_config(None, [*BUSY, *llm, "llm.max_calls=7"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="budget", workers=2) as sim:
        summary = sim.run(3)
    assert "the run's call budget exhausted after 7 calls" in summary["stopped"]
    # the budget spent is read from the error raised on a worker (its attribute survives Ray's rebuilt exception)
    assert summary["stopped"].endswith(f"simulacra run --resume {tmp_path / 'budget'} --set llm.max_calls=N")
    assert _recorded_calls(tmp_path / "budget") == 7  # over both workers


def test_evaluate_on_workers_is_evaluate_in_one_process(tmp_path, ray_local):
    """``simulacra evaluate --workers 2``: a scenario's runs set up on Ray actors (each shard plants the facts of
    its agents, rating those the scenario gives no importance, and puts in the variant's ablations) write the
    traces of the runs in one process, header included, and measure alike; the no-memory variant stays ablated on
    the workers (its residents recall no news). Fernhollow's board: each worker posts the town's notice to its
    replica of the shared tier, and the trace holds the post once."""
    import yaml

    from simulacra.evaluation.report import evaluate
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.variants import variant

    data = yaml.safe_load((ROOT / "scenarios" / "fernhollow-party-tiny.yaml").read_text())
    data["world"] = str(ROOT / "worlds" / "fernhollow.yaml")
    data["facts"].insert(1, {  # a second holder, on the other shard, rated by the run's rater
        "id": "sale", "text": "Samuel Adeyemi is selling his fishing boat before the winter.",
        "question": "Is anyone selling a boat?", "probes": ["Samuel wants to sell his boat."],
        "holders": ["samuel_adeyemi"]})
    path = tmp_path / "tiny.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    sc = load_scenario(path)
    variants = [variant("full"), variant("no-memory")]
    sets = ["rater.url=http://127.0.0.1:0/rate", "simulation.conversation_probability=1.0", TELL_ALL]
    one = evaluate(sc, variants, [0], tmp_path / "one", overrides=sets, interviews=False)
    two = evaluate(sc, variants, [0], tmp_path / "two", overrides=sets, interviews=False, workers=2)
    for v in ("full-seed0", "no-memory-seed0"):
        a, b = ((tmp_path / o / "runs" / v / "trace.jsonl").read_bytes().split(b"\n") for o in ("one", "two"))
        head_a, head_b = json.loads(a[0]), json.loads(b[0])
        assert head_b["scenario"] == head_a["scenario"] and len(head_a["scenario"]["seeded"]) == 2
        assert a[1:] == b[1:] and len(a) > 5
        assert (tmp_path / "two" / "runs" / v / "shard-1").is_dir()  # the run was on two workers
    assert two["variants"] == one["variants"]
    full, ablated = (one["variants"][v]["seeds"]["0"]["diffusion"]["party"]["end"] for v in ("full", "no-memory"))
    assert full > ablated  # what the ablation does, on both shapes


def test_a_packaged_world_by_name_runs_on_workers(tmp_path, ray_local):
    """``--world fernhollow`` (a packaged world's name, not a path) on workers: each worker loads the packaged file
    (it looked for ``./fernhollow`` in its own directory and failed), and the trace is the run's in one process."""
    config = load_config(None, ["rater.url=http://127.0.0.1:0/rate", "embedding.threads=2"])
    agents = ["greta_lund", "hana_novak", "samuel_adeyemi"]
    for name, workers in (("one", 1), ("two", 2)):
        with Simulation.create("fernhollow", config, db_dir=tmp_path, run_name=name, agents=agents,
                               workers=workers) as sim:
            assert sim.run(3)["stopped"] is None
    one, two = ((tmp_path / n / "trace.jsonl").read_bytes().split(b"\n")[1:] for n in ("one", "two"))
    assert len(one) > 3 and one == two
