"""Slow and weak models behind the rater (issue 13): the real RaterClient, the in-process rater with the LLM
backend, the real openai client, and a scripted OpenAI-compatible server on 127.0.0.1 that answers slowly,
cuts batch answers at max_tokens, or rates badly.

Timeouts are scaled down (a model call of 1.5 s against a client timeout of 1 s instead of 30 s against
30 s): what is tested is that the client's wait follows from the model's settings."""

import logging
import socket

import pytest
import requests

from rater_server import ThreadedServer, create_app
from rater_server.cli import main as rater_main
from simulacra.config import load_config
from simulacra.errors import RaterError
from simulacra.llm import OpenAIChatModel, RetryingModel, UsageMeter, call_time_bound_s
from simulacra.rater import RaterClient, connect_rater
from simulacra.rating.backends import load_examples
from simulacra.rating.llm import ITEM_TOKENS, LLMRater, batch_tokens, even_chunks
from simulacra.rating.quality import QualityCheck, check_sample, score
from simulacra.simulation import Simulation
from tests.conftest import DATA
from tests.openai_double import RatingModel

pytest_plugins = ["tests.openai_double"]

MEMORIES = [f"{name} {deed} at the {place}." for name, deed, place in zip(
    ["Ann", "Ben", "Cal", "Dora", "Eli", "Fay", "Gus", "Hana", "Ivo", "Jun", "Kofi", "Lena", "Milo", "Nia", "Oren",
     "Pia", "Quin"],
    ["sweeps the step", "loses his job", "waters the beans", "finds a lost ring", "breaks an arm", "sings a song",
     "buys candles", "hears her sister will marry", "mends a net", "drops a jug", "burns his hand", "reads a letter",
     "wins the fair", "feeds the hens", "argues with a friend", "counts coins", "paints a fence"],
    ["mill", "square", "well", "shop", "forge", "inn", "bakery", "church", "river", "field", "forge", "post office",
     "fairground", "farm", "tavern", "bank", "garden"])]
LABELS = dict(load_examples())


def own_rating(text: str, position: int) -> int:
    """What the double rates a memory: fixed per text, so any other number means someone else answered."""
    return 1 + sum(map(ord, text)) % 10


def free_url() -> str:
    with socket.socket() as s:  # nothing answers there, so connect_rater rates in-process
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}/rate"


def model(url: str, timeout_s: float = 4.0, attempts: int = 2) -> UsageMeter:
    return UsageMeter(RetryingModel(OpenAIChatModel("double-model", base_url=url, timeout_s=timeout_s),
                                    attempts=attempts, initial_wait_s=0.01, max_wait_s=0.05))


def test_the_time_bound_of_a_model_call_follows_from_its_settings(openai_double):
    adapter = OpenAIChatModel("double-model", base_url=openai_double.url, timeout_s=30)
    stack = UsageMeter(RetryingModel(adapter, attempts=4, max_wait_s=20))
    assert call_time_bound_s(stack) == 4 * 2 * 30 + 3 * 20  # response_format support not known yet: 2 requests
    adapter.response_format_supported = True
    assert call_time_bound_s(stack) == 4 * 30 + 3 * 20
    assert call_time_bound_s(adapter) == 30
    assert call_time_bound_s(object()) is None


def test_batches_are_even_and_max_tokens_follows_the_number_of_items():
    assert [len(c) for c in even_chunks(MEMORIES, 16)] == [9, 8]
    assert [len(c) for c in even_chunks(MEMORIES[:16], 16)] == [16]
    assert sum(even_chunks(MEMORIES, 5), []) == MEMORIES
    assert batch_tokens(16) == 16 * ITEM_TOKENS + 60 and batch_tokens(1) < batch_tokens(2)


