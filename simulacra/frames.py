"""A run's trace as pandas DataFrames, one table per kind of record (issue 24 §2), for notebooks.

:func:`read_frames` reads ``database/<run>/trace.jsonl`` once, line by line (a long trace is never held whole; a
killed run's cut last line is left out, :func:`simulacra.trace.iter_trace`), and the run's ``llm_calls.jsonl``
files when a language model was used; :class:`Frames` holds the tables and writes them to Parquet. pandas (and
pyarrow, for Parquet) come with the ``analysis`` extra and are imported only when a table is built, so importing
this module needs neither.

Conventions of every table:

* **Game time**: ``tick`` (the tick's number, from 0), ``time`` (absolute game minute of the tick's start; day 1
  starts at minute 0), ``day`` (game day, from 1) and ``clock`` (``"HH:MM"`` of the tick's start). A tick lasts the
  header's ``tick_minutes`` game minutes; every game-time column is in game minutes.
* **Labels** (agent ids, places, ops, tiers, kinds, sources, purposes) are categoricals of strings: agent columns
  have the run's agents as categories (header order), place columns the world's places (world file order), whether
  or not they occur; others what occurs, sorted. A label column without a single value is plain ``str`` (an empty
  categorical does not survive a Parquet round trip). Free text is ``str``; a missing number is ``NaN`` (floats)
  or ``<NA>`` (``Int64``).
* **Lists** (memory ids, knowers) are Python lists in ``object`` columns (numpy arrays once read back from Parquet).
* A run without a table's records (no conversation yet, no model) gives that table empty, with its columns.

Tables (:data:`COLUMNS` lists the columns and their dtypes):

``positions``: one row per agent per tick (``ticks x agents`` rows), where the agent is at the tick's end and
    what it does: ``agent``, ``place`` (place id), ``action`` (``act`` / ``move`` / ...), ``activity``,
    ``partner`` (the agent it talks with, if any), ``routine_index`` (entry of its persona's routine),
    ``plan_start`` (game minute its day plan starts), the plan step in force (``step_start`` game minute,
    ``step_activity``, ``step_place``; the action differs while the agent walks there) and ``asleep`` (asleep
    during the tick: perceives, retrieves and says nothing).
``lines``: one row per conversation line, in the order said: ``conversation`` (run-wide number of the
    conversation in trace order, from 0; the trace gives conversations no id), ``line`` (its number within the
    conversation, from 0), ``speaker``, ``listener``, ``place``, ``text``, ``topic`` (the news it tells, if
    any), ``source`` (``scripted``, ``llm`` or ``fallback``, :func:`simulacra.trace.line_source`) and
    ``memory_ids`` (the memories in the speaker's view or prompt for the line).
``memory_ops``: one row per memory operation of the trace, in trace order: ``agent`` (``<NA>`` for a notice
    posted to the town's shared memory: see ``author``), ``op`` (``add``, ``move``, ``forget``, ``reinforce``,
    ``rehearse``, ``reflect``, ``retrieve``, ``post``), ``memory_id``, ``tier`` (for ``move`` the tier it left),
    ``to_tier`` (``move``), ``kind``, ``rating`` (1..10, as rated), ``importance`` (0..1: as recorded for
    ``move`` / ``forget`` / ``reinforce``, long-term decay included; for ``add`` / ``post`` ``rating / 10``, the
    importance when written), ``timestamp`` (game minute the memory was formed), ``text``, ``reason``
    (``forget``, ``rehearse``), ``author`` (``post``: ``world`` or an agent id), ``purpose``, ``query``,
    ``profile`` (``retrieve``), ``memory_ids`` (``retrieve``: the ids returned, best placed first; ``rehearse``:
    the ids marked; ``reinforce``: the short-term ids folded in; ``reflect``: the insights' ids),
    ``evidence_ids`` (``reflect``: its evidence; ``add`` of a reflection or day summary: what it rests on),
    ``depth`` (reflection depth) and ``topic`` (``add``, ``reinforce``: the news the memory carries, when tagged;
    missing in traces written before stop 43).
``retrievals``: one row per memory a ``retrieve`` operation returned (a retrieval that returned nothing has no
    row): ``retrieval`` (run-wide number of the retrieve operation, from 0), ``agent``, ``query``, ``purpose``
    (``focus``, ``plan``, ``reaction``, ``conversation with <id>``, ...), ``profile`` (retrieval profile), ``mode``
    (``cascade`` / ``merged``), ``top_k``, ``threshold``, ``rank`` (1 = first of what the retrieval returned,
    the order the mind saw), ``memory_id``, ``tier``, ``kind``, ``text``, the terms ``recency``, ``importance``,
    ``relevance`` (``NaN`` for a static memory's recency and importance), ``dense`` and ``lexical`` (the two
    parts of a lexical or hybrid relevance), ``score``, the terms as summed under ``normalize: minmax``
    (``recency_scaled``, ``importance_scaled``, ``relevance_scaled``) and the weights of the retrieval's profile
    in the run's config (``a_rec``, ``a_imp``, ``a_rel``): ``score = a_rec * recency + a_imp * importance + a_rel
    * relevance`` with a ``NaN`` term counting 0 (:func:`simulacra.memory.scoring.combine`; the scaled terms under
    minmax), to the trace's 6 digits.
``decisions``: per tick, one row per decision the trace records, then one per conversation line that is not a
    fallback: ``agent``, ``kind`` (``plan_day``, ``next_actions``, ``react``, ``engagement``, ``line``, ``summary``),
    ``source`` (``scripted`` / ``llm`` / ``fallback``), ``memory_ids`` (the memories in the decision's view or
    prompt), ``reason`` (a fallback's), ``value`` (what was decided, as JSON text) and ``recorded_as``
    (``decision``: a record of the tick's ``decisions``; ``line``: a line of ``lines``). The trace records every
    day plan, reaction and engagement, a ``next_actions`` decision only when it came from a model or had memories in
    view, and a line or conversation summary as a decision only when it fell back; every line carries its
    memory ids, so lines are added here; a summary that did not fall back leaves no decision.
``model_calls``: one row per request sent to a language model (``llm_calls.jsonl`` of the run, and of each Ray
    worker's ``shard-<k>/``): ``call`` (its number among its file's records, from 0), ``shard`` (``<NA>``: the
    run's own file), ``wall_time`` (UTC, wall clock: the file records no game time), ``model``, ``answered_by``,
    ``schema`` (the title of the JSON schema the answer was asked under, e.g. ``day_plan``, ``line``: what the
    call was for; ``<NA>`` without one, e.g. the rater's ratings), ``max_tokens``, ``temperature``, ``seed``,
    ``prompt_tokens``, ``completion_tokens``, ``total_tokens`` (``<NA>`` for a failed call), ``latency_s``
    (seconds), ``cost_usd`` (the run's ``llm`` prices, :func:`simulacra.llm.wrappers.token_cost`; ``NaN`` for a
    failed call), ``finish_reason``, ``error`` and ``ok``. The file records neither the agent nor the tick a
    call was made for. Empty for a run without a model.
``diffusion``: per world event (of the header's world) and tick, from the tick the event starts in (an event
    before the run's start: from the first tick) to the last, how far its news has travelled by the tick's end:
    ``event`` (its number in the world file, from 0), ``event_text``, ``event_place``, ``event_time`` (game
    minute), ``event_day``, ``known`` (agents knowing it), ``new`` (of which first knew it at this tick),
    ``share`` (``known`` / agents in the run), ``knowers`` (their ids, sorted), ``remembered`` (agents holding a
    short- or long-term memory of it at the tick's end) and ``rememberers`` (their ids, sorted). Knowing is the
    rule of the town state (:mod:`simulacra.news`: seen, told by a scenario, or heard as a line's topic), so the
    last tick's ``knowers`` are the run summary's ``events[].known_by``; remembering is
    :func:`simulacra.news.is_memory_of` on the memories the trace shows held
    (:meth:`simulacra.viewer.memory.MemoryIndex.held_spans`), so the last tick's ``rememberers`` are its
    ``remembered_by``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulacra.clock import day_number
from simulacra.errors import SimulacraError
from simulacra.trace import (
    ADD,
    FALLBACK,
    LINE,
    MOVE,
    POST,
    REFLECT,
    REHEARSE,
    REINFORCE,
    RETRIEVE,
    Header,
    MemoryOp,
    RetrieveOp,
    TickRecord,
    line_source,
    stream_trace,
)

if TYPE_CHECKING:
    from pandas import DataFrame

#: the tables of :class:`Frames`, in order
TABLES = ("positions", "lines", "memory_ops", "retrievals", "decisions", "model_calls", "diffusion")

_TIME = {"tick": "int", "time": "int", "day": "int", "clock": "str"}

#: per table, its columns and their kind: ``int`` (int64), ``Int`` (nullable Int64), ``float`` (float64), ``bool``,
#: ``str``, ``cat`` (categorical of strings; ``str`` when the column holds no value), ``list`` (object column of
#: lists), ``utc`` (datetime64[us, UTC])
COLUMNS: dict[str, dict[str, str]] = {
    "positions": {**_TIME, "agent": "cat", "place": "cat", "action": "cat", "activity": "str", "partner": "cat",
                  "routine_index": "Int", "plan_start": "Int", "step_start": "Int", "step_activity": "str",
                  "step_place": "cat", "asleep": "bool"},
    "lines": {**_TIME, "conversation": "int", "line": "int", "speaker": "cat", "listener": "cat", "place": "cat",
              "text": "str", "topic": "str", "source": "cat", "memory_ids": "list"},
    "memory_ops": {**_TIME, "agent": "cat", "op": "cat", "memory_id": "str", "tier": "cat", "to_tier": "cat",
                   "kind": "cat", "rating": "Int", "importance": "float", "timestamp": "float", "text": "str",
                   "reason": "str", "author": "cat", "purpose": "cat", "query": "str", "profile": "cat",
                   "memory_ids": "list", "evidence_ids": "list", "depth": "Int", "topic": "str"},
    "retrievals": {**_TIME, "retrieval": "int", "agent": "cat", "query": "str", "purpose": "cat", "profile": "cat",
                   "mode": "cat", "top_k": "Int", "threshold": "float", "rank": "int", "memory_id": "str",
                   "tier": "cat", "kind": "cat", "text": "str", "recency": "float", "importance": "float",
                   "relevance": "float", "dense": "float", "lexical": "float", "score": "float",
                   "recency_scaled": "float", "importance_scaled": "float", "relevance_scaled": "float",
                   "a_rec": "float", "a_imp": "float", "a_rel": "float"},
    "decisions": {**_TIME, "agent": "cat", "kind": "cat", "source": "cat", "memory_ids": "list", "reason": "str",
                  "value": "str", "recorded_as": "cat"},
    "model_calls": {"call": "int", "shard": "Int", "wall_time": "utc", "model": "cat", "answered_by": "cat",
                    "schema": "cat", "max_tokens": "Int", "temperature": "float", "seed": "Int",
                    "prompt_tokens": "Int", "completion_tokens": "Int", "total_tokens": "Int", "latency_s": "float",
                    "cost_usd": "float", "finish_reason": "cat", "error": "str", "ok": "bool"},
    "diffusion": {"event": "int", "event_text": "cat", "event_place": "cat", "event_time": "int", "event_day": "int",
                  **_TIME, "known": "int", "new": "int", "share": "float", "knowers": "list", "remembered": "int",
                  "rememberers": "list"},
}

_INSTALL = "pip install 'simulacra[analysis]'"
#: label columns whose categories are the run's agents (header order), or its world's places (world file order)
_AGENT_COLUMNS = ("agent", "speaker", "listener", "partner")
_PLACE_COLUMNS = ("place", "step_place", "event_place")


def _pandas():
    """pandas, or a :class:`SimulacraError` saying how to install it."""
    try:
        import pandas
    except ImportError:
        raise SimulacraError(f"run tables need pandas, which is not installed: {_INSTALL}") from None
    return pandas


@dataclass(frozen=True, repr=False)
class Frames:
    """A run's tables (module docstring: columns, units, what each row is). Every attribute is a
    ``pandas.DataFrame`` with the columns of :data:`COLUMNS` and a default ``RangeIndex``."""

    positions: DataFrame
    lines: DataFrame
    memory_ops: DataFrame
    retrievals: DataFrame
    decisions: DataFrame
    model_calls: DataFrame
    diffusion: DataFrame

    def tables(self) -> dict[str, DataFrame]:
        """``{table name: DataFrame}`` in the order of :data:`TABLES`."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def to_parquet(self, folder: str | Path) -> list[Path]:
        """Write each table to ``folder/<name>.parquet`` (the folder is created; existing files are replaced);
        returns the paths in the order of :data:`TABLES`. ``pandas.read_parquet`` reads each back equal (lists
        as numpy arrays).

        Raises:
            SimulacraError: pyarrow is not installed.
        """
        try:
            import pyarrow  # noqa: F401 - pandas' Parquet engine
        except ImportError:
            raise SimulacraError(f"writing Parquet needs pyarrow, which is not installed: {_INSTALL}") from None
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        paths = []
        for name, df in self.tables().items():
            path = folder / f"{name}.parquet"
            df.to_parquet(path, index=False, engine="pyarrow")
            paths.append(path)
        return paths

    def __repr__(self) -> str:
        return "<Frames " + ", ".join(f"{n}: {len(df)} rows" for n, df in self.tables().items()) + ">"


