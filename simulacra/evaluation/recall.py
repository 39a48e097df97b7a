"""The recall test (issue 22 §3, after seed 000's 30-day planner whose day 16 must recall day 4): how much of what
residents were told, saw and planned they can still retrieve days and weeks later.

A scenario with a ``recall`` section asks every resident, inside the run at fixed game times, every fact's
question, every world event (by its text) and its own plan of given days, under several retrieval profiles, and
records what came back (:func:`simulacra.schedule.probe_stage`; the tick record's ``probes``). Here those records
are scored against labels taken from the trace alone, so the test scales to any town:

* a **fact** is known from when the agent first held it (:func:`simulacra.evaluation.metrics.heard_times`: told by
  the scenario, told in a conversation, posted on the town's board);
* a **world event** from when the agent's memory of it (kind ``event``) was written;
* a **plan** of day ``d`` from the end of that day, when the agent made one (its ``plan`` memory
  ``"<Name>'s plan for day <d>: ..."``).

A retrieved memory *holds* a fact or event when its text does (:class:`~simulacra.evaluation.metrics.Similarity`:
a sentence at least 0.7 cosine-similar to the text or a paraphrase) or, for a day summary or a reflection, when a
memory it rests on (``evidence_ids``) does; it holds a day's plan when it is that plan memory, or the agent's day
summary of that day (which lists what it planned). *Found*: one of the memories recalled (the interview's rule:
:func:`simulacra.interview.recalled`) holds it. *Answered*: the mind's answer under the interview profile states
it (a fact or event: the answer holds it; a plan: the answer cites a memory that holds it or holds the plan's
text). The *age* of an item at a probe is the game time since the agent knew it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, cast

from simulacra.clock import MINUTES_PER_DAY, day_number, format_hhmm
from simulacra.evaluation.metrics import Run, Similarity, heard_times
from simulacra.evaluation.scenario import Scenario
from simulacra.trace import ADD, POST, REINFORCE, Header, ProbeRecord, TickRecord, agent_names

#: the age buckets of the report, in game days: [low, high)
AGE_BUCKETS: tuple[tuple[float, float], ...] = ((0, 1), (1, 3), (3, 7), (7, 14), (14, 21), (21, 31))
#: the kinds of item asked about
KINDS = ("fact", "event", "plan")


@dataclass(frozen=True)
class Ref:
    """What a memory must hold to count: a reference ``text`` and its paraphrases (``probes``), as a fact has."""

    text: str
    probes: tuple[str, ...] = ()


@dataclass
class Scan:
    """What the recall test needs of a trace, read in one pass: its header, slim tick records (time,
    conversations and notices: what :func:`heard_times` reads), every probe record, when each agent wrote its
    memory of each world event and its plan of each day, and each memory's text and evidence ids."""

    header: Header
    ticks: list[TickRecord]  # slim: time, conversations and the memory's posts only (what heard_times reads)
    probes: list[ProbeRecord]
    events_seen: dict[tuple[str, str], tuple[int, int]]  # (agent, event text) -> (first game minute, its rating)
    plans: dict[tuple[str, int], tuple[str, str]]  # (agent, day) -> (memory id, text)
    texts: dict[str, str]
    evidence: dict[str, list[str]]
    last_tick: TickRecord | None = None  # the trace's last tick record, whole

    @classmethod
    def of(cls, header: Header, records: Iterable[TickRecord]) -> Scan:
        """Scan tick ``records`` (a trace's lines after the header, in order)."""
        names = agent_names(header, header["personas"])
        slim: list[TickRecord] = []
        probes: list[ProbeRecord] = []
        seen: dict[tuple[str, str], tuple[int, int]] = {}
        plans: dict[tuple[str, int], tuple[str, str]] = {}
        texts: dict[str, str] = {}
        evidence: dict[str, list[str]] = {}
        last = None
        for t in records:
            last = t
            now = int(t["time"])
            slim.append(cast(TickRecord, {"time": now, "conversations": t["conversations"],
                                          "memory": [op for op in t["memory"] if op["op"] == POST]}))
            for op in t["memory"]:
                if op["op"] != ADD and op["op"] != REINFORCE:
                    continue
                texts.setdefault(op["id"], op["text"])
                if op["op"] == ADD and (ids := op.get("evidence_ids")):  # a reflection's or a day summary's
                    evidence[op["id"]] = list(ids)
                if op["op"] == ADD and op["kind"] == "event":
                    seen.setdefault((op["agent"], op["text"]), (now, int(op["rating"] or 0)))
                elif op["op"] == ADD and op["kind"] == "plan":
                    head = f"{names[op['agent']]}'s plan for day "
                    if op["text"].startswith(head):
                        day = op["text"][len(head):].split(":", 1)[0]
                        if day.isdigit():
                            plans.setdefault((op["agent"], int(day)), (op["id"], op["text"]))
            if t.get("probes"):
                probes.append(t["probes"])
        return cls(header, slim, probes, seen, plans, texts, evidence, last)

    @classmethod
    def load(cls, run_dir) -> Scan:
        """Scan a run's trace without holding all of it (a 30-day trace is several hundred MB)."""
        from simulacra.trace import stream_trace

        return cls.of(*stream_trace(run_dir))

    @cached_property
    def names(self) -> dict[str, str]:
        """Agent id -> name."""
        return agent_names(self.header, self.header["personas"])

    def run(self, run_dir="") -> Run:
        """A :class:`Run` over the slim ticks (enough for :func:`heard_times`)."""
        return Run(Path(run_dir), self.header, self.ticks, None)


