"""simulacra import generative-agents: a Generative Agents storage folder (tests/data/generative_agents, an invented
three-resident town in that project's format) becomes a world and personas that pass the check, with places, homes,
objects, paths, routines and relationships read from it; what could not be read is in the report; bad input is one
line naming the file and the field (exit status 2); the same input gives the same bytes; the town runs."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import networkx as nx
import pytest
import yaml

from simulacra.errors import PersonaError, WorldError
from simulacra.importers.generative_agents import REPORT_FILE, convert, import_generative_agents
from simulacra.world import check_world
from tests.conftest import DATA, ROOT

GA = DATA / "generative_agents"
STORAGE = GA / "storage" / "base_brookfield_n3"
ASSETS = GA / "assets" / "brookfield"
SECTORS = {"copper_kettle_cafe", "lantern_hill_school", "mara_quills_cottage", "millpond_park", "pike_familys_house"}


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def copy_storage(tmp_path):
    dst = tmp_path / "storage" / STORAGE.name
    shutil.copytree(STORAGE, dst)
    return dst


def edit(storage, name, file="scratch.json", **changes):
    """Change fields of a resident's scratch.json (a value of ``...`` deletes the field)."""
    path = storage / "personas" / name / "bootstrap_memory" / file
    data = json.loads(path.read_text())
    for key, value in changes.items():
        if value is ...:
            del data[key]
        else:
            data[key] = value
    path.write_text(json.dumps(data, indent=2))
    return path


def routine(persona):
    return [(e["start"], e["activity"], e["place"]) for e in persona["routine"]]


def notes_of(report, name, field=None):
    return [n for n in report["notes"] if f"/{name}/" in n["file"] and (field is None or n["field"] == field)]


