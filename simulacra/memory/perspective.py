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
from typing import TYPE_CHECKING, Literal, NamedTuple

from simulacra.text import (
    ADVERB,
    POSSESSIVE,
    PRONOUN_SETS,
    first_person,
    is_singular_verb,
    name_reference,
    verb_after_i,
)

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


class _Patterns(NamedTuple):
    """:func:`own_perspective`'s compiled patterns for one resident (:func:`_references`)."""

    home_start: re.Pattern[str] | None    # its home at a sentence's start ("My home"), and anywhere ("my home")
    home: re.Pattern[str] | None
    possessive_start: re.Pattern[str]     # "Kofi's" at a sentence's start ("My"), and anywhere ("my")
    possessive: re.Pattern[str]
    clause_start: re.Pattern[str]         # a reference at a clause's start: the subject ("I")
    followed: re.Pattern[str]             # a reference a word follows (``next``, after an adverb): subject or not
    any: re.Pattern[str]                  # any other reference: "me"


def _reference_sources(name: str, occupation: str, home: str, aliases: tuple[str, ...]) -> tuple[str | None, str]:
    """The pattern sources of one resident's references: its home's (``None`` without one) and its own (name, "the
    <occupation>" and its aliases, the longest phrase first)."""
    home_ref = None
    if home.strip():
        bare = re.sub(r"^the\s+", "", home.strip(), flags=re.I)
        home_ref = rf"\b(?:[Tt]he\s+)?{re.escape(bare)}\b"
    roles: list[tuple[int, str]] = []
    if occupation.strip():
        roles.append((len(occupation.strip()) + 4, rf"\b[Tt]he\s+(?i:{re.escape(occupation.strip())})\b"))
    for alias in (a.strip() for a in aliases if a.strip()):
        first = f"[{alias[0].upper()}{alias[0].lower()}]" if alias[0].isalpha() else re.escape(alias[0])
        roles.append((len(alias), rf"(?<!\w){first}{re.escape(alias[1:])}(?!\w)"))
    return home_ref, "(?:" + "|".join([p for _, p in sorted(roles, key=lambda r: -r[0])] + [name_reference(name)]) + ")"


@lru_cache(maxsize=65536)
def _mention(name: str, occupation: str, home: str, aliases: tuple[str, ...] = ()) -> re.Pattern[str]:
    """Any reference to one resident or its home, compiled once: the engine asks whether each memory telling news
    names its owner every tick, and most do not (one pattern a resident, kept for a town of tens of thousands)."""
    home_ref, ref = _reference_sources(name, occupation, home, aliases)
    return re.compile(ref if home_ref is None else f"{ref}|{home_ref}")


@lru_cache(maxsize=4096)
def _references(name: str, occupation: str, home: str, aliases: tuple[str, ...] = ()) -> _Patterns:
    """:func:`own_perspective`'s patterns for one resident a text names (:func:`_mention`), compiled once."""
    home_ref, ref = _reference_sources(name, occupation, home, aliases)
    return _Patterns(
        home_start=None if home_ref is None else re.compile(rf"(^|[.!?]\s+){home_ref}"),
        home=None if home_ref is None else re.compile(home_ref),
        possessive_start=re.compile(rf"(^|[.!?]\s+){ref}{POSSESSIVE}"),
        possessive=re.compile(rf"{ref}{POSSESSIVE}"),
        clause_start=re.compile(rf"{_CLAUSE_START}{ref}"),
        followed=re.compile(rf"{ref}(?=\s+(?:{ADVERB}\s+)?(?P<next>{_WORD}))"),
        any=re.compile(ref),
    )


