"""Viewer benchmark (issue 25): frames per second of the replay viewer at 100 and 1,000 residents.

Each case replays a real run of a generated town (``simulacra generate-town --residents N --seed 0``, run with the
scripted backend for ``--hours`` game hours; the runs are kept under ``--db`` and reused, ``--fresh`` runs them
again) in a pygame window of 1280x800 on SDL's dummy video driver (software rendering, no screen), and measures:

- ``load_s``: reading the trace into :class:`~simulacra.viewer.state.ReplayState` (every tick's snapshot, the memory
  browser's index, who knows what); ``renderer_s``: building the :class:`~simulacra.viewer.render.Renderer`.
- ``fps`` per mode: ``frames`` frames drawn as the window loop draws them (player update, renderer draw,
  ``display.flip``) while playing at 4 ticks per second of game time with 1/30 s per frame (so agents walk between
  ticks), the fastest of ``--repeats`` runs. Modes: ``play`` (agent panel, bubbles), ``memory`` (the memory browser
  of the busiest agent), ``news`` (who knows the most known news: agents coloured, diffusion curve),
  ``relations`` (who talked with whom), ``zoomed`` (zoom x3 about the map's centre, panning 2 pixels a frame: the
  map's layer is redrawn every frame), ``expanded`` (every crowd drawn agent by agent).
- ``load_avg_1min`` before and after the case: the machine is shared and the figures follow its load.

Target: >= 30 fps at 1,000 residents (``play``). Writes ``bench/results/viewer.json`` and prints a table.

``--screenshots DIR --party RUN`` also renders the documentation's three screenshots headless: the memory browser
and the who-knows-what view of ``RUN`` (a ``fernhollow-party`` run), and the 1,000-resident town.

``--live RUN`` measures what following a live run costs the who-knows-what panel (:func:`live`), on any run's trace.

Usage: ``python -m bench.viewer [--residents 100,1000] [--hours 1] [--frames 300] [--repeats 3] [--db DIR]
[--fresh] [--out bench/results/viewer.json] [--screenshots docs --party RUN] [--live RUN ...]``
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("play", "memory", "news", "relations", "zoomed", "expanded")
SIZE = (1280, 800)


def _env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
            "TOKENIZERS_PARALLELISM": "false", "PYTHONPATH": str(ROOT)}


def town_run(residents: int, hours: float, db: Path, fresh: bool) -> Path:
    """A finished scripted run of a generated town of ``residents`` (seed 0), made once under ``db``."""
    run_dir = db / f"town{residents}-seed0"
    if (run_dir / "trace.jsonl").is_file() and not fresh:
        return run_dir
    world = db / f"town{residents}.yaml"
    db.mkdir(parents=True, exist_ok=True)
    if fresh or not world.is_file():
        subprocess.run([sys.executable, "-m", "simulacra.cli", "generate-town", "--residents", str(residents),
                        "--seed", "0", "--out", str(world), "--overwrite"], check=True, env=_env(), cwd=ROOT)
    if run_dir.exists():
        shutil.rmtree(run_dir)
    print(f"bench.viewer: running town{residents} for {hours} game hours (once; kept in {db}) ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "bench.viewer", "--make-run", str(world), "--hours", str(hours),
                    "--db", str(db), "--run-name", run_dir.name], check=True, env=_env(), cwd=ROOT)
    return run_dir


def make_run(world: Path, hours: float, db: Path, run_name: str) -> None:
    """Run ``world`` (scripted, offline) for ``hours`` game hours into ``db/run_name`` through the public API, in
    its own process (``--make-run``), so that the measuring process holds no store and no model."""
    from simulacra.town import Town

    with Town.create(world, db_dir=db, run_name=run_name, overwrite=True,
                     overrides=["embedding.exact=false"]) as town:
        town.run(hours=hours, progress=False)


def _view_for(mode: str, replay, renderer):
    from simulacra.viewer.layout import View

    view = View()
    if mode == "memory":
        view.panel = "memory"
    elif mode == "news":
        news = replay.news_list()
        if news:
            view.panel, view.news = "news", max(news, key=lambda n: len(replay.knowers_at(n.topic, replay.last_tick))
                                                ).topic
    elif mode == "relations":
        view.relations = True
    elif mode == "expanded":
        view.expanded = set(replay.places)
    return view


def measure(run_dir: Path, frames: int, repeats: int) -> dict:
    """Load ``run_dir``'s trace and draw ``frames`` frames per mode (the fastest of ``repeats``)."""
    os.environ["SDL_VIDEODRIVER"] = "dummy"  # this benchmark's own process: software rendering, no screen
    from simulacra.viewer.app import Player
    from simulacra.viewer.render import Overlay, Renderer, pygame
    from simulacra.viewer.state import ReplayState

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    replay = ReplayState.load(run_dir)
    load_s = time.perf_counter() - t0
    pygame.display.init()
    pygame.font.init()
    screen = pygame.display.set_mode(SIZE)
    t0 = time.perf_counter()
    renderer = Renderer(replay, SIZE)
    renderer_s = time.perf_counter() - t0
    busiest = max(replay.agents, key=lambda a: sum(replay.memory.counts(a, replay.last_tick).values()))
    out: dict = {"residents": len(replay.agents), "places": len(replay.places), "ticks": len(replay),
                 "trace_bytes": (run_dir / "trace.jsonl").stat().st_size, "load_s": round(load_s, 3),
                 "renderer_s": round(renderer_s, 3), "fps": {}, "frames": frames, "repeats": repeats}
    for mode in MODES:
        best = None
        for _ in range(repeats):
            renderer.camera.reset()
            view = _view_for(mode, replay, renderer)
            player = Player(replay, selected=busiest, view=view)
            player.speed_index = 4  # 4 ticks per second
            player.live = True  # keep playing at the last tick instead of pausing
            if mode == "zoomed":
                renderer.camera.zoom_at(renderer.map_rect.center, 3.0)
            pygame.event.pump()
            t0 = time.perf_counter()
            for i in range(frames):
                if player.index >= len(replay) - 1:
                    player.seek(replay.first_tick)
                player.update(1 / 30)
                if mode == "zoomed":
                    renderer.camera.move(2 if (i // 100) % 2 == 0 else -2, 0)
                state = replay.state_at(player.tick)
                nxt = replay.state_at(player.tick + 1) if player.frac > 0 else None
                renderer.draw(screen, state, player.selected, nxt, player.frac, Overlay(speed=player.speed),
                              player.view)
                pygame.display.flip()
            dt = time.perf_counter() - t0
            best = dt if best is None else min(best, dt)
        out["fps"][mode] = round(frames / best, 1)
    out["load_avg_1min"] = [round(load0, 2), round(os.getloadavg()[0], 2)]
    pygame.display.quit()
    return out


def live(run_dir: Path, limit: int | None = None) -> dict:
    """A live run's cost of the who-knows-what panel: the trace is read tick by tick as the viewer follows a run
    (:meth:`ReplayState.extend`), and after each tick the panel asks who still remembers the run's most known news
    (``remembering_at``, ``forgotten_at``, ``remembered``: what it draws). ``incremental``: as shipped (the topic's
    memories kept up to date as ticks come in); ``rescan``: the same with the topic's memories looked up again
    among all the run's memories each tick (the viewer before stop 44). Milliseconds per tick, mean and max over
    the ticks after the first ``limit`` (all when ``None``), with the memories the index held at the end."""
    from simulacra.trace import read_trace
    from simulacra.viewer.state import ReplayState

    header, ticks = read_trace(run_dir / "trace.jsonl")
    whole = ReplayState(header, ticks)
    news = whole.news_list()
    if not news:
        return {}
    topic = max(news, key=lambda n: len(whole.knowers_at(n.topic, whole.last_tick))).topic
    out: dict = {"topic": topic, "ticks": len(ticks)}
    for how in ("incremental", "rescan"):
        replay = ReplayState(header, ticks[:1])
        per_tick = []
        for rec in ticks[1:]:
            t0 = time.perf_counter()
            replay.extend([rec])
            if how == "rescan":
                replay.memory._members.pop(topic, None)  # what the viewer did before stop 44
            replay.remembering_at(topic, replay.last_tick)
            replay.forgotten_at(topic, replay.last_tick)
            replay.remembered(topic)
            per_tick.append(time.perf_counter() - t0)
        tail = per_tick[-limit:] if limit else per_tick
        out[how] = {"mean_ms": round(1000 * sum(tail) / len(tail), 2), "max_ms": round(1000 * max(tail), 2)}
        out["memories"] = sum(len(m) for m in replay.memory._by_agent.values())
    return out


def screenshots(out_dir: Path, party: Path, town: Path | None) -> list[Path]:
    """The documentation's screenshots: the memory browser and who-knows-what of a ``fernhollow-party`` run
    (Greta Lund at 15:00; the Harvest Lantern Festival notice), and a large generated town (``town``, its busiest
    tick) as ``viewer-town<residents>.png``."""
    os.environ["SDL_VIDEODRIVER"] = "dummy"
    from simulacra.viewer.app import save_screenshot
    from simulacra.viewer.layout import View
    from simulacra.viewer.state import ReplayState

    made = []
    replay = ReplayState.load(party)
    tick = replay.tick_of_clock("15:00")
    if tick is None:
        raise SystemExit(f"{party}: no tick at 15:00 (expected a fernhollow-party run)")
    agent = "greta_lund" if "greta_lund" in replay.agents else replay.agents[0]
    now = replay.state_at(tick).time
    tiers = {"short_term", "long_term", "shared"}
    rows = replay.memory.rows(agent, tick, now, tiers=tiers)
    picked = next((r for r in rows if r.kind == "reflection"), None) or max(rows, key=lambda r: r.retrieved)
    view = View(panel="memory", tiers=tiers, memory=picked.id)
    view.scroll["memory"] = max(0, rows.index(picked) - 2)  # the picked memory in sight
    made.append(save_screenshot(replay, tick, out_dir / "viewer-memory.png", agent, view=view))
    news = replay.news_list()
    festival = next((n.topic for n in news if "Festival" in n.topic), news[0].topic)
    made.append(save_screenshot(replay, tick, out_dir / "viewer-news.png", agent,
                                view=View(panel="news", news=festival)))
    if town is not None:
        big = ReplayState.load(town)
        t = big.busiest_tick()
        made.append(save_screenshot(big, t, out_dir / f"viewer-town{len(big.agents)}.png", big.agents[0],
                                    view=View(relations=False)))
    return made


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.viewer", description=__doc__.split("\n\n")[0])
    ap.add_argument("--residents", default="100,1000", help="town sizes [%(default)s]")
    ap.add_argument("--hours", type=float, default=1.0, help="game hours each town runs [%(default)s]")
    ap.add_argument("--frames", type=int, default=300, help="frames per mode [%(default)s]")
    ap.add_argument("--repeats", type=int, default=3, help="runs per mode, the fastest kept [%(default)s]")
    ap.add_argument("--db", default=str(ROOT / "database" / "bench-viewer"), help="where the runs are kept")
    ap.add_argument("--fresh", action="store_true", help="generate and run the towns again")
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "viewer.json"))
    ap.add_argument("--screenshots", default=None, metavar="DIR", help="also write the docs' screenshots here")
    ap.add_argument("--party", default=None, metavar="RUN", help="a fernhollow-party run, for --screenshots")
    ap.add_argument("--live", action="append", default=[], metavar="RUN",
                    help="measure a live run's who-knows-what panel on RUN's trace, tick by tick (repeatable; "
                         "with --residents '' only this); writes --live-out")
    ap.add_argument("--live-out", default=str(ROOT / "bench" / "results" / "viewer_live.json"))
    ap.add_argument("--make-run", default=None, metavar="WORLD", help=argparse.SUPPRESS)
    ap.add_argument("--run-name", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.make_run:  # the child process of town_run
        make_run(Path(args.make_run), args.hours, Path(args.db), args.run_name)
        return 0
    sizes = [int(x) for x in args.residents.split(",") if x]
    db = Path(args.db)
    cases = {}
    runs = {}
    for n in sizes:
        runs[n] = town_run(n, args.hours, db, args.fresh)
        cases[f"town{n}"] = measure(runs[n], args.frames, args.repeats)
        c = cases[f"town{n}"]
        print(f"town{n}: {c['residents']} residents, {c['places']} places, {c['ticks']} ticks, load {c['load_s']} s; "
              + ", ".join(f"{m} {v} fps" for m, v in c["fps"].items())
              + f"; load avg {c['load_avg_1min']}", file=sys.stderr)
    result = {"cases": cases, "size": list(SIZE), "video_driver": "dummy",
              "machine": {"platform": platform.platform(), "python": platform.python_version(),
                          "cpus": os.cpu_count()}}
    if cases:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
        print(f"bench.viewer: -> {args.out}", file=sys.stderr)
    if args.live:
        measured = {}
        for run in args.live:
            measured[Path(run).name] = r = live(Path(run), limit=None)
            print(f"live {Path(run).name}: {r.get('ticks')} ticks, {r.get('memories')} memories; per tick "
                  f"incremental {r.get('incremental')} ms, rescan {r.get('rescan')} ms", file=sys.stderr)
        Path(args.live_out).write_text(json.dumps({"runs": measured, "load_avg_1min": round(os.getloadavg()[0], 2),
                                                   "machine": result["machine"]}, indent=2) + "\n",
                                       encoding="utf-8")
        print(f"bench.viewer: -> {args.live_out}", file=sys.stderr)
    if args.screenshots:
        if not args.party:
            raise SystemExit("--screenshots needs --party RUN (a fernhollow-party run)")
        big = runs[max(runs)] if runs else None  # the largest town measured
        for p in screenshots(Path(args.screenshots), Path(args.party), big):
            print(f"bench.viewer: screenshot -> {p}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
