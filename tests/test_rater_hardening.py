"""Rater hardening over real HTTP on 127.0.0.1: bearer token, malformed requests, fuzzed bodies, the CLI."""

import json
import unicodedata

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rater_server import ThreadedServer
from simulacra.errors import RaterError
from simulacra.rater import TOKEN_ENV, InProcessRater, RaterClient, connect_rater

TOKEN = "s3cret-Token_0123"
ENDPOINTS = ["/rate", "/rate/batch", "/reflect"]
VALID = {"/rate": {"memory": "The mill wheel cracked."}, "/rate/batch": {"memories": ["I made tea.", "A storm."]},
         "/reflect": {"memories": [{"id": "a", "text": "The mill wheel cracked."}, {"id": "b", "text": "Tea."}]}}


def base(url: str) -> str:
    return url.rsplit("/rate", 1)[0]


@pytest.fixture(scope="module")
def protected_url(rater_backend):
    """A real rater app that requires ``TOKEN``, served on a free loopback port; yields its base URL."""
    from rater_server import create_app

    server = ThreadedServer(create_app(rater_backend, token=TOKEN), "127.0.0.1", 0)
    yield base(server.url)
    server.close()


@pytest.fixture(autouse=True)
def no_token_in_env(monkeypatch):
    monkeypatch.delenv(TOKEN_ENV, raising=False)


def raw_post(url, data, content_type="application/json", headers=None):
    hdrs = dict(headers or {})
    if content_type is not None:
        hdrs["Content-Type"] = content_type
    return requests.post(url, data=data, headers=hdrs, timeout=30)


# ------------------------------------------------------------------------------------------------- token


def test_health_is_open_and_says_a_token_is_required(protected_url, rater_url):
    r = requests.get(protected_url + "/health", timeout=5)
    assert r.status_code == 200 and r.json()["token_required"] is True
    assert requests.get(protected_url + "/health", headers={"Authorization": "Bearer wrong"}, timeout=5).ok
    assert requests.get(base(rater_url) + "/health", timeout=5).json()["token_required"] is False


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("authorization, problem", [
    (None, "missing bearer token"),
    ("", "missing bearer token"),
    ("Bearer", "wrong bearer token"),
    ("Bearer ", "wrong bearer token"),
    ("Bearer wrong", "wrong bearer token"),
    (f"Bearer {TOKEN}x", "wrong bearer token"),
    (f"Bearer {TOKEN[:-1]}", "wrong bearer token"),
    (f"Bearer {TOKEN.upper()}", "wrong bearer token"),
    (f"Basic {TOKEN}", "wrong bearer token"),
    (TOKEN, "wrong bearer token"),
    (f"Bearer {TOKEN} extra", "wrong bearer token"),
])
def test_requests_without_the_right_token_get_401(protected_url, path, authorization, problem):
    headers = {} if authorization is None else {"Authorization": authorization}
    r = requests.post(protected_url + path, json=VALID[path], headers=headers, timeout=30)
    assert r.status_code == 401, r.text
    assert problem in r.json()["error"] and r.json()["field"] == "Authorization"
    assert r.headers["WWW-Authenticate"].startswith("Bearer")
    assert TOKEN not in r.text


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_right_token_is_let_through(protected_url, path, scheme):
    r = requests.post(protected_url + path, json=VALID[path], headers={"Authorization": f"{scheme} {TOKEN}"},
                      timeout=30)
    assert r.status_code == 200, r.text


def test_the_token_guards_everything_but_get_health(protected_url):
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert requests.get(protected_url + "/nope", timeout=5).status_code == 401  # no hint which routes exist
    assert requests.get(protected_url + "/nope", headers=auth, timeout=5).status_code == 404
    assert requests.get(protected_url + "/rate", timeout=5).status_code == 401
    assert requests.post(protected_url + "/health", timeout=5).status_code == 401
    # checked before the body is read: a huge body without the token is a 401, not a 413
    big = raw_post(protected_url + "/rate", b"x" * 2_000_000)
    assert big.status_code == 401
    # and a malformed body with the token is the usual 400
    assert raw_post(protected_url + "/rate", b"{", headers=auth).status_code == 400