class _Table:
    """Columns of one table filled row by row (a missing value is ``None``)."""

    def __init__(self, name: str):
        self.name = name
        self.cols: dict[str, list] = {c: [] for c in COLUMNS[name]}

    def add(self, **values: Any) -> None:
        for col, out in self.cols.items():
            out.append(values.get(col))

    def frame(self, pd, vocab: dict[str, list[str]]) -> DataFrame:
        return pd.DataFrame({col: _series(pd, values, COLUMNS[self.name][col], vocab.get(col))
                             for col, values in self.cols.items()})


def _series(pd, values: list, kind: str, vocab: list[str] | None = None):
    if kind == "int":
        return pd.Series(values, dtype="int64")
    if kind == "Int":
        return pd.Series(pd.array(values, dtype="Int64"))
    if kind == "float":
        return pd.Series(values, dtype="float64")
    if kind == "bool":
        return pd.Series(values, dtype="bool")
    if kind == "list":
        out = pd.Series([None] * len(values), dtype=object)
        for i, v in enumerate(values):  # element by element: pandas would read lists of equal length as a table
            out.iat[i] = v
        return out
    if kind == "utc":
        return pd.to_datetime(pd.Series(values, dtype="str"), utc=True, format="ISO8601").astype("datetime64[us, UTC]")
    s = pd.Series(values, dtype="str")
    if kind != "cat" or not s.notna().any():
        return s
    known = list(vocab or ())
    categories = known + sorted(set(s.dropna()) - set(known))  # the run's agents, places first, in their order
    return s.astype(pd.CategoricalDtype(pd.Index(categories, dtype="str")))


