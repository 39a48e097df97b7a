"""Who said it to whom (``memory.speech_roles``, :mod:`simulacra.memory.speech`): the cue a question names, the sides a
memory states, and retrievals that leave out the lines said the other way -- exactly, in the engine, its trace record,
``rescore`` and ``tune`` alike."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from simulacra.config import EmbeddingConfig, MemoryConfig, config_from_dict, load_config, recorded_config
from simulacra.memory.records import MemoryRecord, RetrievedMemory, memory_id
from simulacra.memory.speech import (
    DialogueLine,
    SpeechCue,
    contradicts,
    read_dialogue,
    said_the_other_way,
    same_person,
    speech_cue,
    speech_pairs,
    typed_question,
)
from simulacra.memory.stream import AgentMemory
from simulacra.presets import preset_path

BRAM, KOFI = "Bram Ostrowski", "Kofi Mensah"


@pytest.mark.parametrize("question, speaker, listener", [
    (f"What did Kofi tell {BRAM} about the bracket?", "Kofi", BRAM),
    (f"What did {KOFI} say to {BRAM} about the bracket?", KOFI, BRAM),
    (f"Did {BRAM} tell Kofi about the storm?", BRAM, "Kofi"),
    ("When did Greta say to Ruth that the mill shut?", "Greta", "Ruth"),
    (f"What was {KOFI} telling {BRAM}?", KOFI, BRAM),
    ("What did Tomasz Wróbel tell Ada Wróbel?", "Tomasz Wróbel", "Ada Wróbel"),
    (f"Whom did {BRAM} tell about the rider?", BRAM, None),
    (f"Who did {BRAM} tell about the rider?", BRAM, None),
    ("What did Kofi say about the burn?", "Kofi", None),
    ("What did Kofi say Bram did?", "Kofi", None),  # said *that*, not said *to*
    (f"What was {KOFI} saying about the mill when we talked?", KOFI, None),
    ("What did Greta tell the council?", "Greta", None),
    ("Did Kofi tell you about it?", "Kofi", None),  # "you" is not a name (third-person queries off)
    (f"Who told {BRAM} about the rider?", None, BRAM),
    (f"Who was talking to {BRAM} about the rider?", None, BRAM),
    (f"Who spoke to {BRAM} at the square?", None, BRAM),
    ("What did the blacksmith tell Bram?", None, "Bram"),  # a side that is not a name: the other side still read
    (f"What was {BRAM} told about the mill?", None, BRAM),  # the passive: the one told listened
    (f"Was {BRAM} told about the storm?", None, BRAM),
    (f"What was {BRAM} told by Kofi?", "Kofi", BRAM),
    (f"What was {BRAM} told about the mill by Kofi?", "Kofi", BRAM),
    (f"What did {BRAM} tell Kofi's wife?", BRAM, None),  # a possessive names someone else
    ("What did Kofi say to Greta and Ruth?", "Kofi", None),  # one of several is not the listener
    ("What did Ólafur Sigurðsson tell Ada Wróbel?", "Ólafur Sigurðsson", "Ada Wróbel"),
])
def test_a_question_names_who_spoke_and_who_listened(question, speaker, listener):
    cue = speech_cue(question)
    assert cue is not None and (cue.speaker, cue.listener) == (speaker, listener)
    assert cue.words in question


@pytest.mark.parametrize("question", [
    f"Who did {BRAM} talk to about the rider?",  # a talk goes both ways
    f"What did {BRAM} and Kofi talk about?",
    f"What do I know about {KOFI}?",
    f"{KOFI}'s plans for today",
    "talking to voters about the harbour wall on Chapel Green",  # an activity, the focus query of a tick
    "Who told you about the rider?",  # no name on either side
    "What did someone tell me?",
    f'{KOFI} said to {BRAM}: "Did you hear? The wheel stopped."',  # a statement (a reflection's focal point)
    f"{KOFI} was telling {BRAM} about the wheel.",
    f"How does {BRAM} know that Kofi told Greta about the mill?",  # a clause inside the question: hearsay
    "What happened after Greta told Kofi?",
    f"Did {BRAM} tell Kofi, or did Kofi tell {BRAM}?",  # both ways
    f"What did Kofi tell {BRAM} and what did {BRAM} tell him?",
    f"Who among Kofi and Greta told {BRAM}?",
    "Is Kofi telling the truth about the mill?",  # the present: a habit or a state, not a line
    "Does Kofi tell stories?",
    f"What did Kofi tell {BRAM}",  # no question mark: a statement, not read
    "", None,
])
def test_a_question_that_names_no_direction_is_no_cue(question):
    assert speech_cue(question) is None


@pytest.mark.parametrize("text, pairs", [
    (f'{KOFI} said to {BRAM}: "The bracket cracked."', ((KOFI, BRAM),)),
    ('Caroline said: "I went to the support group."', (("Caroline", None),)),
    (f"{BRAM} talked with {KOFI} at the forge. {KOFI} told {BRAM}: the burn. {BRAM} told {KOFI}: the rider.",
     ((KOFI, BRAM), (BRAM, KOFI))),
    (f'A visitor from out of town told {BRAM}: "The ferry stops in winter."', (("A visitor from out of town", BRAM),)),
    (f"{BRAM} talked with {KOFI} at the forge.", ()),
    (f"{KOFI} is talking with {BRAM} at the forge.", ()),
    ("The well rope at the square is frayed and snapped.", ()),
    (f'{BRAM} plans to tell Kofi: "nothing"', ()),  # "told" / "said to" at a sentence's start only
    ("Ezra Pike told me: the mill is shut.", (("Ezra Pike", None),)),  # a pronoun is an unknown side
    ("Dev Raman spread the word at The Quay: the harbour wall has collapsed.", (("Dev Raman", None),)),
    ("The rider told the tavern: the bridge is out.", (("The rider", None),)),
    (f"Conversation of {BRAM} and {KOFI} at the forge: Kofi said the mill is shut. {BRAM} told {KOFI}: the storm.",
     ()),  # not simulacra's summary frame: its sentences are not read
    (f"{BRAM} talked with {KOFI} at the forge. {KOFI} told him: nothing new.", ((KOFI, None),)),
])
def test_a_memory_states_the_sides_simulacra_writes(text, pairs):
    assert speech_pairs(text) == pairs


@pytest.mark.parametrize("line", [
    DialogueLine(KOFI, BRAM, "The bracket cracked."),
    DialogueLine(KOFI, BRAM, 'Greta called it "the old wheel": it is worn.'),  # quotes and a colon inside
    DialogueLine("Caroline", None, "I went to the support group."),  # a benchmark's line: no listener
    DialogueLine(KOFI, BRAM, ""),
])
def test_a_dialogue_line_is_written_and_read_in_one_format(line):
    assert read_dialogue(line.text) == line
    assert read_dialogue(f"  {line.text}\n") == line  # whitespace around it aside
    assert speech_pairs(line.text) == ((line.speaker, line.listener),)


@pytest.mark.parametrize("text", [f"{KOFI} talked with {BRAM} at the forge.", f'{KOFI} plans to say: "hi"',
                                  f"{KOFI} said the mill is shut.", ""])
def test_a_text_that_is_no_dialogue_line_reads_as_none(text):
    assert read_dialogue(text) is None


@pytest.mark.parametrize("typed, read", [
    ("what did kofi tell you", "what did Kofi tell you?"),  # the name as the run writes it, and a "?"
    ("What did Kofi tell you?", "What did Kofi tell you?"),
    ("whom did bram ostrowski tell about the rider  ", "whom did Bram Ostrowski tell about the rider?"),
    ("will kofi say so", "will Kofi say so?"),  # "Will Turner" is a resident, but "will" a common word
    ("did kofi's wife say so?", "did kofi's wife say so?"),  # a possessive is no name to read
    ("", ""),
])
def test_an_interview_question_is_read_as_typed(typed, read):
    assert typed_question(typed, [KOFI, BRAM, "Will Turner"]) == read


def test_a_question_typed_in_lower_case_or_without_a_mark_names_who_spoke():
    """Bram asked "what did kofi tell you" answered from his own line to Kofi: no cue was read (audit of stop 51)."""
    names = [KOFI, BRAM]
    want = speech_cue(f"What did Kofi tell {BRAM}?")
    for typed in ("what did kofi tell you", "What did Kofi tell you", "what did kofi tell you?"):
        asked = typed_question(typed, names).replace("you", BRAM)
        assert speech_cue(asked) is not None and speech_cue(asked).speaker == want.speaker


def test_names_agree_by_their_words_with_titles_and_accents_aside():
    assert same_person("Kofi", KOFI) and same_person(KOFI, "kofi mensah") and same_person("Mr Brekke", "Lars Brekke")
    assert same_person("Ada Wrobel", "Ada Wróbel") and same_person("Tam O’Neill", "Tam O'Neill")
    assert not same_person("Ada Wróbel", "Tomasz Wróbel") and not same_person("Kofi", BRAM)
    assert not same_person("Mr", "Mr Brekke")  # a title alone names nobody
    assert not same_person(None, KOFI) and not same_person(KOFI, None)  # an unknown side is nobody


def test_a_memory_is_left_out_only_when_every_line_it_states_goes_the_other_way():
    heard = SpeechCue("Kofi", BRAM, "did Kofi tell Bram")
    kofi_to_bram = f'{KOFI} said to {BRAM}: "x"'
    bram_to_kofi = f'{BRAM} said to {KOFI}: "x"'
    talk = f"{BRAM} talked with {KOFI} at the forge."
    assert not contradicts(heard, kofi_to_bram) and contradicts(heard, bram_to_kofi)
    assert not contradicts(heard, f'{KOFI} said: "x"') and contradicts(heard, f'{BRAM} said: "x"')
    assert not contradicts(heard, f"{talk} {BRAM} told {KOFI}: a. {KOFI} told {BRAM}: b.")
    assert contradicts(heard, f"{talk} {BRAM} told {KOFI}: a.")
    assert not contradicts(heard, f'Greta Lund said to {BRAM}: "Kofi says the mill is shut."')  # between others
    assert not contradicts(heard, f'{BRAM} said to Greta Lund: "x"')  # not to the cue's speaker
    assert not contradicts(heard, "The bracket cracked at the forge.")  # states no talk: never left out
    assert not contradicts(None, bram_to_kofi)
    told_bram = SpeechCue(None, BRAM, "Who told Bram")
    assert not contradicts(told_bram, f'Greta Lund said to {BRAM}: "x"') and contradicts(told_bram, bram_to_kofi)
    assert contradicts(told_bram, f'{BRAM} said: "x"')  # his own line, its listener unknown, was not told to him
    assert contradicts(told_bram, f"{BRAM} spread the word at the square: x.")  # nor was what he spread
    bram_told = SpeechCue(BRAM, None, "Whom did Bram tell")
    assert contradicts(bram_told, kofi_to_bram) and not contradicts(bram_told, f'Greta Lund said to {KOFI}: "x"')
    assert not said_the_other_way(bram_told, BRAM, "Greta Lund")
    # a misread side leaves out nothing it does not name: "Kofi's wife" read as a listener "Mum"
    assert not contradicts(SpeechCue(BRAM, "Mum", "did Bram tell Mum"), kofi_to_bram)


def test_the_setting_is_on_by_default_off_for_seed003_and_for_runs_recorded_before_it():
    assert MemoryConfig().speech_roles is True
    assert load_config(preset_path("seed003")).memory.speech_roles is False
    assert config_from_dict(recorded_config({"memory": {"a_rec": 0.25}})).memory.speech_roles is False


# ------------------------------------------------------------------------------------------ retrievals
def _lines(n: int) -> list[tuple[str, str, str]]:
    """``n`` lines each way between Kofi and Bram about the bracket, and Greta's to Bram."""
    out = []
    for i in range(n):
        out.append((KOFI, BRAM, f"The mill bracket cracked again, the {i}th time I looked at it."))
        out.append((BRAM, KOFI, f"The mill bracket needs mending before the {i}th of the month."))
    out.append(("Greta Lund", BRAM, "The mill bracket will hold till spring."))
    return out


