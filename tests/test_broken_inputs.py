"""A corpus of broken input files (tests/data/broken/): each gets a one-line error naming the file, the field or
line, and what was expected, from the loaders, from ``simulacra check`` and from ``python run_sim.py``.

Persona cases are checked as a fourth resident of the tiny test world (``residents: [ann, ben, cal, <stem>]``),
so cross-references (places, objects, relationships) are checked too; world cases use the test personas;
config cases are passed to ``run_sim.py --config``.
"""

from __future__ import annotations

import codecs
import contextlib
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from simulacra.cli import main, run_sim_main
from simulacra.config import load_config
from simulacra.errors import ConfigError, InputError, PersonaError, WorldError, read_yaml
from simulacra.persona import load_persona
from simulacra.world import load_world
from tests.conftest import DATA, ROOT

BROKEN = DATA / "broken"

# (file under tests/data/broken, error class, field (None: the whole file), phrases the message must hold)
CASES = [
    # ---- persona JSON: encodings and syntax
    ("personas/latin1.json", PersonaError, None,
     ["not UTF-8 text", "byte 0xe9 at line 6 column 39", "save the file as UTF-8"]),
    ("personas/utf16.json", PersonaError, None, ["UTF-16", "byte-order mark", "save it as UTF-8"]),
    ("personas/binary.json", PersonaError, None, ["not a text file", "NUL byte at line 3 column 1", "expected UTF-8"]),
    ("personas/empty.json", PersonaError, None, ["the file is empty", "expected a JSON object"]),
    ("personas/whitespace_only.json", PersonaError, None, ["the file is empty"]),
    ("personas/trailing_comma.json", PersonaError, None, ["not valid JSON", "line 14 column 1"]),
    ("personas/unclosed.json", PersonaError, None, ["not valid JSON", "Expecting ',' delimiter at line 14"]),
    ("personas/age_nan.json", PersonaError, None, ["not valid JSON", "NaN is not a number"]),
    ("personas/top_level_list.json", PersonaError, None, ["expected a JSON object, got list"]),
    # ---- persona JSON: duplicate keys, missing, misspelt and wrong fields
    ("personas/duplicate_key.json", PersonaError, "age", ["key 'age' given twice", "expected each key once"]),
    ("personas/duplicate_routine_key.json", PersonaError, "routine.1.place", ["key 'place' given twice"]),
    ("personas/misspelt_field.json", PersonaError, "ocupation",
     ["unknown field 'ocupation'", "did you mean 'occupation'?"]),
    ("personas/misspelt_routine_field.json", PersonaError, "routine.0.plase",
     ["did you mean 'place'?", "fields: start, activity, place, object_state"]),
    ("personas/missing_field.json", PersonaError, "background", ["required field is missing"]),
    ("personas/id_field.json", PersonaError, "id", ["the id is the file name"]),
    ("personas/age_as_text.json", PersonaError, "age", ["valid integer", "got 'thirty-three'"]),
    ("personas/negative_age.json", PersonaError, "age", ["greater than or equal to 0", "got -3"]),
    ("personas/age_boolean.json", PersonaError, "age", ["valid integer", "got True"]),
    ("personas/traits_not_a_list.json", PersonaError, "traits", ["valid list", "got 'patient, shy'"]),
    ("personas/traits_empty.json", PersonaError, "traits", ["at least 1 item"]),
    ("personas/blank_name.json", PersonaError, "name", ["at least 1 character"]),
    ("personas/routine_empty.json", PersonaError, "routine", ["at least 1 item"]),
    # ---- persona JSON: impossible times
    ("personas/time_25.json", PersonaError, "routine.1.start", ["'25:00' is out of range 00:00..23:59"]),
    ("personas/time_no_colon.json", PersonaError, "routine.1.start", ["expected a time as 'HH:MM'", "'8.40'"]),
    ("personas/routine_unsorted.json", PersonaError, "routine", ["entry 2 starts at 08:20, not after entry 1 (08:40)"]),
    # ---- persona JSON: unknown references (checked against the world)
    ("personas/unknown_routine_place.json", WorldError, "routine.0.place",
     ["unknown place 'wel'", "did you mean 'well'?"]),
    ("personas/unknown_home.json", WorldError, "home", ["unknown place 'cottage_b'", "did you mean 'cottage_a'?"]),
    ("personas/unknown_relationship.json", WorldError, "relationships.anne",
     ["unknown resident 'anne'", "did you mean 'ann'?"]),
    ("personas/object_elsewhere.json", WorldError, "routine.0.object_state.till",
     ["object 'till' is at 'shop', not at 'well'"]),
    # ---- world YAML: encodings and syntax
    ("worlds/latin1.yaml", WorldError, None, ["not UTF-8 text", "byte 0xe9 at line 14 column 30"]),
    ("worlds/utf16.yaml", WorldError, None, ["UTF-16", "save it as UTF-8"]),
    ("worlds/binary.yaml", WorldError, None, ["not a text file", "NUL byte at line 1 column 8"]),
    ("worlds/empty.yaml", WorldError, None, ["the file is empty", "expected a mapping"]),
    ("worlds/comments_only.yaml", WorldError, None, ["the file is empty"]),
    ("worlds/tab_indent.yaml", WorldError, None, ["not valid YAML at line 13 column 1", "not tabs"]),
    ("worlds/unclosed_bracket.yaml", WorldError, None,
     ["not valid YAML at line 34 column 5", "flow sequence at line 33"]),
    ("worlds/bad_indent.yaml", WorldError, None, ["not valid YAML at line 20 column 5"]),
    ("worlds/top_level_list.yaml", WorldError, None, ["expected a mapping", "got list"]),
    ("worlds/python_tag.yaml", WorldError, None,
     ["not valid YAML at line 1 column 7", "could not determine a constructor"]),
    # ---- world YAML: duplicate keys and ids
    ("worlds/duplicate_place.yaml", WorldError, "places.well", ["key 'well' given twice", "lines 16 and 21"]),
    ("worlds/duplicate_object_field.yaml", WorldError, "objects.1.state",
     ["key 'state' given twice", "lines 43 and 44"]),
    ("worlds/duplicate_object.yaml", WorldError, "objects.1.id", ["duplicate object id 'bucket'", "also objects.0"]),
    ("worlds/duplicate_resident.yaml", WorldError, "residents.3", ["'ben' is listed twice", "also residents.1"]),
    ("worlds/path_twice.yaml", WorldError, "paths.3", ["already paths.2"]),
    # ---- world YAML: missing, misspelt and wrong fields
    ("worlds/misspelt_field.yaml", WorldError, "residnets", ["unknown field 'residnets'", "did you mean 'residents'?"]),
    ("worlds/misspelt_place_field.yaml", WorldError, "places.well.descripton", ["did you mean 'description'?"]),
    ("worlds/missing_places.yaml", WorldError, "places", ["required field is missing"]),
    ("worlds/bad_place_kind.yaml", WorldError, "places.shop.kind",
     ["'home', 'shop', 'public', 'work' or 'nature'", "got 'bakery'"]),
    ("worlds/position_one_number.yaml", WorldError, "places.well.position.1", ["too few items"]),
    ("worlds/position_nan.yaml", WorldError, "places.well.position.0", ["finite number", "got nan"]),
    ("worlds/tick_zero.yaml", WorldError, "tick_minutes", ["greater than or equal to 1", "got 0"]),
    ("worlds/tick_not_a_number.yaml", WorldError, "tick_minutes", ["valid integer", "got 'ten'"]),
    ("worlds/path_three_ends.yaml", WorldError, "paths.2", ["at most 2 items"]),
    ("worlds/no_residents.yaml", WorldError, "residents", ["at least 1 item"]),
    ("worlds/resident_path.yaml", WorldError, "residents.1", ["'../personas/ben' is not a resident id"]),
    # ---- world YAML: impossible times and durations
    ("worlds/start_25.yaml", WorldError, "start_time", ["'25:00' is out of range 00:00..23:59"]),
    ("worlds/end_minute_60.yaml", WorldError, "end_time", ["'10:60' is out of range"]),
    ("worlds/event_time_text.yaml", WorldError, "events.0.time", ["expected a time as 'HH:MM'", "'eight'"]),
    ("worlds/event_negative_duration.yaml", WorldError, "events.0.duration_minutes",
     ["greater than or equal to 1", "got -30"]),
    ("worlds/event_day_zero.yaml", WorldError, "events.0.day", ["greater than or equal to 1", "got 0"]),
    # ---- world YAML: unknown references
    ("worlds/path_unknown_place.yaml", WorldError, "paths.1.0", ["unknown place 'wel'", "did you mean 'well'?"]),
    ("worlds/path_to_itself.yaml", WorldError, "paths.3", ["a path from 'field' to itself"]),
    ("worlds/disconnected.yaml", WorldError, "paths", ["not all connected", "['field']"]),
    ("worlds/object_unknown_place.yaml", WorldError, "objects.1.place",
     ["unknown place 'shopp'", "did you mean 'shop'?"]),
    ("worlds/event_unknown_place.yaml", WorldError, "events.0.place",
     ["unknown place 'pond'", "places: cottage_a, well, shop, field"]),
    ("worlds/event_unknown_object.yaml", WorldError, "events.0.object_states.buckett",
     ["unknown object 'buckett'", "did you mean 'bucket'?"]),
    ("worlds/event_object_elsewhere.yaml", WorldError, "events.0.object_states.till",
     ["is at 'shop', not at the event's place 'well'"]),
    ("worlds/resident_without_persona.yaml", WorldError, "residents.3", ["no persona file", "dora.json"]),
    # ---- config YAML
    ("configs/latin1.yaml", ConfigError, None, ["not UTF-8 text", "byte 0xe9 at line 1 column 4"]),
    ("configs/unclosed_quote.yaml", ConfigError, None,
     ["not valid YAML at line 3 column 1", "quoted scalar at line 2"]),
    ("configs/top_level_list.yaml", ConfigError, None, ["expected a mapping of sections", "got list"]),
    ("configs/duplicate_key.yaml", ConfigError, "memory.a_rec", ["key 'a_rec' given twice", "lines 2 and 4"]),
    ("configs/duplicate_section.yaml", ConfigError, "memory", ["key 'memory' given twice", "lines 1 and 5"]),
    ("configs/misspelt_section.yaml", ConfigError, "memroy", ["unknown field 'memroy'", "did you mean 'memory'?"]),
    ("configs/misspelt_key.yaml", ConfigError, "memory.gama", ["unknown field 'gama'", "did you mean 'gamma'?"]),
    ("configs/gamma_out_of_range.yaml", ConfigError, "memory.gamma", ["less than or equal to 1", "got 1.5"]),
    ("configs/weight_infinite.yaml", ConfigError, "memory.a_rec", ["finite number", "got inf"]),
    ("configs/threshold_nan.yaml", ConfigError, "memory.threshold", ["finite number", "got nan"]),
    ("configs/profile_weight_infinite.yaml", ConfigError, "memory.profiles.recall.a_rec", ["finite number"]),
    ("configs/rater_url_without_scheme.yaml", ConfigError, "rater.url", ["http:// or https:// URL with a host"]),
    ("configs/top_k_text.yaml", ConfigError, "memory.top_k", ["valid integer", "got 'many'"]),
    ("configs/negative_interval.yaml", ConfigError, "memory.consolidation_interval_minutes",
     ["greater than 0", "got -60"]),
    ("configs/weights_all_zero.yaml", ConfigError, "memory", ["a_rec, a_imp and a_rel are all 0"]),
    ("configs/section_not_mapping.yaml", ConfigError, "memory", ["valid dictionary", "got 5"]),
    ("configs/bad_literal.yaml", ConfigError, "memory.retrieval", ["'cascade' or 'merged'", "got 'casade'"]),
    ("configs/api_key_in_file.yaml", ConfigError, "llm.api_key_env", ["NAME of the environment variable"]),
]
IDS = [c[0] for c in CASES]


