"""The memory tiers on real persistent Chroma stores: ids, cascade, consolidation, decay, persistence."""

import math

import numpy as np
import pytest

from simulacra.config import MemoryConfig
from simulacra.errors import SimulacraError
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.stream import AgentMemory, open_chroma
from tests.conftest import unit

DIM = 8


def rec(agent, text, ts, rating, kind="observation"):
    return MemoryRecord(id=memory_id(agent, ts, text), text=text, kind=kind, rating=rating, timestamp=float(ts),
                        tick=int(ts // 10))


def make(tmp_path, write_behind=False, **cfg):
    """Ann's memory; ``write_behind`` as a running simulation's stores (Chroma written at :meth:`AgentMemory.flush`,
    deletes kept restorable until a flush with deletes)."""
    return AgentMemory("ann", tmp_path / "ann", MemoryConfig(**{"relevance": "dense", **cfg}), DIM,
                       write_behind=write_behind)


def test_ids_are_deterministic_and_distinct():
    assert memory_id("ann", 600, "x") == memory_id("ann", 600, "x")
    assert len({memory_id("ann", 600, "x"), memory_id("ann", 610, "x"), memory_id("ben", 600, "x"),
                memory_id("ann", 600, "y")}) == 4


def test_readding_an_event_overwrites_instead_of_duplicating(tmp_path):
    mem = make(tmp_path)
    r = rec("ann", "The well rope snaps.", 480, 7)
    mem.add([r], unit(1)[None])
    mem.add([rec("ann", "The well rope snaps.", 480, 7)], unit(1)[None])
    assert len(mem.short_term) == 1
    assert mem.short_term.collection.count() == 1
    mem.add([rec("ann", "The well rope snaps.", 490, 7)], unit(1)[None])  # same text, later: a new memory
    assert len(mem.short_term) == 2


def test_mirror_distances_equal_chroma_distances(tmp_path):
    mem = make(tmp_path)
    rng = np.random.default_rng(3)
    vecs = rng.normal(size=(20, DIM)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    recs = [rec("ann", f"memory {i}", 100 + i, 5) for i in range(20)]
    mem.add(recs, vecs)
    q = unit(1, 2, 3)
    got = mem.short_term.collection.query(query_embeddings=q[None], n_results=20, include=["distances"])
    chroma = dict(zip(got["ids"][0], got["distances"][0]))
    mine = dict(zip([r.id for r in mem.short_term.records], mem.short_term.distances(q)))
    for k, d in chroma.items():
        assert mine[k] == pytest.approx(d, abs=1e-5)


def test_cascade_stops_at_static_when_top_k_found(tmp_path):
    mem = make(tmp_path, top_k=2, retrieval="cascade")
    statics = [MemoryRecord(id=f"s{i}", text=f"static {i}", kind="persona") for i in range(3)]
    mem.set_static(statics, np.stack([unit(1), unit(1, 0.1), unit(0, 1)]))
    mem.add([rec("ann", "short", 0, 10)], unit(1)[None])  # would score higher (recency + importance)
    found = mem.retrieve(unit(1), now=10)
    assert [m.tier for m in found] == ["static", "static"]
    assert [m.id for m in found] == ["s0", "s1"]
    assert found[0].recency is None and found[0].importance is None
    assert found[0].score == pytest.approx(1.0)  # relevance 1/(1+0)


def test_cascade_falls_through_tiers_and_applies_threshold(tmp_path):
    mem = make(tmp_path, top_k=3, threshold=0.6, retrieval="cascade")
    mem.set_static([MemoryRecord(id="s0", text="static", kind="persona")], unit(1)[None])
    mem.add([rec("ann", "near", 0, 10), rec("ann", "far", 0, 1)], np.stack([unit(0, 1), unit(0, 0, 1)]))
    q = unit(1, 1)
    found = mem.retrieve(q, now=10)
    # static: distance 2-2cos45 = 0.586 -> relevance 0.63 >= 0.6; "near" the same relevance + 0.25 + 0.25;
    # "far": distance 2 -> relevance 1/3 + 0.25 + 0.025 = 0.608 >= 0.6
    assert [m.text for m in found] == ["static", "near", "far"]
    assert found[1].score == pytest.approx(1 / (1 + (2 - math.sqrt(2))) + 0.5, abs=1e-5)
    strict = mem.retrieve(q, now=10, threshold=0.7)
    assert [m.text for m in strict] == ["near"]  # static 0.63 and far 0.608 fall under 0.7


def test_long_term_is_consulted_last(tmp_path):
    mem = make(tmp_path, top_k=2, threshold=0.0, retrieval="cascade")
    mem.add([rec("ann", f"m{i}", i, 8) for i in range(5)], np.stack([unit(1, i) for i in range(5)]))
    mem.consolidate(now=200, force=True)  # all old enough -> long-term (importance 0.8 > 0.5)
    assert mem.counts() == {"static": 0, "short_term": 0, "long_term": 5}
    mem.add([rec("ann", "fresh", 200, 2)], unit(0, 0, 1)[None])
    found = mem.retrieve(unit(1), now=210)
    assert [m.tier for m in found] == ["short_term", "long_term"]


def test_consolidation_moves_important_and_forgets_the_rest(tmp_path):
    mem = make(tmp_path, consolidation_age_minutes=60, consolidation_interval_minutes=60)
    recs = [rec("ann", "poignant old", 0, 9), rec("ann", "mundane old", 0, 5), rec("ann", "borderline", 0, 6),
            rec("ann", "recent", 100, 9)]
    mem.add(recs, np.stack([unit(1, i) for i in range(4)]))
    assert mem.consolidate(now=30) == []  # first call sets the clock; nothing is old enough
    assert mem.consolidate(now=60) == []  # interval not elapsed since 30
    ops = mem.consolidate(now=120)
    moved = {o["text"] for o in ops if o["op"] == "move"}
    forgotten = {o["text"] for o in ops if o["op"] == "forget"}
    assert moved == {"poignant old", "borderline"}  # 0.9 and 0.6 > 0.5
    assert forgotten == {"mundane old"}  # 0.5 is not > 0.5
    assert [r.text for r in mem.short_term.records] == ["recent"]
    assert sorted(r.text for r in mem.long_term.records) == ["borderline", "poignant old"]
    assert all(r.long_term_since == 120 for r in mem.long_term.records)
    assert mem.long_term.collection.count() == 2 and mem.short_term.collection.count() == 1


def test_consolidation_waits_for_more_than_three_entries(tmp_path):
    mem = make(tmp_path)
    mem.add([rec("ann", f"m{i}", 0, 9) for i in range(3)], np.stack([unit(1, i) for i in range(3)]))
    assert mem.consolidate(now=500, force=True) == []
    assert len(mem.short_term) == 3


def test_long_term_importance_decays_and_is_forgotten_under_the_floor(tmp_path):
    mem = make(tmp_path, long_term_decay_per_hour=0.5, decay_importance_exponent=0, forget_floor=0.2,
               short_term_min_entries=0)  # plain decay: every rating loses half per hour
    mem.add([rec("ann", "strong", 0, 10), rec("ann", "weak", 0, 6)], np.stack([unit(1), unit(0, 1)]))
    mem.consolidate(now=60, force=True)
    found = {m.text: m for m in mem.retrieve(unit(1, 1), now=120, threshold=0.0, tiers=("long_term",))}
    assert found["strong"].importance == pytest.approx(1.0 * 0.5)  # one game hour in long-term
    assert found["weak"].importance == pytest.approx(0.6 * 0.5)
    ops = mem.forget_decayed(now=180)  # two hours: strong 0.25 stays, weak 0.15 < 0.2 goes
    assert [(o["op"], o["text"]) for o in ops] == [("forget", "weak")]
    assert [r.text for r in mem.long_term.records] == ["strong"]


def test_forgetting_can_be_disabled(tmp_path):
    mem = make(tmp_path, long_term_decay_per_hour=0.1, forget_floor=None, short_term_min_entries=0)
    mem.add([rec("ann", "x", 0, 6)], unit(1)[None])
    mem.consolidate(now=60, force=True)
    assert mem.forget_decayed(now=10_000) == [] and len(mem.long_term) == 1


def test_retrieval_does_not_write_and_access_marks_are_explicit(tmp_path):
    mem = make(tmp_path, recency_from="last_access", top_k=1, threshold=0.0)
    mem.add([rec("ann", "old", 0, 5)], unit(1)[None])
    first = mem.retrieve(unit(1), now=600)
    assert first[0].recency == pytest.approx(mem.config.gamma**10)
    again = mem.retrieve(unit(1), now=600)
    assert again[0].recency == first[0].recency  # reading changed nothing
    mem.mark_accessed([first[0].id], now=590)
    assert mem.retrieve(unit(1), now=600)[0].recency == 1.0  # accessed 10 minutes ago


def test_a_reopened_store_sees_exactly_what_was_persisted(tmp_path):
    mem = make(tmp_path)
    mem.add([rec("ann", f"m{i}", i, 3 + i) for i in range(6)], np.stack([unit(1, i) for i in range(6)]))
    mem.consolidate(now=100, force=True)
    before = {n: sorted(r.id for r in t.records) for n, t in mem.tiers.items()}
    q = unit(1, 2)
    ranked = [m.id for m in mem.retrieve(q, now=120, threshold=0.0, top_k=6, tiers=("long_term",))]
    reopened = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense"), DIM,
                           client=open_chroma(tmp_path / "ann"))
    assert {n: sorted(r.id for r in t.records) for n, t in reopened.tiers.items()} == before
    assert [m.id for m in reopened.retrieve(q, now=120, threshold=0.0, top_k=6, tiers=("long_term",))] == ranked


def test_most_important_uses_decayed_importance(tmp_path):
    mem = make(tmp_path, long_term_decay_per_hour=0.5, decay_importance_exponent=0, short_term_min_entries=0,
               forget_floor=None)
    mem.add([rec("ann", "old nine", 0, 9)], unit(1)[None])
    mem.consolidate(now=60, force=True)
    mem.add([rec("ann", "new seven", 100, 7)], unit(0, 1)[None])
    mem.consolidate(now=180, force=True)
    top = mem.most_important(now=180, n=2)
    assert [(r.text, round(i, 3)) for r, i in top] == [("new seven", 0.7), ("old nine", 0.225)]


def test_access_marks_reach_every_tier_even_from_a_generator(tmp_path):
    mem = make(tmp_path, recency_from="last_access", short_term_min_entries=0, threshold=0.0)
    mem.add([rec("ann", "kept", 0, 9)], unit(1)[None])
    mem.consolidate(now=60, force=True)
    mem.add([rec("ann", "fresh", 60, 2)], unit(0, 1)[None])
    ids = [r.id for t in (mem.short_term, mem.long_term) for r in t.records]
    mem.mark_accessed((i for i in ids), now=590)
    assert all(r.last_accessed == 590 for t in (mem.short_term, mem.long_term) for r in t.records)
    assert {m.text: m.recency for m in mem.retrieve(unit(1, 1), now=600, tiers=("short_term", "long_term"))} == {
        "kept": 1.0, "fresh": 1.0}


@pytest.mark.parametrize("field, value", [("kind", "obsrvation"), ("kind", ""), ("kind", None),
                                          ("text", None), ("text", "  "), ("rating", "7"), ("rating", 11),
                                          ("rating", 0), ("rating", 5.5), ("rating", True),
                                          ("timestamp", float("nan")), ("timestamp", float("inf")),
                                          ("long_term_since", "noon")])
def test_a_record_no_store_can_hold_is_refused_when_made_and_loses_nothing(tmp_path, field, value):
    """A bad record is a MemoryRecordError naming its field before any store sees it; the memories written before
    and after it are all in the store a fresh client opens (a bad rating used to poison the tier's pending writes:
    the mirror kept it, every later Chroma write failed, and a reopened store held only the first memory)."""
    from simulacra.errors import MemoryRecordError

    mem = make(tmp_path)
    mem.add([rec("ann", "The mill wheel cracked.", 100, 6)], unit(1)[None])
    kw = {"id": "bad", "text": "Bram is mending it.", "kind": "observation", "rating": 7, "timestamp": 110.0,
          field: value}
    with pytest.raises(MemoryRecordError, match=field):
        MemoryRecord(**kw)
    mem.add([rec("ann", "The ferry was late.", 120, 4)], unit(1, 1)[None])
    reopened = AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense"), DIM,
                           client=open_chroma(tmp_path / "ann"))
    assert sorted(r.text for r in reopened.short_term.records) == ["The ferry was late.", "The mill wheel cracked."]


def test_a_retrieval_or_write_the_store_cannot_score_is_named(tmp_path):
    """An embedding of another size, a game time that is not a number, a top_k of 2.5: a ValueError naming the
    argument, not numpy's reshape or matmul error from inside; nothing is written."""
    mem = make(tmp_path)
    mem.add([rec("ann", "The mill wheel cracked.", 100, 6)], unit(1)[None])
    q = unit(1)
    for kw, words in ((dict(query_embedding=np.ones(DIM + 2)), r"query_embedding: expected a vector of shape \(8,\)"),
                      (dict(now=None), "now: expected the game minute"), (dict(now=float("nan")), "now:"),
                      (dict(top_k=2.5), "top_k: expected a whole number"), (dict(top_k=0), "top_k:")):
        args = {"query_embedding": q, "now": 200, **kw}
        with pytest.raises(ValueError, match=words):
            mem.retrieve(**args)
    with pytest.raises(ValueError, match=r"embeddings of shape \(1, 8\)"):
        mem.add([rec("ann", "The ferry was late.", 120, 4)], np.ones((1, DIM + 2)))
    assert [r.text for r in mem.short_term.records] == ["The mill wheel cracked."]
    assert [m.text for m in mem.retrieve(q, now=200, top_k=3)] == ["The mill wheel cracked."]


def test_a_retrieval_that_could_only_answer_nothing_or_fail_inside_is_named(tmp_path):
    """A nan query embedding or threshold silently returned []; a query_text or threshold of the wrong type failed
    inside the tokenizer or numpy; a blank query_text under hybrid relevance was taken, and the error for a missing
    one did not name the argument."""
    mem = make(tmp_path, relevance="hybrid")
    mem.add([rec("ann", "The mill wheel cracked.", 100, 6)], unit(1)[None])
    q = unit(1)
    for kw, error, words in ((dict(query_embedding=np.full(DIM, np.nan)), ValueError, "query_embedding: expected "
                              "finite"),
                             (dict(query_embedding=np.array(["x"] * DIM)), ValueError, "query_embedding: expected "
                              "finite"),
                             (dict(query_text=5), TypeError, "query_text: expected the query's text"),
                             (dict(query_text="   "), ValueError, "query_text: hybrid relevance"),
                             (dict(query_text=None), ValueError, "query_text: hybrid relevance"),
                             (dict(threshold=float("nan")), ValueError, "threshold: expected a finite number"),
                             (dict(threshold="high"), TypeError, "threshold: expected a number")):
        args = {"query_embedding": q, "now": 200, "query_text": "mill wheel", **kw}
        with pytest.raises(error, match=words):
            mem.retrieve(**args)
    with pytest.raises(ValueError, match="query_text: hybrid relevance"):
        mem.candidates(q, 200, query_text="")
    assert [m.text for m in mem.retrieve(q, 200, query_text="mill wheel", threshold=float("-inf"))] == [
        "The mill wheel cracked."]
    assert make(tmp_path / "dense").retrieve(q, 200, query_text="  ") == []  # dense relevance needs no text


def test_a_write_or_call_with_bad_arguments_fails_before_it_changes_anything(tmp_path):
    """add with fewer embeddings than records raised IndexError after it had counted their ratings towards the
    next reflection; consolidate("700") stored a str that failed the next call; most_important(-1) dropped the last
    memory; mark_accessed of one id str marked its characters."""
    mem = make(tmp_path)
    first = rec("ann", "The mill wheel cracked.", 100, 6)
    mem.add([first], unit(1)[None])
    three = [rec("ann", f"memory {i}", 110 + i, 5) for i in range(3)]
    for emb in (unit(1)[None], np.stack([unit(1)] * 4), unit(1), np.ones((3, DIM + 1))):
        with pytest.raises(ValueError, match=r"embeddings: 3 memories need embeddings of shape \(3, 8\)"):
            mem.add(three, emb)
    with pytest.raises(ValueError, match="memory ids given more than once"):
        mem.add([three[0], three[0]], np.stack([unit(1)] * 2))
    assert mem.importance_since_reflection == 6 and mem.short_term.ids == [first.id]
    with pytest.raises(ValueError, match="now: expected the game minute.*'700'"):
        mem.consolidate("700")
    assert mem.last_consolidation is None
    mem.consolidate(700)
    assert mem.last_consolidation == 700
    for n, error in ((-1, ValueError), ("3", TypeError), (1.5, TypeError)):
        with pytest.raises(error, match="n: expected how many memories, an integer >= 0"):
            mem.most_important(800, n, tiers=("short_term",))
    assert mem.most_important(800, 0, tiers=("short_term",)) == []
    with pytest.raises(TypeError, match="ids: expected an iterable of memory ids"):
        mem.mark_accessed(first.id, 800)
    with pytest.raises(ValueError, match="now:"):
        mem.mark_accessed([first.id], "800")
    assert mem.short_term.get(first.id).last_accessed is None


@pytest.mark.parametrize("config, dim, error, words", [
    ({"top_k": 3}, DIM, TypeError, "config: expected a MemoryConfig"),
    (None, "384", TypeError, "dim: expected the embedding dimension, an integer"),
    (None, 8.0, TypeError, "dim: expected"),
    (None, 0, ValueError, "dim: expected the embedding dimension, an integer >= 1"),
])
def test_a_memory_made_with_a_wrong_config_or_dimension_says_so(tmp_path, config, dim, error, words):
    with pytest.raises(error, match=words):
        AgentMemory("ann", tmp_path / "ann", MemoryConfig() if config is None else config, dim)
    assert not (tmp_path / "ann").exists()  # refused before a store was opened


def test_a_store_opened_with_an_embedder_of_another_size_says_so(tmp_path):
    mem = make(tmp_path)
    mem.add([rec("ann", "The mill wheel cracked.", 100, 6)], unit(1)[None])
    with pytest.raises(SimulacraError, match="embeddings of 8 dimensions, the embedder given makes 12"):
        AgentMemory("ann", tmp_path / "ann", MemoryConfig(relevance="dense"), 12, client=open_chroma(tmp_path / "ann"))


def test_a_store_path_that_is_a_file_is_named(tmp_path):
    """A store's folder, or a folder above it, that is a file: a SimulacraError naming the file, not Chroma's or
    pathlib's FileExistsError, and the file is left as it was."""
    taken = tmp_path / "notes.txt"
    taken.write_text("mine", encoding="utf-8")
    for path in (taken, taken / "ann"):
        with pytest.raises(SimulacraError, match=f"{path}: cannot hold a memory store: {taken} is a file"):
            AgentMemory("ann", path, MemoryConfig(relevance="dense"), DIM)
    assert taken.read_text(encoding="utf-8") == "mine"


def test_an_unknown_profile_or_tier_is_a_simulacra_error_and_still_a_key_error(tmp_path):
    from simulacra.errors import UnknownNameError

    mem = make(tmp_path)
    mem.add([rec("ann", "The mill wheel cracked.", 100, 6)], unit(1)[None])
    for kw, words in ((dict(profile="nope"), "unknown retrieval profile 'nope'"),
                      (dict(tiers=["nope"]), "ann: no memory tier 'nope' \\(tiers: static, short_term, long_term\\)"),
                      (dict(tiers=["shared"]), "no memory tier 'shared'")):
        with pytest.raises(UnknownNameError, match=words) as err:
            mem.retrieve(unit(1), now=200, **kw)
        assert isinstance(err.value, SimulacraError) and isinstance(err.value, KeyError)
        assert not str(err.value).startswith(('"', "'"))  # the message, not KeyError's quoted repr
