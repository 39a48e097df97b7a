"""Metrics of one scenario run, from its trace, its memory stores and (optionally) interviews, after the
Generative Agents paper's end-to-end evaluation (Park et al., arXiv 2304.03442, section 7).

* **Diffusion** (:func:`diffusion`): the share of simulated agents who *know* a fact at a game minute. An agent
  knows a fact when retrieval for the fact's question, with the run's own retrieval rule, on its stores as they
  were then (memories formed later left out), returns a memory that holds the fact: one tagged with the fact as
  its news topic, or one whose text (a sentence of it) is at least :data:`SIMILARITY` cosine-similar to the
  fact's text or one of its probes (paraphrases). The threshold was set on Fernhollow runs (``docs/evaluation.md``):
  the memories retelling a fact score 0.75-0.95 against it, unrelated memories of the same people and places
  0.3-0.65. Knowing is read from the agent's whole store for every variant (:data:`KNOWS`): an ablated agent
  (``no-memory``) knows what it stored even though it cannot recall it.
* **Heard** (:func:`heard_times`): when each agent first held the fact, from the trace alone: a holder at the
  start, or when the scenario told it (``told_at``); told it in a conversation (a line with the fact as topic,
  or, for a language-model mind, a line or summary similar to it); everyone, once a notice about it is on the
  town's board (shared memory). *Told*: the same without notices, in person only.
* **Network** (:func:`network`): undirected graph (networkx) of the simulated agents, an edge where both know
  each other: at the start when each lists the other among its persona's relationships; at the end also when
  they talked. Density = 2 E / (n (n - 1)).
* **Coordination** (:func:`coordination`): invited (told of the party in person before it ended), attended (at
  the party's place during its window, one tick or more, not walking through), and for each absent agent the
  reason from the trace.
* **Hallucination** (:func:`hallucination`): interview answers (every agent asked every fact's question, control
  facts included) claiming a fact (a sentence of the answer at least :data:`SIMILARITY` similar to it) that the
  agent did not hold by then according to the trace. Interviews go through the run's ablations
  (:func:`simulacra.interview.interview`): a no-memory agent answers from its static facts; an answer that does not
  claim a fact the agent had heard is *unrecalled*, not made up.
* **Cost** (:func:`cost`): language-model calls and tokens, per agent-game-hour, from the run summary.
* **History** (:func:`history`): tokens per conversation, and whether facts told in the first half of a
  conversation of at least :data:`LONG_CONVERSATION` lines survive to its end under the run's conversation-history
  strategy: still in the strategy's end view (summary + verbatim lines), and, with a model, recalled when the
  listener is asked the fact's question from that view after the conversation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np

from simulacra.clock import MINUTES_PER_HOUR
from simulacra.evaluation.scenario import Fact, Scenario
from simulacra.trace import ENGAGEMENT, POST, Header, LineRecord, TickRecord, agent_names, read_trace

#: cosine similarity (MiniLM embeddings) at or above which a text holds a fact (see the module docstring)
SIMILARITY = 0.7
#: a conversation of at least this many lines is long (history metric)
LONG_CONVERSATION = 4

_SENTENCES = re.compile(r"(?<=[.!?;:])\s+|\"")

#: the cost figures per agent-game-hour that a run's metrics carry at the top level (:func:`cost`)
COST_PER_AGENT_HOUR = ("llm_calls_per_agent_hour", "tokens_per_agent_hour", "cost_usd_per_agent_hour")

#: what "knows" (diffusion ``start``, ``end``, ``curve``) is read from, for every variant (metrics.json ``knows``)
KNOWS = ("store: retrieval for the fact's question over the agent's whole memory store (every tier), the "
         "variant's ablations not applied")

#: categories of the no-show reasons (:func:`coordination`)
NO_SHOW = ("never heard", "heard after it ended", "notice only", "did not recall it", "plan conflict", "declined",
           "no planning", "accepted but elsewhere")


@dataclass
class Run:
    """A finished scenario run: ``header`` and ``ticks`` of its trace, its folder and summary."""

    run_dir: Path
    header: Header
    ticks: list[TickRecord]
    summary: dict[str, Any] | None

    @classmethod
    def load(cls, run_dir: str | Path) -> Run:
        run_dir = Path(run_dir)
        header, ticks = read_trace(run_dir)
        path = run_dir / "summary.json"
        summary = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
        return cls(run_dir, header, ticks, summary)

    @property
    def agents(self) -> list[str]:
        return list(self.header["agents"])

    @property
    def start(self) -> int:
        return int(self.header["start_minute"])

    @property
    def tick_minutes(self) -> int:
        return int(self.header["tick_minutes"])

    @property
    def end(self) -> int:
        """Game minute the run ended at (end of its last tick)."""
        return (int(self.ticks[-1]["time"]) if self.ticks else self.start - self.tick_minutes) + self.tick_minutes

    @property
    def scripted(self) -> bool:
        return str(self.header.get("mind", "")).startswith("scripted")

    @cached_property
    def seeded(self) -> list[dict[str, Any]]:
        return list((self.header.get("scenario") or {}).get("seeded", []))

    @cached_property
    def tellings(self) -> list[dict[str, Any]]:
        """The facts told during the run (:mod:`simulacra.schedule`): ``{"minute", "agents", "topic", ...}``."""
        return list(((self.header.get("scenario") or {}).get("schedule") or {}).get("tellings", []))


class Similarity:
    """Cosine similarity of texts to facts with one embedder (texts embedded once, cached)."""

    def __init__(self, embedder, threshold: float = SIMILARITY):
        self.embedder = embedder
        self.threshold = threshold
        self._cache: dict[str, np.ndarray] = {}

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        new = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if new:
            for t, v in zip(new, self.embedder.embed(new)):
                self._cache[t] = np.asarray(v, dtype=np.float64) / (np.linalg.norm(v) or 1.0)
        return np.stack([self._cache[t] for t in texts]) if texts else np.zeros((0, 1))

    def score(self, text: str, fact: Fact) -> float:
        """Best cosine of any sentence of ``text`` (or the whole) against the fact's text or a probe."""
        parts = [text] + [s.strip() for s in _SENTENCES.split(text) if len(s.strip()) > 12]
        refs = [fact.text, *fact.probes]
        sims = self.vectors(parts) @ self.vectors(refs).T
        return float(sims.max())

    def holds(self, text: str, fact: Fact) -> bool:
        return self.score(text, fact) >= self.threshold


