"""Scale benchmark (issue 11 §3): a whole town with the scripted backend, timed against the embedding floor.

Cases: ``25x2`` — Gullhaven's 25 residents for 2 game days; ``100x1`` — a 100-resident Gullhaven for 1 game
day (:func:`town`: copies of the 25 personas under new ids and names, homes spread over the world's homes);
``--quick``: ``25x4h``, 25 residents for 4 game hours. A game day is 24 game hours of ticks
(``world.tick_minutes`` each) from the world's ``start_time``.

Each case runs in a child process (so that peak RSS is the case's own) with a fresh in-process offline rater
on a free port of 127.0.0.1, and reports:

- ``wall_s``: seconds from building the run (static memories embedded; the embedding model already loaded)
  to the last tick; ``setup_s`` and ``ticks_s`` split it; ``ticks_per_s`` = ticks / ``ticks_s``.
- ``memories_per_agent``: per tier (static, short_term, long_term, shared view excluded) mean, min and max at
  the end.
- ``store_bytes`` (every Chroma folder of the run), ``trace_bytes``, ``checkpoint_bytes`` on disk.
- ``peak_rss_mb``: ``resource.getrusage(RUSAGE_SELF).ru_maxrss`` of the child, in MiB.
- the embedding floor: every text that reached the embedding model (the run's own embedder, wrapped, so the
  rater's texts are counted too) is recorded; ``unique_texts`` / throughput, where the throughput (texts per
  second) is measured after the run, in the same process, by embedding a seeded sample of up to ``--sample`` (1000)
  of those texts again with a fresh embedder of the same settings (``embedding.exact`` included).
  ``wall_over_floor`` = ``wall_s`` / ``floor_s`` (target <= 1.5). ``embed_in_run_s`` is the time the run
  itself spent inside the model.
- ``load_avg_1min``: the machine's 1-minute load average sampled every 30 s while the case ran (min, mean, max):
  the machine may be shared, and absolute times follow its load.
- the checkpoint cost: seconds spent in :meth:`Simulation.checkpoint` during the ticks (written after every
  tick by default, ``simulation.checkpoint_every``) per tick, and as a share of the tick time (target < 5 %);
  ``checkpoint_write_s_per_tick``: the part spent writing ``checkpoint.json`` (serialise, fsync, rename);
  ``store_journal_s_per_tick``: appending the tick's frame of the store journal (``memory.store_flush_minutes``,
  :mod:`simulacra.memory.journal`; fsynced inside the checkpoint); ``durability_share``: checkpoint and journal
  together as a share of the tick time (what makes a tick survive a kill; target < 5 %).

Config: the defaults, plus :data:`CASE_SETTINGS` for a case (``100x1`` embeds batched, ``embedding.exact=false``),
plus ``--set``'s; each case's ``settings`` lists those it ran with.

Usage: ``python -m bench.scale [--quick] [--cases 25x2,100x1] [--sample 1000] [--out bench/results/scale.json]``.
Prints a table and writes the JSON (``{"cases": {name: {...}}, "machine": {...}}``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402
import yaml  # noqa: E402

from bench.kept import DAY, Kept  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORLD = ROOT / "worlds" / "gullhaven.yaml"
RESULTS = ROOT / "bench" / "results" / "scale.json"
CASES = {"25x2": (25, 2 * DAY), "100x1": (100, DAY)}
QUICK = {"25x4h": (25, 4 * 60)}
#: config changes a case always runs with (before ``--set``'s, which win): the 100-resident day embeds about
#: 20 000 texts, which exact embedding (one text per forward pass) makes several times slower
CASE_SETTINGS = {"100x1": ("embedding.exact=false",)}

FIRST_NAMES = ["Alba", "Bryn", "Cato", "Dara", "Emil", "Fenna", "Gus", "Hedda", "Ivo", "Jana", "Kit", "Lorna",
               "Magnus", "Nell", "Oskar", "Petra", "Rhys", "Sanne", "Teo", "Ulla", "Vida", "Wren", "Xavi", "Yvette",
               "Zeno", "Anouk", "Bram", "Cleo", "Dag", "Elske", "Folke", "Greer", "Hal", "Ilse", "Joss", "Kari",
               "Linus", "Maud", "Nico", "Odile", "Piet", "Runa", "Sol", "Tilde", "Ugo", "Vesna", "Willa", "Yann",
               "Zara", "Arne", "Bea", "Conn", "Delia", "Erik", "Freya", "Gil", "Hanne", "Iben", "Jory", "Kasia",
               "Leif", "Mette", "Nils", "Orla", "Pim", "Rosa", "Stig", "Tova", "Unni", "Vic", "Wilma", "Yara",
               "Zofia", "Aksel", "Birte"]


def town(tmp: str | Path, n: int, world_path: str | Path = WORLD) -> Path:
    """Write a world of ``n`` residents built from ``world_path`` into ``tmp`` and return the world file's path
    (personas in ``tmp/agent_personalities``).

    The first ``len(residents)`` are the world's own, unchanged. Copy ``k`` (1, 2, ...) of a resident gets a new
    first name (:data:`FIRST_NAMES`), the same surname, id ``<first>_<rest of the original id>_<k>``, and a home
    shifted ``k`` places along the world's list of homes (its routine entries at its old home move with it); its
    relationships point at copy ``k`` of the same people, so every copy of the town has the whole social
    network. Raises ValueError when ``n`` needs more names than :data:`FIRST_NAMES` holds.
    """
    tmp = Path(tmp)
    world_path = Path(world_path)
    world = yaml.safe_load(world_path.read_text(encoding="utf-8"))
    src = world_path.parent.parent / "agent_personalities"
    out = tmp / "agent_personalities"
    out.mkdir(parents=True, exist_ok=True)
    base = list(world["residents"])
    homes = [pid for pid, p in world["places"].items() if p["kind"] == "home"]
    if n - len(base) > len(FIRST_NAMES):
        raise ValueError(f"{n} residents need {n - len(base)} new first names; bench.scale.FIRST_NAMES has "
                         f"{len(FIRST_NAMES)}")
    personas = {pid: json.loads((src / f"{pid}.json").read_text(encoding="utf-8")) for pid in base}

    def copy_id(pid: str, k: int) -> str:
        if k == 0:
            return pid
        first = FIRST_NAMES[(k - 1) * len(base) + base.index(pid)]
        return f"{first.lower()}_{pid.split('_', 1)[-1]}_{k}"

    residents = []
    for i in range(n):
        k, pid = divmod(i, len(base))
        pid = base[pid]
        data = json.loads(json.dumps(personas[pid]))
        new_id = copy_id(pid, k)
        if k:
            data["name"] = f"{new_id.split('_')[0].capitalize()} {data['name'].split()[-1]}"
            old_home = data["home"]
            data["home"] = homes[(homes.index(old_home) + k) % len(homes)] if old_home in homes else old_home
            for key in ("routine", "rest_day_routine"):
                for entry in data.get(key) or []:
                    if entry["place"] == old_home:
                        entry["place"] = data["home"]
            # copy k of everyone exists only when n reaches it; relationships to missing copies are dropped
            data["relationships"] = {copy_id(o, k): d for o, d in data["relationships"].items()
                                     if k * len(base) + base.index(o) < n}
        else:
            data["relationships"] = {o: d for o, d in data["relationships"].items() if base.index(o) < n}
        (out / f"{new_id}.json").write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
        residents.append(new_id)
    world["residents"] = residents
    (tmp / "worlds").mkdir(exist_ok=True)
    path = tmp / "worlds" / f"{world_path.stem}{n}.yaml"
    path.write_text(yaml.safe_dump(world, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


class RecordingEmbedder:
    """An :class:`~simulacra.embeddings.Embedder` that passes every call to ``inner`` and records the texts and
    the seconds spent. Wrapped by the run's text cache, so what it sees are the cache misses."""

    def __init__(self, inner):
        self.inner = inner
        self.name = inner.name
        self.texts: list[str] = []
        self.seconds = 0.0

    @property
    def dim(self) -> int:
        return self.inner.dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        t = time.perf_counter()
        out = self.inner.embed(texts)
        self.seconds += time.perf_counter() - t
        self.texts.extend(texts)
        return out


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dir_bytes(path: Path) -> int:
    """Total size in bytes of the files under ``path``."""
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


