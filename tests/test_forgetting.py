"""Importance-dependent forgetting (issue 11 §3): an unused long-term memory of what mattered outlives the mundane.

The rule is :func:`simulacra.memory.scoring.decayed_importance` (``memory.decay_importance_exponent``,
``docs/memory.md``, "Decay and forgetting"); the measurement is ``bench/growth_replay.py`` and ``docs/scale.md``.
"""

import json
import math
import re

import numpy as np
import pytest

from bench.growth_replay import replay
from simulacra.config import MemoryConfig, load_config
from simulacra.memory.scoring import ScoringParams, decayed_importance
from simulacra.presets import preset_path
from simulacra.simulation import Simulation
from tests.conftest import DATA, unit
from tests.test_memory import make, rec
from tests.test_resume import SETTINGS, tick_lines

HOUR = 60.0
T0 = 600.0


def long_term(mem, ratings, t0=T0):
    """One long-term memory per rating, entered at ``t0`` (as reflections are), never used afterwards."""
    recs = [rec("ann", f"memory rated {r}", t0 - 30, r, kind="reflection") for r in ratings]
    mem.add_long_term(recs, np.stack([unit(*([0] * i + [1])) for i in range(len(recs))]), t0)
    return recs


def closed_form(rating, hours, decay, p, pivot):
    """The documented rule written out independently: ratings above the pivot decay as if (pivot / rating) ** p
    hours passed per game hour."""
    scale = (pivot / rating) ** p if rating > pivot else 1.0
    return rating / 10 * decay ** (hours * scale)


def test_the_default_keeps_an_unused_rating_9_memory_for_a_week_and_forgets_a_rating_3_one_within_a_day(tmp_path):
    mem = make(tmp_path)  # the shipped defaults (relevance aside)
    nine, three = long_term(mem, (9, 3))
    gone = [op["id"] for op in mem.forget_decayed(T0 + 24 * HOUR)]
    assert gone == [three.id]
    assert [op["id"] for op in mem.forget_decayed(T0 + 7 * 24 * HOUR)] == []  # a week unused
    assert nine.id in mem.long_term
    # with plain decay (the rule before) the same rating-9 memory is gone within a day and a half
    plain = make(tmp_path / "plain", decay_importance_exponent=0, long_term_decay_per_hour=0.93)
    nine_plain, _ = long_term(plain, (9, 3))
    assert nine_plain.id in [op["id"] for op in plain.forget_decayed(T0 + 36 * HOUR)]


@pytest.mark.parametrize("decay, p, pivot", [(0.93, 8.0, 6.5), (0.9, 2.5, 5.0), (0.97, 0.0, 6.5)])
def test_retrieval_forgetting_and_most_important_use_the_same_numbers(tmp_path, decay, p, pivot):
    mem = make(tmp_path, long_term_decay_per_hour=decay, decay_importance_exponent=p, decay_importance_pivot=pivot,
               forget_floor=0.1)
    recs = long_term(mem, (10, 8, 6, 4))
    now = T0 + 20 * HOUR
    want = {r.id: closed_form(r.rating, 20, decay, p, pivot) for r in recs}
    got = {m.id: m.importance for m in mem.retrieve(unit(1, 1, 1, 1), now, tiers=["long_term"], top_k=4,
                                                     threshold=-1)}
    assert got == pytest.approx(want, rel=1e-12)
    assert dict(zip(mem.long_term.ids, mem.long_term.importance(now, mem.params))) == pytest.approx(want, rel=1e-12)
    assert {r.id: i for r, i in mem.most_important(now, 4)} == pytest.approx(want, rel=1e-12)
    ops = mem.forget_decayed(now)
    assert {op["id"]: op["importance"] for op in ops} == {i: round(v, 6) for i, v in want.items() if v < 0.1}
    # the vectorised function equals the closed form for every rating and age, and p = 0 is plain decay
    ratings, hours = np.repeat(np.arange(1.0, 11.0), 5), np.tile([0.0, 0.5, 3.0, 30.0, 300.0], 10)
    imp = decayed_importance(ratings, T0 - hours * HOUR, T0, decay, p, pivot)
    np.testing.assert_allclose(imp, [closed_form(r, h, decay, p, pivot) for r, h in zip(ratings, hours)],
                               rtol=1e-12)


