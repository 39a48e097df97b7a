"""An agent's memory stream: static, short-term and long-term tiers (seed 003), and the town's shared tier.

Retrieval follows the one rule of :mod:`simulacra.memory.selection`: ``cascade`` asks static, then short-term,
then long-term (then the town's shared memory, when the world has one; StreamBench's shared multi-agent memory,
seed 002) for the ``top_k`` best memories; a memory scoring under ``threshold`` is not used; once ``top_k``
memories at or above the threshold are found, lower tiers are not consulted (``retrieval: merged`` instead takes
the best ``top_k`` of all tiers). With a static budget (``static_top_k``) static facts are picked apart, at most
``static_top_k`` of them, and do not use up ``top_k``.
Consolidation moves old short-term memories with importance above ``promote_threshold`` to long-term and
forgets the rest; long-term importance decays with game time and a memory whose decayed importance falls
under ``forget_floor`` is forgotten. Every write through :meth:`AgentMemory.add` adds its ratings to the
raw importance that triggers reflection (Generative Agents: 150 points).
"""

from __future__ import annotations

import hashlib
import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulacra.clock import MINUTES_PER_DAY
from simulacra.config import SITUATIONAL, MemoryConfig
from simulacra.errors import CheckpointError, UnknownNameError, is_finite_number, is_whole
from simulacra.memory.chroma import open_chroma
from simulacra.memory.lexical import relevance_over
from simulacra.memory.memo import LastAnswer
from simulacra.memory.records import TIERS, MemoryRecord, RetrievedMemory, remarked
from simulacra.memory.scoring import SCORING_FIELDS, ScoringParams
from simulacra.memory.selection import RetrievalRule, TierCandidates, candidate_depth, select
from simulacra.memory.speech import SpeechCue, speech_cue
from simulacra.memory.store import CANDIDATE_LIMIT, MemoryTier, check_query_text, flush_tiers
from simulacra.memory.timecue import TimeCue
from simulacra.threads import scoring_threads
from simulacra.trace import (
    LONG_TERM,
    SHORT_TERM,
    AddOp,
    ForgetOp,
    MemoryOp,
    RehearseOp,
    ReinforceOp,
    RetrieveOp,
    add_op,
    forget_op,
    move_op,
    rehearse_op,
    reinforce_op,
    retrieve_op,
)

log = logging.getLogger(__name__)

#: the key of :meth:`AgentMemory.snapshot` holding the access marks (the other keys are tiers)
ACCESS_KEY = "last_accessed"


