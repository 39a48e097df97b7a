"""Persona, world and config files: every error names the file and the field."""

import json
import shutil
from pathlib import Path

import networkx as nx
import pytest
import yaml

from simulacra.config import load_config
from simulacra.errors import ConfigError, PersonaError, WorldError
from simulacra.persona import load_persona
from simulacra.world import check_world, load_world
from tests.conftest import DATA, ROOT


@pytest.fixture
def town(tmp_path):
    """A writable copy of the tiny test world and its personas."""
    shutil.copy(DATA / "tiny.yaml", tmp_path / "tiny.yaml")
    shutil.copytree(DATA / "personas", tmp_path / "personas")
    return tmp_path


def edit_json(path: Path, change):
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))


def edit_yaml(path: Path, change):
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data))


# ---- every shipped file is valid (Gymnasium's check_env idea) ----
@pytest.mark.parametrize("world", sorted((ROOT / "worlds").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_worlds_are_valid(world):
    w = check_world(world)
    assert len(w.personas) >= 8


@pytest.mark.parametrize("persona", sorted((ROOT / "agent_personalities").glob("*.json")), ids=lambda p: p.stem)
def test_shipped_personas_are_valid(persona):
    assert load_persona(persona).id == persona.stem


# ---- persona errors ----
def test_persona_missing_field(town):
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d.pop("occupation"))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.file == str(p) and e.value.field == "occupation"
    assert "ann.json" in str(e.value) and "occupation" in str(e.value)


def test_persona_wrong_type(town):
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d.update(age="forty"))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field == "age"


def test_persona_bad_routine_time(town):
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d["routine"][1].update(start="8.20"))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field == "routine.1.start" and "HH:MM" in e.value.message


@pytest.mark.parametrize("start", ["7:3", "07:3\u00b2", "07:3 0", "\uff10\uff17:30"])
def test_persona_routine_time_needs_two_ascii_digit_minutes(town, start):
    """"7:3" is a typo (of 07:30? 07:03?), not 07:03; a superscript or full-width digit is no digit of a time: a
    clear message naming the field, never int()'s."""
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d["routine"][1].update(start=start))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field == "routine.1.start" and "two-digit minutes" in e.value.message
    assert "invalid literal" not in e.value.message


def test_persona_routine_out_of_order(town):
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d["routine"][2].update(start="08:10"))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field == "routine" and "not after" in e.value.message


def test_persona_unknown_field(town):
    p = town / "personas" / "ann.json"
    edit_json(p, lambda d: d.update(nickname="Annie"))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field == "nickname"


def test_persona_not_json(town):
    p = town / "personas" / "ann.json"
    p.write_text("{ not json")
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field is None and "not valid JSON" in str(e.value) and "line 1" in str(e.value)


# ---- world errors ----
def test_world_path_to_unknown_place(town):
    w = town / "tiny.yaml"
    edit_yaml(w, lambda d: d["paths"].append(["well", "moon"]))
    with pytest.raises(WorldError) as e:
        load_world(w, town / "personas")
    assert e.value.file == str(w) and e.value.field == "paths.3.1" and "moon" in e.value.message


def test_routine_to_unknown_place_names_both_files(town):
    p = town / "personas" / "ben.json"
    edit_json(p, lambda d: d["routine"][1].update(place="harbour"))
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.file == str(p) and e.value.other_file == str(town / "tiny.yaml")
    assert e.value.field == "routine.1.place" and "harbour" in str(e.value)


def test_unknown_relationship(town):
    edit_json(town / "personas" / "cal.json", lambda d: d["relationships"].update(zed="a stranger"))
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.field == "relationships.zed" and "cal.json" in e.value.file


def test_disconnected_places(town):
    w = town / "tiny.yaml"
    edit_yaml(w, lambda d: d["paths"].remove(["shop", "field"]))
    with pytest.raises(WorldError) as e:
        load_world(w, town / "personas")
    assert e.value.field == "paths" and "not all connected" in e.value.message


