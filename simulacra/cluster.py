"""Agent shards as Ray actors: a town of one process grows to several, or to a cluster, with the same results.

``simulacra run --workers N`` (``Simulation.create(..., workers=N)``) starts N actors (:class:`ShardWorker`), or
joins a running cluster with ``--ray-address auto|ray://host:port``. Each actor builds, for the agents
:func:`simulacra.shard.shard_agents` gives it, everything that is theirs (:func:`build_shard_runtime`): its own
embedding model, rater, mind and language-model client (its calls recorded in its own ``llm_calls.jsonl``), and its
own embedded Chroma store and store journal in ``<run>/shard-<k>/`` (each shard keeps a replica of the town's
shared memory, which every shard writes alike). The town (:class:`simulacra.simulation.Simulation`) keeps the world,
the clock, the state and the trace, and steps the actors through each tick's phases: each phase's inputs are put in
Ray's object store once (``ray.put``) and every actor is asked at once; the town waits for all (the barrier) and
merges their answers by :func:`simulacra.shard.by_agent`, so the trace does not depend on which answers first.

A checkpoint covers the town and every shard as one unit: the shards make their part durable first (their store
journals), the town writes ``checkpoint.json`` last, with each shard's memories and counters in it; ``simulacra run
--resume`` starts as many actors again, each reopening its ``shard-<k>/`` and rolling it back to the checkpoint
(:meth:`RayShards.restore`), so a run whose driver or one of whose workers was killed ends as the uninterrupted one.

With a model, one more actor (:class:`ModelGate`) keeps the run's ``llm.concurrency`` (calls in flight) and its
``llm.max_calls`` / ``llm.max_tokens`` budget over all workers: every worker's budget wrapper takes a place from it
before each request, so N workers neither send N times the calls at once nor spend N times the budget.

All workers can keep the run's memory on one Chroma server (``--chroma-url``): each agent's collections are its
shard's alone; the town's shared tier is one collection that every shard writes alike (the same records).

A run whose memory is on a Chroma server can be resumed with another number of workers, or in one process
(:meth:`simulacra.simulation.Simulation.resume` with ``workers``): the checkpoint records its shape
(:func:`simulacra.checkpoint.checkpoint_shards`), the old shape's shards bring the server back to it first, and the
counters are added up for the new shape (:func:`simulacra.checkpoint.reshape_layers`).

A scenario's recall probes run in each shard for its agents (:meth:`simulacra.shard.Shard.probe`), merged by the
town (:func:`simulacra.schedule.merge_probes`).
"""

from __future__ import annotations

import logging
import os
import pickle
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from simulacra.config import Config, config_from_dict
from simulacra.errors import CheckpointError, SimulacraError
from simulacra.runtime import Runtime

log = logging.getLogger(__name__)


def build_shard_runtime(world_path: str, config: Config, personas_dir: str | None, run_dir: str | Path,
                        agents: Sequence[str], residents: Sequence[str], index: int, resume: bool = False) -> Runtime:
    """Everything that belongs to the ``agents`` of shard ``index``, built in the calling process: the world, an
    embedder, the language model (recording into ``<run_dir>/shard-<index>/``), a rater, a mind, and the agents'
    stores (with a replica of the town's shared tier) in the embedded Chroma store of ``<run_dir>/shard-<index>/``,
    or on the run's Chroma server (``memory.chroma_url``).
    With ``resume`` the shard's folder is reopened as it is (its stores, store journal and recorded model answers,
    which a resume replays); the town then restores them to its checkpoint (:meth:`RayShards.restore`).

    Raises:
        WorldError, PersonaError, RaterError, LLMError: as :func:`simulacra.runtime.build_runtime`.
    """
    from simulacra.runtime import build_parts, shard_folder, store_location
    from simulacra.world.model import load_world

    world = load_world(world_path, personas_dir)
    shard_dir = shard_folder(run_dir, index)
    if resume and not shard_dir.is_dir():
        raise CheckpointError(f"{shard_dir}: the folder of shard {index} is missing; the run cannot be resumed")
    shard_dir.mkdir(parents=True, exist_ok=True)
    # embedded: the shard's own store in its folder; on a Chroma server: the run's collections (one per agent and
    # tier, so the shards' never overlap; the town's shared tier is written alike by every shard); the store journal
    # in the shard's folder either way
    location = store_location(config.memory, shard_dir, Path(run_dir).name, run_dir)
    return build_parts(world, config, shard_dir, agents, location, [location.journal.close], resume=resume,
                       residents=residents, name=f"{Path(run_dir).name} shard {index}")


