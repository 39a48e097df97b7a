"""A question put in the third person before retrieval: its pronouns of the resident replaced by the resident's name;
and a world event put in the resident's first person before rating.

A resident's memories are written in the third person ("Greta Lund said to Kofi Mensah: ...", "Greta Lund plans to
...", "Kofi Mensah is at the forge"), as the Generative Agents paper's memory stream is. The questions that retrieve
from them are not: an interviewer asks the resident in the second person ("Who told you about the rider?", "What did
you tell Kofi?"), and a resident's own question, as the labelled queries of ``simulacra.labels`` put it, is in the
first ("Who told me about the rider?"). Neither "you" nor "me" is in any memory, so the words that say whose memory
answers (the resident's own name, said by the memories of what it said, heard and planned) are missing from the
question's dense and BM25 relevance, and a sighting of someone else or a notice on the board wins over the resident's
own conversation. :func:`third_person` names the resident instead ("Who told Greta Lund about the rider?").

The name is matched by the lexical (BM25) relevance only; the question is embedded as asked (:func:`embedded`).
In BM25 the name weighs what it is rare in the resident's own store; in the embedding it moves the whole question
towards the resident, whose persona facts, routines and plans then come in. Measured on the one- and two-day
labelled queries of ``data/queries`` (docs/memory.md, "Questions in the third person"; 387 queries), under the
recall profile, nDCG@k: as asked 0.744 (held out 0.755), named in the embedding and in BM25 0.781 (0.768), named
in BM25 only 0.798 (0.787; "who" questions 0.457 -> 0.575, no category fell); on the thirty-day labels
(``data/queries-30days``) 0.844 (0.818), 0.922 (0.923) and 0.921 (0.921).

The name is put in only where the memories that answer name the resident, which is not every kind: what it said,
heard, planned and reflected on name it ("Ben Brook said to Ann Archer: ...", "Ann Archer plans to ..."), but what
it saw does not (an observation is written without its observer: "Kofi Mensah is at the forge"). A question about
what the resident saw, watched, noticed, observed, looked at, spotted or witnessed (:data:`PERCEIVING`) is left as
asked: naming the resident there favours the memories of itself over the sighting asked about ("What did I see Kofi
doing at 15:30?" lost 0.045 nDCG on the questions that name a time when it was named, and the rest gained).

:func:`own_perspective` goes the other way, for rating: a world event that names the resident ("burns the
blacksmith's forearm") put in its first person ("burns my forearm"), so that the offline rater, which reads text
alone, rates it as the resident's own experience (``memory.rate_from_perspective``).

The rules are word rules for English, not a parser: the pronouns of the person given, whatever the case of their
first letter, and the verb right after a subject pronoun when it is *am*, *are*, *were*, *have* or *was*, or right
before an inverted one when it is *am*, *are*, *were*, *have* or *do* ("do you" -> "does Ann Archer"); negative forms
("aren't you") and other verbs keep their form ("Ann Archer don't"), which BM25 does not read (the embedding is of the
question as asked). The
other person's pronouns (in an interview, the interviewer's "I"), "we" and quoted speech inside the question are not
told apart: a "you" inside a quote is named too. A resident's name is put in after all rules ran, so no rule reads
it; another resident's name that holds a pronoun as a word ("My Tran") is not told apart either.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from simulacra.text import POSSESSIVE, PRONOUN_SETS, first_person, name_reference, verb_after_i

if TYPE_CHECKING:
    from simulacra.persona import Persona

#: whose pronouns name the resident: the first person (its own question) or the second (a question put to it)
Person = Literal["first", "second"]

#: a question about what the resident perceived: its answers, observations, do not name it (module docstring)
PERCEIVING = re.compile(r"\b(?:see|sees|saw|seen|seeing|watch|watches|watched|watching|noticed|noticing|observe|"
                        r"observes|observed|observing|look|looks|looked|looking|spot|spotted|spotting|witness|"
                        r"witnessed|witnessing)\b", re.I)  # the verbs' forms only: not "watchman", "notice board"

#: where the name goes while the rules run (no rule matches it)
_NAME = "\x00"

_VERBS = {"am": "is", "are": "is", "were": "was", "have": "has", "do": "does", "was": "was"}


def _rules(pronoun: str, contracted: dict[str, str], possessive: tuple[str, ...], reflexive: str,
           objects: tuple[str, ...]) -> list[tuple[re.Pattern[str], str]]:
    """The rules of one person, most specific first, as ``(pattern, replacement)``; ``{n}`` is the name."""
    subject = re.escape(pronoun)
    return [
        # contractions: "I'm", "you've", "you'll" (both apostrophes)
        *((re.compile(rf"\b{subject}['\u2019]{c}\b", re.I), f"{{n}} {full}") for c, full in contracted.items()),
        # inverted questions: "are you", "have you", "do you", "am I"
        (re.compile(rf"\b(am|are|were|have|do)\s+{subject}\b", re.I), "{verb} {n}"),
        # subject and verb: "you are", "I have", "you were"
        (re.compile(rf"\b{subject}\s+(am|are|were|have|was)\b", re.I), "{n} {verb}"),
        (re.compile(rf"\b{re.escape(reflexive)}\b", re.I), "{n}"),
        *((re.compile(rf"\b{re.escape(p)}\b", re.I), "{n}'s") for p in possessive),
        *((re.compile(rf"\b{re.escape(o)}\b", re.I), "{n}") for o in objects),
    ]


_RULES: dict[Person, list[tuple[re.Pattern[str], str]]] = {
    # not "mine": the mine of a mining town is asked about more often than what is the resident's
    "first": _rules("I", {"m": "is", "ve": "has", "ll": "will", "d": "would"}, ("my",), "myself", ("I", "me")),
    "second": _rules("you", {"re": "is", "ve": "has", "ll": "will", "d": "would"}, ("your", "yours"), "yourself",
                     ("you",)),
}


class Rewritten(str):
    """A question put in the third person (a ``str``: what the lexical relevance matches) that keeps the question as
    asked (:attr:`asked`). The words that name a time or ask for the latest are read from the question as asked
    (:meth:`MemoryConfig.dated <simulacra.config.MemoryConfig.dated>`): a name put in ("When did Siobhan O'Brien
    last talk with Ben?") must not hide "did you last" from them."""

    asked: str

    def __new__(cls, text: str, asked: str) -> Rewritten:
        out = super().__new__(cls, text)
        out.asked = asked
        return out

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]  # pickled with what it was asked as
        return str(self), self.asked