class AgentMemory:
    """The three memory tiers of one agent: its part of the run's store (``location``), or the store in ``path``.

    Args:
        agent: the agent's id (persona file stem).
        path: folder of the agent's Chroma store; created if missing, reopened if present.
        config: memory section of the run config.
        dim: embedding dimension.
        client: an existing Chroma client to use instead of opening one at ``path``.
        shared: the town's shared tier (read after the agent's own tiers), or ``None``.
        location: where the run's collections live (:class:`~simulacra.memory.chroma.EmbeddedChroma` or
            :class:`~simulacra.memory.chroma.ChromaServer`); when given, it supplies the client, the collection
            names and the retries, and ``path`` and ``client`` are not used.
        write_behind: the tiers queue their Chroma writes until :meth:`flush` (a running simulation flushes every
            ``memory.store_flush_minutes``); ``False``: every write reaches Chroma before it returns, and a tier
            opened with the run's store journal shows the run's last checkpoint (a reader).

    Attributes:
        importance_since_reflection: sum of the ratings (1..10) of memories added since the last
            reflection; :meth:`reflected` resets it.
    Raises:
        TypeError: ``config`` not a :class:`~simulacra.config.MemoryConfig`, ``dim`` not an integer.
        ValueError: ``dim`` under 1; neither ``path``, ``client`` nor ``location`` given.
    """

    def __init__(self, agent: str, path: str | Path | None, config: MemoryConfig, dim: int, client=None,
                 shared: MemoryTier | None = None, location=None, write_behind: bool = False):
        if not isinstance(config, MemoryConfig):
            raise TypeError(f"config: expected a MemoryConfig (the run config's memory section; from a mapping: "
                            f"MemoryConfig.model_validate(mapping)), got {type(config).__name__}")
        if not is_whole(dim):
            raise TypeError(f"dim: expected the embedding dimension, an integer, got {type(dim).__name__} {dim!r}")
        if dim < 1:
            raise ValueError(f"dim: expected the embedding dimension, an integer >= 1, got {dim}")
        self.agent = agent
        self.path = None if path is None else Path(path)
        self.config = config
        # per retrieval profile, per value of the config's scoring fields
        self._params: dict[str | None, LastAnswer[ScoringParams]] = {}
        # the last query's lexical relevance per readable tier, until one of them is written
        self._lexical: LastAnswer[dict[str, np.ndarray]] = LastAnswer()
        if location is not None:
            self.client = location.client(agent)
        elif client is not None:
            self.client = client
        elif self.path is not None:
            self.client = open_chroma(self.path)
        else:
            raise ValueError(f"the memory of {agent} needs a path, a client or a location")

        def tier(name: str) -> MemoryTier:
            args = {} if location is None else location.tier_args(agent, name)
            return MemoryTier(self.client, name, dim, config.distance, write_behind=write_behind, **args)

        self.tiers: dict[str, MemoryTier] = {name: tier(name) for name in TIERS}
        # a store made before deletes were deferred (session 7) may hold copies of deleted memories that a resume of
        # it needs: read, never written, emptied after the first checkpoint
        has_trash = (location.has_store(agent, "trash") if location is not None
                     else "trash" in {getattr(c, "name", c) for c in self.client.list_collections()})
        self.trash: MemoryTier | None = tier("trash") if has_trash else None
        self.shared = shared
        self.last_consolidation: float | None = None
        self.importance_since_reflection = 0.0
        self.last_reflection: float | None = None

    @property
    def readable(self) -> tuple[str, ...]:
        """Tiers retrieval asks by default, in priority order: the own tiers, then ``shared`` if present."""
        return TIERS + (("shared",) if self.shared is not None else ())

    def lexical_relevance(self, query_text: str, corpus: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """Lexical relevance of every memory the agent reads for ``query_text``, per tier of ``corpus`` (default
        :attr:`readable`; in the order of its :attr:`~MemoryTier.records`, ``(n,)`` in [0, 1]): BM25 with those tiers
        taken as one corpus, divided by the best over all of them (:func:`simulacra.memory.lexical.relevance_over`).
        Every retrieval of the agent scores with it, whichever tiers it asks, so a memory's lexical relevance does not
        depend on the tier it is held in or on the other tiers asked. A view of the memory that reads fewer tiers
        (the ``memory`` ablation, :class:`simulacra.evaluation.variants.StaticOnlyMemory`) passes its own as
        ``corpus``: what it cannot read does not count. Kept until one of the tiers is written."""
        names = self.readable if corpus is None else tuple(corpus)
        tiers = [self.tier(name) for name in names]
        key = (query_text, tuple((name, t.lexical.version) for name, t in zip(names, tiers)))
        return self._lexical.get(key, lambda: dict(zip(names, relevance_over([t.lexical for t in tiers],
                                                                             query_text))))

    def _lexical_of(self, params: ScoringParams, query_text: str | None, name: str,
                    corpus: Sequence[str] | None = None) -> np.ndarray | None:
        """Tier ``name``'s part of :meth:`lexical_relevance` over ``corpus`` when ``params`` score lexical relevance
        (else ``None``; a tier outside the corpus, such as ``trash``, is its own)."""
        names = self.readable if corpus is None else tuple(corpus)
        if not params.lexical or query_text is None or not query_text.strip() or name not in names:
            return None
        return self.lexical_relevance(query_text, names)[name]

    def tier(self, name: str) -> MemoryTier:
        """The tier called ``name`` (``static``, ``short_term``, ``long_term`` or ``shared``).

        Raises:
            UnknownNameError: (a ``KeyError``) no such tier (``shared`` when the world has no shared memory).
        """
        if name == "shared" and self.shared is not None:
            return self.shared
        if name not in self.tiers:
            known = [*self.tiers, *(["shared"] if self.shared is not None else [])]
            raise UnknownNameError(f"{self.agent}: no memory tier {name!r} (tiers: {', '.join(known)})")
        return self.tiers[name]

    @property
    def params(self) -> ScoringParams:
        """The scoring parameters of :attr:`config` (:meth:`ScoringParams.from_config`), rebuilt only when one of
        their fields changed (a retrieval asks for them once per tier)."""
        return self.params_for(None)

    def dated(self, profile: str | None, query_text: str | None, now: float
              ) -> tuple[str | None, ScoringParams, TimeCue | None]:
        """The profile, scoring parameters and named time a retrieval of ``profile`` for ``query_text`` at game
        minute ``now`` uses: the profile's ``dated`` profile, with recency measured from the time the query names,
        when it has one and the query names a time (:meth:`MemoryConfig.dated <simulacra.config.MemoryConfig.dated>`);
        else ``profile`` as it is."""
        profile, cue = self.config.dated(profile, query_text, now)
        params = self.params_for(profile)
        return profile, params if cue is None else replace(params, named=(cue.start, cue.end)), cue

    def params_for(self, profile: str | None) -> ScoringParams:
        """The scoring parameters of retrieval profile ``profile`` (``memory.profiles``; ``None`` or
        ``situational``: the section's own fields), rebuilt only when one of their fields changed.

        Raises:
            KeyError: an unknown profile.
        """
        over = self.config.overrides_of(profile)
        key = (profile, tuple(getattr(self.config, name, None) for name in SCORING_FIELDS), tuple(sorted(over.items())))
        memo = self._params.setdefault(profile, LastAnswer())
        return memo.get(key, lambda: ScoringParams.from_config(self.config.for_profile(profile)))

    @property
    def static(self) -> MemoryTier:
        return self.tiers["static"]

    @property
    def short_term(self) -> MemoryTier:
        return self.tiers["short_term"]

    @property
    def long_term(self) -> MemoryTier:
        return self.tiers["long_term"]

    def counts(self) -> dict[str, int]:
        """Number of memories per tier."""
        return {name: len(tier) for name, tier in self.tiers.items()}

    # ----------------------------------------------------------------- writes
    def set_static(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> None:
        """Replace the static memory with ``records`` (persona and world facts), embedded once."""
        stale = [r.id for r in self.static.records if r.id not in {x.id for x in records}]
        self.static.delete(stale)
        fresh = [i for i, r in enumerate(records) if r.id not in self.static]
        self.static.upsert([records[i] for i in fresh], np.asarray(embeddings)[fresh])

    def add(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> list[AddOp]:
        """Add new memories to short-term in one write; returns the trace operations.

        A record whose id is already in long-term (consolidated earlier, then perceived again at the same
        game time after a resume) is not added twice. The ratings of records new to the stream are added to
        :attr:`importance_since_reflection`.

        Args:
            records: the new memories, ids unique within the call.
            embeddings: their embeddings, shape ``(len(records), dim)``, row ``i`` of ``records[i]``.
        Raises:
            ValueError: ``embeddings`` not of shape ``(len(records), dim)``, or an id given twice; nothing is
                changed then.
        """
        vectors = self._check_write(records, embeddings)
        keep = [i for i, r in enumerate(records) if r.id not in self.long_term]
        recs = [records[i] for i in keep]
        added = sum(r.rating or 0 for r in recs if r.id not in self.short_term)
        self.short_term.upsert(recs, vectors[keep])
        self.importance_since_reflection += added
        return [add_op(self.agent, SHORT_TERM, r.id, r.text, r.kind, r.rating, r.timestamp, topic=topic_of(r))
                for r in recs]

    def _check_write(self, records: Sequence[MemoryRecord], embeddings: np.ndarray) -> np.ndarray:
        """``embeddings`` as an array, once it is known to fit ``records`` (shape ``(len(records), dim)``, ids
        unique), so that a write that cannot succeed fails before it changes anything; else ValueError."""
        vectors = np.asarray(embeddings)
        want = (len(records), self.short_term.dim)
        if vectors.shape != want:
            raise ValueError(f"embeddings: {len(records)} memories need embeddings of shape {want} (one row per "
                             f"record, the store's dimension), got shape {vectors.shape}")
        ids = [r.id for r in records]
        if len(set(ids)) != len(ids):
            twice = sorted({i for i in ids if ids.count(i) > 1})
            raise ValueError(f"records: memory ids given more than once in one write: {', '.join(twice)}")
        return vectors

    def add_long_term(self, records: Sequence[MemoryRecord], embeddings: np.ndarray, now: float) -> list[AddOp]:
        """Write memories straight to long-term (reflections) in one write; returns the trace operations.

        Their ratings do not count towards the next reflection (a reflection must not trigger itself).
        """
        recs = [replace(r, long_term_since=now) for r in records]
        self.long_term.upsert(recs, embeddings)
        ops = []
        for r in recs:
            rests = r.kind in ("reflection", "summary")  # the op names what a reflection or a day summary rests on
            ops.append(add_op(self.agent, LONG_TERM, r.id, r.text, r.kind, r.rating, r.timestamp,
                              evidence_ids=r.evidence_ids if rests else None, depth=r.depth if rests else None,
                              topic=topic_of(r)))
        return ops

    def reflection_due(self, threshold: float) -> bool:
        """Whether the raw importance added since the last reflection reached ``threshold`` (rating points)."""
        return self.importance_since_reflection >= threshold

    def reflected(self, now: float) -> None:
        """Reset the reflection trigger after a reflection at game minute ``now``."""
        self.importance_since_reflection = 0.0
        self.last_reflection = now

    def consolidate(self, now: float, force: bool = False) -> list[MemoryOp]:
        """Seed 003's "after some time" step; returns the trace operations.

        Runs when ``consolidation_interval_minutes`` of game time have passed since the last run (or
        ``force``) and short-term holds more than ``short_term_min_entries``: every short-term memory at
        least ``consolidation_age_minutes`` old leaves short-term; those with importance
        ``rating / 10 > promote_threshold`` go to long-term (one write), the rest are forgotten. Then
        long-term memories whose decayed importance is under ``forget_floor`` are forgotten.
        Long-term is written before short-term is deleted, so a crash in between loses nothing.

        Raises:
            ValueError: ``now`` is not a finite number (game minutes); nothing is changed then.
        """
        check_now(now)
        cfg = self.config
        if not force and self.last_consolidation is not None:
            if now - self.last_consolidation < cfg.consolidation_interval_minutes:
                return []
        self.last_consolidation = now
        ops: list[MemoryOp] = []
        st = self.short_term
        if len(st) > cfg.short_term_min_entries:
            age = cfg.consolidation_age_minutes
            old = self._retold([r for r in st.records if r.timestamp is not None and now - r.timestamp >= age])
            promote = [r for r in old if r.rating is not None and r.rating / 10.0 > cfg.promote_threshold]
            reinforced: set[str] = set()
            if promote and cfg.reinforce_repeats:
                promote, reinforce_ops = self._reinforce(promote, now)
                ops.extend(reinforce_ops)
                reinforced = {i for op in reinforce_ops for i in op["from_ids"]}
            promoted_ids = {r.id for r in promote}
            if promote:
                moved = [replace(r, long_term_since=now) for r in promote]
                self.long_term.upsert(moved, st.embeddings_of([r.id for r in promote]))
            self._delete(st, old)
            for r in old:
                if r.id in reinforced:
                    continue
                if r.id in promoted_ids:  # promoted: rated
                    ops.append(move_op(self.agent, r.id, r.text, (r.rating or 0) / 10.0, r.extra.get("retold")))
                else:
                    ops.append(forget_op(self.agent, r.id, SHORT_TERM, r.text,
                                         None if r.rating is None else r.rating / 10.0,
                                         f"consolidation: importance <= {cfg.promote_threshold}"))
        ops.extend(self.forget_decayed(now))
        return ops

    def _retold(self, records: Sequence[MemoryRecord]) -> list[MemoryRecord]:
        """``records`` (short-term memories leaving at consolidation) with the rating of news heard or seen more
        than once raised: a memory whose ``topic`` the agent's short- and long-term memories hold ``n`` times is
        rated ``min(10, rating + memory.retold_bonus * (n - 1))`` (``extra["retold"] = n``), so a piece of news the
        town keeps telling is kept although the rater found its text mundane (a rehearsal by repetition; simulacra's
        own rule). ``retold_bonus`` 0 leaves every record as it is (seed 003)."""
        bonus = self.config.retold_bonus
        if not bonus:
            return list(records)
        counts: dict[str, int] = {}
        for name in ("short_term", "long_term"):
            for r in self.tiers[name].records:
                if r.extra.get("topic"):
                    counts[r.extra["topic"]] = counts.get(r.extra["topic"], 0) + 1
        out = []
        for r in records:
            n = counts.get(r.extra.get("topic") or "", 0)
            if n > 1 and r.rating is not None:
                r = replace(r, rating=min(10, int(r.rating + bonus * (n - 1))), extra={**r.extra, "retold": n})
            out.append(r)
        return out

    def _reinforce(self, promote: Sequence[MemoryRecord], now: float) -> tuple[list[MemoryRecord], list[ReinforceOp]]:
        """Fold repeated texts among the short-term memories being promoted at game minute ``now``
        (``memory.reinforce_repeats``); returns the records still to be moved as they are, and the trace
        operations of the reinforcements.

        The promoted memories are grouped by exact text. A group whose text a long-term memory already has (the
        first in row order), or a group of two or more, becomes one new long-term memory: text, kind, extra and
        embedding of that long-term memory (else of the group's earliest), the highest rating, the newest
        ``timestamp`` and ``tick`` (recency counts from the latest observation, as a new copy's would),
        ``long_term_since = now`` (decay restarts), ``extra["first_observed"]`` (earliest game minute) and
        ``extra["repeats"]`` (observations folded in, counting the first). Its id is new
        (:func:`reinforced_id`), and the replaced long-term memory is deleted (from Chroma after the checkpoint):
        every id keeps one content, so a resume restores exactly by ids (:meth:`restore`). The new memory is written
        before anything is deleted. The short-term memories of the group leave short-term in :meth:`consolidate`.

        Op: ``{"op": "reinforce", "agent", "id" (new long-term id), "tier": "long_term", "replaces" (long-term
        ids deleted, [] or one), "from_ids" (short-term ids folded in), "text", "kind", "rating", "importance"
        (rating / 10),
        "timestamp", "first_observed", "repeats"}``.
        """
        lt, st = self.long_term, self.short_term
        in_lt: dict[str, MemoryRecord] = {}
        for r in lt.records:
            in_lt.setdefault(r.text, r)
        groups: dict[str, list[MemoryRecord]] = {}
        for r in sorted(promote, key=lambda r: (r.timestamp, r.id)):
            groups.setdefault(r.text, []).append(r)
        keep, merged, embs, replaced, ops = [], [], [], [], []
        for text, group in groups.items():
            base = in_lt.get(text)
            if base is None and len(group) == 1:
                keep.append(group[0])
                continue
            parts = ([base] if base is not None else []) + group
            newest = max(parts, key=lambda r: (r.timestamp or 0.0, r.tick))
            first = min(float(r.extra.get("first_observed", r.timestamp or 0.0)) for r in parts)
            repeats = sum(int(r.extra.get("repeats", 1)) for r in parts)
            head = parts[0]
            rec = replace(head, id=reinforced_id(self.agent, [r.id for r in parts]),
                          rating=max(r.rating or 0 for r in parts), timestamp=newest.timestamp, tick=newest.tick,
                          long_term_since=now, extra={**head.extra, "first_observed": first, "repeats": repeats})
            merged.append(rec)
            embs.append((lt if base is not None else st).embeddings_of([head.id])[0])
            if base is not None:
                replaced.append(base)
            ops.append(reinforce_op(self.agent, rec.id, [base.id] if base is not None else [],
                                    [r.id for r in group], text, rec.kind, rec.rating, (rec.rating or 0) / 10.0,
                                    rec.timestamp, first, repeats, topic=topic_of(rec)))
        if merged:
            lt.upsert(merged, np.stack(embs))
            self._delete(lt, replaced)
        return keep, ops

    def forget_decayed(self, now: float) -> list[ForgetOp]:
        """Forget long-term memories whose decayed importance is under ``forget_floor``; a day summary (kind
        ``summary``) instead when it is ``summary_keep_days`` game days old (with ``summary_keep_days`` null, by its
        decayed importance like the others)."""
        floor, keep = self.config.forget_floor, self.config.summary_keep_days
        lt = self.long_term
        if not len(lt) or (floor is None and keep is None):
            return []
        imp = lt.importance(now, self.params)
        gone = []
        for r, i in zip(lt.records, imp):
            if keep is not None and r.kind == "summary":
                if r.timestamp is not None and now - r.timestamp >= keep * MINUTES_PER_DAY:
                    gone.append((r, float(i), f"day summary older than {keep:g} game days"))
            elif floor is not None and not math.isnan(i) and i < floor:
                gone.append((r, float(i), f"decayed importance < {floor}"))
        self._delete(lt, [r for r, _, _ in gone])
        return [forget_op(self.agent, r.id, LONG_TERM, r.text, round(i, 6), reason) for r, i, reason in gone]

    def _delete(self, tier: MemoryTier, records: Sequence[MemoryRecord]) -> None:
        """Delete ``records`` from ``tier``: from the mirror at once; from Chroma when the stores are next flushed
        with deletes, which a running simulation does only after a checkpoint that no longer lists them
        (:meth:`simulacra.simulation.Simulation.step`), so that until then a resume finds them where the previous
        checkpoint has them."""
        if records:
            tier.delete([r.id for r in records])

    def save_marks(self) -> None:
        """Queue for Chroma the access marks :meth:`mark_accessed` set since the last save (written by the next
        :meth:`flush`, in one metadata update per tier, or in the tier's upsert when it has one)."""
        for name in ("short_term", "long_term"):
            self.tiers[name].save_local()

    def empty_trash(self) -> None:
        """Drop the copies of deleted memories that a store made before deletes were deferred holds (a checkpoint
        no longer needs them); nothing without such a store."""
        if self.trash is not None and len(self.trash):
            self.trash.delete(self.trash.ids)

    @property
    def all_tiers(self) -> list[MemoryTier]:
        """The agent's own tiers in the order they are flushed (long-term first: a moved memory is written there
        before it leaves short-term), the legacy trash last; the shared tier is not included."""
        order = [self.tiers[n] for n in ("long_term", "short_term", "static")]
        return order + ([self.trash] if self.trash is not None else [])

    def flush(self, deletes: bool = True) -> int:
        """Apply every tier's queued writes to Chroma (:func:`~simulacra.memory.store.flush_tiers`: per tier one upsert
        or metadata update, then, with ``deletes``, one delete). A running simulation flushes every store together
        (:meth:`simulacra.runtime.Runtime.flush`). Returns the Chroma calls made.

        Raises:
            StoreUnavailable: a Chroma server did not answer within its retry window (the unwritten rest stays
                queued).
        """
        return flush_tiers(self.all_tiers, deletes=deletes)

    def snapshot(self) -> dict[str, Any]:
        """What a checkpoint records: per tier, its memory ids in row order, and under ``"last_accessed"`` the access
        marks (:meth:`mark_accessed`) of the short-term and long-term memories that have one, ``{id: game minute}``
        (marks change a memory in place, so ids alone cannot restore them)."""
        snap: dict[str, Any] = {name: tier.ids for name, tier in self.tiers.items()}
        snap[ACCESS_KEY] = {r.id: r.last_accessed for name in ("short_term", "long_term")
                            for r in self.tiers[name].records if r.last_accessed is not None}
        return snap

    def restore(self, snapshot: dict[str, Any], importance_since_reflection: float,
                last_reflection: float | None, last_consolidation: float | None) -> dict[str, int]:
        """Roll the tiers back to ``snapshot`` (:meth:`snapshot` at a checkpoint) and set the reflection and
        consolidation accumulators; returns how many memories were ``restored`` and ``dropped``.

        A memory the checkpoint has and a tier lost is brought back from the tier's copy of it (deleted, not yet from
        Chroma: :meth:`MemoryTier.removed`), from :attr:`trash` (a store made before session 7) or from another tier
        (consolidation writes long-term before deleting short-term), with its stored embedding; one written
        after the checkpoint is deleted; rows are put back in the checkpoint's order; every short-term and
        long-term memory gets back the access mark the checkpoint recorded (none when it recorded none; a
        checkpoint written before marks were recorded has none).

        Raises:
            CheckpointError: a memory of the checkpoint is nowhere in the agent's store.
        """
        tiers = {k: v for k, v in snapshot.items() if k != ACCESS_KEY}
        unknown = set(tiers) - set(self.tiers)
        if unknown:
            raise CheckpointError(f"checkpoint of {self.agent}: unknown tiers {sorted(unknown)}")
        counts = {"restored": 0, "dropped": 0}
        for name, want in tiers.items():
            others = ([self.trash] if self.trash is not None else []) + [t for n, t in self.tiers.items() if n != name]
            counts["restored"] += restore_missing(self.tiers[name], want, others, self.agent, name == "short_term")
        for name, want in tiers.items():
            counts["dropped"] += roll_back(self.tiers[name], want)
        marks = snapshot.get(ACCESS_KEY) or {}
        for name in ("short_term", "long_term"):
            tier = self.tiers[name]
            tier.update_metadata(remarked(tier.records, marks))
        self.empty_trash()
        self.importance_since_reflection = importance_since_reflection
        self.last_reflection = last_reflection
        self.last_consolidation = last_consolidation
        return counts

    def mark_accessed(self, ids: Iterable[str], now: float, reason: str = "accessed") -> list[RehearseOp]:
        """Rehearse these memories: set ``last_accessed = now`` on those in short-term or long-term (explicit:
        retrieval itself never writes); returns the trace operations.

        A long-term memory's importance decays from the later of entering long-term and its last access
        (:attr:`MemoryRecord.decay_since`), so marking restarts its decay clock: a memory that keeps being used is
        not forgotten by :meth:`forget_decayed` (consolidation by use; the Generative Agents implementation
        refreshes ``last_accessed`` of what a retrieval returns). Under ``recency_from: last_access`` it also
        restarts recency. Static and shared memories, unknown ids, repeats and memories already marked at ``now``
        are skipped.

        Args:
            ids: memory ids, in the order they were used (kept in the op).
            now: game minute of the access.
            reason: why they are marked, recorded in the op (e.g. ``retrieved``, ``reflection evidence``).
        Returns:
            ``[]`` when nothing changed, else one op ``{"op": "rehearse", "agent", "ids", "tiers" (per id),
            "reason", "time"}``.

        The marks change the mirror at once (retrieval and forgetting use them from now on); they are queued for
        Chroma at :meth:`save_marks` (the simulation calls it after each whole checkpoint and when it closes a
        checkpointed run) and written with the stores' next write to Chroma. Until then the checkpoint is where they
        are kept: every checkpoint records the marks (:meth:`snapshot`) and :meth:`restore` puts them back into the
        mirror and the store.

        Raises:
            TypeError: ``ids`` is one string (not an iterable of ids).
            ValueError: ``now`` is not a finite number.
        """
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"ids: expected an iterable of memory ids (e.g. a list), got one {type(ids).__name__} "
                            f"{ids!r:.40}; wrap a single id in a list")
        check_now(now)
        order = {i: n for n, i in enumerate(dict.fromkeys(ids))}  # ids may be an iterator: read once
        marked: list[tuple[str, str]] = []
        for name in ("short_term", "long_term"):
            tier = self.tiers[name]
            recs = [replace(r, last_accessed=float(now)) for i in order
                    if (r := tier.get(i)) is not None and r.last_accessed != now]
            tier.update_local(recs)
            marked += [(r.id, name) for r in recs]
        if not marked:
            return []
        marked.sort(key=lambda x: order[x[0]])
        return [rehearse_op(self.agent, [i for i, _ in marked], [t for _, t in marked], reason, float(now))]

    # ----------------------------------------------------------------- reads
    def rule(self, top_k: int | None = None, threshold: float | None = None, mode: str | None = None,
             profile: str | None = None) -> RetrievalRule:
        """The retrieval rule of the config (:class:`~simulacra.memory.selection.RetrievalRule`) under retrieval
        profile ``profile`` (default: the section's own), with the given fields replaced."""
        return RetrievalRule.from_config(self.config.for_profile(profile), top_k=top_k, threshold=threshold,
                                         mode=mode)

    @property
    def max_top_k(self) -> int:
        """Depth of the candidates a trace records per tier (:meth:`candidates`): ``config.max_top_k``, else twice
        ``top_k``; never less than ``top_k`` or ``static_top_k``. ``simulacra rescore`` can re-rank a recorded
        retrieval for any ``top_k`` and ``static_top_k`` up to it."""
        m = self.config
        return candidate_depth(m.top_k, m.static_top_k, m.max_top_k)

    def retrieve(
        self,
        query_embedding: np.ndarray,
        now: float,
        top_k: int | None = None,
        tiers: Sequence[str] | None = None,
        threshold: float | None = None,
        mode: str | None = None,
        rule: RetrievalRule | None = None,
        query_text: str | None = None,
        profile: str | None = None,
        formed_before: float | None = None,
        corpus: Sequence[str] | None = None,
    ) -> list[RetrievedMemory]:
        """Retrieve the memories that matter for a query. Reads only; nothing is written (marking access
        is :meth:`mark_accessed`). Each result carries its tier, kind and score terms (the explanation).

        Args:
            query_embedding: the query's embedding, shape ``(dim,)``.
            now: current game time (game minutes).
            top_k: replaces the config's ``top_k``.
            threshold: replaces the config's ``threshold``: a number, ``-inf`` for none.
            mode: replaces the config's ``retrieval``.
            tiers: tiers to ask, in priority order (default :attr:`readable`).
            rule: the whole rule instead (then ``top_k``, ``threshold`` and ``mode`` are ignored).
            query_text: the query's text, for lexical and hybrid relevance (``memory.relevance``; required there, not
                blank) and for the time it names (``dated`` profiles); under dense relevance may be ``None``.
            profile: the retrieval profile to score and select with (``memory.profiles``; the config's
                :meth:`~simulacra.config.MemoryConfig.profile_of` the retrieval's purpose); ``None``: the memory
                section's own fields (``situational``). When ``query_text`` names a time and the profile links a
                ``dated`` profile, that one scores, recency measured from the time named (:meth:`dated`).
                ``top_k``, ``threshold``, ``mode`` and ``rule`` still replace the profile's. When ``query_text``
                names who spoke or who listened and ``memory.speech_roles`` is on, the memories of lines said the
                other way are left out of its results and candidates (:meth:`speech_cue`); what depends on the whole
                tier still counts them: the BM25 corpus and maximum of lexical relevance (over all readable tiers,
                :meth:`lexical_relevance`), and under ``normalize: minmax`` and RRF the tier's ranges and ranks.
            formed_before: a game minute: the memories formed at or after it are left out of the results the same
                way (a retrieval as of a moment before the store's last memory: an interview at an earlier tick of a
                run that went on, a fact's diffusion measured after the run); ``None``: none is.
            corpus: the tiers whose memories make lexical relevance's BM25 corpus (:meth:`lexical_relevance`;
                default :attr:`readable`).
        Returns:
            What :func:`simulacra.memory.selection.select` picks (the one retrieval rule; see there): cascade or
            merged over the tiers with ``top_k`` and ``threshold``, then, under a static budget, at most
            ``static_top_k`` static facts. Within a tier exactly what scoring every memory would give. Under
            lexical or hybrid relevance each result also carries its ``dense`` and ``lexical`` relevance.
        Raises:
            KeyError: an unknown tier or profile.
            TypeError: a ``query_text`` that is not a string, a ``threshold`` that is not a number.
            ValueError: an unknown mode; lexical or hybrid relevance without ``query_text`` (or with a blank one); a
                query embedding not of shape ``(dim,)`` or not finite, a ``now`` that is not a finite number, a
                ``top_k`` under 1, a ``threshold`` of ``nan`` or ``+inf``.
        """
        self._check_query(query_embedding, now, top_k, query_text)
        profile, params, _ = self.dated(profile, query_text, now)
        self._check_text(params, query_text, profile)
        rule = rule or self.rule(top_k, threshold, mode, profile)
        names = self.readable if tiers is None else tuple(tiers)
        cue = self.speech_cue(query_text)
        fetched: dict[str, list[RetrievedMemory]] = {}

        def fetch(name: str, n: int) -> TierCandidates:
            tier = self.tier(name)
            out = tier.contradicting(cue) | tier.formed_from(formed_before)
            # the n best of the rest are among the n + len(out) best of all
            best = tier.top(query_embedding, now, params, n + len(out), self.config.recency_from, query_text,
                            self._lexical_of(params, query_text, name, corpus))
            best = [m for m in best if m.id not in out][:n] if out else best
            fetched[name] = best  # best first, ties in row order: positions are row order among equals
            return TierCandidates(name, [m.id for m in best], np.array([m.score for m in best], dtype=np.float64))

        with scoring_threads():
            return [fetched[p.tier][p.index] for p in select(names, fetch, rule)]

    def _check_query(self, query_embedding: np.ndarray, now: float, top_k: int | None,
                     query_text: str | None = None) -> None:
        """A retrieval's arguments a store cannot score (else a numpy error from inside, or no result at all):
        ValueError naming it (TypeError for a ``query_text`` that is not a string)."""
        dim = self.short_term.dim
        if getattr(query_embedding, "shape", None) != (dim,):
            raise ValueError(f"query_embedding: expected a vector of shape ({dim},) (the store's dimension), got "
                             f"shape {getattr(query_embedding, 'shape', type(query_embedding).__name__)}")
        try:
            finite = bool(np.isfinite(query_embedding).all())
        except TypeError:  # not numbers at all
            finite = False
        if not finite:
            raise ValueError("query_embedding: expected finite numbers, got nan, inf or non-numbers (every memory "
                             "would score nan)")
        check_now(now)
        if top_k is not None and not (is_whole(top_k) and top_k >= 1):
            raise ValueError(f"top_k: expected a whole number >= 1, got {top_k!r}")
        if query_text is not None and not isinstance(query_text, str):
            raise TypeError(f"query_text: expected the query's text (a str) or None, got {type(query_text).__name__} "
                            f"{query_text!r:.40}")

    @staticmethod
    def _check_text(params: ScoringParams, query_text: str | None, profile: str | None) -> None:
        """:func:`~simulacra.memory.store.check_query_text` for a retrieval of ``profile``, before any tier scores."""
        check_query_text(params, query_text, f"profile {profile or SITUATIONAL}")

    def candidates(self, query_embedding: np.ndarray, now: float, top_k: int | None = None,
                   tiers: Sequence[str] | None = None, query_text: str | None = None,
                   profile: str | None = None, corpus: Sequence[str] | None = None) -> dict[str, list[list] | None]:
        """Per tier, every memory that could be among its best ``top_k`` (default :attr:`max_top_k`) under other
        weights or ``gamma`` (:meth:`MemoryTier.candidates`), for the trace; ``None`` for a tier too large to
        check. Under lexical or hybrid relevance (``query_text`` required) a candidate's relevance is the fused
        one (of ``profile``'s relevance mode), which re-ranking keeps."""
        self._check_query(query_embedding, now, top_k, query_text)
        k = self.max_top_k if top_k is None else top_k
        names = self.readable if tiers is None else tuple(tiers)
        used, params, _ = self.dated(profile, query_text, now)
        self._check_text(params, query_text, used)
        cue = self.speech_cue(query_text)
        out: dict[str, list[list] | None] = {}
        for name in names:
            tier = self.tier(name)
            # a kept row that can be in the rest's top k is beaten for sure by at most k - 1 kept rows and the left-out
            # ones, so it is in the (k + len(left_out))-skyband of the whole tier: that band without the left-out
            # rows holds every such row (a superset of the rest's own band, which rescore re-ranks exactly)
            left_out = tier.contradicting(cue) if len(tier) <= CANDIDATE_LIMIT else frozenset()
            rows = tier.candidates(query_embedding, now, params, k + len(left_out), self.config.recency_from,
                                   limit=CANDIDATE_LIMIT, query_text=query_text,
                                   lexical=self._lexical_of(params, query_text, name, corpus))
            out[name] = rows if rows is None or not left_out else [r for r in rows if r[0] not in left_out]
        return out

    def speech_cue(self, query_text: str | None) -> SpeechCue | None:
        """Who spoke to whom ``query_text`` asks about (:func:`simulacra.memory.speech.speech_cue`) when
        ``memory.speech_roles`` is on, else ``None``: a retrieval leaves out the memories of lines said the other
        way (:meth:`MemoryTier.contradicting <simulacra.memory.store.MemoryTier.contradicting>`)."""
        return speech_cue(query_text) if self.config.speech_roles else None

    def retrieval_record(self, query: str, purpose: str, results: Sequence[RetrievedMemory],
                         query_embedding: np.ndarray, now: float, rule: RetrievalRule | None = None,
                         tiers: Sequence[str] | None = None, profile: str | None = None,
                         corpus: Sequence[str] | None = None) -> RetrieveOp:
        """The trace's ``retrieve`` operation for a retrieval made with :meth:`retrieve`.

        Args:
            query: the query text.
            purpose: why it was asked (``focus``, ``conversation with <id>``).
            results: what :meth:`retrieve` returned.
            query_embedding: the one given to :meth:`retrieve`.
            now: the one given to :meth:`retrieve`.
            rule: the one given to :meth:`retrieve` (default: the profile's rule).
            tiers: the ones given to :meth:`retrieve` (default: :attr:`readable`).
            profile: the one given to :meth:`retrieve` (default: the section's own fields).
            corpus: the one given to :meth:`retrieve` (default: :attr:`readable`).
        Returns:
            ``{"op": "retrieve", "agent", "query", "purpose", "profile" (``situational`` for the section's own
            fields), "results": [RetrievedMemory.to_dict()], "mode",
            "top_k", "threshold", "static_top_k", "static_threshold", "tiers", "max_top_k", "candidates"}``:
            the rule (:meth:`RetrievalRule.to_record`), and per tier the candidates for :attr:`max_top_k`
            (:meth:`candidates`), from which ``simulacra rescore`` re-ranks exactly. Under lexical or hybrid
            relevance also ``"relevance"`` and ``"hybrid_weight"``; the candidates' relevance is then the fused one
            (``query`` is the text it was computed for); under RRF ``"fusion"`` and ``"rrf_k"``; under ``normalize:
            minmax`` ``"normalize"`` and per tier ``"ranges"``: ``[relevance min, max, importance min, max, age min,
            max]`` (:meth:`MemoryTier.extremes`); when the query names who spoke or who listened
            (:meth:`speech_cue`), ``"speech": [speaker, listener, words]`` (``None`` for a side not named): the
            memories of lines said the other way were left out of the results and the candidates.
        """
        asked = profile
        profile, params, named = self.dated(profile, query, now)
        rule = rule or self.rule(profile=profile)
        names = list(self.readable if tiers is None else tiers)
        depth = max(self.max_top_k, rule.top_k, rule.static_top_k or 0)
        ranges = None
        if params.normalize == "minmax":  # the tiers' extremes, so that rescore can redo the scaling
            ranges = {name: self.tier(name).extremes(query_embedding, now, params, self.config.recency_from, query,
                                                     self._lexical_of(params, query, name, corpus))
                      for name in names}
        return retrieve_op(self.agent, query, purpose, profile or SITUATIONAL, [r.to_dict() for r in results],
                           rule.mode, rule.top_k, rule.threshold, rule.static_top_k, rule.static_threshold, names,
                           depth, self.candidates(query_embedding, now, depth, names, query, asked, corpus),
                           lexical=(params.relevance, params.hybrid_weight) if params.lexical else None,
                           rrf_k=params.rrf_k if params.rrf else None, minmax_ranges=ranges,
                           named_time=None if named is None else named.as_list(),
                           speech=None if (cue := self.speech_cue(query)) is None else cue.as_list())

    def most_important(
        self, now: float, n: int, tiers: Sequence[str] = ("long_term",), since: float | None = None,
        kinds: Sequence[str] | None = None,
    ) -> list[tuple[MemoryRecord, float]]:
        """The ``n`` memories with the highest (decayed) importance, with that importance.

        Args:
            now: game minute the importance is decayed to.
            n: how many, an integer >= 0 (fewer when fewer memories qualify).
            tiers: the tiers to look in.
            since: only memories formed at or after this game minute.
            kinds: only these kinds.
        Returns:
            Up to ``n`` ``(record, importance in [0, 1])``, highest importance first; ties are broken by recency,
            then id.
        Raises:
            TypeError: ``n`` not an integer.
            ValueError: ``n`` negative.
        """
        if not is_whole(n):
            raise TypeError(f"n: expected how many memories, an integer >= 0, got {type(n).__name__} {n!r}")
        if n < 0:
            raise ValueError(f"n: expected how many memories, an integer >= 0, got {n}")
        items: list[tuple[MemoryRecord, float]] = []
        for name in tiers:
            tier = self.tier(name)
            for r, imp in zip(tier.records, tier.importance(now, self.params)):
                if r.rating is None or (since is not None and (r.timestamp or 0) < since):
                    continue
                if kinds is not None and r.kind not in kinds:
                    continue
                items.append((r, float(imp)))
        items.sort(key=lambda x: (-x[1], -(x[0].timestamp or 0), x[0].id))
        return items[:n]


def check_now(now: Any, name: str = "now") -> None:
    """Refuse a game time that is not a finite number (a str, a bool, ``nan``, ``inf``): ValueError naming ``name``.
    The one rule for every :class:`AgentMemory` method that takes the game minute."""
    if not is_finite_number(now):
        raise ValueError(f"{name}: expected the game minute (a finite number), got {type(now).__name__} {now!r}")


def topic_of(record: MemoryRecord) -> str | None:
    """The news a memory carries (``extra["topic"]``: a percept's event, a heard line's or a scenario telling's
    topic), as the trace's ``add`` and ``reinforce`` operations record it; ``None`` when untagged."""
    topic = record.extra.get("topic")
    return str(topic) if topic else None


def reinforced_id(agent: str, ids: Sequence[str]) -> str:
    """Id of the memory that reinforcement makes of the memories ``ids`` (in the given order): sha256 of the agent
    and the ids, 24 hex characters (as :func:`~simulacra.memory.records.memory_id`), so that a resumed run makes
    the same id."""
    return hashlib.sha256("\x1f".join([agent, "reinforce", *ids]).encode()).hexdigest()[:24]


def restore_missing(tier: MemoryTier, want: Sequence[str], sources: Sequence[MemoryTier], owner: str,
                    short_term: bool = False) -> int:
    """Write back into ``tier`` the ids of ``want`` it lacks: the tier's own copy of a memory deleted since the last
    flush with deletes (:meth:`MemoryTier.removed`), else a copy (record and embedding) from the first of ``sources``
    that holds it (``long_term_since`` cleared when ``short_term``: a short-term memory has none, whichever tier the
    copy was last deleted from); returns how many.

    Raises:
        CheckpointError: an id is in none of the sources.
    """
    missing = [i for i in want if i not in tier]
    if not missing:
        return 0
    recs, embs = [], []
    for i in missing:
        copy = tier.removed(i)  # deleted from this tier since the checkpoint, not yet from Chroma
        if copy is None:
            src = next((s for s in sources if i in s), None)
            if src is not None and (held := src.get(i)) is not None:
                copy = (held, src.embeddings_of([i])[0])
        if copy is None:
            why = ("its static memories are built from the persona and world files: one of them changed since the run "
                   "started (resumed with --allow-changed?); restore it to resume" if tier.tier == "static" else
                   "the run folder was changed outside simulacra and cannot be resumed")
            raise CheckpointError(f"memory {i} of {owner}'s {tier.tier} tier is in the checkpoint but no longer in the "
                                  f"store; {why}")
        rec, emb = copy
        recs.append(replace(rec, long_term_since=None) if short_term else rec)
        embs.append(emb)
    tier.upsert(recs, np.stack(embs))
    return len(recs)


def roll_back(tier: MemoryTier, want: Sequence[str]) -> int:
    """Delete from ``tier`` every id not in ``want`` (all present) and order its rows as ``want``; returns how
    many were deleted."""
    keep = set(want)
    extra = [i for i in tier.ids if i not in keep]
    tier.delete(extra)
    tier.reorder(want)
    return len(extra)
