"""What a speaker's language model sees of the conversation so far: five history strategies and two summarisers.

An agent saying its next line gets a :class:`HistoryContext`: an optional summary of the older part of the
conversation (put into the system prompt, under :data:`SUMMARY_HEADING`) and the turns shown verbatim (the
transcript, one ``Name: text`` line per turn). The strategies (``cognition.history``):

==================== ======================================================= ==============================
strategy              what the prompt holds after ``n`` turns                  summary calls
==================== ======================================================= ==============================
``full``              all ``n`` turns                                           none
``window``            the last ``W = history_window`` turns                     none
``window_summary``    running summary of the older turns + the last ``W`` to    one per ``W`` turns, given the
                      ``2W - 1`` turns (seed 004)                               running summary
``recursive_summary`` top summary + chunk summaries + the last ``W`` to          one per ``W``-turn chunk, and
                      ``2W - 1`` turns (seed 000)                               one merge when the chunk
                                                                                summaries pass ``summary_words``
``swin``              latest window summary + the turns of the window being     one per ``S = swin_stride``
                      filled (seed 001)                                         turns, on ``swin_window`` turns
==================== ======================================================= ==============================

Every strategy but ``full`` keeps the prompt bounded: at most about ``2 * summary_words`` summary words plus
``2W - 1`` (or ``swin_window - 1``) turns, whatever the length of the conversation, and the latest turn is always
shown verbatim. Each strategy keeps only what it shows or will summarise; summaries are made in :meth:`add`,
so the state is a function of the turns added alone (same turns + deterministic summariser = same context).

Summarisers (:class:`Summariser`): :class:`ExtractiveSummariser` (offline, deterministic, no model) and
:class:`LLMSummariser` (any :class:`~simulacra.llm.LanguageModel`, JSON answer, extractive fallback).
"""

from __future__ import annotations

import logging
import re
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from simulacra.errors import ConfigError
from simulacra.llm.structured import BadAnswer, ask_json
from simulacra.text import STOP_WORDS

if TYPE_CHECKING:
    from simulacra.config import CognitionConfig
    from simulacra.llm import LanguageModel

log = logging.getLogger(__name__)

#: heading under which the summary is appended to the system prompt (seed 004 puts it there)
SUMMARY_HEADING = "Summary of the earlier part of this conversation (those lines are no longer shown):"
#: the heading of the transcript in a line request; a small model begins its line with it now and then ("The
#: conversation so far: Hana Novak: ...", stop 55), and :func:`simulacra.cognition.llm_mind.tidy_line` drops it
TRANSCRIPT_HEADING = "The conversation so far:"
#: the strategies of ``cognition.history``
STRATEGIES = ("full", "window", "window_summary", "recursive_summary", "swin")


# --------------------------------------------------------------------------------------------------- turns


@dataclass(frozen=True)
class Turn:
    """One line of a conversation: ``speaker`` said ``text`` to ``listener`` (names as shown to the model)."""

    speaker: str
    listener: str
    text: str

    def render(self) -> str:
        """``"Name: text"``, the transcript line."""
        return f"{self.speaker}: {self.text}"


def render_turns(turns: Iterable[Turn]) -> str:
    """The transcript: one ``Name: text`` line per turn, oldest first (``""`` for no turns)."""
    return "\n".join(t.render() for t in turns)


class HistoryContext(NamedTuple):
    """Exactly what goes into the next prompt.

    Attributes:
        summary: the summary of the turns no longer shown (goes into the system prompt), or ``None``.
        turns: the turns shown verbatim, oldest first (the transcript).
    """

    summary: str | None
    turns: list[Turn]

    def system_prompt(self, base: str) -> str:
        """``base`` with the summary appended under :data:`SUMMARY_HEADING` (``base`` alone without a summary)."""
        if not self.summary:
            return base
        return f"{base.rstrip()}\n\n{SUMMARY_HEADING}\n{self.summary}"

    def transcript(self) -> str:
        """The verbatim turns as ``Name: text`` lines."""
        return render_turns(self.turns)


# ------------------------------------------------------------------------------------------- summarisers