def test_the_table_covers_the_whole_corpus():
    on_disk = sorted(str(p.relative_to(BROKEN)) for p in BROKEN.rglob("*") if p.is_file())
    assert sorted(IDS) == on_disk
    assert len(CASES) >= 30


def place(case: str, tmp_path: Path) -> tuple[Path, Path, Path]:
    """(world file, personas folder, file the error must name) for a case, copied where it can be checked."""
    src = BROKEN / case
    if case.startswith("personas/"):
        personas = tmp_path / "personas"
        shutil.copytree(DATA / "personas", personas)
        shutil.copy(src, personas / src.name)
        world = tmp_path / "tiny.yaml"
        world.write_text((DATA / "tiny.yaml").read_text().replace("residents: [ann, ben, cal]",
                                                                  f"residents: [ann, ben, cal, {src.stem}]"))
        return world, personas, personas / src.name
    if case.startswith("worlds/"):
        return src, DATA / "personas", src
    return DATA / "tiny.yaml", DATA / "personas", src


def expected_line(err_file: Path, field: str | None) -> str:
    """How the error starts (a persona's reference error goes on with `` (checked against <world>)``)."""
    return f"{err_file}: field '{field}'" if field else f"{err_file}: "


def load(case: str, world: Path, personas: Path):
    if case.startswith("configs/"):
        return load_config(BROKEN / case)
    return load_world(world, personas)