# --------------------------------------------------------------------------- heard (trace truth)
def heard_times(run: Run, fact: Fact, sim: Similarity | None = None, notices: bool = True) -> dict[str, int]:
    """Agent id -> the first game minute it held ``fact`` according to the trace (absent: never). Holders hold it
    from the start; a listener from the tick it was told (a line with the fact as topic, or for a language-model
    mind a line or summary similar to it, when ``sim`` is given); everyone from the tick a notice about it was
    posted to the town's shared memory (unless ``notices`` is false: told in person only)."""
    first: dict[str, int] = {}

    def mark(agent: str, minute: int) -> None:
        if agent in run.agents and (agent not in first or minute < first[agent]):
            first[agent] = minute

    for op in run.seeded:
        if op["text"] == fact.memory_text:
            mark(op["agent"], run.start - 1)
    for telling in run.tellings:  # told during the run (simulacra.schedule)
        if telling["topic"] == fact.text:
            for a in telling["agents"]:
                mark(a, int(telling["minute"]))
    check_text = sim is not None and not run.scripted
    for t in run.ticks:
        now = int(t["time"])
        for c in t["conversations"]:
            for line in c["lines"]:
                if line["topic"] == fact.text or (check_text and sim.holds(line["text"], fact)):
                    mark(line["listener"], now)
                    mark(line["speaker"], now)
            if check_text and sim.holds(c.get("summary", ""), fact):
                for a in c["participants"]:
                    mark(a, now)
        for op in t["memory"] if notices else ():
            if op["op"] == POST and fact.text in op["text"]:
                for a in run.agents:
                    mark(a, now)
    return first


