"""The language-model mind against an OpenAI-compatible server on 127.0.0.1 (the test double), end to end through a
run: plans, reactions, dialogue, faults and their counted fallbacks, concurrency, and decisions that follow the
retrieved memories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulacra.config import load_config
from simulacra.days import night_of
from simulacra.memory.records import MemoryRecord, RetrievedMemory
from simulacra.simulation import Simulation
from simulacra.trace import read_trace
from tests.openai_double import garbage, hang, rate_limited, reply, server_error
from tests.schema_answers import MARK, TOGETHER, SchemaAnswers, prompt_text, request_schema, talk_to_someone_here

pytest_plugins = ["tests.openai_double"]

DATA = Path(__file__).resolve().parent / "data"
PLACES = {"cottage_a", "well", "shop", "field"}


def llm_sim(tmp_path, openai_double, rater_url, embedder, name="llm", extra=()):
    config = load_config(None, [f"rater.url={rater_url}", "llm.model=double-model", f"llm.base_url={openai_double.url}",
                                "llm.attempts=1", "llm.timeout_s=2", "simulation.news_min_rating=1",
                                "cognition.react_min_rating=1", *extra])
    return Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                             run_name=name, embedder=embedder)


def decisions(ticks, kind=None):
    return [d for t in ticks for d in t["decisions"] if kind is None or d["kind"] == kind]


def test_plans_come_from_the_model_with_places_that_exist_and_are_remembered(tmp_path, openai_double, rater_url,
                                                                             embedder):
    answers = SchemaAnswers(hooks={"reaction": lambda b, d: {**d, "decision": "continue"}})
    openai_double.script([], then=answers)
    with llm_sim(tmp_path, openai_double, rater_url, embedder) as sim:
        summary = sim.run(4)
        _, ticks = read_trace(sim.run_dir)
        plans = decisions(ticks, "plan_day")
        assert {d["agent"] for d in plans} == {"ann", "ben", "cal"} and all(d["source"] == "llm" for d in plans)
        for d in plans:
            assert d["value"] and all(item["place"] in PLACES for item in d["value"])
            persona = sim.world.personas[d["agent"]]
            night = night_of(persona.routine, persona.home)
            waking = d["value"] if night is None else d["value"][:-1]
            assert waking and all(item["activity"].startswith(MARK) for item in waking)
            if night is not None:  # the night is the routine's, at home: Ann's from 09:30 (Ben's day ends in the
                # field and Cal's routine has one entry: no night)
                start = persona.routine[-1].start_minute
                assert d["value"][-1] == {"start": start, "end": d["value"][-1]["end"], "place": persona.home,
                                          "activity": persona.routine[-1].activity, "routine_index": night}
                assert waking[-1]["end"] == start
            assert d["memory_ids"]  # the memories retrieved for "plans for today" were in the prompt
        # the plan is stored as a memory of kind plan, and the actions follow the model's plan
        adds = [op for t in ticks for op in t["memory"] if op["op"] == "add" and op["kind"] == "plan"]
        assert any("plan for day 1" in op["text"] and MARK in op["text"] for op in adds)
        assert any(a["activity"].startswith(MARK) for t in ticks for a in t["actions"].values())
        steps = decisions(ticks, "next_actions")
        assert steps and all(s["place"] in PLACES for d in steps for s in d["value"])
        assert summary["mind"]["name"] == "llm:openai:double-model"
        assert summary["mind"]["decisions"]["llm"] >= 6 and not summary["mind"]["fallbacks"]
        assert summary["agents"]["ann"]["plan"] and MARK in summary["agents"]["ann"]["plan"][0]
    assert {"day_plan", "actions"} <= set(answers.titles)


def test_a_place_id_the_model_writes_into_an_activity_becomes_the_place_name(tmp_path, openai_double, rater_url,
                                                                               embedder):
    """The prompt lists places as ``id: name``; a small model copies the id into what it says it will do. What
    residents perceive, remember and plan must read "Ann's Cottage", not "cottage_a"."""
    openai_double.script([], then=SchemaAnswers(hooks={
        "day_plan": lambda b, d: {"items": [{"start": "08:00", "activity": "tidying cottage_a", "place": "cottage_a"}]},
        "actions": lambda b, d: {"actions": [{"minutes": 240, "activity": "sweeping Cottage_A's floor",
                                              "place": "cottage_a"}]},
        "reaction": lambda b, d: {**d, "decision": "continue"}}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "ids") as sim:
        sim.run(3)
        _, ticks = read_trace(sim.run_dir)
    texts = [a["activity"] for t in ticks for a in t["actions"].values()] + [
        op["text"] for t in ticks for op in t["memory"] if op["op"] == "add"]
    assert not [x for x in texts if "cottage_a" in x.casefold()]
    assert any("sweeping Ash Cottage's floor" in x for x in texts)
    assert any("tidying Ash Cottage" in x for x in texts)


def go_to(place):
    return lambda body, default: {**default, "decision": "go", "place": place, "activity": "helping at the " + place}


def test_a_reaction_can_only_name_a_place_or_someone_present(tmp_path, openai_double, rater_url, embedder):
    """The reaction schema leaves a model no "none" to answer "talk" or "go" with (the bundled 135M model answered
    "talk" to "none", and no reaction of its started a conversation): the person is one of the people the prompt
    lists as here, the place one of the world's, and "talk" is not offered when nobody is here."""
    seen: list[tuple[list, list, str]] = []

    def reaction(body, default):
        props = body["response_format"]["json_schema"]["schema"]["properties"]
        here = prompt_text(body).split("People here: ", 1)[1].split(".\n", 1)[0]
        seen.append((props["decision"]["enum"], props["person"]["enum"], here))
        assert set(props["place"]["enum"]) == PLACES
        return {**default, "decision": "continue"}

    openai_double.script([], then=SchemaAnswers(hooks={"reaction": reaction}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "enum") as sim:
        sim.run(6)
    assert seen
    for decision, people, here in seen:
        if here == "nobody":
            assert decision == ["continue", "go"] and people == ["none"]
        else:
            assert decision == ["continue", "go", "talk"] and people == here.split(", ") and "none" not in people
    assert any(here != "nobody" for _, _, here in seen)


def test_a_reaction_changes_the_route(tmp_path, openai_double, rater_url, embedder):
    """Every agent goes to the field when it notices something: the route changes against the plan's."""
    plan_everyone_home = {
        "day_plan": lambda body, d: {"items": [{"start": "08:00", "activity": "staying in", "place": "cottage_a"}]},
        "actions": lambda body, d: {"actions": [{"minutes": 240, "activity": "staying in", "place": "cottage_a"}]},
    }
    openai_double.script([], then=SchemaAnswers(hooks={**plan_everyone_home,
                                                       "reaction": lambda b, d: {**d, "decision": "continue"}}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "stay") as sim:
        sim.run(5)
        _, calm = read_trace(sim.run_dir)
    openai_double.script([], then=SchemaAnswers(hooks={**plan_everyone_home, "reaction": go_to("field")}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "react") as sim:
        sim.run(5)
        _, reacting = read_trace(sim.run_dir)
    reactions = [d for d in decisions(reacting, "react") if d["value"]["kind"] == "go"]
    assert reactions and all(d["source"] == "llm" and d["value"]["place"] == "field" for d in reactions)
    assert all(d["value"]["percept"] for d in reactions)
    who = reactions[0]["agent"]
    calm_route = [t["positions"][who] for t in calm]
    react_route = [t["positions"][who] for t in reacting]
    assert "field" not in calm_route and react_route[-1] == "field" and calm_route != react_route


def test_conversation_lines_come_from_the_model_and_both_remember_them(tmp_path, openai_double, rater_url, embedder):
    def line(body, default):
        speaker = prompt_text(body).split(",", 1)[0].removeprefix("You are ")
        return {"line": f"{MARK} {speaker} speaks ({len(prompt_text(body))})", "news": 0, "end": False}

    hooks = {**TOGETHER, "reaction": talk_to_someone_here, "line": line,
        "summary": lambda b, d: {"summary": f"{MARK} they talked"}}
    openai_double.script([], then=SchemaAnswers(hooks=hooks))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "talk", ["simulation.conversation_turns=4"]) as sim:
        summary = sim.run(6)
        _, ticks = read_trace(sim.run_dir)
    convs = [c for t in ticks for c in t["conversations"]]
    assert convs, "a reaction 'talk' starts a conversation"
    c = convs[0]
    assert len(c["lines"]) == 4 and all(ln["source"] == "llm" and ln["text"].startswith(MARK) for ln in c["lines"])
    assert c["summary"].startswith("Conversation of") and MARK in c["summary"]
    for pid in c["participants"]:
        texts = [op["text"] for t in ticks for op in t["memory"] if op["op"] == "add" and op["agent"] == pid]
        assert all(any(ln["text"] in x for x in texts) for ln in c["lines"])  # every line, both sides
        assert c["summary"] in texts
    usage = summary["mind"]["history"]
    assert usage["strategy"] == "window_summary" and usage["lines"] >= 4 and usage["line_prompt_tokens"] > 0


def test_a_whole_exchange_in_one_call(tmp_path, openai_double, rater_url, embedder):
    """cognition.exchange=whole: one call writes every line and the summary; a line telling news carries its topic."""
    told_news = []

    def exchange(body, default):
        props = body["response_format"]["json_schema"]["schema"]["properties"]["lines"]["items"]["properties"]
        a, b = props["speaker"]["enum"]
        news = f"News {b.split()[0]} could tell (by number):\n1. " in prompt_text(body)
        told_news.append(news)
        return {"lines": [{"speaker": a, "line": f"{MARK} hello", "news": 0},
                          {"speaker": b, "line": f"{MARK} news", "news": int(news)},
                          {"speaker": a, "line": f"{MARK} bye", "news": 0}], "summary": f"{MARK} news passed"}

    hooks = {**TOGETHER, "reaction": talk_to_someone_here, "exchange": exchange}
    answers = SchemaAnswers(hooks=hooks)
    openai_double.script([], then=answers)
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "whole", ["cognition.exchange=whole"]) as sim:
        summary = sim.run(6)
        _, ticks = read_trace(sim.run_dir)
    convs = [c for t in ticks for c in t["conversations"]]
    assert convs and all(len(c["lines"]) == 3 and c["summary"].endswith(f"{MARK} news passed") for c in convs)
    assert "line" not in answers.titles and "summary" not in answers.titles
    assert answers.titles.count("exchange") == len(convs)
    # the second line tells the listener's first news item exactly when it had one; nothing else carries a topic
    assert [c["lines"][1]["topic"] is not None for c in convs] == told_news
    assert all(ln["topic"] is None for c in convs for ln in (c["lines"][0], c["lines"][2]))
    assert not summary["mind"]["fallbacks"]
    assert summary["mind"]["history"]["exchange_calls"] == len(convs)


FAULTS = {
    "garbage": lambda b, d: garbage(),
    "truncated": lambda b, d: reply(json.dumps(d)[:20], finish_reason="length"),
    "unknown place": lambda b, d: {"items": [{"start": "08:00", "activity": "flying", "place": "the moon"}]},
    "429": lambda b, d: rate_limited(None),
    "500": lambda b, d: server_error(),
    "timeout": lambda b, d: hang(5),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_bad_answer_falls_back_to_the_scripted_decision_and_is_counted(tmp_path, openai_double, rater_url,
                                                                        embedder, fault):
    openai_double.script([], then=SchemaAnswers(hooks={"day_plan": FAULTS[fault]}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "fault") as sim:
        summary = sim.run(3)
        _, ticks = read_trace(sim.run_dir)
    assert summary["ticks"] == 3 and not summary["stopped"]
    plans = decisions(ticks, "plan_day")
    assert len(plans) == 3 and all(d["source"] == "fallback" and d["reason"] for d in plans)
    assert plans[0]["value"][0]["activity"] == "drawing water"  # the routine, as the scripted mind plans
    assert summary["mind"]["fallbacks"] == {"plan_day": 3}


def test_answers_arriving_in_reverse_order_give_the_same_trace(tmp_path, openai_double, rater_url, embedder):
    """With 4 calls in flight, the first request of a burst is answered last; the trace equals a run that asked
    one call at a time."""
    arrivals = []

    def delay(body):
        arrivals.append(1)
        return 0.3 if len(arrivals) % 3 == 1 else 0.0

    traces = []
    for n, concurrency in enumerate((1, 4)):
        arrivals.clear()
        openai_double.script([], then=SchemaAnswers(delay_s=delay))
        with llm_sim(tmp_path, openai_double, rater_url, embedder, f"c{n}", [f"llm.concurrency={concurrency}"]) as sim:
            sim.run(4)
            _, ticks = read_trace(sim.run_dir)
        traces.append(json.dumps(ticks, sort_keys=True))
    assert traces[0] == traces[1]


def test_a_decision_changes_when_the_retrieved_memories_change(openai_double, embedder):
    """Same situation, different memories in the prompt: a different line, and the ids of the memories cited."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, ConversationView
    from simulacra.cognition.scripted import ScriptedMind
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")

    def echo_first_memory(body, default):
        text = prompt_text(body)
        first = text.split("What you remember about Ben Brook:\n1. ", 1)[1].split("\n", 1)[0]
        return {"line": f"You know, {first}", "news": 0, "end": False}

    openai_double.script([], then=SchemaAnswers(hooks={"line": echo_first_memory}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())

    def memory(i, text):
        rec = MemoryRecord(id=f"m{i}", text=text, kind="dialogue", rating=6, timestamp=480.0, tick=0)
        return RetrievedMemory(f"m{i}", text, "short_term", "dialogue", 1.0, 0.6, 0.7, 1.1, rec)

    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    said = []
    for mems in ([memory(1, "Ben sold the last candles.")], [memory(2, "Ben is saving for a new roof.")]):
        view = AgentView("ann", world.personas["ann"], 500, "shop", tuple(mems), names, places)
        conv = ConversationView("ann", "ben", "shop", 1, 4, [], [], set(), True, "buying candles")
        d = mind.next_line(view, conv)
        assert d.source == "llm" and d.memory_ids == (mems[0].id,)
        said.append(d.value.text)
        # the scripted mind decides from what it retrieved too: the news it tells is the retrieved one
    assert said[0] != said[1] and "candles" in said[0] and "roof" in said[1]
    from simulacra.cognition.scripted import GossipRule, news_candidates

    scripted = ScriptedMind(gossip=GossipRule("tell-all"))  # tells what it retrieved, for sure

    told = []
    for mems in ([memory(1, "Ben sold the last candles.")], [memory(2, "Ben is saving for a new roof.")]):
        for m in mems:
            m.record.extra.update(topic=m.text, source="seen")
        news = news_candidates([], mems, "cal", "Cal Carter", set(), 1)
        view = AgentView("ann", world.personas["ann"], 500, "shop", tuple(mems), names, places)
        d = scripted.next_line(view, ConversationView("ann", "cal", "shop", 1, 4, [], news, set(), True, "x"))
        told.append(d.value.text)
        assert d.memory_ids[0] == mems[0].id
    assert told[0] != told[1]


def test_interview_answers_from_retrieved_memories_with_every_backend(tmp_path, openai_double, rater_url, embedder,
                                                                    capsys):
    from simulacra.cli import main
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.config import Config
    from simulacra.interview import interview
    from simulacra.llm import OpenAIChatModel

    config = load_config(None, [f"rater.url={rater_url}", "simulation.conversation_probability=1.0",
                                "simulation.news_min_rating=1", "memory.retrieval=merged"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="iv", embedder=embedder) as sim:
        sim.run(6)
    question = "What happened at the old well?"
    scripted = interview(sim.run_dir, "ann", question, embedder=embedder)
    assert scripted["source"] == "scripted" and scripted["retrieved"]
    assert scripted["used"] and all(m["text"] in scripted["answer"] for m in scripted["used"])
    assert any("rope snaps" in m["text"] for m in scripted["retrieved"])
    # at an earlier tick, memories formed later are not used
    early = interview(sim.run_dir, "ann", question, tick=0, embedder=embedder)
    _, ticks = read_trace(sim.run_dir)
    later = {op["id"] for t in ticks[1:] for op in t["memory"] if op["op"] == "add"}
    assert later and not later & {m["id"] for m in early["retrieved"]}
    assert early["time"] == 490 and early["retrieved"] != scripted["retrieved"]

    def cite_second(body, default):
        return {"answer": f"{MARK} the rope snapped", "memories": [2]}

    openai_double.script([], then=SchemaAnswers(hooks={"interview": cite_second}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
    llm = interview(sim.run_dir, "ann", question, embedder=embedder, mind=mind)
    assert llm["source"] == "llm" and llm["answer"].startswith(MARK)
    assert [m["id"] for m in llm["used"]] == [llm["retrieved"][1]["id"]]
    assert "What happened at the old well?" in prompt_text(openai_double.requests[-1])
    # an answer is said as a line is: its speaker label, the question and the instructions copied into it are not
    # the answer, and one that is not a sentence said aloud is asked again, then the scripted answer is given
    for said, expected in (("Ann Archer: What happened at the old well? The rope snapped. Answer in your own voice "
                            "from what you remember; if you do not remember, say so.", "The rope snapped."),
                           ("1.1.1.1.1", scripted["answer"])):
        openai_double.script([], then=SchemaAnswers(hooks={"interview": lambda b, d, a=said: {"answer": a,
                                                                                             "memories": [1]}}))
        mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
        assert interview(sim.run_dir, "ann", question, embedder=embedder, mind=mind)["answer"] == expected
    # the command line, scripted (the run's own mind)
    assert main(["interview", str(sim.run_dir), "--agent", "ann", question]) == 0
    out = capsys.readouterr().out
    assert "Ann Archer (ann)" in out and "memories the answer rests on" in out
    assert main(["interview", str(sim.run_dir), "--agent", "nobody", question]) != 0
    # inspect shows the decisions with the memories behind them
    from simulacra.explain import explain_tick, format_explanation

    e = explain_tick(sim.run_dir, "ann", 0)
    assert e["decisions"] and e["decisions"][0]["kind"] == "plan_day"
    assert "decided (plan_day, scripted)" in format_explanation(e)


def test_a_looping_line_is_said_once():
    from simulacra.cognition.llm_mind import BadAnswer, tidy_line

    looped = "I'm not sure I know you well. I'm not sure I know you well.  I'm not sure  I know you well. Bye!"
    assert tidy_line(looped) == "I'm not sure I know you well. Bye!"
    assert tidy_line("One. Two. Three. Four.", most=2) == "One. Two."
    with pytest.raises(BadAnswer):
        tidy_line(" . ")
    with pytest.raises(BadAnswer, match="repeats itself"):
        tidy_line("Lena, Samuel Adeyemi, Lena, Samuel Adeyemi, Lena, Samuel Adeyemi, Samuel Adeyemi, Samuel Adeyemi")
    assert tidy_line("Did you hear that the mill wheel stopped this morning? Bram is fixing it.")


def test_a_models_activity_loses_list_numbers_clock_times_and_a_cut_phrase():
    """What the bundled SmolLM2-135M wrote as actions and plan items (stop 55), as the town says them."""
    from simulacra.cognition.llm_mind import ACTIVITY_CHARS, BadAnswer, model_activity

    places = {"clinic": "Fernhollow Clinic", "bakery": "The Rising Loaf Bakery"}
    cases = {
        "1. 07:00-08:00 eating breakfast with Greta": "eating breakfast with Greta",
        "3. 08:00-12:10 opening the clinic": "opening the clinic",
        "12:10-13:40 fishing in the river": "fishing in the river",
        "07:00 go to bed": "going to bed",
        "- eat lunch at bakery": "eating lunch at The Rising Loaf Bakery",
        "baking the afternoon rolls at the bakery at the": "baking the afternoon rolls at the bakery",
        "2 loaves to bake": "2 loaves to bake",  # a number that is no list number stays
        "opening the shop at 9.30": "opening the shop at 9.30",  # a time that does not lead stays
    }
    for said, town in cases.items():
        assert model_activity(said, places) == town, said
    cut = "opening the clinic and checking the medicine cabinet at the "
    assert len(cut) == ACTIVITY_CHARS and model_activity(cut, places) == ("opening the clinic and checking the "
                                                                          "medicine cabinet")
    for junk in ("11:00-12:00", "1.", "2.3.1.1"):
        with pytest.raises(BadAnswer, match="not words"):
            model_activity(junk, places)


def test_a_line_cut_at_the_length_limit_loses_its_cut_sentence():
    """A grammar-constrained server stops the line at the schema's maxLength: the bundled SmolLM2-135M's lines ended
    "... I'm not 100% sure, but I'm going" (stop 55). Only a text of exactly the limit was cut."""
    from simulacra.cognition.llm_mind import LINE_CHARS, BadAnswer, tidy_line

    tail = (" the day the mill wheel stopped turning and the whole town came down to the river to see what was the "
            "matter with it, how the miller swore, how the children cheered, how the water rose over the weir, how "
            "nobody could remember a spring like it in forty years")

    def at_limit(text):
        return (text + tail)[:LINE_CHARS]

    whole = "Hello, Samuel! I have been baking since dawn."
    cut = at_limit(f"Hana Novak: {whole} I'm not sure, but I'm going to tell you about")
    assert len(cut) == LINE_CHARS and not cut.endswith(".")
    assert tidy_line(cut, names=("Hana Novak",), limit=LINE_CHARS) == whole
    assert tidy_line(cut, names=("Hana Novak",)).endswith(cut[-20:])  # no limit given: nothing was cut
    with pytest.raises(BadAnswer, match="cut at 240 characters"):
        tidy_line(at_limit("I'm going to tell you about the day the mill"), limit=LINE_CHARS)
    start = f"{whole} What a long day it was, with the oven going since four"
    ended = start + "o" * (LINE_CHARS - len(start) - 1) + "!"  # at the limit, ended as a sentence: all of it is said
    assert len(ended) == LINE_CHARS and tidy_line(ended, limit=LINE_CHARS) == ended
    short = "I'm not sure, but I'm going"  # shorter than the limit: the model stopped there itself, and it is said
    assert tidy_line(short, limit=LINE_CHARS) == short


def test_a_speaker_label_is_not_part_of_the_line():
    from simulacra.cognition.llm_mind import BadAnswer, strip_speaker, tidy_line

    names = ("Hana Novak", "Ezra Pike")
    echo = "Hana Novak: The conversation is starting. The conversation is starting."
    assert tidy_line(echo, names=names) == "The conversation is starting."
    assert tidy_line("**Ezra:** Morning, Hana!", names=names) == "Morning, Hana!"
    assert strip_speaker("Ezra Pike: Hana Novak: hello", names) == "hello"
    # a line that greets its own speaker confuses who speaks (stop 55); greeting the listener, or naming oneself, is
    # speech
    from simulacra.cognition.llm_mind import greets_self

    assert greets_self("Hello, Tobias! I'm so glad you're here.", "Tobias Novak")
    assert greets_self("good morning Tobias Novak.", "Tobias Novak")
    for line in ("Hello, Hana! I'm so glad you're here.", "I'm Tobias Novak, a student.", "Hello! Tobias here.",
                 "Hello, Tobiasz!", "Tobias: hello"):
        assert not greets_self(line, "Tobias Novak"), line
    with pytest.raises(BadAnswer, match="greets Tobias Novak"):
        tidy_line("Tobias Novak: Hello, Tobias! I'm so glad you're here.", names=("Tobias Novak", "Hana Novak"),
                  speaker="Tobias Novak")
    assert tidy_line("Hello, Hana!", names=names, speaker="Tobias Novak") == "Hello, Hana!"
    # the transcript's heading, copied before a label (stop 55)
    assert tidy_line("The conversation so far: Hana Novak: Morning, Ezra!", names=names) == "Morning, Ezra!"
    # only the speakers' names are labels: other text before a colon is said
    assert tidy_line("Note: the ferry is late.", names=names) == "Note: the ferry is late."
    assert tidy_line("Greta Lund: see you at noon.", names=names) == "Greta Lund: see you at noon."
    assert tidy_line("Hana Novak: The conversation is starting.") == "Hana Novak: The conversation is starting."
    with pytest.raises(BadAnswer):
        tidy_line("Ezra Pike:", names=names)


def test_a_spent_budget_stops_the_run_at_its_last_complete_tick(tmp_path, openai_double, rater_url, embedder):
    """Three plans and three decompositions fit in the budget of 7 calls; the reactions of a later tick do not."""
    openai_double.script([], then=SchemaAnswers(hooks={"reaction": lambda b, d: {**d, "decision": "continue"}}))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "budget", ["llm.max_calls=7"]) as sim:
        summary = sim.run(8)
        _, ticks = read_trace(sim.run_dir)
    assert summary["stopped"] and "llm.max_calls" in summary["stopped"]
    assert 0 < summary["ticks"] < 8 and len(ticks) == summary["ticks"]
    assert len(openai_double.requests) == 7


def test_a_slow_answer_is_reported_while_it_is_awaited(caplog):
    import logging
    import time

    from simulacra.cognition.llm_mind import waiting_report

    with caplog.at_level(logging.WARNING, logger="simulacra.cognition.llm_mind"):
        with waiting_report("the model (plan_day)", 0.05):
            time.sleep(0.18)
    reports = [r.getMessage() for r in caplog.records if "waiting for the model (plan_day)" in r.getMessage()]
    assert len(reports) >= 2 and reports[0].endswith("s so far")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="simulacra.cognition.llm_mind"):
        with waiting_report("the model (line)", 5):
            pass
    assert not caplog.records  # a quick answer is not reported


def test_a_line_said_again_or_a_bare_name_is_not_used(openai_double):
    """Small models repeat the last line or answer a name: asked again, then the scripted line."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, ConversationView, Utterance
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    view = AgentView("ann", world.personas["ann"], 500, "shop", (), names, places)
    # the echo seen with SmolLM2: the other speaker's line copied with its transcript label; and what it answered
    # in a day of make run-llm (stop 54): a name not the speakers', a time stamp, the instruction itself
    for answer, why in (("The rope snapped at the well.", "said already"), ("Ben Brook", "not a name"),
                        ("Ben Brook: The rope snapped at the well.", "said already"),
                        ("ben: the rope snapped at the well", "said already"), ("Lena", "not a sentence"),
                        ("2018-01-21 14:32:52.143", "not a sentence"),
                        ("Write Ann Archer's next line, without the name.", "instructions")):
        openai_double.script([], then=SchemaAnswers(hooks={"line": lambda b, d, a=answer: {"line": a, "news": 0,
                                                                                           "end": False}}))
        said = [("ben", Utterance("The rope snapped at the well."))]
        mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())  # no cached answer
        d = mind.next_line(view, ConversationView("ann", "ben", "shop", 1, 4, said, [], set(), True, "shopping"))
        assert d.source == "fallback" and d.value.text != answer
        assert d.reason and why in d.reason, (answer, d.reason)


def test_the_instructions_copied_into_a_line_are_dropped_and_news_told_word_for_word_is_kept(openai_double):
    """SmolLM2-135M began 20 of 56 lines of a day with "The conversation is starting." (stop 54): the sentences of
    the instructions are not the speaker's, the rest of the line is; a news item or a memory said word for word is
    a line (the prompt's persona, memories and news are not instructions)."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, ConversationView, NewsItem
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    view = AgentView("ann", world.personas["ann"], 500, "shop", (), names, places)
    news = [NewsItem("The rope snapped at the well.", 6, "seen", "m1")]
    for answer, said in (("The conversation is starting. Morning, Ben!", "Morning, Ben!"),
                         ("The rope snapped at the well.", "The rope snapped at the well.")):
        openai_double.script([], then=SchemaAnswers(hooks={"line": lambda b, d, a=answer: {"line": a, "news": 0,
                                                                                           "end": False}}))
        mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())  # no cached answer
        d = mind.next_line(view, ConversationView("ann", "ben", "shop", 0, 4, [], news, set(), True, "shopping"))
        assert (d.source, d.value.text) == ("llm", said)


@pytest.mark.parametrize("least, most, expected", [(2, 8, 2), (6, 8, 6), (20, 4, 4)])
def test_a_conversation_is_not_ended_before_its_minimum_of_lines(openai_double, least, most, expected):
    """simulation.min_conversation_lines: a model that ends every line ends the conversation at the minimum (2 =
    today's rule, the reply to the opening line; above the most lines it is the most), and the lines before it are
    asked to keep the conversation going."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, ConversationView, converse_line_by_line
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    said = iter(range(1, 100))
    openai_double.script([], then=SchemaAnswers(hooks={"line": lambda b, d: {
        "line": f"That is thought number {next(said)}.", "news": 0, "end": True}}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url),
                   load_config(None, ["cognition.history=full"]))
    views = {pid: AgentView(pid, world.personas[pid], 500, "shop", (), names, places) for pid in ("ann", "ben")}
    convs = {me: ConversationView(me, other, "shop", 0, most, [], [], set(), True, "shopping", min_turns=least)
             for me, other in (("ann", "ben"), ("ben", "ann"))}
    lines, decisions = converse_line_by_line(mind.next_line, views, convs, "ann", "ben", mind.open_history())
    assert len(lines) == expected and all(d.source == "llm" and d.value.end for d in decisions)
    assert [pid for pid, _ in lines] == ["ann", "ben"] * (expected // 2)
    asks = [prompt_text(body).rsplit("Say your next line", 1)[1] for body in openai_double.requests]
    assert len(asks) == expected
    keep = [i for i, ask in enumerate(asks) if "Keep the conversation going" in ask]
    assert keep == list(range(1, min(least, most) - 1))
    assert all("Set end to true when you finish" in ask for i, ask in enumerate(asks) if i not in keep)
    assert ("You must end the conversation now." in asks[-1]) == (expected == most)


def test_the_town_holds_conversations_of_the_configured_minimum(tmp_path, openai_double, rater_url, embedder):
    """The tick loop passes simulation.min_conversation_lines to every conversation held line by line."""
    said = iter(range(1, 1000))
    hooks = {**TOGETHER, "reaction": talk_to_someone_here,
        "line": lambda b, d: {"line": f"{MARK} remark number {next(said)}", "news": 0, "end": True},
        "summary": lambda b, d: {"summary": f"{MARK} they talked"}}
    openai_double.script([], then=SchemaAnswers(hooks=hooks))
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "least",
                 ["simulation.conversation_turns=8", "simulation.min_conversation_lines=5"]) as sim:
        sim.run(6)
        _, ticks = read_trace(sim.run_dir)
    convs = [c for t in ticks for c in t["conversations"]]
    assert convs and all(len(c["lines"]) == 5 for c in convs)


def test_a_place_follows_the_answers_own_words_and_actions_stay_at_the_plans_places(openai_double):
    """A small model picks the ``place`` field by where a place stands in the list more than by what it wrote (the
    bundled 135M model planned "eating dinner at the tavern" at the mill house and walked all day, stop 53): a plan
    item or action whose words name one place is put there; a decomposition is offered the plan's places only; a
    "go" whose words name no place is asked again, then the scripted "continue" is taken."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, PlanItem
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    offered: list[list[str]] = []

    def actions(body, default):
        offered.append(request_schema(body)["properties"]["actions"]["items"]["properties"]["place"]["enum"])
        assert prompt_text(body).count("Places (id: name): well: The Old Well; shop: Corner Shop\n") == 1
        return {"actions": [{"minutes": 60, "activity": "drawing a bucket at the well", "place": "shop"},
                            {"minutes": 60, "activity": "sweeping the Corner Shop", "place": "well"},
                            {"minutes": 60, "activity": "counting coins", "place": "well"}]}

    def reaction(body, default):
        percept = prompt_text(body).split("You notice: ", 1)[1].split("\n", 1)[0]
        said = {"cry": ("Someone needs help in the field", "field"),  # names the place it chose
                "bell": ("I should fetch water", "helping at The Old Well"),  # names another than the field chosen
                "song": ("I must go", "going"),  # names none
                "rain": ("I will stay in", "resting")}[percept]  # a "go" to where Cal is, naming no other place
        return {**default, "decision": "go", "place": "cottage_a" if percept == "rain" else "field", "reason": said[0],
                "activity": said[1]}

    openai_double.script([], then=SchemaAnswers(hooks={
        "day_plan": lambda b, d: {"items": [
            {"start": "08:00", "activity": "drawing water at The Old Well", "place": "shop"},
            {"start": "12:00", "activity": "selling candles", "place": "shop"},
            {"start": "15:00", "activity": "walking from Ash Cottage to the field", "place": "well"}]},
        "actions": actions, "reaction": reaction}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    view = AgentView("cal", world.personas["cal"], 480, "cottage_a", (), names, places)  # a routine without a night

    plan = mind.plan_day(view, 480, 1380)
    assert plan.source == "llm"
    # the first item names the well; the second names nothing; the third names two places: the field kept
    assert [(p.start, p.place) for p in plan.value] == [(480, "well"), (720, "shop"), (900, "well")]
    assert mind.usage["plan_day_places_from_words"] == 1

    window = [PlanItem(480, 600, "drawing water", "well"), PlanItem(600, 900, "selling", "shop")]
    steps = mind.next_actions(view, window, 480, 660)
    assert offered == [["well", "shop"]]  # the plan's places, in order; not the cottage or the field
    assert steps.source == "llm"
    assert [(s.start, s.end, s.place) for s in steps.value] == [(480, 540, "well"), (540, 600, "shop"),
                                                                (600, 660, "well")]
    assert mind.usage["next_actions_places_from_words"] == 2

    def react(percept):
        return mind.react(view, percept, (), [])

    went = react("cry")
    assert went.source == "llm" and (went.value.kind, went.value.place) == ("go", "field")
    went = react("bell")
    assert went.source == "llm" and (went.value.kind, went.value.place) == ("go", "well")
    assert mind.usage["react_places_from_words"] == 1
    stayed = react("song")
    assert stayed.source == "fallback" and stayed.value.kind == "continue" and "do not say where" in stayed.reason
    assert mind.usage["react_retries"] == 1
    stayed = react("rain")
    assert stayed.source == "llm" and stayed.value.kind == "continue" and mind.usage["react_retries"] == 1


def test_a_model_plans_the_waking_day_and_the_night_is_the_routines(tmp_path, openai_double, rater_url, embedder):
    """A plan that kept a resident at the forge overnight kept it awake there, perceiving and reacting: a resident
    sleeps only at home (stop 53). The model is asked for its day until the routine's night, whose start the prompt
    names, and what it plans after that is left out."""
    # the second item as a grammar-constrained server cuts it at the schema's maxLength (60 characters)
    cut = f"{MARK} carrying more water to the trough at the far end of the yard by the gate"[:60]
    hooks = {**TOGETHER, "day_plan": lambda b, d: {"items": [
        {"start": "08:00", "activity": f"{MARK} drawing water", "place": "well"},
        {"start": "10:00", "activity": cut, "place": "well"}]},
        "reaction": lambda b, d: {**d, "decision": "continue"}}
    answers = SchemaAnswers(hooks=hooks)
    openai_double.script([], then=answers)
    with llm_sim(tmp_path, openai_double, rater_url, embedder, "night") as sim:
        sim.run(14)  # 08:00 to 10:10
        _, ticks = read_trace(sim.run_dir)
    asked = [r for r in openai_double.requests if "Plan your day" in prompt_text(r)]
    ann_asked = [prompt_text(r) for r in asked if "from 08:00 until 09:30, when the night at Ash Cottage begins "
                 "(it is planned already)" in prompt_text(r)]
    # the usual day shown is the waking day: shown the night's words, a small model planned "go to bed" at 07:00
    usual = [t.split("Your usual day: ", 1)[1].split("\n", 1)[0] for t in ann_asked]
    assert usual and all("drawing water at well" in u and "resting at home" not in u for u in usual), usual
    # each entry's place once: an activity whose words name its place as an answer's are read is shown as it is ("in
    # the field", not "... at field"); "minding the shop" does not name it so (no preposition), so its id is added
    ben = [prompt_text(r) for r in asked if "You are Ben Brook" in prompt_text(r)]
    assert ben and all("08:00 minding the shop at shop; 09:00 walking in the field." in t for t in ben), ben
    plan = {d["agent"]: d["value"] for d in decisions(ticks, "plan_day")}
    assert [(p["start"] % 1440, p["place"]) for p in plan["ann"]] == [(480, "well"), (570, "cottage_a")]
    assert plan["ann"][-1]["activity"] == "resting at home" and plan["ann"][-1]["routine_index"] == 2
    assert [(p["start"] % 1440, p["place"]) for p in plan["cal"]] == [(480, "well"), (600, "well")]  # no night
    assert plan["cal"][1]["activity"] == f"{MARK} carrying more water to the trough at the far end"  # whole phrases
    ann = {t["clock"]: t["actions"]["ann"] for t in ticks}
    assert ann["09:20"]["place"] == "well" and ann["09:30"]["type"] == "move"
    assert ann["10:10"] == {"type": "act", "activity": "resting at home", "place": "cottage_a", "routine_index": 2}
    assert "ann" not in {d["agent"] for t in ticks if t["clock"] >= "09:50" for d in t["decisions"]}  # asleep


def test_a_day_plan_that_begins_after_the_night_does_is_asked_again_then_the_routine(openai_double):
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    late = {"items": [{"start": "09:45", "activity": "going to sleep", "place": "well"},
                      {"start": "11:00", "activity": "sleeping", "place": "well"}]}
    openai_double.script([], then=SchemaAnswers(hooks={"day_plan": lambda b, d: late}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
    view = AgentView("ann", world.personas["ann"], 480, "cottage_a", (), {"ann": "Ann Archer"},
                     {pid: p.name for pid, p in world.places.items()})
    d = mind.plan_day(view, 480, 1920)
    assert d.source == "fallback" and "every item starts later" in d.reason and mind.usage["plan_day_retries"] == 1
    assert [(p.start, p.place, p.routine_index) for p in d.value] == [(480, "well", 0), (500, "shop", 1),
                                                                     (570, "cottage_a", 2)]



@pytest.mark.parametrize("activity, expected", [
    ("go to bed at Ash Cottage", "going to bed at Ash Cottage"),  # a command: put in the progressive
    ("goes to breakfast", "going to breakfast"),
    ("1", "not words"), ("2.3.1.1.1.1.1.1", "not words"), ("Ben Brook", "not words"),  # what SmolLM2 wrote
    ("break your plan into 8 concrete actions", "repeats the instructions"), ("action", "repeats the instructions"),
])
def test_a_models_action_is_an_activity_in_words_of_its_own(openai_double, activity, expected):
    """The bundled SmolLM2-135M decomposed plans into "1", "2.3.1.1...", a resident's name and the instruction's
    own words (stop 54), which residents then perceived as "Ann Archer is 1": such an answer is asked again, then
    the scripted decomposition is taken; a command ("go to bed") is said as an activity ("going to bed")."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.cognition.mind import AgentView, PlanItem
    from simulacra.config import Config
    from simulacra.llm import OpenAIChatModel
    from simulacra.world.model import load_world

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    openai_double.script([], then=SchemaAnswers(hooks={"actions": lambda b, d: {
        "actions": [{"minutes": 120, "activity": activity, "place": "well"}]}}))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
    names = {pid: p.name for pid, p in world.personas.items()}
    places = {pid: p.name for pid, p in world.places.items()}
    view = AgentView("ann", world.personas["ann"], 480, "well", (), names, places)
    steps = mind.next_actions(view, [PlanItem(480, 600, "drawing water", "well")], 480, 600)
    if expected.startswith("going"):
        assert steps.source == "llm" and [s.activity for s in steps.value] == [expected]
    else:
        assert steps.source == "fallback" and expected in steps.reason
        assert activity not in [s.activity for s in steps.value]


def test_a_line_keeps_short_replies_and_drops_a_copy_of_the_line_before():
    """A reply may say "Good morning!" back, a greeting without a lower-case word is speech; a long sentence of a
    line said before is a copy (SmolLM2-135M answered the line before with it and one more sentence), and the
    instructions are dropped across a line break too."""
    from simulacra.cognition.history import line_request
    from simulacra.cognition.llm_mind import BadAnswer, prompt_sentences, tidy_line

    names = ("Ann Archer", "Ben Brook")
    said = ["Good morning!", "Hello, Ann! I have been going to the Old Well this morning."]
    assert tidy_line("Good morning!! How are you?", names=names, said=said) == "Good morning!! How are you?"
    assert tidy_line("Hello Ben", names=names, said=said) == "Hello Ben"
    copy = "Ben Brook: Hello, Ann! I have been going to the Old Well this morning. The rope snapped."
    assert tidy_line(copy, names=names, said=said) == "Hello, Ann! The rope snapped."
    with pytest.raises(BadAnswer, match="said already"):
        tidy_line("good morning", names=names, said=said)
    prompt = prompt_sentences([line_request("Ann Archer", False)])
    assert tidy_line("The conversation is starting\nMorning, Ben.", names=names, prompt=prompt) == "Morning, Ben."
