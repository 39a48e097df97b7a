"""The Mind: what an agent decides, says and answers, from its persona and the memories it retrieved.

One interface, several implementations (``simulacra.cognition.scripted.ScriptedMind``: routine and templates;
``simulacra.cognition.llm_mind.LLMMind``: any OpenAI-compatible chat model, the bundled local one included).
Every answer is a :class:`Decision`: the value, the ids of the memories that were put before the mind
(so the trace and ``simulacra inspect`` can show *why*), and where the answer came from (``scripted``,
``llm``, or ``fallback`` when a model's answer was unusable and the scripted decision was taken instead).

Times are game minutes (absolute, day 1 starts at minute 0). Structure after the Generative Agents
paper (Park et al., arXiv 2304.03442): a day plan of broad items at wake-up, decomposed into actions of
tick length a few hours at a time; reactions to what is perceived; dialogue line by line; interviews.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

from simulacra.clock import MINUTES_PER_DAY, day_start, format_hhmm
from simulacra.memory.records import RetrievedMemory, span_extra
from simulacra.memory.speech import SpeechCue
from simulacra.memory.timecue import TimeCue
from simulacra.persona import Persona
from simulacra.text import at_place
from simulacra.trace import Source as Source  # where a decision came from: "scripted", "llm" or "fallback"

T = TypeVar("T")


@dataclass(frozen=True)
class PlanItem:
    """One item of a plan: from ``start`` to ``end`` (absolute game minutes) ``activity`` at ``place`` (place id).

    ``routine_index`` names the persona's routine entry the item follows (scripted plans, and the night a model's
    day plan ends with), else ``None``.
    """

    start: int
    end: int
    activity: str
    place: str
    routine_index: int | None = None

    def covers(self, minute: float) -> bool:
        return self.start <= minute < self.end

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"start": self.start, "end": self.end, "activity": self.activity, "place": self.place}
        if self.routine_index is not None:
            d["routine_index"] = self.routine_index
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlanItem:
        return cls(int(d["start"]), int(d["end"]), str(d["activity"]), str(d["place"]), d.get("routine_index"))

    def describe(self, place_name: str) -> str:
        return f"{format_hhmm(self.start)}-{format_hhmm(self.end)} {at_place(self.activity, place_name)}"


def in_force(items: Sequence[PlanItem], minute: float) -> PlanItem | None:
    """The item of ``items`` that covers ``minute`` (game minutes); the latest made wins (a reaction's step
    overrides the plan's), ``None`` when none covers it."""
    for item in reversed(items):
        if item.covers(minute):
            return item
    return None


@dataclass(frozen=True)
class Reaction:
    """What an agent does about something it perceived: ``continue`` its plan, ``go`` to ``place`` (re-planning
    the rest of the hour around ``activity`` there), or ``talk`` to ``person`` (an agent id at the same place)."""

    kind: Literal["continue", "go", "talk"]
    place: str | None = None
    person: str | None = None
    activity: str | None = None
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in {"kind": self.kind, "place": self.place, "person": self.person,
                                   "activity": self.activity, "reason": self.reason}.items() if v}


@dataclass(frozen=True)
class Utterance:
    """One line of a conversation: its text, the news topic it tells (or ``None``), and whether the speaker
    ends the conversation with it."""

    text: str
    topic: str | None = None
    end: bool = False


@dataclass(frozen=True)
class Answer:
    """An interview answer and the ids of the memories it rests on."""

    text: str
    memory_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class Decision(Generic[T]):
    """A mind's answer: ``value``, the ids of the memories in its prompt, its ``source``, for a fallback the
    ``reason`` (logged with the model's raw answer and counted per kind), and the tokens it cost."""

    value: T
    memory_ids: tuple[str, ...] = ()
    source: Source = "scripted"
    reason: str | None = None
    tokens: tuple[int, int] = (0, 0)  # (prompt, completion) tokens the decision cost, retries included


