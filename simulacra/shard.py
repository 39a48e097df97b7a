"""The town and its agent shards (DESIGN.md, the town / shard split).

A **shard** owns a set of agents and runs, for them, the stages of a tick that read or write their memories or ask
their mind: remembering, retrieving, deciding, each side's part of a conversation and holding the conversations its
agents open, reflection, rehearsal, the nightly summaries and consolidation. The **town**
(:class:`simulacra.simulation.Simulation`) owns the world, the clock, the :class:`~simulacra.state.TownState` and the
trace; it runs the stages that see every agent (world events, perception, who talks with whom, the world step, what
the conversations leave behind) and steps its shards through a tick's phases, each shard from the same snapshot of
the tick, with a barrier between phases.

What a shard returns is merged by one rule, :func:`by_agent`: every list of trace operations, decision records and
pending memories is put in the run's agent order (stably: an agent's items keep their order), so that the trace is
the same whatever the number of shards and whichever shard answers first. Agents are assigned to shards by
:func:`shard_agents` (agent *i* of the run's order to shard *i* mod *N*), which depends on *N* for nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from simulacra.memory.stream import topic_of
from simulacra.news import is_memory_of
from simulacra.runtime import Runtime
from simulacra.state import TownState
from simulacra.tick import (
    TOWN,
    Decided,
    Pending,
    Perception,
    Reflected,
    Remembered,
    Retrieval,
    Sides,
    consolidate_stage,
    decide_stage,
    hold_stage,
    reflect_stage,
    rehearse_stage,
    remember_stage,
    retrieve_stage,
    sides_stage,
    summarise_stage,
)
from simulacra.trace import AddOp, MemoryOp, ProbeRecord, RehearseOp

T = TypeVar("T")


def shard_agents(agents: Sequence[str], shards: int) -> list[list[str]]:
    """The agents of each of ``shards`` shards: agent *i* of ``agents`` (the run's order) goes to shard *i* mod
    ``shards``, keeping the run's order within a shard.

    Raises:
        ValueError: ``shards`` < 1.
    """
    if shards < 1:
        raise ValueError(f"shards must be at least 1, got {shards}")
    return [list(agents[k::shards]) for k in range(shards)]


def by_agent(items: Iterable[T], order: dict[str, int], key: Callable[[T], str | None]) -> list[T]:
    """``items`` in the run's agent order (``order``: agent id -> its index), stably: items of one agent keep their
    relative order, items of no agent (``key`` gives ``None``: the town's notices) come first. The one rule by which
    a tick's lists are merged from its shards, and put in order in a run of one shard."""
    return sorted(items, key=lambda x: -1 if (a := key(x)) is None else order[a])


def op_agent(op: Mapping[str, Any]) -> str | None:
    """The agent of a trace operation or decision record (``None`` for a notice posted to the town's shared
    memory)."""
    return op.get("agent")


def pending_agent(p: Pending) -> str | None:
    """The agent a pending memory is for (``None`` for a notice to the town's shared memory)."""
    return None if p.owner == TOWN else p.owner


def split_by_shard(items: Iterable[T], key: Callable[[T], str | None], shard_of: Mapping[str, int],
                   shards: int) -> list[list[T]]:
    """``items`` split into what each of ``shards`` shards needs, in their order: an item of an agent
    (``key(item)``) goes to that agent's shard only, a town item (``None``) to every shard. What the town sends a
    phase's shards this way is each shard's part, not the whole town's once per shard (with N shards each would
    unpickle N times its part)."""
    out: list[list[T]] = [[] for _ in range(shards)]
    for item in items:
        agent = key(item)
        if agent is None:
            for part in out:
                part.append(item)
        else:
            out[shard_of[agent]].append(item)
    return out


def merge_remembered(parts: Sequence[Remembered], order: dict[str, int]) -> Remembered:
    """The shards' :class:`Remembered` as one: operations in agent order (what a shard reports to the town,
    :meth:`Shard.act`: its ``own`` ratings stay in the shard)."""
    return Remembered(by_agent((op for p in parts for op in p.ops), order, op_agent))


def merge_retrieval(parts: Sequence[Retrieval], order: dict[str, int]) -> Retrieval:
    """The shards' :class:`Retrieval` as one, operations in agent order."""
    focus: dict = {}
    salient: dict = {}
    for p in parts:
        focus.update(p.focus)
        salient.update(p.salient)
    return Retrieval(focus, salient, by_agent((op for p in parts for op in p.ops), order, op_agent))


def merge_decided(parts: Sequence[Decided], order: dict[str, int]) -> Decided:
    """The shards' :class:`Decided` as one: per-agent maps in the run's agent order, operations, records, pending
    memories and notable lines in agent order, invitations in the order a single shard makes them (by inviter id)."""
    agents = sorted((a for p in parts for a in p.actions), key=order.__getitem__)

    def joined(name: str) -> dict:
        merged: dict = {}
        for p in parts:
            merged.update(getattr(p, name))
        return {a: merged[a] for a in agents}

    return Decided(
        joined("plan_start"), joined("plans"), joined("steps"), joined("step_keys"), joined("planned"),
        joined("actions"), [], {},
        by_agent((x for p in parts for x in p.pending), order, pending_agent),
        by_agent((r for p in parts for r in p.records), order, op_agent),
        by_agent((op for p in parts for op in p.ops), order, op_agent),
        by_agent((n for p in parts for n in p.notable), order, lambda n: n[0]),
        {a for p in parts for a in p.considered},
        sorted((i for p in parts for i in p.invitations), key=lambda i: i[0]),
    )


class Shard:
    """The agents of one shard with what is theirs (a :meth:`Runtime.view` in a run of one process), and the
    tick's phases it runs for them. Every method takes the town's snapshot of the tick and plain inputs and returns
    plain data (no method keeps a reference to its inputs), so that a shard can live in another process.

    Args:
        rt: the shard's runtime (its ``agents`` are the shard's, in the run's order).
        index: the shard's number (0..N-1).
        writes_town: whether this shard writes the town's notices to the shared tier it reads (in one process the
            shards share one shared tier: the first writes it; on Ray each shard writes its own replica).
        reports_town: whether the trace operations of those writes are in what this shard returns (the town's
            notice is posted once in the trace, whatever the number of replicas): shard 0 only; by default, as
            ``writes_town``.
    """

    def __init__(self, rt: Runtime, index: int = 0, writes_town: bool = True, reports_town: bool | None = None):
        self.rt = rt
        self.index = index
        self.writes_town = writes_town
        self.reports_town = writes_town if reports_town is None else reports_town

    @property
    def agents(self) -> list[str]:
        return self.rt.agents

    def _mine(self, pending: Sequence[Pending]) -> list[Pending]:
        mine = set(self.rt.agents)
        return [p for p in pending if p.owner in mine or (p.owner == TOWN and self.writes_town)]

    def remember(self, pending: Sequence[Pending], phase: str) -> Remembered:
        """Rate, embed and write the memories of ``pending`` that are its agents' (and the town's notices when it
        writes them): :func:`~simulacra.tick.remember_stage`."""
        return remember_stage(self.rt, self._mine(pending), phase)

    def _reported(self, done: Remembered) -> Remembered:
        """What the town is sent of ``done``: its operations (the notices' only when this shard reports the town's);
        the agents' own ratings are read here, by :func:`~simulacra.tick.retrieve_stage`."""
        return Remembered(done.ops if self.reports_town else [op for op in done.ops if op_agent(op) is not None])

    def act(self, state: TownState, perception: Perception, pending: Sequence[Pending], now: int, tick: int,
            asleep: set[str]) -> tuple[Remembered, Retrieval, Decided]:
        """The first phase of a tick: remember what its agents perceived (and were told), retrieve for their
        situation and salient percepts, decide (plans, actions, reactions) from the town's snapshot ``state``."""
        seen = self.remember(pending, "remember1")
        retrieval = retrieve_stage(state, self.rt, perception, seen, now, asleep)
        return self._reported(seen), retrieval, decide_stage(state, self.rt, retrieval, now, tick, asleep)

    def sides(self, state: TownState, ordered: Sequence[tuple[str, str]], now: int) -> Sides:
        """Its agents' sides of the tick's conversations (:func:`~simulacra.tick.sides_stage`)."""
        return sides_stage(state, self.rt, ordered, now)

    def hold(self, state: TownState, sides: Sides, doing: dict[str, str], now: int,
             pairs: Sequence[tuple[str, str]]) -> list[tuple]:
        """Hold the conversations its agents open (:func:`~simulacra.tick.hold_stage`)."""
        return hold_stage(state, self.rt, pairs, sides, doing, now)

    def probe(self, state: TownState, probes: Mapping[str, Any], now: int, tick: int) -> ProbeRecord | None:
        """A scenario's recall probe for its agents at the tick's end (:func:`~simulacra.schedule.probe_stage` with
        the town's schedule ``probes``; merged by :func:`~simulacra.schedule.merge_probes`); read-only."""
        from simulacra.schedule import probe_stage

        return probe_stage(state, self.rt, now, tick, probes)

    def settle(self, now: int, tick: int, pending: Sequence[Pending], used_ops: Sequence[MemoryOp],
               plans: Mapping[str, Sequence]) -> tuple[Remembered, Reflected, list[RehearseOp], list[AddOp],
                                                      list[MemoryOp], dict[str, tuple]]:
        """The last phase of a tick: remember what its agents planned, said and heard; reflect; mark what the
        tick used (``used_ops``: the tick's operations before this phase, in agent order; its agents' at least);
        the nightly summaries (``plans``: the day plans, its agents' at least); consolidate. The town sends each
        shard its part of these (:func:`split_by_shard`). Returns ``(said, reflected, rehearse ops, summary ops,
        consolidation ops, markers)``; ``markers``: per agent, what the town state keeps of its memory,
        ``(importance since its last reflection, game minute of its last reflection, of its last consolidation)``."""
        said = self._reported(self.remember(pending, "remember2"))
        reflected = reflect_stage(self.rt, now, tick)
        rehearsed = rehearse_stage(self.rt, [*used_ops, *said.ops, *reflected.ops], now)
        summarised = summarise_stage(self.rt, plans, now, tick)
        consolidated = consolidate_stage(self.rt, now)
        markers = {pid: (m.importance_since_reflection, m.last_reflection, m.last_consolidation)
                   for pid, m in self.rt.memories.items()}
        return said, reflected, rehearsed, summarised, consolidated, markers


def memory_summary(rt: Runtime, agents: Sequence[str], now: int) -> dict[str, dict[str, Any]]:
    """What a run's summary shows of each agent's memory (``agents`` of ``rt``): ``{"counts": per tier,
    "top_long_term": its three most important long-term memories (decayed importance at ``now``, the same text
    once), "reflections": its latest three (depth, evidence count)}``."""
    out = {}
    for pid in agents:
        mem = rt.memories[pid]
        ranked = mem.most_important(now, len(mem.long_term), tiers=("long_term",))
        distinct: dict[str, tuple] = {}
        for r, imp in ranked:  # best first; the same text at several game times is shown once
            distinct.setdefault(r.text, (r, imp))
        top = list(distinct.values())[:3]
        reflections = sorted((r for r in mem.long_term.records if r.kind == "reflection"),
                             key=lambda r: (-(r.timestamp or 0), r.id))
        out[pid] = {"counts": mem.counts(),
                    "top_long_term": [{"text": r.text, "importance": round(i, 3)} for r, i in top],
                    "reflections": [{"text": r.text, "depth": r.depth, "evidence": len(r.evidence_ids)}
                                    for r in reflections[:3]]}
    return out


def held_topics(rt: Runtime, agents: Sequence[str], topics: Sequence[str]) -> dict[str, list[int]]:
    """Which of ``topics`` (news topics: world events' texts, a scenario's facts) each of ``agents`` still holds in
    its own memory: agent id -> the indices into ``topics`` of those held, ascending (agents holding none left out).
    A topic is held while the agent's short- or long-term tier has a memory tagged with it (``extra["topic"]``) or
    whose text contains it (:func:`simulacra.news.is_memory_of`); static facts and the town's shared notices are
    not the agent's memory of it. What :attr:`simulacra.state.AgentState.knows` counts is who
    *came to know* a topic; this is who has not forgotten it."""
    out = {}
    for pid in agents:
        mem = rt.memories[pid]
        records = [*mem.short_term.records, *mem.long_term.records]
        held = [i for i, topic in enumerate(topics)
                if any(is_memory_of(r.text, topic_of(r), topic) for r in records)]
        if held:
            out[pid] = held
    return out


class Stores:
    """What the town asks of its agents' stores and parts between and around ticks, when they are this process's
    (every shard of the run in it, :meth:`Runtime.view`): make a tick durable, checkpoint them, write them to
    Chroma, summarise them and what the parts spent. :class:`simulacra.cluster.RayShards` answers the same for
    shards that are Ray actors, each with its own stores."""

    def __init__(self, rt: Runtime):
        self.rt = rt

    def seed(self, items: Sequence[tuple[str, Any, float | None]]) -> list[list[AddOp]]:
        """Write memories the run starts with (a scenario's planted facts, before the first tick): each item
        ``(agent, record, rating)`` adds ``record`` (a :class:`~simulacra.memory.records.MemoryRecord` of one of
        these stores' agents) with its rating, or the run's rater's when ``rating`` is ``None``, embedded by the run's
        embedder. Returns each item's trace operations, in the items' order (the town joins several shards' answers
        back into that order).

        Raises:
            RaterError: the rater cannot rate (as during a tick).
        """
        import numpy as np

        rt = self.rt
        to_rate = list(dict.fromkeys(r.text for _, r, rating in items if rating is None))
        rated = dict(zip(to_rate, rt.rater.rate_many(to_rate))) if to_rate else {}
        texts = list(dict.fromkeys(r.text for _, r, _ in items))
        vectors = dict(zip(texts, rt.embedder.embed(texts))) if texts else {}
        out = []
        for agent, record, rating in items:
            record.rating = rating if rating is not None else rated[record.text]
            out.append(rt.memories[agent].add([record], np.stack([vectors[record.text]])))
        return out

    def persist(self, ticks_done: int, due: bool, journal: bool) -> int:
        """:func:`~simulacra.tick.persist_stage`."""
        from simulacra.tick import persist_stage

        return persist_stage(self.rt, ticks_done, due, journal)

    def durable(self, ticks_done: int, journal: bool) -> None:
        """Before a checkpoint: everything it will list made durable (journal frame and sync, or a write)."""
        if journal:
            self.rt.journal_tick(ticks_done)
            assert self.rt.journal is not None  # a journaling run has its store journal
            self.rt.journal.sync()
        else:
            self.rt.flush(deletes=False)

    def snapshot(self) -> dict[str, Any]:
        """The stores' part of a checkpoint: ``{"memory": {agent: snapshot}, "shared": ids | None, "layers":
        counters of the model stack and rater}``."""
        from simulacra.checkpoint import layer_counters

        rt = self.rt
        return {"memory": {pid: rt.memories[pid].snapshot() for pid in rt.agents},
                "shared": None if rt.shared is None else rt.shared.ids, "layers": layer_counters(rt)}

    def restore(self, shared: Sequence[str] | None, memory: Mapping[str, Any], layers: Mapping[str, Any],
                accumulators: Mapping[str, tuple[float, float | None, float | None]]) -> dict[str, int]:
        """Take these stores back to a checkpoint (the stores' part of :meth:`Simulation._restore
        <simulacra.simulation.Simulation>`): the parts' counters and recorded model answers
        (:func:`~simulacra.checkpoint.restore_layer_counters` of ``layers``), each agent's tiers to ``memory[agent]``
        (:meth:`AgentMemory.restore` with its ``accumulators``: importance since reflection, last reflection, last
        consolidation, in game minutes), the shared tier to the ids ``shared``; then everything written to Chroma.
        Returns ``{"restored", "dropped"}`` memory counts.

        Raises:
            CheckpointError: a memory the checkpoint lists is nowhere in its agent's store.
        """
        from collections import Counter

        from simulacra.checkpoint import restore_layer_counters
        from simulacra.memory.stream import roll_back

        rt = self.rt
        restore_layer_counters(rt, dict(layers))
        counts: Counter[str] = Counter()
        for pid in rt.agents:
            counts.update(rt.memories[pid].restore(memory[pid], *accumulators[pid]))
        if rt.shared is not None:
            counts["dropped"] += roll_back(rt.shared, list(shared or []))
        rt.flush()  # the stores in Chroma as the checkpoint has them before the first tick writes
        return {"restored": counts["restored"], "dropped": counts["dropped"]}

    def after_whole_checkpoint(self) -> None:
        """Queue the access marks set since the last whole checkpoint and empty old trash."""
        from simulacra.killpoint import kill_point

        for pid in self.rt.agents:
            self.rt.memories[pid].save_marks()
            kill_point("marks")
            self.rt.memories[pid].empty_trash()

    def flush(self, deletes: bool = True) -> int:
        """:meth:`Runtime.flush`."""
        return self.rt.flush(deletes=deletes)

    def close_flush(self, deletes: bool) -> None:
        """At the run's end: the access marks not yet saved and what the stores still queue, to Chroma."""
        for mem in self.rt.memories.values():
            mem.save_marks()
        self.rt.flush(deletes=deletes)

    def memory_summary(self, now: int) -> dict[str, dict[str, Any]]:
        return memory_summary(self.rt, self.rt.agents, now)

    def held_topics(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """:func:`held_topics` of every agent of these stores."""
        return held_topics(self.rt, self.rt.agents, topics)

    def posted_topics(self) -> set[str]:
        """Topics the shared tier already holds notices of."""
        shared = self.rt.shared
        return set() if shared is None else {r.extra["topic"] for r in shared.records if r.extra.get("topic")}

    def shared_size(self) -> int | None:
        return None if self.rt.shared is None else len(self.rt.shared)

    def report(self) -> dict[str, Any]:
        """What the run's summary shows of these parts: ``{"llm": calls, tokens and cost of the language model
        (``None`` without one), with ``replayed``: answers a resume took from ``llm_calls.jsonl`` (counted in the
        calls and tokens too: the run did pay for them once); "rater": :meth:`Rater.report`; "rater_fallbacks":
        unusable rater answers; "embedding_cache": {"hits", "misses"}}``."""
        from simulacra.llm.replay import ReplayingModel
        from simulacra.llm.wrappers import unwrap

        rt = self.rt
        llm = None
        if callable(getattr(rt.llm, "report", None)):
            replay = unwrap(rt.llm, ReplayingModel)
            llm = {"model": rt.llm.name, **rt.llm.report(), "replayed": replay.replayed if replay is not None else 0}
        return {"llm": llm, "rater": rt.rater.report(), "rater_fallbacks": rt.rater.fallbacks,
                "embedding_cache": {k: getattr(rt.embedder, k, 0) for k in ("hits", "misses")}}
