"""Language models: the :class:`LanguageModel` protocol, an OpenAI-compatible adapter and wrappers around any model.

Importing this package reads no environment variable and does not import ``openai`` (that happens when an
:class:`OpenAIChatModel` is built). ``docs/llm.md`` describes the protocol, the wrappers and the config keys.
"""

from simulacra.llm.base import (
    BudgetExceeded,
    Completion,
    LanguageModel,
    LLMError,
    LLMRequestError,
    LLMUnavailable,
    LLMUnreachable,
)
from simulacra.llm.factory import CALLS_FILE, build_model, start_local_model
from simulacra.llm.openai_model import OpenAIChatModel
from simulacra.llm.parsing import extract_json
from simulacra.llm.replay import ReplayingModel
from simulacra.llm.wrappers import (
    BudgetedModel,
    CachingModel,
    RecordingModel,
    RetryingModel,
    UsageMeter,
    call_time_bound_s,
    unwrap,
)

__all__ = [
    "CALLS_FILE",
    "BudgetExceeded",
    "BudgetedModel",
    "CachingModel",
    "Completion",
    "LLMError",
    "LLMRequestError",
    "LLMUnavailable",
    "LLMUnreachable",
    "LanguageModel",
    "OpenAIChatModel",
    "RecordingModel",
    "ReplayingModel",
    "RetryingModel",
    "UsageMeter",
    "build_model",
    "call_time_bound_s",
    "extract_json",
    "start_local_model",
    "unwrap",
]
