"""The town and its agent shards (simulacra.shard): the assignment rule, the one merge rule, and the guarantee that a
town stepped over 1, 2 or 3 shards writes the same trace and the same memories, scripted and with a language model
that answers from the request alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulacra.cluster import shard_threads
from simulacra.config import load_config
from simulacra.shard import by_agent, shard_agents, split_by_shard
from simulacra.simulation import Simulation
from simulacra.world.generate import write_town
from tests.schema_answers import SchemaAnswers

pytest_plugins = ["tests.openai_double"]

DATA = Path(__file__).resolve().parent / "data"
#: conversations every time two free residents meet, reflections and consolidation within a dozen ticks
BUSY = ["simulation.conversation_probability=1.0", "reflection.threshold=40",
        "memory.consolidation_interval_minutes=30", "memory.consolidation_age_minutes=20",
        "memory.promote_threshold=0.3", "rater.url=http://127.0.0.1:0/rate"]


def test_agent_i_goes_to_shard_i_mod_n_in_the_run_s_order():
    agents = ["cal", "ann", "ben", "dee", "eve"]
    assert shard_agents(agents, 1) == [agents]
    assert shard_agents(agents, 2) == [["cal", "ben", "eve"], ["ann", "dee"]]
    assert shard_agents(agents, 7)[5:] == [[], []] and sum(shard_agents(agents, 7), []) == ["cal", "ann", "ben",
                                                                                            "dee", "eve"]
    with pytest.raises(ValueError, match="at least 1"):
        shard_agents(agents, 0)


def test_each_shard_embeds_with_its_share_of_its_node_s_cpus_unless_threads_are_set():
    # 2 CPUs for 2 workers: 1 thread each, not the town's 2 (4 busy threads on 2 cores)
    assert shard_threads(0, ["a", "a"], {"a": 2.0}) == [1, 1]
    assert shard_threads(0, ["a"], {"a": 2.0}) == [2]
    # two nodes of 4 and 2 CPUs, shards placed a, b, a: 2 + 2 on a, 2 on b; more shards than CPUs: 1 each
    assert shard_threads(0, ["a", "b", "a"], {"a": 4.0, "b": 2.0}) == [2, 2, 2]
    assert shard_threads(0, ["a", "a", "a"], {"a": 2.0}) == [1, 1, 1]
    assert shard_threads(0, ["?"], {}) == [1]
    assert shard_threads(3, ["a", "a"], {"a": 2.0}) == [3, 3]  # the user's count (and torch's: the town's) stays


def test_each_shard_is_sent_its_agents_part_and_every_town_item():
    shard_of = {"cal": 0, "ann": 1, "ben": 0}
    items = [("ann", 1), (None, "notice"), ("cal", 1), ("ben", 1), ("ann", 2)]
    assert split_by_shard(items, lambda x: x[0], shard_of, 2) == [
        [(None, "notice"), ("cal", 1), ("ben", 1)], [("ann", 1), (None, "notice"), ("ann", 2)]]
    assert split_by_shard(items, lambda x: x[0], shard_of, 3)[2] == [(None, "notice")]
    with pytest.raises(KeyError):  # an agent of no shard is a bug of the caller, not an item to drop
        split_by_shard([("dee", 1)], lambda x: x[0], shard_of, 2)


def test_the_merge_rule_puts_items_in_agent_order_stably_with_the_town_first():
    order = {"cal": 0, "ann": 1, "ben": 2}
    items = [("ann", 1), ("cal", 1), (None, "notice"), ("ann", 2), ("cal", 2), ("ben", 1)]
    assert by_agent(items, order, lambda x: x[0]) == [(None, "notice"), ("cal", 1), ("cal", 2), ("ann", 1),
                                                      ("ann", 2), ("ben", 1)]


def run(tmp_path, name, world, config, ticks, shards, embedder, personas_dir=None):
    with Simulation.create(world, config, personas_dir=personas_dir, db_dir=tmp_path, run_name=name,
                           embedder=embedder, shards=shards) as sim:
        assert [sh.agents for sh in sim.shards] == shard_agents(sim.rt.agents, shards)
        sim.run(ticks)
        memories = {pid: sorted((r.id, r.text, r.kind, r.rating, r.timestamp, json.dumps(r.extra, sort_keys=True))
                                for tier in m.all_tiers for r in tier.records) for pid, m in sim.memories.items()}
    return (tmp_path / name / "trace.jsonl").read_bytes().split(b"\n")[1:], memories


def kinds(lines):
    ops = [op["op"] for line in lines if line for op in json.loads(line)["memory"]]
    talks = sum(len(json.loads(line)["conversations"]) for line in lines if line)
    return set(ops), talks


def test_one_two_and_three_shards_write_the_same_trace_and_memories(tmp_path, embedder):
    config = load_config(None, BUSY)
    whole = run(tmp_path, "one", DATA / "tiny.yaml", config, 12, 1, embedder, DATA / "personas")
    ops, talks = kinds(whole[0])
    assert {"add", "retrieve", "reflect", "rehearse"} <= ops and talks > 0  # the tick's every stage at work
    for n in (2, 3):
        assert run(tmp_path, f"n{n}", DATA / "tiny.yaml", config, 12, n, embedder, DATA / "personas") == whole


def test_a_generated_town_is_the_same_over_shards(tmp_path, embedder):
    world, _ = write_town(tmp_path / "gen.yaml", 16, seed=3)
    config = load_config(None, BUSY)
    one = run(tmp_path, "one", world, config, 18, 1, embedder)
    assert kinds(one[0])[1] > 0
    assert run(tmp_path, "three", world, config, 18, 3, embedder) == one


def test_with_a_language_model_the_shards_agree_too(tmp_path, embedder, openai_double):
    """The mind, the summariser and the rater ask the OpenAI-compatible double, which answers from the request
    alone; shards send their requests in another order, and the run is the same."""
    openai_double.script([], then=SchemaAnswers())
    config = load_config(None, [*BUSY, "llm.model=double-model", f"llm.base_url={openai_double.url}",
                                "llm.attempts=1", "llm.timeout_s=5", "rater.check_sample=0",
                                "cognition.react_min_rating=1", "simulation.news_min_rating=1"])
    one = run(tmp_path, "one", DATA / "tiny.yaml", config, 6, 1, embedder, DATA / "personas")
    sources = {d["source"] for line in one[0] if line for d in json.loads(line)["decisions"]}
    assert "llm" in sources
    assert run(tmp_path, "two", DATA / "tiny.yaml", config, 6, 2, embedder, DATA / "personas") == one