@dataclass(frozen=True)
class Engagement:
    """A gathering someone is invited to: ``host`` (agent id) expects guests at ``place`` (place id) from ``start``
    to ``end`` (absolute game minutes); ``topic`` is the news that tells of it.

    It travels as metadata of the memories that hold the news (:meth:`to_extra`, scalar keys ``engagement_*``):
    the host's own intention, and every line that retells it, so whoever retrieves such a memory knows where and
    when to be.
    """

    topic: str
    host: str
    place: str
    start: int
    end: int

    def to_extra(self) -> dict[str, Any]:
        return {"engagement_host": self.host, "engagement_place": self.place, "engagement_start": int(self.start),
                "engagement_end": int(self.end)}

    def about(self, now: float) -> dict[str, float]:
        """The span (:func:`~simulacra.memory.records.span_extra`) of a memory of this engagement formed at game
        minute ``now``: from the earlier of ``now`` and the start to the later of ``now`` and the end. Such a
        memory is about the gathering's hours as well as the moment it was heard, so a question that names either
        ("Is there a party at the tavern this afternoon?" asked in the evening, "What did I hear this morning?")
        measures its recency from them (:func:`simulacra.memory.scoring.age_from`), as a plan's memory is about
        the plan's hours."""
        return span_extra(min(float(now), float(self.start)), max(float(now), float(self.end)))

    @classmethod
    def from_extra(cls, extra: dict[str, Any]) -> Engagement | None:
        """The engagement a memory's metadata carries (needs ``topic`` and every ``engagement_*`` key), else None."""
        try:
            return cls(str(extra["topic"]), str(extra["engagement_host"]), str(extra["engagement_place"]),
                       int(extra["engagement_start"]), int(extra["engagement_end"]))
        except (KeyError, TypeError, ValueError):
            return None

    def to_dict(self) -> dict[str, Any]:
        return {"topic": self.topic, **{k.removeprefix("engagement_"): v for k, v in self.to_extra().items()}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Engagement:
        return cls(str(d["topic"]), str(d["host"]), str(d["place"]), int(d["start"]), int(d["end"]))

    def item(self, agent: str, names: dict[str, str]) -> PlanItem:
        """The plan item of going (or, for the host, of hosting)."""
        host = names.get(self.host, self.host)
        what = "hosting the party" if agent == self.host else f"at the party {host} is giving"
        return PlanItem(self.start, self.end, what, self.place)


@dataclass(frozen=True)
class Consideration:
    """Whether an agent goes to an engagement it heard of, and why (``reason``, one line)."""

    go: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"go": self.go, "reason": self.reason}


def splice(items: Sequence[PlanItem], item: PlanItem) -> list[PlanItem]:
    """``items`` with ``item`` put in: items overlapping it are cut to the parts before and after it (an item
    covering it on both sides is split), then sorted by start. Game minutes."""
    out: list[PlanItem] = []
    for p in items:
        if p.end <= item.start or p.start >= item.end:
            out.append(p)
            continue
        if p.start < item.start:
            out.append(PlanItem(p.start, item.start, p.activity, p.place, p.routine_index))
        if p.end > item.end:
            out.append(PlanItem(item.end, p.end, p.activity, p.place, p.routine_index))
    out.append(item)
    return sorted(out, key=lambda p: (p.start, p.end))


@dataclass(frozen=True)
class NewsItem:
    """Something worth telling: ``topic`` (the news text), its rating (1..10), where the speaker got it
    (``"seen"``, ``"own"`` for the speaker's own intention, or the id of the agent who told it), the memory it
    comes from, the engagement it invites to (``None``: plain news) and the importance (1..10) it keeps when retold
    (``None``: each retelling is rated afresh; a scenario's fact declares one, :mod:`simulacra.evaluation`), and
    how many residents the speaker already told it to or heard it from (``exchanged``, >= 0; read by the scripted
    mind's gossip rule, :class:`simulacra.cognition.scripted.GossipRule`)."""

    topic: str
    rating: int
    source: str
    memory_id: str
    engagement: Engagement | None = None
    importance: int | None = None
    exchanged: int = 0

    def carried(self) -> dict[str, Any]:
        """Metadata the listener's memory of this news carries besides topic and source."""
        extra = self.engagement.to_extra() if self.engagement is not None else {}
        if self.importance is not None:
            extra["importance"] = self.importance
        return extra


