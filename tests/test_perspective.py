"""Questions put in the third person before retrieval (memory.third_person_queries, simulacra.memory.perspective):
the rules, the setting, and what it changes in a real retrieval, an interview and tune."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from simulacra.config import EmbeddingConfig, MemoryConfig, config_from_dict, load_config, recorded_config
from simulacra.memory.perspective import third_person
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.stream import AgentMemory
from simulacra.presets import preset_path

ANN = "Ann Archer"


@pytest.mark.parametrize("person, asked, retrieved", [
    ("second", "Who told you about the rider?", "Who told Ann Archer about the rider?"),
    ("second", "Are you sure your dog is back?", "Is Ann Archer sure Ann Archer's dog is back?"),
    ("second", "Have you heard from yourself? Is it yours?",
     "Has Ann Archer heard from Ann Archer? Is it Ann Archer's?"),
    ("second", "You're at the forge; you'd go, you've been, you'll come.",
     "Ann Archer is at the forge; Ann Archer would go, Ann Archer has been, Ann Archer will come."),
    ("second", "What do you know? Were you there? You were.", "What does Ann Archer know? Was Ann Archer there? "
                                                              "Ann Archer was."),
    ("second", "What did I tell you?", "What did I tell Ann Archer?"),  # the interviewer's "I" stays
    ("first", "What am I planning at 13:20?", "What is Ann Archer planning at 13:20?"),
    ("first", "Who told me about lunch? What do I know about my mill?",
     "Who told Ann Archer about lunch? What does Ann Archer know about Ann Archer's mill?"),
    ("first", "I\u2019m here. i was there, I have been, myself.",
     "Ann Archer is here. Ann Archer was there, Ann Archer has been, Ann Archer."),
    ("first", "When did I last talk with Ben?", "When did Ann Archer last talk with Ben?"),
    ("first", "What did Ben tell me the last time we talked?", "What did Ben tell Ann Archer the last time we talked?"),
    ("first", "What did you tell me?", "What did you tell Ann Archer?"),  # a second person stays
    ("first", "What happened at the mine? Irish mice, Imogen, memory.",  # words holding "I", "me", "my": kept
     "What happened at the mine? Irish mice, Imogen, memory."),
    ("second", "Nothing to change here.", "Nothing to change here."),
    # "notice board", "watchman", "lookout": not verbs of seeing, so the question is put in the third person
    ("second", "What did you read on the notice board?", "What did Ann Archer read on the notice board?"),
    # what the resident saw: its observations do not name it, so the question stays as asked
    ("second", "What did you see at the forge?", "What did you see at the forge?"),
    ("first", "What did I see Kofi doing at 15:30? Have I noticed?", "What did I see Kofi doing at 15:30? Have I "
                                                                     "noticed?"),
])
def test_the_pronouns_of_the_resident_become_its_name(person, asked, retrieved):
    assert third_person(asked, ANN, person) == retrieved


@pytest.mark.parametrize("name, person, asked, retrieved", [
    ("My Tran", "first", "What am I planning, and my plan?", "What is My Tran planning, and My Tran's plan?"),
    ("You Wei", "second", "Are you the baker?", "Is You Wei the baker?"),
    ("Jean-Me Duval", "first", "What did I tell Ben?", "What did Jean-Me Duval tell Ben?"),
])
def test_the_name_goes_in_once_and_no_rule_reads_it_again(name, person, asked, retrieved):
    assert third_person(asked, name, person) == retrieved


def test_a_name_with_regex_characters_is_put_in_as_it_is():
    assert third_person("Who told you?", r"Jo \1 {n} Smith", "second") == r"Who told Jo \1 {n} Smith?"


@pytest.mark.parametrize("person, name", [("third", ANN), ("second", "  ")])
def test_an_unknown_person_or_a_blank_name_is_a_value_error(person, name):
    with pytest.raises(ValueError, match="person|name"):
        third_person("Who told you?", name, person)


def test_the_setting_is_on_by_default_off_for_seed003_and_for_runs_recorded_before_it():
    assert MemoryConfig().third_person_queries is True
    assert load_config(preset_path("seed003")).memory.third_person_queries is False
    old = config_from_dict(recorded_config({"memory": {"a_rec": 0.25}}))  # a header without the key
    assert old.memory.third_person_queries is False
    off = MemoryConfig(third_person_queries=False)
    assert off.query_text("Who told you?", ANN, "second") == "Who told you?"
    assert MemoryConfig().query_text("Who told you?", ANN, "second") == "Who told Ann Archer?"


def _store(tmp_path: Path, embedder) -> AgentMemory:
    """Ann's memories: who she is and what she did, the well rope (the event, Ben telling her, a sighting of Cal
    talking about it), and her line to Cal."""
    mem = AgentMemory("ann", tmp_path / "ann", MemoryConfig(), embedder.dim)
    texts = [("Ann Archer plans to be baking bread at the mill house from 09:00 to 12:00.", "plan", 2),
             ("Ann Archer is a baker who lives by the square.", "observation", 2),
             ('Ann Archer said to Cal Carter: "I have been baking bread this morning."', "dialogue", 2),
             ("The well rope at the square is frayed and snapped.", "event", 4),
             ('Ben Brook said to Ann Archer: "The well rope snapped this morning."', "dialogue", 3),
             ("Cal Carter is talking about the well rope at the square.", "observation", 3)]
    records = [MemoryRecord(id=memory_id("ann", 600 + 10 * i, t), text=t, kind=k, rating=r, timestamp=600.0 + 10 * i,
                            tick=60 + i) for i, (t, k, r) in enumerate(texts)]
    mem.add(records, embedder.embed([r.text for r in records]))
    return mem


def test_the_name_is_matched_by_its_words_and_the_question_embedded_as_asked(tmp_path):
    """Real embeddings and BM25. "What did you tell Cal?" as asked finds the sighting of Cal first (no memory says
    "you"); with Ann named, her line to Cal. The name is matched by BM25 only (perspective.embedded): put in the
    embedding too, it pulls in what is about Ann and not about the question ("Ann Archer is a baker ...")."""
    from simulacra.embeddings import build_embedder
    from simulacra.memory.perspective import asked, embedded

    embedder = build_embedder(EmbeddingConfig(exact=False))
    mem = _store(tmp_path, embedder)

    def top(query: str, embed: str | None = None) -> list[str]:
        vector = embedder.embed([embedded(query) if embed is None else embed])[0]
        return [m.text for m in mem.retrieve(vector, 700, query_text=query, profile="recall")[:3]]

    question = "What did you tell Cal?"
    named = MemoryConfig().query_text(question, ANN, "second")
    assert (str(named), asked(named), embedded(named)) == ("What did Ann Archer tell Cal?", question, question)
    assert top(question)[0].startswith("Cal Carter is talking")
    assert top(named)[0].startswith("Ann Archer said to Cal Carter")

    question = "Do you remember what happened to the rope?"
    named = MemoryConfig().query_text(question, ANN, "second")
    about_her = "Ann Archer is a baker who lives by the square."
    assert about_her not in top(named) and "The well rope at the square is frayed and snapped." in top(named)
    assert about_her in top(named, embed=str(named))  # the name in the embedding as well


def test_tune_retrieves_a_labelled_query_as_an_interview_retrieves_a_question(tmp_path):
    """A labelled query is the agent's own question: tune matches its words with "I", "me", "my" as the agent's
    name when the run's memory.third_person_queries is on (a run recorded before the setting: as asked) and embeds
    it as asked (the embedder knows only the question as asked), and the lexical relevance follows the text: the
    line that names Ann comes first only when she is named."""
    import json

    from simulacra import tune as t
    from tests.conftest import unit
    from tests.test_tune import DIM, NOW, DictEmbedder, add_ops, rec, write_queries, write_run

    run = tmp_path / "run"
    mem = AgentMemory("ann", run / "ann", MemoryConfig(), DIM)
    heard = rec("ann", 'Ben Brook said to Ann Archer: "the rope snapped"', 3, NOW - 60, kind="dialogue")
    seen = rec("ann", "Cal Carter is talking about the rope", 3, NOW - 50)
    mem.short_term.upsert([heard, seen], np.stack([unit(1, 1), unit(1, 1)]))  # dense ties: BM25 decides
    write_run(run, ["ann"], add_ops("ann", [heard, seen]))
    header, tick = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    header = {**json.loads(header), "personas": {"ann": {"name": ANN}}}
    (run / "trace.jsonl").write_text(json.dumps(header) + "\n" + tick + "\n", encoding="utf-8")
    question = "Who told me about the rope?"
    qfile = write_queries(tmp_path / "q.yaml", [{"agent": "ann", "query": question, "expected": [{"id": heard.id}]}])
    named = f"Who told {ANN} about the rope?"
    embedder = DictEmbedder({question: unit(1)})  # embedding the named text would be a KeyError
    on, = t.prepare(run, t.load_queries(qfile), embedder, qfile)
    off, = t.prepare(run, t.load_queries(qfile), embedder, qfile, third_person=False)
    assert (on.text, off.text) == (named, question)
    recall = t.baseline_settings(profile="recall")["defaults"]
    memory = t.read_run(run).config.memory
    assert t.retrieve_ids(on, recall, memory)[0] == heard.id
    assert t.retrieve_ids(off, recall, memory)[0] == seen.id
    # a run recorded before the setting (its header without the key) is tuned as it ran
    del header["config"]["memory"]["third_person_queries"]
    (run / "trace.jsonl").write_text(json.dumps(header) + "\n" + tick + "\n", encoding="utf-8")
    before, = t.prepare(run, t.load_queries(qfile), embedder, qfile)
    assert before.text == question


@pytest.mark.parametrize("name", ["Siobhan O'Brien", "Maria de la Cruz Reyes"])
def test_time_words_are_read_from_the_question_as_asked(name):
    """"When did you last talk with Ben?" asks for the latest; the name put in ("did Siobhan O'Brien last", five
    words between "did" and "last") must not hide it: the switch reads the question as asked, and a rewritten
    question keeps it through pickling (a Ray worker's) and copying."""
    import copy
    import pickle

    from simulacra.memory.perspective import Rewritten, asked

    config = MemoryConfig()
    question = "When did you last talk with Ben?"
    text = config.query_text(question, name, "second")
    assert isinstance(text, Rewritten) and text == f"When did {name} last talk with Ben?" and asked(text) == question
    assert config.dated("recall", text, 5000) == ("latest", None)
    assert config.dated("recall", str(text), 5000)[0] == "recall"  # what reading the rewritten words would do
    for again in (pickle.loads(pickle.dumps(text)), copy.deepcopy(text)):
        assert again == text and asked(again) == question
    # a named time is read as asked too, and a question left as it is stays a plain str
    assert config.dated("recall", config.query_text("What did you do at 15:30?", name, "second"), 20 * 60)[0] \
        == "dated"
    assert type(config.query_text("What did you see at 15:30?", name, "second")) is str


class _Recording:
    """An embedder that records every text it is asked to embed (and embeds it with the real one)."""

    def __init__(self, inner):
        self.inner, self.texts = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def embed(self, texts):
        self.texts += list(texts)
        return self.inner.embed(texts)


def test_no_retrieval_embeds_the_question_with_the_residents_name(tmp_path, rater_url, embedder):
    """Every place a question put to a resident is retrieved with embeds it as asked and matches it named: an
    interview and its list of what was forgotten, a recall probe (under its profiles and, when the interview's profile
    is not among them, for the answer), a knowledge check. A broken call site would embed "Who told <name> ...?"."""
    from simulacra.evaluation.metrics import Knowledge, Run, Similarity
    from simulacra.interview import interview
    from simulacra.schedule import probe_stage
    from simulacra.trace import agent_names
    from tests.test_rescore import tiny_run

    question = "Who told you about the well?"
    recorder = _Recording(embedder)
    with tiny_run(tmp_path, rater_url, recorder, "embedded") as sim:
        sim.run(6)
        names = dict(sim.rt.names)
        named = {f"Who told {n} about the well?" for n in names.values()}
        recorder.texts.clear()
        now = sim.state.now
        record = probe_stage(sim.state, sim.rt, now, 6, {"minutes": [now], "profiles": ["situational"], "answer": True,
                                                       "asks": [{"after": 0, "query": question, "about": "well"}]})
        assert record is not None and record["interview"] == "recall"  # not among the probe's profiles
        assert all(a["results"]["situational"] and a.get("answer") for a in record["asks"])
        assert question in recorder.texts and not named & set(recorder.texts)
    agent = next(iter(names))
    recorder.texts.clear()
    answer = interview(sim.run_dir, agent, question, embedder=recorder)
    assert answer["query"] == f"Who told {names[agent]} about the well?" and answer["retrieved"]
    assert question in recorder.texts and not named & set(recorder.texts)
    recorder.texts.clear()
    run = Run.load(sim.run_dir)
    know = Knowledge(run, recorder, Similarity(embedder))
    assert agent_names(run.header) == names
    assert all(know.retrieve(a, question, run.end) for a in names)
    assert recorder.texts == [question]  # once for every resident: the cache is keyed by what is embedded


# --------------------------------------------------------------------------- rating from the resident's perspective
@pytest.mark.parametrize("text, expected", [
    ("At the forge an iron bar burns the blacksmith's forearm.", "At the forge an iron bar burns my forearm."),
    ("The Blacksmith slips. Then the blacksmith laughs.", "I slip. Then I laugh."),  # the subject: its verb agrees
    ("The blacksmith laughed at Kofi.", "I laughed at me."),  # word rules: a verb not in "s" shows no subject
    ("The minister reads the banns of Kofi Mensah and Ann.", "The minister reads the banns of me and Ann."),
    ("Kofi's dog barks; Kofi runs. Kofi's cat too.", "My dog barks; I run. My cat too."),
    ("Greta hands the blacksmith nails; Bram gives Kofi tools.", "Greta hands me nails; Bram gives me tools."),
    ("Kofi is late and has a cold.", "I am late and have a cold."),
    ("A tree falls on the Smithy Cottage roof.", "A tree falls on my home roof."),
    ("A tree falls on Smithy Cottage.", "A tree falls on my home."),
])
def test_an_event_that_names_the_resident_is_put_in_its_first_person(text, expected):
    from simulacra.memory.perspective import own_perspective

    assert own_perspective(text, "Kofi Mensah", "blacksmith", "Smithy Cottage") == expected


@pytest.mark.parametrize("text", [
    "A stranger walks into the tavern.",
    "Kofiland's blacksmiths gather.",          # neither the name nor the role as whole words
    "Mensahs is not his name, nor the blacksmithy his trade.",
])
def test_an_event_that_does_not_name_the_resident_has_no_first_person(text):
    from simulacra.memory.perspective import own_perspective

    assert own_perspective(text, "Kofi Mensah", "blacksmith", "Smithy Cottage") is None


def test_no_occupation_or_home_names_it_by_name_alone_and_a_blank_name_is_a_value_error():
    from simulacra.memory.perspective import own_perspective

    assert own_perspective("The blacksmith greets Kofi.", "Kofi Mensah") == "The blacksmith greets me."
    assert own_perspective("The blacksmith greets him.", "Kofi Mensah", "", "") is None
    with pytest.raises(ValueError, match="name"):
        own_perspective("text", " ")


def test_the_rating_setting_is_on_by_default_off_for_seed003_and_for_runs_recorded_before_it():
    assert MemoryConfig().rate_from_perspective
    assert not load_config(preset_path("seed003"), []).memory.rate_from_perspective
    assert recorded_config({"memory": {}})["memory"]["rate_from_perspective"] is False


def test_the_blacksmith_rates_his_own_burn_from_his_perspective_and_keeps_it(tmp_path, rater_url, rater_backend):
    """A real run of Fernhollow (the blacksmith and two residents who see his accident at 11:20): his memory of it is
    rated as its text in his first person, theirs as the text; the 13:00 consolidation keeps his. Off, he rates it as
    they do."""
    import json
    import subprocess
    import sys

    from simulacra.memory.perspective import own_perspective
    from tests.conftest import ROOT

    told: dict[str, list[dict]] = {}  # setting -> the blacksmith's memories of telling of his burn

    def memories_of_the_burn(setting: str) -> dict[str, list[dict]]:
        args = ["--hours", "7", "--agents", "kofi_mensah,bram_ostrowski,yusuf_demir", "--db-dir", str(tmp_path),
                "--run-name", setting, "--rater-url", rater_url, "--quiet", "--set",
                f"memory.rate_from_perspective={setting}"]
        r = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", *args], cwd=ROOT, capture_output=True,
                           text=True, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        ops: dict[str, list[dict]] = {}
        for line in (tmp_path / setting / "trace.jsonl").read_text().splitlines():
            for op in json.loads(line).get("memory") or []:
                if "forearm" in (op.get("text") or "") and op.get("kind") in (None, "event"):
                    ops.setdefault(op["agent"], []).append(op)
                if ("forearm" in (op.get("text") or "") and op.get("kind") in ("dialogue", "conversation")
                        and op["agent"] == "kofi_mensah"):
                    told.setdefault(setting, []).append(op)
        return ops

    on = memories_of_the_burn("true")
    event = on["kofi_mensah"][0]["text"]
    mine = own_perspective(event, "Kofi Mensah", "blacksmith", "Smithy Cottage")
    assert mine is not None and "my forearm" in mine
    as_text, as_his = (r.rating for r in rater_backend.rate([event, mine]))
    assert as_his > as_text  # what the test is about: his burn matters more to him
    assert on["kofi_mensah"][0]["rating"] == as_his
    assert [ops[0]["rating"] for a, ops in on.items() if a != "kofi_mensah"] == [as_text, as_text]
    assert [op["op"] for op in on["kofi_mensah"]] == ["add", "move"]  # kept: moved to long-term at 13:00
    off = memories_of_the_burn("false")
    assert off["kofi_mensah"][0]["rating"] == as_text
    # he tells it as his own ("burns my forearm; I plunge my arm"), and his memories of telling it (his line, the
    # conversation's summary) are rated as the burn is for him, although their texts alone rate lower
    lines = [op for op in told["true"] if op["kind"] == "dialogue" and op["text"].startswith("Kofi Mensah said")]
    assert lines and all("burns my forearm; I plunge my arm" in op["text"] for op in lines)
    assert {op["kind"] for op in told["true"]} == {"dialogue", "conversation"}
    texts = [op["text"] for op in told["true"]]
    assert max(r.rating for r in rater_backend.rate(texts)) < as_his
    assert {op["rating"] for op in told["true"]} == {as_his}
    assert {op["rating"] for op in told["false"]} <= {as_text, *(r.rating for r in rater_backend.rate(texts))}
    assert max(op["rating"] for op in told["false"]) < as_his


@pytest.mark.parametrize("text, expected", [
    ("A ship drops anchor by the Anchor.", "A ship drops anchor by my home."),   # the home by its name's case
    ("The Anchor floods. Kofi's boat too.", "My home floods. My boat too."),
    ("Kofi Berg slips; Kofi laughs.", "Kofi Berg slips; I laugh."),           # another Kofi: his surname follows
    ("Mensahs' and James' roofs", None),
])
def test_the_perspective_names_the_resident_not_a_namesake_nor_a_word(text, expected):
    from simulacra.memory.perspective import own_perspective

    assert own_perspective(text, "Kofi Mensah", "blacksmith", "The Anchor") == expected
    assert own_perspective("James' roof leaks.", "James Hall") == "My roof leaks."


@pytest.mark.parametrize("text, pronouns, expected", [
    ("At the forge an iron bar burns the blacksmith's forearm; he plunges his arm into the trough and grits his "
     "teeth.", "he", "At the forge an iron bar burns my forearm; I plunge my arm into the trough and grit my teeth."),
    ("He waves. Kofi falls and he always laughs at himself.", "he", "He waves. I fall and I always laugh at myself."),
    ("Kofi helps Greta; she thanks him and he smiles.", "he", "I help Greta; she thanks me and I smile."),
    ("The blacksmith drops her hammer; she picks her up.", "she", "I drop my hammer; I pick me up."),
    # "they" is as often things: its pronouns are left alone
    ("The blacksmith is tired; they are done and they rest.", "they", "I am tired; they are done and they rest."),
    # without the pronoun set the pronouns are left alone
    ("The blacksmith slips; he laughs at himself.", None, "I slip; he laughs at himself."),
])
def test_the_resident_s_own_pronouns_after_it_is_named_are_put_in_the_first_person(text, pronouns, expected):
    """The persona's pronoun set, after the first reference: "he" -> "I" with its verb (and a verb joined by
    "and" before an object) agreeing, the other forms "me", "my", "myself"; pronouns before the reference stay."""
    from simulacra.memory.perspective import own_perspective

    assert own_perspective(text, "Kofi Mensah", "blacksmith", None, pronouns) == expected


@pytest.mark.parametrize("text, expected", [
    ("At the service the minister reads the banns.", "At the service I read the banns."),
    ("The skipper of the Kittiwake is fined; the skipper laughs.", "I am fined; I laugh."),  # the longest alias first
    ("The ministers meet.", None),                                                           # whole words only
])
def test_a_persona_s_aliases_name_it_as_written(text, expected):
    from simulacra.memory.perspective import own_perspective

    aliases = ["the minister", "the skipper", "the skipper of the Kittiwake"]
    assert own_perspective(text, "Grace Okafor", "minister of the Seafarers' Chapel", None, "she", aliases) == expected


@pytest.mark.parametrize("text, expected", [
    ("At the docks Kofi waves.", "At the docks I wave."),                  # a noun in "s" before it: the subject
    ("On Sundays the blacksmith rests.", "On Sundays I rest."),
    ("Greta laughs as Kofi falls.", "Greta laughs as I fall."),            # after a conjunction: the subject
    ("Marit says that the blacksmith is late.", "Marit says that I am late."),
    ("Greta told Kofi things.", "Greta told me things."),                  # after a verb: the object
    ("At noon Kofi always limps.", "At noon I always limp."),              # an adverb between
    ("Kofi hears that Bram falls and breaks a leg.", "I hear that Bram falls and breaks a leg."),  # Bram's verbs
    ("Kofi waves while Greta laughs and grabs the rope.", "I wave while Greta laughs and grabs the rope."),
    ("Kofi hasn't eaten; he isn't well and he doesn't care.", "I haven't eaten; I am not well and I don't care."),
    ("Kofi slips; he's fine.", "I slip; I am fine."),
    ("Kofi fell; he's been hurt.", "I fell; I have been hurt."),
    ('Greta says: "Kofi is here."', 'Greta says: "I am here."'),
    ("I saw Kofi at the forge.", None),                                    # someone's first person already
    ("Kofi\x01 naps.", "I nap."),                                          # the rules' marks are not read from input
])
def test_the_subject_is_told_from_the_object_by_the_words_around_it(text, expected):
    from simulacra.memory.perspective import own_perspective

    assert own_perspective(text, "Kofi Mensah", "blacksmith", None, "he") == expected