def _bucket(age_days: float) -> str:
    for lo, hi in AGE_BUCKETS:
        if lo <= age_days < hi:
            return f"{lo:g}-{hi:g}"
    return f">={AGE_BUCKETS[-1][1]:g}"


def _text(scan: Scan, probe: dict[str, Any], mid: str) -> str:
    got = probe["memories"].get(mid)
    return got[0] if got is not None else scan.texts.get(mid, "")


def holds(scan: Scan, probe: dict[str, Any], mid: str, ref: Ref, sim: Similarity) -> bool:
    """Whether memory ``mid`` (recalled in ``probe``) holds a fact or event: its text does, or a memory it rests on
    (a summary's or a reflection's ``evidence_ids``) does."""
    if sim.holds(_text(scan, probe, mid), ref):
        return True
    return any(sim.holds(scan.texts[e], ref) for e in scan.evidence.get(mid, ()) if e in scan.texts)


def holds_plan(scan: Scan, probe: dict[str, Any], mid: str, agent: str, day: int) -> bool:
    """Whether memory ``mid`` holds ``agent``'s plan of ``day``: it is that day's ``plan`` memory, or the plan
    summary of that day (:func:`simulacra.cognition.summary.plan_summary_text`)."""
    name = scan.names[agent]
    plan = scan.plans.get((agent, day))
    if plan is not None and mid == plan[0]:
        return True
    return _text(scan, probe, mid).startswith((f"{name}'s plan for day {day} (", f"{name}'s plan for day {day}:"))