def test_unauthorized_requests_are_counted(protected_url):
    before = requests.get(protected_url + "/health", timeout=5).json()["counts"]["unauthorized"]
    requests.post(protected_url + "/rate", json=VALID["/rate"], timeout=5)
    assert requests.get(protected_url + "/health", timeout=5).json()["counts"]["unauthorized"] == before + 1


def test_the_token_is_compared_in_constant_time(protected_url, monkeypatch):
    import hmac

    import rater_server.app as app_module

    calls, real = [], hmac.compare_digest

    def spy(a, b):
        calls.append((type(a), type(b)))
        return real(a, b)

    monkeypatch.setattr(app_module.hmac, "compare_digest", spy)
    requests.post(protected_url + "/rate", json=VALID["/rate"], headers={"Authorization": "Bearer nope"}, timeout=5)
    assert calls == [(bytes, bytes)]


def test_a_non_ascii_authorization_header_is_a_401_not_a_500(protected_url):
    r = raw_post(protected_url + "/rate", json.dumps(VALID["/rate"]).encode(),
                 headers={"Authorization": "Bearer caf\xe9".encode("latin-1")})
    assert r.status_code == 401


@pytest.mark.parametrize("token", ["", "two words", "tab\there", "caf\xe9", "line\n"])
def test_create_app_refuses_tokens_a_header_cannot_carry(rater_backend, token):
    from rater_server import create_app

    with pytest.raises(ValueError, match="token"):
        create_app(rater_backend, token=token)


# ------------------------------------------------------------------------------------------------ client


def test_client_sends_the_token_given_or_from_the_environment(protected_url, monkeypatch):
    assert 1 <= RaterClient(protected_url + "/rate", token=TOKEN).rate_many(["The bridge fell."])[0] <= 10
    monkeypatch.setenv(TOKEN_ENV, f"  {TOKEN}\n")  # surrounding blanks are not part of it
    client = RaterClient(protected_url + "/rate")
    assert client.has_token and client.rate_many(["The well ran dry."])[0] >= 1
    assert client.reflect(VALID["/reflect"]["memories"]) == []
    # an explicit "" sends none although the environment has one
    with pytest.raises(RaterError, match="requires a token and none was sent"):
        RaterClient(protected_url + "/rate", token="").rate_many(["x"])


def test_client_reports_a_401_at_once_without_retrying(protected_url):
    client = RaterClient(protected_url + "/rate", attempts=3, token="not-the-token")
    with pytest.raises(RaterError, match=f"rejected the token sent \\(HTTP 401\\): set {TOKEN_ENV}") as err:
        client.rate_many(["The mill stopped."])
    assert client.requests_sent == 1 and "not-the-token" not in str(err.value)
    with pytest.raises(RaterError, match="HTTP 401"):
        client.reflect(VALID["/reflect"]["memories"])
    assert client.requests_sent == 2
    anonymous = RaterClient(protected_url + "/rate", attempts=3)
    with pytest.raises(RaterError, match="requires a token and none was sent"):
        anonymous.rate_many(["The mill stopped."])
    assert anonymous.requests_sent == 1


def test_client_refuses_a_token_a_header_cannot_carry():
    with pytest.raises(RaterError, match=TOKEN_ENV):
        RaterClient("http://127.0.0.1:9/rate", token="two words")


def test_connect_checks_the_token_up_front(protected_url, embedder, monkeypatch):
    with pytest.raises(RaterError, match=f"requires a token: set {TOKEN_ENV}"):
        connect_rater(protected_url + "/rate", 5, True, embedder)
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    client = connect_rater(protected_url + "/rate", 5, True, embedder)
    assert isinstance(client, RaterClient) and 1 <= client.rate_many(["The school bell rang."])[0] <= 10


