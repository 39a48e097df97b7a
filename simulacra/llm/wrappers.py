"""Wrappers around any :class:`~simulacra.llm.LanguageModel` (Concordia's retry and call-limit wrappers).

Each wrapper is itself a ``LanguageModel``, keeps the model it wraps in ``inner`` and its name in ``name``, and is
safe to call from several threads (the rater serves requests on threads). :func:`simulacra.llm.build_model` stacks
them; :func:`unwrap` finds one in a stack.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential_jitter

from simulacra.llm.base import BudgetExceeded, Completion, LanguageModel, LLMUnavailable

log = logging.getLogger(__name__)

W = TypeVar("W")


def unwrap(model: Any, kind: type[W]) -> W | None:
    """The first model of type ``kind`` in ``model``'s stack of wrappers (following ``.inner``), or ``None``."""
    seen = 0
    while model is not None and seen < 64:
        if isinstance(model, kind):
            return model
        model = getattr(model, "inner", None)
        seen += 1
    return None


class _Wrapper:
    #: the attributes holding what the wrapper counted or spent (saved by a checkpoint, :meth:`counters`)
    COUNTERS: tuple[str, ...] = ()

    def __init__(self, inner: LanguageModel):
        self.inner = inner
        self.name = inner.name

    def counters(self) -> dict[str, int | float]:
        """What this wrapper counted so far (its :attr:`COUNTERS`), for a checkpoint."""
        return {k: getattr(self, k) for k in self.COUNTERS}

    def restore_counters(self, saved: dict[str, int | float]) -> None:
        """Take up the counts :meth:`counters` returned (a resumed run goes on counting from there); keys that
        are not counters of this wrapper are ignored."""
        for k in self.COUNTERS:
            if k in saved:
                setattr(self, k, saved[k])

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r})"

    def close(self) -> None:
        """Close the wrapped model (its HTTP connections), when it can be closed."""
        close = getattr(self.inner, "close", None)
        if callable(close):
            close()


class _RetryAfterOrBackoff:
    """tenacity wait: the server's ``Retry-After`` when it sent one (capped), else exponential backoff with jitter."""

    def __init__(self, initial_wait_s: float, max_wait_s: float):
        self.max_wait_s = max_wait_s
        self.backoff = wait_exponential_jitter(initial=initial_wait_s, max=max_wait_s, jitter=initial_wait_s)

    def __call__(self, state: RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(err, "retry_after_s", None)
        if isinstance(asked, (int, float)) and asked >= 0:
            return min(float(asked), self.max_wait_s)
        return min(self.backoff(state), self.max_wait_s)


class RetryingModel(_Wrapper):
    """Retries :class:`~simulacra.llm.LLMUnavailable` (connection errors, timeouts, 408, 429, 5xx) with tenacity.

    Waits ``initial_wait_s * 2**n`` plus up to ``initial_wait_s`` of random jitter before retry ``n`` (0-based),
    at most ``max_wait_s``; a ``Retry-After`` the server sent (429 / 503) is honoured instead, capped at
    ``max_wait_s``. Nothing else is retried: a request error or a budget refusal goes straight to the caller.

    Args:
        inner: the model to call.
        attempts: tries per call, the first included (1 = no retries).
        initial_wait_s: seconds before the first retry (plus jitter).
        max_wait_s: longest wait between two tries, seconds.
        sleep: how to wait (tests pass a recorder instead of :func:`time.sleep`).

    Attributes:
        retries: retries made so far over all calls.
        gave_up: calls that failed after all their attempts.

    Raises:
        LLMUnavailable: from :meth:`complete`, after ``attempts`` failures; the message is the last failure's
            plus the number of attempts, ``status`` is the last status.
    """

    COUNTERS = ("retries", "gave_up")

    def __init__(
        self,
        inner: LanguageModel,
        attempts: int = 4,
        initial_wait_s: float = 0.5,
        max_wait_s: float = 20.0,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ):
        super().__init__(inner)
        if attempts < 1:
            raise ValueError(f"attempts must be at least 1, got {attempts}")
        self.attempts = attempts
        self.initial_wait_s = initial_wait_s
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        self._wait = _RetryAfterOrBackoff(initial_wait_s, max_wait_s)
        self._lock = threading.Lock()
        self.retries = 0
        self.gave_up = 0

    def worst_case_s(self, attempt_s: float) -> float:
        """Longest a call can take when each try takes at most ``attempt_s`` seconds: ``attempts`` tries and
        ``attempts - 1`` waits of at most ``max_wait_s`` each (a ``Retry-After`` is honoured up to that)."""
        return self.attempts * attempt_s + (self.attempts - 1) * self.max_wait_s

    def _before_sleep(self, state: RetryCallState) -> None:
        with self._lock:
            self.retries += 1
        wait = state.next_action.sleep if state.next_action is not None else 0.0
        err = state.outcome.exception() if state.outcome is not None else None
        log.warning("%s (attempt %d of %d); retrying in %.2f s", err, state.attempt_number, self.attempts, wait)

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        retrying = Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=self._wait,
            retry=retry_if_exception_type(LLMUnavailable),
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            reraise=True,
        )
        try:
            return retrying(
                self.inner.complete,
                messages,
                max_tokens=max_tokens,
                temperature=temperature,
                seed=seed,
                json_schema=json_schema,
            )
        except LLMUnavailable as err:
            with self._lock:
                self.gave_up += 1
            tries = f"{self.attempts} attempt" + ("s" if self.attempts != 1 else "")
            raise type(err)(  # the same kind: LLMUnreachable stays LLMUnreachable
                f"{err} (gave up after {tries}; llm.attempts sets how many)",
                status=err.status,
                retry_after_s=err.retry_after_s,
            ) from err


