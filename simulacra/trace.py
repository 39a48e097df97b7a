"""The run trace: ``database/<run>/trace.jsonl``, versioned JSON Lines: its records, their writer and their reader.

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

**Record types.** Every record is typed here, once, as a ``TypedDict``: :class:`Header`, :class:`TickRecord` and what a
tick holds (:class:`ActionRecord`, :class:`PlanState`, :class:`ConversationRecord` with its :class:`LineRecord` lines,
:class:`DecisionRecord`, :class:`ProbeRecord`), and each memory operation, a union tagged by ``op`` (:data:`MemoryOp`:
:class:`AddOp`, :class:`PostOp`, :class:`MoveOp`, :class:`ForgetOp`, :class:`ReinforceOp`, :class:`RehearseOp`,
:class:`ReflectOp`, :class:`RetrieveOp`). At run time they are plain dicts: when a trace is read only each line's frame
is checked (:func:`iter_trace`: a header, then tick records of consecutive ticks with the keys every tick record has,
:data:`TICK_KEYS`; a reader goes over GB traces), and the types cost nothing; for mypy they are checked shapes (a key
misspelt, missing or unknown is an error). A ``NotRequired`` key is one the writer leaves out of some records (written
only when it applies), or one that older schema-2 traces lack (a tick's ``decisions`` and ``plans``, a conversation's
``summary``, a line's ``memory_ids``, a retrieval's ``profile``, ...): readers use ``.get`` for those and index the
others (mypy checks the key of an index, not the key of a ``.get``). Writers build records through the constructors
below (:func:`add_op`, :func:`line_record`, ...), so that each record's shape is written in one place; readers compare
with the constants (:data:`ADD`, :data:`SHORT_TERM`, :data:`PLAN_DAY`, :data:`FALLBACK`, ...), not with bare strings.
``tests/test_records.py`` runs mypy over the writers and readers (``[tool.mypy]`` of ``pyproject.toml``) and checks
every record of a real run's trace against these types, so that the types cannot drift from the bytes.
"""

import json
import logging
import math
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, Literal, cast

from simulacra.errors import CheckpointError, SimulacraError, is_whole
from simulacra.killpoint import kill_point

if sys.version_info >= (3, 11):
    from typing import NotRequired, TypedDict
else:  # typing's TypedDict of 3.10 does not know NotRequired (typing_extensions comes with pydantic)
    from typing_extensions import NotRequired, TypedDict

# No ``from __future__ import annotations`` here: a TypedDict's ``__required_keys__`` are only right when its
# annotations are evaluated at class creation (tests/test_records.py reads them).

log = logging.getLogger(__name__)

SCHEMA_VERSION = 2

# --------------------------------------------------------------------------- names
#: ``type`` of the two kinds of line
HEADER: Final = "header"
TICK: Final = "tick"

#: ``op`` of a memory operation (:data:`MemoryOp`)
ADD: Final = "add"  # a memory written to an agent's short-term (perceived, said, heard) or long-term tier
POST: Final = "post"  # a notice written to the town's shared tier
MOVE: Final = "move"  # consolidation moved a memory from short-term to long-term
FORGET: Final = "forget"  # consolidation or decay deleted a memory
REINFORCE: Final = "reinforce"  # consolidation folded repeated memories into one new long-term memory
REHEARSE: Final = "rehearse"  # memories marked accessed (their long-term decay restarts)
REFLECT: Final = "reflect"  # a reflection: focal points, evidence, insights (each also an ``add``)
RETRIEVE: Final = "retrieve"  # a retrieval, with its rule, results and candidates
OPS: Final = (ADD, POST, MOVE, FORGET, REINFORCE, REHEARSE, REFLECT, RETRIEVE)

#: memory tiers: an agent's own (in retrieval order), then the town's
STATIC: Final = "static"
SHORT_TERM: Final = "short_term"
LONG_TERM: Final = "long_term"
SHARED: Final = "shared"

#: ``kind`` of a decision record (:class:`DecisionRecord`)
PLAN_DAY: Final = "plan_day"  # the day plan made at wake-up
NEXT_ACTIONS: Final = "next_actions"  # the next hours decomposed into actions
REACT: Final = "react"  # a reaction to a salient percept
ENGAGEMENT: Final = "engagement"  # go to an engagement heard of (a party), or not
LINE: Final = "line"  # a conversation line (recorded as a decision when it fell back)
SUMMARY: Final = "summary"  # a conversation's summary (recorded as a decision when it fell back)
DECISION_KINDS: Final = (PLAN_DAY, NEXT_ACTIONS, REACT, ENGAGEMENT, LINE, SUMMARY)

