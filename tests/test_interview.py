"""An interview question about a time before the run began ("What did you do yesterday?" on day 1): the time is read
and shown as before the run, the agent recalls its timeless (static) memories only, and the scripted answer says it
has no memories from then; a language-model mind is given the same memories (simulacra.interview, timecue)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from simulacra.cognition.mind import Answer, Decision
from simulacra.cognition.scripted import ScriptedMind
from simulacra.config import Config, MemoryConfig
from simulacra.interview import ask, format_interview
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.stream import AgentMemory
from simulacra.persona import Persona
from tests.conftest import DATA, unit

DAY = 24 * 60
RUN_START = 7 * 60  # the run began at 07:00 on day 1 (game days count from 1; day 1 00:00 is game minute 0)


def at(day: int, hhmm: str) -> int:
    h, m = hhmm.split(":")
    return (day - 1) * DAY + int(h) * 60 + int(m)


class SameVector:
    """Embeds every text alike: relevance ties, so the tiers and the time named decide."""

    dim = 8

    def embed(self, texts):
        return np.stack([unit(1, 0.3)] * len(texts))


class ModelMind:
    """A stand-in language-model mind: answers in its own words and keeps the memories it was given."""

    name = "llm"

    def __init__(self):
        self.seen: list[list[str]] = []

    def interview(self, view, question):
        self.seen.append([m.id for m in view.memories])
        return Decision(Answer("Yesterday? I do not recall.", ()), tuple(m.id for m in view.memories), source="llm")


@pytest.fixture
def ann(tmp_path):
    """Ann's memory: her persona facts (static, no time) and what she did on day 1 and day 2 of a run begun at
    07:00 on day 1."""
    cfg = Config(memory=MemoryConfig(relevance="dense", forget_floor=None, top_k=3))
    persona = Persona.model_validate(json.loads((DATA / "personas" / "ann.json").read_text()))
    persona.id = "ann"
    mem = AgentMemory("ann", tmp_path / "ann", cfg.memory, SameVector.dim)
    facts = ["Ann Archer, 40, is a water carrier.", "Ann Archer lives at the cottage.",
             "On a usual day at 08:00, Ann Archer is drawing water."]
    static = [MemoryRecord(id=memory_id("ann", -1, t), text=t, kind="persona") for t in facts]
    mem.set_static(static, np.stack([unit(1, 0.3)] * len(static)))
    lived = {"day1": ("Ann Archer carried water to the shop.", at(1, "09:00")),
             "day2": ("Ann Archer swept the yard.", at(2, "09:00"))}
    records = {k: MemoryRecord(id=memory_id("ann", ts, text), text=text, kind="observation", rating=5,
                               timestamp=float(ts), tick=0) for k, (text, ts) in lived.items()}
    mem.add(list(records.values()), np.stack([unit(1, 0.3)] * len(records)))
    return mem, cfg, persona, {r.id for r in static}, records


def _ask(ann, question, now, mind=None, run_start=RUN_START):
    mem, cfg, persona, _, _ = ann
    return ask(mem, mind or ScriptedMind(), SameVector(), cfg, persona, question, now, "cottage_a",
               {"ann": "Ann Archer"}, {"cottage_a": "the cottage"}, run_start=run_start)


def test_yesterday_on_day_1_is_before_the_run_and_the_answer_says_so(ann):
    _, _, _, static, records = ann
    r = _ask(ann, "What did you do yesterday?", at(1, "10:00"))
    assert r["profile"] == "dated" and r["named_time"] == [at(0, "00:00"), at(0, "23:59"), "yesterday", RUN_START]
    assert {m["id"] for m in r["retrieved"]} == static  # what holds then: the timeless facts, not the day's memories
    assert records["day1"].text not in r["answer"]
    assert r["answer"].startswith('I have no memories from day 0 00:00 to day 0 23:59 ("yesterday"): that is '
                                  "before the run began, at day 1 07:00.")
    assert "before the run began (day 1 07:00); no memory is from then: static memories only" in format_interview(r)


@pytest.mark.parametrize("question, now", [
    ("What did you do the day before yesterday?", at(2, "10:00")), ("What did you do on day 0?", at(2, "10:00")),
    ("What did you do last night?", at(1, "10:00")), ("Whom did you see at 6:00?", at(1, "10:00")),
])
def test_other_times_before_the_run_recall_the_timeless_facts_only(ann, question, now):
    _, _, _, static, _ = ann
    r = _ask(ann, question, now)
    assert r["named_time"][3] == RUN_START and {m["id"] for m in r["retrieved"]} == static
    assert r["answer"].startswith("I have no memories from ")


def test_a_model_gets_the_same_memories_and_answers_in_its_own_words(ann):
    _, _, _, static, _ = ann
    mind = ModelMind()
    r = _ask(ann, "What did you do yesterday?", at(1, "10:00"), mind)
    assert set(mind.seen[0]) == static and r["answer"] == "Yesterday? I do not recall."
    assert r["named_time"][3] == RUN_START


def test_yesterday_on_day_2_answers_from_day_1_as_before(ann):
    _, _, _, _, records = ann
    r = _ask(ann, "What did you do yesterday?", at(2, "10:00"))
    assert r["named_time"] == [at(1, "07:00"), at(1, "23:59"), "yesterday"]  # day 1, from the run's first minute
    assert r["retrieved"][0]["id"] == records["day1"].id and r["answer"].startswith("What I remember: Ann Archer "
                                                                                   "carried water to the shop.")
    # read with the run's start unknown (day 1 00:00) the same memories answer, in the same words
    unknown = _ask(ann, "What did you do yesterday?", at(2, "10:00"), run_start=0)
    assert unknown["named_time"] == [at(1, "00:00"), at(1, "23:59"), "yesterday"]
    assert (unknown["answer"], unknown["retrieved"]) == (r["answer"], r["retrieved"])
    # each memory says when it formed (a static fact: never); the listing shows it (it showed no time at all)
    first = r["retrieved"][0]
    assert (first["time"], first["clock"]) == (records["day1"].timestamp, "day 1 (Monday) 09:00")
    assert all(m["clock"] is None for m in r["retrieved"] if m["tier"] == "static")
    assert f"  {first['score']:.3f}  {first['tier']:<10} day 1 (Monday) 09:00 " in format_interview(r)


def test_a_time_partly_before_the_run_keeps_its_part_inside(ann):
    _, _, _, _, records = ann
    r = _ask(ann, "What did you do this morning?", at(1, "10:00"))
    assert r["named_time"] == [at(1, "07:00"), at(1, "10:00"), "this morning"]
    assert r["retrieved"][0]["id"] == records["day1"].id and r["answer"].startswith("What I remember:")


def test_the_command_line_shows_yesterday_on_day_1_as_before_the_run(tmp_path, rater_url, embedder, capsys):
    """A finished run begun at 08:00 (the world's start_time; trace header start_minute): ``simulacra interview``
    reads the run's first minute from its trace, and its text and JSON say the question is about before it."""
    from simulacra.cli import main
    from simulacra.config import load_config
    from simulacra.interview import interview
    from simulacra.simulation import Simulation

    config = load_config(None, [f"rater.url={rater_url}"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="yday", embedder=embedder) as sim:
        sim.run(3)
    r = interview(sim.run_dir, "ann", "What did you do yesterday?", embedder=embedder)
    assert r["named_time"] == [at(0, "00:00"), at(0, "23:59"), "yesterday", 8 * 60]
    assert r["retrieved"] and {m["tier"] for m in r["retrieved"]} == {"static"} and r["forgotten"] == []
    assert r["answer"].startswith('I have no memories from day 0 00:00 to day 0 23:59 ("yesterday"): that is before '
                                  "the run began, at day 1 08:00.")
    assert main(["interview", str(sim.run_dir), "--agent", "ann", "What did you do yesterday?"]) == 0
    out = capsys.readouterr().out
    assert 'named by "yesterday", before the run began (day 1 08:00); no memory is from then' in out
    assert main(["interview", str(sim.run_dir), "--agent", "ann", "--json", "What did you do yesterday?"]) == 0
    assert json.loads(capsys.readouterr().out)["named_time"][3] == 8 * 60


def test_a_models_fallback_to_the_scripted_answer_says_the_time_is_before_the_run(ann):
    """The mind is given the time named (AgentView.named_time): a model that falls back to the scripted answer, as
    the language-model mind does on a bad answer, says it has no memories from then without the interview's help."""

    class FallingBack:
        name = "llm"

        def interview(self, view, question):
            d = ScriptedMind().interview(view, question)
            return Decision(d.value, d.memory_ids, source="fallback")

    r = _ask(ann, "What did you do yesterday?", at(1, "10:00"), FallingBack())
    assert r["source"] == "fallback" and r["answer"].startswith('I have no memories from day 0 00:00 to day 0 23:59')
