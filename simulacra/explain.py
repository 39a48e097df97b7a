"""What one agent perceived, remembered, retrieved and did at one tick, reconstructed from a run's trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from simulacra.clock import format_game_time
from simulacra.errors import SimulacraError
from simulacra.memory.speech import describe_speech
from simulacra.memory.timecue import describe_named
from simulacra.trace import (
    ADD,
    FORGET,
    MOVE,
    NEXT_ACTIONS,
    PLAN_DAY,
    POST,
    REFLECT,
    REHEARSE,
    REINFORCE,
    RETRIEVE,
    DecisionRecord,
    TickRecord,
    TraceFormatError,
    check_tick,
    line_source,
    read_trace,
    require_header,
)

PERCEIVED = ("observation", "event")


def explain_tick(run: str | Path, agent: str, tick: int) -> dict[str, Any]:
    """Agent ``agent`` at tick ``tick`` of ``run``, from the trace alone.

    Returns:
        ``{"agent", "name", "tick", "clock", "when" ("day 2 (Sunday, rest day) 09:00"), "asleep", "place",
        "action", "perceived": [texts], "remembered": [{text, kind, rating, tier}], "said": [texts], "heard":
        [texts], "talk": [[">" said or "<" heard, text]] in the order said, "retrieved": [{purpose, query,
        results: [{id, text, tier, kind, recency, importance, relevance, score, and under lexical or hybrid
        relevance dense and lexical}]}], "reflections": [...], "moved": [...], "reinforced": [...], "rehearsed":
        [{reason, ids}], "forgotten": [...], "posted": [...], "decisions": [{kind, source, memory_ids, memories:
        [texts], value}], "lines": [{text, source, memories: [texts]}], "plan_step"}``.
    Raises:
        SimulacraError: unknown agent, a trace without ticks, or a tick outside the trace.
        TraceFormatError: the trace is malformed (:func:`simulacra.trace.iter_trace`).
    """
    header, ticks = read_trace(run)
    if agent not in header["agents"]:
        raise SimulacraError(f"{run}: no agent {agent!r}; agents: {', '.join(header['agents'])}")
    if not ticks:
        raise SimulacraError(f"{run}: the trace has no ticks yet (only its header: the run has not finished its "
                             f"first tick)")
    first = ticks[0]["tick"]  # the reader checked that the ticks follow one another (simulacra.trace.iter_trace)
    t = ticks[check_tick(tick, first, len(ticks), run) - first]
    mine = [op for op in t["memory"] if op.get("agent") == agent]
    lines = [ln for c in t["conversations"] if agent in c["participants"] for ln in c["lines"]]
    require_header(header, ("personas",), f"{run}/trace.jsonl", "simulacra inspect")
    persona = header["personas"].get(agent)
    if not isinstance(persona, dict):
        raise TraceFormatError(f"{run}/trace.jsonl: line 1: the header's 'personas' has no persona of {agent!r}")
    place = t["positions"][agent]
    world = header.get("world", {})
    place_name = world.get("places", {}).get(place, {}).get("name", place)
    perceived, remembered, retrieved, reflections = [], [], [], []
    moved, reinforced, rehearsed, forgotten = [], [], [], []
    for op in mine:  # by kind, in the order of the tick
        if op["op"] == ADD:
            if op["kind"] in PERCEIVED:
                perceived.append(op["text"])
            remembered.append({"text": op["text"], "kind": op["kind"], "rating": op["rating"], "tier": op["tier"]})
        elif op["op"] == RETRIEVE:
            retrieved.append({"purpose": op["purpose"], "query": op["query"], "results": op["results"],
                              **({"named_time": op["named_time"]} if "named_time" in op else {}),
                              **({"speech": op["speech"]} if "speech" in op else {})})
        elif op["op"] == REFLECT:
            reflections += op["insights"]
        elif op["op"] == MOVE:
            moved.append(op["text"])
        elif op["op"] == REINFORCE:
            reinforced.append(op["text"])
        elif op["op"] == REHEARSE:
            rehearsed.append({"reason": op["reason"], "ids": op["ids"]})
        elif op["op"] == FORGET:
            forgotten.append({"text": op["text"], "reason": op["reason"]})
    return {
        "agent": agent,
        "name": persona.get("name", agent),
        "tick": t["tick"],
        "clock": t["clock"],
        "when": format_game_time(t["time"], world.get("start_weekday") or "Monday", world.get("rest_days") or ()),
        "asleep": agent in t.get("asleep", ()),
        "place": place_name,
        "action": t["actions"][agent],
        "perceived": perceived,
        "remembered": remembered,
        "said": [ln["text"] for ln in lines if ln["speaker"] == agent],
        "heard": [ln["text"] for ln in lines if ln["listener"] == agent],
        "talk": [[">" if ln["speaker"] == agent else "<", ln["text"]] for ln in lines
                 if agent in (ln["speaker"], ln["listener"])],
        "retrieved": retrieved,
        "reflections": reflections,
        "moved": moved,
        "reinforced": reinforced,
        "rehearsed": rehearsed,
        "forgotten": forgotten,
        "posted": [op["text"] for op in t["memory"] if op["op"] == POST and op["author"] == agent],
        "decisions": [_with_texts(d, t) for d in t.get("decisions", []) if d["agent"] == agent],
        "lines": [{"text": ln["text"], "source": line_source(ln),
                   "memories": [_text_of(i, t) for i in ln.get("memory_ids", [])]}
                  for ln in lines if ln["speaker"] == agent],
        "plan_step": plan["step"] if (plan := t.get("plans", {}).get(agent)) is not None else None,
    }


def _text_of(memory_id: str, tick: TickRecord) -> str:
    """The text of a memory the tick's operations mention (retrieved or added), else its id."""
    for op in tick["memory"]:
        if op["op"] == RETRIEVE:
            for r in op["results"]:
                if r["id"] == memory_id:
                    return r["text"]
        elif op["op"] == REFLECT or op["op"] == REHEARSE:  # about several memories, without their texts
            continue
        elif op["id"] == memory_id:
            return op["text"]
    return memory_id


