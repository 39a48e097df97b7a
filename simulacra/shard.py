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

from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

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


def op_agent(op: dict[str, Any]) -> str | None:
    """The agent of a trace operation (``None`` for a notice posted to the town's shared memory)."""
    return op.get("agent")


def merge_remembered(parts: Sequence[Remembered], order: dict[str, int]) -> Remembered:
    """The shards' :class:`Remembered` as one: operations in agent order, ratings together."""
    ratings: dict[str, int] = {}
    for p in parts:
        ratings.update(p.ratings)
    return Remembered(by_agent((op for p in parts for op in p.ops), order, op_agent), ratings)


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
        by_agent((x for p in parts for x in p.pending), order, lambda x: None if x.owner == TOWN else x.owner),
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
            shards share one shared tier: the first writes it).
    """

    def __init__(self, rt: Runtime, index: int = 0, writes_town: bool = True):
        self.rt = rt
        self.index = index
        self.writes_town = writes_town

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

    def act(self, state: TownState, perception: Perception, pending: Sequence[Pending], now: int, tick: int,
            asleep: set[str]) -> tuple[Remembered, Retrieval, Decided]:
        """The first phase of a tick: remember what its agents perceived (and were told), retrieve for their
        situation and salient percepts, decide (plans, actions, reactions) from the town's snapshot ``state``."""
        seen = self.remember(pending, "remember1")
        retrieval = retrieve_stage(state, self.rt, perception, seen.ratings, now, asleep)
        return seen, retrieval, decide_stage(state, self.rt, retrieval, now, tick, asleep)

    def sides(self, state: TownState, ordered: Sequence[tuple[str, str]], now: int) -> Sides:
        """Its agents' sides of the tick's conversations (:func:`~simulacra.tick.sides_stage`)."""
        return sides_stage(state, self.rt, ordered, now)

    def hold(self, state: TownState, pairs: Sequence[tuple[str, str]], sides: Sides, doing: dict[str, str],
             now: int) -> list[tuple]:
        """Hold the conversations its agents open (:func:`~simulacra.tick.hold_stage`)."""
        return hold_stage(state, self.rt, pairs, sides, doing, now)

    def settle(self, pending: Sequence[Pending], used_ops: Sequence[dict[str, Any]], plans: dict[str, list],
               now: int, tick: int) -> tuple[Remembered, Reflected, list, list, list]:
        """The last phase of a tick: remember what its agents planned, said and heard; reflect; mark what the
        tick used (``used_ops``: the tick's operations before this phase, every shard's, in agent order); the
        nightly summaries (``plans``: the day plans); consolidate. Returns ``(said, reflected, rehearse ops,
        summary ops, consolidation ops)``."""
        said = self.remember(pending, "remember2")
        reflected = reflect_stage(self.rt, now, tick)
        rehearsed = rehearse_stage(self.rt, [*used_ops, *said.ops, *reflected.ops], now)
        summarised = summarise_stage(self.rt, plans, now, tick)
        consolidated = consolidate_stage(self.rt, now)
        return said, reflected, rehearsed, summarised, consolidated
