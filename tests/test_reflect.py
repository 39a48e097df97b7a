"""Reflection (seed 003: summarise several memories into a new one citing them), over real HTTP and the client."""

import numpy as np
import pytest
import requests
from flask import Flask, jsonify, request

from rater_server import ThreadedServer
from simulacra.errors import RaterError
from simulacra.rater import RaterClient
from simulacra.rating.reflection import OfflineReflector, _quote, shared_words

AGENT = "Bram Ostrowski"
MILL = [
    {"id": "mill-1", "text": "The mill's water wheel shudders to a stop with a loud crack; a heavy branch is wedged "
                             "between its paddles.", "rating": 8},
    {"id": "mill-2", "text": "Bram Ostrowski is fixing the wheel at the Mill.", "rating": 5},
    {"id": "mill-3", "text": "The water wheel at The Old Watermill is turning again with a new iron bracket.",
     "rating": 6},
]
STORM = [
    {"id": "storm-1", "text": "A rider shouts in the square that a violent storm is coming tonight and everyone "
                              "should tie down their shutters.", "rating": 7},
    {"id": "storm-2", "text": 'Hana Novak said to Bram Ostrowski: "Did you hear? A storm is coming tonight, tie '
                              'down your shutters."', "rating": 5},
    {"id": "storm-3", "text": "Greta Lund is tying down the tavern shutters before the storm.", "rating": 4},
]
# Average-linkage merges (cosine distance): within the mill and the storm memories at most 0.53, across
# groups 0.78 and more, either side of the 0.65 cut with a margin.
OTHER = [
    {"id": "other-1", "text": "Ruth Calloway plans to be baking bread at the Bakery from 06:00 to 11:00.", "rating": 2},
    {"id": "other-2", "text": "The letter rack at The Wren and Kettle is full of sorted letters.", "rating": 1},
]


def town(mill=MILL, storm=STORM):
    """The mill, storm and unrelated memories interleaved: m1 s1 o1 m2 s2 m3 o2 s3."""
    return [mill[0], storm[0], OTHER[0], mill[1], storm[1], mill[2], OTHER[1], storm[2]]


def ids(memories):
    return [m["id"] for m in memories]


def reflect_url(rater_url):
    return rater_url.rsplit("/rate", 1)[0] + "/reflect"


def post(url, body=None, raw=None):
    if raw is not None:
        return requests.post(url, data=raw, headers={"Content-Type": "application/json"}, timeout=30)
    return requests.post(url, json=body, timeout=30)


def test_related_memories_become_insights_citing_exactly_them(rater_url):
    r = post(reflect_url(rater_url), {"agent": AGENT, "memories": town()})
    assert r.status_code == 200
    insights = r.json()["insights"]
    # mill sums 19, storm 16: mill first; the two unrelated memories are in no insight
    assert [i["evidence"] for i in insights] == [ids(MILL), ids(STORM)]
    mill, storm = (i["text"] for i in insights)
    assert AGENT in mill and AGENT in storm
    assert "wheel" in mill.split(";")[0] and "storm" in storm.split(";")[0]
    assert "3 memories" in mill and "3 memories" in storm
    assert "(rated 8)" in mill and "shudders to a stop" in mill  # its most important member, quoted


def test_insights_are_ranked_by_summed_rating(rater_url):
    # storm raised to 8+8+7 = 23 > 19: storm first although the mill comes first in the input
    storm = [{**m, "rating": r} for m, r in zip(STORM, (8, 8, 7))]
    insights = post(reflect_url(rater_url), {"agent": AGENT, "memories": town(storm=storm)}).json()["insights"]
    assert [i["evidence"] for i in insights] == [ids(storm), ids(MILL)]
    # a missing rating counts as 5: mill 15 beats storm 6+5+3 = 14, loses to storm 6+6+4 = 16
    mill = [{k: v for k, v in m.items() if k != "rating"} for m in MILL]
    for ratings, first in (((6, 5, 3), "mill-1"), ((6, 6, 4), "storm-1")):
        storm = [{**m, "rating": r} for m, r in zip(STORM, ratings)]
        body = {"agent": AGENT, "memories": town(mill=mill, storm=storm)}
        assert post(reflect_url(rater_url), body).json()["insights"][0]["evidence"][0] == first