def test_event_changes_unknown_object(town):
    w = town / "tiny.yaml"
    edit_yaml(w, lambda d: d["events"][0]["object_states"].update(anvil="broken"))
    with pytest.raises(WorldError) as e:
        load_world(w, town / "personas")
    assert e.value.field == "events.0.object_states.anvil"


def test_resident_without_persona_file(town):
    (town / "personas" / "cal.json").unlink()
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.field == "residents.2" and "cal.json" in e.value.message


def test_world_missing_field(town):
    w = town / "tiny.yaml"
    edit_yaml(w, lambda d: d.pop("places"))
    with pytest.raises(WorldError) as e:
        load_world(w, town / "personas")
    assert e.value.field == "places"


def test_world_bad_place_kind(town):
    w = town / "tiny.yaml"
    edit_yaml(w, lambda d: d["places"]["well"].update(kind="castle"))
    with pytest.raises(WorldError) as e:
        load_world(w, town / "personas")
    assert e.value.field == "places.well.kind"


def test_routine_object_in_another_place(town):
    edit_json(town / "personas" / "ben.json", lambda d: d["routine"][0].update(object_state={"bucket": "full"}))
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.field == "routine.0.object_state.bucket" and "is at 'well'" in e.value.message


# ---- config errors ----
def test_config_unknown_key(tmp_path):
    c = tmp_path / "c.yaml"
    c.write_text("memory:\n  a_recency: 0.3\n")
    with pytest.raises(ConfigError) as e:
        load_config(c)
    assert e.value.field == "memory.a_recency" and str(c) in str(e.value)


def test_config_override_out_of_range():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["memory.gamma=1.5"])
    assert e.value.field == "memory.gamma"


def test_config_malformed_override():
    with pytest.raises(ConfigError) as e:
        load_config(None, ["gamma=0.9"])
    assert "section.field=value" in str(e.value)


def test_config_yaml_and_overrides_apply():
    c = load_config(None, ["memory.a_rec=0.5", "memory.forget_floor=null", "simulation.seed=7"])
    assert (c.memory.a_rec, c.memory.forget_floor, c.simulation.seed) == (0.5, None, 7)
    assert (c.memory.a_imp, c.memory.a_rel, c.memory.threshold) == (0.25, 1.0, 0.35)  # seed 003 defaults


@pytest.mark.parametrize("value", ["23:00", "10:30", "9:30", "07:15"])
def test_config_override_of_a_clock_time_stays_a_time(tmp_path, value):
    """--set reads its value as a config file is read: YAML 1.1's base-60 integer (23:00 -> 1380) is not a clock
    time's reading, in a file or on the command line."""
    assert load_config(None, [f"memory.day_summary_time={value}"]).memory.day_summary_time == value
    c = tmp_path / "c.yaml"
    c.write_text(f"memory:\n  day_summary_time: {value}\n")
    assert load_config(c).memory.day_summary_time == value
    assert load_config(None, ["simulation.seed=7"]).simulation.seed == 7  # numbers are still numbers


def test_config_override_giving_a_key_twice_is_named():
    with pytest.raises(ConfigError, match="key 'recall' given twice") as e:
        load_config(None, ["memory.profiles={recall: {a_rec: 0}, recall: {a_imp: 0}}"])
    assert e.value.file == "--set"


