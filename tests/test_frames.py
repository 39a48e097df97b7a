"""simulacra.frames: a run's trace as pandas DataFrames, checked against the trace and the summary of real runs (a
scripted town of three on real stores, the real rater over HTTP, real embeddings; and the language-model mind
against the OpenAI-compatible test double)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from simulacra.config import load_config
from simulacra.errors import SimulacraError
from simulacra.frames import COLUMNS, TABLES, read_frames
from simulacra.simulation import Simulation
from simulacra.trace import TraceFormatError, read_trace
from tests.conftest import DATA, ROOT, TELL_ALL
from tests.openai_double import OpenAIDouble
from tests.schema_answers import SchemaAnswers

TICKS = 12
PRICES = (0.5, 1.5)  # US dollars per 1000 prompt / completion tokens


def tiny_world(folder):
    """Tinyvale with a shared memory and a public well accident, so that notices are posted too."""
    world = yaml.safe_load((DATA / "tiny.yaml").read_text(encoding="utf-8"))
    world["shared_memory"] = True
    world["events"][0]["public"] = True
    path = folder / "tiny.yaml"
    path.write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return path


def run_town(folder, name, settings, ticks, embedder):
    config = load_config(None, [TELL_ALL, "simulation.conversation_probability=1.0", "simulation.news_min_rating=1",
                                *settings])
    with Simulation.create(tiny_world(folder), config, personas_dir=DATA / "personas", db_dir=folder,
                           run_name=name, embedder=embedder) as sim:
        summary = sim.run(ticks)
        run_dir = sim.run_dir
    header, records = read_trace(run_dir)
    return SimpleNamespace(run_dir=run_dir, summary=summary, header=header, ticks=records,
                           frames=read_frames(run_dir))


@pytest.fixture(scope="module")
def town(tmp_path_factory, rater_url, embedder):
    """Two game hours of three agents, with reflection, consolidation (moves and forgetting) and notices."""
    return run_town(tmp_path_factory.mktemp("frames"), "town",
                    [f"rater.url={rater_url}", "reflection.threshold=20", "memory.consolidation_interval_minutes=30",
                     "memory.consolidation_age_minutes=30", "memory.promote_threshold=0.3"], TICKS, embedder)


@pytest.fixture(scope="module")
def llm_town(tmp_path_factory, rater_url, embedder):
    """The language-model mind against the test double, priced."""
    double = OpenAIDouble()
    double.script([], then=SchemaAnswers())
    try:
        yield run_town(tmp_path_factory.mktemp("frames_llm"), "llm",
                       [f"rater.url={rater_url}", "llm.model=double-model", f"llm.base_url={double.url}",
                        "llm.attempts=1", "llm.timeout_s=5", f"llm.prompt_price_per_1k={PRICES[0]}",
                        f"llm.completion_price_per_1k={PRICES[1]}"], 4, embedder)
    finally:
        double.close()


def ops(run, kind=None):
    return [op for t in run.ticks for op in t["memory"] if kind is None or op["op"] == kind]


def test_every_table_has_its_columns_and_the_town_exercised_every_kind_of_record(town):
    for name, df in town.frames.tables().items():
        assert list(df.columns) == list(COLUMNS[name]), name
        assert isinstance(df.index, pd.RangeIndex)
    assert list(town.frames.tables()) == list(TABLES)
    # the run made every kind of record the tables are built from (else the tests below would prove little)
    assert {"add", "retrieve", "rehearse", "forget", "move", "reflect", "post"} <= {op["op"] for op in ops(town)}
    assert any(t["conversations"] for t in town.ticks) and town.summary["events"]


def test_positions_are_one_row_per_agent_per_tick_as_the_trace_has_them(town):
    pos, agents = town.frames.positions, town.header["agents"]
    assert len(pos) == TICKS * len(agents) == len(town.ticks) * len(agents)
    assert pos["agent"].dtype == "category" and set(pos["agent"].cat.categories) == set(agents)
    want = pd.DataFrame([{"tick": t["tick"], "time": t["time"], "clock": t["clock"], "agent": a,
                          "place": t["positions"][a], "action": t["actions"][a]["type"],
                          "activity": t["actions"][a]["activity"], "asleep": a in t.get("asleep", ()),
                          "step": t["plans"][a]["step"]} for t in town.ticks for a in agents])
    got = pos.astype({"agent": str, "place": str, "action": str, "activity": str})
    for col in ("tick", "time", "clock", "agent", "place", "action", "activity", "asleep"):
        assert got[col].tolist() == want[col].tolist(), col
    assert pos["time"].tolist() == [480 + 10 * tk for tk in pos["tick"]] and set(pos["day"]) == {1}
    # the plan step in force, parsed from the trace's "<start>|<activity>|<place>"
    steps = [f"{s}|{a}|{p}" for s, a, p in zip(pos["step_start"], pos["step_activity"], pos["step_place"])]
    assert steps == want["step"].tolist()
    assert pos["asleep"].any() and pos["asleep"].sum() == sum(len(t.get("asleep", ())) for t in town.ticks)


def test_lines_are_the_utterances_of_the_ticks(town):
    lines = town.frames.lines
    want = [(t["tick"], t["time"], c["place"], ln["speaker"], ln["listener"], ln["text"], ln.get("topic"),
             ln.get("memory_ids"))
            for t in town.ticks for c in t["conversations"] for ln in c["lines"]]
    got = [(r.tick, r.time, r.place, r.speaker, r.listener, r.text, None if pd.isna(r.topic) else r.topic,
            r.memory_ids) for r in lines.itertuples()]
    assert got == want and len(want) > 0
    # a scripted run: the trace leaves the source out of every line, which is how it says "scripted"
    assert not any("source" in ln for t in town.ticks for c in t["conversations"] for ln in c["lines"])
    assert set(lines["source"]) == {"scripted"}
    # conversations numbered in trace order, lines numbered within each
    sizes = [len(c["lines"]) for t in town.ticks for c in t["conversations"]]
    assert lines.groupby("conversation")["line"].agg(list).tolist() == [list(range(n)) for n in sizes if n]
    assert any(isinstance(topic, str) and topic.startswith("The old well") for topic in lines["topic"])


def test_memory_operations_count_per_op_as_in_the_trace(town):
    mops = town.frames.memory_ops
    assert Counter(mops["op"].astype(str)) == Counter(op["op"] for op in ops(town))
    assert len(mops) == len(ops(town))
    adds = mops[mops["op"] == "add"]
    assert adds["memory_id"].tolist() == [op["id"] for op in ops(town, "add")]
    assert adds["importance"].tolist() == pytest.approx([op["rating"] / 10 for op in ops(town, "add")])
    moved = mops[mops["op"] == "move"]
    assert set(moved["tier"]) == {"short_term"} and set(moved["to_tier"]) == {"long_term"}
    retrieved = mops[mops["op"] == "retrieve"]
    assert retrieved["memory_ids"].tolist() == [[m["id"] for m in op["results"]] for op in ops(town, "retrieve")]
    reflected = mops[mops["op"] == "reflect"]
    assert reflected["memory_ids"].tolist() == [[i["id"] for i in op["insights"]] for op in ops(town, "reflect")]
    posts = mops[mops["op"] == "post"]
    assert posts["agent"].isna().all() and set(posts["author"].astype(str)) <= {"world", *town.header["agents"]}


def test_each_retrieval_score_is_the_weighted_sum_of_its_terms_under_its_profiles_weights(town):
    r = town.frames.retrievals
    results = [(op, m) for op in ops(town, "retrieve") for m in op["results"]]
    assert len(r) == len(results) and r["memory_id"].tolist() == [m["id"] for _, m in results]
    assert r["rank"].tolist() == [i + 1 for op in ops(town, "retrieve") for i in range(len(op["results"]))]
    memory = town.header["config"]["memory"]
    assert memory["normalize"] == "none" and r["recency_scaled"].isna().all()

    def weights(profile):
        over = {} if profile == "situational" else memory["profiles"][profile]
        return tuple(memory[k] if over.get(k) is None else over[k] for k in ("a_rec", "a_imp", "a_rel"))

    profiles = set(r["profile"].astype(str))
    assert profiles == {"situational", "recall"} and weights("situational") != weights("recall")
    expected = [weights(p) for p in r["profile"].astype(str)]
    assert list(zip(r["a_rec"], r["a_imp"], r["a_rel"])) == expected
    a_rec, a_imp, a_rel = (pd.Series([w[i] for w in expected]) for i in range(3))
    total = a_rec * r["recency"].fillna(0) + a_imp * r["importance"].fillna(0) + a_rel * r["relevance"]
    assert (total - r["score"]).abs().max() < 5e-6
    static = r[r["tier"] == "static"]
    assert len(static) and static["recency"].isna().all() and (static["score"] == static["relevance"]).all()


def test_decisions_are_the_traces_decisions_then_its_lines(town):
    d = town.frames.decisions
    recorded = [x for t in town.ticks for x in t["decisions"]]
    as_decision = d[d["recorded_as"] == "decision"]
    assert len(as_decision) == len(recorded) > 0
    assert as_decision["memory_ids"].tolist() == [x["memory_ids"] for x in recorded]
    assert as_decision["kind"].astype(str).tolist() == [x["kind"] for x in recorded]
    assert [json.loads(v) for v in as_decision["value"]] == [x["value"] for x in recorded]
    lines = d[d["recorded_as"] == "line"]
    assert len(lines) == len(town.frames.lines) and set(lines["kind"]) == {"line"}
    assert lines["memory_ids"].tolist() == town.frames.lines["memory_ids"].tolist()


def test_diffusion_ends_where_the_summary_says_who_knows_each_event(town):
    diff = town.frames.diffusion
    assert len(town.summary["events"]) == diff["event"].nunique() >= 1
    for ev in town.summary["events"]:
        rows = diff[diff["event_text"] == ev["text"]].sort_values("tick")
        assert rows["knowers"].iloc[-1] == ev["known_by"] and rows["known"].iloc[-1] == len(ev["known_by"])
        assert rows["known"].is_monotonic_increasing and rows["new"].sum() == len(ev["known_by"])
        assert rows["share"].iloc[-1] == pytest.approx(len(ev["known_by"]) / len(town.header["agents"]))
        assert rows["rememberers"].iloc[-1] == ev["remembered_by"]
        assert rows["remembered"].tolist() == [len(r) for r in rows["rememberers"]]
        assert all(set(r) <= set(k) for r, k in zip(rows["rememberers"], rows["knowers"], strict=True))
    # the well's news went from one who saw it to the others by word of mouth: not everyone at once
    well = diff[diff["event_text"].astype(str).str.startswith("The old well")]
    assert well["known"].iloc[-1] == 3 and (well["known"] == 1).any()


def test_to_parquet_writes_each_table_and_reads_back_equal(town, tmp_path):
    paths = town.frames.to_parquet(tmp_path / "tables")
    assert [p.name for p in paths] == [f"{name}.parquet" for name in TABLES]
    for name, path in zip(TABLES, paths):
        pd.testing.assert_frame_equal(pd.read_parquet(path), getattr(town.frames, name))


def test_a_killed_runs_trace_gives_its_complete_ticks(town, tmp_path):
    lines = (town.run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    kept = 5
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "trace.jsonl").write_bytes(b"".join(lines[: 1 + kept]) + lines[1 + kept][: len(lines[1 + kept]) // 2])
    frames = read_frames(killed)
    n = len(town.header["agents"])
    assert sorted(set(frames.positions["tick"])) == list(range(kept)) and len(frames.positions) == kept * n
    pd.testing.assert_frame_equal(frames.positions, town.frames.positions.iloc[: kept * n], check_categorical=False)
    # agents and places keep the run's whole lists as categories, whatever part of the run is read
    assert list(frames.positions["agent"].cat.categories) == town.header["agents"]
    assert list(frames.positions["place"].cat.categories) == list(town.header["world"]["places"])
    assert len(frames.memory_ops) == sum(len(t["memory"]) for t in town.ticks[:kept])
    assert frames.model_calls.empty and list(frames.model_calls.columns) == list(COLUMNS["model_calls"])


def test_a_malformed_or_missing_trace_is_the_readers_error(town, tmp_path):
    lines = (town.run_dir / "trace.jsonl").read_bytes().splitlines(keepends=True)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "trace.jsonl").write_bytes(lines[0] + b"{not json\n" + lines[1])  # a whole line that is no record
    with pytest.raises(TraceFormatError, match=r"bad/trace.jsonl: line 2"):
        read_frames(bad)
    with pytest.raises(TraceFormatError, match="no trace there"):
        read_frames(tmp_path / "nothing")


def test_a_run_without_ticks_gives_empty_tables_with_their_columns(town, tmp_path, caplog):
    empty = tmp_path / "empty"
    empty.mkdir()
    header = json.loads((town.run_dir / "trace.jsonl").read_bytes().splitlines()[0])
    del header["personas"]  # a header the viewer could not rebuild static memories from: frames do not need them
    (empty / "trace.jsonl").write_text(json.dumps(header) + "\n", encoding="utf-8")
    with caplog.at_level("WARNING", logger="simulacra"):
        frames = read_frames(empty / "trace.jsonl")
    assert not caplog.records, [r.getMessage() for r in caplog.records]
    for name, df in frames.tables().items():
        assert df.empty and list(df.columns) == list(COLUMNS[name]), name
    for name, path in zip(TABLES, frames.to_parquet(tmp_path / "out")):
        pd.testing.assert_frame_equal(pd.read_parquet(path), getattr(frames, name))


def test_a_run_with_a_model_gives_its_calls_with_tokens_and_cost(llm_town):
    calls, llm = llm_town.frames.model_calls, llm_town.summary["llm"]
    assert len(calls) == llm["calls"] > 0 and calls["ok"].all()
    assert (calls["prompt_tokens"] > 0).all() and (calls["completion_tokens"] > 0).all()
    assert calls["prompt_tokens"].sum() == llm["prompt_tokens"] and calls["completion_tokens"].sum() == \
        llm["completion_tokens"]
    assert (calls["total_tokens"] == calls["prompt_tokens"] + calls["completion_tokens"]).all()
    assert calls["cost_usd"].sum() == pytest.approx(llm["cost_usd"])
    assert calls["cost_usd"].tolist() == pytest.approx(
        [(p * PRICES[0] + c * PRICES[1]) / 1000 for p, c in zip(calls["prompt_tokens"], calls["completion_tokens"])])
    assert {"day_plan", "actions"} <= set(calls["schema"].dropna().astype(str))
    assert str(calls["wall_time"].dtype) == "datetime64[us, UTC]" and calls["shard"].isna().all()
    # the model's decisions and lines are labelled so
    d = llm_town.frames.decisions
    assert set(d.loc[d["kind"] == "plan_day", "source"].astype(str)) == {"llm"}
    lines = llm_town.frames.lines
    assert set(lines["source"].astype(str)) <= {"llm", "fallback"}


def test_importing_needs_no_pandas_and_reading_without_it_says_what_to_install(monkeypatch, town):
    code = "import sys, simulacra.frames; assert 'pandas' not in sys.modules, 'pandas imported'"
    subprocess.run([sys.executable, "-c", code], cwd=ROOT, check=True)
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas now raises ImportError
    with pytest.raises(SimulacraError, match=r"pip install 'simulacra\[analysis\]'"):
        read_frames(town.run_dir)