def test_ties_go_to_the_larger_then_the_earlier_cluster(embedder):
    reflector = OfflineReflector(embedder)
    unrated = [{k: v for k, v in m.items() if k != "rating"} for m in town()]
    assert [i.evidence[0] for i in reflector.reflect(unrated, AGENT)] == ["mill-1", "storm-1"]
    assert [i.evidence[0] for i in reflector.reflect(unrated[::-1], AGENT)] == ["storm-3", "mill-3"]
    # equal sums (5 * 3 = 15 = 7 + 8): the three mill memories beat the two storm ones
    two_storms = [{**STORM[0], "rating": 7}, {**STORM[1], "rating": 8}]
    memories = two_storms + [{k: v for k, v in m.items() if k != "rating"} for m in MILL]
    assert [i.evidence for i in reflector.reflect(memories, AGENT)] == [ids(MILL), ids(two_storms)]


def test_max_insights_and_no_agent(rater_url):
    r = post(reflect_url(rater_url), {"memories": town(), "max_insights": 1})
    insights = r.json()["insights"]
    assert len(insights) == 1 and insights[0]["evidence"] == ids(MILL)
    assert AGENT not in insights[0]["text"].split(";")[0] and insights[0]["text"].startswith("There are 3 memories")


def test_same_input_same_output(rater_url):
    from simulacra.embeddings import SentenceTransformerEmbedder

    body = {"agent": AGENT, "memories": town(), "max_insights": 5}
    first = post(reflect_url(rater_url), body).json()
    assert post(reflect_url(rater_url), body).json() == first
    # and without any shared cache: two fresh models
    fresh = [OfflineReflector(SentenceTransformerEmbedder()).reflect(town(), AGENT, 5) for _ in range(2)]
    assert fresh[0] == fresh[1] and [i.to_dict() for i in fresh[0]] == first["insights"]


def test_unrelated_memories_give_no_insight(rater_url):
    r = post(reflect_url(rater_url), {"agent": AGENT, "memories": OTHER + [MILL[0], STORM[0]]})
    assert r.status_code == 200 and r.json() == {"insights": []}
    assert post(reflect_url(rater_url), {"memories": [MILL[0]]}).json() == {"insights": []}


def test_exact_duplicates_are_one_text_but_all_evidence(embedder):
    reflector = OfflineReflector(embedder)
    crack = {"id": "again", "text": MILL[0]["text"], "rating": 8}
    insights = reflector.reflect([MILL[0], crack, {**crack, "id": "thrice"}, MILL[1]], AGENT)
    assert [i.evidence for i in insights] == [["mill-1", "again", "thrice", "mill-2"]]
    shared = insights[0].text.split(";")[0]
    # "crack" is in one of the two distinct texts only, however often that text was sent
    assert "mill and wheel" in shared and "crack" not in shared and "4 memories" in shared
    # the same text twice is nothing to generalise from
    assert reflector.reflect([MILL[0], crack], AGENT) == []


def test_an_insight_reflected_on_again_joins_its_topic(embedder):
    reflector = OfflineReflector(embedder)
    first = reflector.reflect(town(), AGENT)
    again = town() + [{"id": f"insight-{n}", "text": i.text, "rating": 7} for n, i in enumerate(first)]
    second = reflector.reflect(again, AGENT)
    assert [i.evidence for i in second] == [ids(MILL) + ["insight-0"], ids(STORM) + ["insight-1"]]
    # the deeper insight quotes an experience, not the earlier insight, even one rated higher (no quote of a quote)
    top_rated = town() + [{"id": f"insight-{n}", "text": i.text, "rating": 10} for n, i in enumerate(first)]
    assert all(i.text.count("memories that share") == 1 for i in reflector.reflect(top_rated, AGENT))


def test_clustering_quality_on_the_labelled_scenes(embedder):
    """Figures of docs/rater.md at the default threshold must not regress."""
    from simulacra.rating.evaluate_reflection import evaluate
    from simulacra.rating.reflection import DEFAULT_THRESHOLD

    (row,) = evaluate(embedder, thresholds=(DEFAULT_THRESHOLD,))
    assert row["all"]["f1"] >= 0.74 and row["hand"]["precision"] >= 0.95 and row["trace"]["recall"] >= 0.75, row


