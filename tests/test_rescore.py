"""`simulacra rescore` and `simulacra inspect`: exact re-ranking from the trace, and a tick reconstructed."""

import json
import math
import re

import pytest

from simulacra.config import load_config
from simulacra.errors import SimulacraError
from simulacra.explain import explain_tick, format_explanation
from simulacra.memory.scoring import ScoringParams
from simulacra.memory.selection import RetrievalRule
from simulacra.rescore import rerank, rescore_run
from simulacra.simulation import Simulation, static_records
from simulacra.trace import read_trace
from tests.conftest import DATA

FROZEN = ["memory.short_term_min_entries=1000000", "memory.forget_floor=null", "reflection.enabled=false"]


def tiny_run(tmp_path, rater_url, embedder, name, extra=()):
    config = load_config(None, [f"rater.url={rater_url}", "simulation.conversation_probability=1.0",
                                "simulation.news_min_rating=1", *extra])
    return Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                             run_name=name, embedder=embedder)


def take_back_writes_after_retrieval(sim, tick: dict) -> None:
    """A tick retrieves between its two writes (percepts before; plans and speech after): delete the memories the
    tick added after its first retrieval, so that the stores are as its retrievals saw them."""
    first = next(i for i, op in enumerate(tick["memory"]) if op["op"] == "retrieve")
    for op in tick["memory"][first:]:
        if op["op"] == "add":
            sim.memories[op["agent"]].tiers[op["tier"]].delete([op["id"]])


@pytest.mark.parametrize("mode", ["cascade", "merged"])
def test_the_runs_own_weights_reproduce_every_recorded_retrieval(tmp_path, rater_url, embedder, mode):
    with tiny_run(tmp_path, rater_url, embedder, mode, [f"memory.retrieval={mode}"]) as sim:
        sim.run(10)
    m = sim.config.memory
    report = rescore_run(sim.run_dir)  # each retrieval under its own profile
    assert report["retrievals"] > 30 and report["rescored"] == report["retrievals"]
    assert report["changed"] == 0
    # the retrievals of each profile, re-ranked with that profile's weights given explicitly, stay the same; with
    # the other profile's weights some change
    profiles = report["run_profiles"]
    assert set(profiles) == {"situational", "recall"}
    assert sum(p["retrievals"] for p in profiles.values()) == report["retrievals"]
    for name, other in (("situational", "recall"), ("recall", "situational")):
        own = rescore_run(sim.run_dir, *m.weights(name), profile=name)
        assert own["retrievals"] == profiles[name]["retrievals"] and own["changed"] == 0
        assert rescore_run(sim.run_dir, *m.weights(other), profile=name)["changed"] > 0
    # candidates are recorded for max_top_k (default twice top_k): top_k can rise that far and no further
    deeper = rescore_run(sim.run_dir, top_k=2 * m.top_k)
    assert deeper["rescored"] == report["retrievals"] and deeper["changed"] > 0
    with pytest.raises(SimulacraError, match=f"at most top_k {2 * m.top_k} "):
        rescore_run(sim.run_dir, top_k=2 * m.top_k + 1)  # not "re-scored 0 of N"
    # relevance only brings static memories (persona facts, world rules) no result of the run returned: their
    # texts are rebuilt from the header's personas and world, never shown as bare ids
    relevance = rescore_run(sim.run_dir, 0, 0, 1, threshold=0)
    added = [(c["agent"], text) for c in relevance["changes"] for text in c["added"]]
    world = sim.world
    static = {(pid, r.text) for pid, persona in world.personas.items() for r in static_records(pid, persona, world)}
    assert set(added) & static and not [text for _, text in added if re.fullmatch(r"[0-9a-f]{24}|\(.*\)", text)]


