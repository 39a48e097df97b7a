"""English text helpers shared by the modules that write or read sentences: the function words that text
heuristics (the extractive summariser, the offline reflector) start from, each adding the words of its own domain,
the one way a list of names is written in a sentence, the one way an activity is placed (and freed of the
place ids a language model copies from its prompt), the verb a noun phrase takes (:func:`be_for`), and a
third-person activity said in the first person (:func:`pronouns_of`, :func:`first_person`)."""

import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

STOP_WORDS = frozenset("""
a about above after again against all almost also am an and any are aren't around as at away be because been
before being below between both but by can can't cannot could couldn't did didn't do does doesn't doing don't
done during each either else even ever every few for from further get gets getting go goes going gone goodbye
got had hadn't has hasn't have haven't having he he'd he'll he's hear heard hello her here here's hers herself
hi him himself his how how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's like lot me
might more most much must my myself no nor not now of off oh ok okay on once only onto or other our ours
ourselves out over own quite rather really said same say says shall she she'd she'll she's should shouldn't so
some such tell tells than that that's the their theirs them themselves then there there's these they they'd
they'll they're they've thing things this those though through to told too toward towards under until up upon
us very was wasn't we we'd we'll we're we've well were weren't what what's when where where's whether which
while who who's whom whose why will with within without won't would wouldn't yes yet you you'd you'll you're
you've your yours yourself yourselves
""".split())


def text_key(text: str) -> str:
    """The form two texts share when they say the same (spacing and case aside): what the night's summary groups
    episodes by and what an interview treats as one memory (a repeat, or a text still held)."""
    return " ".join(text.split()).casefold()


