"""Towns of any size, generated: a world file and one persona file per resident that pass ``simulacra check``.

:func:`generate_town` makes, from a number of residents and a seed (numpy PCG64; the same pair gives the same files
byte for byte):

* **households** of 1 to 5 residents sharing a surname and a home (couples, parents and children 6..17, now and then a
  grandparent), grouped into **districts** of about :data:`RESIDENTS_PER_DISTRICT` residents;
* **workplaces** (one per about :data:`WORKERS_PER_WORKPLACE` working residents; a school per
  :data:`PUPILS_PER_SCHOOL` pupils) of a dozen kinds, each with its occupation, activities and objects, and
  **public places** (each district's street, one leisure place per about :data:`RESIDENTS_PER_LEISURE` residents:
  taverns, cafés, parks, a riverside);
* a **connected place graph**: each place on a path to its district's street, the streets in a ring (with cross
  streets in larger towns), and layout coordinates (districts on a grid, places around their street);
* **personas**: original names, ages, occupations, traits, a background, interests, relationships (household,
  colleagues, a neighbour), and a routine for working days and one for rest days (school for pupils, work for
  adults of working age, the town's public places for the retired), with jittered times, and the places each knows
  (``known_places``: its quarter, the streets next to its own, the homes of the residents it names), so that a
  resident's static memory stays about the same size in a town of any size;
* **events** across the first three days (a broken machine at a workplace, a notice on a street, music at a
  tavern, ...), some of them public.

Residents, places and events are listed in a fixed order (district by district), so that a town's agents are
always visited in the same order. The names and texts are this project's own.
"""

from __future__ import annotations

import errno
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import yaml

RESIDENTS_PER_DISTRICT = 60
WORKERS_PER_WORKPLACE = 8
PUPILS_PER_SCHOOL = 40
RESIDENTS_PER_LEISURE = 40
#: the weekday a generated town starts on, and its rest day
START_WEEKDAY, REST_DAYS = "Monday", ["Sunday"]