@dataclass(frozen=True)
class Summary:
    """A summary and what it cost.

    Attributes:
        text: at most the ``max_words`` asked for (words = whitespace-separated); ``""`` when nothing was worth
            keeping.
        prompt_tokens, completion_tokens: the model's token counts for the call (0 when no model was called).
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0


@runtime_checkable
class Summariser(Protocol):
    """Condenses turns, together with an earlier summary, into one summary of at most ``max_words`` words."""

    def summarise(self, turns: Sequence[Turn], previous: str | None, max_words: int) -> Summary:
        """Summarise ``previous`` (an earlier summary, or several joined by newlines; ``None``: none) and ``turns``.

        Args:
            turns: the new turns, oldest first; may be empty when only summaries are merged.
            previous: the summary so far, or ``None``.
            max_words: most words of the answer, >= 1.

        Returns:
            the new summary, meant to replace ``previous``.
        """
        ...


# Function words and conversational filler: a sentence made of these only (and of the speakers' names) carries
# no news. Written here rather than taken from scikit-learn, whose English list holds "mill", "fire", "bill",
# "found" and "system": town news.
_STOP = STOP_WORDS | frozenset("""
afternoon agree ah alright anybody anyone anything anyway anywhere bye enough evening everybody everyone
everything everywhere farewell feel fine glad good goodness gosh great guess hey hmm indeed knew know let
lovely mean mine morning nice nobody none nothing nowhere pardon please pleasure right see somebody someone
something somewhere sorry suppose sure thank thanks think thought today true um weather welcome wow yeah
""".split())
#: content words a sentence needs to be kept: one-word reactions ("Just home.", "Really, Hilda?") carry no news
MIN_CONTENT_WORDS = 2
_WORD = re.compile(r"[a-z0-9][a-z0-9'’-]*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?…])[\"”’)]*\s+")
# "Ada told Ben: ..." as the extractive summary writes it; names of at most four words, so that a sentence of
# prose with a colon ("Ada told Ben that the mill burned: ...") is not taken for an attribution.
_ATTRIBUTED = re.compile(r"^(?P<who>(?:[^\s:]+ ){0,3}?[^\s:]+ told (?:[^\s:]+ ){0,3}?[^\s:]+): (?P<said>.+)$")


def _words(text: str) -> int:
    return len(text.split())


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_SPLIT.split(" ".join(text.split())) if s.strip()]


def clip_words(text: str, max_words: int) -> str:
    """``text`` cut to at most ``max_words`` words: whole sentences while they fit, else the first words + ``…``."""
    if _words(text) <= max_words:
        return text.strip()
    kept: list[str] = []
    for sentence in _sentences(text):
        if _words(" ".join(kept + [sentence])) > max_words:
            break
        kept.append(sentence)
    if kept:
        return " ".join(kept)
    return " ".join(text.split()[:max_words]) + "…"


@dataclass(frozen=True)
class _Unit:
    """One sentence that may go into an extractive summary, with who said it to whom (``None``: unknown)."""

    order: int
    who: str | None
    text: str
    content: frozenset[str]


class ExtractiveSummariser:
    """Offline, deterministic summaries: the sentences that carry the most new content words, attributed.

    Candidates are the sentences of the earlier summary and of the new turns. Each has content words (lower-cased
    words that are neither function words, small talk, nor the names of the people talking); a sentence with
    fewer than :data:`MIN_CONTENT_WORDS` (``"Hello, Ben!"``, ``"Yes, I heard that too."``, ``"Just home."``) is
    never kept. Sentences are picked greedily by the number of content words no picked sentence covers yet, per
    word the pick adds to the summary, ties to the older sentence, until no further sentence fits ``max_words``
    or adds a new content word (a coverage-greedy extractive summary in the manner of SumBasic, Nenkova &
    Vanderwende 2005). Picked sentences are written in
    their original order, one line per run of sentences from the same speaker to the same listener::

        Ada told Ben: The mill burned down last night. Nobody was hurt.
        Ben told Ada: The baker sells bread at half price until Sunday.

    Sentences of an earlier summary written this way keep their attribution when summarised again, so facts
    said early survive recursive summarisation for as long as the word budget holds them. A sentence longer
    than the budget is cut to fit and ends with ``…``.

    Returns ``Summary(text, 0, 0)``: no model is called.
    """

    def summarise(self, turns: Sequence[Turn], previous: str | None, max_words: int) -> Summary:
        """See :meth:`Summariser.summarise`. Raises ``ValueError`` when ``max_words`` < 1."""
        if max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        names = {w for t in turns for name in (t.speaker, t.listener) for w in _WORD.findall(name.lower())}
        raw: list[tuple[str | None, str]] = []
        for line in (previous or "").splitlines():
            match = _ATTRIBUTED.match(line.strip())
            who, said = (match["who"], match["said"]) if match else (None, line)
            if match:
                names.update(_WORD.findall(who.lower()))
            raw.extend((who, s) for s in _sentences(said))
        for turn in turns:
            raw.extend((f"{turn.speaker} told {turn.listener}", s) for s in _sentences(turn.text))
        units = []
        for order, (who, text) in enumerate(raw):
            content = frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP and w not in names)
            if len(content) < MIN_CONTENT_WORDS:
                continue
            if who is not None and _words(who) >= max_words:
                who = None
            room = max_words - (_words(who) if who else 0)
            if _words(text) > room:
                text = " ".join(text.split()[:room]) + "…"
            units.append(_Unit(order, who, text, content))
        chosen: list[_Unit] = []
        covered: set[str] = set()
        size = 0
        while True:
            best: tuple[float, int] | None = None
            best_unit: _Unit | None = None
            for unit in units:
                new = len(unit.content - covered)
                if new == 0:  # also every unit already chosen
                    continue
                grown = _render_words(sorted([*chosen, unit], key=lambda u: u.order))
                added = grown - size
                if grown > max_words:
                    continue
                key = (-new / max(added, 1), unit.order)
                if best is None or key < best:
                    best, best_unit = key, unit
            if best_unit is None:
                break
            chosen = sorted([*chosen, best_unit], key=lambda u: u.order)
            covered |= best_unit.content
            size = _render_words(chosen)
        return Summary(_render(chosen))


def _runs(units: Sequence[_Unit]) -> list[tuple[str | None, list[str]]]:
    runs: list[tuple[str | None, list[str]]] = []
    for unit in units:
        if runs and runs[-1][0] == unit.who and unit.who is not None:
            runs[-1][1].append(unit.text)
        else:
            runs.append((unit.who, [unit.text]))
    return runs


def _render(units: Sequence[_Unit]) -> str:
    return "\n".join(f"{who}: {' '.join(said)}" if who else " ".join(said) for who, said in _runs(units))


def _render_words(units: Sequence[_Unit]) -> int:
    return _words(_render(units))


class _SummaryAnswer(BaseModel):
    """The answer asked of the model: ``{"summary": "..."}``."""

    model_config = ConfigDict(extra="ignore", title="ConversationSummary")
    summary: str = Field(description="the summary, third person, who told whom what")


#: JSON schema sent with every summary request (``additionalProperties: false`` for servers enforcing it strictly)
SUMMARY_SCHEMA: dict = {**_SummaryAnswer.model_json_schema(), "additionalProperties": False}

_SYSTEM = (
    "You keep the memory of a conversation between people of a small town. Write a short third-person summary of "
    "what was said: who told whom which news, facts, plans, promises and questions still open. Keep every fact of "
    "the earlier summary that still matters, and the names. Leave out greetings and small talk. "
    'Answer with a JSON object only: {{"summary": "..."}}, the summary at most {max_words} words.'
)


class LLMSummariser:
    """Summaries written by a language model, with the :class:`ExtractiveSummariser` as the fallback.

    Sends the earlier summary and the new turns with :data:`SUMMARY_SCHEMA` as ``json_schema`` and reads the answer
    by the project's one rule (:func:`~simulacra.llm.structured.ask_json`, one call), validated by a pydantic
    model. An answer cut at ``max_tokens`` (``finish_reason == "length"``), or without a JSON object holding a
    non-empty string ``summary``, is logged and replaced by the fallback's summary (``fallbacks`` counts these); a
    summary longer than ``max_words`` is cut to whole sentences (:func:`clip_words`). Either way the
    :class:`Summary` carries the call's token counts as the server reported them.

    Args:
        model: any :class:`~simulacra.llm.LanguageModel` (wrap it in ``RetryingModel`` for transient errors).
        max_tokens: most completion tokens per summary; keep it above ~2 tokens per word asked for.
        seed: sampling seed passed to the model (best effort).
        temperature: sampling temperature, 0 (greedy) .. 2.
        fallback: the summariser used on an unusable answer (default: a new :class:`ExtractiveSummariser`).

    Attributes:
        calls: model calls made; fallbacks: answers replaced by the fallback.

    Raises (from :meth:`summarise`):
        simulacra.llm.LLMError: the model could not be reached or refused the request (not hidden: the caller
        decides whether a run goes on without the model).
    """

    def __init__(self, model: LanguageModel, max_tokens: int = 200, seed: int | None = None,
                 temperature: float = 0.0, fallback: Summariser | None = None):
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {max_tokens}")
        self.model = model
        self.max_tokens = max_tokens
        self.seed = seed
        self.temperature = temperature
        self.fallback = fallback if fallback is not None else ExtractiveSummariser()
        self.calls = 0
        self.fallbacks = 0

    def messages(self, turns: Sequence[Turn], previous: str | None, max_words: int) -> list[dict]:
        """The chat messages of one summary request."""
        earlier = previous.strip() if previous and previous.strip() else "(none)"
        if turns:
            user = f"Earlier summary:\n{earlier}\n\nNew lines of the conversation:\n{render_turns(turns)}"
        else:
            user = f"Merge these summaries of earlier parts of the conversation into one:\n{earlier}"
        return [{"role": "system", "content": _SYSTEM.format(max_words=max_words)},
                {"role": "user", "content": user}]

    @staticmethod
    def _read(value: dict) -> str:
        """The summary of a usable answer's JSON object (:func:`~simulacra.llm.structured.ask_json` ``parse``).

        Raises:
            BadAnswer: no non-empty string ``summary``.
        """
        try:
            text = _SummaryAnswer.model_validate(value).summary.strip()
        except ValidationError as err:
            first = err.errors()[0]
            raise BadAnswer(f"field {'.'.join(map(str, first['loc'])) or '(root)'}: {first['msg']}") from None
        if not text:
            raise BadAnswer("empty summary")
        return text

    def summarise(self, turns: Sequence[Turn], previous: str | None, max_words: int) -> Summary:
        """See :meth:`Summariser.summarise`. Raises ``ValueError`` when ``max_words`` < 1."""
        if max_words < 1:
            raise ValueError(f"max_words must be >= 1, got {max_words}")
        asked = ask_json(self.model, self.messages(turns, previous, max_words), SUMMARY_SCHEMA, self._read,
                         max_tokens=self.max_tokens, temperature=self.temperature, seed=self.seed, retries=0)
        if asked.error is not None:
            raise asked.error
        self.calls += 1
        if asked.ok:
            text = clip_words(asked.value, max_words)
        else:
            self.fallbacks += 1
            log.warning("%s gave no usable summary (%s), using the extractive one; answer: %.200r",
                        getattr(self.model, "name", self.model), asked.problem, asked.raw)
            text = self.fallback.summarise(turns, previous, max_words).text
        return Summary(text, asked.prompt_tokens, asked.completion_tokens)


# ------------------------------------------------------------------------------------------------- histories


def line_request(speaker: str, started: bool) -> str:
    """The words that ask for ``speaker``'s next line (``started``: something was said already) or first line,
    after the transcript (:meth:`ConversationHistory.messages_for`). A line that repeats them is not the
    speaker's (:func:`simulacra.cognition.llm_mind.tidy_line`)."""
    if started:
        return f"Write {speaker}'s next line, without the name."
    return f"The conversation is starting. Write {speaker}'s first line, without the name."


