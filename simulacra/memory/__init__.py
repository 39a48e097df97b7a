"""Agent memory: static persona memory, short-term and decaying long-term Chroma tiers (seed 003)."""

from simulacra.memory.records import MemoryRecord, RetrievedMemory
from simulacra.memory.scoring import ScoreTerms, ScoringParams, relevance_from_distance, score_memories

__all__ = [
    "MemoryRecord",
    "RetrievedMemory",
    "ScoreTerms",
    "ScoringParams",
    "relevance_from_distance",
    "score_memories",
]