def cli(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "simulacra.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd or ROOT, timeout=900)  # a guard against a hang, not a speed limit


# ----------------------------------------------------------------------------------------------------- the town
def test_the_fixture_imports_and_passes_the_check(tmp_path):
    world_path, world, report = import_generative_agents(STORAGE, tmp_path / "town")
    assert world_path == tmp_path / "town" / "world.yaml"
    again = check_world(world_path)  # the check a user runs, on the files written
    assert list(again.personas) == ["mara_quill", "owen_pike", "lena_pike"]  # reverie/meta.json's order
    assert json.loads((tmp_path / "town" / REPORT_FILE).read_text()) == report
    assert world.name == "Brookfield" and world.start_weekday == "Monday"  # meta.json: March 3, 2025
    assert set(world.places) == SECTORS | {"streets"}
    kinds = {pid: p.kind for pid, p in world.places.items()}
    assert kinds == {"copper_kettle_cafe": "shop", "lantern_hill_school": "work", "mara_quills_cottage": "home",
                     "millpond_park": "nature", "pike_familys_house": "home", "streets": "public"}
    assert world.places["lantern_hill_school"].description == ("Lantern Hill School, in Brookfield, with a "
                                                                "classroom and a staff room.")
    homes = {rid: p.home for rid, p in world.personas.items()}
    assert homes == {"mara_quill": "mara_quills_cottage", "owen_pike": "pike_familys_house",
                     "lena_pike": "pike_familys_house"}
    # every sector reachable from the town's streets, one path each
    assert sorted(map(tuple, world.paths)) == sorted(("streets", s) for s in SECTORS)
    assert nx.is_connected(world.graph)
    for place in world.places.values():
        assert all(0 <= v <= 100 for v in place.position)
    # the arenas' objects, named by arena where a sector has several; the union of what residents know
    objects = {(o.place, o.name) for o in world.objects}
    assert len(world.objects) == 20 and all(o.state == "idle" for o in world.objects)
    assert ("pike_familys_house", "bed in Owen and Lena Pike's bedroom") in objects
    assert ("pike_familys_house", "stove in the kitchen") in objects
    assert ("copper_kettle_cafe", "espresso machine") in objects
    assert ("copper_kettle_cafe", "bread oven") in objects  # known to Owen Pike only
    mara = world.personas["mara_quill"]
    assert (mara.name, mara.age, mara.occupation, mara.traits) == ("Mara Quill", 38, "schoolteacher",
                                                                    ["patient", "meticulous", "warm"])
    assert mara.background.startswith("Mara Quill is a schoolteacher at Lantern Hill School")
    assert "rehearsing the school's spring play" in mara.background  # currently
    assert mara.lifestyle.startswith("Mara Quill goes to bed around 10pm")
    assert world.personas["owen_pike"].occupation == "baker"
    # relationships: the sentences naming another resident; housemates
    assert "Owen Pike would bake buns" in mara.relationships["owen_pike"]
    assert "his wife, Lena Pike" in world.personas["owen_pike"].relationships["lena_pike"]
    assert world.personas["lena_pike"].relationships == {"owen_pike": "they both live at Pike family's house"}
    assert [r["workplace"] for r in report["residents"]] == ["Lantern Hill School", "Copper Kettle Cafe", None]


def test_with_the_map_paths_and_positions_come_from_the_tiles(tmp_path):
    _, world, report = import_generative_agents(STORAGE, tmp_path / "town", assets=ASSETS)
    streets = {pid for pid in world.places if pid.startswith("street_")}
    assert set(world.places) == SECTORS | streets and len(streets) == 2
    by_street = {s: {b for a, b in world.paths if a == s and b in SECTORS} for s in streets}
    # the three houses, the cafe and the school share a street; the park, 30+ tiles away, has its own
    assert sorted(map(sorted, by_street.values())) == [
        ["copper_kettle_cafe", "lantern_hill_school", "mara_quills_cottage", "pike_familys_house"], ["millpond_park"]]
    assert {tuple(sorted(p)) for p in world.paths if set(p) <= streets} == {tuple(sorted(streets))}
    assert nx.is_connected(world.graph)
    # tile centres scaled to 0..100: the cottage covers x 1..6, y 1..5 of a 48 x 16 map
    assert world.places["mara_quills_cottage"].position == (round(4.0 * 100 / 48, 2), round(3.5 * 100 / 48, 2))
    assert world.places["millpond_park"].position == (round(42.5 * 100 / 48, 2), round(10.5 * 100 / 48, 2))
    assert report["layout"] == "map tiles" and world.edges_per_tick == report["edges_per_tick"] >= 1
    assert any(n["kind"] == "map" and "2 street places" in n["message"] for n in report["notes"])


@pytest.mark.parametrize("assets", [None, ASSETS])
def test_a_resident_knows_the_places_of_its_spatial_memory(tmp_path, assets):
    """As Generative Agents' residents know only the sectors of their spatial_memory.json, the imported persona lists
    them (and the streets joined to them) in ``known_places``; its static memory describes those places, its home
    and its routine's, not the rest of the town."""
    from simulacra.runtime import static_records

    _, world, _ = import_generative_agents(STORAGE, tmp_path / "town", assets=assets)
    streets = {pid for pid in world.places if pid not in SECTORS}

    def street_of(sectors):
        return {a for a, b in world.paths if a in streets and b in sectors}

    lena, mara = world.personas["lena_pike"], world.personas["mara_quill"]
    lena_knows = {"copper_kettle_cafe", "millpond_park"}  # her spatial memory, besides her home
    assert set(lena.known_places) == lena_knows | street_of(lena_knows | {"pike_familys_house"})
    assert "lantern_hill_school" in mara.known_places and "lantern_hill_school" not in lena.known_places
    assert lena.places_known() == lena_knows | {"pike_familys_house"} | street_of(lena_knows | {"pike_familys_house"})

    def described(pid):
        return {world.places[p].name for p in world.places
                if any(r.text.startswith(world.places[p].name + " (") for r in static_records(pid, world.personas[pid],
                                                                                              world))}

    assert "Lantern Hill School" in described("mara_quill") and "Lantern Hill School" not in described("lena_pike")
    assert "Mara Quill's cottage" not in described("lena_pike")
    assert {"Copper Kettle Cafe", "Millpond Park", "Pike family's house"} <= described("lena_pike")

# ----------------------------------------------------------------------------------------------------- routines
def test_routines_are_read_from_lifestyle_and_daily_plan_req():
    _, personas, report = convert(STORAGE)
    assert routine(personas["mara_quill"]) == [
        ("06:00", "waking up and getting ready for the day", "mara_quills_cottage"),
        ("06:30", "having breakfast", "mara_quills_cottage"),
        ("07:00", "relaxing at home", "mara_quills_cottage"),
        ("08:00", "teaching at Lantern Hill School", "lantern_hill_school"),  # "from 8am to 3pm"
        ("12:00", "having lunch at Copper Kettle Cafe", "copper_kettle_cafe"),
        ("13:00", "teaching at Lantern Hill School", "lantern_hill_school"),
        ("15:00", "taking a walk in Millpond Park", "millpond_park"),  # "likes to walk around Millpond Park"
        ("18:00", "having dinner at home", "mara_quills_cottage"),  # "eats dinner around 6pm"
        ("19:00", "relaxing at home", "mara_quills_cottage"),
        ("22:00", "going to sleep", "mara_quills_cottage"),  # "goes to bed around 10pm"
    ]
    owen = routine(personas["owen_pike"])
    assert owen[0][:1] == ("05:00",) and owen[-1] == ("21:00", "going to sleep", "pike_familys_house")
    assert ("06:00", "working at Copper Kettle Cafe", "copper_kettle_cafe") in owen  # "at 6am ... until 2pm"
    assert ("12:00", "having lunch at Copper Kettle Cafe", "copper_kettle_cafe") in owen  # the workplace serves food
    assert ("17:00", "having dinner at home", "pike_familys_house") in owen
    lena = routine(personas["lena_pike"])  # no wake-up time, bedtime midnight, no workplace
    assert lena[0][0] == "07:00" and lena[-1] == ("23:50", "going to sleep", "pike_familys_house")
    assert ("08:00", "working at home", "pike_familys_house") in lena
    chosen = [n["message"] for n in report["notes"] if n["kind"] == "chosen"]
    assert "lunch at Copper Kettle Cafe, chosen among the places that serve food in Mara Quill's spatial memory" \
        in chosen


@pytest.mark.parametrize("lifestyle, wake, night, dinner", [
    ("X goes to bed around 11pm, awakes up around 7am, eats dinner around 5pm.", "07:00", "23:00", "17:00"),
    ("X goes to bed around midnight, awakes up around 10am, eats dinner around 7pm.", "10:00", "23:50", "19:00"),
    ("X goes to bed around 2am, awakes up around 10am, eats dinner around 6pm.", "10:00", "23:50", "18:00"),
    ("X goes to bed around 8pm, awakes up around 4am, eats dinner around 5pm.", "04:00", "20:00", "17:00"),
    ("X goes to bed around 11pm, awakes up around 7amam, eats dinner around 17:30pm.", "07:00", "23:00", "17:30"),
    ("X goes to bed at 10:30 p.m. and wakes up at 6:45 a.m.; dinner at 6pm.", "06:45", "22:30", "18:00"),
])
def test_wake_up_bedtime_and_dinner_are_parsed_from_lifestyle(tmp_path, lifestyle, wake, night, dinner):
    storage = copy_storage(tmp_path)
    edit(storage, "Lena Pike", lifestyle=lifestyle)
    _, personas, report = convert(storage)
    steps = routine(personas["lena_pike"])
    assert steps[0][0] == wake and steps[-1][:2] == (night, "going to sleep")
    assert (dinner, "having dinner at home", "pike_familys_house") in steps
    unread = [n for n in notes_of(report, "Lena Pike", "lifestyle") if n["kind"] == "unread"]
    assert unread == []  # every time was read
    adjusted = [n["message"] for n in notes_of(report, "Lena Pike", "lifestyle") if n["kind"] == "adjusted"]
    assert bool(adjusted) == (night == "23:50")


def test_a_time_that_does_not_exist_is_reported_unread_not_read_as_another(tmp_path):
    """"dinner at 13:75" was read as 14:15 with no note, "bed at 25pm" as a bedtime at midnight (audit of stop 51)."""
    storage = copy_storage(tmp_path)
    edit(storage, "Lena Pike", lifestyle="X goes to bed at 25pm, awakes up around 7am, eats dinner at 13:75.")
    _, personas, report = convert(storage)
    unread = " ".join(n["message"] for n in notes_of(report, "Lena Pike", "lifestyle") if n["kind"] == "unread")
    assert "no bedtime" in unread and "no dinner time" in unread
    assert not any(step[0] in ("14:15", "00:00") for step in routine(personas["lena_pike"]))


def test_a_saved_simulations_schedule_is_the_routine(tmp_path):
    storage = copy_storage(tmp_path)
    edit(storage, "Owen Pike", f_daily_schedule=[
        ["checking the accounts", 30], ["sleeping", 270], ["waking up and getting dressed", 60],
        ["baking bread at Copper Kettle Cafe", 420], ["having lunch with the staff", 60], ["taking a walk", 60],
        ["reading the paper", 120], ["eating dinner", 60], ["reading by the fire", 180], ["sleeping", 180]])
    world_path, world, report = import_generative_agents(storage, tmp_path / "town")
    assert routine(json.loads((tmp_path / "town" / "personas" / "owen_pike.json").read_text())) == [
        ("05:00", "waking up and getting dressed", "pike_familys_house"),
        ("06:00", "baking bread at Copper Kettle Cafe", "copper_kettle_cafe"),
        ("13:00", "having lunch with the staff", "copper_kettle_cafe"),  # no place named: where it was
        ("14:00", "taking a walk", "millpond_park"),  # a walk, in the park Owen knows
        ("15:00", "reading the paper", "millpond_park"),
        ("17:00", "eating dinner", "pike_familys_house"),
        ("18:00", "reading by the fire", "pike_familys_house"),
        ("21:00", "sleeping", "pike_familys_house"),  # the night, at home
    ]
    assert [r["routine"] for r in report["residents"]] == ["lifestyle and daily_plan_req", "f_daily_schedule",
                                                           "lifestyle and daily_plan_req"]
    schedule_notes = {n["kind"]: n["message"] for n in notes_of(report, "Owen Pike", "f_daily_schedule")}
    assert "'checking the accounts' (00:00)" in schedule_notes["adjusted"]  # before the night's sleep: left out
    assert schedule_notes["unread"].startswith("3 of 8 steps name no place")
    assert "'having lunch with the staff' (13:00)" in schedule_notes["unread"]


# ----------------------------------------------------------------------------------------------------- the report
def test_the_report_lists_what_could_not_be_read(tmp_path):
    storage = copy_storage(tmp_path)
    edit(storage, "Owen Pike", learned="Owen Pike is a baker at Copper Kettle Cafe and a governor of Lantern Hill "
                                       "School.")
    edit(storage, "Mara Quill", learned="Mara Quill keeps a jar of sea glass on her desk.",
         daily_plan_req="Mara Quill goes to Lantern Hill School.")
    _, _, report = import_generative_agents(storage, tmp_path / "town")
    lena = {(n["field"], n["kind"], n["message"]) for n in notes_of(report, "Lena Pike")}
    scratch = "personas/Lena Pike/bootstrap_memory/scratch.json"
    assert all(n["file"] == scratch for n in notes_of(report, "Lena Pike") if n["kind"] != "chosen")
    assert ("lifestyle", "unread", "no wake-up time (\"awakes up around 7am\"): 07:00 used") in lena
    assert ("lifestyle", "unread", "no dinner time (\"eats dinner around 6pm\"): 18:00 used") in lena
    assert ("lifestyle", "adjusted", "bedtime midnight: the night starts at 23:50 (a routine's days end at "
                                     "midnight)") in lena
    assert ("daily_plan_req", "unread", "no workplace named in learned or daily_plan_req: the working hours are "
                                        "spent at home") in lena
    owen = {(n["field"], n["kind"]): n["message"] for n in notes_of(report, "Owen Pike")}
    assert owen["learned", "ambiguous"] == ("several workplaces named: Copper Kettle Cafe and Lantern Hill School; "
                                            "the first, Copper Kettle Cafe, used")
    mara = {(n["field"], n["kind"]): n["message"] for n in notes_of(report, "Mara Quill")}
    assert mara["learned", "unread"] == "no occupation (\"Mara Quill is a ... who ...\"): \"resident of " \
                                        "Brookfield\" used"
    assert mara["daily_plan_req", "chosen"] == "workplace Lantern Hill School read from a sentence without work words"
    assert mara["daily_plan_req", "unread"] == "no work hours stated for Lantern Hill School: 09:00-17:00 used"


# ----------------------------------------------------------------------------------------------------- bad input
def test_a_folder_that_is_not_a_storage_is_one_line_with_exit_2(tmp_path):
    proc = cli("import", "generative-agents", GA / "storage", "--out", tmp_path / "town")
    assert proc.returncode == 2 and proc.stdout == ""
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith(f"simulacra: error: {GA / 'storage'}: not a Generative Agents "
                                                "storage folder")
    assert "it holds the simulations base_brookfield_n3: pass one" in line
    assert not (tmp_path / "town").exists()


def test_a_living_area_naming_no_known_place_is_one_line_with_exit_2(tmp_path):
    storage = copy_storage(tmp_path)
    path = edit(storage, "Owen Pike", living_area="Brookfield:Pike family's houseboat:cabin")
    proc = cli("import", "generative-agents", storage, "--out", tmp_path / "town")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and line.startswith(f"simulacra: error: {path}: field 'living_area': 'Pike family's "
                                                "houseboat' names no known place")
    assert "did you mean 'Pike family's house'" in line


@pytest.mark.parametrize("change, error, field, phrase", [
    (dict(lifestyle=...), PersonaError, "lifestyle", "missing; a Generative Agents scratch.json has name, age"),
    (dict(age="forty"), PersonaError, "age", "expected a whole number of years"),
    (dict(innate=" , "), PersonaError, "innate", "empty; expected the resident's traits"),
    (dict(living_area="Pike family's house"), PersonaError, "living_area", "expected \"<world>:<sector>:<arena>\""),
    (dict(f_daily_schedule=[["sleeping", "all night"]]), PersonaError, "f_daily_schedule.0", "expected [activity"),
])
def test_a_scratch_file_missing_or_spoiling_a_field_names_it(tmp_path, change, error, field, phrase):
    storage = copy_storage(tmp_path)
    path = edit(storage, "Owen Pike", **change)
    with pytest.raises(error) as info:
        convert(storage)
    assert (info.value.file, info.value.field) == (str(path), field)
    assert phrase in info.value.message and "\n" not in str(info.value)


def test_other_bad_input_names_the_file_and_the_field(tmp_path):
    storage = copy_storage(tmp_path)
    spatial = storage / "personas" / "Lena Pike" / "bootstrap_memory" / "spatial_memory.json"
    spatial.write_text(json.dumps({"Brookfield": {"Millpond Park": ["park bench"]}}))
    with pytest.raises(WorldError) as info:
        convert(storage)
    assert (info.value.file, info.value.field) == (str(spatial), "Brookfield.Millpond Park")
    spatial.unlink()
    with pytest.raises(WorldError, match="missing: each resident's bootstrap_memory has a spatial_memory.json"):
        convert(storage)

    storage = copy_storage(tmp_path / "b")
    meta = storage / "reverie" / "meta.json"
    data = json.loads(meta.read_text())
    data["persona_names"].append("Ivy Stone")
    meta.write_text(json.dumps(data))
    with pytest.raises(WorldError) as info:
        convert(storage)
    assert (info.value.file, info.value.field) == (str(meta), "persona_names.3")
    assert "names 'Ivy Stone', but there is no personas/Ivy Stone/bootstrap_memory/scratch.json" in info.value.message

    with pytest.raises(WorldError) as info:
        convert(STORAGE, assets=GA)
    assert info.value.file == str(GA) and "not a Generative Agents map folder" in info.value.message
    assets = tmp_path / "map"
    shutil.copytree(ASSETS, assets)
    maze = assets / "matrix" / "maze" / "sector_maze.csv"
    maze.write_text(maze.read_text().rsplit(",", 1)[0])
    with pytest.raises(WorldError) as info:
        convert(STORAGE, assets=assets)
    assert info.value.file == str(maze) and "767 tiles; maze_meta_info.json says 48 x 16 = 768" in info.value.message


# ----------------------------------------------------------------------------------------------------- output
def test_the_same_input_gives_the_same_bytes(tmp_path):
    for assets in (None, ASSETS):
        import_generative_agents(STORAGE, tmp_path / "a", assets, overwrite=True)
        import_generative_agents(STORAGE, tmp_path / "b", assets, overwrite=True)
        a, b = files(tmp_path / "a"), files(tmp_path / "b")
        assert a == b and set(a) == {"world.yaml", "import_report.json", "personas/mara_quill.json",
                                     "personas/owen_pike.json", "personas/lena_pike.json"}
    with pytest.raises(FileExistsError):
        import_generative_agents(STORAGE, tmp_path / "a")


def test_the_imported_town_runs(tmp_path):
    out = tmp_path / "town"
    proc = cli("import", "generative-agents", STORAGE, "--assets", ASSETS, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "Brookfield: 3 residents, 7 places (2 streets)" in proc.stdout
    assert f"{out / 'world.yaml'}: ok" in proc.stdout
    again = cli("import", "generative-agents", STORAGE, "--out", out)
    assert again.returncode == 2 and "pass --overwrite" in again.stderr
    run = cli("run", "--world", out / "world.yaml", "--ticks", "3", "--db-dir", tmp_path / "db", "--quiet",
              cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    trace = (tmp_path / "db" / "world-seed0" / "trace.jsonl").read_text().splitlines()
    assert len(trace) >= 4  # the header and three ticks
    # the viewer names every sector of the imported town (the places residents go to come before its streets)
    pytest.importorskip("pygame")
    from simulacra.viewer.render import render_tick
    from simulacra.viewer.state import ReplayState

    replay = ReplayState.load(tmp_path / "db" / "world-seed0")
    assert replay.destinations == SECTORS
    _, renderer = render_tick(replay, 2)
    assert set(renderer.labelled[:len(SECTORS)]) == SECTORS


# ----------------------------------------------------------------------------------------------------- scenarios
def paper_town(tmp_path, date="February 13, 2023"):
    """The fixture with Mara Quill renamed Isabella Rodriguez and Owen Pike renamed Sam Moore (the paper's host and
    candidate; their texts stay the fixture's invented ones), starting on ``date``."""
    storage = copy_storage(tmp_path)
    meta_path = storage / "reverie" / "meta.json"
    meta = json.loads(meta_path.read_text())
    for old, new in (("Mara Quill", "Isabella Rodriguez"), ("Owen Pike", "Sam Moore")):
        (storage / "personas" / old).rename(storage / "personas" / new)
        scratch = storage / "personas" / new / "bootstrap_memory" / "scratch.json"
        scratch.write_text(json.dumps({**json.loads(scratch.read_text()), "name": new}, indent=2))
        meta["persona_names"] = [new if n == old else n for n in meta["persona_names"]]
    meta["start_date"], meta["curr_time"] = date, f"{date}, 00:00:00"
    meta_path.write_text(json.dumps(meta))
    return storage


def test_a_town_with_the_papers_host_and_candidate_gets_the_papers_scenarios(tmp_path):
    from simulacra.evaluation.scenario import load_scenario

    out = tmp_path / "town"
    proc = cli("import", "generative-agents", paper_town(tmp_path), "--assets", ASSETS, "--out", out)
    assert proc.returncode == 0, proc.stderr
    for name in ("smallville-party.yaml", "smallville-election.yaml", "smallville-two-days.yaml"):
        assert f"{out / name}" in proc.stdout
    report = json.loads((out / REPORT_FILE).read_text())
    assert report["start_date"] == "2023-02-13"
    assert report["scenarios"] == ["smallville-party.yaml", "smallville-election.yaml", "smallville-two-days.yaml"]
    party, election, both = (load_scenario(out / n) for n in report["scenarios"])
    # only the host knows of the party at the start; February 14th is day 2; no Hobbs Cafe here: her workplace
    assert party.fact("party").holders == ["isabella_rodriguez"] and party.candidacy is None
    p = party.party
    assert (p.host, p.place, p.day, p.start, p.end) == ("isabella_rodriguez", "lantern_hill_school", 2, "17:00",
                                                        "19:00")
    assert "day 2, February 14th" in party.fact("party").text and "Lantern Hill School" in party.fact("party").text
    assert election.fact("candidacy").holders == ["sam_moore"] and election.party is None
    assert election.candidacy.candidate == "sam_moore" and election.candidacy.office == "mayor"
    # two game days each, with a control fact nobody holds; both experiments in one run in the third
    for sc in (party, election, both):
        assert (sc.until.day, sc.until.time) == (2, "20:00") and sc.agents is None
        assert [f.id for f in sc.facts if f.control] == ["control-film-crew"]
    assert both.party == party.party and both.candidacy == election.candidacy
    again = cli("import", "generative-agents", paper_town(tmp_path / "b"), "--out", out)
    assert again.returncode == 2 and "pass --overwrite" in again.stderr


def test_without_a_date_the_party_is_on_day_2(tmp_path):
    from simulacra.importers.generative_agents import paper_scenarios

    world, personas, report = convert(paper_town(tmp_path, date="sometime"))
    assert report["start_date"] is None
    files = paper_scenarios(world, personas, report)
    party = files["smallville-party.yaml"]
    assert "day: 2" in party and "February 14th" not in party
    # the description says who knows at the start: the holder alone, or also those whose persona tells of it
    # (base_the_ville_n25's seed history has Jennifer Moore know her husband plans to run for mayor)
    assert "which only he knows of at the start" in files["smallville-election.yaml"]
    other = next(rid for rid in personas if rid not in ("sam_moore", "isabella_rodriguez"))
    name = personas[other]["name"]
    personas[other]["relationships"]["sam_moore"] = ("You have known Sam Moore for years. You know Sam Moore, your "
                                                     "neighbour, is planning on running for mayor.")
    election = yaml.safe_load(paper_scenarios(world, personas, report)["smallville-election.yaml"])["description"]
    assert f"which he knows of at the start ({name}'s persona also tells of it)" in election
    party = yaml.safe_load(paper_scenarios(world, personas, report)["smallville-party.yaml"])["description"]
    assert "which only she knows of at the start" in party   # a sentence naming Sam Moore, not the party
    del personas["sam_moore"]
    assert list(paper_scenarios(world, personas, report)) == ["smallville-party.yaml"]
    del personas["isabella_rodriguez"]
    assert paper_scenarios(world, personas, report) == {}


# ----------------------------------------------------------------------------------------------------- seed history
HISTORY = ASSETS / "agent_history_init_n3.csv"


def mutual_pairs(personas):
    return {tuple(sorted((a, b))) for a, p in personas.items() for b in p["relationships"]
            if a in personas[b]["relationships"]}


def test_the_seed_history_becomes_relationships_and_background():
    _, before, _ = convert(STORAGE)  # no map folder, no history
    _, personas, report = convert(STORAGE, ASSETS)  # the map folder's agent_history_init_n3.csv
    mara, owen, lena = (personas[r] for r in ("mara_quill", "owen_pike", "lena_pike"))
    # a statement naming another resident joins the relationship with that resident, after the texts' sentences
    assert mara["relationships"] == {
        "lena_pike": "You have known Lena Pike since you were both pupils at Lantern Hill School.",
        "owen_pike": before["mara_quill"]["relationships"]["owen_pike"]
        + " You buy a seeded loaf from Owen Pike every Friday."}
    assert owen["relationships"]["mara_quill"] == ("You have known Mara Quill for years since she orders buns for "
                                                   "the school plays.")
    assert owen["relationships"]["lena_pike"].endswith(
        "his wife, Lena Pike, and is trying to perfect a rye loaf with caraway seeds. Lena Pike is your wife and you "
        "met at the Brookfield spring fair.")
    # a housemate named in the history: the statement instead of "they both live at ..."; a misspelt name is read
    assert lena["relationships"] == {"mara_quill": "You think Mara Quill is the kindest person in Brookfield.",
                                     "owen_pike": "Owan Pike is your husband and he is up before you every day."}
    # the rest joins the background, after learned and currently, as sentences
    assert mara["background"] == before["mara_quill"]["background"] + (" You like to mark homework on a bench in "
                                                                       "Millpond Park.")
    assert owen["background"] == before["owen_pike"]["background"] + (" You trade sourdough starter with Tobias "
                                                                      "Wren, the miller. You are proud of your "
                                                                      "caraway rye.")
    assert lena["background"].endswith("Brookfield spring fair. You keep your glaze recipes in a tin.")
    assert report["history"] == {"file": "assets/brookfield/agent_history_init_n3.csv", "rows": 4, "statements": 12,
                                 "relationships": 6, "background": 4, "not_imported": 2}
    # the start graph (residents naming each other): one pair before, all three after
    assert mutual_pairs(before) == {("lena_pike", "owen_pike")}
    assert mutual_pairs(personas) == {("lena_pike", "owen_pike"), ("lena_pike", "mara_quill"),
                                      ("mara_quill", "owen_pike")}
    # --history gives the same without the map's folder
    _, given, report = convert(STORAGE, history=HISTORY)
    assert {r: p["relationships"] for r, p in given.items()} == {r: p["relationships"] for r, p in personas.items()}
    assert report["history"]["file"] == "agent_history_init_n3.csv"


def test_history_names_not_in_the_town_are_reported(tmp_path):
    history = tmp_path / "my_history.csv"
    shutil.copy(HISTORY, history)
    out = tmp_path / "town"
    proc = cli("import", "generative-agents", STORAGE, "--history", history, "--out", out)
    assert proc.returncode == 0, proc.stderr
    assert "seed history my_history.csv: 12 statements of 4 rows, 6 to relationships, 4 to backgrounds, 2 not " \
           "imported" in proc.stdout
    notes = [(n["field"], n["kind"], n["message"]) for n in json.loads((out / REPORT_FILE).read_text())["notes"]
             if n["file"] == "my_history.csv"]
    assert notes == [
        ("line 3", "unknown", "Owen Pike's statement \"You trade sourdough starter with Tobias Wren, the miller\" "
                              "names Tobias Wren, who is not a resident of Brookfield: kept as a background memory"),
        ("line 4", "adjusted", "Lena Pike's statement \"Owan Pike is your husband and he is up before you every day\" "
                               "names 'Owan Pike' read as Owen Pike, the resident with the closest name"),
        ("line 5", "unknown", "the Name 'Ivy Stone' is not a resident of Brookfield: its 2 statements are not "
                              "imported"),
    ]
    for _, kind, message in notes:  # printed too
        assert f"{kind}: my_history.csv [" in proc.stdout and message in proc.stdout
    assert "# imported by: simulacra import generative-agents base_brookfield_n3 --history my_history.csv" in \
        (out / "world.yaml").read_text()
    # a map folder with only another town's history: not used, and said
    assets = tmp_path / "map"
    shutil.copytree(ASSETS, assets)
    (assets / HISTORY.name).rename(assets / "agent_history_init_n25.csv")
    _, personas, report = convert(STORAGE, assets)
    assert report["history"] is None and personas["lena_pike"]["relationships"] == {
        "owen_pike": "they both live at Pike family's house"}
    assert {"file": "assets/map", "field": None, "kind": "unread",
            "message": "no agent_history_init_n3.csv (the seed history of 3 residents); agent_history_init_n25.csv "
                       "there is for another town: pass --history to use it"} in report["notes"]


@pytest.mark.parametrize("text, field, phrase", [
    (b"Name,Words\nMara Quill,You like tea\n", "Whisper", "missing column (the header is 'Name,Words')"),
    (b"Resident,Whisper\nMara Quill,You like tea\n", "Name", "missing column (the header is 'Resident,Whisper')"),
    (b"Name,Whisper\nMara Quill,You like tea\nOwen Pike\n", "line 3", "no Whisper cell after the name 'Owen Pike'"),
    (b"Name,Whisper\n,You like tea\n", "line 2", "a whisper without a name"),
    (b"Name,Whisper\nMara Quill,You like caf\xe9s\n", None, "not UTF-8 text: byte 0xe9 at line 2"),
    (b"  \n", None, "the file is empty; a Generative Agents history CSV has the columns Name,Whisper"),
    (None, None, "cannot read"),
])
def test_a_malformed_history_is_one_line_with_exit_2(tmp_path, text, field, phrase):
    history = tmp_path / "history.csv"
    if text is not None:
        history.write_bytes(text)
    with pytest.raises(PersonaError) as info:
        convert(STORAGE, history=history)
    assert (info.value.file, info.value.field) == (str(history), field) and phrase in info.value.message
    proc = cli("import", "generative-agents", STORAGE, "--history", history, "--out", tmp_path / "town")
    assert proc.returncode == 2 and proc.stdout == "" and not (tmp_path / "town").exists()
    line = proc.stderr.strip()
    where = f"{history}: field '{field}'" if field else f"{history}"
    assert "\n" not in line and line.startswith(f"simulacra: error: {where}: ") and phrase in line


def test_a_file_where_a_folder_is_expected_is_named_as_a_file(tmp_path, capsys):
    """``--out`` an existing file ended in "[Errno 17] File exists", and a storage path that is a file was called
    "no such folder" (audit of stop 51)."""
    from simulacra.cli import main

    storage = copy_storage(tmp_path)
    (tmp_path / "taken").write_text("a file of the user's")
    assert main(["import", "generative-agents", str(storage), "--out", str(tmp_path / "taken")]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'taken'}: cannot hold the imported town (--out): {tmp_path / 'taken'} is a file" in err
    assert (tmp_path / "taken").read_text() == "a file of the user's"
    assert main(["import", "generative-agents", str(tmp_path / "taken"), "--out", str(tmp_path / "town")]) == 2
    assert "a file, not a folder; expected a Generative Agents storage folder" in capsys.readouterr().err