@pytest.mark.parametrize(("case", "cls", "field", "phrases"), CASES, ids=IDS)
def test_loader_names_file_field_and_problem(case, cls, field, phrases, tmp_path):
    world, personas, err_file = place(case, tmp_path)
    with pytest.raises(InputError) as e:
        load(case, world, personas)
    err = e.value
    assert type(err) is cls
    assert (err.file, err.field) == (str(err_file), field)
    if case.startswith("personas/") and cls is WorldError:
        assert err.other_file == str(world)
    for phrase in phrases:
        assert phrase in err.message
    assert "\n" not in str(err) and str(err).startswith(expected_line(err_file, field))


def one_error_line(stderr: str) -> str:
    assert "Traceback" not in stderr
    lines = [line for line in stderr.splitlines() if line.startswith("simulacra: error: ")]
    assert len(lines) == 1, stderr
    return lines[0]


def assert_reported(stderr: str, err_file: Path, field: str | None, phrases: list[str]):
    line = one_error_line(stderr)
    assert line.startswith("simulacra: error: " + expected_line(err_file, field))
    for phrase in phrases:
        assert phrase in line


@pytest.mark.parametrize(("case", "cls", "field", "phrases"), CASES, ids=IDS)
def test_run_sim_prints_one_line_and_exits_2(case, cls, field, phrases, tmp_path, capsys):
    """``run_sim.py --world ... --ticks 1`` (in process): exit 2, one error line, no run folder made."""
    world, personas, err_file = place(case, tmp_path)
    argv = ["--world", str(world), "--personas-dir", str(personas), "--ticks", "1", "--db-dir", str(tmp_path / "db")]
    if case.startswith("configs/"):
        argv += ["--config", str(err_file)]
    assert run_sim_main(argv) == 2
    out = capsys.readouterr()
    assert_reported(out.err, err_file, field, phrases)
    assert out.out == "" and not (tmp_path / "db").exists()


