"""What ``simulacra tune`` reads of a run folder's trace: its config, agents, game times and every memory written
(to tell a forgotten expected memory from a wrong label). Read with :func:`simulacra.trace.stream_trace`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulacra.clock import format_game_time
from simulacra.config import config_from_dict, recorded_config
from simulacra.disk import default_run_name
from simulacra.errors import SimulacraError
from simulacra.trace import (
    ADD,
    POST,
    REINFORCE,
    AddOp,
    Header,
    PostOp,
    TraceFormatError,
    agent_names,
    reinforced_as_add,
    stream_trace,
    tick_end,
)
from simulacra.tune.queries import LabelledQuery

#: owner key of the town's shared tier in :attr:`RunInfo.added` (persona ids are file stems, never "@")
SHARED = "@town"


class TuneError(SimulacraError):
    """The run folder cannot be tuned on (missing stores or trace)."""


@dataclass(frozen=True)
class RunInfo:
    """What the tuner needs of a run folder: its memory config, times and the trace's memory operations."""

    run_dir: Path
    config: Any  # simulacra.config.Config
    start_minute: int
    end_minute: float  # the end of the last tick (game minutes): the moment the stores hold (:func:`tick_end`)
    agents: list[str]
    added: dict[str, list[AddOp | PostOp]]  # owner (:data:`SHARED` for the shared tier) -> add/post operations
    header: Header  # the trace header (where the stores are: :class:`simulacra.runtime.RunStores`)

    @property
    def names(self) -> dict[str, str]:
        """Agent id -> the resident's name (the header's personas; an agent without one is named by its id)."""
        return agent_names(self.header, self.agents)


def query_warnings(run: RunInfo, queries: Sequence[LabelledQuery], queries_file: str | Path,
                   named_run: str | None = None) -> list[str]:
    """What is wrong-looking, not wrong, in tuning ``run`` on ``queries`` (read from ``queries_file``, which names
    ``named_run``, :func:`~simulacra.tune.queries.load_query_file`): a file made for another run (its ``run:`` is
    neither the run folder's name nor the run's default name, ``<world>-seed<seed>``), and queries asked after the
    run's end (nothing was simulated then: the stores are as the run left them, recency is measured from the later
    time)."""
    out = []
    header = run.header
    world, seed = header.get("world_file"), header.get("seed")
    default = default_run_name(world, seed) if world and seed is not None else None
    if named_run is not None and named_run not in (run.run_dir.name, default):
        made = f"world {header['world_file']}, seed {seed}" if default else "its trace names no world and seed"
        out.append(f"{queries_file}: made for the run {named_run!r} (its 'run:'), not for {run.run_dir} ({made}): "
                   f"its agents, times and expected memories are of that run")
    end = run.end_minute
    late = [(q.index, q.time) for q in queries if q.time is not None and q.time > end]
    if late:
        shown = ", ".join(f"queries.{index} ({format_game_time(time)})" for index, time in late[:5])
        more = f" and {len(late) - 5} more" if len(late) > 5 else ""
        out.append(f"{queries_file}: {len(late)} of {len(queries)} queries are asked after the end of {run.run_dir} "
                   f"({format_game_time(end)}): {shown}{more}; nothing after it was simulated, they are scored on "
                   f"the stores as the run left them")
    return out


def read_run(run_dir: str | Path) -> RunInfo:
    """Read a run folder's trace: config, agents, game times, and every memory written (to spot forgotten ones);
    a ``reinforce`` counts as the add of the memory it writes (:func:`reinforced_as_add`).

    Raises:
        TuneError: no ``trace.jsonl`` in ``run_dir``, a header without a config, or a malformed trace.
    """
    run = Path(run_dir)
    path = run / "trace.jsonl"
    if not path.is_file():
        raise TuneError(f"{run}: not a run folder (no trace.jsonl)")
    added: dict[str, list[AddOp | PostOp]] = {}
    end: float | None = None
    try:
        header, ticks = stream_trace(path)
        if not isinstance(header.get("config"), dict):
            raise TuneError(f"{path}: line 1 is not a trace header with a config")
        for rec in ticks:
            end = float(rec["time"])
            for op in rec["memory"]:
                if op["op"] == ADD:
                    added.setdefault(op["agent"], []).append(op)
                elif op["op"] == REINFORCE:
                    added.setdefault(op["agent"], []).append(reinforced_as_add(op))
                elif op["op"] == POST:
                    added.setdefault(SHARED, []).append(op)
    except TraceFormatError as err:
        raise TuneError(str(err)) from None
    start = int(header.get("start_minute", 0))
    config = config_from_dict(recorded_config(header["config"]), path)
    # the run's end: the end of its last tick, the moment its stores hold (an interview of the run asks then too)
    end = float(start) if end is None else tick_end(end, header)
    return RunInfo(run, config, start, end, list(header.get("agents", [])), added, header)