@pytest.mark.parametrize("sets, words", [
    (["memory.threshold=9"], "threshold 9 is above 1.5, the highest score"),
    (["memory.threshold=1.51"], "expected memory.threshold at most 1.5"),
    (["memory.a_rec=0", "memory.threshold=1.3"], "expected memory.threshold at most 1.25"),
    (["memory.profiles={recall: {a_rec: 0, a_imp: 0.1, threshold: 1.2}}"],
     "profiles.recall.threshold 1.2 is above 1.1, the highest score a memory can get under profile recall's"),
])
def test_config_threshold_no_memory_can_reach_is_refused(sets, words):
    """Every term of the score is at most 1, so a threshold above a_rec + a_imp + a_rel (the section's, or a
    profile's) made every retrieval return nothing; the highest score itself is reached (under minmax or RRF the
    best memory's relevance is 1, and selection keeps scores >= the threshold)."""
    with pytest.raises(ConfigError) as e:
        load_config(None, sets)
    assert e.value.field == "memory" and words in str(e.value)
    # the highest score passes (the section's default weights: 1.5; the recall profile's: 1.1); a profile without a
    # threshold of its own takes the section's, which simulacra tune varies alone
    c = load_config(None, ["memory.threshold=1.5",
                           "memory.profiles={recall: {a_rec: 0, a_imp: 0.1, threshold: 1.1}}"])
    assert (c.memory.threshold, c.memory.for_profile("recall").threshold) == (1.5, 1.1)
    assert load_config(None, ["memory.threshold=1.1"]).memory.for_profile("recall").threshold == 1.1
    minmax = load_config(None, ["memory.a_rec=0", "memory.a_imp=0", "memory.threshold=1.0",
                                "memory.normalize=minmax"]).memory  # what tune's grids can write
    assert minmax.threshold == 1.0


# ---- the week: rest days and rest-day routines ----
def test_rest_day_routine_place_is_checked_against_the_world(town):
    p = town / "personas" / "ben.json"
    edit_json(p, lambda d: d.update(rest_day_routine=[dict(d["routine"][0]), {**d["routine"][1], "place": "harbour"}]))
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.file == str(p) and e.value.field == "rest_day_routine.1.place" and "harbour" in str(e.value)


def test_rest_day_routine_out_of_order(town):
    p = town / "personas" / "ben.json"
    edit_json(p, lambda d: d.update(rest_day_routine=list(reversed(d["routine"]))))
    with pytest.raises(PersonaError) as e:
        load_persona(p)
    assert e.value.field.startswith("rest_day_routine")


def test_weekdays_and_rest_day_routine(town):
    edit_yaml(town / "tiny.yaml", lambda d: d.update(start_weekday="Friday", rest_days=["Sunday"]))
    edit_json(town / "personas" / "ben.json",
              lambda d: d.update(rest_day_routine=[{"start": "06:00", "activity": "sleeping in", "place": d["home"]}]))
    w = load_world(town / "tiny.yaml", town / "personas")
    day = 24 * 60
    assert [w.weekday(k * day + 600) for k in range(4)] == ["Friday", "Saturday", "Sunday", "Monday"]
    assert [w.is_rest_day(k * day) for k in range(4)] == [False, False, True, False]
    ben = w.personas["ben"]
    assert ben.routine_at(700, rest_day=True)[1].activity == "sleeping in"
    assert ben.routine_at(700)[1].activity == ben.routine_at(700, rest_day=False)[1].activity != "sleeping in"
    edit_yaml(town / "tiny.yaml", lambda d: d.update(rest_days=["Sundy"]))
    with pytest.raises(WorldError) as e:
        load_world(town / "tiny.yaml", town / "personas")
    assert e.value.field.startswith("rest_days")


# ---- routes (networkx breadth-first search) ----
def test_route_is_shortest_and_ties_do_not_depend_on_the_order_of_paths(town):
    edit_yaml(town / "tiny.yaml", lambda d: d["paths"].append(["shop", "cottage_a"]) or d["paths"].append(
        ["field", "well"]))  # cottage_a -> field: via shop or via well, two paths of two steps
    w = load_world(town / "tiny.yaml", town / "personas")
    places = sorted(w.places)
    for a in places:
        for b in places:
            r = w.route(a, b)
            assert r[0] == a and r[-1] == b
            assert all(w.graph.has_edge(x, y) for x, y in zip(r, r[1:]))
            assert len(r) - 1 == nx.shortest_path_length(w.graph, a, b)
    edit_yaml(town / "tiny.yaml", lambda d: d.update(paths=[[b, a] for a, b in reversed(d["paths"])]))
    w2 = load_world(town / "tiny.yaml", town / "personas")
    assert all(w2.route(a, b) == w.route(a, b) for a in places for b in places)
    assert w.route("cottage_a", "field") == ["cottage_a", "shop", "field"]  # shop comes before well by name
    with pytest.raises(ValueError, match="no path"):
        w.route(places[0], "nowhere")