#: a word in lower case, contracted forms too ("isn't"): what may follow a subject as its verb
_WORD = r"[a-z]+(?:['\u2019][a-z]+)?"
#: the marks of what a reference became while the rules run (no input holds them: they are removed first); the
#: subject "I" (:func:`_agree` makes its verb agree), "me", "my", "My"
_SUBJECT, _ME, _MY, _MY_START = "\x01", "\x02", "\x03", "\x04"
_MARKS = re.compile(r"[\x01-\x04]")
#: a clause's beginning: a reference to the resident there is its subject ("I"), elsewhere its object ("me")
_CLAUSE_START = r"(^|[.!?;:]\s+[\"\u201c]?)"
#: the words before a reference that begin a clause within a sentence: a reference after them is its subject
_CONJUNCTIONS = frozenset("""
after although and as because before but if once since so that then though until when whenever where whereas
while
""".split())
#: the words a noun follows ("the docks", "on Sundays"): a word in "s" after them is no verb
_NOUN_BEFORE = frozenset("""
a across along an at behind beside by during every for from her his in into its my near no of on onto our over some
that the their these this those to under with your
""".split())
#: verbs in the past before a reference: it is their object ("told Kofi things"); and those in "-ed"
_PAST = frozenset("""
bought brought found gave heard kept left lent let made met paid saw sent showed sold taught told took
""".split())
#: the words after a verb joined to the subject's by "and" that show it is a verb ("and grits my teeth"), not a noun
_OBJECT_START = (r"(?:my|me|the|a|an|his|her|its|their|our|this|that|these|those|some|every|any|anyone|everyone|"
                 r"someone|everybody|anybody|him|them|it|us|you|up|out|down|off|back)")
#: where a clause's subject ends its reach: another clause begins with a conjunction ("... that Bram falls and breaks
#: a leg"); not at a comma, which often sets off a phrase of the same clause ("reads the banns, ..., and asks")
_CLAUSE_BREAK = re.compile(r"\b(?:" + "|".join(sorted(_CONJUNCTIONS - {"and", "so", "then"})) + r")\b")
#: a subject mark, its verb (after an adverb) and the rest of its clause (:func:`_agree`)
_SUBJECT_VERB = re.compile(rf"{_SUBJECT}(\s+(?:{ADVERB}\s+)?)([A-Za-z]+(?:['\u2019][a-z]+)?)([^.;!?{_SUBJECT}]*)")
#: a verb joined to the subject's by "and", an object after it (:func:`_agree`)
_AND_VERB = re.compile(rf"\band ([a-z]+)(?=\s+{_OBJECT_START}\b)")
#: a text already in someone's first person (outside quoted speech): not put in the resident's
_FIRST_PERSON_WORD = re.compile(r"\bI\b|\b(?:[Mm]e|[Mm]y|[Mm]ine|[Mm]yself)\b")
_QUOTED = re.compile(r"\"[^\"]*\"|\u201c[^\u201d]*\u201d")


def _is_subject(before: str, follows: str) -> bool:
    """Whether a reference inside a clause, after the text ``before`` and before the word ``follows`` (an adverb
    skipped), is the subject of that word: the word a verb in the singular ("reads", "is"), and the word before the
    reference no verb of which it would be the object. That word is a conjunction ("as Kofi falls": subject), a verb
    in the past ("told Kofi things": object) or in "s" not after a determiner or preposition ("hands the
    blacksmith nails": object; "at the docks Kofi waves": subject)."""
    if not is_singular_verb(follows):
        return False
    words = re.findall(r"[A-Za-z'\u2019]+", before)
    if not words:
        return True
    last = words[-1].lower()
    if last in _CONJUNCTIONS:
        return True
    if last in _PAST or last.endswith("ed"):
        return False
    after_noun_word = len(words) >= 2 and words[-2].lower() in _NOUN_BEFORE
    return not (last.endswith("s") and len(last) > 3 and not after_noun_word)