def spent_budget(calls: int, tokens: int, max_calls: int | None, max_tokens: int | None) -> str | None:
    """Which budget ``calls`` and ``tokens`` have spent: ``"token"`` (checked first), ``"call"``, or ``None``
    (``None`` limits: unlimited). The one rule of :class:`BudgetedModel` and the run-wide
    :class:`simulacra.cluster.ModelGate`."""
    if max_tokens is not None and tokens >= max_tokens:
        return "token"
    if max_calls is not None and calls >= max_calls:
        return "call"
    return None


class CallGate(Protocol):
    """What several processes' :class:`BudgetedModel` share when one run's model calls are made in all of them (Ray
    workers, :class:`simulacra.cluster.RayGate`): the run's bound on calls in flight and its call and token budget.

    ``enter()`` waits for a free place among the run's calls in flight and takes it, returning ``None``; or, when
    the run's budget is spent, waits until the calls in flight have finished and returns ``(which, calls,
    tokens)`` (``which``: ``"call"`` or ``"token"``; the run's figures) without taking a place. ``leave(tokens)``
    gives the place back and adds the call's tokens. ``take_up(calls, tokens)`` adds what a process had already
    spent (a resumed run's recorded calls)."""

    def enter(self) -> tuple[str, int, int] | None: ...

    def leave(self, tokens: int) -> None: ...

    def take_up(self, calls: int, tokens: int) -> None: ...


