"""The scripted mind: the persona's routine as the plan, templates for speech; deterministic, no model.

It is the fast offline default and the fallback of every language-model decision. It still decides from
what it retrieved: what it may tell in a conversation is the news among the memories it retrieved about the
listener and its most important recent memories (:func:`news_candidates`); whether it tells an item is its gossip
rule (:class:`GossipRule`: everything, or each item with a chance); an interview answer is made of the memories
retrieved for the question.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from simulacra.clock import MINUTES_PER_DAY
from simulacra.cognition.mind import (
    AgentView,
    Answer,
    Consideration,
    ConversationView,
    Decision,
    Engagement,
    NewsItem,
    PlanItem,
    Reaction,
    Reflector,
    Utterance,
    reflect_with,
)
from simulacra.config import SimulationConfig
from simulacra.memory.perspective import resident_view
from simulacra.memory.records import RetrievedMemory
from simulacra.memory.speech import said_the_asked_way
from simulacra.memory.timecue import TimeCue, describe_span
from simulacra.persona import Persona
from simulacra.state import keyed_uniform as keyed_uniform  # the one keyed draw (also the town's)
from simulacra.text import NOT_A_NOUN, POSSESSIVE, first_person, name_reference


def routine_plan(persona: Persona, day_start: int, day_end: int | None = None,
                 rest_day: bool = False) -> list[PlanItem]:
    """The routine of the day (:meth:`Persona.routine_for` ``rest_day``) as plan items from ``day_start`` (the wake
    minute, :func:`simulacra.days.plan_day_at`) to ``day_end`` (the next wake-up; default 24 hours after
    ``day_start``), each item lasting until the next routine entry starts; ``routine_index`` indexes that routine."""
    entries = persona.routine_for(rest_day)
    base = day_start - entries[0].start_minute
    if day_end is None:
        day_end = day_start + MINUTES_PER_DAY
    items = []
    for i, entry in enumerate(entries):
        start = base + entry.start_minute
        end = base + entries[i + 1].start_minute if i + 1 < len(entries) else day_end
        items.append(PlanItem(start, end, entry.activity, entry.place, routine_index=i))
    return items


def news_candidates(memories, about_partner: Sequence[RetrievedMemory], listener_id: str, listener_name: str,
                    told: set[str], min_rating: int, exchanged: Mapping[str, int] | None = None) -> list[NewsItem]:
    """News the speaker could tell, best first (ties: topic text).

    Args:
        memories: ``(record, importance)`` pairs, the speaker's most important recent memories.
        about_partner: memories retrieved about the listener.
        told: topics the speaker already told this listener or heard from them.
        min_rating: memories rated under this (1..10) are not worth telling.
        exchanged: topic -> residents the speaker already told it to or heard it from (``NewsItem.exchanged``,
            read by :class:`GossipRule`); missing: 0.
    News about the listener, or that came from the listener, is left out.
    """
    seen: dict[str, NewsItem] = {}
    records = [m.record for m in about_partner if m.record is not None] + [r for r, _ in memories]
    for rec in records:
        topic = rec.extra.get("topic")
        if not topic or rec.rating is None or rec.rating < min_rating or topic in told:
            continue
        source = rec.extra.get("source", "seen")
        if source == listener_id or listener_name in topic or listener_name.split()[0] in topic:
            continue
        imp = rec.extra.get("importance")
        item = NewsItem(topic, rec.rating, source, rec.id, Engagement.from_extra(rec.extra),
                        None if imp is None else int(imp), (exchanged or {}).get(topic, 0))
        if topic not in seen or item.rating > seen[topic].rating:
            seen[topic] = item
    return sorted(seen.values(), key=lambda n: (-n.rating, n.topic))


_SIM = SimulationConfig.model_fields


@dataclass(frozen=True)
class GossipRule:
    """Whether the scripted mind tells a news item to a listener (``simulation.gossip`` and ``gossip_*``).

    ``graded`` (the default): the item is told with the chance :meth:`chance`

    ``p = base * (rating / 10) ** importance_exponent * (stranger + (1 - stranger) * closeness)
    * retell_decay ** exchanged``

    with ``closeness`` 1 for a listener among the speaker's persona relationships, else ``k / (k +
    closeness_conversations)`` after ``k`` past conversations of the pair, and ``exchanged`` the residents the
    speaker already told the item to or heard it from (its staleness to the speaker; the run state's ``told``, which a
    checkpoint keeps). The form is ours, not the Generative Agents paper's: that paper only reports that news reached
    about half the town in two days, its agents talking of other things too (arXiv 2304.03442, section 7.1); this
    rule makes the scripted mind's word of mouth slow with repetition instead of saturating. The draw is
    :func:`keyed_uniform` of (seed, speaker, listener, topic, game minute): the same in every process and after a
    resume; in one conversation an item declined stays declined. ``tell-all`` (every run recorded before the
    setting, :data:`simulacra.config.PREDATED`; ``--preset tell-all``): every item is told, the best first, to
    everyone met.
    """

    # the defaults are the config's (simulation.gossip, simulation.gossip_*): written once, in simulacra.config
    rule: Literal["tell-all", "graded"] = _SIM["gossip"].default
    seed: int = _SIM["seed"].default
    base: float = _SIM["gossip_base"].default
    importance_exponent: float = _SIM["gossip_importance_exponent"].default
    retell_decay: float = _SIM["gossip_retell_decay"].default
    stranger: float = _SIM["gossip_stranger"].default
    closeness_conversations: float = _SIM["gossip_closeness_conversations"].default

    @classmethod
    def from_config(cls, sim: Any) -> GossipRule:
        """The rule of a :class:`~simulacra.config.SimulationConfig` (its ``seed``, ``gossip`` and ``gossip_*``)."""
        return cls(sim.gossip, sim.seed, sim.gossip_base, sim.gossip_importance_exponent, sim.gossip_retell_decay,
                   sim.gossip_stranger, sim.gossip_closeness_conversations)

    def chance(self, rating: float, exchanged: int, related: bool, conversations: int) -> float:
        """The chance (0..1) to tell news rated ``rating`` (1..10) that the speaker already exchanged with
        ``exchanged`` residents (>= 0) to a listener it names among its relationships (``related``) or has talked
        with ``conversations`` times before (>= 0). 1 under ``tell-all``."""
        if self.rule == "tell-all":
            return 1.0
        closeness = 1.0 if related else conversations / (conversations + self.closeness_conversations)
        p = (self.base * (max(0.0, min(rating, 10)) / 10) ** self.importance_exponent
             * (self.stranger + (1 - self.stranger) * closeness) * self.retell_decay ** max(0, exchanged))
        return min(1.0, max(0.0, p))

    def tells(self, item: NewsItem, speaker: str, listener: str, now: int, related: bool, conversations: int) -> bool:
        """Whether ``speaker`` tells ``item`` to ``listener`` at game minute ``now`` (see the class docstring)."""
        if self.rule == "tell-all":
            return True
        p = self.chance(item.rating, item.exchanged, related, conversations)
        return keyed_uniform(self.seed, "gossip", speaker, listener, item.topic, now) < p


#: a possessive and a noun before a name in apposition ("my sister Agnes"): addressed, the three are "you"; not a
#: preposition or a conjunction after "her" ("taking her to Agnes", "with her and Agnes": her is someone else)
_APPOSITION = (r"(?:\b(?:my|your|his|her|their|our) (?!(?:" + "|".join(sorted(NOT_A_NOUN)) + r")\b)[a-z]+ )?")


def addressed(text: str, listener: str) -> str:
    """``text`` as said to the resident named ``listener``: its full name, else its first name, as a whole word
    becomes "you" ("your" for a possessive): "having breakfast with Leila", said to Leila Haddad, is "having
    breakfast with you"; with a possessive and a noun before it in apposition, those go too ("visiting my sister
    Agnes", said to Agnes, is "visiting you")."""
    pattern = _APPOSITION + name_reference(listener)  # the full name, else the first name (one rule)
    text = re.sub(pattern + POSSESSIVE, "your", text)
    return re.sub(pattern, "you", text)


