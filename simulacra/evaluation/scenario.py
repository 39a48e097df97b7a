"""Scenario files (``scenarios/*.yaml``): a world, the changes made to its residents before the first tick, the
facts to follow, the party or candidacy to watch, how long to run and what to measure.

Validated like worlds: every error names the file and the dotted field (:class:`~simulacra.errors.ScenarioError`),
a key given twice in one mapping is refused (:func:`~simulacra.errors.read_yaml`), a misspelt field or an unknown
resident or place gets the closest valid name. Times are ``"HH:MM"`` on a game ``day`` (day 1 = the first);
absolute game minutes (day 1 starts at minute 0) are given by the ``*_minute`` properties.

Example (``scenarios/fernhollow-party.yaml``)::

    name: fernhollow-party
    world: ../worlds/fernhollow.yaml          # relative to the scenario file
    until: {day: 1, time: "18:30"}            # the run ends here (or: hours: 11.5)
    facts:
      - id: party
        text: "Greta Lund is throwing a party at The Wren and Kettle on day 1 from 16:00 to 18:00 ..."
        question: "Is anything happening at The Wren and Kettle this afternoon?"
        probes: ["There is a party at the tavern this afternoon."]
        holders: [greta_lund]                 # residents who know it at the start (their own intention)
        intention: "Greta Lund wants to throw a party ..."   # the holders' memory (default: text)
    party: {fact: party, host: greta_lund, place: tavern, day: 1, start: "16:00", end: "18:00"}
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, field_validator, model_validator

from simulacra import assets
from simulacra.clock import MINUTES_PER_DAY, parse_hhmm
from simulacra.config import MemoryConfig, RetrievalProfile
from simulacra.errors import ScenarioError, read_yaml, unknown_name, validate_as

NonEmpty = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1)]
Metric = Literal["diffusion", "network", "coordination", "hallucination", "cost", "history", "recall"]
METRICS: tuple[str, ...] = ("diffusion", "network", "coordination", "hallucination", "cost", "history", "recall")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


def _hhmm(v: str) -> str:
    parse_hhmm(v)
    return v


class Moment(_Strict):
    """A game time: ``time`` (``"HH:MM"``) on ``day`` (1 = the first day)."""

    day: int = Field(1, ge=1)
    time: str

    @field_validator("time")
    @classmethod
    def _valid_time(cls, v: str) -> str:
        return _hhmm(v)

    @property
    def minute(self) -> int:
        """Absolute game minute."""
        return (self.day - 1) * MINUTES_PER_DAY + parse_hhmm(self.time)


class Fact(_Strict):
    """A piece of information whose spread is measured.

    Attributes:
        id: short name (``party``); text: the fact as it is told (the news topic).
        question: what an agent is asked to find out whether it knows the fact (retrieval query and interview).
        probes: paraphrases of the fact: a memory close to the text or to any probe counts as the fact.
        holders: residents who know it at the start: a memory of kind ``intention`` holding ``intention`` is
            written for each before the first tick. No holders: a control fact nobody is told (every claim to
            know it is made up).
        intention: the holders' memory text (default: ``text``).
        importance: the holders' memory rating (1..10); default: rated by the run's rater like any memory.
        told_at: when the holders are *told* the fact instead of holding it from the start (a tick's
            telling, :mod:`simulacra.schedule`): a ``dialogue`` memory ``'<told_by> told <Name>: "<text>"'`` tagged
            with the fact as its news topic, so they pass it on like news they heard.
        told_by: who tells them (default ``"A visitor from out of town"``); only with ``told_at``.
    """

    id: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_-]+$")]
    text: NonEmpty
    question: NonEmpty
    probes: list[NonEmpty] = Field(default_factory=list)
    holders: list[NonEmpty] = Field(default_factory=list)
    intention: NonEmpty | None = None
    importance: int | None = Field(None, ge=1, le=10)
    told_at: Moment | None = None
    told_by: NonEmpty | None = None

    @model_validator(mode="after")
    def _told(self) -> Fact:
        if self.told_by is not None and self.told_at is None:
            raise ValueError("told_by needs told_at (when the holders are told)")
        if self.told_at is not None and self.intention is not None:
            raise ValueError("a fact told at told_at is heard, not intended: give no intention")
        return self

    @property
    def memory_text(self) -> str:
        """The holders' memory: their intention (held from the start), or, told at ``told_at``, what they were told
        (``{name}``: the holder's name, filled in when it is written)."""
        if self.told_at is not None:
            return f'{self.teller} told {{name}}: "{self.text}"'
        return self.intention or self.text

    @property
    def teller(self) -> str:
        """Who tells the holders at ``told_at``."""
        return self.told_by or "A visitor from out of town"

    @property
    def control(self) -> bool:
        return not self.holders


class Party(_Strict):
    """A gathering: ``host`` holds ``fact`` and wants everyone at ``place`` on ``day`` from ``start`` to ``end``.
    An agent attended when it was at ``place`` during the window (at least one tick)."""

    fact: NonEmpty
    host: NonEmpty
    place: NonEmpty
    day: int = Field(1, ge=1)
    start: str
    end: str

    @field_validator("start", "end")
    @classmethod
    def _valid_times(cls, v: str) -> str:
        return _hhmm(v)

    @model_validator(mode="after")
    def _ordered(self) -> Party:
        if parse_hhmm(self.end) <= parse_hhmm(self.start):
            raise ValueError(f"end {self.end} is not after start {self.start}")
        return self

    @property
    def start_minute(self) -> int:
        return (self.day - 1) * MINUTES_PER_DAY + parse_hhmm(self.start)

    @property
    def end_minute(self) -> int:
        return (self.day - 1) * MINUTES_PER_DAY + parse_hhmm(self.end)


class Candidacy(_Strict):
    """A resident announces a candidacy (``fact``, held by ``candidate``) for ``office``."""

    fact: NonEmpty
    candidate: NonEmpty
    office: NonEmpty


class Recall(_Strict):
    """The recall test (issue 22, seed 000's "day 16 recalls day 4"): at each moment of ``at`` every simulated
    resident is asked, inside the run (:func:`simulacra.schedule.probe_stage`), every fact's ``question``, the text of
    every world event that has happened (``events``), and its own plan of each day of ``plan_days`` that has
    ended; each under every retrieval profile of the run's config (``memory.profiles`` and ``situational``) plus
    ``profiles``, which are added to the run's config for the probes only (no purpose is mapped to them); a
    profile reached only through a ``dated`` link is asked through it, not on its own.
    ``answer``: the resident's mind also answers under its interview profile. :mod:`simulacra.evaluation.recall`
    scores the answers against the trace's labels."""

    at: list[Moment] = Field(min_length=1)
    plan_days: list[Annotated[int, Field(ge=1)]] = Field(default_factory=list)
    events: bool = True
    answer: bool = True
    profiles: dict[str, RetrievalProfile] = Field(default_factory=dict)


class Scenario(_Strict):
    """A parsed scenario file (see the module docstring). ``source`` and ``world_path`` are set by
    :func:`load_scenario`."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: NonEmpty
    description: str = ""
    world: NonEmpty
    personas_dir: str | None = None
    agents: list[NonEmpty] | None = Field(None, min_length=2)
    until: Moment | None = None
    hours: float | None = Field(None, gt=0)
    facts: list[Fact] = Field(min_length=1)
    party: Party | None = None
    candidacy: Candidacy | None = None
    recall: Recall | None = None
    measure: list[Metric] = Field(default_factory=lambda: list(METRICS))
    curve_every_minutes: int = Field(60, ge=10, description="game minutes between two points of a diffusion curve")

    @model_validator(mode="after")
    def _length(self) -> Scenario:
        if (self.until is None) == (self.hours is None):
            raise ValueError("give the run's length as exactly one of until (day and time) or hours")
        return self

    # set by load_scenario
    source: str = ""
    world_path: str = ""

    def fact(self, fid: str) -> Fact:
        return next(f for f in self.facts if f.id == fid)

    def end_minute(self, start_minute: int) -> int:
        """Absolute game minute the run ends at, for a world starting at ``start_minute``."""
        if self.until is not None:
            return self.until.minute
        return start_minute + int(round(self.hours * 60))

    def ticks(self, start_minute: int, tick_minutes: int) -> int:
        """The ticks a run of the scenario takes, from ``start_minute`` to :meth:`end_minute`, at least one."""
        return max(1, (self.end_minute(start_minute) - start_minute) // tick_minutes)

    def to_header(self) -> dict:
        """The scenario as the trace header records it."""
        return self.model_dump(mode="json", exclude={"source", "world_path"})


def load_scenario(path: str | Path) -> Scenario:
    """Load and check a scenario file (a path, or the name of a packaged scenario: :func:`simulacra.assets.find`)
    against its world and personas.

    Raises:
        ScenarioError: unreadable, malformed, a misspelt field, an unknown resident or place, a fact referred to
            but not defined, a party window outside the run or not after its start (file and field named).
        WorldError, PersonaError: the world it names is invalid.
    """
    from simulacra.world.model import load_world

    path = assets.find(path, "scenario")
    if not path.exists():
        raise ScenarioError(path, None, f"no such file ({assets.describe('scenario')})")
    data = read_yaml(path, ScenarioError)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else type(data).__name__
        raise ScenarioError(path, None, f"expected a mapping (name: ..., world: ..., facts: ...), got {got}")
    sc = validate_as(Scenario, data, path, ScenarioError)
    sc.source = str(path)
    world_path = (path.parent / sc.world) if not Path(sc.world).is_absolute() else Path(sc.world)
    if not world_path.is_file():
        raise ScenarioError(path, "world", f"no world file {world_path}")
    sc.world_path = str(world_path)
    pdir = None if sc.personas_dir is None else str(path.parent / sc.personas_dir)
    world = load_world(world_path, pdir)
    residents = list(world.personas)
    agents = sc.agents or residents

    def resident(field: str, rid: str) -> None:
        if rid not in agents:
            what = "simulated resident" if sc.agents else "resident"
            raise ScenarioError(path, field, unknown_name(what, rid, agents), other_file=world_path)

    for i, a in enumerate(sc.agents or []):
        if a not in residents:
            raise ScenarioError(path, f"agents.{i}", unknown_name("resident", a, residents), other_file=world_path)
        if a in sc.agents[:i]:
            raise ScenarioError(path, f"agents.{i}", f"'{a}' is listed twice")
    ids = [f.id for f in sc.facts]
    for i, f in enumerate(sc.facts):
        if f.id in ids[:i]:
            raise ScenarioError(path, f"facts.{i}.id", f"duplicate fact id '{f.id}' (also facts.{ids.index(f.id)})")
        for j, h in enumerate(f.holders):
            resident(f"facts.{i}.holders.{j}", h)
            if h in f.holders[:j]:
                raise ScenarioError(path, f"facts.{i}.holders.{j}", f"'{h}' is listed twice")
        if f.told_at is not None and not f.holders:
            raise ScenarioError(path, f"facts.{i}.told_at", "a fact told at told_at needs holders (who is told)")
    start = world.start_minute
    end = sc.end_minute(start)
    if end <= start:
        raise ScenarioError(path, "until", f"the run would end at or before the world's start ({world.start_time} "
                                           f"on day 1)")
    for i, f in enumerate(sc.facts):
        if f.told_at is not None and not start <= f.told_at.minute < end:
            raise ScenarioError(path, f"facts.{i}.told_at", "outside the run (from the world's start to until)")
    if sc.recall is not None:
        for i, m in enumerate(sc.recall.at):
            if not start <= m.minute < end:
                raise ScenarioError(path, f"recall.at.{i}", "outside the run (from the world's start to until)")
        last = max(m.minute for m in sc.recall.at)
        for i, d in enumerate(sc.recall.plan_days):
            if d * MINUTES_PER_DAY > last:  # a day's plan is asked once the day is over (setup.schedule)
                raise ScenarioError(path, f"recall.plan_days.{i}", f"day {d} is not over by the last probe (day "
                                    f"{last // MINUTES_PER_DAY + 1}): no probe would ask its plan")
        for name in sc.recall.profiles:
            if name in ("situational", *MemoryConfig().profiles):  # the section's own fields; the shipped profiles
                raise ScenarioError(path, f"recall.profiles.{name}", "the name is taken by the run's own profiles")
    for key in ("party", "candidacy"):
        block = getattr(sc, key)
        if block is None:
            continue
        if block.fact not in ids:
            raise ScenarioError(path, f"{key}.fact", unknown_name("fact", block.fact, ids))
        person = block.host if key == "party" else block.candidate
        field = f"{key}.{'host' if key == 'party' else 'candidate'}"
        resident(field, person)
        if person not in sc.fact(block.fact).holders:
            raise ScenarioError(path, field, f"'{person}' must be among the holders of fact '{block.fact}' (it is "
                                             f"their intention)")
    if sc.party is not None:
        p = sc.party
        if p.place not in world.places:
            raise ScenarioError(path, "party.place", unknown_name("place", p.place, list(world.places)),
                                other_file=world_path)
        if p.start_minute < start:
            raise ScenarioError(path, "party.start", f"the party starts before the run does ({world.start_time} "
                                                     f"on day 1)")
        if p.end_minute > end:
            raise ScenarioError(path, "party.end", "the party ends after the run does (set until or hours later)")
    return sc