FIRST_NAMES = (
    "Ada", "Alder", "Amara", "Anselm", "Arlo", "Asha", "Astrid", "Basil", "Bea", "Benno", "Bram", "Brisa", "Cai",
    "Calla", "Cato", "Cleo", "Corin", "Dagny", "Dario", "Delphine", "Desmond", "Edda", "Eli", "Elva", "Emrys",
    "Enzo", "Esme", "Ewan", "Fenna", "Florin", "Freya", "Gideon", "Greer", "Gus", "Hale", "Hedda", "Hugo", "Ida",
    "Ilse", "Ines", "Ivo", "Jasper", "Juno", "Kai", "Kaja", "Kenji", "Kit", "Lale", "Lark", "Leif", "Lena", "Linus",
    "Lio", "Lotte", "Luca", "Mabel", "Mads", "Maren", "Mateo", "Mila", "Milo", "Mira", "Nadia", "Nell", "Nico",
    "Nils", "Noor", "Oda", "Olek", "Orla", "Otto", "Pia", "Quill", "Rafe", "Rhea", "Rosa", "Rune", "Sable", "Sami",
    "Selma", "Sven", "Talia", "Teo", "Thea", "Tobin", "Una", "Vera", "Vito", "Wren", "Xavi", "Yara", "Yusuf",
    "Zadie", "Zeno", "Agata", "Bruno", "Celia", "Dmitri", "Eira", "Farid", "Gwen", "Hamza", "Iris", "Jonas",
    "Keziah", "Lorcan", "Marta", "Nuno", "Odile", "Pavlo", "Rosalind", "Soren", "Tamsin", "Uri", "Viggo", "Wilma",
)
SURNAMES = (
    "Ashdown", "Bellweather", "Birchall", "Blackwood", "Bramley", "Brightwater", "Carrow", "Castellan", "Clay",
    "Coldwell", "Corvi", "Dale", "Delacroix", "Draper", "Dunmore", "Elling", "Farrant", "Fenwick", "Fairlie",
    "Galloway", "Garnier", "Glass", "Greaves", "Halloran", "Hartsell", "Hazelton", "Holm", "Ingram", "Jarvik",
    "Kessler", "Kinloch", "Lacey", "Larkspur", "Linden", "Lowry", "Maddox", "Marchetti", "Merrow", "Mistry",
    "Moorcroft", "Nakamura", "Nettle", "Northam", "Novik", "Oakes", "Okoro", "Orchard", "Osei", "Pellham",
    "Penhallow", "Petrov", "Quarrie", "Radley", "Ravel", "Reyes", "Rook", "Rosen", "Saltmarsh", "Sandoval", "Sato",
    "Sedge", "Shaw", "Silva", "Sorrell", "Stroud", "Sumner", "Tamber", "Thorn", "Tindall", "Torres", "Underhill",
    "Vance", "Varga", "Vesey", "Wakefield", "Walsh", "Waverly", "Weld", "Whitlock", "Winter", "Wold", "Yardley",
    "Yilmaz", "Zeller", "Abara", "Brennan", "Cordero", "Dahl", "Eskola", "Ferreira", "Gallo", "Haddad", "Ivers",
    "Jansen", "Kowal", "Lindqvist", "Mbeki", "Nilsen", "Obi", "Park", "Quintero", "Rahman", "Sandberg", "Tanaka",
    "Ueda", "Valdez", "Wojcik", "Young", "Zamora", "Achterberg", "Bellamy", "Cosgrove", "Dunleavy", "Everly",
)
STREET_WORDS = (
    "Alder", "Birch", "Cedar", "Elm", "Hawthorn", "Juniper", "Larch", "Maple", "Oak", "Poplar", "Rowan", "Spruce",
    "Willow", "Yew", "Ash", "Beech", "Chestnut", "Hazel", "Holly", "Linden", "Pine", "Sycamore", "Laurel", "Myrtle",
)
TRAITS = (
    "cheerful", "patient", "curious", "stubborn", "shy", "generous", "practical", "talkative", "careful", "proud",
    "gentle", "restless", "witty", "thrifty", "loyal", "anxious", "sociable", "quiet", "hard-working", "dreamy",
    "blunt", "kind", "meticulous", "forgetful", "ambitious", "easy-going", "nosy", "warm", "serious", "playful",
)
INTERESTS = (
    "gardening", "chess", "fishing", "baking bread", "local history", "birdwatching", "knitting", "football",
    "reading novels", "playing the fiddle", "painting", "cycling", "cards", "mending old radios", "walking",
    "cooking", "astronomy", "photography", "singing in the choir", "woodcarving", "keeping bees", "swimming",
)
SPEECH = (
    "briskly and to the point", "warmly, with lots of questions", "slowly, choosing each word",
    "in a rush of words", "drily, with a straight face", "softly, often trailing off", "loudly and with laughter",
    "politely and a little formally",
)
EVENINGS = ("reading by the lamp", "listening to the radio", "doing a jigsaw puzzle", "writing letters",
            "mending clothes", "playing cards with the household", "tidying the kitchen", "knitting by the stove")


@dataclass(frozen=True)
class WorkKind:
    """A kind of workplace: its place kind, name, the occupation of its workers, their two activities, its objects
    (``(object id suffix, name, first state)``) and an event that can happen there (text, object states)."""

    key: str
    kind: str
    name: str
    occupation: str
    activities: tuple[str, str]
    objects: tuple[tuple[str, str, str], ...]
    event: tuple[str, dict[str, str]]
    description: str


