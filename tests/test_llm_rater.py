"""The rater with an LLM backend, end to end: the real rater HTTP endpoint, the real openai client, and a
scripted OpenAI-compatible server on 127.0.0.1 (the only allowed stand-in for a paid API)."""

import json

import pytest
import requests

from rater_server import ThreadedServer, create_app
from simulacra.config import load_config
from simulacra.llm import BudgetedModel, OpenAIChatModel, RecordingModel, RetryingModel, UsageMeter
from simulacra.rating.llm import LLMRater
from simulacra.simulation import Simulation
from simulacra.trace import read_trace
from tests.conftest import DATA
from tests.openai_double import (
    bare_number,
    empty,
    garbage,
    hang,
    json_reply,
    prose_json,
    rate_limited,
    reply,
    server_error,
)

pytest_plugins = ["tests.openai_double"]

MEMORY = "Hana finds out that her sister is getting married next spring."


def stack(url, tmp_path, max_calls=None, timeout_s=2.0):
    inner = RecordingModel(BudgetedModel(OpenAIChatModel("double-model", base_url=url, timeout_s=timeout_s),
                                         max_calls=max_calls), tmp_path / "llm_calls.jsonl")
    return UsageMeter(RetryingModel(inner, attempts=3, initial_wait_s=0.01, max_wait_s=0.05))


@pytest.fixture
def served(openai_double, rater_backend, tmp_path):
    """``(rater base URL, LLMRater)``: the rater app over HTTP with an LLM backend talking to the double."""
    backend = LLMRater(stack(openai_double.url, tmp_path, timeout_s=0.3), rater_backend, batch_size=4)
    server = ThreadedServer(create_app(backend), "127.0.0.1", 0)
    yield server.url.rsplit("/", 1)[0], backend
    server.close()


def rate(base, memory=MEMORY):
    resp = requests.post(f"{base}/rate", json={"memory": memory}, timeout=30)
    assert resp.status_code == 200, resp.text
    return resp.json()


@pytest.mark.parametrize("answer, expected", [
    (json_reply({"explanation": "A family milestone.", "rating": 7}), 7),
    (prose_json({"explanation": "Big news.", "rating": 8}), 8),
    (bare_number(6), 6),
    (reply("I would say seven."), 7),
    (reply('{"rating": 11, "explanation": "off the scale"}'), 10),
    (reply('Rating: 0'), 1),
])
def test_answers_are_parsed_defensively_and_clamped(served, openai_double, answer, expected):
    base, backend = served
    openai_double.script([answer])
    assert rate(base)["rating"] == expected
    sent = openai_double.requests[0]
    assert MEMORY in sent["messages"][-1]["content"] and sent["temperature"] == 0
    assert backend.stats()["fallbacks"] == 0


@pytest.mark.parametrize("answer", [garbage(), empty()])
def test_unparseable_answers_fall_back_to_the_offline_rater_and_are_counted(served, openai_double, rater_backend,
                                                                            answer, caplog):
    base, backend = served
    openai_double.script([answer])
    got = rate(base)
    assert got["rating"] == rater_backend.rate([MEMORY])[0].rating
    assert got["explanation"].startswith("fallback (unparseable answer)")
    assert backend.stats()["fallbacks"] == 1
    assert "raw answer" in caplog.text
    health = requests.get(f"{base}/health", timeout=5).json()
    assert health["backend"] == "llm" and health["counts"]["fallbacks"] == 1


def test_rate_limit_then_success_and_server_errors_are_retried(served, openai_double):
    base, _ = served
    openai_double.script([rate_limited("1"), json_reply({"explanation": "x", "rating": 5})])
    assert rate(base)["rating"] == 5 and len(openai_double.requests) == 2
    openai_double.script([server_error(500), server_error(502), json_reply({"explanation": "x", "rating": 4})])
    assert rate(base, "Another memory entirely.")["rating"] == 4 and len(openai_double.requests) == 5


def test_a_hanging_or_failing_server_falls_back_after_the_retries(served, openai_double, rater_backend):
    base, backend = served
    openai_double.script([hang(5), hang(5), hang(5)])
    got = rate(base)
    assert got["explanation"].startswith("fallback (the LLM call failed)")
    assert got["rating"] == rater_backend.rate([MEMORY])[0].rating
    assert backend.stats()["llm_errors"] == 1 and len(openai_double.requests) == 3