#: where a decision or a line came from (:data:`simulacra.cognition.mind.Source`)
Source = Literal["scripted", "llm", "fallback"]
SCRIPTED: Final = "scripted"
LLM: Final = "llm"
FALLBACK: Final = "fallback"


# --------------------------------------------------------------------------- the header
class Header(TypedDict):
    """Line 1 (:meth:`simulacra.simulation.Simulation._header`; ``type`` and ``schema_version`` added by
    :class:`TraceWriter`)."""

    type: Literal["header"]
    schema_version: int
    simulacra_version: str
    seed: int
    config: dict[str, Any]  # Config.to_dict()
    mind: str
    embedding_model: str
    workers: NotRequired[int]  # a run on Ray: its number of workers
    world_file: str
    inputs: dict[str, dict[str, str]]  # {"world" | "personas": {absolute path: sha256}}
    personas_dir: str
    world: dict[str, Any]  # World.model_dump
    personas: dict[str, dict[str, Any]]  # agent id -> Persona.model_dump
    agents: list[str]
    start_minute: int
    tick_minutes: int
    objects: dict[str, str]  # object -> its state at the start
    scenario: NotRequired[dict[str, Any]]  # a scenario run: the scenario as recorded (simulacra.evaluation)


# --------------------------------------------------------------------------- memory operations
class RetrievedEntry(TypedDict):
    """One memory a retrieval returned (:meth:`simulacra.memory.records.RetrievedMemory.to_dict`): its score
    terms rounded to 6 digits, ``None`` where a term does not apply (a static memory's recency and importance)."""

    id: str
    text: str
    tier: str
    kind: str
    recency: float | None
    importance: float | None
    relevance: float | None
    score: float | None
    dense: NotRequired[float | None]  # lexical or hybrid relevance: its dense part
    lexical: NotRequired[float | None]  # ... and its lexical part
    normalized: NotRequired[dict[str, float | None]]  # normalize: minmax: the terms as the score sums them


class AddOp(TypedDict):
    """A memory written to an agent's tier (:meth:`AgentMemory.add`, :meth:`AgentMemory.add_long_term`)."""

    op: Literal["add"]
    agent: str
    tier: str  # SHORT_TERM, or LONG_TERM (reflections, day summaries)
    id: str
    text: str
    kind: str  # simulacra.memory.records.KINDS
    rating: int | None  # 1..10
    timestamp: float | None  # game minute it was formed
    evidence_ids: NotRequired[list[str]]  # a reflection or a day summary: the memories it rests on
    depth: NotRequired[int]  # ... and its depth
    topic: NotRequired[str]  # the news it carries (``extra["topic"]``), when tagged; absent in older traces


class PostOp(TypedDict):
    """A notice written to the town's shared tier (:func:`simulacra.tick.remember_stage`)."""

    op: Literal["post"]
    tier: str  # SHARED
    author: str  # "world" or an agent id
    id: str
    text: str
    kind: str
    rating: int | None
    timestamp: float | None


# "from" is a Python keyword: the functional form
MoveOp = TypedDict("MoveOp", {
    "op": Literal["move"],
    "agent": str,
    "id": str,
    "from": str,  # SHORT_TERM
    "to": str,  # LONG_TERM
    "text": str,
    "importance": float,  # rating / 10
    "retold": NotRequired[int],  # news told n times raised its rating (memory.retold_bonus)
})
MoveOp.__doc__ = "A short-term memory consolidation moved to long-term (:meth:`AgentMemory.consolidate`)."


class ForgetOp(TypedDict):
    """A memory deleted by consolidation (short-term, not important enough) or decay (long-term)."""

    op: Literal["forget"]
    agent: str
    id: str
    tier: str
    text: str
    importance: float | None  # rating / 10 (short-term); the decayed importance (long-term)
    reason: str


class ReinforceOp(TypedDict):
    """Repeated memories folded into one new long-term memory (:meth:`AgentMemory._reinforce`)."""

    op: Literal["reinforce"]
    agent: str
    id: str  # the new long-term memory
    tier: str  # LONG_TERM
    replaces: list[str]  # the long-term memory it replaces ([] or one id)
    from_ids: list[str]  # the short-term memories folded in
    text: str
    kind: str
    rating: int | None
    importance: float
    timestamp: float | None
    first_observed: float
    repeats: int
    topic: NotRequired[str]  # the news it carries, when tagged (as :class:`AddOp`)