def rows(scan: Scan, sc: Scenario, sim: Similarity, heard: dict[str, dict[str, int]] | None = None
         ) -> list[dict[str, Any]]:
    """One row per probe, agent and item asked: ``{"time", "day", "agent", "about", "kind", "known" (bool),
    "learned" (game minute or None), "rating" (an event: the agent's memory of it as rated when written, 1..10;
    else None), "age_days", "found": {profile: bool}, "answered": bool | None}``.

    Args:
        heard: per fact id, :func:`heard_times` of the run (computed when ``None``).
    """
    if heard is None:
        heard = {f.id: heard_times(scan.run(), f, sim) for f in sc.facts}
    events = scan.header["world"].get("events") or []
    facts = {f"fact:{f.id}": f for f in sc.facts}
    out = []
    for probe in scan.probes:
        at = int(probe["time"])
        for ask in probe["asks"]:
            agent, about = ask["agent"], ask["about"]
            kind, key = about.split(":", 1)
            ref, rating = None, None
            if kind == "fact":
                if about not in facts:
                    continue
                f = facts[about]
                learned, ref = heard[f.id].get(agent), Ref(f.text, tuple(f.probes))
            elif kind == "event":
                text = events[int(key)]["text"]
                learned, rating = scan.events_seen.get((agent, text), (None, None))
                ref = Ref(text)
            else:
                day = int(key)
                plan = scan.plans.get((agent, day))
                learned = day * MINUTES_PER_DAY if plan is not None else None
                if plan is not None:
                    ref = Ref(plan[1].split(": ", 1)[-1])

            def match(mid: str, kind=kind, key=key, ref=ref, probe=probe, agent=agent) -> bool:
                if kind == "plan":
                    return holds_plan(scan, probe, mid, agent, int(key))
                return holds(scan, probe, mid, ref, sim)

            known = learned is not None and learned < at
            found = {name: any(match(mid) for mid in ids) for name, ids in ask["results"].items()}
            answered = None
            if "answer" in ask and known:
                answered = sim.holds(ask["answer"], ref) or (
                    kind == "plan" and any(match(mid) for mid in ask.get("answer_ids", ())))
            out.append({"time": at, "day": day_number(at - 1), "agent": agent, "about": about, "kind": kind,
                        "known": known, "learned": learned, "rating": rating,
                        "age_days": round((at - learned) / MINUTES_PER_DAY, 3) if known else None,
                        "found": found, "answered": answered})
    return out


#: an event "mattered" to a witness whose memory of it was rated at least this (what consolidation can keep: the
#: promotion threshold is a rating above 5)
MATTERED = 6


def _by_bucket(rs: Sequence[dict[str, Any]], profile: str) -> dict[str, list[bool]]:
    out: dict[str, list[bool]] = {}
    for r in rs:
        out.setdefault(_bucket(r["age_days"]), []).append(r["found"][profile])
    out["all"] = [r["found"][profile] for r in rs]
    return out