def test_the_replay_forgets_when_the_stores_do(tmp_path):
    """bench.growth_replay applies forget_decayed's rule: each memory leaves at the same tick in both."""
    decay, p, pivot = 0.95, 3.0, 5.5
    mem = make(tmp_path, long_term_decay_per_hour=decay, decay_importance_exponent=p, decay_importance_pivot=pivot,
               forget_floor=0.1)
    recs = long_term(mem, (8, 7, 6, 3))
    head = {"agents": ["ann"], "start_minute": T0, "tick_minutes": 10}
    ticks = [{"time": T0, "memory": [{"op": "add", "agent": "ann", "tier": "long_term", "id": r.id,
                                      "rating": r.rating, "kind": "reflection"} for r in recs]}]
    store_gone = {}
    for n in range(1, 6 * 24 * 6):
        now = T0 + 10 * n
        ticks.append({"time": now, "memory": []})
        store_gone.update({op["id"]: now for op in mem.forget_decayed(now)})
    assert len(store_gone) == 4 and len(set(store_gone.values())) == 4
    got = replay(head, ticks, decay, 0.1, rehearse=True, exponent=p, pivot=pivot)["forgotten_at"]
    assert got == {"ann": store_gone}


def test_seed003_keeps_plain_decay(tmp_path):
    cfg = load_config(preset_path("seed003"))
    assert cfg.memory.decay_importance_exponent == 0
    assert ScoringParams.from_config(cfg.memory).decay_importance_exponent == 0
    # a trace header written before the setting existed scores with plain decay too
    header = {k: v for k, v in cfg.memory.model_dump().items() if k != "decay_importance_exponent"}
    assert ScoringParams.from_config(header) == ScoringParams.from_config(cfg.memory)
    mem = make(tmp_path, **cfg.memory.model_dump())
    recs = long_term(mem, (9, 6, 3))
    imp = dict(zip(mem.long_term.ids, mem.long_term.importance(T0 + 50 * HOUR, mem.params)))
    for r in recs:  # every rating loses the same share: 0.99 per game hour
        assert imp[r.id] == r.rating / 10 * math.exp(50 * math.log(0.99))
    assert MemoryConfig().decay_importance_exponent > 0  # the shipped default differs


def test_a_negative_exponent_or_a_pivot_off_the_scale_is_refused():
    from pydantic import ValidationError

    with pytest.raises(ValueError, match="decay_importance_exponent"):
        ScoringParams(decay_importance_exponent=-1)
    with pytest.raises(ValidationError, match="decay_importance_exponent"):
        MemoryConfig(decay_importance_exponent=-0.5)
    for bad in (0, 10.5):
        with pytest.raises(ValueError, match="decay_importance_pivot"):
            ScoringParams(decay_importance_pivot=bad)
        with pytest.raises(ValidationError, match="decay_importance_pivot"):
            MemoryConfig(decay_importance_pivot=bad)


# ----------------------------------------------------------------- a real run of the tiny town
def test_a_short_run_with_importance_dependent_forgetting_is_deterministic(tmp_path, rater_url, embedder):
    # consolidated every tick, decay steep enough that memories rated 6 or less go within the 12 ticks (2 game
    # hours: 1.5 game hours at rating 6) while those rated 7 or more stay (4 game hours at 7, 10 at 8)
    settings = [f"rater.url={rater_url}", *SETTINGS, "memory.promote_threshold=0.1",
                "memory.consolidation_interval_minutes=10", "memory.consolidation_age_minutes=0",
                "memory.short_term_min_entries=0", "memory.long_term_decay_per_hour=0.3",
                "memory.decay_importance_exponent=6", "memory.decay_importance_pivot=6", "memory.forget_floor=0.1"]
    lines = []
    for name in ("a", "b"):
        with Simulation.create(DATA / "tiny.yaml", load_config(None, settings), personas_dir=DATA / "personas",
                               db_dir=tmp_path, run_name=name, embedder=embedder) as sim:
            sim.run(12)
        lines.append(tick_lines(tmp_path / name))
    assert lines[0] == lines[1]
    forgot = [op for line in lines[0] if line for op in json.loads(line)["memory"]
              if op["op"] == "forget" and op["tier"] == "long_term"]
    assert forgot and all(op["importance"] < 0.1 for op in forgot)
    rating = {op["id"]: op["rating"] for line in lines[0] if line for op in json.loads(line)["memory"]
              if op["op"] == "add"}
    assert {rating[op["id"]] for op in forgot} <= {1, 2, 3, 4, 5, 6}