# --------------------------------------------------------------------------- diffusion (retrieval)
class Knowledge:
    """Retrieval over the stores of a finished run, as at any game minute (see :func:`diffusion`)."""

    def __init__(self, run: Run, embedder, sim: Similarity):
        from simulacra.config import config_from_dict, recorded_config
        from simulacra.runtime import RunStores

        self.run, self.embedder, self.sim = run, embedder, sim
        self.config = config_from_dict(recorded_config(run.header["config"]), f"{run.run_dir}/trace.jsonl header")
        # the run's own stores, embedded (in its shards' folders on Ray workers) or on a server
        stores = RunStores(self.config.memory, run.run_dir, run.header)
        self.memories = {a: stores.memory(a, embedder.dim) for a in run.agents}
        self.names = agent_names(run.header)
        self._q: dict[str, np.ndarray] = {}

    def retrieve(self, agent: str, question: str, minute: int):
        """What ``agent`` retrieves for ``question`` at game minute ``minute`` (memories formed at or after it left
        out; the run's ``top_k``), under the profile of the ``knowledge`` purpose (``memory.purposes``), the question
        put to the resident as an interview puts it (:func:`simulacra.interview.recall_query`)."""
        from simulacra.interview import recall_query
        from simulacra.memory.perspective import embedded

        question = recall_query(question, self.names[agent], self.config)
        key = embedded(question)  # what is embedded: the question as asked, the same for every agent
        if key not in self._q:
            self._q[key] = self.embedder.embed([key])[0]
        profile = self.config.memory.profile_of("knowledge")
        k = self.config.memory.for_profile(profile).top_k
        # the top k the agent would have had then, of the memories formed before ``minute``
        return self.memories[agent].retrieve(self._q[key], minute, top_k=k, query_text=question, profile=profile,
                                             formed_before=minute)

    def knows(self, agent: str, fact: Fact, minute: int) -> bool:
        for m in self.retrieve(agent, fact.question, minute):
            if m.record is not None and m.record.extra.get("topic") == fact.text:
                return True
            if self.sim.holds(m.text, fact):
                return True
        return False


def diffusion(know: Knowledge, fact: Fact, minutes: Sequence[int]) -> list[float]:
    """Share (0..1) of the run's agents who know ``fact`` (by retrieval) at each game minute of ``minutes``."""
    agents = know.run.agents
    return [sum(know.knows(a, fact, m) for a in agents) / len(agents) for m in minutes]


# --------------------------------------------------------------------------- network
def network(run: Run, until: int | None = None) -> nx.Graph:
    """The acquaintance graph: nodes the agents; an edge where both list each other among their persona's
    relationships, or (with ``until``, a game minute) where they held a conversation before ``until``."""
    g = nx.Graph()
    g.add_nodes_from(run.agents)
    personas = run.header["personas"]
    for a in run.agents:
        for b in personas[a].get("relationships", {}):
            if b in g and a in personas[b].get("relationships", {}):
                g.add_edge(a, b)
    if until is not None:
        for t in run.ticks:
            if int(t["time"]) >= until:
                break
            for c in t["conversations"]:
                g.add_edge(*c["participants"])
    return g


def density(g: nx.Graph) -> float:
    return float(nx.density(g)) if g.number_of_nodes() > 1 else 0.0


# --------------------------------------------------------------------------- coordination
def coordination(run: Run, sc: Scenario, heard: dict[str, int]) -> dict[str, Any]:
    """The party's outcome: ``invited`` (agents, host excluded, told of it in person before it ended), ``attended``
    (agents, host excluded, at its place during the window), ``host_attended``, ``attended_invited``, and
    ``no_shows``: agent -> ``{"category": one of NO_SHOW, "reason": the trace's words}``."""
    p = sc.party
    topic = sc.fact(p.fact).text
    told: dict[str, int] = {}
    decisions: dict[str, list[dict]] = {}
    present: set[str] = set()
    for t in run.ticks:
        now = int(t["time"])
        for c in t["conversations"]:
            for line in c["lines"]:
                if line["topic"] == topic and now < p.end_minute:
                    told.setdefault(line["listener"], now)
        for d in t.get("decisions", ()):
            if d["kind"] == ENGAGEMENT and d["value"]["engagement"]["topic"] == topic:
                decisions.setdefault(d["agent"], []).append(d["value"])
        if p.start_minute <= now < p.end_minute:  # there, not walking through
            acts = t["actions"]
            present |= {a for a, place in t["positions"].items()
                        if place == p.place and (a not in acts or acts[a]["type"] != "move")}
    guests = [a for a in run.agents if a != p.host]
    invited = sorted(a for a in guests if a in told)
    attended = sorted(a for a in guests if a in present)
    no_shows = {}
    for a in guests:
        if a in present:
            continue
        said = decisions.get(a, [])
        if a not in heard:
            cat, why = "never heard", "nobody told them"
        elif heard[a] >= p.end_minute:
            cat, why = "heard after it ended", f"first heard at minute {heard[a]}"
        elif said and not said[-1]["go"]:
            why = said[-1]["reason"]
            cat = next((c for c in ("did not recall it", "plan conflict", "no planning") if why.startswith(c)),
                       "declined")
        elif said:
            cat, why = "accepted but elsewhere", said[-1]["reason"]
        elif a not in told:
            cat, why = "notice only", "knew from the town's board, never invited in person"
        else:
            cat, why = "declined", "heard but never considered it"
        no_shows[a] = {"category": cat, "reason": why}
    return {"host": p.host, "place": p.place, "start": p.start_minute, "end": p.end_minute,
            "invited": invited, "attended": attended, "host_attended": p.host in present,
            "attended_invited": sorted(set(invited) & set(attended)), "no_shows": no_shows}


