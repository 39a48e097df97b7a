"""The recall test (issue 22 §3) end to end on a shortened scenario (``tests/data/week/recall-short.yaml``):
a fact told to a resident on day 2, every resident probed inside the run on days 2, 3 and 4 about it, the world
events and its plans of days 1 and 2, scored from the trace alone; probes read without changing the town; a run
killed at the telling resumes identical."""

from __future__ import annotations

import pytest

from simulacra.clock import MINUTES_PER_DAY, parse_hhmm
from simulacra.config import load_config
from simulacra.errors import ScenarioError
from simulacra.evaluation.metrics import Similarity, evaluate_run
from simulacra.evaluation.recall import Scan, recall_metrics, rows
from simulacra.evaluation.scenario import load_scenario
from simulacra.evaluation.setup import run_scenario
from simulacra.evaluation.variants import variant
from simulacra.killpoint import ENV, InjectedFault
from simulacra.simulation import Simulation
from tests.conftest import DATA, TELL_ALL
from tests.test_resume import tick_lines

SCENARIO = DATA / "week" / "recall-short.yaml"
TOLD = (2 - 1) * MINUTES_PER_DAY + parse_hhmm("10:00")
PROBES = [(d - 1) * MINUTES_PER_DAY + parse_hhmm(t) for d, t in ((2, "20:00"), (3, "20:00"), (4, "19:30"))]
TICK = 30


@pytest.fixture(scope="module")
def exact_embedder():
    from simulacra.embeddings import build_embedder

    return build_embedder()


def config(rater_url):
    return load_config(None, [f"rater.url={rater_url}", "simulation.seed=5", TELL_ALL])


@pytest.fixture(scope="module")
def reference(tmp_path_factory, rater_url, exact_embedder):
    sc = load_scenario(SCENARIO)
    db = tmp_path_factory.mktemp("recall")
    run_scenario(sc, config(rater_url), variant("full"), db, "ref", exact_embedder)
    return sc, db / "ref"


def test_the_fact_is_told_at_its_time_and_probes_run_at_theirs(reference):
    sc, run_dir = reference
    scan = Scan.load(run_dir)
    # the telling: Ann's memory of what the surveyor said, at the tick holding 10:00 on day 2, tagged as news
    bridge = sc.facts[0].text
    assert scan.header["scenario"]["schedule"]["tellings"][0]["minute"] == TOLD
    assert scan.texts  # every memory written
    told = [(tid, text) for tid, text in scan.texts.items() if text.startswith("The county surveyor told Ann Archer")]
    assert told == [(told[0][0], f'The county surveyor told Ann Archer: "{bridge}"')]
    # she passes it on afterwards, as news she heard from the surveyor
    passed = [(t["time"], line) for t in scan.ticks for c in t["conversations"] for line in c["lines"]
              if line.get("topic") == bridge]
    assert passed and min(tm for tm, _ in passed) > TOLD
    assert any(ln["speaker"] == "ann" and "the county surveyor" in ln["text"] for _, ln in passed)
    # probes: at the end of the ticks holding the three moments, under the run's profiles and the scenario's own
    assert [p["time"] for p in scan.probes] == [m + TICK for m in PROBES]
    for p in scan.probes:
        assert p["profiles"] == ["situational", "recall", "recent"] and p["interview"] == "recall"
        assert {a["agent"] for a in p["asks"]} == {"ann", "ben", "cal"}
        for a in p["asks"]:
            assert set(a["results"]) == set(p["profiles"]) and a["answer"]
            assert all(i in p["memories"] for ids in a["results"].values() for i in ids)
        assert set(p["counts"]) == {"ann", "ben", "cal"}
    # plans are asked once their day has ended: day 2's only from day 3 on
    about = [{a["about"] for a in p["asks"]} for p in scan.probes]
    assert "plan:1" in about[0] and "plan:2" not in about[0] and "plan:2" in about[1]


def test_plans_are_stored_with_the_hours_they_are_about_day_summaries_without(reference):
    """A plan step's memory is about its step's hours, a day plan's and the night's plan summary's about the plan's
    hours (``x_span_start`` / ``x_span_end``, :attr:`MemoryRecord.span`); the rest, the day's episodes too, have none.
    Read from the stores a fresh process opens at the end of the run."""
    import re

    from tests.conftest import read_stores

    _, run_dir = reference
    stores = read_stores(run_dir, ["ann", "ben", "cal"], ("short_term", "long_term"))
    seen = {"step": 0, "day plan": 0, "summary": 0, "plan summary": 0}
    for tiers in stores.values():
        for text, meta, _ in (m for tier in tiers.values() for m in tier.values()):
            ts, kind = meta["timestamp"], meta["kind"]
            span = (meta.get("x_span_start"), meta.get("x_span_end"))
            if kind not in ("plan", "summary"):
                assert span == (None, None), text
                continue
            lo, hi = span
            day = ts - ts % MINUTES_PER_DAY
            if kind == "plan" and (m := re.search(r"from (\d\d):(\d\d) to (\d\d):(\d\d)", text)):
                seen["step"] += 1
                assert lo % MINUTES_PER_DAY == int(m[1]) * 60 + int(m[2]) and lo <= ts < hi, text
                assert (hi - lo) % MINUTES_PER_DAY == (int(m[3]) * 60 + int(m[4]) - lo) % MINUTES_PER_DAY, text
            elif kind == "plan":  # about its day up to bedtime, not the night that runs into the next morning
                seen["day plan"] += 1
                assert lo <= ts + 60 and hi - lo >= 8 * 60 and hi <= day + MINUTES_PER_DAY, text
            elif "plan for day" in text:
                seen["plan summary"] += 1
                assert lo < ts and hi - lo >= 8 * 60 and hi <= day + MINUTES_PER_DAY, text
            else:  # the day's episodes: a digest made at night, about the moments it names, not the whole day
                seen["summary"] += 1
                assert span == (None, None), text
    assert seen["step"] and seen["summary"] and seen["plan summary"], seen  # day plans are forgotten by day 4