def test_shared_words_are_clean_words_common_to_half():
    texts = ['Hana Novak said to Bram: "The wheel broke!"', "Bram fixed the wheel, at the Mill.",
             "The mill's wheel turns; Bram's bread bakes.", "Hana Novak bakes bread at the mill."]
    words = shared_words(texts)
    assert words == ["Bram", "wheel", "mill", "Hana", "Novak"]
    assert shared_words(texts, exclude=frozenset({"bram"}), limit=2) == ["wheel", "mill"]
    assert shared_words(["Mill wheel.", "A clock."]) == []  # one text of two is not "common"


# A conversation summary as the scripted mind words it: the news that comes first (a sheepdog) is not the news the
# others share (the rider's storm warning).
TALK = ("Samuel Reyes talked with Greta Lund at The Wren and Kettle. Greta Lund told Samuel Reyes: A muddy "
        "black-and-white sheepdog is sniffing around the bakery; the baker's cart lost a wheel. Samuel Reyes told "
        "Greta Lund: A rider says a violent storm is coming tonight. Tie down the shutters.")
TALK_FRAME = "Samuel Reyes talked with Greta Lund at The Wren and Kettle."


class SameVector:
    """An embedder that puts every text in one cluster."""

    def embed(self, texts):
        return np.ones((len(texts), 4), dtype=np.float32)


def test_a_summary_is_quoted_by_the_told_sentence_holding_the_shared_words():
    assert _quote(TALK, ["Storm", "rider"]) == (
        f"{TALK_FRAME} Samuel Reyes told Greta Lund: A rider says a violent storm is coming tonight.")
    assert _quote(TALK, ["shutters"]) == f"{TALK_FRAME} Samuel Reyes told Greta Lund: Tie down the shutters."
    # as the reflector words it: the words it names are the words its quote holds
    memories = [{"id": "talk", "text": TALK, "rating": 8},
                {"id": "square", "text": "A rider shouts in the square that a storm is coming.", "rating": 6},
                {"id": "greta", "text": "Greta Lund is tying down the tavern shutters before the storm.", "rating": 4}]
    (insight,) = OfflineReflector(SameVector()).reflect(memories, "Samuel Reyes")
    assert insight.evidence == ["talk", "square", "greta"] and "storm" in insight.text.split(";")[0]
    assert insight.text.endswith('(rated 8): "Samuel Reyes talked with Greta Lund at The Wren and Kettle. Samuel '
                                 'Reyes told Greta Lund: A rider says a violent storm is coming tonight."')


def test_a_summary_is_quoted_by_the_clause_of_its_news_holding_the_shared_words():
    # the second ";" clause of the first told sentence; "baker's" counts as "baker", case does not count
    assert _quote(TALK, ["Wheel", "baker"]) == (
        f"{TALK_FRAME} Greta Lund told Samuel Reyes: the baker's cart lost a wheel.")
    # "bakery" and "wheel" in different clauses, one each; "cart" and "wheel" both in the second: the second wins
    assert _quote(TALK, ["bakery", "cart", "wheel"]) == (
        f"{TALK_FRAME} Greta Lund told Samuel Reyes: the baker's cart lost a wheel.")


def test_with_no_shared_words_in_any_clause_or_a_tie_the_first_clause_is_quoted():
    first = (f"{TALK_FRAME} Greta Lund told Samuel Reyes: A muddy black-and-white sheepdog is sniffing around the "
             "bakery...")
    assert _quote(TALK) == first
    assert _quote(TALK, ["mill", "Greta"]) == first  # in no clause of the news (the names are in every "told")
    assert _quote(TALK, ["sheepdog", "storm"]) == first  # one word each: the first clause
    done = ("Ruth Calloway talked with Ezra Pike at The Wren and Kettle. Ruth Calloway had been eating lunch at the "
            "tavern; Ezra Pike had been eating soup at the tavern.")
    assert _quote(done, ["tavern"]) == ("Ruth Calloway talked with Ezra Pike at The Wren and Kettle. Ruth Calloway "
                                        "had been eating lunch at the tavern...")
    assert _quote(done, ["soup"]) == ("Ruth Calloway talked with Ezra Pike at The Wren and Kettle. Ezra Pike had "
                                      "been eating soup at the tavern.")
    assert _quote("The wheel broke; the storm is coming.", ["bread"]) == "The wheel broke..."
    assert _quote("The wheel broke; the storm is coming.", ["Storm"]) == "the storm is coming."


