"""A recall question that names a time (issue 22 §1): the time cue it names, the dated profile it switches to,
recency measured from that time in the engine, its trace record, and ``simulacra tune``'s per-query switch."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulacra.clock import MINUTES_PER_DAY
from simulacra.config import SITUATIONAL, MemoryConfig, load_config
from simulacra.errors import ConfigError
from simulacra.memory.records import MemoryRecord, memory_id, span_extra
from simulacra.memory.scoring import ScoringInputs, ScoringParams, age_from
from simulacra.memory.stream import AgentMemory
from simulacra.memory.timecue import TimeCue, asks_latest, describe_named, time_cue
from simulacra.rescore import rerank
from simulacra.tune.inputs import PreparedQuery, TierInputs
from simulacra.tune.queries import Expected, LabelledQuery
from simulacra.tune.search import evaluate, for_profile, query_params, retrieve_ids
from simulacra.tune.settings import Setting, as_dated, as_latest, baseline_settings, profile_setting
from tests.conftest import unit

DAY = MINUTES_PER_DAY
NOW = 2 * DAY + 20 * 60 + 15  # day 3, 20:15


def at(day: int, hhmm: str) -> float:
    h, m = hhmm.split(":")
    return (day - 1) * DAY + int(h) * 60 + int(m)


@pytest.mark.parametrize("text, window, words", [
    ("What was Kofi doing at 15:30?", ("3 15:30", "3 15:30"), "15:30"),
    ("What did I plan for 16:20 on day 1?", ("1 16:20", "1 16:20"), "day 1 16:20"),
    ("at 21:00", ("2 21:00", "2 21:00"), "21:00"),  # not yet today: yesterday's
    ("What did we say at 1:20 p.m. yesterday?", ("2 13:20", "2 13:20"), "yesterday 1:20 p.m."),
    ("Who came by at noon?", ("3 12:00", "3 12:00"), "noon"),
    ("What did I plan for day 2?", ("2 00:00", "2 23:59"), "day 2"),
    ("Whom did I meet yesterday evening?", ("2 18:00", "3 00:00"), "yesterday evening"),
    ("What happened last night?", ("2 18:00", "3 06:00"), "last night"),
    ("What did Greta say this morning?", ("3 06:00", "3 12:00"), "this morning"),
    ("Did Greta come back yesterday, or this morning?", ("3 06:00", "3 12:00"), "this morning"),
    ("the day before yesterday", ("1 00:00", "1 23:59"), "the day before yesterday"),
    ("What did we eat last evening?", ("2 18:00", "3 00:00"), "last evening"),
    ("Who did I see yesterday afternoon at 3:15?", ("2 15:15", "2 15:15"), "yesterday afternoon 3:15"),
    ("What woke me last night at 1 am?", ("3 01:00", "3 01:00"), "last night 1 am"),
    # a clock time after a capitalised word that may stand before one, or at the start of a sentence
    ("At 15:30, who came by?", ("3 15:30", "3 15:30"), "15:30"),
    ("Noon: who came by?", ("3 12:00", "3 12:00"), "Noon"),
    ('Ruth said: "Midnight, and the lamps still lit."', ("3 00:00", "3 00:00"), "Midnight"),
    ("Did Pastor Reid read John 3:16 at noon?", ("3 12:00", "3 12:00"), "noon"),  # the verse is passed over
    # a time still going on, asked about in the past: up to now
    ("Whom did I meet this evening?", ("3 18:00", "3 20:15"), "this evening"),
    ("What happened tonight?", ("3 18:00", "3 20:15"), "tonight"),
    ("What did I do on day 3?", ("3 00:00", "3 20:15"), "day 3"),
])
def test_a_question_names_a_time_in_game_time(text, window, words):
    cue = time_cue(text, NOW)
    assert cue is not None
    assert (cue.start, cue.end) == tuple(at(int(w.split()[0]), w.split()[1]) for w in window)
    assert cue.words == words


@pytest.mark.parametrize("text", [
    "Has anyone seen whales or orcas near the island lately?",  # vague: relevance decides
    "the bus will no longer meet the afternoon ferry",  # a part of the day without a day
    "Ezra Pike's plans for today",  # the wake-up plan query: today names nothing
    "What did I plan for day 4?",  # after now: no memory was formed then
    "Is the surgery getting another doctor?", "", "last week's market",
    "Did the ferry come at last?", "When does the last ferry leave?", "What is her last name?",
    # the latest is the newest memory about the question, not a time (asks_latest, below)
    "When did I last talk with Greta?", "What did Bram tell me the last time we talked about the mill?",
    "What is the latest news?", "the most recent storm", "when I last saw her",
    # a chapter and verse, and a name, are not clock times
    "What does John 3:16 say?", "Did Pastor Reid read Psalm 23:14 or John 3:16-18?", "Did Noon Baptiste come by?",
    "Who is Midnight, the ferryman's horse?",
    # a time still going on (day 3, 20:15), asked about with no verb in the past: what is on, or ahead
    "Is there a storm coming tonight?", "What are we doing this evening?", "What is on for day 3?",
    "Do you need bread tonight?",
])
def test_a_question_without_a_time_names_none(text):
    assert time_cue(text, NOW) is None


@pytest.mark.parametrize(("text", "words"), [
    ("When did I last talk with Greta?", "did I last"), ("When did you last see him?", "did you last"),
    ("What did Bram tell me the last time we talked about the mill?", "last time"),
    ("What is the latest news?", "latest"), ("the most recent storm", "most recent"),
    ("when I last saw her", "last saw"),
    ("Did the ferry come at last?", None), ("When does the last ferry leave?", None), ("last week's market", None),
    ("What is her last name?", None), ("", None), (None, None),
    # "last" before a stretch of the calendar is when, not the latest (and names no time the clock can place)
    ("What did Jon buy last month?", None), ("When did Caroline move here last year?", None),
    ("What did Melanie do last weekend?", None), ("Did Deborah go to the market last Sunday?", None),
    ("What did we eat last May?", None), ("When did Gina last go to the gym?", "did Gina last"),
    ("What did you do last time we met?", "did you do last"),
    # how things stand now: the newest memory about it, unless the question is about the past
    ("What is Leila doing now?", "now"), ("Is the bakery still closed?", "still"),
    ("Where is Kofi at the moment?", "at the moment"), ("What happened while I was still at the forge?", None),
])
def test_a_question_that_asks_for_the_latest(text, words):
    assert asks_latest(text) == words


def test_a_named_time_wins_over_the_latest_and_both_are_read_as_asked():
    from simulacra.memory.perspective import third_person
    from simulacra.memory.timecue import time_words

    cue, latest = time_words("What did I last do at 15:30?", NOW)
    assert cue is not None and cue.words == "15:30" and latest is None  # about 15:30, not the latest
    assert time_words("When did I last see Kofi?", NOW) == (None, "did I last")
    assert time_words("", NOW) == time_words(None, NOW) == (None, None)
    # a name of five words put in for "you" would push "did ... last" apart: the question as asked is read
    named = third_person("When did you last talk with Ben?", "Siobhan Mary O'Brien de Vries", "second")
    assert "last" in named and time_words(named, NOW) == (None, "did you last")


def test_age_is_measured_from_the_named_window_zero_inside_it():
    ref = np.array([100.0, 200.0, 250.0, 400.0, np.nan])
    assert age_from(ref, 500.0).tolist()[:4] == [400, 300, 250, 100]
    assert age_from(ref, 500.0, (200.0, 300.0)).tolist()[:4] == [100, 0, 0, 100]
    assert np.isnan(age_from(ref, 500.0, (200.0, 300.0))[4])
    assert describe_named([at(3, "15:30"), at(3, "15:30"), "at 15:30"]) == 'day 3 15:30, named by "at 15:30"'


def test_recall_links_the_dated_profile_and_only_a_named_time_switches():
    m = MemoryConfig()
    assert m.profiles["recall"].dated == "dated" and "dated" not in m.overrides_of("recall")
    assert m.dated("recall", "What was Kofi doing at 15:30?", NOW)[0] == "dated"
    assert m.dated("recall", "What do I know about Kofi?", NOW) == ("recall", None)
    assert m.dated(SITUATIONAL, "at 15:30", NOW) == (SITUATIONAL, None)  # acting now never switches
    # seed 003's preset retrieves every purpose situationally: no switch anywhere
    assert load_config(None, ["memory.purposes={}"]).memory.profile_of("interview") == SITUATIONAL


@pytest.mark.parametrize("kind", ["dated", "latest"])
@pytest.mark.parametrize("link", ["then", "situational"])  # situational acts now: it cannot be switched to
def test_a_link_to_an_unknown_profile_is_named(link, kind):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"memory.profiles={{recall: {{a_rec: 0, {kind}: {link}}}}}"])
    assert f"profiles.recall.{kind}: unknown profile '{link}'" in str(e.value)


def _rec(text, ts, rating=5):
    return MemoryRecord(id=memory_id("ann", ts, text), text=text, kind="observation", rating=rating,
                        timestamp=float(ts), tick=int(ts // 10))


def _town_of_kofi(tmp_path):
    """Ann saw Kofi twelve times over three days, each sighting about equally relevant to a question about him
    (the one at 15:30 on day 2 a little less than the best): only the time tells them apart."""
    mem = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense", forget_floor=None, top_k=3), 8)
    times = [at(d, h) for d in (1, 2, 3) for h in ("09:00", "12:00", "15:30", "18:00")]
    recs = [_rec(f"Kofi Mensah is busy {i}", t) for i, t in enumerate(times)]
    vectors = np.stack([unit(1, 0.30 + 0.01 * ((i * 5) % 12)) for i in range(len(recs))])
    mem.add(recs, vectors)
    return mem, recs, times


def test_a_recall_question_that_names_a_time_retrieves_what_formed_then(tmp_path):
    mem, recs, times = _town_of_kofi(tmp_path)
    question = "What was Kofi Mensah doing at 15:30 on day 2?"
    wanted = recs[times.index(at(2, "15:30"))].id
    plain = mem.retrieve(unit(1, 0.3), NOW, query_text="What was Kofi Mensah doing?", profile="recall")
    assert wanted not in [m.id for m in plain]  # without a time, relevance alone decides: another sighting wins
    dated = mem.retrieve(unit(1, 0.3), NOW, query_text=question, profile="recall")
    assert dated[0].id == wanted and dated[0].recency == 1.0
    # the trace says which profile retrieved and from which time; the candidates' ages are from that time
    op = mem.retrieval_record(question, "interview", dated, unit(1, 0.3), NOW, profile="recall")
    assert op["profile"] == "dated" and op["named_time"] == [at(2, "15:30"), at(2, "15:30"), "day 2 15:30"]
    ages = {row[0]: row[3] for rows in op["candidates"].values() if rows for row in rows}
    assert ages[wanted] == 0.0
    # simulacra rescore re-ranks the recorded candidates under the dated profile to exactly this retrieval
    again = rerank(op["candidates"], op["tiers"], mem.rule(profile="dated"), mem.params_for("dated"))
    assert [i for i, _, _ in again] == [m.id for m in dated]


def test_a_plan_memory_is_as_recent_as_the_hours_it_is_about(tmp_path):
    """Asked about 17:00, the plan item for 16:00-18:00 (stored when it began, at 16:00) is about 17:00; a talk at
    17:10, a little more relevant, is ten minutes away. Measured from the plan's timestamp alone, the talk won."""
    span = span_extra(at(2, "16:00"), at(2, "18:00"))
    plan = MemoryRecord(id=memory_id("ann", at(2, "16:00"), "p"), kind="plan", rating=3, timestamp=at(2, "16:00"),
                        text="Ann plans to be visiting Agnes at the bakery from 16:00 to 18:00.", tick=1, extra=span)
    talk = _rec("Ann talked with Agnes at the bakery", at(2, "17:10"))
    cfg = MemoryConfig(relevance="dense", forget_floor=None, top_k=2)
    question = "What did I plan for 17:00 on day 2?"
    mem = AgentMemory("ann", tmp_path / "ann", cfg, 8)
    mem.add([plan, talk], np.stack([unit(1, 0.33), unit(1, 0.30)]))  # the talk a little more relevant
    got = mem.retrieve(unit(1, 0.3), NOW, query_text=question, profile="recall")
    assert [m.id for m in got] == [plan.id, talk.id] and got[0].recency == 1.0
    op = mem.retrieval_record(question, "interview", got, unit(1, 0.3), NOW, profile="recall")
    ages = {row[0]: row[3] for rows in op["candidates"].values() if rows for row in rows}
    assert ages == {plan.id: 0.0, talk.id: 10.0}  # the trace records the ages from the span
    again = rerank(op["candidates"], op["tiers"], mem.rule(profile="dated"), mem.params_for("dated"))
    assert [i for i, _, _ in again] == [m.id for m in got]
    # the span is kept in the store: a fresh process reads it back and retrieves the same
    reopened = AgentMemory("ann", tmp_path / "ann", cfg, 8)
    assert reopened.tier("short_term").get(plan.id).span == (at(2, "16:00"), at(2, "18:00"))
    assert [m.id for m in reopened.retrieve(unit(1, 0.3), NOW, query_text=question, profile="recall")] == [
        plan.id, talk.id]
    # the same plan memory without its span (as stored before): measured from 16:00, an hour away, it loses
    bare = AgentMemory("ann", tmp_path / "bare", cfg, 8)
    bare.add([replace(plan, extra={}), talk], np.stack([unit(1, 0.33), unit(1, 0.30)]))
    assert [m.id for m in bare.retrieve(unit(1, 0.3), NOW, query_text=question, profile="recall")] == [
        talk.id, plan.id]
    # a question that names no time is unchanged: recency from now, from the timestamp
    plain = mem.retrieve(unit(1, 0.3), NOW, query_text="What did I plan?", profile="situational")
    assert [m.recency for m in plain] == [m.recency for m in bare.retrieve(
        unit(1, 0.3), NOW, query_text="What did I plan?", profile="situational")]