def tier_stats(counts: dict[str, dict[str, int]]) -> dict[str, dict[str, float]]:
    """``{tier: {mean, min, max}}`` over agents from ``{agent: {tier: count}}``; ``total`` sums the agent's own
    tiers (static, short_term, long_term)."""
    tiers = ["static", "short_term", "long_term"]
    out = {}
    for tier in tiers + ["total"]:
        vals = [sum(c.get(t, 0) for t in tiers) if tier == "total" else c.get(tier, 0) for c in counts.values()]
        out[tier] = {"mean": round(float(np.mean(vals)), 1), "min": int(min(vals)), "max": int(max(vals))}
    return out


def build(world: Path, db: Path, name: str, overrides: Sequence[str] = ()):
    """A fresh :class:`~simulacra.simulation.Simulation` of ``world`` with the default config (plus
    ``overrides``), an in-process rater on a free port, and a recording embedder (model loaded before the
    clock starts). Returns ``(sim, recorder, config, setup_seconds)``."""
    from simulacra.config import load_config
    from simulacra.embeddings import CachedEmbedder, build_embedder
    from simulacra.simulation import Simulation

    config = load_config(None, [f"rater.url=http://127.0.0.1:{free_port()}/rate", *overrides])
    e = config.embedding
    recorder = RecordingEmbedder(build_embedder(e, cached=False))  # the run's backend, as a run builds it
    recorder.inner.embed(["warm-up"])  # load the model outside the measured time
    embedder = CachedEmbedder(recorder, e.cache_size)
    t = time.perf_counter()
    sim = Simulation.create(world, config, personas_dir=world.parent.parent / "agent_personalities", db_dir=db,
                            run_name=name, overwrite=True, embedder=embedder)
    return sim, recorder, config, time.perf_counter() - t