def shared(text: str) -> str | None:
    """An addressed activity (:func:`addressed`) done with the listener, as "We have been <it>" completes it:
    "having breakfast with you" is "having breakfast together", "eating lunch with you at the smokehouse" is
    "eating lunch together at the smokehouse", "walking on the beach with you and Kuba" (or "with Kuba and you")
    is "walking on the beach with Kuba". ``None`` when the activity is not done with the listener."""
    if re.search(r"\bwith you and ", text):
        return re.sub(r"\bwith you and ", "with ", text, count=1)
    if re.search(r"\bwith\b(?:(?!\bwith\b).)*? and you\b", text):
        return re.sub(r" and you\b", "", text, count=1)
    if re.search(r"\bwith you\b", text):
        return re.sub(r"\bwith you\b", "together", text, count=1)
    return None


def activity_line(activity: str, persona: Persona, listener: str) -> str:
    """What ``persona`` says it has been doing (its third-person ``activity``) to the resident named
    ``listener``: "I have been <activity>." in the first person (the persona's own pronouns, inferred from its
    background, become "my", "me", "myself": :func:`simulacra.text.first_person`), the listener as "you"
    (:func:`addressed`); an activity done with the listener is "We have been <activity> together." (:func:`shared`).
    """
    said = addressed(first_person(activity, persona.pronouns), listener)
    together = shared(said)
    return f"We have been {together}." if together is not None else f"I have been {said}."


