"""The evaluation harness: scenario files, invitations driven by retrieval, metrics on a trace whose answers are
known, ``simulacra evaluate`` (deterministic per seed with the scripted mind) and the ablations."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from simulacra.cognition.mind import (
    AgentView,
    Consideration,
    Decision,
    Engagement,
    PlanItem,
    Reaction,
    splice,
)
from simulacra.cognition.scripted import ScriptedMind, news_candidates
from simulacra.errors import ScenarioError, SimulacraError
from simulacra.evaluation.metrics import Run, coordination, density, hallucination, heard_times, history, network
from simulacra.evaluation.report import parse_seeds
from simulacra.evaluation.scenario import load_scenario
from simulacra.evaluation.variants import VARIANTS, ablate_mind, variant
from simulacra.memory.records import MemoryRecord, RetrievedMemory, span_extra
from simulacra.trace import TraceWriter
from tests.conftest import ROOT
from tests.schema_answers import SchemaAnswers, prompt_text

pytest_plugins = ["tests.openai_double"]

WORLD = ROOT / "worlds" / "fernhollow.yaml"
SHORT_PARTY = ROOT / "scenarios" / "fernhollow-party-short.yaml"

GOOD = f"""\
name: t
world: {WORLD}
hours: 3
facts:
  - id: party
    text: "Greta Lund is throwing a party at The Wren and Kettle on day 1 from 09:00 to 10:00."
    question: "Is there a party at the tavern?"
    holders: [greta_lund]
