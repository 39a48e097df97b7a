"""The Python API (simulacra.town): Town and open_run, the same run as the CLI, interview, interrupts, packaged
towns, and no side effects on the user's process."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import simulacra
from simulacra import assets
from simulacra.errors import ConfigError, SimulacraError, WorldError
from simulacra.town import Town, make_config, open_run

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
TINY = dict(personas_dir=DATA / "personas")


def _python(code: str, cwd: Path | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=600)


def _ticks(run_dir: Path) -> list[str]:
    return (run_dir / "trace.jsonl").read_text(encoding="utf-8").splitlines()[1:]


def _comparable(summary: dict) -> dict:
    """A summary without where the run is and how long it waited (seconds differ from run to run)."""
    out = {k: v for k, v in summary.items() if k not in ("run_dir", "trace")}
    out["rater"] = {k: v for k, v in (summary.get("rater") or {}).items() if not k.endswith("_s")}
    return out


def test_the_api_and_the_cli_make_the_same_run(tmp_path, rater_url):
    cli = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--world", str(DATA / "tiny.yaml"),
                          "--personas-dir", str(DATA / "personas"), "--ticks", "5", "--seed", "3", "--db-dir",
                          str(tmp_path), "--run-name", "cli", "--rater-url", rater_url, "--quiet"],
                         capture_output=True, text=True, timeout=600)
    assert cli.returncode == 0, cli.stderr
    assert cli.stderr.startswith("simulacra: mind: scripted (offline, no language model)\n")
    with Town.create(DATA / "tiny.yaml", seed=3, rater={"url": rater_url}, db_dir=tmp_path, run_name="api",
                     **TINY) as town:
        summary = town.run(ticks=5, progress=False)
        assert town.ticks_done == 5 and town.clock == summary["game_time"]
    assert _ticks(tmp_path / "api") == _ticks(tmp_path / "cli")
    written = json.loads((tmp_path / "api" / "summary.json").read_text(encoding="utf-8"))
    assert written == json.loads(json.dumps(summary))  # the API writes the summary, as the CLI does
    assert _comparable(written) == _comparable(json.loads((tmp_path / "cli" / "summary.json").read_text()))


def test_run_lengths_steps_and_a_second_run_go_on_from_the_first(tmp_path, rater_url):
    with Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=tmp_path, run_name="len", **TINY) as town:
        w = town.world
        assert town.ticks_for(hours=1) == 60 // w.tick_minutes
        assert town.ticks_for(days=1) == w.run_minutes(1) // w.tick_minutes
        assert town.ticks_for() == w.run_minutes(1) // w.tick_minutes
        with pytest.raises(SimulacraError, match="one of hours, days and ticks"):
            town.ticks_for(hours=1, ticks=2)
        with pytest.raises(SimulacraError, match="days must be a whole number >= 1"):
            town.ticks_for(days=0)
        record = town.step().record
        assert record["tick"] == 0 and town.ticks_done == 1
        town.run(ticks=2, progress=False)
        assert town.ticks_done == 3
        assert town.ticks_for(ticks=5, from_start=True) == 2  # a resumed CLI run counts from the start
        assert [json.loads(t)["tick"] for t in _ticks(town.run_dir)] == [0, 1, 2]
        assert town.agents == {"ann": "Ann Archer", **{a: n for a, n in town.agents.items() if a != "ann"}}
        assert list(town.agents) == ["ann", "ben", "cal"]


def test_interview_a_live_town_as_the_cli_interviews_its_run(tmp_path, rater_url):
    question = "What happened at the well?"
    with Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=tmp_path, run_name="iv",
                     simulation={"conversation_probability": 1.0}, **TINY) as town:
        town.run(ticks=6, progress=False)
        agent = next(iter(town.agents))
        live = town.interview(agent, question)
        with pytest.raises(SimulacraError, match="no agent 'nobody'"):
            town.interview("nobody", question)
        with pytest.raises(SimulacraError, match="the question is empty"):
            town.interview(agent, "  ")
        # "you" is the resident: retrieved with its name (memory.third_person_queries), the question kept as asked
        told = town.interview(agent, "Who told you about the well?")
        assert told["question"] == "Who told you about the well?"
        assert told["query"] == f"Who told {town.agents[agent]} about the well?"
        from simulacra.interview import format_interview

        assert f'words matched as "Who told {town.agents[agent]} about the well?"' in format_interview(told)
        assert live["query"] == question and "words matched as" not in format_interview(live)
        # the town began at 08:00: 07:30 is before the run, in a live town as in its run read back
        early = town.interview(agent, "What were you doing at 7:30?")
    from simulacra.memory.timecue import TimeCue

    assert TimeCue.from_list(early["named_time"]).before_run and early["answer"].startswith("I have no memories")
    offline = open_run(town.run_dir).interview(agent, question)
    assert live["retrieved"], "the agent recalls nothing: the test asks nothing"
    for key in ("answer", "retrieved", "used", "time", "clock", "profile", "query"):
        assert live[key] == offline[key], key
    assert early["answer"] == open_run(town.run_dir).interview(agent, "What were you doing at 7:30?")["answer"]


def test_a_closed_town_says_how_to_take_it_up(tmp_path, rater_url):
    town = Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=tmp_path, run_name="c", **TINY)
    town.run(ticks=1, progress=False)
    town.close()
    town.close()  # twice is fine
    assert town.closed
    with pytest.raises(SimulacraError, match=r"closed; take it up again with Town.resume"):
        town.run(ticks=1)
    with Town.resume(town.run_dir, rater_url=rater_url) as again:
        assert again.ticks_done == 1
        again.run(ticks=1, progress=False)
    assert len(_ticks(town.run_dir)) == 2


def test_one_town_at_a_time_writes_a_run_folder(tmp_path, rater_url):
    """A second town on an open town's run folder (a notebook cell run again, a `simulacra run` beside it) is
    refused before it touches the folder: otherwise the two interleave ticks, or an overwrite deletes the folder
    under the first. Closed, the folder is free again."""
    from simulacra.errors import RunFolderError, RunInUseError

    def create(**kw):
        return Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=tmp_path,
                           **{"run_name": "one", **TINY, **kw})

    town = create()
    town.run(ticks=2, progress=False)
    before = _ticks(town.run_dir)
    with pytest.raises(RunInUseError, match="open in another town of this process: close that one first"):
        Town.resume(town.run_dir, rater_url=rater_url)
    with pytest.raises(RunInUseError, match="open in another town of this process"):
        create(overwrite=True)
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "run", "--resume", str(town.run_dir), "--ticks", "4",
                        "--rater-url", rater_url, "--quiet"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert r.returncode == 2 and "being written by another process" in r.stderr, r.stderr
    assert _ticks(town.run_dir) == before  # nobody else wrote
    town.run(ticks=1, progress=False)  # the first town goes on as if alone
    assert _ticks(town.run_dir)[:2] == before and len(_ticks(town.run_dir)) == 3
    town.config.memory.a_rec = 0.0  # the trace header says 0.25: refused, not recorded as if scored with it
    with pytest.raises(SimulacraError, match=r"town.config was changed after the town was made \(memory.a_rec "
                                             r"0.25 -> 0.0\)"):
        town.run(ticks=1, progress=False)
    with pytest.raises(SimulacraError, match="memory.a_rec"):
        town.step()
    town.config.memory.a_rec = 0.25  # put back: it goes on
    town.step()
    assert len(_ticks(town.run_dir)) == 4
    town.close()
    with create(overwrite=True) as again:  # free once closed
        again.run(ticks=1, progress=False)
    assert len(_ticks(town.run_dir)) == 1
    with pytest.raises(RunFolderError, match="run name ''"):
        create(run_name="")


def test_an_interrupt_in_the_middle_of_a_tick_brings_the_town_back_to_its_checkpoint(tmp_path, monkeypatch,
                                                                                      rater_url):
    """A notebook cell interrupted while a tick is half done: the town goes back to its last checkpoint, and
    running on writes the same trace and memories as a run never interrupted (nothing lost, nothing twice)."""
    import simulacra.simulation as simulation

    settings = dict(rater={"url": rater_url}, simulation={"conversation_probability": 1.0}, db_dir=tmp_path, **TINY)
    with Town.create(DATA / "tiny.yaml", run_name="whole", **settings) as town:
        town.run(ticks=6, progress=False)
        whole = town.summary()
    real = simulation.converse_stage
    calls = {"n": 0}

    def interrupted(*args, **kwargs):  # the tick has perceived and remembered when it is cut
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(simulation, "converse_stage", interrupted)
    with Town.create(DATA / "tiny.yaml", run_name="cut", **settings) as town:
        with pytest.raises(KeyboardInterrupt):
            town.run(ticks=6, progress=False)
        assert town.ticks_done == 3 and not town.closed
        summary = town.run(ticks=3, progress=False)
    assert _ticks(tmp_path / "cut") == _ticks(tmp_path / "whole")
    assert _comparable(summary)["agents"] == _comparable(whole)["agents"]


def test_make_config_takes_sections_files_presets_and_shortcuts(tmp_path):
    cfg = make_config(None, seed=4, memory={"a_rec": 0.1}, simulation={"conversation_probability": 0.5})
    assert (cfg.simulation.seed, cfg.memory.a_rec, cfg.simulation.conversation_probability) == (4, 0.1, 0.5)
    assert make_config("seed003").memory.threshold == 0.35
    assert make_config(llm="local").llm.provider == "local"
    assert make_config(llm="gpt-4o-mini").llm.model == "gpt-4o-mini"
    assert make_config(cfg, overrides=["memory.a_imp=0.3"]).memory.a_imp == 0.3
    path = tmp_path / "c.yaml"
    path.write_text("memory:\n  top_k: 7\n")
    assert make_config(path, memory={"a_rel": 0.5}).memory.top_k == 7
    with pytest.raises(ConfigError, match="memory.nonsense"):
        make_config(memory={"nonsense": 1})
    with pytest.raises(ConfigError, match="expected a mapping of fields"):
        make_config(memory=0.3)


def test_packaged_towns_are_found_by_name_and_by_their_checkout_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no worlds/ folder here
    assert assets.available("world") == ["fernhollow", "gullhaven"]
    assert "fernhollow-party" in assets.available("scenario") and "seed003" in assets.available("preset")
    for given in ("fernhollow", "fernhollow.yaml", "worlds/fernhollow.yaml"):
        assert assets.find(given, "world") == assets.folder("world") / "fernhollow.yaml"
    from simulacra.evaluation.scenario import load_scenario
    from simulacra.world import load_world

    assert load_world("gullhaven").name == "Gullhaven"
    assert load_scenario("fernhollow-party").world_path.endswith("fernhollow.yaml")
    mine = tmp_path / "fernhollow.yaml"  # a user's own file of the same name wins
    mine.write_text((DATA / "tiny.yaml").read_text())
    assert assets.find("fernhollow.yaml", "world") == Path("fernhollow.yaml")
    with pytest.raises(WorldError, match="no such file .the packaged worlds are fernhollow, gullhaven"):
        load_world("elsewhere")


def test_version_is_one_string(tmp_path):
    from importlib.metadata import version

    assert version("simulacra") == simulacra.__version__
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "--version"], capture_output=True, text=True)
    assert r.stdout.strip() == f"simulacra {simulacra.__version__}"
    assert (ROOT / "simulacra" / "py.typed").is_file()
    assert f"## {simulacra.__version__}" in (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")


def test_openai_model_in_the_environment_no_longer_chooses_the_mind(monkeypatch):
    from simulacra.runtime import describe_mind, uses_language_model

    monkeypatch.setenv("OPENAI_MODEL", "gpt-4o")
    cfg = make_config()
    assert not uses_language_model(cfg)
    lines = describe_mind(cfg, 10)
    assert lines[0] == "mind: scripted (offline, no language model)"
    assert "OPENAI_MODEL=gpt-4o is set but not used" in lines[1]
    priced = make_config(llm={"model": "gpt-4o-mini", "prompt_price_per_1k": 0.002})
    assert describe_mind(priced, 10)[0] == "mind: language model gpt-4o-mini at https://api.openai.com/v1"
    # 10 agents x 542 tokens per agent-game-hour (bench.cognition) at $0.002 / 1k
    assert "about $0.0108 per game hour" in describe_mind(priced, 10)[1]
    capped = make_config(llm={"model": "gpt-4o-mini", "prompt_price_per_1k": 0.002, "max_calls": 100})
    assert len(describe_mind(capped, 10)) == 1
    unpriced = make_config(llm={"model": "gpt-4o-mini"})
    assert "cannot be estimated" in describe_mind(unpriced, 10)[1]
    local = make_config(llm={"model": "m", "base_url": "http://127.0.0.1:8000/v1"})
    assert describe_mind(local, 10) == ["mind: language model m at http://127.0.0.1:8000/v1"]


def test_importing_and_loading_the_model_leave_the_process_alone(tmp_path):
    """Importing simulacra, loading its embedding model, scoring and running a tick change no environment variable
    (but two that the libraries under sentence-transformers set themselves), no logging setting and no thread pool
    of the user's process."""
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE",
                                                            "TOKENIZERS_PARALLELISM", "HF_HUB_DISABLE_PROGRESS_BARS")}
    code = f"""
        import json, logging, os, sys
        import numpy, torch, transformers  # the user's own imports; torch sets a few KMP_ variables of its own
        from threadpoolctl import threadpool_info
        env = dict(os.environ)
        pools = dict((i["filepath"], i["num_threads"]) for i in threadpool_info())
        verbosity = transformers.logging.get_verbosity()
        import simulacra
        assert not [m for m in ("chromadb", "sentence_transformers") if m in sys.modules], "import is not light"
        from simulacra import Town
        with Town.create({str(DATA / 'tiny.yaml')!r}, personas_dir={str(DATA / 'personas')!r},
                         db_dir={str(tmp_path)!r}) as town:
            town.run(ticks=2, progress=False)
            town.interview(next(iter(town.agents)), "What is at the well?")
        print(json.dumps({{
            "env": sorted(k for k in set(env) | set(os.environ) if env.get(k) != os.environ.get(k)),
            "pools": [(i["filepath"], i["num_threads"]) for i in threadpool_info()
                      if pools.get(i["filepath"], i["num_threads"]) != i["num_threads"]],
            "verbosity": transformers.logging.get_verbosity() == verbosity,
            "root_handlers": len(logging.getLogger().handlers),
        }}))
    """
    r = _python(code, cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    # set by the libraries under sentence-transformers themselves, not by simulacra: scikit-learn on import
    # (KMP_INIT_AT_FORK), torch's compiler cache when transformers loads a model (TORCHINDUCTOR_CACHE_DIR)
    theirs = {"KMP_INIT_AT_FORK", "TORCHINDUCTOR_CACHE_DIR"}
    assert {**out, "env": sorted(set(out["env"]) - theirs)} == {"env": [], "pools": [], "verbosity": True,
                                                               "root_handlers": 0}


def test_scoring_threads_limit_blas_inside_the_block_only():
    import numpy  # noqa: F401 - loads OpenBLAS
    from threadpoolctl import threadpool_info

    from simulacra.threads import scoring_threads

    def blas() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["internal_api"] == "openblas"]

    before = blas()
    if not before or max(before) == 1:
        pytest.skip("OpenBLAS runs one thread here already: nothing to limit")
    with scoring_threads():
        assert set(blas()) == {1}
        with scoring_threads():  # nested (a retrieval inside a tick)
            assert set(blas()) == {1}
        assert set(blas()) == {1}
    assert blas() == before


