"""Checkpoints: ``database/<run>/checkpoint.json`` and ``checkpoint.journal``, the point a killed run resumes from.

A checkpoint is written after a tick's trace line (every ``simulation.checkpoint_every`` ticks, and after the
last tick of :meth:`~simulacra.simulation.Simulation.run`), after the trace is fsynced. The first of a process
is written whole and atomically (:func:`write_checkpoint`: a temporary file in the run folder is written,
flushed and fsynced, then renamed over the previous one, and the folder fsynced); each next one is the patch
from the previous (:func:`diff`), appended to ``checkpoint.journal`` as one checksummed line and fsynced
(:class:`CheckpointWriter`), until the journal outgrows the whole file and a whole one is written again. A kill
at any moment leaves either the old checkpoint or the new one: a cut or spoiled journal line is not read. What
:func:`read_checkpoint` returns, the whole file with its journal applied::

    {"version": 2, "base": str, "ticks_done": int, "target_ticks": int | None, "trace_bytes": int,
     "config": {...}, "state": TownState.to_dict(),
     "memory": {agent: {tier: [ids in row order], "last_accessed": {id: game minute}}},
     "shared": [ids] | None, "history_usage": {...}, "layers": layer_counters(...)}

``layers`` holds what the language-model layer and the rater counted and spent (:func:`layer_counters`), and
where ``llm_calls.jsonl`` stood: a resume restores the counters and budgets and replays the recorded answers of
the ticks after the checkpoint (:mod:`simulacra.llm.replay`).

On resume the trace is cut back to ``trace_bytes`` and every store is rolled back to the ids and access marks
listed (see :meth:`simulacra.memory.stream.AgentMemory.restore`): a tick is wholly in the trace, the stores and the
checkpoint, or wholly absent. The trace header records the sha256 of the world and persona files
(:func:`input_hashes`), so that a resume can refuse changed inputs (:func:`changed_inputs`). ``docs/resume.md``
has the costs.
"""

from __future__ import annotations

import hashlib
import json
import os
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from simulacra.errors import CheckpointError
from simulacra.killpoint import kill_point

CHECKPOINT = "checkpoint.json"
JOURNAL = "checkpoint.journal"
VERSION = 2
#: versions :func:`read_checkpoint` reads (1: a whole checkpoint without journal)
READS = (1, 2)


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


def checkpoint_shards(ck: dict[str, Any]) -> int:
    """The shape of the town that wrote checkpoint ``ck``: 0 for a run in one process (its ``layers`` one part's
    counters), else the number of Ray workers (``layers["shards"]``: one part per worker)."""
    layers = ck.get("layers") or {}
    return len(layers["shards"]) if isinstance(layers.get("shards"), list) else 0


def reshape_layers(layers: dict[str, Any], shards: int, llm_calls: Sequence[int]) -> dict[str, Any]:
    """A checkpoint's :func:`layer_counters` for a town of another shape (a run resumed with another number of
    workers, :meth:`simulacra.simulation.Simulation.resume`): ``shards`` 0 for one process, else that many workers.

    Every counter (calls, tokens, latency, retries, cache hits, the mind's usage, the rater's counts) is additive:
    the run's totals go to the first part, the others start at 0, so the run's summary (the parts added up) goes on
    from the checkpoint's figures. The rater's cached ratings (``rater.ratings``) go to every part, so no shard asks
    again for a rating the run already has. ``llm_calls`` (where a part's replay of its ``llm_calls.jsonl`` starts)
    is per file, so it is given: ``llm_calls[k]``, the records of part ``k``'s file that predate the checkpoint.

    Raises:
        ValueError: ``llm_calls`` does not give one count per part.
    """
    olds = layers["shards"] if isinstance(layers.get("shards"), list) else [layers]
    n = max(1, shards)
    if len(llm_calls) != n:
        raise ValueError(f"llm_calls gives {len(llm_calls)} counts for {n} parts")

    def add(into: dict[str, Any], part: dict[str, Any]) -> None:
        for key, value in part.items():
            if isinstance(value, dict):
                add(into.setdefault(key, {}), value)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                into[key] = into.get(key, 0) + value
            else:
                into.setdefault(key, value)

    total: dict[str, Any] = {}
    ratings: dict[str, Any] = {}
    for old in olds:
        rater = dict(old.get("rater") or {})
        ratings.update(rater.pop("ratings", None) or {})
        add(total, {**{k: v for k, v in old.items() if k not in ("rater", "llm_calls")},
                    **({"rater": rater} if "rater" in old else {})})
    parts = []
    for k in range(n):
        part: dict[str, Any] = total if k == 0 else {}
        part = {**part, "llm_calls": int(llm_calls[k])} if any("llm_calls" in o for o in olds) else dict(part)
        if any("rater" in o for o in olds):
            part["rater"] = {**part.get("rater", {}), "ratings": dict(ratings)}
        parts.append(part)
    return parts[0] if shards == 0 else {"shards": parts}


