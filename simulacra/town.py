"""The Python API: a town to run from a notebook or a script, and a finished (or killed) run to read.

::

    from simulacra import Town, open_run

    with Town.create("fernhollow", seed=1) as town:     # a packaged world, or the path of your own world file
        town.run(hours=2)                                # a progress bar; returns the summary, writes summary.json
        print(town.interview("ezra_pike", "What happened at the forge?")["answer"])
    run = open_run(town.run_dir)
    frames = run.frames()                                # pandas DataFrames (pip install 'simulacra[analysis]')

:class:`Town` wraps the engine (:class:`simulacra.simulation.Simulation`); the command line (``simulacra run``)
is a thin layer over it, so a run from the API and from the CLI write the same trace and the same summary.
Interrupting a cell (``KeyboardInterrupt``) in the middle of a tick brings the town back to its last checkpoint
(:meth:`Simulation.resume`), so it can run on: no memory of the cut tick is kept twice or lost.
"""

from __future__ import annotations

import json
import logging
import sys
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from simulacra.config import Config, apply_overrides, config_from_dict, load_config
from simulacra.errors import ConfigError, SimulacraError, is_finite_number, is_whole

if TYPE_CHECKING:
    from simulacra.trace import Header, TickRecord

log = logging.getLogger(__name__)

SUMMARY = "summary.json"


def make_config(config: Config | Mapping[str, Any] | str | Path | None = None, seed: int | None = None,
                llm: str | Mapping[str, Any] | None = None, overrides: list[str] | tuple[str, ...] = (),
                **sections: Mapping[str, Any]) -> Config:
    """A run's config from what an API user or the command line gives.

    Args:
        config: a :class:`Config`, a mapping of sections (``{"memory": {"a_rec": 0}}``), the path of a YAML config
            file, or the name of a packaged preset (``seed003``); ``None``: the defaults.
        seed: ``simulation.seed``.
        llm: ``"local"`` (the bundled model, ``llm.provider: local``) or a model name (``llm.model``) for an
            OpenAI-compatible server (``llm.base_url``, ``OPENAI_BASE_URL``, else OpenAI); a mapping is the ``llm``
            section itself (``llm={"model": "gpt-4o-mini", "max_calls": 500}``).
        overrides: ``"section.field=value"`` strings, applied last (:func:`simulacra.config.apply_overrides`).
        sections: a mapping per section to merge over ``config``, e.g. ``memory={"a_rec": 0, "a_imp": 0.1}``.
    Raises:
        ConfigError: an unknown section or field, or a value out of range (naming the field).
    """
    return build_config(config, seed, llm, overrides, sections, "Town.create settings")


def build_config(config: Config | Mapping[str, Any] | str | Path | None, seed: int | None,
                 llm: str | Mapping[str, Any] | None, overrides: list[str] | tuple[str, ...],
                 sections: Mapping[str, Mapping[str, Any]], given_by: str) -> Config:
    """:func:`make_config` for a caller that names where the settings came from in its errors: ``given_by``
    (``"Town.create settings"``, ``"command-line settings"``), as ``"<given_by> with memory.a_rec=-1: field ..."``
    or ``"<config file> with <given_by>: ..."``. The one place a run's config is made from a config, a seed, a
    model and overrides (the API and ``simulacra run``).

    Raises:
        ConfigError: as :func:`make_config`.
    """
    from simulacra.presets import available_presets, preset_path

    source = given_by
    if isinstance(llm, Mapping):  # the llm section, not the shortcut
        sections = {**sections, "llm": llm}
        llm = None
    if isinstance(config, Config):
        data = config.to_dict()
    elif isinstance(config, Mapping):
        data = json.loads(json.dumps(dict(config)))  # a deep copy: the caller's mapping is left as it is
    elif config is None:
        data = {}
    elif not isinstance(config, (str, Path)):
        raise ConfigError(source, "config", f"expected a Config, a mapping of sections, a config file or a preset "
                                            f"name, got {type(config).__name__}")
    else:
        path = Path(config)
        if not path.exists() and str(config) in available_presets():
            path = preset_path(str(config))
        data = load_config(path).to_dict()
        source = f"{path} with {given_by}"
    for name, values in sections.items():
        if not isinstance(values, Mapping):
            raise ConfigError(source, name, f"expected a mapping of fields (e.g. {name}={{...}}), got "
                                            f"{type(values).__name__}")
        current = data.setdefault(name, {})
        if not isinstance(current, dict):
            raise ConfigError(source, name, "expected a mapping")
        current.update(values)
    if isinstance(overrides, str) or not all(isinstance(o, str) for o in overrides):
        raise ConfigError(source, "overrides", f"expected a list of 'section.field=value' strings, got "
                                               f"{overrides!r:.80}")
    extra = list(overrides)
    if seed is not None:
        if not is_whole(seed):
            raise ConfigError(source, "seed", f"expected a whole number >= 0, got {seed!r}")
        extra.append(f"simulation.seed={seed}")
    if llm == "local":
        extra.append("llm.provider=local")
    elif llm:
        extra.append(f"llm.model={llm}")
    data = apply_overrides(data, extra, source)
    return config_from_dict(data, source if not extra else f"{source} with {' '.join(extra)}")