class BudgetedModel(_Wrapper):
    """Stops a run cleanly when a call or token budget is spent.

    The call budget counts requests sent through this wrapper, failed ones included: the call that would be call
    ``max_calls + 1`` raises :class:`~simulacra.llm.BudgetExceeded` *before* anything is sent. The token budget
    (prompt + completion tokens the server reported) is checked before each call: once ``max_tokens`` are spent,
    the next call raises. Calls already in flight on other threads when the limit is reached finish, so the total
    can pass ``max_tokens`` by what those calls spend.

    Determinism: a refusal waits until the calls in flight have finished (they were let through before it, none
    is let through after it) and only then takes the figures its message gives, so the message counts every call
    let through and all their tokens, whatever order the concurrent answers came back in. Which of several
    concurrent calls got the last places of a budget is the one timing-dependent choice, and the answers
    recorded in ``llm_calls.jsonl`` fix it: a resumed run takes up the run's spending from that file
    (:meth:`take_up`) and replays exactly the answers that were let through (the
    :class:`~simulacra.llm.replay.ReplayingModel` sits outside this wrapper), so it refuses the same requests
    with the same message, and a request the run was refused is never sent by the resume (a spent budget stays
    spent). With a token budget, whether a call is refused while others are in flight depends on which of them
    have finished (their tokens are known only then).

    Args:
        inner: the model to call.
        max_calls: most calls; ``None`` = unlimited.
        max_tokens: most tokens; ``None`` = unlimited.

    Attributes:
        calls: calls let through so far.
        tokens: tokens spent so far (prompt + completion, as reported).
    """

    COUNTERS = ("calls", "tokens")

    def __init__(self, inner: LanguageModel, max_calls: int | None = None, max_tokens: int | None = None):
        super().__init__(inner)
        self.max_calls = max_calls
        self.max_tokens = max_tokens
        self.calls = 0
        self.tokens = 0
        self._in_flight = 0
        self._taken_up = False
        self._lock = threading.Condition()
        #: the run's shared budget and bound on calls in flight (:meth:`share`), or ``None``: this model's own
        self.gate: CallGate | None = None

    def share(self, gate: CallGate) -> None:
        """From now on the budget and the bound on calls in flight are the run's, kept by ``gate`` (the run's calls
        are made in several processes: :mod:`simulacra.cluster`); what this model already spent (taken up from its
        recorded calls on a resume) is added to the run's. ``max_calls`` / ``max_tokens`` are then the run's
        limits, checked by the gate; this model still counts its own calls and tokens for its report."""
        with self._lock:
            self.gate = gate
            gate.take_up(self.calls, self.tokens)

    def take_up(self, records: Sequence[dict[str, Any]]) -> None:
        """Count the requests a run already sent, from its ``llm_calls.jsonl`` records (each line one request
        sent, failed ones included; ``prompt_tokens`` / ``completion_tokens`` ``null`` count 0). Used when a run
        is resumed: the file holds every request the run sent, those after its last checkpoint included, so the
        budget goes on from what was really spent; a checkpoint's counters (:meth:`restore_counters`) are then
        not taken (they stop at the checkpoint)."""
        with self._lock:
            self.calls = len(records)
            self.tokens = sum(int(r.get("prompt_tokens") or 0) + int(r.get("completion_tokens") or 0)
                              for r in records)
            self._taken_up = True

    def add_spent(self, calls: int, tokens: int) -> None:
        """Count ``calls`` requests and ``tokens`` tokens the run sent from another of its parts' files (a run
        resumed in one process after it ran on workers: their ``llm_calls.jsonl``), after :meth:`take_up`."""
        with self._lock:
            self.calls += int(calls)
            self.tokens += int(tokens)

    def restore_counters(self, saved: dict[str, int | float]) -> None:
        """As :meth:`_Wrapper.restore_counters`, unless :meth:`take_up` counted the run's recorded requests."""
        if not self._taken_up:
            super().restore_counters(saved)

    def _refusal(self, what: str) -> BudgetExceeded:
        return BudgetExceeded.refusal(self.name, what, self.calls, self.tokens, self.max_calls, self.max_tokens)

    def _spent(self) -> str | None:
        """Which budget is spent (``"token"``, ``"call"``) or ``None``; the lock is held."""
        return spent_budget(self.calls, self.tokens, self.max_calls, self.max_tokens)

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        if self.gate is not None:
            return self._complete_through_gate(self.gate, messages, max_tokens=max_tokens, temperature=temperature,
                                               seed=seed, json_schema=json_schema)
        with self._lock:
            spent = self._spent()
            if spent is not None:
                # the figures once the calls let through have finished (class docstring, "Determinism")
                self._lock.wait_for(lambda: self._in_flight == 0)
                raise self._refusal(spent)
            self.calls += 1
            self._in_flight += 1
        try:
            completion = self.inner.complete(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema
            )
        except BaseException:
            with self._lock:
                self._in_flight -= 1
                self._lock.notify_all()
            raise
        with self._lock:
            self.tokens += completion.prompt_tokens + completion.completion_tokens
            self._in_flight -= 1
            self._lock.notify_all()
        return completion


    def _complete_through_gate(self, gate: CallGate, messages: Sequence[dict], **kw: Any) -> Completion:
        """:meth:`complete` when the run's budget and calls in flight are shared (:meth:`share`): a place is taken
        from ``gate`` first (waiting while the run has ``llm.concurrency`` calls in flight), a spent run budget
        refuses with the run's figures."""
        refused = gate.enter()
        if refused is not None:
            which, calls, tokens = refused
            raise BudgetExceeded.refusal(self.name, which, calls, tokens, self.max_calls, self.max_tokens,
                                         run_wide=True)
        with self._lock:
            self.calls += 1
        spent = 0
        try:
            completion = self.inner.complete(messages, **kw)
            spent = completion.prompt_tokens + completion.completion_tokens
        finally:
            gate.leave(spent)
            with self._lock:
                self.tokens += spent
        return completion


