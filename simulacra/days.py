"""Game days: which routine an agent follows when, when its day begins, and when it sleeps.

The clock is linear (game minutes from day 1, 00:00; :mod:`simulacra.clock`); days are read off it:

- **Calendar day** ``D`` (from 1) holds minutes ``(D-1)*1440 .. D*1440-1``; its weekday counts from the world's
  ``start_weekday`` (:meth:`World.weekday`). On the world's ``rest_days`` a persona follows its
  ``rest_day_routine`` (its ``routine`` when it has none; :meth:`Persona.routine_for`).
- **Plan day**: an agent's day runs from its wake-up, the start of the first entry of that calendar day's routine,
  to the next calendar day's wake-up (so it crosses midnight; its length differs from 24 hours when the two
  routines start at different times). Minutes before today's wake-up belong to yesterday's plan day: the agent
  is still in yesterday's last entry. Minds plan once per plan day, at its wake-up.
- **Night**: the last entry of a day's routine, when it is at the persona's home and is not also its first (a
  one-entry routine has no night), is the night: from its start to the next wake-up the agent sleeps once it is at
  home. The rule reads the routine's structure, not its words ("going to sleep", "going to bed" and "reading by
  the fire, then bed" are all nights), and it follows the routine whatever a language-model mind planned. A
  sleeping agent perceives nothing, retrieves nothing, reacts to nothing and talks with nobody; it still acts
  (stays at home), and its memory still consolidates and decays. A resident whose last entry is elsewhere (a
  night shift) stays awake.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from simulacra.clock import MINUTES_PER_DAY
from simulacra.persona import Persona, RoutineEntry

if TYPE_CHECKING:
    from simulacra.world.model import World


@dataclass(frozen=True)
class PlanDay:
    """One agent's plan day (see the module docstring).

    Attributes:
        day: the calendar day it starts on (from 1); weekday: that day's weekday; rest_day: whether it is one of
            the world's rest days; routine: the persona's routine for it.
        start: game minute of the wake-up; end: game minute of the next day's wake-up (exclusive).
    """

    day: int
    weekday: str
    rest_day: bool
    routine: tuple[RoutineEntry, ...]
    start: int
    end: int

    def entry_at(self, minute: float) -> tuple[int, RoutineEntry]:
        """The routine entry in force at game minute ``minute`` (within ``start..end``; the last one started) and
        its index in :attr:`routine`."""
        base = (self.day - 1) * MINUTES_PER_DAY
        current = 0
        for i, entry in enumerate(self.routine):
            if base + entry.start_minute <= minute:
                current = i
        return current, self.routine[current]


def _routine_of(persona: Persona, world: World, day_index: int) -> tuple[bool, list[RoutineEntry]]:
    rest = world.is_rest_day(day_index * MINUTES_PER_DAY)
    return rest, persona.routine_for(rest)


def plan_day_at(persona: Persona, world: World, minute: float) -> PlanDay:
    """The plan day of ``persona`` holding game minute ``minute`` (minutes before today's wake-up belong to
    yesterday's plan day; a minute before day 1's wake-up belongs to a day 0, as a run that starts at night)."""
    d = int(minute) // MINUTES_PER_DAY
    rest, routine = _routine_of(persona, world, d)
    start = d * MINUTES_PER_DAY + routine[0].start_minute
    if minute < start:
        d -= 1
        rest, routine = _routine_of(persona, world, d)
        start = d * MINUTES_PER_DAY + routine[0].start_minute
    _, following = _routine_of(persona, world, d + 1)
    end = (d + 1) * MINUTES_PER_DAY + following[0].start_minute
    return PlanDay(d + 1, world.weekday(d * MINUTES_PER_DAY), rest, tuple(routine), start, end)


def routine_entry_at(persona: Persona, world: World, minute: float) -> tuple[int, RoutineEntry]:
    """The entry of the persona's routine in force at game minute ``minute`` (rest days followed) and its index in
    that day's routine (:meth:`PlanDay.entry_at`)."""
    return plan_day_at(persona, world, minute).entry_at(minute)


def night_of(routine: Sequence[RoutineEntry], home: str) -> int | None:
    """The index of a day's routine's night (module docstring): its last entry when that is at ``home`` (a
    place id) and is not also its first; ``None`` when the routine has no night (one entry, or a night shift)."""
    last = len(routine) - 1
    return last if last > 0 and routine[last].place == home else None


def is_sleeping(persona: Persona, world: World, minute: float, place: str) -> bool:
    """Whether an agent of ``persona`` at ``place`` is asleep at game minute ``minute``: the routine entry in
    force is the night (:func:`night_of`) and ``place`` is that home (module docstring)."""
    if place != persona.home:
        return False
    day = plan_day_at(persona, world, minute)
    index, _ = day.entry_at(minute)
    return index == night_of(day.routine, persona.home)
