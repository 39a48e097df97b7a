"""The one rule for asking a model for JSON under a schema (simulacra.llm.structured.ask_json), against the
OpenAI-compatible test server."""

import json

import pytest
from pydantic import BaseModel

from simulacra.llm import BudgetedModel, BudgetExceeded, OpenAIChatModel, RetryingModel
from simulacra.llm.base import LLMUnreachable
from simulacra.llm.structured import BadAnswer, ask_json
from tests.openai_double import garbage, json_reply, prose_json, reply, status

pytest_plugins = ["tests.openai_double"]

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
ASK = [{"role": "user", "content": "Pick a number from 1 to 5 as {\"n\": ...}."}]


class _N(BaseModel):
    n: int


def small(data: dict) -> int:
    n = _N.model_validate(data).n
    if not 1 <= n <= 5:
        raise BadAnswer(f"n must be 1..5, got {n}")
    return n


@pytest.fixture()
def model(openai_double):
    return OpenAIChatModel("double-model", base_url=openai_double.url, timeout_s=5)


def sent(openai_double, i: int) -> list[dict]:
    return openai_double.requests[i]["messages"]


def test_a_good_answer_is_parsed_with_its_costs(openai_double, model):
    openai_double.script([prose_json({"n": 3}, prompt_tokens=40, completion_tokens=9)])
    asked = ask_json(model, ASK, SCHEMA, small, max_tokens=50, seed=7)
    assert asked.ok and asked.value == 3 and asked.problem == "" and asked.error is None
    assert (asked.attempts, asked.calls, asked.truncated) == (1, 1, 0)
    assert (asked.prompt_tokens, asked.completion_tokens) == (40, 9)
    body = openai_double.requests[0]
    assert body["seed"] == 7 and body["max_tokens"] == 50 and body["response_format"]["json_schema"]["schema"] == SCHEMA


@pytest.mark.parametrize("bad, problem", [
    (garbage(), "it is not a JSON object"),
    (json_reply({"n": 9}), "n must be 1..5, got 9"),
    (json_reply({"m": 1}), "validation error"),
    (reply('{"n": 2', finish_reason="length"), "it was cut off at 50 tokens; answer shorter"),
])
def test_a_bad_answer_is_asked_again_with_the_problem_stated(openai_double, model, bad, problem):
    openai_double.script([bad, json_reply({"n": 2})])
    asked = ask_json(model, ASK, SCHEMA, small, max_tokens=50)
    assert asked.ok and asked.value == 2 and (asked.attempts, asked.calls) == (2, 2)
    retry = sent(openai_double, 1)
    assert retry[:1] == ASK and retry[1]["role"] == "assistant" and retry[1]["content"] == bad.content[:500]
    assert retry[2]["content"].startswith("That answer cannot be used: ") and problem in retry[2]["content"]


def test_after_the_retries_the_result_says_why_and_the_caller_falls_back(openai_double, model):
    openai_double.script([json_reply({"n": 9}), json_reply({"n": 8})])
    asked = ask_json(model, ASK, SCHEMA, small, max_tokens=50, retries=1)
    assert not asked.ok and asked.value is None and asked.problem == "n must be 1..5, got 8"
    assert asked.raw == json.dumps({"n": 8}) and asked.calls == 2 and asked.error is None
    openai_double.script([json_reply({"n": 9})])
    assert ask_json(model, ASK, SCHEMA, small, max_tokens=50, retries=0).calls == 1  # one call, no retry
    assert len(openai_double.requests) == 3


def test_a_cut_answer_is_read_when_the_caller_reads_cut_answers(openai_double, model):
    openai_double.script([reply('{"n": 4} and then', finish_reason="length")])
    asked = ask_json(model, ASK, SCHEMA, lambda c: c.finish_reason, max_tokens=5, read="completion", cut_ok=True)
    assert asked.ok and asked.value == "length" and asked.truncated == 1 and asked.calls == 1


def test_a_failed_call_is_not_asked_again_and_is_handed_back(openai_double, model):
    openai_double.script([status(404, "The model does not exist")])
    asked = ask_json(model, ASK, SCHEMA, small, max_tokens=50, retries=3)
    assert not asked.ok and asked.error is not None and asked.problem.startswith("the model failed: ")
    assert asked.attempts == 1 and asked.calls == 0 and len(openai_double.requests) == 1


def test_a_spent_budget_and_an_unreachable_server_stop_the_caller(openai_double, model):
    budget = BudgetedModel(model, max_calls=1)
    openai_double.script([json_reply({"n": 9})], then=json_reply({"n": 9}))
    with pytest.raises(BudgetExceeded):
        ask_json(budget, ASK, SCHEMA, small, max_tokens=50, retries=1)  # the retry is the second call
    gone = RetryingModel(OpenAIChatModel("m", base_url="http://127.0.0.1:9/v1", timeout_s=1), attempts=1)
    with pytest.raises(LLMUnreachable):
        ask_json(gone, ASK, SCHEMA, small, max_tokens=50)