def test_nothing_answering_means_rating_in_process_with_the_same_answers(embedder, rater_backend, protected_url,
                                                                          monkeypatch):
    """No rater at the URL (port 0 never asks anyone): the run rates in-process, no HTTP, no port opened, with
    the ratings and insights the same backend gives over HTTP."""
    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    local = connect_rater("http://127.0.0.1:0/rate", 5, True, embedder, backend=rater_backend)
    remote = connect_rater(protected_url + "/rate", 5, True, embedder)
    assert isinstance(local, InProcessRater) and isinstance(remote, RaterClient)
    texts = ["The baker burned the bread.", "Ruth's dog ran off in the storm.", "The bell rang at noon."]
    assert local.rate_many(texts) == remote.rate_many(texts)
    memories = [{"id": f"m{i}", "text": t, "rating": 5} for i, t in enumerate(
        ["The mill wheel broke in the storm.", "The storm tore the mill's roof.", "Storm damage at the mill.",
         "Greta bought apples.", "Greta sells apples at the market.", "Apples from Greta's stall."])]
    assert local.reflect(memories, agent="Ezra") == remote.reflect(memories, agent="Ezra") != []
    assert local.requests_sent == 2 and local.counters()["ratings"] == remote.counters()["ratings"]
    remote.close()
    local.close()


def test_a_port_taken_by_something_that_is_not_a_rater_means_rating_in_process(embedder, rater_backend):
    import socket

    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)  # takes the port without answering HTTP
    try:
        rater = connect_rater(f"http://127.0.0.1:{holder.getsockname()[1]}/rate", 1, True, embedder,
                              backend=rater_backend)
        assert isinstance(rater, InProcessRater) and 1 <= rater.rate_many(["The bell rang."])[0] <= 10
    finally:
        holder.close()


def test_a_remote_url_that_does_not_answer_is_not_replaced_by_an_in_process_rater(embedder):
    with pytest.raises(RaterError, match="no rater answers at http://192.0.2.1:9/rate"):
        connect_rater("http://192.0.2.1:9/rate", 0.5, True, embedder)


# ----------------------------------------------------------------------------------- malformed requests


@pytest.mark.parametrize("path", ENDPOINTS)
@pytest.mark.parametrize("raw, content_type, status, needle", [
    (b'{"memory": "x"}', "text/plain", 415, "Content-Type must be application/json, got 'text/plain'"),
    (b'{"memory": "x"}', None, 415, "Content-Type must be application/json, got 'none'"),
    (b"memory=x", "application/x-www-form-urlencoded", 415, "Content-Type must be application/json"),
    (b'{"memory": "x"}', "multipart/form-data; boundary=x", 415, "Content-Type must be application/json"),
    (b'{"memory": "x"}', "application/json; charset=latin-1", 415, "JSON must be UTF-8"),
    (b'{"memory": "caf\xe9"}', "application/json", 400, "not UTF-8 (byte 0xe9 at offset 15)"),
    (b"\xff\xfe{}", "application/json", 400, "not UTF-8"),
    (b"{not json", "application/json", 400, "malformed JSON"),
    (b"", "application/json", 400, "empty body"),
    (b"null", "application/json", 400, "expected a JSON object, got null"),
    (b"[]", "application/json", 400, "expected a JSON object, got list"),
    (b'[{"memory": "x"}]', "application/json", 400, "expected a JSON object, got list"),
    (b'"text"', "application/json", 400, "expected a JSON object, got str"),
    (b"7", "application/json", 400, "expected a JSON object, got int"),
    (b'{"memory": "x", "n": NaN}', "application/json", 400, "NaN is not a JSON number"),
    (b'{"memory": "x", "n": Infinity}', "application/json", 400, "Infinity is not a JSON number"),
    (b'{"memory": "x", "n": -Infinity}', "application/json", 400, "-Infinity is not a JSON number"),
    (b'{"memory": "x", "n": 1e999}', "application/json", 400, "number 1e999 is out of range"),
    (b'{"memory": "x", "n": -1e400}', "application/json", 400, "out of range"),
    (b'{"memory": "x", "n": 1' + b"0" * 5000 + b"}", "application/json", 400, "5001 digits is out of range"),
    (b'{"memory": "x", "n": ' + b"[" * 40 + b"]" * 40 + b"}", "application/json", 400, "nested deeper than 32"),
    (b'{"memory": "x", "n": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "application/json", 400,
     "nested deeper than 32"),
    (b"[" * 300_000, "application/json", 400, "malformed JSON"),
    (b'{"a":' * 50_000 + b"1" + b"}" * 50_000, "application/json", 400, "nested deeper than 32"),
    (b'{"memory": "x\\ud800y"}', "application/json", 400, "unpaired surrogate"),
    (b'{"\\udfff": 1}', "application/json", 400, "key with an unpaired surrogate"),
])
def test_malformed_requests_get_a_4xx_naming_the_problem(rater_url, path, raw, content_type, status, needle):
    r = raw_post(base(rater_url) + path, raw, content_type)
    assert r.status_code == status, r.text
    assert r.headers["Content-Type"] == "application/json" and needle in r.json()["error"], r.text


