"""Variants of a run compared by ``simulacra evaluate``: each a named change, in one table (:data:`VARIANTS`).

A variant is config overrides (``section.field=value``, as ``--set``) and/or an ablation of one faculty, after
the Generative Agents paper's ablations (arXiv 2304.03442, section 6):

* ``planning``: the day plan is the persona's routine, made without memories; actions follow it; invitations are
  never taken up (:class:`NoPlanningMind`).
* ``reaction``: nobody reacts to what they perceive (every reaction is "continue", no model call): agents follow
  their plan and talk only in chance meetings (``cognition.chance_meetings``) (:class:`NoReactionMind`). Not one of
  the paper's ablations: it keeps a small model's reactions from walking everyone off before a conversation.
* ``memory``: every retrieval returns static facts only (persona, world) and no news is recalled
  (:class:`StaticOnlyMemory`): the agent still perceives and stores, but cannot use what it lived.

Reflection is switched off by config (``reflection.enabled=false``); the conversation-history strategies are
config (``cognition.history``), and so is the scripted mind's gossip rule (``gossip=graded``, ``gossip=tell-all``:
``simulation.gossip``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulacra.cognition.mind import AgentView, Consideration, Decision, Engagement, PlanItem, Reaction
from simulacra.cognition.scripted import routine_plan
from simulacra.errors import SimulacraError

HISTORIES = ("full", "window", "window_summary", "recursive_summary", "swin")
GOSSIP_RULES = ("tell-all", "graded")  # simulation.gossip


@dataclass(frozen=True)
class Variant:
    """A named change to a run: ``overrides`` (``section.field=value``) and ``ablate`` (``planning``, ``memory``)."""

    name: str
    description: str
    overrides: tuple[str, ...] = ()
    ablate: frozenset[str] = field(default_factory=frozenset)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "description": self.description, "overrides": list(self.overrides),
                "ablate": sorted(self.ablate)}


VARIANTS: dict[str, Variant] = {v.name: v for v in [
    Variant("full", "everything on (the defaults)"),
    Variant("no-reflection", "no reflection", ("reflection.enabled=false",)),
    Variant("no-planning", "routine as the plan, no memory in planning, invitations not taken up",
            ablate=frozenset({"planning"})),
    Variant("no-memory", "retrieval returns static facts only; nothing lived is recalled",
            ablate=frozenset({"memory"})),
    Variant("no-reaction", "nobody reacts to what they perceive; talk only in chance meetings",
            ablate=frozenset({"reaction"})),
    *[Variant(f"history={h}", f"conversation history strategy {h}", (f"cognition.history={h}",)) for h in HISTORIES],
    Variant("exchange=whole", "one model call writes a whole conversation", ("cognition.exchange=whole",)),
    *[Variant(f"gossip={g}", f"the scripted mind's gossip rule {g}", (f"simulation.gossip={g}",))
      for g in GOSSIP_RULES],
]}


def variant(name: str) -> Variant:
    """The variant called ``name``; ``a+b`` combines variants (overrides in order, ablations together), e.g.
    ``no-planning+history=window``.

    Raises:
        SimulacraError: no such variant (the closest name and the known ones are given), or a part named twice.
    """
    if name in VARIANTS:
        return VARIANTS[name]
    if "+" in name:
        names = [n.strip() for n in name.split("+")]
        if len(set(names)) != len(names):
            raise SimulacraError(f"--variant: '{name}' names a variant twice")
        parts = [variant(n) for n in names]
        return Variant("+".join(names), "; ".join(p.description for p in parts),
                       tuple(o for p in parts for o in p.overrides), frozenset().union(*(p.ablate for p in parts)))
    close = difflib.get_close_matches(name, list(VARIANTS), n=1, cutoff=0.6)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise SimulacraError(f"--variant: unknown variant '{name}'{hint} (variants: {', '.join(VARIANTS)})")


class NoPlanningMind:
    """A mind without planning: the persona's routine is the day plan (no memories in it) and the actions, and
    invitations are declined; everything else (reactions, dialogue, interviews, reflection) is the wrapped mind's."""

    def __init__(self, mind):
        self.inner = mind
        self.name = f"{mind.name}+no-planning"

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def plan_day(self, view: AgentView, day_start: int, day_end: int) -> Decision[list[PlanItem]]:
        return Decision(routine_plan(view.persona, day_start, day_end, view.rest_day), ())

    def next_actions(self, view: AgentView, plan: Sequence[PlanItem], start: int,
                     end: int) -> Decision[list[PlanItem]]:
        return Decision([p for p in plan if p.end > start and p.start < end], ())

    def consider(self, view: AgentView, engagement: Engagement,
                 commitments: Sequence[PlanItem]) -> Decision[Consideration]:
        return Decision(Consideration(False, "no planning (ablation)"), ())