CHECKED = [c for c in CASES if not c[0].startswith("configs/")]


@pytest.mark.parametrize(("case", "cls", "field", "phrases"), CHECKED, ids=[c[0] for c in CHECKED])
def test_simulacra_check_in_a_real_process(case, cls, field, phrases, tmp_path):
    """``python -m simulacra.cli check <world> --personas-dir ...``: exit 2, one error line, no traceback."""
    world, personas, err_file = place(case, tmp_path)
    r = subprocess.run([sys.executable, "-m", "simulacra.cli", "check", str(world), "--personas-dir", str(personas)],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1  # the error line and nothing else
    assert_reported(r.stderr, err_file, field, phrases)


@pytest.mark.parametrize("case", ["configs/misspelt_key.yaml", "configs/latin1.yaml", "worlds/duplicate_place.yaml",
                                  "worlds/utf16.yaml", "personas/binary.json", "personas/duplicate_key.json"])
def test_run_sim_in_a_real_process(case, tmp_path):
    cls, field, phrases = next(c[1:] for c in CASES if c[0] == case)
    world, personas, err_file = place(case, tmp_path)
    argv = [sys.executable, "run_sim.py", "--world", str(world), "--personas-dir", str(personas), "--ticks", "1",
            "--db-dir", str(tmp_path / "db")]
    if case.startswith("configs/"):
        argv += ["--config", str(err_file)]
    r = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2
    assert_reported(r.stderr, err_file, field, phrases)


def test_check_in_process_agrees(tmp_path, capsys):
    world, personas, err_file = place("personas/latin1.json", tmp_path)
    assert main(["check", str(world), "--personas-dir", str(personas)]) == 2
    assert_reported(capsys.readouterr().err, err_file, None, ["not UTF-8 text"])


# ---- what is not an error
def test_a_utf8_byte_order_mark_is_accepted(tmp_path):
    personas = tmp_path / "personas"
    shutil.copytree(DATA / "personas", personas)
    ann = personas / "ann.json"
    ann.write_bytes(codecs.BOM_UTF8 + ann.read_bytes())
    world = tmp_path / "tiny.yaml"
    world.write_bytes(codecs.BOM_UTF8 + (DATA / "tiny.yaml").read_bytes())
    w = load_world(world, personas)
    assert w.personas["ann"].name == "Ann Archer" and w.name == "Tinyvale"


def test_an_unquoted_time_is_a_time_not_a_base_60_number(tmp_path):
    world = tmp_path / "tiny.yaml"
    world.write_text((DATA / "tiny.yaml").read_text().replace('start_time: "08:00"', "start_time: 8:30")
                     .replace('end_time: "10:00"', "end_time: 10:30"))
    w = load_world(world, DATA / "personas")
    assert (w.start_time, w.start_minute, w.end_minute) == ("8:30", 510, 630)
    assert yaml.safe_load("t: 10:30") == {"t": 630}  # what plain YAML 1.1 would have made of it


def test_merge_keys_may_override_but_a_mapping_may_not_repeat_a_key(tmp_path):
    f = tmp_path / "m.yaml"
    f.write_text("base: &b {x: 1, y: 2}\nc:\n  <<: *b\n  x: 3\n")
    assert read_yaml(f) == {"base": {"x": 1, "y": 2}, "c": {"x": 3, "y": 2}}
    f.write_text("a:\n  - {x: 1}\n  - {x: 1, 'x': 2}\n")
    with pytest.raises(InputError) as e:
        read_yaml(f)
    assert e.value.field == "a.1.x" and "lines 3 and 3" in e.value.message
    assert yaml.safe_load(f.read_text()) == {"a": [{"x": 1}, {"x": 2}]}  # plain YAML keeps the last silently


def test_an_input_error_message_is_one_line():
    err = InputError("w.yaml", "places", "first\n   second\nthird")
    assert str(err) == "w.yaml: field 'places': first; second; third"


def test_shipped_files_still_load():
    load_world(ROOT / "worlds" / "fernhollow.yaml")
    for preset in (ROOT / "presets").glob("*.yaml"):
        load_config(preset)
    load_persona(DATA / "personas" / "ann.json")


@pytest.mark.parametrize(("args", "phrases"), [
    (["--run-name", "../victim", "--overwrite"], ["run name '../victim' (--run-name)", "a folder name, not a path"]),
    (["--run-name", ".", "--overwrite"], ["run name '.' (--run-name)", "a folder name, not a path"]),
    (["--run-name", "/tmp/elsewhere", "--overwrite"], ["a folder name, not a path"]),
    (["--run-name", "notes", "--overwrite"], ["is not a simulacra run folder", "does not delete it"]),
    (["--agents", "ann,ben,ann"], ["agents (--agents): listed more than once: ann"]),
    (["--agents", ","], ["agents (--agents): no resident named"]),
    (["--set", "memory.a_rec=inf"], ["memory.a_rec", "finite number"]),
])
def test_run_arguments_that_would_lose_files_or_break_the_run_are_refused(args, phrases, tmp_path, capsys):
    """Exit 2 with one line, before any run folder is made; a folder that is not a run's (``notes``, a file of
    the user's in it) and the folder beside the database (``victim``) are left as they were."""
    db = tmp_path / "db"
    (db / "notes").mkdir(parents=True)
    (db / "notes" / "thesis.tex").write_text("years of work")
    (tmp_path / "victim").mkdir()
    (tmp_path / "victim" / "keep.txt").write_text("keep")
    argv = ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--ticks", "1",
            "--db-dir", str(db), *args]
    assert run_sim_main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert all(p in line for p in phrases), line
    assert sorted(p.name for p in db.iterdir()) == ["notes"]
    assert (db / "notes" / "thesis.tex").read_text() == "years of work"
    assert (tmp_path / "victim" / "keep.txt").read_text() == "keep"