def _bram(tmp_path: Path, embedder, n: int = 4, **memory) -> AgentMemory:
    mem = AgentMemory("bram", tmp_path / "bram", MemoryConfig(**memory), embedder.dim)
    records = [MemoryRecord(id=memory_id("bram", 600 + i, f"{s}{i}"), text=f'{s} said to {li}: "{t}"',
                            kind="dialogue", rating=3 + i % 4, timestamp=600.0 + i, tick=60 + i)
               for i, (s, li, t) in enumerate(_lines(n))]
    records.append(MemoryRecord(id=memory_id("bram", 700, "event"), text="The mill bracket cracked at the forge.",
                                kind="event", rating=5, timestamp=700.0, tick=70))
    mem.add(records, embedder.embed([r.text for r in records]))
    return mem


def _brute(mem: AgentMemory, vector, question: str, k: int) -> list[str]:
    """The ``k`` best of every memory the cue does not leave out, scoring them all with the filter off."""
    cue = speech_cue(question)
    off = mem.config.speech_roles
    mem.config.speech_roles = False
    try:
        every = mem.retrieve(vector, 720.0, top_k=10_000, threshold=float("-inf"), query_text=question,
                             profile="recall")
    finally:
        mem.config.speech_roles = off
    return [m.id for m in every if not contradicts(cue, m.text)][:k]