def join_words(items: Sequence[str]) -> str:
    """``items`` as an English list: ``"a"``, ``"a and b"``, ``"a, b and c"`` (no serial comma). Raises
    IndexError on an empty sequence: callers say what they list."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def at_place(activity: str, place_name: str) -> str:
    """``"<activity> at <place name>"``, or the activity alone when it names the place already (an imported
    town's "working at Hobbs Cafe" at Hobbs Cafe; compared ignoring case), or when there is no place name. Used for
    what agents perceive of each other, the focus query of retrieval, plan lines and the viewer."""
    if not place_name or place_name.casefold() in activity.casefold():
        return activity
    return f"{activity} at {place_name}"


#: a word with an underscore: an identifier, not English (place ids such as ``hobbs_cafe``)
_IDENTIFIER = re.compile(r"\b\w*_\w*\b")


def name_place_ids(activity: str, place_names: Mapping[str, str]) -> str:
    """``activity`` with each place id it contains replaced by the place's name: a model shown "hobbs_cafe: Hobbs
    Cafe" among its places writes "working at hobbs_cafe", and the bundled SmolLM2-135M wrote "carrying bread trays
    at bakery" (stop 54), which residents would otherwise perceive and remember word for word. An id with an
    underscore (a key of ``place_names``, ignoring case) is replaced anywhere; an id that is an English word
    (``bakery``, ``well``) only right after a word that puts a place after it ("at", "to", "in", ...; without "the":
    "at the bakery" is English), as :func:`places_named` reads it ("as well" stays)."""
    after, words = _word_id_pattern(tuple(place_names.items()))
    if words:
        activity = after.sub(lambda m: m.group(1) + words[m.group(2).casefold()], activity)
    if "_" in activity:
        folded = {k.casefold(): v for k, v in place_names.items() if "_" in k}
        activity = _IDENTIFIER.sub(lambda m: folded.get(m.group(0).casefold(), m.group(0)), activity)
    return activity


@lru_cache(maxsize=64)
def _word_id_pattern(places: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    """:func:`name_place_ids`'s pattern for the ids that are words, right after a preposition (groups: the
    preposition with its space, the id), and those ids (casefolded) -> names; built once per world."""
    words = {k.casefold(): v for k, v in places if k.isalpha() and k.casefold() != " ".join(v.split()).casefold()}
    # a word id, not the first word of a name ("at Mill House") or of an id ("at mill_house")
    pattern = (rf"(?<!\w)((?:{'|'.join(_PLACE_PREPOSITIONS)})\s+)({'|'.join(map(re.escape, words))})"
               r"(?!\w)(?-i:(?!\s+[A-Z]))") if words else r"(?!)"
    return re.compile(pattern, re.IGNORECASE), words


#: the words that put a place after them: a place id that is also an English word ("well", "shop") names the place
#: only after one of them ("at the well", "to shop"), not in "as well"
_PLACE_PREPOSITIONS = ("at", "to", "in", "into", "inside", "near", "by", "from", "towards", "toward", "around")


@lru_cache(maxsize=64)
def _place_pattern(places: tuple[tuple[str, str], ...]) -> tuple[re.Pattern[str], dict[str, str]]:
    names: dict[str, str] = {}
    ids: dict[str, str] = {}
    for pid, name in places:
        name = " ".join(name.split()).casefold()
        for form in (name, name[4:] if name.startswith("the ") else ""):
            if form:
                names.setdefault(form, pid)
        for form in (pid.casefold(), " ".join(pid.replace("_", " ").split()).casefold()):
            if form and form not in names:
                ids.setdefault(form, pid)

    def alternatives(forms) -> str:  # longest first: "mill house" before "mill"
        return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in sorted(forms, key=len, reverse=True))

    # a name may follow a preposition too, and is tried first where both start: "at the Mill House" is the house
    before = rf"(?:{'|'.join(_PLACE_PREPOSITIONS)})\s+(?:the\s+)?"
    parts = []
    if names:
        parts.append(rf"(?<!\w)(?:{before})?(?P<name>{alternatives(names)})(?!\w)")
    if ids:
        parts.append(rf"(?<!\w){before}(?P<id>{alternatives(ids)})(?!\w)")
    return re.compile("|".join(parts) or r"(?!)"), {**ids, **names}


def places_named(text: str, place_names: Mapping[str, str]) -> list[str]:
    """The ids of the places ``text`` names, in the order first named, each once, ignoring case: a place's name
    (also without a leading "The") anywhere as whole words, or its id (also with spaces for underscores) after a
    word that puts a place after it ("at", "to", "in", "near", ... and an optional "the": "eating soup at the
    tavern", "at riverbank"; not "as well"). Where forms overlap the longest wins: "Mill House" is ``mill_house``,
    not ``mill``. Read by the language-model mind, whose answers' words say where they are
    (:func:`simulacra.cognition.llm_mind.place_as_said`)."""
    if not text or not place_names:
        return []
    pattern, words = _place_pattern(tuple(place_names.items()))
    out: list[str] = []
    for m in pattern.finditer(text.casefold()):  # the forms are casefolded: a match is a key
        pid = words[" ".join((m.group("name") if m.group("name") is not None else m.group("id")).split())]
        if pid not in out:
            out.append(pid)
    return out


#: the third-person pronoun sets a text is read for (:func:`pronouns_of`), each with its first-person forms
PRONOUN_SETS: dict[str, tuple[str, ...]] = {
    "he": ("he", "him", "his", "himself"),
    "she": ("she", "her", "hers", "herself"),
    "they": ("they", "them", "their", "theirs", "themselves", "themself"),
}
_PRONOUN_WORD = re.compile(r"[a-z]+")


@lru_cache(maxsize=4096)
def pronouns_of(text: str) -> str | None:
    """The third-person pronoun set a text about one person uses for that person: ``"he"``, ``"she"`` or
    ``"they"``, from the whole words of :data:`PRONOUN_SETS` it holds (ignoring case): the set holding more than
    half of them all, "they" only in a text with neither "he" nor "she" forms (it is as often things: "sells their
    honey"). ``None`` when no set does (a tie, or no pronoun at all): nothing is inferred.

    A persona has no pronoun field; its ``background`` is written in the third person
    (:attr:`simulacra.persona.Persona.pronouns`), where the person's own pronouns outnumber those of the others
    it mentions ("She raised her son Tobias mostly on her own after his father went north": 3 to 1).
    """
    words = _PRONOUN_WORD.findall(text.casefold())
    counts = {key: sum(w in forms for w in words) for key, forms in PRONOUN_SETS.items()}
    if counts["he"] or counts["she"]:  # "they" and "them" are as often things ("what is in them", "their honey")
        counts["they"] = 0
    total = sum(counts.values())
    best = max(counts, key=lambda k: counts[k])
    return best if 2 * counts[best] > total else None


#: words after "her" / "his" that show it is not a determiner ("picking her up", "a cousin of his"), and that
#: are not the noun of an apposition ("taking her to Agnes" is not "her sister Agnes")
NOT_A_NOUN = frozenset("""
about across after along and around as at away back before behind but by down for from home in into near off on
onto or out over past so than through to under until up when while with
""".split())
#: persona pronoun set -> {third-person word: (first person before a noun, first person otherwise)}
_FIRST_PERSON = {
    "he": {"him": ("me", "me"), "his": ("my", "mine"), "himself": ("myself", "myself")},
    "she": {"her": ("my", "me"), "hers": ("mine", "mine"), "herself": ("myself", "myself")},
    "they": {"them": ("me", "me"), "their": ("my", "my"), "theirs": ("mine", "mine"),
             "themselves": ("myself", "myself"), "themself": ("myself", "myself")},
}


def first_person(phrase: str, pronouns: str | None) -> str:
    """A third-person activity (``"writing a letter to his mother"``) as its own persona says it after "I have
    been": the object, possessive and reflexive forms of the persona's pronoun set ``pronouns``
    (:func:`pronouns_of`) become "me", "my" / "mine" and "myself" ("writing a letter to my mother"); "her" and
    "his" become "my" before a word, "me" / "mine" at the end or before a preposition ("picking her up": "picking
    me up"). The pronouns of the other sets refer to someone else and stay ("helping Hana with her homework", said
    by a man). Subject pronouns stay too (their verb would change). ``pronouns`` ``None``: ``phrase`` unchanged.

    Only the pronoun set tells whose a pronoun is: a woman's "helping Hana with her homework" becomes "my
    homework"; the shipped routines have no such phrase.
    """
    forms = _FIRST_PERSON.get(pronouns or "")
    if not forms:
        return phrase

    def swap(m: re.Match) -> str:
        word = m.group(1)
        before_noun, otherwise = forms[word.casefold()]
        nxt = m.group(2)
        mine = before_noun if nxt and nxt.casefold() not in NOT_A_NOUN else otherwise
        return (mine[0].upper() + mine[1:] if word[0].isupper() else mine) + m.group(0)[len(word):]

    pattern = rf"\b({'|'.join(forms)})\b(?=(?:\s+([A-Za-z]+))?)"
    return re.sub(pattern, swap, phrase, flags=re.IGNORECASE)


@lru_cache(maxsize=1)
def _inflect_engine() -> Any:
    import inflect  # imported on first use: importing simulacra stays light

    return inflect.engine()


#: adverbs that stand between a subject and its verb ("he always plunges", "she slowly opens"), besides the words in
#: "-ly" (:func:`is_adverb`); the one list of them
ADVERBS = frozenset("""
afterwards again also always besides doubtless just nevertheless never often once perhaps soon sometimes still then
thus towards unless
""".split())
#: the verbs whose form after "I" is not their plural ("I am", "I was"), contracted negatives too
_AFTER_I = {"is": "am", "was": "was", "has": "have", "does": "do", "isn't": "am not", "wasn't": "wasn't",
            "hasn't": "haven't", "doesn't": "don't"}


#: an adverb, as a pattern: a word of :data:`ADVERBS`, or one in lower case in "-ly" of five letters or more
#: ("slowly"; not "fly"); the one rule, matched inside larger patterns too (:mod:`simulacra.memory.perspective`)
ADVERB = r"(?:[a-z]{3,}ly|" + "|".join(sorted(ADVERBS)) + ")"
_ADVERB_WORD = re.compile(ADVERB)


def is_adverb(word: str) -> bool:
    """Whether ``word`` is an adverb (:data:`ADVERB`)."""
    return _ADVERB_WORD.fullmatch(word) is not None


@lru_cache(maxsize=8192)
def verb_after_i(word: str) -> str:
    """``word``, a verb in the third person singular ("plunges", "is", "has", "doesn't"), in the form it takes after
    "I" ("plunge", "am", "have", "don't"), by the ``inflect`` library (``plural_verb``), except :data:`_AFTER_I`'s
    forms of "be", "have" and "do". A word that is no such verb is returned as it is: one not in lower case, of
    three letters or fewer but those forms, not ending in "s", or an adverb (:func:`is_adverb`). Word rules: a
    plural noun in a verb's place ("I apples") would be changed too; callers pass the word right after a subject
    (:func:`is_singular_verb` tells such a word)."""
    key = word.replace("\u2019", "'")
    if key in _AFTER_I:
        return _AFTER_I[key]
    if not word.islower() or len(word) <= 3 or not word.endswith("s") or is_adverb(word):
        return word
    return str(_inflect_engine().plural_verb(word))


def is_singular_verb(word: str) -> bool:
    """Whether ``word`` reads as a verb in the third person singular, which a singular subject takes and "I" does
    not ("plunges", "is", "was", "hasn't"): one :func:`verb_after_i` changes, or "was" / "wasn't"."""
    return word.replace("\u2019", "'") in _AFTER_I or verb_after_i(word) != word


#: a first-person start a model puts before an activity: "I'm", "I will", "I want to", ...
_FIRST_PERSON_START = re.compile(
    r"(?i:I\s*(?:'m|\u2019m|\s+am|\s+will|'ll|\u2019ll|\s+shall|\s+want\s+to|\s+need\s+to|\s+have\s+to|"
    r"\s+would\s+like\s+to|'d\s+like\s+to|\u2019d\s+like\s+to))\s+")
#: an activity's first word (a word, not the start of a contraction: "Don't"), an optional infinitive "to" before
#: it, and the word after it
_LEADING_WORD = re.compile(r"(to\s+)?([A-Za-z]+)\b(?!['\u2019])(?:\s+([\w']+))?")


#: what follows a verb, not a noun ("walk in the park", "lie down"): function words and particles
_AFTER_A_VERB = STOP_WORDS | {"down", "back", "away", "over", "home"}


def _verb_lemmas(word: str) -> tuple[str, ...]:
    from lemminflect import getAllLemmas  # imported on first use: importing simulacra stays light

    return getAllLemmas(word, upos="VERB").get("VERB", ())


def _only_a_verb(word: str) -> bool:
    """Whether the lexicon knows ``word`` (lower case) as a verb and as nothing else ("eat", not "nap")."""
    from lemminflect import getAllLemmas

    return set(getAllLemmas(word)) <= {"VERB", "AUX"}


def _ing(word: str) -> str:
    from lemminflect import getInflection

    return getInflection(word, tag="VBG")[0]


@lru_cache(maxsize=4096)
def progressive(activity: str) -> str:
    """``activity`` in the form "<name> is <activity>" and "I have been <activity>" need: a language model writes
    its plans as commands ("go to bed at Mill House", "Eat breakfast") or in the first person ("I'm going to the Old
    Well"), which residents would perceive and say as "Tobias Novak is go to bed" (stop 54).

    A first-person start ("I'm", "I will", "I want to", ...) is dropped ("I'm going to the forge": "going to the
    forge"; "I will eat": "eating"). Then the first word, when it reads as a verb: in its base form it becomes its
    "-ing" form ("go to bed" -> "going to bed", "to visit Ben" -> "visiting Ben"), in the third person singular too
    ("goes to breakfast" -> "going to breakfast"; not "is"), and in "-ing" it is put in lower case ("Eating
    breakfast"). A word the lexicon knows only as a verb reads as one ("eat lunch", "Eat Lunch"); a word that is
    also a noun ("nap", "rest", "market", "bed") only after a first-person start or when what follows is nothing
    (without "to" before it: "to bed" is a noun), a function word or particle (:data:`STOP_WORDS`, "down", ...:
    "walk in the park", "lie down"), a number or, in a lower-case activity, a name ("visit Ben"), so "rest day",
    "market day" and "lunch break" stay.

    Other starts are left as they are: a noun ("dinner at the tavern"), a word the lexicon does not know, a
    capitalised word followed by another (a name: "Mill House chores"), a contraction ("Don't"). Verbs are told and
    inflected by the ``lemminflect`` library's lexicon; these are word rules, not a parser: "Time off" is still
    read as "timing off"."""
    text = activity.strip()
    first = _FIRST_PERSON_START.match(text)
    subject = first is not None  # after "I will", "I want to": a verb, if the lexicon knows one
    if subject:
        text = text[first.end():]
    m = _LEADING_WORD.match(text)
    if m is None:
        return text
    to, raw, after = m.group(1), m.group(2), m.group(3)
    word = raw.lower()
    lemmas = _verb_lemmas(word)
    if not lemmas:
        return text
    only_a_verb = _only_a_verb(word)
    if not raw.islower() and (not raw.istitle() or after is not None and after[:1].isupper() and not only_a_verb):
        return text  # a name ("Mill House chores"), or a word in capitals
    rest = text[m.end(2):]
    if not only_a_verb and not subject:  # "nap", "market": a verb only before what a verb takes
        object_like = after is None and to is None or after is not None and (
            after.lower() in _AFTER_A_VERB or after[0].isdigit() or raw.islower() and after[:1].isupper())
        if not object_like:
            return text
    if word in lemmas:  # the base form
        return _ing(word) + rest
    if to is not None:
        return text  # "to eating", "to goes": not an infinitive
    from lemminflect import getInflection

    third = [lemma for lemma in lemmas if lemma != "be" and word in getInflection(lemma, tag="VBZ")]
    if third:  # "goes to breakfast": the third person singular
        return _ing(third[0]) + rest
    if word.endswith("ing") and any(word in getInflection(lemma, tag="VBG") for lemma in lemmas):
        return word + rest
    return text


def is_known_word(word: str) -> bool:
    """Whether the ``lemminflect`` lexicon knows ``word`` (in any case) as an English word: "Dinner" is one, "Ezra"
    and "Somethin" are not."""
    from lemminflect import getAllLemmas

    return bool(getAllLemmas(word.lower()))


def has_words(text: str, names: Iterable[str] = ()) -> bool:
    """Whether ``text`` is made of words, as a line or an activity must be: besides the ``names`` in it (residents'
    full names), it has a word in lower case ("drawing water") or a word the lexicon knows (:func:`is_known_word`:
    "Thanks", "Hello Ben", "Dinner"). A name alone ("Lena", "Ezra Pike" among ``names``), a number, a time or a time
    stamp ("2018-01-21 14:32:52.143") is not."""
    folded = text.casefold()
    for name in sorted({n for n in names if n.strip() and n.casefold() in folded}, key=len, reverse=True):
        text = re.sub(rf"\b{re.escape(name)}\b", " ", text, flags=re.IGNORECASE)
    words = re.findall(r"[^\W\d_]+(?:['\u2019][^\W\d_]+)?", text)
    return any(w.islower() and len(w) > 1 or is_known_word(w) for w in words)


def content_lemmas(text: str) -> tuple[str, ...]:
    """The dictionary forms of ``text``'s words that are not :data:`STOP_WORDS`, in order (lower case; "actions" ->
    "action", "goes" -> "go"; a word the ``lemminflect`` lexicon does not know stays as it is): what two texts are
    compared by when one may repeat the other in other forms (:func:`repeats_words_of`)."""
    from lemminflect import getAllLemmas

    out = []
    for word in re.findall(r"[a-z]+(?:'[a-z]+)?", text.lower()):
        if word not in STOP_WORDS:
            forms = getAllLemmas(word)
            out.append(min((lemma for lemmas in forms.values() for lemma in lemmas), key=len, default=word))
    return tuple(out)


def repeats_words_of(text: str, source: Sequence[str]) -> bool:
    """Whether ``text``'s words (:func:`content_lemmas`) are a run of ``source``'s, ``source`` being
    :func:`content_lemmas` of another text: "break your plan into 8 concrete actions" and "action" repeat "Break
    your plan ... into at most 8 concrete actions"; "start the day" does not repeat "... your day ... start time".
    ``False`` for a text without such words."""
    words = content_lemmas(text)
    n = len(words)
    return n > 0 and any(tuple(source[i:i + n]) == words for i in range(len(source) - n + 1))


#: a word that begins a phrase inside an activity (never its first word): where a length limit cut the text, the
#: phrase it began is cut
_PHRASE_START = re.compile(r"(?<=\S)\s+(?:at|to|in|into|on|onto|of|by|with|from|near|for|and|or|towards?|around|"
                           r"behind|beside|under|over)(?=[\s,;:]|$)", re.IGNORECASE)
#: words that cannot end an activity (an article, "at", "of", "into", "onto", "and", "or", a possessive determiner),
#: left at a text's end: "baking rolls at the bakery at the"; not a preposition that may end one ("grew up with")
_HANGING_END = re.compile(r"(?<=\S)(?:\s*[,;:]?\s+(?:a|an|the|at|of|into|onto|and|or|my|your|their|our))+\s*[,;:]?\s*$",
                          re.IGNORECASE)


def cut_at(text: str, limit: int | None) -> bool:
    """Whether a schema's ``maxLength`` of ``limit`` characters cut ``text``: a server that holds its answers to a
    JSON schema stops the string there, so an answer of exactly ``limit`` characters was stopped, not ended (one
    that happens to end there is read as cut too). ``False`` when ``limit`` is ``None``."""
    return limit is not None and len(text) == limit


def uncut(text: str, limit: int | None = None) -> str:
    """``text`` as far as it is whole. A server that holds its answers to a JSON schema stops a string at the
    schema's ``maxLength`` (``limit`` characters), mid-word or mid-phrase, and a small model stops a phrase
    half-said: the bundled SmolLM2-135M's plan items ended "checking the medicine cabinet at the" (cut at 60),
    "shaping the morning loaves at kn" (cut) and "baking the afternoon rolls at the bakery at the" (47 characters;
    stop 55). A text of exactly ``limit`` characters ends before the last phrase it began (a preposition, "and"
    or "or" after its first word: "checking the medicine cabinet"), else before its last word. Then the words
    that cannot end an activity are dropped from the end of any text: an article, "at", "of", "into", "onto",
    "and", "or", "my", "your", "their", "our" ("... at the bakery at the" ends "... at the bakery"; "his", "her"
    and a preposition that may end one, "grew up with", stay), with a comma or colon left there. Its first word
    always stays; so does a text of a single word. Leading and trailing spaces are removed."""
    if cut_at(text, limit) and len(text.split()) >= 2:
        text = text.strip()
        starts = list(_PHRASE_START.finditer(text))
        text = text[:starts[-1].start()] if starts else text.rsplit(None, 1)[0]
    return _HANGING_END.sub("", text.strip()).rstrip(" ,;:")


#: a noun phrase's postmodifier: its head is the last word before it ("pupils' desks in the classroom")
_POSTMODIFIER = re.compile(r"\s+(?:in|on|at|of|by|with|from|near|behind|beside|under|for)\s", re.IGNORECASE)


@lru_cache(maxsize=4096)
def be_for(noun_phrase: str) -> str:
    """``"is"`` or ``"are"``: the verb "to be" for ``noun_phrase`` as a subject ("The market stalls ... are",
    "The water wheel ... is"), by its head noun: the last word before a postmodifier ("bed in the main room": bed).
    The head is plural when the ``inflect`` library finds it a plural noun (``singular_noun``) that it would
    pluralise by a mere "s" (``plural_noun``), which keeps singular nouns ending in "s" singular ("bus", "lens",
    "canvas"). Nouns with one form take "are" when inflect reads them plural ("scissors", "sheep", also "news");
    a phrase without a word takes "is"."""
    head = _POSTMODIFIER.split(noun_phrase.strip(), maxsplit=1)[0]
    words = re.findall(r"[A-Za-z]+", head)
    if not words:
        return "is"
    word = words[-1].lower()  # "Oak Benches" as "benches"; a proper noun's plural is rare in an object's name
    engine = _inflect_engine()
    if not engine.singular_noun(word):
        return "is"
    return "are" if engine.plural_noun(word) in (word, word + "s") else "is"


#: the possessive ending after a name: "'s" (either apostrophe), or a lone apostrophe after a final "s" ("James'")
POSSESSIVE = r"(?:['\u2019]s\b|(?<=s)['\u2019](?![\w'\u2019]))"


@lru_cache(maxsize=4096)
def name_reference(name: str) -> str:
    """The regular expression (a pattern string, case-sensitive) of a mention of the resident named ``name``: its
    full name, or its first name, as whole words; the first name not when another capitalised word follows it
    ("Anna Berg" is not Anna Lund). The one rule of "this text names that resident" (the scripted mind's greeting
    and "you", a memory rated from its owner's perspective); a possessive after it is :data:`POSSESSIVE`. A first
    name that is also a word ("Will", "Grace") at the start of a sentence is taken for the name."""
    full = " ".join(name.split())
    first = full.split()[0] if full else ""
    if not first:
        raise ValueError("name: expected the resident's name, got a blank one")
    alternatives = [re.escape(full)] + ([rf"{re.escape(first)}(?!\s+[A-Z])"] if first != full else [])
    return rf"\b(?:{'|'.join(alternatives)})\b"
