"""Replay state: what the town looked like at tick T, computed from ``trace.jsonl`` alone (no Chroma, no model).

:class:`ReplayState` reads a trace once and precomputes one cumulative snapshot per tick (memory counts per
tier from the ``add`` / ``move`` / ``forget`` operations, each agent's last retrieval), so :meth:`state_at`
is a lookup: seeking backwards gives exactly the state that playing forwards reaches. Alongside it keeps the
memory browser's index (:class:`~simulacra.viewer.memory.MemoryIndex`), who knows which news
(:class:`simulacra.news.KnownNews`, the town's own rule), who talked with whom, and the objects' states, each
answerable at any tick. No pygame here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from simulacra.clock import day_number, format_game_time, format_hhmm
from simulacra.memory.records import RetrievedMemory
from simulacra.news import KnownNews, Learned
from simulacra.text import at_place
from simulacra.trace import (
    ADD,
    FORGET,
    LONG_TERM,
    MOVE,
    PLAN_DAY,
    REINFORCE,
    RETRIEVE,
    SHORT_TERM,
    STATIC,
    FrameCheck,
    Header,
    RetrieveOp,
    TickRecord,
    TraceFormatError,
    agent_names,
    read_trace,
)
from simulacra.viewer.memory import HeldSpan, MemoryIndex, StaticRule

log = logging.getLogger(__name__)

TIERS = (STATIC, SHORT_TERM, LONG_TERM)


@dataclass(frozen=True)
class Retrieval:
    """A ``retrieve`` operation of the trace: at ``tick``, ``query`` for ``purpose`` returned ``results``."""

    tick: int
    query: str
    purpose: str
    results: tuple[RetrievedMemory, ...]


@dataclass(frozen=True)
class Utterance:
    """One line said at a tick: ``speaker`` to ``listener`` at ``place``."""

    speaker: str
    listener: str
    text: str
    place: str
    topic: str | None = None


@dataclass(frozen=True)
class AgentView:
    """One agent at the end of a tick: its place, action, memory counts per tier and last retrieval."""

    id: str
    name: str
    initials: str
    place: str
    place_name: str
    action_type: str
    activity: str
    counts: dict[str, int | None]
    last_retrieval: Retrieval | None
    plan: tuple[str, ...] = ()  # the day plan's items, "HH:MM activity at place" (text.at_place), as of this tick
    plan_source: str = ""  # "scripted", "llm" or "fallback"
    asleep: bool = False  # asleep during the tick (simulacra.days: perceives, retrieves and says nothing)


@dataclass(frozen=True)
class TickState:
    """The town at the end of tick ``tick`` (game minute ``time``, ``clock`` "HH:MM"; ``when``: day, weekday and
    time, ``"day 2 (Tuesday) 07:00"``, ``"day 7 (Sunday, rest day) 07:00"``; :func:`format_game_time`)."""

    tick: int
    time: int
    clock: str
    agents: dict[str, AgentView]
    utterances: tuple[Utterance, ...]
    events: tuple[str, ...] = field(default_factory=tuple)
    when: str = ""


def initials(name: str) -> str:
    """Up to two capital initials of a name: ``"Hana Novak"`` -> ``"HN"``."""
    parts = [p for p in name.replace("-", " ").split() if p]
    if not parts:
        return "?"
    if len(parts) == 1:
        return parts[0][:2].upper()
    return (parts[0][0] + parts[-1][0]).upper()


def _static_counts(header: Header, rule: StaticRule) -> dict[str, int | None]:
    """Static-memory size per agent, rebuilt from the header's world and personas (``None`` if that fails)."""
    out: dict[str, int | None] = {}
    for pid in header.get("agents", []):
        got = rule.of(pid)
        out[pid] = None if got is None else len(got)
    return out


@dataclass(frozen=True)
class News:
    """A piece of news of the run (a world event's text, a scenario's fact, anything a line told as its topic):
    ``topic`` is its text; ``first_tick`` the tick someone first knew it (``None``: nobody did in the run);
    ``source`` where it comes from (``event``, ``fact`` or ``told``)."""

    topic: str
    first_tick: int | None
    source: str


def _retrieval(tick: int, op: RetrieveOp) -> Retrieval:
    results = tuple(
        RetrievedMemory(id=m["id"], text=m["text"], tier=m["tier"], kind=m["kind"], recency=m["recency"],
                        importance=m["importance"], relevance=cast(float, m["relevance"]),  # None: shown as "-"
                        score=float(m["score"] or 0.0))
        for m in op["results"])
    return Retrieval(tick=tick, query=op["query"], purpose=op["purpose"], results=results)


