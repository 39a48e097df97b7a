"""Memory over long horizons (issue 22): retrieval profiles per purpose, recall led by relevance, the nightly
episodic summary, news kept by its topic and by retelling."""

from __future__ import annotations

import numpy as np
import pytest

from simulacra.clock import MINUTES_PER_DAY
from simulacra.cognition.mind import PlanItem
from simulacra.cognition.summary import day_window, episodes, plan_summary_text, summary_due, summary_text
from simulacra.config import PURPOSES, SITUATIONAL, MemoryConfig, load_config
from simulacra.errors import ConfigError
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.stream import AgentMemory
from simulacra.presets import preset_path
from tests.conftest import ROOT, unit

DIM = 8
HOUR = 60


def rec(agent, text, ts, rating, kind="observation", **extra):
    return MemoryRecord(id=memory_id(agent, ts, text), text=text, kind=kind, rating=rating, timestamp=float(ts),
                        tick=int(ts // 10), extra=extra)


def make(tmp_path, agent="ann", **cfg):
    return AgentMemory(agent, tmp_path / agent, MemoryConfig(**{"relevance": "dense", **cfg}), DIM)


# ----------------------------------------------------------------- profiles
def test_each_purpose_has_its_profile_acting_now_situational_recalling_by_relevance():
    m = MemoryConfig()
    acting = {"focus", "reaction", "engagement", "reflection"}
    assert set(PURPOSES) == acting | {"plan", "conversation", "interview", "knowledge"}
    for purpose in PURPOSES:
        assert m.profile_of(purpose) == (SITUATIONAL if purpose in acting else "recall")
    # a trace's label names its purpose by its first word
    assert m.profile_of("conversation with ruth_calloway") == "recall"
    assert m.weights() == (0.25, 0.25, 1.0) and m.weights("recall") == (0.0, 0.1, 1.0)
    # a profile replaces only what it sets: the rest is the section's
    recall = m.for_profile("recall")
    assert (recall.a_rec, recall.a_imp, recall.a_rel, recall.top_k, recall.relevance) == (0, 0.1, 1, m.top_k,
                                                                                             m.relevance)
    # the seed's preset retrieves every purpose with the section's own fields, exactly as seed 003 says
    seed = load_config(preset_path("seed003")).memory
    assert all(seed.profile_of(p) == SITUATIONAL for p in PURPOSES)


@pytest.mark.parametrize("sets, field, words", [
    (["memory.purposes={interviewing: recall}"], "memory", "purposes.interviewing: unknown purpose"),
    (["memory.purposes={interview: remembering}"], "memory", "unknown profile 'remembering'"),
    (["memory.profiles={situational: {a_rec: 0}}"], "memory", "profiles.situational: the name is taken"),
    (["memory.profiles={recall: {a_rec: 0, a_imp: 0, a_rel: 0}}"], "memory",
     "profiles.recall: the weights a_rec, a_imp and a_rel are all 0"),
    (["memory.profiles={recall: {gama: 0.5}}"], "memory.profiles.recall.gama", "unknown field 'gama'"),
])
def test_a_broken_profile_or_purpose_is_named(sets, field, words):
    with pytest.raises(ConfigError) as e:
        load_config(None, sets)
    assert e.value.field == field and words in str(e.value)


def test_recall_finds_the_old_relevant_memory_that_recent_ones_crowd_out_of_acting_now(tmp_path):
    """Twelve game days after the storm, ten fresh, important, loosely related memories compete with the one old
    memory that answers: acting now they win (recency and importance outweigh the relevance gap), recalling the
    old one comes first."""
    mem = make(tmp_path, top_k=3, forget_floor=None)
    now = 12 * MINUTES_PER_DAY
    old = rec("ann", "the storm tore the roof off the boathouse", 0, 6)
    mem.add_long_term([old], unit(1, 0.5)[None], now=60)  # cosine 0.89 to the query
    recent = [rec("ann", f"busy morning at the harbour {i}", now - 30 - i, 8) for i in range(10)]
    mem.add(recent, np.stack([unit(1, 1.1 + 0.01 * i) for i in range(10)]))  # cosine 0.67 to the query
    query = unit(1)
    acting = mem.retrieve(query, now, profile=SITUATIONAL)
    assert old.id not in [m.id for m in acting]
    recalled = mem.retrieve(query, now, profile="recall")
    assert recalled[0].id == old.id
    assert recalled[0].relevance > recalled[1].relevance and recalled[0].recency < 0.1
    # no recency term: relevance and a tenth of importance
    assert recalled[0].score == pytest.approx(recalled[0].relevance + 0.1 * recalled[0].importance)
    # the trace says which profile retrieved, with the rule and candidates rescore needs
    op = mem.retrieval_record("the storm", "interview", recalled, query, now, profile="recall")
    assert op["profile"] == "recall" and [r["id"] for r in op["results"]] == [m.id for m in recalled]


# ----------------------------------------------------------------- nightly summary
NAMES = {"ann": "Ann Hale", "ben": "Ben Ode"}
STORM = "A storm warning is posted at the harbour."


def day_records():
    return [
        rec("ann", "Ann had porridge.", 8 * HOUR, 2),
        rec("ann", f'Ben Ode said to Ann Hale: "Hello Ann! {STORM}"', 9 * HOUR, 7, kind="dialogue", topic=STORM,
            source="ben"),
        rec("ann", f"Ann and Ben talked about: {STORM}", 9 * HOUR + 10, 6, kind="conversation"),
        rec("ann", "The mill wheel cracked in the night.", 11 * HOUR, 8, kind="event"),
        rec("ann", "Ann means to repaint the boat.", 12 * HOUR, 6, kind="plan"),  # plans are not episodes
        rec("ann", "Yesterday's quarrel at the pub.", -3 * HOUR, 9),  # before the window
    ]


def test_episodes_group_news_by_topic_keep_their_ids_and_leave_out_the_mundane():
    recs = day_records()
    got = episodes(recs, NAMES, *day_window(MINUTES_PER_DAY), min_rating=6)
    assert [e.text for e in got] == ["The mill wheel cracked in the night.", f"heard from Ben Ode: {STORM}"]
    storm = got[1]
    # the line that told it and the conversation's summary that holds its words are one episode
    assert set(storm.ids) == {recs[1].id, recs[2].id} and storm.rating == 7 and storm.first == 9 * HOUR
    text = summary_text("Ann Hale", "1 (Saturday)", got)
    assert text == f"Ann Hale's day 1 (Saturday): 09:00 heard from Ben Ode: {STORM}; 11:00 The mill wheel " \
                   "cracked in the night."
    # what the agent meant to do that day is a summary of its own, worded as the day's plan memory is
    plan = [PlanItem(420, 480, "baking bread", "bakery"), PlanItem(480, 600, "selling bread", "square")]
    assert plan_summary_text("Ann Hale", "1 (Saturday)", plan, {"bakery": "The Bakery"}) == (
        "Ann Hale's plan for day 1 (Saturday): baking bread at The Bakery (07:00-08:00), selling bread at square "
        "(08:00-10:00).")


@pytest.mark.parametrize("now, tick, at, due", [
    (23 * HOUR + 30, 10, 23 * HOUR + 30, True), (23 * HOUR + 20, 10, 23 * HOUR + 30, False),
    (23 * HOUR + 25, 10, 23 * HOUR + 30, True), (23 * HOUR + 30, 60, 10, True),  # a tick over midnight
    (MINUTES_PER_DAY + 23 * HOUR + 30, 30, 23 * HOUR + 30, True), (23 * HOUR, 30, 23 * HOUR + 30, False),
])
def test_the_summary_is_due_on_the_one_tick_of_the_day_that_reaches_its_time(now, tick, at, due):
    assert summary_due(now, tick, at) is due


def test_a_day_summary_outlives_its_sources_and_is_forgotten_after_its_keep(tmp_path):
    mem = make(tmp_path, summary_keep_days=2.0)
    recs = day_records()
    mem.add(recs, np.stack([unit(1, i) for i in range(len(recs))]))
    found = episodes(mem.short_term.records, NAMES, *day_window(MINUTES_PER_DAY), min_rating=6)
    text = summary_text("Ann Hale", "1", found)
    # rated 6: plain decay would forget it after about 25 game hours (docs/memory.md)
    summary = MemoryRecord(memory_id("ann", MINUTES_PER_DAY, text), text, "summary", 6, float(MINUTES_PER_DAY), 144,
                           extra={"evidence_ids": ",".join(i for e in found for i in e.ids), "depth": 1})
    ops = mem.add_long_term([summary], unit(0, 1)[None], now=MINUTES_PER_DAY)
    assert ops[0]["evidence_ids"] == [i for e in found for i in e.ids] and ops[0]["kind"] == "summary"
    assert set(ops[0]["evidence_ids"]) <= {r.id for r in recs}
    # a day and a half later a source rated as it is decayed under the floor; the summary is kept
    mem.consolidate(MINUTES_PER_DAY, force=True)  # the day's sources enter long-term
    assert recs[2].id in mem.long_term
    later = MINUTES_PER_DAY + 36 * HOUR
    gone = mem.consolidate(later + 60, force=True)
    assert summary.id in mem.long_term and recs[2].id not in mem.long_term
    assert not any(op["id"] == summary.id for op in gone)
    # two game days after it was written it goes, with its reason
    end = mem.consolidate(MINUTES_PER_DAY + 2 * MINUTES_PER_DAY, force=True)
    assert summary.id not in mem.long_term
    assert [op["reason"] for op in end if op["id"] == summary.id] == ["day summary older than 2 game days"]


# ----------------------------------------------------------------- news kept by topic and by retelling
def test_news_heard_again_and_again_is_kept_although_its_text_was_rated_mundane(tmp_path):
    mem = make(tmp_path, short_term_min_entries=0, retold_bonus=1)
    told = [rec("ann", f"Someone mentioned it again, {i}.", 60 * i, 4, kind="dialogue", topic=STORM)
            for i in range(3)]
    once = rec("ann", "Someone mentioned the new baker.", 30, 5, kind="dialogue", topic="A new baker came.")
    mem.add([*told, once], np.stack([unit(1, i) for i in range(4)]))
    ops = mem.consolidate(5 * 60, force=True)
    moved = {op["id"]: op for op in ops if op["op"] == "move"}
    # three tellings: rating 4 + 1 * (3 - 1) = 6 > 5 goes to long-term, with the count of tellings
    assert set(moved) == {r.id for r in told}
    assert all(op["importance"] == 0.6 and op["retold"] == 3 for op in moved.values())
    assert [op["id"] for op in ops if op["op"] == "forget"] == [once.id]
    # seed 003: by its own rating alone
    plain = make(tmp_path, agent="bo", short_term_min_entries=0, retold_bonus=0)
    plain.add([*told, once], np.stack([unit(1, i) for i in range(4)]))
    assert not [op for op in plain.consolidate(5 * 60, force=True) if op["op"] == "move"]


def test_the_memory_stream_example_of_the_docs_recalls_the_old_answer(tmp_path, monkeypatch, embedder):
    """docs/memory.md's "A memory stream of your own", run as written (the session's embedder stands in for its
    ``build_embedder()``): the recall profile puts the month-old answer first, the situational retrieval last
    night's unrelated turns."""
    import contextlib
    import io

    import simulacra.embeddings

    text = (ROOT / "docs" / "memory.md").read_text(encoding="utf-8")
    code = text.split("<!-- memory-stream-example -->\n```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.setattr(simulacra.embeddings, "build_embedder", lambda *a, **k: embedder)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    scope: dict = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code, "docs/memory.md", "exec"), scope)
    mill = 'Greta said: "The mill wheel cracked in the frost, and Bram is mending it."'
    assert scope["recalled"][0].text == mill
    assert scope["acting"][0].text != mill and mill in [m.text for m in scope["acting"]]
    assert (tmp_path / "ann-memory").is_dir()
    assert out.getvalue().splitlines()[0] == repr([mill])


# ----------------------------------------------------------------- as of an earlier minute
@pytest.mark.parametrize("relevance, profile", [("dense", None), ("hybrid", "recall"), ("hybrid", None)])
def test_a_retrieval_as_of_an_earlier_minute_is_the_one_made_then(tmp_path, relevance, profile):
    """``formed_before`` leaves out the memories formed since, exactly: the result at ``then`` in a store that went
    on is the result of a store that stopped at ``then`` -- also where the later memories, full of recency under the
    situational weights, would fill the first places, and on a tier searched with bounds (more than BOUND_MIN_ROWS
    rows). Dropping them after a top-k cut (the interview's old way) returned fewer than k."""
    from simulacra.interview import recalled
    from simulacra.memory.index import BOUND_MIN_ROWS

    rng = np.random.default_rng(3)
    n, then = BOUND_MIN_ROWS + 300, 4000.0
    texts = [f"Ann mends net {i} by the boat shed." if i % 2 else f"Ann hears the ferry bell {i}." for i in range(n)]
    # half formed long before ``then``, half in the hour after it: those would lead on recency
    stamps = np.sort(np.concatenate([rng.uniform(0, then - 2000, n // 2), rng.uniform(then, then + 60, n - n // 2)]))
    records = [rec("ann", t, float(ts), 1 + i % 10) for i, (t, ts) in enumerate(zip(texts, stamps))]
    vectors = rng.normal(size=(n, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    went_on = AgentMemory("ann", tmp_path / "on", MemoryConfig(relevance=relevance), DIM)
    went_on.add(records, vectors)
    before = stamps < then
    stopped = AgentMemory("ann", tmp_path / "stopped", MemoryConfig(relevance=relevance), DIM)
    stopped.add([r for r, b in zip(records, before) if b], vectors[before])
    query, question = unit(1, 0.3, -0.2), "When did Ann mend the net?"
    for k in (1, 10, 40):
        got = went_on.retrieve(query, then, top_k=k, threshold=float("-inf"), query_text=question, profile=profile,
                               formed_before=then)
        want = stopped.retrieve(query, then, top_k=k, threshold=float("-inf"), query_text=question, profile=profile)
        assert [m.id for m in got] == [m.id for m in want] and len(got) == k
    config = load_config(None)
    config.memory.relevance = relevance
    for interview_profile in ("recall", SITUATIONAL):  # situational: the later memories score first
        config.memory.purposes["interview"] = interview_profile
        got_ids = [m.id for m in recalled(went_on, query, question, then, config)]
        k = max(config.memory.for_profile(interview_profile).top_k, config.cognition.memories_in_prompt)
        assert got_ids == [m.id for m in recalled(stopped, query, question, then, config)] and len(got_ids) == k
    # without it the later memories are found, as they should be for a retrieval now
    late = went_on.retrieve(query, then, top_k=40, threshold=float("-inf"), query_text=question, profile=profile)
    assert any(m.record.timestamp >= then for m in late)


def test_a_day_plan_is_about_its_day_a_night_step_about_the_whole_night():
    """``plan_span``: the night runs into the next morning; a day's plan (or the night's plan summary) is about its
    day, up to midnight, so that "What happened this morning?" asked the next day is not about yesterday's plan (it
    was in the answer of all 10 residents asked on day 2, first for 7), while the night step's own memory keeps
    the whole night ("What was I doing at 3:00?")."""
    from simulacra.cognition.mind import plan_span

    day = [PlanItem(7 * HOUR, 12 * HOUR, "working at the forge", "forge"),
           PlanItem(12 * HOUR, 21 * HOUR, "eating and resting", "home"),
           PlanItem(21 * HOUR, 31 * HOUR, "reading by the fire and going to bed", "home")]
    assert plan_span(day) == {"span_start": 7 * HOUR, "span_end": 24 * HOUR}
    assert plan_span(day[:2]) == {"span_start": 7 * HOUR, "span_end": 21 * HOUR}
    assert plan_span(day[2:]) == {"span_start": 21 * HOUR, "span_end": 31 * HOUR}
    on_day_3 = [PlanItem(i.start + 2 * MINUTES_PER_DAY, i.end + 2 * MINUTES_PER_DAY, i.activity, i.place) for i in day]
    assert plan_span(on_day_3)["span_end"] == 3 * MINUTES_PER_DAY
    with pytest.raises(ValueError):
        plan_span([])
