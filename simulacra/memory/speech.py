"""Who spoke to whom, as a question names it (its *speech cue*), for retrievals (``memory.speech_roles``;
``docs/memory.md``, "Who said it to whom").

A resident remembers every line of a conversation it had, said and heard alike, as ``<speaker> said to <listener>:
"<line>"`` (the tick's dialogue memory), and a conversation's summary as ``<a> talked with <b> at <place>. <b> told
<a>: <news>.``. Asked "What did Kofi tell you?", Bram's memories of what *he* told Kofi hold the same words as what
Kofi told him: dense and BM25 relevance read a text as a bag of words and cannot tell the direction, so Bram's own
lines answer the question as well as Kofi's (measured on the labelled ``said`` and ``who`` questions of
``data/queries``: docs/memory.md). A question that names who spoke or who listened asks about the lines said that
way; a retrieval with ``speech_roles`` on leaves out the memories of lines said the other way (:func:`contradicts`)
and keeps every other memory: observations, events, plans, reflections, and the lines between others (what Greta
told Bram about Kofi may answer "What did Kofi tell you?"). This is a filter, not a score: the memories it leaves
out are not among the results or the candidates.

What is read (English; a *name* is a run of capitalised words, as the question names a resident, or the resident's
own name that :func:`simulacra.memory.perspective.third_person` put in for "I", "me" and "you"):

* "did <name> tell <name>", "did <name> say to <name>", "has <name> told <name>", "was <name> telling <name>"
  ("What did Kofi tell Bram about the bracket?", "When did Greta say to Ruth ...?"): both;
* "was <name> told (by <name>)" ("What were you told by Kofi?"): the listener (and the speaker);
* "did <name> say", "did <name> tell" with no name after it, "was <name> saying" ("What did Kofi say about the
  burn?", "Whom did Bram tell about the rider?"): the speaker alone;
* "Who told <name>", "Who said to <name>", "Who spoke to <name>", "Who was talking / speaking / telling to
  <name>": the listener alone.

Only a question is read (it ends with "?"): a statement used as a query, such as a memory's text that a reflection
takes as its focal point ("Ezra Pike said to Bram Ostrowski: ..."), asks about the whole talk. A side that is not a
name ("What did the blacksmith tell Bram?", "What did someone tell me?" without third-person queries), a
possessive ("What did you tell Kofi's wife?") or one of several people ("What did Kofi say to Greta and Ruth?") is
not read, and the other side still is. A question whose words name more than one direction ("Did you tell Kofi, or
did Kofi tell you?") is no cue, and neither are "Who did I talk to", "What did we talk about" and the present tense
("Does Kofi tell stories?"): a talk goes both ways, and a habit is not a line.

A memory's sides are read from the formats simulacra writes (:func:`speech_pairs`): a dialogue memory ``S said to L:
"..."``, a line of an imported or benchmark conversation ``S said: "..."`` (the listener unknown), a fact told ``S
told L: ...`` (a recall scenario's visitor), a notice ``S spread the word at P: ...`` (news told at a public place,
said to whoever was there), and each sentence ``S told L: ...`` of a conversation summary that begins with
simulacra's frame ``A talked with B at P.``; a side that is a pronoun or not capitalised is unknown ("Ezra told me:
..."). A memory with no pair is never left out, nor one with a pair that does not go the other way
(:func:`said_the_other_way`): with both sides named, a line said *by* the cue's listener (to its speaker, or to
someone unknown); with the speaker alone, a line said *to* the speaker; with the listener alone, a line said *by*
the listener. So a misread side leaves out nothing it does not name. Two names are the same person when the words of
one are all words of the other, accents, case and titles aside (:func:`same_person`: "Kofi" and "Kofi Mensah", "Ada
Wrobel" and "Ada Wróbel", "Mr Brekke" and "Lars Brekke", and so Solveig Brekke too: a family name alone matches the
whole family; "Ada Wróbel" is not "Tomasz Wróbel").
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from simulacra.text import STOP_WORDS

#: an upper-case letter (Latin, with its accented forms): where a name begins
_UPPER = "A-ZÀ-ÖØ-Þ\u0100-\u017f"
#: a name as a question or a memory writes it: capitalised words ("Kofi Mensah", "Tomasz Wróbel", "Tam McLeod",
#: "O'Neill", "Ólafur"), at most five
_NAME = rf"[{_UPPER}][\w'’.-]*(?:[ \t]+[{_UPPER}][\w'’.-]*){{0,4}}"
#: the words of a side that are not a name even when capitalised (a sentence may start with them)
_NOT_NAMES = frozenset("i me you we us he him she her they them it who whom what someone anyone somebody anybody "
                       "everyone everybody nobody people".split())
_ADVERBS = r"(?:(?i:ever|last|first|just|already|really|actually)\s+)?"
#: a side that a determiner begins ("the blacksmith", "his wife"): read past, not a name
_PHRASE = r"(?i:the|a|an|my|your|his|her|our|their)\s+[\w'’-]+"
#: a question's own words for who spoke, in the past: "did <s> tell <l>", "did <s> say to <l>", "did <s> say",
#: "has <s> told <l>", "was <s> telling <l>", "was <s> saying"
_ASKED = re.compile(
    rf"\b(?:(?i:did)\s+(?P<s1>{_NAME}|{_PHRASE})\s+{_ADVERBS}(?:(?i:tell)\b(?:\s+(?P<l1>{_NAME}))?"
    rf"|(?i:say)\b(?:\s+(?i:to)\s+(?P<m1>{_NAME}))?)"
    rf"|(?i:has|have|had)\s+(?P<s2>{_NAME}|{_PHRASE})\s+{_ADVERBS}(?:(?i:told)\b(?:\s+(?P<l2>{_NAME}))?"
    rf"|(?i:said)\b(?:\s+(?i:to)\s+(?P<m2>{_NAME}))?)"
    rf"|(?i:was|were)\s+(?P<s3>{_NAME}|{_PHRASE})\s+{_ADVERBS}(?:(?i:telling)\b(?:\s+(?P<l3>{_NAME}))?"
    rf"|(?i:saying)\b(?:\s+(?i:to)\s+(?P<m3>{_NAME}))?))")
#: the passive: "was <l> told (by <s>)", "were <l> told"
_PASSIVE = re.compile(rf"\b(?i:was|were|been|is|are|got|get)\s+(?P<l>{_NAME})\s+{_ADVERBS}(?i:told)\b"
                      rf"(?:\s+(?i:about\s+[^?]*?\s+)?(?i:by)\s+(?P<s>{_NAME}))?")
#: "Who told <l>", "Who was talking to <l>"
_LISTENER = re.compile(
    rf"\b(?i:who)\s+(?i:told|has\s+told|had\s+told|said\s+to|spoke\s+to|was\s+talking\s+to|was\s+speaking\s+to"
    rf"|was\s+telling)\s+(?P<l>{_NAME})")
#: what follows a side that names more than one person ("Kofi and Greta", "Kofi, or Greta")
_MORE = re.compile(r"\s*,?\s*(?i:and|or|nor)\b")

#: a dialogue memory ``S said to L: "..."`` and a conversation's line ``S said: "..."``: the sides, then the words
#: (``q``), without the closing quote when there is one (:func:`read_dialogue`)
_SAID = re.compile(r'^(?P<s>[^:"\n]{1,80}?) said(?: to (?P<l>[^:"\n]{1,80}?))?:\s*["“](?P<q>.*?)(?:["”]\s*)?$', re.S)
#: a fact told by someone, ``S told L: "..."``, at the text's start (a recall scenario's visitor)
_TOLD_FIRST = re.compile(r'^(?P<s>[^.:"\n]{1,80}?) told (?P<l>[^.:"\n]{1,80}?): ')
#: a word spread in public, ``S spread the word at P: ...`` (the shared tier's notice of news told at a public
#: place, :func:`simulacra.tick.converse_stage`): said by S to whoever was there
_SPREAD = re.compile(r'^(?P<s>[^:"\n]{1,80}?) spread the word at [^:"\n]{1,80}?: ')
#: the frame of simulacra's conversation summary, ``A talked with B at P.`` and the space after it, when more follows
#: (:meth:`simulacra.cognition.scripted.ScriptedMind.summarise_conversation` writes it): the one pattern of it, read
#: here, by the reflections' quotes (:mod:`simulacra.rating.reflection`) and by the label generator
TALK_FRAME = re.compile(r"^(?P<a>[^.:\"]{1,80}?) talked with (?P<b>[^.:\"]{1,80}?) at [^:\"]{1,80}?\.\s+(?=\S)")
#: each sentence ``S told L:`` after it
_TOLD = re.compile(r'(?<=[.!?] )(?P<s>[^.:"\n]{1,80}?) told (?P<l>[^.:"\n]{1,80}?):(?= |$)')


@dataclass(frozen=True)
class DialogueLine:
    """One line of a conversation as a memory holds it: ``speaker`` said ``words`` to ``listener`` (``None``: a
    line ``S said: "..."`` of an imported or benchmark conversation, the listener unknown). Names as written."""

    speaker: str
    listener: str | None
    words: str

    @property
    def text(self) -> str:
        """The memory's text: ``S said to L: "words"`` (``S said: "words"`` without a listener), the one format of
        a dialogue memory (written by :func:`simulacra.tick.converse_stage`, rebuilt by the label generator)."""
        to = f" to {self.listener}" if self.listener is not None else ""
        return f'{self.speaker} said{to}: "{self.words}"'


def read_dialogue(text: str) -> DialogueLine | None:
    """The line a dialogue memory's ``text`` holds (:attr:`DialogueLine.text`'s format: ``S said to L: "..."`` or
    ``S said: "..."``, surrounding whitespace aside, a curly opening quote accepted), ``None`` for any other text;
    the closing quote is not part of the words."""
    m = _SAID.match(text.strip())
    if m is None:
        return None
    return DialogueLine(m.group("s"), m.group("l"), m.group("q"))


@dataclass(frozen=True)
class SpeechCue:
    """The sides of a talk a question names (module docstring): ``speaker`` and ``listener`` as the question writes
    them (``None``: not named), at least one of them set, and ``words``, the words that named them (for the
    trace and the docs)."""

    speaker: str | None
    listener: str | None
    words: str

    def as_list(self) -> list:
        """The trace's form, ``[speaker, listener, words]`` (a retrieve operation's ``speech``)."""
        return [self.speaker, self.listener, self.words]


def describe_speech(speech: Sequence) -> str:
    """A cue in words, from its trace form ``[speaker, listener, words]``: ``'asked what Kofi said to Bram, named by
    "did Kofi tell Bram": the lines said the other way left out'``."""
    speaker, listener, words = speech[:3]
    if speaker and listener:
        what = f"what {speaker} said to {listener}"
    else:
        what = f"what {speaker} said" if speaker else f"what was said to {listener}"
    return f'asked {what}, named by "{words}": the lines said the other way left out'


