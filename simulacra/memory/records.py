"""Plain records of the memory stream."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from simulacra.errors import MemoryRecordError, is_finite_number, is_whole
from simulacra.trace import LONG_TERM, SHORT_TERM, STATIC, RetrievedEntry
from simulacra.trace import reinforced_as_add as reinforced_as_add  # re-exported: it moved to simulacra.trace

#: Kinds of memory. ``observation``: something perceived; ``dialogue``: something said;
#: ``plan``: a plan step; ``event``: a world event witnessed; ``reflection``: a summary of others;
#: ``persona`` / ``world``: static facts; ``notice``: posted to the town's shared memory; ``conversation``: the
#: summary of a whole conversation, stored by each participant when it ends; ``intention``: something the agent
#: means to do and tell others (a scenario's seeded fact, :mod:`simulacra.evaluation`); ``summary``: the nightly
#: summary of an agent's day (:mod:`simulacra.cognition.summary`).
KINDS = ("observation", "dialogue", "plan", "event", "reflection", "persona", "world", "notice", "conversation",
         "intention", "summary")
_KINDS = frozenset(KINDS)

#: an agent's own tiers, in seed 003's retrieval order; the town's ``shared`` tier comes after them
TIERS = (STATIC, SHORT_TERM, LONG_TERM)


def memory_id(agent: str, timestamp: float, text: str) -> str:
    """Deterministic id of a memory: sha256 of (agent, game timestamp, text), 24 hex characters.

    The same event at the same game time maps to the same id, so writing it again overwrites instead of
    duplicating, in this process or after a restart (``hashlib``, never the salted built-in ``hash``).
    """
    key = f"{agent}\x1f{float(timestamp):.3f}\x1f{text}".encode()
    return hashlib.sha256(key).hexdigest()[:24]


@dataclass
class MemoryRecord:
    """One memory of one agent.

    Attributes:
        id: deterministic id (:func:`memory_id`).
        text: the memory's document.
        kind: one of :data:`KINDS`.
        rating: importance on 1..10 from the rater; ``None`` for static memories.
        timestamp: game minute the memory was formed; ``None`` for static memories.
        tick: tick at which it was formed (-1 for static).
        long_term_since: game minute it entered long-term, ``None`` while short-term.
        last_accessed: game minute of its last explicit access mark (a rehearsal), ``None`` if never.
        extra: further scalar metadata (``topic``, ``source``, ``evidence_ids`` ...).
    Raises:
        MemoryRecordError: (a ``ValueError``) an empty id or text, a kind not in :data:`KINDS`, a rating outside
            1..10, a game minute that is not a finite number.
    """

    id: str
    text: str
    kind: str
    rating: int | None = None
    timestamp: float | None = None
    tick: int = -1
    long_term_since: float | None = None
    last_accessed: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # checked once here, so that a record no store can hold never reaches one: a Chroma write that fails
        # after the in-process mirror took it would lose it and every later write of that tier. The common case
        # (plain str, int and float fields) is one expression; anything else is looked at closely.
        r, t, lt, la = self.rating, self.timestamp, self.long_term_since, self.last_accessed
        if (type(self.id) is str and self.id and type(self.text) is str and self.text and not self.text.isspace()
                and type(self.kind) is str and self.kind in _KINDS
                and (r is None or (type(r) is int and 1 <= r <= 10))
                and (t is None or (type(t) is float and math.isfinite(t)))
                and (lt is None or (type(lt) is float and math.isfinite(lt)))
                and (la is None or (type(la) is float and math.isfinite(la)))):
            return
        self._check()

    def _check(self) -> None:
        what = f"memory {self.id!r}"
        if not isinstance(self.id, str) or not self.id:
            raise MemoryRecordError(f"memory id must be a non-empty string, got {self.id!r}")
        if not isinstance(self.text, str) or not self.text.strip():
            raise MemoryRecordError(f"{what}: text must be a non-empty string, got {self.text!r:.80}")
        if not isinstance(self.kind, str) or self.kind not in _KINDS:
            raise MemoryRecordError(f"{what}: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.rating is not None and not (is_whole(self.rating) and 1 <= self.rating <= 10):
            raise MemoryRecordError(f"{what}: rating must be an integer 1..10 (or None for a static memory), got "
                                    f"{self.rating!r}")
        for name in ("timestamp", "long_term_since", "last_accessed"):
            value = getattr(self, name)
            if value is not None and not is_finite_number(value):
                raise MemoryRecordError(f"{what}: {name} must be a finite game minute (or None), got {value!r}")

    @property
    def evidence_ids(self) -> list[str]:
        """Ids of the memories a reflection rests on (stored comma-joined, as Chroma metadata is scalar)."""
        raw = self.extra.get("evidence_ids")
        return [i for i in str(raw).split(",") if i] if raw else []

    @property
    def depth(self) -> int:
        """0 for an experienced memory; a reflection is one deeper than its deepest evidence."""
        return int(self.extra.get("depth", 0))

    @property
    def decay_since(self) -> float | None:
        """Game minute the long-term decay of its importance counts from: the later of entering long-term and the
        last rehearsal (``last_accessed``, :meth:`~simulacra.memory.stream.AgentMemory.mark_accessed`), so that a
        long-term memory that keeps being used keeps its importance; ``None`` while short-term (no decay)."""
        if self.long_term_since is None:
            return None
        if self.last_accessed is None:
            return self.long_term_since
        return max(self.long_term_since, self.last_accessed)

    @property
    def span(self) -> tuple[float, float] | None:
        """The game minutes ``(start, end)`` the memory is about: the hours of the plan it states (a plan step's
        memory, a day's plan, the night's plan summary: from the first item's start to the last item's end;
        ``extra`` ``span_start`` / ``span_end``, :func:`span_extra`); ``(timestamp, timestamp)`` for every other
        memory; ``None`` for a static one. A query that names a time measures recency from the span
        (:func:`simulacra.memory.scoring.age_from`)."""
        if self.timestamp is None:
            return None
        lo, hi = self.extra.get("span_start"), self.extra.get("span_end")
        if lo is None or hi is None:
            return self.timestamp, self.timestamp
        return float(lo), float(hi)

    @property
    def importance_score(self) -> float | None:
        """Undecayed importance in [0, 1] (``rating / 10``), as seed 003 stores it."""
        return None if self.rating is None else self.rating / 10.0

    def to_metadata(self, clear_unset: bool = False) -> dict[str, Any]:
        """Chroma metadata: scalars only, no ``None`` values; with ``clear_unset`` the unset optional fields
        (``long_term_since``, ``last_accessed``) are given as ``None``, which a Chroma ``update`` takes as "remove
        the key" (an update merges metadata: a key left out keeps its old value)."""
        meta: dict[str, Any] = {"kind": self.kind, "tick": int(self.tick)}
        if clear_unset:
            meta.update(long_term_since=None, last_accessed=None)
        if self.rating is not None:
            meta["rating"] = int(self.rating)
            meta["importance_score"] = self.rating / 10.0
        if self.timestamp is not None:
            meta["timestamp"] = float(self.timestamp)
        if self.long_term_since is not None:
            meta["long_term_since"] = float(self.long_term_since)
        if self.last_accessed is not None:
            meta["last_accessed"] = float(self.last_accessed)
        for key, value in self.extra.items():
            if value is not None:
                meta[f"x_{key}"] = value
        return meta

    @classmethod
    def from_metadata(cls, id: str, text: str, meta: dict[str, Any]) -> MemoryRecord:
        """Inverse of :meth:`to_metadata`."""
        meta = meta or {}
        return cls(
            id=id,
            text=text,
            kind=str(meta.get("kind", "observation")),
            rating=int(meta["rating"]) if "rating" in meta else None,
            timestamp=float(meta["timestamp"]) if "timestamp" in meta else None,
            tick=int(meta.get("tick", -1)),
            long_term_since=float(meta["long_term_since"]) if "long_term_since" in meta else None,
            last_accessed=float(meta["last_accessed"]) if "last_accessed" in meta else None,
            extra={k[2:]: v for k, v in meta.items() if k.startswith("x_")},
        )