def asked(text: str) -> str:
    """The question as asked: :attr:`Rewritten.asked` of a rewritten question, else ``text`` itself."""
    return text.asked if isinstance(text, Rewritten) else text


def embedded(query: str) -> str:
    """The text a retrieval embeds for ``query`` (dense relevance): the question as asked (:func:`asked`). The
    resident's name that :func:`third_person` puts in is matched by the lexical (BM25) relevance only, where its
    weight is its rarity in the resident's own store; in the embedding it moves the whole question towards the
    resident (its persona facts, routines and own plans). Measured (module docstring; docs/memory.md): under the
    recall profile on the one- and two-day labels, naming it in both signals scored lower than in either one alone;
    on the thirty-day labels the three were within 0.002. The one place this is decided (interviews, their list of
    what was forgotten, recall probes, knowledge checks, ``simulacra tune``)."""
    return asked(query)


def third_person(text: str, name: str, person: Person) -> str:
    """``text`` with the ``person`` pronouns of the resident named ``name`` replaced by ``name`` (the module
    docstring has the rules): ``third_person("Who told you about the rider?", "Greta Lund", "second")`` ->
    ``"Who told Greta Lund about the rider?"``; ``"What am I planning at 13:20?"`` in the first person -> ``"What
    is Greta Lund planning at 13:20?"``, as a :class:`Rewritten` that keeps the question as asked. A text without
    such a pronoun, or one that asks what the resident perceived (:data:`PERCEIVING`: "What did you see at the
    forge?"), is returned as it is.

    Raises:
        ValueError: ``person`` is neither ``"first"`` nor ``"second"``, or ``name`` is blank.
    """
    if person not in _RULES:
        raise ValueError(f"person: expected 'first' or 'second', got {person!r}")
    if not name.strip():
        raise ValueError("name: expected the resident's name, got a blank one")
    if PERCEIVING.search(text):
        return text
    out = text
    for pattern, replacement in _RULES[person]:  # the name goes in last: no rule reads the names it put in
        out = pattern.sub(lambda m, r=replacement: r.format(n=_NAME, verb=_verb(m)), out)
    return text if out == text else Rewritten(out.replace(_NAME, name), text)


def _verb(match: re.Match[str]) -> str:
    """The third-person form of the verb a rule matched (its first letter's case kept), or ``""``."""
    if not match.groups():
        return ""
    word = match.group(1)
    verb = _VERBS[word.lower()]
    return verb.capitalize() if word[0].isupper() else verb


