"""The nightly summaries: what mattered in an agent's day, and what it had planned, kept as long-term memories.

Short-term memory is consolidated within game hours and long-term memory decays (seed 003), so without help a
resident forgets on Saturday the storm of Tuesday. Once a game day, at ``memory.day_summary_time``, each agent
writes one memory of kind ``summary`` that lists the day's most important episodes (what it saw, what it was
told and by whom, whom it talked with about what), with the ids of the memories they rest on (``evidence_ids``,
as a reflection's). It is kept ``memory.summary_keep_days`` game days whatever its decayed importance
(:meth:`simulacra.memory.stream.AgentMemory.forget_decayed`), so what mattered survives the forgetting of its
sources while memory stays bounded. A second summary keeps what the agent had planned for the day
(:func:`plan_summary_text`; a day's ``plan`` memory is rated mundane and forgotten within hours), which is what
"what did you mean to do on Tuesday?" and the next days' planning ask for: at most two summaries per agent and
day. The summary is extractive: each episode keeps its own words (the news topic rather than the greeting around
it), so retrieval by relevance finds the day when asked about any of its episodes (after the Generative Agents
paper's reflections and the daily summaries of long-horizon memory systems such as MemoryBank; the rule here is
simulacra's own).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from simulacra.clock import MINUTES_PER_DAY, day_number, format_hhmm
from simulacra.cognition.mind import PlanItem
from simulacra.memory.records import MemoryRecord
from simulacra.text import text_key

#: kinds of experienced memory a summary draws on (plans, reflections, notices and summaries are not episodes)
EPISODE_KINDS = ("event", "observation", "dialogue", "conversation", "intention")


@dataclass(frozen=True)
class Episode:
    """One line of a day summary: the memories (``ids``) that hold it, its best rating (1..10) and the game minute
    it first happened."""

    text: str
    rating: int
    first: float
    ids: tuple[str, ...]


def episodes(records: Iterable[MemoryRecord], names: Mapping[str, str], since: float, until: float,
             min_rating: int) -> list[Episode]:
    """The day's episodes: the memories formed in ``[since, until)`` (game minutes) of the kinds in
    :data:`EPISODE_KINDS`, rated at least ``min_rating``, grouped by what they are about (a news ``topic`` told
    several times is one episode; otherwise the text), best rated first (then earliest, then text).

    An episode's text is that of its first memory (a memory tagged with the topic first among equal times), except
    for news heard, which reads ``"heard from <speaker>: <topic>"`` (the topic's words without the greeting around
    them) and a witnessed news topic, ``"saw: <topic>"``. A memory tagged with no topic whose text holds one of the
    day's topics (the teller's own line, the summary of a conversation about it) joins that topic's episode.
    """
    day = [r for r in records if r.kind in EPISODE_KINDS and r.rating is not None and r.rating >= min_rating
           and r.timestamp is not None and since <= r.timestamp < until]
    # a memory that tells a topic without being tagged with it (the teller's own line, a conversation's summary)
    # belongs to that topic's episode: the longest topic its text holds
    topics = sorted({str(r.extra["topic"]) for r in day if r.extra.get("topic")}, key=lambda t: (-len(t), t))
    groups: dict[str, list[MemoryRecord]] = {}
    for r in day:
        topic = r.extra.get("topic") or next((t for t in topics if t in r.text), None)
        key = text_key(str(topic or r.text))
        groups.setdefault(key, []).append(r)
    out = []
    for group in groups.values():
        group.sort(key=lambda r: (r.timestamp, not r.extra.get("topic"), r.id))
        head = group[0]
        topic = head.extra.get("topic")
        source = head.extra.get("source")
        if topic and source == "seen":
            text = f"saw: {topic}"
        elif topic and source in names:
            text = f"heard from {names[source]}: {topic}"
        else:
            text = head.text
        out.append(Episode(text, max(int(r.rating) for r in group), float(head.timestamp),
                           tuple(r.id for r in group)))
    out.sort(key=lambda e: (-e.rating, e.first, e.text))
    return out


def summary_text(name: str, day_label: str, chosen: Iterable[Episode]) -> str:
    """``"<name>'s day <label>: HH:MM <episode>; HH:MM <episode>; ..."``, the episodes in time order."""
    items = sorted(chosen, key=lambda e: (e.first, e.text))
    return f"{name}'s day {day_label}: " + "; ".join(f"{format_hhmm(int(e.first))} {e.text}" for e in items)


def plan_summary_text(name: str, day_label: str, plan: Sequence[PlanItem], place_names: Mapping[str, str]) -> str:
    """``"<name>'s plan for day <label>: <activity> at <place> (HH:MM-HH:MM), ..."``: what the agent meant to do
    that day, as its day plan held it at night (engagements taken on during the day included), in plan order.
    Worded as the day's ``plan`` memory is (:func:`simulacra.cognition.mind.plan_memory_text`), so that a question
    about that day's plan finds it."""
    items = ", ".join(f"{i.activity} at {place_names.get(i.place, i.place)} ({format_hhmm(i.start)}-"
                      f"{format_hhmm(i.end)})" for i in plan)
    return f"{name}'s plan for day {day_label}: {items}."


def day_window(now: float) -> tuple[float, float]:
    """The game minutes a summary made at ``now`` covers: the 24 game hours before it, ``(now - 1440, now)``."""
    return now - MINUTES_PER_DAY, now


def summary_due(now: int, tick_minutes: int, at_minute_of_day: int) -> bool:
    """Whether the tick starting at game minute ``now`` (``tick_minutes`` long) is the one of its day that reaches
    ``at_minute_of_day`` (minutes after midnight): the first tick whose span ``[now, now + tick_minutes)`` holds
    that minute. Derived from the clock alone, so a resumed run summarises on the same ticks."""
    start = now % MINUTES_PER_DAY
    return start <= at_minute_of_day < start + tick_minutes or (
        start + tick_minutes > MINUTES_PER_DAY and at_minute_of_day < start + tick_minutes - MINUTES_PER_DAY)


def day_label(now: int, weekday: str | None = None) -> str:
    """``"3 (Wednesday)"``: the game day of ``now`` (1 = the first) and its weekday when given."""
    day = day_number(now)
    return f"{day} ({weekday})" if weekday else str(day)