@pytest.mark.parametrize("hours", ["nan", "inf", "-1", "0"])
def test_game_hours_must_be_a_finite_number(hours, capsys):
    """``--hours 0`` is refused as ``--days 0`` is (it ran one tick; ``--ticks 0`` runs none)."""
    with pytest.raises(SystemExit) as exit_:
        main(["run", "--hours", hours])
    assert exit_.value.code == 2
    assert "argument --hours" in capsys.readouterr().err


def test_a_nested_set_changes_one_value_and_keeps_the_rest(tmp_path):
    """``tune --profile recall`` names ``memory.profiles.recall``; ``--set memory.profiles.recall.a_rec=0.5``
    changes that value alone (it was refused, and the hint pointed to a ``--config`` file, which ``simulacra
    interview`` has not): the other profiles and the recall profile's other fields and links stay; a nested field
    under a value that is not a mapping, or an unknown one, is named."""
    from simulacra.config import MemoryConfig, apply_overrides, load_config

    shipped = MemoryConfig().profiles
    got = load_config(None, ["memory.profiles.recall.a_rec=0.5", "memory.profiles.careful.top_k=8",
                             "memory.purposes.interview=careful"]).memory
    assert got.profiles["recall"] == shipped["recall"].model_copy(update={"a_rec": 0.5})
    assert got.profiles["dated"] == shipped["dated"] and got.profiles["latest"] == shipped["latest"]
    assert got.profiles["careful"].top_k == 8 and got.profile_of("interview") == "careful"
    assert got.profile_of("plan") == "recall"  # the other purposes as shipped
    recorded = {"memory": {"profiles": {"recall": {"a_rec": 0.0, "a_imp": 0.3}}}}  # a run's own value is the base
    assert apply_overrides(recorded, ["memory.profiles.recall.a_rec=0.5"]) == \
        {"memory": {"profiles": {"recall": {"a_rec": 0.5, "a_imp": 0.3}}}}
    with pytest.raises(ConfigError, match=r"memory\.profiles\.recall\.a_rec is not a mapping: it has no field 'x'"):
        load_config(None, ["memory.profiles.recall.a_rec.x=1"])
    with pytest.raises(ConfigError, match=r"memory\.profiles\.recall\.nosuch': unknown field"):
        load_config(None, ["memory.profiles.recall.nosuch=1"])
    assert main(["run", "--set", "memory.profiles.recall.a_rec=abc", "--db-dir", str(tmp_path)]) == 2