class RehearseOp(TypedDict):
    """Memories marked accessed at ``time`` (:meth:`AgentMemory.mark_accessed`), ``tiers`` per id."""

    op: Literal["rehearse"]
    agent: str
    ids: list[str]
    tiers: list[str]
    reason: str
    time: float


class FocalPoint(TypedDict):
    id: str
    text: str


class Insight(TypedDict):
    """An insight of a reflection (also written as an ``add`` of kind ``reflection``)."""

    id: str
    text: str
    evidence_ids: list[str]
    depth: int
    rating: int | None


class ReflectOp(TypedDict):
    """A reflection (:func:`simulacra.tick.reflect_stage`), traced whether or not it found insights."""

    op: Literal["reflect"]
    agent: str
    importance_accumulated: float
    focal_points: list[FocalPoint]
    evidence: list[str]  # memory ids
    insights: list[Insight]


#: a candidate of a ``retrieve``: ``[id, relevance, importance | None, age_minutes | None]``, floats exact
CandidateRow = list[Any]


class RetrieveOp(TypedDict):
    """A retrieval (:meth:`AgentMemory.retrieval_record`): query, rule, results, and per tier the candidates any
    other weights could have returned (``None``: a tier too large to record)."""

    op: Literal["retrieve"]
    agent: str
    query: str
    purpose: str  # focus, plan, reaction, engagement, conversation with <id>, ...
    profile: NotRequired[str]  # the retrieval profile (absent in traces written before profiles: situational)
    results: list[RetrievedEntry]
    mode: str  # cascade | merged
    top_k: int
    threshold: float
    static_top_k: NotRequired[int | None]  # absent in older schema-2 traces: no static budget
    static_threshold: NotRequired[float | None]
    tiers: list[str]  # asked, in order
    max_top_k: NotRequired[int]  # the depth of the candidates (absent in older schema-2 traces)
    candidates: dict[str, list[CandidateRow] | None]
    relevance: NotRequired[str]  # lexical or hybrid relevance (memory.relevance) ...
    hybrid_weight: NotRequired[float]  # ... with its weight
    fusion: NotRequired[str]  # "rrf" under reciprocal-rank fusion ...
    rrf_k: NotRequired[float]  # ... with its k
    normalize: NotRequired[str]  # "minmax" ...
    ranges: NotRequired[dict[str, list[float | None]]]  # ... with per tier [rel min, max, imp min, max, age min, max]
    named_time: NotRequired[list]  # [start, end, words]: the window a dated retrieval measured recency from
    speech: NotRequired[list]  # [speaker, listener, words]: who spoke to whom the query named (memory.speech_roles)


#: an entry of a tick's ``memory`` list, tagged by ``op``
MemoryOp = AddOp | PostOp | MoveOp | ForgetOp | ReinforceOp | RehearseOp | ReflectOp | RetrieveOp


# --------------------------------------------------------------------------- the tick record
class ActionRecord(TypedDict):
    """An agent's action of the tick (:meth:`simulacra.cognition.plan.Action.to_dict`)."""

    type: str  # act | move | talk
    activity: str
    place: str  # where it is at the tick's end
    routine_index: NotRequired[int]  # the routine entry it follows
    path: NotRequired[list[str]]  # a move: the places passed through
    partner: NotRequired[str]  # a talk: with whom


class PlanState(TypedDict):
    """An agent's plan as the tick leaves it: its day plan's start, the step in force
    (``"<start>|<activity>|<place>"``)."""

    start: int | None
    step: str | None


class LineRecord(TypedDict):
    """A conversation line (:func:`simulacra.tick.converse_stage`)."""

    speaker: str
    listener: str
    text: str
    topic: str | None  # the news it tells
    source: NotRequired[Source]  # left out for a scripted line (:func:`line_source`)
    memory_ids: NotRequired[list[str]]  # the memories in the speaker's view or prompt (absent in older traces)


class HistoryEnd(TypedDict):
    """What a conversation-history strategy still showed when the conversation ended."""

    strategy: str
    summary: str | None
    verbatim: int  # the last lines shown word for word


class ConversationRecord(TypedDict):
    participants: list[str]  # opener first
    place: str
    lines: list[LineRecord]
    summary: NotRequired[str]  # absent in older schema-2 traces
    history: NotRequired[HistoryEnd]  # a language-model mind speaking line by line