@lru_cache(maxsize=4096)
def _references(name: str, occupation: str, home: str, aliases: tuple[str, ...] = ()) -> tuple[str | None, str]:
    """:func:`own_perspective`'s patterns for one resident: its home's (``None`` without one) and its own (name,
    "the <occupation>" and its aliases, the longest phrase first)."""
    home_ref = None
    if home.strip():
        bare = re.sub(r"^the\s+", "", home.strip(), flags=re.I)
        home_ref = rf"\b(?:[Tt]he\s+)?{re.escape(bare)}\b"
    roles: list[tuple[int, str]] = []
    if occupation.strip():
        roles.append((len(occupation.strip()) + 4, rf"\b[Tt]he\s+(?i:{re.escape(occupation.strip())})\b"))
    for alias in (a.strip() for a in aliases if a.strip()):
        first = re.escape(alias[0])
        first = f"[{alias[0].upper()}{alias[0].lower()}]" if alias[0].isalpha() else first
        roles.append((len(alias), rf"(?<!\w){first}{re.escape(alias[1:])}(?!\w)"))
    ref = "(?:" + "|".join([p for _, p in sorted(roles, key=lambda r: -r[0])] + [name_reference(name)]) + ")"
    return home_ref, ref


#: where an "I" goes that is the subject of the next verb (:func:`_agree` makes the verb agree)
_SUBJECT = "\x01"
#: a clause's beginning: a reference to the resident there is its subject ("I"), elsewhere its object ("me")
_CLAUSE_START = r"(^|[.!?;:]\s+)"
#: a word between a subject and its verb that is no verb ("he always plunges", "she slowly opens")
_ADVERB = r"(?:[a-z]+ly|always|often|sometimes|never|then|also|just|still|soon|once|again)"
#: the words after a verb joined to the subject's by "and" that show it is a verb ("and grits my teeth"), not a noun
_OBJECT_START = (r"(?:my|me|the|a|an|his|her|its|their|our|this|that|these|those|some|every|any|anyone|everyone|"
                 r"someone|everybody|anybody|him|them|it|us|you|up|out|down|off|back)")


def _agree(text: str) -> str:
    """``text`` with each :data:`_SUBJECT` mark made "I" and its verb put in its form after "I"
    (:func:`simulacra.text.verb_after_i`: the next word, or the one after an adverb), and so each verb joined to it
    by "and" later in the same clause when an object follows ("I plunge my arm into the trough and grit my teeth")."""

    def clause(m: re.Match[str]) -> str:
        rest = re.sub(rf"\band ([a-z]+)(?=\s+{_OBJECT_START}\b)", lambda c: "and " + verb_after_i(c.group(1)),
                      m.group(3))
        return "I" + m.group(1) + verb_after_i(m.group(2)) + rest

    out = re.sub(rf"{_SUBJECT}(\s+(?:{_ADVERB}\s+)?)([A-Za-z]+)([^.;!?{_SUBJECT}]*)", clause, text)
    return out.replace(_SUBJECT, "I")