#: a line saying what its speaker had been doing (:func:`activity_line`)
_ACTIVITY_LINE = re.compile(r"\b(?:I|We) have been\b")


def names_resident(text: str, name: str) -> bool:
    """Whether ``text`` names the resident called ``name`` (:func:`simulacra.text.name_reference`: its full name, or
    its first name as a whole word not followed by another capitalised word)."""
    return re.search(name_reference(name), text) is not None


def _sentence(text: str) -> str:
    """``text`` ending as a sentence: a full stop added unless it ends in one, "!" or "?"."""
    return text if text.endswith((".", "!", "?")) else text + "."


def tell(item: NewsItem, view: AgentView) -> str:
    """The sentence with which the resident of ``view`` passes ``item`` on, naming who it came from ("Did you
    hear? ..." for what it saw, "I heard from <name>: ..." for what it was told, "Let me tell you: ..." for its own
    intention). News it saw or heard that names the teller is told in its first person
    (:func:`simulacra.memory.perspective.resident_view`): the blacksmith says "... burns my forearm; I plunge my arm
    ...", not "the blacksmith's forearm" as if it had happened to someone else. Its own intention (an invitation it
    hosts) is said as written."""
    if item.source == "own":
        return f"Let me tell you: {item.topic}"
    persona = view.persona
    topic = resident_view(item.topic, persona, view.place_names.get(persona.home)) or item.topic
    if item.source == "seen":
        return f"Did you hear? {topic}"
    return f"I heard from {view.names.get(item.source, item.source)}: {topic}"