def test_a_batch_is_one_call_and_only_unparsed_items_are_asked_again(served, openai_double):
    base, backend = served
    memories = ["Ann sweeps the step.", "Ben loses his job at the mill.", "Cal waters the beans."]
    openai_double.script([json_reply({"ratings": [{"explanation": "routine", "rating": 1},
                                                  {"explanation": "hard blow", "rating": 8}]}),  # one missing
                          bare_number(2)])
    resp = requests.post(f"{base}/rate/batch", json={"memories": memories}, timeout=30)
    assert [r["rating"] for r in resp.json()["ratings"]] == [1, 8, 2]
    assert len(openai_double.requests) == 2 and "Cal waters the beans." in openai_double.requests[1]["messages"][-1][
        "content"]
    assert all(m in openai_double.requests[0]["messages"][-1]["content"] for m in memories)
    # identical memories come from the cache: no further call
    resp = requests.post(f"{base}/rate/batch", json={"memories": memories[::-1]}, timeout=30)
    assert [r["rating"] for r in resp.json()["ratings"]] == [2, 8, 1] and len(openai_double.requests) == 2
    assert backend.stats()["batch_items_retried"] == 1


def test_reflection_keeps_cited_ids_and_falls_back_when_nothing_usable(served, openai_double):
    base, backend = served
    memories = [{"id": "m1", "text": "The mill wheel jammed with a branch.", "rating": 6},
                {"id": "m2", "text": "Bram carried the snapped bracket to the forge.", "rating": 5},
                {"id": "m3", "text": "The storm is coming tonight, said the rider.", "rating": 8},
                {"id": "m4", "text": "Everyone tied down their shutters before the storm.", "rating": 6}]
    openai_double.script([prose_json({"insights": [{"text": "The mill needs repair.", "evidence": ["m1", "m2", "x9"]},
                                                   {"text": "No evidence here.", "evidence": ["zz"]}]})])
    got = requests.post(f"{base}/reflect", json={"agent": "Hana", "memories": memories}, timeout=30).json()
    assert got["insights"] == [{"text": "The mill needs repair.", "evidence": ["m1", "m2"]}]
    assert "[m3]" in openai_double.requests[0]["messages"][-1]["content"]
    openai_double.script([garbage()])
    got = requests.post(f"{base}/reflect", json={"agent": "Hana", "memories": memories}, timeout=30).json()
    assert got["insights"] and backend.stats()["reflect_fallbacks"] == 1  # the offline reflector answered
    assert all(set(i["evidence"]) <= {"m1", "m2", "m3", "m4"} for i in got["insights"])


def test_a_spent_budget_stops_a_run_cleanly_with_its_message(tmp_path, openai_double, embedder):
    """The run's LLM (via the in-process rater) may make 3 calls; the run stops at the tick that needs a 4th."""
    import socket

    with socket.socket() as s:  # a free local port: nothing answers there, so the run starts its own rater
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    openai_double.script([], then=json_reply({"ratings": [{"explanation": "x", "rating": 5}] * 16}))
    config = load_config(None, [f"rater.url=http://127.0.0.1:{port}/rate", "llm.model=double-model",
                                f"llm.base_url={openai_double.url}", "llm.max_calls=3", "llm.attempts=1",
                                "rater.llm_batch_size=16", "llm.prompt_price_per_1k=0.5",
                                "cognition.backend=scripted", "rater.check_sample=0"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="budget", embedder=embedder) as sim:
        summary = sim.run(12)
    assert summary["stopped"] and "budget" in summary["stopped"] and "llm.max_calls" in summary["stopped"]
    assert 0 < summary["ticks"] < 12
    _, ticks = read_trace(sim.run_dir)
    assert len(ticks) == summary["ticks"]  # the trace ends at the last complete tick
    assert summary["llm"]["calls"] >= 3 and summary["llm"]["prompt_tokens"] > 0 and summary["llm"]["cost_usd"] > 0
    lines = (sim.run_dir / "llm_calls.jsonl").read_text().splitlines()
    assert len(lines) == 3 and all(json.loads(ln)["model"] for ln in lines)
    assert len(openai_double.requests) == 3


def test_agent_and_context_reach_the_prompt_and_key_the_cache(served, openai_double):
    base, _ = served
    openai_double.script([bare_number(3), bare_number(9)])
    body = {"memory": "The letter arrived.", "agent": "Ruth Calloway"}
    assert requests.post(f"{base}/rate", json=body, timeout=30).json()["rating"] == 3
    body["context"] = "Ruth has waited a year for news of her son."
    assert requests.post(f"{base}/rate", json=body, timeout=30).json()["rating"] == 9
    prompts = [r["messages"][-1]["content"] for r in openai_double.requests]
    assert "Ruth Calloway" in prompts[0] and "waited a year" in prompts[1] and len(prompts) == 2
