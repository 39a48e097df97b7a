"""Several game days: days roll over, rest days follow the rest-day routine, plans are made each morning, events
fire on their day, sleepers perceive nothing, and runs stay deterministic and resumable across midnight.

The town is ``tests/data/week/tinyweek.yaml``: three residents over a Saturday (a working day) and a Sunday (the
world's rest day), ticks of 30 game minutes, run with ``--days 2`` (07:00 day 1 to 21:00 day 2: 76 ticks).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.clock import MINUTES_PER_DAY, day_start, format_game_time, parse_hhmm
from simulacra.config import load_config
from simulacra.days import is_sleeping, plan_day_at, routine_entry_at
from simulacra.killpoint import ENV, InjectedFault
from simulacra.simulation import Simulation
from simulacra.world import load_world
from tests.conftest import DATA, ROOT, TELL_ALL
from tests.test_resume import stores, tick_lines

WORLD = DATA / "week" / "tinyweek.yaml"
PERSONAS = DATA / "week" / "personas"
SETTINGS = [TELL_ALL, "simulation.seed=5", "reflection.threshold=40", "simulation.conversation_probability=0.8"]
TICKS = 76  # 07:00 day 1 .. 20:30 day 2, ticks of 30 minutes
PERCEPTS = {"observation", "event"}
TINKER = "A travelling tinker"
FOX = "A fox slips"
NAMES = {"ann": "Ann Archer", "ben": "Ben Brook", "cal": "Cal Carter"}


def at(day: int, hhmm: str) -> int:
    return (day - 1) * MINUTES_PER_DAY + parse_hhmm(hhmm)


@pytest.fixture(scope="module")
def exact_embedder():
    """Embeddings as a run makes them (``embedding.exact``: a text's vector never depends on its batch), so that
    in-process runs and a resumed run match the CLI's run bit for bit."""
    from simulacra.embeddings import build_embedder

    return build_embedder()


@pytest.fixture(scope="module")
def world():
    return load_world(WORLD, PERSONAS)


@pytest.fixture(scope="module")
def reference(tmp_path_factory, rater_url):
    """``simulacra run --days 2`` of the week town (a real subprocess): its folder and its tick records."""
    db = tmp_path_factory.mktemp("days")
    args = ["--world", str(WORLD), "--personas-dir", str(PERSONAS), "--days", "2", "--run-name", "ref",
            "--db-dir", str(db), "--rater-url", rater_url, "--quiet", "--json"]
    for s in SETTINGS:
        args += ["--set", s]
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", *args], cwd=ROOT, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    run_dir = db / "ref"
    ticks = [json.loads(x) for x in tick_lines(run_dir) if x]
    return run_dir, ticks, json.loads(r.stdout)


def create(tmp_path, rater_url, embedder, name):
    config = load_config(None, [f"rater.url={rater_url}", *SETTINGS])
    return Simulation.create(WORLD, config, personas_dir=PERSONAS, db_dir=tmp_path, run_name=name, embedder=embedder)


def tick_at(ticks, minute):
    (t,) = [t for t in ticks if t["time"] == minute]
    return t


# --------------------------------------------------------------------------- the calendar
def test_plan_days_follow_the_rest_days_and_cross_midnight(world):
    ann, ben, cal = (world.personas[p] for p in ("ann", "ben", "cal"))
    sat = plan_day_at(ann, world, at(1, "12:00"))
    assert (sat.day, sat.weekday, sat.rest_day) == (1, "Saturday", False)
    # Saturday's plan day runs to Sunday's wake-up, which is later on a rest day (09:00, not 07:00)
    assert (sat.start, sat.end) == (at(1, "07:00"), at(2, "09:00"))
    # before Sunday's wake-up Ann is still in Saturday's last entry: asleep at home
    assert plan_day_at(ann, world, at(2, "08:30")) == sat
    assert routine_entry_at(ann, world, at(2, "08:30")) == (3, ann.routine[3])
    sun = plan_day_at(ann, world, at(2, "09:00"))
    assert (sun.day, sun.weekday, sun.rest_day, sun.routine) == (2, "Sunday", True, tuple(ann.rest_day_routine))
    assert sun.end == at(3, "07:00")  # Monday is a working day again
    assert routine_entry_at(ann, world, at(2, "11:30")) == (1, ann.rest_day_routine[1])
    # a persona without a rest-day routine keeps its routine on Sunday
    assert plan_day_at(cal, world, at(2, "12:00")).routine == tuple(cal.routine)
    # asleep: a sleep entry at home, and at home
    assert is_sleeping(ben, world, at(2, "03:00"), "shop")
    assert not is_sleeping(ben, world, at(2, "03:00"), "well")  # not home yet
    assert not is_sleeping(ben, world, at(1, "12:00"), "shop")
    assert is_sleeping(ann, world, at(2, "08:30"), "cottage_a") and not is_sleeping(ann, world, at(2, "09:00"),
                                                                                        "cottage_a")


def test_the_night_is_the_last_routine_entry_at_home_whatever_its_words(world):
    fernhollow = load_world(ROOT / "worlds" / "fernhollow.yaml")
    yusuf = fernhollow.personas["yusuf_demir"]  # his last entry: "reading by the fire and going to bed"
    assert "sleep" not in yusuf.routine[-1].activity
    assert is_sleeping(yusuf, fernhollow, at(1, "23:00"), yusuf.home)
    assert not is_sleeping(yusuf, fernhollow, at(1, "18:00"), yusuf.home)
    # a one-entry routine has no night; a last entry away from home (a night shift) neither
    one = world.personas["cal"].model_copy(update={"routine": world.personas["cal"].routine[:1]})
    assert not is_sleeping(one, world, at(2, "03:00"), one.home)
    shift = world.personas["ben"].model_copy(update={"routine": world.personas["ben"].routine[:2],
                                                     "home": "well", "rest_day_routine": None})
    assert not is_sleeping(shift, world, at(2, "03:00"), "well")


def test_run_length_weekday_and_rest_day_facts(world):
    assert world.run_minutes() == parse_hhmm("21:00") - parse_hhmm("07:00")
    assert world.run_minutes(2) == MINUTES_PER_DAY + world.run_minutes()
    with pytest.raises(ValueError):
        world.run_minutes(0)
    assert format_game_time(at(2, "09:05"), world.start_weekday) == "day 2 (Sunday) 09:05"
    assert format_game_time(at(2, "09:05"), world.start_weekday, world.rest_days) == "day 2 (Sunday, rest day) 09:05"
    assert format_game_time(at(1, "09:05"), world.start_weekday, world.rest_days) == "day 1 (Saturday) 09:05"
    assert format_game_time(at(9, "00:00"), "Saturday") == "day 9 (Sunday) 00:00"
    assert format_game_time(at(2, "09:05")) == "day 2 09:05"
    facts = world.personas["ann"].facts()
    assert "On a rest day at 11:00, Ann Archer is picking flowers in the meadow." in facts
    assert not any("rest day" in f for f in world.personas["cal"].facts())


def test_days_below_one_is_a_clear_error(capsys):
    from simulacra.cli import main

    assert main(["run", "--days", "0", "--world", str(WORLD), "--personas-dir", str(PERSONAS)]) == 2
    assert "--days must be >= 1, got 0" in capsys.readouterr().err


# --------------------------------------------------------------------------- a two-day run
def test_the_cli_runs_two_days_and_the_summary_names_day_and_weekday(reference):
    _, ticks, summary = reference
    assert len(ticks) == TICKS and ticks[0]["time"] == at(1, "07:00") and ticks[-1]["time"] == at(2, "20:30")
    assert summary["game_time"] == "day 2 (Sunday, rest day) 21:00"
    days = {e["text"].split()[2]: (e["day"], e["weekday"], e["time"]) for e in summary["events"]}
    assert days == {"tinker": (2, "Sunday", "12:00"), "slips": (1, "Saturday", "23:30"),
                    "well's": (1, "Saturday", "09:00")}


def test_each_agent_plans_once_per_day_and_sunday_follows_the_rest_day_routine(reference, world):
    _, ticks, _ = reference
    plans = {}
    for t in ticks:
        for d in t["decisions"]:
            if d["kind"] == "plan_day":
                plans.setdefault(d["agent"], []).append((t["time"], d["value"]))
    assert {a: [when for when, _ in p] for a, p in plans.items()} == {
        "ann": [at(1, "07:00"), at(2, "09:00")], "ben": [at(1, "07:00"), at(2, "08:00")],
        # Cal wakes at 06:00: on day 1 the run starts after his wake-up, and he plans at its first tick
        "cal": [at(1, "07:00"), at(2, "06:00")]}
    for pid, ((_, sat), (_, sun)) in plans.items():
        persona = world.personas[pid]
        assert [i["activity"] for i in sat] == [e.activity for e in persona.routine]
        assert [i["activity"] for i in sun] == [e.activity for e in persona.routine_for(rest_day=True)]
        assert sat[-1]["end"] == sun[0]["start"]  # the plan lasts until the next morning's wake-up
    # what the agents do follows the plan: on Sunday afternoon Ann picks flowers in the field, Ben reads at home
    sunday = tick_at(ticks, at(2, "14:00"))
    assert sunday["actions"]["ann"]["activity"] == "picking flowers in the meadow"
    assert sunday["positions"]["ann"] == "field"
    assert tick_at(ticks, at(1, "14:00"))["positions"]["ann"] == "cottage_a"
    # routine_index indexes Sunday's routine: Ben's rest-day entry 0 (at the well) sets the bucket on Sunday only
    new_rope = [t["time"] for t in ticks if t["object_changes"].get("bucket") == "hanging from a new rope"]
    assert new_rope and all(at(2, "08:00") <= m < at(2, "10:00") for m in new_rope)
    assert tick_at(ticks, at(2, "08:30"))["actions"]["ben"]["routine_index"] == 0


def test_events_fire_on_their_day_only(reference):
    _, ticks, _ = reference
    fired = {t["time"]: t["events"] for t in ticks if t["events"]}
    assert [m for m, evs in fired.items() if any(e.startswith(TINKER) for e in evs)] == [at(2, "12:00")]
    assert [m for m, evs in fired.items() if any(e.startswith("The old well") for e in evs)] == [at(1, "09:00")]
    perceived = [(t["time"], op["agent"]) for t in ticks for op in t["memory"]
                 if op["op"] == "add" and op["text"].startswith(TINKER)]
    assert perceived and all(m == at(2, "12:00") for m, _ in perceived)


def test_sleepers_perceive_retrieve_and_talk_nothing(reference, world):
    _, ticks, _ = reference
    night = tick_at(ticks, at(2, "03:00"))
    assert night["asleep"] == ["ann", "ben", "cal"]
    assert [op for op in night["memory"] if op["op"] in ("add", "retrieve")] == []
    for t in ticks:
        asleep = set(t.get("asleep", []))
        for pid in asleep:  # the rule, checked against the trace: a sleep entry at home, and at home
            assert is_sleeping(world.personas[pid], world, t["time"], t["positions"][pid])
        for op in t["memory"]:
            if op["op"] == "add" and op["kind"] in PERCEPTS or op["op"] == "retrieve":
                assert op["agent"] not in asleep, (t["clock"], op)
        assert not {p for c in t["conversations"] for p in c["participants"]} & asleep
    # the fox crossed Cal's field at 23:30 while he slept there: nobody remembers it
    fox = tick_at(ticks, at(1, "23:30"))
    assert fox["events"][0].startswith(FOX) and fox["positions"]["cal"] == "field" and "cal" in fox["asleep"]
    assert not [op for t in ticks for op in t["memory"] if op["op"] == "add" and op["text"].startswith(FOX)]
    # on waking an agent perceives and retrieves again
    wake = tick_at(ticks, at(2, "09:00"))
    assert "ann" not in wake.get("asleep", []) and any(
        op["op"] == "retrieve" and op["agent"] == "ann" for op in wake["memory"])
    # day ticks with everyone awake exist too (the night is not the whole run)
    assert sum(1 for t in ticks if not t.get("asleep")) >= 30


def test_consolidation_and_reflection_go_on_across_the_night(reference):
    _, ticks, _ = reference
    night = [t for t in ticks if len(t.get("asleep", [])) == 3]
    assert any(op["op"] in ("move", "forget") for t in night for op in t["memory"])  # consolidation while asleep
    reflected = {(t["time"] // MINUTES_PER_DAY + 1) for t in ticks for op in t["memory"]
                 if op["op"] == "reflect" and op["insights"]}
    assert reflected == {1, 2}


def test_each_agent_sums_up_its_day_once_at_night_from_what_it_lived(reference):
    """The nightly episodic summary (memory.day_summary, at 23:30): one long-term memory per agent and day, listing
    the day's episodes rated 6 or more with the ids of the memories they rest on, all of them the agent's own."""
    _, ticks, _ = reference
    added = {}  # id -> add operation, in trace order
    for t in ticks:
        for op in t["memory"]:
            if op["op"] == "add":
                added.setdefault(op["id"], {**op, "time": t["time"]})
    plans = [op for op in added.values() if op["kind"] == "summary" and "'s plan for day" in op["text"]]
    summaries = [op for op in added.values() if op["kind"] == "summary" and op not in plans]
    assert summaries and {op["time"] for op in summaries} == {at(1, "23:30")}  # day 2 ends at 21:00, before its own
    assert sorted(op["agent"] for op in summaries) == sorted({op["agent"] for op in summaries})  # one per agent
    # and what each had planned for the day, one per agent, rated by the rater, worded as the plan memory is
    assert sorted(op["agent"] for op in plans) == ["ann", "ben", "cal"]
    assert {op["time"] for op in plans} == {at(1, "23:30")} and all(1 <= op["rating"] <= 10 for op in plans)
    assert all(op["text"].startswith(f"{NAMES[op['agent']]}'s plan for day 1 (Saturday): ") for op in plans)
    for op in summaries:
        assert op["tier"] == "long_term" and op["text"].startswith(f"{NAMES[op['agent']]}'s day 1 (Saturday): ")
        sources = [added[i] for i in op["evidence_ids"]]  # each id is a memory the trace added before
        assert all(s["agent"] == op["agent"] and s["time"] <= op["time"] and s["rating"] >= 6 for s in sources)
        assert op["rating"] == max(s["rating"] for s in sources)
    # the well accident (rated high by everyone who saw it) is in the summary of each witness
    witnesses = {op["agent"] for op in added.values() if op["kind"] == "event" and "well's rope snaps" in op["text"]}
    assert witnesses and all("well's rope snaps" in op["text"] for op in summaries if op["agent"] in witnesses)


def test_a_line_telling_news_is_rated_at_least_as_the_news(reference, rater_backend):
    """memory.rate_news_by_topic: the greeting around news does not make it mundane."""
    _, ticks, _ = reference
    rating = {op["text"]: op["rating"] for t in ticks for op in t["memory"] if op["op"] == "add"}
    told = [(line, c) for t in ticks for c in t["conversations"] for line in c["lines"] if line.get("topic")]
    assert told
    for line, _ in told:
        floor = rater_backend.rate([line["topic"]])[0].rating
        text = f'{NAMES[line["speaker"]]} said to {NAMES[line["listener"]]}: "{line["text"]}"'
        assert rating[text] >= floor


def test_replay_and_inspect_show_day_weekday_and_sleep(reference):
    from simulacra.explain import explain_tick, format_explanation
    from simulacra.viewer.state import ReplayState

    run_dir, ticks, _ = reference
    night, sunday = tick_at(ticks, at(2, "03:00"))["tick"], tick_at(ticks, at(2, "14:00"))["tick"]
    replay = ReplayState.load(run_dir)
    assert replay.state_at(0).when == "day 1 (Saturday) 07:00"
    assert replay.state_at(sunday).when == "day 2 (Sunday, rest day) 14:00"
    assert replay.state_at(night).agents["ben"].asleep and not replay.state_at(sunday).agents["ben"].asleep
    e = explain_tick(run_dir, "ben", night)
    assert e["when"] == "day 2 (Sunday, rest day) 03:00" and e["asleep"] and e["perceived"] == []
    assert format_explanation(e).startswith("Ben Brook (ben) at tick 40, day 2 (Sunday, rest day) 03:00: going to "
                                            "sleep at Corner Shop (asleep")


def test_same_seed_same_trace_over_midnight(tmp_path, rater_url, exact_embedder, reference):
    ref_dir, _, _ = reference
    with create(tmp_path, rater_url, exact_embedder, "again") as sim:
        sim.run(TICKS)
    assert tick_lines(tmp_path / "again") == tick_lines(ref_dir)


def test_resume_across_midnight_ends_identical(tmp_path, rater_url, exact_embedder, reference, monkeypatch):
    """Faults inside the midnight tick and inside Sunday's first planning tick; each time the run is resumed from
    its checkpoint; it ends with the reference's trace and stores."""
    ref_dir, ref_ticks, _ = reference
    midnight = [t["tick"] for t in ref_ticks if t["time"] == at(2, "00:00")][0]
    morning = [t["tick"] for t in ref_ticks if t["time"] == at(2, "08:00")][0]  # Ben plans his Sunday
    run_dir = tmp_path / "k"
    night = [t["tick"] for t in ref_ticks if t["time"] == at(1, "23:30")][0]  # the day summaries are written
    faults = [(night, "summarise"), (midnight, "consolidate"), (morning, "remember2")]
    for i, (tick, phase) in enumerate(faults):
        monkeypatch.setenv(ENV, f"tick={tick}:phase={phase}:mode=raise")
        sim = (create(tmp_path, rater_url, exact_embedder, "k") if i == 0
               else Simulation.resume(run_dir, embedder=exact_embedder))
        with sim, pytest.raises(InjectedFault):
            sim.run(TICKS - sim.ticks_done)
        assert read_checkpoint(run_dir)["ticks_done"] == tick  # the whole file plus its journal
    monkeypatch.delenv(ENV)
    with Simulation.resume(run_dir, embedder=exact_embedder) as sim:
        assert sim.state.now == at(2, "08:00")
        sim.run(TICKS - sim.ticks_done)
    assert tick_lines(run_dir) == tick_lines(ref_dir)
    assert stores(run_dir) == stores(ref_dir)



def test_day_start_is_the_first_minute_of_the_day_floored():
    assert [day_start(m) for m in (0, 1439.5, 1440, 2 * MINUTES_PER_DAY + 615.0)] == [0, 0, 1440, 2 * MINUTES_PER_DAY]
    assert day_start(-360) == day_start(-0.5) == -MINUTES_PER_DAY  # before day 1 (yesterday evening asked on day 1)