@dataclass(frozen=True)
class AgentView:
    """What a mind knows of one agent when it decides.

    Attributes:
        agent: the agent's id; persona: its persona; now: game minute; place: its place id.
        memories: what retrieval returned for the decision's query, best first (the prompt's memories).
        names: agent id -> full name for everyone in the town; place_names: place id -> name.
        activity: what the agent is doing as it decides (``""``: unknown).
        weekday: the weekday of ``now`` (``""``: unknown); rest_day: whether the agent's plan day
            (:func:`simulacra.days.plan_day_at`) is a rest day of the world (its plan then follows the persona's
            ``rest_day_routine``).
        named_time: the time the decision's question names (an interview's), when it names one
            (:class:`~simulacra.memory.timecue.TimeCue`; :attr:`~simulacra.memory.timecue.TimeCue.before_run` when
            it is before the run, and ``memories`` are then the timeless ones).
        speech: who spoke to whom the decision's question names (an interview's), when it names them and
            ``memory.speech_roles`` is on (:class:`~simulacra.memory.speech.SpeechCue`; ``memories`` then hold no
            line said the other way).
    """

    agent: str
    persona: Persona
    now: int
    place: str
    memories: tuple[RetrievedMemory, ...]
    names: dict[str, str]
    place_names: dict[str, str]
    activity: str = ""
    weekday: str = ""
    rest_day: bool = False
    named_time: TimeCue | None = None
    speech: SpeechCue | None = None

    @property
    def memory_ids(self) -> tuple[str, ...]:
        return tuple(m.id for m in self.memories)


@dataclass
class ConversationView:
    """A conversation in progress, from the point of view of the next speaker.

    Attributes:
        speaker, listener: agent ids; place: place id; turn: index of the line to say (0 = the opening line).
        max_turns: the conversation ends at this many lines whatever is said.
        min_turns: lines said before a line may end the conversation (``simulation.min_conversation_lines``; 2 =
            from the reply to the opening line on).
        lines: the lines said so far, ``(speaker id, Utterance)``, oldest first.
        news: what the speaker could tell the listener, best first.
        knows: topics the speaker already knew before the conversation.
        acquainted: the two have talked before; conversations: how many times (>= 0).
        activity: what the speaker was doing when the conversation started.
        listener_activity: what the listener was doing when the conversation started (``""``: unknown); the
            scripted summary names it when the listener said it.
        history: the conversation-history strategy's prompt messages for this speaker (language-model minds).
    """

    speaker: str
    listener: str
    place: str
    turn: int
    max_turns: int
    lines: list[tuple[str, Utterance]]
    news: list[NewsItem]
    knows: set[str]
    acquainted: bool
    activity: str
    history: Any = None
    extra: dict[str, Any] = field(default_factory=dict)
    min_turns: int = 2
    conversations: int = 0
    listener_activity: str = ""


@runtime_checkable
class Mind(Protocol):
    """An agent's cognition. Implementations must be deterministic for a fixed seed where their backend is.

    Every method returns a :class:`Decision`; a language-model mind never raises on a bad answer (it falls back
    to the scripted decision and says so), only on a spent budget (:class:`~simulacra.llm.BudgetExceeded`).
    """

    name: str

    def plan_day(self, view: AgentView, day_start: int, day_end: int) -> Decision[list[PlanItem]]:
        """Broad items for the day from ``day_start`` to ``day_end`` (game minutes), in time order, covering it."""
        ...

    def next_actions(self, view: AgentView, plan: Sequence[PlanItem], start: int,
                     end: int) -> Decision[list[PlanItem]]:
        """The plan between ``start`` and ``end`` decomposed into actions of at least one tick each, covering it."""
        ...

    def react(self, view: AgentView, percept: str, about: Sequence[RetrievedMemory],
              present: Sequence[str]) -> Decision[Reaction]:
        """What to do about ``percept`` (memories retrieved ``about`` it; ``present``: agent ids at the place)."""
        ...

    def next_line(self, view: AgentView, conversation: ConversationView) -> Decision[Utterance]:
        """The speaker's next line, and whether it ends the conversation."""
        ...

    def summarise_conversation(self, view: AgentView, conversation: ConversationView) -> Decision[str]:
        """A one-paragraph memory of a finished conversation, for the agent in ``view``."""
        ...

    def consider(self, view: AgentView, engagement: Engagement,
                 commitments: Sequence[PlanItem]) -> Decision[Consideration]:
        """Whether to go to ``engagement`` (heard of since the last tick), from the memories retrieved about the
        time it takes place (``view.memories``: it is known only if a memory holding it comes back) and the
        ``commitments`` of the agent's plan in that window (work, another engagement)."""
        ...

    def interview(self, view: AgentView, question: str) -> Decision[Answer]:
        """Answer ``question`` from the memories in ``view`` (retrieved for it)."""
        ...

    def reflect(self, view: AgentView, evidence: Sequence[dict], max_insights: int) -> Decision[list[dict]]:
        """Insights about ``evidence`` (``{"id", "text", "rating"}`` each, the memories retrieved for the focal
        points), each ``{"text", "evidence": [ids]}``.

        Raises:
            RaterError: the reflector (the rater's ``/reflect``) failed; the tick logs and counts it.
        """
        ...