def _parse_step(key: str | None) -> tuple[int | None, str | None, str | None]:
    """A tick record's plan step key ``"<start>|<activity>|<place>"`` (:func:`simulacra.tick.decide_stage`) as
    ``(start game minute, activity, place)``."""
    if not key:
        return None, None, None
    start, _, rest = key.partition("|")
    activity, _, place = rest.rpartition("|")
    return (int(start) if start.lstrip("-").isdigit() else None), activity, place


def read_frames(run_dir: str | Path) -> Frames:
    """The tables of a run, finished or killed (module docstring: columns and units).

    Args:
        run_dir: the run folder (``database/<run>``) or its ``trace.jsonl``.
    Returns:
        :class:`Frames`; a table the run has no records for is empty, with its columns.
    Raises:
        TraceFormatError: no trace there, a header that is not valid, or a malformed line (naming file and line).
        SimulacraError: pandas is not installed (``pip install 'simulacra[analysis]'``).
    """
    pd = _pandas()
    run_dir = Path(run_dir)
    if run_dir.name == "trace.jsonl" and not run_dir.is_dir():
        run_dir = run_dir.parent
    header, records = stream_trace(run_dir / "trace.jsonl")
    return _read(pd, run_dir, header, records)


def _read(pd, run_dir: Path, header: Header, records: Iterable[TickRecord]) -> Frames:
    from simulacra.news import KnownNews
    from simulacra.viewer.memory import MemoryIndex

    agents = list(header["agents"])
    memory = (header.get("config") or {}).get("memory") or {}
    t = {name: _Table(name) for name in TABLES}
    weights: dict[str, tuple[float, float, float]] = {}
    news = KnownNews(header)
    held = MemoryIndex(header, retrievals=False)
    ticks: list[tuple[int, int, int, str]] = []
    conversations = retrievals = 0
    for rec in records:
        tick, now, clock = int(rec["tick"]), int(rec["time"]), str(rec["clock"])
        day = day_number(now)
        when = {"tick": tick, "time": now, "day": day, "clock": clock}
        ticks.append((tick, now, day, clock))
        asleep = set(rec.get("asleep", ()))
        for pid in agents:
            act = rec["actions"].get(pid)
            plan = rec.get("plans", {}).get(pid)
            start, activity, place = _parse_step(plan["step"] if plan is not None else None)
            t["positions"].add(**when, agent=pid, place=rec["positions"].get(pid),
                               action=act["type"] if act is not None else None,
                               activity=act["activity"] if act is not None else None,
                               partner=act.get("partner") if act is not None else None,
                               routine_index=act.get("routine_index") if act is not None else None,
                               plan_start=plan["start"] if plan is not None else None,
                               step_start=start, step_activity=activity, step_place=place, asleep=pid in asleep)
        for conv in rec["conversations"]:
            for n, ln in enumerate(conv["lines"]):
                t["lines"].add(**when, conversation=conversations, line=n, speaker=ln["speaker"],
                               listener=ln["listener"], place=conv["place"], text=ln["text"], topic=ln["topic"],
                               source=line_source(ln), memory_ids=list(ln.get("memory_ids", ())))
            conversations += 1
        for op in rec["memory"]:
            _memory_op(t["memory_ops"], when, op)
            if op["op"] == RETRIEVE:
                _retrieval_rows(t["retrievals"], when, op, retrievals, _weights(weights, memory, op))
                retrievals += 1
        for d in rec.get("decisions", ()):
            t["decisions"].add(**when, agent=d["agent"], kind=d["kind"], source=d["source"],
                               memory_ids=list(d["memory_ids"]), reason=d.get("reason"), value=_json(d["value"]),
                               recorded_as="decision")
        for conv in rec["conversations"]:
            for ln in conv["lines"]:
                if line_source(ln) != FALLBACK:  # a fallback line is among the tick's decisions already
                    t["decisions"].add(**when, agent=ln["speaker"], kind=LINE, source=line_source(ln),
                                       memory_ids=list(ln.get("memory_ids", ())), value=_json(ln["text"]),
                                       recorded_as="line")
        news.read(rec)
        held.extend([rec])
    _diffusion(t["diffusion"], header, ticks, news, held)
    _model_calls(t["model_calls"], run_dir, header)
    places = list((header.get("world") or {}).get("places") or {})
    vocab = {**dict.fromkeys(_AGENT_COLUMNS, agents), **dict.fromkeys(_PLACE_COLUMNS, places)}
    return Frames(**{name: table.frame(pd, vocab) for name, table in t.items()})


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def _memory_op(table: _Table, when: dict[str, Any], op: MemoryOp) -> None:
    # every column an operation of its kind has (the rest stay missing); read by name, so one mapping serves all
    row: dict[str, Any] = {"agent": op.get("agent"), "op": op["op"], "memory_id": op.get("id"),
                           "tier": op.get("tier"), "kind": op.get("kind"), "rating": op.get("rating"),
                           "importance": op.get("importance"), "timestamp": op.get("timestamp"),
                           "text": op.get("text"), "reason": op.get("reason"), "evidence_ids": op.get("evidence_ids"),
                           "depth": op.get("depth"), "topic": op.get("topic")}
    if op["op"] in (ADD, POST) and row["importance"] is None and row["rating"] is not None:
        row["importance"] = row["rating"] / 10.0  # seed 003: importance = rating / 10 (decay starts later)
    if op["op"] == MOVE:
        row.update(tier=op["from"], to_tier=op["to"])
    elif op["op"] == REHEARSE:
        row["memory_ids"] = list(op["ids"])
    elif op["op"] == REINFORCE:
        row["memory_ids"] = list(op["from_ids"])
    elif op["op"] == REFLECT:
        row.update(memory_ids=[i["id"] for i in op["insights"]], evidence_ids=list(op["evidence"]))
    elif op["op"] == RETRIEVE:
        row.update(memory_ids=[m["id"] for m in op["results"]], purpose=op["purpose"], query=op["query"],
                   profile=op.get("profile"))
    elif op["op"] == POST:
        row["author"] = op["author"]
    table.add(**when, **row)


