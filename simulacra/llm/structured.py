"""Asking a language model for JSON under a schema: the one rule the mind (:mod:`simulacra.cognition.llm_mind`), the
conversation summariser (:mod:`simulacra.cognition.history`) and the LLM rater (:mod:`simulacra.rating.llm`) follow.

:func:`ask_json` sends the messages with the schema (``response_format: json_schema`` where the server takes it,
:class:`~simulacra.llm.OpenAIChatModel`), reads the answer, hands it to the caller's ``parse`` and, when the answer
cannot be used (cut at ``max_tokens``, no JSON object, ``parse`` refuses it), asks again up to ``retries`` times
with the problem stated to the model. It never raises for a bad answer or a failed call: the result says what went
wrong (:class:`Asked`), and the caller falls back (the scripted decision, the extractive summary, the offline
rating). Two errors do stop the caller, because no fallback makes them right: a spent budget
(:class:`~simulacra.llm.BudgetExceeded`) and a model server that cannot be reached
(:class:`~simulacra.llm.LLMUnreachable`); the run stops at its last complete tick with their message.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from pydantic import ValidationError

from simulacra.llm.base import BudgetExceeded, Completion, LLMError, LLMUnreachable
from simulacra.llm.parsing import extract_json

T = TypeVar("T")

#: what the model is told after an answer that cannot be used, ``{problem}`` filled in
RETRY_PROMPT = "That answer cannot be used: {problem}. Answer again with JSON that follows the schema."


class BadAnswer(ValueError):
    """A model answer that cannot be used; the message says why (it is shown to the model on the retry)."""


@dataclass
class Asked(Generic[T]):
    """What :func:`ask_json` got.

    Attributes:
        value: what ``parse`` made of the answer; ``None`` when no answer could be used (:attr:`ok` is false).
        ok: whether ``value`` holds a parsed answer.
        problem: why there is no value (``""`` when :attr:`ok`): the last answer's problem or the failed call's
            error.
        raw: the last answer's text (``""`` when none came).
        error: the :class:`~simulacra.llm.LLMError` of a failed call (after the model's own retries), else ``None``.
        attempts: calls started (1 + the retries asked); calls: answers received.
        truncated: answers cut at ``max_tokens``.
        prompt_tokens, completion_tokens: summed over the answers received.
        seconds: wall-clock seconds spent in the calls.
        completion: the last answer received, ``None`` when none came.
    """

    value: T | None = None
    ok: bool = False
    problem: str = ""
    raw: str = ""
    error: LLMError | None = None
    attempts: int = 0
    calls: int = 0
    truncated: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    seconds: float = 0.0
    completion: Completion | None = None


def ask_json(model, messages: Sequence[dict], schema: dict, parse: Callable[[Any], T], *, max_tokens: int,
             temperature: float = 0.0, seed: int | None = None, retries: int = 1,
             read: Literal["object", "text", "completion"] = "object", cut_ok: bool = False,
             wait: Callable[[], AbstractContextManager] | None = None) -> Asked[T]:
    """Ask ``model`` (a :class:`~simulacra.llm.LanguageModel`) for an answer under the JSON ``schema``.

    Args:
        messages: the chat messages (``{"role", "content"}`` each).
        parse: turns what ``read`` gives into the value, or raises :class:`BadAnswer` (pydantic's
            ``ValidationError`` and ``ValueError`` count as bad answers too) with the reason, which the retry
            shows the model.
        max_tokens, temperature, seed: of each call.
        retries: calls after a bad answer (0: one call), each with the bad answer and :data:`RETRY_PROMPT`
            appended; never after a failed call (the model's wrappers have retried the server already).
        read: what ``parse`` gets: ``"object"`` the answer's JSON object (:func:`~simulacra.llm.extract_json`;
            an answer holding none is a bad answer), ``"text"`` the answer's text, ``"completion"`` the
            :class:`~simulacra.llm.Completion` (for a caller that reads cut answers itself).
        cut_ok: an answer cut at ``max_tokens`` is parsed like any other; otherwise it is a bad answer
            (``"it was cut off at N tokens; answer shorter"``).
        wait: called for a context manager around each call (e.g. a report while a slow model thinks).

    Returns:
        :class:`Asked`; ``ok`` false after a failed call or when every answer was bad.
    Raises:
        BudgetExceeded: a budget refused the call.
        LLMUnreachable: the model's server cannot be reached (after the model's own retries).
    """
    asked: Asked[T] = Asked()
    problem = ""
    for attempt in range(1 + max(0, retries)):
        msgs = list(messages)
        if attempt:
            msgs += [{"role": "assistant", "content": asked.raw[:500]},
                     {"role": "user", "content": RETRY_PROMPT.format(problem=problem)}]
        asked.attempts += 1
        start = time.perf_counter()
        try:
            with wait() if wait is not None else nullcontext():
                answer = model.complete(msgs, max_tokens=max_tokens, temperature=temperature, seed=seed,
                                        json_schema=schema)
        except (BudgetExceeded, LLMUnreachable):  # no fallback makes these right: the caller stops
            raise
        except LLMError as err:
            asked.error, asked.problem, asked.raw = err, f"the model failed: {err}", ""
            return asked
        finally:
            asked.seconds += time.perf_counter() - start
        asked.calls += 1
        asked.completion = answer
        asked.prompt_tokens += answer.prompt_tokens
        asked.completion_tokens += answer.completion_tokens
        asked.raw = answer.text
        cut = answer.finish_reason == "length"
        asked.truncated += cut
        if cut and not cut_ok:
            problem = f"it was cut off at {max_tokens} tokens; answer shorter"
            continue
        if read == "object":
            data = extract_json(answer.text)
            if not isinstance(data, dict):
                problem = "it is empty" if not answer.text.strip() else "it is not a JSON object"
                continue
        else:
            data = answer.text if read == "text" else answer
        try:
            asked.value, asked.ok, asked.problem = parse(data), True, ""
            return asked
        except (BadAnswer, ValidationError, ValueError) as err:
            problem = str(err).splitlines()[0][:300] if str(err) else type(err).__name__
    asked.problem = problem
    return asked