def test_news_of_a_gathering_is_about_its_hours_as_well_as_when_it_was_heard(tmp_path):
    """The board's notice of a party from 16:00 to 18:00, read at 08:50, against the rider's storm warning of 16:10
    (less relevant, more important), asked at 18:30 "Is there a party at the tavern this afternoon?". The question
    names the afternoon, so recency is measured from it: with the notice about the party's hours too
    (:meth:`Engagement.about`) it is as recent as the warning and wins on relevance; about 08:50 alone it was
    three hours before the afternoon and lost (stop 42's Fernhollow party: half the town, all of whom had read the
    notice, could not recall the party at its end). A question about the morning still finds it as heard then."""
    from simulacra.cognition.mind import Engagement

    party = Engagement("Greta Lund is throwing a party at The Wren and Kettle.", "greta_lund", "tavern",
                       int(at(1, "16:00")), int(at(1, "18:00")))
    heard = at(1, "08:50")
    notice = MemoryRecord(id=memory_id("town", heard, "n"), kind="notice", rating=2, timestamp=heard, tick=1,
                          text="Yusuf spread the word: Greta Lund is throwing a party at The Wren and Kettle.",
                          extra={"topic": party.topic, **party.about(heard)})
    storm = _rec("A rider shouts that a storm is coming down the hills tonight.", at(1, "16:10"), rating=6)
    cfg = MemoryConfig(relevance="dense", forget_floor=None, top_k=1)
    now = at(1, "18:30")
    question = "Is there a party at the tavern this afternoon?"
    vectors = np.stack([unit(1, 0.3), unit(1, 1.0)])  # the notice more relevant to the question

    def first(records, query, name):
        mem = AgentMemory("ann", tmp_path / name, cfg, 8)
        mem.add(records, vectors)
        profile, _, cue = mem.dated("recall", query, now)
        assert profile == "dated" and cue is not None, query  # the question names a time: dated
        return mem.retrieve(unit(1, 0.3), now, query_text=query, profile="recall")[0]

    got = first([notice, storm], question, "about")
    assert got.id == notice.id and got.recency == 1.0
    assert first([replace(notice, extra={"topic": party.topic}), storm], question, "instant").id == storm.id
    morning = first([notice, storm], "What did I hear this morning?", "morning")
    assert morning.id == notice.id and morning.recency == 1.0


