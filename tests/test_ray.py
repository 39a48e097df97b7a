"""Agent shards as Ray actors (simulacra.cluster): a town on 2 and 3 workers writes the same trace and memories as in
one process; a worker killed mid-run stops the run with a message; the command line runs it. One local Ray
instance (2 CPUs) for the whole module, as Ray's testing guide advises."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from simulacra.config import load_config  # noqa: E402
from simulacra.simulation import Simulation  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
ROOT = Path(__file__).resolve().parents[1]
BUSY = ["simulation.conversation_probability=1.0", "reflection.threshold=40",
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


def test_a_killed_worker_stops_the_run_with_a_message(tmp_path, ray_local):
    config = load_config(None, BUSY)
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="killed", workers=2) as sim:
        sim.run(2)
        os.kill(sim.cluster.infos[1]["pid"], signal.SIGKILL)
        summary = sim.run(3)
    assert summary["ticks"] == 2 and "the worker of shard 1 died" in summary["stopped"]
    assert "stopped before tick 2" in summary["stopped"]
    lines = [x for x in (tmp_path / "killed" / "trace.jsonl").read_bytes().split(b"\n")[1:] if x]
    assert [json.loads(x)["tick"] for x in lines] == [0, 1]  # the trace ends at the last complete tick


def test_the_command_line_runs_a_town_on_workers(tmp_path, one_process):
    """``simulacra run --workers 2`` (its own Ray instance, in a new process) ends as the run in one process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    args = [sys.executable, "-m", "simulacra.cli", "run", "--world", str(DATA / "tiny.yaml"), "--personas-dir",
            str(DATA / "personas"), "--ticks", str(TICKS), "--db-dir", str(tmp_path), "--run-name", "cli",
            "--workers", "2", "--quiet", "--json"]
    for item in BUSY:
        args += ["--set", item]
    r = subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "cli" / "trace.jsonl").read_bytes().split(b"\n")[1:] == one_process[0]
    header = json.loads((tmp_path / "cli" / "trace.jsonl").read_text().split("\n")[0])
    assert header["workers"] == 2
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--resume", str(tmp_path / "cli")], cwd=ROOT,
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "several workers is not supported yet" in r.stderr
