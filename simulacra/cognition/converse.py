"""Offline conversations: utterances built from each speaker's retrieved and most important memories.

Each speaker tells the listener the most important piece of news it holds (a witnessed event, or
something another agent said) that the listener has not heard from it, is not about the listener, and
did not come from the listener. So news passes from agent to agent, and each hop is a memory with its
own rating that consolidation may keep or forget.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NewsItem:
    """Something worth telling: ``topic`` (the news text), its rating, and where the speaker got it."""

    topic: str
    rating: int
    source: str  # "seen" or the id of the agent who told it
    memory_id: str


@dataclass(frozen=True)
class Line:
    speaker: str
    listener: str
    text: str
    topic: str | None


def news_candidates(memories, about_partner, listener_id: str, listener_name: str, told: set[str],
                    min_rating: int) -> list[NewsItem]:
    """News the speaker could tell, best first.

    Args:
        memories: ``(record, importance)`` pairs, the speaker's most important recent memories.
        about_partner: memories retrieved about the listener (:class:`RetrievedMemory`).
        told: topics the speaker already told this listener.
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
        item = NewsItem(topic, rec.rating, source, rec.id)
        if topic not in seen or item.rating > seen[topic].rating:
            seen[topic] = item
    return sorted(seen.values(), key=lambda n: (-n.rating, n.topic))


def tell(item: NewsItem, names: dict[str, str]) -> str:
    if item.source == "seen":
        return f"Did you hear? {item.topic}"
    return f"I heard from {names.get(item.source, item.source)}: {item.topic}"


def compose(a, b, news_a: list[NewsItem], news_b: list[NewsItem], knows_a: set[str], knows_b: set[str],
            names: dict[str, str], activities: dict[str, str], max_turns: int,
            acquainted: bool = False) -> list[Line]:
    """The lines of one conversation between agents ``a`` and ``b`` (``a`` speaks first).

    Args:
        a, b: personas of the two speakers.
        news_a, news_b: what each could tell (from :func:`news_candidates`).
        knows_a, knows_b: topics each already knows (to answer "I heard that too").
        activities: current activity of each agent id.
        max_turns: most lines (>= 2).
        acquainted: the two have talked before (otherwise the first speaker introduces itself unless
            its persona names the other among its relationships).
    """
    pools = {a.id: list(news_a), b.id: list(news_b)}
    knows = {a.id: knows_a, b.id: knows_b}
    persona = {a.id: a, b.id: b}
    lines: list[Line] = []
    last_topic: str | None = None
    speaker, listener = a.id, b.id
    for turn in range(max_turns):
        p, other = persona[speaker], persona[listener]
        parts = []
        if turn == 0:
            familiar = acquainted or listener in p.relationships
            parts.append(f"Hello, {other.first_name}!" if familiar else f"Hello, I'm {p.first_name}.")
        elif last_topic is not None:
            parts.append("Yes, I heard that too." if last_topic in knows[speaker] else "Really? I had not heard.")
        said = {ln.topic for ln in lines}
        pool = [n for n in pools[speaker] if n.topic not in said]
        item = pool[0] if pool and turn < max_turns - 1 else None
        if item is not None:
            parts.append(tell(item, names))
        elif turn <= 1:
            parts.append(f"I have been {activities[speaker]}.")
        else:
            parts.append(f"I should get back to it. Goodbye, {other.first_name}.")
        lines.append(Line(speaker, listener, " ".join(parts), item.topic if item else None))
        last_topic = item.topic if item else None
        if item is None and turn >= 1:
            break
        speaker, listener = listener, speaker
    return lines
