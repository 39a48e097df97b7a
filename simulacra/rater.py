"""The run's importance rater (seed 003): :class:`InProcessRater` rates with a backend of
:mod:`simulacra.rating` in this process; :class:`RaterClient` asks a rater over HTTP (``simulacra rater`` or any
server speaking seed 003's ``POST /rate``, e.g. ``http://127.0.0.1:5000/rate``). :func:`connect_rater` picks: the
rater answering at ``rater.url`` if one does, else the in-process one. Both are a :class:`Rater`: they cache
ratings by text, rate a tick's new memories in one request, check what the rater answers (an unusable rating is
:data:`FALLBACK_RATING`, logged and counted), and :meth:`Rater.reflect` asks for insights about several
memories, each citing the memories it rests on.

Over HTTP the client sends every new memory of a tick in one request to ``<url>/batch`` (several when there are
more than :data:`simulacra.rating.CLIENT_BATCH`; falling back to one ``POST <url>`` per memory for a rater that only
speaks seed 003's single form) and retries transient failures
with backoff (tenacity).

Slow models: a rater whose backend asks a language model says in its health (``GET /health``, or the backend's
``health()`` in-process) how long one model call can take with its retries (``limits.model_call_s``, derived
from ``llm.timeout_s``, ``llm.attempts`` and the backoff) and how many calls a request can make (fewer than
``limits.model_calls_per_memory`` per memory; one for a reflection). The HTTP client reads it when it connects
and waits, per request, ``timeout_s + calls * model_call_s`` seconds (:meth:`RaterClient.request_timeout_s`), so
a slow model makes a slow run, not a dead one; while a request waits, either rater reports every
``wait_report_s`` seconds (a warning in the log, or the ``on_wait`` callback). What the rater's model cost is
summed from the answers' ``usage`` (:attr:`Rater.truncations`, ...) and its measured quality read from its health
(:meth:`Rater.model_quality`); :meth:`Rater.report` has both for a run's summary.

A rater started with a token (``SIMULACRA_RATER_TOKEN``) wants ``Authorization: Bearer <token>`` on every
request but ``GET /health``: the client sends the token given to it or, by default, the one in the same
environment variable (read when the client is made, never at import), and a 401 is a :class:`RaterError`
at once, not retried.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar
from urllib.parse import urlparse

import requests
from tenacity import (
    retry,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from simulacra.errors import RaterError

log = logging.getLogger(__name__)

T = TypeVar("T")

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


def _log_wait(what: str, elapsed_s: float, limit_s: float) -> None:
    """The default ``on_wait``: a warning, so that the CLI's default log level shows it. ``limit_s`` 0: the rater
    has no language model (the offline backend), so neither a slow model nor a limit is named."""
    if limit_s <= 0:
        log.warning("waiting for the rater (%s): %.0f s so far", what, elapsed_s)
        return
    log.warning("waiting for the rater (%s): %.0f s so far; its language model is slow (the client waits up to "
                "%.0f s, derived from the model's llm.timeout_s and llm.attempts)", what, elapsed_s, limit_s)


class _Waiting:
    """While open, calls ``report(elapsed_s)`` every ``interval_s`` seconds from a daemon thread."""

    def __init__(self, interval_s: float, report: Callable[[float], None]):
        self.interval_s = interval_s
        self._report = report
        self._done = threading.Event()
        self._thread: threading.Thread | None = None
        self.start = 0.0
        self._end: float | None = None

    def _loop(self) -> None:
        while not self._done.wait(self.interval_s):
            try:
                self._report(time.perf_counter() - self.start)
            except Exception:  # a failing callback must not kill the wait
                log.exception("on_wait callback failed")

    def __enter__(self) -> _Waiting:
        self.start = time.perf_counter()
        if self.interval_s > 0:
            self._thread = threading.Thread(target=self._loop, name="rater-wait", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._end = time.perf_counter()
        self._done.set()
        if self._thread is not None:
            self._thread.join()

    @property
    def elapsed_s(self) -> float:
        """Seconds from opening to closing (to now while open)."""
        return (self._end if self._end is not None else time.perf_counter()) - self.start


class Rater:
    """What every rater of a run does, whether its backend answers over HTTP (:class:`RaterClient`) or in this
    process (:class:`InProcessRater`): it caches ratings by text (a resumed run asks exactly what the uninterrupted
    one asked, :meth:`counters`), turns an unusable rating into :data:`FALLBACK_RATING` (logged and counted),
    checks reflections' insights against the memories sent, sums what the rater's model spent, and reports
    waits of ``wait_report_s`` seconds or more.

    Args:
        on_wait: called as ``on_wait(what, elapsed_s, limit_s)`` every ``wait_report_s`` seconds while a
            request is unanswered (``what`` e.g. ``"rating 16 memories"``); default: a logged warning.
        wait_report_s: seconds between two ``on_wait`` calls; 0 = never.
    Attributes:
        fallbacks: memories that got :data:`FALLBACK_RATING` because the answer was unusable.
        requests_sent: requests made (HTTP requests, or calls of the in-process backend).
        reflections_requested: calls of :meth:`reflect`.
        insights_dropped: insights :meth:`reflect` left out because they were unusable (logged).
        model_call_s: seconds one call of the rater's model can take with its retries (``limits.model_call_s`` of
            the rater's health); ``None``: unknown or no model.
        model_calls_per_memory: a rating request for ``n`` memories makes fewer than this times ``n`` calls.
        truncations, model_calls, model_errors, model_fallbacks, model_s: summed over the rating answers'
            ``usage``: the rater's model answers cut at ``max_tokens``, its calls, its failed calls, memories
            its offline backend rated instead, and seconds spent in its calls.
        slow_requests: requests that took at least ``wait_report_s``; ``waited_s``: seconds spent waiting for
            all requests.
    """

    #: what the rater counted (summed into a run's summary), saved by a checkpoint with the ratings it cached
    COUNTERS = ("truncations", "model_calls", "model_errors", "model_fallbacks", "model_s", "slow_requests",
                "waited_s", "fallbacks", "requests_sent", "reflections_requested", "insights_dropped")
    #: names the rater in messages
    where = "the rater"

    def __init__(self, *, on_wait: Callable[[str, float, float], None] | None = None, wait_report_s: float = 10.0):
        self.on_wait = on_wait or _log_wait
        self.wait_report_s = wait_report_s
        self.model_call_s: float | None = None
        self.model_calls_per_memory = 2
        self._quality: dict | None = None
        self.truncations = self.model_calls = self.model_errors = self.model_fallbacks = 0
        self.model_s = 0.0
        self.slow_requests = 0
        self.waited_s = 0.0
        self._cache: dict[str, int] = {}
        self.fallbacks = 0
        self.requests_sent = 0
        self.reflections_requested = 0
        self.insights_dropped = 0

    def counters(self) -> dict:
        """``{counter: value}`` of :data:`COUNTERS` and ``"ratings"``: ``{memory text: rating}`` cached so far
        (so that a resumed run asks the rater exactly what the uninterrupted run asked)."""
        return {**{k: getattr(self, k) for k in self.COUNTERS}, "ratings": dict(self._cache)}

    def restore_counters(self, saved: dict) -> None:
        """Take up what :meth:`counters` returned; unknown keys are ignored."""
        for k in self.COUNTERS:
            if k in saved:
                setattr(self, k, saved[k])
        self._cache = {str(t): int(r) for t, r in saved.get("ratings", {}).items()}

    def request_timeout_s(self, model_calls: int) -> float:
        """Seconds a request that can make ``model_calls`` calls of the rater's model may take before it is
        reported as a wait's limit: ``model_calls * model_call_s`` (0 when unknown); :class:`RaterClient` adds its
        ``timeout_s``."""
        return 0.0 if self.model_call_s is None else max(1, model_calls) * self.model_call_s

    def _calls_for(self, memories: int) -> int:
        return max(1, self.model_calls_per_memory * memories - 1)

    def _read_limits(self, health: dict) -> None:
        """Take ``limits`` (``model_call_s``, ``model_calls_per_memory``) and ``quality`` from a health answer."""
        limits = health.get("limits")
        if isinstance(limits, dict):
            call_s, per = limits.get("model_call_s"), limits.get("model_calls_per_memory")
            ok = isinstance(call_s, (int, float)) and not isinstance(call_s, bool) and math.isfinite(call_s)
            self.model_call_s = float(call_s) if ok and call_s > 0 else None
            if isinstance(per, int) and not isinstance(per, bool) and per >= 1:
                self.model_calls_per_memory = per
        if isinstance(health.get("quality"), dict):
            self._quality = health["quality"]

    def _waiting(self, what: str, limit_s: float) -> _Waiting:
        """A wait for ``what``, reported with ``limit_s``, or with 0 when the rater has no model (the offline one:
        its report names no slow model; over HTTP the limit is then only the client's ``timeout_s``)."""
        reported = limit_s if self.model_call_s is not None else 0.0
        return _Waiting(self.wait_report_s, lambda elapsed: self.on_wait(what, elapsed, reported))

    def _waited(self, waiting: _Waiting, what: str) -> None:
        """Count a request's wait (``waited_s``; ``slow_requests`` and a warning past ``wait_report_s``)."""
        self.waited_s += waiting.elapsed_s
        if self.wait_report_s > 0 and waiting.elapsed_s >= self.wait_report_s:
            self.slow_requests += 1
            log.warning("%s answered %s after %.0f s", self.where, what, waiting.elapsed_s)

    def _add_usage(self, answer) -> None:
        """Sum a rating answer's ``usage`` (what the rater's model spent on it) into the counters."""
        usage = answer.get("usage") if isinstance(answer, dict) else None
        if not isinstance(usage, dict):
            return

        def number(key: str) -> float:
            value = usage.get(key)
            ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
            return max(0.0, float(value)) if ok else 0.0

        self.truncations += int(number("truncations"))
        self.model_calls += int(number("llm_calls") + number("llm_errors"))
        self.model_errors += int(number("llm_errors"))
        self.model_fallbacks += int(number("fallbacks"))
        self.model_s += number("seconds")

    def model_quality(self, refresh: bool = True) -> dict | None:
        """The rater model's measured quality (``quality`` of its health: ``sample``, ``parsed``, ``spearman``,
        ``mae``, ``min_spearman``, ``weak``, ``reason``, ``using``, ...; see :mod:`simulacra.rating.quality`), or
        ``None`` when the rater has no model or did not measure it. With ``refresh``, reads the health again;
        when it does not answer, the last figures read are returned."""
        return self._quality

    def report(self, refresh: bool = True) -> dict:
        """What a run's summary shows of its rater: ``{"truncations", "model_calls", "model_errors",
        "model_fallbacks": int, "model_s": float (seconds in model calls), "slow_requests": int, "waited_s":
        float (seconds waiting for the rater), "fallbacks": int (unusable answers), "quality": dict | None
        (:meth:`model_quality`), "quality_line": str (one line, :func:`simulacra.rating.quality.describe`)}``."""
        from simulacra.rating.quality import describe

        quality = self.model_quality(refresh)
        return {"truncations": self.truncations, "model_calls": self.model_calls, "model_errors": self.model_errors,
                "model_fallbacks": self.model_fallbacks, "model_s": round(self.model_s, 3),
                "slow_requests": self.slow_requests, "waited_s": round(self.waited_s, 3), "fallbacks": self.fallbacks,
                "quality": quality, "quality_line": describe(quality)}

    def _rating_from(self, answer, memory: str) -> int:
        rating = _coerce_rating(answer.get("rating")) if isinstance(answer, dict) else None
        if rating is None:
            self.fallbacks += 1
            log.warning("%s answered no usable rating for %r: %r; using %d", self.where, memory, answer,
                        FALLBACK_RATING)
            return FALLBACK_RATING
        return rating

    def rate_many(self, memories: Sequence[str]) -> list[int]:
        """Ratings 1..10 for ``memories`` (same order); one request for all uncached texts.

        Raises:
            RaterError: the rater is unreachable or rejects the request (4xx; 401 for a missing or wrong
                token) after retries.
            LLMError: the in-process rater's model cannot be used (budget spent, unreachable after retries).
        """
        todo = [m for m in dict.fromkeys(memories) if m not in self._cache]
        if todo:
            for text, rating in zip(todo, self._rate_uncached(todo)):
                self._cache[text] = rating
        return [self._cache[m] for m in memories]

    def _rate_uncached(self, todo: list[str]) -> list[int]:  # pragma: no cover - each rater has its own
        raise NotImplementedError

    def _reflect(self, items: list[dict], agent: str | None, max_insights: int) -> object:
        """The raw ``insights`` answered for ``items`` (checked by :meth:`reflect`)."""
        raise NotImplementedError  # pragma: no cover - each rater has its own

    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[dict]:
        """Insights about ``memories``, the best first (seed 003's reflection).

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
        items = [{"id": m["id"], "text": m["text"], **({"rating": m["rating"]} if m.get("rating") is not None else {})}
                 for m in memories]
        insights = self._reflect(items, agent, max_insights)
        if not isinstance(insights, list) or not all(
                isinstance(i, dict) and "text" in i and isinstance(i.get("evidence"), list) for i in insights):
            raise RaterError(f"{self.where} answered no usable 'insights' list of {{'text', 'evidence': [...]}}: "
                             f"{str(insights)[:200]!r}")
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
        """Release what the rater holds (safe twice)."""


class InProcessRater(Rater):
    """Rates with a backend in this process, no HTTP between (what a run uses when no rater answers at its
    ``rater.url``, and what each shard of a town builds for its agents).

    Args:
        backend: a :class:`simulacra.rating.backends.RaterBackend` (fitted before the first rating is best:
            :func:`connect_rater` does it).
        on_wait, wait_report_s: as :class:`Rater`; a backend call that takes ``wait_report_s`` seconds or more
            (a slow model) is reported while it runs.
    """

    def __init__(self, backend, *, on_wait: Callable[[str, float, float], None] | None = None,
                 wait_report_s: float = 10.0):
        super().__init__(on_wait=on_wait, wait_report_s=wait_report_s)
        self.backend = backend
        self.where = f"the in-process {backend.name} rater"
        self.model_quality(refresh=True)

    def _call(self, what: str, model_calls: int, fn: Callable[[], T]) -> T:
        self.requests_sent += 1
        waiting = self._waiting(what, self.request_timeout_s(model_calls))
        try:
            with waiting:
                return fn()
        finally:
            self._waited(waiting, what)

    def _rate_uncached(self, todo: list[str]) -> list[int]:
        from simulacra.rating.backends import rate_with_usage

        ratings, usage = self._call(f"rating {len(todo)} memories", self._calls_for(len(todo)),
                                    lambda: rate_with_usage(self.backend, todo))
        if usage is not None:
            self._add_usage({"usage": usage})
        if len(ratings) != len(todo):  # pragma: no cover - a backend's contract
            log.warning("%s answered %d ratings for %d memories", self.where, len(ratings), len(todo))
            ratings = [None] * len(todo)
        return [self._rating_from(None if r is None else r.to_dict(), m) for r, m in zip(ratings, todo)]

    def _reflect(self, items: list[dict], agent: str | None, max_insights: int) -> object:
        insights = self._call(f"reflecting on {len(items)} memories", 1,
                              lambda: self.backend.reflect(items, agent=agent, max_insights=max_insights))
        return [i.to_dict() for i in insights]

    def model_quality(self, refresh: bool = True) -> dict | None:
        if refresh and callable(getattr(self.backend, "health", None)):
            self._read_limits(self.backend.health())
        return self._quality


class RaterClient(Rater):
    """Rates memories over HTTP (a ``simulacra rater`` or any server speaking seed 003's ``/rate``).

    Args:
        url: the ``/rate`` endpoint.
        timeout_s: seconds per request for everything but the rater's model calls (HTTP, queueing, the
            offline backend); a request that may call a model waits longer (:meth:`request_timeout_s`).
        attempts: tries per request on connection errors, timeouts and 5xx.
        token: bearer token sent with every request; ``None`` (default) takes it from :data:`TOKEN_ENV`,
            ``""`` sends none.
        on_wait, wait_report_s: as :class:`Rater`.
    Raises:
        RaterError: the token holds characters an HTTP header cannot carry (non-ASCII, spaces, controls).
    Attributes:
        as :class:`Rater`; ``model_call_s`` and ``model_calls_per_memory`` come from ``GET /health``
        (:meth:`refresh_limits`); ``None``: unknown or no model, requests wait ``timeout_s``.
    """

    def __init__(self, url: str, timeout_s: float = 30.0, attempts: int = 3, token: str | None = None, *,
                 on_wait: Callable[[str, float, float], None] | None = None, wait_report_s: float = 10.0):
        super().__init__(on_wait=on_wait, wait_report_s=wait_report_s)
        self.url = url.rstrip("/")
        self.where = f"the rater at {self.url}"
        self.timeout_s = timeout_s
        self.attempts = attempts
        token = token_from_env() if token is None else (token.strip() or None)
        if token is not None and (not token.isascii() or not token.isprintable() or " " in token):
            raise RaterError(f"the rater token ({TOKEN_ENV}) must be printable ASCII without spaces")
        self._token = token  # never logged or shown
        self._session = requests.Session()
        if token is not None:
            self._session.headers["Authorization"] = f"Bearer {token}"
        self._batch_supported: bool | None = None

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

    def refresh_limits(self, health: dict | None = None) -> dict | None:
        """Read ``limits`` and ``quality`` from ``health`` (default: ``GET /health`` now) into
        :attr:`model_call_s`, :attr:`model_calls_per_memory` and :meth:`model_quality`'s cache.

        Returns:
            the health answer, or ``None`` when nothing answers (nothing is changed then).
        """
        health = self.health(timeout_s=max(1.0, min(self.timeout_s, 10.0))) if health is None else health
        if health is None:
            return None
        self._read_limits(health)
        return health

    def request_timeout_s(self, model_calls: int) -> float:
        """Seconds to wait for a request that can make ``model_calls`` calls of the rater's model:
        ``timeout_s + model_calls * model_call_s`` (just ``timeout_s`` when ``model_call_s`` is unknown).

        Example: ``llm.timeout_s = 30``, ``llm.attempts = 4`` give ``model_call_s = 300`` before the model's
        server is known to take ``response_format`` (180 after); rating 16 memories (at most 31 calls) then
        waits up to ``30 + 31 * 300`` s. The rater's calls end within that bound by construction (each is cut
        at ``llm.timeout_s`` and retried ``llm.attempts`` times, then the offline backend answers), so this
        bound is reached only by a rater that is stuck; a slow model only makes the wait long, reported
        every ``wait_report_s`` seconds.
        """
        return self.timeout_s + super().request_timeout_s(model_calls)

    def _post(self, url: str, body: dict, model_calls: int = 1, what: str = "a request") -> requests.Response:
        limit = self.request_timeout_s(model_calls)

        @retry(stop=stop_after_attempt(self.attempts), wait=wait_exponential(multiplier=0.2, max=5),
               retry=retry_if_exception_type(_Transient), reraise=True)
        def send():
            self.requests_sent += 1
            waiting = self._waiting(what, limit)
            try:
                with waiting:
                    resp = self._session.post(url, json=body, timeout=(min(self.timeout_s, 10.0), limit))
            except requests.Timeout as err:
                raise _Transient(f"{err} (waited {waiting.elapsed_s:.0f} s: rater.timeout_s {self.timeout_s:g}"
                                 + (f" + {model_calls} model calls x {self.model_call_s:g} s" if self.model_call_s
                                    else "") + ")") from err
            except requests.ConnectionError as err:
                raise _Transient(str(err)) from err
            finally:
                self._waited(waiting, what)
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

    def model_quality(self, refresh: bool = True) -> dict | None:
        if refresh:
            self.refresh_limits()
        return self._quality

    def _rate_uncached(self, todo: list[str]) -> list[int]:
        """Ratings of ``todo`` in requests of at most :data:`~simulacra.rating.CLIENT_BATCH` memories (a tick of a
        large town has more new memories than one request may carry, or than the rater rates within the client's
        ``timeout_s``)."""
        from simulacra.rating import CLIENT_BATCH as n

        if len(todo) > n:
            return [r for k in range(0, len(todo), n) for r in self._rate_uncached(todo[k:k + n])]
        if self._batch_supported is not False:
            resp = self._post(self.url + "/batch", {"memories": todo}, self._calls_for(len(todo)),
                              f"rating {len(todo)} memories")
            if resp.status_code in (404, 405):
                self._batch_supported = False
            else:
                self._batch_supported = True
                if not resp.ok:
                    raise RaterError(f"rater at {self.url}/batch rejected the request: HTTP {resp.status_code} "
                                     f"{_error_text(resp)}")
                try:
                    answer = resp.json()
                except ValueError:
                    answer = None
                answers = answer.get("ratings") if isinstance(answer, dict) else None
                self._add_usage(answer)
                if not isinstance(answers, list) or len(answers) != len(todo):
                    log.warning("rater batch answer malformed: %r", resp.text[:200])
                    answers = [None] * len(todo)
                return [self._rating_from(a, m) for a, m in zip(answers, todo)]
        out = []
        for memory in todo:
            resp = self._post(self.url, {"memory": memory}, 1, "rating a memory")
            if not resp.ok:
                raise RaterError(f"rater at {self.url} rejected the request: HTTP {resp.status_code} "
                                 f"{_error_text(resp)}")
            try:
                answer = resp.json()
            except ValueError:
                answer = None
            self._add_usage(answer)
            out.append(self._rating_from(answer, memory))
        return out

    def _reflect(self, items: list[dict], agent: str | None, max_insights: int) -> object:
        url = f"{self.base_url}/reflect"
        body: dict = {"memories": items, "max_insights": max_insights}
        if agent is not None:
            body["agent"] = agent
        resp = self._post(url, body, 1, f"reflecting on {len(items)} memories")
        if not resp.ok:
            raise RaterError(f"rater at {url} rejected the request: HTTP {resp.status_code} {_error_text(resp)}")
        try:
            answer = resp.json()
        except ValueError:
            answer = None
        return answer.get("insights") if isinstance(answer, dict) else resp.text[:200]

    def close(self) -> None:
        self._session.close()


def _log_quality(client: Rater) -> None:
    quality = client.model_quality(refresh=False)
    if isinstance(quality, dict):
        from simulacra.rating.quality import describe

        (log.warning if quality.get("weak") or quality.get("error") else log.info)(
            "%s's model: %s", client.where, describe(quality))
    if client.model_call_s is not None:
        log.info("the rater's model calls take at most %.0f s each with their retries; a request for n memories "
                 "waits up to %.0f s + %d*n-1 such calls", client.model_call_s, getattr(client, "timeout_s", 0),
                 client.model_calls_per_memory)


def connect_rater(url: str, timeout_s: float, start_local: bool, embedder, neighbours: int = 11, *,
                  backend=None, token: str | None = None,
                  on_wait: Callable[[str, float, float], None] | None = None, wait_report_s: float = 10.0,
                  attempts: int = 3) -> Rater:
    """The run's rater: a :class:`RaterClient` when a rater answers at ``url``, else (a loopback ``url`` and
    ``start_local``) an :class:`InProcessRater` rating with ``backend`` in this process, no HTTP between.

    Args:
        url, timeout_s: the rater's ``/rate`` endpoint and the seconds per request. Port 0 never asks anything
            and rates in-process.
        start_local: whether to rate in-process when nothing answers at a loopback ``url``.
        embedder, neighbours: the in-process backend is ``EmbeddingRater(embedder, k=neighbours)``, unless
            ``backend`` is given (:func:`simulacra.rating.backends.build_backend`).
        backend: the :class:`simulacra.rating.backends.RaterBackend` to rate with in-process (not used when a
            rater answers at ``url``).
        token: bearer token for the rater at ``url``; ``None`` takes it from :data:`TOKEN_ENV`, ``""`` sends none.
        on_wait, wait_report_s: progress while a request waits (:class:`Rater`).
        attempts: tries per HTTP request (:class:`RaterClient`); after them a :class:`RaterError` stops the run.

    Before the in-process rater rates, its backend's start-up check runs when it has one
    (``backend.ensure_checked()``: :class:`simulacra.rating.llm.LLMRater` with a quality check), and the
    backend is fitted (``backend.fit()``: the offline rater embeds its labelled examples, about 10 s idle and a
    minute under load, so that the first tick does not pay it). The rater's quality is logged.

    Raises:
        RaterError: nothing answers, and the URL is not local or ``start_local`` is false; or the rater
            answering requires a token and there is none.
    """
    waiting = {"on_wait": on_wait, "wait_report_s": wait_report_s}
    client = RaterClient(url, timeout_s, attempts, token=token, **waiting)
    p = urlparse(url)
    # port 0 means "no server": never ask whoever listens at the scheme's default port
    health = None if p.port == 0 else client.health()
    if health is not None:
        return _use_running(client, url, health)
    client.close()
    if not (start_local and (p.hostname or "127.0.0.1") in ("127.0.0.1", "localhost", "::1")):
        raise RaterError(f"no rater answers at {url} (start one with 'simulacra rater', or use a loopback URL "
                         "with rater.start_local to rate in-process)")
    from simulacra.rating.backends import EmbeddingRater

    if callable(getattr(backend, "ensure_checked", None)):
        backend.ensure_checked()
    chosen = backend if backend is not None else EmbeddingRater(embedder, k=neighbours)
    if callable(getattr(chosen, "fit", None)):
        chosen.fit()  # during set-up, not in the first tick
    rater = InProcessRater(chosen, **waiting)
    log.info("rating in-process with the %s rater (nothing answers at %s)", chosen.name, url)
    _log_quality(rater)
    return rater


def _use_running(client: RaterClient, url: str, health: dict) -> RaterClient:
    """``client`` set up for the rater already answering at ``url`` with ``health``.

    Raises:
        RaterError: it requires a token and the client has none.
    """
    if health.get("token_required") and not client.has_token:
        client.close()
        raise RaterError(f"the rater at {url} requires a token: set {TOKEN_ENV} to the token it was started with")
    log.info("using the rater at %s", url)
    client.refresh_limits(health)
    _log_quality(client)
    return client