class ReplayState:
    """A finished run, replayable tick by tick from its trace.

    Args:
        header: the trace header (``world`` with ``places[id].position`` [x, y] and ``paths``; ``personas``;
            ``agents``).
        ticks: the tick records in order.
        source: where the trace came from (for messages).

    Raises:
        TraceFormatError: no tick records, or a header without world places.
    """

    def __init__(self, header: Header, ticks: list[TickRecord], source: str = "trace"):
        if not ticks:
            raise TraceFormatError(f"{source}: the trace has no ticks to replay")
        world = header.get("world") or {}
        if not world.get("places"):
            raise TraceFormatError(f"{source}: the header has no world places")
        self.header = header
        self.source = source
        self.world_name: str = world.get("name", "?")
        self.places: dict[str, dict[str, Any]] = {
            pid: {"name": p.get("name", pid), "kind": p.get("kind", ""), "position": tuple(p.get("position") or (0, 0))}
            for pid, p in world["places"].items()}
        self.paths: list[tuple[str, str]] = [(a, b) for a, b in world.get("paths", [])]
        self.agents: list[str] = list(header.get("agents") or ticks[0]["positions"])
        personas = header.get("personas") or {}
        self.names = agent_names(header, self.agents)
        #: the places residents go to: their homes and their routines' steps (the names placed first on the map)
        self.destinations: set[str] = {
            str(place) for p in personas.values() if isinstance(p, dict)
            for place in [p.get("home"), *(step.get("place") for step in [*(p.get("routine") or ()),
                                                                         *(p.get("rest_day_routine") or ())]
                                          if isinstance(step, dict))]
            if place in self.places}
        self.initials = {pid: initials(self.names[pid]) for pid in self.agents}
        self.tick_minutes = header.get("tick_minutes")
        self.start_weekday: str = world.get("start_weekday") or "Monday"
        self.rest_days: set[str] = set(world.get("rest_days") or ())
        self.statics = StaticRule(header)
        self._static = _static_counts(header, self.statics)
        self.memory = MemoryIndex(header, static=self.statics)
        self.news = KnownNews(header)
        self.talks: list[tuple[int, str, str]] = []  # (tick, a, b) per conversation, a < b
        objects = world.get("objects") or []
        self.objects: dict[str, dict[str, str]] = {
            o["id"]: {"name": o.get("name", o["id"]), "place": o.get("place", "")} for o in objects if "id" in o}
        start_states = header.get("objects") or {o: "" for o in self.objects}
        self._object_states: dict[str, list[tuple[int, str]]] = {o: [(-1, st)] for o, st in start_states.items()}
        self._events = [(e.get("text", ""), "event") for e in world.get("events") or []]
        self._events += [(f.get("text", ""), "fact") for f in (header.get("scenario") or {}).get("facts") or []]
        self._ids: dict[str, dict[str, set[str]]] = {pid: {"short_term": set(), "long_term": set()}
                                                     for pid in self.agents}
        for op in (header.get("scenario") or {}).get("seeded") or ():  # a scenario's memories from before the run
            if op.get("op") == ADD and op.get("agent") in self._ids and op.get("tier") in self._ids[op["agent"]]:
                self._ids[op["agent"]][op["tier"]].add(op["id"])
        self._last: dict[str, Retrieval | None] = {pid: None for pid in self.agents}
        self._plans: dict[str, tuple[tuple[str, ...], str]] = {pid: ((), "") for pid in self.agents}
        self._states: list[TickState] = []
        self.extend(ticks)

    @classmethod
    def load(cls, path: str | Path) -> ReplayState:
        """Load ``<run folder>`` or ``<run folder>/trace.jsonl``.

        Raises:
            FileNotFoundError: no trace there.
            TraceFormatError: the trace is malformed or empty.
        """
        p = Path(path)
        trace = p / "trace.jsonl" if p.is_dir() else p
        if not trace.is_file():
            raise FileNotFoundError(f"no trace at {trace}")
        header, ticks = read_trace(trace)
        return cls(header, ticks, source=str(trace))

    # ----------------------------------------------------------------- precomputation
    def extend(self, ticks: list[TickRecord]) -> None:
        """Append tick records (a live run's new ticks); earlier states are not touched."""
        self._news_list: list[News] | None = None
        for rec in ticks:
            self._states.append(self._advance(len(self._states), rec))
            self.memory.extend([rec])
            self.news.read(rec)
            tick = int(rec["tick"])
            for conv in rec["conversations"]:
                who = sorted(set(conv["participants"]))
                for i, a in enumerate(who):
                    for b in who[i + 1:]:
                        self.talks.append((tick, a, b))
            for obj, st in (rec.get("object_changes") or {}).items():
                self._object_states.setdefault(obj, [(-1, "")]).append((tick, st))

    def _advance(self, n: int, rec: TickRecord) -> TickState:
        """The state after tick record ``rec`` (the ``n``-th), updating the running memory counts."""
        ids, last = self._ids, self._last
        tick = int(rec["tick"])
        for op in rec["memory"]:
            agent = op.get("agent")
            if agent not in ids:
                continue  # town notices ("post") and unknown agents
            tiers = ids[agent]
            if op["op"] == ADD:
                if op["tier"] in tiers:
                    tiers[op["tier"]].add(op["id"])
            elif op["op"] == MOVE:
                tiers.get(op["from"], set()).discard(op["id"])
                if op["to"] in tiers:
                    tiers[op["to"]].add(op["id"])
            elif op["op"] == FORGET:
                tiers.get(op["tier"], set()).discard(op["id"])
            elif op["op"] == REINFORCE:
                tiers[SHORT_TERM].difference_update(op["from_ids"])
                tiers[LONG_TERM].difference_update(op["replaces"])
                tiers[LONG_TERM].add(op["id"])
            elif op["op"] == RETRIEVE:
                last[agent] = _retrieval(tick, op)
        for d in rec.get("decisions", ()):
            if d["kind"] == PLAN_DAY and d["agent"] in self._plans:
                items = tuple(f"{format_hhmm(i['start'])} "
                              + at_place(i["activity"], self.places.get(i["place"], {}).get("name", i["place"]))
                              for i in d["value"])
                self._plans[d["agent"]] = (items, d["source"])
        views = {}
        asleep = set(rec.get("asleep", ()))
        for pid in self.agents:
            place = rec["positions"].get(pid, "")
            act = rec["actions"].get(pid)
            views[pid] = AgentView(
                id=pid, name=self.names[pid], initials=self.initials[pid], place=place,
                place_name=self.places.get(place, {}).get("name", place),
                action_type=act["type"] if act is not None else "",
                activity=act["activity"] if act is not None else "",
                counts={STATIC: self._static.get(pid), SHORT_TERM: len(ids[pid][SHORT_TERM]),
                        LONG_TERM: len(ids[pid][LONG_TERM])},
                last_retrieval=last[pid], plan=self._plans[pid][0], plan_source=self._plans[pid][1],
                asleep=pid in asleep)
        utterances = tuple(
            Utterance(speaker=ln["speaker"], listener=ln["listener"], text=ln["text"], place=conv["place"],
                      topic=ln["topic"])
            for conv in rec["conversations"] for ln in conv["lines"])
        time = int(rec["time"])
        when = format_game_time(time, self.start_weekday, self.rest_days)
        return TickState(tick=tick, time=time, clock=rec["clock"], agents=views, utterances=utterances,
                         events=tuple(rec["events"]), when=when)

    # ----------------------------------------------------------------- queries
    def __len__(self) -> int:
        return len(self._states)

    @property
    def first_tick(self) -> int:
        return self._states[0].tick

    @property
    def last_tick(self) -> int:
        return self._states[-1].tick

    def index_of(self, tick: int) -> int:
        """Index of ``tick`` in the replay, clamped to the first/last tick."""
        return max(0, min(len(self._states) - 1, tick - self.first_tick))

    def state_at(self, tick: int) -> TickState:
        """The town at the end of ``tick`` (clamped to the run's ticks); the same object however it is reached."""
        return self._states[self.index_of(tick)]

    def tick_of_clock(self, hhmm: str, day: int | None = None) -> int | None:
        """The tick whose span holds ``hhmm`` ("HH:MM") on game day ``day`` (default: the first day of the run
        that has that time); ``None`` if the run has no such tick.

        Raises:
            ValueError: ``hhmm`` is not "HH:MM".
        """
        minute = int(hhmm[:2]) * 60 + int(hhmm[3:5]) if len(hhmm) == 5 and hhmm[2] == ":" else None
        if minute is None:
            raise ValueError(f"not a HH:MM time: {hhmm!r}")
        step = int(self.tick_minutes or 1)
        for s in self._states:
            if (day is None or day_number(s.time) == day) and s.time % (24 * 60) <= minute < s.time % (24 * 60) + step:
                return s.tick
        return None

    def day_of(self, tick: int) -> int:
        """The game day (from 1) of ``tick`` (clamped)."""
        return day_number(self.state_at(tick).time)

    # ----------------------------------------------------------------- news, talks, objects
    def news_list(self) -> list[News]:
        """The run's news: the world's events, a scenario's facts and whatever else a line told as its topic; those
        someone knew in the run first (in the order first known), then the others (events, then facts, in file
        order)."""
        if self._news_list is not None:
            return list(self._news_list)
        firsts = {topic: min(w.tick for w in got.values()) for topic, got in self.news.first.items() if got}
        out, seen = [], set()
        for text, source in self._events:
            if text and text not in seen:
                seen.add(text)
                out.append(News(text, firsts.get(text), source))
        out += [News(t, firsts[t], "told") for t in firsts if t not in seen]
        known = sorted((n for n in out if n.first_tick is not None), key=lambda n: n.first_tick or 0)
        self._news_list = known + [n for n in out if n.first_tick is None]
        return list(self._news_list)

    def knowers_at(self, topic: str, tick: int) -> dict[str, Learned]:
        """Agent -> how and from whom it first knew ``topic``, for the agents that knew it by the end of ``tick``
        (the town's rule, :mod:`simulacra.news`)."""
        return {a: w for a, w in self.news.first.get(topic, {}).items() if w.tick <= tick}

    def diffusion(self, topic: str) -> list[int]:
        """Agents knowing ``topic`` at the end of each tick of the replay (one count per tick, first to last)."""
        counts = [0] * len(self._states)
        for w in self.news.first.get(topic, {}).values():
            counts[self.index_of(w.tick)] += 1
        total = 0
        for i, c in enumerate(counts):
            total += c
            counts[i] = total
        return counts

    def remembering_at(self, topic: str, tick: int) -> set[str]:
        """The agents that hold a memory of ``topic`` at the end of ``tick`` (short- or long-term, the rule of the
        run summary's ``remembered_by``: :meth:`MemoryIndex.held_spans`); a subset of those who came to know it
        (:meth:`knowers_at`) when the trace records every memory's news."""
        return self.memory.held_at(topic, tick)

    def forgotten_at(self, topic: str, tick: int) -> dict[str, HeldSpan]:
        """Agent -> when (``end``, a tick) and why (``reason``) it let go of its last memory of ``topic``, for the
        agents that held one before the end of ``tick`` and hold none then."""
        return self.memory.forgot_by(topic, tick)

    def remembered(self, topic: str) -> list[int]:
        """Agents holding a memory of ``topic`` at the end of each tick of the replay (one count per tick, first
        to last): beside :meth:`diffusion`, what forgetting takes back."""
        diff = [0] * (len(self._states) + 1)
        for spans in self.memory.held_spans(topic).values():
            for span in spans:
                diff[self.index_of(span.start)] += 1
                if span.end is not None:
                    diff[self.index_of(span.end) if span.end <= self.last_tick else len(self._states)] -= 1
        counts, total = [], 0
        for d in diff[:-1]:
            total += d
            counts.append(total)
        return counts

    def talked(self, tick: int) -> dict[tuple[str, str], int]:
        """``(a, b)`` (ids sorted) -> the conversations they had up to the end of ``tick``."""
        out: dict[tuple[str, str], int] = {}
        for t, a, b in self.talks:
            if t <= tick:
                out[(a, b)] = out.get((a, b), 0) + 1
        return out

    def objects_at(self, place: str, tick: int) -> list[tuple[str, str]]:
        """The objects at ``place`` with their states at the end of ``tick``: ``(name, state)``, world file order."""
        out = []
        for oid, o in self.objects.items():
            if o["place"] != place:
                continue
            state = ""
            for t, st in self._object_states.get(oid, ()):
                if t > tick:
                    break
                state = st
            out.append((o["name"], state))
        return out

    def busiest_tick(self) -> int:
        """The tick with the most lines said (ties: the earliest) — a good default screenshot."""
        return max(self._states, key=lambda s: (len(s.utterances), -s.tick)).tick


class TraceFollower:
    """Reads the records a running simulation appends to its trace, complete lines only.

    The engine never waits for it: the simulation writes and flushes one line per tick, and the follower
    reads whatever complete lines are there when asked (a half-written last line is left for next time).
    """

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._offset = 0
        self._frame = FrameCheck(self.path)
        self.header: Header | None = None

    def poll(self) -> list[TickRecord]:
        """Tick records appended since the last poll (the header, once, goes to :attr:`header`).

        Raises:
            TraceFormatError: a line that is not JSON, not the record expected or a tick out of sequence (the
                checks of :func:`simulacra.trace.iter_trace`), naming the file and line.
        """
        if not self.path.is_file():
            return []
        with self.path.open("rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._offset += end + 1
        out = []
        for line in data[:end].split(b"\n"):  # lines end at b"\n" only: a text may hold U+2028 or \x1c
            record = self._frame.read(line)
            if self._frame.lines == 1:
                self.header = record
            else:
                out.append(record)
        return out
