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


def layer_counters(rt) -> dict[str, Any]:
    """What the run's language-model layer and rater counted and spent, for a checkpoint (``"layers"``).

    Returns:
        ``{"llm": {wrapper class: its counters()}`` (meter, retries, budget spent, replayed answers) for the
        run's model stack, ``"mind_cache"``: the mind's :class:`~simulacra.llm.CachingModel` hits and misses,
        ``"mind_usage"``: :attr:`LLMMind.usage`, ``"rater"``: :meth:`RaterClient.counters` (its cached ratings
        included), ``"llm_calls"``: records in ``llm_calls.jsonl`` so far (where a resume's replay starts)}``;
        parts the run does not have are left out.
    """
    from simulacra.llm.replay import ReplayingModel
    from simulacra.llm.wrappers import CachingModel, RecordingModel, unwrap

    out: dict[str, Any] = {}
    if rt.llm is not None:
        stack, node, depth = {}, rt.llm, 0
        while node is not None and depth < 64:
            if getattr(node, "COUNTERS", ()):
                stack[type(node).__name__] = node.counters()
            node, depth = getattr(node, "inner", None), depth + 1
        out["llm"] = stack
        recorder, replay = unwrap(rt.llm, RecordingModel), unwrap(rt.llm, ReplayingModel)
        out["llm_calls"] = (replay.recorded if replay else 0) + (recorder.lines if recorder else 0)
    cache = unwrap(getattr(rt.mind, "model", None), CachingModel)
    if cache is not None:
        out["mind_cache"] = cache.counters()
    if isinstance(getattr(rt.mind, "usage", None), dict):
        out["mind_usage"] = dict(sorted(rt.mind.usage.items()))
    if callable(getattr(rt.rater, "counters", None)):
        out["rater"] = rt.rater.counters()
    return out


def restore_layer_counters(rt, saved: dict[str, Any]) -> None:
    """Take up :func:`layer_counters` ``saved`` after a resume: every counter and budget goes on from its value at
    the checkpoint (a spent budget stays spent), the rater's cached ratings come back, the replay of
    ``llm_calls.jsonl`` (:class:`~simulacra.llm.replay.ReplayingModel`) forgets the records of the ticks already
    done, and the mind's cache is filled with the answers recorded before the checkpoint, as the uninterrupted
    run had it. Replayed answers add up over resumes."""
    from simulacra.llm.replay import ReplayingModel
    from simulacra.llm.wrappers import CachingModel, unwrap

    stack = saved.get("llm", {})
    node, depth = rt.llm, 0
    while node is not None and depth < 64:
        mine = stack.get(type(node).__name__)
        if isinstance(node, ReplayingModel):
            node.replayed += int((mine or {}).get("replayed", 0))
        elif mine is not None and callable(getattr(node, "restore_counters", None)):
            node.restore_counters(mine)
        node, depth = getattr(node, "inner", None), depth + 1
    cache = unwrap(getattr(rt.mind, "model", None), CachingModel)
    replay = unwrap(rt.llm, ReplayingModel)
    if replay is not None:
        done = int(saved.get("llm_calls", 0))
        replay.keep_from(done)
        if cache is not None:
            for r, answer in replay.answers_before(done):
                cache.prime(r["messages"], answer, max_tokens=r["max_tokens"], temperature=r["temperature"],
                            seed=r["seed"], json_schema=r["json_schema"])
    if cache is not None and "mind_cache" in saved:
        cache.restore_counters(saved["mind_cache"])
    if "mind_usage" in saved and isinstance(getattr(rt.mind, "usage", None), dict):
        rt.mind.usage.clear()
        rt.mind.usage.update(saved["mind_usage"])
    if "rater" in saved and callable(getattr(rt.rater, "restore_counters", None)):
        rt.rater.restore_counters(saved["rater"])


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