def test_the_age_from_a_named_time_is_the_gap_between_the_window_and_the_span():
    ref = np.array([100.0, 100.0, 100.0, np.nan])
    span = (np.array([100.0, 40.0, 100.0, np.nan]), np.array([100.0, 200.0, 130.0, np.nan]))
    got = age_from(ref, 1000.0, (150.0, 160.0), span)
    assert got[:3].tolist() == [50.0, 0.0, 20.0] and np.isnan(got[3])  # before, around, ending before the window
    assert age_from(ref, 1000.0, (10.0, 20.0), span)[:3].tolist() == [80.0, 20.0, 80.0]  # after the window
    assert age_from(ref, 1000.0, None, span)[:3].tolist() == [900.0] * 3  # no time named: from now (seed 003)
    with pytest.raises(ValueError, match="ends before it starts"):
        span_extra(20.0, 10.0)


def test_a_question_that_asks_for_the_latest_breaks_ties_by_time_and_keeps_relevance_first(tmp_path):
    """"When did I last ...": among equally relevant memories the newest first (the shipped ``latest`` profile,
    recency from now with a small weight); a more relevant old memory still beats an unrelated recent one, which
    the dated profile's recency from now did not (stop 37)."""
    mem = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense", forget_floor=None, top_k=3), 8)
    times = [at(1, "09:00"), at(2, "09:00"), at(2, "15:00"), at(3, "19:50"), at(3, "20:00")]
    recs = [_rec("Ann talked with Kofi Mensah", t) for t in times[:3]] + [
        _rec("Ann is watering the garden", t) for t in times[3:]]
    mem.add(recs, np.stack([unit(1, 0.3)] * 3 + [unit(1, 1.5)] * 2))  # the garden: relevance 0.69
    question = "When did I last talk with Kofi Mensah?"
    plain = mem.retrieve(unit(1, 0.3), NOW, query_text="Did I talk with Kofi Mensah?", profile="recall")
    last = mem.retrieve(unit(1, 0.3), NOW, query_text=question, profile="recall")
    assert [m.id for m in last] == [recs[2].id, recs[1].id, recs[0].id]  # newest of the relevant first
    assert {m.id for m in plain} == {r.id for r in recs[:3]}  # without it: the same three, in no time order
    op = mem.retrieval_record(question, "interview", last, unit(1, 0.3), NOW, profile="recall")
    assert op["profile"] == "latest" and "named_time" not in op
    again = rerank(op["candidates"], op["tiers"], mem.rule(profile="latest"), mem.params_for("latest"))
    assert [i for i, _, _ in again] == [m.id for m in last]  # rescore re-ranks it exactly
    # under the dated profile (recency from now, weight 0.5) the garden of ten minutes ago would come first
    dated = mem.retrieve(unit(1, 0.3), NOW, query_text=question, profile="dated")
    assert dated[0].id == recs[4].id