@pytest.mark.parametrize("path, body, field", [
    ("/rate", '{"memory": "x\\ud800y"}', "memory"),
    ("/rate/batch", '{"memories": ["fine", "\\udc00"]}', "memories.1"),
    ("/reflect", '{"memories": [{"id": "a", "text": "t"}, {"id": "\\ud83d", "text": "t"}]}', "memories.1.id"),
    ("/rate/batch", '{"memories": {"0": "x"}}', "memories"),
    ("/rate/batch", '{"memories": [["x"]]}', "memories.0"),
    ("/reflect", '{"memories": [["a", "t"]]}', "memories.0"),
    ("/reflect", '{"memories": {"id": "a", "text": "t"}}', "memories"),
    ("/reflect", '{"memories": [{"id": "a", "text": "t"}], "max_insights": 1e300}', "max_insights"),
    ("/reflect", '{"memories": [{"id": "a", "text": "t", "rating": 99999999999999999999}]}', "memories.0.rating"),
    ("/rate", '{"memory": {"text": "x"}}', "memory"),
    ("/rate", '{"memory": "' + "x" * 10_001 + '"}', "memory"),
])
def test_wrong_shapes_get_400_naming_the_field(rater_url, path, body, field):
    r = raw_post(base(rater_url) + path, body.encode())
    assert r.status_code == 400, r.text
    assert r.json()["field"] == field and field in r.json()["error"], r.text


@pytest.mark.parametrize("raw, content_type", [
    (b'{"memory": "I fed the hens."}', "application/json; charset=utf-8"),
    (b'{"memory": "I fed the hens."}', "application/json; charset=UTF8"),
    (b'{"memory": "I fed the hens."}', "Application/JSON"),
    (b'{"memory": "I fed the hens."}', "application/vnd.simulacra+json"),
    (b'\xef\xbb\xbf{"memory": "I fed the hens."}', "application/json"),  # a UTF-8 byte-order mark is tolerated
    (b'{"memory": "I fed the hens \\ud83d\\ude00", "n": [1.5e300, -0.0, 12345678901234567890]}', "application/json"),
    (b'{"memory": "I fed the hens.", "deep": ' + b"[" * 30 + b"]" * 30 + b"}", "application/json"),
])
def test_well_formed_variants_are_accepted(rater_url, raw, content_type):
    r = raw_post(rater_url, raw, content_type)
    assert r.status_code == 200, r.text
    assert 1 <= r.json()["rating"] <= 10


def test_wrong_method_says_which_are_allowed(rater_url):
    r = requests.get(rater_url, timeout=5)
    assert r.status_code == 405 and "POST" in r.headers["Allow"] and "error" in r.json()


# ------------------------------------------------------------------------------------------------- fuzzing

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(categories=["L", "N", "P", "Z", "S", "C"]), max_size=30),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
_text = st.text(st.characters(categories=["L", "N", "P", "Z", "S", "Cc", "Cf", "Cs", "M"]), max_size=60)
_memory = st.fixed_dictionaries({"id": _text | _json, "text": _text | _json},
                                optional={"rating": st.integers(-3, 13) | _json})
