"""Game time. All of simulacra's time is *game minutes* counted from 00:00 of day 1 (game days count from 1).

Nothing in the domain reads the wall clock: the :class:`GameClock` is the only source of "now".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 24 * MINUTES_PER_HOUR
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


#: ``H:MM`` or ``HH:MM`` in ASCII digits, the minutes always two digits (``"7:3"`` is a typo of 07:30 or 07:03)
_HHMM = re.compile(r"([0-9]{1,2}):([0-9]{2})")


def parse_hhmm(text: str) -> int:
    """Parse ``"HH:MM"`` (00:00..23:59; one-digit hours accepted, minutes always two ASCII digits) into minutes
    after midnight.

    Raises:
        ValueError: if ``text`` is not of that form.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a time as 'HH:MM', got {text!r}")
    match = _HHMM.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"expected a time as 'HH:MM' (24-hour clock, two-digit minutes, e.g. '07:30'), got {text!r}")
    hours, minutes = int(match[1]), int(match[2])
    if not (0 <= hours <= 23 and 0 <= minutes <= 59):
        raise ValueError(f"time {text!r} is out of range 00:00..23:59")
    return hours * MINUTES_PER_HOUR + minutes


def format_hhmm(game_minutes: float) -> str:
    """Format game minutes as ``"HH:MM"`` of their day."""
    m = int(game_minutes) % MINUTES_PER_DAY
    return f"{m // MINUTES_PER_HOUR:02d}:{m % MINUTES_PER_HOUR:02d}"


def day_start(game_minutes: float) -> int:
    """The first game minute (00:00) of the game day holding ``game_minutes`` (floored, so minute -360, 18:00 of
    the day before day 1, gives -1440)."""
    return int(game_minutes // MINUTES_PER_DAY) * MINUTES_PER_DAY


def day_number(game_minutes: float) -> int:
    """The game day holding ``game_minutes``, counted from 1 (minutes 0..1439 are day 1)."""
    return int(game_minutes) // MINUTES_PER_DAY + 1


def weekday_of(game_minutes: float, start_weekday: str = "Monday") -> str:
    """The weekday (``"Monday"``..``"Sunday"``) of the game day holding ``game_minutes``, day 1 being
    ``start_weekday``.

    Raises:
        ValueError: ``start_weekday`` is not one of :data:`WEEKDAYS`.
    """
    if start_weekday not in WEEKDAYS:
        raise ValueError(f"expected a weekday ({', '.join(WEEKDAYS)}), got {start_weekday!r}")
    return WEEKDAYS[(WEEKDAYS.index(start_weekday) + day_number(game_minutes) - 1) % 7]


def format_game_time(game_minutes: float, start_weekday: str | None = None, rest_days: Iterable[str] = ()) -> str:
    """Format game minutes as ``"day D HH:MM"`` (day counted from 1), or, given the weekday of day 1, as
    ``"day D (Weekday) HH:MM"``, ``"day D (Weekday, rest day) HH:MM"`` when the weekday is one of ``rest_days``."""
    day = f"day {day_number(game_minutes)}"
    if start_weekday is not None:
        weekday = weekday_of(game_minutes, start_weekday)
        day += f" ({weekday}, rest day)" if weekday in set(rest_days) else f" ({weekday})"
    return f"{day} {format_hhmm(game_minutes)}"


@dataclass
class GameClock:
    """A tick-based game clock.

    Attributes:
        start_minute: game minute of tick 0 (e.g. 420 for 07:00 of day 1).
        tick_minutes: game minutes per tick (> 0).
        tick: index of the current tick, starting at 0.
    """

    start_minute: int
    tick_minutes: int
    tick: int = 0

    def __post_init__(self) -> None:
        if self.tick_minutes <= 0:
            raise ValueError(f"tick_minutes must be > 0, got {self.tick_minutes}")

    @property
    def now(self) -> int:
        """Current game time in game minutes."""
        return self.start_minute + self.tick * self.tick_minutes

    def minute_of_day(self) -> int:
        """Minutes after midnight of the current game day (0..1439)."""
        return self.now % MINUTES_PER_DAY

    def advance(self) -> int:
        """Move to the next tick and return the new game time in minutes."""
        self.tick += 1
        return self.now

    def __str__(self) -> str:
        return format_game_time(self.now)
