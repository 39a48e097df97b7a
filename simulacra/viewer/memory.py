"""The memory browser's model: an agent's memory stream at tick T, rebuilt from the trace's memory operations.

:class:`MemoryIndex` reads a run's tick records once (no Chroma, no model) and keeps, per memory, when it was
written (``add``, ``post``, ``reinforce``, a scenario's seeded memories in the header), which tier it was in from
which tick (``move``, ``forget``, ``reinforce``), when it was marked accessed (``rehearse``), which retrievals
returned it with their score terms (``retrieve``) and, for a reflection or a day summary, its evidence
(``add`` with ``evidence_ids``; ``reflect``). Static memories are the persona's and the world's facts, rebuilt from
the header by the engine's own rule (:func:`simulacra.runtime.static_records`); when that fails (an older or
hand-made header) the static memories that retrievals returned are listed instead.

:meth:`MemoryIndex.rows` is what the browser lists at a tick: one :class:`MemoryRow` per memory the agent held at
the end of that tick, tier by tier (static, short-term, long-term, shared), newest first, filtered by tier, kind
and a search text. :meth:`MemoryIndex.detail` is one memory with the retrievals that returned it up to that tick
and its evidence. Each call is O(memories of the agent); callers cache per (agent, tick, filter).
:meth:`MemoryIndex.held_spans` is when each agent held a memory of a news topic (the rule of
:func:`simulacra.news.is_memory_of`): who still remembers what it came to know, and when and why it forgot. No
pygame here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from simulacra.news import is_memory_of
from simulacra.trace import (
    ADD,
    FORGET,
    LONG_TERM,
    MOVE,
    POST,
    REFLECT,
    REHEARSE,
    REINFORCE,
    RETRIEVE,
    SHARED,
    SHORT_TERM,
    STATIC,
    AddOp,
    Header,
    RetrieveOp,
    TickRecord,
)

log = logging.getLogger(__name__)

#: the browser's tiers, in the order it lists them
TIERS = (STATIC, SHORT_TERM, LONG_TERM, SHARED)

#: the tick a memory written before the run's first tick is dated (static memories, a scenario's seeded ones)
BEFORE_RUN = -1


@dataclass(frozen=True)
class Access:
    """A retrieval that returned a memory: at ``tick`` (game minute ``time``), ``query`` for ``purpose`` under
    retrieval ``profile``; the memory came ``rank`` (1 = first) with the score terms ``recency``, ``importance``,
    ``relevance`` (each in [0, 1], ``None`` where a term does not apply: a static memory's recency and importance)
    and ``score``; ``weights`` are ``(a_rec, a_imp, a_rel)`` of the profile in the run's config (``None``: unknown,
    an older header)."""

    tick: int
    time: int
    agent: str
    query: str
    purpose: str
    profile: str
    rank: int
    recency: float | None
    importance: float | None
    relevance: float | None
    score: float | None
    weights: tuple[float, float, float] | None


@dataclass
class _Memory:
    """Everything the trace says about one memory (built by :class:`MemoryIndex`)."""

    id: str
    owner: str  # agent id, or "" for the town's shared tier
    text: str
    kind: str
    rating: int | None
    timestamp: float | None
    written: int  # tick, BEFORE_RUN for static and seeded memories
    tiers: list[tuple[int, str | None]] = field(default_factory=list)  # (tick, tier from then; None: forgotten)
    importance: list[tuple[int, float]] = field(default_factory=list)  # (tick, importance the trace recorded)
    accessed: list[tuple[int, float]] = field(default_factory=list)  # (tick, game minute marked accessed)
    retrievals: list[Access] = field(default_factory=list)
    evidence_ids: list[str] = field(default_factory=list)
    depth: int | None = None
    forgotten: str = ""  # the reason of the forget operation
    topic: str | None = None  # the news it carries (the op's ``topic``; absent in traces before stop 43)

    def tier_at(self, tick: int) -> str | None:
        """The tier at the end of ``tick`` (``None``: not written yet, or forgotten)."""
        if self.written > tick:
            return None
        tier: str | None = None
        for t, name in self.tiers:
            if t > tick:
                break
            tier = name
        return tier


@dataclass(frozen=True)
class HeldSpan:
    """Ticks ``start`` .. ``end`` − 1 during which an agent held at least one short- or long-term memory of a
    topic, judged at the end of each tick (``end`` ``None``: still held at the last tick read). ``reason``: why
    the last of them went at ``end`` (the ``forget`` operation's reason: ``consolidation: ...``, ``decay: ...``;
    ``""`` while held)."""

    start: int
    end: int | None
    reason: str = ""

    def covers(self, tick: int) -> bool:
        """Whether the memory is held at the end of ``tick``."""
        return self.start <= tick and (self.end is None or tick < self.end)


@dataclass(frozen=True)
class MemoryRow:
    """One row of the browser: a memory ``agent`` held at the end of a tick.

    Attributes:
        tier: static, short_term, long_term or shared.
        kind: observation, dialogue, plan, event, reflection, persona, world, ... (``simulacra.memory.records``).
        rating: the rater's importance 1..10 (``None``: static).
        importance: the importance last recorded in the trace, 0..1 (``rating / 10`` when written; a long-term
            memory's decayed importance when it was moved or reinforced); ``None``: static.
        timestamp: game minute it was formed (``None``: static).
        age_minutes: game minutes from its timestamp to the tick's start (``None``: static).
        last_access: game minute it was last marked accessed (rehearsed) up to the tick, ``None``: never.
        written: tick it was written (:data:`BEFORE_RUN` for static and seeded memories).
        retrieved: how many retrievals returned it up to the tick.
    """

    id: str
    tier: str
    kind: str
    text: str
    rating: int | None
    importance: float | None
    timestamp: float | None
    age_minutes: float | None
    last_access: float | None
    written: int
    retrieved: int


@dataclass(frozen=True)
class MemoryDetail:
    """A memory as the browser shows it when selected: its row, the retrievals that returned it up to the tick
    (oldest first) and, for a reflection or day summary, its evidence (id, text; text ``"?"`` when the trace has
    not shown it), with its depth."""

    row: MemoryRow
    retrievals: tuple[Access, ...]
    evidence: tuple[tuple[str, str], ...]
    depth: int | None
    forgotten: str = ""


class StaticRule:
    """Static memories ``(id, text, kind)`` of an agent, by the engine's rule (:func:`simulacra.runtime.static_records`)
    from a header's world and personas, rebuilt when first asked per agent (a large town has hundreds of static
    memories per resident). ``ok`` is false when the header does not rebuild (an older or hand-made one)."""

    def __init__(self, header: Header):
        self._personas: dict[str, Any] = {}
        self._world: Any = None
        self._personas_dir = header.get("personas_dir") or ""
        self.ok = True
        try:
            from simulacra.persona import Persona
            from simulacra.world.model import World

            self._personas = {pid: Persona.model_validate(p) for pid, p in header["personas"].items()}
            self._world = World.model_validate(header["world"])
            self._world._personas = dict(self._personas)
        except Exception as err:  # an older or hand-made header: static memories come from retrievals
            log.warning("static memories not rebuilt from the trace header (%s); the viewer lists those retrievals "
                        "returned", err)
            self.ok = False

    def _name_of(self, pid: str) -> str | None:
        """The name of a resident outside the run (a relationship's other end): the header holds only the run's
        personas, so it is read from the run's personas folder when that is still there."""
        import json
        from pathlib import Path
        from types import SimpleNamespace

        path = Path(self._personas_dir) / f"{pid}.json"
        try:
            name = json.loads(path.read_text(encoding="utf-8"))["name"]
        except (OSError, ValueError, KeyError, TypeError) as err:
            log.warning("static memories: the name of %s is not in the trace header nor readable at %s (%s)",
                        pid, path, err)
            return None
        self._world._personas[pid] = SimpleNamespace(name=name)
        return str(name)

    def of(self, agent: str) -> list[tuple[str, str, str]] | None:
        """``agent``'s static memories in the engine's order; ``None`` when they cannot be rebuilt."""
        if not self.ok or agent not in self._personas:
            return None
        from simulacra.runtime import static_records

        others = set(self._personas[agent].relationships) - set(self._world._personas)
        if any(self._name_of(pid) is None for pid in sorted(others)):
            return None
        try:
            return [(r.id, r.text, r.kind) for r in static_records(agent, self._personas[agent], self._world)]
        except Exception as err:
            log.warning("static memories of %s not rebuilt from the trace header: %s", agent, err)
            return None


class MemoryIndex:
    """Every agent's memory stream over a run, from the trace alone.

    Args:
        header: the trace header (``agents``, ``personas``, ``world``, ``config.memory``, a scenario's ``seeded``).
        ticks: the tick records, in order (more can be added with :meth:`extend`).
        static: the static memories' rule (default: rebuilt from ``header``).
        retrievals: keep which retrievals returned each memory (the browser's detail); ``False`` skips them, for
            a reader that needs only when memories were held (:meth:`held_spans`; a long run's retrievals are
            most of its trace).
    """

    def __init__(self, header: Header, ticks: Iterable[TickRecord] = (), static: StaticRule | None = None,
                 retrievals: bool = True):
        self._keep_retrievals = retrievals
        self.agents: list[str] = list(header.get("agents") or [])
        self._memory_config: dict[str, Any] = (header.get("config") or {}).get("memory") or {}
        self._weights: dict[str, tuple[float, float, float]] = {}
        self._by_agent: dict[str, dict[str, _Memory]] = {pid: {} for pid in self.agents}
        self._shared: dict[str, _Memory] = {}
        self._header = header
        self._static_rule = static  # built on first use: a reader of held spans alone never needs it
        self._static: dict[str, dict[str, _Memory]] = {}  # agent -> static memories (rebuilt, or as retrieved)
        self._static_done: set[str] = set()  # agents whose static memories were rebuilt by the rule
        self._spans: dict[str, dict[str, list[HeldSpan]]] = {}  # topic -> held_spans(topic), until more ticks
        # topic -> agent -> ids of its memories of the topic (is_memory_of), kept up to date as memories are
        # written: a live run's new tick re-reads only these, not every memory of the run
        self._members: dict[str, dict[str, dict[str, None]]] = {}  # ids in the order written, as in _by_agent
        for op in (header.get("scenario") or {}).get("seeded") or ():
            if op.get("op") == ADD:
                self._add(cast(AddOp, op), BEFORE_RUN)
        self.extend(ticks)

    # ----------------------------------------------------------------- building
    def extend(self, ticks: Iterable[TickRecord]) -> None:
        """Take in more tick records (a live run's new ticks), in order."""
        self._spans = {}
        for rec in ticks:
            tick, now = int(rec["tick"]), int(rec["time"])
            for op in rec["memory"]:
                if op["op"] == ADD:
                    self._add(op, tick)
                elif op["op"] == POST:
                    if op["id"] not in self._shared:
                        self._shared[op["id"]] = _Memory(
                            op["id"], "", op["text"], op["kind"], op["rating"], op["timestamp"], tick,
                            tiers=[(tick, SHARED)],
                            importance=[] if op["rating"] is None else [(tick, op["rating"] / 10)])
                elif op["op"] == MOVE:
                    m = self._get(op["agent"], op["id"])
                    if m is not None:
                        m.tiers.append((tick, op["to"]))
                        m.importance.append((tick, float(op["importance"])))
                elif op["op"] == FORGET:
                    m = self._get(op["agent"], op["id"])
                    if m is not None:
                        m.tiers.append((tick, None))
                        m.forgotten = op["reason"]
                        if op["importance"] is not None:
                            m.importance.append((tick, float(op["importance"])))
                elif op["op"] == REINFORCE:
                    mine = self._by_agent.get(op["agent"])
                    if mine is None:
                        continue
                    for old in [*op["from_ids"], *op["replaces"]]:
                        if old in mine and old != op["id"]:
                            mine[old].tiers.append((tick, None))
                            mine[old].forgotten = f"reinforced into {op['id']}"
                    m = mine.get(op["id"])
                    if m is None or m.tier_at(tick) is None:
                        m = mine[op["id"]] = _Memory(op["id"], op["agent"], op["text"], op["kind"], op["rating"],
                                                     op["timestamp"], tick, tiers=[(tick, LONG_TERM)],
                                                     topic=op.get("topic"))
                        self._note(m)
                    else:
                        m.tiers.append((tick, LONG_TERM))
                    m.importance.append((tick, float(op["importance"])))
                elif op["op"] == REHEARSE:
                    for mid in op["ids"]:
                        m = self._get(op["agent"], mid)
                        if m is not None:
                            m.accessed.append((tick, float(op["time"])))
                elif op["op"] == REFLECT:
                    for ins in op["insights"]:
                        m = self._get(op["agent"], ins["id"])
                        if m is not None and not m.evidence_ids:
                            m.evidence_ids = list(ins["evidence_ids"])
                            m.depth = ins["depth"]
                elif op["op"] == RETRIEVE and self._keep_retrievals:
                    self._retrieved(op, tick, now)

    def _add(self, op: AddOp, tick: int) -> None:
        mine = self._by_agent.get(op["agent"])
        if mine is None:
            return
        m = mine.get(op["id"])
        if m is None or m.tier_at(tick) is None and m.tiers:
            # new, or written again after it was forgotten (same id: same agent, timestamp and text)
            fresh = _Memory(op["id"], op["agent"], op["text"], op["kind"], op["rating"], op["timestamp"], tick,
                            topic=op.get("topic"))
            if m is not None:
                fresh.retrievals, fresh.accessed = m.retrievals, m.accessed
            m = mine[op["id"]] = fresh
            self._note(fresh)
        m.tiers.append((tick, op["tier"]))
        if op["rating"] is not None:
            m.importance.append((tick, op["rating"] / 10))
        if op.get("evidence_ids") is not None:
            m.evidence_ids = list(op["evidence_ids"])
            m.depth = op.get("depth")

    def _note(self, m: _Memory) -> None:
        """Add a newly written memory to the members of the topics asked about so far."""
        for topic, members in self._members.items():
            if is_memory_of(m.text, m.topic, topic):
                members.setdefault(m.owner, {})[m.id] = None

    def _get(self, agent: str, mid: str) -> _Memory | None:
        mine = self._by_agent.get(agent)
        return None if mine is None else mine.get(mid)

    def _weights_of(self, op: RetrieveOp) -> tuple[float, float, float] | None:
        if not self._memory_config:
            return None
        try:
            from simulacra.frames import _weights  # the profile's weights, as frames and rescore read them

            return _weights(self._weights, self._memory_config, op)
        except Exception as err:  # an older header's memory section: weights unknown
            log.debug("retrieval weights not read from the header: %s", err)
            return None

    def _retrieved(self, op: RetrieveOp, tick: int, now: int) -> None:
        agent = op["agent"]
        mine = self._by_agent.get(agent)
        if mine is None:
            return
        weights = self._weights_of(op)
        for rank, r in enumerate(op["results"], start=1):
            access = Access(tick=tick, time=now, agent=agent, query=op["query"], purpose=op["purpose"],
                            profile=op.get("profile") or "", rank=rank, recency=r["recency"],
                            importance=r["importance"], relevance=r["relevance"], score=r["score"], weights=weights)
            tier = r["tier"]
            if tier == SHARED:
                m = self._shared.get(r["id"])
            elif tier == STATIC:
                statics = self._static.setdefault(agent, {})
                m = statics.get(r["id"])
                if m is None:  # kept with its text, in case the header does not rebuild static memories
                    m = statics[r["id"]] = _Memory(r["id"], agent, r["text"], r["kind"], None, None, BEFORE_RUN,
                                                   tiers=[(BEFORE_RUN, STATIC)])
            else:
                m = mine.get(r["id"])
            if m is not None:
                m.retrievals.append(access)

    # ----------------------------------------------------------------- queries
    def _statics(self, agent: str) -> dict[str, _Memory]:
        """``agent``'s static memories in the engine's order (rebuilt once), with those retrievals returned."""
        seen = self._static.setdefault(agent, {})
        if agent not in self._static_done:
            self._static_done.add(agent)
            if self._static_rule is None:
                self._static_rule = StaticRule(self._header)
            rebuilt = self._static_rule.of(agent)
            if rebuilt is not None:
                ordered: dict[str, _Memory] = {}
                for mid, text, kind in rebuilt:
                    ordered[mid] = seen.get(mid) or _Memory(mid, agent, text, kind, None, None, BEFORE_RUN,
                                                            tiers=[(BEFORE_RUN, STATIC)])
                ordered.update({k: v for k, v in seen.items() if k not in ordered})
                self._static[agent] = seen = ordered
        return seen

    def _all(self, agent: str) -> list[_Memory]:
        return [*self._statics(agent).values(), *self._by_agent[agent].values(), *self._shared.values()]

    def _find(self, agent: str, memory_id: str) -> _Memory | None:
        return (self._by_agent.get(agent, {}).get(memory_id) or self._shared.get(memory_id)
                or (self._statics(agent).get(memory_id) if agent in self._by_agent else None))

    def kinds(self, agent: str) -> list[str]:
        """The kinds of memory ``agent`` had at any time (and the shared tier's), sorted.

        Raises:
            KeyError: ``agent`` is not an agent of the run.
        """
        return sorted({m.kind for m in self._all(agent)})

    def _row(self, agent: str, m: _Memory, tier: str, tick: int, now: int) -> MemoryRow:
        importance = None
        for t, v in m.importance:
            if t > tick:
                break
            importance = v
        last_access = None
        for t, minute in m.accessed:
            if t > tick:
                break
            last_access = minute
        retrieved = sum(1 for a in m.retrievals if a.tick <= tick and a.agent == agent)
        age = None if m.timestamp is None else max(0.0, now - m.timestamp)
        return MemoryRow(id=m.id, tier=tier, kind=m.kind, text=m.text, rating=m.rating, importance=importance,
                         timestamp=m.timestamp, age_minutes=age, last_access=last_access, written=m.written,
                         retrieved=retrieved)

    def rows(self, agent: str, tick: int, now: int, tiers: Iterable[str] | None = None,
             kinds: Iterable[str] | None = None, search: str = "") -> list[MemoryRow]:
        """The memories ``agent`` held at the end of ``tick`` (game minute ``now``, the tick's start: ages are
        counted from it), tier by tier in :data:`TIERS` order, newest first within a tier (static memories in the
        engine's order).

        Args:
            tiers: keep these tiers only (``None``: all).
            kinds: keep these kinds only (``None``: all).
            search: keep memories whose text contains it, case-insensitively (``""``: all).

        Raises:
            KeyError: ``agent`` is not an agent of the run.
        """
        everything = self._all(agent)
        want_tiers = set(TIERS if tiers is None else tiers)
        want_kinds = None if kinds is None else set(kinds)
        needle = search.strip().lower()
        by_tier: dict[str, list[MemoryRow]] = {t: [] for t in TIERS}
        for m in everything:
            tier = m.tier_at(tick)
            if tier is None or tier not in want_tiers:
                continue
            if want_kinds is not None and m.kind not in want_kinds:
                continue
            if needle and needle not in m.text.lower():
                continue
            by_tier.setdefault(tier, []).append(self._row(agent, m, tier, tick, now))
        out: list[MemoryRow] = []
        for tier in TIERS:
            got = by_tier.get(tier, [])
            if tier != STATIC:  # newest first; ties (one tick's memories): the later written first
                got = list(reversed(got))
                got.sort(key=lambda r: (r.timestamp if r.timestamp is not None else float("-inf"), r.written),
                         reverse=True)
            out += got
        return out

    def counts(self, agent: str, tick: int) -> dict[str, int]:
        """Memories per tier :data:`TIERS` ``agent`` held at the end of ``tick``."""
        out = {t: 0 for t in TIERS}
        for m in self._all(agent):
            tier = m.tier_at(tick)
            if tier is not None:
                out[tier] = out.get(tier, 0) + 1
        return out

    def detail(self, agent: str, memory_id: str, tick: int, now: int) -> MemoryDetail | None:
        """Memory ``memory_id`` of ``agent`` (or of the shared tier) as of the end of ``tick``: the retrievals of
        ``agent`` that returned it up to ``tick`` and its evidence; ``None`` if ``agent`` does not hold it then."""
        m = self._find(agent, memory_id)
        if m is None:
            return None
        tier = m.tier_at(tick)
        if tier is None:
            return None
        accesses = tuple(a for a in m.retrievals if a.tick <= tick and a.agent == agent)
        evidence = tuple((eid, self._text(agent, eid)) for eid in m.evidence_ids)
        return MemoryDetail(row=self._row(agent, m, tier, tick, now), retrievals=accesses, evidence=evidence,
                            depth=m.depth, forgotten=m.forgotten)

    def held_spans(self, topic: str) -> dict[str, list[HeldSpan]]:
        """When each agent held a memory of the news ``topic``: agent -> its :class:`HeldSpan` s in order, adjacent
        and overlapping memories' spans merged (agents that never held one left out). A memory counts while it is
        in the agent's short- or long-term tier and :func:`simulacra.news.is_memory_of` says it is of ``topic``
        (the rule of the run summary's ``remembered_by``); static facts and the shared tier do not. O(memories of
        the run) the first time per topic; after that O(memories of the topic), and cached until :meth:`extend`
        (which keeps each asked topic's memories up to date as it reads new ones)."""
        if topic in self._spans:
            return self._spans[topic]
        members = self._members.get(topic)
        if members is None:  # the first look at this topic: every memory of the run, once
            members = self._members[topic] = {}
            for agent, mine in self._by_agent.items():
                ids = {mid: None for mid, m in mine.items() if is_memory_of(m.text, m.topic, topic)}
                if ids:
                    members[agent] = ids
        out: dict[str, list[HeldSpan]] = {}
        for agent, mine in self._by_agent.items():
            raw: list[tuple[int, int | None, str]] = []
            for mid in members.get(agent, ()):
                m = mine[mid]
                start: int | None = None
                for t, tier in m.tiers:
                    if tier in (SHORT_TERM, LONG_TERM):
                        if start is None:
                            start = max(t, m.written)
                    elif start is not None:
                        if t > start:
                            raw.append((start, t, m.forgotten))
                        start = None
                if start is not None:
                    raw.append((start, None, ""))
            if not raw:
                continue
            raw.sort(key=lambda s: (s[0], float("inf") if s[1] is None else s[1]))
            spans: list[HeldSpan] = []
            for start_tick, end, reason in raw:
                last = spans[-1] if spans else None
                if last is not None and (last.end is None or start_tick <= last.end):
                    if last.end is not None and (end is None or end >= last.end):
                        spans[-1] = HeldSpan(last.start, end, reason)
                    continue
                spans.append(HeldSpan(start_tick, end, reason))
            out[agent] = spans
        self._spans[topic] = out
        return out

    def held_at(self, topic: str, tick: int) -> set[str]:
        """The agents holding a memory of ``topic`` at the end of ``tick`` (:meth:`held_spans`)."""
        return {a for a, spans in self.held_spans(topic).items() if any(s.covers(tick) for s in spans)}

    def forgot_by(self, topic: str, tick: int) -> dict[str, HeldSpan]:
        """Agent -> its last span of ``topic`` that ended by the end of ``tick``, for the agents that held a
        memory of ``topic`` before and hold none at the end of ``tick`` (``end`` the tick it went, ``reason`` why)."""
        out = {}
        for a, spans in self.held_spans(topic).items():
            if any(s.covers(tick) for s in spans):
                continue
            ended = [s for s in spans if s.end is not None and s.end <= tick]
            if ended:
                out[a] = ended[-1]
        return out

    def _text(self, agent: str, memory_id: str) -> str:
        m = self._find(agent, memory_id)
        return "?" if m is None else m.text
