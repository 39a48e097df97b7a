"""Who spoke to whom, as a question names it (its *speech cue*), for retrievals (``memory.speech_roles``;
``docs/memory.md``, "Who said it to whom").

A resident remembers every line of a conversation it had, said and heard alike, as ``<speaker> said to <listener>:
"<line>"`` (the tick's dialogue memory), and a conversation's summary as ``<a> talked with <b> at <place>. <b> told
<a>: <news>.``. Asked "What did Kofi tell you?", Bram's memories of what *he* told Kofi hold the same words as what
Kofi told him: dense and BM25 relevance read a text as a bag of words and cannot tell the direction, so Bram's own
lines answer the question as well as Kofi's (measured on the labelled ``said`` and ``who`` questions of
``data/queries``: docs/memory.md). A question that names who spoke or who listened asks about the lines said that
way; a retrieval with ``speech_roles`` on leaves out the memories of lines said the other way (:func:`contradicts`),
and keeps every other memory (observations, events, plans, reflections, what someone said to a third person that
the resident overheard as a line told it...). This is a filter, not a score: the memories it leaves out are not
scored lower, they are not among the candidates, as memories formed after a query's time are not.

What is read (English; a *name* is a run of capitalised words, as the question names a resident, or the resident's
own name that :func:`simulacra.memory.perspective.third_person` put in for "I", "me" and "you"):

* ``<name> told <name>``, ``<name> said to <name>``, "did <name> tell <name>", "did <name> say to <name>", "was
  <name> telling <name>" ("What did Kofi tell Bram about the bracket?", "When did Greta say to Ruth ...?"): both;
* "did <name> say", "was <name> saying" ("What did Kofi say about the burn?"): the speaker alone;
* "Who told <name>", "Who said to <name>", "Who spoke to <name>", "Who was talking / speaking to <name>": the
  listener alone (the speaker is anyone else);
* "Whom / Who did <name> tell", "What did <name> tell" without a name after it: the speaker alone (the listener
  is anyone else).

Only a question is read (it ends with "?" or begins with a question word): a statement used as a query, such as a
memory's text that a reflection takes as its focal point ("Ezra Pike said to Bram Ostrowski: ..."), asks about the
whole talk. A side that is not a name ("What did the blacksmith tell Bram?", "What did someone tell me?" without
third-person queries) is not read as a name, and the other side still is ("Bram" there). "Who did I talk to",
"What did we talk about" and "talked with" name no direction (a talk goes both ways) and are no cue.

A memory's sides are read from the formats simulacra writes (:func:`speech_pairs`): a dialogue memory ``S said to
L: "..."``, a line of an imported or benchmark conversation ``S said: "..."`` (the listener unknown), and each
sentence ``S told L: ...`` of a conversation summary or of a fact told by a visitor. A memory with none of these is
never left out. A memory contradicts a cue when none of its pairs agrees with it: a pair agrees when its speaker is
the cue's speaker (any speaker but the cue's listener when the cue names only the listener) and its listener is the
cue's listener (or unknown). Two names agree when the words of one are all words of the other, case and titles
aside (:func:`same_person`: "Kofi" and "Kofi Mensah", "Mr Brekke" and "Lars Brekke", and so Solveig Brekke too: a
family name alone keeps the whole family's lines, since leaving a right memory out costs more than keeping a wrong
one; "Ada Wróbel" is not "Tomasz Wróbel").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

#: a name as a question or a memory writes it: capitalised words ("Kofi Mensah", "Tomasz Wróbel", "Tam McLeod",
#: "O'Neill"), at most five
_NAME = r"[A-Z][\w'’.-]*(?:[ \t]+[A-Z][\w'’.-]*){0,4}"
#: the words of a question's side that are not a name even when capitalised (a sentence may start with them)
_NOT_NAMES = frozenset("i me you we us he him she her they them it who whom what someone anyone somebody anybody "
                       "everyone everybody nobody people".split())

#: a question's own words for who spoke: "did <s> tell <l>", "was <s> telling", "did <s> say to <l>", "did <s> say"
_ASKED = re.compile(
    rf"\b(?i:did|does|do|has|have|had|was|were|is)\s+(?P<s>{_NAME}|(?i:the|a|an|my|your|his|her|our|their)\s+[\w'’-]+)\s+(?:(?i:ever|last|first|just|already)\s+)?"
    rf"(?:(?i:tell|tells|telling|told)\b(?:\s+(?P<l>{_NAME})\b)?"
    rf"|(?i:say|says|saying|said)\b(?:\s+(?i:to)\s+(?P<l2>{_NAME})\b)?)")
#: "<s> told <l>", "<s> said to <l>"
_STATED = re.compile(rf"(?P<s>{_NAME})\s+(?:told|said\s+to)\s+(?P<l>{_NAME})\b")
#: "Who told <l>", "Who was talking to <l>"
_LISTENER = re.compile(
    rf"\b(?i:who)\s+(?i:told|has\s+told|had\s+told|said\s+to|spoke\s+to|was\s+talking\s+to|was\s+speaking\s+to"
    rf"|was\s+telling)\s+(?P<l>{_NAME})\b")

#: a question: it ends with "?" or begins with a question word -- not a statement used as a query (a reflection's
#: focal point "Ezra Pike said to Bram Ostrowski: ..." retrieves the whole talk, both ways)
_QUESTION = re.compile(r"\?\s*$|^\s*(?i:who|whom|whose|what|which|when|where|why|how|did|do|does|was|were|has|have|had"
                       r"|is|are|can|could|would)\b")
#: a dialogue memory ``S said to L: "..."`` and a conversation's line ``S said: "..."``, at the text's start
_SAID = re.compile(r'^(?P<s>[^:"\n]{1,80}?) said(?: to (?P<l>[^:"\n]{1,80}?))?: ["“]')
#: a sentence ``S told L: ...`` (a conversation summary's, a fact told by a visitor)
_TOLD = re.compile(r'(?:^|(?<=[.!?] ))(?P<s>[^.:"\n]{1,80}?) told (?P<l>[^.:"\n]{1,80}?):(?= |$)')


@dataclass(frozen=True)
class SpeechCue:
    """The sides of a talk a question names (module docstring): ``speaker`` and ``listener`` as the question writes
    them (``None``: not named), at least one of them set, and ``words``, the words that named them (for the
    trace and the docs)."""

    speaker: str | None
    listener: str | None
    words: str


def _name(side: str | None) -> str | None:
    """A question's side as a name, or ``None`` when it is not one (a pronoun, "the blacksmith")."""
    if side is None:
        return None
    words = side.split()
    while words and words[-1].lower() in _NOT_NAMES:  # "Kofi tell me" read as far as the name
        words.pop()
    if not words or words[0].lower() in _NOT_NAMES or not words[0][0].isupper():
        return None
    return " ".join(words)