class DecisionRecord(TypedDict):
    """A decision of a mind (:func:`simulacra.tick.decision_record`): who, what kind (:data:`DECISION_KINDS`),
    from where, the memories in its view or prompt, what it decided."""

    agent: str
    kind: str
    source: Source
    memory_ids: list[str]
    value: Any  # plan_day / next_actions: [PlanItem.to_dict()]; react, engagement: a dict; line, summary: text
    reason: NotRequired[str]  # a fallback's


class ProbeAsk(TypedDict):
    agent: str
    about: str  # "fact:<id>", "event:<n>", "plan:<day>"
    query: str
    results: dict[str, list[str]]  # profile -> memory ids, best first
    answer: NotRequired[str]  # with the probe's answer: the mind's answer ...
    answer_source: NotRequired[Source]
    answer_ids: NotRequired[list[str]]


class ProbeRecord(TypedDict):
    """A scenario's recall probe (:func:`simulacra.schedule.probe_stage`)."""

    time: int  # the game minute the stores are read at: the tick's end
    profiles: list[str]
    interview: str
    asks: list[ProbeAsk]
    memories: dict[str, list[Any]]  # id -> [text, kind, tier, timestamp]
    counts: dict[str, dict[str, int]]  # agent -> tier -> memories


class TickRecord(TypedDict):
    """One line per tick (:meth:`simulacra.simulation.Simulation.step`)."""

    type: Literal["tick"]
    tick: int
    time: int  # game minute of the tick's start
    clock: str  # "HH:MM"
    positions: dict[str, str]  # agent -> place at the tick's end
    actions: dict[str, ActionRecord]
    events: list[str]  # world events beginning in the tick
    object_changes: dict[str, str]
    conversations: list[ConversationRecord]
    decisions: NotRequired[list[DecisionRecord]]  # absent in older schema-2 traces, as ``plans`` ...
    plans: NotRequired[dict[str, PlanState]]
    memory: list[MemoryOp]
    asleep: NotRequired[list[str]]  # agents asleep during the tick (when any)
    probes: NotRequired[ProbeRecord]  # a scenario's recall probe (when one is due)


#: a line of a trace
TraceRecord = Header | TickRecord


# --------------------------------------------------------------------------- constructors (the writers' shapes)
def add_op(agent: str, tier: str, id: str, text: str, kind: str, rating: int | None, timestamp: float | None,
           evidence_ids: list[str] | None = None, depth: int | None = None, topic: str | None = None) -> AddOp:
    """An ``add``; ``evidence_ids`` and ``depth`` (a reflection's or a day summary's) and ``topic`` (the news the
    memory carries) are written when given."""
    op: AddOp = {"op": ADD, "agent": agent, "tier": tier, "id": id, "text": text, "kind": kind, "rating": rating,
                 "timestamp": timestamp}
    if evidence_ids is not None:
        op["evidence_ids"] = evidence_ids
    if depth is not None:
        op["depth"] = depth
    if topic is not None:
        op["topic"] = topic
    return op


def post_op(author: str, id: str, text: str, kind: str, rating: int | None, timestamp: float | None) -> PostOp:
    """A ``post`` to the town's shared tier."""
    return {"op": POST, "tier": SHARED, "author": author, "id": id, "text": text, "kind": kind, "rating": rating,
            "timestamp": timestamp}


def move_op(agent: str, id: str, text: str, importance: float, retold: int | None = None) -> MoveOp:
    """A ``move`` from short-term to long-term; ``retold`` is written when given."""
    op: MoveOp = {"op": MOVE, "agent": agent, "id": id, "from": SHORT_TERM, "to": LONG_TERM, "text": text,
                  "importance": importance}
    if retold is not None:
        op["retold"] = retold
    return op


def forget_op(agent: str, id: str, tier: str, text: str, importance: float | None, reason: str) -> ForgetOp:
    return {"op": FORGET, "agent": agent, "id": id, "tier": tier, "text": text, "importance": importance,
            "reason": reason}


def reinforce_op(agent: str, id: str, replaces: list[str], from_ids: list[str], text: str, kind: str,
                 rating: int | None, importance: float, timestamp: float | None, first_observed: float,
                 repeats: int, topic: str | None = None) -> ReinforceOp:
    op: ReinforceOp = {"op": REINFORCE, "agent": agent, "id": id, "tier": LONG_TERM, "replaces": replaces,
                       "from_ids": from_ids, "text": text, "kind": kind, "rating": rating, "importance": importance,
                       "timestamp": timestamp, "first_observed": first_observed, "repeats": repeats}
    if topic is not None:
        op["topic"] = topic
    return op