def _side(question: str, m: re.Match[str], group: str) -> str | None:
    """Side ``group`` of match ``m`` as a name, or ``None``: not matched, not a name (a pronoun, "the blacksmith"),
    a possessive ("Kofi's wife"), or one of several people ("Kofi and Greta")."""
    side = m.group(group)
    if side is None or _MORE.match(question, m.end(group)):
        return None
    words = side.split()
    while words and words[-1].lower() in _NOT_NAMES:  # "Kofi tell me" read as far as the name
        words.pop()
    if (not words or words[0].lower() in _NOT_NAMES or not words[0][0].isupper()
            or words[-1].lower().endswith(("'s", "’s", "'", "’"))):
        return None
    return " ".join(words)


def typed_question(question: str, names: Iterable[str]) -> str:
    """A question as a person types it, made readable for its cue (an interview's: it is a question, and it names
    residents of the run): a word of one of ``names`` (the residents' names) typed in lower case is written as the
    name writes it ("what did kofi tell you" -> "what did Kofi tell you?"), unless it is a common word
    (:data:`simulacra.text.STOP_WORDS`: "will"); and a question mark is put at its end when it has none. The lexical
    relevance, which lower-cases, and the embedding (all-MiniLM-L6-v2 is uncased) read it alike; the cue and the
    third-person rule, which read names as capitalised words, now read these too. A misspelt name stays unread."""
    words: dict[str, str] = {}
    for name in names:
        for word in name.split():
            if len(word) > 1 and word[0].isupper() and word.lower() not in STOP_WORDS:
                words.setdefault(word.lower(), word)
    if words:
        question = re.sub(r"(?<![\w'’-])[a-zà-ÿ][\w'’-]*", lambda m: words.get(m.group(), m.group()), question)
    stripped = question.rstrip()
    return stripped if stripped.endswith("?") or not stripped else stripped + "?"


