"""The time a question names (its *time cue*), for recall retrievals (issue 22 §1; ``docs/memory.md``).

A question that names a time asks about what happened then, not about the latest memories and not about any:
"What was Kofi doing at 15:30?", "What did I plan for day 4?", "Whom did I meet yesterday evening?". Temporal
information retrieval calls this a query's temporal intent: Berberich et al. (2010, "A language modeling approach
for time-sensitive queries") score a document by how close its time lies to the time the query names. A recall
profile does this with one rule (``memory.profiles.<name>.dated``): a retrieval
whose query names a time is scored under the profile's *dated* profile, with recency measured from the time
named instead of from now (:func:`simulacra.memory.scoring.age_from`).

What is read (English, case-insensitive), all in game time (``simulacra.clock``):

* a clock time: "13:20", "at 9:05", "1 pm", "1:20 p.m.", "noon", "midnight" -- a moment (not "John 3:16", a
  chapter and verse after a capitalised word, nor "Noon" capitalised inside a sentence, a name);
* a day: "day 4" (game days count from 1), "yesterday", "the day before yesterday" -- the whole day;
* a part of a named day: "this morning" (06:00-12:00), "this afternoon" (12:00-18:00), "this evening" and
  "tonight" (18:00-24:00), "last night" (18:00 yesterday to 06:00 today), "last evening", "yesterday morning",
  "in the evening on day 3"; a clock time in it is read inside it ("yesterday afternoon at 3:15" is 15:15).

Asking for the latest ("latest", "most recent(ly)", "the last time", "did I last ...", "last" before a verb in the
past: "when I last saw her"; and how things stand now, "now", "currently", "at the moment", "still" in a question
with no irregular verb in the past: "What is Leila doing now?", "Is the bakery still closed?") names no time: the
latest is the newest of the memories about the question, which may be days old ("What did Bram tell me the last time
we talked about the mill?"). :func:`asks_latest` reads it, and a recall profile may link a ``latest`` profile for it
(``memory.profiles.<name>.latest``): recency from now with a small weight and a slow decay, a tie-break among the
relevant memories. Scored under the dated profile instead (recency from now with its weight, as stop 37 did), the
last hours' unrelated memories crowded the answer out (``docs/memory.md``). "At last", "the last ferry" and "last
week" name nothing and ask for nothing, nor does "did ... last" before a stretch of the calendar ("What did Jon buy
last month?", "... last Sunday"), a time the game clock cannot place.

A clock time with a day is that moment of that day; without one, its latest occurrence up to now (09:00 asked at
08:00 is yesterday's). A question that names a date of the calendar ("8 May", "May 8th", "2023") names no time at
all: the game clock counts days from 1 and knows no calendar, and "at 3 pm on 8 May 2023" read as the latest 3 pm
would score the day's memories up. A part of a day without a day word ("the afternoon ferry", "in the grey morning") and
"today" name nothing: they are too common in statements about routines. Weekday names are not read (a memory
layer does not know the world's calendar). A time after now names nothing (no memory was formed then),
and neither does a time still going on when the question has no verb in the past: "Is there a storm coming
tonight?" asked at 22:50 is about what is ahead (the rider's warning of 16:10 answers it), "Whom did I meet
tonight?" about what happened since 18:00.

A time before the run began is still read, and says so. Game days count from 1, and a run begins on day 1 at its
world's ``start_time`` (its first game minute, ``run_start``: the trace header's ``start_minute``, 420 for 07:00; at
the earliest :data:`EARLIEST_START`, day 1 00:00). A window that ends before ``run_start`` -- "yesterday" or "last
night" asked on day 1, "the day before yesterday" on day 1 or 2, "day 0", "at 23:00" asked at 08:00 on day 1 -- is
a :class:`TimeCue` marked :attr:`~TimeCue.before_run` (its ``run_start`` set, the window as named, e.g. day 0 00:00
to 23:59): no memory was formed then, and only the timeless ones (static persona and world facts, which have no
time) hold then; an interview retrieves those alone and its answer says the time is before the run
(:func:`simulacra.interview.recalled`, :func:`simulacra.interview.ask`). Read as naming no time instead, such a
question was answered from the day's memories as if it asked about nothing in particular. A window partly before
``run_start`` keeps its part from ``run_start`` on ("this morning" asked at 10:00 on a run begun at 07:00 is 07:00 to
10:00).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from simulacra.clock import MINUTES_PER_DAY, MINUTES_PER_HOUR, day_start

#: the earliest first game minute of a run: day 1, 00:00 (a run begins on day 1 at its world's ``start_time``);
#: the ``run_start`` of a caller that does not know its run's own
EARLIEST_START = 0

#: parts of a day, ``(start, end)`` in minutes after midnight (``end`` may pass midnight)
PARTS_OF_DAY = {"morning": (6 * 60, 12 * 60), "afternoon": (12 * 60, 18 * 60), "evening": (18 * 60, 24 * 60),
                "night": (18 * 60, 30 * 60)}

_CLOCK = re.compile(r"\b(?P<h>[01]?\d|2[0-3]):(?P<m>[0-5]\d)(?:\s*(?P<ap>[ap])\.?\s?m\b\.?)?"
                    r"|\b(?P<h12>1[0-2]|0?[1-9])\s*(?P<ap12>[ap])\.?\s?m\b\.?|\b(?P<word>noon|midday|midnight)\b", re.I)
#: capitalised words that may stand right before a clock time ("At 15:30", "Monday 9:15"); any other capitalised
#: word there makes the number a reference ("John 3:16", "Psalm 23:14"), not a time
_BEFORE_A_TIME = frozenset(
    "at by around about until till from since before after past and or on in yesterday today tonight this last "
    "morning afternoon evening night monday tuesday wednesday thursday friday saturday sunday january february "
    "march april may june july august september october november december".split())
_WORD_BEFORE = re.compile(r"([A-Za-z][\w'’-]*)\s*$")
#: what follows a chapter and verse's number, not a clock time: another ":" or a range ("3:16:2", "3:16-18")
_REFERENCE_AFTER = re.compile(r"[:\-–]\d")
_SENTENCE_START = re.compile(r"(?:^|[.!?;:\"“(\[]\s*|\n\s*)$")
_DAY_N = re.compile(r"\bday\s+(?P<n>\d{1,4})\b", re.I)
_BEFORE_YESTERDAY = re.compile(r"\bthe\s+day\s+before\s+yesterday\b", re.I)
_YESTERDAY = re.compile(r"\byesterday\b", re.I)
_THIS_PART = re.compile(r"\b(?:this\s+(?P<this>morning|afternoon|evening)|(?P<tonight>tonight)"
                        r"|last\s+(?P<last>night|morning|afternoon|evening))\b", re.I)
_PART = re.compile(r"\b(?P<part>morning|afternoon|evening|night)\b", re.I)
#: what "last" qualifies when it names a stretch of the calendar ("What did Jon buy last month?"), not the latest
_CALENDAR = (r"week|weekend|month|year|night|morning|afternoon|evening|summer|winter|spring|autumn|fall|season"
             r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday|january|february|march|april|may|june|july"
             r"|august|september|october|november|december|christmas|easter")
#: a verb in the past: one of the common irregular ones (and "happened"), or any regular one ("talked", not "need"
#: or "speed"; also an adjective such as "closed", which :data:`_IRREGULAR_PAST` alone leaves out)
_IRREGULAR_PAST = (r"happened|saw|spoke|met|heard|went|came|ate|told|said|had|did|was|were|got|gave|took|made|left"
                   r"|sent|found|wrote|bought|paid|brought|thought|knew|ran|sat|stood|slept")
_PAST_VERB = r"\w{2,}(?<!e)ed|" + _IRREGULAR_PAST
_PAST = re.compile(r"\b(?:" + _PAST_VERB + r")\b", re.I)
_PAST_IRREGULAR = re.compile(r"\b(?:" + _IRREGULAR_PAST + r")\b", re.I)
#: asking how things stand: the newest memory about the question is the answer ("What is Leila doing now?", "Is the
#: bakery still closed?"), unless an irregular verb is in the past ("What happened while I was still there?")
_NOW = re.compile(r"\b(?:right\s+now|now|currently|at\s+(?:the\s+)?(?:moment|present)|still)\b", re.I)
#: asking for the latest: "latest", "most recent(ly)", "the last time", "did I last ...", "last" before a verb in the
#: past ("when I last saw her") -- not "at last", "the last ferry", "last week" or "did Jon buy last month"
_LATEST = re.compile(r"\b(?:latest|most\s+recent(?:ly)?|last\s+time)\b"
                     r"|\bdid\s+(?:\w+\s+){1,3}?last\b(?!\s+(?:" + _CALENDAR + r")\b)"
                     r"|\blast\s+(?:" + _PAST_VERB + r")\b", re.I)


@dataclass(frozen=True)
class TimeCue:
    """The time a query names: the window ``[start, end]`` in game minutes (``start == end`` for a moment), the
    words that named it (``words``, for the trace), and, when the whole window lies before the run began,
    ``run_start``: the run's first game minute (else ``None``; module docstring)."""

    start: float
    end: float
    words: str
    run_start: float | None = None

    @property
    def before_run(self) -> bool:
        """Whether the time named ends before the run's first game minute: no memory is from then but the timeless
        static ones."""
        return self.run_start is not None

    def as_list(self) -> list:
        """``[start, end, words]``, the trace's form (``retrieve`` operations' ``named_time``, an interview's
        ``named_time``), with a fourth item, ``run_start`` (game minutes), for a time before the run."""
        named = [self.start, self.end, self.words]
        return named if self.run_start is None else [*named, self.run_start]

    @classmethod
    def from_list(cls, named: Sequence) -> TimeCue:
        """The cue of a trace form :meth:`as_list` wrote (three items, or four for a time before the run)."""
        start, end, words, *rest = named
        run_start = rest[0] if rest else None
        return cls(float(start), float(end), str(words), None if run_start is None else float(run_start))