class ScriptedMind:
    """Routine plans, no reactions, template dialogue carrying retrieved news (the offline default).

    Args:
        reflector: where insights come from (the run's rater, :class:`~simulacra.cognition.mind.Reflector`).
        gossip: which news it tells whom (default: the config's default, ``graded``).
    """

    name = "scripted"

    def __init__(self, reflector: Reflector | None = None, gossip: GossipRule | None = None):
        self.reflector = reflector
        self.gossip = gossip or GossipRule()

    def reflect(self, view: AgentView, evidence: Sequence[dict], max_insights: int) -> Decision[list[dict]]:
        return reflect_with(self.reflector, view, evidence, max_insights, "scripted")

    def plan_day(self, view: AgentView, day_start: int, day_end: int) -> Decision[list[PlanItem]]:
        return Decision(routine_plan(view.persona, day_start, day_end, view.rest_day), view.memory_ids)

    def next_actions(self, view: AgentView, plan: Sequence[PlanItem], start: int,
                     end: int) -> Decision[list[PlanItem]]:
        return Decision([p for p in plan if p.end > start and p.start < end], ())

    def react(self, view: AgentView, percept: str, about: Sequence[RetrievedMemory],
              present: Sequence[str]) -> Decision[Reaction]:
        return Decision(Reaction("continue"), tuple(m.id for m in about))

    def next_line(self, view: AgentView, c: ConversationView) -> Decision[Utterance]:
        """Greeting first; then react to the last news told ("I heard that too" / "Really?") and tell the
        best news not yet said in this conversation that the gossip rule lets it tell (:class:`GossipRule`); with
        nothing left to tell, say what one was doing (early; :func:`activity_line`) or take leave. Ends when there
        was nothing to tell after the opening.

        The greeting follows what the speaker knows of the listener: "Hello, <first name>!" when the two have
        talked before, when the listener is among the speaker's relationships, or when any memory the speaker
        retrieved about the listener (``view.memories``) names it (its full name or first name as a whole word:
        in a small town residents know each other by sight and by hearsay); else the speaker introduces itself,
        "Hello, I'm <first name>."."""
        me, other = view.persona, view.names[c.listener]
        other_first = other.split()[0]
        parts = []
        last_topic = c.lines[-1][1].topic if c.lines else None
        if c.turn == 0:
            familiar = (c.acquainted or c.listener in me.relationships
                        or any(names_resident(m.text, other) for m in view.memories))
            parts.append(f"Hello, {other_first}!" if familiar else f"Hello, I'm {me.first_name}.")
        elif last_topic is not None:
            parts.append("Yes, I heard that too." if last_topic in c.knows else "Really? I had not heard.")
        said = {u.topic for _, u in c.lines}
        related = c.listener in me.relationships
        pool = [n for n in c.news if n.topic not in said
                and self.gossip.tells(n, view.agent, c.listener, view.now, related, c.conversations)]
        item = pool[0] if pool and c.turn < c.max_turns - 1 else None
        if item is not None:
            parts.append(tell(item, view))
        elif c.turn <= 1:
            parts.append(activity_line(c.activity, me, other))
        else:
            parts.append(f"I should get back to it. Goodbye, {other_first}.")
        end = item is None and c.turn >= 1
        used = (item.memory_id,) if item is not None else ()
        return Decision(Utterance(" ".join(parts), item.topic if item else None, end), used + view.memory_ids)

    def consider(self, view: AgentView, engagement: Engagement,
                 commitments: Sequence[PlanItem]) -> Decision[Consideration]:
        """Go when a memory holding the engagement was retrieved and nothing in the plan stands in the way (the
        host always goes to its own); else say what prevents it: the engagement not recalled, or the first
        commitment in its window."""
        used = tuple(m.id for m in view.memories)
        recalled = [m for m in view.memories if m.record is not None
                    and Engagement.from_extra(m.record.extra) == engagement]
        if not recalled:
            return Decision(Consideration(False, "did not recall it"), used)
        if engagement.host == view.agent:
            return Decision(Consideration(True, "hosting it"), used)
        if commitments:
            c = commitments[0]
            place = view.place_names.get(c.place, c.place)
            return Decision(Consideration(False, f"plan conflict: {c.describe(place)}"), used)
        return Decision(Consideration(True, "free at that time"), used)

    def summarise_conversation(self, view: AgentView, c: ConversationView) -> Decision[str]:
        """Who talked with whom where, and who told whom what, in the third person (both participants remember
        the same summary): "A talked with B at <place>. B told A: <topic>; <topic>. A told B: <topic>." (each
        speaker's topics in the order told, the speakers in the order they first told one). With no news told,
        what each said it had been doing (a line of :func:`activity_line`, at the first two turns), in its own
        words: "A talked with B at <place>. A had been <activity>; B had been <activity>."; nothing more when
        neither said it."""
        names = {**view.names, view.agent: view.persona.name}
        a, b = c.speaker, c.listener
        place = view.place_names.get(c.place, c.place)
        sentences = [f"{names[a]} talked with {names[b]} at {place}."]
        told: dict[str, list[str]] = {}
        for speaker, u in c.lines:
            if u.topic and all(u.topic not in topics for topics in told.values()):
                told.setdefault(speaker, []).append(u.topic)
        for speaker, topics in told.items():
            listener = b if speaker == a else a
            what = "; ".join(t.rstrip() if i == len(topics) - 1 else t.rstrip().removesuffix(".")
                             for i, t in enumerate(topics))
            sentences.append(f"{names[speaker]} told {names[listener]}: {_sentence(what)}")
        if not told:
            activities = {a: c.activity, b: c.listener_activity}
            doing = [f"{names[speaker]} had been {activities[speaker]}" for speaker in dict.fromkeys(
                speaker for turn, (speaker, u) in enumerate(c.lines)
                if turn <= 1 and u.topic is None and _ACTIVITY_LINE.search(u.text) and activities.get(speaker))]
            if doing:
                sentences.append("; ".join(doing) + ".")
        return Decision(" ".join(sentences), ())

    def interview(self, view: AgentView, question: str) -> Decision[Answer]:
        """The memories retrieved for the question, best first, told in the first person; an honest "I do not
        remember" when retrieval found nothing. A question about a time before the run (``view.named_time``,
        :attr:`~simulacra.memory.timecue.TimeCue.before_run`) is first answered with :func:`before_run_words`. A
        question that names who spoke to whom (``view.speech``, "What did Kofi tell you?") is answered first with
        the lines said that way (:func:`simulacra.memory.speech.said_the_asked_way`), best first, then the rest."""
        before = (f"{before_run_words(view.named_time)} " if view.named_time is not None and view.named_time.before_run
                  else "")
        if not view.memories:
            return Decision(Answer(before + "I do not remember anything about that."), ())
        used = sorted(view.memories, key=lambda m: not said_the_asked_way(view.speech, m.text))[:3]  # stable
        text = "What I remember: " + " ".join(m.text if m.text.endswith(".") else m.text + "." for m in used)
        return Decision(Answer(before + text, tuple(m.id for m in used)), tuple(m.id for m in view.memories))


def before_run_words(cue: TimeCue) -> str:
    """What an agent says of a time before the run (:attr:`TimeCue.before_run
    <simulacra.memory.timecue.TimeCue.before_run>`): ``'I have no memories from day 0 00:00 to day 0 23:59
    ("yesterday"): that is before the run began, at day 1 07:00.'``"""
    from simulacra.clock import format_game_time

    began = "" if cue.run_start is None else f", at {format_game_time(cue.run_start)}"
    return f'I have no memories from {describe_span(cue)} ("{cue.words}"): that is before the run began{began}.'
