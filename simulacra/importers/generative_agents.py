"""Import a Generative Agents town (Park et al. 2023, github.com/joonspk-research/generative_agents, Apache-2.0):
``simulacra import generative-agents <storage folder> [--assets <the_ville folder>] --out <folder>``.

What is read, at run time, from the user's copy of that project (nothing of it ships with simulacra):

* the **storage folder** of a simulation: a base such as ``environment/frontend_server/storage/base_the_ville_n25``
  or a saved simulation's folder beside it. Both hold ``personas/<Name>/bootstrap_memory/scratch.json`` (name, age,
  innate, learned, currently, lifestyle, living_area, daily_plan_req; a saved simulation also the day's schedule
  ``f_daily_schedule``, ``[activity, minutes]`` pairs from midnight) and ``spatial_memory.json`` (world -> sector
  -> arena -> game objects the resident knows); ``reverie/meta.json``, when present, gives the residents' order and
  the simulation's date;
* with ``--assets``, the **map**: ``matrix/maze_meta_info.json``, ``matrix/special_blocks/sector_blocks.csv`` and the
  tile matrices ``matrix/maze/sector_maze.csv`` and ``matrix/maze/collision_maze.csv`` (one row of
  width x height block ids each, as the Tiled map ``visuals/the_ville_jan7.json`` was exported);
* a **seed history** (:func:`read_history`): ``agent_history_init_n<residents>.csv`` in the ``--assets`` folder, or
  the file given with ``--history``: per resident, statements that Generative Agents whispers into its memory
  before the first step.

What is written (:func:`import_generative_agents`): ``world.yaml``, ``personas/<id>.json`` and
``import_report.json`` into the output folder, with the writer of generated towns
(:func:`simulacra.world.generate.write_world`), then checked as ``simulacra check`` does; for a town with the
paper's Isabella Rodriguez and Sam Moore, also the scenarios of the paper's party and election experiments
(:func:`paper_scenarios`: ``smallville-party.yaml``, ``smallville-election.yaml``, ``smallville-two-days.yaml``).

How the town is converted (docs/import.md has the same with examples):

* **Places are sectors.** Each sector of the residents' spatial memories (and of the map) is one place; its arenas
  are named in the place's description and their game objects become the place's world objects (``"bed in Abigail
  Chen's room"`` where a sector has several arenas), state ``"idle"`` as in Generative Agents. A sector holding a
  resident's ``living_area`` is a home; other kinds are read off the sector's and arenas' names. Arenas are not
  places of their own: simulacra's residents meet whoever is at the same place, and a house's bathroom or a
  college's hallway would only split its people apart.
* **Streets.** Without a map, one place, the town's streets, is joined to every sector, and the layout is
  networkx's ``spring_layout`` (seed 0). With a map, each sector's doorsteps (walkable tiles outside it next to a
  walkable tile of it) are found; sectors whose doorsteps are all within :data:`STREET_SPAN_TILES` tiles' walk of
  each other (complete linkage) share a street place; streets are joined along the relative neighbourhood graph
  of the walking distances (with its minimum spanning tree, so every street is reachable), and sectors whose
  walkable tiles touch are joined directly. Positions are tile centres scaled to 0..100 (the viewer scales them
  again); ``edges_per_tick`` is chosen so that a tick's walk covers about as many tiles as Generative Agents'
  residents walk in :data:`TICK_MINUTES` minutes (one tile per 10-second step).
* **Personas.** name, age, traits (``innate``), occupation (read from ``learned``: "X is a <occupation> who ..."),
  background (``learned`` and ``currently``), lifestyle (as written), home (the ``living_area``'s sector),
  relationships (the sentences of a resident's texts and seed history that name another resident, and housemates;
  the history's other statements join the background), the places it knows (``known_places``: the sectors of its
  spatial memory and the streets joined to them, as Generative Agents' residents know no others), and a routine:
  a saved simulation's ``f_daily_schedule`` when present (each step at the place its words name, else at home for
  sleep, waking, dinner, television and the like, else where the step before was); otherwise wake-up, bedtime and
  dinner read from ``lifestyle``, the workplace and work hours from ``learned`` and ``daily_plan_req``, lunch and
  leisure at places named there or, when none is, at places the resident knows (chosen by a hash of the name, so
  the same input gives the same town). Every default, choice and ambiguity is a line of the import report, naming
  the file and the field.

Bad input (not a storage folder, a scratch file missing a field, a living area naming no known place, a malformed
map) raises :class:`~simulacra.errors.WorldError` or :class:`~simulacra.errors.PersonaError` naming the file and
the field, which the CLI prints as one line with exit status 2.
"""

from __future__ import annotations

import csv
import difflib
import hashlib
import io
import json
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import networkx as nx
import numpy as np
import yaml

from simulacra.errors import InputError, PersonaError, SimulacraError, WorldError, read_text, unknown_name
from simulacra.text import join_words

log = logging.getLogger(__name__)

#: the fields of a Generative Agents ``scratch.json`` the importer reads (each must be present)
SCRATCH_FIELDS = ("name", "age", "innate", "learned", "currently", "lifestyle", "living_area", "daily_plan_req")
#: used when ``lifestyle`` states no time (each use is reported): wake-up, bedtime, dinner (minutes after midnight)
DEFAULT_WAKE, DEFAULT_BED, DEFAULT_DINNER = 7 * 60, 23 * 60, 18 * 60
#: work hours used when ``daily_plan_req`` names a workplace but no time, and a shift's length when only its start is
DEFAULT_WORK, DEFAULT_SHIFT = (9 * 60, 17 * 60), 8 * 60
#: a routine's days end at midnight: a bedtime at or after midnight starts the night at this minute (reported)
LATEST_NIGHT = 23 * 60 + 50
#: sectors whose doorsteps are all within this walk (tiles) of each other share a street (complete linkage)
STREET_SPAN_TILES = 30
#: the imported world's tick, and the tiles a Generative Agents resident walks in it (one per 10-second step)
TICK_MINUTES = 10
TILES_PER_TICK = TICK_MINUTES * 6
#: the state of every imported object (Generative Agents' own word for an object nobody uses)
OBJECT_STATE = "idle"
WORLD_FILE, PERSONAS_DIR, REPORT_FILE = "world.yaml", "personas", "import_report.json"
#: the seed-history file looked for in the ``--assets`` folder, for a town of ``n`` residents (Generative Agents
#: ships ``agent_history_init_n25.csv`` and ``agent_history_init_n3.csv`` beside its map); its columns
HISTORY_FILE, HISTORY_COLUMNS = "agent_history_init_n{n}.csv", ("Name", "Whisper")
#: how close (difflib ratio, 0..1) a name in a history statement must be to a resident's to be read as that
#: resident's ("Abigail Chan" for Abigail Chen; reported)
NAME_CUTOFF = 0.85

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("the a an and of for at in on to s".split())
#: a time of day as a lifestyle text writes it: "noon", "7am", "6:30 p.m.", "18:30"; only a time that exists
#: ("13:75" and "25pm" are none, and are reported as unread instead of read as another time; "24:00" is
#: the day's end)
_TIME = re.compile(r"\b(noon|midday|midnight)\b|\b(2[0-3]|1\d|0?\d)(?::([0-5]\d))?\s*([ap])\.?m\.?(?!(?!am|pm)[a-z])"
                   r"|\b([01]?\d|2[0-3]|24(?=:00)):([0-5]\d)\b", re.I)
_BED = re.compile(r"\b(?:go(?:es)? to (?:bed|sleep)|falls? asleep|bedtime|sleeps?)\b", re.I)
_WAKE = re.compile(r"\b(?:wakes?|awakes?|woke|gets? up|rises?)\b", re.I)
_DINNER = re.compile(r"\b(?:dinner|supper)\b", re.I)
_MEAL_CUE = re.compile(r"\b(?:eat|eats|eating|lunch|dinner|breakfast|meals?|dines?)\b", re.I)
_LEISURE_CUE = re.compile(r"\b(?:likes?|loves?|enjoys?|walks?|walking|runs?|jogs?|jogging|stroll|sits?|reads?|"
                          r"reading|relax(?:es)?|visits?|hangs? out|drinks?|plays?)\b", re.I)
_WORK_CUE = re.compile(r"\b(?:opens?|opening|works?|working|teach(?:es)?|teaching|class(?:es)?|lectures?|counter|"
                       r"shifts?|study|studies|studying|research(?:es)?|manages?|closes?)\b", re.I)
_HOME_CUE = re.compile(r"\b(?:sleep\w*|bed|wak\w*|morning routine|shower\w*|brush\w*|home|nap\w*|dress\w*|"
                       r"getting ready|tv|television|cook\w*|dinner|supper|stream\w*)\b", re.I)
_WALK_CUE = re.compile(r"\b(?:walk\w*|run|running|jog\w*|stroll\w*)\b", re.I)
_SLEEP = re.compile(r"\bsleep", re.I)
_OCCUPATION = re.compile(r"\bis (?:an? |the )?(.+?)(?= who\b| that\b| at\b| of\b| in\b| for\b| with\b| studying\b|"
                         r" and (?:an?|the)\b|,|\.|;|$)", re.I)
_KIND_WORDS = (
    ("shop", re.compile(r"\b(?:cafe|café|coffee|pub|bar|restaurant|diner|tavern|bistro|bakery|market|store|shop|"
                        r"pharmacy|grocery|supply|supplies|boutique)\b", re.I)),
    ("nature", re.compile(r"\b(?:park|garden|forest|woods?|beach|lake|river|meadow|field|orchard)\b", re.I)),
    ("work", re.compile(r"\b(?:college|school|university|library|office|hospital|clinic|factory|station|hall|lab|"
                        r"laboratory|studio|workshop)\b", re.I)),
)
_HOME_WORDS = re.compile(r"\b(?:house|apartment|home|dorm|dormitory|co-living|flat|cottage|residence|bedroom)\b", re.I)
_CAPITALISED_RUN = re.compile(r"[A-Z][\w'’-]*(?: [A-Z][\w'’-]*)*")
_POSSESSIVE = re.compile(r"['’]s?$")
_NOT_NAMES = frozenset("""you your yours the this that these those for in on at to he she they we i it my his her their
our a an and but so if when while as yo mr mrs ms dr professor january february march april may june july august
september october november december monday tuesday wednesday thursday friday saturday sunday""".split())
_FOOD_WORDS = re.compile(r"\b(?:cafe|café|coffee|pub|bar|restaurant|diner|tavern|bistro|bakery|canteen)\b", re.I)