def _clock(text: str) -> re.Match | None:
    """The first :data:`_CLOCK` match in ``text`` that reads as a time of day. Not read: a number right after a
    capitalised word other than those of :data:`_BEFORE_A_TIME` ("John 3:16", "Psalm 23:14": a chapter and verse)
    or right before another ":" or "-" and a digit ("3:16-18"); "Noon", "Midday", "Midnight" capitalised inside a
    sentence (a name: "Did Noon come by?")."""
    for m in _CLOCK.finditer(text):
        before = text[:m.start()]
        if m.group("word"):
            if m.group("word")[0].isupper() and not _SENTENCE_START.search(before):
                continue
            return m
        if m.group("h") and not m.group("ap") and _REFERENCE_AFTER.match(text, m.end()):
            continue
        w = _WORD_BEFORE.search(before)
        if w and w.group(1)[0].isupper() and w.group(1).lower() not in _BEFORE_A_TIME:
            continue
        return m
    return None


def _clock_minute(m: re.Match) -> int:
    """Minutes after midnight of a :data:`_CLOCK` match."""
    if m.group("word"):
        return 0 if m.group("word").lower() == "midnight" else 12 * MINUTES_PER_HOUR
    h = int(m.group("h") or m.group("h12"))
    minute = int(m.group("m") or 0)
    ap = (m.group("ap") or m.group("ap12") or "").lower()
    if ap == "p" and h < 12:
        h += 12
    elif ap == "a" and h == 12:
        h = 0
    return h * MINUTES_PER_HOUR + minute


