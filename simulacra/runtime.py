"""Setup in one place: from a config and a world, the parts a run needs (embedder, rater, language model,
mind, memory stores, trace), and the tear-down. :class:`~simulacra.simulation.Simulation` runs ticks over them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field, replace
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from simulacra.config import Config, MemoryConfig
from simulacra.disk import (
    check_replaceable,
    check_run_folder,
    check_run_name,
    default_run_name,
    hold_run_folder,
    make_run_folder,
    remove_run_folder,
)
from simulacra.errors import CheckpointError, RunExistsError, SimulacraError
from simulacra.memory.chroma import ChromaServer, EmbeddedChroma
from simulacra.memory.journal import StoreJournal
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.store import MemoryTier, flush_tiers
from simulacra.memory.stream import AgentMemory
from simulacra.persona import Persona
from simulacra.world.model import World, load_world

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")


def static_records(agent: str, persona: Persona, world: World) -> list[MemoryRecord]:
    """Static memory of ``agent``: persona facts, relationships, world rules and the descriptions of the places it
    knows (:meth:`~simulacra.persona.Persona.places_known`: every place unless the persona lists ``known_places``)."""
    names = {pid: p.name for pid, p in world.personas.items()}
    texts = [(t, "persona") for t in persona.facts()]
    texts += [(f"{persona.name} and {names[o]}: {d}", "persona") for o, d in persona.relationships.items()]
    texts += [(f"{persona.name} lives at {world.places[persona.home].name}.", "persona")]
    texts += [(t, "world") for t in world.facts(persona.places_known())]
    seen: set[str] = set()
    out = []
    for text, kind in texts:
        if text not in seen:
            seen.add(text)
            out.append(MemoryRecord(id=memory_id(agent, -1, text), text=text, kind=kind))
    return out


def uses_language_model(config: Config) -> bool:
    """Whether the run's mind is the language-model one (``cognition.backend``; ``auto``: a model is configured,
    ``llm.model`` or ``llm.provider: local``; an ``OPENAI_MODEL`` in the environment is not read)."""
    backend = config.cognition.backend
    if backend != "auto":
        return backend == "llm"
    return config.llm.configured


#: model tokens per agent and game hour of the language-model mind, measured by ``bench.cognition`` (25 residents, a
#: game day, ``docs/cognition.md``): the base of the cost estimate of :func:`describe_mind`
TOKENS_PER_AGENT_HOUR = 542


def describe_mind(config: Config, agents: int) -> list[str]:
    """What a run will think with, said before it starts (the first lines a run prints): the mind, and for a language
    model its name and endpoint; for a priced endpoint (prices set, or OpenAI's own API) with no ``llm.max_calls``
    nor ``llm.max_tokens``, the estimated cost per game hour of ``agents`` agents (:data:`TOKENS_PER_AGENT_HOUR`
    tokens each at the higher of the two prices: an upper estimate), or that it cannot be estimated without prices.
    An ``OPENAI_MODEL`` set in the environment but not used is mentioned."""
    import os

    from simulacra.llm.openai_model import OPENAI_BASE_URL

    llm = config.llm
    if not uses_language_model(config):
        out = ["mind: scripted (offline, no language model)"]
        if os.environ.get("OPENAI_MODEL") and not llm.model:
            out.append(f"OPENAI_MODEL={os.environ['OPENAI_MODEL']} is set but not used: name a model with "
                       f"--set llm.model=NAME (or llm.model in the config)")
        return out
    if llm.provider == "local":
        return ["mind: language model, the bundled SmolLM2-135M-Instruct served on 127.0.0.1 (llm.provider local)"]
    endpoint = llm.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_BASE_URL
    out = [f"mind: language model {llm.model} at {endpoint}"]
    price = max(llm.prompt_price_per_1k, llm.completion_price_per_1k)
    priced = price > 0 or endpoint.rstrip("/") == OPENAI_BASE_URL
    if priced and llm.max_calls is None and llm.max_tokens is None:
        if price > 0:
            out.append(f"estimated cost: about ${agents * TOKENS_PER_AGENT_HOUR / 1000 * price:.4f} per game hour "
                       f"({agents} agents x {TOKENS_PER_AGENT_HOUR} tokens at ${price}/1k); no llm.max_calls or "
                       f"llm.max_tokens caps it")
        else:
            out.append(f"a priced endpoint with no llm.max_calls or llm.max_tokens cap and no prices set "
                       f"(llm.prompt_price_per_1k, llm.completion_price_per_1k): the cost cannot be estimated; "
                       f"about {agents * TOKENS_PER_AGENT_HOUR} tokens per game hour")
    return out


@dataclass
class Runtime:
    """The parts of one run. Built by :func:`build_runtime`; :meth:`close` releases them (safe twice).

    Attributes:
        world, config, run_dir: the run's inputs and folder.
        agents: ids of the simulated residents; names: id -> full name (simulated residents);
            place_names: place id -> name.
        embedder: :class:`~simulacra.embeddings.Embedder`; rater: a :class:`~simulacra.rater.Rater` (in-process,
            or a client of the HTTP rater).
        memories: agent id -> :class:`AgentMemory`; shared: the town's shared tier or ``None``.
        mind: the agents' :class:`~simulacra.cognition.mind.Mind`; llm: the language model (``None`` offline).
        location: where the stores live (:func:`store_location`).
        scenario: what an evaluation scenario changed before the first tick (:mod:`simulacra.evaluation.setup`),
            recorded in the trace header; ``None`` for a plain run.
    """

    world: World
    config: Config
    run_dir: Path
    agents: list[str]
    embedder: Any
    rater: Any
    mind: Any
    memories: dict[str, AgentMemory]
    shared: MemoryTier | None = None
    llm: Any = None
    location: Any = None
    scenario: dict[str, Any] | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    _pool: ThreadPoolExecutor | None = None
    _parent: Runtime | None = None

    residents: list[str] | None = None

    @cached_property
    def names(self) -> dict[str, str]:
        """Agent id -> full name of the simulated residents (``residents``, default :attr:`agents`: a shard's
        runtime names every resident of its town; built once: every view of every tick uses it)."""
        return {pid: self.world.personas[pid].name for pid in (self.residents or self.agents)}

    def view(self, agents: Sequence[str]) -> Runtime:
        """The run's parts as one shard of its agents sees them: ``agents`` (a subset of :attr:`agents`, in the
        run's order) and their memories; every other part (world, config, embedder, rater, mind, language model,
        shared tier, stores' location) is the run's own, and :attr:`names` still names every simulated resident.
        Closing a view closes nothing. :meth:`map` runs on the run's thread pool."""
        if list(agents) == self.agents:
            return self
        v = replace(self, agents=list(agents), memories={a: self.memories[a] for a in agents}, closers=[],
                    _pool=None, _parent=self)
        v.__dict__["names"], v.__dict__["place_names"] = self.names, self.place_names
        return v

    @cached_property
    def place_names(self) -> dict[str, str]:
        """Place id -> name (built once)."""
        return {pid: p.name for pid, p in self.world.places.items()}

    def persona(self, agent: str) -> Persona:
        return self.world.personas[agent]

    def map(self, fn: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """``[fn(x) for x in items]``, concurrently (at most ``llm.in_flight`` at once) when a language model
        answers; results in the order of ``items`` whatever order the answers arrive in.

        When some fail, every item still runs to its end before the first failure (in the order of ``items``) is
        raised: no item is left calling the model after this returns (a stopped run's summary and a closed
        run's model see no late call), and what the stage asked does not depend on which item failed first."""
        if self._parent is not None:
            return self._parent.map(fn, items)
        items = list(items)
        if self.llm is None or len(items) < 2 or self.config.llm.in_flight < 2:
            return [fn(x) for x in items]
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.config.llm.in_flight, thread_name_prefix="mind")
        futures = [self._pool.submit(fn, x) for x in items]
        wait(futures)
        return [f.result() for f in futures]

    def flush(self, deletes: bool = True, each: Callable[[], None] | None = None) -> int:
        """Write every store's queued changes to Chroma together (:func:`~simulacra.memory.store.flush_tiers`: per
        collection one upsert or metadata update, then with ``deletes`` one delete; in an embedded run's town store
        every agent's short-term memory is one collection, so a tick's writes are a handful of calls), calling
        ``each()`` after each collection's writes (a kill point). Returns the Chroma calls made.

        A running simulation flushes every ``memory.store_flush_minutes``
        (:meth:`simulacra.simulation.Simulation.step`): without deletes in that tick's persist stage, with them after
        its checkpoint, so that a memory leaves Chroma once no checkpoint a resume could start from lists it. A flush
        with deletes empties the run's store journal (:mod:`simulacra.memory.journal`): Chroma then holds
        everything the last checkpoint lists.

        Raises:
            StoreUnavailable: a Chroma server did not answer within its retry window.
        """
        tiers = self.tiers
        calls = flush_tiers(tiers, deletes=deletes, each=each)
        if deletes and self.journal is not None:
            self.journal.reset(tiers)  # Chroma holds the mirrors, so everything the last checkpoint lists
        return calls

    @property
    def journal(self) -> StoreJournal | None:
        """The run's store journal (:mod:`simulacra.memory.journal`), ``None`` without a store location."""
        return getattr(self.location, "journal", None)

    def journal_tick(self, ticks_done: int) -> int:
        """Append to the run's store journal what the stores wrote since its last frame, as of ``ticks_done`` ticks
        (:meth:`StoreJournal.append`); returns the bytes written."""
        return self.journal.append(ticks_done, self.tiers)

    @property
    def tiers(self) -> list[MemoryTier]:
        """Every tier of the run's stores, in the order they are flushed (:func:`store_tiers`)."""
        return store_tiers([self.memories[pid] for pid in self.agents], self.shared)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        close_all(self.closers)


def close_all(closers: list[Callable[[], None]]) -> None:
    """Call ``closers`` last first, emptying the list; one that fails is logged and the rest are still called (the
    run folder's release, the first, comes last whatever failed before it)."""
    while closers:
        closer = closers.pop()
        try:
            closer()
        except Exception:  # noqa: BLE001 - tear-down goes on; the error is logged
            log.warning("closing a part of the run failed", exc_info=True)


def build_runtime(world_path: str | Path, config: Config, personas_dir: str | Path | None = None,
                  db_dir: str | Path = "database", run_name: str | None = None, overwrite: bool = False,
                  embedder=None, agents: list[str] | None = None, resume: bool = False) -> Runtime:
    """Load the world, prepare ``<db_dir>/<run_name>/``, and build every part of a run.

    With ``resume`` the run folder must exist and is kept as it is (its stores are reopened).

    Order: world and personas (validated), run folder (writable, ``simulation.min_free_mb`` free), the Chroma server
    when ``memory.chroma_url`` is set (reachable; a new run's collections not there yet), embedder, language model (a
    bundled local model is started here when ``llm.provider: local``), rater (the one answering at ``rater.url``, or
    in-process with the model's backend: :func:`build_rater`), mind, memory stores with the static memories embedded.

    Raises:
        WorldError, PersonaError: invalid input files (naming file and field).
        RunExistsError: the run folder exists and ``overwrite`` is false.
        CheckpointError: ``resume`` and the run folder does not exist, or its Chroma server holds none of its
            collections.
        RunFolderError: the run folder cannot be created or written, or its disk is short of free space.
        RunInUseError: another town (of this process or another) holds the run folder.
        StoreUnavailable: no Chroma server answers at ``memory.chroma_url``.
        RaterError: no rater answers at a ``rater.url`` that is not loopback.
        LLMError: the configured model cannot be set up (missing key, bundled model not installed).
        SimulacraError: ``agents`` names someone who is not a resident.
    """
    world, ids, run_dir, location, closers = prepare_run(world_path, config, personas_dir, db_dir, run_name,
                                                         overwrite, agents, resume)
    return build_parts(world, config, run_dir, ids, location, closers, embedder, resume)


def build_parts(world: World, config: Config, run_dir: Path, agents: Sequence[str], location,
                closers: list[Callable[[], None]], embedder=None, resume: bool = False,
                residents: Sequence[str] | None = None, name: str | None = None) -> Runtime:
    """Everything that belongs to ``agents``, built in this process: an embedder (unless given), the language model
    (recording into ``run_dir``), a rater (:func:`build_rater`), a mind, and their stores at ``location`` with the
    static memories embedded. The run's :func:`build_runtime` and each Ray worker's shard
    (:func:`simulacra.cluster.build_shard_runtime`) call it. ``closers`` (the location's) get the parts' closers
    and are all called when a part fails. ``residents``: every resident of the town (default ``agents``);
    ``name``: the run's name in messages (default the folder's).

    Raises:
        RaterError, LLMError: as :func:`build_runtime`.
    """
    from simulacra.embeddings import build_embedder

    try:
        if embedder is None:
            embedder = build_embedder(config.embedding)
        llm = build_language_model(config, run_dir, closers, resume)
        rater = build_rater(config, embedder, llm, name or run_dir.name)
        closers.append(rater.close)
        mind = build_mind(config, llm, world.tick_minutes, rater.reflect)
        memories, shared = open_stores(world, config, run_dir, embedder, list(agents), location)
    except BaseException:
        close_all(closers)
        raise
    return Runtime(world=world, config=config, run_dir=run_dir, agents=list(agents), embedder=embedder, rater=rater,
                   mind=mind, memories=memories, shared=shared, llm=llm, location=location, closers=closers,
                   residents=None if residents is None else list(residents))


def prepare_run(world_path: str | Path, config: Config, personas_dir: str | Path | None = None,
                db_dir: str | Path = "database", run_name: str | None = None, overwrite: bool = False,
                agents: list[str] | None = None, resume: bool = False, stores: bool = True):
    """The part of :func:`build_runtime` that needs no model: the world and personas (validated), the residents
    simulated, the run folder held for this writer (:func:`simulacra.disk.hold_run_folder`) and made, or checked on
    ``resume``, and with ``stores`` the stores' location claimed. Returns ``(world, agent ids, run folder, location
    or None, closers)``; the closers (the folder's release first, so it is let go last) are the caller's to call.
    Raises as :func:`build_runtime`."""
    if not isinstance(db_dir, (str, Path)):
        raise SimulacraError(f"db_dir: expected the folder that holds run folders (a str or a Path), got "
                             f"{type(db_dir).__name__} {db_dir!r}")
    world = load_world(world_path, personas_dir)
    ids = agents if agents is not None else list(world.personas)
    unknown = [a for a in ids if a not in world.personas]
    if unknown:
        raise SimulacraError(f"agents (--agents): not residents of {world.source}: {', '.join(unknown)} (residents: "
                             f"{', '.join(world.personas)})")
    if agents is not None and not ids:
        raise SimulacraError(f"agents (--agents): no resident named (residents: {', '.join(world.personas)})")
    if len(set(ids)) != len(ids):
        twice = sorted({a for a in ids if ids.count(a) > 1})
        raise SimulacraError(f"agents (--agents): listed more than once: {', '.join(twice)}")
    run_name = check_run_name(run_name if run_name is not None
                              else default_run_name(world_path, config.simulation.seed))
    run_dir = Path(db_dir) / run_name
    if resume and not run_dir.is_dir():
        raise CheckpointError(f"{run_dir}: no such run folder to resume")
    if not resume and run_dir.exists() and not overwrite:
        if run_dir.is_dir() and not resumable(run_dir):
            raise RunExistsError(f"run folder {run_dir} exists but holds no run to continue (its set-up failed before "
                                 f"it recorded its settings): replace it with overwrite (--overwrite), or choose "
                                 f"another run name (--run-name)")
        raise RunExistsError(f"run folder {run_dir} exists: replace it with overwrite (--overwrite), "
                             f"choose another run name (--run-name), or continue it with "
                             f"Town.resume({str(run_dir)!r}) (simulacra run --resume {run_dir})")
    if not resume and overwrite:
        check_replaceable(run_dir)  # refused before the lock: a folder of other files gets no lock file beside it
    release = hold_run_folder(run_dir)  # before the folder is replaced or reopened: one writer at a time
    try:
        if not resume:
            if run_dir.exists():
                forget_chroma_clients()
                remove_run_folder(run_dir)
            make_run_folder(run_dir)
        check_run_folder(run_dir, config.simulation.min_free_mb, remove_on_error=not resume)
        if not stores:
            return world, ids, run_dir, None, [release]
        location = store_location(config.memory, run_dir)
        location.claim(resume, overwrite)
    except BaseException:
        release()
        raise
    closers: list[Callable[[], None]] = [release] if location.journal is None else [release, location.journal.close]
    return world, ids, run_dir, location, closers


def build_rater(config: Config, embedder, llm=None, run_name: str = "the run"):
    """The run's rater (:func:`simulacra.rater.connect_rater`): the one answering at ``rater.url``, else one rating
    in-process with :func:`simulacra.rating.backends.build_backend` (the language-model rater over ``llm`` when a
    model is configured, the offline one otherwise).

    Raises:
        RaterError: no rater answers at a URL that is not loopback (or ``rater.start_local`` is false).
    """
    from simulacra.rater import RaterClient, connect_rater
    from simulacra.rating.backends import build_backend

    r = config.rater
    backend = build_backend(r, embedder, llm)
    rater = connect_rater(r.url, r.timeout_s, r.start_local, embedder, r.neighbours, backend=backend,
                          attempts=r.attempts)
    if isinstance(rater, RaterClient) and llm is not None:
        log.warning("a rater already answers at %s, so the configured LLM (%s) does not rate %s's memories; stop "
                    "that rater or point rater.url elsewhere", r.url, llm.name, run_name)
    return rater


def resumable(run_dir: Path) -> bool:
    """Whether ``run_dir`` holds a run that ``--resume`` can take up: a checkpoint, or a trace header recording the
    settings of a run stopped while being set up (:meth:`simulacra.simulation.Simulation.resume`)."""
    from simulacra.checkpoint import CHECKPOINT
    from simulacra.trace import TraceFormatError, read_header

    if (run_dir / CHECKPOINT).is_file():
        return True
    try:
        read_header(run_dir)
    except (TraceFormatError, OSError):
        return False
    return True


def build_language_model(config: Config, run_dir: Path, closers: list[Callable[[], None]], resume: bool = False,
                         interview: bool = False):
    """The run's language model (wrapped: meter, retries, budget, recorder, cache), or ``None`` offline.
    With ``llm.provider: local`` the bundled model's server is started and its closer appended to ``closers``;
    with ``resume`` the answers recorded in the run's ``llm_calls.jsonl`` are replayed (:mod:`simulacra.llm.replay`).
    With ``interview`` the model answers interviews of the finished run: its calls are recorded to the run's
    ``interview_calls.jsonl``, not to the run's own ``llm_calls.jsonl`` (which a resume replays and charges to the
    run's ``llm.max_calls``)."""
    from simulacra.llm import build_model
    from simulacra.llm.factory import CALLS_FILE, INTERVIEW_CALLS_FILE

    calls = INTERVIEW_CALLS_FILE if interview else CALLS_FILE
    if config.llm.provider == "local":
        from simulacra.llm.factory import start_local_model

        server = start_local_model(config.llm)
        closers.append(server.close)
        return build_model(config.llm, run_dir, base_url=server.base_url, model=server.model, resume=resume,
                           calls_file=calls)
    return build_model(config.llm, run_dir, resume=resume, calls_file=calls)


def build_mind(config: Config, llm, tick_minutes: int = 10, reflector=None):
    """The agents' mind: :class:`LLMMind` over ``llm`` when the language-model backend is chosen, else scripted.

    Raises:
        SimulacraError: ``cognition.backend: llm`` with no model configured.
    """
    from simulacra.cognition.scripted import GossipRule, ScriptedMind

    if not uses_language_model(config):
        return ScriptedMind(reflector, GossipRule.from_config(config.simulation))
    if llm is None:
        raise SimulacraError("cognition.backend is llm but no model is configured: set llm.model (and llm.base_url), "
                             "or use --llm local for the bundled model")
    from simulacra.cognition.llm_mind import LLMMind

    return LLMMind(llm, config, tick_minutes, reflector)


def shard_folder(run_dir: str | Path, index: int) -> Path:
    """The folder of a run's Ray shard ``index`` (its embedded stores, store journal, recorded model calls):
    ``run_dir / "shard-<index>"``."""
    return Path(run_dir) / f"shard-{index}"


def store_location(config: MemoryConfig, run_dir: str | Path, run: str | None = None,
                   checkpoint_dir: str | Path | None = None) -> EmbeddedChroma | ChromaServer:
    """Where the run's memory stores live: the Chroma server at ``config.chroma_url`` (collections named after the
    run's name ``run``, default the folder's: :class:`ChromaServer`), else folders under ``run_dir``
    (:class:`EmbeddedChroma`); the store journal in ``run_dir`` either way (a Ray worker's: its ``shard-<k>/``,
    the run's checkpoint in ``checkpoint_dir`` above it).

    Raises:
        StoreUnavailable: no Chroma server answers at ``config.chroma_url``.
    """
    location = (ChromaServer(config.chroma_url, run or Path(run_dir).name, config.chroma_retry_s,
                             config.chroma_timeout_s)
                if config.chroma_url else EmbeddedChroma(run_dir))
    location.journal = StoreJournal(run_dir, checkpoint_dir)  # what the run wrote since its stores reached Chroma
    return location


def run_shards(run_dir: str | Path, header: Mapping[str, Any]) -> int:
    """The shape of the town that last wrote a recorded run's stores: 0 for one process, else its number of Ray
    workers. Its checkpoint says (:func:`simulacra.checkpoint.checkpoint_shards`; a run resumed with another number
    of workers changed it); without a readable one, the trace header's ``workers`` (the shape it started with)."""
    from simulacra.checkpoint import checkpoint_shards, read_checkpoint

    try:
        return checkpoint_shards(read_checkpoint(run_dir))
    except CheckpointError:
        return int(header.get("workers") or 0)


class RunStores:
    """Where a recorded run keeps each owner's memory stores, for the tools that read a run (``interview``,
    ``evaluate``, ``tune``, the recall scores): the run's Chroma server or its folder; for a run on Ray workers
    (:func:`run_shards`) the folder ``shard-<k>/`` of the owner's shard by the rule the run used
    (:func:`simulacra.shard.shard_agents`), which holds its embedded stores and its store journal (with a Chroma
    server: its journal). One location per folder, made at first use.

    Args:
        config: the run's ``memory`` section (as its header records it, with any override).
        run_dir: the run folder; header: its trace header (``agents``, ``world.shared_memory``, ``workers``).
    Raises:
        StoreUnavailable: (on first use) no Chroma server answers at ``config.chroma_url``.
    """

    def __init__(self, config: MemoryConfig, run_dir: str | Path, header: Mapping[str, Any]):
        self.config, self.run_dir = config, Path(run_dir)
        self.has_shared = bool((header.get("world") or {}).get("shared_memory"))
        self._shard_of: dict[str, int] | None = None
        shards = run_shards(run_dir, header)
        if shards:
            from simulacra.shard import shard_agents

            groups = shard_agents(list(header["agents"]), shards)
            self._shard_of = {a: k for k, g in enumerate(groups) for a in g}
        self._made: dict[Path, EmbeddedChroma | ChromaServer] = {}
        self._shared: dict[Path, MemoryTier | None] = {}

    def _folder(self, owner: str) -> Path:
        if self._shard_of is None:
            return self.run_dir
        return shard_folder(self.run_dir, self._shard_of.get(owner, 0))  # the town's shared tier: shard 0's replica

    def location(self, owner: str) -> EmbeddedChroma | ChromaServer:
        """The :func:`store_location` holding ``owner``'s stores (an agent id, or ``"town"``)."""
        folder = self._folder(owner)
        if folder not in self._made:
            self._made[folder] = store_location(self.config, folder, self.run_dir.name, self.run_dir)
        return self._made[folder]

    def shared(self, owner: str, dim: int) -> MemoryTier | None:
        """The town's shared tier as ``owner``'s location keeps it (``None``: the run has none)."""
        folder = self._folder(owner)
        if folder not in self._shared:
            location = self.location(owner)
            self._shared[folder] = (open_shared(location, self.config, dim)
                                    if self.has_shared and location.has_store("town", "shared") else None)
        return self._shared[folder]

    def memory(self, agent: str, dim: int) -> AgentMemory:
        """``agent``'s :class:`AgentMemory` as the run left it (with the shared tier of its location)."""
        return AgentMemory(agent, self.run_dir / agent, self.config, dim, shared=self.shared(agent, dim),
                           location=self.location(agent))


def store_tiers(memories: Iterable[AgentMemory], shared: MemoryTier | None) -> list[MemoryTier]:
    """Every tier of a run's stores in the order they are flushed: the shared tier, then each agent's
    (:attr:`AgentMemory.all_tiers`) in the order of ``memories``."""
    return ([shared] if shared is not None else []) + [t for m in memories for t in m.all_tiers]


def open_shared(location, config: MemoryConfig, dim: int, write_behind: bool = False) -> MemoryTier:
    """The town's shared tier at ``location`` (:func:`store_location`); ``write_behind`` as :class:`MemoryTier`."""
    return MemoryTier(location.client("town"), "shared", dim, config.distance, write_behind=write_behind,
                      **location.tier_args("town", "shared"))


def open_stores(world: World, config: Config, run_dir: Path, embedder, ids: Sequence[str], location=None):
    """Each agent's :class:`AgentMemory` (static memory embedded once) and the town's shared tier (or ``None``),
    at ``location`` (default :func:`store_location` of the config), in write-behind mode (:meth:`Runtime.flush`
    writes them to Chroma); the static memories of every agent are written before this returns (one call per
    collection)."""
    location = location or store_location(config.memory, run_dir)
    dim = embedder.dim
    shared = None
    if world.shared_memory:
        shared = open_shared(location, config.memory, dim, write_behind=True)
    statics = {pid: static_records(pid, world.personas[pid], world) for pid in ids}
    unique = sorted({r.text for recs in statics.values() for r in recs})
    vectors = dict(zip(unique, embedder.embed(unique)))
    memories = {}
    for pid in ids:
        mem = AgentMemory(pid, run_dir / pid, config.memory, dim, shared=shared, location=location, write_behind=True)
        recs = statics[pid]
        mem.set_static(recs, np.stack([vectors[r.text] for r in recs]))
        memories[pid] = mem
    tiers = store_tiers(memories.values(), shared)
    flush_tiers(tiers)
    for t in tiers:  # in Chroma now: no journal frame needs them
        t.journal_done()
    return memories, shared


def forget_chroma_clients() -> None:
    """Drop Chroma's per-path client cache before a run folder is deleted and made anew in this process."""
    try:
        from chromadb.api.client import SharedSystemClient

        SharedSystemClient.clear_system_cache()
    except Exception:  # pragma: no cover - cache layout differs across chromadb versions
        log.debug("could not clear chromadb's client cache", exc_info=True)