party: {{fact: party, host: greta_lund, place: tavern, start: "09:00", end: "10:00"}}
"""


# --------------------------------------------------------------------------- scenario files
def write(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(text, encoding="utf-8")
    return p


def test_every_shipped_scenario_loads():
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(path)
        # every experiment has its party or candidacy; a history comparison has no coordination to measure
        assert sc.facts and (sc.party or sc.candidacy or "coordination" not in sc.measure), path


@pytest.mark.parametrize("change, field, words", [
    (lambda s: s.replace("hours: 3", "hours: 3\nhours: 4"), "hours", "given twice"),
    (lambda s: s.replace("holders: [greta_lund]", "holdres: [greta_lund]"), "facts.0.holdres",
     "did you mean 'holders'"),
    (lambda s: s.replace("host: greta_lund", "host: greta_lnd"), "party.host", "did you mean 'greta_lund'"),
    (lambda s: s.replace("place: tavern", "place: taverne"), "party.place", "did you mean 'tavern'"),
    (lambda s: s.replace("host: greta_lund", "host: hana_novak"), "party.host", "among the holders"),
    (lambda s: s.replace("fact: party,", "fact: parti,"), "party.fact", "did you mean 'party'"),
    (lambda s: s.replace('end: "10:00"', 'end: "11:00"'), "party.end", "after the run does"),
    (lambda s: s.replace('end: "10:00"', 'end: "08:00"'), "party", "not after start"),
    (lambda s: s.replace('start: "09:00"', 'start: "9h"'), "party.start", "9h"),
    (lambda s: s.replace("hours: 3", "hours: 3\nuntil: {day: 1, time: '12:00'}"), None, "exactly one of"),
    (lambda s: s.replace("id: party", "id: party\n    probes: [\"\"]"), "facts.0.probes.0", "at least 1"),
    (lambda s: s.replace(f"world: {WORLD}", "world: nowhere.yaml"), "world", "no world file"),
    (lambda s: s.replace("hours: 3", "hours: .inf"), "hours", "finite number"),
    (lambda s: s.replace("holders: [greta_lund]", "holders: [greta_lund, greta_lund]"), "facts.0.holders.1",
     "listed twice"),
])
def test_a_broken_scenario_names_its_file_and_field(tmp_path, change, field, words):
    path = write(tmp_path, change(GOOD))
    with pytest.raises(ScenarioError) as err:
        load_scenario(path)
    msg = str(err.value)
    assert msg.startswith(str(path)), msg
    if field is not None:
        assert f"field '{field}'" in msg, msg
    assert words in msg, msg
    assert "\n" not in msg


def test_a_scenario_with_agents_refers_to_simulated_ones_only(tmp_path):
    text = GOOD.replace("hours: 3", "hours: 3\nagents: [hana_novak, ruth_calloway]")
    with pytest.raises(ScenarioError, match=r"facts\.0\.holders\.0.*unknown simulated resident 'greta_lund'"):
        load_scenario(write(tmp_path, text))


def test_seeds_and_variants_are_parsed_with_clear_errors():
    assert parse_seeds("0..4") == [0, 1, 2, 3, 4]
    assert parse_seeds("3, 1,3") == [3, 1]
    assert parse_seeds("7") == [7]
    for bad in ("4..0", "a", "1-3", ""):
        with pytest.raises(SimulacraError, match="--seeds"):
            parse_seeds(bad)
    assert variant("history=window").overrides == ("cognition.history=window",)
    assert variant("no-reflection").overrides == ("reflection.enabled=false",)
    with pytest.raises(SimulacraError, match="did you mean 'no-planning'"):
        variant("no-planing")
    assert {"full", "no-reflection", "no-planning", "no-memory", "history=swin"} <= set(VARIANTS)
    both = variant("no-planning+no-reflection+history=window")  # parts combined: ablations and overrides
    assert both.name == "no-planning+no-reflection+history=window"
    assert both.ablate == {"planning"} and both.overrides == ("reflection.enabled=false", "cognition.history=window")
    with pytest.raises(SimulacraError, match="did you mean 'no-planning'"):
        variant("no-planing+history=window")
    with pytest.raises(SimulacraError, match="twice"):
        variant("history=swin+history=swin")
    goer = ScriptedMind()
    goer.react = lambda view, percept, about, present: Decision(Reaction("go", place="mill"), ())
    quiet = ablate_mind(goer, variant("no-reaction+history=swin").ablate)  # reacts to nothing, the rest is the mind's
    assert quiet.react(None, "a fire at the mill", (), ("ben",)).value.kind == "continue"
    assert quiet.name.endswith("+no-reaction") and quiet.next_line == goer.next_line
    assert ablate_mind(goer, variant("no-planning").ablate).react(None, "a fire", (), ()).value.kind == "go"


# --------------------------------------------------------------------------- invitations
E = Engagement("Greta Lund is throwing a party.", "greta_lund", "tavern", 540, 600)


def retrieved(text: str, extra: dict | None = None) -> RetrievedMemory:
    rec = MemoryRecord(id=text[:8], text=text, kind="dialogue", rating=5, timestamp=400.0, extra=dict(extra or {}))
    return RetrievedMemory(rec.id, text, "short_term", "dialogue", 1.0, 0.5, 0.5, 1.0, rec)


def view(agent: str, memories) -> AgentView:
    from simulacra.world.model import load_world

    w = load_world(WORLD)
    return AgentView(agent, w.personas[agent], 480, w.personas[agent].home, tuple(memories),
                     {p: w.personas[p].name for p in w.personas}, {p: x.name for p, x in w.places.items()})


def test_splice_cuts_what_overlaps_and_keeps_the_rest():
    plan = [PlanItem(420, 500, "a", "home", 0), PlanItem(500, 700, "b", "mill", 1), PlanItem(700, 800, "c", "home", 2)]
    out = splice(plan, PlanItem(540, 600, "party", "tavern"))
    assert [(p.start, p.end, p.activity) for p in out] == [(420, 500, "a"), (500, 540, "b"), (540, 600, "party"),
                                                           (600, 700, "b"), (700, 800, "c")]
    assert out[1].routine_index == 1 and out[2].routine_index is None


def test_an_engagement_travels_as_metadata_and_back():
    extra = {"topic": E.topic, **E.to_extra()}
    assert Engagement.from_extra(extra) == E
    assert Engagement.from_extra({"topic": "x"}) is None
    assert Engagement.from_dict(E.to_dict()) == E
    rec = MemoryRecord(id="m1", text="Greta told me", kind="dialogue", rating=6, timestamp=400.0,
                       extra={"topic": E.topic, "source": "greta_lund", "importance": 7, **E.to_extra()})
    assert MemoryRecord.from_metadata("m1", rec.text, rec.to_metadata()).extra == rec.extra
    (item,) = news_candidates([(rec, 0.6)], [], "hana_novak", "Hana Novak", set(), 4)
    assert item.engagement == E and item.importance == 7
    assert item.carried() == {**E.to_extra(), "importance": 7}
    # a memory of it is about the gathering's hours as well as the moment it was heard, whichever comes first
    assert E.about(400.0) == span_extra(400.0, float(E.end))
    assert E.about(E.start + 10) == span_extra(float(E.start), float(E.end))
    assert E.about(E.end + 90) == span_extra(float(E.start), float(E.end + 90))


def test_the_scripted_mind_goes_only_when_it_recalls_the_engagement_and_is_free():
    mind = ScriptedMind()
    carrying = retrieved("Greta Lund said to Hana Novak: a party", {"topic": E.topic, **E.to_extra()})
    other = retrieved("Hana Novak is baking bread.")
    assert mind.consider(view("hana_novak", [other, carrying]), E, []).value == Consideration(True, "free at that time")
    assert mind.consider(view("hana_novak", [other]), E, []).value == Consideration(False, "did not recall it")
    work = PlanItem(500, 700, "shoeing horses", "forge")
    d = mind.consider(view("kofi_mensah", [carrying]), E, [work]).value
    assert not d.go and d.reason.startswith("plan conflict: 08:20-11:40 shoeing horses at Mensah's Forge")
    assert mind.consider(view("greta_lund", [carrying]), E, [work]).value.go  # the host goes to its own


def test_the_llm_mind_is_asked_only_with_the_invitation_retrieved_and_sees_it(openai_double):
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.config import Config
    from simulacra.llm.openai_model import OpenAIChatModel
    from tests.schema_answers import SchemaAnswers, prompt_text

    go = {"consider": lambda body, default: {"reason": "fun", "go": True}}
    openai_double.script([], then=SchemaAnswers(hooks=go))
    mind = LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())
    carrying = retrieved("Greta Lund said to Hana Novak: come to my party at the tavern",
                         {"topic": E.topic, **E.to_extra()})
    assert mind.consider(view("hana_novak", [retrieved("Hana Novak is baking bread.")]), E, []).value.go is False
    assert openai_double.requests == []  # not recalled: nothing to ask
    d = mind.consider(view("hana_novak", [carrying]), E, [])
    assert d.source == "llm" and d.value == Consideration(True, "fun") and d.memory_ids == (carrying.id,)
    (body,) = openai_double.requests
    assert "come to my party at the tavern" in prompt_text(body) and "09:00 to 10:00" in prompt_text(body)


# --------------------------------------------------------------------------- metrics on a constructed trace
PERSONAS = {
    "a": {"name": "Ann A", "relationships": {"b": "friend"}},
    "b": {"name": "Bo B", "relationships": {"a": "friend", "c": "knows"}},  # c does not list b: no edge
    "c": {"name": "Cy C", "relationships": {}},
    "d": {"name": "Di D", "relationships": {}},
}
TOPIC = "Ann A is throwing a party at the hall from 08:00 to 09:00."


def constructed_run(tmp_path: Path) -> Run:
    """Four agents, ticks of 30 minutes from 07:00: Ann (host, seeded) tells Bo at 07:00; Bo tells Cy at 07:30;
    Bo goes to the hall, Cy declines (plan conflict), Di walks through the hall at 08:00; at 08:30 Bo tells Cy
    again in a long conversation whose summary keeps it; at 09:00, when the party is over, Cy tells Di (a new
    edge) in one whose summary drops it."""
    header = {"agents": ["a", "b", "c", "d"], "personas": PERSONAS, "start_minute": 420, "tick_minutes": 30,
              "mind": "scripted", "world": {"shared_memory": False}, "config": {},
              "scenario": {"seeded": [{"op": "add", "agent": "a", "text": "Ann wants a party", "kind": "intention"}]}}
    eng = {"topic": TOPIC, "host": "a", "place": "hall", "start": 480, "end": 540}

    def tick(n, time, positions, conversations=(), decisions=(), walking=()):
        actions = {a: {"type": "move" if a in walking else "act"} for a in positions}
        return {"type": "tick", "tick": n, "time": time, "clock": "08:00", "positions": positions,
                "actions": actions, "events": [], "object_changes": {}, "conversations": list(conversations),
                "decisions": list(decisions), "memory": []}

    def talk(x, y, topic=None, n=1, summary="", history=None):
        lines = [{"speaker": (x, y)[i % 2], "listener": (y, x)[i % 2], "text": "hi", "topic": topic if i == 0 else None}
                 for i in range(n)]
        c = {"participants": [x, y], "place": "square", "summary": summary, "lines": lines}
        return c if history is None else {**c, "history": history}

    home = {"a": "hall", "b": "square", "c": "square", "d": "home_d"}
    ticks = [
        tick(0, 420, home, [talk("a", "b", TOPIC)]),
        tick(1, 450, home, [talk("b", "c", TOPIC)], [
            {"agent": "b", "kind": "engagement", "value": {"engagement": eng, "go": True, "reason": "free"}}]),
        tick(2, 480, {**home, "b": "hall", "d": "hall"}, [], walking={"d"}, decisions=[
            {"agent": "c", "kind": "engagement",
             "value": {"engagement": eng, "go": False, "reason": "plan conflict: 08:00-09:00 work at mill"}}]),
        # the window strategy shows the last 2 lines at the end: the party, told first, is out of view
        tick(3, 510, {**home, "b": "hall"}, [talk("b", "c", TOPIC, 4, f"talked about: {TOPIC}",
                                                  {"strategy": "window", "summary": None, "verbatim": 2})]),
        # a summarising strategy keeps it in its summary, though the stored summary drops it
        tick(4, 540, home, [talk("c", "d", TOPIC, 4, "talked about the weather",
                                 {"strategy": "window_summary", "summary": f"Cy said: {TOPIC}", "verbatim": 2})]),
    ]
    tw = TraceWriter(tmp_path / "trace.jsonl", header)
    for t in ticks:
        tw.write(t)
    tw.close()
    return Run.load(tmp_path)


def test_metrics_on_a_trace_with_known_answers(tmp_path):
    from simulacra.evaluation.scenario import Fact, Party, Scenario

    run = constructed_run(tmp_path)
    fact = Fact(id="party", text=TOPIC, question="party?", holders=["a"], intention="Ann wants a party")
    sc = Scenario(name="t", world="w", hours=3, facts=[fact],
                  party=Party(fact="party", host="a", place="hall", start="08:00", end="09:00"))
    heard = heard_times(run, fact)
    assert heard == {"a": 419, "b": 420, "c": 450, "d": 540}
    start, end = network(run), network(run, until=run.end)
    assert sorted(start.edges) == [("a", "b")]
    assert density(start) == pytest.approx(1 / 6)
    assert sorted(tuple(sorted(e)) for e in end.edges) == [("a", "b"), ("b", "c"), ("c", "d")]
    assert density(end) == pytest.approx(3 / 6)
    c = coordination(run, sc, heard)
    assert c["invited"] == ["b", "c"] and c["attended"] == ["b"] and c["host_attended"]
    assert c["no_shows"] == {"c": {"category": "plan conflict", "reason": "plan conflict: 08:00-09:00 work at mill"},
                             "d": {"category": "heard after it ended", "reason": "first heard at minute 540"}}

    class Sim:  # a text holds the fact when it mentions "party"
        def holds(self, text, f):
            return "party" in text

    hist = history(run, sc, Sim())  # no model: nothing asked
    assert (hist["early_facts"], hist["in_view"], hist["in_view_share"], hist["in_summary_share"]) == (2, 1, 0.5, 0.5)
    assert hist["asked"] == 0 and hist["survival"] is None
    assert [(p["teller"], p["listener"], p["in_view"], p["in_summary"]) for p in hist["probes"]] == [
        ("b", "c", False, True), ("c", "d", True, False)]

    class Model:  # answers from what the prompt shows: a party when the view mentions one
        def __init__(self):
            self.asked = []

        def complete(self, messages, **kw):
            from simulacra.llm.base import Completion

            text = "\n".join(m["content"] for m in messages)
            self.asked.append((text, kw))
            seen = text.split("Question:")[0]  # the question itself names the party
            answer = "Yes, Ann A's party at the hall." if "party" in seen else "I do not know."
            return Completion(json.dumps({"answer": answer}), "m", 10, 5, 0.0, "stop")

    model = Model()
    hist = history(run, sc, Sim(), model=model, seed=3)
    assert (hist["asked"], hist["recalled"], hist["survival"]) == (2, 1, 0.5)
    assert [p["recalled"] for p in hist["probes"]] == [False, True]
    (first, kw1), (second, _) = model.asked
    assert "You are Cy C" in first and "Bo B" in first and "party?" in first and kw1["seed"] == 3
    assert "Summary of the earlier part" in second and "You are Di D" in second

    answers = [{"agent": "b", "fact": "party", "answer": "a party at the hall", "time": 570},
               {"agent": "d", "fact": "party", "answer": "yes, a party", "time": 530},  # before Di heard it
               {"agent": "c", "fact": "party", "answer": "I do not remember", "time": 570},
               {"agent": "c", "fact": "party", "answer": "a party", "time": 440}]  # asked before Cy heard it
    h = hallucination(answers, sc, {"party": heard}, Sim())
    assert h["claims"] == 3 and h["rate"] == pytest.approx(2 / 4)
    assert [(x["agent"], x["answer"]) for x in h["made_up"]] == [("d", "yes, a party"), ("c", "a party")]
    assert h["confirmed"] == {"party": ["b"]}


# --------------------------------------------------------------------------- simulacra evaluate, scripted
@pytest.fixture(scope="module")
def short_party(tmp_path_factory, embedder, rater_url):
    """The short party scenario with the scripted mind: full twice (seed 0), no-planning and no-memory once."""
    from simulacra.evaluation.report import evaluate

    sc = load_scenario(SHORT_PARTY)
    base = tmp_path_factory.mktemp("eval")
    over = [f"rater.url={rater_url}"]
    first = evaluate(sc, [variant("full"), variant("no-planning"), variant("no-memory")], [0], base / "a",
                     overrides=over, embedder=embedder)
    again = evaluate(sc, [variant("full")], [0], base / "b", overrides=over, embedder=embedder)
    return sc, base, first, again


def test_the_scripted_report_is_deterministic_per_seed(short_party):
    sc, base, first, again = short_party
    a = json.loads((base / "a" / "metrics.json").read_text())
    b = json.loads((base / "b" / "metrics.json").read_text())
    assert a["variants"]["full"] == b["variants"]["full"]
    assert (base / "a" / "runs" / "full-seed0" / "trace.jsonl").read_bytes() == \
        (base / "b" / "runs" / "full-seed0" / "trace.jsonl").read_bytes()
    for name in ("report.md", "metrics.json", "diffusion.png", "density.png", "metrics_table.png"):
        assert (base / "a" / name).stat().st_size > 0, name


def test_reuse_measures_a_finished_run_again_without_running_it(short_party, tmp_path, embedder):
    import shutil

    from simulacra.evaluation.report import evaluate, unfinished

    sc, base, first, _ = short_party
    runs = base / "a" / "runs"
    name = next(p.name for p in runs.iterdir() if p.name.startswith("full"))
    shutil.copytree(runs / name, tmp_path / "runs" / name)
    assert unfinished(tmp_path / "runs" / name, sc) is None
    said: list[str] = []
    again = evaluate(sc, [variant("full")], [0], tmp_path, embedder=embedder, reuse=True, progress=said.append,
                     overrides=["rater.url=http://127.0.0.1:9/unused"])  # no run: the rater is never asked
    assert any("measuring the finished run" in s for s in said) and not any("running" in s for s in said)
    assert again["variants"]["full"]["seeds"] == first["variants"]["full"]["seeds"]


def test_the_party_spreads_and_guests_come_by_retrieval(short_party):
    sc, base, first, _ = short_party
    row = first["variants"]["full"]["seeds"]["0"]
    assert row["diffusion"]["party"]["start"] == pytest.approx(1 / 5)  # only the host, before the first tick
    assert row["diffusion"]["party"]["end"] > 0.5
    assert row["diffusion"]["control-mill-sale"]["end"] == 0
    assert row["invited"] >= 2 and row["attended"] >= 1
    assert row["hallucination_rate"] == 0
    m = json.loads((base / "a" / "runs" / "full-seed0" / "metrics.json").read_text())
    run = Run.load(base / "a" / "runs" / "full-seed0")
    gone = {d["agent"] for t in run.ticks for d in t["decisions"] if d["kind"] == "engagement" and d["value"]["go"]}
    assert set(m["coordination"]["attended"]) <= gone  # nobody is at the tavern 11:00-12:00 by routine
    for t in run.ticks:  # every yes rests on a retrieved memory that carries the invitation
        ids = {r["id"] for op in t["memory"] if op["op"] == "retrieve" and op["purpose"] == "engagement"
               for r in op["results"]}
        for d in t["decisions"]:
            if d["kind"] == "engagement" and d["value"]["go"]:
                assert set(d["memory_ids"]) & ids
    report = (base / "a" / "report.md").read_text()
    assert "| full |" in report and "plan conflict" in report


def test_ablations_change_what_they_should(short_party):
    _, base, first, _ = short_party
    full = first["variants"]["full"]["seeds"]["0"]
    no_plan = first["variants"]["no-planning"]["seeds"]["0"]
    no_mem = first["variants"]["no-memory"]["seeds"]["0"]
    # without planning the news still spreads, but nobody changes plans to come
    assert no_plan["invited"] >= 1 and no_plan["attended"] == 0 < full["attended"]
    m = json.loads((base / "a" / "runs" / "no-planning-seed0" / "metrics.json").read_text())
    assert {x["category"] for x in m["coordination"]["no_shows"].values()} >= {"no planning"}
    # without memory nothing lived is recalled: the host never tells, nobody hears
    assert no_mem["invited"] == 0 and no_mem["attended"] == 0
    assert no_mem["diffusion"]["party"]["heard_end"] == pytest.approx(1 / 5)
    # the report says what each ablation changed against full
    report = (base / "a" / "report.md").read_text()
    changes = report.split("## What each variant changed (against full, means over seeds)\n\n")[1].split("\n\n")[0]
    lines = {ln.split("**")[1]: ln for ln in changes.splitlines()}
    assert set(lines) == {"no-planning", "no-memory"}
    assert f"attended {full['attended']} → 0" in lines["no-planning"]
    assert "party known at end" not in lines["no-planning"]  # the news still spreads
    assert (f"party known at end {full['diffusion']['party']['end']:.0%} → 20%; party told in person "
            f"{full['diffusion']['party']['told_end']:.0%} → 20%") in lines["no-memory"]  # the host only
    assert f"invited {full['invited']} → 0" in lines["no-memory"]


def test_equal_diffusion_curves_of_two_variants_stay_visible(tmp_path, monkeypatch):
    """Two variants with the same curves (common with the scripted mind: no-reflection = full) are drawn from wide
    to thin, so the plot shows both instead of the later one hiding the first."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    from simulacra.evaluation.report import aggregate, write_plots
    from simulacra.evaluation.scenario import Fact, Scenario

    sc = Scenario(name="t", world="w", hours=2, facts=[Fact(id="party", text=TOPIC, question="party?", holders=["a"])])
    run = {"diffusion": {"party": {"start": 0.25, "end": 1.0, "heard_end": 1.0, "told_end": 0.5, "minutes": [420, 480],
                                   "curve": [0.25, 1.0], "heard_curve": [0.25, 1.0], "told_curve": [0.25, 0.5]}}}
    names = ["full", "no-reflection", "no-memory"]
    details = {n: {0: run} for n in names}
    result = {"variants": {n: {"spread": aggregate({0: {"diffusion": {"party": {
        k: run["diffusion"]["party"][k] for k in ("start", "end", "heard_end", "told_end")}}}})} for n in names}}
    saved = {}
    real = Figure.savefig
    monkeypatch.setattr(Figure, "savefig", lambda fig, path, **kw: (saved.__setitem__(Path(path).name, fig),
                                                                    real(fig, path, **kw))[1])
    assert write_plots(result, details, sc, tmp_path)["diffusion"] == "diffusion.png"
    lines = {ln.get_label(): ln for ln in saved["diffusion.png"].axes[0].get_lines()}
    knows = [lines[f"{n}: knows (retrieval)"] for n in names]
    assert [list(ln.get_ydata()) for ln in knows] == [[0.25, 1.0]] * 3  # the same curve three times
    widths = [ln.get_linewidth() for ln in knows]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == 3  # nested: each one still shows
    assert [lines[f"{n}: told in person (trace)"].get_linewidth() for n in names] == widths


