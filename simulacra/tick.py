"""The stages of one tick, each a function of the town state and its inputs that returns its writes and its
trace records (nothing is appended to lists passed in). :meth:`simulacra.simulation.Simulation.step` runs them::

    world events -> perceive -> remember -> retrieve -> decide -> apply -> converse -> remember
                 -> reflect -> rehearse -> summarise -> consolidate -> persist -> trace

The memory stages write the stores' in-process mirrors (every later read sees the writes at once); the persist
stage writes the tick's new and changed memories to Chroma, one call per collection; deletes follow the tick's
checkpoint.

Every agent decides from the same pre-tick state; the world applies all actions at once; independent model
calls of a stage go out together (:meth:`Runtime.map`) and their answers are used in agent order, so neither
the order agents are visited in nor the order answers arrive in changes the outcome.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from simulacra.clock import MINUTES_PER_HOUR, day_number, format_hhmm
from simulacra.cognition.mind import (
    AgentView,
    ConversationView,
    Decision,
    Engagement,
    PlanItem,
    Reaction,
    converse_line_by_line,
    in_force,
    plan_memory_text,
    plan_span,
    splice,
    step_memory_text,
)
from simulacra.cognition.plan import Action, action_for, is_asleep, is_free
from simulacra.cognition.reflect import ReflectionRequest, focal_points, gather_evidence, insight_records
from simulacra.cognition.scripted import news_candidates, routine_plan
from simulacra.days import is_sleeping, plan_day_at, routine_entry_at
from simulacra.errors import RaterError
from simulacra.killpoint import kill_point
from simulacra.memory.perspective import resident_view
from simulacra.memory.records import MemoryRecord, RetrievedMemory, memory_id
from simulacra.memory.speech import DialogueLine
from simulacra.runtime import Runtime
from simulacra.state import TownState, keyed_uniform
from simulacra.text import at_place
from simulacra.trace import (
    ENGAGEMENT,
    FALLBACK,
    LINE,
    NEXT_ACTIONS,
    PLAN_DAY,
    REACT,
    REFLECT,
    RETRIEVE,
    SCRIPTED,
    SUMMARY,
    AddOp,
    ConversationRecord,
    DecisionRecord,
    LineRecord,
    MemoryOp,
    RehearseOp,
    RetrieveOp,
    conversation_record,
    decision_record,
    line_record,
    post_op,
    reflect_op,
)
from simulacra.world.perception import Percept, perceive

log = logging.getLogger(__name__)

#: owner key of the town's shared memory among pending writes (persona ids are file stems, never "@")
TOWN = "@town"


@dataclass(frozen=True)
class Pending:
    """A memory to write this tick: ``owner`` is an agent id or :data:`TOWN`; ``topics``: the news it tells,
    whose ratings are a floor of its own (``memory.rate_news_by_topic``)."""

    owner: str
    record: MemoryRecord
    topics: tuple[str, ...] = ()


def new_record(agent: str, text: str, kind: str, now: int, tick: int, extra: dict | None = None) -> MemoryRecord:
    """A memory formed at game minute ``now`` (deterministic id, rating filled in when remembered)."""
    return MemoryRecord(id=memory_id(agent, now, text), text=text, kind=kind, timestamp=float(now), tick=tick,
                        extra=dict(extra or {}))


def notice(posted: set[str], rt: Runtime, text: str, author: str, place: str, now: int, tick: int,
           topic: str | None = None, about: dict[str, float] | None = None) -> Pending | None:
    """A notice for the town's shared memory, or ``None`` when the world has none or the topic was posted
    (once per topic; ``topic`` defaults to ``text``). ``author`` is ``"world"`` or an agent id; ``about``: the
    span of the gathering it tells of (:meth:`Engagement.about <simulacra.cognition.mind.Engagement.about>`)."""
    topic = topic or text
    if not rt.world.shared_memory or topic in posted:
        return None
    rec = MemoryRecord(id=memory_id("town", now, text), text=text, kind="notice", timestamp=float(now), tick=tick,
                       extra={"topic": topic, "author": author, "place": place, **(about or {})})
    return Pending(TOWN, rec)


def view_of(state: TownState, rt: Runtime, agent: str, now: int, memories: Sequence[RetrievedMemory] = (),
            place: str | None = None) -> AgentView:
    return AgentView(agent, rt.persona(agent), now, place or state.agents[agent].place, tuple(memories), rt.names,
                     rt.place_names, current_activity(state, rt, agent, now), rt.world.weekday(now),
                     plan_day_at(rt.persona(agent), rt.world, now).rest_day)


def sleepers(state: TownState, rt: Runtime, now: int) -> set[str]:
    """The agents asleep as the tick at game minute ``now`` begins (:func:`simulacra.days.is_sleeping`: in the
    night entry of the day's routine, at home). They perceive, retrieve, react and talk not at all."""
    return {pid for pid, a in state.agents.items() if is_sleeping(rt.persona(pid), rt.world, now, a.place)}


def current_activity(state: TownState, rt: Runtime, agent: str, now: int) -> str:
    """What ``agent`` is doing as the tick begins: its last action, else its plan, else its routine."""
    a = state.agents[agent]
    if a.action is not None:
        return a.action["activity"]
    step = a.step_at(now)
    if step is not None:
        return step.activity
    return routine_entry_at(rt.persona(agent), rt.world, now)[1].activity


def retrieve_many(rt: Runtime, asks: Sequence[tuple[str, str, str]], now: int
                  ) -> tuple[list[list[RetrievedMemory]], list[RetrieveOp]]:
    """Retrieve for ``(agent, query, purpose)`` each, with one embedding batch, under the retrieval profile of the
    purpose (``memory.purposes``: acting now is situational, recalling is led by relevance); returns the results in
    order and their trace operations (:meth:`AgentMemory.retrieval_record`)."""
    if not asks:
        return [], []
    vectors = rt.embedder.embed([q for _, q, _ in asks])
    found, ops = [], []
    for (agent, query, purpose), qv in zip(asks, vectors):
        memory = rt.memories[agent]
        profile = rt.config.memory.profile_of(purpose)
        got = memory.retrieve(qv, now, query_text=query, profile=profile)
        found.append(got)
        ops.append(memory.retrieval_record(query, purpose, got, qv, now, profile=profile))
    return found, ops


def decision_of(agent: str, kind: str, d: Decision, value: Any) -> DecisionRecord:
    """The trace form of a decision (:class:`~simulacra.trace.DecisionRecord`): who, what kind, from where, the
    memories in its prompt, what it decided."""
    return decision_record(agent, kind, d.source, list(d.memory_ids), value, d.reason)


# --------------------------------------------------------------------------- world events
@dataclass(frozen=True)
class WorldEvents:
    """Events visible during the tick (``active``), those beginning in it, and the object states they set."""

    active: list
    starting: list
    object_changes: dict[str, str]


def world_events(rt: Runtime, now: int) -> WorldEvents:
    tm = rt.world.tick_minutes
    active = [ev for ev in rt.world.events if ev.minute < now + tm and now < ev.minute + ev.duration_minutes]
    starting = [ev for ev in active if now <= ev.minute < now + tm]
    changes: dict[str, str] = {}
    for ev in starting:
        changes.update(ev.object_states)
    return WorldEvents(active, starting, changes)


# --------------------------------------------------------------------------- perceive
@dataclass
class Perception:
    """What each agent noticed: ``percepts`` (all, by salience), the memories to write for the new ones, the
    new ``last_percepts`` and the topics each came to know by seeing."""

    percepts: dict[str, list[Percept]]
    new: dict[str, list[Percept]]
    pending: list[Pending]
    last_percepts: dict[str, set[str]]
    learned: dict[str, set[str]]


def perceive_stage(state: TownState, rt: Runtime, events: WorldEvents, object_states: dict[str, str], now: int,
                   tick: int, asleep: frozenset[str] | set[str] = frozenset()) -> Perception:
    """Each agent perceives its place as the tick begins (events, others and what they do, conversations held
    last tick, objects), within its attention bandwidth; only what changed since last tick is remembered.
    Agents ``asleep`` perceive nothing (and, on waking, everything they perceive is new)."""
    positions = {pid: a.place for pid, a in state.agents.items()}
    activities = {pid: current_activity(state, rt, pid, now) for pid in state.agents}
    talking = sorted({(min(pid, partner), max(pid, partner)) for pid, a in state.agents.items()
                      if a.action and (partner := a.action.get("partner", "")) in state.agents})
    percepts: dict[str, list[Percept]] = {}
    new: dict[str, list[Percept]] = {}
    pending: list[Pending] = []
    last: dict[str, set[str]] = {}
    learned: dict[str, set[str]] = {}
    for pid, agent in state.agents.items():
        if pid in asleep:
            percepts[pid], new[pid], learned[pid], last[pid] = [], [], set(), set()
            continue
        related = set(rt.persona(pid).relationships)
        seen = perceive(pid, agent.place, rt.world, positions, activities, object_states, events.active, talking,
                        rt.names, related, rt.config.simulation.attention_bandwidth)
        percepts[pid] = seen
        new[pid] = [p for p in seen if p.text not in agent.last_percepts]
        learned[pid] = {p.topic for p in seen if p.topic}
        for p in new[pid]:
            extra = {"topic": p.topic, "source": "seen"} if p.topic else {}
            pending.append(Pending(pid, new_record(pid, p.text, p.kind, now, tick, extra)))
        last[pid] = {p.text for p in seen}
    return Perception(percepts, new, pending, last, learned)


# --------------------------------------------------------------------------- remember
@dataclass
class Remembered:
    """What :func:`remember_stage` wrote: the trace's operations, and ``own``, owner -> text -> the rating its memory
    got (1..10; with the floors and the owner's perspective), which a reaction is chosen by (read in the shard that
    wrote it; a shard sends the town the operations alone)."""

    ops: list[MemoryOp]
    own: dict[str, dict[str, int]] = field(default_factory=dict)


#: the kinds of memory also rated from their owner's perspective (``memory.rate_from_perspective``): the world's
#: events it perceived. Not what it said and heard, which names it in every line ("Greta Lund said to Kofi Mensah:
#: ..."; news told is rated at least as its topic, ``memory.rate_news_by_topic``), nor the routine sightings and
#: objects' states, which name its home whenever it is there.
PERSPECTIVE_KINDS = frozenset({"event"})


def own_view(rt: Runtime, owner: str, text: str) -> str | None:
    """``text`` as ``owner`` would tell it (:func:`simulacra.memory.perspective.resident_view`: its name, "the
    <occupation>", its aliases, its home's name and its pronouns in the first person), or ``None`` when the text does
    not name the owner, the owner is the town or ``memory.rate_from_perspective`` is off."""
    if owner == TOWN or not rt.config.memory.rate_from_perspective:
        return None
    persona = rt.persona(owner)
    return resident_view(text, persona, rt.place_names.get(persona.home))


def remember_stage(rt: Runtime, pending: Sequence[Pending], phase: str = "remember") -> Remembered:
    """Rate (one rater request) and embed (one batch) the pending memories, then write each owner's in one
    write. A memory carrying an ``importance`` (news a scenario declared important, retold) is rated at least that;
    under ``memory.rate_news_by_topic`` a memory telling news (:attr:`Pending.topics`) is rated at least as each of
    its topics; under ``memory.rate_from_perspective`` a memory of a world event that names its owner is rated at
    least as its text in the owner's first person (:func:`own_view`; the Generative Agents paper rates poignancy for the
    agent), and with both, a memory telling news that names its owner at least as the news in the owner's first
    person (the blacksmith's lines telling of his own burn are rated as his memory of the burn). All of them are
    rated in the same request. The same id twice in one tick is written once. ``phase`` names the batch for
    :func:`~simulacra.killpoint.kill_point` (after the first owner's write).

    Raises:
        RaterError: the rater failed for good (the run then stops at the last complete tick).
    """
    if not pending:
        return Remembered([])
    texts = list(dict.fromkeys(p.record.text for p in pending))
    by_topic = rt.config.memory.rate_news_by_topic
    topics = [t for t in dict.fromkeys(t for p in pending for t in p.topics) if t not in texts] if by_topic else []
    views = [own_view(rt, p.owner, p.record.text) if p.record.kind in PERSPECTIVE_KINDS else None for p in pending]
    # news that names its owner is rated for it too: the teller of its own accident keeps its lines as the event
    told_views = {(p.owner, t): own_view(rt, p.owner, t) for p in pending for t in p.topics} if by_topic else {}
    extra = [t for t in dict.fromkeys(v for v in [*views, *told_views.values()] if v is not None)
             if t not in texts and t not in topics]
    rated = rt.rater.rate_many(texts + topics + extra)
    ratings = dict(zip(texts, rated))
    other_ratings = dict(zip(texts + topics + extra, rated))
    vectors = dict(zip(texts, rt.embedder.embed(texts)))
    by_owner: dict[str, dict[str, MemoryRecord]] = {}
    own: dict[str, dict[str, int]] = {}

    def topic_rating(owner: str, topic: str) -> int:
        view = told_views.get((owner, topic))
        return max(other_ratings[topic], other_ratings[view] if view is not None else 1)

    for p, view in zip(pending, views):
        floor = max((topic_rating(p.owner, t) for t in p.topics), default=1) if by_topic else 1
        mine = other_ratings[view] if view is not None else 1
        p.record.rating = max(ratings[p.record.text], int(p.record.extra.get("importance", 1)), floor, mine)
        by_owner.setdefault(p.owner, {}).setdefault(p.record.id, p.record)
        own.setdefault(p.owner, {})[p.record.text] = p.record.rating
    ops: list[MemoryOp] = []
    for owner in [TOWN, *rt.agents]:
        recs = list(by_owner.get(owner, {}).values())
        if not recs:
            continue
        emb = np.stack([vectors[r.text] for r in recs])
        if owner == TOWN:
            assert rt.shared is not None  # notices are pending only in a world with shared memory
            rt.shared.upsert(recs, emb)
            ops += [post_op(r.extra["author"], r.id, r.text, r.kind, r.rating, r.timestamp) for r in recs]
        else:
            ops += rt.memories[owner].add(recs, emb)
        kill_point(phase)
    return Remembered(ops, own)


# --------------------------------------------------------------------------- retrieve
@dataclass
class Retrieval:
    """Per agent: the ``focus`` memories (what bears on its situation) and the salient percepts it may react
    to, each with the memories retrieved about it; ``ops`` are the trace's ``retrieve`` operations."""

    focus: dict[str, list[RetrievedMemory]]
    salient: dict[str, list[tuple[Percept, list[RetrievedMemory]]]]
    ops: list[RetrieveOp]


def salient_percepts(state: TownState, rt: Runtime, agent: str, new: Sequence[Percept], ratings: Mapping[str, int],
                     now: int) -> list[Percept]:
    """New percepts worth a reaction, best first: events the agent's memory of them rated at least
    ``cognition.react_min_rating`` (1..10; ``ratings``: text -> the agent's rating,
    :attr:`Remembered.own`), by rating; then acquaintances (persona relationships) come into view, whom the agent has
    not talked with within ``simulation.conversation_cooldown_minutes`` (Generative Agents: seeing someone one knows
    may start a conversation)."""
    bar = rt.config.cognition.react_min_rating
    cooldown = rt.config.simulation.conversation_cooldown_minutes
    known = set(rt.persona(agent).relationships)
    events = sorted((p for p in new if p.kind == "event" and ratings.get(p.text, 0) >= bar),
                    key=lambda p: -ratings.get(p.text, 0))
    people = []
    for p in new:
        if p.subject in known:
            last = state.pair_last_talk.get(TownState.pair_key(agent, p.subject))
            if last is None or now - last >= cooldown:
                people.append(p)
    return events + people


def retrieve_stage(state: TownState, rt: Runtime, perception: Perception, seen: Remembered,
                   now: int, asleep: frozenset[str] | set[str] = frozenset()) -> Retrieval:
    """The focus retrieval of every agent not ``asleep`` (its activity at its place), and, for a mind that
    reacts, one retrieval about its most salient new percept (agents whose activity is not sleep only; salient by
    the ratings its memories got, ``seen``'s :attr:`Remembered.own`)."""
    asks = [(pid, at_place(current_activity(state, rt, pid, now), rt.place_names[state.agents[pid].place]), "focus")
            for pid in rt.agents if pid not in asleep]
    salient: dict[str, list[Percept]] = {}
    if getattr(rt.mind, "reactive", False):
        for pid in rt.agents:
            if pid in asleep or is_asleep(current_activity(state, rt, pid, now)):
                continue
            top = salient_percepts(state, rt, pid, perception.new[pid], seen.own.get(pid, {}), now)[:1]
            if top:
                salient[pid] = top
                asks.append((pid, top[0].text, "reaction"))
    found, ops = retrieve_many(rt, asks, now)
    focus = {pid: got for (pid, _, purpose), got in zip(asks, found) if purpose == "focus"}
    about = {(pid, q): got for (pid, q, purpose), got in zip(asks, found) if purpose == "reaction"}
    return Retrieval(focus, {pid: [(p, about[(pid, p.text)]) for p in ps] for pid, ps in salient.items()}, ops)


# --------------------------------------------------------------------------- decide
@dataclass
class Decided:
    """This tick's decisions: per agent its (possibly new) plan, steps and action; the conversations to hold;
    the plan memories to write; trace records of every decision and the retrievals made for them."""

    plan_start: dict[str, int | None]
    plans: dict[str, list[PlanItem]]
    steps: dict[str, list[PlanItem]]
    step_keys: dict[str, str | None]
    planned: dict[str, PlanItem | None]  # the plan's action in force now (None: the plan left a gap)
    actions: dict[str, Action]
    pairs: list[tuple[str, str]]
    pair_last_talk: dict[str, int]
    pending: list[Pending]
    records: list[DecisionRecord]
    ops: list[RetrieveOp]
    notable: list[tuple[str, str]] = field(default_factory=list)  # (agent, line)
    considered: set[str] = field(default_factory=set)  # agents whose heard engagements were considered this tick
    invitations: list[tuple[str, str]] = field(default_factory=list)  # (inviter, invited) from reactions, in order


def engagement_query(rt: Runtime, agent: str, e: Engagement) -> str:
    """What an agent asks its memory before deciding about an engagement: its plans for the engagement's window."""
    return (f"What will {rt.names[agent]} be doing on day {day_number(e.start)} from "
            f"{format_hhmm(e.start)} to {format_hhmm(e.end)}?")


def commitments(rt: Runtime, agent: str, plan: Sequence[PlanItem], e: Engagement) -> list[PlanItem]:
    """Items of ``plan`` that stand in the way of ``e``: overlapping its window at a workplace (place kind
    ``work``) other than its place. An engagement on a later plan day than ``plan`` covers (a party tomorrow) is
    checked against the persona's routine for that day (rest days followed, :func:`simulacra.days.plan_day_at`).
    The host has none."""
    if agent == e.host:
        return []
    if in_force(plan, e.start) is None:
        persona = rt.persona(agent)
        day = plan_day_at(persona, rt.world, e.start)
        plan = routine_plan(persona, day.start, day.end, day.rest_day)
    places = rt.world.places
    return [p for p in plan if p.start < e.end and p.end > e.start and p.place != e.place
            and p.place in places and places[p.place].kind == "work"]


def carried_over(plan: Sequence[PlanItem], day_start: int) -> list[PlanItem]:
    """Items of yesterday's ``plan`` that start at or after the new plan day's wake-up (``day_start``, game
    minute): engagements accepted for a later day (a party tomorrow, spliced in by :func:`consider_stage`), kept
    in the new day's plan. A plan day's own items end by its end, so nothing else is carried."""
    return [p for p in plan if p.start >= day_start]


def consider_stage(state: TownState, rt: Runtime, now: int, plans: dict[str, list[PlanItem]],
                   steps: dict[str, list[PlanItem]]) -> tuple[set[str], list[DecisionRecord], list[RetrieveOp],
                                                              list[tuple[str, str]]]:
    """Engagements heard since the last tick (``AgentState.invitations``; none in a run without any): each agent
    retrieves its plans for the engagement's window (:func:`engagement_query`) and its mind decides from what came
    back (:meth:`Mind.consider`); a yes is spliced into its day plan and actions (:func:`splice`). Engagements
    already over are dropped. Changes ``plans`` and ``steps`` in place; returns the agents considered, the
    decision records, the retrieval operations and notable lines (``(agent, line)``)."""
    asks = [(pid, Engagement.from_dict(e)) for pid in rt.agents for e in state.agents[pid].invitations]
    asks = [(pid, e) for pid, e in asks if e.end > now]
    considered = {pid for pid in rt.agents if state.agents[pid].invitations}
    if not asks:
        return considered, [], [], []
    found, ops = retrieve_many(rt, [(pid, engagement_query(rt, pid, e), "engagement") for pid, e in asks], now)

    def one(item):
        (pid, e), mems = item
        return rt.mind.consider(view_of(state, rt, pid, now, mems), e, commitments(rt, pid, plans[pid], e))

    records: list[DecisionRecord] = []
    notable: list[tuple[str, str]] = []
    for (pid, e), d in zip(asks, rt.map(one, list(zip(asks, found)))):
        records.append(decision_of(pid, ENGAGEMENT, d, {"engagement": e.to_dict(), **d.value.to_dict()}))
        if d.value.go:
            item = e.item(pid, rt.names)
            plans[pid] = splice(plans[pid], item)
            steps[pid] = splice([s for s in steps[pid] if s.end > now], item)
            notable.append((pid, f"{format_hhmm(now)} {rt.names[pid]} will be at {rt.place_names[e.place]} from "
                                 f"{format_hhmm(e.start)} to {format_hhmm(e.end)} ({d.value.reason})"))
    return considered, records, ops, notable


def decide_stage(state: TownState, rt: Runtime, retrieval: Retrieval, now: int, tick: int,
                 asleep: frozenset[str] | set[str] = frozenset()) -> Decided:
    """Plan at each wake-up (once per plan day, :func:`simulacra.days.plan_day_at`: rest days follow the
    persona's ``rest_day_routine``), decompose the next hours when no action covers now, react to salient
    percepts, then take this tick's action from the plan; pair free agents at the same place for conversations
    (agents ``asleep`` talk with nobody).

    All from the pre-tick state; the model calls of each step go out together.
    """
    mind = rt.mind
    cfg = rt.config.cognition
    records: list[DecisionRecord] = []
    pending: list[Pending] = []
    notable: list[tuple[str, str]] = []
    clock = format_hhmm(now)
    mine = rt.agents
    plan_start = {pid: state.agents[pid].plan_start for pid in mine}
    plans = {pid: list(state.agents[pid].plan) for pid in mine}
    steps = {pid: list(state.agents[pid].steps) for pid in mine}

    days = {pid: plan_day_at(rt.persona(pid), rt.world, now) for pid in mine}

    # 1. a day plan at wake-up (memories retrieved for "plans for today")
    due = [pid for pid in mine if plan_start[pid] != days[pid].start]
    found, ops = retrieve_many(rt, [(pid, f"{rt.names[pid]}'s plans for today", "plan") for pid in due], now)

    def plan_one(item):
        pid, mems = item
        return mind.plan_day(view_of(state, rt, pid, now, mems), days[pid].start, days[pid].end)

    for pid, d in zip(due, rt.map(plan_one, list(zip(due, found)))):
        plan = list(d.value)
        for kept in carried_over(plans[pid], days[pid].start):
            plan = splice(plan, kept)
        plan_start[pid], plans[pid], steps[pid] = days[pid].start, plan, []
        records.append(decision_of(pid, PLAN_DAY, d, [p.to_dict() for p in plan]))
        text = plan_memory_text(rt.persona(pid), plan, rt.place_names, days[pid].day)
        pending.append(Pending(pid, new_record(pid, text, "plan", now, tick, plan_span(plan) if plan else None)))

    # 2. decompose the next hours when no action covers now (asleep: the plan item in force, no decision)
    need = [pid for pid in mine if in_force(steps[pid], now) is None]
    for pid in need:
        if pid in asleep and (item := in_force(plans[pid], now)) is not None:
            steps[pid] = [s for s in steps[pid] if s.end > now] + [item]
    need = [pid for pid in need if pid not in asleep]

    def decompose(pid):
        end = min(now + cfg.plan_hours_per_call * MINUTES_PER_HOUR, days[pid].end)
        return mind.next_actions(view_of(state, rt, pid, now, retrieval.focus.get(pid, ())), plans[pid], now, end)

    for pid, d in zip(need, rt.map(decompose, need)):
        steps[pid] = [s for s in steps[pid] if s.end > now] + list(d.value)
        if d.source != SCRIPTED or d.memory_ids:
            records.append(decision_of(pid, NEXT_ACTIONS, d, [p.to_dict() for p in d.value]))

    # 2b. engagements heard of since the last tick (a party): go, or not
    considered, more, engagement_ops, also = consider_stage(state, rt, now, plans, steps)
    records += more
    ops = ops + engagement_ops
    notable += also

    # 3. reactions to salient percepts
    reacting = sorted(retrieval.salient)
    present = {pid: sorted(o for o, a in state.agents.items() if a.place == state.agents[pid].place and o != pid)
               for pid in reacting}

    def react(pid):
        percept, about = retrieval.salient[pid][0]
        return mind.react(view_of(state, rt, pid, now, retrieval.focus.get(pid, ())), percept.text, about,
                          present[pid])

    invitations: list[tuple[str, str]] = []
    for pid, d in zip(reacting, rt.map(react, reacting)):
        r: Reaction = d.value
        percept = retrieval.salient[pid][0][0]
        records.append(decision_of(pid, REACT, d, {"percept": percept.text, **r.to_dict()}))
        if r.kind == "go" and r.place in rt.world.places:
            end = now + MINUTES_PER_HOUR
            steps[pid] = [s for s in steps[pid] if s.end > now] + [
                PlanItem(now, end, r.activity or f"going to {rt.place_names[r.place]}", r.place)]
            notable.append((pid, f"{clock} {rt.names[pid]} reacts to \"{percept.text}\": goes to "
                                 f"{rt.place_names[r.place]}"))
        elif r.kind == "talk" and r.person in present[pid]:
            invitations.append((pid, r.person))

    # 4. this tick's action from the plan; a plan memory when the action in force changes
    actions: dict[str, Action] = {}
    step_keys: dict[str, str | None] = {}
    planned: dict[str, PlanItem | None] = {}
    for pid in mine:
        agent = state.agents[pid]
        step = planned[pid] = in_force(steps[pid], now)
        if step is None:  # a plan that leaves a gap: stay and follow the routine's entry
            idx, entry = days[pid].entry_at(now)
            step = PlanItem(now, now + rt.world.tick_minutes, entry.activity, entry.place, idx)
        actions[pid] = action_for(step, agent.place, rt.world)
        key = f"{step.start}|{step.activity}|{step.place}"
        step_keys[pid] = key
        if key != agent.step_key:
            pending.append(Pending(pid, new_record(pid, step_memory_text(rt.persona(pid), step, rt.place_names),
                                                   "plan", now, tick, plan_span([step]))))

    return Decided(plan_start, plans, steps, step_keys, planned, actions, [], {}, pending, records, ops, notable,
                   considered, invitations)


def pair_stage(state: TownState, rt: Runtime, decided: Decided, now: int,
               asleep: frozenset[str] | set[str] = frozenset()) -> Decided:
    """The town's part of deciding, over every shard's decisions (:func:`merge_decided`): who talks with whom
    (:func:`pair_conversations`: invitations first, then chance meetings), their actions turned into talk; returns
    ``decided`` with ``pairs``, ``pair_last_talk`` and those actions set."""
    pairs, last_talk = pair_conversations(state, rt, decided.actions, decided.invitations, now, asleep)
    actions = dict(decided.actions)
    for a, b in pairs:
        for me, other in ((a, b), (b, a)):
            act = actions[me]
            actions[me] = Action("talk", f"talking with {rt.names[other]}", act.place, act.routine_index,
                                 partner=other)
    return replace(decided, actions=actions, pairs=pairs, pair_last_talk=last_talk)


def town_draw(state: TownState, rt: Runtime, purpose: str, now: int, a: str, b: str) -> float:
    """The town's uniform draw in [0, 1) for the pair ``a``, ``b`` at game minute ``now``, for ``purpose``
    (``"meet"``: do they talk; ``"open"``: does ``a`` speak first). Under ``simulation.meeting_draws: keyed``
    (the default) :func:`simulacra.state.keyed_uniform` of (seed, purpose, now, the pair's key), the same whatever
    else the tick draws; under ``stream`` the run state's generator, in the order of the calls."""
    sim = rt.config.simulation
    if sim.meeting_draws == "stream":
        return float(state.rng.random())
    return keyed_uniform(sim.seed, purpose, now, TownState.pair_key(a, b))


def pair_conversations(state: TownState, rt: Runtime, actions: dict[str, Action],
                       invitations: Sequence[tuple[str, str]], now: int, asleep: frozenset[str] | set[str] = frozenset()
                       ) -> tuple[list[tuple[str, str]], dict[str, int]]:
    """Pairs that talk this tick and the updated cooldowns. An agent talks with one other at most; both must be
    free (staying, awake, not ``asleep``) at the same place and the pair not have talked within
    ``conversation_cooldown_minutes``.
    Invitations (reactions) are honoured first, in order; then, for a mind that does not react (or with
    ``cognition.chance_meetings``), free agents meet by chance: ``conversation_probability`` (+
    ``acquaintance_bonus`` when they know each other), each pair's chance drawn by :func:`town_draw`."""
    sim = rt.config.simulation
    last = dict(state.pair_last_talk)
    taken: set[str] = set(asleep)
    pairs: list[tuple[str, str]] = []

    def ok(a: str, b: str) -> bool:
        if a in taken or b in taken or not (is_free(actions[a]) and is_free(actions[b])):
            return False
        if actions[a].place != actions[b].place:
            return False
        t = last.get(TownState.pair_key(a, b))
        return t is None or now - t >= sim.conversation_cooldown_minutes

    for a, b in invitations:
        if ok(a, b):
            pairs.append((a, b) if a < b else (b, a))
            taken |= {a, b}
            last[TownState.pair_key(a, b)] = now
    if getattr(rt.mind, "reactive", False) and not rt.config.cognition.chance_meetings:
        return pairs, last
    by_place: dict[str, list[str]] = {}
    for pid in sorted(actions):
        if is_free(actions[pid]):
            by_place.setdefault(actions[pid].place, []).append(pid)
    for place in sorted(by_place):
        free = by_place[place]
        for i, a in enumerate(free):
            for b in free[i + 1:]:
                if not ok(a, b):
                    continue
                pa, pb = rt.persona(a), rt.persona(b)
                p = sim.conversation_probability
                if b in pa.relationships or a in pb.relationships:
                    p = min(1.0, p + sim.acquaintance_bonus)
                if town_draw(state, rt, "meet", now, a, b) < p:
                    pairs.append((a, b))
                    taken |= {a, b}
                    last[TownState.pair_key(a, b)] = now
    return pairs, last


# --------------------------------------------------------------------------- apply
@dataclass(frozen=True)
class Applied:
    positions: dict[str, str]
    object_changes: dict[str, str]


def apply_stage(rt: Runtime, actions: dict[str, Action], now: int) -> Applied:
    """The world step at game minute ``now``: every agent ends the tick at its action's place; acting at a
    routine entry's place sets the objects that entry names (``routine_index`` indexes the routine of the
    agent's plan day, a rest day's routine on rest days)."""
    changes: dict[str, str] = {}
    for pid, act in actions.items():
        if act.type != "move" and act.routine_index is not None:
            entry = plan_day_at(rt.persona(pid), rt.world, now).routine[act.routine_index]
            if entry.place == act.place:
                changes.update(entry.object_state)
    return Applied({pid: act.place for pid, act in actions.items()}, changes)


# --------------------------------------------------------------------------- converse
@dataclass
class Conversed:
    """The tick's conversations (trace form), the memories they leave (lines for both sides, a summary each,
    notices), who learnt which topic from whom, and the retrievals and decisions behind them."""

    conversations: list[ConversationRecord]
    pending: list[Pending]
    told: list[tuple[str, str, str]]  # (speaker, listener, topic)
    posted: set[str]
    ops: list[RetrieveOp]
    records: list[DecisionRecord]
    notable: list[str]
    history_usage: Counter
    heard: list[tuple[str, Engagement]] = field(default_factory=list)  # (listener, engagement told to it)


def order_pairs(state: TownState, rt: Runtime, pairs: Sequence[tuple[str, str]], now: int
                ) -> list[tuple[str, str]]:
    """The tick's pairs (game minute ``now``), each in speaking order: who opens is drawn by :func:`town_draw`,
    pair by pair."""
    return [(a, b) if town_draw(state, rt, "open", now, a, b) < 0.5 else (b, a) for a, b in pairs]


def conversation_sides(ordered: Sequence[tuple[str, str]]) -> list[tuple[str, str]]:
    """Every ``(me, other)`` side of the ordered pairs, in order: each pair's opener first."""
    return [(me, other) for a, b in ordered for me, other in ((a, b), (b, a))]


@dataclass
class Sides:
    """What each side of the tick's conversations brings (:func:`sides_stage`): per ``(me, other)``, the memories
    ``me`` retrieved about ``other``, the news ``me`` could tell, and the retrieval's trace operation."""

    about: dict[tuple[str, str], list[RetrievedMemory]]
    news: dict[tuple[str, str], list]
    ops: dict[tuple[str, str], RetrieveOp]


def sides_stage(state: TownState, rt: Runtime, ordered: Sequence[tuple[str, str]], now: int) -> Sides:
    """For each side of ``ordered`` whose speaker is one of ``rt``'s agents (a shard's part): what it knows about
    the other (a retrieval) and the news it could tell (its recent, important events, dialogue and intentions that
    the other has not heard from it, :func:`~simulacra.cognition.scripted.news_candidates`)."""
    sim = rt.config.simulation
    mine = set(rt.agents)
    sides = [side for side in conversation_sides(ordered) if side[0] in mine]
    found, ops = retrieve_many(rt, [(me, f"What do I know about {rt.names[other]}?", f"conversation with {other}")
                                    for me, other in sides], now)
    about = dict(zip(sides, found))

    def news_of(me: str, other: str):
        recent = rt.memories[me].most_important(now, 10, tiers=("short_term", "long_term"),
                                                since=now - sim.news_max_age_minutes,
                                                kinds=("event", "dialogue", "intention"))
        told = state.agents[me].told.get(other, set())
        exchanged = Counter(t for topics in state.agents[me].told.values() for t in topics)
        return news_candidates(recent, about[(me, other)], other, rt.names[other], told, sim.news_min_rating,
                               exchanged)

    return Sides(about, {side: news_of(*side) for side in sides}, dict(zip(sides, ops)))


def merge_sides(parts: Sequence[Sides], ordered: Sequence[tuple[str, str]]) -> Sides:
    """The shards' :class:`Sides` as one, in the order of :func:`conversation_sides`."""
    about, news, ops = {}, {}, {}
    for part in parts:
        about.update(part.about)
        news.update(part.news)
        ops.update(part.ops)
    sides = conversation_sides(ordered)
    return Sides({s: about[s] for s in sides}, {s: news[s] for s in sides}, {s: ops[s] for s in sides})


def hold_stage(state: TownState, rt: Runtime, pairs: Sequence[tuple[str, str]], sides: Sides, doing: dict[str, str],
               now: int) -> list[tuple]:
    """Hold the conversations of ``pairs`` (ordered; the shard of each opener holds it) from both sides' views:
    the mind says each line from the speaker's persona, memories and news, the conversation so far, until a line
    ends it (not before ``simulation.min_conversation_lines`` lines) or ``simulation.conversation_turns`` lines were
    said; then a summary. Conversations are independent of each other and held concurrently when a model speaks.
    Returns per pair ``(lines, decisions, summary, usage, history context)``."""
    sim = rt.config.simulation

    def hold(pair: tuple[str, str]):
        a, b = pair
        views = {me: view_of(state, rt, me, now, sides.about[(me, other)])
                 for me, other in ((a, b), (b, a))}
        convs = {me: ConversationView(me, other, state.agents[a].place, 0, sim.conversation_turns, [],
                                      sides.news[(me, other)], set(state.agents[me].knows),
                                      state.agents[a].talked_to[b] > 0, doing[me],
                                      min_turns=sim.min_conversation_lines,
                                      conversations=state.agents[a].talked_to[b], listener_activity=doing[other])
                 for me, other in ((a, b), (b, a))}
        whole = rt.mind.whole_conversation(views, convs) if hasattr(rt.mind, "whole_conversation") else None
        if whole is not None:
            return whole.value[0], [whole] * len(whole.value[0]), Decision(whole.value[1], (), whole.source), Counter(
                {"conversations": 1, "exchange_calls": 1, "exchange_prompt_tokens": whole.tokens[0],
                 "exchange_completion_tokens": whole.tokens[1]}), None
        history = rt.mind.open_history() if hasattr(rt.mind, "open_history") else None
        lines, decisions = converse_line_by_line(rt.mind.next_line, views, convs, a, b, history)
        c = convs[a]
        summary = rt.mind.summarise_conversation(views[a], c)
        usage = history.usage() if history is not None else Counter()
        return lines, decisions, summary, usage, history.end_context() if history is not None else None

    return rt.map(hold, list(pairs))


def converse_stage(state: TownState, rt: Runtime, ordered: Sequence[tuple[str, str]], sides: Sides,
                   results: Sequence[tuple], now: int, tick: int) -> Conversed:
    """The town's part of the tick's conversations, held by the shards (:func:`hold_stage`, ``results`` in the
    order of ``ordered``): both sides remember every line and a summary; news told is known by the listener, and
    said at a public place it becomes a notice; an invitation heard is considered next tick."""
    carried = {n.topic: n for items in sides.news.values() for n in items if n.carried()}
    ops = list(sides.ops.values())
    pending: list[Pending] = []
    told: list[tuple[str, str, str]] = []
    posted: set[str] = set()
    records: list[DecisionRecord] = []
    notable: list[str] = []
    out: list[ConversationRecord] = []
    usage: Counter = Counter()
    heard: list[tuple[str, Engagement]] = []
    clock = format_hhmm(now)
    for (a, b), (lines, decisions, summary, used, context) in zip(ordered, results):
        usage.update(used)
        place = state.agents[a].place
        pl = rt.world.places[place]
        trace_lines: list[LineRecord] = []
        for (speaker, u), d in zip(lines, decisions):
            listener = b if speaker == a else a
            said = DialogueLine(rt.names[speaker], rt.names[listener], u.text).text
            news = (u.topic,) if u.topic else ()
            item = carried.get(u.topic) if u.topic else None
            # a line telling of a gathering is about its hours too (both sides' memories, and a notice of it)
            about = item.engagement.about(now) if item is not None and item.engagement is not None else {}
            pending.append(Pending(speaker, new_record(speaker, said, "dialogue", now, tick, about), news))
            extra = {"topic": u.topic, "source": speaker, **about} if u.topic else {}
            if item is not None:  # an invitation says where and when; a declared importance stays
                extra.update(item.carried())
                if item.engagement is not None:
                    heard.append((listener, item.engagement))
            pending.append(Pending(listener, new_record(listener, said, "dialogue", now, tick, extra), news))
            if u.topic:
                told.append((speaker, listener, u.topic))
                if pl.kind == "public":  # said in public: an announcement
                    n = notice(state.posted_topics | posted, rt, f"{rt.names[speaker]} spread the word at "
                               f"{pl.name}: {u.topic}", speaker, place, now, tick, u.topic, about)
                    if n is not None:
                        posted.add(u.topic)
                        pending.append(n)
            trace_lines.append(line_record(speaker, listener, u.text, u.topic, d.source, list(d.memory_ids)))
            if d.source == FALLBACK:
                records.append(decision_of(speaker, LINE, d, u.text))
        if summary.source == FALLBACK:
            records.append(decision_of(a, SUMMARY, summary, summary.value))
        topics = [u.topic for _, u in lines if u.topic]
        for me in (a, b):
            pending.append(Pending(me, new_record(me, summary.value, "conversation", now, tick), tuple(topics)))
        notable.append(f"{clock} {rt.names[a]} talks with {rt.names[b]} at {pl.name}: "
                       f"{'; '.join(topics) if topics else 'small talk'}")
        # with the history strategy's context: what it still showed when the conversation ended
        out.append(conversation_record([a, b], place, trace_lines, summary.value, context))
    return Conversed(out, pending, told, posted, ops, records, notable, usage, heard)


# --------------------------------------------------------------------------- reflect
@dataclass
class Reflected:
    ops: list[MemoryOp]  # reflect, and the add of each insight
    failures: int
    notable: list[tuple[str, str]]  # (agent, line)


def view_of_memory(rt: Runtime, agent: str, now: int) -> AgentView:
    """A view of ``agent`` for decisions made from its memory alone (reflection)."""
    persona = rt.persona(agent)
    return AgentView(agent, persona, now, persona.home, (), rt.names, rt.place_names)


def reflect_stage(rt: Runtime, now: int, tick: int) -> Reflected:
    """Reflection for every agent whose trigger is due (:mod:`simulacra.cognition.reflect`): focal points,
    evidence, insights from the mind (through the rater's ``/reflect``: its model when it has one), one rating request
    and one embedding batch for all insights, one long-term write per agent. A rater failure is logged and
    counted; the agent's trigger is reset so that it does not ask again every tick."""
    cfg = rt.config.reflection
    if not cfg.enabled:
        return Reflected([], 0, [])
    made: list[tuple[str, ReflectionRequest, list[MemoryRecord], float]] = []
    failures = 0
    for pid in rt.agents:
        mem = rt.memories[pid]
        if not mem.reflection_due(cfg.threshold):
            continue
        accumulated = mem.importance_since_reflection
        focal = focal_points(mem, now, cfg.focal_points, cfg.focal_similarity, since=mem.last_reflection)
        req = ReflectionRequest(pid, focal, gather_evidence(mem, focal, now, cfg.evidence_per_focal_point))
        mem.reflected(now)
        if not req.evidence:
            continue
        try:
            insights = rt.mind.reflect(view_of_memory(rt, pid, now), req.payload(), cfg.max_insights).value
        except RaterError as err:
            failures += 1
            log.warning("reflection of %s at tick %d skipped: %s", pid, tick, err)
            continue
        made.append((pid, req, insight_records(pid, insights, req.evidence, now, tick), accumulated))
    # an agent's reflection is traced whether or not it found insights, and whatever the others found
    texts = list(dict.fromkeys(r.text for _, _, recs, _ in made for r in recs))
    ratings = dict(zip(texts, rt.rater.rate_many(texts))) if texts else {}
    vectors = dict(zip(texts, rt.embedder.embed(texts))) if texts else {}
    ops: list[MemoryOp] = []
    notable = []
    clock = format_hhmm(now)
    for pid, req, recs, accumulated in made:
        for r in recs:
            r.rating = ratings[r.text]
        ops.append(reflect_op(pid, accumulated, [{"id": f.id, "text": f.text} for f in req.focal_points],
                              [m.id for m in req.evidence],
                              [{"id": r.id, "text": r.text, "evidence_ids": r.evidence_ids, "depth": r.depth,
                                "rating": r.rating} for r in recs]))
        notable += [(pid, f"{clock} {rt.names[pid]} reflects: {r.text}") for r in recs]
        if recs:
            emb = np.stack([vectors[r.text] for r in recs])
            ops += rt.memories[pid].add_long_term(recs, emb, now)
            kill_point("reflect")
    return Reflected(ops, failures, notable)


def used_memories(ops: Sequence[MemoryOp]) -> dict[str, dict[str, list[str]]]:
    """The memories a tick used, per agent and reason, in first-use order: ``retrieved`` (the results of its
    ``retrieve`` operations, which go into the mind's view or prompt) and ``reflection evidence`` (the evidence of
    its ``reflect`` operations)."""
    used: dict[str, dict[str, dict[str, None]]] = {}
    for op in ops:
        if op["op"] == RETRIEVE:
            ids, reason = [r["id"] for r in op["results"]], "retrieved"
        elif op["op"] == REFLECT:
            ids, reason = op["evidence"], "reflection evidence"
        else:
            continue
        used.setdefault(op["agent"], {}).setdefault(reason, {}).update(dict.fromkeys(ids))
    return {a: {reason: list(ids) for reason, ids in by.items()} for a, by in used.items()}


def summarise_stage(rt: Runtime, plans: Mapping[str, Sequence[PlanItem]], now: int, tick: int) -> list[AddOp]:
    """The nightly summaries (``memory.day_summary``, :mod:`simulacra.cognition.summary`): on the tick of each game
    day that reaches ``memory.day_summary_time``, every agent writes up to two long-term memories of kind
    ``summary``: its day's ``memory.day_summary_items`` best episodes rated at least ``memory.day_summary_min_rating``
    in the 24 game hours before (when it has any; the ids of every memory they rest on as ``evidence_ids``, rated as
    the best of them), and its day plan as ``plans`` holds it (rated by the rater, in one request). Embedded in one
    batch; returns the trace operations (``add`` with ``evidence_ids``), in agent order.

    Raises:
        RaterError: the rater failed for good (the run then stops at the last complete tick).
    """
    from simulacra.clock import parse_hhmm
    from simulacra.cognition.summary import (
        day_label,
        day_window,
        episodes,
        plan_summary_text,
        summary_due,
        summary_text,
    )

    cfg = rt.config.memory
    if not cfg.day_summary or not summary_due(now, rt.world.tick_minutes, parse_hhmm(cfg.day_summary_time)):
        return []
    since, until = day_window(now)
    label = day_label(now, rt.world.weekday(now))
    made: dict[str, list[MemoryRecord]] = {}  # agent -> its day's summaries (episodes, then plan), agent order
    planned: list[MemoryRecord] = []
    for pid in rt.agents:
        mem = rt.memories[pid]
        found = episodes([r for name in ("short_term", "long_term") for r in mem.tier(name).records], rt.names,
                         since, until, cfg.day_summary_min_rating)[:cfg.day_summary_items]
        if found:
            text = summary_text(rt.names[pid], label, found)
            ids = [i for e in found for i in e.ids]
            made.setdefault(pid, []).append(MemoryRecord(
                memory_id(pid, now, text), text, "summary", max(e.rating for e in found), float(now), tick,
                extra={"evidence_ids": ",".join(ids), "depth": 1}))
        if plans.get(pid):
            text = plan_summary_text(rt.names[pid], label, plans[pid], rt.place_names)
            rec = MemoryRecord(memory_id(pid, now, text), text, "summary", None, float(now), tick,
                               extra={"depth": 1, **plan_span(plans[pid])})
            made.setdefault(pid, []).append(rec)
            planned.append(rec)
    if not made:
        return []
    for rec, rating in zip(planned, rt.rater.rate_many([r.text for r in planned]) if planned else ()):
        rec.rating = rating
    texts = list(dict.fromkeys(r.text for recs in made.values() for r in recs))
    vectors = dict(zip(texts, rt.embedder.embed(texts)))
    ops: list[AddOp] = []
    for pid, recs in made.items():
        ops += rt.memories[pid].add_long_term(recs, np.stack([vectors[r.text] for r in recs]), now)
        kill_point("summarise")
    return ops


def rehearse_stage(rt: Runtime, ops: Sequence[MemoryOp], now: int) -> list[RehearseOp]:
    """Rehearsal (``memory.rehearse``): every memory the tick's operations ``ops`` used (:func:`used_memories`) is
    marked accessed at ``now`` (:meth:`AgentMemory.mark_accessed`, which restarts a long-term memory's decay), in
    agent order, before consolidation forgets; the trace operations (``rehearse``, one per agent and reason)."""
    if not rt.config.memory.rehearse:
        return []
    used = used_memories(ops)
    out: list[RehearseOp] = []
    for pid in rt.agents:
        for reason, ids in used.get(pid, {}).items():
            marked = rt.memories[pid].mark_accessed(ids, now, reason)
            out += marked
            if marked:
                kill_point("rehearse")
    return out


def consolidate_stage(rt: Runtime, now: int) -> list[MemoryOp]:
    """Consolidation and forgetting of every agent (:meth:`AgentMemory.consolidate`); the trace operations."""
    ops: list[MemoryOp] = []
    for pid in rt.agents:
        ops += rt.memories[pid].consolidate(now)
        kill_point("consolidate")
    return ops


def persist_stage(rt: Runtime, ticks_done: int, due: bool, journal: bool) -> int:
    """Make the tick's memory changes durable: with ``journal``, append them to the run's store journal
    (:meth:`Runtime.journal_tick`, as of ``ticks_done`` ticks, the tick included; fsynced with its checkpoint); when
    ``due``, write everything queued to Chroma (:meth:`Runtime.flush` without deletes): per collection one upsert (or
    one metadata update), every agent's changes to a tier together in an embedded run; the ``persist`` kill point
    follows each collection's write. Deletes wait for the tick's checkpoint (:meth:`Simulation.step`). Returns the
    Chroma calls made.

    Raises:
        StoreUnavailable: a Chroma server did not answer within its retry window (the run stops at its last
            complete tick).
    """
    if journal:
        rt.journal_tick(ticks_done)
    return rt.flush(deletes=False, each=lambda: kill_point("persist")) if due else 0