def test_a_slow_model_makes_a_slow_run_not_a_dead_one(openai_double, rater_backend, embedder):
    """Each model call takes 1.5 s, longer than the client's own 1 s timeout; batches are cut at max_tokens."""
    double = RatingModel(own_rating, fits=lambda n, max_tokens: (max_tokens - 60) // 80, latency_s=1.5)
    openai_double.script([], then=double)
    waits = []
    backend = LLMRater(model(openai_double.url), rater_backend, batch_size=16)
    server = ThreadedServer(create_app(backend))  # a rater served over HTTP (simulacra rater) with this model
    client = connect_rater(server.url, 1.0, False, embedder, wait_report_s=0.5,
                           on_wait=lambda what, elapsed, limit: waits.append((what, elapsed, limit)))
    try:
        assert isinstance(client, RaterClient)
        # the bound is derived from the model's settings: 2 tries of (2 requests x 4 s) + one wait <= 0.05 s
        assert client.model_call_s == pytest.approx(2 * 2 * 4.0 + 0.05)
        assert client.request_timeout_s(31) == pytest.approx(1.0 + 31 * client.model_call_s)
        memories = MEMORIES[:16]
        assert client.rate_many(memories) == [own_rating(m, 0) for m in memories]
        # 16 asked: 12 fit in 1020 tokens, then the other 4 (3 fit in 300), then the last one alone
        assert double.batches == [(16, batch_tokens(16), 12), (4, batch_tokens(4), 3)]
        assert double.singles == [memories[-1]]
        assert double.rated == dict.fromkeys(memories, 1)  # every memory rated once: nothing asked again whole
        assert client.truncations == 2 and client.model_calls == 3 and client.model_fallbacks == 0
        health = requests.get(client.url.rsplit("/", 1)[0] + "/health", timeout=5).json()
        assert health["counts"]["truncations"] == 2 and health["counts"]["fallbacks"] == 0
        assert health["counts"]["batch_items_resumed"] == 5
        # the server took response_format: from now on one request per try
        assert health["limits"] == {"model_call_s": pytest.approx(2 * 4.0 + 0.05), "model_calls_per_memory": 2}
        # progress while waiting: reported with what is waited for, the time so far and the limit
        assert waits and all(w[0] == "rating 16 memories" and w[2] == client.request_timeout_s(31) for w in waits)
        assert [w[1] for w in waits] == sorted(w[1] for w in waits)
        assert client.slow_requests == 1 and client.report(refresh=False)["truncations"] == 2
        # without the derived bound, the client's own timeout gives up on the same rater
        plain = RaterClient(client.url, timeout_s=1.0, attempts=1, token="", wait_report_s=0)
        with pytest.raises(RaterError, match="timed out"):
            plain.rate_many(["Pia counts the coins of the harvest fair."])
        plain.close()
    finally:
        client.close()
        server.close()


def test_a_cut_answer_with_no_complete_item_is_split_in_halves(openai_double, rater_backend):
    double = RatingModel(own_rating, fits=lambda n, max_tokens: 0 if n > 4 else n)
    openai_double.script([], then=double)
    backend = LLMRater(model(openai_double.url), rater_backend, batch_size=16)
    ratings, usage = backend.rate_with_usage(MEMORIES[:16])
    assert [r.rating for r in ratings] == [own_rating(m, 0) for m in MEMORIES[:16]]
    assert [b[0] for b in double.batches] == [16, 8, 4, 4, 8, 4, 4]
    assert double.rated == dict.fromkeys(MEMORIES[:16], 1)
    assert usage["truncations"] == 3 and usage["llm_calls"] == 7 and usage["fallbacks"] == 0
    assert usage["llm_calls"] <= 2 * 16 - 1  # the bound the client waits for


def test_a_complete_answer_missing_items_asks_them_one_by_one(openai_double, rater_backend):
    double = RatingModel(own_rating, fits=lambda n, max_tokens: n - 2, cut=False)
    openai_double.script([], then=double)
    backend = LLMRater(model(openai_double.url), rater_backend, batch_size=8)
    ratings, usage = backend.rate_with_usage(MEMORIES[:8])
    assert [r.rating for r in ratings] == [own_rating(m, 0) for m in MEMORIES[:8]]
    assert double.singles == MEMORIES[6:8] and usage["truncations"] == 0 and usage["llm_calls"] == 3
    assert backend.stats()["batch_items_retried"] == 2


def in_order(text: str, position: int) -> int:
    """The useless answers seen in issue 13: the memories of a batch rated 1, 2, 3, ... in order."""
    return min(10, position)


def near_labels(text: str, position: int) -> int:
    """A fair model: the label, off by one on every third memory."""
    return max(1, min(10, LABELS[text] + (1 if position % 2 else -1) * (position % 3 == 0)))


def test_the_check_sample_is_fixed_spread_and_shuffled():
    sample = check_sample(24)
    assert sample == check_sample(24) and len(set(sample)) == 24
    assert {r for _, r in sample} == set(range(1, 11))  # every rating present
    assert [r for _, r in sample] != sorted(r for _, r in sample)
    assert score([None, None, 3, 4], [1, 2, 3, 4], 0.3)["reason"] == "only 2 answers parsed"
    assert score([5, 5, 5, 5], [1, 2, 3, 4], 0.3)["reason"] == "its ratings do not vary"


def test_a_weak_model_is_noticed_and_replaced_by_the_offline_rater(openai_double, rater_backend, embedder, caplog):
    double = RatingModel(in_order)
    openai_double.script([], then=double)
    backend = LLMRater(model(openai_double.url), rater_backend, batch_size=16,
                       check=QualityCheck(sample=24, min_spearman=0.3, on_weak_model="offline"))
    with caplog.at_level(logging.WARNING):
        client = connect_rater(free_url(), 5.0, True, embedder, backend=backend, wait_report_s=0)
    try:
        quality = client.model_quality()
        assert quality["sample"] == 24 and quality["parsed"] == 24 and quality["weak"]
        assert quality["spearman"] < 0.3 and quality["using"] == "offline" and "below rater.min_spearman" in quality[
            "reason"]
        assert [b[0] for b in double.batches] == [12, 12]  # the check: 24 labelled memories in two even batches
        assert "WEAK" in caplog.text and "offline backend instead" in caplog.text
        asked = len(openai_double.requests)
        got = client.rate_many(MEMORIES)
        assert got == [r.rating for r in rater_backend.rate(MEMORIES)]  # the offline rater answered
        assert len(openai_double.requests) == asked  # and the model was not asked
        health = client.backend.health()
        assert health["using"] == "offline" and health["quality"]["weak"]
        assert "WEAK" in client.report()["quality_line"]
    finally:
        client.close()


def test_a_fair_model_passes_the_check_and_keeps_rating(openai_double, rater_backend):
    double = RatingModel(near_labels)
    openai_double.script([], then=double)
    backend = LLMRater(model(openai_double.url), rater_backend, batch_size=16,
                       check=QualityCheck(sample=24, min_spearman=0.3, on_weak_model="offline"))
    quality = backend.ensure_checked()
    assert quality["parsed"] == 24 and quality["spearman"] > 0.8 and not quality["weak"]
    assert quality["using"] == "model" and backend.use_model
    assert backend.ensure_checked() is quality and len(double.batches) == 2  # measured once
    text = next(t for t in LABELS if t not in dict(check_sample(24)))
    assert backend.rate([text])[0].rating == near_labels(text, 1) and double.singles == [text]  # the model rates


def test_a_weak_model_with_warn_is_still_used(openai_double, rater_backend, caplog):
    openai_double.script([], then=RatingModel(in_order))
    backend = LLMRater(model(openai_double.url), rater_backend, check=QualityCheck(sample=12, on_weak_model="warn"))
    with caplog.at_level(logging.WARNING):
        assert backend.ensure_checked()["weak"]
    assert backend.use_model and "still used" in caplog.text


@pytest.mark.parametrize("rating, status, verdict", [(near_labels, 0, ": ok (floor 0.3)"), (in_order, 1, "WEAK")])
def test_cli_rater_check_prints_the_figures(openai_double, capsys, rating, status, verdict):
    openai_double.script([], then=RatingModel(rating))
    code = rater_main(["--check", "--set", "llm.model=double-model", "--set", f"llm.base_url={openai_double.url}",
                 "--set", "llm.attempts=1", "--set", "rater.check_sample=20"])
    out = capsys.readouterr().out
    assert code == status
    assert "parsed:       20 of 20 answers" in out and "Spearman:" in out and verdict in out
    assert len(openai_double.requests) == 2  # 20 memories: two batches of 10


def test_cli_rater_check_without_a_model_says_what_to_set(capsys, monkeypatch):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    assert rater_main(["--check"]) == 2
    assert "no model to check: set llm.model" in capsys.readouterr().err


def test_a_town_runs_to_its_end_behind_a_slow_truncating_model(openai_double, embedder, tmp_path):
    """Every model call takes longer than the rater client's own timeout; the run finishes all its ticks."""
    double = RatingModel(own_rating, fits=lambda n, max_tokens: max(1, n // 2), latency_s=1.2)
    openai_double.script([], then=double)
    config = load_config(None, [f"rater.url={free_url()}", "rater.timeout_s=1", "llm.model=double-model",
                                f"llm.base_url={openai_double.url}", "llm.timeout_s=4", "llm.attempts=2",
                                "cognition.backend=scripted"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="slow", embedder=embedder) as sim:
        summary = sim.run(2)
        report = sim.rater.report()
    assert summary["ticks"] == 2 and not summary["stopped"]
    assert report["truncations"] >= 1 and report["model_fallbacks"] == 0
    assert set(double.rated.values()) == {1}  # no memory rated twice


def test_a_town_behind_a_model_that_answers_after_45_seconds_finishes(openai_double, embedder, tmp_path):
    """The case of the issue, unscaled: every model call takes 45 s (more than the rater client's 30 s default) and
    batch answers are cut at max_tokens; the run finishes its tick, with the truncations counted."""
    double = RatingModel(own_rating, fits=lambda n, max_tokens: max(1, (n + 1) // 2), latency_s=45.0)
    openai_double.script([], then=double)
    config = load_config(None, [f"rater.url={free_url()}", "llm.model=double-model",
                                f"llm.base_url={openai_double.url}", "llm.timeout_s=60", "llm.attempts=1",
                                "rater.check_sample=0", "cognition.backend=scripted"])
    with Simulation.create(DATA / "tiny.yaml", config, personas_dir=DATA / "personas", db_dir=tmp_path,
                           run_name="slow45", embedder=embedder, agents=["ann"]) as sim:
        summary = sim.run(1)
    assert summary["ticks"] == 1 and not summary["stopped"]
    assert summary["rater"]["truncations"] >= 1 and summary["rater"]["model_fallbacks"] == 0
    assert summary["rater"]["waited_s"] >= 45
    assert set(double.rated.values()) == {1}  # every memory rated once, none asked again whole


def test_a_wait_for_a_rater_without_a_model_names_no_model_and_no_limit(caplog):
    """The default wait report: with a model's limit it names the slow model and the limit; with none (the offline
    backend, limit 0) it says only what is waited for and for how long (it said "its language model is slow ...
    waits up to 0 s" before)."""
    from simulacra.rater import _log_wait

    with caplog.at_level(logging.WARNING, logger="simulacra.rater"):
        _log_wait("rating 1000 memories", 12.0, 0.0)
        _log_wait("rating 8 memories", 31.0, 90.0)
    offline, model = (r.getMessage() for r in caplog.records)
    assert offline == "waiting for the rater (rating 1000 memories): 12 s so far"
    assert "language model is slow" in model and "up to 90 s" in model