class RecordingModel(_Wrapper):
    """Appends one JSON line per call to ``path`` (e.g. ``database/<run>/llm_calls.jsonl``), failures included.

    Each line: ``time`` (UTC ISO 8601, wall clock: this logs real calls, not game time), ``model``, ``messages``,
    ``max_tokens``, ``temperature``, ``seed``, ``json_schema``, ``answer`` (``null`` on failure), ``answered_by``
    (the model the server named), ``finish_reason``, ``prompt_tokens``, ``completion_tokens`` (``null`` on
    failure), ``latency_s`` (seconds) and ``error`` (``"<ErrorType>: <message>"`` or ``null``). The folder is
    created at the first call; the file is opened, appended to and closed per call, so it is complete if the
    run is killed.

    Args:
        inner: the model to call.
        path: the JSON-lines file.

    Attributes:
        lines: lines written by this wrapper.
    """

    def __init__(self, inner: LanguageModel, path: str | Path):
        super().__init__(inner)
        self.path = Path(path)
        self.lines = 0
        self._lock = threading.Lock()

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        when = datetime.now(timezone.utc).isoformat(timespec="milliseconds")
        start = time.perf_counter()
        record: dict[str, Any] = {
            "time": when,
            "model": self.name,
            "messages": [dict(m) for m in messages],
            "max_tokens": max_tokens,
            "temperature": temperature,
            "seed": seed,
            "json_schema": json_schema,
        }
        try:
            completion = self.inner.complete(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema
            )
        except Exception as err:
            record.update(answer=None, answered_by=None, finish_reason=None, prompt_tokens=None,
                          completion_tokens=None, latency_s=round(time.perf_counter() - start, 6),
                          error=f"{type(err).__name__}: {err}")
            self._write(record)
            raise
        record.update(answer=completion.text, answered_by=completion.model, finish_reason=completion.finish_reason,
                      prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                      latency_s=round(completion.latency_s, 6), error=None)
        self._write(record)
        return completion

    def _write(self, record: dict[str, Any]) -> None:
        line = json.dumps(record, ensure_ascii=False, default=str) + "\n"
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(line)
            self.lines += 1


def token_cost(prompt_tokens: float, completion_tokens: float, prompt_price_per_1k: float,
               completion_price_per_1k: float) -> float:
    """What tokens cost in US dollars: ``prompt / 1000 * prompt price + completion / 1000 * completion price``
    (prices per 1000 tokens, ``llm.prompt_price_per_1k`` and ``llm.completion_price_per_1k``). The one pricing
    rule: :class:`UsageMeter` (the run summary's ``cost_usd``) and :mod:`simulacra.frames` (per recorded call)."""
    return prompt_tokens / 1000 * prompt_price_per_1k + completion_tokens / 1000 * completion_price_per_1k


class UsageMeter(_Wrapper):
    """Counts calls, failures, tokens and latency, and prices the tokens.

    Args:
        inner: the model to call.
        prompt_price_per_1k: US dollars per 1000 prompt tokens.
        completion_price_per_1k: US dollars per 1000 completion tokens.
    """

    COUNTERS = ("_calls", "_failures", "_prompt", "_completion", "_latency")

    def __init__(self, inner: LanguageModel, prompt_price_per_1k: float = 0.0, completion_price_per_1k: float = 0.0):
        super().__init__(inner)
        self.prompt_price_per_1k = prompt_price_per_1k
        self.completion_price_per_1k = completion_price_per_1k
        self._lock = threading.Lock()
        self._calls = self._failures = self._prompt = self._completion = 0
        self._latency = 0.0

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        start = time.perf_counter()
        try:
            completion = self.inner.complete(
                messages, max_tokens=max_tokens, temperature=temperature, seed=seed, json_schema=json_schema
            )
        except Exception:
            with self._lock:
                self._calls += 1
                self._failures += 1
                self._latency += time.perf_counter() - start
            raise
        with self._lock:
            self._calls += 1
            self._prompt += completion.prompt_tokens
            self._completion += completion.completion_tokens
            self._latency += time.perf_counter() - start
        return completion

    def report(self) -> dict:
        """Totals so far.

        Returns:
            ``calls`` (failed ones included), ``failures`` (calls that raised), ``prompt_tokens``,
            ``completion_tokens``, ``cost_usd`` (tokens / 1000 * the prices) and ``mean_latency_s`` (seconds per
            call as the caller waited, retries and backoff included when this wraps a retrying model; 0 with no
            calls).
        """
        with self._lock:
            calls, failures, prompt, completion, latency = (
                self._calls, self._failures, self._prompt, self._completion, self._latency)
        cost = token_cost(prompt, completion, self.prompt_price_per_1k, self.completion_price_per_1k)
        return {
            "calls": calls,
            "failures": failures,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "cost_usd": cost,
            "mean_latency_s": latency / calls if calls else 0.0,
        }

    def summary(self) -> str:
        """One line for the end of a run, e.g. ``openai:gpt-4o-mini: 12 calls (1 failed), 3400 + 220 tokens, ...``."""
        r = self.report()
        return (f"{self.name}: {r['calls']} calls ({r['failures']} failed), {r['prompt_tokens']} prompt + "
                f"{r['completion_tokens']} completion tokens, ${r['cost_usd']:.4f}, "
                f"{r['mean_latency_s']:.2f} s per call")


