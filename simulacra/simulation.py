"""A run: the tick pipeline (:mod:`simulacra.tick`) over one :class:`~simulacra.state.TownState`, the trace, the
summary.

Contract (after Gymnasium): :meth:`Simulation.step` advances one tick and returns its record;
:meth:`Simulation.run` runs several; :meth:`Simulation.close` releases every part. Setup lives in
:func:`simulacra.runtime.build_runtime`; what a tick does lives in the stage functions; this class sequences
them, folds their writes into the state and writes the trace. One seeded RNG (in the state) drives every
random choice; game time comes from the state's clock only.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from simulacra import __version__
from simulacra.checkpoint import (
    CHECKPOINT,
    CheckpointWriter,
    changed_inputs,
    checkpoint_shards,
    input_hashes,
    read_checkpoint,
    reshape_layers,
)
from simulacra.clock import GameClock, format_game_time, format_hhmm
from simulacra.cluster import ShardLost, ShardProxy
from simulacra.config import Config, apply_overrides, config_from_dict, recorded_config
from simulacra.disk import hold_run_folder, is_run_folder
from simulacra.embeddings import threads_change_vectors
from simulacra.errors import CheckpointError, RaterError, SimulacraError, StoreUnavailable
from simulacra.killpoint import kill_point
from simulacra.llm.base import BudgetExceeded, LLMUnreachable
from simulacra.llm.factory import CALLS_FILE
from simulacra.llm.replay import call_files, load_calls
from simulacra.memory.journal import store_schedule
from simulacra.runtime import Runtime, build_runtime, close_all, prepare_run, shard_folder
from simulacra.runtime import static_records as static_records  # re-exported: the viewer and tests use it
from simulacra.schedule import merge_probes, probe_due, schedule_of, telling_stage
from simulacra.shard import (
    Shard,
    Stores,
    by_agent,
    merge_decided,
    merge_remembered,
    merge_retrieval,
    op_agent,
    pending_agent,
    shard_agents,
    split_by_shard,
)
from simulacra.state import AgentState, TownState
from simulacra.threads import scoring_threads
from simulacra.tick import (
    Pending,
    Reflected,
    apply_stage,
    converse_stage,
    merge_sides,
    notice,
    order_pairs,
    pair_stage,
    perceive_stage,
    sleepers,
    world_events,
)
from simulacra.trace import (
    FALLBACK,
    FORGET,
    HEADER,
    REFLECT,
    REINFORCE,
    SCHEMA_VERSION,
    TICK,
    Header,
    TickRecord,
    TraceFormatError,
    TraceWriter,
    read_header,
    trace_has_ticks,
)

log = logging.getLogger(__name__)


#: the settings a resume may change (``simulacra run --resume --set``, ``Town.resume(settings=...)``): the model
#: budget, which caps what a run may cost and changes nothing it does until it stops it (a run stopped by it is
#: continued with a larger one)
RESUME_SETTINGS = ("llm.max_calls", "llm.max_tokens")


def not_resume_settings(settings: Sequence[str]) -> list[str]:
    """The items of ``settings`` (``section.field=value``) whose field is not one of :data:`RESUME_SETTINGS`."""
    return [item for item in settings if item.partition("=")[0].strip() not in RESUME_SETTINGS]


def check_resume_settings(settings: Sequence[str]) -> list[str]:
    """``settings`` (``section.field=value``) as a list, when each is one of :data:`RESUME_SETTINGS`.

    Raises:
        SimulacraError: another setting (a resume runs with the run's own config), naming it.
    """
    other = not_resume_settings(settings)
    if other:
        raise SimulacraError(f"a resume continues a run with its own config; of its settings only "
                             f"{' and '.join(RESUME_SETTINGS)} (the model budget) may be changed, not "
                             f"{other[0].partition('=')[0].strip()!r}")
    return list(settings)


def _recorded_run(run_dir: Path, allow_changed: bool, rater_url: str | None, chroma_url: str | None,
                  settings: Sequence[str] = ()) -> tuple[Config, str, Header]:
    """``(config, world path, header)`` of the run at ``run_dir`` as its trace header records them, the rater's and
    the Chroma server's addresses replaced when given, and ``settings`` (:data:`RESUME_SETTINGS`) applied.

    Raises:
        CheckpointError: a header without its input files (an older simulacra), or an input file changed since
            the run started (unless ``allow_changed``: then logged).
        TraceFormatError: the trace has no valid header.
    """
    header = read_header(run_dir)
    if "inputs" not in header:
        raise CheckpointError(f"{run_dir / 'trace.jsonl'}: the header does not record its input files (a run of an "
                              f"older simulacra); it cannot be resumed")
    changed = changed_inputs(header["inputs"])
    if changed and not allow_changed:
        raise CheckpointError(f"cannot resume {run_dir}: " + "; ".join(changed)
                              + ". Restore the file, or pass --allow-changed to resume with it as it is now")
    for problem in changed:
        log.warning("resuming %s although its %s", run_dir, problem)
    data = recorded_config(header["config"])
    if rater_url is not None:
        data = {**data, "rater": {**data["rater"], "url": rater_url}}
    if chroma_url is not None:
        data = {**data, "memory": {**data.get("memory", {}), "chroma_url": chroma_url}}
    if settings:
        data = apply_overrides({**data, "llm": dict(data.get("llm") or {})}, list(settings), "--resume --set")
        log.info("resuming %s with %s", run_dir, ", ".join(settings))
    config = config_from_dict(data, f"{run_dir / 'trace.jsonl'}: header config"
                              + (f" with --set {' '.join(settings)}" if settings else ""))
    return config, next(iter(header["inputs"]["world"])), header


@dataclass
class TickResult:
    """What one tick produced: the trace record and human-readable notable lines."""

    record: TickRecord
    notable: list[str]


class Simulation:
    """A town simulation writing ``<run_dir>/trace.jsonl`` and one Chroma store per agent.

    Build one with :meth:`create` (or from a :class:`~simulacra.runtime.Runtime`).

    Attributes:
        rt: the run's parts; state: the town between ticks; memories: agent id -> its memory stream.
    """

    def __init__(self, rt: Runtime, checkpoint: dict[str, Any] | None = None, shards: int = 1, cluster=None):
        self.rt = rt
        world = rt.world
        groups = shard_agents(rt.agents, shards)
        #: the shards as Ray actors (:class:`simulacra.cluster.RayShards`), or ``None``: every shard in this process
        self.cluster = cluster
        #: the agent shards the town steps (a run in one process: one shard, the run's own parts)
        self.shards = ([ShardProxy(k, g) for k, g in enumerate(groups)] if cluster is not None else
                       [Shard(rt.view(g), k, writes_town=k == 0) for k, g in enumerate(groups)])
        #: what the town asks of the agents' stores (this process's, or every actor's)
        self.stores = cluster if cluster is not None else Stores(rt)
        self._order = {a: i for i, a in enumerate(rt.agents)}
        self._shard_of = {a: k for k, g in enumerate(groups) for a in g}
        self.stopped: str | None = None
        self.history_usage: Counter = Counter()
        self.target_ticks: int | None = None
        self._writer: CheckpointWriter | None = None  # made at the first checkpoint
        self._mid_tick = False  # a step started and did not end (an exception left the stores holding part of it)
        # ticks between writes of the stores to Chroma (memory.store_flush_minutes), and whether the ticks between
        # append to the store journal (on Ray, each shard's own, in its folder)
        self._flush_every, self._journaling = store_schedule(
            rt.config.memory.store_flush_minutes if rt.journal is not None or cluster is not None else 0,
            world.tick_minutes,
            rt.config.simulation.checkpoint_every)
        if checkpoint is not None:
            self._restore(checkpoint)
            return
        self.state = TownState(
            start_minute=world.start_minute, tick_minutes=world.tick_minutes,
            rng=np.random.default_rng(rt.config.simulation.seed),
            object_states={o.id: o.state for o in world.objects},
            agents={pid: AgentState(place=world.personas[pid].home) for pid in rt.agents},
        )
        self.state.posted_topics = self.stores.posted_topics()
        self.trace = TraceWriter(rt.run_dir / "trace.jsonl", self._header())
        self.ticks_done = 0
        self.checkpoint()

    def _restore(self, ck: dict[str, Any]) -> None:
        """Take up the run at checkpoint ``ck`` (:mod:`simulacra.checkpoint`): state, stores, trace."""
        rt = self.rt
        if sorted(ck["memory"]) != sorted(rt.agents):
            raise CheckpointError(f"{rt.run_dir / CHECKPOINT}: agents {sorted(ck['memory'])} differ from the run's "
                                  f"{sorted(rt.agents)}")
        self.state = TownState.from_dict(ck["state"], order=rt.agents)
        self.ticks_done = int(ck["ticks_done"])
        self.target_ticks = ck.get("target_ticks")
        self.history_usage = Counter(ck.get("history_usage", {}))
        # the stores back to the checkpoint (on Ray, every actor its own)
        restored = self.stores.restore(ck.get("shared"), ck["memory"], ck.get("layers", {}),
                                       _accumulators(self.state))
        self.trace = TraceWriter(rt.run_dir / "trace.jsonl", resume_at=int(ck["trace_bytes"]))
        self._checkpointed = self.ticks_done
        log.info("resumed %s after tick %d: %d memories restored, %d written after the checkpoint dropped",
                 rt.run_dir, self.ticks_done - 1, restored["restored"], restored["dropped"])

    def checkpoint(self, whole: bool = False) -> None:
        """Checkpoint the ticks done so far (:mod:`simulacra.checkpoint`: whole when ``whole``, else mostly as a
        journal line); after a whole one, queue for the stores the access marks set since the last whole one
        (:meth:`AgentMemory.save_marks`; until then the checkpoints hold them) and empty the trash of a store made
        before deletes were deferred. The Chroma writes themselves follow the checkpoint (:meth:`step`), and are not
        part of its cost."""
        rt = self.rt
        self.trace.sync()
        # every memory the checkpoint lists is made durable first: in the store journal, or else in Chroma (what a
        # tick's persist stage left to a later write, the memories of a run's first or last checkpoint)
        self.stores.durable(self.ticks_done, self._journaling)
        if self._writer is None:
            self._writer = CheckpointWriter(rt.run_dir)
        wrote_whole = self._writer.write({
            "ticks_done": self.ticks_done, "target_ticks": self.target_ticks, "trace_bytes": self.trace.size,
            "config": rt.config.to_dict(), "state": self.state.to_dict(), **self.stores.snapshot(),
            "history_usage": dict(sorted(self.history_usage.items())),
        }, whole)
        self._checkpointed = self.ticks_done
        if wrote_whole:
            self.stores.after_whole_checkpoint()

    # ----------------------------------------------------------------- construction
    @classmethod
    def create(cls, world_path: str | Path, config: Config | None = None, personas_dir: str | Path | None = None,
               db_dir: str | Path = "database", run_name: str | None = None, overwrite: bool = False,
               embedder=None, agents: list[str] | None = None, shards: int = 1, workers: int = 1,
               ray_address: str | None = None) -> Simulation:
        """Build every part (:func:`~simulacra.runtime.build_runtime`) and a fresh town state; ``shards``: the
        number of agent shards the town steps (:mod:`simulacra.shard`; in this process, sharing the run's parts).
        With ``workers`` > 1 or a ``ray_address``, the shards are Ray actors instead, each with its own parts and
        stores (:mod:`simulacra.cluster`), started here or on the cluster at ``ray_address``.

        Raises:
            WorldError, PersonaError: invalid input files (naming file and field).
            RunExistsError: the run folder exists and ``overwrite`` is false.
            RaterError: no rater answers and none can be started.
            LLMError: the configured model cannot be set up.
        """
        if workers > 1 or ray_address is not None:
            return cls._on_ray(world_path, config or Config(), personas_dir, db_dir, run_name, overwrite, agents,
                               max(1, workers), ray_address)
        rt = build_runtime(world_path, config or Config(), personas_dir, db_dir, run_name, overwrite, embedder,
                           agents)
        try:
            return cls(rt, shards=shards)
        except BaseException:
            rt.close()
            raise

    @classmethod
    def resume(cls, run_dir: str | Path, embedder=None, allow_changed: bool = False,
               rater_url: str | None = None, chroma_url: str | None = None,
               ray_address: str | None = None, workers: int | None = None,
               settings: Sequence[str] = ()) -> Simulation:
        """Continue a run from its last checkpoint, with the run's own config, world and persona files (as the
        trace header records them). A run of several workers is resumed on as many Ray actors (the checkpoint's
        shape), started here or on the cluster at ``ray_address``; each reopens its ``shard-<k>/`` folder.

        With ``workers`` (1: one process, unless ``ray_address`` is given) another shape than the checkpoint's,
        the run's memory must be on a Chroma server: the stores are first brought back to the checkpoint in the
        old shape (each old shard rolls its agents back and writes them to the server; its store journal is
        emptied), then the new shape's shards take their agents from the server (:func:`shard_agents`) and the
        checkpoint's counters, added up (:func:`~simulacra.checkpoint.reshape_layers`). The ticks that follow are
        those the uninterrupted run would have run (scripted backend), whatever the number of workers. With a
        model, the answers recorded after the checkpoint are replayed only by the shard whose folder holds them;
        the others are asked again (the budget counts every recorded request once).

        The trace is cut back to the checkpoint's length and the stores rolled back to its memories, so that the
        ticks run next are exactly those an uninterrupted run would have run (scripted backend).

        Args:
            run_dir: the run folder (``database/<run>``).
            allow_changed: resume although the world or a persona file changed since the run started.
            rater_url: the rater to use instead of the run's ``rater.url`` (a rater restarted elsewhere).
            chroma_url: the address of the run's Chroma server when it moved (``memory.chroma_url``).
            settings: ``section.field=value`` changes of the model budget (:data:`RESUME_SETTINGS`): a run stopped
                by ``llm.max_calls`` continues with a larger one (the calls it spent still count).
        Raises:
            SimulacraError: a setting that is not the model budget.
            CheckpointError: no or a malformed checkpoint, a changed input file (naming it), stores and trace
                that cannot be brought back to the checkpoint, or another number of workers for a run whose
                memory is not on a Chroma server.
            TraceFormatError: the trace has no valid header.
        """
        if not isinstance(run_dir, (str, Path)):
            raise CheckpointError(f"the run folder to resume must be a path, got {run_dir!r}")
        run_dir = Path(run_dir)
        if not run_dir.is_dir():
            raise CheckpointError(f"{run_dir}: no such run folder to resume"
                                  + (" (a file: give its folder)" if run_dir.exists() else ""))
        if not is_run_folder(run_dir):
            raise CheckpointError(f"{run_dir}: not a simulacra run folder (no trace, checkpoint or stores in it)")
        if workers is not None and workers < 1:
            raise SimulacraError(f"--workers must be at least 1, got {workers}")
        settings = check_resume_settings(settings)
        if not (run_dir / CHECKPOINT).is_file():
            return cls._start_again(run_dir, embedder, allow_changed, rater_url, chroma_url, settings)
        ck = read_checkpoint(run_dir)
        config, world_path, header = _recorded_run(run_dir, allow_changed, rater_url, chroma_url, settings)
        was = checkpoint_shards(ck)
        shape = was if workers is None else workers if workers > 1 or ray_address is not None else 0
        if shape != was:
            ck = cls._reshape(run_dir, ck, config, world_path, header, was, shape, ray_address)
        if shape:  # Ray actors, each (re)opening its shard's folder
            return cls._on_ray(world_path, config, header["personas_dir"], run_dir.parent, run_dir.name, False,
                               header["agents"], shape, ray_address, checkpoint=ck,
                               scenario=header.get("scenario"))
        from simulacra.evaluation.variants import apply_ablations, recorded_ablations

        ablate = recorded_ablations(header, f"{run_dir / 'trace.jsonl'} header")
        rt = build_runtime(world_path, config, header["personas_dir"], run_dir.parent, run_dir.name,
                           embedder=embedder, agents=header["agents"], resume=True)
        rt.scenario = header.get("scenario")  # its schedule (tellings, probes) goes on where the run stopped
        try:
            apply_ablations(rt, ablate)  # a scenario variant's (no-memory, no-planning, ...), as the run started
            _charge_other_calls(run_dir, [run_dir], rt.llm, None)
            return cls(rt, checkpoint=ck)
        except BaseException:
            rt.close()
            raise

    @classmethod
    def _reshape(cls, run_dir: Path, ck: dict[str, Any], config: Config, world_path, header: Header,
                 was: int, shape: int, ray_address: str | None) -> dict[str, Any]:
        """Bring the run's stores back to checkpoint ``ck`` in the shape that wrote it (``was``: 0 one process,
        else that many Ray workers), so that the Chroma server holds exactly the checkpoint's memories and no
        store journal holds any; return ``ck`` with its counters for the new ``shape``
        (:func:`~simulacra.checkpoint.reshape_layers`). A kill in here leaves a run that resumes from the same
        checkpoint, in either shape.

        Raises:
            CheckpointError: the run's memory is in embedded stores (one per shard folder), not on a server.
        """
        def name(n: int) -> str:
            return "one process" if n == 0 else f"{n} worker{'s' * (n > 1)}"

        if not config.memory.chroma_url:
            raise CheckpointError(
                f"{run_dir}: its checkpoint was written by {name(was)}; resuming it on {name(shape)} needs its "
                f"memory on a Chroma server (memory.chroma_url): embedded stores stay in the folder of the shard "
                f"that wrote them. Resume it on {name(was)}"
                + (f" (--workers {was})" if was > 1 else " (without --workers)" if was == 0 else " (--workers 1 "
                   "--ray-address ...)"))
        log.warning("%s: the checkpoint was written by %s; taking it up on %s", run_dir, name(was), name(shape))
        agents = list(header["agents"])
        state = TownState.from_dict(ck["state"], order=agents)
        args = (ck.get("shared"), ck["memory"], ck.get("layers", {}), _accumulators(state))
        if was:
            from simulacra.cluster import RayShards

            release = hold_run_folder(run_dir)  # the old shards write the run's stores: not beside a live town
            try:
                spec, _ = _ray_spec(world_path, config, header["personas_dir"], run_dir, agents, resume=True)
                old = RayShards(spec, shard_agents(agents, was), ray_address)
                try:
                    old.restore(*args)
                finally:
                    old.close()
            finally:
                release()
        else:
            rt = build_runtime(world_path, config, header["personas_dir"], run_dir.parent, run_dir.name,
                               agents=agents, resume=True)
            try:
                Stores(rt).restore(*args)
            finally:
                rt.close()
        folders = _shard_folders(run_dir, shape)
        for folder in folders:
            folder.mkdir(exist_ok=True)
        olds = _shard_folders(run_dir, was)
        counts = [((ck["layers"]["shards"][olds.index(f)] if was else ck["layers"]).get("llm_calls", 0)
                   if f in olds else len(load_calls(f / CALLS_FILE, repair=False))) for f in folders]
        return {**ck, "layers": reshape_layers(ck.get("layers", {}), shape, counts)}

    @classmethod
    def _on_ray(cls, world_path, config: Config, personas_dir, db_dir, run_name, overwrite, agents, workers: int,
                address: str | None, checkpoint: dict[str, Any] | None = None,
                scenario: dict[str, Any] | None = None) -> Simulation:
        """A town whose ``workers`` shards are Ray actors (:meth:`parts_on_ray`); with ``checkpoint``, the run in its
        folder taken up there (:meth:`resume`; ``scenario``: its header's, whose variant's ablations the shards put
        in again).

        Raises:
            as :meth:`parts_on_ray`.
        """
        from simulacra.evaluation.variants import recorded_ablations

        ablate = recorded_ablations({"scenario": scenario}, f"{Path(db_dir) / str(run_name)}/trace.jsonl header")
        rt, cluster = cls.parts_on_ray(world_path, config, personas_dir, db_dir, run_name, overwrite, agents,
                                       workers, address, resume=checkpoint is not None, ablate=ablate)
        rt.scenario = scenario
        try:
            if checkpoint is not None:
                _charge_other_calls(rt.run_dir, _shard_folders(rt.run_dir, workers), None, cluster.gate)
            return cls(rt, checkpoint=checkpoint, shards=workers, cluster=cluster)
        except BaseException:
            rt.close()
            raise

    @staticmethod
    def parts_on_ray(world_path, config: Config, personas_dir, db_dir, run_name, overwrite: bool, agents,
                     workers: int, address: str | None, resume: bool = False,
                     ablate: frozenset[str] = frozenset()) -> tuple[Runtime, Any]:
        """The town's parts for ``workers`` shards that are Ray actors: ``(runtime, cluster)``, the runtime holding
        the world, config, run folder and agents (no stores, embedder or rater: those are the actors'), the
        cluster (:class:`simulacra.cluster.RayShards`) closed with it. ``ablate``: a scenario variant's ablations,
        put into every shard's parts (:func:`~simulacra.evaluation.variants.apply_ablations`). Pass both to the
        constructor (``Simulation(rt, shards=workers, cluster=cluster)``) once the stores hold what the run starts
        with (:func:`simulacra.evaluation.setup.start_run` seeds a scenario's memories in between).

        Raises:
            SimulacraError: Ray missing, a shard not built.
            CheckpointError: resuming, a shard's folder or part of the checkpoint is missing, or the Chroma server
                holds no collection of the run.
            RunExistsError: a new run, and the Chroma server holds collections of a run of this name.
            StoreUnavailable: no Chroma server answers at ``memory.chroma_url``.
        """
        from simulacra.cluster import RayShards, town_mind

        world, ids, run_dir, _, closers = prepare_run(world_path, config, personas_dir, db_dir, run_name, overwrite,
                                                      agents, resume=resume, stores=False)
        try:
            if config.memory.chroma_url:  # the run's collections on the server, checked once, before any worker writes
                from simulacra.memory.chroma import ChromaServer

                ChromaServer(config.memory.chroma_url, run_dir.name, config.memory.chroma_retry_s,
                             config.memory.chroma_timeout_s).claim(resume, overwrite)
            spec, config = _ray_spec(world_path, config, personas_dir, run_dir, ids, resume)
            cluster = RayShards({**spec, "ablate": sorted(ablate)}, shard_agents(ids, workers), address)
        except BaseException:
            close_all(closers)
            raise
        return Runtime(world=world, config=config, run_dir=run_dir, agents=list(ids), embedder=None, rater=None,
                       mind=town_mind(cluster.infos[0]), memories={}, closers=[*closers, cluster.close]), cluster

    @classmethod
    def _start_again(cls, run_dir: Path, embedder, allow_changed: bool, rater_url: str | None,
                     chroma_url: str | None, settings: Sequence[str] = ()) -> Simulation:
        """A run stopped before its first checkpoint (while it was being set up) has no tick to resume: it starts
        again, in the same folder, from the settings its trace header records (config, world, personas, agents).

        Raises:
            CheckpointError: not even a trace header was written (the settings are unknown), the trace holds ticks
                (the checkpoint was lost: starting again would replace them), the run is a scenario's
                (``simulacra evaluate`` sets it up), or an input file changed (unless allowed).
        """
        try:
            read_header(run_dir)
        except TraceFormatError:
            raise CheckpointError(f"{run_dir}: stopped before it recorded its settings (no checkpoint, no trace "
                                  f"header): start it again with its arguments and --overwrite") from None
        if trace_has_ticks(run_dir):  # the first checkpoint precedes the first tick: this one was lost
            raise CheckpointError(f"{run_dir}: no {CHECKPOINT}, but its trace holds ticks: the checkpoint was "
                                  f"deleted or lost, so the run cannot be taken up where it stopped. Put "
                                  f"{CHECKPOINT} back, or start the run again from its first tick with its "
                                  f"arguments and --overwrite (its ticks and memories are then replaced)")
        config, world_path, header = _recorded_run(run_dir, allow_changed, rater_url, chroma_url, settings)
        if header.get("scenario") is not None:
            raise CheckpointError(f"cannot resume {run_dir}: a scenario run stopped before its first tick; run "
                                  f"simulacra evaluate again")
        log.warning("%s stopped before its first checkpoint: starting it again from the settings its trace header "
                    "records", run_dir)
        return cls.create(world_path, config, header["personas_dir"], run_dir.parent, run_dir.name, overwrite=True,
                          embedder=embedder, agents=header["agents"])

    # conveniences over the runtime
    @property
    def world(self):
        return self.rt.world

    @property
    def config(self) -> Config:
        return self.rt.config

    @property
    def run_dir(self) -> Path:
        return self.rt.run_dir

    @property
    def memories(self):
        return self.rt.memories

    @property
    def shared(self):
        return self.rt.shared

    @property
    def names(self) -> dict[str, str]:
        return self.rt.names

    @property
    def llm(self):
        return self.rt.llm

    @property
    def rater(self):
        return self.rt.rater

    @property
    def clock(self) -> GameClock:
        """The game clock at the tick about to run (a view of the state)."""
        return GameClock(self.state.start_minute, self.state.tick_minutes, self.state.tick)

    def _header(self) -> Header:
        w = self.world
        header: Header = {
            "type": HEADER,
            "schema_version": SCHEMA_VERSION,
            "simulacra_version": __version__,
            "seed": self.config.simulation.seed,
            "config": self.config.to_dict(),
            "mind": self.rt.mind.name,
            "embedding_model": (self.cluster.infos[0]["embedding_model"] if self.cluster is not None
                                else getattr(self.rt.embedder, "name", "?")),
            "world_file": Path(w.source).name,
            "inputs": input_hashes(w),
            "personas_dir": str(Path(next(iter(w.persona_files.values()))).resolve().parent),
            "world": w.model_dump(mode="json", exclude={"source"}),
            "personas": {pid: w.personas[pid].model_dump(mode="json") for pid in self.rt.agents},
            "agents": list(self.rt.agents),
            "start_minute": self.state.start_minute,
            "tick_minutes": self.state.tick_minutes,
            "objects": dict(self.state.object_states),
        }
        if self.cluster is not None:
            header["workers"] = len(self.shards)
        if self.rt.scenario is not None:
            header["scenario"] = self.rt.scenario
        return header

    def _each(self, method: str, args: tuple, per_shard=None) -> list:
        """``Shard.<method>(*args, *per_shard(k))`` of every shard, answers in shard order: in this process one
        after the other, on Ray all at once (the phase's barrier is waiting for the last)."""
        if self.cluster is not None:
            return self.cluster.each("shard", method, args, per_shard)
        return [getattr(sh, method)(*args, *(per_shard(sh.index) if per_shard else ())) for sh in self.shards]

    # ----------------------------------------------------------------- the tick
    def step(self) -> TickResult:
        """Advance one tick (``world.tick_minutes`` game minutes); returns its record and notable lines. numpy's
        BLAS runs on one thread meanwhile (:func:`simulacra.threads.scoring_threads`).

        Raises:
            RaterError: the rater failed for good; BudgetExceeded: a model budget is spent. Either leaves the
                trace at the last complete tick (:meth:`run` turns them into a clean stop).
        """
        with scoring_threads():
            return self._step()

    def _step(self) -> TickResult:
        rt, state = self.rt, self.state
        now, tick = state.now, state.tick
        kill_point("tick", tick)
        self._mid_tick = True
        clock = format_hhmm(now)
        notable: list[str] = []

        events = world_events(rt, now)
        objects = {**state.object_states, **events.object_changes}
        notices: list[Pending] = []
        posted: set[str] = set()
        for ev in events.starting:
            notable.append(f"{clock} event at {rt.world.places[ev.place].name}: {ev.text}")
            if ev.public:
                n = notice(state.posted_topics | posted, rt, ev.text, "world", ev.place, now, tick)
                if n is not None:
                    posted.add(ev.text)
                    notices.append(n)

        asleep = sleepers(state, rt, now)
        told = telling_stage(rt, now, tick)  # a scenario's fact told to residents now (simulacra.schedule)
        perception = perceive_stage(state, rt, events, objects, now, tick, asleep)
        order = self._order
        # phase 1, every shard from the same snapshot: remember, retrieve, decide
        acted = self._each("act", (state, perception, notices + told.pending + perception.pending, now, tick, asleep))
        seen = merge_remembered([a[0] for a in acted], order)
        retrieval = merge_retrieval([a[1] for a in acted], order)
        decided = pair_stage(state, rt, merge_decided([a[2] for a in acted], order), now, asleep)  # the town pairs
        applied = apply_stage(rt, decided.actions, now)
        doing = {pid: step.activity if (step := decided.planned[pid]) is not None else decided.actions[pid].activity
                 for pid in decided.actions}
        # conversations happen where the agents are after the world step
        for pid, place in applied.positions.items():
            state.agents[pid].place = place
        # phase 2: each side's part, then each conversation held by its opener's shard
        ordered = order_pairs(state, rt, decided.pairs, now)
        sides = merge_sides(self._each("sides", (state, ordered, now)), ordered)
        opened = [[pair for pair in ordered if self._shard_of[pair[0]] == k] for k in range(len(self.shards))]
        held: dict[tuple[str, str], tuple] = {}
        for mine, results in zip(opened, self._each("hold", (state, sides, doing, now),
                                                    per_shard=lambda k: (opened[k],))):
            held.update(zip(mine, results))
        conversed = converse_stage(state, rt, ordered, sides, [held[pair] for pair in ordered], now, tick)
        # phase 3: remember what was planned, said and heard; reflect, rehearse, summarise, consolidate
        used = seen.ops + retrieval.ops + decided.ops + conversed.ops
        # each shard gets its agents' part of what settles (the town's notices: every shard)
        shards = len(self.shards)
        pending = split_by_shard(decided.pending + conversed.pending, pending_agent, self._shard_of, shards)
        ops = split_by_shard(used, op_agent, self._shard_of, shards)
        plans = split_by_shard(decided.plans.items(), lambda item: item[0], self._shard_of, shards)
        settled = self._each("settle", (now, tick), per_shard=lambda k: (pending[k], ops[k], dict(plans[k])))
        said = merge_remembered([x[0] for x in settled], order)
        reflected = Reflected(by_agent((op for x in settled for op in x[1].ops), order, op_agent),
                              sum(x[1].failures for x in settled),
                              by_agent((n for x in settled for n in x[1].notable), order, lambda n: n[0]))
        used_ops = used + said.ops + reflected.ops
        rehearsed = by_agent((op for x in settled for op in x[2]), order, op_agent)
        summarised = by_agent((op for x in settled for op in x[3]), order, op_agent)
        consolidated = by_agent((op for x in settled for op in x[4]), order, op_agent)
        markers = {pid: m for x in settled for pid, m in x[5].items()}
        due = (self.ticks_done + 1) % self._flush_every == 0  # the stores reach Chroma this tick
        self.stores.persist(self.ticks_done + 1, due, journal=self._journaling)

        # fold the writes into the state
        state.object_states = {**objects, **applied.object_changes}
        state.pair_last_talk = decided.pair_last_talk
        state.posted_topics |= posted | conversed.posted
        for pid, agent in state.agents.items():
            agent.action = decided.actions[pid].to_dict()
            agent.plan_start = decided.plan_start[pid]
            agent.plan = decided.plans[pid]
            agent.steps = [s for s in decided.steps[pid] if s.end > now]
            agent.step_key = decided.step_keys[pid]
            agent.last_percepts = perception.last_percepts[pid]
            agent.knows |= perception.learned[pid] | told.learned.get(pid, set())
            agent.importance_since_reflection, agent.last_reflection, agent.last_consolidation = markers[pid]
        for pid in decided.considered:
            state.agents[pid].invitations = []
        for listener, engagement in conversed.heard:  # an invitation heard for the first time: considered next tick
            hearer = state.agents[listener]
            if engagement.topic not in hearer.knows and engagement.to_dict() not in hearer.invitations:
                hearer.invitations.append(engagement.to_dict())
        for speaker, listener, topic in conversed.told:
            state.agents[speaker].told.setdefault(listener, set()).add(topic)
            state.agents[listener].told.setdefault(speaker, set()).add(topic)
            state.agents[listener].knows.add(topic)
        for a, b in decided.pairs:
            state.agents[a].talked_to[b] += 1
            state.agents[b].talked_to[a] += 1

        memory_ops = used_ops + rehearsed + summarised + consolidated
        for op in memory_ops:
            if op["op"] == FORGET:
                state.counters[f"forgotten:{op['agent']}"] += 1
            elif op["op"] == REINFORCE:
                state.counters[f"reinforced:{op['agent']}"] += 1
            elif op["op"] == REFLECT and op["insights"]:
                state.counters[f"reflections:{op['agent']}"] += 1
        decisions = decided.records + conversed.records
        for d in decisions:
            state.counters[f"decisions:{d['source']}"] += 1
            if d["source"] == FALLBACK:
                state.counters[f"fallback:{d['kind']}"] += 1
        state.counters["reflection_failures"] += reflected.failures
        self.history_usage.update(conversed.history_usage)
        notable += [line for _, line in decided.notable] + conversed.notable + [line for _, line in reflected.notable]
        record: TickRecord = {
            "type": TICK,
            "tick": tick,
            "time": now,
            "clock": clock,
            "positions": dict(applied.positions),
            "actions": {pid: a.to_dict() for pid, a in decided.actions.items()},
            "events": [ev.text for ev in events.starting],
            "object_changes": {**events.object_changes, **applied.object_changes},
            "conversations": conversed.conversations,
            "decisions": decisions,
            "plans": {pid: {"start": state.agents[pid].plan_start,
                            "step": decided.step_keys[pid]} for pid in rt.agents},
            "memory": memory_ops,
        }
        if asleep:
            record["asleep"] = sorted(asleep)
        # a scenario's recall probe (simulacra.schedule), read-only: each shard for its agents, merged
        probes = schedule_of(rt).get("probes")
        probed = None
        if probe_due(probes, now, rt.world.tick_minutes):
            probed = merge_probes(self._each("probe", (state, probes, now, tick)),
                                  [sh.agents for sh in self.shards], self._order)
        if probed is not None:
            record["probes"] = probed
        self.trace.write(record)
        self._mid_tick = False
        state.tick += 1
        self.ticks_done += 1
        if self.ticks_done % rt.config.simulation.checkpoint_every == 0:
            self.checkpoint()
        if due:
            # the memories deleted since the previous flush (forgotten, moved, replaced) leave Chroma now that no
            # checkpoint a resume could start from lists them, with the access marks whole checkpoints queued; the
            # store journal is emptied
            self.stores.flush()
        return TickResult(record, notable)

    # ----------------------------------------------------------------- runs
    def run(self, ticks: int, on_tick: Callable[[TickResult], None] | None = None) -> dict[str, Any]:
        """Run ``ticks`` ticks; calls ``on_tick`` after each; returns :meth:`summary`.

        A part that fails for good stops the run cleanly: the rater (unreachable after its retries, or its LLM budget
        spent), the language model's server (unreachable after ``llm.attempts``, :class:`LLMUnreachable`), the Chroma
        server (unreachable for ``memory.chroma_retry_s``, :class:`StoreUnavailable`) or a spent model budget. The trace
        ends at the last complete tick and the summary's ``stopped`` says why and how to resume. Any other exception
        propagates; in every case the last checkpoint (:meth:`checkpoint`, at the latest after the last complete tick
        when ``simulation.checkpoint_every`` is 1) is where :meth:`resume` takes up the run, undoing what the unfinished
        tick wrote. The last tick run is always checkpointed, whole (``checkpoint.json`` alone), and the stores then
        flushed with their deletes; ``target_ticks`` (ticks done + ``ticks``) is recorded for ``simulacra run
        --resume``.
        """
        self.target_ticks = self.ticks_done + ticks
        for _ in range(ticks):
            try:
                result = self.step()
            except (RaterError, BudgetExceeded, LLMUnreachable, StoreUnavailable) as err:
                budget = getattr(err, "budget", None)  # a spent model budget is raised on the resume
                more = f" --set llm.max_{budget}s=N" if budget else ""
                self.stopped = (f"stopped before tick {self.state.tick} ({format_hhmm(self.state.now)}): {err}; "
                                f"when it is fixed, continue with: simulacra run --resume {self.run_dir}{more}")
                log.error("run %s", self.stopped)
                break
            except ShardLost as err:
                self.stopped = (f"stopped before tick {self.state.tick} ({format_hhmm(self.state.now)}): {err}; the "
                                f"trace ends at the last complete tick; continue with: simulacra run --resume "
                                f"{self.run_dir}")
                log.error("run %s", self.stopped)
                break
            if on_tick is not None:
                on_tick(result)
        # after a failed tick the stores hold part of it: the last checkpoint stays the one to resume from
        if self.stopped is None and (self._checkpointed != self.ticks_done or self._writer is None
                                     or not self._writer.last_whole):
            self.checkpoint(whole=True)  # a run ends whole: checkpoint.json alone
        if self.stopped is None:
            try:
                self.flush()  # what the last checkpoint made safe to delete: Chroma ends as the stores' mirrors
            except StoreUnavailable as err:  # every tick is checkpointed, its memories in Chroma or the store journal
                self.stopped = (f"stopped after tick {self.state.tick - 1}, its memories not all written to the "
                                f"store: {err}; when it is fixed, finish with: simulacra run --resume {self.run_dir}")
                log.error("run %s", self.stopped)
        return self.summary()

    def flush(self) -> None:
        """Write the stores' queued changes to Chroma, deletes included, and empty the store journal
        (:meth:`Runtime.flush`; a run does it every ``memory.store_flush_minutes`` and at its end)."""
        self.stores.flush()

    def summary(self) -> dict[str, Any]:
        """Per agent: memory counts per tier, its three most important long-term memories (decayed
        importance), its latest reflections (depth, evidence count), its plan for the day, how many memories
        it forgot, whom it talked to; per world event (day, weekday, time): who came to know it (``known_by``) and
        who still holds a memory of it (``remembered_by``, :func:`simulacra.shard.held_topics`); the game time
        reached (``"day D (Weekday) HH:MM"``); the mind and its decisions by
        source (with fallbacks per kind); token use per conversation-history strategy; the shared memory's
        size; where the run is."""
        state, rt = self.state, self.rt
        now = state.now
        counters = state.counters
        agents = {}
        memory = self.stores.memory_summary(now)
        lost: dict[str, Any] = {"counts": {}, "top_long_term": [], "reflections": []}  # a lost worker's agents
        for pid, a in state.agents.items():
            agents[pid] = {
                "name": rt.names[pid],
                **memory.get(pid, lost),
                "reflections_total": counters[f"reflections:{pid}"],
                "forgotten": counters[f"forgotten:{pid}"],
                "plan": [p.describe(rt.place_names.get(p.place, p.place)) for p in a.plan],
                "talked_to": [rt.names[o] for o, _ in sorted(a.talked_to.items(), key=lambda x: (-x[1], x[0]))],
            }
        past = [ev for ev in self.world.events if ev.minute < now]
        held = self.stores.held_topics([ev.text for ev in past]) if past else {}
        events = []
        for i, ev in enumerate(past):
            knowers = sorted(pid for pid, a in state.agents.items() if ev.text in a.knows)
            events.append({"day": ev.day, "weekday": self.world.weekday(ev.minute), "time": ev.time,
                           "place": ev.place, "text": ev.text, "known_by": knowers,
                           "remembered_by": sorted(pid for pid, found in held.items() if i in found)})
        mind = {"name": rt.mind.name,
                "decisions": {k.split(":", 1)[1]: v for k, v in sorted(counters.items()) if k.startswith("decisions:")},
                "fallbacks": {k.split(":", 1)[1]: v for k, v in sorted(counters.items()) if k.startswith("fallback:")}}
        if self.history_usage:
            mind["history"] = {"strategy": self.config.cognition.history, **dict(sorted(self.history_usage.items()))}
        return {
            "run_dir": str(self.run_dir),
            "trace": str(self.run_dir / "trace.jsonl"),
            "ticks": self.ticks_done,
            "game_time": format_game_time(now, self.world.start_weekday, self.world.rest_days),
            "agents": agents,
            "events": events,
            "stopped": self.stopped,
            "mind": mind,
            "shared_memory": self.stores.shared_size(),
            "reflection_failures": counters["reflection_failures"],
            **self._parts_report(),
        }

    def _parts_report(self) -> dict[str, Any]:
        """The summary's ``llm``, ``rater``, ``rater_fallbacks`` and ``embedding_cache`` (:meth:`Stores.report`): this
        process's parts, or with shards on Ray, the first shard's rater and model reports (``"shards"``: every
        shard's), the fallbacks and the embedding cache summed over the shards, and with a model ``"model_calls"``:
        the run's calls, tokens and most calls in flight at once over all workers
        (:class:`~simulacra.cluster.ModelGate`)."""
        if self.cluster is None:
            return self.stores.report()
        reports = self.cluster.reports()
        out = {"llm": reports[0]["llm"], "rater_fallbacks": sum(r["rater_fallbacks"] for r in reports),
               "rater": reports[0]["rater"], "shards": reports,
               "embedding_cache": {k: sum(r["embedding_cache"][k] for r in reports) for k in ("hits", "misses")}}
        gate = self.cluster.gate_report()
        if gate is not None:  # the run's model calls over all workers (llm.concurrency, the budget)
            out["model_calls"] = gate
        return out

    def close(self) -> None:
        """Write what the stores still queue to Chroma (the access marks not yet saved, :meth:`AgentMemory.save_marks`,
        and the deletes of a checkpointed last tick; not after a part failed, :attr:`stopped`, nor after a tick that
        did not end), close the trace and release every part of the run. Safe to call twice.

        A flush that fails here is logged, not raised: the last checkpoint is where a resume takes up the run (it
        keeps the marks too), and the stores already hold everything it lists."""
        if self.stopped is None and not self._mid_tick and not self.trace.closed:
            try:
                # deletes only when the last tick run is checkpointed: until a checkpoint no longer lists a memory,
                # a resume may need it
                self.stores.close_flush(deletes=self._checkpointed == self.ticks_done)
            except Exception as err:  # noqa: BLE001 - the checkpoint's stores are complete; tear-down goes on
                log.warning("closing %s: the stores' last writes were not made (%s: %s); resume takes up the run at "
                            "its last checkpoint", self.run_dir, type(err).__name__, err)
        try:
            self.trace.close()
        finally:
            self.rt.close()  # with shards on Ray, its closers end the workers; the run folder is let go last

    def __enter__(self) -> Simulation:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _accumulators(state: TownState) -> dict[str, tuple[float, float | None, float | None]]:
    """What the town state keeps of each agent's memory, as :meth:`Stores.restore` takes it: ``(importance since
    its last reflection, game minute of its last reflection, of its last consolidation)``."""
    return {pid: (a.importance_since_reflection, a.last_reflection, a.last_consolidation)
            for pid, a in state.agents.items()}


def _shard_folders(run_dir: Path, shape: int) -> list[Path]:
    """The folders of a town's parts (their stores' journal, recorded model calls): the run folder for one process
    (``shape`` 0), else ``shard-<k>/`` for each of ``shape`` workers."""
    return [run_dir] if shape == 0 else [shard_folder(run_dir, k) for k in range(shape)]


def _ray_spec(world_path, config: Config, personas_dir, run_dir: Path, ids,
              resume: bool) -> tuple[dict[str, Any], Config]:
    """What every Ray actor of the run needs to build its shard (:class:`simulacra.cluster.RayShards`), and the
    config the town then runs with. Under torch the workers embed with the town's thread count (``embedding.threads``
    0 becomes this process's), so that they compute the same vectors; under ONNX Runtime, whose vectors do not
    depend on the count, 0 stays and each worker uses the cores its node has for it (:func:`simulacra.cluster.
    shard_threads`)."""
    if not config.embedding.threads and threads_change_vectors(config.embedding.backend):
        import torch

        config = config.model_copy(update={"embedding": config.embedding.model_copy(
            update={"threads": torch.get_num_threads()})})
    from simulacra import assets

    # the file the user means (a packaged world's name, "fernhollow", is no path in the workers' directory)
    return {"world": str(assets.find(world_path, "world").resolve()),
            "personas_dir": None if personas_dir is None else str(Path(personas_dir).resolve()),
            "config": config.to_dict(), "run_dir": str(Path(run_dir).resolve()), "residents": list(ids),
            "log_level": logging.getLogger().getEffectiveLevel(), "resume": resume}, config


def _charge_other_calls(run_dir: Path, opened: list[Path], llm, gate) -> None:
    """A resumed run's budget counts every model request the run ever sent: a part's own ``llm_calls.jsonl`` is
    taken up by its budget (:func:`simulacra.llm.build_model`); the files no part of this shape opens (left by a
    shape the run had before, :meth:`Simulation.resume` with another ``workers``) are charged here, to the run's
    gate on Ray, else to this process's budget."""
    others = [path for _, path in call_files(run_dir) if path.parent not in opened]
    if not others or (gate is None and llm is None):
        return
    records = [r for path in others for r in load_calls(path, repair=False)]
    calls = len(records)
    tokens = sum(int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0) for r in records)
    log.info("%s: %d model requests recorded by another shape of the run count against its budget", run_dir, calls)
    if gate is not None:
        from simulacra.cluster import RayGate

        RayGate(gate).take_up(calls, tokens)
        return
    from simulacra.llm.wrappers import BudgetedModel, unwrap

    budget = unwrap(llm, BudgetedModel)
    if budget is not None:
        budget.add_spent(calls, tokens)