def test_recall_is_scored_from_the_trace_labels(reference, exact_embedder):
    sc, run_dir = reference
    scan = Scan.load(run_dir)
    sim = Similarity(exact_embedder)
    table = rows(scan, sc, sim)
    ann = [r for r in table if r["agent"] == "ann" and r["about"] == "fact:bridge"]
    assert [r["learned"] for r in ann] == [TOLD] * 3  # told by the scenario
    assert [r["age_days"] for r in ann] == [round((p + TICK - TOLD) / MINUTES_PER_DAY, 3) for p in PROBES]
    assert all(r["found"]["recall"] and r["answered"] for r in ann)
    # Ben and Cal heard it from Ann (or each other), later: the label is the first line telling it to them in the
    # trace, and a probe before that finds them not knowing it yet
    heard: dict[str, int] = {}
    for t in scan.ticks:
        for c in t["conversations"]:
            for line in c["lines"]:
                if line.get("topic") == sc.facts[0].text:
                    heard.setdefault(next(p for p in c["participants"] if p != line["speaker"]), t["time"])
    others = [r for r in table if r["about"] == "fact:bridge" and r["agent"] != "ann"]
    assert {r["agent"] for r in others} == {"ben", "cal"} and len(others) == 6
    for r in others:
        assert r["learned"] == heard[r["agent"]] > TOLD
        assert r["known"] == (r["learned"] <= r["time"]) and (r["age_days"] is None) == (not r["known"])
    assert others[-1]["known"] and others[-2]["known"]  # both know it by the last probe
    # each resident's plan of day 1, two and three days later, is found by its plan summary
    plans = [r for r in table if r["about"] == "plan:1"]
    assert len(plans) == 9 and all(r["known"] and r["found"]["recall"] for r in plans)
    # the well accident was seen by Ann alone (Ben and Cal were elsewhere at 09:00 on day 1)
    well = [r for r in table if r["about"] == "event:0"]
    assert {r["agent"] for r in well if r["known"]} == {"ann"} and sum(r["known"] for r in well) == 3  # 3 probes
    m = recall_metrics(scan, sc, sim)
    assert m["overall"]["recall"]["fact"] == 1.0 and m["by_fact"]["bridge"]["4"] == {"knowers": 3, "found": 1.0}
    assert [x["day"] for x in m["memories_per_agent"]] == [2, 3, 4]
    assert all(x["total"] == pytest.approx(x["static"] + x["short_term"] + x["long_term"], abs=0.02)
               for x in m["memories_per_agent"])
    # the evaluation reports the same
    assert evaluate_run(run_dir, sc, exact_embedder, interviews=False)["recall"]["overall"] == m["overall"]


def test_a_retrieval_that_misses_is_scored_as_missed(reference, exact_embedder):
    """Scoring is not blind: a probe whose results are taken away finds nothing."""
    sc, run_dir = reference
    scan = Scan.load(run_dir)
    for p in scan.probes:
        for a in p["asks"]:
            a["results"] = {name: [] for name in a["results"]}
            a["answer"], a["answer_ids"] = "I do not remember anything about that.", []
    m = recall_metrics(scan, sc, Similarity(exact_embedder))
    assert all(v in (0.0, None) for prof in m["overall"].values() for v in prof.values())
    assert all(v["answered"] in (0.0, None) for kind in m["answered_by_age"].values() for v in kind.values())


def test_probes_only_read_the_town_runs_the_same_without_them(reference, tmp_path, rater_url, exact_embedder):
    import json

    sc, run_dir = reference
    plain = sc.model_copy(update={"recall": None})
    run_scenario(plain, config(rater_url), variant("full"), tmp_path, "plain", exact_embedder)
    with_probes = [json.loads(x) for x in tick_lines(run_dir) if x]
    without = [json.loads(x) for x in tick_lines(tmp_path / "plain") if x]
    assert sum("probes" in t for t in with_probes) == 3 and not any("probes" in t for t in without)
    assert [{k: v for k, v in t.items() if k != "probes"} for t in with_probes] == without