def rehearse_op(agent: str, ids: list[str], tiers: list[str], reason: str, time: float) -> RehearseOp:
    return {"op": REHEARSE, "agent": agent, "ids": ids, "tiers": tiers, "reason": reason, "time": time}


def reflect_op(agent: str, importance_accumulated: float, focal_points: list[FocalPoint], evidence: list[str],
               insights: list[Insight]) -> ReflectOp:
    return {"op": REFLECT, "agent": agent, "importance_accumulated": importance_accumulated,
            "focal_points": focal_points, "evidence": evidence, "insights": insights}


def retrieve_op(agent: str, query: str, purpose: str, profile: str, results: list[RetrievedEntry], mode: str,
                top_k: int, threshold: float, static_top_k: int | None, static_threshold: float | None,
                tiers: list[str], max_top_k: int, candidates: dict[str, list[CandidateRow] | None],
                lexical: tuple[str, float] | None = None, rrf_k: float | None = None,
                minmax_ranges: dict[str, list[float | None]] | None = None,
                named_time: list | None = None, speech: list | None = None) -> RetrieveOp:
    """A ``retrieve``.

    Args:
        named_time: when the query named a time (``dated`` profiles), ``[start, end, words]``: the window in game
            minutes that recency was measured from and the words that named it; the candidates' ages are then
            distances to that window.
        lexical: under lexical or hybrid relevance, ``(relevance, hybrid_weight)``, written as those keys.
        rrf_k: under reciprocal-rank fusion its ``k``, written with ``fusion: "rrf"``.
        minmax_ranges: under ``normalize: minmax`` the tiers' extremes, written as ``ranges`` with ``normalize``.
        speech: when the query named who spoke or who listened (``memory.speech_roles``), ``[speaker, listener,
            words]`` (``None`` for a side not named): the memories of lines said the other way were left out of the
            results and the candidates (:mod:`simulacra.memory.speech`).
    """
    op: RetrieveOp = {"op": RETRIEVE, "agent": agent, "query": query, "purpose": purpose, "profile": profile,
                      "results": results, "mode": mode, "top_k": top_k, "threshold": threshold,
                      "static_top_k": static_top_k, "static_threshold": static_threshold, "tiers": tiers,
                      "max_top_k": max_top_k, "candidates": candidates}
    if lexical is not None:
        op["relevance"], op["hybrid_weight"] = lexical
    if rrf_k is not None:
        op["fusion"] = "rrf"
        op["rrf_k"] = rrf_k
    if minmax_ranges is not None:
        op["normalize"] = "minmax"
        op["ranges"] = minmax_ranges
    if named_time is not None:
        op["named_time"] = named_time
    if speech is not None:
        op["speech"] = speech
    return op


def line_record(speaker: str, listener: str, text: str, topic: str | None, source: Source,
                memory_ids: list[str]) -> LineRecord:
    """A conversation line; ``source`` is left out for a scripted line (:func:`line_source`)."""
    line: LineRecord = {"speaker": speaker, "listener": listener, "text": text, "topic": topic,
                        "memory_ids": memory_ids}
    if source != SCRIPTED:
        line["source"] = source
    return line


def conversation_record(participants: list[str], place: str, lines: list[LineRecord], summary: str,
                        history: HistoryEnd | None = None) -> ConversationRecord:
    conv: ConversationRecord = {"participants": participants, "place": place, "lines": lines, "summary": summary}
    if history is not None:
        conv["history"] = history
    return conv


def decision_record(agent: str, kind: str, source: Source, memory_ids: list[str], value: Any,
                    reason: str | None = None) -> DecisionRecord:
    """A decision; ``reason`` is written when not empty."""
    rec: DecisionRecord = {"agent": agent, "kind": kind, "source": source, "memory_ids": memory_ids, "value": value}
    if reason:
        rec["reason"] = reason
    return rec


def reinforced_as_add(op: ReinforceOp) -> AddOp:
    """The ``add`` operation equivalent to the memory a ``reinforce`` operation writes
    (:meth:`~simulacra.memory.stream.AgentMemory.consolidate` with ``memory.reinforce_repeats``), for readers of
    the trace that collect added memories."""
    return add_op(op["agent"], LONG_TERM, op["id"], op["text"], op["kind"], op["rating"], op["timestamp"],
                  topic=op.get("topic"))