def _weights(cache: dict[str, tuple[float, float, float]], memory: dict[str, Any], op: RetrieveOp
             ) -> tuple[float, float, float]:
    """``(a_rec, a_imp, a_rel)`` of the retrieval's profile in the run's ``memory`` config (as ``rescore``)."""
    from simulacra.config import SITUATIONAL

    profile = op.get("profile") or SITUATIONAL
    if profile not in cache:
        from simulacra.memory.scoring import ScoringParams
        from simulacra.rescore import scoring_overrides

        p = ScoringParams.from_config(memory, **scoring_overrides(memory, profile))
        cache[profile] = (p.a_rec, p.a_imp, p.a_rel)
    return cache[profile]


def _retrieval_rows(table: _Table, when: dict[str, Any], op: RetrieveOp, number: int,
                    weights: tuple[float, float, float]) -> None:
    a_rec, a_imp, a_rel = weights
    for rank, m in enumerate(op["results"], start=1):
        scaled = m.get("normalized") or {}
        table.add(**when, retrieval=number, agent=op["agent"], query=op["query"], purpose=op["purpose"],
                  profile=op.get("profile"), mode=op["mode"], top_k=op["top_k"],
                  threshold=op["threshold"], rank=rank, memory_id=m["id"], tier=m["tier"],
                  kind=m["kind"], text=m["text"], recency=m["recency"], importance=m["importance"],
                  relevance=m["relevance"], dense=m.get("dense"), lexical=m.get("lexical"), score=m["score"],
                  recency_scaled=scaled.get("recency"), importance_scaled=scaled.get("importance"),
                  relevance_scaled=scaled.get("relevance"), a_rec=a_rec, a_imp=a_imp, a_rel=a_rel)