@pytest.mark.parametrize("mode", ["cascade", "merged"])
def test_rescoring_equals_retrieving_live_under_the_other_weights(tmp_path, rater_url, embedder, mode):
    """On stores frozen after the last tick's retrievals, re-ranking the trace's candidates under other weights
    gives exactly what the engine retrieves under those weights."""
    with tiny_run(tmp_path, rater_url, embedder, f"live-{mode}", [*FROZEN, f"memory.retrieval={mode}"]) as sim:
        sim.run(10)
        _, ticks = read_trace(sim.run_dir)
        last = ticks[-1]
        ops = [op for op in last["memory"] if op["op"] == "retrieve"]
        assert ops
        take_back_writes_after_retrieval(sim, last)
        changed = 0
        for a_rec, a_imp, a_rel, gamma in [(1, 1, 1, 0.995), (0, 1, 0.05, 0.995), (2, 0, 0.3, 0.5), (0, 0, 1, 1)]:
            for op in ops:
                memory = sim.memories[op["agent"]]
                memory.config = memory.config.model_copy(update={"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel,
                                                                  "gamma": gamma})
                params = ScoringParams.from_config(memory.config)  # the shipped relevance (hybrid) with these weights
                live = memory.retrieve(embedder.embed([op["query"]])[0], last["time"], query_text=op["query"])
                again = rerank(op["candidates"], op["tiers"], RetrievalRule.from_record(op), params)
                assert [x[0] for x in again] == [r.id for r in live]
                assert [x[2] for x in again] == pytest.approx([r.score for r in live], abs=1e-6)  # float32 dots
                changed += [x[0] for x in again] != [r["id"] for r in op["results"]]
        assert changed  # the other weights do change some results


@pytest.mark.parametrize("mode", ["cascade", "merged"])
def test_retrieval_record_lets_rescore_change_top_k_and_static_budget_up_to_max_top_k(tmp_path, rater_url,
                                                                                      embedder, mode):
    """AgentMemory.retrieval_record records the rule and candidates for max_top_k; re-ranking them under another
    rule (top_k up to max_top_k, a static budget, the other mode) and other weights gives exactly what the
    engine retrieves live under that rule and those weights."""
    extra = [*FROZEN, f"memory.retrieval={mode}", "memory.top_k=3", "memory.max_top_k=6"]
    with tiny_run(tmp_path, rater_url, embedder, f"deep-{mode}", extra) as sim:
        sim.run(10)
        _, ticks = read_trace(sim.run_dir)
        last = ticks[-1]
        ops = [op for op in last["memory"] if op["op"] == "retrieve"]
        assert ops
        take_back_writes_after_retrieval(sim, last)
        other = "merged" if mode == "cascade" else "cascade"
        rules = [RetrievalRule(mode, 6, 0.35), RetrievalRule(mode, 1, 0.0, static_top_k=2, static_threshold=0.5),
                 RetrievalRule(other, 5, 0.6, static_top_k=6), RetrievalRule(other, 4, 0.35)]
        changed = 0
        for op in ops:
            memory = sim.memories[op["agent"]]
            run_config = memory.config
            q = embedder.embed([op["query"]])[0]
            found = memory.retrieve(q, last["time"], query_text=op["query"])
            record = memory.retrieval_record(op["query"], op["purpose"], found, q, last["time"])
            assert record["results"] == op["results"] and record["candidates"] == op["candidates"]
            assert (record["max_top_k"], record["top_k"], record["mode"], record["static_top_k"]) == (6, 3, mode, None)
            assert record["tiers"] == op["tiers"] and record["agent"] == op["agent"]
            for a_rec, a_imp, a_rel, gamma in [(0.25, 0.25, 1, 0.995), (1, 1, 1, 0.9), (0, 1, 0.05, 0.995)]:
                memory.config = run_config.model_copy(update={"a_rec": a_rec, "a_imp": a_imp, "a_rel": a_rel,
                                                              "gamma": gamma})
                params = ScoringParams.from_config(memory.config)
                for rule in rules:
                    live = memory.retrieve(q, last["time"], rule=rule, query_text=op["query"])
                    again = rerank(record["candidates"], record["tiers"], rule, params)
                    assert [x[0] for x in again] == [r.id for r in live], (rule, params)
                    assert [x[2] for x in again] == pytest.approx([r.score for r in live], abs=1e-6)
                    changed += [x[0] for x in again] != [r["id"] for r in op["results"]]
            memory.config = run_config
        assert changed  # the other rules and weights do change results