def shard_threads(threads: int, shard_nodes: Sequence[str], node_cpus: dict[str, float]) -> list[int]:
    """The embedding threads of each shard: ``threads`` (``embedding.threads``) for every shard when it is set,
    else (0, only under ONNX Runtime, whose vectors do not depend on the count:
    :func:`simulacra.embeddings.threads_change_vectors`) the CPUs of the shard's node divided among the shards
    placed on it, at least 1.

    Two workers on 2 cores each running the town's 2 threads put 4 busy threads on 2 cores (measured, 1,000
    residents, ONNX: 1.39x one process's tick time; ``docs/scale.md``); one thread each keeps them apart.

    Args:
        threads: ``embedding.threads`` of the run (>= 0).
        shard_nodes: the node each shard is placed on, in shard order.
        node_cpus: CPUs of each node (Ray's ``CPU`` resource); a node missing counts 1.
    Returns:
        one count >= 1 per shard.
    """
    if threads:
        return [int(threads)] * len(shard_nodes)
    placed = Counter(shard_nodes)
    return [max(1, int(node_cpus.get(node, 1) // placed[node])) for node in shard_nodes]


class ModelGate:
    """A Ray actor (asynchronous) keeping one run's bound on model calls in flight and its budget for all its
    workers (:class:`~simulacra.llm.wrappers.CallGate` through :class:`RayGate`): at most ``concurrency`` calls
    (``llm.concurrency``) in flight in the whole run, at most ``max_calls`` calls and ``max_tokens`` tokens
    (``llm.max_calls``, ``llm.max_tokens``; ``None``: no limit) over all workers. A worker waiting for a place holds
    no thread of the actor."""

    def __init__(self, concurrency: int, max_calls: int | None, max_tokens: int | None):
        self.concurrency = max(1, int(concurrency))
        self.max_calls, self.max_tokens = max_calls, max_tokens
        self.calls = self.tokens = self.in_flight = self.most_in_flight = 0
        self._cond: Any = None  # asyncio.Condition, made in the actor's event loop

    def _condition(self):
        import asyncio

        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    def _spent(self) -> str | None:
        from simulacra.llm.wrappers import spent_budget

        return spent_budget(self.calls, self.tokens, self.max_calls, self.max_tokens)

    async def enter(self) -> tuple[str, int, int] | None:
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.concurrency or self._spent() is not None)
            which = self._spent()
            if which is not None:  # the figures once the calls let through have finished
                await cond.wait_for(lambda: self.in_flight == 0)
                return which, self.calls, self.tokens
            self.calls += 1
            self.in_flight += 1
            self.most_in_flight = max(self.most_in_flight, self.in_flight)
            return None

    async def leave(self, tokens: int) -> None:
        cond = self._condition()
        async with cond:
            self.tokens += int(tokens)
            self.in_flight -= 1
            cond.notify_all()

    async def take_up(self, calls: int, tokens: int) -> None:
        cond = self._condition()
        async with cond:
            self.calls += int(calls)
            self.tokens += int(tokens)
            cond.notify_all()

    async def report(self) -> dict[str, int]:
        """``{"calls", "tokens", "most_in_flight"}`` of the whole run so far (``most_in_flight``: the most calls
        that were in flight at once, at most ``concurrency``)."""
        return {"calls": self.calls, "tokens": self.tokens, "most_in_flight": self.most_in_flight}


class RayGate:
    """A :class:`ModelGate` actor as a worker's :class:`~simulacra.llm.wrappers.BudgetedModel` uses it
    (:meth:`BudgetedModel.share <simulacra.llm.wrappers.BudgetedModel.share>`)."""

    def __init__(self, actor: Any):
        self.actor = actor

    def enter(self) -> tuple[str, int, int] | None:
        import ray

        return ray.get(self.actor.enter.remote())

    def leave(self, tokens: int) -> None:
        import ray

        ray.get(self.actor.leave.remote(tokens))

    def take_up(self, calls: int, tokens: int) -> None:
        import ray

        ray.get(self.actor.take_up.remote(calls, tokens))


def _pickled(obj: Any) -> int:
    return len(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


class PhaseCosts:
    """What the town's calls to its shards cost, per phase (``"shard.act"``, ``"stores.persist"``, ...): the
    seconds from sending the phase to the last answer (``wall_s``: the barrier included), each answer's seconds of
    work in its worker, and the bytes sent and received (pickled sizes, when measured).

    Derived in :meth:`report`, for the whole run so far: ``waiting_s``, the seconds shards waited at the barriers
    for the slowest shard of each phase (sum over phases and shards of slowest - own); ``transport_s``, the seconds
    a phase took beyond its slowest shard's work (sending, scheduling, answers coming back: Ray's own cost)."""

    def __init__(self) -> None:
        self.phases: dict[str, dict[str, Any]] = {}

    def add(self, phase: str, wall_s: float, busy_s: Sequence[float], sent: int, received: int) -> None:
        p = self.phases.setdefault(phase, {"calls": 0, "wall_s": 0.0, "busy_s": 0.0, "slowest_s": 0.0,
                                           "waiting_s": 0.0, "bytes_sent": 0, "bytes_received": 0})
        slowest = max(busy_s, default=0.0)
        p["calls"] += 1
        p["wall_s"] += wall_s
        p["busy_s"] += sum(busy_s)
        p["slowest_s"] += slowest
        p["waiting_s"] += sum(slowest - b for b in busy_s)
        p["bytes_sent"] += sent
        p["bytes_received"] += received

    def report(self) -> dict[str, Any]:
        """``{"phases": {phase: {calls, wall_s, busy_s, slowest_s, waiting_s, bytes_sent, bytes_received}},
        "wall_s", "waiting_s", "transport_s", "bytes_sent", "bytes_received"}`` (seconds, bytes; totals over the
        phases)."""
        tot = {k: sum(p[k] for p in self.phases.values()) for k in
               ("wall_s", "slowest_s", "waiting_s", "bytes_sent", "bytes_received")}
        return {"phases": {k: {kk: round(v, 4) if isinstance(v, float) else v for kk, v in p.items()}
                           for k, p in sorted(self.phases.items())},
                "wall_s": round(tot["wall_s"], 3), "waiting_s": round(tot["waiting_s"], 3),
                "transport_s": round(tot["wall_s"] - tot["slowest_s"], 3),
                "bytes_sent": tot["bytes_sent"], "bytes_received": tot["bytes_received"]}


class ShardLost(SimulacraError):
    """A shard's worker process died; the run stops at its last complete tick."""


class ShardWorker:
    """What runs inside one Ray actor: a :class:`~simulacra.shard.Shard` over the runtime it built, and the
    :class:`~simulacra.shard.Stores` of that runtime. :meth:`call` runs one of their methods."""

    def __init__(self, spec: dict[str, Any]):
        from simulacra.shard import Shard, Stores

        logging.basicConfig(level=spec.get("log_level", logging.WARNING),
                            format=f"%(levelname)s shard-{spec['index']} %(name)s: %(message)s")
        config = config_from_dict(spec["config"], "the town's config")
        if spec.get("threads") and spec["threads"] != config.embedding.threads:  # the shard's share of its node
            config = config.model_copy(update={"embedding": config.embedding.model_copy(
                update={"threads": int(spec["threads"])})})
        self.rt = build_shard_runtime(spec["world"], config, spec["personas_dir"], spec["run_dir"], spec["agents"],
                                      spec["residents"], spec["index"], resume=bool(spec.get("resume")))
        if spec.get("ablate"):  # a scenario variant's, before the shard and its stores take the parts
            from simulacra.evaluation.variants import apply_ablations, check_ablations

            apply_ablations(self.rt, check_ablations(spec["ablate"], "the town's ablations"))
        self.shard = Shard(self.rt, spec["index"], writes_town=True, reports_town=spec["index"] == 0)
        self.stores = Stores(self.rt)
        if spec.get("gate") is not None and self.rt.llm is not None:  # the run's calls in flight and budget
            from simulacra.llm.wrappers import BudgetedModel, unwrap

            budget = unwrap(self.rt.llm, BudgetedModel)
            if budget is not None:
                budget.share(RayGate(spec["gate"]))

    def info(self) -> dict[str, Any]:
        """``{"mind", "reactive", "embedding_model", "embedding_threads", "pid", "node"}`` of this shard
        (``node``: its Ray node id; ``embedding_threads``: its embedder's forward-pass threads)."""
        import ray

        return {"mind": self.rt.mind.name, "reactive": bool(getattr(self.rt.mind, "reactive", False)),
                "embedding_model": getattr(self.rt.embedder, "name", "?"),
                "embedding_threads": self.rt.config.embedding.threads, "pid": os.getpid(),
                "node": ray.get_runtime_context().get_node_id()}

    def call(self, part: str, method: str, *args) -> Any:
        """``self.<part>.<method>(*args)`` (``part``: ``"shard"`` or ``"stores"``)."""
        return getattr(getattr(self, part), method)(*args)

    def timed_call(self, part: str, method: str, measure: bool, *args) -> tuple[Any, float, int]:
        """:meth:`call`, with the seconds it took in this process and, when ``measure``, the bytes of its answer
        pickled (what goes back to the town; else 0): ``(answer, seconds, bytes)``."""
        start = time.perf_counter()
        out = self.call(part, method, *args)
        busy = time.perf_counter() - start
        return out, busy, len(pickle.dumps(out, protocol=pickle.HIGHEST_PROTOCOL)) if measure else 0

    def close(self) -> None:
        self.rt.close()


class RayShards:
    """N shards as Ray actors, asked together, phase by phase (the module docstring). Answers what the town asks
    of its stores as :class:`~simulacra.shard.Stores` does, over every actor.

    Args:
        spec: what every actor needs to build its shard (world file, personas folder, config, run folder,
            residents, log level); each gets its ``agents`` and ``index`` added.
        groups: the agents of each shard (:func:`simulacra.shard.shard_agents`).
        address: a Ray cluster to join (``"auto"``, ``"ray://host:port"``); ``None`` starts Ray in this process
            with the machine's CPUs, unless Ray is already initialised (then it is used as it is).
    Raises:
        SimulacraError: Ray is not installed, or an actor could not build its shard (its error in the message).
    """

    def __init__(self, spec: dict[str, Any], groups: Sequence[Sequence[str]], address: str | None = None):
        try:
            import ray
        except ImportError:
            raise SimulacraError("--workers needs Ray: pip install 'simulacra[ray]' (or 'ray>=2.58')") from None
        self.ray = ray
        #: what each phase cost (:class:`PhaseCosts`); with ``measure_bytes`` also the bytes it moved (pickled:
        #: costs time, so off unless a benchmark turns it on)
        self.costs = PhaseCosts()
        self.measure_bytes = False
        self.groups = [list(g) for g in groups]
        self.address = address
        self.started = False
        if not ray.is_initialized():
            ray.init(address=address, include_dashboard=False, logging_level=logging.WARNING,
                     log_to_driver=True, configure_logging=False)
            self.started = True
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        # shard k on the cluster's k-th live node (mod their number, soft: elsewhere when that node is full)
        live = {n["NodeID"]: float(n["Resources"]["CPU"]) for n in ray.nodes()
                if n.get("Alive") and n.get("Resources", {}).get("CPU")}
        nodes = sorted(live)
        placed = [nodes[k % len(nodes)] for k in range(len(groups))] if nodes else ["?"] * len(groups)
        embedding = (spec.get("config") or {}).get("embedding", {})
        #: embedding threads of each shard (:func:`shard_threads`)
        self.threads = shard_threads(int(embedding.get("threads") or 0), placed, live)
        # when the workers' torch threads outnumber the cluster's CPUs, they wait passively: OpenMP's spinning
        # threads of several workers on few cores slow each other down (measured, 2 workers x 2 threads on 2 cores:
        # 3.4x one process spinning, 1.3x passive); otherwise spinning is faster (1 worker x 2 threads on 2 cores:
        # 0.99x one process spinning, 1.39x passive)
        crowded = sum(self.threads) > float(ray.cluster_resources().get("CPU", 1))
        options: dict[str, Any] = {}
        if crowded:
            options["runtime_env"] = {"env_vars": {"OMP_WAIT_POLICY": "PASSIVE"}}
        # one gate for the run's model calls: llm.concurrency and the budget count over all workers
        llm = config_from_dict(spec["config"], "the town's config").llm if spec.get("config") else None
        self.gate = None
        if llm is not None and llm.configured:
            self.concurrency = llm.in_flight
            self.gate = ray.remote(ModelGate).options(num_cpus=0).remote(llm.in_flight, llm.max_calls,
                                                                          llm.max_tokens)
            spec = {**spec, "gate": self.gate}
        actor = ray.remote(ShardWorker)
        self.actors = [actor.options(**options, scheduling_strategy=NodeAffinitySchedulingStrategy(
            placed[k], soft=True) if nodes else "DEFAULT").remote(
                {**spec, "agents": list(g), "index": k, "threads": self.threads[k]})
            for k, g in enumerate(groups)]
        try:
            self.infos = ray.get([a.info.remote() for a in self.actors])
        except ray.exceptions.RayActorError as err:
            self.close()
            raise SimulacraError(f"a shard could not be built: {err}") from None
        self.n = len(self.actors)
        #: why a worker was lost (``None`` while all live)
        self.lost: str | None = None
        log.info("%d shards on Ray (worker pids %s)", self.n, [i["pid"] for i in self.infos])

    # ----------------------------------------------------------------- asking every actor at once
    def each(self, part: str, method: str, args: Sequence[Any] = (), per_shard: Callable[[int], tuple] | None = None,
             only: Sequence[int] | None = None, tolerate: bool = False) -> list[Any]:
        """``part.method`` on every actor (or those of ``only``) at once, its answers in shard order. ``args`` are
        put in the object store once and shared; ``per_shard(k)`` adds arguments of shard ``k``. With ``tolerate``,
        a dead actor answers ``None`` (for a summary after a worker was lost).

        Raises:
            ShardLost: an actor's process died (killed, out of memory, its node gone).
            Exception: what a shard's method raised (RaterError, BudgetExceeded, ...), as itself.
        """
        ray = self.ray
        start = time.perf_counter()
        measure = self.measure_bytes
        sent = sum(_pickled(a) for a in args) if measure else 0
        refs = [ray.put(a) for a in args]
        which = range(self.n) if only is None else only
        extra = {k: per_shard(k) if per_shard else () for k in which}
        if measure:
            sent += sum(_pickled(a) for k in which for a in extra[k])
        calls = [self.actors[k].timed_call.remote(part, method, measure, *refs, *extra[k]) for k in which]
        out = []
        busy: list[float] = []
        received = 0
        for k, ref in zip(which, calls):
            try:
                answer, seconds, size = ray.get(ref)
                out.append(answer)
                busy.append(seconds)
                received += size
            except ray.exceptions.RayActorError as err:
                self.lost = self.lost or f"the worker of shard {k} died ({type(err).__name__})"
                if not tolerate:
                    ray.wait(calls, num_returns=len(calls), timeout=60)  # the others end their part first
                    raise ShardLost(self.lost) from None
                out.append(None)
            except ray.exceptions.RayTaskError as err:
                ray.wait(calls, num_returns=len(calls), timeout=60)
                raise err.as_instanceof_cause() from None
        self.costs.add(f"{part}.{method}", time.perf_counter() - start, busy, sent, received)
        return out

    # ----------------------------------------------------------------- the town's questions to its stores
    def persist(self, ticks_done: int, due: bool, journal: bool) -> int:
        return sum(self.each("stores", "persist", (ticks_done, due, journal)))

    def durable(self, ticks_done: int, journal: bool) -> None:
        self.each("stores", "durable", (ticks_done, journal))

    def snapshot(self) -> dict[str, Any]:
        parts = self.each("stores", "snapshot")
        memory: dict[str, Any] = {}
        for p in parts:
            memory.update(p["memory"])
        return {"memory": memory, "shared": parts[0]["shared"], "layers": {"shards": [p["layers"] for p in parts]}}

    def restore(self, shared: Sequence[str] | None, memory: dict[str, Any], layers: dict[str, Any],
                accumulators: dict[str, tuple[float, float | None, float | None]]) -> dict[str, int]:
        """Every actor's stores back to a checkpoint (:meth:`Stores.restore`, each with its own agents' ``memory``
        and ``accumulators``, the shared tier's ids ``shared`` and its own counters ``layers["shards"][k]``); the
        counts added up.

        Raises:
            CheckpointError: the checkpoint was written by a town of another number of shards.
        """
        counters = layers.get("shards") or []
        if len(counters) != self.n:
            raise CheckpointError(f"the checkpoint holds the counters of {len(counters)} shards; this town has "
                                  f"{self.n}")
        groups = self.groups
        parts = self.each("stores", "restore", (shared,), per_shard=lambda k: (
            {a: memory[a] for a in groups[k]}, counters[k], {a: accumulators[a] for a in groups[k]}))
        return {key: sum(p[key] for p in parts) for key in ("restored", "dropped")}

    def seed(self, items: Sequence[tuple[str, Any, float | None]]) -> list[list[Any]]:
        """:meth:`Stores.seed <simulacra.shard.Stores.seed>` over the actors: each writes the items of its agents;
        the answers come back in the items' order."""
        shard_of = {a: k for k, g in enumerate(self.groups) for a in g}
        parts = self.each("stores", "seed", per_shard=lambda k: ([it for it in items if shard_of[it[0]] == k],))
        answers = [iter(p) for p in parts]
        return [next(answers[shard_of[agent]]) for agent, _, _ in items]

    def after_whole_checkpoint(self) -> None:
        self.each("stores", "after_whole_checkpoint")

    def flush(self, deletes: bool = True) -> int:
        return sum(self.each("stores", "flush", (deletes,)))

    def close_flush(self, deletes: bool) -> None:
        self.each("stores", "close_flush", (deletes,))

    def memory_summary(self, now: int) -> dict[str, dict[str, Any]]:
        """Every live shard's :meth:`Stores.memory_summary` together (a lost worker's agents are left out)."""
        out: dict[str, dict[str, Any]] = {}
        for part in self.each("stores", "memory_summary", (now,), tolerate=True):
            out.update(part or {})
        return out

    def held_topics(self, topics: Sequence[str]) -> dict[str, list[int]]:
        """Every live shard's :meth:`Stores.held_topics` together (a lost worker's agents are left out)."""
        out: dict[str, list[int]] = {}
        for part in self.each("stores", "held_topics", (list(topics),), tolerate=True):
            out.update(part or {})
        return out

    def posted_topics(self) -> set[str]:
        return self.each("stores", "posted_topics", only=[0])[0]

    def shared_size(self) -> int | None:
        return self.each("stores", "shared_size", only=[0])[0]

    def reports(self) -> list[dict[str, Any]]:
        """Every shard's :meth:`Stores.report` (a lost worker's: an empty one)."""
        empty = {"rater": {}, "rater_fallbacks": 0, "embedding_cache": {"hits": 0, "misses": 0}, "llm": None}
        return [r or empty for r in self.each("stores", "report", tolerate=True)]

    def gate_report(self) -> dict[str, int] | None:
        """:meth:`ModelGate.report` with its ``concurrency``, or ``None`` for a run without a model."""
        if self.gate is None:
            return None
        return {**self.ray.get(self.gate.report.remote()), "concurrency": self.concurrency}

    def close(self) -> None:
        """Close every actor's parts and end the actors; shut Ray down when this process started it."""
        ray = self.ray
        try:
            ray.get([a.close.remote() for a in self.actors])
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
            log.warning("closing the shards", exc_info=True)
        for a in [*self.actors, *([self.gate] if self.gate is not None else [])]:
            ray.kill(a)
        self.actors, self.gate = [], None
        if self.started:
            ray.shutdown()
            self.started = False


class ShardProxy:
    """A shard of :class:`RayShards` as the town's step sees one (``index``, ``agents``)."""

    def __init__(self, index: int, agents: Sequence[str]):
        self.index = index
        self.agents = list(agents)


def town_mind(info: dict[str, Any]) -> SimpleNamespace:
    """What the town knows of its shards' mind: its name, and whether the tick asks it to react."""
    return SimpleNamespace(name=info["mind"], reactive=info["reactive"])
