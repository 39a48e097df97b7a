"""Replaying a run's recorded calls (``llm_calls.jsonl``) when the run is resumed: answers already paid for are
not bought again.

:class:`~simulacra.llm.RecordingModel` appends one line per request sent. When a killed run is resumed
(:meth:`simulacra.simulation.Simulation.resume`), :func:`simulacra.llm.build_model` puts a
:class:`ReplayingModel` just outside the budget and the recorder: it indexes the recorded answers by their request
(:func:`request_key`: model, messages, ``max_tokens``, ``temperature``, ``seed``, ``json_schema``), in recorded
order, and answers a request identical to a recorded one from the record instead of sending it (the first unused
record of that request; a request asked twice takes the two records in order). Anything else is sent as usual.

What is replayed: only answers (records with ``error: null``), truncated ones included. A recorded failure is
not replayed: the request is sent again, so a run stopped because its server went away can go on once the
server is back. Records made before the checkpoint belong to ticks already done: once the checkpoint is read,
:meth:`ReplayingModel.keep_from` drops them, so that a later identical request (another day's) gets its own
record, as it did in the uninterrupted run; the set-up's calls (the rater's start-up quality check) come first
in the file and are replayed before that. A replayed answer is not recorded again (the file stays the list of
requests actually sent) and goes through the usage meter like a sent one, so a resumed run counts what the
uninterrupted run counted; :attr:`ReplayingModel.replayed` counts it separately. It does not go through the
budget: the budget takes up every request in the file (:meth:`~simulacra.llm.BudgetedModel.take_up`), so what
was sent is charged once, and a request the run was refused is refused again however the resumed tick orders
its concurrent requests.

A last line cut by a kill is removed from the file (:func:`load_calls`) before the run appends to it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from simulacra.llm.base import Completion, LanguageModel
from simulacra.llm.wrappers import _Wrapper

log = logging.getLogger(__name__)


def request_key(model: str, messages: Sequence[dict], max_tokens: int, temperature: float, seed: int | None,
                json_schema: dict | None) -> str:
    """Hex sha256 of a request's canonical JSON (keys sorted); equal requests, live or read back from
    ``llm_calls.jsonl``, give equal keys."""
    canonical = json.dumps([model, [dict(m) for m in messages], max_tokens, temperature, seed, json_schema],
                           sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def record_key(record: dict[str, Any]) -> str:
    """:func:`request_key` of a line of ``llm_calls.jsonl``."""
    return request_key(record["model"], record["messages"], record["max_tokens"], record["temperature"],
                       record["seed"], record["json_schema"])


def call_files(run_dir: str | Path) -> list[tuple[int | None, Path]]:
    """``(shard or None, path)`` of every ``llm_calls.jsonl`` a run folder holds: the run's own (``None``; a run in
    one process) and each Ray worker's (``shard-<k>/``, by ``k``); a run resumed in another shape can have both."""
    from simulacra.llm.factory import CALLS_FILE

    run_dir = Path(run_dir)
    out: list[tuple[int | None, Path]] = [(None, run_dir / CALLS_FILE)]
    shards = []
    for d in run_dir.glob("shard-*"):
        suffix = d.name[len("shard-"):]
        if suffix.isdigit() and (d / CALLS_FILE).is_file():
            shards.append((int(suffix), d / CALLS_FILE))
    return [(k, f) for k, f in out + sorted(shards) if f.is_file()]


def load_calls(path: str | Path, repair: bool = True) -> list[dict[str, Any]]:
    """The records of ``llm_calls.jsonl`` in file order (``[]`` when there is no file).

    A last line without its newline (the process was killed while writing it) is not a record; with ``repair``
    it is cut from the file so that the next record starts on its own line. A malformed complete line is
    skipped with a warning naming file and line.
    """
    path = Path(path)
    if not path.is_file():
        return []
    data = path.read_bytes()
    end = data.rfind(b"\n") + 1
    if end < len(data):
        log.warning("%s: its last line was cut by a kill (%d bytes); it is dropped", path, len(data) - end)
        if repair:
            with path.open("r+b") as fh:
                fh.truncate(end)
    out = []
    for n, line in enumerate(data[:end].splitlines(), 1):
        try:
            record = json.loads(line)
            record_key(record)
        except (ValueError, KeyError, TypeError) as err:
            log.warning("%s line %d: not a recorded call (%s); skipped", path, n, err)
            continue
        out.append(record)
    return out


class ReplayingModel(_Wrapper):
    """Answers requests identical to recorded ones from the record (module docstring), the rest from ``inner``.

    Args:
        inner: the model that sends (normally the :class:`~simulacra.llm.RecordingModel`).
        records: the run's recorded calls in file order (:func:`load_calls`).

    Attributes:
        recorded: how many records the file held when the run was resumed (the position new records start at).
        replayed: requests answered from the record (since the run started: a checkpoint carries it).
    """

    COUNTERS = ("replayed",)

    def __init__(self, inner: LanguageModel, records: Sequence[dict[str, Any]]):
        super().__init__(inner)
        self.records = list(records)
        self.recorded = len(self.records)
        self.replayed = 0
        self._lock = threading.Lock()
        self._queues: dict[str, deque[int]] = {}
        for i, r in enumerate(self.records):
            if r.get("error") is None and r.get("answer") is not None:
                self._queues.setdefault(record_key(r), deque()).append(i)

    @property
    def pending(self) -> int:
        """Recorded answers not replayed (yet)."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def keep_from(self, first: int) -> None:
        """Forget the records before position ``first`` that were not replayed (the ticks a checkpoint already
        holds asked them)."""
        with self._lock:
            for key in list(self._queues):
                q = deque(i for i in self._queues[key] if i >= first)
                if q:
                    self._queues[key] = q
                else:
                    del self._queues[key]

    def answers_before(self, end: int) -> Iterator[tuple[dict[str, Any], Completion]]:
        """``(record, completion)`` of each answered record before position ``end``, in file order (to prime a
        cache as the uninterrupted run had it)."""
        for r in self.records[:end]:
            if r.get("error") is None and r.get("answer") is not None:
                yield r, _completion(r)

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        key = request_key(self.name, messages, max_tokens, temperature, seed, json_schema)
        with self._lock:
            q = self._queues.get(key)
            index = q.popleft() if q else None
            if q is not None and not q:
                del self._queues[key]
            if index is not None:
                self.replayed += 1
        if index is not None:
            return _completion(self.records[index])
        return self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                   json_schema=json_schema)


def _completion(record: dict[str, Any]) -> Completion:
    """The answer a record holds; it took no time now."""
    return Completion(text=record["answer"], model=record.get("answered_by") or record["model"],
                      prompt_tokens=int(record.get("prompt_tokens") or 0),
                      completion_tokens=int(record.get("completion_tokens") or 0), latency_s=0.0,
                      finish_reason=record.get("finish_reason"))


__all__ = ["ReplayingModel", "load_calls", "record_key", "request_key"]
