"""A run of a scenario: the runtime built from the scenario's world and agents, a variant's ablations put in,
the facts' holders given their intention memories before the first tick, the party's host its engagement;
everything the scenario changed is recorded in the trace header (``"scenario"``)."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from simulacra.clock import MINUTES_PER_DAY
from simulacra.cognition.mind import Engagement
from simulacra.config import Config
from simulacra.errors import ScenarioError
from simulacra.evaluation.scenario import Scenario
from simulacra.evaluation.variants import Variant, apply_ablations, check_ablations
from simulacra.runtime import build_runtime

log = logging.getLogger(__name__)


def party_engagement(sc: Scenario) -> Engagement | None:
    """The party as an engagement (``None`` when the scenario has none)."""
    p = sc.party
    if p is None:
        return None
    return Engagement(sc.fact(p.fact).text, p.host, p.place, p.start_minute, p.end_minute)


def seed_items(sc: Scenario, now: int) -> list[tuple[str, Any, float | None]]:
    """The memories a scenario plants before its first tick, as :meth:`Stores.seed <simulacra.shard.Stores.seed>`
    takes them: ``(holder, record, rating)`` for each fact not told during the run (``told_at``) and each of its
    holders, fact by fact: the holder's intention memory (kind ``intention``, formed at game minute ``now``, tick 0,
    topic = the fact's text, source ``own``; the party's fact also carries its engagement and is about its hours as
    well as ``now``: :meth:`Engagement.about <simulacra.cognition.mind.Engagement.about>`), rated by the scenario
    (``importance``, which every retelling keeps: the offline rater rates news of a party or an election 1-3 of 10,
    under ``simulation.news_min_rating``) or, when it gives none (``None``), by the run's rater."""
    from simulacra.tick import new_record

    engagement = party_engagement(sc)
    items: list[tuple[str, Any, float | None]] = []
    for f in sc.facts:
        if f.told_at is not None:  # told in the run (schedule)
            continue
        for h in f.holders:
            extra = {"topic": f.text, "source": "own"}
            if f.importance is not None:
                extra["importance"] = f.importance
            if engagement is not None and sc.party.fact == f.id:
                extra.update(engagement.to_extra())
                extra.update(engagement.about(now))
            items.append((h, new_record(h, f.memory_text, "intention", now, 0, extra), f.importance))
    return items


def schedule(sc: Scenario, world, config: Config) -> dict[str, Any]:
    """The run's schedule (:mod:`simulacra.schedule`): the tellings of the facts told during the run
    (``told_at``) and the recall probes of ``sc.recall`` (every fact's question, from the start; every world event
    by its text, from when it happens; each day of ``plan_days`` by ``"<name>'s plan for day <d>"``, from the end of
    that day), under every retrieval profile of ``config`` (``situational`` first)."""
    out: dict[str, Any] = {}
    tellings = [{"minute": f.told_at.minute, "agents": list(f.holders), "text": f.memory_text, "topic": f.text,
                 "importance": f.importance, "by": f.teller, "fact": f.id} for f in sc.facts if f.told_at is not None]
    if tellings:
        out["tellings"] = tellings
    r = sc.recall
    if r is not None:
        start = world.start_minute
        asks = [{"about": f"fact:{f.id}", "query": f.question, "after": start} for f in sc.facts]
        if r.events:
            asks += [{"about": f"event:{i}", "query": ev.text, "after": ev.minute}
                     for i, ev in enumerate(world.events) if ev.minute >= start]
        asks += [{"about": f"plan:{d}", "query": f"{{name}}'s plan for day {d}", "after": d * MINUTES_PER_DAY}
                 for d in r.plan_days]
        out["probes"] = {"minutes": [m.minute for m in r.at], "asks": asks, "answer": r.answer,
                         "profiles": ["situational", *(p for p in config.memory.profiles
                                                       if p not in config.memory.dated_profiles()
                                                       | config.memory.latest_profiles())]}
    return out


