"""The trace's typed records (simulacra.trace) cannot drift: mypy checks the modules that write and read them (and
fails on a misspelt key), and every record of a real run has exactly the keys its TypedDict declares."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import types
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints, is_typeddict

import pytest

from simulacra import trace
from simulacra.config import load_config
from simulacra.simulation import Simulation
from simulacra.town import Town
from tests.conftest import DATA, ROOT


# --------------------------------------------------------------------------- mypy
def _mypy(*files: str | Path) -> subprocess.CompletedProcess:
    """mypy with the project's ``[tool.mypy]`` (pyproject.toml): its files, or ``files`` instead."""
    pytest.importorskip("mypy", reason="mypy comes with the dev extra")
    return subprocess.run([sys.executable, "-m", "mypy", *map(str, files)], capture_output=True, text=True, cwd=ROOT,
                          timeout=900)


def test_mypy_passes_on_the_records_and_their_writers_and_readers():
    r = _mypy()
    assert r.returncode == 0, r.stdout + r.stderr
    assert "simulacra/trace.py" in (ROOT / "pyproject.toml").read_text()  # the check covers the record types


@pytest.mark.parametrize("module, right, wrong, error", [
    # a reader misspelling a key of a line record
    ("simulacra/news.py", 'line["listener"]', 'line["listner"]', 'TypedDict "LineRecord" has no key "listner"'),
    # a writer building a tick record with a key of the wrong name (one unknown, one missing)
    ("simulacra/simulation.py", '"positions": dict(applied.positions)', '"position": dict(applied.positions)',
     'Extra key "position" for TypedDict "TickRecord"'),
    # a reader comparing an operation's key another kind has not (``from`` is a move's)
    ("simulacra/frames.py", 'row.update(tier=op["from"]', 'row.update(tier=op["to_tier"]',
     'TypedDict "MoveOp" has no key "to_tier"'),
])
def test_mypy_fails_on_a_wrong_key(tmp_path, module, right, wrong, error):
    """The check can fail: a copy of a converted module with one key wrong is an error of mypy's."""
    text = (ROOT / module).read_text(encoding="utf-8")
    assert text.count(right) == 1
    bad = tmp_path / f"wrong_{Path(module).stem}.py"
    bad.write_text(text.replace(right, wrong), encoding="utf-8")
    r = _mypy(bad)
    assert r.returncode == 1 and error in r.stdout, r.stdout + r.stderr
    assert re.search(r"\[typeddict-(item|unknown-key)\]", r.stdout)


# --------------------------------------------------------------------------- the bytes against the types
def _problems(value: Any, tp: Any, where: str) -> list[str]:
    """How ``value`` (parsed JSON) differs from type ``tp``: for a TypedDict a required key missing or a key it does
    not declare, then each value against its key's type; lists, dicts, unions, literals and scalars by value."""
    if tp is Any:
        return []
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a {tp.__name__}"]
        out = [f"{where}: {tp.__name__} without its key {k!r}" for k in sorted(tp.__required_keys__ - set(value))]
        out += [f"{where}: {tp.__name__} has no key {k!r}" for k in
                sorted(set(value) - tp.__required_keys__ - tp.__optional_keys__)]
        hints = get_type_hints(tp)
        for k, v in value.items():
            if k in hints:
                out += _problems(v, hints[k], f"{where}.{k}")
        return out
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        tagged = [a for a in args if is_typeddict(a) and "op" in a.__required_keys__]
        if tagged:  # MemoryOp: the member its "op" names
            member = next((a for a in tagged if isinstance(value, dict) and value.get("op") in
                           get_args(get_type_hints(a)["op"])), None)
            return [f"{where}: unknown op {value.get('op')!r}"] if member is None else _problems(value, member, where)
        tries = [_problems(value, a, where) for a in args]
        return [] if any(not t for t in tries) else min(tries, key=len)
    if origin is Literal:
        return [] if value in args else [f"{where}: {value!r} is not one of {args}"]
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: {type(value).__name__}, not a list"]
        return [p for i, v in enumerate(value) for p in _problems(v, args[0], f"{where}[{i}]")]
    if origin is dict:
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not a dict"]
        return [p for k, v in value.items() for p in _problems(v, args[1], f"{where}[{k!r}]")]
    if tp is type(None):
        return [] if value is None else [f"{where}: {value!r} is not null"]
    if tp is float:
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)  # a float may be written as an int
    elif tp is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, tp)
    return [] if ok else [f"{where}: {value!r} is not a {tp.__name__}"]