@dataclass(frozen=True)
class Note:
    """One line of the import report: what could not be read, was ambiguous, was chosen by a rule or adjusted.

    Attributes:
        file: the file it concerns, relative to the storage folder (``assets/...`` for the map).
        field: the field of that file, or ``None``.
        kind: ``unread`` (a default was used), ``ambiguous`` (several readings; the first was used), ``chosen``
            (filled in by a stated rule), ``adjusted`` (read, but changed to fit simulacra's formats), ``map``, or
            ``unknown`` (a seed history names someone who is not a resident of the town).
        message: what happened, in one sentence.
    """

    file: str
    field: str | None
    kind: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "field": self.field, "kind": self.kind, "message": self.message}


@dataclass
class _Resident:
    id: str
    name: str
    folder: str  # personas/<Name>/bootstrap_memory, relative to the storage folder
    age: int
    innate: str
    learned: str
    currently: str
    lifestyle: str
    living_area: list[str]
    daily_plan_req: str
    schedule: list[tuple[str, int]] | None
    spatial: dict[str, dict[str, list[str]]]  # sector -> arena -> objects (all worlds of the file merged)

    @property
    def scratch(self) -> str:
        return f"{self.folder}/scratch.json"


@dataclass
class _Sector:
    name: str
    id: str = ""
    arenas: dict[str, list[str]] = field(default_factory=dict)
    kind: str = "public"
    food: bool = False
    on_map: bool = False


@dataclass
class TileMap:
    """The part of a Generative Agents map the importer uses.

    Attributes:
        folder: the ``matrix`` folder read.
        label: that folder named from the map's folder (``the_ville/matrix``), as the import report names it.
        width, height: tiles.
        sector: ``(height, width)`` array of sector block ids (0: no sector).
        names: block id -> sector name.
        walkable: ``(height, width)`` bool array, False on collision tiles.
    """

    folder: Path
    label: str
    width: int
    height: int
    sector: np.ndarray
    names: dict[int, str]
    walkable: np.ndarray