def _close_quietly(sim) -> None:
    try:
        sim.close()
    except Exception:  # noqa: BLE001 - at garbage collection or exit: nothing to report to
        log.debug("closing a town at exit", exc_info=True)


def check_hours(hours: float) -> float:
    """``hours`` (game hours to run) if it is a finite number > 0, else :class:`SimulacraError` (as ``days`` is at
    least 1: a length that rounds to no tick still runs one; ``ticks=0`` runs none)."""
    if not (is_finite_number(hours) and hours > 0):
        raise SimulacraError(f"hours must be a finite number > 0 (no tick at all: ticks=0), got {hours!r}")
    return hours


def _whole(name: str, value: Any, least: int) -> int:
    """``value`` if it is an integer >= ``least`` (not a bool, not 2.5), else :class:`SimulacraError`."""
    if not (is_whole(value) and value >= least):
        raise SimulacraError(f"{name} must be a whole number >= {least}, got {value!r}")
    return int(value)


def _flat(d: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A nested dict as ``{"section.field": value}`` (a profile's fields one level further down)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            out.update(_flat(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


class Town:
    """A running town: its world, clock, agents and their memories (a :class:`~simulacra.simulation.Simulation`).

    Make one with :meth:`create` or :meth:`resume`; use it as a context manager (or call :meth:`close`) so that the
    rater's threads, the model server and the Chroma clients are released, also when a cell is interrupted. A town
    left open is closed when it is garbage-collected or when Python exits.

    Attributes:
        sim: the engine (:class:`~simulacra.simulation.Simulation`), for what this API does not cover.
    """

    def __init__(self, sim):
        self._take(sim)

    def _take(self, sim) -> None:
        """Run on ``sim`` (made, resumed, or taken up again after an interrupt): closed with this town, its config
        as its trace header records it kept to compare (:meth:`_check_config`)."""
        self.sim = sim
        self._finalizer = weakref.finalize(self, _close_quietly, sim)
        self._recorded = _flat(sim.config.model_dump(mode="json"))

    # ----------------------------------------------------------------- making one
    @classmethod
    def create(cls, world: str | Path = "fernhollow", config: Config | Mapping[str, Any] | str | Path | None = None,
               *, seed: int | None = None, llm: str | Mapping[str, Any] | None = None, agents: list[str] | None = None,
               run_name: str | None = None, db_dir: str | Path = "database", overwrite: bool = False,
               personas_dir: str | Path | None = None, workers: int = 1, ray_address: str | None = None,
               overrides: list[str] | tuple[str, ...] = (), **sections: Mapping[str, Any]) -> Town:
        """A new town at the start of its world's first day.

        Args:
            world: a world file, or the name of a packaged world (``fernhollow``, ``gullhaven``;
                :mod:`simulacra.assets`).
            config: the run's config: a :class:`Config`, a mapping of sections, a config file or a preset name
                (:func:`make_config`), e.g. ``Town.create("fernhollow", seed=2, memory={"a_rec": 0})``.
            seed: ``simulation.seed`` (see :func:`make_config`).
            llm: ``"local"``, a model name, or the ``llm`` section (see :func:`make_config`).
            overrides: ``"section.field=value"`` strings (see :func:`make_config`).
            sections: a mapping per config section to merge over ``config`` (see :func:`make_config`).
            agents: resident ids to simulate (default: every resident).
            run_name: the run folder's name under ``db_dir`` (default ``<world>-seed<seed>``).
            overwrite: replace an existing run folder of that name.
            personas_dir: the persona files' folder (default: the world's own).
            workers: agent shards as Ray actors (:mod:`simulacra.cluster`); 1: all in this process.
            ray_address: join this Ray cluster (``auto``, ``ray://host:port``) instead of starting Ray here.
        Raises:
            WorldError, PersonaError, ConfigError: invalid input (naming the file and field).
            RunExistsError: the run folder exists and ``overwrite`` is false.
            LLMError, RaterError: the configured model or rater cannot be set up.
        """
        from simulacra.simulation import Simulation

        if not isinstance(world, (str, Path)):
            raise SimulacraError(f"world must be a world file's path or a packaged world's name, got {world!r:.80}")
        if agents is not None and (isinstance(agents, str) or not all(isinstance(a, str) for a in agents)):
            raise SimulacraError(f"agents must be a list of resident ids (e.g. ['greta_lund']), got {agents!r:.80}")
        if run_name is not None and not isinstance(run_name, str):
            raise SimulacraError(f"run_name must be a folder name (a string), got {run_name!r}")
        if not (is_whole(workers) and workers >= 1):
            raise SimulacraError(f"workers must be a whole number >= 1, got {workers!r}")
        cfg = make_config(config, seed, llm, overrides, **sections)
        sim = Simulation.create(world, cfg, personas_dir=personas_dir, db_dir=db_dir, run_name=run_name,
                                overwrite=overwrite, agents=agents, workers=workers, ray_address=ray_address)
        return cls(sim)

    @classmethod
    def resume(cls, run_dir: str | Path, *, allow_changed: bool = False, rater_url: str | None = None,
               chroma_url: str | None = None, ray_address: str | None = None, workers: int | None = None,
               settings: Sequence[str] = ()) -> Town:
        """The run at ``run_dir`` taken up at its last checkpoint, with its own config, world and personas
        (:meth:`Simulation.resume`; a run of several workers on as many Ray actors, started here or on the cluster
        at ``ray_address``; with ``workers``, on that many instead, when the run's memory is on a Chroma server);
        :meth:`run` with no length then finishes the length it was started for. ``settings``: a larger model budget
        for a run its budget stopped (``["llm.max_calls=500"]``; :data:`simulacra.simulation.RESUME_SETTINGS`)."""
        from simulacra.simulation import Simulation

        return cls(Simulation.resume(run_dir, allow_changed=allow_changed, rater_url=rater_url,
                                     chroma_url=chroma_url, ray_address=ray_address, workers=workers,
                                     settings=settings))

    # ----------------------------------------------------------------- what it is
    @property
    def run_dir(self) -> Path:
        """The run folder: ``trace.jsonl``, the stores, ``checkpoint.json``, ``summary.json``."""
        return self.sim.run_dir

    @property
    def world(self):
        """The :class:`~simulacra.world.World` (places, paths, objects, events, personas)."""
        return self.sim.world

    @property
    def config(self) -> Config:
        """The run's config, as its trace header records it. Read it; a field changed on a running town is refused
        at the next :meth:`run` or :meth:`step` (the trace records the config once, and ``rescore``, ``tune`` and
        resume read it there): make a town with the setting instead (``Town.create(..., memory={...})``)."""
        return self.sim.config

    @property
    def agents(self) -> dict[str, str]:
        """The simulated agents: id -> full name, in the run's order."""
        return {a: self.sim.rt.names[a] for a in self.sim.rt.agents}

    @property
    def ticks_done(self) -> int:
        """The ticks run so far (0 for a new town); the next tick's number."""
        return self.sim.ticks_done

    @property
    def now(self) -> int:
        """The game time reached (absolute game minutes from day 1 00:00; the start of the next tick)."""
        return self.sim.state.now

    @property
    def clock(self) -> str:
        """The game time reached, as ``day D (Weekday) HH:MM``."""
        from simulacra.clock import format_game_time

        w = self.world
        return format_game_time(self.now, w.start_weekday, w.rest_days)

    def describe(self) -> list[str]:
        """What the town thinks with (:func:`simulacra.runtime.describe_mind`): the first lines a run prints."""
        from simulacra.runtime import describe_mind

        return describe_mind(self.config, len(self.agents))

    def __repr__(self) -> str:
        state = "closed" if self.closed else self.clock
        return f"<Town {self.world.name}: {len(self.agents)} agents, {self.ticks_done} ticks, {state}; {self.run_dir}>"

    # ----------------------------------------------------------------- running it
    def ticks_for(self, hours: float | None = None, days: int | None = None, ticks: int | None = None,
                  from_start: bool = False) -> int:
        """Ticks that make a run length: ``ticks`` as given; else ``hours`` game hours or ``days`` game days
        (:meth:`World.run_minutes`: the world's start_time to its end_time, each further day 24 h more) in whole
        ticks, at least one; with none of them, what a resumed run has left of the length it was started for, else
        one game day. ``from_start``: the length counts from the run's first tick (``simulacra run --resume
        --hours 5``: to game hour 5 of the run), so the ticks already done are taken off.

        Raises:
            SimulacraError: more than one length, or a negative one.
        """
        if sum(x is not None for x in (hours, days, ticks)) > 1:
            raise SimulacraError("give one of hours, days and ticks")
        if ticks is not None:
            ticks = _whole("ticks", ticks, 0)
            return max(0, ticks - self.ticks_done) if from_start else ticks
        if days is not None:
            _whole("days", days, 1)
        if hours is not None:
            check_hours(hours)
        if hours is None and days is None and self.sim.target_ticks is not None:
            return max(0, self.sim.target_ticks - self.ticks_done)
        w = self.world
        minutes = hours * 60 if hours is not None else w.run_minutes(days or 1)
        n = max(1, int(round(minutes / w.tick_minutes)))
        return max(0, n - self.ticks_done) if from_start else n

    def run(self, hours: float | None = None, days: int | None = None, ticks: int | None = None, *,
            progress: bool = True, echo: bool = False,
            on_tick: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """Run the town on by a length (:meth:`ticks_for`), then checkpoint, write ``summary.json`` and return the
        summary (:meth:`summary`; its ``stopped`` says why a run ended early and how to take it up).

        Args:
            progress: a tqdm bar on stderr, with the game time reached.
            echo: print each new day and the tick's notable lines (events, conversations) under the bar.
            on_tick: called with each tick's :class:`~simulacra.simulation.TickResult`.
        Raises:
            KeyboardInterrupt: after the town is brought back to its last checkpoint (when the interrupt cut a
                tick), so that it can run on.
            SimulacraError: a closed town, a bad length, or its :attr:`config` changed since it was made or
                resumed; other exceptions of a failed tick propagate (the last checkpoint stays resumable).
        """
        from tqdm import tqdm

        from simulacra.clock import day_number

        self._check_open()
        self._check_config()
        n = self.ticks_for(hours, days, ticks)
        if on_tick is not None and not callable(on_tick):
            raise SimulacraError(f"on_tick must be a function of the tick's result, got {on_tick!r:.80}")
        sim, w = self.sim, self.world
        bar = tqdm(total=n, unit="tick", disable=not progress, file=sys.stderr, dynamic_ncols=True)
        days_seen = {day_number(sim.state.now)}

        def each(result) -> None:
            bar.set_postfix_str(result.record["clock"], refresh=False)
            bar.update(1)
            if echo:
                day = day_number(result.record["time"])
                if day not in days_seen:  # a new day begins: say which
                    days_seen.add(day)
                    rest = " (a rest day)" if w.is_rest_day(result.record["time"]) else ""
                    bar.write(f"--- day {day}, {w.weekday(result.record['time'])}{rest} ---", file=sys.stderr)
                for line in result.notable:
                    bar.write(line, file=sys.stderr)
            if on_tick is not None:
                on_tick(result)

        try:
            summary = sim.run(n, each)
        except KeyboardInterrupt:
            bar.close()
            self._recover()
            raise
        finally:
            bar.close()
        self.write_summary(summary)
        return summary

    def step(self):
        """Run one tick; returns its :class:`~simulacra.simulation.TickResult` (``record``: the trace record,
        ``notable``: its readable lines). The tick is checkpointed like every tick of :meth:`run`.

        Raises:
            SimulacraError: a closed town, or its :attr:`config` changed since it was made or resumed."""
        self._check_open()
        self._check_config()
        try:
            return self.sim.step()
        except KeyboardInterrupt:
            self._recover()
            raise

    def _recover(self) -> None:
        """After an interrupt: a tick cut in the middle is undone by taking the run up again at its last checkpoint
        (in this process the embedding model is kept; on Ray the workers are started again on the same cluster)."""
        sim = self.sim
        if not sim._mid_tick:
            return
        from simulacra.simulation import Simulation

        embedder = sim.rt.embedder
        address = sim.cluster.address if sim.cluster is not None else None
        self._finalizer.detach()
        sim.close()
        self._take(Simulation.resume(sim.run_dir, embedder=embedder, ray_address=address))
        print(f"simulacra: interrupted in the middle of a tick; the town is back at its last checkpoint "
              f"({self.ticks_done} ticks, {self.clock})", file=sys.stderr)

    # ----------------------------------------------------------------- asking it
    def summary(self) -> dict[str, Any]:
        """The run summary (:meth:`Simulation.summary`): per agent its memory counts, most important long-term
        memories, reflections, plan and whom it talked to; per world event who knows it; the mind's and the
        rater's figures."""
        self._check_open()
        return self.sim.summary()

    def write_summary(self, summary: dict[str, Any] | None = None) -> Path:
        """Write :meth:`summary` (or ``summary``) to ``<run_dir>/summary.json``; returns its path."""
        return write_summary(self.run_dir, summary if summary is not None else self.summary())

    def interview(self, agent: str, question: str) -> dict[str, Any]:
        """Ask ``agent`` a question now: what it recalls for it (the ``interview`` retrieval profile) and its mind's
        answer (:func:`simulacra.interview.ask`; a scripted mind answers with what it recalls). Reads memory only.

        Returns:
            ``{"agent", "name", "question", "time", "clock", "answer", "source", "mind", "profile", "used",
            "retrieved"}`` as :func:`simulacra.interview.interview` (memory dicts with score terms); what the agent
            forgot (``forgotten``) is read from the finished run's trace: ``open_run(run_dir).interview(...)``.
        Raises:
            SimulacraError: an unknown agent, an empty question, or a town on Ray workers (interview its run with
                :func:`open_run` after closing it).
        """
        from simulacra.interview import ask, check_question

        self._check_open()
        sim = self.sim
        if agent not in sim.rt.agents:
            raise SimulacraError(f"no agent {agent!r} in this town; agents: {', '.join(sim.rt.agents)}")
        question = check_question(question)
        if sim.cluster is not None:
            raise SimulacraError("the agents of a town on Ray workers live in the workers: close the town and ask "
                                 "open_run(run_dir).interview(...)")
        rt, w = sim.rt, self.world
        return ask(rt.memories[agent], rt.mind, rt.embedder, rt.config, w.personas[agent], question, self.now,
                   sim.state.agents[agent].place, rt.names, rt.place_names, w.start_weekday, w.rest_days,
                   run_start=sim.state.start_minute)

    def frames(self):
        """The run so far as pandas DataFrames (:func:`simulacra.frames.read_frames`); a closed town's run too."""
        if not self.closed:
            self.sim.trace.sync()
        return open_run(self.run_dir).frames()

    # ----------------------------------------------------------------- closing it
    @property
    def closed(self) -> bool:
        return not self._finalizer.alive

    def _check_config(self) -> None:
        """Refuse to run on with a config other than the one the trace header records (a field set on
        :attr:`config` of a running town): its ticks would be recorded as scored with the header's."""
        now = _flat(self.sim.config.model_dump(mode="json"))
        changed = [k for k in sorted(set(now) | set(self._recorded)) if now.get(k) != self._recorded.get(k)]
        if changed:
            said = ", ".join(f"{k} {self._recorded.get(k)!r} -> {now.get(k)!r}" for k in changed[:4])
            raise SimulacraError(f"town.config was changed after the town was made ({said}"
                                 f"{', ...' if len(changed) > 4 else ''}): a run's config is recorded once, in its "
                                 f"trace header, and rescore, tune and resume read it there. Put it back, or make a "
                                 f"town with the setting (Town.create(..., memory={{...}}, overrides=[...]))")

    def _check_open(self) -> None:
        if self.closed:
            raise SimulacraError(f"the town of {self.run_dir} is closed; take it up again with "
                                 f"Town.resume({str(self.run_dir)!r})")

    def close(self) -> None:
        """Release the run's parts (rater, model server, Chroma clients, Ray workers); safe to call twice."""
        self._finalizer()

    def __enter__(self) -> Town:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def write_summary(run_dir: str | Path, summary: dict[str, Any]) -> Path:
    """``<run_dir>/summary.json`` (indented UTF-8 JSON), the one place a run's summary is written."""
    path = Path(run_dir) / SUMMARY
    path.write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return path


class Run:
    """A run on disk, finished or killed, read without running anything (:func:`open_run`).

    Attributes:
        run_dir: the run folder; header: the trace header (config, world, personas, agents, ...).
    """

    def __init__(self, run_dir: Path, header: Header):
        self.run_dir = run_dir
        self.header = header

    @property
    def agents(self) -> dict[str, str]:
        """id -> full name of the run's agents."""
        from simulacra.trace import agent_names

        return agent_names(self.header)

    @property
    def config(self) -> Config:
        from simulacra.config import recorded_config

        return config_from_dict(recorded_config(self.header["config"]), f"{self.run_dir / 'trace.jsonl'}: header")

    @property
    def summary(self) -> dict[str, Any] | None:
        """``summary.json`` as written at the end of a run; ``None`` for a run that was killed before its end."""
        path = self.run_dir / SUMMARY
        if not path.is_file():
            return None
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (ValueError, UnicodeDecodeError) as err:  # written whole at a run's end: damaged by something else
            raise SimulacraError(f"{path}: not a summary simulacra wrote ({err}); run.frames() and run.ticks() "
                                 "read the trace instead") from None

    def ticks(self) -> list[TickRecord]:
        """The complete tick records of the trace (:class:`~simulacra.trace.TickRecord`; a killed run's cut last
        line is left out)."""
        from simulacra.trace import read_trace

        return read_trace(self.run_dir)[1]

    def frames(self):
        """The run as pandas DataFrames (:func:`simulacra.frames.read_frames`)."""
        from simulacra.frames import read_frames

        return read_frames(self.run_dir)

    def interview(self, agent: str, question: str, tick: int | None = None,
                  overrides: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
        """Ask ``agent`` a question as at the end of the run or of tick ``tick``
        (:func:`simulacra.interview.interview`)."""
        from simulacra.interview import interview

        return interview(self.run_dir, agent, question, tick, list(overrides))

    def rescore(self, a_rec: float | None = None, a_imp: float | None = None, a_rel: float | None = None,
                **options: Any) -> dict[str, Any]:
        """How the run's retrievals would have ranked under other weights (:func:`simulacra.rescore.rescore_run`)."""
        from simulacra.rescore import rescore_run

        return rescore_run(self.run_dir, a_rec, a_imp, a_rel, **options)

    def screenshot(self, path: str | Path, tick: int | None = None, agent: str | None = None,
                   size: tuple[int, int] = (1280, 800)) -> Path:
        """A PNG of the replay viewer at ``tick`` (default: the busiest tick), drawn off screen (needs pygame:
        ``pip install 'simulacra[viewer]'``); returns its path (``IPython.display.Image(path)`` shows it)."""
        from simulacra.viewer.app import save_screenshot
        from simulacra.viewer.state import ReplayState

        replay = ReplayState.load(str(self.run_dir))
        return Path(save_screenshot(replay, replay.busiest_tick() if tick is None else tick, path, agent, size))

    def resume(self, **options: Any) -> Town:
        """Take the run up at its last checkpoint (:meth:`Town.resume`)."""
        return Town.resume(self.run_dir, **options)

    def __repr__(self) -> str:
        return f"<Run {self.header['world']['name']}: {len(self.header['agents'])} agents; {self.run_dir}>"


def open_run(run_dir: str | Path) -> Run:
    """A run folder (``database/<run>``) or its ``trace.jsonl``, finished or killed, to read.

    Raises:
        SimulacraError: no run there (the message names the folder); TraceFormatError: a trace without a valid
            header.
    """
    from simulacra.trace import read_header

    if not isinstance(run_dir, (str, Path)):
        raise SimulacraError(f"open_run takes a run folder's path, got {run_dir!r}")
    path = Path(run_dir)
    if path.name == "trace.jsonl":
        path = path.parent
    if not (path / "trace.jsonl").is_file():
        raise SimulacraError(f"{path}: no run here (no trace.jsonl)")
    return Run(path, read_header(path))