def test_probes_over_three_shards_write_the_probes_of_one(reference, tmp_path, rater_url, exact_embedder):
    """Each shard probes its agents and the town merges their records (``merge_probes``: asks ask-major then in
    agent order, the memories in the order the asks return them, counts in agent order): three shards write the
    run of one byte for byte, its three probe records included. A Ray worker's shard runs the same method."""
    sc, run_dir = reference
    run_scenario(sc, config(rater_url), variant("full"), tmp_path, "sharded", exact_embedder, shards=3)
    lines = tick_lines(tmp_path / "sharded")
    assert sum(b'"probes"' in x for x in lines) == 3
    assert lines == tick_lines(run_dir)


def test_a_run_killed_at_the_telling_resumes_identical(reference, tmp_path, rater_url, exact_embedder, monkeypatch):
    from simulacra.evaluation.setup import start_run

    sc, run_dir = reference
    tick = (TOLD - parse_hhmm("07:00")) // TICK
    monkeypatch.setenv(ENV, f"tick={tick}:phase=remember1:mode=raise")
    sim, ticks = start_run(sc, config(rater_url), variant("full"), tmp_path, "k", exact_embedder)
    with sim, pytest.raises(InjectedFault):
        sim.run(ticks)
    monkeypatch.delenv(ENV)
    with Simulation.resume(tmp_path / "k", embedder=exact_embedder) as sim:
        assert sim.state.now == TOLD
        sim.run(ticks - sim.ticks_done)
    assert tick_lines(tmp_path / "k") == tick_lines(run_dir)


@pytest.mark.parametrize("edit, field, words", [
    ({"told_by": "The postman"}, "facts.0", "told_by needs told_at"),
    ({"told_at": {"day": 9, "time": "10:00"}}, "facts.0.told_at", "outside the run"),
    ({"told_at": {"day": 2, "time": "10:00"}, "holders": []}, "facts.0.told_at", "needs holders"),
])
def test_a_broken_telling_is_named(tmp_path, edit, field, words):
    import yaml

    data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    fact = {k: v for k, v in data["facts"][0].items() if k not in ("told_at", "told_by")}
    data["facts"][0] = {**fact, **edit}
    data["world"] = str(DATA / "week" / "tinyweek.yaml")
    data["personas_dir"] = str(DATA / "week" / "personas")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(ScenarioError) as e:
        load_scenario(bad)
    assert e.value.field == field and words in str(e.value)


def test_a_probe_outside_the_run_a_taken_profile_name_or_a_plan_never_asked_is_named(tmp_path):
    import yaml

    for recall, field in (({"at": [{"day": 5, "time": "10:00"}]}, "recall.at.0"),
                          ({"at": [{"day": 2, "time": "10:00"}], "profiles": {"recall": {"a_rec": 1}}},
                           "recall.profiles.recall"),
                          ({"at": [{"day": 2, "time": "10:00"}], "plan_days": [1, 2]}, "recall.plan_days.1")):
        data = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
        data.update(recall=recall, world=str(DATA / "week" / "tinyweek.yaml"),
                    personas_dir=str(DATA / "week" / "personas"))
        bad = tmp_path / "bad.yaml"
        bad.write_text(yaml.safe_dump(data), encoding="utf-8")
        with pytest.raises(ScenarioError) as e:
            load_scenario(bad)
        assert e.value.field == field


@pytest.mark.parametrize("name", ["no-memory", "no-planning"])
def test_an_ablated_run_resumes_ablated(tmp_path, rater_url, exact_embedder, monkeypatch, name):
    """A variant's ablations are part of the run: a run of ``no-memory`` (or ``no-planning``) stopped half way and
    resumed goes on without memory (without plans), as the uninterrupted run does; the resume reads them from the
    trace header, so a resumed ablated run cannot silently become a full one."""
    from collections import Counter

    from simulacra import killpoint
    from simulacra.evaluation.setup import start_run

    sc = load_scenario(SCENARIO).model_copy(update={"recall": None})
    sc = sc.model_copy(update={"until": sc.until.model_copy(update={"day": 2, "time": "12:00"})})
    run_scenario(sc, config(rater_url), variant(name), tmp_path, "whole", exact_embedder)
    monkeypatch.setattr(killpoint, "_seen", Counter())  # the kill points reached by this process's earlier runs
    monkeypatch.setenv(ENV, "tick=23:phase=remember1:mode=raise")  # 18:30 on day 1
    sim, ticks = start_run(sc, config(rater_url), variant(name), tmp_path, "k", exact_embedder)
    with sim, pytest.raises(InjectedFault):
        sim.run(ticks)
    monkeypatch.delenv(ENV)
    with Simulation.resume(tmp_path / "k", embedder=exact_embedder) as sim:
        assert sim.ticks_done == 23
        sim.run(ticks - sim.ticks_done)
    assert tick_lines(tmp_path / "k") == tick_lines(tmp_path / "whole")