def _prepared(name, ask, times, relevance, want, now=NOW):
    n = len(times)
    inputs = ScoringInputs(distance=1 / np.asarray(relevance) - 1, rating=np.full(n, 5.0),
                           reference_time=np.asarray(times, dtype=float), long_term_since=np.full(n, np.nan))
    q = LabelledQuery(0, "ann", ask, now, (Expected(id=want),), split="train", category=name)
    return PreparedQuery(q, now, [TierInputs("short_term", [f"m{i}" for i in range(n)], inputs)], {want},
                         named=time_cue(ask, now), latest=time_cue(ask, now) is None and asks_latest(ask) is not None)


def test_tune_switches_each_query_as_the_engine_does():
    times = [at(d, "15:30") for d in (1, 2, 3)]
    dated_q = _prepared("when", "What was Kofi doing at 15:30 on day 1?", times, [0.50, 0.52, 0.51], "m0")
    plain_q = _prepared("said", "What did Kofi say?", times, [0.50, 0.52, 0.51], "m1")
    m = MemoryConfig(relevance="dense")
    recall = profile_setting(m, "recall")
    assert recall.dated is not None and recall.dated.a_rec > 0
    assert retrieve_ids(dated_q, recall, m)[0] == "m0"  # the named day's memory
    assert retrieve_ids(plain_q, recall, m)[0] == "m1"  # relevance alone
    assert retrieve_ids(dated_q, replace(recall, dated=None), m)[0] == "m1"  # no switch, no time
    r = evaluate([dated_q, plain_q], [recall, replace(recall, dated=None)], m)
    assert r[0].mrr == 1.0 and r[1].mrr == pytest.approx((1 / 3 + 1) / 2)  # without: day 1 ranks third
    latest_q = _prepared("when", "When did I last see Kofi?", times, [0.50, 0.50, 0.50], "m2")
    assert retrieve_ids(latest_q, recall, m)[0] == "m2"  # the latest profile: the newest of equals
    assert retrieve_ids(latest_q, replace(recall, latest=None), m)[0] != "m2"
    # the baselines of --profile recall carry the link; those of --profile dated score only with the named time
    shipped = MemoryConfig()
    assert baseline_settings(profile="recall")["defaults"] == profile_setting(shipped, "recall")
    assert baseline_settings(profile="dated")["defaults"] == as_dated(Setting.from_config(
        shipped.for_profile("dated")))
    assert baseline_settings(profile="latest")["defaults"] == as_latest(Setting.from_config(
        shipped.for_profile("latest")))
    settings, queries = for_profile([recall], [dated_q, plain_q, latest_q], shipped, "latest")
    assert queries == [latest_q] and settings[0].for_query(None, True) == settings[0].latest