def hand_made_trace(path):
    """One agent, one tick, one cascade retrieval over two tiers with known candidates."""
    header = {"type": "header", "schema_version": 2, "agents": ["ann"], "personas": {"ann": {"name": "Ann Archer"}},
              "config": {"memory": {"a_rec": 0.25, "a_imp": 0.25, "a_rel": 1.0, "gamma": 0.5,
                                    "recency_window_minutes": 60, "long_term_decay_per_hour": 0.99}}}
    cands = {"static": [["s1", 0.5, None, None], ["s2", 0.3, None, None]],
             "short_term": [["old", 0.6, 1.0, 180.0], ["new", 0.4, 0.2, 0.0], ["mid", 0.45, 0.5, 60.0]],
             "long_term": []}
    results = [{"id": "s1", "text": "Ann is a carpenter.", "tier": "static", "kind": "persona", "recency": None,
                "importance": None, "relevance": 0.5, "score": 0.5},
               {"id": "old", "text": "The roof fell in.", "tier": "short_term", "kind": "event",
                "recency": 0.125, "importance": 1.0, "relevance": 0.6, "score": 0.88125}]
    tick = {"type": "tick", "tick": 0, "time": 480, "clock": "08:00", "positions": {"ann": "well"},
            "actions": {"ann": {"type": "stay", "activity": "drawing water", "place": "well"}},
            "events": [], "object_changes": {},
            "conversations": [{"participants": ["ann", "ben"], "place": "well",
                               "lines": [{"speaker": "ben", "listener": "ann", "text": "Hello, Ann!", "topic": None},
                                         {"speaker": "ann", "listener": "ben", "text": "Hello, Ben!", "topic": None},
                                         {"speaker": "ben", "listener": "ann", "text": "Goodbye.", "topic": None}]}],
            "memory": [
                {"op": "add", "agent": "ann", "tier": "short_term", "id": "new", "text": "Ben is at the well.",
                 "kind": "observation", "rating": 2, "timestamp": 480},
                {"op": "add", "agent": "ann", "tier": "short_term", "id": "mid", "text": "A crow sits on the roof.",
                 "kind": "observation", "rating": 5, "timestamp": 420},
                {"op": "retrieve", "agent": "ann", "query": "drawing water at the well", "purpose": "focus",
                 "results": results, "top_k": 2, "threshold": 0.35, "mode": "cascade",
                 "tiers": ["static", "short_term", "long_term"], "candidates": cands}]}
    path.write_text(json.dumps(header) + "\n" + json.dumps(tick) + "\n")
    return path


def test_rescore_on_a_hand_made_trace(tmp_path):
    trace = hand_made_trace(tmp_path / "trace.jsonl")
    # the run's weights (gamma 0.5): s1 0.5, then old = 0.25*0.5**3 + 0.25*1.0 + 0.6 = 0.88125 -> unchanged
    assert rescore_run(trace, 0.25, 0.25, 1.0)["changed"] == 0
    # relevance only: s1 (0.5) then the best short-term by relevance, old (0.6)
    assert rescore_run(trace, 0, 0, 1)["changed"] == 0
    # recency only: static scores 0 < threshold, so short-term fills: new (1.0), mid (1.0, later row) -> changed
    report = rescore_run(trace, 1, 0, 0)
    assert report["changed"] == 1
    change = report["changes"][0]
    assert change["after"] == ["new", "mid"] and change["dropped"] == ["Ann is a carpenter.", "The roof fell in."]
    assert change["added"] == ["Ben is at the well.", "A crow sits on the roof."]
    # gamma 1: every memory fully recent; a_rec=1, a_rel=1: the cascade still asks static first (s1 0.5 passes,
    # s2 0.3 does not), then short-term's best, old (1.6) -> the same result as recorded
    assert rescore_run(trace, 1, 0, 1, gamma=1.0)["changed"] == 0
    # importance only, gamma 0.5: static 0 fails the threshold; short-term: old 1.0, mid 0.5 -> changed
    assert rescore_run(trace, 0, 1, 0)["changes"][0]["after"] == ["old", "mid"]
    # another threshold: the static fact (0.5) and the 0.7s fail 0.8; only old (0.88125) is left
    assert rescore_run(trace, 0.25, 0.25, 1, threshold=0.8)["changes"][0]["after"] == ["old"]


