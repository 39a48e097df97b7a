"""Offline planning: follow the persona's routine; walk there along the shortest path."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Action:
    """What an agent does during one tick.

    Attributes:
        type: ``"act"`` (do the routine activity where it is), ``"move"`` (walk ``path`` this tick) or
            ``"talk"`` (stop to talk with ``partner``).
        activity: human-readable activity ("baking bread", "walking to the square").
        place: where the agent is at the end of the tick.
        routine_index: index of the routine entry in force.
        path: places passed through this tick, from the start place to ``place`` (moves only).
        partner: conversation partner (talks only).
    """

    type: str
    activity: str
    place: str
    routine_index: int
    path: tuple[str, ...] = ()
    partner: str | None = None

    def to_dict(self) -> dict:
        d = {"type": self.type, "activity": self.activity, "place": self.place, "routine_index": self.routine_index}
        if self.path:
            d["path"] = list(self.path)
        if self.partner:
            d["partner"] = self.partner
        return d


def decide(persona, place: str, minute_of_day: int, world) -> Action:
    """The routine action of one agent for this tick (conversations are decided afterwards).

    The routine entry in force at ``minute_of_day`` names a place; an agent elsewhere walks up to
    ``world.edges_per_tick`` path edges towards it along the shortest route.
    """
    index, entry = persona.routine_at(minute_of_day)
    if place == entry.place:
        return Action("act", entry.activity, place, index)
    route = world.route(place, entry.place)
    hops = tuple(route[: world.edges_per_tick + 1])
    dest = world.places[entry.place].name
    return Action("move", f"walking to {dest}", hops[-1], index, path=hops)


def is_free(action: Action) -> bool:
    """Free to talk: staying in place and not asleep."""
    return action.type == "act" and "sleep" not in action.activity.lower()