# --------------------------------------------------------------------------- interviews and hallucination
def interview_all(run: Run, sc: Scenario, embedder, mind=None) -> list[dict[str, Any]]:
    """Every agent asked every fact's question at the end of the run (:func:`simulacra.interview.interview`,
    through the run's ablations, as the agent was during the run); ``mind``: the mind that answers (default: a
    scripted mind, or the run's model when given). Each answer: agent, fact, question, answer, source, time,
    ablations."""
    from simulacra.interview import interview

    if mind is None:
        from simulacra.cognition.scripted import ScriptedMind

        mind = ScriptedMind()
    out = []
    for f in sc.facts:
        for a in run.agents:
            r = interview(run.run_dir, a, f.question, embedder=embedder, mind=mind)
            out.append({"agent": a, "fact": f.id, "question": f.question, "answer": r["answer"],
                        "source": r["source"], "time": r["time"], "ablations": r["ablations"]})
    return out


def hallucination(answers: Sequence[dict[str, Any]], sc: Scenario, heard: dict[str, dict[str, int]],
                  sim: Similarity) -> dict[str, Any]:
    """Judge interview ``answers`` (:func:`interview_all`): an answer *claims* a fact when a sentence of it is at
    least the similarity threshold to the fact; a claim is *made up* when the trace says the agent had not heard
    the fact by the interview's time (``heard``: fact id -> :func:`heard_times`). Returns ``rate`` (made up /
    answers), ``claims``, ``made_up`` (list of ``{agent, fact, answer}``), ``confirmed`` (fact id -> agents whose
    answer claims a fact they hold), ``unrecalled`` (list of ``{agent, fact, answer}``: the agent had heard the fact
    but the answer does not claim it; forgotten, not retrieved, or, under ``no-memory``, out of reach: not made up),
    ``answers``."""
    made_up, unrecalled, confirmed, claims = [], [], {f.id: [] for f in sc.facts}, 0
    for ans in answers:
        f = sc.fact(ans["fact"])
        when = heard[f.id].get(ans["agent"])
        held = when is not None and when < ans["time"]
        if not sim.holds(ans["answer"], f):
            if held:
                unrecalled.append({"agent": ans["agent"], "fact": f.id, "answer": ans["answer"]})
            continue
        claims += 1
        if not held:
            made_up.append({"agent": ans["agent"], "fact": f.id, "answer": ans["answer"]})
        else:
            confirmed[f.id].append(ans["agent"])
    n = len(answers)
    return {"answers": n, "claims": claims, "made_up": made_up, "rate": len(made_up) / n if n else 0.0,
            "confirmed": confirmed, "unrecalled": unrecalled}


# --------------------------------------------------------------------------- cost and history
def agent_hours(run: Run) -> float:
    """Agent-game-hours simulated: agents x ticks x tick length."""
    return len(run.agents) * len(run.ticks) * run.tick_minutes / MINUTES_PER_HOUR


def cost(run: Run) -> dict[str, Any]:
    """Model calls, tokens and cost (USD at the configured ``llm.*_price_per_1k``) in total and per
    agent-game-hour (:func:`agent_hours`); the mind's decisions by source. All 0 for an offline run."""
    s = run.summary or {}
    llm = s.get("llm") or {}
    hours = agent_hours(run) or 1.0
    calls = int(llm.get("calls", 0))
    tokens = int(llm.get("prompt_tokens", 0)) + int(llm.get("completion_tokens", 0))
    return {"agent_hours": agent_hours(run), "llm_calls": calls, "tokens": tokens,
            "cost_usd": float(llm.get("cost_usd", 0.0)), "llm_calls_per_agent_hour": calls / hours,
            "tokens_per_agent_hour": tokens / hours, "cost_usd_per_agent_hour": float(llm.get("cost_usd", 0.0)) / hours,
            "decisions": (s.get("mind") or {}).get("decisions", {})}