_bodies = {
    "/rate": st.fixed_dictionaries({"memory": _text | _json}, optional={"agent": _json, "context": _json}),
    "/rate/batch": st.fixed_dictionaries({"memories": st.lists(_text, max_size=6) | _json}),
    "/reflect": st.fixed_dictionaries({"memories": st.lists(_memory, max_size=6) | _json},
                                      optional={"agent": _text | _json, "max_insights": st.integers(-2, 12) | _json}),
}
_PIECES = [b"{", b"}", b"[", b"]", b'"memory"', b'"memories"', b'"id"', b'"text"', b":", b",", b'"x"', b"NaN",
           b"-Infinity", b"1e999", b"1" * 5000, b"\\ud800", b'"\\udfff"', b"\xff", b"\xc3", b"\x00", b"true", b"null",
           b"0.5", b"-", b'"', b"\\", b" ", b"\xef\xbb\xbf"]
_raw = st.binary(max_size=200) | st.lists(st.sampled_from(_PIECES), max_size=30).map(b"".join)


def check_answer(r: requests.Response, path: str) -> None:
    """Never a 5xx; a JSON object always; a 4xx says what is wrong; a 200 has the documented shape."""
    assert r.status_code < 500, r.text
    body = r.json()
    assert isinstance(body, dict)
    if r.status_code >= 400:
        assert isinstance(body["error"], str) and body["error"]
    elif path == "/rate":
        assert isinstance(body["rating"], int) and 1 <= body["rating"] <= 10
    elif path == "/rate/batch":
        assert all(1 <= x["rating"] <= 10 for x in body["ratings"])
    else:
        assert isinstance(body["insights"], list)


@pytest.fixture(scope="module")
def fuzz_session():
    with requests.Session() as session:
        yield session


_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.parametrize("path", ENDPOINTS)
def test_fuzzed_json_bodies_never_get_a_5xx(rater_url, fuzz_session, path):
    url = base(rater_url) + path

    @_FUZZ
    @given(st.one_of(_bodies[path], _json))
    def run(body):
        raw = json.dumps(body).encode()  # ASCII with \\u escapes: lone surrogates travel too
        check_answer(fuzz_session.post(url, data=raw, headers={"Content-Type": "application/json"}, timeout=30),
                     path)

    run()
    assert requests.get(base(rater_url) + "/health", timeout=5).json()["status"] == "ok"


@pytest.mark.parametrize("path", ENDPOINTS)
def test_fuzzed_raw_bytes_never_get_a_5xx(rater_url, fuzz_session, path):
    url = base(rater_url) + path

    @_FUZZ
    @given(_raw, st.sampled_from(["application/json", "application/json; charset=utf-8", "text/plain", None]))
    def run(raw, content_type):
        headers = {} if content_type is None else {"Content-Type": content_type}
        check_answer(fuzz_session.post(url, data=raw, headers=headers, timeout=30), path)

    run()
    assert requests.get(base(rater_url) + "/health", timeout=5).json()["status"] == "ok"


def test_fuzzed_memories_are_rated_exactly_when_they_are_valid(rater_url, fuzz_session):
    """The oracle: any text without unpaired surrogates, with a character that shows (not whitespace, control or
    format) and at most 10 000 characters, gets a rating."""

    @settings(max_examples=80, deadline=None)
    @given(_text)
    def run(text):
        r = fuzz_session.post(rater_url, data=json.dumps({"memory": text}),
                              headers={"Content-Type": "application/json"}, timeout=30)
        shows = any(not c.isspace() and unicodedata.category(c) not in ("Cc", "Cf", "Cs") for c in text)
        valid = shows and not any(0xD800 <= ord(c) <= 0xDFFF for c in text)
        assert r.status_code == (200 if valid else 400), (text, r.text)
        check_answer(r, "/rate")

    run()


def test_fuzzed_requests_to_the_protected_rater(protected_url, fuzz_session):
    header = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=40).map(str.lstrip)

    @_FUZZ
    @given(st.sampled_from(ENDPOINTS), _json, st.none() | header | header.map(lambda h: f"Bearer {h}"))
    def run(path, body, authorization):
        headers = {"Content-Type": "application/json"}
        if authorization is not None:
            headers["Authorization"] = authorization.encode("latin-1")
        r = fuzz_session.post(protected_url + path, data=json.dumps(body), headers=headers, timeout=30)
        assert r.status_code == 401, r.text

    run()
    assert requests.get(protected_url + "/health", timeout=5).json()["status"] == "ok"