def test_a_built_wheel_runs_its_default_town_from_any_folder(tmp_path):
    """The wheel carries the worlds, personas, scenarios and presets: installed apart from the checkout, its
    default town runs from an empty folder."""
    wheels = tmp_path / "wheels"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(wheels), str(ROOT)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheel = next(wheels.glob("simulacra-*.whl"))
    assert wheel.name.startswith(f"simulacra-{simulacra.__version__}-")
    target = tmp_path / "site"
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    empty = tmp_path / "empty"
    empty.mkdir()
    code = f"""
        import simulacra
        from simulacra import Town, assets
        assert simulacra.__file__.startswith({str(target)!r}), simulacra.__file__
        print(assets.available("world"), assets.available("scenario")[:1], assets.available("preset"))
        with Town.create(agents=["ezra_pike", "ruth_calloway"]) as town:
            summary = town.run(ticks=1, progress=False)
        print(summary["ticks"], sorted(summary["agents"]), town.run_dir)
    """
    env = {**os.environ, "PYTHONPATH": str(target)}
    r = _python(code, cwd=empty, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    lines = r.stdout.strip().splitlines()
    assert lines[0] == "['fernhollow', 'gullhaven'] ['fernhollow-election'] ['seed003', 'tell-all']"
    assert lines[1] == "1 ['ezra_pike', 'ruth_calloway'] database/fernhollow-seed0"
    assert (empty / "database" / "fernhollow-seed0" / "summary.json").is_file()


def test_wrong_arguments_to_the_api_are_named_before_anything_runs(tmp_path, rater_url):
    """What a notebook user gets wrong (a string for a list, 2.5 ticks, a number for a question, a closed town's
    frames, a folder that is not a run) is a SimulacraError naming the argument, not a TypeError from inside."""
    from simulacra.errors import CheckpointError

    def create(**kw):
        return Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=tmp_path, **{**TINY, **kw})

    for kw, words in ((dict(agents="ann"), "agents must be a list"), (dict(seed="abc"), "field 'seed'"),
                      (dict(seed=1.5), "field 'seed'"), (dict(seed=True), "field 'seed'"),
                      (dict(run_name=5), "run_name must be"), (dict(workers="2"), "workers must be"),
                      (dict(config=5), "field 'config'"), (dict(overrides="memory.a_rec=0"), "field 'overrides'")):
        with pytest.raises(SimulacraError, match=re.escape(words)):
            create(**kw)
    with pytest.raises(SimulacraError, match="world must be"):
        Town.create({}, db_dir=tmp_path)
    with pytest.raises(SimulacraError, match=r"db_dir: expected the folder that holds run folders .* got int 5"):
        Town.create(DATA / "tiny.yaml", rater={"url": rater_url}, db_dir=5, **TINY)  # a TypeError from pathlib
    assert not list(tmp_path.iterdir())  # no run folder was made
    town = create(run_name="a")
    with town:
        for kw, words in ((dict(ticks=2.5), "ticks must be a whole number"), (dict(days="1"), "days must be"),
                          (dict(hours="2"), "hours must be a finite number"), (dict(hours=True), "hours must be"),
                          (dict(hours=0), r"hours must be a finite number > 0 \(no tick at all: ticks=0\)"),
                          (dict(ticks=1, on_tick=5), "on_tick must be")):
            with pytest.raises(SimulacraError, match=words):
                town.run(progress=False, **kw)
        assert town.ticks_done == 0
        town.run(ticks=2, progress=False)
        for question, words in ((42, "must be text"), (b"well?", "must be text"), ("what \ud800?", "surrogate")):
            with pytest.raises(SimulacraError, match=words):
                town.interview("ann", question)
    assert sorted(town.frames().positions["tick"].unique()) == [0, 1]  # a closed town's run reads as any other's
    run = open_run(town.run_dir)
    with pytest.raises(SimulacraError, match="must be text"):
        run.interview("ann", 42)
    with pytest.raises(SimulacraError, match=r"tick 2.5: this run has ticks 0..1"):
        run.screenshot(tmp_path / "x.png", tick=2.5)
    with pytest.raises(SimulacraError, match="agent 'nobody'"):
        run.screenshot(tmp_path / "x.png", agent="nobody")
    with pytest.raises(SimulacraError, match="ending in .png"):
        run.screenshot(tmp_path / "x.txt")
    with pytest.raises(SimulacraError, match="gamma must be in"):
        run.rescore(gamma=0)
    (town.run_dir / "summary.json").write_text("{not json")
    with pytest.raises(SimulacraError, match="not a summary simulacra wrote"):
        _ = run.summary
    with pytest.raises(SimulacraError, match="open_run takes a run folder"):
        open_run(42)
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "n.txt").write_text("x")
    for folder, words in ((tmp_path / "nowhere", "no such run folder"), (tmp_path / "notes", "not a simulacra run")):
        with pytest.raises(CheckpointError, match=words):
            Town.resume(folder)