class ConversationHistory(ABC):
    """The history of one conversation as a speaker's prompt shows it; one subclass per strategy.

    Args:
        summariser: makes the summaries (unused by ``full`` and ``window``, which accept ``None``).
        summary_words: most words of one summary (``cognition.summary_words``).

    Attributes:
        n_turns: turns added so far.
        summary_calls: summariser calls made; summary_prompt_tokens, summary_completion_tokens: their summed
            token counts (0 for the offline summariser).
    """

    strategy: ClassVar[str]

    def __init__(self, summariser: Summariser | None = None, summary_words: int = 60):
        if summary_words < 1:
            raise ValueError(f"summary_words must be >= 1, got {summary_words}")
        self.summariser = summariser
        self.summary_words = summary_words
        self.n_turns = 0
        self.summary_calls = 0
        self.summary_prompt_tokens = 0
        self.summary_completion_tokens = 0

    def add(self, turn: Turn) -> None:
        """Append the turn just said; summarises older turns when the strategy's schedule says so.

        Raises:
            TypeError: ``turn`` is not a :class:`Turn`.
            simulacra.llm.LLMError: from an :class:`LLMSummariser` whose model failed; the turn is kept and
                the summary is attempted again at the next :meth:`add`.
        """
        if not isinstance(turn, Turn):
            raise TypeError(f"expected a Turn, got {type(turn).__name__}")
        self.n_turns += 1
        self._add(turn)

    def extend(self, turns: Iterable[Turn]) -> None:
        """:meth:`add` each turn in order."""
        for turn in turns:
            self.add(turn)

    @abstractmethod
    def _add(self, turn: Turn) -> None: ...

    @abstractmethod
    def context(self) -> HistoryContext:
        """The summary and the verbatim turns for the next prompt (a fresh list each call)."""

    def messages_for(self, system_prompt: str, speaker: str) -> list[dict]:
        """Chat messages asking for ``speaker``'s next line.

        Returns:
            ``[{"role": "system", ...}, {"role": "user", ...}]``: the system prompt with the summary appended
            under :data:`SUMMARY_HEADING`; the transcript (``Name: text`` lines) and a request for
            ``speaker``'s next line, or for its first line when nothing was said yet.
        """
        ctx = self.context()
        if ctx.turns:
            user = f"{TRANSCRIPT_HEADING}\n{ctx.transcript()}\n\n{line_request(speaker, True)}"
        else:
            user = line_request(speaker, False)
        return [{"role": "system", "content": ctx.system_prompt(system_prompt)}, {"role": "user", "content": user}]

    def _summarise(self, turns: Sequence[Turn], previous: str | None) -> str | None:
        """One summariser call, counted; ``None`` for an empty summary."""
        if self.summariser is None:
            raise ValueError(f"the {self.strategy} history needs a summariser")
        summary = self.summariser.summarise(list(turns), previous, self.summary_words)
        self.summary_calls += 1
        self.summary_prompt_tokens += summary.prompt_tokens
        self.summary_completion_tokens += summary.completion_tokens
        return summary.text.strip() or None


