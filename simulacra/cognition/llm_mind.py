"""The language-model mind: plans, reactions, dialogue and interviews from any OpenAI-compatible chat model.

Every call asks for JSON under a schema (``response_format`` ``json_schema``, which OpenAI, vLLM, llama.cpp and
Ollama honour; small models only stay coherent under one), parses the answer defensively
(:func:`simulacra.llm.extract_json`), validates it with pydantic and against the world (places that exist,
people who are there). A bad answer (garbage, truncated, an unknown place or person, a refused schema) is
asked again once with the problem stated; if that fails too, or the server fails after its retries, the
scripted decision is taken for that step, logged with the raw answer and counted per kind
(:class:`~simulacra.cognition.mind.Decision` ``source="fallback"``). A spent budget
(:class:`~simulacra.llm.BudgetExceeded`) is the only error that leaves: the run then stops at its last tick.

What goes into each prompt follows the Generative Agents paper (arXiv 2304.03442): the persona, the memories
retrieved for the decision (their ids are returned with the decision, for the trace and ``inspect``), and
for dialogue the relationship with the listener, the news the speaker could tell and the conversation so
far as the configured history strategy presents it.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from simulacra.clock import MINUTES_PER_DAY, format_hhmm, parse_hhmm
from simulacra.clock import day_start as start_of_day
from simulacra.cognition.history import TRANSCRIPT_HEADING, line_request
from simulacra.cognition.mind import (
    AgentView,
    Answer,
    Consideration,
    ConversationView,
    Decision,
    Engagement,
    PlanItem,
    Reaction,
    Reflector,
    Utterance,
    converse_line_by_line,
    reflect_with,
)
from simulacra.cognition.plan import is_asleep
from simulacra.cognition.scripted import GossipRule, ScriptedMind, routine_plan
from simulacra.config import Config
from simulacra.days import night_of
from simulacra.llm.structured import BadAnswer, ask_json
from simulacra.llm.wrappers import CachingModel
from simulacra.memory.records import RetrievedMemory
from simulacra.text import (
    content_lemmas,
    cut_at,
    has_words,
    name_place_ids,
    places_named,
    progressive,
    repeats_words_of,
    text_key,
    uncut,
)

log = logging.getLogger(__name__)

T = TypeVar("T")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore")


class _PlanEntry(_Strict):
    start: str
    activity: str = Field(min_length=1)
    place: str


class _DayPlan(_Strict):
    items: list[_PlanEntry] = Field(min_length=1)


class _Step(_Strict):
    minutes: int = Field(ge=1)
    activity: str = Field(min_length=1)
    place: str


class _Steps(_Strict):
    actions: list[_Step] = Field(min_length=1)


class _Reaction(_Strict):
    decision: Literal["continue", "go", "talk"]
    place: str = "none"
    person: str = "none"
    activity: str = ""
    reason: str = ""


class _Consider(_Strict):
    reason: str = ""
    go: bool


class _Line(_Strict):
    line: str = Field(min_length=1)
    news: int = 0
    end: bool = False


class _ExchangeLine(_Strict):
    speaker: str
    line: str = Field(min_length=1)
    news: int = 0


class _Exchange(_Strict):
    lines: list[_ExchangeLine] = Field(min_length=2)
    summary: str = Field(min_length=1)


class _Summary(_Strict):
    summary: str = Field(min_length=1)


class _Answer(_Strict):
    answer: str = Field(min_length=1)
    memories: list[int] = Field(default_factory=list)


@contextmanager
def waiting_report(what: str, every_s: float):
    """Log (WARNING, which the command line shows) every ``every_s`` seconds while the block runs: a slow model
    makes a slow run, and the user sees what it is waiting for and for how long (wall-clock seconds)."""
    done = threading.Event()
    start = time.monotonic()

    def report():
        while not done.wait(every_s):
            log.warning("waiting for %s: %.0f s so far", what, time.monotonic() - start)

    watcher = threading.Thread(target=report, name="wait-report", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        done.set()


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


_WORD = re.compile(r"[\w']+")


def check_not_looping(text: str, what: str = "the text") -> str:
    """``text`` unchanged, unless it loops (a small model's failure: "Lena, Samuel, Lena, Samuel, ..."): more than
    12 words of which under a third are distinct.

    Raises:
        BadAnswer: the text loops (it is asked again once, then the scripted decision is taken).
    """
    words = [w.lower() for w in _WORD.findall(text)]
    if len(words) > 12 and len(set(words)) < len(words) / 3:
        raise BadAnswer(f"{what} repeats itself ({len(set(words))} distinct words of {len(words)})")
    return text


def strip_speaker(text: str, names: Iterable[str], headings: Iterable[str] = (TRANSCRIPT_HEADING,)) -> str:
    """``text`` without leading ``Name:`` speaker labels (a small model copies the transcript's format: "Hana
    Novak: The conversation is starting. ..."), where ``Name`` is one of ``names`` or its first word, compared
    without case, nor the prompt's ``headings`` (its transcript's, "The conversation so far:", by default). Other
    text before a colon ("Note: ...") is kept.
    """
    labels = ({n.casefold() for n in names if n.strip()} | {n.split()[0].casefold() for n in names if n.strip()}
              | {h.strip().rstrip(":").casefold() for h in headings if h.strip()})
    text = text.strip()
    while ":" in text:
        head, rest = text.split(":", 1)
        if head.strip().strip("*\"'").casefold() not in labels:
            break
        text = rest.lstrip(" *").strip()
    return text


def _sentence_key(sentence: str) -> str:
    """A sentence as two texts are compared for saying the same: :func:`~simulacra.text.text_key` without an end
    mark."""
    return text_key(sentence).strip(" .!?")


def prompt_sentences(texts: Iterable[str]) -> frozenset[str]:
    """The sentences of ``texts`` (an answer's instructions; :func:`_sentences`), as :func:`tidy_line` compares
    them (:func:`_sentence_key`)."""
    return frozenset(_sentence_key(s) for text in texts for s in _sentences(text) if _sentence_key(s))


#: a sentence said before in the conversation is dropped from a line only from this many words: a reply may
#: repeat a short one ("Good morning!"), a copy of the line before is longer
_COPIED_WORDS = 4


#: the most characters of a spoken line, and of an interview answer, the schemas ask for
LINE_CHARS = 240
ANSWER_CHARS = 500
#: a sentence that ends as one: an end mark, then perhaps a closing quote or bracket
_ENDED = re.compile(r"[.!?\u2026][\"')\]\u201d\u2019]*$")


#: a greeting at a line's start, then whom it greets
_GREETING = re.compile(r"(?:hello|hi|hey|good\s+(?:morning|afternoon|evening|day)|morning|evening|welcome)\b[\s,]*",
                       re.IGNORECASE)


def greets_self(line: str, speaker: str) -> bool:
    """Whether ``line`` begins by greeting its own ``speaker`` (a name, "Tobias Novak"; by it or its first word):
    "Hello, Tobias!" said by Tobias. The bundled SmolLM2-135M did so in 3 of its 13 lines of a day (stop 55),
    confusing who speaks."""
    line = line.strip()
    m = _GREETING.match(line)
    if not m or not speaker.strip():
        return False
    rest = line[m.end():].casefold()
    return any(re.match(rf"{re.escape(n.casefold())}\b", rest) for n in (speaker.strip(), speaker.split()[0]))


def tidy_line(text: str, most: int = 3, names: Iterable[str] = (), prompt: frozenset[str] = frozenset(),
              said: Sequence[str] = (), limit: int | None = None, speaker: str | None = None) -> str:
    """A spoken line as said: leading speaker labels of ``names`` removed (:func:`strip_speaker`), split into
    sentences (at end marks and line breaks) with whitespace collapsed, a sentence said again in the same line
    dropped (small models loop: "I'm not sure. I'm not sure. ..."), a sentence of the instructions dropped
    (``prompt``, :func:`prompt_sentences`: the bundled SmolLM2-135M began 20 of 56 lines of a day with its
    instruction, "The conversation is starting.", stop 54; a line may tell news or memories word for word, so the
    persona, memories and news are not among them), a sentence of at least 4 words said before in the conversation
    dropped (``said``: its lines, oldest first; the same model answered the line before with a copy of it and one
    more sentence), at most ``most`` sentences. A text the schema's ``maxLength`` of ``limit`` characters cut
    (:func:`~simulacra.text.cut_at`: exactly that long) loses its last sentence when that does not end as one (the
    bundled SmolLM2-135M's lines ran to the limit in 27 of 59 answers of a day, and 15 of the 27 model lines said
    ended mid-sentence: "... but I'm going", stop 55).

    Raises:
        BadAnswer: nothing is left (the instructions, or a single sentence cut at ``limit``), or the line is one of
            ``said`` (said already); what is left is one of ``names`` (a speaker's name is not a line); it is not
            words (:func:`~simulacra.text.has_words` besides ``names``: a bare name such as "Lena", a time stamp); it
            loops (:func:`check_not_looping`); it greets its own ``speaker`` (:func:`greets_self`).
    """
    names = list(names)
    before = {_sentence_key(t) for t in said}
    copied = {key for t in said for key in map(_sentence_key, _sentences(t)) if len(key.split()) >= _COPIED_WORDS}
    seen: set[str] = set()
    kept, asked, repeated = [], 0, 0
    sentences = _sentences(strip_speaker(text, names))
    if cut_at(text, limit) and sentences and not _ENDED.search(sentences[-1]):
        sentences.pop()  # cut mid-sentence by the length limit
        if not sentences:
            raise BadAnswer(f"the line was cut at {limit} characters in its first sentence: say it in fewer words")
    for sentence in sentences:
        key = _sentence_key(sentence)
        if key in prompt:
            asked += 1
        elif key in copied:
            repeated += 1
        elif key and key not in seen:
            seen.add(key)
            kept.append(sentence)
    if not kept or _sentence_key(" ".join(kept)) in before:
        raise BadAnswer("that line was said already in this conversation; say something new" if repeated or kept
                        else "the line only repeats the instructions: write what the speaker says" if asked
                        else "the line is empty")
    line = check_not_looping(" ".join(kept[:most]), "the line")
    if _sentence_key(line) in {_sentence_key(n) for n in names}:
        raise BadAnswer("a line is a sentence said aloud, not a name")
    if not has_words(line, names):
        raise BadAnswer(f"{line!r} is not a sentence said aloud")
    if speaker and greets_self(line, speaker):
        raise BadAnswer(f"the line greets {speaker}, who says it: write what {speaker} says to the other")
    return line


def _sentences(text: str) -> list[str]:
    """``text``'s sentences, split at end marks and line breaks, each with its whitespace collapsed."""
    return [" ".join(s.split()) for line in text.splitlines() for s in _SENTENCE.split(line.strip()) if s.strip()]


def _obj(props: dict[str, Any], title: str) -> dict[str, Any]:
    return {"title": title, "type": "object", "properties": props, "required": list(props),
            "additionalProperties": False}


_HHMM = {"type": "string", "pattern": "^([01][0-9]|2[0-3]):[0-5][0-9]$"}


def _text(max_length: int) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": max_length}


#: the most characters of an activity the schemas ask for (a plan item's, an action's, a "go" reaction's)
ACTIVITY_CHARS = 60


#: a list number or bullet, then a clock time or time range, at an activity's start: the bundled model copied its
#: plan's lines into its actions ("3. 08:00-12:10 opening the clinic", stop 55); they are not what the resident does
_LIST_AND_TIME = re.compile(r"^(?:(?:\d{1,2}[.)]|[-*\u2022])\s+)?"
                            r"(?:\d{1,2}[:.]\d{2}(?:\s*(?:-|\u2013|to)\s*\d{1,2}[:.]\d{2})?\s*[:,-]?\s+)?")


def model_activity(said: str, places: Mapping[str, str], asked: Sequence[str] = (), names: Iterable[str] = (),
                   required: bool = True) -> str:
    """A model's activity (a plan item's, an action's, a "go" reaction's) as the town uses it: as far as it is whole
    (:func:`~simulacra.text.uncut`: cut at the schema's :data:`ACTIVITY_CHARS`, or left hanging), without a leading
    list number or clock time ("3. 08:00-12:10 opening the clinic" is "opening the clinic"), place ids named
    (:func:`~simulacra.text.name_place_ids`) and in the progressive form that "<name> is <activity>" and "I have
    been <activity>" need (:func:`~simulacra.text.progressive`: "go to bed" -> "going to bed"). ``""`` for an
    empty one when not ``required`` (a "go" may leave what it does there unsaid).

    Raises:
        BadAnswer: it is empty (when ``required``); it is not words besides the residents' ``names``
            (:func:`~simulacra.text.has_words`: the bundled SmolLM2-135M wrote "1", "2.3.1.1.1.1..." and "Ezra
            Pike" as actions, stop 54); or its words repeat a run of the instructions' (``asked``,
            :func:`~simulacra.text.content_lemmas` of them; :func:`~simulacra.text.repeats_words_of`: "break your
            plan into 8 concrete actions", "action").
    """
    text = progressive(name_place_ids(_LIST_AND_TIME.sub("", uncut(said, ACTIVITY_CHARS).strip(), count=1), places))
    if not text and not required:
        return ""
    if not has_words(text, names):
        raise BadAnswer(f"the activity {said.strip()!r} is not words: say what the resident does")
    if repeats_words_of(text, asked):
        raise BadAnswer(f"the activity {said.strip()!r} repeats the instructions: say what the resident does")
    return text


def place_as_said(chosen: str, said: str, places: Mapping[str, str]) -> str:
    """The place of a plan item or action: ``chosen`` (the answer's ``place`` field), unless its own ``said``
    (its activity) names exactly one place of ``places`` (:func:`~simulacra.text.places_named`) and that is
    another. A small model picks the enum field by where a place stands in the list more than by what it wrote:
    the bundled SmolLM2-135M planned "eating dinner at the tavern" at ``mill_house`` and "fishing ... at Willow Bend"
    at ``square`` (stop 53), which sent its residents walking all day; the words are the answer's meaning."""
    named = places_named(said, places)
    return named[0] if len(named) == 1 and named[0] != chosen else chosen


def went_as_said(chosen: str, said: str, places: Mapping[str, str], here: str) -> str:
    """Where a "go" reaction goes: ``chosen`` (its ``place`` field) when its words (``said``: reason and
    activity) name it, else the one place other than ``here`` they name; ``here`` (the agent stays: the caller
    continues) when ``chosen`` is ``here`` and they name no other. A "go" elsewhere whose words name no other place
    than ``here``, or several without the chosen one, is not grounded in what the model said.

    Raises:
        BadAnswer: as just said (the model is asked again, then the scripted reaction, "continue", is taken). The
            bundled SmolLM2-135M answered "go" to most percepts, to a place it did not name ("I'm going to the
            market to buy some flour" -> ``novak_house``), and its residents spent their hours walking (stop 53).
    """
    named = [p for p in places_named(said, places) if p != here]
    if chosen in named:
        return chosen
    if len(named) == 1:
        return named[0]
    if chosen == here and not named:
        return here
    if not named:
        raise BadAnswer(f"'go' to {chosen!r}, but the reason and activity do not say where: name the place")
    raise BadAnswer(f"'go' to {chosen!r}, but the reason and activity name {', '.join(named)}: choose one")


class LLMMind:
    """A :class:`~simulacra.cognition.mind.Mind` over a :class:`~simulacra.llm.LanguageModel`.

    Args:
        model: the run's model (already wrapped with retries, budget, recorder, meter); identical prompts are
            answered from a cache (:class:`~simulacra.llm.CachingModel`).
        config: the run's config (``cognition``, ``llm.temperature``, ``simulation.seed``, ``memory``).
        tick_minutes: game minutes per tick of the world (the shortest action the model may plan).
        reflector: where insights come from: the run's rater, which reflects with this model when it measured well
            (one reflection prompt, in ``simulacra.rating.llm``), else offline.
    Attributes:
        usage: Counter of ``<kind>_calls``, ``<kind>_retries`` (second asks), ``<kind>_prompt_tokens`` and
            ``<kind>_completion_tokens`` per decision kind (fallbacks are counted from the decisions, in the run);
            ``<kind>_places_from_words``: places taken from an answer's words over its ``place`` field
            (:func:`place_as_said`, :func:`went_as_said`).
        reactive: ``True``: the tick asks this mind to react to salient percepts.
    """

    reactive = True
    wait_report_s = 10.0  # a call still unanswered after this many seconds is reported, and again every as many

    def __init__(self, model, config: Config, tick_minutes: int = 10, reflector: Reflector | None = None):
        self.tick_minutes = int(tick_minutes)
        self.reflector = reflector
        self.model = model if isinstance(model, CachingModel) else CachingModel(model)
        self.config = config
        self.cfg = config.cognition
        self.scripted = ScriptedMind(gossip=GossipRule.from_config(config.simulation))
        self.name = f"llm:{model.name}"
        self.usage: Counter = Counter()
        self._usage_lock = threading.Lock()  # decisions of one stage are asked from worker threads (rt.map)

    # ------------------------------------------------------------------ the one way to ask
    def ask(self, kind: str, messages: list[dict], schema: dict, parse: Callable[[Any], T],
            fallback: Callable[[], Decision[T]], memory_ids: Sequence[str], max_tokens: int | None = None
            ) -> Decision[T]:
        """Ask under ``schema``; ``parse`` turns the decoded JSON into the value or raises :class:`BadAnswer`
        (or pydantic's ValidationError). One retry with the problem stated, then ``fallback()`` marked as such.

        Raises:
            BudgetExceeded: a budget is spent (the run stops cleanly).
        """
        tokens = max_tokens or self.cfg.max_tokens
        asked = ask_json(self.model, messages, schema, parse, max_tokens=tokens,
                         temperature=self.config.llm.temperature, seed=self.config.simulation.seed, retries=1,
                         wait=lambda: waiting_report(f"{self.name} ({kind})", self.wait_report_s))
        self.count({f"{kind}_retries": asked.attempts - 1, f"{kind}_calls": asked.calls,
                    f"{kind}_prompt_tokens": asked.prompt_tokens, f"{kind}_completion_tokens": asked.completion_tokens})
        spent = (asked.prompt_tokens, asked.completion_tokens)
        if asked.ok:
            return Decision(asked.value, tuple(memory_ids), "llm", tokens=spent)
        problem, raw = asked.problem, asked.raw
        log.warning("%s: %s answer unusable (%s); raw answer %r; the scripted decision is taken", self.name, kind,
                    problem, raw[:300])
        d = fallback()
        return Decision(d.value, d.memory_ids or tuple(memory_ids), "fallback", problem or "no answer", spent)

    def count(self, counts: dict[str, int]) -> None:
        """Add ``counts`` to :attr:`usage` (under a lock: a stage's decisions are asked from several threads)."""
        with self._usage_lock:
            self.usage.update(counts)

    # ------------------------------------------------------------------ prompt parts
    def persona_text(self, view: AgentView) -> str:
        p = view.persona
        lines = [f"You are {p.name}, {p.age}, {p.occupation}. You are {', '.join(p.traits)}.", p.background]
        if p.speech_style:
            lines.append(f"You speak {p.speech_style}" if not p.speech_style[0].isupper() else p.speech_style)
        day = f"day {view.now // MINUTES_PER_DAY + 1}"
        if view.weekday:
            day = f"{view.weekday}, {day}"
        lines.append(f"It is {format_hhmm(view.now)} on {day}. You are at "
                     f"{view.place_names.get(view.place, view.place)}.")
        return "\n".join(lines)

    @staticmethod
    def memories_text(memories: Sequence[RetrievedMemory], heading: str = "What you remember") -> str:
        if not memories:
            return f"{heading}: nothing in particular."
        rows = []
        for i, m in enumerate(memories, 1):
            when = ""
            if m.record is not None and m.record.timestamp is not None:
                t = m.record.timestamp
                when = f"(day {int(t) // MINUTES_PER_DAY + 1} {format_hhmm(t)}) "
            rows.append(f"{i}. {when}{m.text}")
        return f"{heading}:\n" + "\n".join(rows)

    def places_text(self, view: AgentView, only: Sequence[str] | None = None) -> str:
        """The places offered to the model, ``id: name`` each: the world's, or ``only`` those ids, in that order."""
        ids = list(view.place_names) if only is None else only
        return "Places (id: name): " + "; ".join(f"{pid}: {view.place_names.get(pid, pid)}" for pid in ids)

    def _prompt_memories(self, view: AgentView) -> tuple[RetrievedMemory, ...]:
        return view.memories[: self.cfg.memories_in_prompt]

    # ------------------------------------------------------------------ plan
    def plan_day(self, view: AgentView, day_start: int, day_end: int) -> Decision[list[PlanItem]]:
        """Broad items for the day, from the persona's usual day (its rest-day routine on a rest day), the memories
        retrieved for its plans (yesterday's plans and reflections among them) and the places of the world. The
        model plans the waking day; the night is the routine's (:func:`simulacra.days.night_of`: from its start to
        ``day_end``, at home), as it is for the scripted mind: a plan that left a resident at the forge overnight
        kept it awake there, perceiving and reacting, since a resident sleeps only at home (stop 53). The prompt
        shows the usual day without its night and says where the day ends without the night's words: shown them, the
        bundled SmolLM2-135M planned "go to bed" and "go to sleep" from 07:00 on (stop 55)."""
        p = view.persona
        routine = p.routine_for(view.rest_day)
        night = night_of(routine, p.home)
        # the waking day, each entry's place said once: its id is added where its words do not say it as an answer's
        # words are read (places_named): "eating lunch at the tavern", not "... at the tavern at tavern"; "fishing
        # ... at Willow Bend", not "... at riverbank" (a small model copies what it is shown, doubled places and all)
        usual = "; ".join(f"{e.start} {e.activity}" + ("" if e.place in places_named(e.activity, view.place_names)
                                                        else f" at {e.place}") for e in routine[:night])
        mems = self._prompt_memories(view)
        places = list(view.place_names)
        base = start_of_day(day_start)
        # the night item as the scripted mind plans it (its start, end, activity, place and routine index)
        night_item = None if night is None else routine_plan(p, day_start, day_end, view.rest_day)[night]
        bed = day_end if night_item is None else night_item.start
        until = ("" if night_item is None else f" until {format_hhmm(bed)}, when the night at "
                 f"{view.place_names.get(p.home, p.home)} begins (it is planned already)")
        lead = f"Plan your day from {format_hhmm(day_start)}"
        how = ("4 to 8 broad items in time order, each with its start time (HH:MM), what you will do, and the id of "
               "the place. Keep to your usual day unless what you remember gives you a reason to change it.")
        messages = [
            {"role": "system", "content": self.persona_text(view)},
            {"role": "user", "content": (
                f"{self.memories_text(mems)}\n\n{self.places_text(view)}\nYour usual "
                f"{'rest day' if view.rest_day else 'day'}: {usual}.\n\n{lead}{until}: {how}")},
        ]
        asked = content_lemmas(f"{lead}: {how}")  # the instructions, not the home the until clause names
        schema = _obj({"items": {"type": "array", "minItems": 2, "maxItems": 10, "items": _obj(
            {"start": _HHMM, "activity": _text(ACTIVITY_CHARS), "place": {"type": "string", "enum": places}},
            "plan_item")}}, "day_plan")

        def parse(data) -> list[PlanItem]:
            plan = _DayPlan.model_validate(data)
            timed: dict[int, _PlanEntry] = {}
            for e in plan.items:
                if e.place not in view.place_names:
                    raise BadAnswer(f"unknown place {e.place!r}")
                try:
                    minute = base + parse_hhmm(e.start)
                except ValueError as err:
                    raise BadAnswer(str(err)) from None
                if minute < day_start:
                    minute += MINUTES_PER_DAY  # after midnight
                timed.setdefault(minute, e)
            starts = [m for m in sorted(timed) if m < bed]  # the night is the routine's
            if not starts:
                raise BadAnswer(f"plan the day from {format_hhmm(day_start)} until {format_hhmm(bed)}: every item "
                                "starts later")
            entries = [timed[m] for m in starts]
            starts[0] = day_start  # the first item begins at wake-up
            items, moved = [], 0
            for i, (start, e) in enumerate(zip(starts, entries)):
                end = starts[i + 1] if i + 1 < len(starts) else bed
                if end > start:
                    place = place_as_said(e.place, e.activity, view.place_names)
                    moved += place != e.place
                    activity = model_activity(e.activity, view.place_names, asked, view.names.values())
                    items.append(PlanItem(start, end, activity, place))
            if night_item is not None:
                items.append(night_item)
            self.count({"plan_day_places_from_words": moved})
            return items

        return self.ask("plan_day", messages, schema, parse,
                        lambda: self.scripted.plan_day(view, day_start, day_end), view.memory_ids[: len(mems)],
                        max_tokens=max(2 * self.cfg.max_tokens, 400))

    def next_actions(self, view: AgentView, plan: Sequence[PlanItem], start: int,
                     end: int) -> Decision[list[PlanItem]]:
        """The plan from ``start`` to ``end`` as concrete actions (10 minutes to 2 hours each), each at one of the
        places of the plan's items in that window: the plan says where, its decomposition says what is done there
        (a "go" reaction moves a resident elsewhere). Offered every place of the world, the bundled SmolLM2-135M
        sent its residents to a new place almost every action, walking and never free to talk (stop 53). Sleep and
        the routine's night (:func:`simulacra.days.night_of`) are not decomposed: the actions asked for stop where
        the night begins, and a window that begins in it is not asked about."""
        window = [p for p in plan if p.end > start and p.start < end]
        scripted = self.scripted.next_actions(view, plan, start, end)
        night = night_of(view.persona.routine_for(view.rest_day), view.persona.home)

        def resting(p: PlanItem) -> bool:  # sleep, or the routine's night (plan_day)
            return is_asleep(p.activity) or (night is not None and p.routine_index == night)

        if not window or resting(window[0]):
            return Decision(scripted.value[:1], ())
        end = min(end, next((p.start for p in window if resting(p) and p.start > start), end))
        window = [p for p in window if p.start < end]
        mems = self._prompt_memories(view)
        tick = self.tick_minutes
        hours = max(1, (end - start) // 60)
        most = min(8, 2 * hours)  # a small model lists many tiny steps: bound them (and the answer's length)
        shortest = max(tick, 20)
        longest = max(shortest, min(240, end - start))
        where = {p.place: view.place_names.get(p.place, p.place) for p in window}  # the plan's places, in order
        places = list(where)
        plan_text = "; ".join(p.describe(where[p.place]) for p in window)
        instruction = (f"Break your plan from {format_hhmm(start)} to {format_hhmm(end)} into at most {most} concrete "
                       f"actions in order, each lasting {shortest} to {longest} minutes, at the place of the plan "
                       "where it happens (place id).")
        messages = [
            {"role": "system", "content": self.persona_text(view)},
            {"role": "user", "content": (
                f"{self.memories_text(mems)}\n\n{self.places_text(view, places)}\nYour plan: {plan_text}.\n\n"
                f"{instruction}")},
        ]
        asked = content_lemmas(instruction)
        schema = _obj({"actions": {"type": "array", "minItems": 1, "maxItems": most, "items": _obj(
            {"minutes": {"type": "integer", "minimum": shortest, "maximum": longest}, "activity": _text(ACTIVITY_CHARS),
             "place": {"type": "string", "enum": places}}, "action")}}, "actions")

        def parse(data) -> list[PlanItem]:
            steps = _Steps.model_validate(data)
            out, t, moved = [], start, 0
            for s in steps.actions:
                if s.place not in where:
                    raise BadAnswer(f"{s.place!r} is not a place of the plan (one of {', '.join(places)})")
                if t >= end:
                    break
                minutes = max(tick, round(s.minutes / tick) * tick)
                place = place_as_said(s.place, s.activity, where)
                moved += place != s.place
                activity = model_activity(s.activity, view.place_names, asked, view.names.values())
                out.append(PlanItem(t, min(end, t + minutes), activity, place))
                t += minutes
            if t < end:  # the model stopped short: the plan's own items cover the rest of the window
                out += [PlanItem(max(p.start, t), min(p.end, end), p.activity, p.place, p.routine_index)
                        for p in window if p.end > t and p.start < end]
            self.count({"next_actions_places_from_words": moved})
            return out

        return self.ask("next_actions", messages, schema, parse, lambda: scripted, view.memory_ids[: len(mems)],
                        max_tokens=max(2 * self.cfg.max_tokens, 90 * most))

    # ------------------------------------------------------------------ react
    def react(self, view: AgentView, percept: str, about: Sequence[RetrievedMemory],
              present: Sequence[str]) -> Decision[Reaction]:
        """Continue, go somewhere, or talk to someone present, about a salient percept; the memories retrieved
        about it are in the prompt."""
        people = {view.names[o]: o for o in present}
        mems = list(about[: self.cfg.memories_in_prompt])
        places = list(view.place_names)
        how = ("First say in a few words what this means to you; then decide: continue what you are doing (the usual "
               "answer), go somewhere else because of it (say where and why; the place id, and what you will do "
               "there), or talk to someone here about it (their name).")
        messages = [
            {"role": "system", "content": self.persona_text(view)},
            {"role": "user", "content": (
                f"You notice: {percept}\n\n{self.memories_text(mems, 'What you remember about it')}\n\n"
                f"{self.places_text(view)}\nPeople here: {', '.join(people) or 'nobody'}.\n\n"
                f"You are {self._doing(view)}. {how}")},
        ]
        asked = content_lemmas(how)
        # every field is required, so a "go" or "talk" answer can only name a place or someone here: offered
        # "none", the bundled 135M model answered "talk" to "none", and no reaction of its started a conversation
        schema = _obj({"reason": {"type": "string", "maxLength": 120},  # first: the model reasons, then decides
                       "decision": {"type": "string", "enum": ["continue", "go", "talk"] if people
                                    else ["continue", "go"]},
                       "place": {"type": "string", "enum": places},
                       "person": {"type": "string", "enum": list(people) or ["none"]},
                       "activity": {"type": "string", "maxLength": ACTIVITY_CHARS}}, "reaction")

        def parse(data) -> Reaction:
            r = _Reaction.model_validate(data)
            if r.decision == "go":
                if r.place not in view.place_names:
                    raise BadAnswer(f"'go' needs a place id, got {r.place!r}")
                place = went_as_said(r.place, f"{r.reason}\n{r.activity}", view.place_names, view.place)
                if place == view.place:
                    return Reaction("continue", reason=r.reason)
                activity = model_activity(r.activity, view.place_names, asked, view.names.values(), required=False)
                self.count({"react_places_from_words": int(place != r.place)})
                return Reaction("go", place=place, activity=activity or None, reason=r.reason)
            if r.decision == "talk":
                if r.person not in people:
                    raise BadAnswer(f"'talk' needs the name of someone here, got {r.person!r}")
                return Reaction("talk", person=people[r.person], reason=r.reason)
            return Reaction("continue", reason=r.reason)

        return self.ask("react", messages, schema, parse,
                        lambda: self.scripted.react(view, percept, about, present), [m.id for m in mems])

    def consider(self, view: AgentView, engagement: Engagement,
                 commitments: Sequence[PlanItem]) -> Decision[Consideration]:
        """Go to an engagement or not: asked only when a memory holding it was retrieved (else, as the scripted
        mind: not recalled, no call); the retrieved memories, the plan items in its window that stand in the way
        and the window itself are in the prompt."""
        e = engagement
        recalled = any(m.record is not None and Engagement.from_extra(m.record.extra) == e for m in view.memories)
        if not recalled:
            return self.scripted.consider(view, e, commitments)
        mems = self._prompt_memories(view)
        place = view.place_names.get(e.place, e.place)
        when = f"day {e.start // MINUTES_PER_DAY + 1} from {format_hhmm(e.start)} to {format_hhmm(e.end)}"
        busy = "; ".join(c.describe(view.place_names.get(c.place, c.place)) for c in commitments) or "nothing fixed"
        who = "you are the host" if e.host == view.agent else f"{view.names.get(e.host, e.host)} is the host"
        messages = [
            {"role": "system", "content": self.persona_text(view)},
            {"role": "user", "content": (
                f"{self.memories_text(mems)}\n\nAs you remember it, people are expected at {place} on {when} "
                f"({who}). Your work at that time: {busy}.\n\nSay in a few words what you think of it, then decide "
                "whether you will be there (go: true or false).")},
        ]
        schema = _obj({"reason": {"type": "string", "maxLength": 120}, "go": {"type": "boolean"}}, "consider")

        def parse(data) -> Consideration:
            c = _Consider.model_validate(data)
            return Consideration(c.go, c.reason.strip() or ("going" if c.go else "not going"))

        return self.ask("consider", messages, schema, parse,
                        lambda: self.scripted.consider(view, e, commitments), [m.id for m in mems])

    @staticmethod
    def _doing(view: AgentView) -> str:
        return view.activity or "going about your day"

    # ------------------------------------------------------------------ dialogue
    def open_history(self):
        """A fresh conversation history of the configured strategy (``cognition.history``)."""
        from simulacra.cognition.dialogue import open_history

        return open_history(self.cfg, self.model, self.config.simulation.seed)

    def next_line(self, view: AgentView, c: ConversationView) -> Decision[Utterance]:
        """The speaker's next line from its persona, its relationship with the listener, what it retrieved
        about the listener, the news it could tell and the conversation so far (the history strategy's
        view of it); the model says whether it ends the conversation."""
        p = view.persona
        listener = view.names[c.listener]
        relation = p.relationships.get(c.listener, "You do not know them well." if not c.acquainted else
                                       "You have talked before.")
        mems = self._prompt_memories(view)
        said = {u.topic for _, u in c.lines}
        news = [n for n in c.news if n.topic not in said][:4]
        news_text = "\n".join(f"{i}. {n.topic}" for i, n in enumerate(news, 1)) or "nothing new"
        system = (f"{self.persona_text(view)}\nYou are talking with {listener}. {relation}\n"
                  f"{self.memories_text(mems, f'What you remember about {listener}')}\n"
                  f"News you could tell (number it in 'news', 0 for none):\n{news_text}")
        closing = "You must end the conversation now." if c.turn >= c.max_turns - 1 else ""
        ending = " Set end to true when you finish the conversation."
        if 1 <= c.turn < min(c.min_turns, c.max_turns) - 1:  # simulation.min_conversation_lines: not yet
            ending = " Keep the conversation going: ask or answer something, and set end to false."
        instruction = (f"Say your next line to {listener}: one or two short sentences in your own voice. "
                       f"{'Open the conversation.' if c.turn == 0 else ''}{closing}{ending}")
        messages = c.history.messages(system, p.name, instruction) if c.history is not None else [
            {"role": "system", "content": system}, {"role": "user", "content": instruction}]
        schema = _obj({"line": _text(LINE_CHARS), "news": {"type": "integer", "enum": list(range(len(news) + 1))},
                       "end": {"type": "boolean"}}, "line")
        prompt = prompt_sentences([line_request(p.name, False), line_request(p.name, True), instruction])

        def parse(data) -> Utterance:
            ln = _Line.model_validate(data)
            if not 0 <= ln.news <= len(news):
                raise BadAnswer(f"news must be 0..{len(news)}, got {ln.news}")
            item = news[ln.news - 1] if ln.news else None
            text = tidy_line(ln.line, names=(p.name, listener), prompt=prompt, said=[u.text for _, u in c.lines],
                             limit=LINE_CHARS, speaker=p.name)
            return Utterance(text, item.topic if item else None, ln.end or c.turn >= c.max_turns - 1)

        d = self.ask("line", messages, schema, parse, lambda: self.scripted.next_line(view, c),
                     view.memory_ids[: len(mems)])
        if c.history is not None:
            c.history.count_line(d)
        if d.value.topic is not None and d.source == "llm":
            used = next(n.memory_id for n in news if n.topic == d.value.topic)
            d = Decision(d.value, (used, *d.memory_ids), d.source, d.reason, d.tokens)
        return d

    def whole_conversation(self, views: dict[str, AgentView], convs: dict[str, ConversationView]
                           ) -> Decision[tuple[list[tuple[str, Utterance]], str]] | None:
        """The whole conversation and its summary in one call (``cognition.exchange: whole``), or ``None`` when
        lines are asked one by one (``line``). ``views``/``convs``: per speaker id, the opener first. Each side's
        persona, relationship, memories about the other and news are in the prompt; every line names its speaker
        (one of the two, alternating from the opener) and the news item it tells, by number in that speaker's list.
        The fallback is the scripted conversation."""
        if self.cfg.exchange != "whole":
            return None
        a, b = list(views)
        names = {pid: views[pid].names[pid] for pid in (a, b)}
        lists = {pid: [n for n in convs[pid].news][:4] for pid in (a, b)}
        parts = []
        for me, other in ((a, b), (b, a)):
            v, p = views[me], views[me].persona
            relation = p.relationships.get(other, "They have talked before." if convs[me].acquainted else
                                           "They do not know each other well.")
            mems = self._prompt_memories(v)
            news = "\n".join(f"{i}. {n.topic}" for i, n in enumerate(lists[me], 1)) or "nothing new"
            parts.append(f"{p.name}, {p.age}, {p.occupation}; {', '.join(p.traits)}. {p.speech_style}\n"
                         f"About {names[other]}: {relation}\n"
                         f"{self.memories_text(mems, f'{p.first_name} remembers about {names[other]}')}\n"
                         f"News {p.first_name} could tell (by number):\n{news}")
        c = convs[a]
        place = views[a].place_names.get(c.place, c.place)
        task = ("You write short, natural conversations between townspeople. Each speaks in character and only "
                "from what they remember.")
        instruction = (
            f"It is {format_hhmm(views[a].now)} at {place}. Write their conversation: 2 to {c.max_turns} lines, "
            f"{names[a]} first, speakers alternating; give each line's speaker, the line, and the number of the news "
            f"item it tells from that speaker's list (0 for none). Then summarise it in at most "
            f"{self.cfg.summary_words} words.")
        messages = [{"role": "system", "content": task},
                    {"role": "user", "content": "\n\n".join(parts) + f"\n\n{instruction}"}]
        prompt = prompt_sentences([task, instruction])
        n_news = max(len(lists[a]), len(lists[b]))
        schema = _obj({"lines": {"type": "array", "minItems": 2, "maxItems": c.max_turns, "items": _obj(
            {"speaker": {"type": "string", "enum": [names[a], names[b]]}, "line": _text(LINE_CHARS),
             "news": {"type": "integer", "minimum": 0, "maximum": n_news}}, "exchange_line")},
            "summary": _text(600)}, "exchange")
        ids = {names[a]: a, names[b]: b}

        def parse(data):
            ex = _Exchange.model_validate(data)
            out: list[tuple[str, Utterance]] = []
            for i, ln in enumerate(ex.lines[: c.max_turns]):
                speaker = ids.get(ln.speaker)
                if speaker is None:
                    raise BadAnswer(f"line {i + 1}: unknown speaker {ln.speaker!r}")
                if speaker != (a if i % 2 == 0 else b):
                    raise BadAnswer(f"line {i + 1}: speakers must alternate, {names[a]} first")
                pool = lists[speaker]
                if not 0 <= ln.news <= len(pool):
                    raise BadAnswer(f"line {i + 1}: news must be 0..{len(pool)} for {ln.speaker}")
                topic = pool[ln.news - 1].topic if ln.news else None
                last = i == len(ex.lines[: c.max_turns]) - 1
                text = tidy_line(ln.line, names=names.values(), prompt=prompt,
                                 said=[u.text for _, u in out], limit=LINE_CHARS, speaker=names[speaker])
                out.append((speaker, Utterance(text, topic, last)))
            summary = check_not_looping(ex.summary.strip(), "the summary")
            return out, f"Conversation of {names[a]} and {names[b]} at {place}: {summary}"

        def scripted():
            lines, _ = converse_line_by_line(self.scripted.next_line, views, convs, a, b)
            return Decision((lines, self.scripted.summarise_conversation(views[a], convs[a]).value))

        used = tuple(dict.fromkeys(m.id for pid in (a, b) for m in self._prompt_memories(views[pid])))
        return self.ask("exchange", messages, schema, parse, scripted, used,
                        max_tokens=max(3 * self.cfg.max_tokens, 120 * c.max_turns))

    def summarise_conversation(self, view: AgentView, c: ConversationView) -> Decision[str]:
        """A short third-person summary of the conversation that both participants store."""
        a, b = view.names[c.speaker], view.names[c.listener]
        transcript = "\n".join(f"{view.names[s]}: {u.text}" for s, u in c.lines)
        place = view.place_names.get(c.place, c.place)
        messages = [{"role": "system", "content": "You write short, factual summaries of conversations."},
                    {"role": "user", "content": (
                        f"{a} and {b} talked at {place}:\n{transcript}\n\nSummarise it in at most "
                        f"{self.cfg.summary_words} words: who told whom what, and anything agreed.")}]
        schema = _obj({"summary": _text(600)}, "summary")

        def parse(data) -> str:
            s = check_not_looping(_Summary.model_validate(data).summary.strip(), "the summary")
            return f"Conversation of {a} and {b} at {place}: {s}"

        return self.ask("summary", messages, schema, parse, lambda: self.scripted.summarise_conversation(view, c), ())

    def reflect(self, view: AgentView, evidence: Sequence[dict], max_insights: int) -> Decision[list[dict]]:
        return reflect_with(self.reflector, view, evidence, max_insights, "llm")

    # ------------------------------------------------------------------ interview
    def interview(self, view: AgentView, question: str) -> Decision[Answer]:
        """An answer in the agent's voice from the memories retrieved for the question, citing the ones used. The
        answer is said as a line is (:func:`tidy_line`, up to 8 sentences): a speaker label, the question and the
        instructions copied into it are dropped, and one that is not a sentence said aloud is asked again."""
        mems = list(view.memories[: max(self.cfg.memories_in_prompt, 1)])
        instruction = ("Answer in your own voice from what you remember; if you do not remember, say so. List the "
                       "numbers of the memories you used.")
        messages = [
            {"role": "system", "content": self.persona_text(view)},
            {"role": "user", "content": (
                f"{self.memories_text(mems)}\n\nAn interviewer asks you: {question}\n{instruction}")},
        ]
        prompt = prompt_sentences([question, instruction])
        schema = _obj({"answer": _text(ANSWER_CHARS), "memories": {"type": "array", "maxItems": len(mems), "items": {
            "type": "integer", "minimum": 1, "maximum": max(len(mems), 1)}}}, "interview")

        def parse(data) -> Answer:
            a = _Answer.model_validate(data)
            bad = [i for i in a.memories if not 1 <= i <= len(mems)]
            if bad:
                raise BadAnswer(f"memory numbers must be 1..{len(mems)}, got {bad}")
            text = tidy_line(a.answer, most=8, names=(view.persona.name,), prompt=prompt, limit=ANSWER_CHARS)
            return Answer(text, tuple(dict.fromkeys(mems[i - 1].id for i in a.memories)))

        return self.ask("interview", messages, schema, parse, lambda: self.scripted.interview(view, question),
                        [m.id for m in mems])