@lru_cache(maxsize=4096)
def speech_cue(question: str | None) -> SpeechCue | None:
    """The speech cue of ``question`` (the text the lexical relevance matches: in the third person under
    ``memory.third_person_queries``), or ``None`` when it names no side of a talk, names several that disagree
    ("Did you tell Kofi, or did Kofi tell you?"), or is not a question (it does not end with "?": a memory's text
    used as a query, as a reflection's focal point is, retrieves the whole talk; module docstring)."""
    if not question or not question.rstrip().endswith("?"):
        return None
    found: dict[tuple[str | None, str | None], str] = {}
    for m in _ASKED.finditer(question):
        n = next(i for i in "123" if m.group("s" + i) is not None)
        speaker = _side(question, m, "s" + n)
        listener = _side(question, m, "l" + n) or _side(question, m, "m" + n)
        if speaker or listener:
            found.setdefault((speaker, listener), m.group(0))
    for m in _PASSIVE.finditer(question):
        speaker, listener = _side(question, m, "s"), _side(question, m, "l")
        if speaker or listener:
            found.setdefault((speaker, listener), m.group(0))
    for m in _LISTENER.finditer(question):
        if listener := _side(question, m, "l"):
            found.setdefault((None, listener), m.group(0))
    if len(found) != 1:  # none, or several that may disagree
        return None
    (speaker, listener), words = next(iter(found.items()))
    return SpeechCue(speaker, listener, words)