def _inside(part: tuple[float, float], minute: int, am_pm: bool) -> float:
    """The game minute of a clock time (``minute`` after midnight) inside the part of a day ``part`` (which may run
    past midnight): the hour read as the afternoon's when it has no am/pm and only that falls inside ("3:15" in
    the afternoon is 15:15); the part's start when it falls outside either way."""
    base = day_start(part[0])
    readings = [minute] if am_pm or minute >= 12 * MINUTES_PER_HOUR else [minute, minute + 12 * MINUTES_PER_HOUR]
    for m in readings:
        for day in (base, base + MINUTES_PER_DAY):
            if part[0] <= day + m <= part[1]:
                return float(day + m)
    return float(part[0])


_MONTH = ("(?:January|February|March|April|May|June|July|August|September|October|November|December|Jan|Feb|Mar|Apr|"
          "Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)")
#: a date of the calendar: a day of a month ("8 May", "the 8th of May", "May 8th", "June 3"), or a year ("2023"):
#: the game clock counts days from 1 and knows no calendar, so a time on such a date names nothing
_CALENDAR_DATE = re.compile(rf"\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b"
                            rf"|\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b(?:1[89]|20)\d\d\b")


def time_cue(text: str, now: float, run_start: float = EARLIEST_START) -> TimeCue | None:
    """The time ``text`` names, asked at game minute ``now`` of a run that began at game minute ``run_start``
    (module docstring), or ``None`` when it names none.

    Args:
        text: the query (any string; an empty one names nothing).
        now: game minutes since day 1, 00:00 (game minute 0; day ``d`` begins at ``(d - 1) * 1440``).
        run_start: the run's first game minute (its clock's start, trace header ``start_minute``; default
            :data:`EARLIEST_START`, day 1 00:00, the earliest a run can begin), at most ``now``.
    Returns:
        A :class:`TimeCue` whose window ends at or before ``now`` (clipped to ``now``): when it ends before
        ``run_start``, the window as named, marked :attr:`~TimeCue.before_run`; else starting at ``run_start`` at the
        earliest (the part inside the run). ``None`` when the text names no time, or one after ``now``.
    """
    if not text or _CALENDAR_DATE.search(text):  # "at 3 pm on 8 May 2023": a day the game clock cannot place
        return None
    today = day_start(now)
    words: list[str] = []
    day: float | None = None  # the first minute of the day named
    if m := _DAY_N.search(text):
        day = (int(m.group("n")) - 1) * MINUTES_PER_DAY
    elif m := _BEFORE_YESTERDAY.search(text):
        day = today - 2 * MINUTES_PER_DAY
    elif m := _YESTERDAY.search(text):
        day = today - MINUTES_PER_DAY
    if m:
        words.append(m.group(0))
    clock = _clock(text)
    part: tuple[float, float] | None = None
    if p := _THIS_PART.search(text):
        words.append(p.group(0))
        if p.group("last"):  # "last night", "last evening": yesterday's (or the named day's)
            base = today - MINUTES_PER_DAY if day is None else day
            lo, hi = PARTS_OF_DAY[p.group("last").lower()]
        else:  # "this morning", "tonight": today's, whatever other day the text names
            base, day, words = today, None, [p.group(0)]
            lo, hi = PARTS_OF_DAY[(p.group("this") or "evening").lower()]
        part = (base + lo, base + hi)
    elif day is not None and (p := _PART.search(text)):
        words.append(p.group(0))
        lo, hi = PARTS_OF_DAY[p.group("part").lower()]
        part = (day + lo, day + hi)
    if clock:
        words.append(clock.group(0))
        minute = _clock_minute(clock)
        if part is not None:  # "yesterday afternoon at 3:15", "last night at 1 am": the moment inside the part
            start = end = _inside(part, minute, am_pm=bool(clock.group("ap") or clock.group("ap12")))
        else:
            if day is None:  # its latest occurrence up to now
                day = today if today + minute <= now else today - MINUTES_PER_DAY
            start = end = day + minute
    elif part is not None:
        start, end = part
    elif day is not None:
        start, end = day, day + MINUTES_PER_DAY - 1
    else:
        return None
    if start > now:
        return None
    if end > now and not _PAST.search(text):  # "Is there a storm coming tonight?": what is on, or ahead
        return None
    end = min(end, now)
    if end < run_start:  # "yesterday" on day 1: read, and marked as before the run (no memory is from then)
        return TimeCue(float(start), float(end), " ".join(words), float(run_start))
    return TimeCue(float(max(start, run_start)), float(end), " ".join(words))


