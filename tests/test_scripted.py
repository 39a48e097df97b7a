"""The scripted mind's words (simulacra.cognition.scripted): who told whom in a conversation's summary, what each had
been doing when no news was told, activities said in the first person and as shared, the greeting decided by what
the speaker retrieved about the listener; and the verb an object's name takes in what agents perceive."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from simulacra.cognition.mind import AgentView, ConversationView, NewsItem, Utterance, converse_line_by_line
from simulacra.cognition.scripted import GossipRule, ScriptedMind, activity_line
from simulacra.memory.records import RetrievedMemory
from simulacra.persona import load_persona
from simulacra.text import PRONOUN_SETS, be_for
from simulacra.world.generate import WORK_KINDS
from simulacra.world.perception import perceive
from tests.conftest import DATA, ROOT

PERSONAS = ROOT / "simulacra" / "assets" / "agent_personalities"
NAMES = {"ann": "Ann Archer", "ben": "Ben Brook", "cal": "Cal Crane"}
PLACES = {"well": "The Old Well"}


def views_and_convs(activities: dict[str, str], news: dict[str, list[NewsItem]] | None = None, opener: str = "ann",
                    other: str = "ben", acquainted: bool = True):
    views = {me: AgentView(me, load_persona(DATA / "personas" / f"{me}.json"), 480, "well", (), NAMES, PLACES)
             for me in (opener, other)}
    convs = {me: ConversationView(me, you, "well", 0, 6, [], (news or {}).get(me, []), set(), acquainted,
                                  activities[me], listener_activity=activities[you])
             for me, you in ((opener, other), (other, opener))}
    return views, convs


def summary(lines: list[tuple[str, Utterance]], activities: dict[str, str]) -> str:
    views, convs = views_and_convs(activities)
    convs["ann"].lines = lines
    return ScriptedMind().summarise_conversation(views["ann"], convs["ann"]).value


# --------------------------------------------------------------------------- the summary
def test_the_summary_says_who_told_whom_each_speakers_topics_in_the_order_told():
    lines = [("ann", Utterance("Hello, Ben! Did you hear? The well's rope snapped.", "The well's rope snapped.")),
             ("ben", Utterance("Really? I had not heard. I heard from Cal Crane: the mill is shut",
                               "the mill is shut")),
             ("ann", Utterance("Really? I had not heard. Let me tell you: a fair on Sunday", "a fair on Sunday")),
             ("ben", Utterance("I should get back to it. Goodbye, Ann.", None, True))]
    assert summary(lines, {"ann": "drawing water", "ben": "sweeping the shop"}) == (
        "Ann Archer talked with Ben Brook at The Old Well. "
        "Ann Archer told Ben Brook: The well's rope snapped; a fair on Sunday. "
        "Ben Brook told Ann Archer: the mill is shut.")  # news told: no small talk


def test_the_listener_told_first_comes_first():
    lines = [("ann", Utterance("Hello, Ben! I have been drawing water.")),
             ("ben", Utterance("Did you hear? The well's rope snapped.", "The well's rope snapped."))]
    assert summary(lines, {"ann": "drawing water", "ben": "sweeping the shop"}) == (
        "Ann Archer talked with Ben Brook at The Old Well. Ben Brook told Ann Archer: The well's rope snapped.")


def test_with_no_news_the_summary_says_what_each_said_it_had_been_doing():
    doing = {"ann": "mending her coat", "ben": "sweeping the shop"}
    both = [("ann", Utterance("Hello, Ben! I have been mending my coat.")),
            ("ben", Utterance("I have been sweeping the shop.", None, True))]
    assert summary(both, doing) == ("Ann Archer talked with Ben Brook at The Old Well. Ann Archer had been mending "
                                    "her coat; Ben Brook had been sweeping the shop.")  # in the persona's words
    # only what was said: Ben took leave without saying it (a model's line, say)
    one = [both[0], ("ben", Utterance("Good to see you. Goodbye, Ann.", None, True))]
    assert summary(one, doing) == ("Ann Archer talked with Ben Brook at The Old Well. Ann Archer had been mending "
                                   "her coat.")
    assert summary(both, {"ann": "mending her coat", "ben": ""}) == (  # the listener's activity unknown
        "Ann Archer talked with Ben Brook at The Old Well. Ann Archer had been mending her coat.")
    assert summary([("ann", Utterance("Hello, Ben!")), ("ben", Utterance("Goodbye, Ann.", None, True))], doing) == (
        "Ann Archer talked with Ben Brook at The Old Well.")
    assert "nothing in particular" not in summary(both, doing)


def test_a_held_conversation_is_summarised_from_its_lines():
    news = {"ann": [NewsItem("The well's rope snapped.", 8, "seen", "m1")],
            "ben": [NewsItem("Candles are dear this week.", 6, "own", "m2")]}
    views, convs = views_and_convs({"ann": "drawing water", "ben": "sweeping the shop"}, news)
    mind = ScriptedMind(gossip=GossipRule("tell-all"))
    lines, _ = converse_line_by_line(mind.next_line, views, convs, "ann", "ben")
    assert [u.topic for _, u in lines][:2] == ["The well's rope snapped.", "Candles are dear this week."]
    for me in ("ann", "ben"):  # either side's view of the finished conversation gives the one summary both keep
        assert mind.summarise_conversation(views[me], convs["ann"]).value == (
            "Ann Archer talked with Ben Brook at The Old Well. Ann Archer told Ben Brook: The well's rope snapped. "
            "Ben Brook told Ann Archer: Candles are dear this week.")
    quiet_views, quiet = views_and_convs({"ann": "drawing water", "ben": "sweeping the shop"})
    converse_line_by_line(mind.next_line, quiet_views, quiet, "ann", "ben")
    assert mind.summarise_conversation(quiet_views["ann"], quiet["ann"]).value == (
        "Ann Archer talked with Ben Brook at The Old Well. Ann Archer had been drawing water; Ben Brook had been "
        "sweeping the shop.")


def test_news_that_names_the_teller_is_told_in_its_first_person():
    """The scripted mind tells news about itself as its own ("burns my forearm; I plunge my arm"), whether it saw it
    or heard it; news about someone else, and its own intentions, as written."""
    kofi = load_persona(PERSONAS / "kofi_mensah.json")
    names = {"kofi_mensah": kofi.name, "bram_ostrowski": "Bram Ostrowski", "hana_novak": "Hana Novak"}
    burn = ("At the forge, a red-hot iron bar slips from the tongs and burns the blacksmith's forearm; he plunges his "
            "arm into the water trough and grits his teeth.")
    mine = ("At the forge, a red-hot iron bar slips from the tongs and burns my forearm; I plunge my arm into the "
            "water trough and grit my teeth.")
    heard_of_me = "The miller says that Kofi Mensah shoes his horses badly."

    def told(item: NewsItem) -> str:
        view = AgentView("kofi_mensah", kofi, 700, "forge", (), names, {"forge": "The Forge"})
        c = ConversationView("kofi_mensah", "bram_ostrowski", "forge", 1, 6, [("bram_ostrowski", Utterance("Hi."))],
                             [item], set(), True, "working at the forge")
        return ScriptedMind(gossip=GossipRule("tell-all")).next_line(view, c).value.text

    assert told(NewsItem(burn, 6, "seen", "m1")) == f"Did you hear? {mine}"
    assert told(NewsItem(heard_of_me, 5, "hana_novak", "m2")) == (
        "I heard from Hana Novak: The miller says that I shoe my horses badly.")
    assert told(NewsItem("The mill wheel stopped.", 5, "seen", "m3")) == "Did you hear? The mill wheel stopped."
    assert told(NewsItem("Kofi Mensah hosts a supper.", 5, "own", "m4")) == (
        "Let me tell you: Kofi Mensah hosts a supper.")


# --------------------------------------------------------------------------- activities in the first person
def said(persona_file: str, activity: str, listener: str = "Nobody Else") -> str:
    return activity_line(activity, load_persona(PERSONAS / persona_file), listener)


def test_an_activity_is_said_with_the_speakers_own_pronouns_in_the_first_person():
    assert said("ruth_calloway.json", "setting up and running her fruit stall at the market") == (
        "I have been setting up and running my fruit stall at the market.")
    assert said("kofi_mensah.json", "writing a letter to his mother") == "I have been writing a letter to my mother."
    assert said("bram_ostrowski.json", "cooking supper for himself and Ezra") == (
        "I have been cooking supper for myself and Ezra.")
    # someone else's pronoun stays: a man's "her" is not his
    assert said("yusuf_demir.json", "helping Hana with her homework") == "I have been helping Hana with her homework."
    assert said("ruth_calloway.json", "helping Bram with his cart") == "I have been helping Bram with his cart."
    # "her" as an object: "me"
    assert said("ruth_calloway.json", "waiting for Hana to pick her up") == (
        "I have been waiting for Hana to pick me up.")
    # no pronoun inferred from the background: the text as written
    week_ann = load_persona(DATA / "week" / "personas" / "ann.json")
    assert week_ann.pronouns is None
    assert activity_line("visiting her cousin at the shop", week_ann, "Cal Crane") == (
        "I have been visiting her cousin at the shop.")


def test_the_scripted_line_says_it_in_the_first_person():
    ruth = load_persona(PERSONAS / "ruth_calloway.json")
    names = {"ruth_calloway": ruth.name, "yusuf_demir": "Yusuf Demir"}
    view = AgentView("ruth_calloway", ruth, 480, "square", (), names, {"square": "Fernhollow Square"})
    c = ConversationView("ruth_calloway", "yusuf_demir", "square", 1, 4, [("yusuf_demir", Utterance("Hello, Ruth!"))],
                         [], set(), True, "packing up her stall")
    assert ScriptedMind().next_line(view, c).value.text == "I have been packing up my stall."


def test_an_activity_with_the_listener_is_said_as_shared():
    assert said("leila_haddad.json", "having breakfast with Yusuf", "Yusuf Demir") == (
        "We have been having breakfast together.")
    assert said("ines_caldera.json", "eating lunch with Rafael at the smokehouse", "Rafael Caldera") == (
        "We have been eating lunch together at the smokehouse.")
    assert said("lars_brekke.json", "eating lunch with Noor and Samir", "Samir Farouk") == (
        "We have been eating lunch with Noor.")
    assert said("lars_brekke.json", "eating lunch with Noor and Samir", "Noor Farouk") == (
        "We have been eating lunch with Samir.")
    assert said("noor_farouk.json", "eating lunch with her father and Lars", "Lars Brekke") == (
        "We have been eating lunch with my father.")
    # not done with the listener: "you" where it was named, "your" for a possessive
    assert said("yusuf_demir.json", "walking out to Calloway Farm with Ruth's letters", "Ruth Calloway") == (
        "I have been walking out to Calloway Farm with your letters.")
    assert said("wilf_hardy.json", "visiting his sister Agnes at Cliff Terrace", "Agnes Penrose") == (
        "I have been visiting you at Cliff Terrace.")
    assert said("leila_haddad.json", "having breakfast with Yusuf", "Ruth Calloway") == (
        "I have been having breakfast with Yusuf.")


#: the pronoun set each shipped persona's background gives (None: no clear majority, the text is left as written)
EXPECTED_PRONOUNS = {
    "ada_wrobel": "she", "agnes_penrose": "she", "aoife_moor": "she", "bram_ostrowski": "he", "carys_pryce": "she",
    "declan_moor": "he", "dev_raman": "he", "elin_quist": "she", "ezra_pike": "he", "finn_moor": "he",
    "grace_okafor": "she", "greta_lund": "she", "hana_novak": "she", "helen_achebe": "she", "ines_caldera": "she",
    "kofi_mensah": "he", "kuba_wrobel": "he", "lars_brekke": "he", "leila_haddad": "she", "lucia_caldera": "she",
    "marit_quist": "she", "mina_sato": "she", "noor_farouk": "she", "owen_pryce": "he", "pavel_sokol": "he",
    "rafael_caldera": "he", "ruth_calloway": "she", "samir_farouk": "he", "samuel_adeyemi": "he",
    "solveig_brekke": "she", "tam_mcleod": "he", "tobias_novak": "he", "tomasz_wrobel": "he", "wilf_hardy": "he",
    "yusuf_demir": "he",
}


@pytest.mark.parametrize("path", sorted(PERSONAS.glob("*.json")), ids=lambda p: p.stem)
def test_every_shipped_persona_says_its_routine_in_the_first_person(path: Path):
    persona = load_persona(path)
    assert persona.pronouns == EXPECTED_PRONOUNS[persona.id]
    if persona.pronouns is None:
        return
    own = set(PRONOUN_SETS[persona.pronouns]) - {persona.pronouns}  # the subject form would need another verb
    for entry in [*persona.routine, *(persona.rest_day_routine or ())]:
        line = activity_line(entry.activity, persona, "Nobody Else")
        assert not own & set(re.findall(r"[a-z]+", line.casefold())), line


def test_the_test_personas_infer_no_pronoun_or_their_own():
    assert {p.stem: load_persona(p).pronouns for p in sorted((DATA / "personas").glob("*.json"))} == {
        "ann": None, "ben": "he", "cal": None}


# --------------------------------------------------------------------------- the greeting
def memory(text: str) -> RetrievedMemory:
    return RetrievedMemory("m1", text, "long_term", "observation", 1.0, 0.5, 0.5, 1.0)


@pytest.mark.parametrize("texts, greeting", [
    ((), "Hello, I'm Ann."),  # never met, not related, nothing recalled: an introduction
    (("Cal Crane is drawing water at The Old Well.",), "Hello, Cal!"),  # seen about the town
    (("Ben said Cal mends the church roof.",), "Hello, Cal!"),  # the first name as a word names him
    (("Calla sells eggs on Sundays.", "The well's rope snapped."), "Hello, I'm Ann."),  # no memory names him
])
def test_the_greeting_follows_what_the_speaker_retrieved_about_the_listener(texts, greeting):
    persona = load_persona(DATA / "personas" / "ann.json")
    assert "cal" not in persona.relationships
    view = AgentView("ann", persona, 480, "well", tuple(memory(t) for t in texts), NAMES, PLACES)
    c = ConversationView("ann", "cal", "well", 0, 4, [], [], set(), False, "drawing water")
    assert ScriptedMind().next_line(view, c).value.text.startswith(greeting + " ")


def test_acquaintance_or_a_relationship_is_enough_to_greet_by_name():
    persona = load_persona(DATA / "personas" / "ann.json")
    view = AgentView("ann", persona, 480, "well", (), NAMES, PLACES)
    met = ConversationView("ann", "cal", "well", 0, 4, [], [], set(), True, "drawing water")
    related = ConversationView("ann", "ben", "well", 0, 4, [], [], set(), False, "drawing water")
    assert ScriptedMind().next_line(view, met).value.text.startswith("Hello, Cal! ")
    assert ScriptedMind().next_line(view, related).value.text.startswith("Hello, Ben! ")


# --------------------------------------------------------------------------- objects
#: the object names of the shipped worlds, test worlds and generated towns that are plural
PLURAL_OBJECTS = {"beer taps", "brass scales", "ice bins", "mail sacks", "market stalls", "millstones",
                  "smoking kilns", "trawl nets"}


def object_names() -> set[str]:
    names = {name for kind in WORK_KINDS for _, name, _ in kind.objects}
    for path in [*(ROOT / "worlds").glob("*.yaml"), *DATA.glob("*.yaml"), *DATA.glob("*/*.yaml")]:
        try:
            world = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue  # a broken file of the validation tests
        if isinstance(world, dict) and isinstance(world.get("objects"), list):
            names |= {str(o["name"]) for o in world["objects"] if isinstance(o, dict) and "name" in o}
    return names


def test_every_object_name_takes_its_verb():
    names = object_names()
    assert PLURAL_OBJECTS <= names and "water wheel" in names and "ferry Puffin" in names
    assert {n: be_for(n) for n in names} == {n: "are" if n in PLURAL_OBJECTS else "is" for n in names}
    # the head noun before a postmodifier (imported towns' "<object> in <arena>"); singular nouns ending in "s"
    assert be_for("pupils' desks in the classroom") == "are" and be_for("bed in the main room") == "is"
    assert [be_for(n) for n in ("bus", "lens", "canvas", "glass", "mattress")] == ["is"] * 5
    assert [be_for(n) for n in ("shelves", "boxes", "scissors", "geese")] == ["are"] * 4


def test_an_object_is_perceived_with_the_verb_of_its_name():
    world = SimpleNamespace(places={"square": SimpleNamespace(name="Fernhollow Square")}, objects=[
        SimpleNamespace(id="stalls", place="square", name="market stalls"),
        SimpleNamespace(id="board", place="square", name="notice board")])
    seen = perceive("ann", "square", world, {"ann": "square"}, {}, {"stalls": "folded away", "board": "bare"}, [],
                    [], {"ann": "Ann Archer"}, set(), 10)
    assert [p.text for p in seen] == ["The market stalls at Fernhollow Square are folded away.",
                                      "The notice board at Fernhollow Square is bare."]


# --------------------------------------------------------------------------- what the offline reflector makes of them
def test_the_reflector_quotes_a_summary_past_its_frame_and_skips_its_template_words():
    from simulacra.rating.reflection import _quote, shared_words

    talk = ("Ruth Calloway talked with Ezra Pike at The Wren and Kettle. Ruth Calloway had been eating lunch at the "
            "tavern; Ezra Pike had been eating soup at the tavern.")
    assert _quote(talk) == ("Ruth Calloway talked with Ezra Pike at The Wren and Kettle. Ruth Calloway had been "
                            "eating lunch at the tavern...")
    assert _quote("Ruth Calloway talked with Ezra Pike at The Wren and Kettle.") == (
        "Ruth Calloway talked with Ezra Pike at The Wren and Kettle.")
    texts = [talk, "Ezra Pike talked with Bram Ostrowski at Mill House. We have been eating breakfast together.",
             'Bram Ostrowski said to Ezra Pike: "We have been eating breakfast together."']
    assert not {"talked", "together"} & {w.casefold() for w in shared_words(texts, limit=20)}
