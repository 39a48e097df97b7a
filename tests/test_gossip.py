"""The scripted mind's gossip rule (``simulation.gossip``): ``tell-all`` (every run recorded before the setting)
and ``graded`` (a chance per news item and listener), its keyed draws, and what it does to a real run: slower
word of mouth, the same trace for the same seed, the same trace after a kill and a resume."""

from __future__ import annotations

import json
import signal

import pytest

from simulacra.cognition.mind import AgentView, ConversationView, NewsItem, Utterance
from simulacra.cognition.scripted import GossipRule, ScriptedMind, keyed_uniform, news_candidates
from simulacra.config import PREDATED, Config, load_config, recorded_config
from simulacra.memory.records import MemoryRecord
from simulacra.persona import load_persona
from simulacra.text import at_place
from tests.conftest import DATA, ROOT, TELL_ALL
from tests.test_resume import SETTINGS, TICKS, cli, tick_lines

GRADED = GossipRule("graded", seed=0, base=0.8, importance_exponent=1.0, retell_decay=0.6, stranger=0.3,
                    closeness_conversations=2.0)


# --------------------------------------------------------------------------- the rule, as a pure function
def test_tell_all_always_tells_and_is_what_an_old_header_reads_as():
    assert GossipRule().rule == Config().simulation.gossip == "graded"  # the default
    rule = GossipRule("tell-all")
    assert rule.chance(1, 50, False, 0) == 1.0
    assert PREDATED["simulation"]["gossip"] == "tell-all"
    old = Config().to_dict()
    del old["simulation"]["gossip"]
    assert recorded_config(old)["simulation"]["gossip"] == "tell-all"
    new = Config().to_dict()
    new["simulation"]["gossip"] = "graded"
    assert recorded_config(new)["simulation"]["gossip"] == "graded"  # a recorded setting is kept


def test_the_graded_chance_is_the_documented_product():
    # base 0.8 * (7/10) * (0.3 + 0.7 * 1) * 0.6**0 for a relation
    assert GRADED.chance(7, 0, True, 0) == pytest.approx(0.8 * 0.7)
    # a stranger: closeness 0, the stranger factor only; two past conversations: halfway (closeness 0.5)
    assert GRADED.chance(7, 0, False, 0) == pytest.approx(0.8 * 0.7 * 0.3)
    assert GRADED.chance(7, 0, False, 2) == pytest.approx(0.8 * 0.7 * (0.3 + 0.7 * 0.5))
    # each resident it was already exchanged with multiplies by the decay
    assert GRADED.chance(7, 3, True, 0) == pytest.approx(0.8 * 0.7 * 0.6 ** 3)
    assert GRADED.chance(10, 0, True, 0) == pytest.approx(0.8)  # base: the best news, fresh, to a relation


def test_the_graded_chance_moves_with_each_parameter_as_documented():
    rated = [GRADED.chance(r, 1, False, 1) for r in range(1, 11)]
    assert rated == sorted(rated) and rated[0] < rated[-1]  # rises with importance
    retold = [GRADED.chance(7, n, True, 0) for n in range(6)]
    assert retold == sorted(retold, reverse=True) and retold[-1] < retold[0] / 10  # falls with the times told
    closer = [GRADED.chance(7, 0, False, k) for k in range(6)] + [GRADED.chance(7, 0, True, 0)]
    assert closer == sorted(closer) and closer[0] < closer[-1]  # rises with closeness, a relation the closest
    flat = GossipRule("graded", importance_exponent=0.0)
    assert flat.chance(1, 0, True, 0) == flat.chance(10, 0, True, 0) == pytest.approx(flat.base)
    tireless = GossipRule("graded", retell_decay=1.0)
    assert tireless.chance(7, 9, True, 0) == tireless.chance(7, 0, True, 0)
    warm = GossipRule("graded", stranger=1.0)
    assert warm.chance(7, 0, False, 0) == warm.chance(7, 0, True, 0)
    assert GossipRule("graded", base=0.0).chance(10, 0, True, 0) == 0.0
    assert GossipRule("graded", base=1.0, retell_decay=0.0).chance(10, 1, True, 0) == 0.0


def test_the_draw_is_keyed_not_a_stream():
    a = keyed_uniform(3, "gossip", "ann", "ben", "news", 480)
    assert a == keyed_uniform(3, "gossip", "ann", "ben", "news", 480)  # whatever came before it
    assert a != keyed_uniform(4, "gossip", "ann", "ben", "news", 480)
    assert a != keyed_uniform(3, "gossip", "ben", "ann", "news", 480)
    assert a != keyed_uniform(3, "gossip", "ann", "ben", "news", 490)
    draws = [keyed_uniform(0, "gossip", "a", "b", "t", m) for m in range(4000)]
    assert all(0 <= d < 1 for d in draws)
    assert sum(draws) / len(draws) == pytest.approx(0.5, abs=0.02)
    # so a chance p is met on about a share p of the draws
    told = sum(d < 0.3 for d in draws) / len(draws)
    assert told == pytest.approx(0.3, abs=0.03)