def span_extra(start: float, end: float) -> dict[str, float]:
    """The ``extra`` metadata of a memory about the game minutes ``start``..``end`` (:attr:`MemoryRecord.span`).

    Raises:
        ValueError: ``end`` before ``start``.
    """
    if end < start:
        raise ValueError(f"a memory's span ends before it starts: {start} .. {end}")
    return {"span_start": float(start), "span_end": float(end)}


def remarked(records: Iterable[MemoryRecord], marks: dict[str, float]) -> list[MemoryRecord]:
    """The records of ``records`` whose access mark differs from ``marks`` (``{id: game minute}``, as a checkpoint
    lists them; an id not listed has none), each with the mark of ``marks``: what puts a checkpoint's marks back."""
    return [replace(r, last_accessed=marks.get(r.id)) for r in records if r.last_accessed != marks.get(r.id)]


def _num(x: float | None) -> float:
    return math.nan if x is None else float(x)


@dataclass(frozen=True)
class RetrievedMemory:
    """One memory returned by a retrieval, with the terms of its score (``None`` where not applicable).

    ``relevance`` is the relevance in the score; under lexical or hybrid relevance (``memory.relevance``)
    ``dense`` (``1 / (1 + distance)``) and ``lexical`` (normalised BM25) are its parts, ``None`` under dense.
    ``recency``, ``importance`` and ``relevance`` are raw; under ``memory.normalize: minmax`` ``normalized`` holds
    them rescaled over the tier, as the score sums them.
    """

    id: str
    text: str
    tier: str
    kind: str
    recency: float | None
    importance: float | None
    relevance: float
    score: float
    record: MemoryRecord | None = None
    dense: float | None = None
    lexical: float | None = None
    #: under ``normalize: minmax``: the rescaled ``recency``, ``importance`` and ``relevance`` the score sums
    normalized: dict[str, float | None] | None = None

    def to_dict(self, digits: int = 6) -> RetrievedEntry:
        """JSON-able form with floats rounded to ``digits`` (the trace's form,
        :class:`~simulacra.trace.RetrievedEntry`)."""

        def r(x: float | None) -> float | None:
            return None if x is None or math.isnan(x) else round(float(x), digits)

        out: RetrievedEntry = {
            "id": self.id,
            "text": self.text,
            "tier": self.tier,
            "kind": self.kind,
            "recency": r(self.recency),
            "importance": r(self.importance),
            "relevance": r(self.relevance),
            "score": r(self.score),
        }
        if self.lexical is not None:  # lexical or hybrid relevance: its two parts (dense traces stay as they were)
            out["dense"] = r(self.dense)
            out["lexical"] = r(self.lexical)
        if self.normalized is not None:  # minmax scaling: the terms as summed (traces without it stay as they were)
            out["normalized"] = {k: r(v) for k, v in self.normalized.items()}
        return out