@pytest.mark.parametrize("options, words", [
    ({"a_rec": -1, "a_imp": 0, "a_rel": 0}, "non-negative weights"),
    ({"a_rec": 0, "a_imp": 0, "a_rel": 0}, "not all 0"),
    ({"a_rec": float("inf")}, "a_rec must be a finite number"), ({"a_rec": "x"}, "a_rec must be a finite number"),
    ({"gamma": 0}, "gamma must be in (0, 1]"), ({"threshold": float("nan")}, "threshold must be a finite number"),
    ({"top_k": 0}, "top_k must be an integer >= 1"), ({"top_k": 2.5}, "top_k must be an integer"),
    ({"static_top_k": -3}, "static_top_k must be an integer >= 0"), ({"mode": "bogus"}, "mode must be"),
])
def test_rescore_options_out_of_range_are_named_not_silently_reported(tmp_path, options, words):
    """The library's rescore (``open_run(...).rescore``) checks what the command line checks: before, a negative
    weight or a threshold of nan reported every retrieval "changed" to an empty list, and gamma 0 none re-scorable."""
    trace = hand_made_trace(tmp_path / "trace.jsonl")
    with pytest.raises(SimulacraError, match=re.escape(words)):
        rescore_run(trace, **options)


def test_rescore_raises_top_k_only_up_to_the_recorded_maximum(tmp_path):
    trace = hand_made_trace(tmp_path / "trace.jsonl")
    # no max_top_k recorded: candidates are for top_k 2 only; nothing re-scorable is an error naming that depth
    deepest = "top_k (--top-k) 3: deeper than any retrieval's recorded candidates; the trace recorded candidates for " \
              "at most top_k 2"
    with pytest.raises(SimulacraError, match=re.escape(deepest)):
        rescore_run(trace, 0, 1, 1, top_k=3)
    lines = trace.read_text().splitlines()
    lines[1] = lines[1].replace('"top_k": 2,', '"top_k": 2, "max_top_k": 3,')
    trace.write_text("\n".join(lines) + "\n")
    # a_imp 1, a_rel 1, gamma 0.5: s1 0.5 passes, s2 0.3 does not; short-term: old 1.6, mid 0.95, new 0.6
    assert rescore_run(trace, 0, 1, 1, top_k=3)["changes"][0]["after"] == ["s1", "old", "mid"]
    # a static budget: episodic first (top_k 2), then at most one static fact
    assert rescore_run(trace, 0, 1, 1, static_top_k=1)["changes"][0]["after"] == ["old", "mid", "s1"]
    with pytest.raises(SimulacraError, match="at most top_k 3 "):
        rescore_run(trace, 0, 1, 1, top_k=4)
    with pytest.raises(SimulacraError, match=r"static_top_k 9: deeper .* re-rank with static_top_k <= 3, or"):
        rescore_run(trace, 0, 1, 1, static_top_k=9)