def test_a_run_made_before_the_setting_resumes_with_plain_decay(tmp_path, rater_url, embedder):
    settings = [f"rater.url={rater_url}", *SETTINGS]
    with Simulation.create(DATA / "tiny.yaml", load_config(None, settings), personas_dir=DATA / "personas",
                           db_dir=tmp_path, run_name="old", embedder=embedder) as sim:
        sim.run(2)
        assert sim.rt.config.memory.decay_importance_exponent == MemoryConfig().decay_importance_exponent
    trace = tmp_path / "old" / "trace.jsonl"
    head, rest = trace.read_bytes().split(b"\n", 1)
    key = re.search(rb'"decay_importance_exponent": ?[0-9.]+,', head).group()
    old = head.replace(key, b" " * len(key))  # as an older simulacra wrote it (same length: offsets stay)
    assert "decay_importance_exponent" not in json.loads(old)["config"]["memory"]
    trace.write_bytes(old + b"\n" + rest)
    with Simulation.resume(tmp_path / "old", embedder=embedder) as sim:
        assert sim.rt.config.memory.decay_importance_exponent == 0
        assert sim.rt.memories["ann"].params.decay_importance_exponent == 0
        sim.run(1)


def test_every_reader_of_a_recorded_config_fills_a_predated_setting_with_plain_decay():
    from simulacra.config import config_from_dict, recorded_config

    now = MemoryConfig(decay_importance_exponent=3).model_dump()
    before = {k: v for k, v in now.items() if k != "decay_importance_exponent"}
    assert config_from_dict(recorded_config({"memory": before})).memory.decay_importance_exponent == 0
    assert config_from_dict(recorded_config({"memory": now})).memory.decay_importance_exponent == 3
    assert recorded_config({}) == {}


def test_kept_counts_what_long_term_or_pending_short_term_memory_holds_by_category_and_age():
    from bench.kept import Kept, kept_at

    day = 24 * 60
    k = Kept(start_minute=0)
    add = lambda i, kind, rating: {"op": "add", "agent": "ann", "tier": "short_term", "id": i, "kind": kind,  # noqa: E731
                                   "rating": rating}
    k.observe([add("storm", "event", 8), add("toast", "observation", 3), add("talk", "dialogue", 7)], now=60)
    k.observe([{"op": "move", "agent": "ann", "id": "storm"}, {"op": "move", "agent": "ann", "id": "talk"},
               {"op": "forget", "agent": "ann", "tier": "short_term", "id": "toast"}], now=120)
    k.observe([add("fair", "event", 7)], now=day - 10)  # not consolidated yet at the day's end: still held
    first = k.day_end(day, {"ann": {"storm", "talk"}})
    cats = first["categories"]
    assert cats["world events"] == {"held": 2, "total": 2, "share": 1.0, "by_age": {"0": [2, 2]}}
    assert cats["rating 1-5"]["share"] == 0.0 and cats["rated >= 7"]["held"] == 3
    # a day later: the talk is forgotten, the fair consolidated; ages count whole days since the writing tick
    k.observe([{"op": "move", "agent": "ann", "id": "fair"}], now=day + 50)
    k.observe([{"op": "reinforce", "agent": "ann", "id": "storm2", "from_ids": [], "replaces": ["storm"]}],
              now=day + 60)
    second = k.day_end(2 * day, {"ann": {"storm2", "fair"}})["categories"]
    assert second["world events rated >= 7"]["by_age"] == {"1": [2, 2]}
    assert second["rated >= 7"]["by_age"] == {"1": [2, 3]}  # storm (folded into storm2) and fair held, talk not
    assert kept_at(k.result(), "rated >= 7") == round(2 / 3, 4) and kept_at(k.result(), "rating 9-10") is None
