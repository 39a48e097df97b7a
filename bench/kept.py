"""What a town still remembers: the share of witnessed memories still held in long-term memory, by age.

Used by :mod:`bench.memory_growth` (a real run: the stores' long-term tiers) and :mod:`bench.growth_replay` (a
replayed forgetting rule) to measure what forgetting costs (issue 11 §3, ``docs/scale.md``).

Every memory an agent writes (a trace ``add`` operation: short-term perceptions, dialogue, plans, and reflections
added to long-term) is followed with its rating, kind and game minute. At the end of each game day since the run's
start, :meth:`Kept.day_end` counts each one as held or not, grouped by category and by age in whole game days (0:
written during the day that just ended). Held: in the agent's long-term memory, or still in short-term memory
waiting for its consolidation (written within the last hour or so; followed here from the ``add``, ``move`` and
``forget`` operations). A memory rated too low to be promoted counts as not held: consolidation forgot it.

Categories (:data:`CATEGORIES`): ``world events`` (memories of kind ``event``: what an agent witnessed of the
world's scheduled events), ``world events rated >= 7``, ``rated >= 7`` (any kind), and rating bands ``rating 1-5``,
``rating 6``, ``rating 7``, ``rating 8``, ``rating 9-10``. A memory folded into a reinforced one
(``memory.reinforce_repeats``) is held while the reinforced one is.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Iterable, Mapping

DAY = 24 * 60

#: category name -> test on ``(kind, rating)``
CATEGORIES: dict[str, Callable[[str, float], bool]] = {
    "world events": lambda kind, rating: kind == "event",
    "world events rated >= 7": lambda kind, rating: kind == "event" and rating >= 7,
    "rated >= 7": lambda kind, rating: rating >= 7,
    "rating 1-5": lambda kind, rating: rating < 6,
    "rating 6": lambda kind, rating: 6 <= rating < 7,
    "rating 7": lambda kind, rating: 7 <= rating < 8,
    "rating 8": lambda kind, rating: 8 <= rating < 9,
    "rating 9-10": lambda kind, rating: rating >= 9,
}


class Kept:
    """Follows the memories a run writes and, at each day's end, which of them long-term memory still holds.

    Call :meth:`observe` with every tick's memory operations (in order), and :meth:`day_end` when a game day since
    ``start_minute`` is over; :meth:`result` gives the table.
    """

    def __init__(self, start_minute: float):
        self.start = start_minute
        # agent -> [(id, written at game minute, kind, rating)]
        self.written: dict[str, list[tuple[str, float, str, float]]] = {}
        self.alias: dict[str, dict[str, str]] = {}  # agent -> {folded id: reinforced id}
        self.short: dict[str, set[str]] = {}  # agent -> ids in short-term memory
        self.days: list[dict] = []

    def observe(self, ops: Iterable[Mapping], now: float) -> None:
        """Take the memory operations of the tick at game minute ``now``: ``add`` operations (short-term, and
        long-term reflections) with a rating are followed as written at ``now``; ``reinforce`` operations map the
        ids they fold to the new one; ``move`` and short-term ``forget`` operations take ids out of short-term."""
        for op in ops:
            if op["op"] == "add" and op.get("tier") in ("short_term", "long_term") and op.get("rating") is not None:
                self.written.setdefault(op["agent"], []).append(
                    (op["id"], float(now), op.get("kind", ""), float(op["rating"])))
                if op["tier"] == "short_term":
                    self.short.setdefault(op["agent"], set()).add(op["id"])
            elif op["op"] == "move" or (op["op"] == "forget" and op.get("tier") == "short_term"):
                self.short.get(op["agent"], set()).discard(op["id"])
            elif op["op"] == "reinforce":
                alias = self.alias.setdefault(op["agent"], {})
                for old in [*op.get("from_ids", []), *op.get("replaces", [])]:
                    alias[old] = op["id"]

    def _resolve(self, agent: str, i: str) -> str:
        alias = self.alias.get(agent, {})
        seen = set()
        while i in alias and i not in seen:
            seen.add(i)
            i = alias[i]
        return i

    def day_end(self, now: float, held: Mapping[str, Container[str]]) -> dict:
        """Record, at game minute ``now``, which memories written so far each agent's long-term memory holds
        (``held[agent]``: anything supporting ``in``, e.g. a :class:`~simulacra.memory.store.MemoryTier` or a set
        of ids) or short-term memory still holds. Returns the day's row: ``days_run`` and per category ``{"held",
        "total", "share", "by_age": {age: [held, total]}}`` (age: whole game days between the tick that wrote it and
        ``now``, 0 for the last 24 game hours)."""
        row: dict = {"days_run": round((now - self.start) / DAY, 3), "categories": {}}
        cats = row["categories"]
        for agent, items in self.written.items():
            hold, short = held.get(agent, ()), self.short.get(agent, set())
            for i, when, kind, rating in items:
                if when > now:
                    continue
                age = max(0, math.ceil((now - when) / DAY) - 1)
                here = i in short or self._resolve(agent, i) in hold
                for name, test in CATEGORIES.items():
                    if test(kind, rating):
                        c = cats.setdefault(name, {"held": 0, "total": 0, "by_age": {}})
                        c["held"] += here
                        c["total"] += 1
                        b = c["by_age"].setdefault(age, [0, 0])
                        b[0] += here
                        b[1] += 1
        for c in cats.values():
            c["share"] = round(c["held"] / c["total"], 4) if c["total"] else None
            c["by_age"] = {str(a): c["by_age"][a] for a in sorted(c["by_age"])}
        self.days.append(row)
        return row

    def result(self) -> list[dict]:
        """One row per :meth:`day_end` call, in order."""
        return self.days


def kept_at(rows: list[dict], category: str, day: int = -1) -> float | None:
    """The share of ``category`` held at the end of ``rows[day]`` (``None`` if nothing of it was written)."""
    if not rows:
        return None
    c = rows[day]["categories"].get(category)
    return None if c is None else c["share"]


def format_rows(rows: list[dict], categories: Iterable[str] = CATEGORIES) -> str:
    """A text table: per category, per day end, the share held overall and by age in days (held/total)."""
    out = []
    for name in categories:
        lines = []
        for r in rows:
            c = r["categories"].get(name)
            if not c:
                continue
            ages = "  ".join(f"{a}d {h}/{n}" for a, (h, n) in c["by_age"].items())
            lines.append(f"  day {r['days_run']:>5.2f}: {100 * c['share']:5.1f} % ({c['held']}/{c['total']})   by age: "
                         f"{ages}")
        if lines:
            out.append(f"kept in long-term, {name}:")
            out.extend(lines)
    return "\n".join(out)
