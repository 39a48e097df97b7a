"""A conversation's history as a language-model mind uses it: the strategy of ``cognition.history``
(:mod:`simulacra.cognition.history`) over the model's summaries, and the tokens each conversation cost.

The summariser is the model itself (:class:`~simulacra.cognition.history.LLMSummariser`, JSON schema, the
extractive summariser as fallback); when the model fails after its retries the extractive summary is used
and counted, so a conversation never dies of a summary. A spent budget still stops the run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from simulacra.cognition.history import (
    ConversationHistory,
    ExtractiveSummariser,
    HistoryContext,
    LLMSummariser,
    Summary,
    Turn,
    make_history,
)
from simulacra.config import CognitionConfig
from simulacra.llm.base import BudgetExceeded, Completion, LLMError, LLMUnreachable
from simulacra.llm.parsing import extract_json
from simulacra.trace import HistoryEnd


class SafeSummariser:
    """An :class:`LLMSummariser` whose model failures (after the model's own retries) give the extractive
    summary instead of an error; ``failures`` counts them. :class:`~simulacra.llm.BudgetExceeded` is raised."""

    def __init__(self, model, max_tokens: int, seed: int | None):
        self.llm = LLMSummariser(model, max_tokens=max_tokens, seed=seed)
        self.extractive = ExtractiveSummariser()
        self.failures = 0

    def summarise(self, turns: Sequence[Turn], previous: str | None, max_words: int) -> Summary:
        try:
            return self.llm.summarise(turns, previous, max_words)
        except (BudgetExceeded, LLMUnreachable):
            raise
        except LLMError:
            self.failures += 1
            return self.extractive.summarise(turns, previous, max_words)


class DialogueHistory:
    """One conversation's history (both speakers see the same transcript) and its token accounting.

    Attributes:
        history: the strategy object; lines, line_prompt_tokens, line_completion_tokens: the line calls.
    """

    def __init__(self, history: ConversationHistory, summariser: SafeSummariser):
        self.history = history
        self.summariser = summariser
        self.lines = 0
        self.line_prompt_tokens = 0
        self.line_completion_tokens = 0

    def add_line(self, speaker: str, listener: str, text: str) -> None:
        """Record a line said (names as the model sees them)."""
        self.history.add(Turn(speaker, listener, text))

    def messages(self, system: str, speaker: str, instruction: str) -> list[dict]:
        """The prompt for ``speaker``'s next line: the strategy's messages, ``instruction`` appended."""
        msgs = self.history.messages_for(system, speaker)
        msgs[-1] = {**msgs[-1], "content": f"{msgs[-1]['content']}\n{instruction}"}
        return msgs

    def count_line(self, decision) -> None:
        """Add one line call's tokens (:attr:`Decision.tokens`)."""
        self.lines += 1
        self.line_prompt_tokens += decision.tokens[0]
        self.line_completion_tokens += decision.tokens[1]

    def end_context(self) -> HistoryEnd:
        """What the strategy shows of the conversation after its last line (the trace's ``history`` entry of a
        conversation): ``{"strategy", "summary": str | None, "verbatim": n}``, the last ``n`` lines being shown
        word for word, the older ones only through the summary (or not at all: ``window``)."""
        ctx = self.history.context()
        return {"strategy": self.history.strategy, "summary": ctx.summary, "verbatim": len(ctx.turns)}

    def usage(self) -> Counter:
        """Tokens of this conversation: line calls and summaries (prompt and completion)."""
        h = self.history
        return Counter({"conversations": 1, "lines": self.lines, "line_prompt_tokens": self.line_prompt_tokens,
                        "line_completion_tokens": self.line_completion_tokens, "summary_calls": h.summary_calls,
                        "summary_prompt_tokens": h.summary_prompt_tokens,
                        "summary_completion_tokens": h.summary_completion_tokens,
                        "summary_failures": self.summariser.failures})


#: the answer asked for by :func:`ask_after` (JSON schema; title ``recall``)
RECALL_SCHEMA = {"title": "recall", "type": "object", "additionalProperties": False, "required": ["answer"],
                 "properties": {"answer": {"type": "string", "minLength": 1, "maxLength": 400}}}


def recall_messages(context: HistoryContext, listener: str, speaker: str, question: str) -> list[dict]:
    """The chat messages of :func:`ask_after`: ``listener`` (a name) sees the conversation with ``speaker`` as the
    strategy still shows it at its end (``context``: its summary in the system prompt, its verbatim turns) and is
    asked ``question``, to be answered from that alone."""
    system = context.system_prompt(f"You are {listener}. You have just finished talking with {speaker}.")
    user = (f"What you still have of the conversation:\n{context.transcript() or '(no lines)'}\n\n"
            f"Question: {question}\nAnswer in one or two sentences from the conversation only; if it does not say, "
            "answer that you do not know.")
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def ask_after(model, context: HistoryContext, listener: str, speaker: str, question: str,
              seed: int | None = None, max_tokens: int = 120) -> Completion:
    """Ask ``model`` ``question`` as ``listener`` would answer it right after the conversation, from what the
    history strategy still shows of it (:func:`recall_messages`), temperature 0, answer schema
    :data:`RECALL_SCHEMA`. Returns the completion; read the answer with :func:`recall_answer`.

    Raises:
        simulacra.llm.LLMError: the model failed (after its wrappers' retries) or a budget refused the call.
    """
    return model.complete(recall_messages(context, listener, speaker, question), max_tokens=max_tokens,
                          temperature=0.0, seed=seed, json_schema=RECALL_SCHEMA)


def recall_answer(completion: Completion) -> str:
    """The answer of an :func:`ask_after` completion: the JSON ``answer`` field, or the whole text when the model
    wrote no such object (a small model's prose); ``""`` when empty."""
    value = extract_json(completion.text)
    if isinstance(value, dict) and isinstance(value.get("answer"), str):
        return value["answer"].strip()
    return completion.text.strip()


def open_history(config: CognitionConfig, model, seed: int | None) -> DialogueHistory:
    """A fresh history of the strategy ``config.history`` whose summaries the model writes."""
    summariser = SafeSummariser(model, max_tokens=max(2 * config.summary_words, 64), seed=seed)
    return DialogueHistory(make_history(config, summariser), summariser)
