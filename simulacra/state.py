"""The town's state between two ticks: plain data, serialisable with :meth:`TownState.to_dict`.

Everything the tick reads and writes besides the memory stores lives here: the clock (tick index), the
RNG state, positions and actions, object states, each agent's day plan and decomposed actions, cooldowns,
who told whom what, the reflection accumulators and the run's counters. A checkpoint is this object
plus the stores; the stores' ids are deterministic, so writing a tick again overwrites instead of duplicating.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from simulacra.cognition.mind import PlanItem, in_force
from simulacra.trace import ActionRecord


def keyed_uniform(seed: int, *key: Any) -> float:
    """A uniform draw in [0, 1) that depends only on ``seed`` and ``key`` (SHA-256 of their text; never Python's
    salted ``hash`` nor a shared stream), so it is the same in any process, on any shard, after any resume and
    whatever order the draws are made in. The town's chance meetings and openers (``simulation.meeting_draws:
    keyed``) and the scripted mind's graded gossip draw from it."""
    text = "\x1f".join(str(k) for k in (seed, *key))
    return int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "big") / 2.0 ** 64


@dataclass
class AgentState:
    """One agent between ticks.

    Attributes:
        place: place id where it is; action: its last action (trace form) or ``None`` before the first tick.
        plan_start: game minute of the wake-up its day plan starts at (``None``: no plan yet).
        plan: the day plan's broad items; steps: the decomposed actions made so far for the plan day.
        step_key: the action whose ``plan`` memory was stored last (stored again only when it changes).
        last_percepts: texts perceived last tick (unchanged percepts are not remembered again).
        told: listener id -> topics told to or heard from them; knows: every topic seen or heard.
        talked_to: agent id -> conversations held.
        importance_since_reflection, last_reflection: the reflection trigger (rating points; game minute).
        last_consolidation: game minute of the last consolidation.
        invitations: engagements (:meth:`Engagement.to_dict`) heard of since the last tick, to be considered.
    """

    place: str
    action: ActionRecord | None = None
    plan_start: int | None = None
    plan: list[PlanItem] = field(default_factory=list)
    steps: list[PlanItem] = field(default_factory=list)
    step_key: str | None = None
    last_percepts: set[str] = field(default_factory=set)
    told: dict[str, set[str]] = field(default_factory=dict)
    knows: set[str] = field(default_factory=set)
    talked_to: Counter = field(default_factory=Counter)
    importance_since_reflection: float = 0.0
    last_reflection: float | None = None
    last_consolidation: float | None = None
    invitations: list[dict[str, Any]] = field(default_factory=list)

    def step_at(self, minute: float) -> PlanItem | None:
        """The decomposed action in force at ``minute`` (the latest made wins), else ``None``."""
        return in_force(self.steps, minute)

    def to_dict(self) -> dict[str, Any]:
        return {
            "place": self.place, "action": self.action, "plan_start": self.plan_start,
            "plan": [p.to_dict() for p in self.plan], "steps": [p.to_dict() for p in self.steps],
            "step_key": self.step_key, "last_percepts": sorted(self.last_percepts),
            "told": {k: sorted(v) for k, v in sorted(self.told.items())}, "knows": sorted(self.knows),
            "talked_to": dict(sorted(self.talked_to.items())),
            "importance_since_reflection": self.importance_since_reflection,
            "last_reflection": self.last_reflection, "last_consolidation": self.last_consolidation,
            "invitations": list(self.invitations),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AgentState:
        return cls(
            place=d["place"], action=d.get("action"), plan_start=d.get("plan_start"),
            plan=[PlanItem.from_dict(p) for p in d.get("plan", [])],
            steps=[PlanItem.from_dict(p) for p in d.get("steps", [])], step_key=d.get("step_key"),
            last_percepts=set(d.get("last_percepts", [])),
            told={k: set(v) for k, v in d.get("told", {}).items()}, knows=set(d.get("knows", [])),
            talked_to=Counter(d.get("talked_to", {})),
            importance_since_reflection=float(d.get("importance_since_reflection", 0.0)),
            last_reflection=d.get("last_reflection"), last_consolidation=d.get("last_consolidation"),
            invitations=list(d.get("invitations", [])),
        )


@dataclass
class TownState:
    """The whole town between ticks (see the module docstring).

    Attributes:
        tick: index of the next tick; start_minute, tick_minutes: the clock (game minutes).
        rng: the run's one random generator (numpy PCG64); serialised as its bit-generator state.
        object_states: object id -> state. agents: agent id -> :class:`AgentState`.
        pair_last_talk: ``"a|b"`` (sorted ids) -> game minute the pair last started a conversation.
        posted_topics: topics already posted to the town's shared memory.
        counters: run totals (``forgotten:<agent>``, ``reflections:<agent>``, ``reflection_failures``,
            ``fallback:<kind>``, ``decisions:<source>``, ...).
    """

    start_minute: int
    tick_minutes: int
    rng: np.random.Generator
    object_states: dict[str, str]
    agents: dict[str, AgentState]
    tick: int = 0
    pair_last_talk: dict[str, int] = field(default_factory=dict)
    posted_topics: set[str] = field(default_factory=set)
    counters: Counter = field(default_factory=Counter)

    @property
    def now(self) -> int:
        """Game minute of the tick about to run."""
        return self.start_minute + self.tick * self.tick_minutes

    @staticmethod
    def pair_key(a: str, b: str) -> str:
        return "|".join(sorted((a, b)))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able data (the checkpoint form)."""
        return {
            "tick": self.tick, "start_minute": self.start_minute, "tick_minutes": self.tick_minutes,
            "rng": self.rng.bit_generator.state, "object_states": dict(self.object_states),
            "agents": {pid: a.to_dict() for pid, a in self.agents.items()},
            "pair_last_talk": dict(sorted(self.pair_last_talk.items())),
            "posted_topics": sorted(self.posted_topics), "counters": dict(sorted(self.counters.items())),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any], order: Sequence[str] | None = None) -> TownState:
        """The state :meth:`to_dict` wrote. ``order``: the run's agent ids in the order its ticks visit them (the
        world's order, or ``--agents``'); a checkpoint's JSON has sorted keys, so without it the agents come back
        in alphabetical order (a resumed trace would then list them otherwise than the uninterrupted run's).

        Raises:
            KeyError: ``order`` names an agent the state does not hold.
        """
        rng = np.random.default_rng()
        rng.bit_generator.state = d["rng"]
        return cls(
            start_minute=int(d["start_minute"]), tick_minutes=int(d["tick_minutes"]), rng=rng,
            object_states=dict(d["object_states"]),
            agents={pid: AgentState.from_dict(d["agents"][pid]) for pid in (d["agents"] if order is None else order)},
            tick=int(d["tick"]),
            pair_last_talk={k: int(v) for k, v in d.get("pair_last_talk", {}).items()},
            posted_topics=set(d.get("posted_topics", [])), counters=Counter(d.get("counters", {})),
        )
