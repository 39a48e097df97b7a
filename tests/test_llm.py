"""simulacra.llm through the real openai client and real HTTP to a scripted server on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time

import pytest

from simulacra.config import Config, LLMConfig, load_config
from simulacra.errors import ConfigError, SimulacraError
from simulacra.llm import (
    CALLS_FILE,
    BudgetedModel,
    BudgetExceeded,
    Completion,
    LanguageModel,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    OpenAIChatModel,
    RecordingModel,
    RetryingModel,
    UsageMeter,
    build_model,
    extract_json,
    unwrap,
)
from tests.conftest import ROOT
from tests.openai_double import (
    MODEL,
    bare_number,
    empty,
    garbage,
    hang,
    if_response_format,
    json_reply,
    null_content,
    prose_json,
    rate_limited,
    rejects_response_format,
    reply,
    server_error,
    status,
)

pytest_plugins = ["tests.openai_double"]  # the openai_double fixture

ASK = [{"role": "system", "content": "Rate memories 1..10."}, {"role": "user", "content": "I ate breakfast."}]
SCHEMA = {"title": "Rating", "type": "object", "properties": {"rating": {"type": "integer"}}, "required": ["rating"]}


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch):
    for name in ("OPENAI_MODEL", "OPENAI_BASE_URL", "OPENAI_API_KEY", "MY_LLM_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def adapter(openai_double):
    model = OpenAIChatModel(MODEL, base_url=openai_double.url, api_key="sk-test", timeout_s=5)
    yield model
    model.close()


def no_wait_retrying(inner, attempts=4, max_wait_s=20.0):
    """A RetryingModel whose waits are recorded, not slept."""
    waits: list[float] = []
    model = RetryingModel(inner, attempts=attempts, initial_wait_s=0.01, max_wait_s=max_wait_s, sleep=waits.append)
    return model, waits


# --- the adapter -------------------------------------------------------------------------------------------


def test_good_answer_and_usage_are_parsed(openai_double, adapter):
    openai_double.script([reply('{"rating": 7}', prompt_tokens=42, completion_tokens=5, model="served-model")])
    out = adapter.complete(ASK)
    assert isinstance(out, Completion)
    assert out.text == '{"rating": 7}'
    assert (out.prompt_tokens, out.completion_tokens) == (42, 5)
    assert out.model == "served-model" and out.finish_reason == "stop"
    assert 0 < out.latency_s < 5
    assert adapter.name == f"openai:{MODEL}" and isinstance(adapter, LanguageModel)


def test_parameters_are_sent(openai_double, adapter):
    openai_double.script([json_reply({"rating": 3}), reply("plain")])
    adapter.complete(ASK, max_tokens=64, temperature=0.7, seed=3, json_schema=SCHEMA)
    adapter.complete(ASK)
    first, second = openai_double.requests
    assert first["model"] == MODEL and first["messages"] == ASK
    assert (first["max_tokens"], first["temperature"], first["seed"]) == (64, 0.7, 3)
    assert first["response_format"] == {"type": "json_schema", "json_schema": {"name": "Rating", "schema": SCHEMA}}
    assert (second["max_tokens"], second["temperature"]) == (256, 0.0)
    assert "seed" not in second and "response_format" not in second
    assert openai_double.headers[0]["authorization"] == "Bearer sk-test"
    assert adapter.response_format_supported is True


def test_json_mode_off_never_asks_for_response_format(openai_double):
    openai_double.script([reply("{}")])
    model = OpenAIChatModel(MODEL, base_url=openai_double.url, json_mode="off")
    model.complete(ASK, json_schema=SCHEMA)
    assert "response_format" not in openai_double.requests[0]


def test_rejected_response_format_is_dropped_and_remembered(openai_double, adapter):
    openai_double.script([], then=if_response_format(rejects_response_format(), json_reply({"rating": 4})))
    assert adapter.complete(ASK, json_schema=SCHEMA).text == '{"rating": 4}'
    assert adapter.complete(ASK, json_schema=SCHEMA).text == '{"rating": 4}'
    sent = ["response_format" in body for body in openai_double.requests]
    assert sent == [True, False, False]  # asked once, retried without, never asked again
    assert adapter.response_format_supported is False


def test_a_400_not_about_response_format_is_not_blamed_on_it(openai_double, adapter):
    openai_double.script([status(400, "messages[1].content is too long")] * 2)
    with pytest.raises(LLMRequestError, match="too long") as err:
        adapter.complete(ASK, json_schema=SCHEMA)
    assert err.value.status == 400
    assert ["response_format" in body for body in openai_double.requests] == [True, False]
    assert adapter.response_format_supported is None  # still unknown: asked again next time


@pytest.mark.parametrize(
    "scripted, text, parsed",
    [
        (json_reply({"rating": 7}), '{"rating": 7}', {"rating": 7}),
        (prose_json({"rating": 8}), None, {"rating": 8}),
        (bare_number(6), "6", 6),
        (garbage(), None, None),
        (empty(), "", None),
        (null_content(finish_reason="length"), "", None),
    ],
)
def test_any_content_comes_back_as_text(openai_double, adapter, scripted, text, parsed):
    openai_double.script([scripted])
    out = adapter.complete(ASK)
    if text is not None:
        assert out.text == text
    assert isinstance(out.text, str)
    assert extract_json(out.text) == parsed


def test_missing_usage_counts_zero_tokens(openai_double, adapter):
    openai_double.script([reply("7", usage=False)])
    out = adapter.complete(ASK)
    assert (out.text, out.prompt_tokens, out.completion_tokens) == ("7", 0, 0)


def test_the_openai_clients_own_retries_are_off(openai_double, adapter):
    openai_double.script([server_error(500)], then=reply("should not be reached"))
    with pytest.raises(LLMUnavailable):
        adapter.complete(ASK)
    assert len(openai_double.requests) == 1


@pytest.mark.parametrize("code, error, needle", [
    (401, LLMRequestError, "api_key_env"),
    (403, LLMRequestError, "403"),
    (404, LLMRequestError, "/v1"),
    (422, LLMRequestError, "422"),
    (408, LLMUnavailable, "408"),
    (429, LLMUnavailable, "429"),
    (500, LLMUnavailable, "500"),
    (502, LLMUnavailable, "502"),
    (503, LLMUnavailable, "503"),
])
def test_status_codes_map_to_errors_naming_status_model_and_url(openai_double, adapter, code, error, needle):
    openai_double.script([status(code, "the server's own words")])
    with pytest.raises(error) as err:
        adapter.complete(ASK)
    assert type(err.value) is error and err.value.status == code
    message = str(err.value)
    for part in (str(code), needle, openai_double.url, f"openai:{MODEL}", "the server's own words"):
        assert part in message


def test_exhausted_quota_is_not_a_rate_limit(openai_double, adapter):
    openai_double.script([status(429, "You exceeded your current quota", error_code="insufficient_quota")])
    with pytest.raises(LLMRequestError, match="quota"):
        adapter.complete(ASK)


def test_an_answer_that_is_not_a_chat_completion_is_a_request_error(openai_double, adapter):
    openai_double.script([status(200, raw="<html>the llama.cpp web UI</html>")])
    with pytest.raises(LLMRequestError, match="/v1"):
        adapter.complete(ASK)


def test_connection_refused_is_unavailable():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    model = OpenAIChatModel(MODEL, base_url=f"http://127.0.0.1:{port}/v1", timeout_s=2)
    with pytest.raises(LLMUnavailable, match=f"cannot connect.*|127.0.0.1:{port}") as err:
        model.complete(ASK)
    assert f"127.0.0.1:{port}/v1" in str(err.value) and "cannot connect" in str(err.value)
    assert err.value.status is None


# --- retries ----------------------------------------------------------------------------------------------


def test_429_with_retry_after_then_success(openai_double, adapter):
    openai_double.script([rate_limited(retry_after="2"), reply("ok")])
    model, waits = no_wait_retrying(adapter)
    assert model.complete(ASK).text == "ok"
    assert len(openai_double.requests) == 2
    assert model.retries == 1 and waits == [2.0]  # the server's Retry-After, not the 0.01 s backoff


def test_retry_after_is_capped_and_retry_after_ms_is_read(openai_double, adapter):
    openai_double.script([rate_limited(retry_after="3600"), status(429, headers={"retry-after-ms": "250"}),
                          reply("ok")])
    model, waits = no_wait_retrying(adapter, max_wait_s=1.5)
    assert model.complete(ASK).text == "ok"
    assert waits == [1.5, 0.25]
    assert model.retries == 2


def test_two_500s_then_success_backs_off_exponentially(openai_double, adapter):
    openai_double.script([server_error(500), server_error(500), reply("third time")])
    model, waits = no_wait_retrying(adapter, attempts=3)
    assert model.complete(ASK).text == "third time"
    assert len(openai_double.requests) == 3 and model.retries == 2 and model.gave_up == 0
    assert 0.01 <= waits[0] <= 0.02 and 0.02 <= waits[1] <= 0.03  # 0.01 * 2**n plus up to 0.01 jitter


def test_500_forever_gives_up_after_attempts_naming_status_and_url(openai_double, adapter):
    openai_double.script([], then=server_error(500))
    model, waits = no_wait_retrying(adapter, attempts=3)
    with pytest.raises(LLMUnavailable) as err:
        model.complete(ASK)
    assert len(openai_double.requests) == 3 and len(waits) == 2
    assert err.value.status == 500 and model.gave_up == 1
    message = str(err.value)
    assert "HTTP 500" in message and openai_double.url in message and "3 attempts" in message


def test_401_is_not_retried(openai_double, adapter):
    openai_double.script([status(401, "Incorrect API key provided")], then=reply("should not be reached"))
    model, waits = no_wait_retrying(adapter)
    with pytest.raises(LLMRequestError, match="401") as err:
        model.complete(ASK)
    assert "Incorrect API key" in str(err.value)
    assert len(openai_double.requests) == 1 and model.retries == 0 and waits == []


def test_a_hang_past_the_timeout_is_retried_then_unavailable(openai_double):
    openai_double.script([], then=hang(10))
    adapter = OpenAIChatModel(MODEL, base_url=openai_double.url, timeout_s=0.2)
    model = RetryingModel(adapter, attempts=2, initial_wait_s=0.01, max_wait_s=0.05)  # real sleeps, tiny
    start = time.perf_counter()
    with pytest.raises(LLMUnavailable, match="timeout") as err:
        model.complete(ASK)
    elapsed = time.perf_counter() - start
    assert len(openai_double.requests) == 2 and model.retries == 1
    assert openai_double.url in str(err.value) and "0.2 s" in str(err.value)
    assert elapsed < 2.0


def test_a_hang_then_an_answer_within_the_timeout(openai_double):
    openai_double.script([hang(0.05, then=reply("slow but fine"))])
    model = OpenAIChatModel(MODEL, base_url=openai_double.url, timeout_s=3)
    out = model.complete(ASK)
    assert out.text == "slow but fine" and out.latency_s >= 0.05


# --- budget -----------------------------------------------------------------------------------------------


def test_call_budget_stops_at_exactly_its_limit_without_reaching_the_server(openai_double, adapter):
    openai_double.script([], then=reply("ok"))
    model = BudgetedModel(adapter, max_calls=3)
    for _ in range(3):
        assert model.complete(ASK).text == "ok"
    with pytest.raises(BudgetExceeded) as err:
        model.complete(ASK)
    assert len(openai_double.requests) == 3
    message = str(err.value)
    assert "3 calls" in message and "llm.max_calls=3" in message and "--set llm.max_calls=" in message
    assert err.value.budget == "call"
    import pickle

    again = pickle.loads(pickle.dumps(err.value))  # as a worker's error reaches the driver
    assert (type(again), str(again), again.budget) == (BudgetExceeded, message, "call")
    assert isinstance(err.value, LLMError) and isinstance(err.value, SimulacraError)


def test_token_budget_is_checked_before_each_call(openai_double, adapter):
    openai_double.script([], then=reply("ok", prompt_tokens=40, completion_tokens=20))
    model = BudgetedModel(adapter, max_tokens=120)
    model.complete(ASK)  # 0 spent -> 60
    model.complete(ASK)  # 60 < 120 -> 120
    with pytest.raises(BudgetExceeded) as err:  # 120 spent >= 120: refused before sending
        model.complete(ASK)
    assert len(openai_double.requests) == 2 and model.tokens == 120
    assert "120 tokens" in str(err.value) and "llm.max_tokens=120" in str(err.value)
    assert "--set llm.max_tokens=" in str(err.value) and err.value.budget == "token"


def test_failed_calls_count_against_the_call_budget(openai_double, adapter):
    openai_double.script([server_error(503), reply("ok")])
    model = BudgetedModel(adapter, max_calls=2)
    with pytest.raises(LLMUnavailable):
        model.complete(ASK)
    model.complete(ASK)
    with pytest.raises(BudgetExceeded):
        model.complete(ASK)
    assert len(openai_double.requests) == 2


def test_unlimited_budget(openai_double, adapter):
    openai_double.script([], then=reply("ok"))
    model = BudgetedModel(adapter)
    for _ in range(5):
        model.complete(ASK)
    assert model.calls == 5 and len(openai_double.requests) == 5


def test_call_budget_holds_across_threads(openai_double, adapter):
    openai_double.script([], then=reply("ok"))
    model = BudgetedModel(adapter, max_calls=5)
    outcomes: list[str] = []
    lock = threading.Lock()

    def call():
        try:
            model.complete(ASK)
            result = "ok"
        except BudgetExceeded:
            result = "refused"
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=call) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert sorted(outcomes) == ["ok"] * 5 + ["refused"] * 7
    assert len(openai_double.requests) == 5


class Held:
    """A model whose calls wait for ``release`` (set ``entered`` first), each spending 30 + 5 tokens."""

    name = "fake:held"

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def complete(self, messages, *, max_tokens=256, temperature=0.0, seed=None, json_schema=None):
        self.entered.set()
        assert self.release.wait(10), "never released"
        return Completion("ok", "fake", 30, 5, 0.0, "stop")


def test_a_refusal_waits_for_the_calls_in_flight_and_counts_their_tokens():
    inner = Held()
    model = BudgetedModel(inner, max_calls=1)
    first = threading.Thread(target=model.complete, args=(ASK,))
    first.start()
    assert inner.entered.wait(10)  # call 1 of 1 is in flight: its tokens are not known yet
    refused: list[BaseException] = []

    def second():
        try:
            model.complete(ASK)
        except BudgetExceeded as err:
            refused.append(err)

    late = threading.Thread(target=second)
    late.start()
    late.join(0.3)  # the refusal is decided at once, but not reported before call 1 has finished
    inner.release.set()
    first.join(10), late.join(10)
    assert len(refused) == 1 and "after 1 calls and 35 tokens" in str(refused[0])
    assert (model.calls, model.tokens) == (1, 35)


def test_budget_refusal_is_not_retried(openai_double, adapter):
    openai_double.script([], then=reply("ok"))
    model, waits = no_wait_retrying(BudgetedModel(adapter, max_calls=1))
    model.complete(ASK)
    with pytest.raises(BudgetExceeded):
        model.complete(ASK)
    assert waits == [] and model.retries == 0


# --- recording and usage ----------------------------------------------------------------------------------


def test_recording_writes_one_json_line_per_call_including_failures(openai_double, adapter, tmp_path):
    path = tmp_path / "run" / CALLS_FILE
    openai_double.script([reply('{"rating": 5}', prompt_tokens=11, completion_tokens=3), server_error(502),
                          status(401, "bad key")])
    model = RecordingModel(adapter, path)
    model.complete(ASK, max_tokens=32, seed=9, json_schema=SCHEMA)
    with pytest.raises(LLMUnavailable):
        model.complete(ASK)
    with pytest.raises(LLMRequestError):
        model.complete(ASK)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 3 and model.lines == 3
    good, unavailable, rejected = (json.loads(line) for line in lines)
    assert good["messages"] == ASK and good["answer"] == '{"rating": 5}' and good["error"] is None
    assert (good["prompt_tokens"], good["completion_tokens"], good["max_tokens"], good["seed"]) == (11, 3, 32, 9)
    assert good["model"] == f"openai:{MODEL}" and good["json_schema"] == SCHEMA and good["latency_s"] > 0
    assert good["time"].endswith("+00:00")
    assert unavailable["answer"] is None and unavailable["error"].startswith("LLMUnavailable:")
    assert "502" in unavailable["error"] and unavailable["prompt_tokens"] is None
    assert rejected["error"].startswith("LLMRequestError:") and "401" in rejected["error"]


def test_recording_is_thread_safe(openai_double, adapter, tmp_path):
    path = tmp_path / CALLS_FILE
    openai_double.script([], then=reply("x" * 2000))
    model = RecordingModel(adapter, path)
    threads = [threading.Thread(target=model.complete, args=(ASK,)) for _ in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 10 and all(json.loads(line)["answer"] == "x" * 2000 for line in lines)


def test_usage_meter_sums_tokens_and_prices_them(openai_double, adapter):
    openai_double.script([reply("a", prompt_tokens=1000, completion_tokens=200), server_error(500),
                          reply("b", prompt_tokens=500, completion_tokens=100)])
    meter = UsageMeter(adapter, prompt_price_per_1k=0.15, completion_price_per_1k=0.6)
    meter.complete(ASK)
    with pytest.raises(LLMUnavailable):
        meter.complete(ASK)
    meter.complete(ASK)
    report = meter.report()
    assert set(report) == {"calls", "failures", "prompt_tokens", "completion_tokens", "cost_usd", "mean_latency_s"}
    assert (report["calls"], report["failures"]) == (3, 1)
    assert (report["prompt_tokens"], report["completion_tokens"]) == (1500, 300)
    assert report["cost_usd"] == pytest.approx(1.5 * 0.15 + 0.3 * 0.6)
    assert 0 < report["mean_latency_s"] < 5
    assert "3 calls (1 failed)" in meter.summary() and "$0.4050" in meter.summary()


def test_usage_meter_with_no_calls():
    class Never:
        name = "never"

        def complete(self, messages, **kw):  # pragma: no cover - not called
            raise AssertionError

    assert UsageMeter(Never()).report() == {"calls": 0, "failures": 0, "prompt_tokens": 0, "completion_tokens": 0,
                                            "cost_usd": 0.0, "mean_latency_s": 0.0}


# --- build_model, config, environment ---------------------------------------------------------------------


def test_build_model_is_none_without_a_model():
    assert build_model(LLMConfig()) is None
    assert build_model(Config().llm) is None


def test_build_model_stacks_the_wrappers(openai_double, tmp_path):
    cfg = LLMConfig(model=MODEL, base_url=openai_double.url, max_calls=2, attempts=3,
                    prompt_price_per_1k=1.0, completion_price_per_1k=2.0)
    model = build_model(cfg, run_dir=tmp_path / "run")
    assert isinstance(model, UsageMeter) and isinstance(model, LanguageModel)
    chain = []
    m = model
    while m is not None:
        chain.append(type(m))
        m = getattr(m, "inner", None)
    assert chain == [UsageMeter, RetryingModel, BudgetedModel, RecordingModel, OpenAIChatModel]
    assert model.name == f"openai:{MODEL}"
    assert unwrap(model, RetryingModel).attempts == 3 and unwrap(model, BudgetedModel).max_calls == 2
    assert unwrap(model, OpenAIChatModel).base_url == openai_double.url

    retrying = unwrap(model, RetryingModel)
    retrying._sleep = lambda s: None  # no real backoff in the test
    openai_double.script([server_error(503), reply("ok", prompt_tokens=100, completion_tokens=10)])
    assert model.complete(ASK).text == "ok"  # one call, two requests: both count against max_calls=2
    with pytest.raises(BudgetExceeded):
        model.complete(ASK)
    assert len(openai_double.requests) == 2
    report = model.report()
    assert (report["calls"], report["failures"], report["prompt_tokens"]) == (2, 1, 100)
    assert report["cost_usd"] == pytest.approx(0.1 + 0.02)
    lines = [json.loads(x) for x in (tmp_path / "run" / CALLS_FILE).read_text().splitlines()]
    assert [x["error"] is None for x in lines] == [False, True]  # every request sent; the refusal sent none


def test_build_model_without_run_dir_records_nothing(openai_double):
    model = build_model(LLMConfig(model=MODEL, base_url=openai_double.url))
    assert unwrap(model, RecordingModel) is None and unwrap(model, BudgetedModel).max_calls is None


def test_environment_gives_the_endpoint_and_key_but_never_the_model(monkeypatch, openai_double):
    """OPENAI_BASE_URL and OPENAI_API_KEY say where and how to send; an OPENAI_MODEL left in the environment does
    not make a run use a (paid) model: the model is named in the config."""
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", openai_double.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert build_model(LLMConfig()) is None
    with pytest.raises(LLMError, match="OPENAI_MODEL is not read"):
        OpenAIChatModel()
    openai_double.script([reply("hi"), reply("hi")])
    direct = OpenAIChatModel("cfg-model")
    assert direct.name == "openai:cfg-model" and direct.base_url == openai_double.url
    direct.complete(ASK)
    built = build_model(LLMConfig(model="cfg-model"))
    assert built is not None and built.name == "openai:cfg-model"
    built.complete(ASK)
    assert [r["model"] for r in openai_double.requests] == ["cfg-model", "cfg-model"]
    assert [h["authorization"] for h in openai_double.headers] == ["Bearer sk-from-env"] * 2


def test_config_wins_over_environment(monkeypatch, openai_double):
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    openai_double.script([reply("hi")])
    model = build_model(LLMConfig(model="cfg-model", base_url=openai_double.url))
    model.complete(ASK)
    assert openai_double.requests[0]["model"] == "cfg-model"


def test_arguments_override_config_and_environment(monkeypatch, openai_double):
    monkeypatch.setenv("OPENAI_MODEL", "env-model")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    openai_double.script([reply("hi"), reply("hi")])
    build_model(LLMConfig(model="cfg-model", base_url="http://127.0.0.1:9/v1"), base_url=openai_double.url,
                model="arg-model").complete(ASK)
    assert build_model(LLMConfig(), base_url=openai_double.url) is None  # no model named: none from the environment
    assert [r["model"] for r in openai_double.requests] == ["arg-model"]


def test_the_local_provider_needs_a_server_address_and_nothing_else(monkeypatch, openai_double):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    monkeypatch.setenv("OPENAI_MODEL", "env-model-not-used")
    monkeypatch.delenv("UNSET_VARIABLE", raising=False)
    with pytest.raises(LLMError, match="start_local_model"):
        build_model(LLMConfig(provider="local"))
    openai_double.script([reply("hi")])
    model = build_model(LLMConfig(provider="local", api_key_env="UNSET_VARIABLE"), base_url=openai_double.url)
    assert model.complete(ASK).text == "hi"
    assert openai_double.requests[0]["model"] == "local"
    assert openai_double.headers[0]["authorization"] == "Bearer no-key-required"


def test_api_key_env_names_the_variable(monkeypatch, openai_double):
    monkeypatch.setenv("MY_LLM_KEY", "sk-custom")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-be-sent")
    openai_double.script([reply("hi")])
    build_model(LLMConfig(model=MODEL, base_url=openai_double.url, api_key_env="MY_LLM_KEY")).complete(ASK)
    assert openai_double.headers[0]["authorization"] == "Bearer sk-custom"
    monkeypatch.delenv("MY_LLM_KEY")
    with pytest.raises(LLMError, match="MY_LLM_KEY"):
        build_model(LLMConfig(model=MODEL, base_url=openai_double.url, api_key_env="MY_LLM_KEY"))


def test_a_local_server_needs_no_key(openai_double):
    openai_double.script([reply("hi")])
    build_model(LLMConfig(model=MODEL, base_url=openai_double.url)).complete(ASK)
    assert openai_double.headers[0]["authorization"] == "Bearer no-key-required"


def test_missing_model_or_key_are_clear_errors():
    with pytest.raises(LLMError, match="OPENAI_MODEL"):
        OpenAIChatModel()
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        OpenAIChatModel("gpt-4o-mini")
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        build_model(LLMConfig(model="gpt-4o-mini"))


def test_an_injected_client_gets_its_retries_switched_off(openai_double):
    import openai

    client = openai.OpenAI(api_key="sk-injected", base_url=openai_double.url, max_retries=5)
    openai_double.script([server_error(500)], then=reply("not reached"))
    model = OpenAIChatModel(MODEL, client=client, timeout_s=2)
    with pytest.raises(LLMUnavailable):
        model.complete(ASK)
    assert len(openai_double.requests) == 1 and openai_double.headers[0]["authorization"] == "Bearer sk-injected"


def test_llm_config_section(tmp_path):
    cfg = load_config(None, ["llm.model=llama3.1:8b", "llm.base_url=http://127.0.0.1:11434/v1", "llm.max_calls=50"])
    assert (cfg.llm.model, cfg.llm.base_url, cfg.llm.max_calls) == ("llama3.1:8b", "http://127.0.0.1:11434/v1", 50)
    assert Config().llm == LLMConfig() and LLMConfig().model is None and LLMConfig().json_mode == "auto"
    assert "llm" in Config().to_dict()
    with pytest.raises(ConfigError, match="llm.api_key"):
        load_config(None, ["llm.api_key=sk-secret"])  # no such field: keys never go in config files
    with pytest.raises(ConfigError, match="NAME of the environment variable"):
        config_file = tmp_path / "c.yaml"
        config_file.write_text("llm:\n  api_key_env: sk-proj-abc123\n")
        load_config(config_file)
    with pytest.raises(ConfigError, match="llm.json_mode"):
        load_config(None, ["llm.json_mode=always"])
    with pytest.raises(ConfigError, match="llm.attempts"):
        load_config(None, ["llm.attempts=0"])
    assert load_config(None, ["llm.model="]).llm.model is None


def test_importing_simulacra_llm_loads_no_openai_and_reads_no_environment():
    code = ("import os, sys\n"
            "import tenacity  # a dependency; it reads the environment itself (tornado's settings) when imported\n"
            "os.environ = None\n"  # any read of the environment by simulacra at import would fail
            "import simulacra.llm\n"
            "print('openai' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("text, value", [
    ('{"rating": 7}', {"rating": 7}),
    ("7", 7),
    ('  [1, 2]  ', [1, 2]),
    ('Sure!\n```json\n{"rating": 9}\n```', {"rating": 9}),
    ('I would say {"rating": 2, "why": "dull"} overall.', {"rating": 2, "why": "dull"}),
    ('{broken {"rating": 4}', {"rating": 4}),
    ("NaN", None),
    ("no json here", None),
    ("", None),
    (None, None),
])
def test_extract_json(text, value):
    assert extract_json(text) == value
