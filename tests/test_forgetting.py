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


def closed_form(rating, hours, decay, p):
    """The documented rule written out independently: v * decay ** (hours * v ** -p), v = rating / 10."""
    v = rating / 10
    return v * decay ** (hours * v**-p)


def test_the_default_keeps_an_unused_rating_9_memory_for_days_and_forgets_a_rating_3_one_within_hours(tmp_path):
    mem = make(tmp_path)  # the shipped defaults (relevance aside)
    nine, three = long_term(mem, (9, 3))
    gone = [op["id"] for op in mem.forget_decayed(T0 + 12 * HOUR)]
    assert gone == [three.id]
    assert [op["id"] for op in mem.forget_decayed(T0 + 72 * HOUR)] == []  # three game days unused
    assert nine.id in mem.long_term
    # with plain decay (the rule before) the same rating-9 memory is gone within a day and a half
    plain = make(tmp_path / "plain", decay_importance_exponent=0, long_term_decay_per_hour=0.93)
    nine_plain, _ = long_term(plain, (9, 3))
    assert nine_plain.id in [op["id"] for op in plain.forget_decayed(T0 + 36 * HOUR)]


@pytest.mark.parametrize("decay, p", [(0.99, 4.0), (0.9, 2.5), (0.97, 0.0)])
def test_retrieval_forgetting_and_most_important_use_the_same_numbers(tmp_path, decay, p):
    mem = make(tmp_path, long_term_decay_per_hour=decay, decay_importance_exponent=p, forget_floor=0.1)
    recs = long_term(mem, (10, 8, 6, 4))
    now = T0 + 7 * HOUR
    want = {r.id: closed_form(r.rating, 7, decay, p) for r in recs}
    got = {m.id: m.importance for m in mem.retrieve(unit(1, 1, 1, 1), now, tiers=["long_term"], top_k=4,
                                                     threshold=-1)}
    assert got == pytest.approx(want, rel=1e-12)
    assert dict(zip(mem.long_term.ids, mem.long_term.importance(now, mem.params))) == pytest.approx(want, rel=1e-12)
    assert {r.id: i for r, i in mem.most_important(now, 4)} == pytest.approx(want, rel=1e-12)
    ops = mem.forget_decayed(now)
    assert {op["id"]: op["importance"] for op in ops} == {i: round(v, 6) for i, v in want.items() if v < 0.1}
    # the vectorised function equals the closed form for every rating and age, and p = 0 is plain decay
    ratings, hours = np.repeat(np.arange(1.0, 11.0), 5), np.tile([0.0, 0.5, 3.0, 30.0, 300.0], 10)
    imp = decayed_importance(ratings, T0 - hours * HOUR, T0, decay, p)
    np.testing.assert_allclose(imp, [closed_form(r, h, decay, p) for r, h in zip(ratings, hours)], rtol=1e-12)


def test_the_replay_forgets_when_the_stores_do(tmp_path):
    """bench.growth_replay applies forget_decayed's rule: each memory leaves at the same tick in both."""
    decay, p = 0.95, 3.0
    mem = make(tmp_path, long_term_decay_per_hour=decay, decay_importance_exponent=p, forget_floor=0.1)
    recs = long_term(mem, (9, 7, 6, 3))
    head = {"agents": ["ann"], "start_minute": T0, "tick_minutes": 10}
    ticks = [{"time": T0, "memory": [{"op": "add", "agent": "ann", "tier": "long_term", "id": r.id,
                                      "rating": r.rating, "kind": "reflection"} for r in recs]}]
    store_gone = {}
    for n in range(1, 6 * 24 * 6):
        now = T0 + 10 * n
        ticks.append({"time": now, "memory": []})
        store_gone.update({op["id"]: now for op in mem.forget_decayed(now)})
    assert len(store_gone) == 4 and len(set(store_gone.values())) == 4
    assert replay(head, ticks, decay, 0.1, rehearse=True, exponent=p)["forgotten_at"] == {"ann": store_gone}


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


def test_a_negative_exponent_is_refused():
    with pytest.raises(ValueError, match="decay_importance_exponent"):
        ScoringParams(decay_importance_exponent=-1)
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="decay_importance_exponent"):
        MemoryConfig(decay_importance_exponent=-0.5)


# ----------------------------------------------------------------- a real run of the tiny town
def test_a_short_run_with_importance_dependent_forgetting_is_deterministic(tmp_path, rater_url, embedder):
    # consolidated every tick, decay steep enough that the low-rated long-term memories go within 12 ticks
    settings = [f"rater.url={rater_url}", *SETTINGS, "memory.promote_threshold=0.1",
                "memory.consolidation_interval_minutes=10", "memory.consolidation_age_minutes=0",
                "memory.short_term_min_entries=0", "memory.long_term_decay_per_hour=0.9",
                "memory.decay_importance_exponent=4", "memory.forget_floor=0.1"]
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