def test_what_kofi_told_him_is_not_answered_by_what_he_told_kofi(tmp_path):
    """Real embeddings and BM25: Bram's lines to Kofi hold the same words as Kofi's to him. Without the filter his own
    lines are among the answers to "What did Kofi tell you?"; with it none is, and the top k are exactly the k best of
    the rest (the filter asks a tier for more, it does not return fewer). "Whom did you tell" keeps only his lines,
    "Who told you" only the lines told to him (Greta's too), and a question with no direction keeps every one."""
    from simulacra.embeddings import build_embedder

    embedder = build_embedder(EmbeddingConfig(exact=False))
    mem = _bram(tmp_path, embedder)
    config = MemoryConfig()

    def ask(question: str, k: int = 5):
        named = config.query_text(question, BRAM, "second")
        vector = embedder.embed([question])[0]
        return named, vector, mem.retrieve(vector, 720.0, top_k=k, query_text=named, profile="recall")

    named, vector, got = ask("What did Kofi tell you about the mill bracket?")
    assert len(got) == 5 and not any(m.text.startswith(f"{BRAM} said") for m in got)
    assert [m.id for m in got] == _brute(mem, vector, named, 5)
    mem.config.speech_roles = False
    assert any(m.text.startswith(f"{BRAM} said to") for m in mem.retrieve(vector, 720.0, top_k=5, query_text=named,
                                                                            profile="recall"))
    mem.config.speech_roles = True

    _, _, got = ask("Whom did you tell about the mill bracket?", k=20)
    dialogue = [m.text for m in got if m.kind == "dialogue"]  # what was said to him is left out
    assert len(dialogue) == 4 and all(t.startswith(f"{BRAM} said to {KOFI}") for t in dialogue)
    _, _, got = ask("Who told you about the mill bracket?", k=20)
    dialogue = [m.text for m in got if m.kind == "dialogue"]
    assert len(dialogue) == 5 and not any(t.startswith(f"{BRAM} said") for t in dialogue)
    assert any(t.startswith("Greta Lund said to") for t in dialogue)
    _, _, got = ask("What do you know about the mill bracket?", k=20)
    assert len(got) == 10  # no cue: every line and the event


