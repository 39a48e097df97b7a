"""What a scenario does inside a run at fixed game times: it *tells* residents a fact (a telling), and it *asks*
every resident what it remembers (a recall probe, seed 000's "does day 16 recall day 4"). Both are plain data in
the trace header (``scenario.schedule``, made by :mod:`simulacra.evaluation.setup` from the scenario file), so a
resumed run does the same at the same ticks, and a run without a scenario has no schedule and is unchanged.

Schedule format (every minute an absolute game minute, day 1 starting at minute 0)::

    {"tellings": [{"minute": 2040, "agents": ["ruth_calloway"], "text": "A visitor told {name}: ...",
                   "topic": "<the fact's text>", "importance": 7 | null, "by": "A visitor"}],
     "probes": {"minutes": [6060, ...], "profiles": ["situational", "recall", ...], "answer": true,
                "asks": [{"about": "fact:ferry", "query": "...", "after": 1440},
                         {"about": "plan:4", "query": "{name}'s plan for day 4", "after": 5760}]}}

A telling is written at the first tick whose span holds its minute: a ``dialogue`` memory of each agent (``{name}``
replaced by the agent's name) tagged with the fact as its news ``topic`` (so the agent passes it on like news it
heard), rated by the rater and at least ``importance``; the agent then knows the topic. A probe runs at the end of
the first tick whose span holds its minute, on the stores as that tick left them (its writes, consolidation and
forgetting included): every agent is asked every ask whose ``after`` has passed, under each retrieval profile of
``profiles``, by the one rule of ``simulacra interview`` (:func:`simulacra.interview.recalled`); with ``answer``
the agent's mind also answers under the interview profile. A probe only reads: nothing is marked accessed,
nothing is written to the stores, the town's state is not changed (the town runs the same with or without
probes, but for a language model's call log). Its record goes into the tick record as ``"probes"``::

    {"time": <the game minute the stores are read at: the tick's end>, "profiles": [...], "interview": "<profile>",
     "asks": [{"agent", "about", "query", "results": {profile: [ids, best first]}, "answer", "answer_source",
               "answer_ids"}],
     "memories": {id: [text, kind, tier, timestamp]},   # every memory a result names
     "counts": {agent: {tier: n}}}                      # the agent's memories per tier then

:mod:`simulacra.evaluation.recall` reads these records with the trace's labels (who was told what, who saw which
event, when).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from simulacra.runtime import Runtime
from simulacra.state import TownState
from simulacra.trace import ProbeAsk, ProbeRecord


@dataclass
class Told:
    """A tick's tellings: the memories to write (``pending``, :class:`simulacra.tick.Pending`) and, per agent, the
    topics it now knows."""

    pending: list = field(default_factory=list)
    learned: dict[str, set[str]] = field(default_factory=dict)


def schedule_of(rt: Runtime) -> dict[str, Any]:
    """The run's schedule (``{}`` for a run without a scenario or without one)."""
    return (rt.scenario or {}).get("schedule") or {}


def in_tick(minute: float, now: int, tick_minutes: int) -> bool:
    """Whether game minute ``minute`` falls in the tick ``[now, now + tick_minutes)``."""
    return now <= minute < now + tick_minutes


def teller(by: str) -> str:
    """How the told agent names its source when it passes the news on (``"I heard from <teller>: ..."``): ``by``
    with a leading article in lower case (``"The county surveyor"`` -> ``"the county surveyor"``)."""
    head, _, rest = by.partition(" ")
    return f"{head.lower()} {rest}" if head in ("A", "An", "The") and rest else by


def telling_stage(rt: Runtime, now: int, tick: int) -> Told:
    """The tellings due in the tick starting at game minute ``now`` (see the module docstring), in schedule
    order."""
    from simulacra.tick import Pending, new_record

    told = Told()
    for t in schedule_of(rt).get("tellings", ()):
        if not in_tick(t["minute"], now, rt.world.tick_minutes):
            continue
        for pid in t["agents"]:
            extra = {"topic": t["topic"], "source": teller(t.get("by") or "someone from outside")}
            if t.get("importance") is not None:
                extra["importance"] = int(t["importance"])
            text = t["text"].replace("{name}", rt.names[pid])
            told.pending.append(Pending(pid, new_record(pid, text, "dialogue", now, tick, extra), (t["topic"],)))
            told.learned.setdefault(pid, set()).add(t["topic"])
    return told


def probe_due(probes: Mapping[str, Any] | None, now: int, tick_minutes: int) -> bool:
    """Whether a recall probe of the schedule's ``probes`` falls in the tick starting at game minute ``now``."""
    if not probes:
        return False
    return any(in_tick(m, now, tick_minutes) for m in probes["minutes"])