def test_news_candidates_count_the_speakers_exchanges():
    rec = MemoryRecord("m1", "Ann saw the well's rope snap.", "event", rating=8, timestamp=480, tick=1,
                       extra={"topic": "The well's rope snapped.", "source": "seen"})
    items = news_candidates([(rec, 0.8)], [], "cal", "Cal Crane", set(), 4, {"The well's rope snapped.": 2})
    assert [(n.topic, n.exchanged) for n in items] == [("The well's rope snapped.", 2)]
    assert news_candidates([(rec, 0.8)], [], "cal", "Cal Crane", set(), 4)[0].exchanged == 0


# --------------------------------------------------------------------------- the mind
def speak(mind: ScriptedMind, news: list[NewsItem], now: int, conversations: int = 0) -> str | None:
    """The topic Ann tells Cal in her first line after his greeting (``None``: none)."""
    persona = load_persona(DATA / "personas" / "ann.json")
    names = {"ann": persona.name, "ben": "Ben Baker", "cal": "Cal Crane"}
    view = AgentView("ann", persona, now, "well", (), names, {"well": "The Old Well"})
    c = ConversationView("ann", "cal", "well", 1, 4, [("cal", Utterance("Hello, Ann!"))], news, set(),
                         conversations > 0, "drawing water", conversations=conversations)
    return mind.next_line(view, c).value.topic


def test_with_nothing_to_tell_the_speaker_says_what_it_was_doing_to_the_listener_as_you():
    persona = load_persona(DATA / "personas" / "ann.json")
    names = {"ann": persona.name, "cal": "Cal Crane"}
    view = AgentView("ann", persona, 480, "well", (), names, {"well": "The Old Well"})

    def line(activity: str) -> str:
        c = ConversationView("ann", "cal", "well", 1, 4, [("cal", Utterance("Hello, Ann!"))], [], set(), True,
                             activity)
        return ScriptedMind().next_line(view, c).value.text

    assert line("having breakfast with Cal") == "We have been having breakfast together."  # done with the listener
    assert line("writing to Cal") == "I have been writing to you."
    assert line("mending Cal Crane's fence with Ben") == "I have been mending your fence with Ben."
    assert line("drawing water with Calla") == "I have been drawing water with Calla."  # a whole word only


def test_an_activity_that_names_its_place_is_not_placed_twice():
    assert at_place("working at Hobbs Cafe", "Hobbs Cafe") == "working at Hobbs Cafe"
    assert at_place("fishing at willow bend", "Willow Bend") == "fishing at willow bend"
    assert at_place("drawing water", "The Old Well") == "drawing water at The Old Well"
    from simulacra.world.model import load_world
    from simulacra.world.perception import perceive

    world = load_world(DATA / "tiny.yaml", DATA / "personas")
    place = next(iter(world.places))
    name = world.places[place].name
    seen = perceive("ann", place, world, {"ann": place, "ben": place}, {"ben": f"sweeping {name}"}, {}, [], [],
                    {"ann": "Ann", "ben": "Ben Baker"}, set(), 10)
    assert f"Ben Baker is sweeping {name}." in [p.text for p in seen]


def test_the_scripted_mind_tells_by_its_rule():
    news = [NewsItem(f"news {i}", 6, "seen", f"m{i}", exchanged=1) for i in range(3)]
    assert speak(ScriptedMind(gossip=GossipRule("tell-all")), news, 480) == "news 0"  # tell-all: the best, always
    never = ScriptedMind(gossip=GossipRule("graded", base=0.0))
    assert all(speak(never, news, m) is None for m in range(480, 600, 10))
    graded = ScriptedMind(gossip=GRADED)
    said = [speak(graded, news, m) for m in range(480, 2880, 10)]
    assert said == [speak(graded, news, m) for m in range(480, 2880, 10)]  # the same draws again
    # chance per item 0.8 * 0.6 * 0.3 * 0.6 = 0.0864; it tells the first of the three items that passes
    share = sum(s is not None for s in said) / len(said)
    assert share == pytest.approx(1 - (1 - 0.0864) ** 3, abs=0.05)
    assert {s for s in said if s} == {"news 0", "news 1", "news 2"}  # a declined best item lets the next through
    # closer listeners hear more
    close = [speak(graded, news, m, conversations=6) for m in range(480, 2880, 10)]
    assert sum(s is not None for s in close) > sum(s is not None for s in said)


# --------------------------------------------------------------------------- real runs
def run_args(name, *settings):
    args = ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--ticks", str(TICKS),
            "--run-name", name]
    for s in [*SETTINGS, *settings]:
        args += ["--set", s]
    return args


