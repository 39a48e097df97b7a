"""Game time. All of simulacra's time is *game minutes* counted from day 0, 00:00.

Nothing in the domain reads the wall clock: the :class:`GameClock` is the only source of "now".
"""

from __future__ import annotations

from dataclasses import dataclass

MINUTES_PER_HOUR = 60
MINUTES_PER_DAY = 24 * MINUTES_PER_HOUR


def parse_hhmm(text: str) -> int:
    """Parse ``"HH:MM"`` (00:00..23:59) into minutes after midnight.

    Raises:
        ValueError: if ``text`` is not of that form.
    """
    if not isinstance(text, str):
        raise ValueError(f"expected a time as 'HH:MM', got {text!r}")
    parts = text.strip().split(":")
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(f"expected a time as 'HH:MM', got {text!r}")
    hours, minutes = int(parts[0]), int(parts[1])
    if not (0 <= hours <= 23 and 0 <= minutes <= 59):
        raise ValueError(f"time {text!r} is out of range 00:00..23:59")
    return hours * MINUTES_PER_HOUR + minutes


def format_hhmm(game_minutes: float) -> str:
    """Format game minutes as ``"HH:MM"`` of their day."""
    m = int(game_minutes) % MINUTES_PER_DAY
    return f"{m // MINUTES_PER_HOUR:02d}:{m % MINUTES_PER_HOUR:02d}"


def format_game_time(game_minutes: float) -> str:
    """Format game minutes as ``"day D HH:MM"`` (day counted from 1)."""
    return f"day {int(game_minutes) // MINUTES_PER_DAY + 1} {format_hhmm(game_minutes)}"


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
