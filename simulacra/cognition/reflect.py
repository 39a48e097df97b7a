"""Reflection: summarising several memories into a new, deeper one (seed 003; Generative Agents, sec. 4.2).

An agent reflects when the ratings of the memories added since its last reflection sum to
``reflection.threshold`` (150 points on the 1..10 scale, as in the paper). It then

1. picks focal points: its most important memories formed since the last reflection, skipping any
   whose embedding is more than ``focal_similarity`` cosine-similar to one already picked (the paper asks
   an LLM for the salient questions; offline, the focal memory's text is the question);
2. retrieves evidence for each focal point from its short-term and long-term memory (merged by score,
   no threshold: the best ``evidence_per_focal_point``);
3. asks the rater's ``/reflect`` for insights, each citing the ids of the evidence it rests on;
4. stores each insight as a long-term memory of kind ``reflection`` with its evidence ids and a depth one
   more than its deepest evidence, rated by the rater like any memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulacra.memory.records import MemoryRecord, RetrievedMemory, memory_id
from simulacra.memory.stream import AgentMemory

EPISODIC = ("short_term", "long_term")


@dataclass(frozen=True)
class ReflectionRequest:
    """What one agent brings to the rater: its focal points and the evidence retrieved for them."""

    agent: str
    focal_points: list[MemoryRecord]
    evidence: list[RetrievedMemory]

    def payload(self) -> list[dict]:
        """The ``memories`` of a ``/reflect`` request: id, text, rating of each piece of evidence."""
        return [{"id": m.id, "text": m.text, "rating": m.record.rating if m.record else None} for m in self.evidence]


def embedding_of(memory: AgentMemory, memory_id_: str) -> np.ndarray | None:
    """The stored embedding of a memory of the agent's own tiers, or ``None``."""
    for tier in memory.tiers.values():
        if memory_id_ in tier:
            return tier.embeddings_of([memory_id_])[0]
    return None


def focal_points(memory: AgentMemory, now: float, n: int, max_similarity: float,
                 since: float | None = None) -> list[MemoryRecord]:
    """The ``n`` most important episodic memories formed at or after ``since`` (game minute), best first,
    none more than ``max_similarity`` cosine-similar to a better one (so three retellings of one event
    make one focal point). Ties: more recent first, then id."""
    chosen: list[MemoryRecord] = []
    vectors: list[np.ndarray] = []
    ranked = memory.most_important(now, len(memory.short_term) + len(memory.long_term), tiers=EPISODIC, since=since)
    for rec, _ in ranked:
        vec = embedding_of(memory, rec.id)
        if vec is None:
            continue
        unit = vec / max(float(np.linalg.norm(vec)), 1e-12)
        if any(float(unit @ v) > max_similarity for v in vectors):
            continue
        chosen.append(rec)
        vectors.append(unit)
        if len(chosen) == n:
            break
    return chosen


def gather_evidence(memory: AgentMemory, focal: Sequence[MemoryRecord], now: float,
                    per_focal: int) -> list[RetrievedMemory]:
    """Evidence for the focal points: for each, the best ``per_focal`` episodic memories by score (merged
    over short- and long-term, no threshold); deduplicated by id, in order of first retrieval."""
    seen: dict[str, RetrievedMemory] = {}
    for rec in focal:
        vec = embedding_of(memory, rec.id)
        if vec is None:
            continue
        for m in memory.retrieve(vec, now, top_k=per_focal, tiers=EPISODIC, threshold=-np.inf, mode="merged",
                                 query_text=rec.text, profile=memory.config.profile_of("reflection")):
            seen.setdefault(m.id, m)
    return list(seen.values())


def insight_records(agent: str, insights: Sequence[dict], evidence: Sequence[RetrievedMemory], now: float,
                    tick: int) -> list[MemoryRecord]:
    """Long-term records of kind ``reflection`` for the rater's insights (ratings filled in later).

    Each keeps the ids of its evidence (only ids that were sent) and a depth one more than the deepest
    of them; an insight citing nothing that was sent is dropped, as is a repeated text.
    """
    depth = {m.id: (m.record.depth if m.record else 0) for m in evidence}
    out: dict[str, MemoryRecord] = {}
    for ins in insights:
        ids = [i for i in dict.fromkeys(ins.get("evidence", [])) if i in depth]
        text = str(ins.get("text", "")).strip()
        if not ids or not text:
            continue
        rid = memory_id(agent, now, text)
        out.setdefault(rid, MemoryRecord(
            id=rid, text=text, kind="reflection", timestamp=float(now), tick=tick,
            extra={"evidence_ids": ",".join(ids), "depth": 1 + max(depth[i] for i in ids)},
        ))
    return list(out.values())