def test_the_checker_finds_missing_unknown_and_mistyped_keys():
    add = trace.add_op("ann", trace.SHORT_TERM, "m1", "Ann sees Ben.", "observation", 3, 480.0)
    assert _problems(add, trace.MemoryOp, "op") == []
    assert _problems({**add, "rating": "high"}, trace.MemoryOp, "op") == ["op.rating: 'high' is not a int"]
    wrong = {k: v for k, v in add.items() if k != "text"} | {"txt": "Ann sees Ben."}
    assert _problems(wrong, trace.MemoryOp, "op") == ["op: AddOp without its key 'text'", "op: AddOp has no key 'txt'"]
    assert _problems({**add, "op": "remember"}, trace.MemoryOp, "op") == ["op: unknown op 'remember'"]


@pytest.fixture(scope="module")
def run_trace(tmp_path_factory, rater_url, embedder) -> Path:
    """A short run of the tiny world (its accident public, on a shared tier) in which many kinds of record occur:
    conversations, notices, reflections, consolidation (moves, forgetting, reinforcement), rehearsal, and
    retrievals under minmax scaling and reciprocal-rank fusion (their optional keys)."""
    tmp = tmp_path_factory.mktemp("records")
    world = tmp / "tiny_shared.yaml"
    text = (DATA / "tiny.yaml").read_text().replace("shared_memory: false", "shared_memory: true")
    world.write_text(text.replace("importance_hint: major", "importance_hint: major\n    public: true"))
    config = load_config(None, [f"rater.url={rater_url}", "simulation.seed=2",
                                "simulation.conversation_probability=1.0", "simulation.news_min_rating=1",
                                "reflection.threshold=30",
                                "memory.consolidation_interval_minutes=10", "memory.consolidation_age_minutes=20",
                                "memory.short_term_min_entries=0", "memory.promote_threshold=0",
                                "memory.reinforce_repeats=true", "memory.normalize=minmax", "memory.fusion=rrf"])
    sim = Simulation.create(world, config, personas_dir=DATA / "personas", db_dir=tmp, run_name="records",
                            embedder=embedder)
    with Town(sim) as town:
        town.run(ticks=12, progress=False)  # the first reinforcement comes in the 11th or 12th tick (stop 42's rater)
    return tmp / "records" / "trace.jsonl"


def test_every_record_of_a_run_has_the_keys_of_its_type(run_trace):
    lines = [json.loads(line) for line in run_trace.read_text(encoding="utf-8").splitlines()]
    problems = _problems(lines[0], trace.Header, "header")
    for n, record in enumerate(lines[1:], start=2):
        problems += _problems(record, trace.TickRecord, f"line {n}")
    assert problems == []
    # the run made the records the check is about (else it would pass for want of them)
    ops = {op["op"] for t in lines[1:] for op in t["memory"]}
    assert ops == set(trace.OPS)  # every kind of memory operation
    assert any(t["conversations"] for t in lines[1:]) and any(t["decisions"] for t in lines[1:])
    retrieve = next(op for t in lines[1:] for op in t["memory"] if op["op"] == trace.RETRIEVE)
    assert {"fusion", "rrf_k", "normalize", "ranges"} <= set(retrieve)


def test_the_reader_gives_the_records_as_written(run_trace):
    header, ticks = trace.read_trace(run_trace)
    lines = run_trace.read_text(encoding="utf-8").splitlines()
    assert header["type"] == trace.HEADER and header["schema_version"] == trace.SCHEMA_VERSION == 2
    assert [trace.dumps(t) for t in ticks] == lines[1:]  # what is read writes back to the same bytes
    assert all(t["type"] == trace.TICK for t in ticks)
