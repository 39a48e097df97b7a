"""Personas: the static memory of an agent, one JSON file per agent in ``agent_personalities/``.

The file's stem is the agent's id (``mei_lin.json`` -> ``mei_lin``); it names the agent's Chroma
folder ``database/<run>/<id>/``. :func:`check_persona` validates one file on its own; place and
relationship references are checked against a world by :func:`simulacra.world.load_world`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, ClassVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator

from simulacra.clock import parse_hhmm
from simulacra.errors import PersonaError, duplicate_key_path, mark_duplicate_keys, read_text, validate_as
from simulacra.text import join_words, pronouns_of

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]


class RoutineEntry(BaseModel):
    """One step of the daily routine: from ``start`` (``"HH:MM"``) the agent does ``activity`` at ``place``.

    Attributes:
        start: ``"HH:MM"`` (24-hour clock) at which the step begins; a routine's entries start strictly later one
            after the other.
        activity: what the agent does, as it completes "<name> is ...": ``"feeding the hens"``.
        place: the id of the place (a key of the world's ``places``) where the agent does it.
        object_state: object id -> the state the agent leaves it in when it acts at this step's place (each
            object must be at that place).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    start: str
    activity: NonEmpty
    place: NonEmpty
    object_state: dict[str, NonEmpty] = Field(default_factory=dict)

    @field_validator("start")
    @classmethod
    def _valid_time(cls, v: str) -> str:
        parse_hhmm(v)
        return v

    @property
    def start_minute(self) -> int:
        """Minutes after midnight."""
        return parse_hhmm(self.start)