# ------------------------------------------------------------------------------------------------------ CLI


@pytest.fixture()
def served(monkeypatch):
    """Runs ``python -m rater_server`` (what ``simulacra rater`` becomes) with waitress.serve replaced; yields the
    captured ``(app, kwargs)`` list."""
    import waitress

    calls = []
    monkeypatch.setattr(waitress, "serve", lambda app, **kw: calls.append((app, kw)))
    return calls


def test_cli_serves_with_the_token_from_the_environment(served, monkeypatch, capsys):
    from rater_server.cli import main

    monkeypatch.setenv(TOKEN_ENV, TOKEN)
    assert main(["--port", "5123", "--threads", "3"]) == 0
    err = capsys.readouterr().err
    assert "token required" in err and TOKEN not in err and "3 threads" in err
    (app, kw), = served
    assert kw == {"host": "127.0.0.1", "port": 5123, "threads": 3}
    client = app.test_client()
    assert client.post("/rate", json=VALID["/rate"]).status_code == 401
    assert client.get("/health").json["token_required"] is True


def test_cli_without_a_token_says_so_and_warns_beyond_loopback(served, capsys):
    from rater_server.cli import main

    assert main(["--host", "0.0.0.0"]) == 0
    err = capsys.readouterr().err
    assert "no token required" in err and "warning" in err
    assert served[0][1]["threads"] == 4 and served[0][0].test_client().get("/health").json["token_required"] is False
    assert main([]) == 0 and "warning" not in capsys.readouterr().err


@pytest.mark.parametrize("args, env, needle", [
    (["--threads", "0"], None, "--threads must be at least 1"),
    (["--port", "70000"], None, "--port must be 0..65535"),
    ([], "two words", f"{TOKEN_ENV}: the rater token must be"),
])
def test_cli_refuses_bad_settings(served, monkeypatch, capsys, args, env, needle):
    from rater_server.cli import main

    if env is not None:
        monkeypatch.setenv(TOKEN_ENV, env)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert needle in err and not served
    if env is not None:
        assert env not in err


def test_simulacra_rater_is_the_rater_servers_command():
    """``simulacra rater ARGS`` becomes ``python -m rater_server ARGS`` (a real process): same help, same refusals,
    exit status 2; and the library never imports rater_server."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "simulacra.cli", "rater", "--port", "70000"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 2 and "simulacra rater: error: --port must be 0..65535" in out.stderr
    out = subprocess.run([sys.executable, "-m", "simulacra.cli", "-v", "rater", "--help"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0 and "--threads" in out.stdout and "--check" in out.stdout
    code = ("import sys, simulacra.runtime, simulacra.rater, simulacra.rating.llm, simulacra.simulation, "
            "simulacra.cli; print('rater_server' in sys.modules)")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120).stdout.strip() == "False"


def test_a_first_rating_fits_once_however_many_requests_wait_for_it(embedder):
    """Two first ratings at once (a client retrying one that timed out) wait for one fit, not one fit each; and a
    rater started in-process is fitted before it serves anything."""
    import threading

    from simulacra.rater import connect_rater
    from simulacra.rating.backends import EmbeddingRater

    class Counting:
        def __init__(self, inner):
            self.inner, self.name, self.calls = inner, inner.name, []

        @property
        def dim(self):
            return self.inner.dim

        def embed(self, texts):
            self.calls.append(len(texts))
            return self.inner.embed(texts)

    examples = [(f"memory number {i} about the harvest", 1 + i % 10) for i in range(40)]
    counting = Counting(embedder)
    backend = EmbeddingRater(counting, examples=examples, k=3)
    threads = [threading.Thread(target=backend.rate, args=([f"first memory {i}"],)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert counting.calls.count(len(examples)) == 1  # the examples were embedded once

    counting = Counting(embedder)
    backend = EmbeddingRater(counting, examples=examples, k=3)
    client = connect_rater("http://127.0.0.1:0/rate", 10.0, True, counting, 3, backend=backend)
    assert counting.calls == [len(examples)]  # fitted during set-up, before any rating
    client.rate_many(["a memory"])
    assert counting.calls == [len(examples), 1]