WORK_KINDS = (
    WorkKind("bakery", "shop", "Bakery", "baker", ("kneading dough and firing the oven", "serving customers at the "
             "counter"), (("oven", "bread oven", "cold"),), ("The bread oven at {place} cracks and smokes, and the "
             "morning loaves come out black.", {"oven": "cracked and smoking"}), "A warm bakery with a long counter "
             "and a brick bread oven."),
    WorkKind("workshop", "work", "Joinery", "carpenter", ("sawing planks and planing boards", "fitting a cabinet "
             "together"), (("saw_bench", "saw bench", "dusty and idle"),), ("A stack of timber at {place} topples and "
             "crushes a half-built cabinet.", {"saw_bench": "buried under fallen timber"}), "A joinery workshop that "
             "smells of sawdust and varnish."),
    WorkKind("clinic", "work", "Clinic", "nurse", ("seeing patients in the examining room", "sorting the medicine "
             "cabinet"), (("cabinet", "medicine cabinet", "locked and well stocked"),), ("The medicine cabinet at "
             "{place} is found forced open and half empty.", {"cabinet": "forced open and half empty"}),
             "A small clinic with a waiting bench and a white examining room."),
    WorkKind("forge", "work", "Forge", "blacksmith", ("hammering iron at the anvil", "shoeing a horse"),
             (("fire", "forge fire", "banked"),), ("At {place} a red-hot horseshoe slips from the tongs and sets a "
             "straw bale alight.", {"fire": "roaring and unattended"}), "A smoky forge with an anvil and a water "
             "trough."),
    WorkKind("post", "work", "Post Office", "postal clerk", ("sorting letters into pigeonholes", "selling stamps at "
             "the window"), (("sacks", "mail sacks", "neatly stacked"),), ("A mail sack at {place} turns out to hold "
             "a bundle of letters posted twenty years ago.", {"sacks": "spilled across the floor"}), "A narrow post "
             "office with a brass-barred window and walls of pigeonholes."),
    WorkKind("grocer", "shop", "Grocery", "grocer", ("stacking crates of vegetables", "weighing out flour and "
             "sugar for customers"), (("scales", "brass scales", "polished"),), ("The brass scales at {place} are "
             "found to weigh light, and customers demand their money back.", {"scales": "set aside, under suspicion"}),
             "A grocery with crates of vegetables outside and sacks of flour within."),
    WorkKind("mill", "work", "Mill", "miller", ("grinding grain at the millstones", "loading flour sacks onto "
             "carts"), (("wheel", "water wheel", "turning steadily"),), ("The water wheel at {place} jams on a "
             "floating log and stops with a groan.", {"wheel": "jammed by a log"}), "A tall timber mill whose wheel "
             "drives two millstones."),
    WorkKind("printer", "work", "Print Works", "printer", ("setting type for the weekly paper", "running the "
             "printing press"), (("press", "printing press", "inked and ready"),), ("The press at {place} tears "
             "through a whole run of the weekly paper.", {"press": "jammed with torn paper"}), "A print works with "
             "a clattering press and drying racks of paper."),
    WorkKind("tailor", "shop", "Tailor's", "tailor", ("cutting cloth for a coat", "fitting a customer's jacket"),
             (("mannequin", "dressmaker's dummy", "wearing a half-made coat"),), ("A bolt of rare blue cloth goes "
             "missing from {place}.", {"mannequin": "stripped bare"}), "A tailor's shop with bolts of cloth and a "
             "tall mirror."),
    WorkKind("hall", "work", "Town Office", "clerk", ("filing permits and records", "answering residents' "
             "questions at the desk"), (("ledger", "town ledger", "open on the desk"),), ("Water leaks through the "
             "roof of {place} onto the town ledger.", {"ledger": "soaked and swollen"}), "An office of desks, "
             "cabinets and a ticking wall clock."),
    WorkKind("garage", "work", "Garage", "mechanic", ("repairing a delivery van's engine", "patching bicycle tyres"),
             (("lift", "car lift", "lowered"),), ("The car lift at {place} gives way and a van drops onto its "
             "wheels with a bang.", {"lift": "broken, stuck halfway"}), "A garage of oil cans, tools and a car lift."),
    WorkKind("dairy", "work", "Dairy", "dairy worker", ("milking the cows", "churning butter"),
             (("churn", "butter churn", "clean"),), ("Half the herd at {place} wanders off through a broken gate.",
             {"churn": "forgotten in the rush"}), "A dairy with a cool stone room and a byre for the cows."),
)
SCHOOL = WorkKind("school", "work", "School", "teacher", ("teaching a class", "marking exercise books"),
                  (("bell", "school bell", "silent"),), ("The school bell at {place} cracks during the morning "
                  "ring.", {"bell": "cracked"}), "A schoolhouse with tall windows and rows of desks.")
