"""simulacra generate-town: generated towns of any size pass ``simulacra check``, are the same for the same seed,
scale their places with the residents, and run."""

import json
from collections import Counter

import networkx as nx
import pytest

from simulacra.cli import main
from simulacra.cognition.plan import is_asleep
from simulacra.config import load_config
from simulacra.errors import WorldError
from simulacra.runtime import static_records
from simulacra.simulation import Simulation
from simulacra.world.generate import PUPILS_PER_SCHOOL, WORKERS_PER_WORKPLACE, generate_town, write_town
from simulacra.world.model import load_world


def files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_same_seed_gives_the_same_files_and_another_seed_another_town(tmp_path):
    write_town(tmp_path / "a" / "town.yaml", 45, seed=5)
    write_town(tmp_path / "b" / "town.yaml", 45, seed=5)
    write_town(tmp_path / "c" / "town.yaml", 45, seed=6)
    a, b, c = (files(tmp_path / x) for x in "abc")
    assert a == b and len(a) == 46
    assert a["town.yaml"] != c["town.yaml"]


@pytest.mark.parametrize("residents", [3, 17, 130])
def test_a_generated_town_passes_the_check_and_is_whole(tmp_path, residents):
    world_path, pdir = write_town(tmp_path / "worlds" / "gen.yaml", residents, seed=1)
    world = load_world(world_path)  # what simulacra check does; the world file names its personas folder
    assert len(world.personas) == residents == len(set(p.name for p in world.personas.values()))
    assert nx.is_connected(world.graph)
    kinds = Counter(p.kind for p in world.places.values())
    assert kinds["home"] >= residents / 5 and kinds["public"] >= 1
    for pid, persona in world.personas.items():
        for routine in (persona.routine, persona.rest_day_routine):
            assert routine[0].place == routine[-1].place == persona.home
            assert is_asleep(routine[-1].activity)  # the night, at home
            assert not any(is_asleep(e.activity) for e in routine[:-1])  # and no other entry reads as sleep
        for other, text in persona.relationships.items():
            assert other != pid and text
            if world.personas[other].home == persona.home:  # the household knows each other both ways
                assert pid in world.personas[other].relationships
        ages = persona.age
        workplace = persona.routine[2].place
        if persona.occupation == "pupil":
            assert 6 <= ages <= 17 and workplace.startswith("school_")
        elif not persona.occupation.startswith("retired"):
            assert 18 <= ages <= 66 and world.places[workplace].kind in ("work", "shop")
    for event in world.events:
        assert event.place in world.places
    assert any(e.public for e in world.events)


