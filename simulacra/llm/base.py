"""The language-model contract: chat messages in, :class:`Completion` out, and the errors a model raises.

Imports nothing beyond the standard library and :mod:`simulacra.errors`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from simulacra.errors import SimulacraError


@dataclass(frozen=True)
class Completion:
    """One answer of a language model.

    Attributes:
        text: the answer's text; ``""`` when the server sent none (empty or null content, no choices).
        model: the model that answered, as the server names it (the requested name when it does not say).
        prompt_tokens: tokens of the prompt as the server counted them; 0 when the server reports no usage.
        completion_tokens: tokens of the answer; 0 when the server reports no usage.
        latency_s: seconds the model took for this call, from sending the request to having the parsed answer.
        finish_reason: ``"stop"``, ``"length"`` (cut at ``max_tokens``), ... or ``None`` when not reported.
    """

    text: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    finish_reason: str | None = None


@runtime_checkable
class LanguageModel(Protocol):
    """A chat model: ``complete(messages) -> Completion``.

    Implementations: :class:`~simulacra.llm.OpenAIChatModel`, and the wrappers in :mod:`simulacra.llm.wrappers`
    (each is a ``LanguageModel`` around another one). Callers must not depend on the answer being JSON even
    when they pass ``json_schema``: parse defensively (:func:`~simulacra.llm.extract_json`) and fall back.

    Attributes:
        name: ``"<backend>:<model>"``, e.g. ``"openai:gpt-4o-mini"``; wrappers carry their inner model's name.
    """

    name: str

    def complete(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int = 256,
        temperature: float = 0.0,
        seed: int | None = None,
        json_schema: dict | None = None,
    ) -> Completion:
        """Answer a chat.

        Args:
            messages: ``{"role": "system" | "user" | "assistant", "content": str}`` each, oldest first.
            max_tokens: most tokens of the answer.
            temperature: sampling temperature, 0 (greedy) .. 2.
            seed: sampling seed passed to the server (best effort: not every server honours it).
            json_schema: a JSON Schema the answer should follow; asked of servers that support it, never
                relied on.

        Raises:
            LLMUnavailable: the server cannot be reached, timed out, or answered 429 / 5xx.
            LLMRequestError: the server rejected the request (4xx other than 429).
            BudgetExceeded: a budget wrapper refused the call.
        """
        ...


class LLMError(SimulacraError):
    """Base of every language-model error; the message says what happened and names the model and base URL.

    Attributes:
        status: the HTTP status the server answered, or ``None`` (no answer, or not an HTTP error).
        retry_after_s: seconds the server asked to wait before retrying (``Retry-After``), or ``None``.
    """

    def __init__(self, message: str, *, status: int | None = None, retry_after_s: float | None = None):
        super().__init__(message)
        self.status = status
        self.retry_after_s = retry_after_s


class LLMUnavailable(LLMError):
    """Transient: connection refused, timeout, 408, 429 or 5xx (after the retries, once it leaves the wrappers)."""


class LLMUnreachable(LLMUnavailable):
    """Nothing answers at the server's address (connection refused or reset): the server is gone, not slow or busy.

    After the retries a run stops at its last complete tick instead of taking fallback decisions for the rest of
    the run (:meth:`simulacra.simulation.Simulation.run`); resume it when the server is back."""


class LLMRequestError(LLMError):
    """The request itself is wrong (bad key, unknown model, bad request, quota exhausted): retrying cannot help."""


class BudgetExceeded(LLMError):
    """A call or token budget would be, or was, exceeded; the message names the limits and how to raise them.

    Attributes:
        budget: which one, ``"call"`` or ``"token"`` (the setting that raises it is ``llm.max_<budget>s``); kept by
            Ray's rebuilt exception (``RayTaskError.as_instanceof_cause`` copies the cause's attributes).
    """

    def __init__(self, message: str, budget: str | None = None):
        super().__init__(message)
        self.budget = budget

    def __reduce__(self):  # pickled across processes with its budget (Ray workers)
        return (type(self), (str(self), self.budget))

    @classmethod
    def refusal(cls, name: str, budget: str, calls: int, tokens: int, max_calls: int | None,
                max_tokens: int | None, run_wide: bool = False) -> BudgetExceeded:
        """The refusal of a call once ``budget`` (``"call"`` or ``"token"``) is spent after ``calls`` calls and
        ``tokens`` tokens, by the model client ``name`` (``run_wide``: the run's budget over all its workers)."""
        limits = (f"llm.max_calls={'unlimited' if max_calls is None else max_calls}, "
                  f"llm.max_tokens={'unlimited' if max_tokens is None else max_tokens}")
        whose = f"the run's {budget} budget" if run_wide else f"{budget} budget"
        where = " over all its workers" if run_wide else ""
        return cls(f"{name}: {whose} exhausted after {calls} calls and {tokens} tokens{where} ({limits}); raise it "
                   f"with --set llm.max_{budget}s=N (null = no limit; a stopped run takes it on --resume too) or in "
                   f"the config file's llm section", budget)