def _known(side: str | None) -> str | None:
    """A memory's side as a name, or ``None`` (unknown): a pronoun ("Ezra told me"), a lower-case phrase."""
    if side is None:
        return None
    side = side.strip()
    if not side or side.split()[0].lower() in _NOT_NAMES or not side[0].isupper():
        return None
    return side


@lru_cache(maxsize=65536)
def speech_pairs(text: str) -> tuple[tuple[str | None, str | None], ...]:
    """The ``(speaker, listener)`` pairs a memory's text states, in the formats simulacra writes (``None``: a side
    unknown or not a name): a dialogue memory ``S said to L: "..."`` or a line ``S said: "..."``; a fact told ``S
    told L: ...``; a notice ``S spread the word at P: ...`` (to whoever was there); and each sentence ``S told L:
    ...`` of a conversation summary that begins ``A talked with B at P.``; ``()`` when it states none (module
    docstring)."""
    m = _SAID.match(text)
    if m:
        return ((_known(m.group("s")), _known(m.group("l"))),)
    m = _TOLD_FIRST.match(text)
    if m:
        return ((_known(m.group("s")), _known(m.group("l"))),)
    m = _SPREAD.match(text)
    if m:
        return ((_known(m.group("s")), None),)
    if not TALK_FRAME.match(text):
        return ()
    return tuple((_known(t.group("s")), _known(t.group("l"))) for t in _TOLD.finditer(text))


#: words before a name that are not part of it
_TITLES = frozenset("mr mrs ms miss mx dr doctor old young little father mother sister brother uncle aunt "
                    "captain skipper reverend master mistress".split())


@lru_cache(maxsize=16384)
def _words(name: str) -> frozenset[str]:
    """A name's words, compared: accents, case, a possessive and the apostrophe's form aside, titles left out."""
    plain = "".join(c for c in unicodedata.normalize("NFKD", name.replace("’", "'"))
                    if not unicodedata.combining(c)).casefold()
    words = (w.strip("'.-").removesuffix("'s") for w in plain.split())
    return frozenset(w for w in words if w and w not in _TITLES)


def same_person(a: str | None, b: str | None) -> bool:
    """Whether two names may name the same resident: the words of one are all words of the other, accents, case and
    titles aside ("Kofi" and "Kofi Mensah", "Ada Wrobel" and "Ada Wróbel", "Mr Brekke" and "Lars Brekke"; not "Ada
    Wróbel" and "Tomasz Wróbel"); ``False`` when either is unknown (``None``)."""
    if a is None or b is None:
        return False
    x, y = _words(a), _words(b)
    return bool(x and y) and (x <= y or y <= x)


def said_the_other_way(cue: SpeechCue, speaker: str | None, listener: str | None) -> bool:
    """Whether a line ``speaker`` said to ``listener`` (``None``: unknown) goes the other way than ``cue`` asks:
    with both sides named, said by the cue's listener (to its speaker, or to someone unknown); with the speaker
    alone, said to the cue's speaker; with the listener alone, said by the cue's listener. A line between others,
    or one whose sides are unknown, does not."""
    if cue.speaker is not None and cue.listener is not None:
        return same_person(cue.listener, speaker) and (listener is None or same_person(cue.speaker, listener))
    if cue.speaker is not None:
        return same_person(cue.speaker, listener)
    return same_person(cue.listener, speaker)


def said_the_asked_way(cue: SpeechCue | None, text: str) -> bool:
    """Whether the memory ``text`` states a line said the way ``cue`` asks about: by its speaker (any, when it names
    none) to its listener (any, when it names none, or unknown); ``False`` without a cue."""
    if cue is None:
        return False
    return any((cue.speaker is None or same_person(cue.speaker, speaker))
               and (cue.listener is None or listener is None or same_person(cue.listener, listener))
               and (cue.speaker is not None or not same_person(cue.listener, speaker))
               for speaker, listener in speech_pairs(text))


def contradicts(cue: SpeechCue | None, text: str) -> bool:
    """Whether the memory ``text`` states a talk and every pair of it (:func:`speech_pairs`) goes the other way
    (:func:`said_the_other_way`): a memory a retrieval with ``speech_roles`` on leaves out. ``False`` without a
    cue or for a memory that states no talk."""
    if cue is None:
        return False
    pairs = speech_pairs(text)
    return bool(pairs) and all(said_the_other_way(cue, speaker, listener) for speaker, listener in pairs)
