"""The tick loop: decide, apply, converse, perceive, remember, reflect, retrieve, consolidate, trace.

Contract (after Gymnasium): :meth:`Simulation.step` advances one tick and returns its record;
:meth:`Simulation.run` runs several; :meth:`Simulation.close` releases the rater and the trace. Every
agent decides from the same pre-tick state and the world applies all actions at once, so the order in
which agents are visited does not change the outcome. One seeded RNG drives every random choice; game
time comes from the :class:`~simulacra.clock.GameClock` only.
"""

from __future__ import annotations

import logging
import shutil
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from simulacra import __version__
from simulacra.clock import GameClock, format_hhmm
from simulacra.cognition.converse import compose, news_candidates
from simulacra.cognition.plan import Action, decide, is_free
from simulacra.cognition.reflect import ReflectionRequest, focal_points, gather_evidence, insight_records
from simulacra.config import Config
from simulacra.errors import RaterError, RunExistsError
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.store import MemoryTier
from simulacra.memory.stream import AgentMemory, open_chroma
from simulacra.persona import Persona
from simulacra.trace import TraceWriter
from simulacra.world.model import World, load_world
from simulacra.world.perception import perceive

log = logging.getLogger(__name__)

#: owner key of the town's shared memory in a tick's pending writes (persona ids are file stems, no "@")
TOWN = "@town"


@dataclass
class AgentState:
    """Mutable state of one agent during a run."""

    persona: Persona
    memory: AgentMemory
    place: str
    action: Action | None = None
    plan_index: int | None = None  # routine entry whose plan step was last remembered
    last_percepts: set[str] = field(default_factory=set)
    told: dict[str, set[str]] = field(default_factory=dict)  # listener id -> topics told to / heard from them
    knows: set[str] = field(default_factory=set)  # topics seen or heard, ever
    talked_to: Counter = field(default_factory=Counter)

    @property
    def id(self) -> str:
        return self.persona.id


@dataclass
class TickResult:
    """What one tick produced: the trace record and human-readable notable lines."""

    record: dict[str, Any]
    notable: list[str]


def static_records(agent: str, persona: Persona, world: World) -> list[MemoryRecord]:
    """Static memory of ``agent``: persona facts, relationships, world rules and place descriptions."""
    names = {pid: p.name for pid, p in world.personas.items()}
    texts = [(t, "persona") for t in persona.facts()]
    texts += [(f"{persona.name} and {names[o]}: {d}", "persona") for o, d in persona.relationships.items()]
    texts += [(f"{persona.name} lives at {world.places[persona.home].name}.", "persona")]
    texts += [(t, "world") for t in world.facts()]
    seen: set[str] = set()
    out = []
    for text, kind in texts:
        if text not in seen:
            seen.add(text)
            out.append(MemoryRecord(id=memory_id(agent, -1, text), text=text, kind=kind))
    return out