#: graded with every news item told for sure by whoever holds it first (importance and closeness left out) and never
#: again after (retell decay 0): in the tiny town Ann tells Ben of the well, and Ben, who heard it, tells nobody
FIRST_ONLY = ("simulation.gossip=graded", "simulation.gossip_base=1.0", "simulation.gossip_importance_exponent=0",
              "simulation.gossip_retell_decay=0")
#: graded with a real coin for retelling: a resident who heard the news passes it on with chance 0.5
COIN = ("simulation.gossip=graded", "simulation.gossip_base=1.0", "simulation.gossip_importance_exponent=0",
        "simulation.gossip_retell_decay=0.5")


@pytest.fixture(scope="module")
def tiny_runs(tmp_path_factory, rater_url):
    db = tmp_path_factory.mktemp("gossip")
    for name, settings in (("all", (TELL_ALL,)), ("first", FIRST_ONLY), ("coin", COIN), ("coin2", COIN)):
        r = cli(db, rater_url, *run_args(name, *settings))
        assert r.returncode == 0, r.stderr
    return db


def told_pairs(run_dir):
    """(speaker, listener, topic) of every line that tells news, in order."""
    out = []
    for line in tick_lines(run_dir):
        if line:
            for c in json.loads(line).get("conversations", []):
                out += [(ln["speaker"], ln["listener"], ln["topic"]) for ln in c["lines"] if ln.get("topic")]
    return out


def test_graded_gossip_stops_retelling_where_tell_all_passes_news_on(tiny_runs):
    everything, first = told_pairs(tiny_runs / "all"), told_pairs(tiny_runs / "first")
    # tell-all: Ann tells Ben, Ben tells Cal (the news passing of tests/test_simulation.py)
    assert [(a, b) for a, b, _ in everything][:2] == [("ann", "ben"), ("ben", "cal")]
    # the first holder tells (chance 1), nobody who heard it does (chance 0 after one exchange)
    assert first and {a for a, _, _ in first} == {"ann"}
    assert len(first) < len(everything)
    header = json.loads((tiny_runs / "first" / "trace.jsonl").read_text().split("\n", 1)[0])
    assert header["config"]["simulation"]["gossip"] == "graded"
    assert json.loads((tiny_runs / "all" / "trace.jsonl").read_text().split("\n", 1)[0])[
        "config"]["simulation"]["gossip"] == "tell-all"


def test_graded_gossip_is_deterministic_and_resumes_to_the_same_trace(tiny_runs, tmp_path, rater_url):
    assert tick_lines(tiny_runs / "coin") == tick_lines(tiny_runs / "coin2")  # same seed, same trace
    # killed after the first telling; the resumed run reads how often news was exchanged from the checkpoint
    run_dir = tmp_path / "k"
    r = cli(tmp_path, rater_url, *run_args("k", *COIN), kill_at="tick=5:phase=persist")
    assert r.returncode == -signal.SIGKILL, r.stderr[-2000:]
    r = cli(tmp_path, rater_url, "--resume", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert tick_lines(run_dir) == tick_lines(tiny_runs / "coin")


def test_on_a_real_scenario_fewer_know_the_party_under_graded_gossip(tmp_path, embedder, rater_url):
    """The short party (5 residents, 07:00-12:30), seed 0, the default graded parameters against tell-all."""
    from simulacra.evaluation.report import evaluate
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.variants import variant

    sc = load_scenario(ROOT / "scenarios" / "fernhollow-party-short.yaml")
    out = evaluate(sc, [variant("gossip=tell-all"), variant("gossip=graded")], [0], tmp_path / "e",
                   overrides=[f"rater.url={rater_url}"], embedder=embedder, interviews=False)
    rows = {v: out["variants"][v]["seeds"]["0"] for v in ("gossip=tell-all", "gossip=graded")}
    assert rows["gossip=tell-all"]["diffusion"]["party"]["end"] == 1.0  # word of mouth saturates the town
    assert rows["gossip=tell-all"]["diffusion"]["party"]["start"] == rows["gossip=graded"]["diffusion"]["party"][
        "start"] == pytest.approx(1 / 5)
    assert rows["gossip=graded"]["diffusion"]["party"]["end"] < 1.0
    assert rows["gossip=graded"]["invited"] < rows["gossip=tell-all"]["invited"]


def test_the_tell_all_preset_selects_the_old_rule():
    from simulacra.presets import preset_path

    cfg = load_config(preset_path("tell-all"))
    assert cfg.simulation.gossip == "tell-all"
    assert GossipRule.from_config(cfg.simulation).rule == "tell-all"
    assert load_config(ROOT / "presets" / "tell-all.yaml") == cfg
