"""Checkpoints: ``database/<run>/checkpoint.json``, the point a killed run resumes from.

A checkpoint is written after a tick's trace line (every ``simulation.checkpoint_every`` ticks, and after the
last tick of :meth:`~simulacra.simulation.Simulation.run`), atomically: a temporary file in the run folder is
written, flushed and fsynced, then renamed over the previous one (``os.replace``), so a kill at any moment
leaves either the old checkpoint or the new one. It holds::

    {"version": 1, "ticks_done": int, "target_ticks": int | None, "trace_bytes": int,
     "state": TownState.to_dict(), "memory": {agent: {tier: [ids in row order]}}, "shared": [ids] | None,
     "history_usage": {...}}

On resume the trace is cut back to ``trace_bytes`` and every store is rolled back to the ids listed (see
:meth:`simulacra.memory.stream.AgentMemory.restore`): a tick is wholly in the trace, the stores and the
checkpoint, or wholly absent. The trace header records the sha256 of the world and persona files
(:func:`input_hashes`), so that a resume can refuse changed inputs (:func:`changed_inputs`).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from simulacra.errors import CheckpointError
from simulacra.killpoint import kill_point

CHECKPOINT = "checkpoint.json"
VERSION = 1


def file_sha256(path: str | Path) -> str:
    """Hex sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def input_hashes(world) -> dict[str, dict[str, str]]:
    """The input files of a loaded world: ``{"world": {path: sha256}, "personas": {path: sha256}}`` (absolute
    paths), for the trace header."""
    return {"world": {str(Path(world.source).resolve()): file_sha256(world.source)},
            "personas": {str(Path(p).resolve()): file_sha256(p) for p in world.persona_files.values()}}


def changed_inputs(inputs: dict[str, dict[str, str]]) -> list[str]:
    """Messages naming each input file of ``inputs`` (:func:`input_hashes` form) that is missing or differs."""
    out = []
    for kind in ("world", "personas"):
        for path, digest in inputs.get(kind, {}).items():
            p = Path(path)
            if not p.is_file():
                out.append(f"{kind} file {p} is missing")
            elif file_sha256(p) != digest:
                out.append(f"{kind} file {p} changed since the run started")
    return out


def write_checkpoint(run_dir: str | Path, data: dict[str, Any]) -> Path:
    """Write ``data`` (plus ``version``) to ``<run_dir>/checkpoint.json`` atomically; returns the path."""
    path = Path(run_dir) / CHECKPOINT
    tmp = path.with_name(f".{CHECKPOINT}.tmp")
    payload = json.dumps({"version": VERSION, **data}, sort_keys=True, separators=(",", ":")).encode("utf-8")
    with tmp.open("wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    kill_point("checkpoint")
    os.replace(tmp, path)
    try:  # make the rename itself durable
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass
    return path


def read_checkpoint(run_dir: str | Path) -> dict[str, Any]:
    """The run's checkpoint.

    Raises:
        CheckpointError: no checkpoint (the run never finished setting up: start it again with ``--overwrite``),
            unreadable JSON or an unknown version.
    """
    path = Path(run_dir) / CHECKPOINT
    if not path.is_file():
        raise CheckpointError(f"{path}: no checkpoint, so {Path(run_dir)} cannot be resumed (was it made by an older "
                              f"simulacra, or killed before its first tick began?); start it again with --overwrite")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CheckpointError(f"{path}: unreadable checkpoint: {err}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION:
        raise CheckpointError(f"{path}: checkpoint version {data.get('version') if isinstance(data, dict) else '?'}, "
                              f"this simulacra reads {VERSION}")
    for key in ("ticks_done", "trace_bytes", "state", "memory"):
        if key not in data:
            raise CheckpointError(f"{path}: field '{key}' missing")
    return data