def test_the_filter_is_exact_where_the_bounded_search_skips_rows(tmp_path):
    """A tier above BOUND_MIN_ROWS is searched with bounds (simulacra.memory.index); the lines a cue leaves out are
    dropped after that search, asked for as many more, so the result is still exactly the best of the rest, under
    dense and hybrid relevance alike."""
    from simulacra.memory.index import BOUND_MIN_ROWS
    from tests.conftest import unit

    rng = np.random.default_rng(7)
    n = BOUND_MIN_ROWS + 200
    for relevance in ("dense", "hybrid"):
        mem = AgentMemory("bram", tmp_path / relevance, MemoryConfig(relevance=relevance), 8)
        texts = [f'{KOFI} said to {BRAM}: "bracket {i}"' if i % 3 == 0 else
                 f'{BRAM} said to {KOFI}: "bracket {i}"' if i % 3 == 1 else f"Kofi mends bracket {i}."
                 for i in range(n)]
        records = [MemoryRecord(id=memory_id("bram", i, t), text=t, kind="dialogue", rating=1 + i % 10,
                                timestamp=float(i), tick=i) for i, t in enumerate(texts)]
        vectors = rng.normal(size=(n, 8)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        mem.add(records, vectors)
        question = f"What did Kofi tell {BRAM} about the bracket?"
        query = unit(1, 0.5, 0.2)
        got = mem.retrieve(query, float(n), top_k=10, threshold=float("-inf"), query_text=question, profile="recall")
        assert [m.id for m in got] == _brute(mem, query, question, 10)
        assert all(not m.text.startswith(f"{BRAM} said") for m in got)


def test_the_trace_records_the_cue_and_rescore_reranks_without_the_left_out_lines(tmp_path):
    from simulacra.embeddings import build_embedder
    from simulacra.rescore import rerank

    embedder = build_embedder(EmbeddingConfig(exact=False))
    mem = _bram(tmp_path, embedder)
    named = f"What did Kofi tell {BRAM} about the mill bracket?"
    vector = embedder.embed(["What did Kofi tell you about the mill bracket?"])[0]
    got = mem.retrieve(vector, 720.0, query_text=named, profile="recall")
    op = mem.retrieval_record(named, "interview", got, vector, 720.0, profile="recall")
    assert op["speech"] == ["Kofi", BRAM, f"did Kofi tell {BRAM}"]
    left_out = {r.id for r in mem.short_term.records if r.text.startswith(f"{BRAM} said")}
    assert left_out and not left_out & {row[0] for rows in op["candidates"].values() if rows for row in rows}
    params = mem.params_for("recall")
    again = rerank(op["candidates"], op["tiers"], mem.rule(profile="recall"), params)
    assert [i for i, _, _ in again] == [m.id for m in got]
    assert "speech" not in mem.retrieval_record("What do I know about the bracket?", "interview", got, vector, 720.0,
                                                profile="recall")


def test_the_recorded_candidates_rescore_to_the_engine_s_answer_under_other_weights(tmp_path):
    """The trace's candidates of a retrieval that left lines out must hold every memory the rest could rank in the top
    k under any weights: here the left-out lines (Bram's to Kofi) are the most relevant, recent and important, so a
    band of depth k alone, with them dropped after, would miss kept memories that other weights rank high. Re-ranked
    under the situational weights, the recorded candidates give exactly what the engine retrieves under them."""
    from simulacra.rescore import rerank
    from tests.conftest import unit

    rng = np.random.default_rng(3)
    mem = AgentMemory("bram", tmp_path / "bram", MemoryConfig(relevance="dense"), 8)
    records, vectors = [], []
    for i in range(60):
        mine = i % 2 == 0  # Bram's own lines: close to the question, recent, important
        text = f'{BRAM} said to {KOFI}: "bracket {i}"' if mine else f'{KOFI} said to {BRAM}: "bracket {i}"'
        records.append(MemoryRecord(id=memory_id("bram", i, text), text=text, kind="dialogue",
                                    rating=9 if mine else int(rng.integers(1, 9)),
                                    timestamp=float(600 + i + (60 if mine else 0)), tick=i))
        vectors.append(unit(1, 0.1 + (0 if mine else rng.random()), rng.random()))
    mem.add(records, np.stack(vectors))
    question = f"What did Kofi tell {BRAM} about the bracket?"
    query = unit(1, 0.1)
    got = mem.retrieve(query, 720.0, query_text=question, profile="recall")
    op = mem.retrieval_record(question, "interview", got, query, 720.0, profile="recall")
    assert op["speech"][:2] == ["Kofi", BRAM] and op["candidates"]["short_term"]
    left_out = mem.short_term.contradicting(speech_cue(question))
    assert left_out and not any(row[0] in left_out for row in op["candidates"]["short_term"])
    for profile in (None, "recall"):
        engine = [m.id for m in mem.retrieve(query, 720.0, query_text=question, profile=profile)]
        again = rerank(op["candidates"], op["tiers"], mem.rule(profile=profile), mem.params_for(profile))
        assert [i for i, _, _ in again] == engine, profile


def test_tune_leaves_out_what_the_engine_leaves_out(tmp_path):
    """A labelled "Who told me" query: tune's ranking is the engine's, the run's own line to Kofi left out under the
    run's memory.speech_roles (first among all memories by BM25 alone: the name is in it twice), kept when the
    setting is off or the run was recorded before it."""
    from simulacra import tune as t
    from tests.conftest import unit
    from tests.test_tune import DIM, NOW, DictEmbedder, add_ops, rec, write_queries, write_run

    run = tmp_path / "run"
    mem = AgentMemory("bram", run / "bram", MemoryConfig(), DIM)
    said = rec("bram", f'{BRAM} said to {KOFI}: "{BRAM} saw the rope snap"', 3, NOW - 70, kind="dialogue")
    heard = rec("bram", f'{KOFI} said to {BRAM}: "the rope snapped"', 3, NOW - 60, kind="dialogue")
    seen = rec("bram", "Cal Carter is talking about the rope", 3, NOW - 50)
    # the lines tie on dense relevance (BM25 and the filter decide between them); the sighting is farther
    mem.short_term.upsert([said, heard, seen], np.stack([unit(1, 1), unit(1, 1), unit(1, 3)]))
    write_run(run, ["bram"], add_ops("bram", [said, heard, seen]))
    header, tick = (run / "trace.jsonl").read_text(encoding="utf-8").splitlines()
    header = {**json.loads(header), "personas": {"bram": {"name": BRAM}}}
    (run / "trace.jsonl").write_text(json.dumps(header) + "\n" + tick + "\n", encoding="utf-8")
    question = "Who told me about the rope?"
    qfile = write_queries(tmp_path / "q.yaml", [{"agent": "bram", "query": question, "expected": [{"id": heard.id}]}])
    embedder = DictEmbedder({question: unit(1)})
    recall = t.baseline_settings(profile="recall")["defaults"]
    memory = t.read_run(run).config.memory
    on, = t.prepare(run, t.load_queries(qfile), embedder, qfile)
    off, = t.prepare(run, t.load_queries(qfile), embedder, qfile, speech_roles=False)
    engine = [m.id for m in mem.retrieve(unit(1), NOW, query_text=on.text, profile="recall")]
    assert t.retrieve_ids(on, recall, memory) == engine and said.id not in engine and engine[0] == heard.id
    assert t.retrieve_ids(off, recall, memory)[0] == said.id
    del header["config"]["memory"]["speech_roles"]  # recorded before the setting: tuned as it ran
    (run / "trace.jsonl").write_text(json.dumps(header) + "\n" + tick + "\n", encoding="utf-8")
    before, = t.prepare(run, t.load_queries(qfile), embedder, qfile)
    assert t.retrieve_ids(before, recall, memory)[0] == said.id


def test_an_interview_lists_as_forgotten_only_what_it_would_have_recalled(embedder):
    """The forgotten memories an interview shows beside its answer are the ones the retrieval could have used: asked
    what Kofi told him, Bram's own forgotten line to Kofi is not among them, Kofi's is."""
    from types import SimpleNamespace

    from simulacra.interview import forgotten

    lines = [f'{BRAM} said to {KOFI}: "The wheel stopped with a crack."',
             f'{KOFI} said to {BRAM}: "The wheel needs a new bracket."']
    ticks = [{"time": 600, "memory": [{"op": "forget", "agent": "bram", "id": f"m{i}", "text": t, "tier": "short_term",
                                       "reason": "decayed"} for i, t in enumerate(lines)]}]
    holds = SimpleNamespace(tiers={"short_term": SimpleNamespace(records=[]), "long_term": SimpleNamespace(records=[])})
    question = "What did Kofi tell you about the wheel?"
    cue = speech_cue(MemoryConfig().query_text(question, BRAM, "second"))
    assert {m["id"] for m in forgotten(ticks, "bram", holds, embedder, question, 0.0, "l2")} == {"m0", "m1"}
    assert [m["id"] for m in forgotten(ticks, "bram", holds, embedder, question, 0.0, "l2", cue=cue)] == ["m1"]
    # held when asked (an earlier tick) and forgotten since: the same rule
    added = [{"time": 500, "memory": [{"op": "add", "agent": "bram", "id": f"m{i}", "text": t, "kind": "dialogue"}
                                      for i, t in enumerate(lines)]}]
    later = forgotten(added, "bram", holds, embedder, question, 0.0, "l2", now=550, later=ticks, cue=cue)
    assert [(m["id"], m["later"]) for m in later] == [("m1", True)]


def test_the_scripted_answer_quotes_the_lines_said_the_asked_way_first():
    """After `make run`, "What did Kofi tell you?" put to Bram retrieved a relationship fact and two bedtime plans
    ahead of Kofi's one line to him, and the scripted answer quoted those three: with the question's cue in the view,
    the lines said the way it asks come first, best first, then the rest."""
    from simulacra.cognition.mind import AgentView
    from simulacra.cognition.scripted import ScriptedMind
    from simulacra.persona import load_persona
    from tests.conftest import ROOT

    def memory(i: int, text: str) -> RetrievedMemory:
        return RetrievedMemory(id=f"m{i}", text=text, tier="long_term", kind="dialogue", recency=None,
                               importance=None, relevance=0.9 - i / 10, score=0.9 - i / 10)

    texts = [f"{BRAM} and {KOFI}: the blacksmith who keeps the old mill running.",
             f"{BRAM} plans to be going to sleep at Mill House from 22:00 to 07:00.",
             f'Greta Lund said to {BRAM}: "The tavern is full tonight."',
             f'{KOFI} said to {BRAM}: "We have been fitting the new bracket."',
             f'{KOFI} said to Greta Lund: "The forge is hot."']
    bram = load_persona(ROOT / "simulacra" / "assets" / "agent_personalities" / "bram_ostrowski.json")
    view = AgentView("bram_ostrowski", bram, 1380, "mill_house", tuple(memory(i, t) for i, t in enumerate(texts)),
                     {"bram_ostrowski": BRAM, "kofi_mensah": KOFI}, {"mill_house": "Mill House"})
    question = "What did Kofi tell you?"
    cue = speech_cue(MemoryConfig().query_text(question, BRAM, "second"))
    told = ScriptedMind().interview(replace(view, speech=cue), question).value
    assert told.memory_ids == ("m3", "m0", "m1") and told.text.startswith(f"What I remember: {KOFI} said to {BRAM}")
    assert ScriptedMind().interview(view, question).value.memory_ids == ("m0", "m1", "m2")  # no cue: best first
    anyone = ScriptedMind().interview(replace(view, speech=speech_cue(f"Who told {BRAM} about it?")), question).value
    assert anyone.memory_ids == ("m2", "m3", "m0")  # Greta's and Kofi's lines to him, not Kofi's to Greta


def test_an_interview_and_an_inspected_tick_say_which_lines_were_left_out():
    from simulacra.explain import format_explanation
    from simulacra.interview import format_interview
    from simulacra.memory.speech import describe_speech

    cue = speech_cue(f"What did Kofi tell {BRAM}?")
    assert cue is not None and cue.as_list() == ["Kofi", BRAM, f"did Kofi tell {BRAM}"]
    said = f'(asked what Kofi said to {BRAM}, named by "did Kofi tell {BRAM}": the lines said the other way left out)'
    assert f"({describe_speech(cue.as_list())})" == said
    assert describe_speech([None, BRAM, "Who told"]).startswith(f"asked what was said to {BRAM},")
    assert describe_speech(["Kofi", None, "did Kofi say"]).startswith("asked what Kofi said,")
    r = {"name": BRAM, "agent": "bram", "clock": "day 1 23:00", "question": "What did Kofi tell you?",
         "query": f"What did Kofi tell {BRAM}?", "answer": "…", "mind": "scripted", "source": "scripted", "used": [],
         "retrieved": [], "profile": "recall", "speech": cue.as_list()}
    assert said in format_interview(r) and said not in format_interview({**r, "speech": None})
    e = {"name": BRAM, "agent": "bram", "tick": 3, "clock": "20:15", "action": {"activity": "resting"},
         "place": "home", "perceived": [], "said": [], "heard": [], "remembered": [], "reflections": [],
         "moved": [], "reinforced": [], "forgotten": [], "posted": [],
         "retrieved": [{"purpose": "interview", "query": r["query"], "results": [], "speech": cue.as_list()}]}
    assert said in format_explanation(e)