def probe_stage(state: TownState, rt: Runtime, now: int, tick: int,
                probes: Mapping[str, Any] | None = None) -> ProbeRecord | None:
    """The recall probe due in the tick starting at game minute ``now``, read at the tick's end (see the module
    docstring), for ``rt``'s agents (a shard's: :meth:`simulacra.shard.Shard.probe`, merged by
    :func:`merge_probes`); ``None`` when none is due. ``probes``: the schedule's (default the run's own,
    :func:`schedule_of`; a shard on a Ray worker is given the town's).

    Raises:
        KeyError: a profile the run's config does not define.
    """
    from simulacra.interview import recall_query, recalled
    from simulacra.memory.perspective import embedded
    from simulacra.tick import view_of

    probes = schedule_of(rt).get("probes") if probes is None else probes
    tm = rt.world.tick_minutes
    if not probes or not probe_due(probes, now, tm):
        return None
    at = now + tm  # the stores as the tick left them; memories formed in it are older than this
    cfg = rt.config
    interview = cfg.memory.profile_of("interview")
    profiles = list(dict.fromkeys(probes["profiles"]))
    for name in profiles:
        cfg.memory.overrides_of(name)  # an unknown profile fails here, before any work
    # each ask with the text retrieved with: the question put to the resident, "you" as its name (as an interview)
    asks = [(pid, a, query, recall_query(query, rt.names[pid], cfg))
            for a in probes["asks"] if a["after"] <= at for pid in rt.agents
            for query in [a["query"].replace("{name}", rt.names[pid])]]
    texts = list(dict.fromkeys(embedded(text) for *_, text in asks))  # the name is matched, not embedded
    vectors = dict(zip(texts, rt.embedder.embed(texts))) if texts else {}
    out: list[ProbeAsk] = []
    memories: dict[str, list[Any]] = {}
    answered: list[tuple[int, Sequence]] = []
    for pid, ask, query, text in asks:
        mem = rt.memories[pid]
        vector = vectors[embedded(text)]
        results: dict[str, list[str]] = {}
        for name in profiles:
            got = recalled(mem, vector, text, at, cfg, name, rt.world.start_minute)
            results[name] = [m.id for m in got]
            for m in got:
                memories.setdefault(m.id, [m.text, m.kind, m.tier, None if m.record is None else m.record.timestamp])
            if name == interview:
                answered.append((len(out), got))
        if interview not in profiles and probes.get("answer"):
            answered.append((len(out), recalled(mem, vector, text, at, cfg, interview, rt.world.start_minute)))
        out.append({"agent": pid, "about": ask["about"], "query": query, "results": results})
    if probes.get("answer") and answered:
        def answer(item):
            i, got = item
            a = out[i]
            return rt.mind.interview(view_of(state, rt, a["agent"], at, got), a["query"])

        for (i, _), d in zip(answered, rt.map(answer, answered)):
            ask = out[i]
            ask["answer"], ask["answer_source"], ask["answer_ids"] = d.value.text, d.source, list(d.value.memory_ids)
    counts = {pid: rt.memories[pid].counts() for pid in rt.agents}
    return {"time": at, "profiles": profiles, "interview": interview, "asks": out, "memories": memories,
            "counts": counts}


def merge_probes(parts: Sequence[ProbeRecord | None], groups: Sequence[Sequence[str]],
                 order: Mapping[str, int]) -> ProbeRecord | None:
    """The shards' probe records (:func:`probe_stage` over each shard's agents ``groups[k]``, in shard order) as the
    one record a run of one shard writes: asks ask-major, then in the run's agent order (``order``: agent id -> its
    index; a shard lists every due ask for each of its agents, ask-major, so item *j* of shard *k* is ask
    *j* // len(groups[k])); the memories they returned in the order those asks first return them; the counts in agent
    order. ``None`` when no shard probed."""
    got = [(p, g) for p, g in zip(parts, groups) if p is not None]
    if len(got) < 2:  # one shard's record is the run's
        return got[0][0] if got else None
    asks = sorted(((j // len(g), order[a["agent"]], a) for p, g in got for j, a in enumerate(p["asks"])),
                  key=lambda x: (x[0], x[1]))
    first = got[0][0]
    known = {mid: row for p, _ in got for mid, row in p["memories"].items()}
    memories: dict[str, list[Any]] = {}
    for _, _, a in asks:
        for name in first["profiles"]:
            for mid in a["results"].get(name, ()):
                memories.setdefault(mid, known[mid])
    counts = {pid: c for p, _ in got for pid, c in p["counts"].items()}
    return {"time": first["time"], "profiles": first["profiles"], "interview": first["interview"],
            "asks": [a for _, _, a in asks], "memories": memories,
            "counts": {pid: counts[pid] for pid in sorted(counts, key=order.__getitem__)}}