def line_source(line: LineRecord) -> Source:
    """Where a conversation line of a tick record came from: ``scripted``, ``llm`` or ``fallback``
    (:data:`simulacra.cognition.mind.Source`). The writer (:func:`line_record`) leaves the key out for a scripted
    line."""
    return line.get("source", SCRIPTED)


# --------------------------------------------------------------------------- writing
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


def dumps(record: Mapping[str, Any]) -> str:
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
        path: the ``trace.jsonl`` to write; header: written as line 1 of a new file (a :class:`Header`; ``type``
            and ``schema_version`` are set here).
        resume_at: instead of starting a new file, keep the first ``resume_at`` bytes of the existing one (a
            checkpoint's trace length: a header and whole tick lines) and append after them.

    Attributes:
        size: bytes in the file after the last record written.
    Raises:
        CheckpointError: ``resume_at`` is longer than the file, or does not end a line.
    """

    def __init__(self, path: str | Path, header: Mapping[str, Any] | None = None, resume_at: int | None = None):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if resume_at is None:
            self._fh = self.path.open("wb")
            self.size = 0
            self.write({"type": HEADER, "schema_version": SCHEMA_VERSION, **(header or {})})
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

    def write(self, record: Mapping[str, Any]) -> None:
        data = (dumps(record) + "\n").encode("utf-8")

        def half_line() -> None:  # what a kill in the middle of the write leaves behind
            self._fh.write(data[: len(data) // 2])
            self._fh.flush()

        if record.get("type") == TICK:
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


# --------------------------------------------------------------------------- reading
class TraceFormatError(SimulacraError, ValueError):
    """A trace file is malformed; the message names the file and line."""


def read_trace(path: str | Path) -> tuple[Header, list[TickRecord]]:
    """Read a trace: ``(header, tick records)``. Accepts a run folder or the ``trace.jsonl`` path.

    Raises:
        TraceFormatError: missing header, unknown schema version, or a malformed line.
    """
    header, ticks = stream_trace(path)
    return header, list(ticks)


def stream_trace(path: str | Path) -> tuple[Header, Iterator[TickRecord]]:
    """A trace's header and its tick records one at a time, for a reader that need not hold a long trace.

    The header is read (and validated) at once; the ticks as the iterator is advanced (the file stays open until
    it is exhausted or dropped). Accepts a run folder or the ``trace.jsonl`` path.

    Raises:
        TraceFormatError: missing header or unknown schema version (at once); a malformed line (when reached).
    """
    records = cast(Iterator[tuple[int, Any]], iter_trace(path))
    for _, header in records:
        return header, (record for _, record in records)
    raise TraceFormatError(f"{path}: empty trace")


def require_header(header: Header | Mapping[str, Any], keys: Iterable[str], path: str | Path, needs: str) -> None:
    """That the trace ``header`` (of the trace at ``path``) holds each of ``keys`` as an object (``"tick_minutes"``
    and ``"start_minute"`` as numbers), which the tool ``needs`` (e.g. ``"simulacra interview"``) reads beyond
    :data:`HEADER_KEYS`.

    Raises:
        TraceFormatError: naming the first key missing or of the wrong kind, the file and the tool.
    """
    for key in keys:
        value = header.get(key)
        numeric = key in ("tick_minutes", "start_minute")
        if value is None or (numeric and (isinstance(value, bool) or not isinstance(value, (int, float))))\
                or (not numeric and not isinstance(value, dict)):
            raise TraceFormatError(f"{path}: line 1: the header's {key!r} is {_kind(value)}, expected "
                                   f"{'a number' if numeric else 'an object'} ({needs} reads it)")


def check_tick(tick: Any, first: int, count: int, where: str | Path) -> int:
    """``tick`` when it is a whole number from ``first`` to ``first + count - 1`` (the ticks of the trace at
    ``where``), the one check of a tick asked for (``simulacra inspect``, ``interview --tick``).

    Raises:
        SimulacraError: not a whole number, or outside the trace (naming ``where`` and the range).
    """
    span = f"{first}..{first + count - 1}"
    if not is_whole(tick):
        raise SimulacraError(f"tick: expected a whole number of the trace ({span}), got {type(tick).__name__} "
                             f"{tick!r}")
    if not first <= tick < first + count:
        raise SimulacraError(f"{where}: tick {tick} is outside the trace ({span})")
    return int(tick)


def tick_end(tick_time: float, header: Header | Mapping[str, Any]) -> float:
    """The game minute a tick that began at ``tick_time`` ends at (``tick_time`` + the header's ``tick_minutes``):
    the moment the stores hold after it, at which an interview of that tick and ``simulacra tune``'s queries
    without a time are asked."""
    return float(tick_time) + float(header.get("tick_minutes") or 0)


def agent_names(header: Header | Mapping[str, Any], agents: Iterable[str] | None = None) -> dict[str, str]:
    """Agent id -> the resident's name, as the header's ``personas`` give it, for ``agents`` (default the header's
    ``agents``, in order); an agent without a persona or a name there is named by its id (a hand-made trace)."""
    personas = header.get("personas") or {}
    return {a: str((personas.get(a) or {}).get("name") or a)
            for a in (header.get("agents") or [] if agents is None else agents)}


def read_header(path: str | Path) -> Header:
    """The header (line 1) of a trace, without reading the rest (which may end in a half-written line).

    Raises:
        TraceFormatError: no trace there, or line 1 is not a valid header.
    """
    return stream_trace(path)[0]


def trace_has_ticks(path: str | Path) -> bool:
    """Whether the trace of run folder (or ``trace.jsonl``) ``path`` holds anything after its header line: a tick
    record, whole or cut. Reads two lines at most; ``False`` when there is no trace."""
    p = Path(path)
    p = p / "trace.jsonl" if p.is_dir() else p
    if not p.is_file():
        return False
    with p.open("rb") as fh:
        fh.readline()
        return bool(fh.readline().strip())


def iter_trace(path: str | Path) -> Iterator[tuple[int, TraceRecord]]:
    """Yield ``(line number, record)``: the :class:`Header` (line 1, validated), then the :class:`TickRecord` s.

    Records are parsed and their frame checked, not validated whole (a reader of a GB trace pays for little more than
    ``json.loads``): line 1 is an object with ``type`` ``header``, this :data:`SCHEMA_VERSION` and the keys of
    :data:`HEADER_KEYS`; every later line an object with ``type`` ``tick``, the keys of :data:`TICK_KEYS` (each of its
    JSON type: a list, an object, ...; their contents are not checked) and an integer ``tick`` one more than the line
    before's (the first may be any; the engine starts at 0, and a resumed run truncates the file to its checkpoint and
    appends, so one file never repeats or skips a tick, nor holds a second header). Past that, a record's shape is the
    writer's (:class:`TickRecord`).
    A last line without its newline that is not a whole record is the tick a killed run was writing
    (:class:`TraceWriter` writes each line whole or, killed, part of it): it is left out with a warning, so a
    killed run reads up to its last complete tick.

    Raises:
        TraceFormatError: no trace there, an invalid header, a malformed complete line, a line that is not a tick
            record, or a tick out of sequence (a line repeated, lines lost, two traces joined), naming the file, the
            line and the field.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "trace.jsonl"
    if not p.is_file():
        raise TraceFormatError(f"{p}: no trace there (expected a run folder database/<run> or its trace.jsonl)")
    frame = FrameCheck(p)
    with p.open("rb") as fh:
        for line in fh:
            try:
                record = frame.read(line)
            except _NotJSON:
                if not line.endswith(b"\n"):
                    log.warning("%s: line %d was cut while it was written (a killed run); read up to line %d",
                                p, frame.lines, frame.lines - 1)
                    return
                raise
            yield frame.lines, record


class _NotJSON(TraceFormatError):
    """A trace line that does not parse (which, last and without its newline, is a killed run's cut line)."""


class FrameCheck:
    """A trace's lines, read one after the other: parsed and their frame checked as :func:`iter_trace` describes
    (one rule for every reader: :func:`iter_trace`, and the live viewer's
    :class:`simulacra.viewer.state.TraceFollower`)."""

    def __init__(self, path: Path):
        self.path = path
        self.lines = 0  # lines read so far: the number of the last one
        self.previous: int | None = None  # the tick of the line before

    def read(self, line: bytes) -> Any:
        """The next line's record (line 1: the header).

        Raises:
            TraceFormatError: the line is not JSON (bytes: a line cut inside a UTF-8 character too), not the
                record expected there, or a tick out of sequence; naming the file and the line.
        """
        self.lines += 1
        n, p = self.lines, self.path
        try:
            record = json.loads(line)
        except ValueError as err:
            raise _NotJSON(f"{p}: line {n}: {getattr(err, 'msg', err)}") from None
        if n == 1:
            _check_header(record, p)
            return record
        tick = _check_tick(record, p, n)
        if self.previous is not None and tick != self.previous + 1:
            raise TraceFormatError(f"{p}: line {n}: tick {tick} follows tick {self.previous}: "
                                   f"{_tick_gap(tick, self.previous)}")
        self.previous = tick
        return record


#: keys every header has (every writer wrote them; readers index them); the header's other keys are not checked when
#: a trace is read
HEADER_KEYS: Final = ("agents", "config")
#: the keys every tick record has (:class:`TickRecord`'s required keys: every writer writes them and the readers index
#: them), each with the JSON type it holds; ``decisions``, ``plans``, ``asleep`` and ``probes`` may be absent
TICK_KEYS: Final = {"tick": int, "time": (int, float), "clock": str, "positions": dict, "actions": dict,
                    "events": list, "object_changes": dict, "conversations": list, "memory": list}


_EXPECTED: Final[dict[Any, str]] = {int: "an integer", (int, float): "a number", str: "a string", dict: "an object",
                                    list: "a list"}


def _kind(value: Any) -> str:
    """What a JSON value that should have been a record is, for a message."""
    if isinstance(value, dict):
        if not value:
            return "an empty object"
        kind = value.get("type")
        return "an object without 'type'" if kind is None else f"an object with 'type': {json.dumps(kind)}"
    names = {list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


def _check_header(record: Any, p: Path) -> None:
    """Line 1: a header of this schema with :data:`HEADER_KEYS`, else :class:`TraceFormatError`."""
    if not isinstance(record, dict) or record.get("type") != HEADER:
        raise TraceFormatError(f"{p}: line 1: expected the trace header (an object with 'type': 'header'), got "
                               f"{_kind(record)}")
    if record.get("schema_version") != SCHEMA_VERSION:
        raise TraceFormatError(
            f"{p}: schema version {record.get('schema_version')}, this simulacra reads {SCHEMA_VERSION}"
        )
    missing = [k for k in HEADER_KEYS if k not in record]
    if missing:
        raise TraceFormatError(f"{p}: line 1: the header has no {', '.join(repr(k) for k in missing)}")
    if not isinstance(record["agents"], list):
        raise TraceFormatError(f"{p}: line 1: the header's 'agents' is {_kind(record['agents'])}, expected a list")
    if not isinstance(record["config"], dict):
        raise TraceFormatError(f"{p}: line 1: the header's 'config' is {_kind(record['config'])}, expected an "
                               f"object")


def _check_tick(record: Any, p: Path, n: int) -> int:
    """Line ``n`` > 1: a tick record with :data:`TICK_KEYS` (else :class:`TraceFormatError`); its tick."""
    if type(record) is not dict or record.get("type") != TICK:
        if isinstance(record, dict) and record.get("type") == HEADER:
            raise TraceFormatError(f"{p}: line {n}: a second header (two traces joined?); a trace has one, line 1")
        raise TraceFormatError(f"{p}: line {n}: expected a tick record (an object with 'type': 'tick'), got "
                               f"{_kind(record)}")
    missing = [k for k in TICK_KEYS if k not in record]
    if missing:
        raise TraceFormatError(f"{p}: line {n}: the tick record has no {', '.join(repr(k) for k in missing)}")
    tick = record["tick"]
    if type(tick) is not int or tick < 0:
        raise TraceFormatError(f"{p}: line {n}: 'tick' is {json.dumps(tick)}, expected a tick number (an integer "
                               f">= 0)")
    if type(record["time"]) not in (int, float):
        raise TraceFormatError(f"{p}: line {n}: 'time' is {json.dumps(record['time'])}, expected a game minute (a "
                               f"number)")
    for key, kind in TICK_KEYS.items():
        if type(record[key]) not in (kind if isinstance(kind, tuple) else (kind,)):
            raise TraceFormatError(f"{p}: line {n}: {key!r} is {_kind(record[key])}, expected {_EXPECTED[kind]}")
    return tick


def _tick_gap(tick: int, previous: int) -> str:
    """Why tick ``tick`` cannot follow ``previous`` in one trace."""
    if tick == previous:
        return "a line repeated or two traces joined"
    if tick < previous:
        return "two traces joined, or lines out of order"
    return f"{tick - previous - 1} tick(s) missing (lines deleted?)"