def _timed(fn, into: list[float]):
    """``fn`` wrapped to append each call's seconds to ``into``."""
    def timed(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            into.append(time.perf_counter() - t)

    return timed


def timed_checkpoints(sim) -> tuple[list[float], list[float], list[float]]:
    """Wrap ``sim.checkpoint`` (on the instance; :meth:`Simulation.step` calls it through ``self``), the
    checkpoint file write it makes (:meth:`simulacra.checkpoint.CheckpointWriter.write`: a journal line, or the
    whole file serialised, fsynced and renamed) and the tick's frame of the store journal
    (:meth:`simulacra.memory.journal.StoreJournal.append`, in the persist stage; its fsync is in the checkpoint) so
    that each call's seconds are appended to the returned lists ``(whole checkpoint, file write, store journal)``;
    the rest of a checkpoint is the trace's and the store journal's fsync, the stores' id snapshots and the
    emptying of their trash. Call :func:`untime_checkpoints` afterwards."""
    from simulacra.checkpoint import CheckpointWriter
    from simulacra.memory.journal import StoreJournal

    spent: list[float] = []
    written: list[float] = []
    journaled: list[float] = []
    sim.checkpoint = _timed(sim.checkpoint, spent)
    CheckpointWriter._untimed_write = CheckpointWriter.write
    CheckpointWriter.write = _timed(CheckpointWriter.write, written)
    StoreJournal._untimed_append = StoreJournal.append
    StoreJournal.append = _timed(StoreJournal.append, journaled)
    return spent, written, journaled


def untime_checkpoints() -> None:
    """Undo :func:`timed_checkpoints`'s class-level wrappers."""
    from simulacra.checkpoint import CheckpointWriter
    from simulacra.memory.journal import StoreJournal

    CheckpointWriter.write = getattr(CheckpointWriter, "_untimed_write", CheckpointWriter.write)
    StoreJournal.append = getattr(StoreJournal, "_untimed_append", StoreJournal.append)


def embedding_throughput(texts: Sequence[str], config, sample: int, seed: int = 0,
                         model=None, repeats: int = 2) -> tuple[float, int]:
    """Texts per second of ``model`` (default: a fresh embedder with ``config.embedding``'s settings, loaded first,
    outside the timing) on a seeded sample of up to ``sample`` of ``texts``, in one call, the fastest of
    ``repeats`` timings (the floor is what the model can do: on this machine one timing of 1,000 texts moved by
    ±4 % from run to run, idle). Returns ``(throughput, n)``.

    A case passes the run's own embedder (the same model, warm, on its one inference thread): a second model in the
    process runs on its own thread with its own OpenMP pool, and two pools slow each other (measured: 116 texts/s
    with one model loaded, 95 with two, exact embedding), which would understate the floor's throughput."""
    from simulacra.embeddings import build_embedder

    chosen = sorted(texts)
    if len(chosen) > sample:
        chosen = random.Random(seed).sample(chosen, sample)
    if model is None:
        model = build_embedder(config.embedding, cached=False)
    model.embed(["warm-up"])
    best = math.inf
    for _ in range(repeats):
        t = time.perf_counter()
        model.embed(chosen)
        best = min(best, time.perf_counter() - t)
    return len(chosen) / best, len(chosen)


PERCEIVED = ("observation", "event")  # memory kinds an agent writes for what it perceives


class Growth:
    """Per-agent memory counts over a run, sampled every ``every_minutes`` game minutes (call it after each tick
    with the tick's :class:`~simulacra.simulation.TickResult`).

    ``rows``: one dict per sample: ``tick``, ``game_minute`` (after the tick), ``day`` (1-based, fractional),
    per tier (``static``, ``short_term``, ``long_term``, ``total``) the mean and max over agents, and
    ``perceived``: the mean over agents of the memories written so far for what they perceived (kinds
    :data:`PERCEIVED`). ``kept``: a :class:`bench.kept.Kept` of the memories written, looked up in the agents'
    long-term tiers at the end of each game day (:meth:`day_end`).
    """

    def __init__(self, sim, every_minutes: int = 60):
        self.sim = sim
        self.every = every_minutes
        self.perceived = {pid: 0 for pid in sim.rt.agents}
        self.rows: list[dict] = []
        self.kept = Kept(sim.world.start_minute)

    def __call__(self, result) -> None:
        for op in result.record["memory"]:
            if op["op"] == "add" and op.get("kind") in PERCEIVED and op["agent"] in self.perceived:
                self.perceived[op["agent"]] += 1
        self.kept.observe(result.record["memory"], result.record["time"])
        minute = result.record["time"] + self.sim.world.tick_minutes
        if (minute - self.sim.world.start_minute) % self.every == 0:
            self.sample(result.record["tick"], minute)
        if (minute - self.sim.world.start_minute) % DAY == 0:
            self.day_end(minute)

    def day_end(self, minute: float) -> None:
        """What the agents' long-term memories hold at game minute ``minute`` (:meth:`bench.kept.Kept.day_end`)."""
        self.kept.day_end(minute, {pid: self.sim.rt.memories[pid].long_term for pid in self.sim.rt.agents})

    def sample(self, tick: int, minute: int) -> None:
        counts = {pid: self.sim.rt.memories[pid].counts() for pid in self.sim.rt.agents}
        stats = tier_stats(counts)
        row = {"tick": tick, "game_minute": minute, "day": round(minute / DAY + 1, 4)}
        for tier, st in stats.items():
            row[tier] = {"mean": st["mean"], "max": st["max"]}
        row["perceived"] = round(float(np.mean(list(self.perceived.values()))), 1)
        self.rows.append(row)


class _OutOfTime(Exception):
    pass


def run_case(agents: int, minutes: int, sample: int, db: Path | None = None, world_path: Path = WORLD,
             budget_s: float | None = None, growth_every: int = 60, overrides: Sequence[str] = ()) -> dict:
    """Run one case in this process and return its figures (see the module docstring for each field).

    With ``budget_s`` the run stops after the first tick that ends past that many seconds of tick time
    (``complete`` false, ``ticks`` says how far it got). ``growth`` holds the :class:`Growth` rows (every
    ``growth_every`` game minutes, and the run's end). ``overrides``: ``section.field=value`` config changes.
    """
    with tempfile.TemporaryDirectory(prefix="simulacra-scale-") as tmp:
        tmp = Path(tmp)
        world = town(tmp, agents, world_path)
        db = Path(db) if db is not None else tmp / "database"
        sim, recorder, config, setup_s = build(world, db, f"scale-{agents}", overrides)
        ticks = minutes // sim.world.tick_minutes
        spent, written, journaled = timed_checkpoints(sim)
        growth = Growth(sim, growth_every)
        t = time.perf_counter()

        def on_tick(result) -> None:
            growth(result)
            if budget_s is not None and time.perf_counter() - t > budget_s:
                raise _OutOfTime

        try:
            try:
                summary = sim.run(ticks, on_tick)
            except _OutOfTime:  # the tick is complete and checkpointed (simulation.checkpoint_every: 1)
                summary = sim.summary()
            ticks_s = time.perf_counter() - t
            last = sim.state.tick - 1
            if last >= 0 and (not growth.rows or growth.rows[-1]["tick"] != last):
                growth.sample(last, sim.state.now)  # the end of the run, when not on a sample already
            if last >= 0 and (sim.state.now - sim.world.start_minute) % DAY:
                growth.day_end(sim.state.now)  # a run that stopped within a day: what it holds at its end
            counts = {pid: sim.rt.memories[pid].counts() for pid in sim.rt.agents}
            run_dir = sim.run_dir
        finally:
            untime_checkpoints()
            sim.close()
        trace = run_dir / "trace.jsonl"
        checkpoint = run_dir / "checkpoint.json"
        store = dir_bytes(run_dir) - trace.stat().st_size - checkpoint.stat().st_size
        unique = set(recorder.texts)
        throughput, measured = embedding_throughput(unique, config, sample, model=recorder.inner)
        floor = len(unique) / throughput
        wall = setup_s + ticks_s
        ck_per_tick = sum(spent) / max(summary["ticks"], 1)
        return {
            "agents": agents, "game_minutes": minutes, "ticks_planned": ticks, "ticks": summary["ticks"],
            "complete": summary["ticks"] == ticks, "stopped": summary["stopped"],
            "wall_s": round(wall, 2), "setup_s": round(setup_s, 2), "ticks_s": round(ticks_s, 2),
            "ticks_per_s": round(summary["ticks"] / ticks_s, 4),
            "memories_per_agent": tier_stats(counts),
            "shared_memories": summary["shared_memory"],
            "store_bytes": store, "trace_bytes": trace.stat().st_size, "checkpoint_bytes": checkpoint.stat().st_size,
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
            "texts_embedded": len(recorder.texts), "unique_texts": len(unique),
            "embed_in_run_s": round(recorder.seconds, 2),
            "throughput_texts_per_s": round(throughput, 2), "throughput_sample": measured,
            "embedding_exact": config.embedding.exact, "embedding_backend": recorder.inner.backend,
            "floor_s": round(floor, 2), "wall_over_floor": round(wall / floor, 3),
            "checkpoint_s_per_tick": round(ck_per_tick, 5),
            "checkpoint_share": round(sum(spent) / ticks_s, 5),
            "checkpoint_write_s_per_tick": round(sum(written) / max(summary["ticks"], 1), 5),
            "store_journal_s_per_tick": round(sum(journaled) / max(summary["ticks"], 1), 5),
            # what makes a tick durable: its checkpoint (with both fsyncs) and its frame of the store journal
            "durability_share": round((sum(spent) + sum(journaled)) / ticks_s, 5),
            "growth": growth.rows, "kept": growth.kept.result(),
        }


def run_sampling_load(cmd: Sequence[str], every_s: float = 30.0) -> tuple[str, str, int, list[float]]:
    """Run ``cmd`` (in :data:`ROOT`) to its end, sampling the machine's 1-minute load average at its start and
    every ``every_s`` seconds while it runs. Returns ``(stdout, stderr, exit code, loads)``."""
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    loads = [os.getloadavg()[0]]
    while True:
        try:
            stdout, stderr = proc.communicate(timeout=every_s)
            return stdout, stderr, proc.returncode, loads
        except subprocess.TimeoutExpired:
            loads.append(os.getloadavg()[0])


def run_resuming(cmd: Sequence[str], resume: Sequence[str], max_resumes: int = 2,
                 label: str = "bench") -> tuple[str, str, int, list[float], list[int]]:
    """:func:`run_sampling_load` of ``cmd``; when its process dies by a signal (a negative exit code: a crash in
    native code such as chromadb's SIGSEGV, note 48, or the OOM killer) it is run again with ``resume`` appended
    (the arguments that make it continue from its last checkpoint), at most ``max_resumes`` times, each said on
    stderr. Returns ``(stdout, stderr, exit code, loads, signals)`` of the last process, the loads of all of them
    and the signals the earlier ones died by (``[]``: it ran through). Its wall time is then not a whole run's:
    callers record ``signals`` beside their figures."""
    signals: list[int] = []
    loads: list[float] = []
    again: list[str] = []
    while True:
        stdout, stderr, code, sampled = run_sampling_load([*cmd, *again])
        loads += sampled
        if code >= 0 or len(signals) >= max_resumes:
            return stdout, stderr, code, loads, signals
        signals.append(-code)
        again = list(resume)
        print(f"{label}: the process died by signal {-code}; resuming it from its last checkpoint ({len(signals)} "
              f"of at most {max_resumes})", file=sys.stderr, flush=True)


def load_summary(loads: Sequence[float]) -> dict[str, float | int]:
    """``{"min", "mean", "max", "samples"}`` of 1-minute load averages (rounded to 0.01)."""
    return {"min": round(min(loads), 2), "mean": round(float(np.mean(loads)), 2), "max": round(max(loads), 2),
            "samples": len(loads)}


def parse_case(name: str) -> tuple[int, int]:
    """``(agents, game minutes)`` of a case name: one of :data:`CASES` / :data:`QUICK`, or ``<agents>x<hours>h``."""
    if name in CASES or name in QUICK:
        return {**CASES, **QUICK}[name]
    agents, _, hours = name.partition("x")
    return int(agents), int(round(float(hours.rstrip("h")) * 60))


def case_names(spec: str) -> list[str]:
    names = [c.strip() for c in spec.split(",") if c.strip()]
    for c in names:
        if c not in CASES and c not in QUICK:
            raise SystemExit(f"bench.scale: unknown case '{c}'; expected one of {', '.join([*CASES, *QUICK])}")
    return names


def table(cases: dict[str, dict]) -> str:
    rows = [("case", "ticks", "wall s", "ticks/s", "mem/agent st|lt|tot", "store MB", "trace MB", "RSS MB",
             "uniq texts", "floor s", "wall/floor", "ckpt ms/tick", "ckpt %", "ckpt+jrnl %", "load")]
    for name, r in cases.items():
        m = r["memories_per_agent"]
        rows.append((name, f"{r['ticks']}/{r['ticks_planned']}", f"{r['wall_s']:.0f}", f"{r['ticks_per_s']:.3f}",
                     f"{m['short_term']['mean']:.0f}|{m['long_term']['mean']:.0f}|{m['total']['mean']:.0f}",
                     f"{r['store_bytes'] / 2**20:.1f}", f"{r['trace_bytes'] / 2**20:.1f}", f"{r['peak_rss_mb']:.0f}",
                     str(r["unique_texts"]), f"{r['floor_s']:.0f}", f"{r['wall_over_floor']:.2f}",
                     f"{1000 * r['checkpoint_s_per_tick']:.1f}", f"{100 * r['checkpoint_share']:.2f}",
                     f"{100 * r['durability_share']:.2f}",
                     f"{r['load_avg_1min']['mean']:.1f}" if "load_avg_1min" in r else "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.rjust(w) for c, w in zip(r, widths)) for r in rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="only the 25x4h case (25 agents, 4 game hours)")
    p.add_argument("--cases", default=None, help=f"comma-separated cases [{','.join(CASES)}]")
    p.add_argument("--agents", type=int, default=None, help="with --quick: agents of the quick case [25]")
    p.add_argument("--hours", type=float, default=None, help="with --quick: game hours of the quick case [4]")
    p.add_argument("--sample", type=int, default=1000, help="texts embedded again to measure throughput [%(default)s]")
    p.add_argument("--out", default=str(RESULTS), help="JSON results file [%(default)s]")
    p.add_argument("--budget-minutes", type=float, default=None,
                   help="stop each case after this many wall minutes of ticks (reported as incomplete)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                   help="config change for every case, e.g. embedding.exact=false (batched embedding)")
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # child process: run this case, JSON to stdout
    args = p.parse_args(argv)
    if args.one:
        agents, minutes = parse_case(args.one)
        budget = None if args.budget_minutes is None else 60 * args.budget_minutes
        print(json.dumps(run_case(agents, minutes, args.sample, budget_s=budget, overrides=args.overrides)))
        return 0
    if args.quick and (args.agents or args.hours):
        names = [f"{args.agents or 25}x{args.hours or 4:g}h"]
    else:
        names = case_names(args.cases) if args.cases else (list(QUICK) if args.quick else list(CASES))
    out = Path(args.out)
    results = {"cases": {}, "overrides": args.overrides,
               "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                           "load_avg_at_start": list(os.getloadavg())}}
    for name in names:
        print(f"bench.scale: running {name} ...", file=sys.stderr, flush=True)
        budget = [] if args.budget_minutes is None else ["--budget-minutes", str(args.budget_minutes)]
        settings = [*CASE_SETTINGS.get(name, ()), *args.overrides]
        cmd = [sys.executable, "-m", "bench.scale", "--one", name, "--sample", str(args.sample), *budget,
               *(f"--set={o}" for o in settings)]
        stdout, stderr, code, loads = run_sampling_load(cmd)
        if code != 0:
            sys.stderr.write(stderr[-4000:])
            raise SystemExit(f"bench.scale: case {name} failed (exit {code})")
        results["cases"][name] = {**json.loads(stdout.strip().splitlines()[-1]), "settings": settings,
                                  "load_avg_1min": load_summary(loads)}
        results["machine"]["load_avg_at_end"] = list(os.getloadavg())
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")  # after each case
    print(table(results["cases"]))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