def test_scoring_params_carry_the_named_window_per_retrieval_not_from_a_config():
    p = ScoringParams.from_config(MemoryConfig())
    assert p.named is None
    with pytest.raises(ValueError, match="start <= end"):
        replace(p, named=(10.0, 5.0))


def test_an_interview_and_an_inspected_tick_say_from_which_time_recency_was_measured():
    from simulacra.explain import format_explanation
    from simulacra.interview import format_interview

    named = [at(2, "15:30"), at(2, "15:30"), "day 2 15:30"]
    r = {"name": "Ann", "agent": "ann", "clock": "day 3 20:15", "question": "What was Kofi doing at 15:30 on day 2?",
         "answer": "Mending nets.", "mind": "scripted", "source": "scripted", "used": [], "retrieved": [],
         "profile": "dated", "named_time": named}
    assert 'profile dated: recency from day 2 15:30, named by "day 2 15:30"' in format_interview(r)
    assert "\n  (scripted)\n" in format_interview(r) + "\n"  # the mind and the source alike: said once
    assert "(llm, scripted)" in format_interview({**r, "mind": "llm"})  # a fallback answer: both
    assert "recency from" not in format_interview({**r, "profile": "recall", "named_time": None})
    asked = format_interview({**r, "profile": "latest", "named_time": None, "asked_latest": "did I last"})
    assert '(profile latest: asked for the latest, "did I last")' in asked
    e = {"name": "Ann", "agent": "ann", "tick": 3, "clock": "20:15", "action": {"activity": "resting"},
         "place": "home", "perceived": [], "said": [], "heard": [], "remembered": [], "reflections": [],
         "moved": [], "reinforced": [], "forgotten": [], "posted": [],
         "retrieved": [{"purpose": "interview", "query": r["question"], "results": [], "named_time": named}]}
    assert '(recency measured from day 2 15:30, named by "day 2 15:30")' in format_explanation(e)


