"""From a plan to this tick's action: do the action in force where it is, or walk there along the shortest path."""

from __future__ import annotations

from dataclasses import dataclass

from simulacra.cognition.mind import PlanItem
from simulacra.trace import ActionRecord


@dataclass(frozen=True)
class Action:
    """What an agent does during one tick.

    Attributes:
        type: ``"act"`` (do the planned activity where it is), ``"move"`` (walk ``path`` this tick) or
            ``"talk"`` (stop to talk with ``partner``).
        activity: human-readable activity ("baking bread", "walking to the square").
        place: where the agent is at the end of the tick.
        routine_index: index of the persona's routine entry the action follows, ``None`` for a plan item
            that follows no routine entry (language-model plans, reactions).
        path: places passed through this tick, from the start place to ``place`` (moves only).
        partner: conversation partner (talks only).
    """

    type: str
    activity: str
    place: str
    routine_index: int | None = None
    path: tuple[str, ...] = ()
    partner: str | None = None

    def to_dict(self) -> ActionRecord:
        """The trace's and the checkpoint's form (:class:`~simulacra.trace.ActionRecord`)."""
        d: ActionRecord = {"type": self.type, "activity": self.activity, "place": self.place}
        if self.routine_index is not None:
            d["routine_index"] = self.routine_index
        if self.path:
            d["path"] = list(self.path)
        if self.partner:
            d["partner"] = self.partner
        return d


def action_for(step: PlanItem, place: str, world) -> Action:
    """The action of one tick for the plan item ``step`` in force: act at its place, or walk up to
    ``world.edges_per_tick`` path edges towards it along the shortest route (:meth:`World.route`)."""
    if place == step.place:
        return Action("act", step.activity, place, step.routine_index)
    route = world.route(place, step.place)
    hops = tuple(route[: world.edges_per_tick + 1])
    dest = world.places[step.place].name
    return Action("move", f"walking to {dest}", hops[-1], step.routine_index, path=hops)


def is_free(action: Action) -> bool:
    """Free to talk: staying in place and not asleep."""
    return action.type == "act" and not is_asleep(action.activity)


def is_asleep(activity: str) -> bool:
    """Whether an activity is sleep (no perception-driven reactions, no model calls)."""
    return "sleep" in activity.lower()
