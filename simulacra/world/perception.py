"""What an agent perceives in its place during a tick, limited by an attention bandwidth."""

from __future__ import annotations

from dataclasses import dataclass

from simulacra.text import at_place, be_for


@dataclass(frozen=True)
class Percept:
    """One thing perceived. ``salience`` orders what fits in the attention bandwidth (lower first)."""

    text: str
    kind: str  # "event" | "observation"
    salience: int
    topic: str | None = None
    subject: str | None = None  # the agent id an observation is about


def perceive(
    agent_id: str,
    place: str,
    world,
    positions: dict[str, str],
    activities: dict[str, str],
    object_states: dict[str, str],
    active_events: list,
    conversations: list[tuple[str, str]],
    names: dict[str, str],
    related: set[str],
    bandwidth: int,
) -> list[Percept]:
    """Percepts of ``agent_id`` at ``place`` after the world applied this tick's actions.

    Order of attention: world events in the place, then the other agents (acquaintances first, then by
    name), then conversations of others, then objects ("The market stalls at Fernhollow Square are folded away.":
    the verb agrees with the object's name, :func:`simulacra.text.be_for`); the first ``bandwidth`` are kept.
    """
    place_name = world.places[place].name
    out: list[Percept] = []
    for ev in active_events:
        if ev.place == place:
            out.append(Percept(ev.text, "event", 0, topic=ev.text))
    others = sorted((a for a, p in positions.items() if p == place and a != agent_id),
                    key=lambda a: (a not in related, names[a]))
    for other in others:
        seen = f"{names[other]} is {at_place(activities[other], place_name)}."
        out.append(Percept(seen, "observation", 1, subject=other))
    for a, b in conversations:
        if positions.get(a) == place and agent_id not in (a, b):
            out.append(Percept(f"{names[a]} and {names[b]} are talking at {place_name}.", "observation", 2))
    for obj in world.objects:
        if obj.place == place:
            state = object_states[obj.id]
            out.append(Percept(f"The {obj.name} at {place_name} {be_for(obj.name)} {state}.", "observation", 3))
    out.sort(key=lambda p: p.salience)
    return out[:bandwidth]