def _tells(line: LineRecord, f: Fact, run: Run, sim: Similarity) -> bool:
    """A trace line tells ``f``: its news topic, or (a language-model mind's line) its text holds the fact."""
    return line["topic"] == f.text or (not run.scripted and sim.holds(line["text"], f))


def _in_summary(text: str, f: Fact, sim: Similarity) -> bool:
    """A conversation summary holds ``f``: the fact's text in it, or a sentence similar to it."""
    return bool(text) and (f.text in text or sim.holds(text, f))


def history(run: Run, sc: Scenario, sim: Similarity, model=None, seed: int | None = None) -> dict[str, Any]:
    """Tokens per conversation and whether facts said early in long conversations survive to their end, per the
    conversation-history strategy (``cognition.history``) of a language-model mind.

    Tokens: line and summary calls (or whole-exchange calls) over conversations, from the run's summary.

    Survival: every (conversation, seeded non-control fact) where the fact was told in the first half of a
    conversation of at least :data:`LONG_CONVERSATION` lines is an *early fact*. Its end view is the trace's
    ``history`` entry of the conversation: the strategy's summary and its last ``verbatim`` lines, what a speaker's
    prompt would still show (:meth:`simulacra.cognition.dialogue.DialogueHistory.end_context`).

    * ``in_view``: the end view still holds the fact: a line shown verbatim tells it, or the summary holds it (the
      fact's text in it, or a sentence at least the similarity threshold to it).
    * ``recalled`` (with ``model``): the listener of the first telling is asked the fact's question from the end view
      alone (:func:`simulacra.cognition.dialogue.ask_after`, temperature 0, ``seed``) and the answer holds the fact.
    * ``in_summary``: the conversation's stored summary (written from the whole transcript, whatever the strategy)
      holds it.

    A conversation without a ``history`` entry (scripted mind, ``cognition.exchange=whole``) has no end view: its
    early facts are counted, ``in_view`` and ``recalled`` are ``None``.

    Returns:
        ``strategy``, ``conversations``, ``tokens_per_conversation``, ``early_facts``, ``in_view`` and ``recalled``
        (counts), ``asked`` (questions answered by the model), ``in_view_share`` (in_view / early facts with an end
        view) and ``survival`` (recalled / asked), each ``None`` when there is nothing to divide,
        ``in_summary_share``, and ``probes``: one dict per early fact (tick time, participants, fact, teller,
        listener, in_view, in_summary, answer, recalled).
    """
    from simulacra.cognition.dialogue import ask_after, recall_answer
    from simulacra.cognition.history import HistoryContext, Turn
    from simulacra.llm.base import LLMError

    usage = ((run.summary or {}).get("mind") or {}).get("history") or {}
    convs = int(usage.get("conversations", 0))
    tokens = sum(int(v) for k, v in usage.items() if k.endswith("_tokens"))
    facts = [f for f in sc.facts if not f.control]
    names = agent_names(run.header, run.header.get("personas") or ())

    def name(a: str) -> str:
        return names.get(a, a)

    probes: list[dict[str, Any]] = []
    for t in run.ticks:
        for c in t["conversations"]:
            lines = c["lines"]
            if len(lines) < LONG_CONVERSATION:
                continue
            end = c.get("history")
            for f in facts:
                first = next((ln for ln in lines[: len(lines) // 2] if _tells(ln, f, run, sim)), None)
                if first is None:
                    continue
                summary = c.get("summary", "")
                probe = {"time": int(t["time"]), "participants": c["participants"], "fact": f.id,
                         "teller": first["speaker"], "listener": first["listener"],
                         "in_summary": _in_summary(summary, f, sim), "in_view": None, "answer": None,
                         "recalled": None}
                if end is not None:
                    shown = lines[len(lines) - int(end["verbatim"]):] if int(end["verbatim"]) else []
                    view_summary = end.get("summary") or ""
                    probe["strategy"] = end.get("strategy")
                    probe["in_view"] = (any(_tells(ln, f, run, sim) for ln in shown)
                                        or _in_summary(view_summary, f, sim))
                    if model is not None:
                        ctx = HistoryContext(end.get("summary"), [Turn(name(ln["speaker"]), name(ln["listener"]),
                                                                       ln["text"]) for ln in shown])
                        try:
                            answer = recall_answer(ask_after(model, ctx, name(first["listener"]),
                                                             name(first["speaker"]), f.question, seed))
                        except LLMError as err:
                            answer = None
                            probe["error"] = str(err)
                        if answer is not None:
                            probe["answer"] = answer
                            probe["recalled"] = bool(answer) and sim.holds(answer, f)
                probes.append(probe)
    viewed = [p for p in probes if p["in_view"] is not None]
    asked = [p for p in probes if p["recalled"] is not None]
    in_view = sum(p["in_view"] for p in viewed)
    recalled = sum(p["recalled"] for p in asked)
    return {"strategy": usage.get("strategy"), "conversations": convs,
            "tokens_per_conversation": tokens / convs if convs else 0.0,
            "early_facts": len(probes), "in_view": in_view, "recalled": recalled, "asked": len(asked),
            "in_view_share": in_view / len(viewed) if viewed else None,
            "survival": recalled / len(asked) if asked else None,
            "in_summary_share": sum(p["in_summary"] for p in probes) / len(probes) if probes else None,
            "probes": probes}


# --------------------------------------------------------------------------- all of it
def evaluate_run(run_dir: str | Path, sc: Scenario, embedder, mind=None, interviews: bool = True,
                 threshold: float = SIMILARITY) -> dict[str, Any]:
    """Every metric the scenario asks for (``measure``) on one finished run; JSON-able. ``mind`` answers the
    interviews (default scripted); ``interviews=False`` skips them (no hallucination metric, and no
    ``diffusion.<fact>.confirmed_end``: the share 0..1 of agents whose end-of-run answer claims the fact and who
    had heard it by then, :func:`hallucination`'s ``confirmed``). The interviews go through the run's recorded
    ablations (``interview_ablations``); knowing is read from the whole store (``knows``: :data:`KNOWS`)."""
    run = Run.load(run_dir)
    sim = Similarity(embedder, threshold)
    want = set(sc.measure)
    out: dict[str, Any] = {"run_dir": str(run.run_dir), "agents": len(run.agents), "ticks": len(run.ticks),
                           "mind": run.header.get("mind"), "knows": KNOWS}
    heard = {f.id: heard_times(run, f, sim) for f in sc.facts}
    step = sc.curve_every_minutes
    minutes = list(range(run.start, run.end, step)) + [run.end]
    if "diffusion" in want:
        know = Knowledge(run, embedder, sim)
        out["diffusion"] = {}
        for f in sc.facts:
            curve = diffusion(know, f, minutes)
            told = heard_times(run, f, sim, notices=False)
            heard_curve, told_curve = ([sum(1 for m0 in h.values() if m0 < m) / len(run.agents) for m in minutes]
                                       for h in (heard[f.id], told))
            out["diffusion"][f.id] = {"start": curve[0], "end": curve[-1], "minutes": minutes, "curve": curve,
                                      "heard_end": heard_curve[-1], "heard_curve": heard_curve,
                                      "told_end": told_curve[-1], "told_curve": told_curve, "control": f.control}
    if "network" in want:
        g0, g1 = network(run), network(run, until=run.end)
        out["density_start"], out["density_end"] = density(g0), density(g1)
        out["edges_start"], out["edges_end"] = g0.number_of_edges(), g1.number_of_edges()
    if "coordination" in want and sc.party is not None:
        out["coordination"] = coordination(run, sc, heard[sc.party.fact])
        out["invited"] = len(out["coordination"]["invited"])
        out["attended"] = len(out["coordination"]["attended"])
    if "hallucination" in want and interviews:
        answers = interview_all(run, sc, embedder, mind)
        h = hallucination(answers, sc, heard, sim)
        out["hallucination"] = h
        out["interview_ablations"] = sorted({x for a in answers for x in a["ablations"]})
        out["hallucination_rate"] = h["rate"]
        for fid, d in out.get("diffusion", {}).items():  # knowing, confirmed by the agent's own interview answer
            d["confirmed_end"] = len(set(h["confirmed"][fid])) / len(run.agents)
    if "cost" in want:
        c = cost(run)
        out["cost"] = c
        for key in COST_PER_AGENT_HOUR:
            out[key] = c[key]
    if "history" in want:
        out["history"] = history(run, sc, sim, model=getattr(mind, "model", None),
                                 seed=(run.header.get("config") or {}).get("simulation", {}).get("seed"))
    if "recall" in want and sc.recall is not None:
        from simulacra.evaluation.recall import recall_metrics

        out["recall"] = recall_metrics(run, sc, sim, heard)
    return out
