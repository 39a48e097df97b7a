"""Client of the HTTP importance rater (seed 003: ``http://127.0.0.1:5000/rate``).

The simulation rates every new memory of a tick in one request to ``<url>/batch`` (falling back to one
``POST <url>`` per memory for a rater that only speaks seed 003's single form), caches ratings by text,
retries transient failures with backoff (tenacity), and, when nothing answers at a local URL, starts the
offline rater in-process on that address. :meth:`RaterClient.reflect` asks ``<base>/reflect`` for insights
about several memories, each citing the memories it rests on.

A rater started with a token (``SIMULACRA_RATER_TOKEN``) wants ``Authorization: Bearer <token>`` on every
request but ``GET /health``: the client sends the token given to it or, by default, the one in the same
environment variable (read when the client is made, never at import), and a 401 is a :class:`RaterError`
at once, not retried.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from urllib.parse import urlparse

import requests
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_exponential

from simulacra.errors import RaterError

log = logging.getLogger(__name__)

#: rating used when the rater answers something unusable (logged and counted, never silent)
FALLBACK_RATING = 3
#: environment variable holding the rater's bearer token (read by ``simulacra rater`` and by the client)
TOKEN_ENV = "SIMULACRA_RATER_TOKEN"


def token_from_env() -> str | None:
    """The token in :data:`TOKEN_ENV`, surrounding whitespace removed; ``None`` when unset or blank."""
    return os.environ.get(TOKEN_ENV, "").strip() or None


class _Transient(Exception):
    pass


def _coerce_rating(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(min(10, max(1, round(value))))
    if isinstance(value, str):
        try:
            return _coerce_rating(float(value.strip()))
        except ValueError:
            return None
    return None


def _error_text(resp) -> str:
    """The ``error`` message of a rater's JSON error answer (whole: it may say how to fix things), else the
    first 200 characters of the body."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return body["error"][:2000]
    return resp.text[:200]