def _diffusion(table: _Table, header: Header, ticks: list[tuple[int, int, int, str]], news, held) -> None:
    from simulacra.world.model import Event

    tm = int(header["tick_minutes"])
    n = len(news.agents)
    for i, raw in enumerate((header.get("world") or {}).get("events") or ()):
        ev = Event.model_validate(raw)
        first = news.first.get(ev.text, {})
        for tick, now, day, clock in ticks:
            if now + tm <= ev.minute:  # not begun by the tick's end
                continue
            knowers = sorted(a for a, w in first.items() if w.tick <= tick)
            holding = sorted(held.held_at(ev.text, tick))
            table.add(event=i, event_text=ev.text, event_place=ev.place, event_time=ev.minute,
                      event_day=ev.day, tick=tick, time=now, day=day, clock=clock, known=len(knowers),
                      new=sum(1 for w in first.values() if w.tick == tick), share=len(knowers) / n if n else 0.0,
                      knowers=knowers, remembered=len(holding), rememberers=holding)


def _model_calls(table: _Table, run_dir: Path, header: Header) -> None:
    from simulacra.llm.replay import call_files, load_calls
    from simulacra.llm.wrappers import token_cost

    files = call_files(run_dir)
    if not files:
        return

    llm = (header.get("config") or {}).get("llm") or {}
    prices = float(llm.get("prompt_price_per_1k") or 0.0), float(llm.get("completion_price_per_1k") or 0.0)
    for shard, path in files:
        for n, r in enumerate(load_calls(path, repair=False)):  # reading does not write: a cut last line stays
            prompt, completion = r.get("prompt_tokens"), r.get("completion_tokens")
            total = cost = None
            if prompt is not None and completion is not None:
                total, cost = prompt + completion, token_cost(prompt, completion, *prices)
            schema = r.get("json_schema")
            table.add(call=n, shard=shard, wall_time=r.get("time"), model=r.get("model"),
                      answered_by=r.get("answered_by"),
                      schema=schema.get("title") if isinstance(schema, dict) else None,
                      max_tokens=r.get("max_tokens"), temperature=r.get("temperature"), seed=r.get("seed"),
                      prompt_tokens=prompt, completion_tokens=completion,
                      total_tokens=total, latency_s=r.get("latency_s"), cost_usd=cost,
                      finish_reason=r.get("finish_reason"), error=r.get("error"), ok=r.get("error") is None)
