"""Resuming a run with a language model: the answers already paid for are replayed from ``llm_calls.jsonl``, the
counters and budgets go on from the checkpoint, and the run ends as an uninterrupted one (the OpenAI-compatible
double answers deterministically from the request and records every request it receives)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from simulacra.checkpoint import read_checkpoint
from simulacra.cli import format_summary
from simulacra.config import load_config
from simulacra.errors import SimulacraError
from simulacra.killpoint import ENV, InjectedFault
from simulacra.llm import BudgetExceeded, Completion, LLMUnavailable
from simulacra.llm.replay import ReplayingModel, load_calls, request_key
from simulacra.simulation import Simulation
from simulacra.trace import read_trace
from tests.schema_answers import TOGETHER, SchemaAnswers, talk_to_someone_here

pytest_plugins = ["tests.openai_double"]

DATA = Path(__file__).resolve().parent / "data"
TICKS = 6


def settings(double, extra=()):
    # an in-process rater on a free port rates with the same model (its start-up check included), so its calls
    # are recorded and replayed too
    return load_config(None, ["rater.url=http://127.0.0.1:0/rate", "rater.check_sample=4", "llm.model=double-model",
                              f"llm.base_url={double.url}", "llm.attempts=1", "llm.timeout_s=5",
                              "simulation.news_min_rating=1", "cognition.react_min_rating=1",
                              "simulation.conversation_probability=1.0", *extra])


def create(tmp_path, double, embedder, name, extra=()):
    return Simulation.create(DATA / "tiny.yaml", settings(double, extra), personas_dir=DATA / "personas",
                             db_dir=tmp_path, run_name=name, embedder=embedder)


def bodies(requests):
    return Counter(json.dumps(r, sort_keys=True) for r in requests)


def comparable(summary):
    """The summary without what differs between two folders or is wall-clock time."""
    s = json.loads(json.dumps(summary))
    for key in ("run_dir", "trace", "embedding_cache"):
        s.pop(key)
    s["llm"].pop("mean_latency_s")
    s["llm"].pop("replayed")
    for key in ("model_s", "waited_s"):
        s["rater"].pop(key)
    s["rater"]["quality"].pop("seconds", None)
    s["rater"].pop("quality_line")
    return s


def test_a_resumed_run_replays_what_it_paid_for_and_ends_as_the_uninterrupted_one(tmp_path, openai_double, embedder,
                                                                                   monkeypatch):
    # the residents plan to be at the well and talk there: the run's model writes plans and speech after tick 0
    openai_double.script([], then=SchemaAnswers(hooks={**TOGETHER, "reaction": talk_to_someone_here}))
    with create(tmp_path, openai_double, embedder, "ref") as sim:
        ref_summary = sim.run(TICKS)
    _, ref_ticks = read_trace(tmp_path / "ref")
    ref_requests = list(openai_double.requests)
    # the cut tick (after tick 0) asks the model for decisions, and the rater's model for ratings, and writes a
    # second batch of memories (plans, speech), where the fault is injected
    second = ("plan", "dialogue", "conversation")
    cuts = [t["tick"] for t in ref_ticks[1:] if any(d["source"] == "llm" for d in t["decisions"])
            and any(op["op"] == "add" and op["kind"] in second for op in t["memory"])]
    assert cuts, "no tick after the first asks the model and writes plans or speech"
    CUT = cuts[0]
    assert ref_summary["rater"]["model_calls"] > 0 and ref_summary["llm"]["replayed"] == 0

    openai_double.requests.clear()
    monkeypatch.setenv(ENV, f"tick={CUT}:phase=remember2:mode=raise")
    with create(tmp_path, openai_double, embedder, "cut") as sim:
        setup_calls = read_checkpoint(sim.run_dir)["layers"]["llm_calls"]  # the rater's start-up check
        with pytest.raises(InjectedFault):
            sim.run(TICKS)
    monkeypatch.delenv(ENV)
    before = list(openai_double.requests)
    assert len(load_calls(tmp_path / "cut" / "llm_calls.jsonl")) == len(before)
    checkpointed = read_checkpoint(tmp_path / "cut")["layers"]["llm_calls"]
    assert setup_calls > 0 and len(before) > checkpointed  # the cut tick's calls before the fault were recorded

    openai_double.requests.clear()
    with Simulation.resume(tmp_path / "cut", embedder=embedder) as sim:
        assert sim.ticks_done == CUT
        # the rater's ratings came back with the checkpoint: a text rated before it is not asked again
        first = [op["text"] for op in ref_ticks[0]["memory"] if op["op"] == "add"]
        assert sim.rater.rate_many(first) and not openai_double.requests
        summary = sim.run(TICKS - CUT)
    after = list(openai_double.requests)
    _, ticks = read_trace(tmp_path / "cut")

    assert ticks == ref_ticks
    # no request is sent twice: what the killed process asked and what the resumed one asked are, together,
    # exactly what the uninterrupted run asked
    assert bodies(before) + bodies(after) == bodies(ref_requests)
    # the answers replayed: the rater's start-up check, and the calls of the cut tick made before the fault
    assert summary["llm"]["replayed"] == setup_calls + len(before) - checkpointed
    assert f"{summary['llm']['replayed']} answers replayed from llm_calls.jsonl" in format_summary(summary)
    # the file lists each request sent once: no replayed answer is recorded again
    assert len(load_calls(tmp_path / "cut" / "llm_calls.jsonl")) == len(ref_requests)
    assert comparable(summary) == comparable(ref_summary)


def test_a_spent_budget_stays_spent_after_a_resume(tmp_path, openai_double, embedder):
    openai_double.script([], then=SchemaAnswers())
    with create(tmp_path, openai_double, embedder, "budget", ["llm.max_calls=16"]) as sim:
        stopped = sim.run(TICKS)
    assert stopped["stopped"] and "llm.max_calls" in stopped["stopped"] and stopped["ticks"] < TICKS
    sent = len(openai_double.requests)
    assert sent == 16
    with Simulation.resume(tmp_path / "budget", embedder=embedder) as sim:
        again = sim.run(TICKS - sim.ticks_done)
    # the calls of the tick the budget stopped are replayed into the budget, which refuses at the same call
    assert len(openai_double.requests) == sent
    assert again["stopped"] == stopped["stopped"] and again["ticks"] == stopped["ticks"]
    assert again["llm"]["calls"] == stopped["llm"]["calls"]
    # the message says how to go on, and a larger budget does (it was refused: a resume took no --set at all)
    assert f"simulacra run --resume {tmp_path / 'budget'} --set llm.max_calls=N" in stopped["stopped"]
    with pytest.raises(SimulacraError, match="only llm.max_calls and llm.max_tokens .* not 'memory.a_rec'"):
        Simulation.resume(tmp_path / "budget", embedder=embedder, settings=["memory.a_rec=0"])
    with Simulation.resume(tmp_path / "budget", embedder=embedder, settings=["llm.max_calls=1000"]) as sim:
        left = TICKS - sim.ticks_done
        more = sim.run(left)
    assert not more.get("stopped") and more["ticks"] == TICKS and left > 0 and len(openai_double.requests) > sent


def test_a_resume_charges_what_the_file_records_and_never_sends_a_request_the_budget_refused(tmp_path, openai_double):
    from simulacra.config import LLMConfig
    from simulacra.llm import BudgetedModel, build_model, unwrap

    openai_double.script([], then=SchemaAnswers())
    cfg = LLMConfig(model="double-model", base_url=openai_double.url, max_calls=2, attempts=1)
    first = build_model(cfg, run_dir=tmp_path)
    answers = {x: ask(first, x).text for x in ("a", "b")}  # concurrent agents: these took the last places ...
    with pytest.raises(BudgetExceeded) as refused:
        ask(first, "c")  # ... and this one was refused
    assert len(openai_double.requests) == 2

    resumed = build_model(cfg, run_dir=tmp_path, resume=True)
    budget = unwrap(resumed, BudgetedModel)
    assert (budget.calls, budget.tokens) == (2, unwrap(first, BudgetedModel).tokens)
    budget.restore_counters({"calls": 0, "tokens": 0})  # a checkpoint from before these calls does not undo them
    assert budget.calls == 2
    # the resumed tick asks in another order: the refused request first; it is refused again, not sent
    with pytest.raises(BudgetExceeded) as again:
        ask(resumed, "c")
    assert str(again.value) == str(refused.value)
    got = {x: ask(resumed, x) for x in ("b", "a")}
    assert {x: c.text for x, c in got.items()} == answers and all(c.latency_s == 0.0 for c in got.values())
    assert len(openai_double.requests) == 2 and budget.calls == 2
    assert resumed.report()["calls"] == 3 and resumed.report()["failures"] == 1


def test_a_stage_that_fails_leaves_no_item_calling_the_model():
    import threading
    from types import SimpleNamespace

    from simulacra.runtime import Runtime

    done, started = [], threading.Event()

    def item(x):
        if x == 0:
            assert started.wait(10)
            raise BudgetExceeded("spent")
        started.set()
        threading.Event().wait(0.2)  # a call still in flight when item 0 fails
        done.append(x)
        return x

    rt = SimpleNamespace(llm=object(), config=load_config(None, ["llm.concurrency=3"]), _pool=None, _parent=None)
    with pytest.raises(BudgetExceeded):
        Runtime.map(rt, item, [0, 1, 2])
    assert sorted(done) == [1, 2]  # both ran to their end before the failure was raised
    rt._pool.shutdown()


class Counting:
    """A model that answers ``answer <n>`` to its n-th call, or fails the calls listed in ``fail``."""

    name = "fake:model"

    def __init__(self, fail=()):
        self.calls, self.fail = 0, set(fail)

    def complete(self, messages, *, max_tokens=256, temperature=0.0, seed=None, json_schema=None):
        self.calls += 1
        if self.calls in self.fail:
            raise LLMUnavailable("HTTP 503")
        return Completion(f"answer {self.calls}", "fake", 10, 2, 0.5, "stop")


def ask(model, text):
    return model.complete([{"role": "user", "content": text}])


def test_replay_takes_identical_requests_in_recorded_order_and_asks_failures_again(tmp_path):
    from simulacra.llm import RecordingModel

    path = tmp_path / "llm_calls.jsonl"
    first = RecordingModel(Counting(fail={2}), path)
    ask(first, "a")
    with pytest.raises(LLMUnavailable):
        ask(first, "b")
    ask(first, "b"), ask(first, "a"), ask(first, "c")
    with path.open("ab") as fh:  # a kill in the middle of the next record
        fh.write(b'{"time": "2026-01-01T00:00:00", "model": "fake')
    records = load_calls(path)
    assert [r["answer"] for r in records] == ["answer 1", None, "answer 3", "answer 4", "answer 5"]
    assert path.read_bytes().endswith(b"}\n")  # the cut line is gone: the next record starts on its own line

    inner = Counting()
    replay = ReplayingModel(RecordingModel(inner, path), records)
    replay.keep_from(1)  # the record of the first "a" belongs to a tick already done
    assert ask(replay, "a").text == "answer 4"  # the second "a", not the first
    assert ask(replay, "b").text == "answer 3"  # the failed "b" is not an answer: the one after it is
    got = ask(replay, "c")
    assert (got.text, got.prompt_tokens, got.completion_tokens, got.latency_s) == ("answer 5", 10, 2, 0.0)
    assert replay.replayed == 3 and inner.calls == 0 and replay.pending == 0
    assert ask(replay, "a").text == "answer 1" and inner.calls == 1  # nothing left to replay: asked
    assert len(load_calls(path)) == 6  # only the request sent was recorded
    assert request_key("m", [{"role": "user", "content": "x"}], 5, 0.0, None, None) != request_key(
        "m", [{"role": "user", "content": "x"}], 6, 0.0, None, None)


def test_an_interview_of_the_run_is_recorded_apart_and_not_charged_to_it(tmp_path, openai_double, embedder):
    """``simulacra interview`` (and evaluate's interviews) of a model run record their calls to the run's
    ``interview_calls.jsonl``: they appended to ``llm_calls.jsonl``, so a resume charged them to the run's
    ``llm.max_calls`` and stopped a run that the uninterrupted one finished (audit of stop 51)."""
    from simulacra.config import LLMConfig
    from simulacra.interview import interview
    from simulacra.llm import BudgetedModel, build_model, unwrap

    openai_double.script([], then=SchemaAnswers())
    with create(tmp_path, openai_double, embedder, "iv") as sim:
        sim.run(2)
    own = load_calls(tmp_path / "iv" / "llm_calls.jsonl")
    asked = len(openai_double.requests)
    answer = interview(tmp_path / "iv", "ann", "What happened at the well?", embedder=embedder)
    assert answer["source"] == "llm" and len(openai_double.requests) > asked  # the model answered
    assert load_calls(tmp_path / "iv" / "llm_calls.jsonl") == own
    assert len(load_calls(tmp_path / "iv" / "interview_calls.jsonl")) == len(openai_double.requests) - asked
    cfg = LLMConfig(model="double-model", base_url=openai_double.url, attempts=1)
    assert unwrap(build_model(cfg, run_dir=tmp_path / "iv", resume=True), BudgetedModel).calls == len(own)
