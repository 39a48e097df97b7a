"""OpenAIChatModel reads a server's ``usage`` block as advisory and says when a reply had no choices.

Over real HTTP to the scripted OpenAI-compatible server of :mod:`tests.openai_double`, with a raw-JSON answer
added (a server can send any body; the double's :class:`~tests.openai_double.Reply` only sends well-formed ones).
"""

from __future__ import annotations

import logging
from typing import Any

import pytest

from simulacra.llm import OpenAIChatModel
from tests.openai_double import MODEL, OpenAIDouble, reply

ASK = [{"role": "user", "content": "Rate: I ate breakfast."}]
LOGGER = "simulacra.llm.openai_model"


class RawDouble(OpenAIDouble):
    """The double, also answering a scripted ``dict`` as that exact JSON body (HTTP 200)."""

    def _answer(self, scripted: Any, body: dict, number: int):
        if isinstance(scripted, dict):
            return self._json(200, scripted)
        return super()._answer(scripted, body, number)


def completion(content: str | None = "7", usage: Any = None, choices: list | None = None) -> dict:
    answer: dict[str, Any] = {
        "id": "chatcmpl-raw", "object": "chat.completion", "created": 1700000000, "model": MODEL,
        "choices": choices if choices is not None else [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
    }
    if usage is not None:
        answer["usage"] = usage
    return answer


@pytest.fixture
def double():
    with RawDouble() as server:
        yield server


@pytest.fixture
def model(double):
    m = OpenAIChatModel(MODEL, base_url=double.url, api_key="sk-test", timeout_s=5)
    yield m
    m.close()


def test_a_usage_block_with_a_word_and_a_null_returns_the_text_and_counts_zero_tokens(double, model, caplog):
    double.script([completion("7", {"prompt_tokens": "many", "completion_tokens": None})])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = model.complete(ASK)
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("7", 0, 0)
    warnings = [r.getMessage() for r in caplog.records if r.name == LOGGER and r.levelno == logging.WARNING]
    assert any("usage.prompt_tokens" in w and "'many'" in w for w in warnings), warnings
    assert any("usage.completion_tokens" in w for w in warnings), warnings


@pytest.mark.parametrize("usage, counts", [
    ({"prompt_tokens": -5, "completion_tokens": 3}, (0, 3)),
    ({"prompt_tokens": 1.5, "completion_tokens": True}, (0, 0)),
    ({"prompt_tokens": 12.0, "completion_tokens": "4"}, (12, 0)),
    ({"completion_tokens": 2}, (0, 2)),
    ({"prompt_tokens": [1], "completion_tokens": {"n": 1}}, (0, 0)),
    ({}, (0, 0)),
    ({"prompt_tokens": 11, "completion_tokens": 2}, (11, 2)),
])
def test_bad_or_missing_counts_in_a_usage_block_count_zero(double, model, usage, counts):
    double.script([completion("ok", usage)])
    out = model.complete(ASK)
    assert out.text == "ok" and (out.prompt_tokens, out.completion_tokens) == counts


def test_each_bad_field_is_warned_about_once_per_model(double, model, caplog):
    bad = completion("7", {"prompt_tokens": "many", "completion_tokens": 1})
    double.script([bad, bad, bad])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):
            assert model.complete(ASK).prompt_tokens == 0
    warned = [r for r in caplog.records if r.name == LOGGER and "usage.prompt_tokens" in r.getMessage()]
    assert len(warned) == 1


def test_no_usage_block_still_counts_zero_without_a_warning(double, model, caplog):
    double.script([completion("7")])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = model.complete(ASK)
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("7", 0, 0)
    assert not [r for r in caplog.records if r.name == LOGGER]


def test_good_usage_after_bad_is_counted(double, model):
    double.script([completion("a", {"prompt_tokens": "many"}), reply("b", prompt_tokens=9, completion_tokens=1)])
    assert model.complete(ASK).prompt_tokens == 0
    out = model.complete(ASK)
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("b", 9, 1)


def test_a_reply_without_choices_is_an_empty_answer_logged_as_having_no_choices(double, model, caplog):
    double.script([completion(usage={"prompt_tokens": 5, "completion_tokens": 0}, choices=[])])
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        out = model.complete(ASK)
    assert (out.text, out.finish_reason, out.prompt_tokens) == ("", None, 5)
    messages = [r.getMessage() for r in caplog.records if r.name == LOGGER]
    assert any("no choices" in m and double.url in m for m in messages), messages
