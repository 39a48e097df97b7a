"""A fault-injection point for the resume tests: ``SIMULACRA_KILL_AT`` stops the process at a named moment.

With the environment variable unset (always, outside tests) :func:`kill_point` returns at once. Set to
``tick=T:phase=P`` (optionally ``:n=N``, the N-th time the phase is reached in tick ``T``, default 1, and
``:mode=raise`` to raise :class:`InjectedFault` instead of killing), the process sends itself ``SIGKILL``
the moment tick ``T`` reaches phase ``P``: no clean-up, no flush, exactly like a power cut or the OOM killer.

Phases (where :func:`kill_point` is called):
    ``tick``: the tick starts; ``remember1``, ``remember2``: after the first owner's write of the tick's first
    (percepts) and second (plans, speech) memory batch; ``reflect``: after the first agent's insights were written;
    ``rehearse``: after the first access marks of the tick were written (memories changed in place); ``consolidate``:
    after the first agent's consolidation (these four write the stores' in-process mirrors; the tick's Chroma writes
    come in ``persist``); ``journal``: half of the tick's frame of the store journal is written and flushed (a tick that
    wrote memories, when the run journals: :mod:`simulacra.memory.journal`); ``chroma``: a tier's Chroma upsert (or
    metadata update) has returned; ``forget``: the tick's checkpoint is written, the memories deleted since the last
    write of the stores not yet deleted from Chroma (reached after ``checkpoint``, with the tick's number, on the ticks
    that write Chroma; also in a resume's and a run's last write of its stores); ``persist``: after the first
    collection's write of the tick (the others not yet written); ``trace``: half of the tick's trace line is written and
    flushed; ``checkpoint``: the new checkpoint's temporary file is written, not yet renamed; ``marks``: after a whole
    checkpoint, the first agent's access marks are queued for Chroma.

``SIMULACRA_KILL_LOG=<file>`` appends ``<tick> <phase>`` to the file the first time each (tick, phase) is reached,
so that a test picks its kill points among those an uninterrupted run really passes through.
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable

ENV = "SIMULACRA_KILL_AT"
LOG_ENV = "SIMULACRA_KILL_LOG"
PHASES = ("tick", "remember1", "remember2", "chroma", "forget", "reflect", "rehearse", "summarise", "consolidate",
          "journal", "persist", "trace", "checkpoint", "marks")


class InjectedFault(RuntimeError):
    """Raised at the kill point with ``mode=raise`` (an exception inside a stage)."""


_tick: int | None = None
_seen: Counter = Counter()
_logged: set[tuple[int | None, str]] = set()


def _spec() -> dict[str, str] | None:
    raw = os.environ.get(ENV)
    if not raw:
        return None
    try:
        spec = dict(part.split("=", 1) for part in raw.split(":"))
        int(spec["tick"]), spec["phase"]
    except (ValueError, KeyError):
        raise ValueError(f"{ENV}={raw!r}: expected tick=T:phase=P[:n=N][:mode=kill|raise]") from None
    if spec["phase"] not in PHASES:
        raise ValueError(f"{ENV}: unknown phase {spec['phase']!r}; phases are {', '.join(PHASES)}")
    return spec


def kill_point(phase: str, tick: int | None = None, before: Callable[[], None] | None = None) -> None:
    """Die here when ``SIMULACRA_KILL_AT`` names this phase of the current tick (see the module docstring).

    Args:
        phase: one of :data:`PHASES`; tick: the tick starting (given with ``phase="tick"`` only).
        before: called just before dying (e.g. to write half a trace line).
    """
    global _tick
    if tick is not None:
        _tick = tick
    log_path = os.environ.get(LOG_ENV)
    if log_path and (_tick, phase) not in _logged:
        _logged.add((_tick, phase))
        with open(log_path, "a", encoding="utf-8") as fh:
            fh.write(f"{_tick} {phase}\n")
    spec = _spec()
    if spec is None or spec["phase"] != phase or _tick != int(spec["tick"]):
        return
    _seen[(_tick, phase)] += 1
    if _seen[(_tick, phase)] != int(spec.get("n", 1)):
        return
    if before is not None:
        before()
    if spec.get("mode") == "raise":
        raise InjectedFault(f"fault injected by {ENV} at tick {_tick}, phase {phase}")
    os.kill(os.getpid(), signal.SIGKILL)
