"""The rater refuses texts with nothing visible in them and bodies giving a key twice, with a 400 naming the field.

Most tests use the Flask test client over a stub backend that records what reaches it (nothing may, for a refused
body); one runs the audit's bodies against the real rater over HTTP (the ``rater_url`` fixture).
"""

from __future__ import annotations

import json

import pytest
import requests

from rater_server import create_app
from rater_server.app import has_visible_text
from simulacra.rating.backends import Rating

ZWSP, ZWJ, BOM, SHY, LRM = "\u200b", "\u200d", "\ufeff", "\u00ad", "\u200e"

#: texts in which nothing shows: whitespace, control (Cc) and format (Cf) characters only
INVISIBLE = [
    ZWSP + ZWSP,
    "\u0000",
    "\u0000\u0001\u007f",
    f" {ZWJ}\t{BOM}\n",
    SHY + LRM + "\u2060",  # soft hyphen, left-to-right mark, word joiner
    "\u0085\u009f",  # C1 controls
    "\u3000\u00a0" + ZWSP,  # ideographic and no-break spaces
    "\x1c\x1d",
]
#: texts with something visible, however little
VISIBLE = ["a", f"{ZWSP}a{ZWSP}", "\u0000x", "\u00e9", "\u4e00", "\U0001f600", ".", "e\u0301"]


class StubBackend:
    name, model = "stub", "stub-model"

    def __init__(self):
        self.rated: list[str] = []
        self.reflected: list[list[dict]] = []

    def rate(self, memories, agent=None, context=None):
        self.rated.extend(memories)
        return [Rating(5, "stub") for _ in memories]

    def reflect(self, memories, agent=None, max_insights=3):
        self.reflected.append(list(memories))
        return []

    def stats(self):
        return {"cache_size": 0}


@pytest.fixture
def backend():
    return StubBackend()


@pytest.fixture
def client(backend):
    return create_app(backend).test_client()


def post(client, path: str, body=None, raw: str | None = None):
    data = raw if raw is not None else json.dumps(body)
    return client.post(path, data=data, headers={"Content-Type": "application/json"})


def bodies(text: str) -> list[tuple[str, dict, str]]:
    """``(path, body, field)``: ``text`` in each place the rater reads a memory's text."""
    return [
        ("/rate", {"memory": text}, "memory"),
        ("/rate/batch", {"memories": ["The mill wheel cracked.", text]}, "memories.1"),
        ("/reflect", {"memories": [{"id": "a", "text": "Tea."}, {"id": "b", "text": text}]}, "memories.1.text"),
    ]


@pytest.mark.parametrize("text", INVISIBLE)
def test_text_with_nothing_visible_is_a_400_naming_the_field(client, backend, text):
    assert not has_visible_text(text)
    for path, body, field in bodies(text):
        r = post(client, path, body)
        assert r.status_code == 400, (path, r.get_json())
        answer = r.get_json()
        assert answer["field"] == field and answer["error"].startswith(f"field '{field}': is blank"), answer
    assert backend.rated == [] and backend.reflected == []


@pytest.mark.parametrize("text", VISIBLE)
def test_text_with_a_visible_character_is_rated(client, backend, text):
    assert has_visible_text(text)
    for path, body, _ in bodies(text):
        assert post(client, path, body).status_code == 200, path
    assert text.strip() in backend.rated


def test_the_empty_text_is_still_refused_as_empty(client):
    for path, body, field in bodies(""):
        answer = post(client, path, body).get_json()
        assert answer["field"] == field and "empty" in answer["error"]


@pytest.mark.parametrize("raw, field", [
    ('{"memory": "a", "memory": "b"}', "memory"),
    ('{"memory": "a", "agent": "x", "agent": "y"}', "agent"),
    ('{"memory": "a", "unknown": 1, "unknown": 2}', "unknown"),
])
def test_a_key_given_twice_on_rate_is_a_400_naming_it(client, backend, raw, field):
    r = post(client, "/rate", raw=raw)
    assert r.status_code == 400
    answer = r.get_json()
    assert answer["field"] == field and f"'{field}'" in answer["error"] and "twice" in answer["error"], answer
    assert backend.rated == []


def test_a_key_given_twice_in_a_nested_object_names_its_path(client, backend):
    raw = '{"memories": [{"id": "a", "text": "Tea."}, {"id": "b", "text": "x", "text": "y"}]}'
    answer = post(client, "/reflect", raw=raw).get_json()
    assert answer["field"] == "memories.1.text" and "twice" in answer["error"]
    raw = '{"memories": ["a"], "memories": ["b"]}'
    answer = post(client, "/rate/batch", raw=raw).get_json()
    assert answer["field"] == "memories" and "twice" in answer["error"]
    assert backend.rated == [] and backend.reflected == []


def test_the_same_key_in_different_objects_is_fine(client, backend):
    raw = '{"memories": [{"id": "a", "text": "Tea."}, {"id": "b", "text": "A storm."}]}'
    assert post(client, "/reflect", raw=raw).status_code == 200
    assert len(backend.reflected) == 1


@pytest.mark.parametrize("raw, field", [
    ('{"memory": "\\u200b\\u200b"}', "memory"),
    ('{"memory": "\\u0000"}', "memory"),
    ('{"memory": "a", "memory": "b"}', "memory"),
])
def test_the_audit_bodies_over_http(rater_url, raw, field):
    r = requests.post(rater_url, data=raw, headers={"Content-Type": "application/json"}, timeout=30)
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field and f"'{field}'" in r.json()["error"]