def test_a_tuned_dated_profile_is_written_with_what_the_search_does_not_set(tmp_path):
    """``simulacra tune --profile dated --out``: the dated profile's recency window (not searched) is kept, the recall
    profile keeps its link, and the written file loads with both profiles."""
    from simulacra.tune.report import write_snippet
    from simulacra.tune.search import Result, TuneReport

    m = MemoryConfig()
    best = Result(as_dated(Setting(1.0, 0.0, 0.99, 0.35, 5, "merged", relevance="dense")), 1.0, 1.0, 1.0)
    report = TuneReport("ndcg", [best], {"seed003": best}, {}, [], m.for_profile("dated"), 1, {}, "dated")
    written = load_config(write_snippet(report, tmp_path / "dated.yaml")).memory
    dated = written.for_profile("dated")
    assert (dated.a_rec, dated.a_imp, dated.relevance) == (1.0, 0.0, "dense")
    assert dated.recency_window_minutes == m.for_profile("dated").recency_window_minutes == 10.0
    assert written.profiles["recall"] == m.profiles["recall"] and written.dated("recall", "at 15:30", NOW)[0] == "dated"
    assert written.dated("recall", "When did I last see Kofi?", NOW) == ("latest", None)


def test_tune_builds_the_dated_setting_from_the_runs_section_with_its_own_window():
    """A recall profile that sets fields its dated profile does not (top_k, relevance, window) must not leak into
    the dated setting tune scores with: the engine scores a dated query with the section plus the dated profile."""
    from simulacra.tune.settings import switched_setting

    m = MemoryConfig(recency_window_minutes=30, profiles={
        "recall": {"a_rec": 0, "top_k": 8, "relevance": "lexical", "recency_window_minutes": 45, "dated": "dated",
                   "latest": "latest"},
        "dated": {"a_rec": 0.5, "recency_window_minutes": 60}, "latest": {"a_rec": 0.1}})
    engine = m.for_profile("dated")
    d = switched_setting(m, "dated")
    assert (d.top_k, d.relevance, d.recency_window_minutes) == (engine.top_k, engine.relevance, 60.0)
    run = baseline_settings(m.for_profile("recall"), "recall", section=m)["run config"]
    assert run.top_k == 8 and run.dated == d
    # the latest profile likewise: the section's window (here the default), not the recall profile's (45)
    m = m.model_copy(update={"recency_window_minutes": MemoryConfig().recency_window_minutes})
    run = baseline_settings(m.for_profile("recall"), "recall", section=m)["run config"]
    latest_q = _prepared("when", "When did I last see Kofi?", [at(3, "19:50")], [0.5], "m0")
    window = query_params(latest_q, run, m.for_profile("recall")).recency_window_minutes
    assert window == m.for_profile("latest").recency_window_minutes == MemoryConfig().recency_window_minutes