def test_a_bad_setting_names_where_it_was_given(tmp_path, capsys):
    """``simulacra run --set`` errors name the command line; the API's name Town.create; a config file's both."""
    from simulacra.town import make_config

    assert main(["run", "--set", "memory.a_rec=-1", "--db-dir", str(tmp_path)]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("simulacra: error: command-line settings with memory.a_rec=-1: field 'memory.a_rec'")
    with pytest.raises(ConfigError, match=r"^Town\.create settings: field 'memory\.a_rec'"):
        make_config(memory={"a_rec": -1})
    cfg = tmp_path / "c.yaml"
    cfg.write_text("memory: {a_imp: 0.5}\n", encoding="utf-8")
    assert main(["run", "--config", str(cfg), "--set", "memory.a_rec=-1", "--db-dir", str(tmp_path)]) == 2
    assert f"{cfg} with command-line settings with memory.a_rec=-1" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["run"], ["view"], ["tune", "r", "--queries", "q.yaml"]])
def test_a_negative_seed_names_the_option(command, capsys):
    """Not "Town.create settings with simulation.seed=-1" (run) nor numpy's "expected non-negative integer"."""
    with pytest.raises(SystemExit) as exit_:
        main([*command, "--seed", "-1"])
    assert exit_.value.code == 2
    assert "argument --seed: '-1': expected a whole number >= 0" in capsys.readouterr().err