class Reflector(Protocol):
    """Where insights come from: the rater's ``POST /reflect`` (:meth:`simulacra.rater.RaterClient.reflect`), which
    answers with its language model when it has one that measured well, else with the offline reflector. Both
    minds reflect through it, so the reflection prompt and its checks exist once."""

    def __call__(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[dict]: ...


def reflect_with(reflector: Reflector | None, view: AgentView, evidence: Sequence[dict], max_insights: int,
                 source: Source) -> Decision[list[dict]]:
    """A mind's reflection through ``reflector`` (see :class:`Reflector`).

    Raises:
        RaterError: no reflector was given, or it failed.
    """
    if reflector is None:
        from simulacra.errors import RaterError

        raise RaterError("this mind has no reflector (the run's rater)")
    insights = reflector(list(evidence), agent=view.persona.name, max_insights=max_insights)
    return Decision(insights, tuple(m["id"] for m in evidence), source)


def plan_memory_text(persona: Persona, items: Sequence[PlanItem], place_names: dict[str, str], day: int) -> str:
    """The text of the ``plan`` memory that stores a day plan (one memory per day and agent)."""
    parts = "; ".join(i.describe(place_names.get(i.place, i.place)) for i in items)
    return f"{persona.name}'s plan for day {day}: {parts}."


def step_memory_text(persona: Persona, item: PlanItem, place_names: dict[str, str]) -> str:
    """The text of the ``plan`` memory stored when an action of the plan begins."""
    place = place_names.get(item.place, item.place)
    return (f"{persona.name} plans to be {item.activity} at {place} from {format_hhmm(item.start)} "
            f"to {format_hhmm(item.end)}.")


def plan_span(items: Sequence[PlanItem]) -> dict[str, float]:
    """The ``extra`` metadata of a ``plan`` or plan ``summary`` memory of ``items`` (at least one): it is about the
    game minutes from the first item's start to the last item's end (:attr:`MemoryRecord.span
    <simulacra.memory.records.MemoryRecord.span>`), so that a question naming an hour of the plan finds it. A plan
    of several items (a day's plan, the night's plan summary) is about its day: its span ends at the midnight after
    its first item's start at the latest. Its last item, the night, runs into the next morning ("21:00-07:00 reading
    by the fire and going to bed"), and "What happened this morning?" asked the next day is not about yesterday's
    plan; the night's own step memory ("... plans to be going to sleep from 22:00 to 07:00") keeps the whole night.

    Raises:
        ValueError: no items.
    """
    if not items:
        raise ValueError("a plan memory needs at least one plan item")
    start, end = min(i.start for i in items), max(i.end for i in items)
    if len(items) > 1:
        end = max(start, min(end, day_start(start) + MINUTES_PER_DAY))
    return span_extra(start, end)


def converse_line_by_line(say, views: dict[str, AgentView], convs: dict[str, ConversationView], opener: str,
                          other: str, history=None) -> tuple[list[tuple[str, Utterance]], list[Decision]]:
    """Hold a conversation one line at a time: ``say(view, conversation) -> Decision[Utterance]`` for the speaker,
    ``opener`` first, turns alternating, until a line ends it once ``min_turns`` lines were said (a line that ends
    it earlier is said and the conversation goes on; at least 2, at most ``max_turns``) or ``max_turns`` lines were
    said. Each line is added to ``history`` (a conversation-history object, or ``None``); every view of ``convs``
    ends holding all lines. Returns the lines ``(speaker id, Utterance)`` and the decisions behind them."""
    lines: list[tuple[str, Utterance]] = []
    decisions: list[Decision] = []
    speaker, listener = opener, other
    least = min(max(2, convs[opener].min_turns), convs[opener].max_turns)
    for turn in range(convs[opener].max_turns):
        c = convs[speaker]
        c.turn, c.lines, c.history = turn, list(lines), history
        d = say(views[speaker], c)
        lines.append((speaker, d.value))
        decisions.append(d)
        if history is not None:
            history.add_line(views[speaker].names[speaker], views[speaker].names[listener], d.value.text)
        if d.value.end and turn + 1 >= least:
            break
        speaker, listener = listener, speaker
    for c in convs.values():
        c.lines = list(lines)
    return lines, decisions
