"""World files: schema, loading, and validation against the persona files they name.

Every error names the file and the dotted field; a reference from a persona to an unknown place names
both files.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from simulacra import assets
from simulacra.clock import WEEKDAYS as WEEKDAYS  # re-exported: the weekday names
from simulacra.clock import parse_hhmm, weekday_of
from simulacra.errors import WorldError, read_yaml, unknown_name, validate_as
from simulacra.persona import Persona, load_persona

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class Place(_Strict):
    """A place of the town; ``position`` is a 2-D layout coordinate (x right, y down) for the viewer.

    Attributes:
        name: the place's name as residents say it: ``"The Rising Loaf Bakery"``.
        kind: what sort of place it is; news told at a ``public`` place is posted to the town's shared memory
            (when the world has one); the viewer colours places by kind.
        description: a sentence about the place, a static memory of every resident.
        position: ``[x, y]`` on the viewer's map (x to the right, y down; any scale).
    """

    name: NonEmpty
    kind: Literal["home", "shop", "public", "work", "nature"]
    description: NonEmpty
    position: tuple[float, float]


class WorldObject(_Strict):
    """An object with a state, located in one place.

    Attributes:
        id: the object's id, unique in the world; events' ``object_states`` and routine steps'
            ``object_state`` name it.
        place: the id of the place it is at; residents there perceive it ("The <name> at <place> is <state>.").
        name: what it is called: ``"brick oven"``.
        state: its state when the run starts: ``"cold"``.
    """

    id: NonEmpty
    place: NonEmpty
    name: NonEmpty
    state: NonEmpty


class Event(_Strict):
    """A scheduled happening: at ``time`` (``"HH:MM"``) at ``place``, visible for ``duration_minutes``.

    Attributes:
        time: ``"HH:MM"`` at which it begins on its day.
        day: the game day it happens on (1 is the first day of a run).
        place: the id of the place it happens at; the residents there perceive it.
        text: what happens, as a resident perceives and remembers it.
        importance_hint: the world author's estimate, kept with the event; the rater rates the text itself.
        duration_minutes: game minutes it stays perceivable.
        object_states: object id -> the state the event puts it in when it begins (objects at the event's place).
        public: when it begins, it is posted as a notice to the town's shared memory (when the world has one).
    """

    time: str
    day: int = Field(1, ge=1)
    place: NonEmpty
    text: NonEmpty
    importance_hint: Literal["minor", "notable", "major"] = "notable"
    duration_minutes: int = Field(30, ge=1)
    object_states: dict[str, NonEmpty] = Field(default_factory=dict)
    public: bool = False

    @field_validator("time")
    @classmethod
    def _valid_time(cls, v: str) -> str:
        parse_hhmm(v)
        return v

    @property
    def minute(self) -> int:
        """Absolute game minute of the event (day 1 starts at minute 0)."""
        return (self.day - 1) * 24 * 60 + parse_hhmm(self.time)


Weekday = Literal["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]


class World(_Strict):
    """A parsed world file. ``graph`` (networkx) and ``path``/``personas`` are set by :func:`load_world`.

    Attributes:
        name: the town's name.
        description: a paragraph about the town, a static memory of every resident.
        start_time: ``"HH:MM"`` at which a run begins on day 1.
        end_time: ``"HH:MM"`` at which a run of one day ends (the next day's when not after ``start_time``);
            ``--days D`` runs to this time on day D.
        tick_minutes: game minutes per tick.
        edges_per_tick: paths a walking resident goes along in one tick.
        rules: sentences every resident knows, each a static memory ("Rule of <town>: ...").
        shared_memory: whether the town has a shared memory (a notice board): public events and news told at
            public places are posted to it, and every resident retrieves from it after its own tiers.
        places: place id -> place (at least one); the ids are what everything else refers to.
        paths: ``[a, b]`` pairs of place ids joined by a path (both ways, each pair once); every place must be
            reachable from every other.
        objects: the objects of the town.
        events: the scheduled events.
        residents: the ids of the residents (persona file stems, each once); each needs ``<id>.json`` in the
            personas folder.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, allow_inf_nan=False)
    internal_fields: ClassVar[frozenset[str]] = frozenset({"source"})  # set by load_world

    name: NonEmpty
    description: NonEmpty
    start_time: str = "07:00"
    end_time: str = "23:00"
    tick_minutes: int = Field(10, ge=1, le=24 * 60)
    edges_per_tick: int = Field(1, ge=1)
    rules: list[NonEmpty] = Field(default_factory=list)
    shared_memory: bool = False
    places: dict[str, Place] = Field(min_length=1)
    paths: list[tuple[NonEmpty, NonEmpty]] = Field(default_factory=list)
    objects: list[WorldObject] = Field(default_factory=list)
    events: list[Event] = Field(default_factory=list)
    residents: list[NonEmpty] = Field(min_length=1)
    start_weekday: Weekday = Field("Monday", description="the weekday of day 1")
    rest_days: list[Weekday] = Field(
        default_factory=list, description="weekdays on which residents follow their rest_day_routine"
    )

    @field_validator("start_time", "end_time")
    @classmethod
    def _valid_time(cls, v: str) -> str:
        parse_hhmm(v)
        return v

    personas_dir: str | None = Field(None, description="folder of the residents' persona files, relative to this "
                                     "file (default: agent_personalities/ beside this file's folder)")
    # set after validation
    source: str = ""

    def model_post_init(self, __context) -> None:
        self._graph = None
        self._personas: dict[str, Persona] = {}
        self._persona_files: dict[str, str] = {}

    @property
    def graph(self) -> nx.Graph:
        """Undirected graph of place ids (nodes) and paths (edges); every node's neighbours iterate in name order,
        so breadth-first routes break ties by name whatever the file's order of paths."""
        if self._graph is None:
            neighbours: dict[str, set[str]] = {p: set() for p in self.places}
            for a, b in self.paths:
                neighbours[a].add(b)
                neighbours[b].add(a)
            g = nx.Graph()
            g.add_nodes_from(sorted(self.places))
            # adding each node's edges in name order leaves every adjacency sorted: a node first gains its
            # smaller neighbours (when they are visited) in order, then its larger ones (when it is visited)
            for node in sorted(neighbours):
                g.add_edges_from((node, nb) for nb in sorted(neighbours[node]) if nb > node)
            self._graph = g
        return self._graph

    @property
    def personas(self) -> dict[str, Persona]:
        """The residents' personas by id, in the world file's order."""
        return self._personas

    @property
    def persona_files(self) -> dict[str, str]:
        """Resident id -> the path of the persona file it was loaded from."""
        return self._persona_files

    def weekday(self, game_minute: int) -> str:
        """The weekday (``"Monday"``..``"Sunday"``) of the game day holding ``game_minute`` (day 1 is
        ``start_weekday``)."""
        return weekday_of(game_minute, self.start_weekday)

    def is_rest_day(self, game_minute: int) -> bool:
        """True when the game day holding ``game_minute`` is one of ``rest_days``."""
        return self.weekday(game_minute) in self.rest_days

    @property
    def start_minute(self) -> int:
        return parse_hhmm(self.start_time)

    @property
    def end_minute(self) -> int:
        end = parse_hhmm(self.end_time)
        return end if end > self.start_minute else end + 24 * 60

    def run_minutes(self, days: int = 1) -> int:
        """Game minutes from ``start_time`` on day 1 to ``end_time`` on day ``days`` (>= 1): the default length of a
        run (``days=1``: ``start_time`` to ``end_time``; each further day adds 24 hours, its night included)."""
        if days < 1:
            raise ValueError(f"days must be >= 1, got {days}")
        return (days - 1) * 24 * 60 + self.end_minute - self.start_minute

    def route(self, src: str, dst: str) -> list[str]:
        """Shortest path of place ids from ``src`` to ``dst`` (both included): networkx's breadth-first search
        over :attr:`graph`, whose neighbours are visited in name order, so ties are broken the same way every run.

        Raises:
            ValueError: no path joins the two places.
        """
        try:
            return nx.single_source_shortest_path(self.graph, src)[dst] if src != dst else [src]
        except (KeyError, nx.NodeNotFound):
            raise ValueError(f"no path from {src} to {dst}") from None

    def facts(self, known: Collection[str] | None = None) -> list[str]:
        """Static-memory sentences about the world: its description, its rules and the descriptions of its places
        (in the world file's order), of the places in ``known`` only when it is given (a resident's
        :meth:`~simulacra.persona.Persona.places_known`)."""
        out = [f"{self.name}: {self.description}"]
        out += [f"Rule of {self.name}: {rule}" for rule in self.rules]
        out += [f"{p.name} ({self.name}): {p.description}" for pid, p in self.places.items()
                if known is None or pid in known]
        return out


_RESIDENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def load_world(path: str | Path, personas_dir: str | Path | None = None) -> World:
    """Load a world file and the persona files of its residents, and check every cross-reference.

    Args:
        path: the world YAML file, or the name of a packaged world (:func:`simulacra.assets.find`: ``fernhollow``).
        personas_dir: folder of ``<id>.json`` persona files (default: the world's ``personas_dir``, relative to
            the world file, else ``agent_personalities/`` next to the world file's folder).
    Returns:
        The world, with ``world.personas`` filled in.
    Raises:
        WorldError: the world file is unreadable, malformed, or refers to something unknown (the error names
            the field, and the persona file where the reference comes from one).
        PersonaError: a persona file is invalid on its own.
    """
    path = assets.find(path, "world")
    if not path.exists():
        raise WorldError(path, None, f"no such file ({assets.describe('world')})")
    data = read_yaml(path, WorldError)
    if data is None:
        raise WorldError(path, None, "the file is empty; expected a mapping with name, description, places and "
                                     "residents")
    if not isinstance(data, dict):
        raise WorldError(path, None, f"expected a mapping (name: ..., places: ...) at the top level, got "
                                     f"{type(data).__name__}")
    world = validate_as(World, data, path, WorldError)
    world.source = str(path)

    places = world.places
    first_path: dict[frozenset[str], int] = {}
    for i, (a, b) in enumerate(world.paths):
        for j, end in enumerate((a, b)):
            if end not in places:
                raise WorldError(path, f"paths.{i}.{j}", unknown_name("place", end, list(places)))
        if a == b:
            raise WorldError(path, f"paths.{i}", f"a path from '{a}' to itself")
        if frozenset((a, b)) in first_path:
            raise WorldError(path, f"paths.{i}", f"the path between '{a}' and '{b}' is already paths."
                                                 f"{first_path[frozenset((a, b))]}; expected each path once")
        first_path[frozenset((a, b))] = i
    if len(places) > 1 and not nx.is_connected(world.graph):
        parts = sorted(sorted(c) for c in nx.connected_components(world.graph))
        raise WorldError(path, "paths", f"places are not all connected: {parts}")
    ids = [o.id for o in world.objects]
    objects = {o.id: o for o in world.objects}
    for i, obj in enumerate(world.objects):
        if obj.place not in places:
            raise WorldError(path, f"objects.{i}.place", unknown_name("place", obj.place, list(places)))
        if ids.index(obj.id) != i:
            raise WorldError(path, f"objects.{i}.id", f"duplicate object id '{obj.id}' (also objects."
                                                      f"{ids.index(obj.id)}); expected each id once")
    for i, ev in enumerate(world.events):
        if ev.place not in places:
            raise WorldError(path, f"events.{i}.place", unknown_name("place", ev.place, list(places)))
        for oid in ev.object_states:
            if oid not in objects:
                raise WorldError(path, f"events.{i}.object_states.{oid}", unknown_name("object", oid, ids))
            if objects[oid].place != ev.place:
                raise WorldError(path, f"events.{i}.object_states.{oid}",
                                 f"object '{oid}' is at '{objects[oid].place}', not at the event's place '{ev.place}'")
    for i, rid in enumerate(world.residents):
        if not _RESIDENT_ID.fullmatch(rid):
            raise WorldError(path, f"residents.{i}", f"'{rid}' is not a resident id: expected the stem of a persona "
                                                     "file name (letters, digits, _ . -), e.g. mei_lin")
        if world.residents.index(rid) != i:
            raise WorldError(path, f"residents.{i}", f"'{rid}' is listed twice (also residents."
                                                     f"{world.residents.index(rid)}); expected each resident once")

    if personas_dir is not None:
        pdir = Path(personas_dir)
    elif world.personas_dir is not None:
        pdir = path.parent / world.personas_dir
    else:
        pdir = path.parent.parent / "agent_personalities"
    if not pdir.is_dir():
        raise WorldError(path, "residents", f"the personas folder {pdir} does not exist"
                                            + (" (pass --personas-dir)" if personas_dir is None else ""))
    personas: dict[str, Persona] = {}
    for i, rid in enumerate(world.residents):
        ppath = pdir / f"{rid}.json"
        if not ppath.exists():
            raise WorldError(path, f"residents.{i}", f"no persona file {ppath} for resident '{rid}'")
        personas[rid] = load_persona(ppath)
    for rid, persona in personas.items():
        ppath = pdir / f"{rid}.json"
        if persona.home not in places:
            raise WorldError(ppath, "home", unknown_name("place", persona.home, list(places)), other_file=path)
        routines = [("routine", persona.routine)]
        if persona.rest_day_routine is not None:
            routines.append(("rest_day_routine", persona.rest_day_routine))
        for key, routine in routines:
            for j, entry in enumerate(routine):
                if entry.place not in places:
                    raise WorldError(ppath, f"{key}.{j}.place", unknown_name("place", entry.place, list(places)),
                                     other_file=path)
                for oid in entry.object_state:
                    obj = objects.get(oid)
                    if obj is None:
                        raise WorldError(ppath, f"{key}.{j}.object_state.{oid}", unknown_name("object", oid, ids),
                                         other_file=path)
                    if obj.place != entry.place:
                        raise WorldError(ppath, f"{key}.{j}.object_state.{oid}",
                                         f"object '{oid}' is at '{obj.place}', not at '{entry.place}'",
                                         other_file=path)
        for j, pid in enumerate(persona.known_places or ()):
            if pid not in places:
                raise WorldError(ppath, f"known_places.{j}", unknown_name("place", pid, list(places)), other_file=path)
        for other in persona.relationships:
            if other not in personas:
                raise WorldError(ppath, f"relationships.{other}", unknown_name("resident", other, world.residents),
                                 other_file=path)
            if other == rid:
                raise WorldError(ppath, f"relationships.{other}", "a relationship with oneself")
    world._personas = personas
    world._persona_files = {rid: str(pdir / f"{rid}.json") for rid in personas}
    return world


def check_world(path: str | Path, personas_dir: str | Path | None = None) -> World:
    """Validate a world file and its residents' personas as a user would before a run.

    Raises:
        WorldError, PersonaError: see :func:`load_world`.
    """
    return load_world(path, personas_dir)