def _with_texts(decision: DecisionRecord, tick: TickRecord) -> dict[str, Any]:
    return {**decision, "memories": [_text_of(i, tick) for i in decision["memory_ids"]]}


def _describe(d: dict[str, Any]) -> str:
    v = d["value"]
    if d["kind"] in (PLAN_DAY, NEXT_ACTIONS):
        from simulacra.clock import format_hhmm

        return "; ".join(f"{format_hhmm(i['start'])} {i['activity']} at {i['place']}" for i in v)
    if isinstance(v, dict):
        return ", ".join(f"{k}={x}" for k, x in v.items())
    return str(v)


def format_explanation(e: dict[str, Any]) -> str:
    """Human-readable form of :func:`explain_tick`."""
    def num(x) -> str:
        return "  -  " if x is None else f"{x:.3f}"

    act = e["action"]
    when = e.get("when", e["clock"])
    out = [f"{e['name']} ({e['agent']}) at tick {e['tick']}, {when}: {act.get('activity', act)} at {e['place']}"
           + (" (asleep: perceives, retrieves and says nothing)" if e.get("asleep") else "")]
    if e["perceived"]:
        out.append("perceived:")
        out += [f"  {x}" for x in e["perceived"]]
    if e["said"] or e["heard"]:
        out.append("said / heard:")
        talk = e.get("talk") or [[">", x] for x in e["said"]] + [["<", x] for x in e["heard"]]
        out += [f"  {way} {x}" for way, x in talk]  # in the order said
    if e["remembered"]:
        out.append("remembered (rating, kind):")
        out += [f"  {m['rating'] if m['rating'] is not None else '-':>2}  {m['kind']:<11} {m['text']}"
                for m in e["remembered"]]
    for r in e["retrieved"]:
        out.append(f"retrieved for {r['purpose']}: \"{r['query']}\"")
        if r.get("named_time"):  # a dated retrieval: recency from the time the query named
            out.append(f"    (recency measured from {describe_named(r['named_time'])})")
        if r.get("speech"):  # a question that named who spoke to whom (memory.speech_roles)
            out.append(f"    ({describe_speech(r['speech'])})")
        parts = any("lexical" in m for m in r["results"])  # lexical or hybrid relevance: show its two parts
        scaled = any("normalized" in m for m in r["results"])  # minmax: the raw terms, then as summed
        out.append("    score  recency  importance  relevance  " + ("dense  lexical  " if parts else "")
                   + ("rec/imp/rel minmax   " if scaled else "") + "tier        memory")

        def normed(m: dict) -> str:
            n = m.get("normalized") or {}
            return f"{num(n.get('recency'))} {num(n.get('importance'))} {num(n.get('relevance'))}  "

        out += [f"    {num(m['score'])}  {num(m['recency'])}    {num(m['importance'])}      {num(m['relevance'])}  "
                + (f"{num(m.get('dense'))}  {num(m.get('lexical'))}    " if parts else "")
                + (normed(m) if scaled else "")
                + f"{m['tier']:<11} {m['text']}" for m in r["results"]]
        if not r["results"]:
            out.append("    (nothing scored above the threshold)")
    for ins in e["reflections"]:
        out.append(f"reflected (depth {ins['depth']}, {len(ins['evidence_ids'])} memories): {ins['text']}")
    for d in e.get("decisions", []):
        out.append(f"decided ({d['kind']}, {d['source']}{': ' + d['reason'] if d.get('reason') else ''}): "
                   f"{_describe(d)}")
        out += [f"    because of: {m}" for m in d["memories"]]
    for ln in e.get("lines", []):
        if ln["memories"]:
            out.append(f"said ({ln['source']}) \"{ln['text']}\" with in mind:")
            out += [f"    {m}" for m in ln["memories"]]
    out += [f"moved to long-term: {x}" for x in e["moved"]]
    out += [f"reinforced in long-term: {x}" for x in e["reinforced"]]
    out += [f"rehearsed {len(r['ids'])} memories ({r['reason']}): their long-term decay restarts"
            for r in e.get("rehearsed", [])]
    out += [f"forgot ({f['reason']}): {f['text']}" for f in e["forgotten"]]
    out += [f"posted to the town's shared memory: {x}" for x in e["posted"]]
    return "\n".join(out)
