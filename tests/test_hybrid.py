"""Lexical (BM25) and hybrid relevance: the index, the scoring, the engine, the trace, rescore and inspect."""

import math

import bm25s
import numpy as np
import pytest

from simulacra.config import MemoryConfig, load_config
from simulacra.errors import SimulacraError
from simulacra.explain import explain_tick, format_explanation
from simulacra.memory.lexical import TOKEN_PATTERN, LexicalIndex, query_terms, relevance_over, tokenize
from simulacra.memory.records import MemoryRecord, memory_id
from simulacra.memory.scoring import ScoringParams, fuse_relevance
from simulacra.memory.selection import RetrievalRule, rank
from simulacra.memory.stream import AgentMemory
from simulacra.rescore import rerank, rescore_run
from simulacra.trace import read_trace
from tests.conftest import unit
from tests.test_rescore import FROZEN, take_back_writes_after_retrieval, tiny_run

DIM = 8


def rec(text, ts, rating=5):
    return MemoryRecord(id=memory_id("ann", ts, text), text=text, kind="observation", rating=rating,
                        timestamp=float(ts), tick=int(ts // 10))


def make(tmp_path, name="ann", **cfg):
    return AgentMemory(name, tmp_path / name, MemoryConfig(short_term_min_entries=10**6, **cfg), DIM)


def bm25_by_hand(texts, query, k1=1.5, b=0.75):
    """Lucene BM25 written out (module docstring of simulacra.memory.lexical), for comparison."""
    docs = tokenize(texts)
    n = len(docs)
    avgdl = sum(len(d) for d in docs) / n
    out = np.zeros(n)
    for t in query_terms(query):
        df = sum(t in d for d in docs)
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for i, d in enumerate(docs):
            tf = d.count(t)
            out[i] += idf * tf / (tf + k1 * (1 - b + b * len(d) / avgdl))
    return out


TEXTS = ["Klaus repaired the blue kettle in the kitchen", "Maria walked through the park with her dog",
         "the kettle whistled while Isabella read the paper", "Tom bought bread and cheese at the market",
         "Maria and Tom talked about the election in the park", "the market opens at eight on Saturday"]


# ----------------------------------------------------------------- the index
def test_bm25_matches_the_formula_written_out():
    idx = LexicalIndex()
    idx.append(TEXTS)
    for query in ("blue kettle", "Maria park", "market Saturday bread", "nothing matches zebra"):
        assert idx.bm25(query) == pytest.approx(bm25_by_hand(TEXTS, query), rel=1e-5, abs=1e-6)
    rel = idx.relevance("blue kettle")
    assert rel.max() == 1.0 and rel[0] == 1.0 and rel[2] > 0 and rel[1] == 0.0
    assert not idx.relevance("zebra").any()  # no query word in the tier: all 0, not NaN


def test_incremental_add_delete_and_overwrite_equal_a_fresh_index():
    idx = LexicalIndex()
    idx.append(TEXTS[:2])
    idx.relevance("kettle park")  # built once, then written to: the next query must not use the stale matrix
    idx.append(TEXTS[2:])
    idx.set_row(1, "Maria fed the ducks by the kettle pond")
    idx.keep(np.array([True, True, False, True, True, False]))
    texts = [TEXTS[0], "Maria fed the ducks by the kettle pond", TEXTS[3], TEXTS[4]]
    fresh = LexicalIndex()
    fresh.append(texts)
    reference = bm25s.BM25(method="lucene")
    reference.index(tokenize(texts), show_progress=False)
    for query in ("kettle park", "Maria Tom", "bread market"):
        assert np.array_equal(idx.bm25(query), fresh.bm25(query))
        assert idx.bm25(query) == pytest.approx(bm25_by_hand(texts, query), rel=1e-5)
        assert idx.bm25(query) == pytest.approx(reference.get_scores(query_terms(query)), rel=1e-6)
    indexed = idx.indexed
    idx.append(["a new kettle"])
    idx.relevance("another query")
    idx.bm25("kettle")
    assert idx.indexed == indexed + 1  # incremental: only the new memory was tokenised and indexed


def test_incremental_bm25_stays_exact_over_random_writes():
    """Hundreds of random appends, rewrites and forgets (enough to compact the slots and the postings): after
    each batch the scores are bit for bit those of an index built from scratch over the current texts, and
    bm25s's to float32 precision."""
    from bench.data import town_memories

    rng = np.random.default_rng(7)
    pool = town_memories(400, seed=5) + ["the and of it", "bakery bakery bakery bread"]
    idx, texts = LexicalIndex(), []
    idx.compact_min = 8  # renumber the slots often
    queries = ["Hana baking bread at the bakery", "storm by the river", "mill wheel", "zebra"]
    for step in range(60):
        add = [pool[int(i)] for i in rng.integers(len(pool), size=int(rng.integers(0, 12)))]
        idx.append(add)
        texts += add
        if texts and rng.random() < 0.5:
            row = int(rng.integers(len(texts)))
            texts[row] = pool[int(rng.integers(len(pool)))] + " again"
            idx.set_row(row, texts[row])
        if texts and rng.random() < 0.6:
            mask = rng.random(len(texts)) > 0.3
            idx.keep(mask)
            texts = [t for t, k in zip(texts, mask) if k]
        if step % 3 == 0 or step == 59:
            fresh = LexicalIndex()
            fresh.append(texts)
            for q in queries:
                assert np.array_equal(idx.bm25(q), fresh.bm25(q)), (step, q)
            if texts:
                ref = bm25s.BM25(method="lucene")
                ref.index(tokenize(texts), show_progress=False)
                got = idx.bm25(queries[0])
                assert got == pytest.approx(ref.get_scores(query_terms(queries[0])), rel=1e-5, abs=1e-5)
    assert idx.compactions > 0
    assert idx.indexed < 2 * len(pool) * 3  # never re-tokenised everything on each query


def test_tier_writes_keep_lexical_scores_equal_to_a_fresh_index(tmp_path):
    mem = make(tmp_path)
    mem.add([rec(t, 10 * i) for i, t in enumerate(TEXTS)], np.stack([unit(1, i) for i in range(len(TEXTS))]))
    st = mem.short_term
    st.lexical_relevance("kettle")
    st.delete([st.records[2].id, st.records[4].id])
    mem.add([rec("a kettle of fish at the market", 100)], unit(0, 1)[None])
    fresh = LexicalIndex()
    fresh.append([r.text for r in st.records])
    for query in ("kettle market", "Maria park", "bread"):
        assert np.array_equal(st.lexical_relevance(query), fresh.relevance(query))
    # a resume puts the rows back in the checkpoint's order: the lexical index follows the rows
    st.reorder(list(reversed(st.ids)))
    fresh = LexicalIndex()
    fresh.append([r.text for r in st.records])
    for query in ("kettle market", "Maria park", "bread"):
        assert np.array_equal(st.lexical_relevance(query), fresh.relevance(query))


def test_indexes_taken_as_one_corpus_score_as_one_index_over_all_their_texts():
    rng = np.random.default_rng(7)
    words = "kettle park bread market Maria Tom Klaus paper dog election cheese pond".split()
    texts = [" ".join(rng.choice(words, size=rng.integers(1, 8))) for _ in range(40)]
    parts = [texts[:3], texts[3:30], [], texts[30:]]
    indexes = []
    for part in parts:
        idx = LexicalIndex()
        idx.append(part)
        indexes.append(idx)
    indexes[1].keep(np.arange(27) % 5 != 0)  # forgotten memories leave the corpus's statistics
    kept = texts[:3] + [t for i, t in enumerate(texts[3:30]) if i % 5] + texts[30:]
    whole = LexicalIndex()
    whole.append(kept)
    for query in ("Maria bought bread", "kettle", "pond election dog", "zebra"):
        got = np.concatenate(relevance_over(indexes, query))
        assert np.array_equal(got, whole.relevance(query))  # bit for bit
        assert got.max() in (0.0, 1.0)
    # one tier alone is a corpus of its own: its best match is 1.0 whatever the other parts hold
    assert indexes[0].relevance("Maria bought bread").max() == 1.0


# ----------------------------------------------------------------- scoring and retrieval
def test_bm25_ranks_an_exact_keyword_match_first_where_dense_does_not(tmp_path):
    mem = make(tmp_path, relevance="dense")
    q = unit(1, 0)
    mem.add([rec("Maria walked through the park", 0), rec("Klaus repaired the blue kettle", 10),
             rec("Tom read the paper", 20)],
            np.stack([unit(1, 0.2), unit(0.1, 1), unit(1, 0.6)]))
    rule = RetrievalRule("merged", 3, -math.inf)
    dense = mem.retrieve(q, 30, rule=rule, query_text="blue kettle")
    assert dense[0].text.startswith("Maria") and dense[-1].text.startswith("Klaus")
    assert dense[0].lexical is None and "lexical" not in dense[0].to_dict()  # dense traces stay as they were
    mem.config = mem.config.model_copy(update={"relevance": "lexical"})
    lexical = mem.retrieve(q, 30, rule=rule, query_text="blue kettle")
    assert lexical[0].text.startswith("Klaus") and lexical[0].lexical == 1.0 and lexical[0].relevance == 1.0
    assert lexical[0].dense == pytest.approx(dense[-1].relevance)  # explained with its dense relevance too
    d = lexical[0].to_dict()
    assert d["lexical"] == 1.0 and d["dense"] == pytest.approx(dense[-1].relevance, abs=1e-6)
    with pytest.raises(ValueError, match="query text"):
        mem.retrieve(q, 30)


def test_hybrid_weight_zero_is_dense_and_one_is_lexical(tmp_path):
    rng = np.random.default_rng(3)
    words = "kettle park bread market Maria Tom Klaus paper dog election cheese pond".split()
    texts = [" ".join(rng.choice(words, size=rng.integers(2, 7))) + f" note {i}" for i in range(300)]
    vecs = rng.normal(size=(300, DIM)).astype(np.float32)
    mem = make(tmp_path)
    mem.add([rec(t, i, int(rng.integers(1, 11))) for i, t in enumerate(texts)], vecs)
    query, qv, now = "Maria bought bread at the market", rng.normal(size=DIM).astype(np.float32), 400.0
    rule = RetrievalRule("merged", 10, -math.inf)

    def run(**cfg):
        mem.config = mem.config.model_copy(update=cfg)
        return mem.retrieve(qv, now, rule=rule, query_text=query)

    dense = run(relevance="dense")
    h0 = run(relevance="hybrid", hybrid_weight=0.0)
    assert [(m.id, m.score, m.relevance) for m in h0] == [(m.id, m.score, m.relevance) for m in dense]
    assert all(m.dense == m.relevance for m in h0)
    lexical = run(relevance="lexical")
    h1 = run(relevance="hybrid", hybrid_weight=1.0)
    assert [(m.id, m.score) for m in h1] == [(m.id, m.score) for m in lexical]
    half = run(relevance="hybrid", hybrid_weight=0.5)
    assert [m.id for m in half] not in ([m.id for m in dense], [m.id for m in lexical])
    for m in half:
        assert m.relevance == pytest.approx(0.5 * m.dense + 0.5 * m.lexical)
    # exact: the same top 10 as scoring every memory of the tier and ranking them
    terms = mem.short_term.score(qv, now, mem.params, query_text=query)
    best = rank(terms.score)[:10]
    assert [m.id for m in half] == [mem.short_term.records[i].id for i in best]
    assert np.array_equal(terms.relevance, fuse_relevance(terms.dense, terms.lexical, mem.params))


def test_an_agents_tiers_are_one_bm25_corpus_so_a_weak_short_term_match_does_not_outrank_the_past(tmp_path):
    """Stop 51's audit: divided by each tier's own best, the one weak match in a small short-term tier got lexical
    relevance 1.0, as much as the memory that answers, held in long-term memory."""
    rng = np.random.default_rng(5)
    mem = make(tmp_path, relevance="lexical", a_rec=0.0, a_imp=0.0)
    fillers = [f"{who} {did} at the {where}" for who in ("Ruth Calloway", "Ezra Pike", "Yusuf Demir")
               for did in ("swept the floor", "ate bread", "read a letter") for where in ("mill", "square", "pond")]
    past = ["Hana Novak talked with Bram Ostrowski about the storm at the forge", *fillers]
    vectors = rng.normal(size=(len(past), DIM)).astype(np.float32)
    mem.add_long_term([rec(t, 100 + i) for i, t in enumerate(past)], vectors, 400.0)
    now_seen = ["Kofi Mensah is talking with Bram Ostrowski", "the kettle boiled over"]
    mem.add([rec(t, 990 + i) for i, t in enumerate(now_seen)], rng.normal(size=(2, DIM)).astype(np.float32))
    query, qv = "When did Bram Ostrowski last talk with Hana Novak?", rng.normal(size=DIM).astype(np.float32)
    assert mem.short_term.lexical_relevance(query)[0] == 1.0  # the tier alone: Kofi's sight is its best match
    got = mem.retrieve(qv, 1000.0, top_k=3, query_text=query, threshold=-math.inf, mode="merged")
    assert got[0].text == past[0] and got[0].lexical == 1.0
    kofi = next(m for m in got if m.text == now_seen[0])
    assert kofi.lexical < 0.75  # divided by its own tier's best it was 1.0, level with the answer
    # the same number whichever tiers a retrieval asks, and the same in the trace's candidates
    alone = mem.retrieve(qv, 1000.0, top_k=3, query_text=query, tiers=("short_term",), threshold=-math.inf)
    assert alone[0].text == now_seen[0] and alone[0].lexical == kofi.lexical
    cands = {row[0]: row[1] for rows in mem.candidates(qv, 1000.0, 3, query_text=query).values() for row in rows}
    assert cands[kofi.id] == pytest.approx(kofi.lexical)
    # a write to one tier changes the others' relevance (one corpus): a better match now heard is the new best
    mem.add([rec("Bram Ostrowski will talk with Hana Novak again; Hana Novak and Bram Ostrowski last talked today",
                  995)], rng.normal(size=(1, DIM)).astype(np.float32))
    again = mem.retrieve(qv, 1000.0, top_k=3, query_text=query, threshold=-math.inf, mode="merged")
    assert again[0].tier == "short_term" and again[0].lexical == 1.0
    assert next(m for m in again if m.text == past[0]).lexical < 1.0


def test_the_memory_ablation_measures_lexical_relevance_over_the_static_tier_alone(tmp_path):
    """A static-only view (the ``memory`` ablation) must not be scored against the memories it cannot read: a
    short-term write did lower its static fact's lexical relevance (review of stop 52)."""
    from simulacra.evaluation.variants import StaticOnlyMemory

    rng = np.random.default_rng(9)
    mem = make(tmp_path, relevance="lexical", a_rec=0.0, a_imp=0.0)
    fact = MemoryRecord(id="s1", text="Ann Archer is the baker of the village", kind="persona")
    mem.set_static([fact], rng.normal(size=(1, DIM)).astype(np.float32))
    view = StaticOnlyMemory(mem)
    query, qv = "Who is the baker?", rng.normal(size=DIM).astype(np.float32)

    def ask():
        got = view.retrieve(qv, 100.0, top_k=1, query_text=query, threshold=-math.inf)
        record = view.retrieval_record(query, "focus", got, qv, 100.0)
        return got[0].lexical, record["candidates"]["static"][0][1]

    assert ask() == (1.0, 1.0)
    mem.add([rec("the baker baker shouted at the baker's boy", 50)], rng.normal(size=(1, DIM)).astype(np.float32))
    assert mem.retrieve(qv, 100.0, top_k=2, query_text=query, threshold=-math.inf)[0].tier == "short_term"
    assert ask() == (1.0, 1.0)  # the whole agent's corpus would give the fact less than 1
    assert mem.lexical_relevance(query)["static"][0] < 1.0


def test_relevance_settings_are_validated(tmp_path):
    with pytest.raises(SimulacraError, match="memory.relevance"):
        load_config(None, ["memory.relevance=bm25"])
    with pytest.raises(SimulacraError, match="memory.hybrid_weight"):
        load_config(None, ["memory.hybrid_weight=1.5"])
    assert load_config(None, ["memory.relevance=hybrid", "memory.hybrid_weight=0.3"]).memory.hybrid_weight == 0.3
    with pytest.raises(ValueError, match="unknown relevance"):
        ScoringParams(relevance="sparse")
    with pytest.raises(ValueError, match="hybrid_weight"):
        ScoringParams(relevance="hybrid", hybrid_weight=-0.1)
    p = ScoringParams.from_config({"a_rec": 0.5, "relevance": "hybrid", "hybrid_weight": 0.25})
    assert (p.relevance, p.hybrid_weight, p.a_rec) == ("hybrid", 0.25, 0.5)
    assert ScoringParams.from_config({"a_rec": 0.5}).relevance == "dense"  # traces written before the setting


# ----------------------------------------------------------------- trace, rescore, inspect
@pytest.mark.parametrize("weight", [0.5, 1.0])
def test_rescore_equals_live_retrieval_under_hybrid_relevance(tmp_path, rater_url, embedder, weight):
    extra = [*FROZEN, "memory.relevance=hybrid", f"memory.hybrid_weight={weight}"]
    with tiny_run(tmp_path, rater_url, embedder, f"hybrid-{weight}", extra) as sim:
        sim.run(8)
        assert rescore_run(sim.run_dir)["changed"] == 0  # own weights: the same
        _, ticks = read_trace(sim.run_dir)
        last = ticks[-1]
        ops = [op for op in last["memory"] if op["op"] == "retrieve"]
        assert ops and all(op["relevance"] == "hybrid" and op["hybrid_weight"] == weight for op in ops)
        assert all({"dense", "lexical"} <= set(r) for op in ops for r in op["results"])
        take_back_writes_after_retrieval(sim, last)
        changed = 0
        for a_rec, a_imp, a_rel, gamma in [(1, 1, 1, 0.995), (0, 1, 0.05, 0.995), (2, 0, 0.3, 0.5)]:
            params = ScoringParams(a_rec, a_imp, a_rel, gamma, relevance="hybrid", hybrid_weight=weight)
            for op in ops:
                memory = sim.memories[op["agent"]]
                memory.config = memory.config.model_copy(update={"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel,
                                                                  "gamma": gamma})
                live = memory.retrieve(embedder.embed([op["query"]])[0], last["time"], query_text=op["query"])
                again = rerank(op["candidates"], op["tiers"], RetrievalRule.from_record(op), params)
                assert [x[0] for x in again] == [r.id for r in live]
                assert [x[2] for x in again] == pytest.approx([r.score for r in live], abs=1e-6)
                changed += [x[0] for x in again] != [r["id"] for r in op["results"]]
        assert changed
    agent = ops[0]["agent"]
    shown = format_explanation(explain_tick(sim.run_dir, agent, last["tick"]))
    assert "dense  lexical" in shown


def test_tokenize_remembers_texts_without_sharing_its_lists():
    """Each distinct text is tokenised once per process; what :func:`tokenize` returns is the caller's to change."""
    import bm25s

    oven = "The baker lights the brick oven at dawn."
    texts = [oven, "Ruth mends the nets.", oven]
    want = bm25s.tokenize(texts, stopwords="en", return_ids=False, show_progress=False, token_pattern=TOKEN_PATTERN)
    got = tokenize(texts)
    assert got == [list(w) for w in want]
    got[0].append("changed")
    assert tokenize(texts[:1]) == [list(want[0])]


def test_a_single_digit_is_a_word_so_day_4_is_not_day_5():
    """bm25s's default pattern drops one-character tokens; simulacra keeps single digits, so a question about day 4
    finds day 4's plan first among thirty days' plans (docs/memory.md, "Long horizons")."""
    assert tokenize(["Ann's plan for day 4 (Tuesday): 06:30 a 12"]) == [
        ["ann", "plan", "day", "4", "tuesday", "06", "30", "12"]]
    index = LexicalIndex()
    texts = [f"Ann Archer's plan for day {d}: mending nets at the harbour." for d in range(1, 31)]
    index.append(texts)
    rel = index.bm25("Ann Archer's plan for day 4")
    assert int(np.argmax(rel)) == 3 and sorted(rel)[-2] < rel[3]