def _share(xs: Sequence[bool]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def summarize(table: Sequence[dict[str, Any]], profiles: Sequence[str], interview: str) -> dict[str, Any]:
    """The recall report of :func:`rows`: per profile and kind, the share found by age bucket (``by_age``) and by
    probe (``by_probe``); the share answered likewise (``answered_by_age``); per fact and probe, the share of its
    knowers who found it under ``interview`` (``by_fact``); per profile and age bucket, the share found of the
    events whose witness rated its memory :data:`MATTERED` or more (``events_mattered``, with ``all``); and, for
    facts asked of residents who never heard them, the share where something holding them came back anyway
    (``found_unknown``: made-up recall, 0 expected)."""
    known = [r for r in table if r["known"]]
    by_age: dict[str, dict[str, dict[str, Any]]] = {}
    for p in profiles:
        by_age[p] = {}
        for kind in KINDS:
            rows_k = [r for r in known if r["kind"] == kind]
            buckets: dict[str, list[bool]] = {}
            for r in rows_k:
                buckets.setdefault(_bucket(r["age_days"]), []).append(r["found"][p])
            by_age[p][kind] = {b: {"asked": len(v), "found": _share(v)} for b, v in buckets.items()}
    answered: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        buckets = {}
        for r in known:
            if r["kind"] == kind and r["answered"] is not None:
                buckets.setdefault(_bucket(r["age_days"]), []).append(r["answered"])
        answered[kind] = {b: {"asked": len(v), "answered": _share(v)} for b, v in buckets.items()}
    by_probe = []
    for at in sorted({r["time"] for r in table}):
        here = [r for r in known if r["time"] == at]
        row: dict[str, Any] = {"time": at, "day": day_number(at - 1), "clock": format_hhmm(at % MINUTES_PER_DAY)}
        for kind in KINDS:
            ks = [r for r in here if r["kind"] == kind]
            row[kind] = {"asked": len(ks), **{p: _share([r["found"][p] for r in ks]) for p in profiles},
                         "answered": _share([r["answered"] for r in ks if r["answered"] is not None])}
        by_probe.append(row)
    by_fact: dict[str, dict[str, Any]] = {}
    for r in known:
        if r["kind"] == "fact":
            by_fact.setdefault(r["about"][5:], {}).setdefault(str(r["day"]), []).append(r["found"][interview])
    unknown = [r for r in table if r["kind"] == "fact" and not r["known"]]
    return {
        "profiles": list(profiles), "interview": interview, "asked": len(table), "known": len(known),
        "overall": {p: {kind: _share([r["found"][p] for r in known if r["kind"] == kind]) for kind in KINDS}
                    for p in profiles},
        # the events that mattered: those the witness's memory of rated at least 6, kept by consolidation
        "events_mattered": {p: {b: _share(v) for b, v in _by_bucket(
            [r for r in known if r["kind"] == "event" and (r["rating"] or 0) >= MATTERED], p).items()}
            for p in profiles},
        "by_age": by_age, "answered_by_age": answered, "by_probe": by_probe,
        "by_fact": {f: {d: {"knowers": len(v), "found": _share(v)} for d, v in days.items()}
                    for f, days in by_fact.items()},
        "found_unknown": {p: _share([r["found"][p] for r in unknown]) for p in profiles},
    }


def memories_per_agent(scan: Scan) -> list[dict[str, Any]]:
    """At each probe, the mean memories per agent in each tier and in all (the probe's ``counts``)."""
    out = []
    for probe in scan.probes:
        counts = probe.get("counts") or {}
        if not counts:
            continue
        tiers = sorted({t for c in counts.values() for t in c})
        row = {"time": probe["time"], "day": day_number(int(probe["time"]) - 1)}
        for t in tiers:
            row[t] = round(sum(c.get(t, 0) for c in counts.values()) / len(counts), 2)
        row["total"] = round(sum(sum(c.values()) for c in counts.values()) / len(counts), 2)
        out.append(row)
    return out


def recall_metrics(run: Run | Scan, sc: Scenario, sim: Similarity, heard: dict[str, dict[str, int]] | None = None
                   ) -> dict[str, Any]:
    """The recall test's figures of one run (:func:`summarize` and :func:`memories_per_agent`), JSON-able.

    Raises:
        ValueError: the run holds no probe records (its scenario has no ``recall`` section, or it ended first).
    """
    scan = run if isinstance(run, Scan) else Scan.of(run.header, run.ticks)
    if not scan.probes:
        raise ValueError("the run holds no recall probe (a scenario without a recall section, or cut short)")
    profiles = scan.probes[0]["profiles"]
    out = summarize(rows(scan, sc, sim, heard), profiles, scan.probes[0]["interview"])
    out["memories_per_agent"] = memories_per_agent(scan)
    return out


def recall_queries(run_dir, sc: Scenario, sim: Similarity, embedder, scan: Scan | None = None) -> list[dict]:
    """Labelled queries (``simulacra tune --queries``; :mod:`simulacra.labels`' format) from a recall run's last
    probe, so that retrieval settings can be compared on long horizons with the run's own stores: for every agent
    and item it knew then (facts, events, its plans), the item's question at the probe's time, expecting every
    memory of the agent's stores (as the run left them) that holds the item (:func:`holds`, :func:`holds_plan`);
    ``category`` is the kind, ``split`` the generated queries' fixed rule (:func:`simulacra.labels.split_of`). An
    item no stored memory holds any longer (forgotten) gets no query: tune measures the ranking of what is kept.

    Raises:
        ValueError: the run holds no probe record.
    """
    from simulacra.config import config_from_dict, recorded_config
    from simulacra.labels import split_of
    from simulacra.runtime import RunStores

    scan = scan or Scan.load(run_dir)
    if not scan.probes:
        raise ValueError(f"{run_dir}: the run holds no recall probe")
    last = scan.probes[-1]
    at = int(last["time"])
    known = [r for r in rows(Scan(scan.header, scan.ticks, [last], scan.events_seen, scan.plans, scan.texts,
                                  scan.evidence), sc, sim) if r["known"]]
    config = config_from_dict(recorded_config(scan.header["config"]), f"{run_dir}/trace.jsonl header")
    stores = RunStores(config.memory, run_dir, scan.header)

    queries_of = {(a["agent"], a["about"]): a["query"] for a in last["asks"]}
    events = scan.header["world"].get("events") or []
    facts = {f"fact:{f.id}": f for f in sc.facts}
    run = Path(run_dir).name
    out = []
    for agent in scan.header["agents"]:
        mem = stores.memory(agent, embedder.dim)
        records = [r for name in mem.readable for r in mem.tier(name).records
                   if r.timestamp is None or r.timestamp < at]
        probe = {"memories": {r.id: [r.text, r.kind, None, r.timestamp] for r in records}}
        view = Scan(scan.header, [], [], scan.events_seen, scan.plans,
                    {**scan.texts, **{r.id: r.text for r in records}},
                    {**scan.evidence, **{r.id: r.evidence_ids for r in records if r.evidence_ids}})
        for r in (x for x in known if x["agent"] == agent):
            kind, key = r["about"].split(":", 1)
            if kind == "plan":
                expected = [m.id for m in records if holds_plan(view, probe, m.id, agent, int(key))]
            else:
                f = facts.get(r["about"])
                ref = Ref(f.text, tuple(f.probes)) if f is not None else Ref(events[int(key)]["text"])
                expected = [m.id for m in records if holds(view, probe, m.id, ref, sim)]
            if expected:
                text = queries_of[(agent, r["about"])]
                out.append({"agent": agent, "time": at, "query": text, "category": kind,
                            "expected": [{"id": i} for i in expected],
                            "note": f"{r['about']}, known for {r['age_days']:g} game days",
                            "split": split_of(run, agent, at, text)})
    return out


def plot_recall(results: dict[str, dict[str, Any]], path, kinds: Sequence[str] = KINDS,
                profiles: Sequence[str] | None = None) -> None:
    """Recall against age, one panel per kind of item (facts, events, plans): one line per (run label, profile),
    the share found per age bucket; saved as a PNG at ``path``.

    Args:
        results: label (``"summary"``) -> :func:`recall_metrics` of a run.
        profiles: the profiles drawn (default: every profile of each run).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{lo:g}-{hi:g}" for lo, hi in AGE_BUCKETS]
    fig, axes = plt.subplots(1, len(kinds), figsize=(5.2 * len(kinds), 4.2), squeeze=False, sharey=True)
    styles = ["-", "--", ":", "-."]
    names = {"fact": "facts told", "event": "world events witnessed", "plan": "own plan of a past day"}
    for ax, kind in zip(axes[0], kinds):
        for i, (label, m) in enumerate(results.items()):
            for prof in profiles or m["profiles"]:
                cells = m["by_age"][prof][kind]
                xy = [(x, cells[b]["found"]) for x, b in enumerate(labels)
                      if b in cells and cells[b]["found"] is not None]  # buckets nobody was asked in left out
                ax.plot([x for x, _ in xy], [y for _, y in xy], styles[i % len(styles)], marker="o",
                        label=f"{label}: {prof}")
        ax.set_xticks(range(len(labels)), labels)
        ax.set_title(names.get(kind, kind))
        ax.set_xlabel("age when asked (game days)")
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("share found in what was recalled")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    """``python -m simulacra.evaluation.recall RUN SCENARIO [--out FILE]``: write :func:`recall_queries` of a
    finished recall run as a query file for ``simulacra tune`` (default ``<RUN>/recall-queries.yaml``)."""
    import argparse

    from simulacra.config import config_from_dict, recorded_config
    from simulacra.embeddings import build_embedder
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.labels import write
    from simulacra.trace import read_header

    ap = argparse.ArgumentParser(prog="python -m simulacra.evaluation.recall", description=main.__doc__)
    ap.add_argument("run", help="a finished run of a scenario with a recall section (database/<run>)")
    ap.add_argument("scenario", help="its scenario file")
    ap.add_argument("--out", default=None, help="query file to write [<run>/recall-queries.yaml]")
    args = ap.parse_args(argv)
    header = read_header(args.run)  # embedded as the run embedded
    embedder = build_embedder(config_from_dict(recorded_config(header["config"]), f"{args.run} header").embedding)
    queries = recall_queries(args.run, load_scenario(args.scenario), Similarity(embedder), embedder)
    path = write(queries, Path(args.run).name, args.out or Path(args.run) / "recall-queries.yaml",
                 f"{args.run} (simulacra.evaluation.recall)")
    print(f"{len(queries)} queries -> {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
