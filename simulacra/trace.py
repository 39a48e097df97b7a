"""The run trace: ``database/<run>/trace.jsonl``, versioned JSON Lines.

Line 1 is a header ``{"type": "header", "schema_version", "config", "world", "personas", ...}``; then one
``{"type": "tick", ...}`` record per tick with positions, actions, utterances and every memory operation
(``add``, ``move``, ``forget``, ``post``, ``reflect``, ``retrieve`` with the score terms of each returned
memory). Keys are sorted, so the same seed with the offline backend writes byte-identical traces.

Schema 2 (this version) added to each ``retrieve`` its rule (``top_k``, ``threshold``, ``mode``, ``tiers``)
and ``candidates``: per tier, every memory other weights could have returned, ``[id, relevance,
importance, age_minutes]``, with floats written exactly (shortest round-trip form), so that
``simulacra rescore`` reproduces the engine's ranking bit for bit. Returned memories' terms are rounded to
6 digits for reading. Operations built by :meth:`simulacra.memory.stream.AgentMemory.retrieval_record` also
carry ``static_top_k``, ``static_threshold`` and ``max_top_k`` (the depth of the candidates); readers treat
them as absent in older schema-2 traces (no static budget; candidates for the header's ``memory.max_top_k``
rule, else for ``top_k``).
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from simulacra.errors import CheckpointError, SimulacraError
from simulacra.killpoint import kill_point

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalar
        return _clean(value.item())
    return value


def _scalar(value: Any) -> Any:
    """``json.dumps``'s ``default``: a numpy scalar as its Python value; anything else is not JSON."""
    if hasattr(value, "item") and callable(value.item):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


def dumps(record: dict[str, Any]) -> str:
    """One trace line: sorted keys, floats exact (NaN and infinities as null), UTF-8 text kept as is.

    Written directly when the record holds only JSON values, string keys and numpy scalars (a tick's record: the
    walk of :func:`_clean` over its hundred thousand values took about 1 s per game day at 25 agents); a record
    with a NaN or an infinity, or keys of mixed types, goes through :func:`_clean` first (same bytes; int and float
    keys are written as ``str`` writes them either way; a record has no bool or ``None`` keys)."""
    try:
        return json.dumps(record, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False,
                          default=_scalar, check_circular=False)
    except (ValueError, TypeError):
        return json.dumps(_clean(record), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


class TraceWriter:
    """Appends records to a trace file, flushing each line (a killed run keeps every finished tick).

    Args:
        path: the ``trace.jsonl`` to write; header: written as line 1 of a new file.
        resume_at: instead of starting a new file, keep the first ``resume_at`` bytes of the existing one (a
            checkpoint's trace length: a header and whole tick lines) and append after them.

    Attributes:
        size: bytes in the file after the last record written.
    Raises:
        CheckpointError: ``resume_at`` is longer than the file, or does not end a line.
    """

    def __init__(self, path: str | Path, header: dict[str, Any] | None = None, resume_at: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_at is None:
            self._fh = self.path.open("wb")
            self.size = 0
            self.write({"type": "header", "schema_version": SCHEMA_VERSION, **(header or {})})
            return
        fh = self.path.open("r+b")
        try:
            length = fh.seek(0, 2)
            if length < resume_at:
                raise CheckpointError(f"{self.path}: {length} bytes, shorter than the {resume_at} bytes its checkpoint "
                                      f"recorded; the trace was cut outside simulacra")
            fh.seek(max(resume_at - 1, 0))
            if resume_at and fh.read(1) != b"\n":
                raise CheckpointError(f"{self.path}: byte {resume_at} of the checkpoint does not end a line")
            fh.truncate(resume_at)
        finally:
            fh.close()
        self._fh = self.path.open("ab")
        self.size = resume_at

    def write(self, record: dict[str, Any]) -> None:
        data = (dumps(record) + "\n").encode("utf-8")

        def half_line() -> None:  # what a kill in the middle of the write leaves behind
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()

        if record.get("type") == "tick":
            kill_point("trace", before=half_line)
        self._fh.write(data)
        self._fh.flush()
        self.size += len(data)

    def sync(self) -> None:
        """Force the written lines to disk (``fsync``), before a checkpoint refers to them."""
        self._fh.flush()
        os.fsync(self._fh.fileno())

    @property
    def closed(self) -> bool:
        return self._fh.closed

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()


class TraceFormatError(SimulacraError, ValueError):
    """A trace file is malformed; the message names the file and line."""


def read_trace(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Read a trace: ``(header, tick records)``. Accepts a run folder or the ``trace.jsonl`` path.

    Raises:
        TraceFormatError: missing header, unknown schema version, or a malformed line.
    """
    header, ticks = stream_trace(path)
    return header, list(ticks)


def stream_trace(path: str | Path) -> tuple[dict[str, Any], Iterator[dict[str, Any]]]:
    """A trace's header and its tick records one at a time, for a reader that need not hold a long trace.

    The header is read (and validated) at once; the ticks as the iterator is advanced (the file stays open until
    it is exhausted or dropped). Accepts a run folder or the ``trace.jsonl`` path.

    Raises:
        TraceFormatError: missing header or unknown schema version (at once); a malformed line (when reached).
    """
    records = iter_trace(path)
    for _, header in records:
        return header, (record for _, record in records)
    raise TraceFormatError(f"{path}: empty trace")


def read_header(path: str | Path) -> dict[str, Any]:
    """The header (line 1) of a trace, without reading the rest (which may end in a half-written line).

    Raises:
        TraceFormatError: no trace there, or line 1 is not a valid header.
    """
    return stream_trace(path)[0]


def iter_trace(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, record)``; validates the header on line 1.

    A last line without its newline that is not a whole record is the tick a killed run was writing
    (:class:`TraceWriter` writes each line whole or, killed, part of it): it is left out with a warning, so a
    killed run reads up to its last complete tick.

    Raises:
        TraceFormatError: no trace there, an invalid header, or a malformed complete line (naming file and line).
    """
    p = Path(path)
    if p.is_dir():
        p = p / "trace.jsonl"
    if not p.is_file():
        raise TraceFormatError(f"{p}: no trace there (expected a run folder database/<run> or its trace.jsonl)")
    with p.open("rb") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                record = json.loads(line)  # bytes: a line cut inside a UTF-8 character fails here too
            except ValueError as err:
                if not line.endswith(b"\n"):
                    log.warning("%s: line %d was cut while it was written (a killed run); read up to line %d",
                                p, n, n - 1)
                    return
                raise TraceFormatError(f"{p}: line {n}: {getattr(err, 'msg', err)}") from None
            if n == 1:
                if record.get("type") != "header":
                    raise TraceFormatError(f"{p}: line 1 is not a header")
                if record.get("schema_version") != SCHEMA_VERSION:
                    raise TraceFormatError(
                        f"{p}: schema version {record.get('schema_version')}, this simulacra reads {SCHEMA_VERSION}"
                    )
            yield n, record


def line_source(line: dict[str, Any]) -> str:
    """Where a conversation line of a tick record came from: ``scripted``, ``llm`` or ``fallback``
    (:data:`simulacra.cognition.mind.Source`). The writer (:func:`simulacra.tick.converse_stage`) leaves the key out
    for a scripted line."""
    return str(line.get("source", "scripted"))