def test_a_question_about_what_is_ahead_tonight_is_not_dated_to_the_evening(tmp_path):
    """Asked at 20:15 "Is there a storm coming tonight?", the rider's warning of 16:10 answers; the evening's
    memories, inside the window "tonight" names, do not (stop 41: it was read as "what happened tonight", so the
    dated profile buried the warning under the evening's chores). Asked in the past tense, tonight is dated."""
    mem = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense", forget_floor=None, top_k=3), 8)
    warning = _rec("A rider shouts that a storm is coming tonight", at(3, "16:10"), rating=6)
    evening = [_rec(f"Ann is mending socks {i}", at(3, hhmm)) for i, hhmm in enumerate(("18:30", "19:30", "20:10"))]
    mem.add([warning, *evening], np.stack([unit(1, 0.3)] + [unit(1, 1.2)] * 3))  # the socks: relevance 0.68
    ahead = mem.retrieve(unit(1, 0.3), NOW, query_text="Is there a storm coming tonight?", profile="recall")
    assert ahead[0].id == warning.id
    op = mem.retrieval_record("Is there a storm coming tonight?", "interview", ahead, unit(1, 0.3), NOW,
                              profile="recall")
    assert op["profile"] == "recall" and "named_time" not in op
    past = mem.retrieve(unit(1, 0.3), NOW, query_text="What happened tonight?", profile="recall")
    assert past[0].id != warning.id  # "what happened tonight": the evening's memories, recency from 18:00


#: the first game minute of a run begun at 07:00 on day 1 (the world's start_time; trace header start_minute)
RUN_START = 7 * 60


@pytest.mark.parametrize("text, asked, window, words", [
    ("What did you do yesterday?", (1, "10:00"), ((0, "00:00"), (0, "23:59")), "yesterday"),
    ("What happened last night?", (1, "10:00"), ((0, "18:00"), (1, "06:00")), "last night"),
    ("the day before yesterday", (1, "10:00"), ((-1, "00:00"), (-1, "23:59")), "the day before yesterday"),
    ("the day before yesterday", (2, "10:00"), ((0, "00:00"), (0, "23:59")), "the day before yesterday"),
    ("What did I do on day 0?", (3, "10:00"), ((0, "00:00"), (0, "23:59")), "day 0"),
    ("Who came by at 23:00?", (1, "08:00"), ((0, "23:00"), (0, "23:00")), "23:00"),  # yesterday's 23:00
    ("What were you doing at 6:00?", (1, "10:00"), ((1, "06:00"), (1, "06:00")), "6:00"),  # before 07:00
])
def test_a_time_before_the_run_is_read_and_marked_so(text, asked, window, words):
    """Game days count from 1 and the run began at 07:00 on day 1: a time that ends before is still read (recorded,
    shown), as named, and marked as before the run, where no memory is from."""
    cue = time_cue(text, at(*asked), RUN_START)
    assert cue is not None and cue.before_run and cue.run_start == RUN_START and cue.words == words
    assert (cue.start, cue.end) == (at(*window[0]), at(*window[1]))
    assert cue.as_list() == [cue.start, cue.end, words, RUN_START]