def test_evaluate_on_the_command_line_refuses_bad_input(tmp_path, capsys):
    from simulacra.cli import main

    assert main(["evaluate", str(SHORT_PARTY), "--out", str(tmp_path), "--variant", "no-memroy"]) == 2
    assert "did you mean 'no-memory'" in capsys.readouterr().err
    bad = write(tmp_path, GOOD.replace("hours: 3", "hours: -1"))
    assert main(["evaluate", str(bad), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: field 'hours'" in err and "Traceback" not in err
    assert main(["evaluate", str(SHORT_PARTY), "--out", str(tmp_path / "w"), "--workers", "0"]) == 2
    err = capsys.readouterr().err
    assert "--workers must be at least 1, got 0" in err and "Traceback" not in err
    assert not (tmp_path / "w").exists()  # refused before anything runs


# --------------------------------------------------------------------------- a party on day 2
def test_a_party_on_day_2_is_weighed_against_that_days_plan_and_kept_overnight(tmp_path, embedder, rater_url):
    """Told on day 1 of a party on day 2: the guest who works then declines naming day 2's work (its day-1 plan has
    nothing then), and the guest who accepts keeps the party through the night's new plan and comes."""
    from simulacra.config import load_config
    from simulacra.evaluation.setup import run_scenario
    from simulacra.evaluation.variants import variant as get_variant

    text = (GOOD.replace("hours: 3", 'until: {day: 2, time: "12:10"}')
            .replace("name: t", "name: t\nagents: [greta_lund, yusuf_demir, ruth_calloway]")
            .replace("on day 1 from 09:00 to 10:00", "on day 2 from 11:00 to 12:00")
            .replace('start: "09:00", end: "10:00"', 'day: 2, start: "11:00", end: "12:00"')
            .replace("holders: [greta_lund]", "holders: [greta_lund]\n    importance: 7"))
    sc = load_scenario(write(tmp_path, text))
    config = load_config(None, [f"rater.url={rater_url}", "simulation.seed=0"])
    run_scenario(sc, config, get_variant("full"), tmp_path / "runs", "day2", embedder)
    run = Run.load(tmp_path / "runs" / "day2")
    said = {d["agent"]: (t["time"], d["value"]) for t in run.ticks for d in t["decisions"]
            if d["kind"] == "engagement"}
    assert said["yusuf_demir"][0] < 1440 and not said["yusuf_demir"][1]["go"]  # told and decided on day 1
    assert said["yusuf_demir"][1]["reason"].startswith("plan conflict") and "forge" in said["yusuf_demir"][1]["reason"]
    assert said["ruth_calloway"][0] < 1440 and said["ruth_calloway"][1]["go"]
    day2_plan = next(d["value"] for t in run.ticks if t["time"] >= 1440 for d in t["decisions"]
                     if d["kind"] == "plan_day" and d["agent"] == "ruth_calloway")
    assert any(p["place"] == "tavern" and p["start"] == 1440 + 660 for p in day2_plan)
    c = coordination(run, sc, heard_times(run, sc.fact("party")))
    assert c["attended"] == ["ruth_calloway"] and c["host_attended"]
    assert c["no_shows"]["yusuf_demir"]["category"] == "plan conflict"


def test_without_planning_a_rest_day_follows_the_rest_day_routine():
    """The no-planning ablation plans each day from the routine of that day (Gullhaven's Sunday has its own)."""
    from dataclasses import replace

    from simulacra.cognition.scripted import routine_plan
    from simulacra.evaluation.variants import NoPlanningMind
    from simulacra.persona import load_persona

    wilf = load_persona(ROOT / "agent_personalities" / "wilf_hardy.json")
    v = replace(view("greta_lund", []), agent="wilf_hardy", persona=wilf, rest_day=True)
    start = 1440 + wilf.routine_for(True)[0].start_minute
    plan = NoPlanningMind(ScriptedMind()).plan_day(v, start, 2880 + 420).value
    assert plan == routine_plan(wilf, start, 2880 + 420, rest_day=True)
    assert [p.place for p in plan] == [e.place for e in wilf.routine_for(True)] != [e.place for e in wilf.routine]
    assert plan[-1].end == 2880 + 420


# --------------------------------------------------------------------------- history strategies, with a model double
FERRY = "The ferry to Millbrook stops running after Friday because its boiler cracked."


def history_hooks() -> dict:
    """A model double that plans everyone at the well, talks to whoever is there, tells the news it has in its
    first line, fills the rest with remarks, summarises faithfully (copies what it is given) and answers a question
    from what its prompt shows of the conversation."""
    import hashlib

    from tests.schema_answers import MARK, prompt_text

    def enum(body, key):
        return body["response_format"]["json_schema"]["schema"]["properties"][key]["enum"]

    def line(body, default):
        text = prompt_text(body)
        if f"\n1. {FERRY}" in text and 1 in enum(body, "news"):
            return {"line": f"Did you hear? {FERRY}", "news": 1, "end": False}
        n = int(hashlib.sha256(text.encode()).hexdigest()[:8], 16) % 100000
        return {"line": f"{MARK} a remark about the weather, number {n}.", "news": 0, "end": False}

    def faithful(body, default):
        return {"summary": " ".join(body["messages"][-1]["content"].split())[:590]}

    def recall(body, default):
        seen = prompt_text(body).split("Question:")[0]
        return {"answer": FERRY if FERRY in seen else "I do not know; they did not say."}

    def talk(body, default):
        people = [p for p in enum(body, "person") if p != "none"]
        return {**default, "decision": "talk", "person": people[0]} if people else {**default, "decision": "continue"}

    return {"day_plan": lambda b, d: {"items": [{"start": "08:00", "activity": "drawing water", "place": "well"}]},
            "actions": lambda b, d: {"actions": [{"minutes": 240, "activity": "drawing water", "place": "well"}]},
            "reaction": talk, "line": line, "ConversationSummary": faithful, "summary": faithful, "recall": recall}


def test_history_strategies_differ_on_early_facts_and_tokens(tmp_path, openai_double, rater_url, embedder):
    """An eight-line conversation whose first lines tell the ferry news: the full history and the window with a
    summary still hold it at the end and the listener, asked after the conversation, recalls it; a window of the
    last two lines has lost it, and spends fewer prompt tokens per conversation than the full history."""
    from simulacra.evaluation.report import evaluate

    data = ROOT / "tests" / "data"
    sc_path = write(tmp_path, f"""\
name: tiny-history
world: {data / 'tiny.yaml'}
personas_dir: {data / 'personas'}
agents: [ann, ben]
hours: 1
facts:
  - id: ferry
    text: "{FERRY}"
    question: "What is happening to the ferry to Millbrook?"
    holders: [ann]
    importance: 8
measure: [history, cost]
""")
    sc = load_scenario(sc_path)
    openai_double.script([], then=SchemaAnswers(hooks=history_hooks()))
    over = [f"rater.url={rater_url}", "llm.model=double-model", f"llm.base_url={openai_double.url}",
            "llm.attempts=1", "llm.timeout_s=5", "simulation.conversation_turns=8", "cognition.history_window=2",
            "cognition.chance_meetings=true"]
    names = ["history=full", "history=window", "history=window_summary"]
    result = evaluate(sc, [variant(n) for n in names], [0], tmp_path / "out", overrides=over, embedder=embedder,
                      interviews=False)
    rows = {n: result["variants"][n]["seeds"]["0"] for n in names}
    hist = {n: json.loads((tmp_path / "out" / "runs" / f"{n.replace('=', '-')}-seed0" / "metrics.json").read_text())
            ["history"] for n in names}
    for n in names:
        assert hist[n]["early_facts"] >= 1 and hist[n]["asked"] == hist[n]["early_facts"], n
        assert {p["strategy"] for p in hist[n]["probes"]} == {n.split("=")[1]}
        assert all(p["in_summary"] for p in hist[n]["probes"])  # the stored summary is written from every line
    assert (rows["history=full"]["early_fact_in_view"], rows["history=full"]["early_fact_survival"]) == (1, 1)
    assert (rows["history=window_summary"]["early_fact_in_view"],
            rows["history=window_summary"]["early_fact_survival"]) == (1, 1)
    assert (rows["history=window"]["early_fact_in_view"], rows["history=window"]["early_fact_survival"]) == (0, 0)
    assert all(p["answer"].startswith("I do not know") for p in hist["history=window"]["probes"])
    assert 0 < rows["history=window"]["tokens_per_conversation"] < rows["history=full"]["tokens_per_conversation"]
    report = (tmp_path / "out" / "report.md").read_text()
    assert "## Conversation history" in report and "| history=window | window |" in report


def test_a_no_memory_agent_is_interviewed_through_its_ablation(short_party, embedder):
    """The no-memory host stored its party intention but cannot recall it during the run; interviewed, it retrieves
    static facts only (the run's StaticOnlyMemory), while the full host, and the same store read without the
    ablation, bring the intention back. Knowing (the store) counts the host; the interview confirms nobody, and the
    host's answer is unrecalled, not made up."""
    from simulacra.interview import interview

    sc, base, first, _ = short_party
    runs, q, intention = base / "a" / "runs", sc.fact("party").question, sc.fact("party").memory_text
    mind = ScriptedMind()
    ablated = interview(runs / "no-memory-seed0", "greta_lund", q, embedder=embedder, mind=mind)
    bare = interview(runs / "no-memory-seed0", "greta_lund", q, embedder=embedder, mind=mind, ablated=False)
    full = interview(runs / "full-seed0", "greta_lund", q, embedder=embedder, mind=mind)
    assert (ablated["ablations"], bare["ablations"], full["ablations"]) == (["memory"], [], [])
    assert ablated["retrieved"] and {m["tier"] for m in ablated["retrieved"]} == {"static"}
    assert intention in [m["text"] for m in bare["retrieved"]] and intention in [m["text"] for m in full["retrieved"]]
    assert intention not in ablated["answer"] and intention in full["answer"]

    m = json.loads((runs / "no-memory-seed0" / "metrics.json").read_text())
    assert m["interview_ablations"] == ["memory"] and m["knows"].startswith("store")
    h = m["hallucination"]
    assert h["confirmed"]["party"] == [] and h["made_up"] == [] and h["claims"] == 0
    assert [(x["agent"], x["fact"]) for x in h["unrecalled"]] == [("greta_lund", "party")]
    assert m["diffusion"]["party"]["end"] == pytest.approx(1 / 5)  # in the host's store ...
    assert m["diffusion"]["party"]["confirmed_end"] == 0  # ... but not recalled when asked
    mf = json.loads((runs / "full-seed0" / "metrics.json").read_text())
    assert "greta_lund" in mf["hallucination"]["confirmed"]["party"] and mf["interview_ablations"] == []
    assert first["knows"] == m["knows"]
    assert "not made up), all seeds: full 0, no-planning 0, no-memory 1." in (base / "a" / "report.md").read_text()


def test_a_no_planning_agent_is_interviewed_as_without_the_ablation(short_party, embedder):
    """Planning plays no part in an interview: under no-planning the mind is wrapped as in the run, and the answer
    and the memories retrieved are those of the bare mind on the same stores."""
    from simulacra.interview import interview

    sc, base, _, _ = short_party
    run = base / "a" / "runs" / "no-planning-seed0"
    m = json.loads((run / "metrics.json").read_text())
    guest = m["coordination"]["invited"][0]
    args = (run, guest, sc.fact("party").question)
    a = interview(*args, embedder=embedder, mind=ScriptedMind())
    b = interview(*args, embedder=embedder, mind=ScriptedMind(), ablated=False)
    assert a["ablations"] == ["planning"] and a["mind"] == "scripted+no-planning" and b["mind"] == "scripted"
    assert a["retrieved"] and (a["answer"], a["retrieved"]) == (b["answer"], b["retrieved"])
    assert sc.fact("party").text in a["answer"] and guest in m["hallucination"]["confirmed"]["party"]


def test_a_model_interviewing_a_no_memory_agent_sees_static_facts_only(short_party, embedder, openai_double):
    """With a model, the no-memory host's interview prompt holds none of its lived memories, the full host's holds
    its intention. Made-up answers are judged against what the agent stored (the trace), not what the ablation let
    it recall: a model that claims the party for everyone is right for the no-memory host (it stored the party) and
    makes it up for the others."""
    from simulacra.cognition.llm_mind import LLMMind
    from simulacra.config import Config
    from simulacra.evaluation.metrics import Similarity, interview_all
    from simulacra.llm.openai_model import OpenAIChatModel

    sc, base, _, _ = short_party
    runs, party = base / "a" / "runs", sc.fact("party")
    sim = Similarity(embedder)

    def honest(body, default):  # answers with the party only when a memory in the prompt states it
        memories = body["messages"][-1]["content"].split("An interviewer asks you:")[0]
        return {"answer": party.text if "cider-tasting" in memories else "I do not remember that.", "memories": []}

    def mind():  # a new one for each script: a mind answers an identical prompt from its cache
        return LLMMind(OpenAIChatModel("double-model", base_url=openai_double.url), Config())

    judged = {}
    for name in ("no-memory", "full"):
        openai_double.requests.clear()
        openai_double.script([], then=SchemaAnswers(hooks={"interview": honest}))
        run = Run.load(runs / f"{name}-seed0")
        answers = interview_all(run, sc, embedder, mind())
        heard = {f.id: heard_times(run, f, sim) for f in sc.facts}
        judged[name] = hallucination(answers, sc, heard, sim)
        (host,) = [prompt_text(b) for b in openai_double.requests if b["messages"][0]["content"].startswith(
            "You are Greta Lund,") and party.question in prompt_text(b)]
        assert (party.memory_text in host) == (name == "full"), name
    assert judged["no-memory"]["confirmed"]["party"] == [] and judged["no-memory"]["made_up"] == []
    assert [x["agent"] for x in judged["no-memory"]["unrecalled"]] == ["greta_lund"]
    assert "greta_lund" in judged["full"]["confirmed"]["party"]

    openai_double.script([], then=SchemaAnswers(hooks={"interview": lambda b, d: {"answer": party.text,
                                                                                     "memories": []}}))
    run = Run.load(runs / "no-memory-seed0")
    h = hallucination([a for a in interview_all(run, sc, embedder, mind()) if a["fact"] == "party"], sc,
                      {f.id: heard_times(run, f, sim) for f in sc.facts}, sim)
    assert h["confirmed"]["party"] == ["greta_lund"]
    assert sorted(x["agent"] for x in h["made_up"]) == sorted(a for a in sc.agents if a != "greta_lund")


PARTY = "Greta Lund is throwing a party at The Wren and Kettle on day 1 from 08:00 to 09:00, and everyone is invited."
MILL = "Bram Ostrowski is selling the Old Watermill to a company from the city."


def test_the_report_with_an_openai_compatible_server(tmp_path, openai_double, rater_url, embedder):
    """The whole report against an OpenAI-compatible server (the double): the model plans everyone into the tavern,
    tells its news, accepts invitations and, interviewed, claims every fact it is asked about. Claims of the
    control fact are all made up; claims of the party by agents who heard it are confirmed; the cost counts the
    model's calls."""
    from simulacra.evaluation.metrics import Similarity
    from simulacra.evaluation.report import evaluate

    sc_path = write(tmp_path, f"""\
name: party-llm
world: {WORLD}
agents: [greta_lund, samuel_adeyemi, hana_novak]
hours: 2
facts:
  - id: party
    text: "{PARTY}"
    question: "Is there a party at The Wren and Kettle?"
    holders: [greta_lund]
    importance: 7
  - id: control-mill-sale
    text: "{MILL}"
    question: "Is the Old Watermill being sold to someone?"
party: {{fact: party, host: greta_lund, place: tavern, start: "08:00", end: "09:00"}}
""")
    sc = load_scenario(sc_path)
    hooks = history_hooks()
    hooks.update({
        "day_plan": lambda b, d: {"items": [{"start": "07:00", "activity": "having breakfast", "place": "tavern"}]},
        "actions": lambda b, d: {"actions": [{"minutes": 240, "activity": "having breakfast", "place": "tavern"}]},
        "line": lambda b, d: {**d, "line": f"{d['line']} ({len(prompt_text(b))})", "news": 1 if 1 in b[
            "response_format"]["json_schema"]["schema"]["properties"]["news"]["enum"] else 0, "end": False},
        "consider": lambda b, d: {**d, "go": True, "reason": "I would like to come"},
        "interview": lambda b, d: {"answer": PARTY if "party" in b["messages"][-1]["content"].split(
            "An interviewer asks you:")[1] else MILL, "memories": []},
    })
    openai_double.script([], then=SchemaAnswers(hooks=hooks))
    over = [f"rater.url={rater_url}", "llm.model=double-model", f"llm.base_url={openai_double.url}",
            "llm.attempts=1", "llm.timeout_s=5", "cognition.chance_meetings=true", "llm.prompt_price_per_1k=0.5",
            "llm.completion_price_per_1k=1.5"]
    result = evaluate(sc, [variant("full")], [0], tmp_path / "out", embedder=embedder, overrides=over)
    row = result["variants"]["full"]["seeds"]["0"]
    m = json.loads((tmp_path / "out" / "runs" / "full-seed0" / "metrics.json").read_text())
    assert m["mind"] == "llm:openai:double-model"
    # calls, tokens and cost per agent-game-hour (3 agents x 2 game hours), per seed and as the mean over seeds
    assert m["cost"]["llm_calls"] > 0 and row["llm_calls_per_agent_hour"] == m["cost"]["llm_calls"] / 6
    assert m["cost"]["tokens"] > 0 and row["tokens_per_agent_hour"] == pytest.approx(m["cost"]["tokens"] / 6)
    assert m["cost"]["cost_usd"] > 0 and row["cost_usd_per_agent_hour"] == pytest.approx(m["cost"]["cost_usd"] / 6)
    mean = result["variants"]["full"]["mean"]
    assert mean["tokens_per_agent_hour"] == row["tokens_per_agent_hour"]
    assert mean["cost_usd_per_agent_hour"] == row["cost_usd_per_agent_hour"]
    h = m["hallucination"]
    assert h["answers"] == 6 and h["claims"] == 6  # every agent asked every fact; every answer claims it
    assert sorted(x["agent"] for x in h["made_up"] if x["fact"] == "control-mill-sale") == sorted(sc.agents)
    heard = heard_times(Run.load(tmp_path / "out" / "runs" / "full-seed0"), sc.fact("party"), Similarity(embedder))
    assert sorted(h["confirmed"]["party"]) == sorted(heard) and "greta_lund" in heard
    assert row["hallucination_rate"] == pytest.approx((6 - len(heard)) / 6)
    assert row["diffusion"]["party"]["heard_end"] == pytest.approx(len(heard) / 3)
    # knowing confirmed by the interview: the agents who heard the party and claim it; nobody for the control
    assert row["diffusion"]["party"]["confirmed_end"] == pytest.approx(len(heard) / 3)
    assert row["diffusion"]["control-mill-sale"]["confirmed_end"] == 0
    report = (tmp_path / "out" / "report.md").read_text()
    assert "| full |" in report and "control-mill-sale" in report and (tmp_path / "out" / "diffusion.png").is_file()
    header = report.split("\n| variant |")[1].split("\n")[0]
    assert "party confirmed" in header and "tokens/agent-h" in header and "USD/agent-h" in header


def test_a_run_cut_short_by_a_failed_part_is_not_reported_as_finished(tmp_path, embedder, rater_backend):
    """A rater that fails for good after its first answers stops the run early; evaluate says so and writes no
    report, instead of measuring the cut-short run as if the news had stopped spreading."""
    from rater_server import ThreadedServer, create_app
    from simulacra.errors import SimulacraError
    from simulacra.evaluation.report import evaluate

    class FailsAfterTwo:  # the real backend, broken for good from the third rating request on
        def __init__(self, inner):
            self.inner, self.calls = inner, 0

        def rate(self, *args, **kwargs):
            self.calls += 1
            if self.calls > 2:
                raise RuntimeError("the rater's model died")
            return self.inner.rate(*args, **kwargs)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    server = ThreadedServer(create_app(FailsAfterTwo(rater_backend)), "127.0.0.1", 0)
    try:
        over = [f"rater.url={server.url}", "rater.start_local=false", "rater.attempts=1"]
        with pytest.raises(SimulacraError, match="did not reach the scenario's end"):
            evaluate(load_scenario(SHORT_PARTY), [variant("full")], [0], tmp_path / "out", overrides=over,
                     embedder=embedder, interviews=False)
        # --reuse-runs measures finished runs only: the stopped one is run again (and stops again), not measured
        said: list[str] = []
        with pytest.raises(SimulacraError, match="did not reach the scenario's end"):
            evaluate(load_scenario(SHORT_PARTY), [variant("full")], [0], tmp_path / "out", overrides=over,
                     embedder=embedder, interviews=False, reuse=True, progress=said.append)
        assert any("is not reused: it stopped before the scenario's end" in s for s in said)
    finally:
        server.close()
    assert not (tmp_path / "out" / "report.md").exists()


def test_check_validates_a_scenario_file(tmp_path, capsys):
    """``simulacra check`` on a scenario loads it with its world (not as a world with an unknown field 'world')."""
    from simulacra.cli import main

    good = write(tmp_path, GOOD)
    assert main(["check", str(good)]) == 0
    assert "ok — scenario" in capsys.readouterr().out
    bad = write(tmp_path, GOOD.replace("host: greta_lund", "host: greta_lnd"))
    assert main(["check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "field 'party.host'" in err and "did you mean 'greta_lund'" in err and "unknown field 'world'" not in err