# ----------------------------------------------------------------------------------------------------- reading
def _read_json(path: Path, error: type[InputError]) -> Any:
    text = read_text(path, error)
    if not text.strip():
        raise error(path, None, "the file is empty; expected JSON")
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise error(path, None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None


def _persona_folders(storage: Path) -> list[Path]:
    personas = storage / "personas"
    if not personas.is_dir():
        return []
    return sorted((p for p in personas.iterdir() if (p / "bootstrap_memory" / "scratch.json").is_file()),
                  key=lambda p: p.name)


def _not_storage(storage: Path) -> WorldError:
    hint = ""
    if storage.is_dir():
        inner = sorted(p.name for p in storage.iterdir() if _persona_folders(p))
        if inner:
            hint = f"; it holds the simulations {', '.join(inner[:4])}{' ...' if len(inner) > 4 else ''}: pass one"
    return WorldError(storage, None, "not a Generative Agents storage folder: expected personas/<Name>/"
                                     "bootstrap_memory/scratch.json in it (e.g. environment/frontend_server/storage/"
                                     f"base_the_ville_n25){hint}")


def _read_spatial(path: Path) -> tuple[list[str], dict[str, dict[str, list[str]]]]:
    """(world names, sector -> arena -> objects) of a ``spatial_memory.json``."""
    data = _read_json(path, WorldError)
    if not isinstance(data, dict) or not data:
        raise WorldError(path, None, "expected a JSON object: world -> sector -> arena -> [game objects]")
    worlds: list[str] = []
    sectors: dict[str, dict[str, list[str]]] = {}
    for world, secs in data.items():
        worlds.append(str(world).strip())
        if not isinstance(secs, dict):
            raise WorldError(path, world, f"expected an object of sectors, got {type(secs).__name__}")
        for sector, arenas in secs.items():
            if not isinstance(arenas, dict):
                raise WorldError(path, f"{world}.{sector}",
                                 f"expected an object of arenas, got {type(arenas).__name__}")
            merged = sectors.setdefault(str(sector).strip(), {})
            for arena, objects in arenas.items():
                if not isinstance(objects, list) or not all(isinstance(o, str) for o in objects):
                    raise WorldError(path, f"{world}.{sector}.{arena}", "expected a list of game object names")
                known = merged.setdefault(str(arena).strip(), [])
                known += [o.strip() for o in objects if o.strip() and o.strip() not in known]
    return worlds, sectors


def _read_resident(storage: Path, folder: Path, taken: set[str]) -> tuple[_Resident, list[str]]:
    scratch = folder / "bootstrap_memory" / "scratch.json"
    data = _read_json(scratch, PersonaError)
    if not isinstance(data, dict):
        raise PersonaError(scratch, None, f"expected a JSON object, got {type(data).__name__}")
    for key in SCRATCH_FIELDS:
        if key not in data:
            raise PersonaError(scratch, key, "missing; a Generative Agents scratch.json has "
                                             f"{', '.join(SCRATCH_FIELDS)}")
    for key in ("name", "innate", "learned", "currently", "lifestyle", "living_area", "daily_plan_req"):
        if data[key] is None:
            data[key] = ""
        if not isinstance(data[key], str):
            raise PersonaError(scratch, key, f"expected text, got {type(data[key]).__name__}")
    name = " ".join(data["name"].split())
    if not name:
        raise PersonaError(scratch, "name", "empty; expected the resident's full name")
    age = data["age"]
    if isinstance(age, str) and age.strip().isdigit():
        age = int(age)
    if isinstance(age, bool) or not isinstance(age, int) or not 0 <= age <= 130:
        raise PersonaError(scratch, "age", f"expected a whole number of years 0..130, got {data['age']!r}")
    if not [t for t in data["innate"].split(",") if t.strip()]:
        raise PersonaError(scratch, "innate", "empty; expected the resident's traits, e.g. \"kind, curious\"")
    if not (data["learned"].strip() or data["currently"].strip()):
        raise PersonaError(scratch, "learned", "empty, and so is currently; expected who the resident is")
    area = [p.strip() for p in data["living_area"].split(":")]
    if len(area) < 2 or not area[1]:
        raise PersonaError(scratch, "living_area",
                           f"expected \"<world>:<sector>:<arena>\", got {data['living_area']!r}")
    schedule = None
    raw = data.get("f_daily_schedule")
    if raw:
        if not isinstance(raw, list):
            raise PersonaError(scratch, "f_daily_schedule", "expected a list of [activity, minutes] pairs")
        schedule = []
        for i, step in enumerate(raw):
            if (not isinstance(step, list) or len(step) != 2 or not isinstance(step[0], str)
                    or isinstance(step[1], bool) or not isinstance(step[1], (int, float)) or step[1] < 0):
                raise PersonaError(scratch, f"f_daily_schedule.{i}", f"expected [activity, minutes >= 0], got {step!r}")
            schedule.append((" ".join(step[0].split()), int(step[1])))
    spatial_path = folder / "bootstrap_memory" / "spatial_memory.json"
    if not spatial_path.is_file():
        raise WorldError(spatial_path, None, "missing: each resident's bootstrap_memory has a spatial_memory.json "
                                             "(world -> sector -> arena -> game objects)")
    worlds, spatial = _read_spatial(spatial_path)
    rid = _unique(_slug(name), taken)
    rel = folder.relative_to(storage).as_posix() + "/bootstrap_memory"
    return _Resident(rid, name, rel, age, data["innate"], data["learned"].strip(), data["currently"].strip(),
                     data["lifestyle"].strip(), area, data["daily_plan_req"].strip(), schedule, spatial), worlds


def _read_storage(storage: Path) -> tuple[list[_Resident], list[str], dict[str, Any]]:
    """The residents (in ``reverie/meta.json``'s order when it has one, else by folder name), the world names of
    their spatial memories (most used first) and what meta.json says (``persona_names``, ``curr_time``)."""
    if not storage.is_dir():
        raise WorldError(storage, None, f"{'a file, not a folder' if storage.exists() else 'no such folder'}; "
                                        "expected a Generative Agents storage folder "
                                        "(e.g. environment/frontend_server/storage/base_the_ville_n25)")
    folders = _persona_folders(storage)
    if not folders:
        raise _not_storage(storage)
    meta: dict[str, Any] = {}
    meta_path = storage / "reverie" / "meta.json"
    if meta_path.is_file():
        meta = _read_json(meta_path, WorldError)
        if not isinstance(meta, dict):
            raise WorldError(meta_path, None, "expected a JSON object")
        names = meta.get("persona_names")
        if names is not None:
            if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
                raise WorldError(meta_path, "persona_names", "expected a list of the residents' names")
            by_name = {p.name: p for p in folders}
            for i, n in enumerate(names):
                if n not in by_name:
                    raise WorldError(meta_path, f"persona_names.{i}", f"names '{n}', but there is no "
                                     f"personas/{n}/bootstrap_memory/scratch.json in {storage}")
            order = {n: i for i, n in enumerate(names)}
            folders.sort(key=lambda p: (order.get(p.name, len(order)), p.name))
    taken: set[str] = set()
    residents, worlds = [], []
    for folder in folders:
        res, w = _read_resident(storage, folder, taken)
        residents.append(res)
        worlds += w
    counts: dict[str, int] = {}
    for w in worlds:
        counts[w] = counts.get(w, 0) + 1
    return residents, sorted(counts, key=lambda w: (-counts[w], w)), meta


def _read_blocks(path: Path) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    text = read_text(path, WorldError)
    for i, row in enumerate(csv.reader(text.splitlines())):
        if not row or not row[0].strip():
            continue
        try:
            out[int(row[0].strip())] = [c.strip() for c in row[1:]]
        except ValueError:
            raise WorldError(path, f"line {i + 1}",
                             f"expected '<block id>, <world>, <sector>...', got {row[0]!r}") from None
    return out


def _read_matrix(path: Path, width: int, height: int) -> np.ndarray:
    if not path.is_file():
        raise WorldError(path, None, "missing: the map's matrix/maze folder has this tile matrix")
    cells = [c.strip() for row in csv.reader(read_text(path, WorldError).splitlines()) for c in row if c.strip()]
    if len(cells) != width * height:
        raise WorldError(path, None, f"{len(cells)} tiles; maze_meta_info.json says {width} x {height} = "
                                     f"{width * height}")
    try:
        return np.array([int(c) for c in cells], dtype=np.int64).reshape(height, width)
    except ValueError:
        bad = next(c for c in cells if not c.lstrip("-").isdigit())
        raise WorldError(path, None, f"expected block ids (integers), found {bad!r}") from None


def read_map(assets: str | Path) -> TileMap:
    """Read the map of a Generative Agents world: ``assets`` is its folder (``.../assets/the_ville``) or that folder's
    ``matrix`` folder.

    Raises:
        WorldError: naming the file (and field) that is missing or malformed.
    """
    assets = Path(assets)
    matrix = assets / "matrix" if (assets / "matrix").is_dir() else assets
    meta_path = matrix / "maze_meta_info.json"
    if not meta_path.is_file():
        raise WorldError(assets, None, "not a Generative Agents map folder: expected matrix/maze_meta_info.json in it "
                                       "(e.g. environment/frontend_server/static_dirs/assets/the_ville)")
    meta = _read_json(meta_path, WorldError)
    size = []
    for key in ("maze_width", "maze_height"):
        value = meta.get(key) if isinstance(meta, dict) else None
        try:
            size.append(int(value))
        except (TypeError, ValueError):
            raise WorldError(meta_path, key, f"expected a number of tiles, got {value!r}") from None
        if size[-1] < 1:
            raise WorldError(meta_path, key, f"expected a number of tiles >= 1, got {value!r}")
    width, height = size
    blocks_path = matrix / "special_blocks" / "sector_blocks.csv"
    if not blocks_path.is_file():
        raise WorldError(blocks_path, None, "missing: the map's special_blocks folder has the sector blocks")
    names = {k: v[-1] for k, v in _read_blocks(blocks_path).items() if v and v[-1]}
    sector = _read_matrix(matrix / "maze" / "sector_maze.csv", width, height)
    collision = _read_matrix(matrix / "maze" / "collision_maze.csv", width, height)
    sector = np.where(np.isin(sector, list(names)), sector, 0)
    label = f"{assets.name}/matrix" if matrix != assets else assets.name
    return TileMap(matrix, label, width, height, sector, names, collision == 0)


def read_history(path: str | Path) -> list[tuple[int, str, list[str]]]:
    """Read a Generative Agents seed-history CSV (``agent_history_init_n25.csv``): columns ``Name`` and
    ``Whisper``, one row per resident, the whisper a list of statements separated by ``;`` (``Owen Pike,"Lena Pike is
    your wife; You are proud of your caraway rye"``).

    Returns:
        ``[(line, name, statements)]`` in file order: the line of the CSV the row ends on (the header is line 1),
        the name with its spaces normalised, and the statements stripped, empty ones left out. Rows with neither a
        name nor a whisper are skipped.
    Raises:
        PersonaError: naming the file, and the column or ``line <n>``: unreadable or not UTF-8, empty, no ``Name``
            or ``Whisper`` column, a row with a whisper but no name, a row without its whisper cell, or text the
            ``csv`` module cannot parse.
    """
    path = Path(path)
    text = read_text(path, PersonaError)
    expected = "a Generative Agents history CSV has the columns Name,Whisper (one row per resident, its statements " \
               "separated by ';')"
    if not text.strip():
        raise PersonaError(path, None, f"the file is empty; {expected}")
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows: list[tuple[int, str, list[str]]] = []
    try:
        columns = [c.strip() for c in reader.fieldnames or []]
        for col in HISTORY_COLUMNS:
            if col not in columns:
                raise PersonaError(path, col, f"missing column (the header is {','.join(columns)!r}); {expected}")
        reader.fieldnames = columns
        for row in reader:
            name, whisper = row.get("Name"), row.get("Whisper")
            if whisper is None:
                raise PersonaError(path, f"line {reader.line_num}", f"no Whisper cell after the name {name!r}; "
                                                                    f"{expected}")
            name = " ".join((name or "").split())
            statements = [" ".join(t.split()) for t in whisper.split(";") if t.strip()]
            if not name and statements:
                raise PersonaError(path, f"line {reader.line_num}", "a whisper without a name in the Name column")
            if name:
                rows.append((reader.line_num, name, statements))
    except csv.Error as err:
        raise PersonaError(path, f"line {reader.line_num}", f"not a readable CSV: {err}") from None
    return rows


def _history_file(assets: Path, n: int) -> tuple[Path | None, list[str]]:
    """The history file for ``n`` residents in the map's folder (or beside its ``matrix`` folder), and the names of
    the other ``agent_history_init_n*.csv`` files there."""
    folders = [assets] + ([assets.parent] if assets.name == "matrix" else [])
    others: list[str] = []
    for folder in folders:
        path = folder / HISTORY_FILE.format(n=n)
        if path.is_file():
            return path, []
        others += sorted(p.name for p in folder.glob(HISTORY_FILE.format(n="*")))
    return None, others


# ----------------------------------------------------------------------------------------------------- words
def _slug(text: str) -> str:
    text = text.lower().replace("’", "'").replace("'", "")
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_") or "place"


def _unique(base: str, taken: set[str]) -> str:
    out, k = base, 2
    while out in taken:
        out, k = f"{base}_{k}", k + 1
    taken.add(out)
    return out


def _tokens(text: str) -> list[str]:
    out = []
    for w in _WORD.findall(text.lower().replace("’", "'")):
        if w in _STOP:
            continue
        if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
            w = w[:-1]
        out.append(w)
    return out


class _Matcher:
    """Finds names (sector names, resident names) in free text, by their words in order (case, articles, "and",
    possessives and plural s ignored): "the Willow Market and Pharmacy" finds "The Willows Market and Pharmacy"."""

    def __init__(self, names: dict[str, str]):
        self.names = {key: _tokens(text) for key, text in names.items()}
        self.names = {key: toks for key, toks in self.names.items() if toks}

    def find(self, text: str) -> list[str]:
        """The keys named in ``text``, in order of first mention; a name inside a longer one found at the same
        place ("Oak Hill College" in "Dorm for Oak Hill College") does not count."""
        words = _tokens(text)
        hits = []
        for key, toks in self.names.items():
            n = len(toks)
            for i in range(len(words) - n + 1):
                if words[i:i + n] == toks:
                    hits.append((i, i + n, key))
        kept = [h for h in hits if not any(o[0] <= h[0] and h[1] <= o[1] and o[1] - o[0] > h[1] - h[0] for o in hits)]
        out: list[str] = []
        for _, _, key in sorted(kept):
            if key not in out:
                out.append(key)
        return out


def _minutes(m: re.Match) -> int:
    """Minutes after midnight of a :data:`_TIME` match (midnight is 1440: the end of the day)."""
    if m.group(1):
        return 1440 if m.group(1).lower() == "midnight" else 720
    if m.group(2):
        h, mm = int(m.group(2)), int(m.group(3) or 0)
        if h <= 12:  # "17:30pm": a 24-hour time with a stray "pm" is its hour
            h = h % 12 + (12 if m.group(4).lower() == "p" else 0)
        return h * 60 + mm
    return min(int(m.group(5)) * 60 + int(m.group(6)), 1440)


#: where the clause that names a time ends: a comma, a semicolon, a full stop before a space, or "and"
_CLAUSE_END = re.compile(r"[,;]|\.\s|\band\b", re.I)


def _time_after(pattern: re.Pattern, text: str) -> int | None:
    """The first time of day stated within 40 characters after ``pattern`` in ``text``, in the same clause (so that
    "goes to bed at 25pm, awakes at 7am" reads no bedtime rather than 7am)."""
    for key in pattern.finditer(text):
        after = text[key.end():key.end() + 40]
        end = _CLAUSE_END.search(after)
        t = _TIME.search(after[:end.start()] if end else after)
        if t:
            return _minutes(t)
    return None


def _hhmm(minute: int) -> str:
    return f"{minute // 60:02d}:{minute % 60:02d}"


def _pick(options: list[str], *key: str) -> str:
    """One of ``options`` chosen by a hash of ``key`` (the same key, the same choice; spread over residents)."""
    digest = hashlib.sha256("\x1f".join(key).encode("utf-8")).hexdigest()
    return options[int(digest, 16) % len(options)]


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+", text) if s.strip()]


def _proper(arena: str) -> bool:
    """Whether an arena's name takes no article ("Abigail Chen's room", "Kitchen Garden")."""
    return "'" in arena or "’" in arena or arena[:1].isupper()


def _arena_phrase(arena: str) -> str:
    return arena if _proper(arena) else ("an " if arena[:1].lower() in "aeiou" else "a ") + arena


# ----------------------------------------------------------------------------------------------------- places
def _sectors(residents: list[_Resident], tmap: TileMap | None, notes: list[Note]) -> dict[str, _Sector]:
    """Every sector of the residents' spatial memories and of the map, with its arenas and objects, by name."""
    found: dict[str, _Sector] = {}
    for res in residents:
        for name, arenas in res.spatial.items():
            sec = found.setdefault(name, _Sector(name))
            for arena, objects in arenas.items():
                known = sec.arenas.setdefault(arena, [])
                known += [o for o in objects if o not in known]
    if tmap is not None:
        on_map = {tmap.names[k] for k in np.unique(tmap.sector) if k}
        for name in sorted(on_map):
            if name not in found:
                found[name] = _Sector(name)
                notes.append(Note(_map_file(tmap, "special_blocks/sector_blocks.csv"), name, "map",
                                  f"the sector '{name}' is on the map but in no resident's spatial memory: a place "
                                  "without objects"))
            found[name].on_map = True
    homes = {res.living_area[1] for res in residents}
    taken: set[str] = set()
    for name in sorted(found, key=str.casefold):
        sec = found[name]
        sec.id = _unique(_slug(name), taken)
        words = " ".join([name, *sec.arenas])
        if name in homes or _HOME_WORDS.search(name):
            sec.kind = "home"
        else:
            sec.kind = next((kind for kind, rx in _KIND_WORDS if rx.search(name)), None) or next(
                (kind for kind, rx in _KIND_WORDS if rx.search(words)), "public")
        sec.food = sec.kind != "home" and bool(_FOOD_WORDS.search(words))
    return {name: found[name] for name in sorted(found, key=str.casefold)}


def _map_file(tmap: TileMap, rel: str) -> str:
    return f"assets/{tmap.label}/{rel}"


def _describe(sec: _Sector, world: str) -> str:
    if not sec.arenas:
        return f"{sec.name}, a place in {world}."
    return f"{sec.name}, in {world}, with {join_words([_arena_phrase(a) for a in sec.arenas])}."


def _objects(sectors: dict[str, _Sector]) -> list[dict[str, Any]]:
    out, taken = [], set()
    for sec in sectors.values():
        for arena, objects in sec.arenas.items():
            for obj in objects:
                name = obj if len(sec.arenas) == 1 else f"{obj} in {'' if _proper(arena) else 'the '}{arena}"
                oid = _unique(f"{sec.id}.{_slug(arena)}.{_slug(obj)}", taken)
                out.append({"id": oid, "place": sec.id, "name": name, "state": OBJECT_STATE})
    return out


def _hub_town(sectors: dict[str, _Sector], world: str, taken: set[str]) -> tuple[dict, list, dict, int]:
    """No map: one street place joined to every sector; a spring layout (seed 0)."""
    hub = _unique("streets", taken)
    streets = {hub: {"name": f"the streets of {world}", "kind": "public",
                     "description": f"The streets and open ground of {world}, which lead to every place in town."}}
    paths = [[hub, sec.id] for sec in sectors.values()]
    graph = nx.Graph()
    graph.add_nodes_from(sorted([hub, *(s.id for s in sectors.values())]))
    graph.add_edges_from(sorted(tuple(sorted(p)) for p in paths))
    pos = nx.spring_layout(graph, seed=0)
    return streets, paths, _scaled(pos), 1


def _scaled(pos: dict[str, Any]) -> dict[str, list[float]]:
    xs = [float(p[0]) for p in pos.values()]
    ys = [float(p[1]) for p in pos.values()]
    span = max(max(xs) - min(xs), max(ys) - min(ys), 1e-9)
    return {k: [round(5 + 90 * (float(p[0]) - min(xs)) / span, 2), round(5 + 90 * (float(p[1]) - min(ys)) / span, 2)]
            for k, p in pos.items()}


_N4 = ((0, 1), (1, 0), (0, -1), (-1, 0))


def _walk(tmap: TileMap, sources: list[tuple[int, int]]) -> np.ndarray:
    """Tiles' walking distance from the nearest of ``sources`` over walkable tiles (-1: unreachable)."""
    dist = np.full((tmap.height, tmap.width), -1, dtype=np.int64)
    queue = deque()
    for t in sources:
        dist[t] = 0
        queue.append(t)
    walkable = tmap.walkable
    while queue:
        y, x = queue.popleft()
        d = dist[y, x] + 1
        for dy, dx in _N4:
            yy, xx = y + dy, x + dx
            if 0 <= yy < tmap.height and 0 <= xx < tmap.width and walkable[yy, xx] and dist[yy, xx] < 0:
                dist[yy, xx] = d
                queue.append((yy, xx))
    return dist


def _map_town(sectors: dict[str, _Sector], tmap: TileMap, taken: set[str],
              notes: list[Note]) -> tuple[dict, list, dict, int]:
    """With a map: sector positions at their tiles' centre, street places shared by nearby sectors, paths between
    streets (relative neighbourhood graph of walking distances + its minimum spanning tree), sectors joined to their
    street and to sectors they touch; ``edges_per_tick`` from the median path's length in tiles."""
    scale = 100.0 / max(tmap.width, tmap.height)
    blocks_file = _map_file(tmap, "maze/sector_maze.csv")
    outdoor = tmap.walkable & (tmap.sector == 0)
    ids_of: dict[str, list[int]] = {}
    for k, name in tmap.names.items():
        ids_of.setdefault(name, []).append(k)
    mapped = [s for s in sectors.values() if s.on_map]
    positions: dict[str, list[float]] = {}
    doorsteps: dict[str, list[tuple[int, int]]] = {}
    touching: set[tuple[str, str]] = set()
    owner = {k: sectors[n].id for k, n in tmap.names.items() if n in sectors}
    for sec in mapped:
        mask = np.isin(tmap.sector, ids_of[sec.name])
        ys, xs = np.nonzero(mask)
        positions[sec.id] = [round((float(xs.mean()) + 0.5) * scale, 2), round((float(ys.mean()) + 0.5) * scale, 2)]
        steps: set[tuple[int, int]] = set()
        for y, x in zip(*np.nonzero(mask & tmap.walkable)):
            for dy, dx in _N4:
                yy, xx = int(y) + dy, int(x) + dx
                if 0 <= yy < tmap.height and 0 <= xx < tmap.width and tmap.walkable[yy, xx]:
                    if outdoor[yy, xx]:
                        steps.add((yy, xx))
                    elif tmap.sector[yy, xx] and owner.get(int(tmap.sector[yy, xx])) not in (None, sec.id):
                        touching.add(tuple(sorted((sec.id, owner[int(tmap.sector[yy, xx])]))))
        doorsteps[sec.id] = sorted(steps)
        if not steps:
            notes.append(Note(blocks_file, sec.name, "map", f"'{sec.name}' has no walkable way out on the map; it is "
                                                            "joined to the nearest street as if it had"))
    ids = [s.id for s in mapped]
    far = 10 ** 6
    by_id = _by_id(sectors)
    walks = {}
    for sid in ids:  # from the doorsteps; a sector without any, from its own tiles
        inside = [(int(y), int(x)) for y, x in np.argwhere(np.isin(tmap.sector, ids_of[by_id[sid].name]))]
        walks[sid] = _walk(tmap, doorsteps[sid] or inside)

    def dist(a: str, b: str) -> int:
        if a == b:
            return 0
        vals = [int(walks[a][t]) for t in doorsteps[b] if walks[a][t] >= 0]
        vals += [int(walks[b][t]) for t in doorsteps[a] if walks[b][t] >= 0]
        return min(vals) if vals else far

    d = {(a, b): dist(a, b) for a in ids for b in ids}
    # complete linkage: merge the two clusters whose farthest members are nearest, while that is within the span
    clusters = [[sid] for sid in sorted(ids)]
    while len(clusters) > 1:
        best = None
        for i in range(len(clusters)):
            for j in range(i + 1, len(clusters)):
                link = max(d[a, b] for a in clusters[i] for b in clusters[j])
                if link <= STREET_SPAN_TILES and (best is None or link < best[0]):
                    best = (link, i, j)
        if best is None:
            break
        _, i, j = best
        clusters[i] = sorted(clusters[i] + clusters[j])
        del clusters[j]
    streets: dict[str, dict] = {}
    street_tile: dict[str, tuple[int, int]] = {}
    members: dict[str, list[str]] = {}
    placed = []
    for cluster in clusters:
        tiles = [t for sid in cluster for t in doorsteps[sid]] or [(int(round(positions[cluster[0]][1] / scale - 0.5)),
                                                                    int(round(positions[cluster[0]][0] / scale - 0.5)))]
        my, mx = np.mean([t[0] for t in tiles]), np.mean([t[1] for t in tiles])
        tile = min(tiles, key=lambda t: ((t[0] - my) ** 2 + (t[1] - mx) ** 2, t))
        placed.append((tile, cluster))
    for tile, cluster in sorted(placed):
        sid = _unique(f"street_{len(streets) + 1}", taken)
        landmark = max(cluster, key=lambda s: (by_id[s].kind != "home", int(np.isin(tmap.sector, ids_of[
            by_id[s].name]).sum()), [-ord(c) for c in by_id[s].name]))
        others = [by_id[s].name for s in cluster if s != landmark]
        streets[sid] = {"name": f"the street by {by_id[landmark].name}", "kind": "public",
                        "description": f"A street of the town outside {join_words([by_id[landmark].name, *others])}."}
        positions[sid] = [round((tile[1] + 0.5) * scale, 2), round((tile[0] + 0.5) * scale, 2)]
        street_tile[sid] = tile
        members[sid] = cluster
    lengths: list[int] = []
    paths: list[list[str]] = []
    for sid, cluster in members.items():
        for sec_id in cluster:
            paths.append([sid, sec_id])
            t = street_tile[sid]
            lengths.append(int(walks[sec_id][t]) if walks[sec_id][t] >= 0 else 0)
    names = list(members)
    cd = {(a, b): min(d[x, y] for x in members[a] for y in members[b]) for a in names for b in names if a != b}
    graph = nx.Graph()
    graph.add_nodes_from(names)
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            graph.add_edge(a, b, weight=cd[a, b])
    links = {tuple(sorted(e)) for e in nx.minimum_spanning_edges(graph, data=False)}
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            if cd[a, b] < far and not any(max(cd[a, c], cd[c, b]) < cd[a, b] for c in names if c not in (a, b)):
                links.add((a, b))
    for a, b in sorted(links, key=lambda e: (names.index(e[0]), names.index(e[1]))):
        paths.append([a, b])
        lengths.append(cd[a, b] if cd[a, b] < far else 0)
        if cd[a, b] >= far:
            notes.append(Note(blocks_file, None, "map", f"no walkable way on the map joins {streets[a]['name']} and "
                                                        f"{streets[b]['name']}; a path joins them anyway"))
    for a, b in sorted(touching):  # a door between two sectors, unless both are homes: nobody walks through
        if by_id[a].kind == "home" and by_id[b].kind == "home":  # a neighbour's home
            continue
        if [a, b] not in paths and [b, a] not in paths:
            paths.append([a, b])
            lengths.append(1)
    # sectors in memory but not on the map: under the map, in a row, on the first street
    missing = [s for s in sectors.values() if not s.on_map]
    if missing:
        first = next(iter(streets), None)
        bottom = max((p[1] for p in positions.values()), default=50.0) + 8
        for k, sec in enumerate(missing):
            positions[sec.id] = [round(5 + 90 * (k + 0.5) / len(missing), 2), round(bottom, 2)]
            if first is not None:
                paths.append([first, sec.id])
            joined = streets[first]["name"] if first else "nothing"
            notes.append(Note(blocks_file, sec.name, "map", f"the sector '{sec.name}' of the spatial memories is not "
                                                            f"on the map: placed below it, joined to {joined}"))
    positive = sorted(x for x in lengths if x > 0)
    median = positive[len(positive) // 2] if positive else TILES_PER_TICK
    edges_per_tick = max(1, min(6, round(TILES_PER_TICK / max(median, 1))))
    notes.append(Note(blocks_file, None, "map", f"{len(streets)} street places from the doorsteps of {len(mapped)} "
                                                f"sectors; a path is {median} tiles at the median, so edges_per_tick "
                                                f"is {edges_per_tick} (about {TILES_PER_TICK} tiles a "
                                                f"{TICK_MINUTES}-minute tick, as Generative Agents' residents walk)"))
    return streets, paths, positions, edges_per_tick


def _by_id(sectors: dict[str, _Sector]) -> dict[str, _Sector]:
    return {s.id: s for s in sectors.values()}


# ----------------------------------------------------------------------------------------------------- personas
@dataclass
class _Plan:
    """What a resident's texts say about its day (place ids)."""

    workplace: str | None = None
    work_hours: tuple[int, int] | None = None
    meals: list[str] = field(default_factory=list)
    leisure: list[str] = field(default_factory=list)


def _occupation(res: _Resident, world: str, notes: list[Note]) -> str:
    first = _sentences(res.learned)[:1]
    if first:
        m = _OCCUPATION.search(first[0])
        if m and 0 < len(m.group(1).split()) <= 8:
            return m.group(1).strip()
    notes.append(Note(res.scratch, "learned", "unread", f"no occupation (\"{res.name} is a ... who ...\"): "
                                                        f"\"resident of {world}\" used"))
    return f"resident of {world}"


def _read_plan(res: _Resident, sectors: dict[str, _Sector], matcher: _Matcher, home: str,
               notes: list[Note]) -> _Plan:
    """The workplace, work hours and named meal and leisure places of a resident's ``learned`` and
    ``daily_plan_req``."""
    by_id = _by_id(sectors)
    plan = _Plan()
    not_home = lambda ids: [i for i in ids if i != home and by_id[i].kind != "home"]  # noqa: E731
    learned = not_home(matcher.find(_sentences(res.learned)[0])) if res.learned else []
    work, plain = [], []
    for sentence in _sentences(res.daily_plan_req):
        for clause in re.split(r",|;|\bthen\b", sentence):
            places = matcher.find(clause)
            if not places:
                continue
            if _MEAL_CUE.search(clause):
                plan.meals += [p for p in places if p not in plan.meals]
            elif _LEISURE_CUE.search(clause):
                plan.leisure += [p for p in places if p not in plan.leisure]
            elif _WORK_CUE.search(clause):
                work += [p for p in not_home(places) if p not in work]
            else:
                plain += [p for p in not_home(places) if p not in plain]
    for source, field_name, found in (("learned", "learned", learned), ("work words", "daily_plan_req", work),
                                      ("", "daily_plan_req", plain)):
        if found:
            plan.workplace = found[0]
            if len(found) > 1:
                named = join_words([by_id[f].name for f in found])
                notes.append(Note(res.scratch, field_name, "ambiguous", f"several workplaces named: {named}; the "
                                  f"first, {by_id[found[0]].name}, used"))
            elif not source:
                notes.append(Note(res.scratch, field_name, "chosen", f"workplace {by_id[found[0]].name} read from a "
                                                                     "sentence without work words"))
            break
    if plan.workplace is None:
        notes.append(Note(res.scratch, "daily_plan_req", "unread", "no workplace named in learned or daily_plan_req: "
                                                                   "the working hours are spent at home"))
        return plan
    times: list[int] = []
    for sentence in _sentences(res.daily_plan_req):
        if plan.workplace in matcher.find(sentence) or _WORK_CUE.search(sentence):
            times += [_minutes(m) for m in _TIME.finditer(sentence)]
    name = by_id[plan.workplace].name
    if not times:
        plan.work_hours = DEFAULT_WORK
        hours = f"{_hhmm(DEFAULT_WORK[0])}-{_hhmm(DEFAULT_WORK[1])}"
        notes.append(Note(res.scratch, "daily_plan_req", "unread", f"no work hours stated for {name}: {hours} used"))
    elif len(times) == 1 or times[-1] <= times[0]:
        end = min(times[0] + DEFAULT_SHIFT, LATEST_NIGHT)
        plan.work_hours = (times[0], end)
        notes.append(Note(res.scratch, "daily_plan_req", "unread", f"work at {name} starts at {_hhmm(times[0])}; no "
                                                                   f"end stated: {_hhmm(end)} used"))
    else:
        plan.work_hours = (times[0], times[-1])
    return plan


def _lifestyle_times(res: _Resident, notes: list[Note]) -> tuple[int, int, int]:
    """(wake-up, the night's start, dinner) in minutes after midnight, from ``lifestyle``."""
    wake = _time_after(_WAKE, res.lifestyle)
    bed = _time_after(_BED, res.lifestyle)
    dinner = _time_after(_DINNER, res.lifestyle)
    if wake is None or wake >= 1440:
        wake = DEFAULT_WAKE
        notes.append(Note(res.scratch, "lifestyle", "unread", f"no wake-up time (\"awakes up around 7am\"): "
                                                              f"{_hhmm(DEFAULT_WAKE)} used"))
    if bed is None:
        bed = DEFAULT_BED
        notes.append(Note(res.scratch, "lifestyle", "unread", f"no bedtime (\"goes to bed around 11pm\"): "
                                                              f"{_hhmm(DEFAULT_BED)} used"))
    if bed <= wake or bed > LATEST_NIGHT:
        said = "midnight" if bed in (0, 1440) else _hhmm(bed % 1440)
        bed = LATEST_NIGHT
        notes.append(Note(res.scratch, "lifestyle", "adjusted", f"bedtime {said}: the night starts at "
                                                                f"{_hhmm(LATEST_NIGHT)} (a routine's days end at "
                                                                "midnight)"))
    if bed - wake < 180:
        notes.append(Note(res.scratch, "lifestyle", "unread", f"wake-up {_hhmm(wake)} and bedtime {_hhmm(bed)} leave "
                                                              f"no day: {_hhmm(DEFAULT_WAKE)} and "
                                                              f"{_hhmm(DEFAULT_BED)} used"))
        wake, bed = DEFAULT_WAKE, DEFAULT_BED
    if dinner is None or not wake < dinner < bed:
        if dinner is None:
            notes.append(Note(res.scratch, "lifestyle", "unread", f"no dinner time (\"eats dinner around 6pm\"): "
                                                                  f"{_hhmm(DEFAULT_DINNER)} used"))
        dinner = DEFAULT_DINNER
    return wake, bed, dinner


def _work_activity(occupation: str, place: str) -> str:
    low = occupation.lower()
    if "student" in low:
        return f"studying at {place}"
    if any(w in low for w in ("professor", "teacher", "lecturer", "tutor")):
        return f"teaching at {place}"
    return f"working at {place}"


def _lifestyle_routine(res: _Resident, occupation: str, home: str, plan: _Plan, known: list[str],
                       sectors: dict[str, _Sector], notes: list[Note]) -> list[dict[str, str]]:
    """The routine painted minute by minute from wake-up to the night: home, work (or work at home), lunch, dinner,
    a leisure outing in the longest free stretch after noon, and the night at home (see the module docstring)."""
    by_id = _by_id(sectors)
    wake, night, dinner = _lifestyle_times(res, notes)
    day: list[tuple[str, str] | None] = [None] * 1440

    def paint(a: int, b: int, activity: str, place: str) -> None:
        for m in range(max(a, wake), min(b, night)):
            day[m] = (activity, place)

    retired = "retired" in occupation.lower()
    food = sorted((p for p in known if by_id[p].food and p != home), key=lambda p: by_id[p].name)
    outdoors = sorted((p for p in known if by_id[p].kind == "nature"), key=lambda p: by_id[p].name)
    # lunch: a named meal place; the workplace when it serves food; a named leisure place that does; else one known
    lunch = next(iter(plan.meals), None)
    if lunch is None and plan.workplace and by_id[plan.workplace].food:
        lunch = plan.workplace
    if lunch is None:
        lunch = next((p for p in plan.leisure if by_id[p].food), None)
    if lunch is None and food:
        lunch = _pick(food, res.name, "lunch")
        notes.append(Note(res.folder + "/spatial_memory.json", None, "chosen", f"lunch at {by_id[lunch].name}, chosen "
                                                                             "among the places that serve food in "
                                                                             f"{res.name}'s spatial memory"))
    outing = next(iter(plan.leisure), None)
    if outing is None:  # a park or an eating place other than the workplace and the lunch place
        options = sorted((p for p in set(outdoors + food) if p not in (plan.workplace, lunch)),
                         key=lambda p: by_id[p].name) or outdoors
        if options:
            outing = _pick(options, res.name, "leisure")
            notes.append(Note(res.folder + "/spatial_memory.json", None, "chosen", f"leisure at {by_id[outing].name}, "
                                                                                   "chosen among the parks and eating "
                                                                                   f"places {res.name} knows"))
    paint(wake, night, "relaxing at home", home)
    if plan.workplace is None:
        activity = "taking it easy at home" if retired else "working at home"
        paint(wake + 60, 12 * 60, activity, home)
        paint(13 * 60, 15 * 60, activity, home)
    if plan.work_hours and plan.workplace:
        start, end = plan.work_hours
        if start < wake + 60 or end > night - 30:
            start, end = max(start, wake + 60), min(end, night - 30)
            notes.append(Note(res.scratch, "daily_plan_req", "adjusted", f"work hours {_hhmm(plan.work_hours[0])}-"
                                                                         f"{_hhmm(plan.work_hours[1])} cut to the "
                                                                         f"waking day: {_hhmm(start)}-{_hhmm(end)}"))
        if start >= end:
            notes.append(Note(res.scratch, "daily_plan_req", "adjusted", "no work hours are left in the waking day: "
                                                                         f"no work at {by_id[plan.workplace].name}"))
        elif dinner < end and dinner + 60 > start:
            notes.append(Note(res.scratch, "lifestyle", "adjusted", f"dinner at {_hhmm(dinner)} falls in the work "
                                                                    f"hours: {_hhmm(end)} used"))
            dinner = end
    dinner_place = home
    paint(dinner, dinner + 60, "having dinner at home", dinner_place)
    paint(wake + 30, wake + 60, "having breakfast", home)
    if plan.work_hours and plan.workplace and start < end:
        paint(start, end, _work_activity(occupation, by_id[plan.workplace].name), plan.workplace)
    if wake <= 11 * 60 and night >= 14 * 60:
        paint(12 * 60, 13 * 60, f"having lunch at {by_id[lunch].name}" if lunch else "having lunch at home",
              lunch or home)
    paint(wake, wake + 30, "waking up and getting ready for the day", home)
    if outing is not None:  # the first hour or more still spent relaxing at home after noon, up to three hours
        runs, m = [], max(wake, 12 * 60)
        while m < night - 30:
            if day[m] == ("relaxing at home", home):
                n = m
                while n < night - 30 and day[n] == ("relaxing at home", home):
                    n += 1
                runs.append((n - m, -m))
                m = n
            else:
                m += 1
        long_enough = [r for r in runs if r[0] >= 60]
        if long_enough:
            length, neg = long_enough[0]
            kind = by_id[outing].kind
            activity = (f"taking a walk in {by_id[outing].name}" if kind == "nature"
                        else f"spending time at {by_id[outing].name}")
            paint(-neg, -neg + min(length, 180), activity, outing)
    entries: list[dict[str, str]] = []
    for m in range(wake, night):
        if day[m] is not None and (not entries or (entries[-1]["activity"], entries[-1]["place"]) != day[m]):
            entries.append({"start": _hhmm(m), "activity": day[m][0], "place": day[m][1]})
    entries.append({"start": _hhmm(night), "activity": "going to sleep", "place": home})
    return entries


def _schedule_routine(res: _Resident, home: str, known: list[str], matcher: _Matcher,
                      sectors: dict[str, _Sector], notes: list[Note]) -> list[dict[str, str]]:
    """A saved simulation's ``f_daily_schedule`` as the routine: each step at the sector its words name (an arena's
    name counts when only one sector the resident knows has it), at home for sleep, waking, dressing, cooking,
    dinner, television or streaming, walks in a park it knows, else where the step before was (reported). Sleep
    from midnight is the previous day's night; steps before it are left out (reported)."""
    by_id = _by_id(sectors)
    arenas: dict[str, set[str]] = {}
    for sid in known:
        for arena in by_id[sid].arenas:
            arenas.setdefault(arena, set()).add(sid)
    arena_matcher = _Matcher({a: a for a, owners in arenas.items() if len(owners) == 1 or home in owners})
    outdoors = sorted((p for p in known if by_id[p].kind == "nature"), key=lambda p: by_id[p].name)
    steps, t = [], 0
    for activity, minutes in res.schedule or []:
        if minutes > 0 and t < 1440 and activity:
            steps.append((t, activity))
        t += minutes
    first = 0
    sleeping = [i for i, (start, act) in enumerate(steps) if _SLEEP.search(act) and start < 12 * 60]
    if sleeping:
        first = sleeping[0]
        while first < len(steps) and _SLEEP.search(steps[first][1]):
            first += 1
        dropped = [f"'{a}' ({_hhmm(s)})" for s, a in steps[:first] if not _SLEEP.search(a)]
        if dropped:
            notes.append(Note(res.scratch, "f_daily_schedule", "adjusted", f"steps before the night's sleep left out "
                                                                           f"(a routine starts at the wake-up): "
                                                                           f"{', '.join(dropped)}"))
    if first >= len(steps):
        raise PersonaError(f"{res.scratch}", "f_daily_schedule", "holds no step after the night's sleep")
    entries: list[dict[str, str]] = []
    guessed: list[str] = []
    place = home
    for start, activity in steps[first:]:
        named = matcher.find(activity)
        if named:
            place = named[0]
        elif (found := arena_matcher.find(activity)):
            owners = arenas[found[0]]
            place = home if home in owners else next(iter(owners))
        elif _HOME_CUE.search(activity):
            place = home
        elif _WALK_CUE.search(activity) and outdoors:
            place = _pick(outdoors, res.name, "walk")
        else:
            guessed.append(f"'{activity}' ({_hhmm(start)})")
        if entries and (entries[-1]["activity"], entries[-1]["place"]) == (activity, place):
            continue
        entries.append({"start": _hhmm(start), "activity": activity, "place": place})
    if guessed:
        notes.append(Note(res.scratch, "f_daily_schedule", "unread", f"{len(guessed)} of {len(steps) - first} steps "
                                                                     "name no place; each stays where the step "
                                                                     f"before was: {', '.join(guessed[:6])}"
                                                                     f"{' ...' if len(guessed) > 6 else ''}"))
    if entries[-1]["place"] != home:
        notes.append(Note(res.scratch, "f_daily_schedule", "adjusted", "the last step is not at home; the night "
                                                                       "(going to sleep at home) follows it at "
                                                                       f"{_hhmm(min(t, LATEST_NIGHT))}"))
        night = max(min(t, LATEST_NIGHT), int(entries[-1]["start"][:2]) * 60 + int(entries[-1]["start"][3:]) + 1)
        if night < 1440:
            entries.append({"start": _hhmm(night), "activity": "going to sleep", "place": home})
    return entries


def _relationships(res: _Resident, residents: list[_Resident], people: _Matcher, homes: dict[str, str],
                   sectors: dict[str, _Sector], history: dict[str, list[str]] | None = None) -> dict[str, str]:
    """Other residents named in this one's texts (the sentences naming them, then the seed-history statements
    naming them, ``history``: other id -> sentences), and housemates named nowhere."""
    said: dict[str, list[str]] = {}
    for text in (res.learned, res.currently, res.daily_plan_req):
        for sentence in _sentences(text):
            for other in people.find(sentence):
                if other != res.id and sentence not in said.setdefault(other, []):
                    said[other].append(sentence)
    for other, sentences in (history or {}).items():
        said.setdefault(other, []).extend(t for t in sentences if t not in said[other])
    out = {}
    for other in residents:
        if other.id == res.id:
            continue
        if other.id in said:
            out[other.id] = " ".join(said[other.id])
        elif homes[other.id] == homes[res.id]:
            out[other.id] = f"they both live at {_by_id(sectors)[homes[res.id]].name}"
    return out


def _as_sentence(statement: str) -> str:
    """A history statement as a sentence: first letter capitalised, a full stop added when it has none."""
    text = statement[:1].upper() + statement[1:]
    return text if text[-1:] in ".!?" else text + "."


def _other_names(statement: str, known: _Matcher, places: list[list[str]]) -> list[str]:
    """Names of people in ``statement`` that are not in ``known``: two capitalised words ("Ivy Stone", after
    dropping pronouns, articles, months and weekdays at either end; a possessive 's dropped) that are not a
    resident's name nor part of a place's name; a first word with a possessive ("Valentine's Day") is no name."""
    out = []
    for run in _CAPITALISED_RUN.finditer(statement):
        words = run.group().split()
        while words and words[0].lower() in _NOT_NAMES:
            words.pop(0)
        while words and words[-1].lower() in _NOT_NAMES:
            words.pop()
        if len(words) != 2 or _POSSESSIVE.search(words[0]):
            continue
        name = words[0] + " " + _POSSESSIVE.sub("", words[1])
        toks = _tokens(name)
        if known.find(name) or len(toks) != 2 or any(p[i:i + 2] == toks for p in places for i in range(len(p))):
            continue
        if name not in out:
            out.append(name)
    return out


def _read_history(rows: list[tuple[int, str, list[str]]], label: str, residents: list[_Resident],
                  people: _Matcher, places: list[str], world: str,
                  notes: list[Note]) -> tuple[dict[str, list[str]], dict[str, dict[str, list[str]]], dict[str, int]]:
    """Where each seed-history statement goes: statements naming other residents to the relationship with each of
    them, the rest to the resident's background. A name close to a resident's (:data:`NAME_CUTOFF`) is read as
    that resident's; names of people not in the town, and rows of names not in the town, are reported.

    Returns:
        ``(background, relationships, counts)``: resident id -> sentences; resident id -> other id -> sentences;
        the counts of rows, statements and where they went.
    """
    by_name = {r.name: r.id for r in residents}
    names = {r.id: r.name for r in residents}
    place_tokens = [_tokens(p) for p in places]
    background: dict[str, list[str]] = {}
    relations: dict[str, dict[str, list[str]]] = {}
    counts = {"rows": len(rows), "statements": 0, "relationships": 0, "background": 0, "not_imported": 0}

    def resident(name: str, field: str, what: str) -> str | None:
        if name in by_name:
            return by_name[name]
        close = difflib.get_close_matches(name, list(by_name), 1, NAME_CUTOFF)
        if close:
            notes.append(Note(label, field, "adjusted", f"{what} '{name}' read as {close[0]}, the resident with the "
                                                        "closest name"))
            return by_name[close[0]]
        return None

    for line, name, statements in rows:
        counts["statements"] += len(statements)
        rid = resident(name, f"line {line}", "the Name")
        if rid is None:
            counts["not_imported"] += len(statements)
            notes.append(Note(label, f"line {line}", "unknown", f"the Name '{name}' is not a resident of {world}: its "
                                                               f"{len(statements)} statements are not imported"))
            continue
        for statement in statements:
            sentence = _as_sentence(statement)
            others = [o for o in people.find(statement) if o != rid]
            for other in _other_names(statement, people, place_tokens):
                close = resident(other, f"line {line}", f"{name}'s statement \"{statement}\" names")
                if close is not None:
                    if close != rid and close not in others:
                        others.append(close)
                    continue
                kept = (f"kept in the relationship with {join_words([names[o] for o in others])}" if others
                        else "kept as a background memory")
                notes.append(Note(label, f"line {line}", "unknown", f"{name}'s statement \"{statement}\" names "
                                                                    f"{other}, who is not a resident of {world}: "
                                                                    f"{kept}"))
            if others:
                counts["relationships"] += 1
                for other in others:
                    relations.setdefault(rid, {}).setdefault(other, []).append(sentence)
            else:
                counts["background"] += 1
                background.setdefault(rid, []).append(sentence)
    return background, relations, counts


# ----------------------------------------------------------------------------------------------------- the town
def convert(storage: str | Path, assets: str | Path | None = None,
            history: str | Path | None = None) -> tuple[dict[str, Any], dict[str, dict], dict[str, Any]]:
    """Convert a Generative Agents storage folder (and map) into simulacra's formats, without writing anything.

    Args:
        storage: the simulation's storage folder (``.../storage/base_the_ville_n25`` or a saved simulation's).
        assets: the map's folder (``.../static_dirs/assets/the_ville``) or ``None`` (layout from the hierarchy);
            its seed history for the town's number of residents (:data:`HISTORY_FILE`) is read when ``history``
            is ``None``.
        history: a seed-history CSV (:func:`read_history`), or ``None``: the one in ``assets``, if any. Statements
            naming another resident join the relationship with that resident; the rest join the background.
    Returns:
        ``(world, personas, report)``: the world file's mapping, ``{resident id: persona mapping}`` (both in file
        order) and the import report (counts, each resident's home, workplace and routine source, and the
        :class:`Note` lines as dicts).
    Raises:
        WorldError, PersonaError: bad input, naming the file and the field.
    """
    storage = Path(storage)
    residents, worlds, meta = _read_storage(storage)
    tmap = read_map(assets) if assets is not None else None
    notes: list[Note] = []
    world_name = worlds[0] if worlds else storage.name
    sectors = _sectors(residents, tmap, notes)
    history_label = None
    if history is not None:
        history_rows, history_label = read_history(history), Path(history).name
    elif assets is not None:
        found, others = _history_file(Path(assets), len(residents))
        history_rows = read_history(found) if found is not None else []
        if found is not None:
            history_label = f"assets/{found.parent.name}/{found.name}"
        elif others:
            notes.append(Note(f"assets/{Path(assets).name}", None, "unread",
                              f"no {HISTORY_FILE.format(n=len(residents))} (the seed history of {len(residents)} "
                              f"residents); {join_words(others)} there is for another town: pass --history to use it"))
    for res in residents:
        sector = res.living_area[1]
        if sector not in sectors:
            where = "no resident's spatial_memory.json" + (" nor the map" if tmap is not None else "")
            raise PersonaError(storage / res.scratch, "living_area",
                               f"'{res.living_area[1]}' names no known place: {where} has that sector; "
                               + unknown_name("sector", sector, list(sectors)))
        if len(res.living_area) > 2 and res.living_area[2] and res.living_area[2] not in sectors[sector].arenas:
            notes.append(Note(res.scratch, "living_area", "unread", f"the arena '{res.living_area[2]}' is not in "
                                                                    f"{sector} in any spatial memory; the home is "
                                                                    f"the sector {sector}"))
    taken = {s.id for s in sectors.values()}
    if tmap is None:
        streets, paths, positions, edges_per_tick = _hub_town(sectors, world_name, taken)
        layout = "spring_layout (no map)"
    else:
        streets, paths, positions, edges_per_tick = _map_town(sectors, tmap, taken, notes)
        layout = "map tiles"
    places: dict[str, dict[str, Any]] = {}
    for sec in sectors.values():
        places[sec.id] = {"name": sec.name, "kind": sec.kind, "description": _describe(sec, world_name),
                          "position": positions[sec.id]}
    for sid, street in streets.items():
        places[sid] = {**street, "position": positions[sid]}

    matcher = _Matcher({s.id: s.name for s in sectors.values()})
    people = _Matcher({r.id: r.name for r in residents})
    told_background: dict[str, list[str]] = {}
    told: dict[str, dict[str, list[str]]] = {}
    history_counts = None
    if history_label is not None:
        place_names = [world_name, *sectors, *(a for sec in sectors.values() for a in sec.arenas)]
        told_background, told, history_counts = _read_history(history_rows, history_label, residents, people,
                                                              place_names, world_name, notes)
    homes = {r.id: sectors[r.living_area[1]].id for r in residents}
    personas: dict[str, dict] = {}
    summary = []
    street_of: dict[str, set[str]] = {}  # sector id -> the street places a path joins it to
    for a, b in paths:
        if a in streets and b not in streets:
            street_of.setdefault(b, set()).add(a)
        elif b in streets and a not in streets:
            street_of.setdefault(a, set()).add(b)
    for res in residents:
        home = homes[res.id]
        known = sorted({sectors[s].id for s in res.spatial if s in sectors} | {home}, key=lambda p: places[p]["name"])
        known_streets = sorted({st for sid in known for st in street_of.get(sid, ())}, key=lambda p: places[p]["name"])
        occupation = _occupation(res, world_name, notes)
        plan = _read_plan(res, sectors, matcher, home, notes)
        if res.schedule:
            routine = _schedule_routine(res, home, known, matcher, sectors, notes)
            source = "f_daily_schedule"
        else:
            routine = _lifestyle_routine(res, occupation, home, plan, known, sectors, notes)
            source = "lifestyle and daily_plan_req"
        background = " ".join(t for t in (res.learned, res.currently, *told_background.get(res.id, [])) if t)
        personas[res.id] = {
            "name": res.name, "age": res.age, "occupation": occupation,
            "traits": [t.strip() for t in res.innate.split(",") if t.strip()],
            "background": background, "home": home, "lifestyle": res.lifestyle,
            "known_places": [p for p in known + known_streets if p != home],
            "routine": routine,
            "relationships": _relationships(res, residents, people, homes, sectors, told.get(res.id)),
        }
        summary.append({"id": res.id, "name": res.name, "file": res.scratch, "home": places[home]["name"],
                        "workplace": places[plan.workplace]["name"] if plan.workplace else None,
                        "routine": source, "routine_steps": len(routine)})
    weekday, start_date = "Monday", None
    when = str(meta.get("curr_time") or meta.get("start_date") or "")
    try:
        first = datetime.strptime(when.split(",")[0] + "," + when.split(",")[1], "%B %d, %Y")
        weekday, start_date = first.strftime("%A"), first.date().isoformat()
    except (ValueError, IndexError):
        notes.append(Note("reverie/meta.json", "curr_time", "unread", "no date (\"February 13, 2023, 00:00:00\"): "
                                                                      "the first day is a Monday"))
    world = {
        "name": world_name,
        "description": f"{world_name} is a small town of {len(residents)} residents, with "
                       f"{sum(1 for s in sectors.values() if s.kind == 'home')} homes, "
                       f"{sum(1 for s in sectors.values() if s.kind != 'home')} other places and the streets "
                       "between them.",
        "start_time": "07:00", "end_time": "23:00", "tick_minutes": TICK_MINUTES, "edges_per_tick": edges_per_tick,
        "start_weekday": weekday, "rest_days": [], "rules": [], "shared_memory": False,
        "places": places, "paths": paths, "objects": _objects(sectors), "events": [],
        "residents": [r.id for r in residents],
    }
    order = {r.scratch: i for i, r in enumerate(residents)}
    last = ("assets/", history_label or "assets/")  # the map's and the history's notes after the residents'
    notes.sort(key=lambda n: (n.file.startswith(last), order.get(n.file.replace("/spatial_memory.json",
                                                                                "/scratch.json"), -1)))
    report = {
        "source": storage.name, "assets": Path(assets).name if assets is not None else None,
        "history": None if history_label is None else {"file": history_label, **history_counts},
        "world": world_name, "start_date": start_date, "layout": layout, "edges_per_tick": edges_per_tick,
        "counts": {"residents": len(residents), "places": len(places), "streets": len(streets),
                   "paths": len(paths), "objects": len(world["objects"]),
                   "relationships": sum(len(p["relationships"]) for p in personas.values())},
        "residents": summary,
        "notes": [n.to_dict() for n in notes],
    }
    return world, personas, report


def import_generative_agents(storage: str | Path, out: str | Path, assets: str | Path | None = None,
                             overwrite: bool = False, history: str | Path | None = None):
    """Convert (:func:`convert`: ``storage``, ``assets`` and ``history`` as there) and write ``world.yaml``,
    ``personas/<id>.json`` and ``import_report.json`` into ``out``, then check them as ``simulacra check`` does.

    Returns:
        ``(world path, the checked World, report)``.
    Raises:
        WorldError, PersonaError: bad input (naming the file and the field), or output that fails the check.
        FileExistsError: a file to write exists and ``overwrite`` is false.
        SimulacraError: ``out`` (or a folder above it) is a file.
    """
    from simulacra.world import check_world
    from simulacra.world.generate import write_world

    world, personas, report = convert(storage, assets, history)
    out = Path(out)
    blocked = next((p for p in (out, *out.parents) if p.exists() and not p.is_dir()), None)
    if blocked is not None:
        raise SimulacraError(f"{out}: cannot hold the imported town (--out): {blocked} is a file, not a folder")
    report_path = out / REPORT_FILE
    if report_path.exists() and not overwrite:
        raise FileExistsError(f"{report_path} exists; pass --overwrite")
    flags = f" --assets {Path(assets).name}" if assets is not None else ""
    flags += f" --history {Path(history).name}" if history is not None else ""
    header = f"# imported by: simulacra import generative-agents {Path(storage).name}{flags}\n"
    scenarios = paper_scenarios(world, personas, report)
    for name in scenarios:
        if (out / name).exists() and not overwrite:
            raise FileExistsError(f"{out / name} exists; pass --overwrite")
    world_path, _ = write_world(out / WORLD_FILE, world, personas, out / PERSONAS_DIR, overwrite, header)
    for name, text in scenarios.items():
        (out / name).write_text(header + text, encoding="utf-8")
    report["scenarios"] = list(scenarios)
    report_path.write_text(json.dumps(report, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    checked = check_world(world_path)
    if scenarios:
        from simulacra.evaluation.scenario import load_scenario

        for name in scenarios:  # what was written loads and passes the scenario checks
            load_scenario(out / name)
    log.info("imported %d residents into %s", len(personas), world_path)
    return world_path, checked, report


#: the two residents of the Generative Agents paper's experiments (arXiv 2304.03442, section 7.1): the host of the
#: Valentine's Day party and the mayoral candidate; the party's day (February 14th), hours and place
PARTY_HOST, CANDIDATE = "Isabella Rodriguez", "Sam Moore"
PARTY_DATE, PARTY_HOURS, PARTY_PLACE = (2, 14), ("17:00", "19:00"), "Hobbs Cafe"
#: the file names of the scenarios written beside an imported Smallville (:func:`paper_scenarios`)
PARTY_FILE, ELECTION_FILE, BOTH_FILE = "smallville-party.yaml", "smallville-election.yaml", "smallville-two-days.yaml"
#: a fact nobody is told: every claim to know it is made up (its words are far from every imported text)
CONTROL_FACT = {
    "id": "control-film-crew",
    "text": "A film studio is going to shoot a submarine film in the town's pond next winter.",
    "question": "Is a film going to be shot in town?",
    "probes": ["A studio will film a submarine picture here next winter."],
}


#: Words that, in a sentence naming the host or the candidate, tell of the party or the candidacy.
PARTY_WORDS, CANDIDACY_WORDS = ("party", "valentine"), ("mayor", "running for", "run for", "candida")


def persona_mentions(personas: dict[str, dict], name: str, words: tuple[str, ...]) -> list[str]:
    """Names of the residents other than ``name`` whose persona (background or a relationship, seed history
    included) has a sentence naming ``name`` in full and one of ``words`` (case-insensitive): residents who know of
    the experiment's fact before it starts. In ``base_the_ville_n25`` Jennifer Moore's seed history says she knows
    that her husband plans to run for mayor. Returned in persona order."""
    found = []
    for p in personas.values():
        if p["name"] == name:
            continue
        texts = [p.get("background") or "", *(p.get("relationships") or {}).values()]
        sentences = (s for t in texts for s in _sentences(str(t)))
        if any(name in s and any(w in s.lower() for w in words) for s in sentences):
            found.append(p["name"])
    return found


def paper_scenarios(world: dict[str, Any], personas: dict[str, dict], report: dict[str, Any]) -> dict[str, str]:
    """The Generative Agents paper's two experiments (section 7.1) as scenario files for an imported town, by file
    name (:data:`PARTY_FILE`, :data:`ELECTION_FILE` and :data:`BOTH_FILE`, both in one run as in the paper), when
    its residents include :data:`PARTY_HOST` and :data:`CANDIDATE`; ``{}`` when neither is there.

    As in the paper, the facts are planted in the host and in the candidate only (an intention memory each,
    :mod:`simulacra.evaluation.scenario`); residents whose persona already tells of one (:func:`persona_mentions`)
    are named in the scenario's description, so that it does not claim "only she knows"; the party is at
    :data:`PARTY_PLACE` (else at the host's workplace) from 17:00 to 19:00 on February 14th, the simulation's second
    day when it starts on the 13th as ``base_the_ville_n25`` does (day 2 when the start date is unknown); each run
    lasts two game days, from the world's start to 20:00 on day 2. The files hold the residents' ids and names, the
    place, and sentences written here: nothing is copied from the user's copy. Args: the world and personas
    mappings and the report of :func:`convert`.
    """
    ids = {p["name"]: rid for rid, p in personas.items()}
    names = {p["name"]: pid for pid, p in world["places"].items()}
    host, candidate = ids.get(PARTY_HOST), ids.get(CANDIDATE)
    day, month_day, short = 2, "day 2", "day 2"
    if report.get("start_date"):
        start = datetime.fromisoformat(report["start_date"])
        days = (datetime(start.year, *PARTY_DATE) - start).days
        if days in (0, 1):
            day, month_day, short = days + 1, f"day {days + 1}, February 14th", "February 14th"
    facts: dict[str, dict[str, Any]] = {}
    blocks: dict[str, dict[str, Any]] = {}
    if host is not None:
        work = next((r["workplace"] for r in report["residents"] if r["id"] == host), None)
        place = names.get(PARTY_PLACE) or names.get(work or "")
        if place is not None:
            where = world["places"][place]["name"]
            start_t, end_t = PARTY_HOURS
            facts["party"] = {
                "id": "party",
                "text": f"{PARTY_HOST} is throwing a Valentine's Day party at {where} on {month_day}, from {start_t} "
                        f"to {end_t}, and everyone in town is invited.",
                "intention": f"{PARTY_HOST} wants to throw a Valentine's Day party at {where} on {month_day}, from "
                             f"{start_t} to {end_t}, and to invite everyone in town.",
                "question": f"Is there a party at {where} on Valentine's Day?",
                "probes": [f"{PARTY_HOST.split()[0]} is hosting a Valentine's Day party at {where} and everyone is "
                           "invited.",
                           f"There is a party at {where} on {short} from five to seven in the evening."],
                "holders": [host], "importance": 7}
            blocks["party"] = {"fact": "party", "host": host, "place": place, "day": day, "start": start_t,
                               "end": end_t}
    if candidate is not None:
        facts["candidacy"] = {
            "id": "candidacy",
            "text": f"{CANDIDATE} is running for mayor in the town's local election.",
            "intention": f"{CANDIDATE} has decided to run for mayor in the local election and wants people in town "
                         "to know.",
            "question": "Who is running for mayor in the local election?",
            "probes": [f"{CANDIDATE.split()[0]} is a candidate in the mayoral election.",
                       f"{CANDIDATE} wants to become the mayor."],
            "holders": [candidate], "importance": 7}
        blocks["candidacy"] = {"fact": "candidacy", "candidate": candidate, "office": "mayor"}

    def scenario(name: str, keys: list[str], what: str) -> str:
        data: dict[str, Any] = {
            "name": name,
            "description": f"{world['name']}, all {len(personas)} residents, two game days from {world['start_time']} "
                           f"on day 1 to 20:00 on day 2: {what} (Generative Agents, arXiv 2304.03442, section 7.1).",
            "world": WORLD_FILE, "until": {"day": 2, "time": "20:00"}, "curve_every_minutes": 120,
            "facts": [facts[k] for k in keys] + [CONTROL_FACT]}
        data.update({k: blocks[k] for k in keys})
        return yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=120)

    def who_knows(holder: str, pronoun: str, others: list[str]) -> str:
        if not others:
            return f"which only {pronoun} knows of at the start"
        whose = (f"{others[0]}'s persona also tells" if len(others) == 1
                 else f"the personas of {join_words(others)} also tell")
        return f"which {pronoun} knows of at the start ({whose} of it)"

    party = f"{PARTY_HOST}'s Valentine's Day party, " + who_knows(
        PARTY_HOST, "she", persona_mentions(personas, PARTY_HOST, PARTY_WORDS))
    election = f"{CANDIDATE}'s candidacy for mayor, " + who_knows(
        CANDIDATE, "he", persona_mentions(personas, CANDIDATE, CANDIDACY_WORDS))
    out = {}
    if "party" in facts:
        out[PARTY_FILE] = scenario("smallville-party", ["party"], party)
    if "candidacy" in facts:
        out[ELECTION_FILE] = scenario("smallville-election", ["candidacy"], election)
    if "party" in facts and "candidacy" in facts:
        out[BOTH_FILE] = scenario("smallville-two-days", ["party", "candidacy"], f"{party}, and {election}, in "
                                  "one run as in the paper")
    return out


def format_report(report: dict[str, Any]) -> str:
    """The report as lines to print: counts, then each note that is not a rule's choice (those are in the file)."""
    c = report["counts"]
    lines = [f"{report['world']}: {c['residents']} residents, {c['places']} places ({c['streets']} streets), "
             f"{c['paths']} paths, {c['objects']} objects, {c['relationships']} relationships; layout from "
             f"{report['layout']}, edges_per_tick {report['edges_per_tick']}"]
    h = report.get("history")
    if h:
        lines.append(f"seed history {h['file']}: {h['statements']} statements of {h['rows']} rows, "
                     f"{h['relationships']} to relationships, {h['background']} to backgrounds"
                     + (f", {h['not_imported']} not imported (rows of names not in the town)" if h["not_imported"]
                        else ""))
    shown = [n for n in report["notes"] if n["kind"] != "chosen"]
    chosen = len(report["notes"]) - len(shown)
    if shown:
        lines.append(f"not read as written ({len(shown)}):")
        for n in shown:
            where = n["file"] + (f" [{n['field']}]" if n["field"] else "")
            lines.append(f"  {n['kind']}: {where}: {n['message']}")
    if chosen:
        lines.append(f"{chosen} places chosen by rule (lunch, leisure, workplace) are listed in {REPORT_FILE}")
    return "\n".join(lines)


__all__ = ["Note", "TileMap", "convert", "format_report", "import_generative_agents", "paper_scenarios", "read_history",
           "read_map"]