def test_places_grow_with_the_residents(tmp_path):
    small, _ = generate_town(60, seed=3)
    large, personas = generate_town(600, seed=3)
    assert len(large["places"]) > 8 * len(small["places"]) / 2
    roles = Counter("pupil" if p["occupation"] == "pupil" else "retired" if p["occupation"].startswith("retired")
                    else "worker" for p in personas.values())
    work = [pid for pid, p in large["places"].items() if p["kind"] in ("work", "shop") and not pid.startswith(
        ("school_", "tavern_", "cafe_"))]
    schools = [pid for pid in large["places"] if pid.startswith("school_")]
    assert len(schools) == -(-roles["pupil"] // PUPILS_PER_SCHOOL)
    assert len(work) == -(-roles["worker"] // WORKERS_PER_WORKPLACE)
    streets = [pid for pid in large["places"] if pid.startswith("street_")]
    assert len(streets) == 10  # about 60 residents a quarter
    xs = {tuple(p["position"]) for p in large["places"].values()}
    assert len(xs) == len(large["places"])  # every place its own spot on the map


def test_every_place_has_its_own_name_in_a_town_of_thousands():
    """Two schools called "Hawthorn School" would make a resident's memory of one of them, and a mind that names
    where it goes, ambiguous; 3,000 residents need more schools than there are street words."""
    world, personas = generate_town(3000, seed=0)
    names = Counter(p["name"] for p in world["places"].values())
    assert max(names.values()) == 1, names.most_common(3)
    assert any(n.endswith(" School 2") for n in names)  # numbered once the words are used up


def test_a_residents_static_memory_holds_the_places_it_knows_and_does_not_grow_with_the_town(tmp_path):
    sizes = {}
    for residents in (60, 600):
        write_town(tmp_path / str(residents) / "town.yaml", residents, seed=3)
        world = load_world(tmp_path / str(residents) / "town.yaml")
        place_texts: dict[str, set[str]] = {}  # description sentence -> the places it describes
        for pid, p in world.places.items():
            place_texts.setdefault(f"{p.name} ({world.name}): {p.description}", set()).add(pid)
        counts = []
        for rid, persona in world.personas.items():
            known = persona.places_known()
            routine = {e.place for e in [*persona.routine, *(persona.rest_day_routine or ())]}
            assert known is not None and {persona.home, *routine} <= known <= set(world.places)
            assert residents == 60 or len(known) < len(world.places) / 5  # 600: ten quarters, it knows one or two
            texts = [r.text for r in static_records(rid, persona, world)]
            held = [place_texts[t] for t in texts if t in place_texts]
            assert all(pids & known for pids in held)  # no sentence about a place it does not know
            assert set().union(*held) >= known  # and one about every place it knows
            counts.append(len(texts))
        sizes[residents] = (max(counts), len(world.places))
    # ten times the town, ten times the places: a resident's static memory stays about the same
    assert sizes[600][1] > 8 * sizes[60][1] and sizes[600][0] < 1.5 * sizes[60][0]


def test_a_hand_made_town_knows_every_place_and_a_broken_known_place_is_named(tmp_path):
    world = load_world("fernhollow")
    rid, persona = next(iter(world.personas.items()))
    assert persona.known_places is None and persona.places_known() is None
    descriptions = [t for t in world.facts() if t.startswith(tuple(p.name for p in world.places.values()))]
    assert len(descriptions) == len(world.places) and set(descriptions) <= {
        r.text for r in static_records(rid, persona, world)}
    write_town(tmp_path / "town.yaml", 5, seed=1)
    pfile = next((tmp_path / "town_personas").glob("*.json"))
    data = json.loads(pfile.read_text())
    data["known_places"].append("the_moon")
    pfile.write_text(json.dumps(data))
    with pytest.raises(WorldError, match="the_moon") as err:
        load_world(tmp_path / "town.yaml")
    assert str(pfile) in str(err.value) and "known_places." in str(err.value)


def test_the_command_writes_checks_and_refuses_to_overwrite(tmp_path, capsys):
    out = tmp_path / "worlds" / "town.yaml"
    assert main(["generate-town", "--residents", "12", "--seed", "4", "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "12 residents" in said and f"simulacra run --world {out}" in said
    assert main(["check", str(out)]) == 0
    assert main(["generate-town", "--residents", "12", "--out", str(out)]) == 2
    assert "exists" in capsys.readouterr().err
    assert main(["generate-town", "--residents", "2", "--out", str(tmp_path / "x.yaml")]) == 2
    assert "residents must be 3..20000" in capsys.readouterr().err
    persona = json.loads(next((tmp_path / "worlds" / "town_personas").glob("*.json")).read_text())
    assert set(persona) >= {"name", "age", "occupation", "traits", "background", "home", "routine",
                            "rest_day_routine", "relationships"}


def test_an_out_folder_or_a_negative_seed_is_refused_before_anything_is_written(tmp_path, capsys):
    folder = tmp_path / "D"
    folder.mkdir()
    # before: "Is a directory", and an empty D_personas/ left beside it
    assert main(["generate-town", "--residents", "5", "--out", str(folder), "--overwrite"]) == 2
    assert f"--out {folder}: a folder, not a world file to write" in capsys.readouterr().err
    with pytest.raises(IsADirectoryError):
        write_town(folder, 5, overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"] and not any(folder.iterdir())
    with pytest.raises(SystemExit):  # before: "expected non-negative integer", naming no option
        main(["generate-town", "--residents", "5", "--out", str(tmp_path / "x.yaml"), "--seed", "-1"])
    assert "argument --seed: '-1': expected a whole number >= 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="seed must be a whole number >= 0"):
        generate_town(5, seed=-1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["D"]


def test_a_generated_town_runs_its_residents_through_their_routines(tmp_path, embedder, rater_url):
    world_path, _ = write_town(tmp_path / "gen.yaml", 14, seed=2)
    config = load_config(None, [f"rater.url={rater_url}"])
    with Simulation.create(world_path, config, db_dir=tmp_path / "db", embedder=embedder) as sim:
        first = {pid: a.place for pid, a in sim.state.agents.items()}
        sim.run(12)  # 07:00 .. 09:00: breakfast at home, then to school and work
        moved = [pid for pid, a in sim.state.agents.items() if a.place != first[pid]]
    assert list(sim.state.agents) == load_world(world_path).residents
    assert len(moved) >= 7