def restore_layer_counters(rt, saved: dict[str, Any]) -> None:
    """Take up :func:`layer_counters` ``saved`` after a resume: every counter goes on from its value at the
    checkpoint, the budget from every request ``llm_calls.jsonl`` records (:meth:`BudgetedModel.take_up`, when the
    run records its calls: a spent budget stays spent), the rater's cached ratings come back, the replay of
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


def _dump(data: Any) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _fsync_dir(path: Path) -> None:
    try:  # make a rename durable
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:  # pragma: no cover - platforms without directory fsync
        pass


def write_checkpoint(run_dir: str | Path, data: dict[str, Any], base: str | None = None) -> Path:
    """Write ``data`` (plus ``version`` and the journal token ``base``) to ``<run_dir>/checkpoint.json``
    atomically (temporary file, fsync, rename, fsync of the folder); the journal of the previous base is void
    from then on (its lines carry another token). Returns the path."""
    path = Path(run_dir) / CHECKPOINT
    tmp = path.with_name(f".{CHECKPOINT}.tmp")
    payload = _dump({"version": VERSION, **data, "base": base or os.urandom(8).hex()})
    with tmp.open("wb") as fh:
        fh.write(payload)
        fh.flush()
        os.fsync(fh.fileno())
    kill_point("checkpoint")
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return path


# ----------------------------------------------------------------- the journal: what changed since the base
# A patch turns one JSON value into another: {"=": value} replaces it, {"+": [items]} appends to a list,
# {"d": {key: patch}, "-": [keys]} changes a dict's keys and removes some (a key new to the dict: {"=": value}).


def diff(old: Any, new: Any) -> dict[str, Any] | None:
    """The patch turning ``old`` into ``new`` (JSON values), or ``None`` when they are equal.

    Equality inside containers is Python's (``==``, compared in C, which keeps a tick's diff cheap): a value that
    only changes between equal numbers of another type (``1`` to ``1.0``, ``1`` to ``True``) is not patched; the
    run's checkpoint data never changes a field's type."""
    if type(old) is type(new) and old == new:
        return None
    if isinstance(old, dict) and isinstance(new, dict):
        changed = {}
        for k, v in new.items():
            if k not in old:
                changed[k] = {"=": v}
            else:
                p = diff(old[k], v)
                if p is not None:
                    changed[k] = p
        patch: dict[str, Any] = {"d": changed}
        gone = [k for k in old if k not in new]
        if gone:
            patch["-"] = gone
        return patch
    if isinstance(old, list) and isinstance(new, list) and len(new) > len(old) and new[: len(old)] == old:
        return {"+": new[len(old):]}
    return {"=": new}


def apply_patch(value: Any, patch: dict[str, Any]) -> Any:
    """``value`` changed by ``patch`` (:func:`diff`); dicts are changed in place.

    Raises:
        ValueError: the patch does not fit the value.
    """
    if "=" in patch:
        return patch["="]
    if "+" in patch:
        if not isinstance(value, list):
            raise ValueError("an append to something that is not a list")
        return value + patch["+"]
    if not isinstance(value, dict) or not isinstance(patch.get("d"), dict):
        raise ValueError("a dict patch for something that is not a dict")
    for k in patch.get("-", []):
        value.pop(k, None)
    for k, p in patch["d"].items():
        value[k] = apply_patch(value.get(k), p)
    return value


class CheckpointWriter:
    """Writes a run's checkpoints cheaply: the first one whole (``checkpoint.json``, :func:`write_checkpoint`),
    then each one as the patch (:func:`diff`) from the previous, one line appended to ``checkpoint.journal``
    and fsynced: one small write and one fsync per tick instead of a whole file, its fsync, a rename and the
    folder's fsync. When the journal has grown past ``compact_ratio`` times the base (at least
    ``min_journal_bytes``), the next checkpoint is written whole again and the journal starts anew.

    A journal line is ``<crc32 hex> <json>\n`` with the JSON ``{"base": token, "patch": ...}``: a line cut by a
    kill (no newline, or a checksum that does not match) and every line after it are not read, and lines of an
    older base (a kill between writing a new base and emptying the journal) are void, so a kill at any moment
    leaves the previous checkpoint or the new one, as the atomic rename does (:func:`read_checkpoint`).

    Args:
        run_dir: the run folder.
        compact_ratio: journal bytes, as a multiple of the base's, that trigger a whole checkpoint.
        min_journal_bytes: never compact a smaller journal.
    Attributes:
        wholes, patches: checkpoints written whole / as journal lines by this writer; last_whole: whether the
            latest was whole.
    """

    def __init__(self, run_dir: str | Path, compact_ratio: float = 1.0, min_journal_bytes: int = 65_536):
        self.run_dir = Path(run_dir)
        self.compact_ratio = compact_ratio
        self.min_journal_bytes = min_journal_bytes
        self._last: dict[str, Any] | None = None
        self._base: str | None = None
        self._base_bytes = 0
        self._journal_bytes = 0
        self.wholes = self.patches = 0
        self.last_whole = False

    @property
    def journal_path(self) -> Path:
        return self.run_dir / JOURNAL

    def write(self, data: dict[str, Any], whole: bool = False) -> bool:
        """Checkpoint ``data``: whole when ``whole``, when it is this writer's first, or when the journal is due
        for compaction; else as a journal line. ``data`` must be JSON-able and made of containers built for
        this call: the next call diffs against it, so it must not change in between. Returns whether it was
        written whole."""
        limit = max(self.min_journal_bytes, self.compact_ratio * self._base_bytes)
        try:
            if whole or self._last is None or self._journal_bytes > limit:
                self._write_whole(data)
            else:
                self._append(data)
        except BaseException:
            self._last = None  # never append after what a failed write may have left: the next one is whole
            raise
        self._last = data
        self.last_whole = self._journal_bytes == 0
        if self.last_whole:
            self.wholes += 1
        else:
            self.patches += 1
        return self.last_whole

    def _write_whole(self, data: dict[str, Any]) -> None:
        self._base = os.urandom(8).hex()
        self._base_bytes = write_checkpoint(self.run_dir, data, self._base).stat().st_size
        with self.journal_path.open("wb"):  # the old base's lines are void already; drop them
            pass
        self._journal_bytes = 0

    def _append(self, data: dict[str, Any]) -> None:
        # an unchanged state (a checkpoint taken again before any tick) is an empty patch, not a null one
        body = _dump({"base": self._base, "patch": diff(self._last, data) or {"d": {}}})
        line = f"{zlib.crc32(body):08x} ".encode("ascii") + body + b"\n"
        with self.journal_path.open("ab") as fh:
            def half_line() -> None:  # what a kill in the middle of the write leaves behind
                fh.write(line[: len(line) // 2])
                fh.flush()

            kill_point("checkpoint", before=half_line)
            fh.write(line)
            fh.flush()
            os.fsync(fh.fileno())
        self._journal_bytes += len(line)


def _journal_patches(path: Path, base: str | None) -> list[dict[str, Any]]:
    """The patches of ``path`` for ``base``, in order, up to the first line cut or spoiled by a kill."""
    if base is None or not path.is_file():
        return []
    out = []
    for raw in path.read_bytes().split(b"\n")[:-1]:  # the part after the last newline is cut
        crc, _, body = raw.partition(b" ")
        try:
            if int(crc, 16) != zlib.crc32(body):
                break
            entry = json.loads(body)
        except ValueError:
            break
        if entry.get("base") == base and entry.get("patch") is not None:  # null: unchanged (older journals)
            out.append(entry["patch"])
    return out


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
    if not isinstance(data, dict) or data.get("version") not in READS:
        raise CheckpointError(f"{path}: checkpoint version {data.get('version') if isinstance(data, dict) else '?'}, "
                              f"this simulacra reads {', '.join(map(str, READS))}")
    journal = path.with_name(JOURNAL)
    for n, patch in enumerate(_journal_patches(journal, data.get("base")), 1):
        try:
            data = apply_patch(data, patch)
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            raise CheckpointError(f"{journal}: line {n} does not apply to the checkpoint: {err}") from None
    for key in ("ticks_done", "trace_bytes", "state", "memory"):
        if key not in data:
            raise CheckpointError(f"{path}: field '{key}' missing")
    return data
