"""Interview an agent of a finished run: its answer to a question, from the memories it retrieves for it.

``simulacra interview database/<run> --agent ID "question"`` opens the agent's stores (read only), retrieves for the
question with the run's own retrieval rule at the end of the run (or at the end of tick ``--tick N``: memories formed
later are left out; memories forgotten before the end of the run are gone from the stores and cannot be used; a killed
run shows its last checkpoint), and asks the run's mind (or another one, ``--llm local`` / ``--set llm.model=...``) to
answer, listing the memories the answer rests on. Works with every backend: the scripted mind answers with what it
retrieved.

A question about a time before the run began ("What did you do yesterday?" on day 1; game days count from 1, and
the run's first game minute is its clock's start, the trace header's ``start_minute``) is about a time no memory is
from: it retrieves the agent's timeless memories (static persona and world facts) alone, the scripted answer says
so, and the named time is shown marked as before the run (:mod:`simulacra.memory.timecue`).

A scenario run made under an ablation (``simulacra evaluate --variant no-memory``, ``no-planning``) is interviewed
through the same ablation, recorded in its trace header: the agent's memory and mind are wrapped as in the run
(:func:`simulacra.evaluation.variants.ablate_memory`, :func:`~simulacra.evaluation.variants.ablate_mind`), so a
no-memory agent retrieves its static facts only and answers from them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from simulacra.cognition.mind import AgentView
from simulacra.config import Config, apply_overrides, config_from_dict, recorded_config
from simulacra.embeddings import same_embedding
from simulacra.errors import SimulacraError
from simulacra.memory.perspective import embedded
from simulacra.memory.records import RetrievedMemory
from simulacra.memory.speech import SpeechCue, contradicts, describe_speech, typed_question
from simulacra.memory.timecue import EARLIEST_START, TimeCue, describe_named
from simulacra.persona import Persona
from simulacra.text import text_key
from simulacra.trace import Header, TickRecord, check_tick, read_trace, require_header, tick_end

#: the tiers of memories that have no time (static persona and world facts): all an agent holds from before its run
TIMELESS_TIERS = ("static",)


def check_question(question: Any) -> str:
    """``question`` if it can be put to an agent: a string with a character that is not whitespace, valid Unicode
    (no unpaired surrogate: no embedder reads one).

    Raises:
        SimulacraError: naming what is wrong.
    """
    if not isinstance(question, str):
        raise SimulacraError(f"the question must be text (str), got {type(question).__name__}")
    if not question.strip():
        raise SimulacraError("the question is empty")
    if any(0xD800 <= ord(c) <= 0xDFFF for c in question):
        raise SimulacraError("the question holds an unpaired surrogate (not valid Unicode)")
    return question


def interview(run: str | Path, agent: str, question: str, tick: int | None = None,
              overrides: Sequence[str] = (), embedder=None, mind=None, ablated: bool = True,
              trace: tuple[Header, list[TickRecord]] | None = None) -> dict[str, Any]:
    """Ask ``agent`` of ``run`` a question.

    Args:
        run: the run folder (``database/<run>``) or its ``trace.jsonl``.
        agent: the agent's id; question: the question (non-empty).
        tick: answer as at the end of this tick (0-based; default: the run's last tick).
        overrides: ``section.field=value`` changes to the run's config (e.g. ``llm.provider=local``).
        embedder, mind: parts to use instead of building them from the config (tests).
        ablated: put the run's recorded ablations (trace header ``scenario.variant.ablate``) into the agent's
            memory and the mind, as during the run; ``False``: the agent's whole stores and the bare mind.
        trace: the run's trace header and tick records, already read (many questions to a long run: its trace
            can be a GB); ``tick`` then indexes these records.

    Returns:
        ``{"agent", "name", "question", "query" (the words the lexical relevance matched: the question in the
        third person, ``memory.third_person_queries``; the embedding is of the question as asked,
        :func:`simulacra.memory.perspective.embedded`), "time", "clock" ("day 2 (Sunday, rest day) 09:00"),
        "answer", "source", "profile" (the retrieval profile of interviews, ``memory.purposes``; ``recall`` by
        default), "used": [memory dicts], "retrieved": [memory dicts], "ablations": [the ablations applied],
        "forgotten": what it forgot that is as relevant as what it recalled (:func:`forgotten`; ``[]`` under an
        ablation, and for a question about a time before the run: nothing formed then was forgotten)}``, and
        ``"named_time"`` / ``"asked_latest"`` / ``"speech"`` as :func:`ask`; each memory dict
        has id, text, tier, kind, recency, importance, relevance, score. ``retrieved`` lists each text once (the
        best-scoring memory holding it).
    Raises:
        SimulacraError: unknown agent, a tick outside the trace, an empty question, a run without stores, or an
        unknown ablation in the trace header.
    """
    from simulacra.evaluation.variants import ablate_memory, ablate_mind, recorded_ablations
    from simulacra.runtime import RunStores, build_language_model, build_mind

    question = check_question(question)
    run_dir = Path(run)
    if run_dir.name == "trace.jsonl":
        run_dir = run_dir.parent
    header, ticks = trace if trace is not None else read_trace(run_dir)
    if agent not in header["agents"]:
        raise SimulacraError(f"{run_dir}: no agent {agent!r}; agents: {', '.join(header['agents'])}")
    require_header(header, ("personas", "world", "tick_minutes"), f"{run_dir}/trace.jsonl", "simulacra interview")
    if not ticks:
        raise SimulacraError(f"{run_dir}: the run has no tick")
    n = check_tick(len(ticks) - 1 if tick is None else tick, 0, len(ticks), run_dir)
    now = int(tick_end(ticks[n]["time"], header))
    run_start = int(header.get("start_minute", ticks[0]["time"]))  # the run's first game minute
    ablate = recorded_ablations(header, f"{run_dir}/trace.jsonl header") if ablated else frozenset()
    source = f"{run_dir}/trace.jsonl header" + (f" with --set {' '.join(overrides)}" if overrides else "")
    recorded = recorded_config(header["config"])
    embedded_with = dict(recorded.get("embedding") or {})  # apply_overrides changes the dicts it is given
    config = config_from_dict(apply_overrides(recorded, list(overrides), source), source)
    same_embedding(embedded_with, config.embedding, f"{run_dir}/trace.jsonl")
    stores = RunStores(config.memory, run_dir, header)
    location = stores.location(agent)
    if not location.has_store(agent):
        raise SimulacraError(f"{run_dir}: no memory store for {agent} in {location}"
                             + ("" if location.remote else " (the run folder holds no memory of this agent)"))
    personas = {pid: Persona.model_validate(p) for pid, p in header["personas"].items()}
    for pid, p in personas.items():
        p.id = pid
    names = {pid: p.name for pid, p in personas.items()}
    place_names = {pid: p["name"] for pid, p in header["world"]["places"].items()}
    start_weekday, rest_days = header["world"].get("start_weekday") or "Monday", header["world"].get("rest_days") or ()
    if embedder is None:
        from simulacra.embeddings import build_embedder

        embedder = build_embedder(config.embedding)
    held = stores.memory(agent, embedder.dim)
    memory = ablate_memory(held, ablate)
    closers: list = []
    try:
        if mind is None:
            llm = build_language_model(config, run_dir, closers, interview=True)
            mind = build_mind(config, llm, int(header["tick_minutes"]))
        answer = ask(memory, ablate_mind(mind, ablate), embedder, config, personas[agent], question, now,
                     ticks[n]["positions"][agent], names, place_names, start_weekday, rest_days, run_start=run_start)
    finally:
        for c in reversed(closers):
            c()
    lost: list[dict[str, Any]] = []
    before_run = "named_time" in answer and TimeCue.from_list(answer["named_time"]).before_run
    if not ablate and not before_run:
        profile = config.memory.for_profile(answer["profile"])
        query = answer.get("query", question)
        params = held.params_for(answer["profile"])  # the relevance the answer's retrieval fused
        fused = fuses_forgotten(params)  # the floor and the forgotten memories measured alike
        episodic = [m["relevance"] if fused or m.get("dense") is None else m["dense"] for m in answer["retrieved"]
                    if m["tier"] != "static"]
        full = len(answer["retrieved"]) >= max(profile.top_k, config.cognition.memories_in_prompt)
        lost = forgotten(ticks[: n + 1], agent, held, embedder, question,  # embedded as ask() embedded it
                         min(episodic) if full and episodic else profile.threshold, config.memory.distance,
                         start_weekday, rest_days, now=now, later=ticks[n + 1:], cue=held.speech_cue(query),
                         params=params, query_text=query)
    return {**answer, "tick": n, "ablations": sorted(ablate), "forgotten": lost}


def fuses_forgotten(params) -> bool:
    """Whether :func:`forgotten` fuses a forgotten memory's relevance as a retrieval with ``params`` (its
    :class:`~simulacra.memory.scoring.ScoringParams`, or ``None``) fused it: under lexical or hybrid relevance with
    weighted fusion and no min-max scaling. RRF ranks and min-max ranges belong to the whole tier, which the
    forgotten memories are no longer in: there the dense relevance is compared, on both sides."""
    return params is not None and params.lexical and not params.rrf and params.normalize != "minmax"


def forgotten(ticks: Sequence[TickRecord], agent: str, memory, embedder, question: str, floor: float, space: str,
              start_weekday: str = "Monday", rest_days: Sequence[str] = (), most: int = 3, now: float | None = None,
              later: Sequence[TickRecord] = (), cue: SpeechCue | None = None, params=None,
              query_text: str | None = None) -> list[dict[str, Any]]:
    """What ``agent`` once held and forgot that would answer ``question``: the memories of the ``forget`` operations
    of ``ticks`` whose text none of its memories formed before ``now`` (``memory``'s short- and long-term tiers;
    ``now`` ``None``: all) holds any more and whose dense relevance to the question (seed 003's
    ``1 / (1 + distance)`` in the tier's ``space``, in (0, 1]) is at least ``floor``, the ``most`` most relevant
    first. ``later`` (the ticks after ``ticks``, when an interview asks as at an earlier tick) adds what was held
    then and forgotten since: the stores no longer have it, so the answer could not use it either. :func:`interview`
    sets ``floor`` to what a memory needed to be recalled: the least dense relevance among the episodic memories
    it recalled when they filled the answer's places, else the profile's ``threshold``. Each: ``{"id", "text",
    "tier", "relevance", "time" (game minute of the tick it was forgotten in), "clock", "reason", "later"}``. It
    explains an answer that misses what the agent once knew (issue 22: a witness who rated the forge accident a 4
    had forgotten it two game hours later). With ``cue`` (who spoke to whom the question names,
    :meth:`AgentMemory.speech_cue <simulacra.memory.stream.AgentMemory.speech_cue>`), the lines said the other way
    are left out, as the retrieval leaves them out. With ``params`` (the :class:`~simulacra.memory.scoring.
    ScoringParams` the answer's retrieval scored with) under lexical or hybrid relevance (weighted fusion, no
    min-max scaling), a forgotten memory's relevance is fused as the retrieval fuses it, its BM25 (for
    ``query_text``, the text the retrieval matched) taken as if it were still held among the memories the agent reads
    (the retrieval's corpus, :meth:`AgentMemory.lexical_relevance
    <simulacra.memory.stream.AgentMemory.lexical_relevance>`): the floor
    is then compared with the same measure the recalled memories had (compared with their dense relevance alone,
    lunch small-talk was "as relevant" as a nonsense question's threshold)."""
    from simulacra.clock import format_game_time
    from simulacra.memory.index import distances_in
    from simulacra.memory.scoring import relevance_from_distance

    kept = {text_key(r.text) for tier in ("short_term", "long_term") for r in memory.tiers[tier].records
            if now is None or r.timestamp is None or r.timestamp < now}
    last: dict[str, tuple[Any, float, bool]] = {}  # the latest forget op of each text no memory holds any more
    added: set[str] = set()
    for t in ticks:
        for op in t["memory"]:
            if op["op"] == "add" and op["agent"] == agent:
                added.add(op["id"])
            elif (op["op"] == "forget" and op["agent"] == agent and text_key(op["text"]) not in kept
                  and not contradicts(cue, op["text"])):
                last[text_key(op["text"])] = (op, float(t["time"]), False)
    for t in later:
        for op in t["memory"]:
            if (op["op"] == "forget" and op["agent"] == agent and op["id"] in added
                    and text_key(op["text"]) not in kept and not contradicts(cue, op["text"])):
                last.setdefault(text_key(op["text"]), (op, float(t["time"]), True))
    if not last:
        return []
    gone = list(last.values())
    vectors = embedder.embed([op["text"] for op, _, _ in gone])
    relevance = relevance_from_distance(distances_in(space, vectors, embedder.embed([embedded(question)])[0]))
    if query_text and fuses_forgotten(params):
        from simulacra.memory.lexical import LexicalIndex, relevance_over
        from simulacra.memory.scoring import fuse_relevance

        # the corpus the retrieval measured (the indexes of every tier the agent reads,
        # AgentMemory.lexical_relevance) with the forgotten texts back in it
        back = LexicalIndex()
        back.append([op["text"] for op, _, _ in gone])
        lexical = relevance_over([*(memory.tier(name).lexical for name in memory.readable), back], query_text)[-1]
        relevance = fuse_relevance(relevance, lexical, params)
    order = sorted((i for i in range(len(gone)) if relevance[i] >= floor - 1e-9),
                   key=lambda i: (-relevance[i], -gone[i][1], gone[i][0]["id"]))
    return [{"id": op["id"], "text": op["text"], "tier": op["tier"], "relevance": round(float(relevance[i]), 6),
             "time": time, "clock": format_game_time(int(time), start_weekday, rest_days),
             "reason": op.get("reason"), "later": after}
            for i in order[:most] for op, time, after in [gone[i]]]


def ask(memory, mind, embedder, config: Config, persona: Persona, question: str, now: int, place: str,
        names: dict[str, str], place_names: dict[str, str], start_weekday: str = "Monday",
        rest_days: Sequence[str] = (), run_start: float = EARLIEST_START) -> dict[str, Any]:
    """The interview itself, on parts already built (a finished run's stores, or a live town's): what ``memory``
    recalls for ``question`` at game minute ``now`` of a run begun at game minute ``run_start`` (its first minute,
    trace header ``start_minute``; default day 1 00:00) (:func:`recalled`), and ``mind``'s answer from it, the agent
    standing at ``place``.

    A question about a time before the run (``named_time`` with a fourth item, :attr:`TimeCue.before_run
    <simulacra.memory.timecue.TimeCue.before_run>`) recalls timeless memories only; the mind is given the time
    named (``AgentView.named_time``), and a scripted answer (the scripted mind's, or a model's fallback to it) begins
    by saying that the agent has no memories from then
    (:func:`simulacra.cognition.scripted.before_run_words`); a model's own answer is its own, from the same
    memories.

    Returns:
        :func:`interview`'s dict without ``tick`` and ``ablations``; with ``"named_time"`` (:meth:`TimeCue.as_list
        <simulacra.memory.timecue.TimeCue.as_list>`: ``[start, end, words]`` in game minutes, and ``run_start`` when
        before the run) when the question names a time, ``"asked_latest"`` (the words) when it asks for the latest,
        ``"speech"`` (:meth:`SpeechCue.as_list <simulacra.memory.speech.SpeechCue.as_list>`) when it names who spoke
        to whom and the lines said the other way were left out.
    """
    from simulacra.clock import format_game_time, weekday_of

    profile = config.memory.profile_of("interview")
    query = recall_query(typed_question(question, names.values()), persona.name, config)
    found = recalled(memory, embedder.embed([embedded(query)])[0], query, now, config, profile, run_start)
    used_profile, named, latest = config.memory.switch(profile, query, now, run_start)  # as recalled() read them
    speech = memory.speech_cue(query)
    view = AgentView(persona.id, persona, now, place, tuple(found), names, place_names,
                     weekday=weekday_of(now, start_weekday), named_time=named, speech=speech)
    d = mind.interview(view, question)
    by_id = {m.id: m for m in found}
    return {
        "agent": persona.id, "name": names[persona.id], "question": question, "query": str(query), "time": now,
        "clock": format_game_time(now, start_weekday, rest_days),
        "answer": d.value.text, "source": d.source, "mind": mind.name, "profile": used_profile,
        **({} if named is None else {"named_time": named.as_list()}),
        **({} if latest is None else {"asked_latest": latest}),
        **({} if speech is None else {"speech": speech.as_list()}),
        "used": [timed(by_id[i], start_weekday, rest_days) for i in d.value.memory_ids if i in by_id],
        "retrieved": [timed(m, start_weekday, rest_days) for m in found],
    }


def recall_query(question: str, name: str, config: Config) -> str:
    """The text :func:`recalled` matches for ``question`` put to the resident named ``name`` (an interview's, a
    recall probe's): the question with "you" and "your" as the resident's name (:meth:`MemoryConfig.query_text
    <simulacra.config.MemoryConfig.query_text>`, ``memory.third_person_queries``); embed
    :func:`~simulacra.memory.perspective.embedded` of it."""
    return config.memory.query_text(question, name, "second")


def recalled(memory, question_embedding, question: str, now: float, config: Config,
             profile: str | None = None, run_start: float = EARLIEST_START) -> list[RetrievedMemory]:
    """What an agent recalls when asked ``question`` at game minute ``now``: the best memories formed before
    ``now`` under retrieval profile ``profile`` (default: that of the ``interview`` purpose, ``memory.purposes``),
    each text once (:func:`distinct_texts`), as many as the profile's ``top_k`` or the mind's
    ``cognition.memories_in_prompt``, the larger. A question about a time before the run (its window ends before
    ``run_start``, :attr:`TimeCue.before_run <simulacra.memory.timecue.TimeCue.before_run>`) recalls from
    :data:`TIMELESS_TIERS` alone: no memory was formed then, and the static facts, which have no time, hold then
    too. The one rule of ``simulacra interview`` and the recall probes of a scenario (:mod:`simulacra.schedule`).

    Args:
        memory: the agent's :class:`~simulacra.memory.stream.AgentMemory` (or an ablated view of it).
        question_embedding: the embedding of :func:`~simulacra.memory.perspective.embedded` ``(question)`` (the
            question as asked), shape ``(dim,)``.
        question: the text the lexical relevance matches (:func:`recall_query` of the question asked).
        run_start: the run's first game minute (trace header ``start_minute``; default day 1 00:00).
    """
    profile = config.memory.profile_of("interview") if profile is None else profile
    used, cue = config.memory.dated(profile, question, now, run_start)  # the profile that retrieves, the time named
    k = max(config.memory.for_profile(used).top_k, config.cognition.memories_in_prompt)
    tiers = TIMELESS_TIERS if cue is not None and cue.before_run else None
    got = memory.retrieve(question_embedding, now, top_k=4 * k, tiers=tiers, query_text=question, profile=profile,
                          formed_before=now)
    return distinct_texts(got)[:k]


def distinct_texts(memories: Iterable[RetrievedMemory]) -> list[RetrievedMemory]:
    """``memories`` (best first) without a repeat of a text already listed: the same observation made twice, or a
    memory kept in two tiers, is shown to the mind once, at its best place."""
    seen: set[str] = set()
    out = []
    for m in memories:
        key = text_key(m.text)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out


def timed(m: RetrievedMemory, start_weekday: str = "Monday", rest_days: Sequence[str] = ()) -> dict[str, Any]:
    """``m.to_dict()`` with ``"time"`` (the game minute it formed, ``None`` for a timeless static memory) and
    ``"clock"`` (that minute as :func:`~simulacra.clock.format_game_time` writes it, ``None`` without one): an
    interview says when each memory it rests on is from."""
    from simulacra.clock import format_game_time

    t = None if m.record is None else m.record.timestamp
    clock = None if t is None else format_game_time(int(t), start_weekday, rest_days)
    return {**m.to_dict(), "time": t, "clock": clock}


def _row(m: dict[str, Any]) -> str:
    """One memory of an interview's listing: score, tier, when it formed (blank for a static memory), text."""
    return f"  {m['score']:.3f}  {m['tier']:<10} {m.get('clock') or '':<22} {m['text']}"


def format_interview(r: dict[str, Any]) -> str:
    """Human-readable form of :func:`interview`."""
    said_by = r["mind"] if r["source"] == r["mind"] else f"{r['mind']}, {r['source']}"  # "scripted" once
    out = [f"{r['name']} ({r['agent']}), {r['clock']}, asked: {r['question']}", f"  {r['answer']}",
           f"  ({said_by}"
           + (f"; ablated: {', '.join(r['ablations'])}, as in the run)" if r.get("ablations") else ")")]
    if r["used"]:
        out.append("memories the answer rests on:")
        out += [_row(m) for m in r["used"]]
    named = ""
    if r.get("named_time") and TimeCue.from_list(r["named_time"]).before_run:  # no memory is from then
        named = (f" (profile {r['profile']}: {describe_named(r['named_time'])}; no memory is from then: "
                 f"{' and '.join(TIMELESS_TIERS)} memories only)")
    elif r.get("named_time"):  # the question named a time: recency from it (memory.profiles.*.dated)
        named = f" (profile {r['profile']}: recency from {describe_named(r['named_time'])})"
    elif r.get("asked_latest"):  # the question asked for the latest (memory.profiles.*.latest)
        named = f" (profile {r['profile']}: asked for the latest, \"{r['asked_latest']}\")"
    matched = f", words matched as \"{r['query']}\"" if r.get("query", r["question"]) != r["question"] else ""
    out.append(f"memories retrieved for the question{matched}: {len(r['retrieved'])}{named}")
    if r.get("speech"):  # the question named who spoke to whom (memory.speech_roles)
        out.append(f"  ({describe_speech(r['speech'])})")
    out += [_row(m) for m in r["retrieved"]]
    if r.get("forgotten"):  # what it once held, as relevant as what it recalled
        out.append("once held and forgotten, as relevant as what was recalled (relevance):")
        out += [f"  {m['relevance']:.3f}  {m['clock']}" + (" (after the question's time)" if m.get("later") else "")
                + f", {m['tier']}" + (f" ({m['reason']})" if m.get("reason") else "") + f": {m['text']}"
                for m in r["forgotten"]]
    return "\n".join(out)