def test_reported_speech_is_quoted_by_the_clause_holding_the_shared_words():
    said = 'Hana Novak said to Bram Ostrowski: "Did you hear? The mill wheel broke; a storm is coming tonight."'
    assert _quote(said) == "Hana Novak said 'The mill wheel broke...'"
    assert _quote(said, ["storm", "tonight"]) == "Hana Novak said 'a storm is coming tonight.'"


@pytest.mark.parametrize(
    "body, field, needle",
    [
        ({}, "memories", "missing field 'memories'"),
        ({"memories": []}, "memories", "field 'memories' is empty"),
        ({"memories": "a wheel"}, "memories", "field 'memories'"),
        ({"memories": [{"id": "a"}]}, "memories.0.text", "missing field 'memories.0.text'"),
        ({"memories": [{"id": "a", "text": "  "}]}, "memories.0.text", "field 'memories.0.text' is empty"),
        ({"memories": [{"text": "wheel"}]}, "memories.0.id", "missing field 'memories.0.id'"),
        ({"memories": [{"id": "", "text": "wheel"}]}, "memories.0.id", "field 'memories.0.id' is empty"),
        ({"memories": [{"id": 7, "text": "wheel"}]}, "memories.0.id", "field 'memories.0.id'"),
        ({"memories": [{"id": "a", "text": "wheel"}, {"id": "b", "text": "storm"}, {"id": "a", "text": "x"}]},
         "memories.2.id", "duplicate id 'a'"),
        ({"memories": [{"id": "a", "text": "wheel", "rating": 11}]}, "memories.0.rating", "field 'memories.0.rating'"),
        ({"memories": [{"id": "a", "text": "wheel", "rating": 0}]}, "memories.0.rating", "field 'memories.0.rating'"),
        ({"memories": [{"id": "a", "text": "wheel", "rating": 5.5}]}, "memories.0.rating", "memories.0.rating"),
        ({"memories": [{"id": "a", "text": "wheel", "rating": True}]}, "memories.0.rating", "memories.0.rating"),
        ({"memories": [{"id": "a", "text": "wheel"}], "max_insights": 0}, "max_insights", "field 'max_insights'"),
        ({"memories": [{"id": "a", "text": "wheel"}], "max_insights": 11}, "max_insights", "field 'max_insights'"),
        ({"memories": [{"id": "a", "text": "wheel"}], "max_insights": "3"}, "max_insights", "field 'max_insights'"),
        ({"memories": [{"id": "a", "text": "wheel"}], "agent": 3}, "agent", "field 'agent'"),
        ({"memories": [{"id": str(i), "text": "wheel"} for i in range(501)]}, "memories", "field 'memories'"),
    ],
)
def test_malformed_bodies_get_400_naming_the_field(rater_url, body, field, needle):
    r = post(reflect_url(rater_url), body)
    assert r.status_code == 400, r.text
    assert needle in r.json()["error"] and r.json()["field"] == field


@pytest.mark.parametrize("raw, needle", [(b"[1, 2]", "expected a JSON object, got list"), (b'"memories"', "got str"),
                                         (b"{not json", "malformed JSON"), (b"", "empty body")])
def test_non_object_bodies_get_400(rater_url, raw, needle):
    r = post(reflect_url(rater_url), raw=raw)
    assert r.status_code == 400 and needle in r.json()["error"]


def test_health_counts_reflections(rater_url):
    health = rater_url.rsplit("/rate", 1)[0] + "/health"
    before = requests.get(health, timeout=5).json()["counts"]
    post(reflect_url(rater_url), {"agent": AGENT, "memories": town()})
    after = requests.get(health, timeout=5).json()["counts"]
    assert after["reflections"] == before["reflections"] + 1 and after["insights"] == before["insights"] + 2