def _positive(name: str, value: int, least: int = 1) -> int:
    if not isinstance(value, int) or value < least:
        raise ValueError(f"{name} must be an integer >= {least}, got {value!r}")
    return value


class FullHistory(ConversationHistory):
    """Every turn, no summary: the prompt grows linearly with the conversation (the seeds' baseline)."""

    strategy = "full"

    def __init__(self, summariser: Summariser | None = None, summary_words: int = 60):
        super().__init__(summariser, summary_words)
        self._turns: list[Turn] = []

    def _add(self, turn: Turn) -> None:
        self._turns.append(turn)

    def context(self) -> HistoryContext:
        return HistoryContext(None, list(self._turns))


class WindowHistory(ConversationHistory):
    """The last ``window`` turns, no summary: older turns are forgotten."""

    strategy = "window"

    def __init__(self, window: int, summariser: Summariser | None = None, summary_words: int = 60):
        super().__init__(summariser, summary_words)
        self.window = _positive("window", window)
        self._turns: deque[Turn] = deque(maxlen=self.window)

    def _add(self, turn: Turn) -> None:
        self._turns.append(turn)

    def context(self) -> HistoryContext:
        return HistoryContext(None, list(self._turns))


class WindowSummaryHistory(ConversationHistory):
    """The last turns verbatim and one running summary of all older turns (seed 004).

    Turns leave the verbatim part in batches of ``window``: when ``2 * window`` turns are waiting, the oldest
    ``window`` are folded into the running summary by one call ``summarise(batch, previous=summary)``; so the
    transcript holds ``window`` to ``2 * window - 1`` turns (all of them while fewer), and a summary call is made
    every ``window`` turns, never more often.
    """

    strategy = "window_summary"

    def __init__(self, window: int, summariser: Summariser, summary_words: int = 60):
        super().__init__(summariser, summary_words)
        self.window = _positive("window", window)
        self.summary: str | None = None
        self._turns: list[Turn] = []

    def _add(self, turn: Turn) -> None:
        self._turns.append(turn)
        if len(self._turns) >= 2 * self.window:
            batch = self._turns[: self.window]
            self.summary = self._summarise(batch, self.summary) or self.summary
            del self._turns[: self.window]

    def context(self) -> HistoryContext:
        return HistoryContext(self.summary, list(self._turns))


