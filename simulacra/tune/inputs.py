"""The inputs of a search, read once: each labelled query embedded, and for each of its tiers the raw scoring
columns of the memories visible at the query's time (:meth:`MemoryTier.scoring_inputs
<simulacra.memory.store.MemoryTier.scoring_inputs>`, BM25 over the same memories), with the expected memories
resolved to ids. Stores are only read."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from simulacra.clock import format_game_time, format_hhmm
from simulacra.errors import InputError
from simulacra.memory.perspective import embedded
from simulacra.memory.scoring import ScoringInputs
from simulacra.memory.timecue import TimeCue, time_words
from simulacra.trace import AddOp, PostOp
from simulacra.tune.queries import LabelledQuery
from simulacra.tune.run import SHARED, RunInfo, TuneError, read_run
from simulacra.tune.settings import Setting


@dataclass
class TierInputs:
    """Raw scoring inputs of one tier for one query (the rows visible at the query's time, in row order)."""

    name: str
    ids: list[str]
    inputs: ScoringInputs
    #: the rows a speech cue leaves out after scoring (``memory.speech_roles``, :mod:`simulacra.memory.speech`),
    #: bool ``(n,)``; ``None``: none
    left_out: np.ndarray | None = None


@dataclass
class PreparedQuery:
    """A labelled query with its inputs and the ids of the expected memories that are in the store."""

    query: LabelledQuery
    now: float
    tiers: list[TierInputs]
    relevant: set[str]
    missing: list[tuple[str, str]] = field(default_factory=list)  # (expected, reason)
    #: the time the query names (:func:`simulacra.memory.timecue.time_words` at :attr:`now`), for dated settings
    named: TimeCue | None = None
    #: whether the query asks for the latest and names no time (:func:`simulacra.memory.timecue.time_words`), for
    #: settings with a latest setting
    latest: bool = False
    #: the text the lexical relevance matched: the query in the third person (``memory.third_person_queries``), else
    #: as asked; the embedding is of the query as asked (:func:`simulacra.memory.perspective.embedded`)
    text: str = ""

    def named_window(self, setting: Setting) -> tuple[float, float] | None:
        """The window recency is measured from when ``setting`` retrieves this query: the named time when the
        setting switches to a dated one for it (:meth:`Setting.for_query`), else ``None`` (from now)."""
        if self.named is None or setting.dated is None:
            return None
        return self.named.start, self.named.end


def _match_text(texts: Sequence[str], wanted: str) -> list[int]:
    exact = [i for i, t in enumerate(texts) if t == wanted]
    if exact:
        return exact
    w = wanted.casefold()
    return [i for i, t in enumerate(texts) if w in t.casefold()]


def _resolve(q: LabelledQuery, file: Path, records: list, trace_ops: Sequence[AddOp | PostOp], now: float,
             hide_future: bool) -> tuple[set[str], list[tuple[str, str]]]:
    """Ids of the expected memories present at ``now``, and the ones that cannot be found, with the reason."""
    relevant: set[str] = set()
    missing: list[tuple[str, str]] = []
    texts = [r.text for r in records]
    for j, e in enumerate(q.expected):
        where = f"queries.{q.index}.expected.{j}"
        if e.id is not None:
            hits = [i for i, r in enumerate(records) if r.id == e.id]
            in_trace = any(op["id"] == e.id for op in trace_ops)
        else:
            assert e.text is not None  # an expected memory has an id or a text
            hits = _match_text(texts, e.text)
            if len({texts[i] for i in hits}) > 1:
                shown = "; ".join(repr(texts[i][:70]) for i in hits[:4])
                raise InputError(file, where, f"text {e.text!r} matches {len(hits)} different memories of "
                                              f"{q.agent} ({shown}); give a longer text or an id")
            in_trace = bool(_match_text([op["text"] for op in trace_ops], e.text))
        if not hits:
            if in_trace:
                missing.append((str(e), "forgotten (in the trace, not in the store)"))
                continue
            raise InputError(file, where, f"{e}: no such memory of {q.agent} in the store or the run's trace")
        for i in hits:
            ts = records[i].timestamp
            if hide_future and ts is not None and ts > now:
                missing.append((str(e), f"formed at {format_hhmm(ts)}, after the query time {format_hhmm(now)}"))
            else:
                relevant.add(records[i].id)
    return relevant, missing


def timed_text(text: str, timestamp: float | None) -> str:
    """``text`` preceded by its game day and time (``"day 1 11:40: ..."``), the variant ``--embed-time`` measures;
    unchanged without a timestamp (static memory)."""
    return text if timestamp is None else f"{format_game_time(timestamp)}: {text}"


def prepare(run_dir: str | Path, queries: Sequence[LabelledQuery], embedder, queries_file: str | Path = "<queries>",
            hide_future: bool = True, run: RunInfo | None = None, embed_time: bool = False,
            reembed: bool = False, third_person: bool | None = None,
            speech_roles: bool | None = None) -> list[PreparedQuery]:
    """Embed the queries once and read every tier's raw columns once per query (stores are only read).

    Args:
        hide_future: leave out memories formed after a query's time (the stores hold the end of the run).
        embed_time: an experiment: score as if each memory's embedded (and BM25) text began with its game day and
            time (:func:`timed_text`); the memories are embedded again with ``embedder`` (the stores are not
            changed).
        reembed: score with the memories embedded again by ``embedder`` instead of their stored vectors (another
            embedding backend's quality over the same run, ``bench.embedding``; the stores are not changed).
        third_person: whether a query is put in the third person, the agent named for "I", "me", "my", before its
            words are matched (:meth:`MemoryConfig.query_text <simulacra.config.MemoryConfig.query_text>`, as an
            interview does with "you"; embedded as asked); ``None``: as the run's ``memory.third_person_queries``.
        speech_roles: whether a query that names who spoke or who listened leaves out the memories of lines said the
            other way (:mod:`simulacra.memory.speech`, read from the text the lexical relevance matches, as the
            engine reads it); ``None``: as the run's ``memory.speech_roles``.
    Raises:
        InputError: an unknown agent or expected memory (naming ``queries_file`` and the query index).
        TuneError: a missing store.
    """
    from simulacra.memory.index import COLUMNS, MirrorIndex
    from simulacra.memory.lexical import LexicalIndex, relevance_over
    from simulacra.memory.speech import contradicts, speech_cue
    from simulacra.memory.stream import AgentMemory
    from simulacra.runtime import RunStores

    run = run or read_run(run_dir)
    rdir = Path(run_dir)
    file = Path(queries_file)
    mem_cfg = run.config.memory
    for q in queries:
        if q.agent not in run.agents:
            raise InputError(file, f"queries.{q.index}.agent",
                             f"{q.agent!r} is not an agent of {rdir.name} ({', '.join(run.agents)})")
    dim = int(embedder.dim)
    # a query is the agent's own question: "I", "me", "my" are the agent (memory.third_person_queries)
    memory_rule = mem_cfg if third_person is None else mem_cfg.model_copy(update={"third_person_queries": third_person})
    roles = mem_cfg.speech_roles if speech_roles is None else speech_roles
    agent_names = run.names
    text_of = [memory_rule.query_text(q.query, agent_names[q.agent], "first") for q in queries]
    unique = list(dict.fromkeys(embedded(text) for text in text_of))  # the name is matched, not embedded
    vec_of = dict(zip(unique, embedder.embed(unique)))
    stores = RunStores(mem_cfg, rdir, run.header)
    memories: dict[str, AgentMemory] = {}
    out = []
    for q, text in zip(queries, text_of):
        if q.agent not in memories:
            location = stores.location(q.agent)
            if not location.has_store(q.agent):
                raise TuneError(f"{rdir / q.agent}: no memory store for agent {q.agent} in {location}")
            memories[q.agent] = stores.memory(q.agent, dim)
        mem = memories[q.agent]
        shared = mem.shared
        now = run.end_minute if q.time is None else q.time
        names = mem.readable
        records = [r for name in names for r in mem.tier(name).records]
        trace_ops = run.added.get(q.agent, []) + (run.added.get(SHARED, []) if shared is not None else [])
        relevant, missing = _resolve(q, file, records, trace_ops, now, hide_future)
        vector = vec_of[embedded(text)]
        cue = speech_cue(str(text)) if roles else None  # read from the text matched, as the engine reads it
        tiers, indexes = [], []
        for name in names:
            tier = mem.tier(name)
            tier_records = tier.records
            created = np.array([np.nan if r.timestamp is None else r.timestamp for r in tier_records], dtype=float)
            keep = ~(created > now) if hide_future else np.ones(len(created), dtype=bool)  # NaN (static) stays
            rows = np.flatnonzero(keep)
            inputs = tier.scoring_inputs(vector, mem_cfg.recency_from).take(rows)
            texts = [tier_records[i].text for i in rows]
            if embed_time or reembed:
                if embed_time:
                    texts = [timed_text(tier_records[i].text, tier_records[i].timestamp) for i in rows]
                again = MirrorIndex(dim, mem_cfg.distance, bound_min_rows=None)
                again.append(embedder.embed(texts) if texts else np.zeros((0, dim), np.float32),
                             np.zeros((len(texts), COLUMNS)))
                inputs = replace(inputs, distance=again.distances(vector))
            index = LexicalIndex()  # the tier's memories at the query's time, a part of the agent's BM25 corpus
            index.append(texts)
            indexes.append(index)
            left = None if cue is None else np.array([contradicts(cue, tier_records[i].text) for i in rows], bool)
            tiers.append(TierInputs(name, [tier_records[i].id for i in rows], inputs,
                                    left if left is not None and left.any() else None))
        # lexical relevance over all the tiers as one corpus, as the engine measures it (AgentMemory.lexical_relevance)
        for tier_inputs, lexical in zip(tiers, relevance_over(indexes, str(text))):
            tier_inputs.inputs = replace(tier_inputs.inputs, lexical=np.array(lexical))
        named, latest = time_words(q.query, now)  # read from the query as asked, as the engine reads them
        out.append(PreparedQuery(q, now, tiers, relevant, missing, named, latest is not None, str(text)))
    return out