def test_client_reflects_over_http(rater_url):
    client = RaterClient(rater_url)
    insights = client.reflect(town(), agent=AGENT, max_insights=2)
    assert [i["evidence"] for i in insights] == [ids(MILL), ids(STORM)]
    assert insights == post(reflect_url(rater_url), {"agent": AGENT, "memories": town(), "max_insights": 2}
                            ).json()["insights"]
    assert client.reflections_requested == 1 and client.requests_sent == 1
    with pytest.raises(RaterError, match="rejected the request: HTTP 400.*duplicate id"):
        client.reflect([MILL[0], {**MILL[1], "id": "mill-1"}])
    assert client.reflections_requested == 2


def test_client_gives_up_after_its_retries():
    client = RaterClient("http://127.0.0.1:9/rate", timeout_s=1, attempts=2)
    with pytest.raises(RaterError, match="failed after 2 attempts"):
        client.reflect(MILL)
    assert client.requests_sent == 2


@pytest.fixture()
def scripted():
    """A stand-in rater on 127.0.0.1 whose /reflect answers are scripted, ``(status, json body)`` in turn.

    Yields ``(answers, received, client)``: the script to fill, the request bodies it got, a client of it.
    """
    answers: list[tuple[int, object]] = []
    received: list[object] = []
    app = Flask("scripted")

    @app.post("/reflect")
    def reflect():
        received.append(request.get_json())
        status, body = answers.pop(0)
        return jsonify(body), status

    server = ThreadedServer(app, "127.0.0.1", 0)
    yield answers, received, RaterClient(server.url, timeout_s=5, attempts=3)
    server.close()


def test_client_drops_unusable_insights(scripted, caplog):
    answers, _, client = scripted
    answers.append((200, {"insights": [
        {"text": "About the wheel.", "evidence": ["mill-1", "ghost", "mill-2", "mill-1", 3]},
        {"text": "  ", "evidence": ["mill-1"]},
        {"text": "About ghosts.", "evidence": ["ghost", "phantom"]},
        {"text": "About the storm.", "evidence": ["storm-1"]},
    ]}))
    insights = client.reflect(MILL + STORM, agent=AGENT)
    assert insights == [{"text": "About the wheel.", "evidence": ["mill-1", "mill-2"]},
                        {"text": "About the storm.", "evidence": ["storm-1"]}]
    assert client.insights_dropped == 2
    assert "ghost" in caplog.text and "no text" in caplog.text


@pytest.mark.parametrize("answer", [
    [],
    {"insights": "none"},
    {"results": []},
    {"insights": [{"evidence": ["mill-1"]}]},
    {"insights": [{"text": "About the wheel."}]},
    {"insights": [{"text": "About the wheel.", "evidence": "mill-1"}]},
    {"insights": ["About the wheel."]},
])
def test_client_rejects_malformed_answers(scripted, answer):
    answers, _, client = scripted
    answers.append((200, answer))
    with pytest.raises(RaterError, match="no usable 'insights'"):
        client.reflect(MILL)


def test_client_retries_a_failing_rater_then_reports_a_4xx(scripted):
    answers, _, client = scripted
    answers += [(503, {"error": "busy"}), (200, {"insights": [{"text": "Wheel.", "evidence": ["mill-2"]}]})]
    assert client.reflect(MILL) == [{"text": "Wheel.", "evidence": ["mill-2"]}]
    assert client.requests_sent == 2
    answers.append((404, {"error": "not found"}))
    with pytest.raises(RaterError, match="HTTP 404"):
        client.reflect(MILL)
    answers += [(500, {"error": "boom"})] * 3
    with pytest.raises(RaterError, match="failed after 3 attempts"):
        client.reflect(MILL)


def test_client_sends_the_documented_body(scripted):
    answers, received, client = scripted
    answers.append((200, {"insights": []}))
    assert client.reflect([MILL[0], {"id": "x", "text": "Unrated.", "rating": None}], agent=AGENT, max_insights=2) == []
    assert received == [{"agent": AGENT, "max_insights": 2, "memories": [
        {"id": "mill-1", "text": MILL[0]["text"], "rating": 8}, {"id": "x", "text": "Unrated."}]}]