class RecursiveSummaryHistory(ConversationHistory):
    """Chunk summaries, merged into summaries of summaries when they grow too long (seed 000).

    Turns leave the verbatim part in chunks of ``window`` (as in :class:`WindowSummaryHistory`); each chunk is
    summarised on its own (``previous=None``). When the chunk summaries together pass ``summary_words`` words,
    they are merged with the top summary into a new top summary by ``summarise([], previous=top + chunks)``: a
    summary of summaries, so the top summary condenses ever more of the conversation in at most
    ``summary_words`` words. The context summary is the top summary followed by the chunk summaries not merged
    yet (at most ``2 * summary_words`` words), then the transcript of ``window`` to ``2 * window - 1`` turns.

    Attributes:
        top: the top summary, or ``None`` before the first merge.
        chunks: the chunk summaries not merged yet, oldest first.
        merges: summaries of summaries made so far.
    """

    strategy = "recursive_summary"

    def __init__(self, window: int, summariser: Summariser, summary_words: int = 60):
        super().__init__(summariser, summary_words)
        self.window = _positive("window", window)
        self.top: str | None = None
        self.chunks: list[str] = []
        self.merges = 0
        self._turns: list[Turn] = []

    def _add(self, turn: Turn) -> None:
        self._turns.append(turn)
        if len(self._turns) >= 2 * self.window:
            chunk = self._summarise(self._turns[: self.window], None)
            del self._turns[: self.window]
            if chunk:
                self.chunks.append(chunk)
        if sum(_words(c) for c in self.chunks) > self.summary_words:
            merged = self._summarise([], "\n".join([self.top, *self.chunks] if self.top else self.chunks))
            self.top, self.chunks = merged or self.top, []
            self.merges += 1

    def context(self) -> HistoryContext:
        parts = [self.top, *self.chunks] if self.top else list(self.chunks)
        return HistoryContext("\n".join(parts) or None, list(self._turns))