class NoReactionMind:
    """A mind that reacts to nothing: every reaction is "continue" (no model call), so agents keep to their plan and
    meet only by chance (``cognition.chance_meetings``); everything else is the wrapped mind's."""

    def __init__(self, mind):
        self.inner = mind
        self.name = f"{mind.name}+no-reaction"

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def react(self, view: AgentView, percept: str, about, present) -> Decision[Reaction]:
        return Decision(Reaction("continue", reason="no reaction (ablation)"), ())


class StaticOnlyMemory:
    """An agent's memory that answers retrievals from the static tier only and recalls no recent news; writes,
    consolidation and everything else go to the wrapped :class:`~simulacra.memory.stream.AgentMemory`."""

    TIERS = ("static",)

    def __init__(self, memory):
        self.inner = memory

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    @property
    def readable(self) -> tuple[str, ...]:
        return self.TIERS

    # the static tier is also the whole BM25 corpus: what the ablated agent cannot read does not count
    def retrieve(self, query_embedding, now, top_k=None, tiers=None, threshold=None, mode=None, rule=None,
                 query_text=None, profile=None, formed_before=None, corpus=None):
        return self.inner.retrieve(query_embedding, now, top_k, self.TIERS, threshold, mode, rule, query_text,
                                   profile, formed_before, corpus=self.TIERS)

    def retrieval_record(self, query, purpose, results, query_embedding, now, rule=None, tiers=None, profile=None,
                         corpus=None):
        return self.inner.retrieval_record(query, purpose, results, query_embedding, now, rule, self.TIERS, profile,
                                           corpus=self.TIERS)

    def candidates(self, query_embedding, now, top_k=None, tiers=None, query_text=None, profile=None, corpus=None):
        return self.inner.candidates(query_embedding, now, top_k, self.TIERS, query_text, profile,
                                     corpus=self.TIERS)

    def lexical_relevance(self, query_text, corpus=None):
        return self.inner.lexical_relevance(query_text, self.TIERS)

    def most_important(self, now, n, tiers=("long_term",), since=None, kinds=None):
        return []


#: the faculties a variant can ablate
ABLATIONS = ("planning", "memory", "reaction")


def check_ablations(ablate, what: str) -> frozenset[str]:
    """``ablate`` as a frozenset of known ablations (:data:`ABLATIONS`).

    Raises:
        SimulacraError: an unknown one, naming ``what`` (the variant, or the trace header that recorded it).
    """
    got = frozenset(ablate)
    unknown = got - set(ABLATIONS)
    if unknown:
        raise SimulacraError(f"{what}: unknown ablation(s) {sorted(unknown)} (known: {', '.join(ABLATIONS)})")
    return got


def recorded_ablations(header: Mapping[str, Any], what: str = "trace header") -> frozenset[str]:
    """The ablations a run was made under, from its trace ``header`` (``scenario.variant.ablate``, written by
    :func:`simulacra.evaluation.setup.start_run`); empty for a run that is not a scenario run.

    Raises:
        SimulacraError: an unknown ablation in the header (named by ``what``).
    """
    v = (header.get("scenario") or {}).get("variant") or {}
    return check_ablations(v.get("ablate") or (), f"{what}: scenario.variant.ablate")


def ablate_mind(mind, ablate: frozenset[str]):
    """``mind`` as the ablation ``ablate`` has it: wrapped in :class:`NoPlanningMind` under ``planning`` and in
    :class:`NoReactionMind` under ``reaction``."""
    mind = NoPlanningMind(mind) if "planning" in ablate else mind
    return NoReactionMind(mind) if "reaction" in ablate else mind


def ablate_memory(memory, ablate: frozenset[str]):
    """An agent's ``memory`` as the ablation ``ablate`` has it: wrapped in :class:`StaticOnlyMemory` under
    ``memory``. The one place that decides what an ablated agent can recall, during the run and in interviews."""
    return StaticOnlyMemory(memory) if "memory" in ablate else memory


def apply_ablations(rt, ablate: frozenset[str]) -> None:
    """Put the ablations ``ablate`` (:func:`check_ablations` of a variant's, or :func:`recorded_ablations` of a
    run's) into the run's parts (``rt``: a :class:`~simulacra.runtime.Runtime`, or a Ray shard's): when a scenario
    run starts, when it is resumed, in one process or in every shard."""
    rt.mind = ablate_mind(rt.mind, ablate)
    rt.memories = {pid: ablate_memory(m, ablate) for pid, m in rt.memories.items()}