@lru_cache(maxsize=4096)
def speech_cue(question: str | None) -> SpeechCue | None:
    """The speech cue of ``question`` (the text the lexical relevance matches: in the third person under
    ``memory.third_person_queries``), or ``None`` when it names no side of a talk or is not a question (it neither
    ends with "?" nor begins with a question word: a memory's text used as a query, as a reflection's focal point
    is, retrieves the whole talk; module docstring)."""
    if not question or not _QUESTION.search(question):
        return None
    m = _ASKED.search(question)
    if m:
        speaker, listener = _name(m.group("s")), _name(m.group("l") or m.group("l2"))
        if speaker or listener:
            return SpeechCue(speaker, listener, m.group(0))
    m = _STATED.search(question)
    if m:
        speaker, listener = _name(m.group("s")), _name(m.group("l"))
        if speaker or listener:
            return SpeechCue(speaker, listener, m.group(0))
    m = _LISTENER.search(question)
    if m and (listener := _name(m.group("l"))):
        return SpeechCue(None, listener, m.group(0))
    return None


@lru_cache(maxsize=65536)
def speech_pairs(text: str) -> tuple[tuple[str, str | None], ...]:
    """The ``(speaker, listener)`` pairs a memory's text states (listener ``None`` when unknown): its dialogue line
    ``S said to L: "..."`` or ``S said: "..."`` at the start, and every sentence ``S told L: ...``; ``()`` when it
    states none (module docstring)."""
    m = _SAID.match(text)
    if m:
        return ((m.group("s").strip(), None if m.group("l") is None else m.group("l").strip()),)
    return tuple((t.group("s").strip(), t.group("l").strip()) for t in _TOLD.finditer(text))


#: words before a name that are not part of it
_TITLES = frozenset("mr mrs ms miss mx dr doctor old young little father mother sister brother uncle aunt "
                    "captain skipper reverend master mistress".split())


def _words(name: str) -> frozenset[str]:
    words = (w.strip("'’.-").casefold() for w in name.split())
    return frozenset(w for w in words if w and w not in _TITLES)


def same_person(a: str, b: str) -> bool:
    """Whether two names may name the same resident: the words of one (case and titles aside) are all words of the
    other ("Kofi" and "Kofi Mensah", "Mr Brekke" and "Lars Brekke"; not "Ada Wróbel" and "Tomasz Wróbel")."""
    x, y = _words(a), _words(b)
    return bool(x and y) and (x <= y or y <= x)


def agrees(cue: SpeechCue, speaker: str, listener: str | None) -> bool:
    """Whether a line ``speaker`` said to ``listener`` (``None``: unknown) is said the way ``cue`` asks about."""
    if cue.speaker is not None and not same_person(cue.speaker, speaker):
        return False
    if cue.listener is not None:
        if listener is not None:
            return same_person(cue.listener, listener)
        return cue.speaker is not None or not same_person(cue.listener, speaker)
    return True


def contradicts(cue: SpeechCue | None, text: str) -> bool:
    """Whether the memory ``text`` states a talk and none of its pairs (:func:`speech_pairs`) agrees with ``cue``:
    a memory a retrieval with ``speech_roles`` on leaves out. ``False`` without a cue or for a memory that states
    no talk."""
    if cue is None:
        return False
    pairs = speech_pairs(text)
    return bool(pairs) and not any(agrees(cue, speaker, listener) for speaker, listener in pairs)
