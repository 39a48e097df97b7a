"""What ``simulacra tune`` reads of a run folder's trace: its config, agents, game times and every memory written
(to tell a forgotten expected memory from a wrong label). Read with :func:`simulacra.trace.stream_trace`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from simulacra.config import config_from_dict, recorded_config
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
)

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
    end_minute: float
    agents: list[str]
    added: dict[str, list[AddOp | PostOp]]  # owner (:data:`SHARED` for the shared tier) -> add/post operations
    header: Header  # the trace header (where the stores are: :class:`simulacra.runtime.RunStores`)

    @property
    def names(self) -> dict[str, str]:
        """Agent id -> the resident's name (the header's personas; an agent without one is named by its id)."""
        return agent_names(self.header, self.agents)


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
    return RunInfo(run, config, start, float(start) if end is None else end, list(header.get("agents", [])), added,
                   header)