def _agree(text: str) -> str:
    """``text`` with each :data:`_SUBJECT` mark made "I" and its verb put in its form after "I"
    (:func:`simulacra.text.verb_after_i`: the next word, or the one after an adverb), and so each verb joined to it
    by "and" later in the same clause when an object follows ("I plunge my arm into the trough and grit my teeth"),
    up to where another clause begins ("that", "while", ...: "I hear that Bram falls and breaks a leg")."""

    def clause(m: re.Match[str]) -> str:
        rest = m.group(3)
        cut = _CLAUSE_BREAK.search(rest)
        reach, beyond = (rest[:cut.start()], rest[cut.start():]) if cut else (rest, "")
        reach = _AND_VERB.sub(lambda c: "and " + verb_after_i(c.group(1)), reach)
        return "I" + m.group(1) + verb_after_i(m.group(2)) + reach + beyond

    return _SUBJECT_VERB.sub(clause, text).replace(_SUBJECT, "I")


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
    blacksmith's", "James'") becomes "my" ("My" at the start of a sentence), the home "my home" ("My home"). A
    reference at a clause's start (a sentence's, after ";" or ":", or an opening quote) becomes "I", the subject, and
    its verb agrees ("The innkeeper chalks" -> "I chalk", :func:`simulacra.text.verb_after_i`); so does one inside a
    clause that a verb in the singular follows (an adverb between) when the word before it is no verb of which it
    would be the object (:func:`_is_subject`: "At the service the minister reads", "as Kofi falls"; not "hands the
    blacksmith nails", "told Kofi things"). Any other reference becomes "me". With ``pronouns`` (the persona's set,
    :attr:`Persona.pronouns <simulacra.persona.Persona.pronouns>`), its pronouns after the first reference are the
    resident's too: "he" / "she" become "I" with the verb agreeing ("he isn't" -> "I am not", "he's been" -> "I have
    been"), and so a verb joined to it by "and" before an object, up to a conjunction that begins another clause ("he
    plunges his arm into the trough and grits his teeth" -> "I plunge my arm into the trough and grit my teeth"); the
    other forms become "me", "my", "mine", "myself" (:func:`simulacra.text.first_person`). "they" is left alone (it
    is as often things). A text already in someone's first person outside quoted speech ("I saw Kofi") is not the
    resident's to tell: ``None``.

    Known limits: a subject whose verb is not in "s" ("the blacksmith laughed") becomes "me"; so does a subject after
    a verb in "s" ("He says Kofi slips"); a pronoun of another person of the same set after the reference ("Kofi
    greets Bram; he smiles") is taken for the resident's; a first name that is also a word ("Grace is said") is
    taken for the name. The rater reads meaning more than grammar; the told sentence reads well for the shipped
    events (tests/test_perspective.py).

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
    key = (name, occupation or "", home or "", tuple(aliases))
    text = _MARKS.sub("", text)
    if not _mention(*key).search(text) or _FIRST_PERSON_WORD.search(_QUOTED.sub("", text)):
        return None
    pat = _references(*key)
    out = text
    if pat.home_start is not None and pat.home is not None:
        out = pat.home_start.sub(lambda m: m.group(1) + _MY_START + " home", out)
        out = pat.home.sub(_MY + " home", out)
    out = pat.possessive_start.sub(lambda m: m.group(1) + _MY_START, out)
    out = pat.possessive.sub(_MY, out)
    out = pat.clause_start.sub(lambda m: m.group(1) + _SUBJECT, out)
    out = pat.followed.sub(lambda m: _SUBJECT if _is_subject(m.string[:m.start()], m["next"]) else m.group(0), out)
    out = pat.any.sub(_ME, out)
    if out == text:
        return None
    forms = PRONOUN_SETS.get(pronouns or "")
    if forms and pronouns != "they":  # its pronouns after the first reference are its own ("they": often things)
        first = _MARKS.search(out)
        assert first is not None  # out != text: a reference was marked
        head, tail = out[:first.start()], out[first.start():]
        subject = forms[0]
        for form in (subject, subject.capitalize()):  # "he's been" -> "I have been", "he's here" -> "I am here"
            tail = re.sub(rf"\b{form}['\u2019]s(?=\s+(?:been|got|had|done|gone|seen|[a-z]+ed)\b)", _SUBJECT + " has",
                          tail)
            tail = re.sub(rf"\b{form}['\u2019]s\b", _SUBJECT + " is", tail)
        tail = re.sub(rf"(^|[.!?;:]\s+){subject.capitalize()}\b", lambda m: m.group(1) + _SUBJECT, tail)
        out = head + first_person(re.sub(rf"\b{subject}\b", _SUBJECT, tail), pronouns)
    return _agree(out.replace(_ME, "me").replace(_MY, "my").replace(_MY_START, "My"))


def resident_view(text: str, persona: Persona, home: str | None) -> str | None:
    """:func:`own_perspective` of ``text`` for the resident ``persona`` (its name, occupation, pronouns and aliases;
    ``home``: the name of its home place), or ``None`` when the text does not name it. The one call the engine's
    rating (:func:`simulacra.tick.own_view`) and the scripted mind's telling (:func:`simulacra.cognition.scripted.tell`)
    make."""
    return own_perspective(text, persona.name, persona.occupation, home, persona.pronouns, tuple(persona.aliases))