def test_an_output_path_that_cannot_be_written_is_one_line_naming_it(tmp_path, capsys):
    """A folder in the path is a file: one line naming the path, exit 2, no traceback; any command's OSError on a
    named file gets the same (``dispatch``), and one on no file is not hidden."""
    import argparse

    from simulacra.cli import dispatch

    blocker = tmp_path / "a_file"
    blocker.write_text("not a folder")
    assert main(["generate-town", "--residents", "5", "--out", str(blocker / "town.yaml")]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line.startswith("simulacra: error: ") and str(blocker) in line

    def writes(args):
        (blocker / "out.png").write_bytes(b"x")

    assert dispatch(writes, argparse.Namespace()) == 2
    line = one_error_line(capsys.readouterr().err)
    assert line == f"simulacra: error: {blocker / 'out.png'}: Not a directory"

    def breaks(args):
        raise OSError("a socket went away")

    with pytest.raises(OSError, match="socket"):
        dispatch(breaks, argparse.Namespace())


@pytest.mark.parametrize("setting, field", [
    ("rater.url=http://127.0.0.1:99999/rate", "rater.url"),
    ("memory.chroma_url=http://127.0.0.1:99999", "memory.chroma_url"),
    ("memory.chroma_url=http://127.0.0.1:abc", "memory.chroma_url"),
    ("memory.chroma_url=storage:8000", "memory.chroma_url"),
    ("llm.base_url=http://127.0.0.1:0/v1", "llm.base_url"),
])
def test_a_server_address_with_no_usable_port_is_named_before_the_run(setting, field, tmp_path, capsys):
    """A port out of range passed the config and ended in urllib's ``ValueError: Port out of range 0-65535`` from
    inside the rater client (audit of stop 51); rater.url's port 0 is its in-process rater on a free port."""
    from simulacra.config import load_config

    with pytest.raises(ConfigError, match=rf"field '{re.escape(field)}': expected an http:// or https:// URL"):
        load_config(None, [setting])
    assert main(["run", "--set", setting, "--db-dir", str(tmp_path), "--ticks", "1"]) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert not any(tmp_path.iterdir())  # refused before a run folder was made
    load_config(None, ["rater.url=http://127.0.0.1:0/rate"])


def _two_ticks(db: Path, rater_url: str, personas: Path = DATA / "personas") -> list[str]:
    """The arguments of a two-tick Tinyvale run named ``r`` in ``db`` (the run these tests then break)."""
    return ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(personas), "--ticks", "2", "--db-dir", str(db),
            "--run-name", "r", "--rater-url", rater_url, "--quiet"]


def test_a_trace_header_without_what_a_tool_reads_is_named(tmp_path, rater_url, capsys):
    """A header without ``personas`` ended ``inspect`` and ``interview`` in ``KeyError: 'personas'``; a header whose
    recorded config holds a broken value ended ``rescore`` in a float conversion error (audit of stop 51)."""
    import json

    assert run_sim_main(_two_ticks(tmp_path, rater_url)) == 0
    trace = tmp_path / "r" / "trace.jsonl"
    lines = trace.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    capsys.readouterr()

    def write(h):
        trace.write_text("\n".join([json.dumps(h), *lines[1:]]) + "\n", encoding="utf-8")

    write({k: v for k, v in header.items() if k != "personas"})
    for cmd in (["inspect", str(tmp_path / "r"), "--agent", "ann", "--tick", "0"],
                ["interview", str(tmp_path / "r"), "--agent", "ann", "What happened?"]):
        assert main(cmd) == 2
        line = one_error_line(capsys.readouterr().err)
        assert "trace.jsonl: line 1: the header's 'personas' is" in line and "expected an object" in line, line
    write({**header, "config": {**header["config"], "memory": {**header["config"]["memory"], "a_rec": "abc"}}})
    assert main(["rescore", str(tmp_path / "r"), "--weights", "0,0.25,1"]) == 2
    assert "field 'memory.a_rec'" in one_error_line(capsys.readouterr().err)


