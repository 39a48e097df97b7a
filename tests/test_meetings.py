"""The town's chance meetings and openers (simulation.meeting_draws, issue 23 §2): keyed draws make a pair's meeting
depend on the seed, the game minute and the pair only, so that the rest of the town (a resident added or removed, a
variant's changed plans, the order pairs are visited in) leaves it alone; a header recorded before the setting
reads as the one shared stream it was made with."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from simulacra.cognition.plan import Action
from simulacra.config import Config, config_from_dict, load_config, recorded_config
from simulacra.simulation import Simulation
from simulacra.state import TownState
from simulacra.tick import order_pairs, pair_conversations

DATA = Path(__file__).resolve().parent / "data"
NOW = 600


def _town(draws: str, seed: int):
    config = load_config(None, [f"simulation.meeting_draws={draws}", f"simulation.seed={seed}",
                                "simulation.conversation_probability=0.5"])
    rt = SimpleNamespace(config=config, mind=SimpleNamespace(), persona=lambda pid: SimpleNamespace(relationships={}))
    state = TownState(start_minute=420, tick_minutes=10, rng=np.random.default_rng(seed), object_states={}, agents={})
    return rt, state


def _meetings(draws: str, seed: int, where: dict[str, str]):
    """Pairs that meet among free agents at ``where``'s places, and who opens each."""
    rt, state = _town(draws, seed)
    actions = {pid: Action("act", "working", place) for pid, place in where.items()}
    pairs, _ = pair_conversations(state, rt, actions, [], NOW)
    return order_pairs(state, rt, pairs, NOW)


def test_keyed_meetings_of_a_pair_do_not_depend_on_the_rest_of_the_town():
    town = {"ann": "mill", "bob": "mill", "cal": "inn", "dee": "inn", "eve": "inn"}
    without = {pid: place for pid, place in town.items() if pid not in ("ann", "bob")}
    differs = 0
    for seed in range(40):
        keyed = _meetings("keyed", seed, town)
        assert [p for p in keyed if "ann" not in p] == _meetings("keyed", seed, without), seed
        stream = _meetings("stream", seed, town)
        differs += [p for p in stream if "ann" not in p] != _meetings("stream", seed, without)
    # the shared stream shifts with every draw made before: the inn's meetings change with the mill's
    assert differs > 5


def test_keyed_meetings_follow_the_probability_and_the_seed():
    pairs = [_meetings("keyed", seed, {"ann": "mill", "bob": "mill"}) for seed in range(400)]
    met = [p for p in pairs if p]
    assert 0.4 < len(met) / len(pairs) < 0.6  # conversation_probability 0.5
    openers = [p[0][0] for p in met]
    assert 0.35 < openers.count("ann") / len(openers) < 0.65  # either may open
    assert pairs[:20] == [_meetings("keyed", seed, {"bob": "mill", "ann": "mill"}) for seed in range(20)]


def test_a_new_run_records_keyed_draws_and_an_old_header_reads_as_the_stream(tmp_path):
    assert Config().simulation.meeting_draws == "keyed"
    old = Config().to_dict()
    del old["simulation"]["meeting_draws"]
    assert config_from_dict(recorded_config(old)).simulation.meeting_draws == "stream"
    config = load_config(None, ["rater.url=http://127.0.0.1:0/rate", "simulation.conversation_probability=1.0"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="keyed") as sim:
        summary = sim.run(6)
    header = json.loads((tmp_path / "keyed" / "trace.jsonl").read_text().split("\n")[0])
    assert header["config"]["simulation"]["meeting_draws"] == "keyed"
    assert any(a["talked_to"] for a in summary["agents"].values())