class Simulation:
    """A town simulation writing ``<run_dir>/trace.jsonl`` and one Chroma store per agent.

    Build one with :meth:`create`. Args of the constructor are already-made parts:

    Args:
        world: a loaded world (with personas).
        config: the run config.
        run_dir: folder of this run (``database/<run>``); must exist.
        embedder: an :class:`~simulacra.embeddings.Embedder` (cached).
        rater: a :class:`~simulacra.rater.RaterClient`.
        rater_server: the in-process rater to close at the end, if one was started.
        agents: ids of the residents to simulate (default all).
    """

    def __init__(self, world: World, config: Config, run_dir: Path, embedder, rater, rater_server=None,
                 agents: list[str] | None = None):
        self.world = world
        self.config = config
        self.run_dir = Path(run_dir)
        self.embedder = embedder
        self.rater = rater
        self.rater_server = rater_server
        self.rng = np.random.default_rng(config.simulation.seed)
        self.clock = GameClock(world.start_minute, world.tick_minutes)
        ids = agents if agents is not None else list(world.personas)
        unknown = [a for a in ids if a not in world.personas]
        if unknown:
            raise ValueError(f"not residents of {world.source}: {unknown}")
        self.names = {pid: world.personas[pid].name for pid in ids}
        self.object_states = {o.id: o.state for o in world.objects}
        self.pair_last_talk: dict[tuple[str, str], int] = {}
        dim = embedder.dim
        self.shared: MemoryTier | None = None
        self.posted_topics: set[str] = set()
        if world.shared_memory:
            self.shared = MemoryTier(open_chroma(self.run_dir / "town"), "shared", dim, config.memory.distance)
            self.posted_topics = {r.extra["topic"] for r in self.shared.records if r.extra.get("topic")}
        self.reflection_failures = 0
        self.reflections_made: Counter = Counter()  # agent -> reflect operations that stored an insight
        self.forgotten: Counter = Counter()  # agent -> memories forgotten (consolidation and decay)
        self.agents: dict[str, AgentState] = {}
        statics = {pid: static_records(pid, world.personas[pid], world) for pid in ids}
        unique = sorted({r.text for recs in statics.values() for r in recs})
        vectors = dict(zip(unique, embedder.embed(unique)))
        for pid in ids:
            persona = world.personas[pid]
            mem = AgentMemory(pid, self.run_dir / pid, config.memory, dim, shared=self.shared)
            recs = statics[pid]
            mem.set_static(recs, np.stack([vectors[r.text] for r in recs]))
            self.agents[pid] = AgentState(persona=persona, memory=mem, place=persona.home)
        self.trace = TraceWriter(self.run_dir / "trace.jsonl", self._header())
        self.ticks_done = 0
        self.llm = None  # the language model behind the in-process rater, if one is configured (create())
        self.stopped: str | None = None

    # ----------------------------------------------------------------- construction
    @classmethod
    def create(cls, world_path: str | Path, config: Config | None = None, personas_dir: str | Path | None = None,
               db_dir: str | Path = "database", run_name: str | None = None, overwrite: bool = False,
               embedder=None, agents: list[str] | None = None) -> Simulation:
        """Load the world, prepare ``<db_dir>/<run_name>/``, connect to (or start) the rater.

        Raises:
            WorldError, PersonaError: invalid input files (naming file and field).
            RunExistsError: the run folder exists and ``overwrite`` is false.
            RaterError: no rater answers and none can be started.
        """
        from simulacra.embeddings import CachedEmbedder, SentenceTransformerEmbedder
        from simulacra.llm import build_model
        from simulacra.rater import connect_rater

        config = config or Config()
        world = load_world(world_path, personas_dir)
        run_name = run_name or f"{Path(world_path).stem}-seed{config.simulation.seed}"
        run_dir = Path(db_dir) / run_name
        if run_dir.exists():
            if not overwrite:
                raise RunExistsError(f"run folder {run_dir} exists; pass --overwrite or choose another --run-name")
            _forget_chroma_clients()
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        if embedder is None:
            e = config.embedding
            embedder = CachedEmbedder(SentenceTransformerEmbedder(e.model, e.device, e.batch_size), e.cache_size)
        r = config.rater
        llm = build_model(config.llm, run_dir)  # None: no model configured, the offline backends answer
        backend = None
        if llm is not None:
            from rater_server.backends import EmbeddingRater
            from rater_server.llm_backend import LLMRater

            backend = LLMRater(llm, EmbeddingRater(embedder, k=r.neighbours), batch_size=r.llm_batch_size)
        rater, server = connect_rater(r.url, r.timeout_s, r.start_local, embedder, r.neighbours, backend=backend)
        if llm is not None and server is None:
            log.warning("a rater already answers at %s, so the configured LLM (%s) is not used by this run; stop "
                        "that rater or point rater.url elsewhere", r.url, llm.name)
        try:
            sim = cls(world, config, run_dir, embedder, rater, server, agents)
        except BaseException:
            if server is not None:
                server.close()
            raise
        sim.llm = llm if server is not None else None
        return sim

    def _header(self) -> dict[str, Any]:
        w = self.world
        return {
            "simulacra_version": __version__,
            "seed": self.config.simulation.seed,
            "config": self.config.to_dict(),
            "embedding_model": getattr(self.embedder, "name", "?"),
            "world_file": Path(w.source).name,
            "world": w.model_dump(mode="json", exclude={"source"}),
            "personas": {pid: w.personas[pid].model_dump(mode="json") for pid in self.agents},
            "agents": list(self.agents),
            "start_minute": self.clock.start_minute,
            "tick_minutes": self.clock.tick_minutes,
            "objects": dict(self.object_states),
        }

    # ----------------------------------------------------------------- the tick
    def step(self) -> TickResult:
        """Advance one tick (``world.tick_minutes`` game minutes); returns its record and notable lines."""
        now, tick = self.clock.now, self.clock.tick
        mod = self.clock.minute_of_day()
        sim = self.config.simulation
        memory_ops: list[dict[str, Any]] = []
        notable: list[str] = []
        clock = format_hhmm(now)

        # 1. world events of this tick
        tm = self.world.tick_minutes
        active = [ev for ev in self.world.events if ev.minute < now + tm and now < ev.minute + ev.duration_minutes]
        starting = [ev for ev in active if now <= ev.minute < now + tm]
        object_changes: dict[str, str] = {}
        pending: list[tuple[str, MemoryRecord]] = []  # (owner, record): an agent id, or TOWN for shared memory
        for ev in starting:
            object_changes.update(ev.object_states)
            notable.append(f"{clock} event at {self.world.places[ev.place].name}: {ev.text}")
            if ev.public:
                self._post(pending, ev.text, "world", ev.place, now, tick)

        # 2. decide (all from the same pre-tick state)
        actions = {pid: decide(a.persona, a.place, mod, self.world) for pid, a in self.agents.items()}
        pairs = self._pair_conversations(actions, now)
        for a, b in pairs:
            for me, other in ((a, b), (b, a)):
                act = actions[me]
                actions[me] = Action("talk", f"talking with {self.names[other]}", act.place, act.routine_index,
                                     partner=other)

        # 3. apply all at once
        for pid, act in actions.items():
            if act.type != "move":
                entry = self.agents[pid].persona.routine[act.routine_index]
                if entry.place == act.place:
                    object_changes.update(entry.object_state)
            self.agents[pid].place = act.place
            self.agents[pid].action = act
        self.object_states.update(object_changes)
        positions = {pid: a.place for pid, a in self.agents.items()}
        activities = {pid: a.action.activity for pid, a in self.agents.items()}
        doing = {pid: a.persona.routine[a.action.routine_index].activity for pid, a in self.agents.items()}

        # 4. conversations (retrieval about the partner + most important recent memories)
        conversations = self._converse(pairs, now, tick, doing, memory_ops, pending, notable, clock)

        # 5. perception and plan steps
        for pid, agent in self.agents.items():
            related = set(agent.persona.relationships)
            percepts = perceive(pid, agent.place, self.world, positions, activities, self.object_states, active,
                                pairs, self.names, related, sim.attention_bandwidth)
            texts = {p.text for p in percepts}
            for p in percepts:
                if p.text in agent.last_percepts:
                    continue
                extra = {"topic": p.topic, "source": "seen"} if p.topic else {}
                if p.topic:
                    agent.knows.add(p.topic)
                pending.append((pid, self._record(pid, p.text, p.kind, now, tick, extra)))
            agent.last_percepts = texts
            if agent.plan_index != actions[pid].routine_index:
                agent.plan_index = actions[pid].routine_index
                pending.append((pid, self._record(pid, self._plan_text(agent, actions[pid]), "plan", now, tick)))

        # 6. remember: one rating request and one embedding batch for the whole tick
        memory_ops += self._remember(pending)

        # 6b. reflect, for agents whose new memories' ratings reached the threshold
        reflections = self._reflect(now, tick, memory_ops)
        notable += [f"{clock} {self.names[r['agent']]} reflects: {ins['text']}" for r in reflections
                    for ins in r["insights"]]

        # 7. each agent retrieves what bears on what it is doing
        queries = {pid: f"{a.action.activity} at {self.world.places[a.place].name}" for pid, a in self.agents.items()}
        qvecs = self.embedder.embed([queries[pid] for pid in self.agents])
        for (pid, agent), qv in zip(self.agents.items(), qvecs):
            found = agent.memory.retrieve(qv, now)
            memory_ops.append(self._retrieve_op(pid, queries[pid], "focus", found, agent.memory, qv, now))

        # 8. consolidation and forgetting
        for agent in self.agents.values():
            memory_ops += agent.memory.consolidate(now)

        for op in memory_ops:
            if op["op"] == "forget":
                self.forgotten[op["agent"]] += 1
            elif op["op"] == "reflect" and op["insights"]:
                self.reflections_made[op["agent"]] += 1
        record = {
            "type": "tick",
            "tick": tick,
            "time": now,
            "clock": clock,
            "positions": positions,
            "actions": {pid: a.action.to_dict() for pid, a in self.agents.items()},
            "events": [ev.text for ev in starting],
            "object_changes": object_changes,
            "conversations": conversations,
            "memory": memory_ops,
        }
        self.trace.write(record)
        self.clock.advance()
        self.ticks_done += 1
        return TickResult(record, notable)

    def _plan_text(self, agent: AgentState, act: Action) -> str:
        p = agent.persona
        entry = p.routine[act.routine_index]
        end = p.routine[(act.routine_index + 1) % len(p.routine)].start
        place = self.world.places[entry.place].name
        return f"{p.name} plans to be {entry.activity} at {place} from {entry.start} to {end}."

    def _record(self, agent: str, text: str, kind: str, now: int, tick: int, extra: dict | None = None) -> MemoryRecord:
        return MemoryRecord(id=memory_id(agent, now, text), text=text, kind=kind, timestamp=float(now), tick=tick,
                            extra=dict(extra or {}))

    def _post(self, pending, text: str, author: str, place: str, now: int, tick: int, topic: str | None = None) -> None:
        """Queue a notice for the town's shared memory: once per topic (``topic`` defaults to ``text``);
        a no-op when the world has no shared memory. ``author`` is ``"world"`` or an agent id."""
        topic = topic or text
        if self.shared is None or topic in self.posted_topics:
            return
        self.posted_topics.add(topic)
        rec = MemoryRecord(id=memory_id("town", now, text), text=text, kind="notice", timestamp=float(now), tick=tick,
                           extra={"topic": topic, "author": author, "place": place})
        pending.append((TOWN, rec))

    def _remember(self, pending: list[tuple[str, MemoryRecord]]) -> list[dict[str, Any]]:
        if not pending:
            return []
        texts = list(dict.fromkeys(r.text for _, r in pending))
        ratings = dict(zip(texts, self.rater.rate_many(texts)))
        vectors = dict(zip(texts, self.embedder.embed(texts)))
        ops: list[dict[str, Any]] = []
        by_owner: dict[str, dict[str, MemoryRecord]] = {pid: {} for pid in self.agents}
        by_owner[TOWN] = {}
        for owner, rec in pending:
            rec.rating = ratings[rec.text]
            by_owner[owner].setdefault(rec.id, rec)
        for owner, recs in by_owner.items():
            if not recs:
                continue
            lst = list(recs.values())
            emb = np.stack([vectors[r.text] for r in lst])
            if owner == TOWN:
                self.shared.upsert(lst, emb)
                ops += [{"op": "post", "tier": "shared", "author": r.extra["author"], "id": r.id, "text": r.text,
                         "kind": r.kind, "rating": r.rating, "timestamp": r.timestamp} for r in lst]
            else:
                ops += self.agents[owner].memory.add(lst, emb)
        return ops

    def _reflect(self, now: int, tick: int, memory_ops: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Reflection for every agent whose trigger is due (:mod:`simulacra.cognition.reflect`); one rating
        request and one embedding batch for all insights of the tick, one long-term write per agent.

        A rater that fails is logged and counted (``reflection_failures``); the agent's trigger is reset so
        that it does not ask again every tick. Returns the ``reflect`` trace operations (also appended to
        ``memory_ops`` with the insights' ``add`` operations).
        """
        cfg = self.config.reflection
        if not cfg.enabled:
            return []
        made: list[tuple[str, ReflectionRequest, list[MemoryRecord], float]] = []
        for pid, agent in self.agents.items():
            mem = agent.memory
            if not mem.reflection_due(cfg.threshold):
                continue
            accumulated = mem.importance_since_reflection
            focal = focal_points(mem, now, cfg.focal_points, cfg.focal_similarity, since=mem.last_reflection)
            req = ReflectionRequest(pid, focal, gather_evidence(mem, focal, now, cfg.evidence_per_focal_point))
            mem.reflected(now)
            if not req.evidence:
                continue
            try:
                insights = self.rater.reflect(req.payload(), agent=agent.persona.name, max_insights=cfg.max_insights)
            except RaterError as err:
                self.reflection_failures += 1
                log.warning("reflection of %s at tick %d skipped: %s", pid, tick, err)
                continue
            made.append((pid, req, insight_records(pid, insights, req.evidence, now, tick), accumulated))
        texts = list(dict.fromkeys(r.text for _, _, recs, _ in made for r in recs))
        if not texts:
            return []
        ratings = dict(zip(texts, self.rater.rate_many(texts)))
        vectors = dict(zip(texts, self.embedder.embed(texts)))
        ops = []
        for pid, req, recs, accumulated in made:
            for r in recs:
                r.rating = ratings[r.text]
            op = {"op": "reflect", "agent": pid, "importance_accumulated": accumulated,
                  "focal_points": [{"id": f.id, "text": f.text} for f in req.focal_points],
                  "evidence": [m.id for m in req.evidence],
                  "insights": [{"id": r.id, "text": r.text, "evidence_ids": r.evidence_ids, "depth": r.depth,
                                "rating": r.rating} for r in recs]}
            ops.append(op)
            memory_ops.append(op)
            if recs:
                emb = np.stack([vectors[r.text] for r in recs])
                memory_ops += self.agents[pid].memory.add_long_term(recs, emb, now)
        return ops

    def _retrieve_op(self, agent: str, query: str, purpose: str, found, memory: AgentMemory, query_embedding,
                     now: int) -> dict[str, Any]:
        """A ``retrieve`` trace operation: the results with their score terms, the retrieval's parameters, and
        per tier every memory that other weights or ``gamma`` could have returned (``simulacra rescore``)."""
        m = memory.config
        return {"op": "retrieve", "agent": agent, "query": query, "purpose": purpose,
                "results": [r.to_dict() for r in found],
                "top_k": m.top_k, "threshold": m.threshold, "mode": m.retrieval, "tiers": list(memory.readable),
                "candidates": memory.candidates(query_embedding, now)}

    def _pair_conversations(self, actions: dict[str, Action], now: int) -> list[tuple[str, str]]:
        sim = self.config.simulation
        by_place: dict[str, list[str]] = {}
        for pid in sorted(actions):
            if is_free(actions[pid]):
                by_place.setdefault(actions[pid].place, []).append(pid)
        pairs = []
        for place in sorted(by_place):
            free = by_place[place]
            taken: set[str] = set()
            for i, a in enumerate(free):
                for b in free[i + 1:]:
                    if a in taken or b in taken:
                        continue
                    last = self.pair_last_talk.get((a, b))
                    if last is not None and now - last < sim.conversation_cooldown_minutes:
                        continue
                    pa, pb = self.agents[a].persona, self.agents[b].persona
                    p = sim.conversation_probability
                    if b in pa.relationships or a in pb.relationships:
                        p = min(1.0, p + sim.acquaintance_bonus)
                    if self.rng.random() < p:
                        pairs.append((a, b))
                        taken |= {a, b}
                        self.pair_last_talk[(a, b)] = now
        return pairs

    def _converse(self, pairs, now, tick, activities, memory_ops, pending, notable, clock) -> list[dict]:
        if not pairs:
            return []
        sim = self.config.simulation
        ordered = []
        for a, b in pairs:
            ordered.append((a, b) if self.rng.random() < 0.5 else (b, a))
        # one embedding batch for both sides of every conversation (an agent is in one pair at most)
        asks = {(me, other): f"What do I know about {self.names[other]}?"
                for a, b in ordered for me, other in ((a, b), (b, a))}
        qvecs = dict(zip(asks, self.embedder.embed(list(asks.values()))))
        out = []
        for a, b in ordered:
            news = {}
            for me, other in ((a, b), (b, a)):
                q = asks[(me, other)]
                agent = self.agents[me]
                about = agent.memory.retrieve(qvecs[(me, other)], now)
                memory_ops.append(self._retrieve_op(me, q, f"conversation with {other}", about, agent.memory,
                                                    qvecs[(me, other)], now))
                recent = agent.memory.most_important(
                    now, 10, tiers=("short_term", "long_term"), since=now - sim.news_max_age_minutes,
                    kinds=("event", "dialogue"))
                news[me] = news_candidates(recent, about, other, self.names[other],
                                           agent.told.get(other, set()), sim.news_min_rating)
            lines = compose(self.agents[a].persona, self.agents[b].persona, news[a], news[b],
                            self.agents[a].knows, self.agents[b].knows, self.names, activities,
                            sim.conversation_turns, acquainted=self.agents[a].talked_to[b] > 0)
            place = self.agents[a].place
            for ln in lines:
                said = f'{self.names[ln.speaker]} said to {self.names[ln.listener]}: "{ln.text}"'
                speaker, listener = self.agents[ln.speaker], self.agents[ln.listener]
                pending.append((ln.speaker, self._record(ln.speaker, said, "dialogue", now, tick)))
                extra = {"topic": ln.topic, "source": ln.speaker} if ln.topic else {}
                pending.append((ln.listener, self._record(ln.listener, said, "dialogue", now, tick, extra)))
                if ln.topic and self.world.places[place].kind == "public":  # said in public: an announcement
                    self._post(pending, f"{self.names[ln.speaker]} spread the word at "
                               f"{self.world.places[place].name}: {ln.topic}", ln.speaker, place, now, tick, ln.topic)
                if ln.topic:
                    speaker.told.setdefault(ln.listener, set()).add(ln.topic)
                    listener.told.setdefault(ln.speaker, set()).add(ln.topic)
                    listener.knows.add(ln.topic)
            self.agents[a].talked_to[b] += 1
            self.agents[b].talked_to[a] += 1
            topics = [ln.topic for ln in lines if ln.topic]
            what = "; ".join(topics) if topics else "small talk"
            notable.append(f"{clock} {self.names[a]} talks with {self.names[b]} at "
                           f"{self.world.places[place].name}: {what}")
            out.append({"participants": [a, b], "place": place,
                        "lines": [{"speaker": ln.speaker, "listener": ln.listener, "text": ln.text,
                                   "topic": ln.topic} for ln in lines]})
        return out

    # ----------------------------------------------------------------- runs
    def run(self, ticks: int, on_tick: Callable[[TickResult], None] | None = None) -> dict[str, Any]:
        """Run ``ticks`` ticks; calls ``on_tick`` after each; returns :meth:`summary`.

        A rater that fails for good (unreachable after its retries, or its LLM budget spent) stops the run
        cleanly before the failing tick writes anything: the trace and the stores end at the last complete
        tick, and the summary's ``stopped`` says why.
        """
        for _ in range(ticks):
            try:
                result = self.step()
            except RaterError as err:
                self.stopped = f"stopped before tick {self.clock.tick} ({format_hhmm(self.clock.now)}): {err}"
                log.error("run %s", self.stopped)
                break
            if on_tick is not None:
                on_tick(result)
        return self.summary()

    def summary(self) -> dict[str, Any]:
        """Per agent: memory counts per tier, its three most important long-term memories (decayed
        importance), its latest reflections (depth, evidence count), how many memories it forgot, whom it
        talked to; per world event: who came to know it; the shared memory's size; where the run is."""
        now = self.clock.now
        agents = {}
        for pid, a in self.agents.items():
            ranked = a.memory.most_important(now, len(a.memory.long_term), tiers=("long_term",))
            distinct: dict[str, tuple] = {}
            for r, imp in ranked:  # best first; the same text at several game times is shown once
                distinct.setdefault(r.text, (r, imp))
            top = list(distinct.values())[:3]
            reflections = sorted((r for r in a.memory.long_term.records if r.kind == "reflection"),
                                 key=lambda r: (-(r.timestamp or 0), r.id))
            agents[pid] = {
                "name": a.persona.name,
                "counts": a.memory.counts(),
                "top_long_term": [{"text": r.text, "importance": round(i, 3)} for r, i in top],
                "reflections": [{"text": r.text, "depth": r.depth, "evidence": len(r.evidence_ids)}
                                for r in reflections[:3]],
                "reflections_total": self.reflections_made[pid],
                "forgotten": self.forgotten[pid],
                "talked_to": [self.names[o] for o, _ in sorted(a.talked_to.items(), key=lambda x: (-x[1], x[0]))],
            }
        events = []
        for ev in self.world.events:
            if ev.minute < now:
                knowers = sorted(pid for pid, a in self.agents.items() if ev.text in a.knows)
                events.append({"time": ev.time, "place": ev.place, "text": ev.text, "known_by": knowers})
        return {
            "run_dir": str(self.run_dir),
            "trace": str(self.run_dir / "trace.jsonl"),
            "ticks": self.ticks_done,
            "game_time": format_hhmm(now),
            "agents": agents,
            "events": events,
            "stopped": self.stopped,
            "llm": self._llm_report(),
            "shared_memory": None if self.shared is None else len(self.shared),
            "reflection_failures": self.reflection_failures,
            "rater_fallbacks": self.rater.fallbacks,
            "embedding_cache": {"hits": getattr(self.embedder, "hits", 0),
                                "misses": getattr(self.embedder, "misses", 0)},
        }

    def _llm_report(self) -> dict[str, Any] | None:
        """Calls, tokens and cost of the run's language model (``None`` when none is configured)."""
        report = getattr(self.llm, "report", None)
        return None if report is None else {"model": self.llm.name, **report()}

    def close(self) -> None:
        """Close the trace and stop the in-process rater, if any. Safe to call twice."""
        self.trace.close()
        self.rater.close()
        if self.rater_server is not None:
            self.rater_server.close()
            self.rater_server = None

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _forget_chroma_clients() -> None:
    """Drop Chroma's per-path client cache before a run folder is deleted and made anew in this process."""
    try:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
    except Exception:  # pragma: no cover - cache layout differs across chromadb versions
        log.debug("could not clear chromadb's client cache", exc_info=True)