def test_a_damaged_chroma_file_is_named_not_a_traceback(tmp_path, rater_url):
    """A truncated ``chroma.sqlite3`` ended ``interview`` and ``run --resume`` in chromadb's InternalError from inside
    its Rust bindings (audit of stop 51). In processes of their own, as a user runs them: Chroma keeps a store it
    opened in a process open."""
    def simulacra(*args: str) -> subprocess.CompletedProcess:
        code = "import sys; from simulacra.cli import main; sys.exit(main(sys.argv[1:]))"
        return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                              timeout=600)

    made = simulacra("run", *_two_ticks(tmp_path, rater_url))
    assert made.returncode == 0, made.stderr[-2000:]
    sqlite = tmp_path / "r" / "chroma" / "chroma.sqlite3"
    # Chroma keeps SQLite in WAL mode: a process that ends without a checkpoint leaves its pages in
    # chroma.sqlite3-wal, where they hide the truncation below (CI of stop 52). Fold them in first.
    with contextlib.closing(sqlite3.connect(sqlite)) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    wal = sqlite.with_name("chroma.sqlite3-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    with open(sqlite, "r+b") as f:
        f.truncate(8192)  # its first pages: the schema says there are more
    for cmd in (["interview", str(tmp_path / "r"), "--agent", "ann", "What happened?"],
                ["run", "--resume", str(tmp_path / "r"), "--rater-url", rater_url]):
        got = simulacra(*cmd)
        assert got.returncode == 2 and "Traceback" not in got.stderr, got.stderr[-2000:]
        line = one_error_line(got.stderr)
        assert f"{tmp_path / 'r' / 'chroma'}: Chroma cannot open the memory store there" in line, line


def test_a_resume_says_what_it_ignores_and_when_there_is_nothing_to_run(tmp_path, rater_url, capsys):
    """``--resume RUN --db-dir X`` ran RUN without a word about X, and ``--resume RUN --ticks 2`` of a run with 2
    ticks ran none and said nothing (audit of stop 51)."""
    assert run_sim_main(_two_ticks(tmp_path, rater_url)) == 0
    capsys.readouterr()
    assert main(["run", "--resume", str(tmp_path / "r"), "--db-dir", str(tmp_path / "elsewhere")]) == 2
    assert "drop --db-dir" in one_error_line(capsys.readouterr().err)
    assert main(["run", "--resume", str(tmp_path / "r"), "--ticks", "2", "--rater-url", rater_url, "--quiet"]) == 0
    err = capsys.readouterr().err
    assert f"{tmp_path / 'r'} already has 2 ticks, the length asked (on a resume, --ticks" in err


def test_a_folder_left_by_a_failed_set_up_is_not_offered_for_resume(tmp_path, capsys):
    """A run whose set-up failed (a dead Chroma or model server) leaves its folder: the next run said to continue it
    with --resume, and the resume said to start it again with --overwrite (audit of stop 51)."""
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "trace.jsonl").write_text("", encoding="utf-8")  # opened, never written
    argv = ["--world", str(DATA / "tiny.yaml"), "--personas-dir", str(DATA / "personas"), "--ticks", "1",
            "--db-dir", str(tmp_path), "--run-name", "r"]
    assert run_sim_main(argv) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "exists but holds no run to continue" in line and "--overwrite" in line and "--resume" not in line, line


def test_a_persona_changed_under_allow_changed_is_blamed_not_the_run_folder(tmp_path, rater_url, capsys):
    """With --allow-changed, a persona edit that changes a resident's static memories stopped the resume with "the
    run folder was changed outside simulacra" (audit of stop 51): the persona file was."""
    import json

    personas = tmp_path / "personas"
    shutil.copytree(DATA / "personas", personas)
    assert run_sim_main(_two_ticks(tmp_path, rater_url, personas)) == 0
    ann = json.loads((personas / "ann.json").read_text())
    (personas / "ann.json").write_text(json.dumps({**ann, "background": "Ann was a sailor once."}))
    capsys.readouterr()
    assert main(["run", "--resume", str(tmp_path / "r"), "--allow-changed", "--rater-url", rater_url]) == 2
    line = one_error_line(capsys.readouterr().err)
    assert "static tier is in the checkpoint" in line and "persona and world files: one of them changed" in line, line
