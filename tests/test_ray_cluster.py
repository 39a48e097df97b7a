"""A town on a two-node Ray cluster (ray.cluster_utils.Cluster, one CPU per node, so each worker lands on its own
node) writes the same trace as the town in one process. Its own module: one cluster per module."""

from __future__ import annotations

from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from simulacra.config import load_config  # noqa: E402
from simulacra.simulation import Simulation  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SETTINGS = ["simulation.conversation_probability=1.0", "reflection.threshold=40", "rater.url=http://127.0.0.1:0/rate"]


@pytest.fixture(scope="module")
def two_nodes():
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    cluster.add_node(num_cpus=1)
    cluster.wait_for_nodes()  # both nodes up before the workers are placed
    ray.init(address=cluster.address)
    yield cluster
    ray.shutdown()
    cluster.shutdown()


def test_a_town_on_two_nodes_is_the_town_in_one_process(tmp_path, two_nodes):
    from simulacra.embeddings import build_embedder

    config = load_config(None, SETTINGS)

    def run(name, **kw):
        with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                               run_name=name, **kw) as sim:
            nodes = None if sim.cluster is None else {i["node"] for i in sim.cluster.infos}
            sim.run(8)
        return (tmp_path / name / "trace.jsonl").read_bytes().split(b"\n")[1:], nodes

    one, _ = run("one", embedder=build_embedder())  # as the workers embed (embedding.exact)
    two, nodes = run("two", workers=2, ray_address=two_nodes.address)
    assert len(nodes) == 2  # one worker on each node
    assert two == one