class SwinHistory(ConversationHistory):
    """Overlapping windows summarised incrementally (SWin, seed 001).

    Window ``j`` (from 0) holds turns ``j*stride .. j*stride + window - 1``; consecutive windows share
    ``window - stride`` turns. When window ``j`` is complete it is summarised given the previous window's summary
    (``summarise(window_j, previous=summary_{j-1})``) and that summary replaces the previous one. The context is
    the latest summary and the turns of the window being filled (those from ``(j+1)*stride`` on: its overlap with
    window ``j`` included, so ``window - stride`` to ``window - 1`` turns and never the latest one missing).
    One summary call per ``stride`` turns, each on ``window`` turns: Θ(n · window) summarised turns in all.

    Args:
        window: turns per window, >= 2 (``cognition.swin_window``).
        stride: turns between the starts of two windows, 1 .. window - 1 (``cognition.swin_stride``).

    Attributes:
        windows: windows summarised so far.
    """

    strategy = "swin"

    def __init__(self, window: int, stride: int, summariser: Summariser, summary_words: int = 60):
        super().__init__(summariser, summary_words)
        self.window = _positive("window", window, 2)
        self.stride = _positive("stride", stride)
        if self.stride >= self.window:
            raise ValueError(f"stride ({stride}) must be less than window ({window}): consecutive windows overlap "
                             "by window - stride turns, at least one")
        self.summary: str | None = None
        self.windows = 0
        self._turns: list[Turn] = []  # turns from the start of the next window to summarise

    def _add(self, turn: Turn) -> None:
        self._turns.append(turn)
        if len(self._turns) >= self.window:
            self.summary = self._summarise(self._turns[: self.window], self.summary) or self.summary
            self.windows += 1
            del self._turns[: self.stride]

    def context(self) -> HistoryContext:
        return HistoryContext(self.summary, list(self._turns))


def make_history(config: CognitionConfig, summariser: Summariser | None) -> ConversationHistory:
    """The history of a new conversation as ``config.history`` says.

    Args:
        config: ``history``, ``history_window``, ``swin_window``, ``swin_stride``, ``summary_words`` are read.
        summariser: makes the summaries; may be ``None`` for ``full`` and ``window``.

    Raises:
        ConfigError: ``cognition.history`` is unknown, ``cognition.swin_stride`` is not below
            ``cognition.swin_window`` (swin only), or a summarising strategy gets no summariser.
    """
    kind = config.history
    if kind not in STRATEGIES:
        raise ConfigError("<config>", "cognition.history", f"unknown strategy {kind!r}; one of {', '.join(STRATEGIES)}")
    if kind == "full":
        return FullHistory(summariser, config.summary_words)
    if kind == "window":
        return WindowHistory(config.history_window, summariser, config.summary_words)
    if summariser is None:
        raise ConfigError("<config>", "cognition.history", f"{kind} needs a summariser")
    if kind == "window_summary":
        return WindowSummaryHistory(config.history_window, summariser, config.summary_words)
    if kind == "recursive_summary":
        return RecursiveSummaryHistory(config.history_window, summariser, config.summary_words)
    if config.swin_stride >= config.swin_window:
        raise ConfigError("<config>", "cognition.swin_stride",
                          f"must be less than cognition.swin_window ({config.swin_window}) so that consecutive "
                          f"windows overlap; got {config.swin_stride}")
    return SwinHistory(config.swin_window, config.swin_stride, summariser, config.summary_words)