def asks_latest(text: str | None) -> str | None:
    """The words with which ``text`` asks for the latest ("did I last", "the last time", "latest", or "now" in a
    question with no irregular verb in the past; module docstring), or ``None``. A question that also names a time
    (:func:`time_cue`) is about that time instead: callers ask :func:`time_cue` first."""
    if not text:
        return None
    m = _LATEST.search(text) or (None if _PAST_IRREGULAR.search(text) else _NOW.search(text))
    return None if m is None else m.group(0)


def time_words(text: str | None, now: float,
               run_start: float | None = None) -> tuple[TimeCue | None, str | None]:
    """What question ``text`` asked at game minute ``now`` of a run begun at game minute ``run_start`` says about
    time: ``(the time it names, None)`` (:func:`time_cue`; marked :attr:`~TimeCue.before_run` when before the run),
    else ``(None, the words that ask for the latest or None)`` (:func:`asks_latest`): a question that names a time
    is about that time, not the latest. ``run_start`` ``None`` (a retrieval the engine makes inside its run, and
    ``simulacra tune``'s, whose memories are all from the run): a time that begins before day 1 00:00
    (:data:`EARLIEST_START`) names no time ("reading yesterday's paper" on day 1), as such times were always read
    there; a caller that answers for a time before the run (an interview, a recall probe) gives the run's first
    minute. Read from the question as asked
    (:func:`simulacra.memory.perspective.asked`: a name put in for "you" hides no "did you last"). The one reading
    of a question's time words (:meth:`MemoryConfig.dated <simulacra.config.MemoryConfig.dated>`, ``simulacra
    tune``, ``simulacra interview``)."""
    from simulacra.memory.perspective import asked

    if not text:
        return None, None
    text = asked(text)
    if run_start is None:  # the window as named; one that begins before day 1 names no time
        cue = time_cue(text, now, -math.inf)
        cue = None if cue is None or cue.start < EARLIEST_START else cue
    else:
        cue = time_cue(text, now, run_start)
    return (cue, None) if cue is not None else (None, asks_latest(text))


def describe_named(named: Sequence | TimeCue) -> str:
    """A named time as people read it: ``'day 3 15:30, named by "at 15:30"'`` or ``'day 2 18:00 to day 3 00:00,
    named by "last night"'``, from a :class:`TimeCue` or its trace form (:meth:`TimeCue.as_list`); a time before the
    run ends ``', before the run began (day 1 07:00)'``."""
    from simulacra.clock import format_game_time

    cue = named if isinstance(named, TimeCue) else TimeCue.from_list(named)
    said = f'{describe_span(cue)}, named by "{cue.words}"'
    return said if cue.run_start is None else f"{said}, before the run began ({format_game_time(cue.run_start)})"


def describe_span(cue: TimeCue) -> str:
    """The window of ``cue`` as people read it: ``'day 3 15:30'``, ``'day 0 00:00 to day 0 23:59'``."""
    from simulacra.clock import format_game_time

    return format_game_time(cue.start) + ("" if cue.end == cue.start else f" to {format_game_time(cue.end)}")
