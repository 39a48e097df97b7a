"""Re-score a finished run's retrievals under other weights, from its trace alone.

Every ``retrieve`` operation of a trace (schema 2) records, per tier asked, the memories that *any*
non-negative weights and any recency ``gamma`` could have returned (the k-skyband, see
:meth:`simulacra.memory.index.MirrorIndex.skyband`) with their relevance, importance and age. Re-ranking
those with the formula of :mod:`simulacra.memory.scoring` and the engine's own selection
(:func:`simulacra.memory.selection.select`) under the rule the run recorded (cascade or merged, ``top_k``,
``threshold``, static budget) gives exactly what the run would have retrieved under the other weights; the
rule can be changed too, ``top_k`` up to the recorded ``max_top_k``. Under ``normalize: minmax`` the operation
also records each tier's extremes of relevance, importance and age, from which the scaling is redone (the
k-skyband is the same: rescaling each term by an increasing map keeps which memory beats which); under RRF the
recorded relevance is the fused one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from simulacra.config import SITUATIONAL, config_from_dict, profile_overrides, recorded_config
from simulacra.errors import SimulacraError, is_finite_number, is_whole
from simulacra.memory.scoring import SCORING_FIELDS, ScoringParams, TermRanges, combine, recency_of
from simulacra.memory.selection import RetrievalRule, TierCandidates, candidate_depth, select
from simulacra.trace import REFLECT, REHEARSE, RETRIEVE, CandidateRow, RetrieveOp, TickRecord, read_trace


def recorded_ranges(extremes: Sequence[float | None], params: ScoringParams) -> TermRanges:
    """The :class:`TermRanges` of a tier under ``params`` from the extremes a retrieve operation recorded
    (``[relevance min, max, importance min, max, age min, max]``, :meth:`MirrorIndex.extremes`): recency falls
    with age, so its extremes are the recency of the oldest and of the newest memory under ``params.gamma``."""
    x = [np.nan if v is None else float(v) for v in extremes]
    rec = recency_of(np.array([x[5], x[4]]), params.gamma, params.recency_window_minutes)
    return TermRanges((float(rec[0]), float(rec[1])), (x[2], x[3]), (x[0], x[1]))


def recorded_candidates(candidates: Mapping[str, Sequence[CandidateRow] | None], params: ScoringParams,
                        ranges: Mapping[str, Sequence[float | None]] | None = None) -> dict[str, TierCandidates]:
    """Score a retrieve operation's recorded candidates under ``params``, per tier, in row order.

    Args:
        candidates: per tier, ``[id, relevance, importance | None, age_minutes | None]`` rows in row order
            (the importance recorded already holds its long-term decay).
        ranges: per tier, the recorded extremes (needed under ``normalize: minmax``; :func:`recorded_ranges`).
    Raises:
        ValueError: a tier's candidates were not recorded (too large a tier), or minmax without its extremes.
    """
    out = {}
    for tier, rows in candidates.items():
        if rows is None:
            raise ValueError(f"tier {tier} was too large for its candidates to be recorded")
        rel = np.array([r[1] for r in rows], dtype=np.float64)
        imp = np.array([np.nan if r[2] is None else r[2] for r in rows], dtype=np.float64)
        age = np.array([np.nan if r[3] is None else r[3] for r in rows], dtype=np.float64)
        rec = recency_of(age, params.gamma, params.recency_window_minutes)
        tier_ranges = None
        if params.normalize == "minmax":
            if ranges is None or tier not in ranges:
                raise ValueError(f"minmax scaling needs the extremes of tier {tier}, which were not recorded")
            tier_ranges = recorded_ranges(ranges[tier], params)
        score = combine(rec, imp, rel, params, tier_ranges)[0]  # the engine's arithmetic, exactly
        out[tier] = TierCandidates(tier, [r[0] for r in rows], score)
    return out


def rerank(candidates: Mapping[str, Sequence[CandidateRow] | None], tiers: Sequence[str], rule: RetrievalRule,
           params: ScoringParams, ranges: Mapping[str, Sequence[float | None]] | None = None
           ) -> list[tuple[str, str, float]]:
    """The retrieval's result under ``params`` and ``rule``: ``[(id, tier, score), ...]`` in result order.

    Args:
        candidates: the operation's recorded candidates (:func:`recorded_candidates`).
        tiers: the tiers in the order the retrieval asked them.
        rule: the rule to select with (:func:`simulacra.memory.selection.select`, the engine's own).
        params: the weights and ``gamma`` to re-rank with.
        ranges: the operation's recorded extremes per tier (``normalize: minmax``).
    Raises:
        ValueError: a tier's candidates were not recorded (too large a tier).
    """
    scored = recorded_candidates({t: candidates.get(t, []) for t in tiers}, params, ranges)
    return [(p.id, p.tier, p.score) for p in select(tiers, scored, rule)]


def check_options(**options: Any) -> None:
    """The options of :func:`rescore_run` (each ``None``: the run's own), else :class:`SimulacraError` naming the
    option: weights ``a_rec``, ``a_imp``, ``a_rel`` finite and >= 0, not all 0 when all three are given;
    ``gamma`` in (0, 1]; ``threshold`` and ``static_threshold`` finite; ``mode`` cascade or merged; ``top_k`` an
    integer >= 1, ``static_top_k`` an integer >= 0."""

    def number(name: str) -> float | None:
        v = options.get(name)
        if v is not None and not is_finite_number(v):
            raise SimulacraError(f"{name} must be a finite number, got {v!r}")
        return v

    weights = [number(w) for w in ("a_rec", "a_imp", "a_rel")]
    if any(w is not None and w < 0 for w in weights) or (None not in weights and not any(weights)):
        raise SimulacraError(f"a_rec, a_imp, a_rel: expected non-negative weights, not all 0; got "
                             f"{', '.join(repr(w) for w in weights)}")
    gamma = number("gamma")
    if gamma is not None and not 0 < gamma <= 1:
        raise SimulacraError(f"gamma must be in (0, 1], got {gamma}")
    number("threshold")
    number("static_threshold")
    if options.get("mode") not in (None, "cascade", "merged"):
        raise SimulacraError(f"mode must be 'cascade' or 'merged', got {options['mode']!r}")
    for name, least in (("top_k", 1), ("static_top_k", 0)):
        v = options.get(name)
        if v is not None and not (is_whole(v) and v >= least):
            raise SimulacraError(f"{name} must be an integer >= {least}, got {v!r}")


def rescore_run(run: str | Path, a_rec: float | None = None, a_imp: float | None = None, a_rel: float | None = None,
                gamma: float | None = None, threshold: float | None = None, mode: str | None = None,
                top_k: int | None = None, static_top_k: int | None = None, static_threshold: float | None = None,
                profile: str | None = None) -> dict[str, Any]:
    """Re-rank the recorded retrievals of ``run`` under the given weights (and ``gamma``, ``threshold``,
    retrieval ``mode``, ``top_k``, ``static_top_k``, ``static_threshold``; each ``None`` keeps what the
    retrieval used: with nothing given every retrieval is re-ranked as it was made, under its own retrieval
    profile). ``top_k`` and ``static_top_k`` can rise up to the ``max_top_k`` each retrieval recorded
    candidates for (its ``top_k`` in traces without one); a retrieval that cannot be re-ranked is counted as
    not re-scorable.

    Args:
        a_rec, a_imp, a_rel: the weights (>= 0) to re-rank with; ``None`` keeps each retrieval's profile's.
        profile: re-rank only the retrievals made under this retrieval profile (their ``profile``; ``situational``
            in traces written before profiles); ``None``: every retrieval. The fields not given (``gamma``, the
            relevance mode, ...) are each retrieval's own profile's.
    Returns:
        ``{"retrievals", "rescored", "not_rescorable", "changed", "weights", "run_weights", "profile",
        "run_profiles", "changes": [{tick, clock, agent, purpose, profile, query, before: [ids], after: [ids],
        dropped: [texts], added: [texts]}, ...]}``; a retrieval is *changed* when its list of ids (in order)
        differs; ``run_weights`` are those of ``profile`` (the section's own when ``None``), ``run_profiles`` the
        weights and number of retrievals of each profile re-ranked, ``recorded_max_top_k`` the deepest candidates
        recorded. An added static memory's text is rebuilt from the header's personas and world (the trace never
        writes static memories), else shown as ``(static memory <id>)``.
    Raises:
        SimulacraError: the trace is missing, of another schema, or has no recorded candidates; an unknown profile;
            an option out of range (:func:`check_options`); a ``top_k`` (``static_top_k``) deeper than every
            retrieval's recorded candidates (naming the deepest recorded).
    """
    check_options(a_rec=a_rec, a_imp=a_imp, a_rel=a_rel, gamma=gamma, threshold=threshold, mode=mode, top_k=top_k,
                  static_top_k=static_top_k, static_threshold=static_threshold)
    header, ticks = read_trace(run)
    config_from_dict(recorded_config(header["config"]), f"{run} header")  # a broken recorded value, named
    memory = header["config"]["memory"]
    try:
        profile_overrides(memory, profile)
    except KeyError as e:
        raise SimulacraError(f"{run}: {e.args[0]}") from None
    given = {k: v for k, v in {"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel, "gamma": gamma}.items()
             if v is not None}
    per_profile: dict[str, tuple[ScoringParams, ScoringParams]] = {}  # as the run retrieved, as re-ranked

    def params_of(name: str) -> tuple[ScoringParams, ScoringParams]:
        if name not in per_profile:
            own = scoring_overrides(memory, name)
            per_profile[name] = (ScoringParams.from_config(memory, **own),
                                 ScoringParams.from_config(memory, **{**own, **given}))
        return per_profile[name]

    def weights_of(p: ScoringParams) -> dict[str, float]:
        return {"a_rec": p.a_rec, "a_imp": p.a_imp, "a_rel": p.a_rel, "gamma": p.gamma}

    base, params = params_of(profile or SITUATIONAL)
    asked: dict[str, Any] = {"threshold": threshold, "mode": mode, "top_k": top_k, "static_top_k": static_top_k,
                             "static_threshold": static_threshold}
    changes = {k: v for k, v in asked.items() if v is not None}
    texts = _texts(ticks)
    statics = _StaticTexts(header)
    too_deep, recorded = 0, 0  # retrievals deeper than their candidates; the deepest candidates recorded
    report: dict[str, Any] = {"retrievals": 0, "rescored": 0, "not_rescorable": 0, "changed": 0, "changes": [],
                              "weights": {"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel, "gamma": gamma,
                                          "threshold": threshold, "mode": mode, "top_k": top_k,
                                          "static_top_k": static_top_k, "static_threshold": static_threshold},
                              "run_weights": weights_of(base), "profile": profile, "run_profiles": {}}
    for t in ticks:
        for op in t["memory"]:
            if op["op"] != RETRIEVE:
                continue
            name = op.get("profile", SITUATIONAL)
            if profile is not None and name != profile:
                continue
            report["retrievals"] += 1
            seen = report["run_profiles"].setdefault(name, {**weights_of(params_of(name)[0]), "retrievals": 0})
            seen["retrievals"] += 1
            if "candidates" not in op:
                raise SimulacraError(f"{run}: retrievals carry no candidates (a trace of schema 1?)")
            rule = replace(RetrievalRule.from_record(op, memory), **changes)
            depth = recorded_depth(op, memory)
            recorded = max(recorded, depth)
            if any(rule.depth(tier) > depth for tier in op["tiers"]):  # deeper than the candidates recorded
                report["not_rescorable"] += 1
                too_deep += 1
                continue
            try:
                after = rerank(op["candidates"], op["tiers"], rule, params_of(name)[1], op.get("ranges"))
            except ValueError:
                report["not_rescorable"] += 1
                continue
            report["rescored"] += 1
            before_ids = [m["id"] for m in op["results"]]
            after_ids = [m[0] for m in after]
            if before_ids != after_ids:
                report["changed"] += 1
                report["changes"].append({
                    "tick": t["tick"], "clock": t["clock"], "agent": op["agent"], "purpose": op["purpose"],
                    "profile": name,
                    "query": op["query"], "before": before_ids, "after": after_ids,
                    "dropped": [texts.get(m["id"]) or statics.text(op["agent"], m["id"], m.get("tier"))
                                for m in op["results"] if m["id"] not in after_ids],
                    "added": [texts.get(i) or statics.text(op["agent"], i, tier)
                              for i, tier, _ in after if i not in before_ids],
                })
    depths = [(k, v) for k, v in (("top_k (--top-k)", top_k), ("static_top_k", static_top_k)) if v is not None]
    if too_deep and not report["rescored"] and depths:  # nothing re-ranked because of the depth asked: say how deep
        said = ", ".join(f"{k} {v}" for k, v in depths)
        limits = " and ".join(f"{k.split()[0]} <= {recorded}" for k, _ in depths)
        raise SimulacraError(f"{said}: deeper than any retrieval's recorded candidates; the trace recorded "
                             f"candidates for at most top_k {recorded} (memory.max_top_k of the run): re-rank with "
                             f"{limits}, or record deeper in a new run (--set memory.max_top_k=N)")
    report["recorded_max_top_k"] = recorded
    return report


class _StaticTexts:
    """Texts of the static memories a retrieval's result can add without the trace ever writing them (persona facts
    and world rules are stored before the first tick): rebuilt from the trace header's personas and world by the
    engine's rule (:class:`simulacra.viewer.memory.StaticRule`), per agent when first asked."""

    def __init__(self, header: Any):
        self.header = header
        self.rule: Any = None
        self.known: dict[str, dict[str, str]] = {}

    def text(self, agent: str, memory_id: str, tier: str | None) -> str:
        """The memory's text when it is one of ``agent``'s static memories, else a placeholder naming its id."""
        if tier != "static":
            return f"(memory {memory_id}; its text is not in the trace)"
        if agent not in self.known:
            if self.rule is None:
                from simulacra.viewer.memory import StaticRule

                self.rule = StaticRule(self.header)
            self.known[agent] = {i: text for i, text, _ in self.rule.of(agent) or []}
        return self.known[agent].get(memory_id) or f"(static memory {memory_id})"


def scoring_overrides(memory: dict[str, Any], profile: str | None) -> dict[str, Any]:
    """The scoring fields (:class:`ScoringParams`) that retrieval profile ``profile`` replaces in a trace header's
    ``memory`` section (:func:`~simulacra.config.profile_overrides`); a header without the profile (a trace
    written before profiles) gives ``{}``."""
    try:
        over = profile_overrides(memory, profile)
    except KeyError:
        return {}
    return {k: v for k, v in over.items() if k in SCORING_FIELDS}


def recorded_depth(op: RetrieveOp, run_memory: Mapping[str, Any]) -> int:
    """The ``top_k`` a retrieve operation's candidates serve: its ``max_top_k``; else, in a trace whose config
    has ``memory.max_top_k`` (candidates recorded by :meth:`AgentMemory.candidates`, which defaults to that
    depth), :func:`candidate_depth` of the run's config; else (older traces) the operation's ``top_k``."""
    if "max_top_k" in op:
        return int(op["max_top_k"])
    if "max_top_k" in run_memory:
        return candidate_depth(int(run_memory["top_k"]), run_memory.get("static_top_k"), run_memory["max_top_k"])
    return int(op["top_k"])


def _texts(ticks: Iterable[TickRecord]) -> dict[str, str]:
    """Memory id -> text, from every operation of the trace that carries both."""
    out: dict[str, str] = {}
    for t in ticks:
        for op in t["memory"]:
            if op["op"] == RETRIEVE:
                for m in op["results"]:
                    out.setdefault(m["id"], m["text"])
            elif op["op"] == REFLECT:
                for ins in op["insights"]:
                    out.setdefault(ins["id"], ins["text"])
            elif op["op"] != REHEARSE:  # every other operation is about one memory
                out.setdefault(op["id"], op["text"])
    return out


def format_report(report: dict[str, Any], limit: int = 20) -> str:
    """Human-readable rescore report: totals, then up to ``limit`` changed retrievals."""
    w = report["weights"]
    rule = "".join(f", {k}={w[k]}" for k in ("threshold", "mode", "top_k", "static_top_k", "static_threshold")
                   if w.get(k) is not None)
    profile = f" {report['profile']}" if report.get("profile") else ""
    given = ", ".join(f"{k}={w[k]}" for k in ("a_rec", "a_imp", "a_rel", "gamma") if w.get(k) is not None)
    used = "; ".join(f"{name} ({p['retrievals']}): a_rec={p['a_rec']}, a_imp={p['a_imp']}, a_rel={p['a_rel']}, "
                     f"gamma={p['gamma']}" for name, p in report.get("run_profiles", {}).items())
    given = given or "each retrieval profile's own weights"
    out = [f"re-scored {report['rescored']} of {report['retrievals']}{profile} retrievals with {given}{rule} "
           f"(the run used {used or '-'})",
           f"changed: {report['changed']} ({report['changed'] / max(report['rescored'], 1):.1%})"]
    if report["not_rescorable"]:
        deepest = f" {report['recorded_max_top_k']}" if report.get("recorded_max_top_k") else ""
        out.append(f"not re-scorable (a tier too large for its candidates to be recorded, or top_k above the "
                   f"recorded max_top_k{deepest}): {report['not_rescorable']}")
    for c in report["changes"][:limit]:
        out.append(f"\ntick {c['tick']} {c['clock']} {c['agent']} ({c['purpose']}, {c.get('profile', SITUATIONAL)}): "
                   f"{c['query']}")
        out += [f"  - {text}" for text in c["dropped"]]
        out += [f"  + {text}" for text in c["added"]]
        if not c["dropped"] and not c["added"]:
            out.append("  (same memories, another order)")
    if len(report["changes"]) > limit:
        out.append(f"\n... and {len(report['changes']) - limit} more changed retrievals (--json for all)")
    return "\n".join(out)