class RaterClient:
    """Rates memories over HTTP.

    Args:
        url: the ``/rate`` endpoint.
        timeout_s: seconds per request.
        attempts: tries per request on connection errors, timeouts and 5xx.
        token: bearer token sent with every request; ``None`` (default) takes it from :data:`TOKEN_ENV`,
            ``""`` sends none.
    Raises:
        RaterError: the token holds characters an HTTP header cannot carry (non-ASCII, spaces, controls).
    Attributes:
        fallbacks: memories that got :data:`FALLBACK_RATING` because the answer was unusable.
        requests_sent: HTTP requests made.
        reflections_requested: calls of :meth:`reflect`.
        insights_dropped: insights :meth:`reflect` left out because they were unusable (logged).
    """

    def __init__(self, url: str, timeout_s: float = 30.0, attempts: int = 3, token: str | None = None):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.attempts = attempts
        token = token_from_env() if token is None else (token.strip() or None)
        if token is not None and (not token.isascii() or not token.isprintable() or " " in token):
            raise RaterError(f"the rater token ({TOKEN_ENV}) must be printable ASCII without spaces")
        self._token = token  # never logged or shown
        self._session = requests.Session()
        if token is not None:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._cache: dict[str, int] = {}
        self._batch_supported: bool | None = None
        self.fallbacks = 0
        self.requests_sent = 0
        self.reflections_requested = 0
        self.insights_dropped = 0

    @property
    def has_token(self) -> bool:
        """Whether requests carry a bearer token."""
        return self._token is not None

    @property
    def base_url(self) -> str:
        p = urlparse(self.url)
        return f"{p.scheme}://{p.netloc}"

    def health(self, timeout_s: float = 1.0) -> dict | None:
        """``GET /health`` of the rater, or ``None`` if nothing answers."""
        try:
            resp = self._session.get(f"{self.base_url}/health", timeout=timeout_s)
            body = resp.json() if resp.ok else None
            return body if isinstance(body, dict) else None
        except (requests.RequestException, ValueError):
            return None

    def _post(self, url: str, body: dict) -> requests.Response:
        @retry(stop=stop_after_attempt(self.attempts), wait=wait_exponential(multiplier=0.2, max=5),
               retry=retry_if_exception_type(_Transient), reraise=True)
        def send():
            self.requests_sent += 1
            try:
                resp = self._session.post(url, json=body, timeout=self.timeout_s)
            except (requests.ConnectionError, requests.Timeout) as err:
                raise _Transient(str(err)) from err
            if resp.status_code >= 500 or resp.status_code == 429:
                raise _Transient(f"HTTP {resp.status_code}: {resp.text[:200]}")
            if resp.status_code == 401:  # retrying cannot help
                problem = "rejected the token sent" if self.has_token else "requires a token and none was sent"
                raise RaterError(f"rater at {url} {problem} (HTTP 401): set {TOKEN_ENV} to the token the rater "
                                 "was started with")
            return resp

        try:
            return send()
        except _Transient as err:
            raise RaterError(f"rater at {url} failed after {self.attempts} attempts: {err}") from None

    def _rating_from(self, answer, memory: str) -> int:
        rating = _coerce_rating(answer.get("rating")) if isinstance(answer, dict) else None
        if rating is None:
            self.fallbacks += 1
            log.warning("rater answered no usable rating for %r: %r; using %d", memory, answer, FALLBACK_RATING)
            return FALLBACK_RATING
        return rating

    def rate_many(self, memories: Sequence[str]) -> list[int]:
        """Ratings 1..10 for ``memories`` (same order); one HTTP request for all uncached texts.

        Raises:
            RaterError: the rater is unreachable or rejects the request (4xx; 401 for a missing or wrong
                token) after retries.
        """
        todo = [m for m in dict.fromkeys(memories) if m not in self._cache]
        if todo:
            for text, rating in zip(todo, self._rate_uncached(todo)):
                self._cache[text] = rating
        return [self._cache[m] for m in memories]

    def _rate_uncached(self, todo: list[str]) -> list[int]:
        if self._batch_supported is not False:
            resp = self._post(self.url + "/batch", {"memories": todo})
            if resp.status_code in (404, 405):
                self._batch_supported = False
            else:
                self._batch_supported = True
                if not resp.ok:
                    raise RaterError(f"rater at {self.url}/batch rejected the request: HTTP {resp.status_code} "
                                     f"{_error_text(resp)}")
                try:
                    answers = resp.json().get("ratings")
                except (ValueError, AttributeError):
                    answers = None
                if not isinstance(answers, list) or len(answers) != len(todo):
                    log.warning("rater batch answer malformed: %r", resp.text[:200])
                    answers = [None] * len(todo)
                return [self._rating_from(a, m) for a, m in zip(answers, todo)]
        out = []
        for memory in todo:
            resp = self._post(self.url, {"memory": memory})
            if not resp.ok:
                raise RaterError(f"rater at {self.url} rejected the request: HTTP {resp.status_code} "
                                 f"{_error_text(resp)}")
            try:
                answer = resp.json()
            except ValueError:
                answer = None
            out.append(self._rating_from(answer, memory))
        return out

    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[dict]:
        """Insights about ``memories`` from ``POST <base_url>/reflect``, the best first.

        Args:
            memories: ``{"id": str, "text": str, "rating"?: int 1..10 | None}`` each, ids unique (1..500).
            agent: the reflecting agent's name.
            max_insights: at most this many insights (1..10).

        Returns:
            ``[{"text": str, "evidence": [id, ...]}, ...]``, possibly empty. The answer is checked: an
            insight with empty text is dropped, evidence ids that are not among ``memories``' ids are
            dropped (and repeats), an insight left with no evidence is dropped; each drop is logged and
            counted in ``insights_dropped``.

        Raises:
            RaterError: the rater rejects the request (4xx, e.g. a rater without ``/reflect``), is unreachable
                or failing after the retries, or answers something without an ``insights`` list of objects
                with ``text`` and ``evidence``.
        """
        self.reflections_requested += 1
        url = f"{self.base_url}/reflect"
        items = [{"id": m["id"], "text": m["text"], **({"rating": m["rating"]} if m.get("rating") is not None else {})}
                 for m in memories]
        body: dict = {"memories": items, "max_insights": max_insights}
        if agent is not None:
            body["agent"] = agent
        resp = self._post(url, body)
        if not resp.ok:
            raise RaterError(f"rater at {url} rejected the request: HTTP {resp.status_code} {_error_text(resp)}")
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        insights = answer.get("insights") if isinstance(answer, dict) else None
        if not isinstance(insights, list) or not all(
                isinstance(i, dict) and "text" in i and isinstance(i.get("evidence"), list) for i in insights):
            raise RaterError(f"rater at {url} answered no usable 'insights' list of {{'text', 'evidence': [...]}}: "
                             f"{resp.text[:200]!r}")
        known = {m["id"] for m in memories}
        out = []
        for n, insight in enumerate(insights):
            text = insight["text"].strip() if isinstance(insight["text"], str) else ""
            if not text:
                self.insights_dropped += 1
                log.warning("rater insight %d has no text: %r; dropped", n, insight)
                continue
            evidence = [e for e in dict.fromkeys(e for e in insight["evidence"] if isinstance(e, str)) if e in known]
            unknown = [e for e in insight["evidence"] if not isinstance(e, str) or e not in known]
            if unknown:
                log.warning("rater insight %d cites ids that were not sent: %r; dropped them", n, unknown)
            if not evidence:
                self.insights_dropped += 1
                log.warning("rater insight %d cites none of the memories sent: %r; dropped", n, insight)
                continue
            out.append({"text": text, "evidence": evidence})
        return out

    def close(self) -> None:
        self._session.close()