class Persona(BaseModel):
    """A resident's identity, routine and relationships (seed 003's static memory).

    Attributes:
        name: the full name; its first word is the first name used in conversation.
        age: age in years.
        occupation: what the resident does, as it completes "<name>, <age>, is a ...": ``"fruit farmer"``.
        traits: adjectives describing the resident (at least one).
        background: a paragraph of the resident's history and situation, a static memory as it is written.
        home: the id of the place the resident lives at.
        lifestyle: a sentence on how the resident lives, a static memory as it is written.
        speech_style: how the resident speaks; put into the language-model mind's prompts.
        interests: what the resident is interested in (one static-memory sentence).
        routine: the steps of a day (at least one), in order of ``start``; the first is the wake-up and the plan
            of the day; before it, the previous day's last step is in force.
        relationships: resident id -> how this resident sees that one (a static memory "<name> and <other>:
            ..."); the residents listed are acquaintances: perceived first, and likelier to talk
            (``simulation.acquaintance_bonus``).
        aliases: other phrases the world's text names the resident by, matched as written (its first letter in
            either case): ``["the minister"]`` for the minister of the Seafarers' Chapel, whose occupation as a whole
            is not how an event says it. A world event that names the resident is rated, and told by it, from its
            perspective (:func:`simulacra.memory.perspective.own_perspective`); default none.
        known_places: place ids whose descriptions the resident holds in static memory besides its home and the
            places of its routines (:meth:`places_known`); ``None`` (the default, every hand-made town): every
            place of the world. A generated town lists each resident's quarter, so a resident's static memory does
            not grow with the town (docs/scale.md); the Generative Agents paper's residents likewise know only part
            of their town (their spatial memory).
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)
    internal_fields: ClassVar[frozenset[str]] = frozenset({"id"})  # set from the file name, not written by users

    id: str = ""
    name: NonEmpty
    age: int = Field(ge=0, le=130, strict=True)  # strict: JSON's true is not an age
    occupation: NonEmpty
    traits: list[NonEmpty] = Field(min_length=1)
    background: NonEmpty
    home: NonEmpty
    lifestyle: str = ""
    speech_style: str = ""
    interests: list[NonEmpty] = Field(default_factory=list)
    routine: list[RoutineEntry] = Field(min_length=1)
    rest_day_routine: list[RoutineEntry] | None = Field(
        None, min_length=1,
        description="the routine of the world's rest days (World.rest_days); null = the same routine every day",
    )
    relationships: dict[str, NonEmpty] = Field(default_factory=dict)
    aliases: list[NonEmpty] = Field(
        default_factory=list, description="phrases besides the name and 'the <occupation>' that name the resident "
        "in the world's text ('the minister'), matched as written")
    known_places: list[NonEmpty] | None = Field(
        None, description="place ids known besides the home and the routines' places; null = every place")

    @field_validator("routine", "rest_day_routine")
    @classmethod
    def _sorted(cls, v: list[RoutineEntry] | None) -> list[RoutineEntry] | None:
        if v is None:
            return v
        starts = [e.start_minute for e in v]
        for i in range(1, len(starts)):
            if starts[i] <= starts[i - 1]:
                raise ValueError(f"entry {i} starts at {v[i].start}, not after entry {i - 1} ({v[i - 1].start})")
        return v

    def places_known(self) -> set[str] | None:
        """The place ids whose descriptions are in this resident's static memory: its home, the places of its
        routines and ``known_places``; ``None`` when ``known_places`` is ``None`` (every place of the world)."""
        if self.known_places is None:
            return None
        entries = [*self.routine, *(self.rest_day_routine or ())]
        return {self.home, *(e.place for e in entries), *self.known_places}

    @property
    def first_name(self) -> str:
        return self.name.split()[0]

    @property
    def pronouns(self) -> str | None:
        """The resident's third-person pronoun set, ``"he"``, ``"she"`` or ``"they"``, inferred from its
        ``background`` (:func:`simulacra.text.pronouns_of`: the set of more than half the pronouns it holds;
        ``None`` when none is). A persona has no pronoun field; the scripted mind uses this to say its routine's
        third-person activity in the first person (:func:`simulacra.text.first_person`)."""
        return pronouns_of(self.background)

    def routine_for(self, rest_day: bool = False) -> list[RoutineEntry]:
        """The routine of a working day, or of a rest day (``rest_day_routine`` when the persona has one)."""
        if rest_day and self.rest_day_routine is not None:
            return self.rest_day_routine
        return self.routine

    def routine_at(self, minute_of_day: int, rest_day: bool = False) -> tuple[int, RoutineEntry]:
        """The entry of the day's routine (:meth:`routine_for`) in force at ``minute_of_day`` (0..1439; the last
        one started; before the first, the last of the previous day) and its index in that routine."""
        routine = self.routine_for(rest_day)
        current = len(routine) - 1
        for i, entry in enumerate(routine):
            if entry.start_minute <= minute_of_day:
                current = i
        return current, routine[current]

    def facts(self) -> list[str]:
        """Static-memory sentences about this persona, in a fixed order: identity, traits, background, lifestyle,
        interests, one sentence per routine entry, then one per rest-day routine entry (when it has one)."""
        out = [
            f"{self.name}, {self.age}, is {_article(self.occupation)}.",
            f"{self.name} is {join_words(self.traits)}.",
            self.background,
        ]
        if self.lifestyle:
            out.append(self.lifestyle)
        if self.interests:
            out.append(f"{self.name} is interested in {join_words(self.interests)}.")
        for entry in self.routine:
            out.append(f"On a usual day at {entry.start}, {self.name} is {entry.activity}.")
        for entry in self.rest_day_routine or ():
            out.append(f"On a rest day at {entry.start}, {self.name} is {entry.activity}.")
        return out


def _article(noun: str) -> str:
    return ("an " if noun[:1].lower() in "aeiou" else "a ") + noun


def _no_constant(name: str):
    raise ValueError(f"{name} is not a number JSON allows")


def load_persona(path: str | Path) -> Persona:
    """Load and validate one persona file (UTF-8 JSON; a leading byte-order mark is accepted).

    Raises:
        PersonaError: naming the file and the dotted field (``routine.3.start``) on any problem: unreadable,
            not UTF-8, empty, not JSON (line and column given), a key given twice in one object, a missing,
            unknown (closest valid name suggested) or invalid field.
    """
    path = Path(path)
    text = read_text(path, PersonaError)
    if not text.strip():
        raise PersonaError(path, None, "the file is empty; expected a JSON object with name, age, occupation, "
                                       "traits, background, home and routine")
    try:
        data = json.loads(text, object_pairs_hook=mark_duplicate_keys, parse_constant=_no_constant)
    except json.JSONDecodeError as err:
        raise PersonaError(path, None, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}") from None
    except ValueError as err:
        raise PersonaError(path, None, f"not valid JSON: {err}") from None
    except RecursionError:
        raise PersonaError(path, None, "not valid JSON: nested too deeply") from None
    duplicate = duplicate_key_path(data)
    if duplicate:
        raise PersonaError(path, ".".join(duplicate), f"key '{duplicate[-1]}' given twice in one object; "
                                                      "expected each key once")
    if not isinstance(data, dict):
        raise PersonaError(path, None, f"expected a JSON object, got {type(data).__name__}")
    if "id" in data:
        raise PersonaError(path, "id", "the id is the file name; remove this field")
    persona = validate_as(Persona, data, path, PersonaError)
    persona.id = path.stem
    return persona


def check_persona(path: str | Path) -> Persona:
    """Validate a persona file as users would before a run (alias of :func:`load_persona`)."""
    return load_persona(path)