def test_an_added_static_memory_without_a_text_in_the_trace_says_so_not_a_bare_id(tmp_path, caplog):
    trace = hand_made_trace(tmp_path / "trace.jsonl")  # a header too thin to rebuild the static memories
    change = rescore_run(trace, 0, 0, 1, threshold=0.2)["changes"][0]
    assert change["after"] == ["s1", "s2"] and change["added"] == ["(static memory s2)"]


def test_cli_rescore_limit_and_negative_weights(tmp_path, capsys):
    from simulacra.cli import main

    trace = hand_made_trace(tmp_path / "trace.jsonl")
    with pytest.raises(SystemExit):  # before: accepted, and "... and 2 more" of 1 changed retrieval
        main(["rescore", str(trace), "--weights", "1,0,0", "--limit", "-1"])
    assert "argument --limit: '-1': expected a whole number >= 0" in capsys.readouterr().err
    assert main(["rescore", str(trace), "--weights", "1,0,0", "--limit", "0"]) == 0
    assert "... and 1 more changed retrievals" in capsys.readouterr().out
    # a leading '-' reaches the weights' own check (argparse said "expected one argument")
    assert main(["rescore", str(trace), "--weights", "-1,1,1"]) == 2
    assert "--weights: expected three finite non-negative numbers" in capsys.readouterr().err
    assert main(["rescore", str(trace), "--top-k", "50"]) == 2
    assert "at most top_k 2" in capsys.readouterr().err


def test_rerank_by_hand():
    cands = {"short_term": [["a", 0.5, 0.9, 600.0], ["b", 0.9, 0.1, 0.0]]}
    p = ScoringParams(a_rec=1, a_imp=1, a_rel=1, gamma=0.5)
    got = rerank(cands, ["short_term"], RetrievalRule("cascade", 2, 0.0), p)
    # a: 0.5**10 + 0.9 + 0.5 = 1.4009765625; b: 1 + 0.1 + 0.9 = 2.0
    assert [x[0] for x in got] == ["b", "a"] and got[1][2] == pytest.approx(1.4009765625)
    assert rerank(cands, ["short_term"], RetrievalRule("cascade", 2, 1.5), p) == [("b", "short_term", 2.0)]
    with pytest.raises(ValueError, match="too large"):
        rerank({"short_term": None}, ["short_term"], RetrievalRule("cascade", 2, 0.0), p)


def test_inspect_reconstructs_a_tick(tmp_path):
    trace = hand_made_trace(tmp_path / "trace.jsonl")
    e = explain_tick(trace, "ann", 0)
    assert e["clock"] == "08:00" and e["place"] == "well" and e["perceived"] == ["Ben is at the well.",
                                                                                  "A crow sits on the roof."]
    assert e["said"] == ["Hello, Ben!"] and e["heard"] == ["Hello, Ann!", "Goodbye."]
    assert [m["id"] for m in e["retrieved"][0]["results"]] == ["s1", "old"]
    text = format_explanation(e)
    # the conversation in the order said (it listed what she said, then what she heard)
    assert "  < Hello, Ann!\n  > Hello, Ben!\n  < Goodbye." in text
    assert "Ann Archer (ann) at tick 0, day 1 (Monday) 08:00: drawing water at well" in text and "0.881" in text
    assert e["when"] == "day 1 (Monday) 08:00" and not e["asleep"]
    with pytest.raises(SimulacraError, match="no agent 'zed'"):
        explain_tick(trace, "zed", 0)
    with pytest.raises(SimulacraError, match="outside the trace"):
        explain_tick(trace, "ann", 5)
    with pytest.raises(SimulacraError, match=r"tick: expected a whole number of the trace \(0\.\.0\), got str '0'"):
        explain_tick(trace, "ann", "0")  # it said "tick 0 is outside the trace (0..0)"
    with pytest.raises(SimulacraError, match="no trace there"):
        explain_tick(tmp_path / "nowhere", "ann", 0)
    assert not math.isnan(e["retrieved"][0]["results"][1]["score"])
