"""The rater's HTTP contract, over real HTTP to the Flask app on 127.0.0.1."""

import json

import pytest
import requests

from simulacra.rater import RaterClient, connect_rater


def post(url, body=None, raw=None, headers=None):
    if raw is not None:
        return requests.post(url, data=raw, headers=headers or {"Content-Type": "application/json"}, timeout=30)
    return requests.post(url, json=body, timeout=30)


def test_rates_a_memory(rater_url):
    r = post(rater_url, {"memory": "I brushed my teeth and made the bed."})
    assert r.status_code == 200
    body = r.json()
    assert isinstance(body["rating"], int) and 1 <= body["rating"] <= 10
    assert isinstance(body["explanation"], str) and body["explanation"]


def test_poignant_memories_rate_above_mundane_ones(rater_url):
    mundane = post(rater_url, {"memory": "I brushed my teeth and made my bed."}).json()["rating"]
    poignant = post(rater_url, {"memory": "My mother died in the night and I held her hand."}).json()["rating"]
    assert mundane <= 3 and poignant >= 8


def test_identical_memories_come_from_the_cache(rater_url):
    text = "A goat wandered into the schoolroom during the spelling test."
    first = post(rater_url, {"memory": text}).json()
    hits = requests.get(rater_url.replace("/rate", "/health"), timeout=5).json()["counts"]["cache_hits"]
    assert post(rater_url, {"memory": text}).json() == first
    assert requests.get(rater_url.replace("/rate", "/health"), timeout=5).json()["counts"]["cache_hits"] == hits + 1


@pytest.mark.parametrize(
    "raw, needle",
    [
        (b"{not json", "malformed JSON"),
        (b"", "empty body"),
        (b"[1, 2]", "expected a JSON object"),
        (b"\xff\xfe", "malformed JSON"),
    ],
)
def test_malformed_bodies_get_400(rater_url, raw, needle):
    r = post(rater_url, raw=raw)
    assert r.status_code == 400
    assert needle in r.json()["error"]


@pytest.mark.parametrize(
    "body, message",
    [
        ({}, "missing field 'memory'"),
        ({"text": "hello"}, "missing field 'memory'"),
        ({"memory": ""}, "field 'memory' is empty"),
        ({"memory": "   "}, "field 'memory' is empty"),
        ({"memory": 7}, "field 'memory'"),
        ({"memory": ["a"]}, "field 'memory'"),
        ({"memory": None}, "field 'memory'"),
        ({"memory": "ok", "agent": 3}, "field 'agent'"),
    ],
)
def test_invalid_fields_get_400_naming_the_field(rater_url, body, message):
    r = post(rater_url, body)
    assert r.status_code == 400
    assert message in r.json()["error"]


def test_batch_endpoint(rater_url):
    memories = ["I made tea.", "Our house burned down tonight.", "I made tea."]
    r = post(rater_url + "/batch", {"memories": memories})
    assert r.status_code == 200
    ratings = r.json()["ratings"]
    assert len(ratings) == 3 and ratings[0] == ratings[2]
    assert ratings[1]["rating"] > ratings[0]["rating"]
    bad = post(rater_url + "/batch", {"memories": ["fine", ""]})
    assert bad.status_code == 400 and "memories.1" in bad.json()["error"]
    assert post(rater_url + "/batch", {"memories": []}).status_code == 400


def test_health_unknown_route_wrong_method_and_size_limit(rater_url):
    base = rater_url.rsplit("/rate", 1)[0]
    health = requests.get(base + "/health", timeout=5).json()
    assert health["status"] == "ok" and health["backend"] == "offline-embedding"
    assert {"cache_size", "counts", "model"} <= set(health)
    nf = requests.get(base + "/nope", timeout=5)
    assert nf.status_code == 404 and "error" in nf.json()
    wm = requests.get(rater_url, timeout=5)
    assert wm.status_code == 405 and "error" in wm.json()
    big = post(rater_url, raw=json.dumps({"memory": "x" * 2_000_000}).encode())
    assert big.status_code == 413 and "error" in big.json()


def test_client_rates_in_one_batch_and_caches(rater_url):
    client = RaterClient(rater_url)
    ratings = client.rate_many(["I fed the hens.", "I fed the hens.", "The bridge collapsed under a cart."])
    assert ratings[0] == ratings[1] and client.requests_sent == 1
    client.rate_many(["I fed the hens."])
    assert client.requests_sent == 1


def test_a_tick_of_more_memories_than_one_request_may_carry_is_rated_in_several(rater_url):
    """A large town's tick has more new memories than the server takes in one batch (``MAX_BATCH``, its 400
    otherwise): the client splits them in requests of ``CLIENT_BATCH``, in order, and every memory gets its own
    rating."""
    from simulacra.rating import CLIENT_BATCH, MAX_BATCH

    too_many = post(rater_url + "/batch", {"memories": [f"I counted sheep number {i}." for i in range(MAX_BATCH + 1)]})
    assert too_many.status_code == 400 and "memories" in too_many.json()["error"]
    client = RaterClient(rater_url)
    texts = [f"Resident {i} saw the mill wheel stop." if i % 3 else f"Resident {i} ate bread." for i in
             range(2 * MAX_BATCH + 5)]
    ratings = client.rate_many(texts)
    assert CLIENT_BATCH <= MAX_BATCH and client.requests_sent == -(-len(texts) // CLIENT_BATCH)
    assert len(ratings) == len(texts)
    alone = RaterClient(rater_url)
    assert [alone.rate_many([t])[0] for t in (texts[0], texts[1], texts[-1])] == [ratings[0], ratings[1],
                                                                                ratings[-1]]


def test_waiting_for_a_rater_without_a_model_reports_no_model_limit(rater_url):
    """Over HTTP the offline rater (no model, no ``limits`` in its health) is reported as waited for without a
    limit (0), so the default report does not blame a language model it does not have (a 1,000-resident bench
    read "its language model is slow ... up to 30 s" while the offline rater embedded 999 memories)."""
    waits = []
    client = RaterClient(rater_url, wait_report_s=0.001, on_wait=lambda *w: waits.append(w))
    client.refresh_limits()
    assert client.model_call_s is None
    client.rate_many([f"Resident {i} swept the bakery floor at dawn." for i in range(200)])
    assert waits and all(w[0] == "rating 200 memories" and w[2] == 0.0 for w in waits)


def test_connect_rates_in_process_when_nothing_answers(embedder):
    import socket

    from simulacra.rater import InProcessRater

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/rate"
    client = connect_rater(url, 10, True, embedder)
    assert isinstance(client, InProcessRater) and client.backend.name == "offline-embedding"
    assert 1 <= client.rate_many(["I watered the tomatoes."])[0] <= 10
    with socket.socket() as s:  # and it opened no port: the one looked at is still free
        s.bind(("127.0.0.1", port))


def test_connect_refuses_remote_urls_that_do_not_answer(embedder):
    from simulacra.errors import RaterError

    with pytest.raises(RaterError, match="no rater answers"):
        connect_rater("http://127.0.0.1:9/rate", 1, False, embedder)
