"""Who knows which news when, read from a run's trace: the rule of :attr:`simulacra.state.AgentState.knows`.

During a run an agent comes to know a news *topic* (a world event's text, a scenario's fact) in three ways, each
folded into ``knows`` by :meth:`simulacra.simulation.Simulation.step`, and each visible in the trace (and a
scenario's *holders* know their fact from the start: :func:`simulacra.evaluation.setup.start_run` puts it in their
``knows`` before the first tick; the header's ``scenario.facts[].holders`` of a fact without ``told_at``, read here
as ``held`` at the first tick):

* **seen**: it perceived the event at its place (:func:`simulacra.tick.perceive_stage`; an event's percept has the
  event's text as its topic). The first tick it does, its memory of the event is written: an ``add`` operation of
  kind ``event`` whose text is the topic (:func:`simulacra.tick.remember_stage`).
* **told**: a scenario told it the fact (:func:`simulacra.schedule.telling_stage`; the header's
  ``scenario.schedule.tellings``, at the tick whose span holds the telling's minute).
* **heard**: it was the listener of a conversation line with the topic (:func:`simulacra.tick.converse_stage`;
  the speaker does not learn it from its own line).

Nothing else adds to ``knows`` (a notice on the town's board does not), so the run summary's ``events[].known_by``
(from the town state) is, for each world event, the agents this module finds knowing its text at the trace's end.

Knowing is for good; *remembering* is not. An agent still remembers a topic while one of its short- or long-term
memories is of it (:func:`is_memory_of`: tagged with it, or holding its text); consolidation and decay can take the
last one away. The run summary's ``events[].remembered_by`` (:func:`simulacra.shard.held_topics`, on the stores)
and the viewer's (:meth:`simulacra.viewer.memory.MemoryIndex.held_spans`, on the trace) both apply that rule.
Pure Python over the trace's records (no store, no model); :mod:`simulacra.frames` builds its ``diffusion``
table from it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from simulacra.trace import ADD, Header, TickRecord

#: the ways an agent comes to know a topic (``Learned.how``), in the order a tick's learning is folded in
HOW = ("held", "seen", "told", "heard")


@dataclass(frozen=True)
class Learned:
    """``agent`` first knew ``topic`` at tick ``tick`` (game minute ``time``, the tick's start), ``how`` (one of
    :data:`HOW`), ``source`` from whom: the speaker of the line it heard, the teller of a scenario's telling (its
    ``by``, ``None`` when the scenario names none), ``None`` for what it saw."""

    agent: str
    topic: str
    tick: int
    time: int
    how: str
    source: str | None = None


def is_memory_of(text: str, topic_tag: str | None, topic: str) -> bool:
    """Whether a memory with ``text``, tagged ``topic_tag`` (its ``extra["topic"]``: the news a percept, a heard
    line or a scenario's telling carried; ``None`` when untagged), is a memory of the news ``topic``: tagged with it,
    or its text holds it (a night's summary "saw: <topic>", a line that retold it word for word). Static facts and
    the town's shared notices are not an agent's memory of a topic; callers pass short- and long-term memories
    only."""
    return topic_tag == topic or topic in text


class KnownNews:
    """Who knows which topic, tick by tick: feed the trace's tick records in order to :meth:`read`.

    Args:
        header: the trace header (``agents``, ``tick_minutes``, and a scenario's ``scenario.schedule.tellings``).
    """

    def __init__(self, header: Header):
        self.agents: list[str] = list(header["agents"])
        self.tick_minutes = int(header["tick_minutes"])
        scenario = header.get("scenario") or {}
        self._tellings = list(((scenario.get("schedule") or {}).get("tellings")) or [])
        self._held: list[tuple[str, str, str, str | None]] = [
            (a, f["text"], "held", None) for f in scenario.get("facts") or () if not f.get("told_at")
            for a in f.get("holders") or () if a in self.agents]
        self.first: dict[str, dict[str, Learned]] = {}  # topic -> agent -> when it first knew it

    def read(self, record: TickRecord) -> list[Learned]:
        """Take in one tick record; returns what was first known at that tick (agent, topic), in the order of
        :data:`HOW` and, within each, of the record."""
        tick, now = int(record["tick"]), int(record["time"])
        found, self._held = self._held, []  # the holders, at the first tick read
        for op in record["memory"]:
            if op["op"] == ADD and op["kind"] == "event" and op["agent"] in self.agents:
                found.append((op["agent"], op["text"], "seen", None))
        if self._tellings:
            from simulacra.schedule import in_tick

            for t in self._tellings:
                if in_tick(t["minute"], now, self.tick_minutes):
                    found += [(a, t["topic"], "told", t.get("by")) for a in t["agents"] if a in self.agents]
        for conv in record["conversations"]:
            for line in conv["lines"]:
                if line["topic"]:
                    found.append((line["listener"], line["topic"], "heard", line["speaker"]))
        new = []
        for agent, topic, how, source in found:
            knowers = self.first.setdefault(topic, {})
            if agent not in knowers:
                knowers[agent] = Learned(agent, topic, tick, now, how, source)
                new.append(knowers[agent])
        return new

    def knowers(self, topic: str, tick: int | None = None) -> list[str]:
        """The agents (sorted ids) that knew ``topic`` by the end of tick ``tick`` (default: of the last tick read)."""
        got = self.first.get(topic, {})
        return sorted(a for a, w in got.items() if tick is None or w.tick <= tick)


def known_news(header: Header, records: Iterable[TickRecord]) -> KnownNews:
    """:class:`KnownNews` after reading the tick ``records`` (a trace's lines after the header, in order)."""
    known = KnownNews(header)
    for record in records:
        known.read(record)
    return known