def own_perspective(text: str, name: str, occupation: str | None = None, home: str | None = None,
                    pronouns: str | None = None, aliases: tuple[str, ...] | list[str] = ()) -> str | None:
    """``text`` as the resident named ``name`` would tell it, or ``None`` when it does not concern the resident.

    The inverse of :func:`third_person`, for rating and for telling: the Generative Agents paper rates a memory's
    poignancy *for* the agent, given who it is, and a language model asked so rates "the blacksmith burns his forearm"
    higher for the blacksmith than for his neighbours. The offline rater rates text alone, and its labelled set rates
    what happened to the one who remembers it ("I was badly burned at the forge ...") above what happened to someone
    else ("The blacksmith burned his forearm ..."). So a memory that names the resident is also rated as the
    resident's own: its references to the resident in the first person (``memory.rate_from_perspective``, the rating
    the higher of the two). The scripted mind tells news that names its speaker in this form too
    (:func:`simulacra.cognition.scripted.tell`).

    What names the resident, as whole words: its full name or first name (:func:`simulacra.text.name_reference`:
    case-sensitive, the first name not before another capitalised word), "the <occupation>" as the persona writes it
    ("The blacksmith slips"; a compound occupation, "fisherman, skipper of the trawler Kittiwake", only as a whole:
    "the skipper" could be another skipper), each of ``aliases`` as written, its first letter in either case (the
    persona's ``aliases``: "the minister", "the skipper of the Kittiwake"), and ``home``, its home's name,
    case-sensitive ("Novak House"; a leading "The" of it too).

    How it is put in the first person (word rules for English, not a parser): a possessive ("Kofi's", "the
    blacksmith's", "James'") becomes "my" ("My" at the start of a sentence), the home "my home" ("My home"); a
    reference at a clause's start (a sentence's, or after ";" or ":"), or one a verb follows and none precedes ("At the
    service the minister reads"), becomes "I", the subject, and its verb agrees ("The innkeeper chalks" -> "I
    chalk", :func:`simulacra.text.verb_after_i`), any other "me" ("hands the blacksmith nails": "me", as a word in
    "s" before it reads as a verb). With ``pronouns``
    (the persona's set, :attr:`Persona.pronouns <simulacra.persona.Persona.pronouns>`), its pronouns after the first
    reference are the resident's too: "he" / "she" / "they" become "I" with the verb agreeing, and so a verb joined
    to it by "and" before an object ("he plunges his arm into the trough and grits his teeth" -> "I plunge my arm
    into the trough and grit my teeth"), the other forms "me", "my", "mine", "myself"
    (:func:`simulacra.text.first_person`). Known limits: a subject whose verb does not end in "s" ("the blacksmith
    laughed") becomes "me", an object before a plural noun with no verb in "s" before it ("gave Kofi tools") "I";
    a pronoun of another person of the same set after the reference ("Kofi greets
    Bram; he smiles") is taken for the resident's; a first name that is also a word ("Grace is said") is taken for
    the name. The rater reads meaning more than grammar; the told sentence reads well for the shipped events.

    Args:
        text: the memory.
        name: the resident's full name (its first word is its first name).
        occupation: :attr:`Persona.occupation <simulacra.persona.Persona.occupation>`; ``None`` or blank: not used.
        home: the name of the resident's home place; ``None`` or blank: not used.
        pronouns: the resident's pronoun set, ``"he"``, ``"she"`` or ``"they"``; ``None``: pronouns left as they are.
        aliases: other phrases that name the resident (:attr:`Persona.aliases <simulacra.persona.Persona.aliases>`).

    Returns:
        The text in the resident's perspective, or ``None`` when nothing in it names the resident.

    Raises:
        ValueError: ``name`` is blank.
    """
    if not name.strip():
        raise ValueError("name: expected the resident's name, got a blank one")
    home_ref, ref = _references(name, occupation or "", home or "", tuple(aliases))
    out = text
    if home_ref is not None:
        out = re.sub(rf"(^|[.!?]\s+){home_ref}", lambda m: m.group(1) + "\x04 home", out)
        out = re.sub(home_ref, "\x03 home", out)
    out = re.sub(rf"(^|[.!?]\s+){ref}{POSSESSIVE}", lambda m: m.group(1) + "\x04", out)
    out = re.sub(rf"{ref}{POSSESSIVE}", "\x03", out)
    out = re.sub(rf"{_CLAUSE_START}{ref}", lambda m: m.group(1) + _SUBJECT, out)
    # inside a clause, the subject where a verb follows ("At the service the minister reads"), unless a verb
    # precedes it ("hands the blacksmith nails": an object)
    out = re.sub(rf"(?<![a-z]s ){ref}(?=\s+(?P<next>[a-z]+)\b)",
                 lambda m: _SUBJECT if verb_after_i(m["next"]) != m["next"] else m.group(0), out)
    out = re.sub(ref, "\x02", out)
    if out == text:
        return None
    forms = PRONOUN_SETS.get(pronouns or "")
    if forms:  # its pronouns after the first reference to it are its own
        first = re.search(r"[\x01-\x04]", out)
        assert first is not None  # out != text: a reference was marked
        head, tail = out[:first.start()], out[first.start():]
        tail = re.sub(rf"(^|[.!?]\s+){forms[0].capitalize()}\b", lambda m: m.group(1) + _SUBJECT, tail)
        out = head + first_person(re.sub(rf"\b{forms[0]}\b", _SUBJECT, tail), pronouns)
    return _agree(out.replace("\x02", "me").replace("\x03", "my").replace("\x04", "My"))


def resident_view(text: str, persona: Persona, home: str | None) -> str | None:
    """:func:`own_perspective` of ``text`` for the resident ``persona`` (its name, occupation, pronouns and aliases;
    ``home``: the name of its home place), or ``None`` when the text does not name it. The one call the engine's
    rating (:func:`simulacra.tick.own_view`) and the scripted mind's telling (:func:`simulacra.cognition.scripted.tell`)
    make."""
    return own_perspective(text, persona.name, persona.occupation, home, persona.pronouns, tuple(persona.aliases))