def test_a_time_partly_before_the_run_keeps_its_part_inside_and_one_inside_is_unchanged():
    this_morning = time_cue("What did Greta say this morning?", at(1, "10:00"), RUN_START)
    assert this_morning is not None and not this_morning.before_run
    assert (this_morning.start, this_morning.end) == (at(1, "07:00"), at(1, "10:00"))
    assert this_morning.as_list() == [at(1, "07:00"), at(1, "10:00"), "this morning"]  # the trace form as before
    day1 = time_cue("What did I do on day 1?", at(1, "10:00"), RUN_START)
    assert day1 is not None and (day1.start, day1.end, day1.before_run) == (at(1, "07:00"), at(1, "10:00"), False)
    # "yesterday" on day 2 is day 1, from the run's first minute on: the whole of the run's day 1
    yesterday = time_cue("What did you do yesterday?", at(2, "10:00"), RUN_START)
    assert yesterday is not None and (yesterday.start, yesterday.end) == (at(1, "07:00"), at(1, "23:59"))
    assert not yesterday.before_run
    # a run's start unknown: day 1 00:00, the earliest a run begins ("last night" on day 1 is then partly inside)
    assert time_cue("What did you do yesterday?", at(1, "10:00")) == TimeCue(at(0, "00:00"), at(0, "23:59"),
                                                                             "yesterday", 0.0)
    last_night = time_cue("What happened last night?", at(1, "10:00"))
    assert last_night is not None and (last_night.start, last_night.end) == (at(1, "00:00"), at(1, "06:00"))
    # a time after now still names nothing, before the run or not
    assert time_cue("What will I do on day 4?", at(1, "10:00"), RUN_START) is None


def test_a_time_before_the_run_switches_to_the_dated_profile_and_reads_back_from_its_trace_form():
    m = MemoryConfig()
    used, cue, latest = m.switch("recall", "What did you do yesterday?", at(1, "10:00"), RUN_START)
    assert used == "dated" and cue is not None and cue.before_run and latest is None
    assert m.dated("recall", "What did you do yesterday?", at(1, "10:00"), RUN_START) == (used, cue)
    assert m.switch(SITUATIONAL, "What did you do yesterday?", at(1, "10:00"), RUN_START) == (SITUATIONAL, None, None)
    assert TimeCue.from_list(cue.as_list()) == cue
    assert TimeCue.from_list([at(2, "15:30"), at(2, "15:30"), "15:30"]).run_start is None
    assert describe_named(cue) == describe_named(cue.as_list()) == (
        'day 0 00:00 to day 0 23:59, named by "yesterday", before the run began (day 1 07:00)')


def test_an_interview_says_a_time_before_the_run_is_before_it():
    from simulacra.interview import format_interview

    r = {"name": "Ann", "agent": "ann", "clock": "day 1 10:00", "question": "What did you do yesterday?",
         "answer": "I have no memories from ...", "mind": "scripted", "source": "scripted", "used": [],
         "retrieved": [], "profile": "dated", "named_time": [at(0, "00:00"), at(0, "23:59"), "yesterday", RUN_START]}
    out = format_interview(r)
    assert ('(profile dated: day 0 00:00 to day 0 23:59, named by "yesterday", before the run began (day 1 07:00); '
            'no memory is from then: static memories only)') in out
    assert "recency from" not in out


def test_the_engines_retrievals_read_no_time_before_day_1_as_before_and_an_interview_reads_it():
    """Without the run's first minute (the engine's retrievals, tune) a time that begins before day 1 00:00 names no
    time, as it always did there ("reading yesterday's paper" on day 1 is a query like any other); the latest words
    are still read. With it (an interview), the same question names a time before the run."""
    from simulacra.config import MemoryConfig
    from simulacra.memory.timecue import time_words

    memory = MemoryConfig()
    assert memory.dated("recall", "Did you sleep well last night?", 450) == ("recall", None)
    assert memory.dated("recall", "reading yesterday's paper", 420) == ("recall", None)
    assert time_words("What did Ann say most recently last night?", 450)[1] is not None
    used, cue = memory.dated("recall", "Did you sleep well last night?", 450, 420)
    assert used == memory.dated_link("recall") and cue is not None and cue.before_run
    assert memory.dated("recall", "What did you do at 6:00?", 600)[1] is not None  # day 1 06:00: inside day 1


@pytest.mark.parametrize("text", ["What happened at 3 pm on 8 May 2023?", "What did you do on May 8th at 9:00?",
                                  "Whom did you meet on the 21st of June at 10:00?", "What happened in 1999 at noon?"])
def test_a_time_on_a_date_of_the_calendar_names_nothing(text):
    """The game clock knows no calendar: "at 3 pm on 8 May 2023" was read as the latest 3 pm, and the dated
    profile then scored that afternoon's memories up (a months-long conversation's question, stop 51)."""
    assert time_cue(text, NOW) is None
    without = text.replace(" on 8 May 2023", "").replace(" on May 8th", "").replace(" on the 21st of June", "")
    assert time_cue(without.replace(" in 1999", ""), NOW) is not None  # the time alone is read
    assert time_cue("May I ask what happened at 3 pm?", NOW) is not None  # "May" as a verb is no month