def call_time_bound_s(model: Any) -> float | None:
    """Seconds one ``model.complete(...)`` call can take at most, from the stack's settings; ``None`` if unknown.

    The innermost model with a ``timeout_s`` (:class:`~simulacra.llm.OpenAIChatModel`: ``llm.timeout_s``, the
    HTTP read timeout) bounds one request; a try is one request, or two while a server's support for
    ``response_format`` is not known yet (``json_mode: auto``: a 400 to it is asked again without). A
    :class:`RetryingModel` in the stack multiplies that by its tries and adds its waits
    (:meth:`RetryingModel.worst_case_s`). The other wrappers add no waiting. A model without ``timeout_s``
    anywhere in its stack (a test fake) gives ``None``.

    Example: ``llm.timeout_s = 30``, ``llm.attempts = 4`` (waits of at most 20 s) and an unknown server:
    ``4 * (2 * 30) + 3 * 20 = 300`` s; once the server is known, ``4 * 30 + 60 = 180`` s.
    """
    retrying: RetryingModel | None = None
    adapter = None
    node, seen = model, 0
    while node is not None and seen < 64:
        if retrying is None and isinstance(node, RetryingModel):
            retrying = node
        if isinstance(getattr(node, "timeout_s", None), (int, float)):
            adapter = node
        node = getattr(node, "inner", None)
        seen += 1
    if adapter is None:
        return None
    unknown = getattr(adapter, "json_mode", "off") == "auto" and getattr(adapter, "response_format_supported",
                                                                         False) is None
    attempt_s = float(adapter.timeout_s) * (2 if unknown else 1)
    return retrying.worst_case_s(attempt_s) if retrying is not None else attempt_s


class CachingModel(_Wrapper):
    """Answers an identical request (messages, ``max_tokens``, ``temperature``, ``seed``, ``json_schema``) from
    memory instead of asking again; only complete answers (``finish_reason`` other than ``"length"``) are kept.

    Meant for deterministic requests (temperature 0 or a fixed seed): the same prompt then gets the same answer
    anyway, and a town asks the same thing often (agents with the same plan, a retold summary). A cached answer
    reports 0 tokens and 0 latency: nothing was spent on it.

    Args:
        inner: the model to ask on a miss.
        max_entries: answers kept (least recently used dropped first); 0 disables the cache.
    Attributes:
        hits, misses: requests answered from the cache / sent on.
    """

    COUNTERS = ("hits", "misses")

    def __init__(self, inner: LanguageModel, max_entries: int = 10_000):
        super().__init__(inner)
        from collections import OrderedDict

        self.max_entries = max_entries
        self._cache: OrderedDict[str, Completion] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        key = self._key(messages, max_tokens, temperature, seed, json_schema)
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None:
                self._cache.move_to_end(key)
                self.hits += 1
                return Completion(hit.text, hit.model, 0, 0, 0.0, hit.finish_reason)
            self.misses += 1
        answer = self.inner.complete(messages, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                     json_schema=json_schema)
        self._keep(key, answer)
        return answer

    @staticmethod
    def _key(messages: Sequence[dict], max_tokens: int, temperature: float, seed: int | None,
             json_schema: dict | None) -> str:
        return json.dumps([list(messages), max_tokens, temperature, seed, json_schema], sort_keys=True, default=str)

    def _keep(self, key: str, answer: Completion) -> None:
        if self.max_entries and answer.finish_reason != "length":
            with self._lock:
                self._cache[key] = answer
                while len(self._cache) > self.max_entries:
                    self._cache.popitem(last=False)

    def prime(self, messages: Sequence[dict], answer: Completion, *, max_tokens: int = 256, temperature: float = 0.0,
              seed: int | None = None, json_schema: dict | None = None) -> None:
        """Keep ``answer`` as if the request had just been answered (a resumed run's cache, filled from the
        answers recorded before its checkpoint; counts neither a hit nor a miss)."""
        self._keep(self._key(messages, max_tokens, temperature, seed, json_schema), answer)


__all__ = ["BudgetedModel", "CachingModel", "RecordingModel", "RetryingModel", "UsageMeter", "call_time_bound_s",
           "unwrap"]
