"""Reflection trigger and evidence, merged retrieval, the town's shared memory and the embedding cache."""

import numpy as np
import pytest

from simulacra.cognition.reflect import focal_points, gather_evidence, insight_records
from simulacra.config import MemoryConfig
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.store import MemoryTier
from simulacra.memory.stream import AgentMemory, open_chroma
from tests.conftest import unit

DIM = 8


def rec(agent, text, ts, rating, kind="observation", **extra):
    return MemoryRecord(id=memory_id(agent, ts, text), text=text, kind=kind, rating=rating, timestamp=float(ts),
                        tick=int(ts // 10), extra=extra)


def make(tmp_path, agent="ann", shared=None, **cfg):
    return AgentMemory(agent, tmp_path / agent, MemoryConfig(**{"relevance": "dense", **cfg}), DIM, shared=shared)


# ----------------------------------------------------------------- reflection trigger
def test_reflection_trigger_sums_ratings_of_new_memories_only(tmp_path):
    mem = make(tmp_path)
    batch = [rec("ann", f"m{i}", 0, 9) for i in range(10)]
    mem.add(batch, np.stack([unit(1, i) for i in range(10)]))
    assert mem.importance_since_reflection == 90 and not mem.reflection_due(150)
    mem.add(batch[:3], np.stack([unit(1, i) for i in range(3)]))  # the same memories again: overwritten, not counted
    assert mem.importance_since_reflection == 90
    more = [rec("ann", f"n{i}", 10, 10) for i in range(6)]
    mem.add(more, np.stack([unit(0, 1, i) for i in range(6)]))
    assert mem.importance_since_reflection == 150 and mem.reflection_due(150)
    refl = rec("ann", "a thought", 20, 10, kind="reflection", evidence_ids=batch[0].id, depth=1)
    mem.add_long_term([refl], unit(0, 0, 1)[None], now=20)  # reflections do not feed the trigger
    assert mem.importance_since_reflection == 150
    mem.reflected(20)
    assert mem.importance_since_reflection == 0 and mem.last_reflection == 20 and not mem.reflection_due(150)


def test_focal_points_are_important_recent_and_distinct(tmp_path):
    mem = make(tmp_path)
    recs = [rec("ann", "old drama", 0, 10), rec("ann", "storm warning", 100, 9),
            rec("ann", "storm warning, retold", 110, 8), rec("ann", "lost dog", 120, 7), rec("ann", "bread", 130, 2)]
    vecs = [unit(0, 0, 0, 1), unit(1, 0.05), unit(1, 0.06), unit(0, 1), unit(0, 0, 1)]
    mem.add(recs, np.stack(vecs))
    got = focal_points(mem, now=140, n=3, max_similarity=0.9, since=50)
    # "old drama" is before `since`; the retelling is a near-duplicate of the storm warning
    assert [r.text for r in got] == ["storm warning", "lost dog", "bread"]


def test_evidence_is_merged_over_short_and_long_term(tmp_path):
    mem = make(tmp_path, short_term_min_entries=0)
    mem.add([rec("ann", "wheel broke", 0, 9)], unit(1, 0.1)[None])
    mem.consolidate(now=60, force=True)  # -> long-term
    talk = [rec("ann", f"wheel talk {i}", 100 + i, 3) for i in range(6)]
    mem.add(talk, np.stack([unit(1, 0.2 + i) for i in range(6)]))
    focal = [mem.short_term.records[0]]
    ev = gather_evidence(mem, focal, now=120, per_focal=3)
    # the cascade would fill up from short-term; reflection takes the best by score from both tiers
    assert "wheel broke" in [m.text for m in ev] and {m.tier for m in ev} == {"short_term", "long_term"}
    assert len(ev) == 3


def test_insight_records_cite_only_sent_evidence_and_go_one_deeper(tmp_path):
    mem = make(tmp_path, short_term_min_entries=0)
    a, b = rec("ann", "a", 0, 5), rec("ann", "b", 0, 5)
    mem.add([a, b], np.stack([unit(1), unit(1, 0.1)]))
    deep = rec("ann", "an earlier insight", 5, 6, kind="reflection", evidence_ids=f"{a.id},{b.id}", depth=1)
    mem.add_long_term([deep], unit(1, 0.2)[None], now=5)
    evidence = mem.retrieve(unit(1), now=10, top_k=3, tiers=("short_term", "long_term"), threshold=-1, mode="merged")
    assert {m.id for m in evidence} == {a.id, b.id, deep.id}
    insights = [{"text": "new insight", "evidence": [a.id, deep.id, "not-sent", a.id]},
                {"text": "cites nothing that was sent", "evidence": ["zzz"]},
                {"text": "  ", "evidence": [a.id]}]
    out = insight_records("ann", insights, evidence, now=10, tick=1)
    assert len(out) == 1
    assert out[0].kind == "reflection" and out[0].evidence_ids == [a.id, deep.id] and out[0].depth == 2
    # evidence ids and depth survive Chroma's scalar metadata and a reopen
    out[0].rating = 7
    mem.add_long_term(out, unit(1, 0.3)[None], now=10)
    reopened = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense"), DIM)
    again = reopened.long_term.get(out[0].id)
    assert again.evidence_ids == [a.id, deep.id] and again.depth == 2 and again.long_term_since == 10
    # and a reflection is retrieved like any memory
    assert reopened.retrieve(unit(1, 0.3), now=10, tiers=("long_term",), top_k=1)[0].id == out[0].id


# ----------------------------------------------------------------- retrieval modes
def test_merged_retrieval_takes_the_best_of_all_tiers(tmp_path):
    mem = make(tmp_path, threshold=0.0, top_k=2)
    static = MemoryRecord(id="s1", text="a static fact", kind="persona")
    mem.set_static([static], unit(0, 1)[None])
    mem.add([rec("ann", "close match", 0, 5)], unit(1)[None])
    q = unit(1)
    cascade = mem.retrieve(q, now=10, top_k=1, mode="cascade")
    merged = mem.retrieve(q, now=10, top_k=1, mode="merged")
    assert [m.tier for m in cascade] == ["static"]  # seed 003: static is asked first and fills top_k
    assert [m.text for m in merged] == ["close match"]
    with pytest.raises(ValueError, match="retrieval mode"):
        mem.retrieve(q, now=10, mode="sideways")


# ----------------------------------------------------------------- shared memory
def test_shared_memory_is_one_store_read_by_all_after_their_own_tiers(tmp_path):
    shared = MemoryTier(open_chroma(tmp_path / "town"), "shared", DIM)
    ann, ben = make(tmp_path, "ann", shared, threshold=0.0), make(tmp_path, "ben", shared, threshold=0.0)
    notice = rec("town", "Festival on Saturday", 0, 6, kind="notice", author="world")
    shared.upsert([notice], unit(0, 0, 1)[None])
    ann.add([rec("ann", "my own memory", 0, 5)], unit(1)[None])
    assert ann.readable == ("static", "short_term", "long_term", "shared")
    # cascade: own tiers first; the shared tier is reached while top_k is not filled
    assert [m.tier for m in ann.retrieve(unit(0, 0, 1), now=10, top_k=2, mode="cascade")] == ["short_term", "shared"]
    assert [m.tier for m in ann.retrieve(unit(0, 0, 1), now=10, top_k=1, mode="cascade")] == ["short_term"]
    # merged: the notice wins on relevance; ben, who wrote nothing, reads it too
    assert ann.retrieve(unit(0, 0, 1), now=10, top_k=1, mode="merged")[0].text == "Festival on Saturday"
    assert [m.id for m in ben.retrieve(unit(0, 0, 1), now=10)] == [notice.id]
    # shared memory is durable and off unless asked for
    reopened = MemoryTier(open_chroma(tmp_path / "town"), "shared", DIM)
    assert reopened.get(notice.id).extra["author"] == "world"
    assert make(tmp_path, "cal").readable == ("static", "short_term", "long_term")
    with pytest.raises(KeyError):
        make(tmp_path, "dan").tier("shared")


# ----------------------------------------------------------------- embedding cache
def test_embedding_cache_answers_repeated_texts_without_the_model(embedder):
    texts = ["Ann is sweeping the well path (cache test).", "Ben is counting candles (cache test)."]
    misses, hits = embedder.misses, embedder.hits
    first = embedder.embed(texts + texts[:1])
    assert embedder.misses - misses == 2  # the repeat inside one call is embedded once
    second = embedder.embed(texts[::-1])
    assert embedder.misses - misses == 2 and embedder.hits - hits >= 3
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(first[0], first[2])


def test_one_builder_makes_the_embedder_a_config_asks_for():
    """simulacra.embeddings.build_embedder: a run, the tools that read it and the rater embed alike."""
    from simulacra.config import EmbeddingConfig
    from simulacra.embeddings import CachedEmbedder, OnnxEmbedder, SentenceTransformerEmbedder, build_embedder

    e = build_embedder(EmbeddingConfig(exact=False, batch_size=8, cache_size=10))
    assert isinstance(e, CachedEmbedder) and e.max_entries == 10
    assert isinstance(e.inner, SentenceTransformerEmbedder) and (e.inner.exact, e.inner.batch_size) == (False, 8)
    default = build_embedder(cached=False)
    assert isinstance(default, OnnxEmbedder) and default.backend == "onnx" and not default.quantized
    assert default.exact  # embedding.exact is on by default
    assert type(build_embedder(EmbeddingConfig(backend="torch"), cached=False)) is SentenceTransformerEmbedder