class LocalRaterServer:
    """The rater app served in-process on a background thread (werkzeug's threaded server).

    Used when nothing answers at the configured URL; stopped by :meth:`close`.
    """

    def __init__(self, app, host: str, port: int):
        from werkzeug.serving import make_server

        logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
        self._server = make_server(host, port, app, threaded=True)
        self.host, self.port = host, self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="rater", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/rate"

    def close(self) -> None:
        self._server.shutdown()
        self._thread.join(timeout=5)


def connect_rater(url: str, timeout_s: float, start_local: bool, embedder, neighbours: int = 11, *,
                  backend=None, token: str | None = None):
    """A :class:`RaterClient` for ``url``; starts a rater in-process if nothing answers there.

    Args:
        url, timeout_s: the rater's ``/rate`` endpoint and the seconds per request.
        start_local: whether to start a rater in-process when nothing answers at a local ``url``.
        embedder, neighbours: the offline rater started in-process is
            ``EmbeddingRater(embedder, k=neighbours)``, unless ``backend`` is given.
        backend: the :class:`rater_server.backends.RaterBackend` of a rater started in-process (not used when
            a rater already answers at ``url``).
        token: bearer token; ``None`` takes it from :data:`TOKEN_ENV`, ``""`` sends none. A rater started
            in-process requires the same token.

    Returns:
        ``(client, server)``; ``server`` is a :class:`LocalRaterServer` to close, or ``None``.
    Raises:
        RaterError: nothing answers, and the URL is not local or ``start_local`` is false, or the port is
            taken by something that is not a rater; or the rater answering requires a token and there is none.
    """
    client = RaterClient(url, timeout_s, token=token)
    health = client.health()
    if health is not None:
        if health.get("token_required") and not client.has_token:
            client.close()
            raise RaterError(f"the rater at {url} requires a token: set {TOKEN_ENV} to the token it was started with")
        log.info("using the rater at %s", url)
        return client, None
    p = urlparse(url)
    host = p.hostname or "127.0.0.1"
    if not start_local or host not in ("127.0.0.1", "localhost", "::1"):
        raise RaterError(f"no rater answers at {url} (start one with 'simulacra rater', or use a local URL)")
    from rater_server import create_app
    from rater_server.backends import EmbeddingRater

    secret = client._token
    app = create_app(backend if backend is not None else EmbeddingRater(embedder, k=neighbours), token=secret)
    try:
        server = LocalRaterServer(app, host, p.port or 80)
    except OSError as err:
        raise RaterError(f"nothing answers as a rater at {url} and its port cannot be used: {err}") from None
    log.info("started the %s rater in-process at %s%s", app.extensions["rater_backend"].name, server.url,
             " (token required)" if secret else "")
    client.close()
    # port 0 asks the OS for a free port: talk to the one it gave
    return RaterClient(url if p.port else server.url, timeout_s, token=secret or ""), server
