"""Agent memory: static persona memory, short-term and decaying long-term Chroma tiers (seed 003)."""

from simulacra.memory.records import MemoryRecord, RetrievedMemory
from simulacra.memory.scoring import (
    ScoreTerms,
    ScoringInputs,
    ScoringParams,
    relevance_from_distance,
    score_memories,
)
from simulacra.memory.selection import Pick, RetrievalRule, TierCandidates, rank, select

__all__ = [
    "MemoryRecord",
    "Pick",
    "RetrievalRule",
    "RetrievedMemory",
    "ScoreTerms",
    "ScoringInputs",
    "ScoringParams",
    "TierCandidates",
    "rank",
    "relevance_from_distance",
    "score_memories",
    "select",
]
