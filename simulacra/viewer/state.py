"""Replay state: what the town looked like at tick T, computed from ``trace.jsonl`` alone (no Chroma, no model).

:class:`ReplayState` reads a trace once and precomputes one cumulative snapshot per tick (memory counts per
tier from the ``add`` / ``move`` / ``forget`` operations, each agent's last retrieval), so :meth:`state_at`
is a lookup: seeking backwards gives exactly the state that playing forwards reaches. No pygame here.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from simulacra.clock import format_game_time, format_hhmm
from simulacra.memory.records import RetrievedMemory
from simulacra.trace import (
    ADD,
    FORGET,
    HEADER,
    LONG_TERM,
    MOVE,
    PLAN_DAY,
    REINFORCE,
    RETRIEVE,
    SHORT_TERM,
    STATIC,
    Header,
    RetrieveOp,
    TickRecord,
    TraceFormatError,
    read_trace,
)

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
    plan: tuple[str, ...] = ()  # the day plan's items, "HH:MM activity at place", as of this tick
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


def _static_counts(header: Header) -> dict[str, int | None]:
    """Static-memory size per agent, rebuilt from the header's world and personas (``None`` if that fails)."""
    agents = header.get("agents", [])
    try:
        from simulacra.persona import Persona
        from simulacra.simulation import static_records
        from simulacra.world.model import World

        personas = {pid: Persona.model_validate(p) for pid, p in header["personas"].items()}
        world = World.model_validate(header["world"])
        world._personas = personas
        return {pid: len(static_records(pid, personas[pid], world)) for pid in agents}
    except Exception as err:  # an older or hand-made header: show the static count as unknown
        log.debug("static memory counts not rebuilt from the trace header: %s", err)
        return {pid: None for pid in agents}


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
        self.names = {pid: (personas.get(pid) or {}).get("name", pid) for pid in self.agents}
        self.initials = {pid: initials(self.names[pid]) for pid in self.agents}
        self.tick_minutes = header.get("tick_minutes")
        self.start_weekday: str = world.get("start_weekday") or "Monday"
        self.rest_days: set[str] = set(world.get("rest_days") or ())
        self._static = _static_counts(header)
        self._ids: dict[str, dict[str, set[str]]] = {pid: {"short_term": set(), "long_term": set()}
                                                     for pid in self.agents}
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
        for rec in ticks:
            self._states.append(self._advance(len(self._states), rec))

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
                items = tuple(f"{format_hhmm(i['start'])} {i['activity']} at "
                              f"{self.places.get(i['place'], {}).get('name', i['place'])}" for i in d["value"])
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
        self.header: Header | None = None

    def poll(self) -> list[TickRecord]:
        """Tick records appended since the last poll (the header, once, goes to :attr:`header`)."""
        import json

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
        for line in data[: end + 1].decode("utf-8").splitlines():
            record = json.loads(line)
            if record.get("type") == HEADER:
                self.header = record
            else:
                out.append(record)
        return out