def with_profiles(config: Config, sc: Scenario) -> Config:
    """``config`` with the recall test's extra retrieval profiles (``sc.recall.profiles``) added to
    ``memory.profiles`` (no purpose is mapped to them: only the probes retrieve with them).

    Raises:
        ScenarioError: a profile of the scenario has the name of one of the config's own.
    """
    extra = sc.recall.profiles if sc.recall is not None else {}
    if not extra:
        return config
    clash = sorted(set(extra) & set(config.memory.profiles))
    if clash:
        raise ScenarioError(sc.source, f"recall.profiles.{clash[0]}", "the run's config defines a profile of this name")
    memory = config.memory.model_copy(update={"profiles": {**config.memory.profiles, **extra}})
    return config.model_copy(update={"memory": memory})


def start_run(sc: Scenario, config: Config, v: Variant, db_dir: str | Path, run_name: str, embedder=None,
              shards: int = 1, workers: int = 1, ray_address: str | None = None):
    """A :class:`~simulacra.simulation.Simulation` of ``sc`` under variant ``v`` (``config`` already holds the
    variant's overrides), ready to run, and the number of ticks to run; ``shards``: agent shards in this process
    (:mod:`simulacra.shard`; the same run whatever their number). With ``workers`` > 1 or a ``ray_address`` the
    shards are Ray actors instead (:meth:`Simulation.parts_on_ray <simulacra.simulation.Simulation.parts_on_ray>`),
    each putting in the variant's ablations and planting its agents' facts; the run is the same (scripted backend,
    ``embedding.exact``).

    Raises:
        WorldError, PersonaError, RaterError, LLMError: as :meth:`Simulation.create`.
        SimulacraError: an unknown ablation; Ray missing or a shard not built.
    """
    from simulacra.shard import Stores
    from simulacra.simulation import Simulation

    config = with_profiles(config, sc)
    ablate = check_ablations(v.ablate, f"variant {v.name}")
    personas_dir = sc.personas_dir and str(Path(sc.source).parent / sc.personas_dir)
    cluster = None
    if workers > 1 or ray_address is not None:
        rt, cluster = Simulation.parts_on_ray(sc.world_path, config, personas_dir, db_dir, run_name, True, sc.agents,
                                              max(1, workers), ray_address, ablate=ablate)
    else:
        rt = build_runtime(sc.world_path, config, personas_dir, db_dir, run_name, True, embedder, sc.agents)
    try:
        if cluster is None:
            apply_ablations(rt, ablate)
        start = rt.world.start_minute
        items = seed_items(sc, start - 1)  # formed before the first tick
        stores = cluster if cluster is not None else Stores(rt)
        seeded = [op for ops in stores.seed(items) for op in ops] if items else []
        rt.scenario = {"file": sc.source, **sc.to_header(), "variant": v.to_dict(), "seeded": seeded,
                       "schedule": schedule(sc, rt.world, config)}
        sim = (Simulation(rt, shards=shards) if cluster is None else
               Simulation(rt, shards=cluster.n, cluster=cluster))
    except BaseException:
        rt.close()
        raise
    engagement = party_engagement(sc)
    for f in sc.facts:
        for h in f.holders if f.told_at is None else ():
            sim.state.agents[h].knows.add(f.text)
    if engagement is not None:
        sim.state.agents[engagement.host].invitations.append(engagement.to_dict())
    sim.checkpoint()
    ticks = sc.ticks(start, rt.world.tick_minutes)
    return sim, ticks


def run_scenario(sc: Scenario, config: Config, v: Variant, db_dir: str | Path, run_name: str, embedder=None,
                 on_tick=None, shards: int = 1, workers: int = 1, ray_address: str | None = None) -> dict[str, Any]:
    """Run ``sc`` under ``v`` to its end (:func:`start_run`, whose arguments these are); writes
    ``<db_dir>/<run_name>/summary.json`` and returns the summary."""
    sim, ticks = start_run(sc, config, v, db_dir, run_name, embedder, shards, workers, ray_address)
    with sim:
        summary = sim.run(ticks, on_tick)
    (sim.run_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf-8")
    return summary