LEISURE = (
    ("tavern", "shop", "Tavern", "A tavern with a big fireplace and long tables.", "having a drink at {place}",
     "A travelling band strikes up a reel at {place} and the whole room dances."),
    ("cafe", "shop", "Café", "A small café with window seats and a hissing coffee machine.", "drinking coffee at "
     "{place}", "The café at {place} runs out of milk and hands out free black coffee."),
    ("park", "nature", "Park", "A green park with a pond, a bandstand and benches under old trees.", "walking in "
     "{place}", "A pair of swans arrives on the pond at {place} and a crowd gathers to watch."),
    ("riverside", "nature", "Riverside", "A grassy riverbank with willows and a wooden jetty.", "sitting by the water "
     "at {place}", "The river at {place} rises over the jetty after the night's rain."),
)


@dataclass
class _Resident:
    id: str
    first: str
    surname: str
    age: int
    role: str  # "worker", "pupil" or "retired"
    household: int
    district: int
    workplace: str | None = None
    relationships: dict[str, str] = field(default_factory=dict)


def _time(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _slug(text: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in text.lower()).strip("_")


def _free_name(taken: set[str], first: int, pattern: str) -> str:
    """A place name not in ``taken`` (the names given so far; the new one is added to it): ``pattern`` (one ``{}``)
    filled with the street word drawn (``STREET_WORDS[first]``), else with the next free word after it, else the
    same names numbered 2, 3, ... (a town of thousands has more schools than there are words). No random draw, so
    a town whose drawn names were all free is unchanged."""
    n = len(STREET_WORDS)
    for k in range(1, len(taken) + 2):
        for j in range(n):
            name = pattern.format(STREET_WORDS[(first + j) % n]) + ("" if k == 1 else f" {k}")
            if name not in taken:
                taken.add(name)
                return name
    raise AssertionError("unreachable: fewer names taken than tried")  # pragma: no cover


def generate_town(residents: int, seed: int = 0, name: str | None = None) -> tuple[dict[str, Any], dict[str, dict]]:
    """A generated town of ``residents`` residents: ``(world, personas)``, the world file's mapping and
    ``{resident id: persona file mapping}``, both in file order (see the module docstring).

    Args:
        residents: 3 .. 20,000.
        seed: the generator's seed; the same ``(residents, seed)`` gives the same town.
        name: the town's name (default: generated from the seed).
    Raises:
        ValueError: ``residents`` out of range.
    """
    if not 3 <= residents <= 20_000:
        raise ValueError(f"residents must be 3..20000, got {residents}")
    if isinstance(seed, bool) or not (isinstance(seed, (int, np.integer)) and seed >= 0):  # numpy's names nothing
        raise ValueError(f"seed must be a whole number >= 0, got {seed!r}")
    rng = np.random.default_rng([seed, residents])
    town = name or f"{STREET_WORDS[int(rng.integers(len(STREET_WORDS)))]}mere"

    # ----------------------------------------------------------- households and people
    sizes: list[int] = []
    while sum(sizes) < residents:
        sizes.append(int(rng.choice([1, 2, 2, 3, 3, 4, 4, 5])))
    sizes[-1] -= sum(sizes) - residents
    sizes = [s for s in sizes if s > 0]
    districts = max(1, math.ceil(residents / RESIDENTS_PER_DISTRICT))
    used: set[tuple[str, str]] = set()
    people: list[_Resident] = []
    homes: list[tuple[str, str, int]] = []  # (place id, name, district)
    for h, size in enumerate(sizes):
        district = h * districts // len(sizes)
        surname = SURNAMES[int(rng.integers(len(SURNAMES)))]
        free = [f for f in FIRST_NAMES if (f, surname) not in used]
        while len(free) < size:  # this surname is used up: another
            surname = SURNAMES[int(rng.integers(len(SURNAMES)))]
            free = [f for f in FIRST_NAMES if (f, surname) not in used]
        firsts = [free[int(i)] for i in rng.choice(len(free), size=size, replace=False)]
        home_id = f"home_{h + 1}"
        homes.append((home_id, f"{surname} House, {STREET_WORDS[district % len(STREET_WORDS)]} Street no. {h + 1}",
                      district))
        if size == 1:
            ages = [int(rng.integers(19, 88))]
        else:
            first_age = int(rng.integers(24, 80)) if size == 2 else int(rng.integers(30, 52))
            ages = [first_age, max(19, first_age + int(rng.integers(-4, 5)))]
            for k in range(size - 2):
                grandparent = size == 5 and k == 0 and rng.random() < 0.5
                ages.append(int(rng.integers(68, 90)) if grandparent else int(rng.integers(6, 18)))
        for first, age in zip(firsts, ages):
            used.add((first, surname))
            role = "pupil" if age < 18 else "retired" if age >= 67 else "worker"
            people.append(_Resident(f"{_slug(first)}_{_slug(surname)}", first, surname, age, role, h, district))

    # ----------------------------------------------------------- places
    places: dict[str, dict[str, Any]] = {}
    objects: list[dict[str, Any]] = []
    paths: list[list[str]] = []
    side = math.ceil(math.sqrt(districts))
    centres = [(100.0 * (d % side) + 50.0, 100.0 * (d // side) + 50.0) for d in range(districts)]
    members: dict[int, list[str]] = {d: [] for d in range(districts)}  # district -> its places (not its street)
    streets = []
    for d in range(districts):
        word = STREET_WORDS[d % len(STREET_WORDS)] + ("" if d < len(STREET_WORDS) else f" {d // len(STREET_WORDS) + 1}")
        sid = f"street_{d + 1}"
        streets.append(sid)
        places[sid] = {"name": f"{word} Street", "kind": "public", "description": f"The main street of {town}'s "
                       f"{word} quarter, cobbled, with a notice board and a pump.", "position": list(centres[d])}
        objects.append({"id": f"{sid}_board", "place": sid, "name": "notice board", "state": "a few old notices"})
    for hid, hname, d in homes:
        places[hid] = {"name": hname, "kind": "home", "description": "A family home with a kitchen, a small garden "
                       "and a gate onto the street.", "position": [0.0, 0.0]}
        members[d].append(hid)
    workers = [p for p in people if p.role == "worker"]
    pupils = [p for p in people if p.role == "pupil"]
    n_schools = math.ceil(len(pupils) / PUPILS_PER_SCHOOL) if pupils else 0
    n_work = max(1, math.ceil(len(workers) / WORKERS_PER_WORKPLACE)) if workers else 0
    kinds = [WORK_KINDS[i % len(WORK_KINDS)] for i in rng.permutation(max(n_work, len(WORK_KINDS)))][:n_work]
    names = {p["name"] for p in places.values()}  # streets and homes: the names given so far (_free_name)
    workplaces: list[tuple[str, WorkKind]] = []
    for i, kind in enumerate([SCHOOL] * n_schools + kinds):
        d = int(rng.integers(districts)) if i >= n_schools else i * districts // max(1, n_schools)
        wid = f"{kind.key}_{i + 1}"
        places[wid] = {"name": _free_name(names, int(rng.integers(len(STREET_WORDS))), "{} " + kind.name),
                       "kind": kind.kind, "description": kind.description, "position": [0.0, 0.0]}
        members[d].append(wid)
        workplaces.append((wid, kind))
        for suffix, oname, state in kind.objects:
            objects.append({"id": f"{wid}_{suffix}", "place": wid, "name": oname, "state": state})
    leisure: list[tuple[str, tuple]] = []
    for i in range(max(2, math.ceil(residents / RESIDENTS_PER_LEISURE))):
        spec = LEISURE[i % len(LEISURE)]
        d = i % districts
        lid = f"{spec[0]}_{i + 1}"
        places[lid] = {"name": _free_name(names, int(rng.integers(len(STREET_WORDS))), "The {} " + spec[2]),
                       "kind": spec[1], "description": spec[3], "position": [0.0, 0.0]}
        members[d].append(lid)
        leisure.append((lid, spec))
    for d in range(districts):  # layout: around the street, homes on the inner ring, the rest outside
        cx, cy = centres[d]
        ids = members[d]
        for k, pid in enumerate(ids):
            angle = 2 * math.pi * k / max(1, len(ids))
            radius = 22.0 + 18.0 * (k % 2)
            places[pid]["position"] = [round(cx + radius * math.cos(angle), 2), round(cy + radius * math.sin(angle), 2)]
            paths.append([streets[d], pid])
    for d in range(1, districts):  # streets: a ring (a line for two), a cross street every third
        paths.append([streets[d - 1], streets[d]])
    if districts >= 3:
        paths.append([streets[-1], streets[0]])
    linked = {frozenset(x) for x in paths}
    for d in range(0, districts - side, 3):
        if frozenset((streets[d], streets[d + side])) not in linked:
            paths.append([streets[d], streets[d + side]])

    # ----------------------------------------------------------- jobs, relationships
    home_of = {p.id: homes[p.household][0] for p in people}
    schools = [w for w in workplaces if w[1] is SCHOOL]
    jobs = [w for w in workplaces if w[1] is not SCHOOL]
    by_workplace: dict[str, list[_Resident]] = {}
    for i, p in enumerate(workers):
        if i < len(schools) * 2 and schools:  # two teachers per school
            p.workplace = schools[i % len(schools)][0]
        else:
            p.workplace = jobs[i % len(jobs)][0] if jobs else schools[i % len(schools)][0]
        by_workplace.setdefault(p.workplace, []).append(p)
    for p in pupils:
        p.workplace = schools[(p.district * len(schools)) // districts][0]
    names = {p.id: f"{p.first} {p.surname}" for p in people}
    households: dict[int, list[_Resident]] = {}
    for p in people:
        households.setdefault(p.household, []).append(p)
    for group in households.values():
        adults = [p for p in group if p.role != "pupil"]
        for p in group:
            for q in group:
                if q is p:
                    continue
                if p.role == "pupil" and q.role != "pupil":
                    p.relationships[q.id] = "a parent or grandparent at home"
                elif q.role == "pupil":
                    p.relationships[q.id] = ("a child of the household" if p.role != "pupil" else
                                             "a brother or sister at home")
                elif len(adults) >= 2 and p in adults[:2] and q in adults[:2]:
                    p.relationships[q.id] = "partner and housemate of many years"
                else:
                    p.relationships[q.id] = "family, sharing the house"
    for wid, staff in by_workplace.items():
        for k, p in enumerate(staff):
            for q in (staff[(k + 1) % len(staff)], staff[(k - 1) % len(staff)]):
                if q is not p and q.id not in p.relationships:
                    p.relationships[q.id] = f"a colleague at {places[wid]['name']}"
    by_district: dict[int, list[_Resident]] = {}
    for p in people:
        by_district.setdefault(p.district, []).append(p)
    for p in people:
        pool = [q for q in by_district[p.district] if q.household != p.household and q.id not in p.relationships]
        if pool:
            q = pool[int(rng.integers(len(pool)))]
            p.relationships[q.id] = "a neighbour and friend"
            q.relationships.setdefault(p.id, "a neighbour and friend")

    # ----------------------------------------------------------- personas
    near_leisure = {d: [lid for lid, _ in leisure if lid in members[d]] or [leisure[d % len(leisure)][0]]
                    for d in range(districts)}
    kind_of = dict(workplaces)
    # what a resident knows of the town (static memory): its quarter (its street and every place on it), the streets
    # next to its own, and the homes of the residents it names; so its static memory does not grow with the town
    street_set = set(streets)
    next_streets: dict[str, set[str]] = {s: set() for s in streets}
    for a, b in paths:
        if a in street_set and b in street_set:
            next_streets[a].add(b)
            next_streets[b].add(a)
    personas: dict[str, dict] = {}
    for p in people:
        home = home_of[p.id]
        street = streets[p.district]
        fun = near_leisure[p.district][int(rng.integers(len(near_leisure[p.district])))]
        fun_spec = dict(leisure)[fun]
        fun_name = places[fun]["name"]
        wake = int(rng.integers(39, 46)) * 10  # 06:30 .. 07:30
        bed = int(rng.integers(129, 138)) * 10  # 21:30 .. 22:50
        evening = EVENINGS[int(rng.integers(len(EVENINGS)))]
        if p.role == "worker":
            kind = kind_of[p.workplace]
            start = max(wake + 40, int(rng.integers(45, 55)) * 10)  # 07:30 .. 09:00
            end = int(rng.integers(96, 108)) * 10  # 16:00 .. 17:50
            occupation = kind.occupation
            routine = [(wake, "waking up and washing", home), (wake + 20, "eating breakfast", home),
                       (start, kind.activities[0], p.workplace), (720, f"having lunch at {fun_name}", fun),
                       (780, kind.activities[1], p.workplace), (end, f"meeting neighbours on {places[street]['name']}",
                                                                street),
                       (end + 60, "cooking and eating supper", home), (1200, evening, home), (bed, "going to sleep",
                                                                                                home)]
            background = (f"{p.first} works as {_a(occupation)} at {places[p.workplace]['name']} and lives at "
                          f"{places[home]['name']}.")
        elif p.role == "pupil":
            occupation = "pupil"
            routine = [(wake, "waking up and washing", home), (wake + 20, "eating breakfast", home),
                       (500, "having lessons", p.workplace), (930, f"playing on {places[street]['name']}", street),
                       (1050, "doing homework", home), (1110, "eating supper", home),
                       (min(bed, 1290), "going to sleep", home)]
            background = f"{p.first} is {p.age} and goes to {places[p.workplace]['name']}."
        else:
            occupation = "retired " + WORK_KINDS[int(rng.integers(len(WORK_KINDS)))].occupation
            routine = [(wake, "waking up slowly with a cup of tea", home), (wake + 40, "eating breakfast", home),
                       (600, f"chatting on {places[street]['name']}", street),
                       (720, fun_spec[4].format(place=fun_name), fun), (870, "napping in an armchair", home),
                       (960, f"strolling along {places[street]['name']}", street),
                       (1080, "eating supper", home), (1170, evening, home), (min(bed, 1290), "going to sleep", home)]
            background = f"{p.first} spent a working life as {_a(occupation[8:])} and now has time for the town."
        outing = (f"playing with friends at {fun_name}" if p.role == "pupil" else fun_spec[4].format(place=fun_name))
        rest = [(wake + 60, "a slow breakfast after a lie-in", home),
                (660, f"walking to {places[street]['name']} for the Sunday market", street),
                (780, "eating a long lunch with the household", home),
                (900, outing, fun),
                (1080, "eating supper", home), (1170, evening, home), (bed, "going to sleep", home)]
        traits = [TRAITS[int(i)] for i in rng.choice(len(TRAITS), size=3, replace=False)]
        interests = [INTERESTS[int(i)] for i in rng.choice(len(INTERESTS), size=2, replace=False)]
        personas[p.id] = {
            "name": names[p.id], "age": p.age, "occupation": occupation, "traits": traits,
            "background": f"{background} {p.first} has lived in {town} all {'their' if p.age < 30 else 'these'} years "
                          f"and knows most faces on {places[street]['name']}.",
            "home": home,
            "lifestyle": f"Usually up by {_time(wake)} and in bed by {_time(bed)}.",
            "speech_style": SPEECH[int(rng.integers(len(SPEECH)))],
            "interests": interests,
            "routine": [{"start": _time(t), "activity": a, "place": w} for t, a, w in routine],
            "rest_day_routine": [{"start": _time(t), "activity": a, "place": w} for t, a, w in rest],
            "relationships": {other: p.relationships[other] for other in p.relationships},
            "known_places": sorted({street, *members[p.district], *next_streets[street],
                                    *(home_of[other] for other in p.relationships)} - {home}),
        }

    # ----------------------------------------------------------- events
    events: list[dict[str, Any]] = []
    n_events = max(4, math.ceil(residents / 25))
    for k in range(n_events):
        day = 1 + k % 3
        minute = int(rng.integers(48, 120)) * 10  # 08:00 .. 19:50
        choice = k % 3
        if choice == 0 and workplaces:
            wid, kind = workplaces[int(rng.integers(len(workplaces)))]
            text, states = kind.event
            events.append({"time": _time(minute), "day": day, "place": wid, "text": text.format(place=places[wid]
                          ["name"]), "importance_hint": "notable",
                           "object_states": {f"{wid}_{suffix}": s for suffix, s in states.items()}})
        elif choice == 1:
            sid = streets[int(rng.integers(len(streets)))]
            what = ("a harvest supper", "a boat race", "a lantern walk", "a jumble sale")[k % 4]
            weekday = ("Friday", "Saturday")[k % 2]
            events.append({"time": _time(minute), "day": day, "place": sid, "text": f"A notice goes up on "
                           f"{places[sid]['name']}: {town} will hold {what} on {weekday} evening, and volunteers are "
                           f"wanted.", "importance_hint": "notable", "public": True,
                           "object_states": {f"{sid}_board": f"covered in notices about {what}"}})
        else:
            lid, spec = leisure[int(rng.integers(len(leisure)))]
            events.append({"time": _time(minute), "day": day, "place": lid, "text": spec[5].format(
                place=places[lid]["name"]), "importance_hint": "minor"})
    events.sort(key=lambda e: (e["day"], e["time"]))

    world = {
        "name": town,
        "description": f"{town} is a generated town of {residents} residents in {districts} quarter"
                       f"{'s' if districts > 1 else ''}, with {len(workplaces)} workplaces and {len(leisure)} places "
                       f"to meet.",
        "start_time": "07:00", "end_time": "23:00", "tick_minutes": 10, "edges_per_tick": 1,
        "rules": ["Everyone walks, and walking one path between two places takes about ten minutes.",
                  "Homes are private; the streets, parks and riversides are open to all at any hour.",
                  "Shops open at eight and close at six; the taverns serve until eleven."],
        "shared_memory": True,
        "start_weekday": START_WEEKDAY, "rest_days": list(REST_DAYS),
        "places": places, "paths": paths, "objects": objects, "events": events,
        "residents": [p.id for p in people],
    }
    return world, personas


def _a(noun: str) -> str:
    return ("an " if noun[:1] in "aeiou" else "a ") + noun


def write_town(out: str | Path, residents: int, seed: int = 0, personas_dir: str | Path | None = None,
               overwrite: bool = False, name: str | None = None) -> tuple[Path, Path]:
    """Write :func:`generate_town`'s world to ``out`` (YAML) and its personas as ``<id>.json`` files into
    ``personas_dir`` (default: the folder ``<out stem>_personas`` beside ``out``); the world file names that
    folder (``personas_dir``, relative to the world file), so ``simulacra run --world out`` finds them.

    Returns:
        ``(world path, personas folder)``.
    Raises:
        FileExistsError: ``out`` or a persona file exists and ``overwrite`` is false.
        ValueError: ``residents`` or ``seed`` out of range.
        IsADirectoryError: ``out`` is a folder (nothing is written).
    """
    world, personas = generate_town(residents, seed, name=name)
    header = f"# generated by: simulacra generate-town --residents {residents} --seed {seed}\n"
    return write_world(out, world, personas, personas_dir, overwrite, header)


def write_world(out: str | Path, world: dict[str, Any], personas: dict[str, dict],
                personas_dir: str | Path | None = None, overwrite: bool = False, header: str = "") -> tuple[Path, Path]:
    """Write a town given as mappings: ``world`` (the world file's mapping, in file order) to ``out`` as YAML after
    the comment lines ``header``, and each of ``personas`` (``{resident id: persona mapping}``) as ``<id>.json``
    into ``personas_dir`` (default: the folder ``<out stem>_personas`` beside ``out``). The world file names that
    folder (``personas_dir``, relative to the world file when it is below it), so ``simulacra run --world out``
    finds them. The same mappings give the same bytes.

    Returns:
        ``(world path, personas folder)``.
    Raises:
        FileExistsError: ``out`` or a persona file exists and ``overwrite`` is false.
        IsADirectoryError: ``out`` is a folder (checked before anything is made, also with ``overwrite``).
    """
    out = Path(out)
    pdir = Path(personas_dir) if personas_dir is not None else out.parent / f"{out.stem}_personas"
    if out.is_dir():
        raise IsADirectoryError(errno.EISDIR, "a folder, not a world file to write (e.g. "
                                              f"{out / 'world.yaml'})", str(out))
    if not overwrite:
        taken = [str(x) for x in [out, *(pdir / f"{pid}.json" for pid in personas)] if x.exists()]
        if taken:
            raise FileExistsError(f"{taken[0]} exists ({len(taken)} of the files to write do); pass --overwrite")
    out.parent.mkdir(parents=True, exist_ok=True)
    pdir.mkdir(parents=True, exist_ok=True)
    try:
        rel = pdir.resolve().relative_to(out.parent.resolve())
    except ValueError:
        rel = pdir.resolve()
    world = {**world, "personas_dir": str(rel)}
    out.write_text(header + yaml.safe_dump(world, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
    for pid, persona in personas.items():
        (pdir / f"{pid}.json").write_text(json.dumps(persona, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out, pdir
