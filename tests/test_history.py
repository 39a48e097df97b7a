"""Conversation-history strategies (full, window, window_summary, recursive_summary, swin) and the summarisers."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulacra.cognition.history import (
    STRATEGIES,
    SUMMARY_HEADING,
    SUMMARY_SCHEMA,
    ExtractiveSummariser,
    FullHistory,
    HistoryContext,
    LLMSummariser,
    RecursiveSummaryHistory,
    Summariser,
    Summary,
    SwinHistory,
    Turn,
    WindowHistory,
    WindowSummaryHistory,
    clip_words,
    make_history,
)
from simulacra.config import CognitionConfig
from simulacra.errors import ConfigError
from simulacra.llm import LLMUnavailable, OpenAIChatModel
from tests.openai_double import empty, garbage, json_reply, prose_json, reply

pytest_plugins = ["tests.openai_double"]  # the openai_double fixture

SYSTEM = "You are Ada Brook, the town's baker. Speak briefly."


def numbered(n: int) -> list[Turn]:
    """Turns "line 1" .. "line n", Ada and Ben alternating."""
    return [Turn(*(("Ada", "Ben") if i % 2 else ("Ben", "Ada")), f"line {i}") for i in range(1, n + 1)]


def texts(turns) -> list[str]:
    return [t.text for t in turns]


@dataclass
class Recorder:
    """A summariser that records each call and answers a numbered summary of ``words`` words."""

    words: int = 5
    calls: list[tuple[list[str], str | None]] = field(default_factory=list)

    def summarise(self, turns, previous, max_words):
        self.calls.append((texts(turns), previous))
        k = len(self.calls)
        return Summary(" ".join([f"S{k}"] + ["w"] * (min(self.words, max_words) - 1)), 10 * k, k)


# A 20-turn conversation: a fact in turn 1, two more later, the rest small talk.
TALK = [
    Turn("Ada", "Ben", "Hello Ben! Did you hear? The old mill by the river burned down last night."),
    Turn("Ben", "Ada", "Really? I had not heard. Was anyone hurt?"),
    Turn("Ada", "Ben", "Nobody, thank goodness."),
    Turn("Ben", "Ada", "Good."),
    Turn("Ada", "Ben", "How are you, Ben?"),
    Turn("Ben", "Ada", "Fine, thanks. And you?"),
    Turn("Ada", "Ben", "Well enough, thank you."),
    Turn("Ben", "Ada", "The baker sells rye bread at half price until Sunday."),
    Turn("Ada", "Ben", "Yes, I heard that too."),
    Turn("Ben", "Ada", "Nice weather today."),
    Turn("Ada", "Ben", "It is."),
    Turn("Ben", "Ada", "Are you going anywhere?"),
    Turn("Ada", "Ben", "Just home."),
    Turn("Ben", "Ada", "Mayor Hilda holds a town meeting on Friday at noon."),
    Turn("Ada", "Ben", "I will be there."),
    Turn("Ben", "Ada", "Me too."),
    Turn("Ada", "Ben", "Good."),
    Turn("Ben", "Ada", "Well, I should go."),
    Turn("Ada", "Ben", "Yes, me too."),
    Turn("Ben", "Ada", "Goodbye, Ada."),
]

# 40 turns each with its own piece of news, all about as long.
NEWS = [
    Turn("Ada" if i % 2 else "Ben", "Ben" if i % 2 else "Ada",
         f"News number {i}: the {w} near the {p} was repainted {c} yesterday.")
    for i, (w, p, c) in enumerate(
        (("fence", "well", "red"), ("gate", "square", "blue"), ("bench", "chapel", "green"), ("door", "forge", "grey"),
         ("roof", "mill", "black"), ("shed", "pond", "white"), ("wall", "inn", "yellow"), ("sign", "bakery", "pink"),
         ("cart", "market", "brown"), ("boat", "river", "orange")) * 4, start=1)
]


def prompt_chars(history, speaker="Ada") -> int:
    return sum(len(m["content"]) for m in history.messages_for(SYSTEM, speaker))


# --------------------------------------------------------------------------------------- what each context holds


def test_full_keeps_every_turn_and_no_summary():
    h = FullHistory()
    h.extend(numbered(10))
    assert h.context() == HistoryContext(None, numbered(10))
    assert h.summary_calls == 0 and h.n_turns == 10


def test_window_keeps_the_last_turns_only():
    h = WindowHistory(4)
    h.extend(numbered(3))
    assert texts(h.context().turns) == ["line 1", "line 2", "line 3"]
    h.extend(numbered(10)[3:])
    assert h.context() == HistoryContext(None, numbered(10)[6:])


def test_window_summary_folds_evicted_turns_in_batches_into_one_running_summary():
    rec = Recorder()
    h = WindowSummaryHistory(4, rec)
    h.extend(numbered(7))
    assert h.context() == HistoryContext(None, numbered(7)) and rec.calls == []  # up to 2W-1 turns verbatim
    h.add(numbered(8)[7])
    summary, turns = h.context()
    assert texts(turns) == ["line 5", "line 6", "line 7", "line 8"]
    assert rec.calls == [(["line 1", "line 2", "line 3", "line 4"], None)]
    assert summary == "S1 w w w w"
    h.extend(numbered(40)[8:])
    # one call per 4 turns from turn 8 on, each on the next 4 evicted turns, given the running summary
    assert len(rec.calls) == 9 and h.summary_calls == 9
    assert rec.calls[1] == (["line 5", "line 6", "line 7", "line 8"], "S1 w w w w")
    assert rec.calls[8] == ([f"line {i}" for i in range(33, 37)], "S8 w w w w")
    assert h.context() == HistoryContext("S9 w w w w", numbered(40)[36:])
    assert h.summary_prompt_tokens == sum(10 * k for k in range(1, 10)) and h.summary_completion_tokens == 45


def test_recursive_summary_merges_chunk_summaries_into_summaries_of_summaries():
    rec = Recorder(words=25)
    h = RecursiveSummaryHistory(4, rec, summary_words=60)
    h.extend(numbered(12))
    # chunks of 4 turns summarised on their own (no previous summary)
    assert rec.calls == [(["line 1", "line 2", "line 3", "line 4"], None), (["line 5", "line 6", "line 7", "line 8"],
                                                                               None)]
    s1, s2 = (f"S{k} " + " ".join(["w"] * 24) for k in (1, 2))
    assert h.context() == HistoryContext(f"{s1}\n{s2}", numbered(12)[8:]) and h.merges == 0
    h.extend(numbered(16)[12:])
    # a third chunk summary takes the chunk summaries past 60 words: one merge, of the three summaries
    assert h.merges == 1 and len(rec.calls) == 4
    assert rec.calls[2] == (["line 9", "line 10", "line 11", "line 12"], None)
    merge_turns, merge_input = rec.calls[3]
    assert merge_turns == [] and merge_input.splitlines() == [s1, s2, "S3 " + " ".join(["w"] * 24)]
    assert h.top == "S4 " + " ".join(["w"] * 24) and h.chunks == []
    assert h.context().summary == h.top and texts(h.context().turns) == ["line 13", "line 14", "line 15", "line 16"]
    h.extend(numbered(40)[16:])
    # the next merge takes the top summary too: a summary of summaries of summaries
    assert h.merges == 3
    second_merge = [prev for turns, prev in rec.calls if turns == []][1]
    assert second_merge.splitlines()[0] == "S4 " + " ".join(["w"] * 24) and len(second_merge.splitlines()) == 4
    summary, turns = h.context()
    assert len(summary.split()) <= 2 * 60 and len(turns) == 4


def test_swin_summarises_overlapping_windows_incrementally():
    rec = Recorder()
    h = SwinHistory(window=4, stride=2, summariser=rec)
    h.extend(numbered(3))
    assert h.context() == HistoryContext(None, numbered(3)) and rec.calls == []
    h.extend(numbered(9)[3:])
    assert rec.calls == [
        (["line 1", "line 2", "line 3", "line 4"], None),
        (["line 3", "line 4", "line 5", "line 6"], "S1 w w w w"),
        (["line 5", "line 6", "line 7", "line 8"], "S2 w w w w"),
    ]
    # consecutive windows share window - stride = 2 turns
    for (a, _), (b, _) in zip(rec.calls, rec.calls[1:]):
        assert a[-2:] == b[:2]
    # the window being filled is shown verbatim, its overlap with the last summarised window included
    assert h.context() == HistoryContext("S3 w w w w", numbered(9)[6:]) and h.windows == 3


def test_swin_with_the_thesis_setting_window_6_overlap_2():
    rec = Recorder()
    h = SwinHistory(window=6, stride=4, summariser=rec)
    h.extend(numbered(20))
    starts = [int(turns[0].split()[1]) for turns, _ in rec.calls]
    assert starts == [1, 5, 9, 13]
    for (a, _), (b, _) in zip(rec.calls, rec.calls[1:]):
        assert len(a) == 6 and a[-2:] == b[:2]
    assert 2 <= len(h.context().turns) <= 5


def test_swin_stride_must_leave_an_overlap():
    with pytest.raises(ValueError, match="stride"):
        SwinHistory(window=4, stride=4, summariser=Recorder())
    with pytest.raises(ConfigError, match="cognition.swin_stride"):
        make_history(CognitionConfig(history="swin", swin_window=3, swin_stride=5), ExtractiveSummariser())


def test_make_history_builds_the_configured_strategy():
    cfg = dict(history_window=3, swin_window=5, swin_stride=2, summary_words=30)
    kinds = {k: make_history(CognitionConfig(history=k, **cfg), ExtractiveSummariser()) for k in STRATEGIES}
    assert {k: type(h).__name__ for k, h in kinds.items()} == {
        "full": "FullHistory", "window": "WindowHistory", "window_summary": "WindowSummaryHistory",
        "recursive_summary": "RecursiveSummaryHistory", "swin": "SwinHistory"}
    assert kinds["window"].window == kinds["window_summary"].window == kinds["recursive_summary"].window == 3
    assert (kinds["swin"].window, kinds["swin"].stride, kinds["swin"].summary_words) == (5, 2, 30)
    assert make_history(CognitionConfig(history="window"), None).context() == HistoryContext(None, [])
    with pytest.raises(ConfigError, match="summariser"):
        make_history(CognitionConfig(history="window_summary"), None)


# --------------------------------------------------------------------------------------------- prompts


def test_messages_put_the_summary_in_the_system_prompt_and_the_turns_in_the_transcript():
    h = WindowSummaryHistory(2, ExtractiveSummariser())
    assert h.messages_for(SYSTEM, "Ada") == [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "The conversation is starting. Write Ada's first line, without the name."},
    ]
    h.extend(TALK[:4])
    system, user = h.messages_for(SYSTEM, "Ada")
    assert system["role"] == "system" and system["content"].startswith(SYSTEM + "\n\n" + SUMMARY_HEADING + "\n")
    assert "Ada told Ben: The old mill by the river burned down last night." in system["content"]
    assert user["role"] == "user"
    assert user["content"] == ("The conversation so far:\nAda: Nobody, thank goodness.\nBen: Good.\n\n"
                               "Write Ada's next line, without the name.")


@pytest.mark.parametrize("kind", ["window", "window_summary", "recursive_summary", "swin"])
def test_prompt_size_stays_bounded_as_the_conversation_grows(kind):
    cfg = CognitionConfig(history=kind)
    h = make_history(cfg, ExtractiveSummariser())
    sizes = []
    for turn in NEWS:
        h.add(turn)
        summary, turns = h.context()
        assert len((summary or "").split()) <= 2 * cfg.summary_words
        assert len(turns) <= max(2 * cfg.history_window - 1, cfg.swin_window - 1)
        sizes.append(prompt_chars(h))
    longest_turn = max(len(t.render()) for t in NEWS) + 1
    longest_word = max(len(w) for t in NEWS for w in t.text.split()) + 1
    bound = (len(SYSTEM) + len(SUMMARY_HEADING) + 200 + 2 * cfg.summary_words * longest_word
             + (2 * cfg.history_window - 1) * longest_turn)
    assert max(sizes) <= bound
    assert (h.context().summary is not None) == (kind != "window")
    assert sizes[-1] < 0.6 * sum(len(t.render()) + 1 for t in NEWS)  # far below what full history sends


def test_full_history_prompt_grows_linearly():
    h = FullHistory()
    sizes = []
    for turn in NEWS:
        h.add(turn)
        sizes.append(prompt_chars(h))
    steps = [b - a for a, b in zip(sizes, sizes[1:])]
    assert all(s == len(t.render()) + 1 for s, t in zip(steps, NEWS[1:]))  # every turn adds its own line
    assert sizes[39] - sizes[19] >= 0.9 * (sizes[19] - sizes[0]) * 20 / 19


@pytest.mark.parametrize("kind", ["window_summary", "recursive_summary", "swin"])
def test_a_fact_said_first_survives_in_the_summarised_strategies(kind):
    h = make_history(CognitionConfig(history=kind), ExtractiveSummariser())
    h.extend(TALK)
    summary, turns = h.context()
    assert "mill" not in " ".join(texts(turns))  # it is not there verbatim: the summary carries it
    assert "Ada told Ben: The old mill by the river burned down last night." in summary
    prompt = " ".join(m["content"] for m in h.messages_for(SYSTEM, "Ada"))
    assert "burned down" in prompt and "Mayor Hilda holds a town meeting" in prompt
    # the small talk is not summarised
    for filler in ("Hello", "Fine, thanks", "heard that too", "Nice weather", "Goodbye"):
        assert filler not in summary


def test_a_fact_said_first_is_lost_by_the_window():
    h = make_history(CognitionConfig(history="window"), None)
    h.extend(TALK)
    assert "mill" not in " ".join(m["content"] for m in h.messages_for(SYSTEM, "Ada"))


@pytest.mark.parametrize("kind", STRATEGIES)
def test_same_turns_give_the_same_context(kind):
    contexts = []
    for _ in range(2):
        h = make_history(CognitionConfig(history=kind, history_window=3, summary_words=30), ExtractiveSummariser())
        h.extend(TALK + NEWS)
        contexts.append((h.context(), h.messages_for(SYSTEM, "Ben"), h.summary_calls))
    assert contexts[0] == contexts[1]


def test_a_failed_summary_keeps_the_turns_and_is_tried_again():
    class Flaky:
        def __init__(self):
            self.fail, self.inner = True, Recorder()

        def summarise(self, turns, previous, max_words):
            if self.fail:
                self.fail = False
                raise LLMUnavailable("model down")
            return self.inner.summarise(turns, previous, max_words)

    for h in (WindowSummaryHistory(2, Flaky()), SwinHistory(3, 1, Flaky()), RecursiveSummaryHistory(2, Flaky())):
        turns = numbered(4 if h.strategy != "swin" else 3)
        h.extend(turns[:-1])
        with pytest.raises(LLMUnavailable):
            h.add(turns[-1])
        assert h.context() == HistoryContext(None, turns) and h.summary_calls == 0
        h.add(Turn("Ada", "Ben", "line next"))
        assert h.summary_calls == 1 and h.summariser.inner.calls[0][0] == texts(turns[: h.window])


# --------------------------------------------------------------------------------------- extractive summariser


def test_extractive_keeps_attributed_news_and_drops_small_talk():
    s = ExtractiveSummariser().summarise(TALK[:10], None, 60)
    assert s == Summary("Ada told Ben: The old mill by the river burned down last night.\n"
                        "Ben told Ada: The baker sells rye bread at half price until Sunday.", 0, 0)


def test_extractive_prefers_new_content_when_the_budget_is_short():
    turns = [Turn("Ada", "Ben", "The mill burned down."), Turn("Ben", "Ada", "The mill burned down, I heard."),
             Turn("Ada", "Ben", "Hilda found the lost goat.")]
    assert ExtractiveSummariser().summarise(turns, None, 15).text == (
        "Ada told Ben: The mill burned down. Hilda found the lost goat.")


def test_extractive_resummarising_keeps_earlier_facts_and_their_speakers():
    first = ExtractiveSummariser().summarise(TALK[:2], None, 40).text
    second = ExtractiveSummariser().summarise([Turn("Ben", "Ada", "Hilda found the lost goat.")], first, 40).text
    assert second.splitlines() == [
        "Ada told Ben: The old mill by the river burned down last night.",
        "Ben told Ada: Hilda found the lost goat.",
    ]


def test_extractive_cuts_a_sentence_longer_than_the_budget():
    long = Turn("Ada", "Ben", " ".join(f"word{i}" for i in range(30)) + ".")
    text = ExtractiveSummariser().summarise([long], None, 10).text
    assert text == "Ada told Ben: word0 word1 word2 word3 word4 word5 word6…" and len(text.split()) == 10


def test_extractive_of_small_talk_only_is_empty():
    assert ExtractiveSummariser().summarise([TALK[3], TALK[5], TALK[8]], None, 60).text == ""
    with pytest.raises(ValueError, match="max_words"):
        ExtractiveSummariser().summarise(TALK, None, 0)


_word = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=9)
_sentence = st.lists(_word, min_size=1, max_size=25).map(lambda ws: " ".join(ws) + ".")
_turn = st.builds(Turn, st.sampled_from(["Ada", "Ben Cole"]), st.sampled_from(["Cy", "Dee Ann Fox"]),
                  st.lists(_sentence, min_size=1, max_size=4).map(" ".join))


@settings(max_examples=150, deadline=None)
@given(st.lists(_turn, max_size=12), st.one_of(st.none(), _sentence), st.integers(1, 80))
def test_extractive_never_exceeds_max_words(turns, previous, max_words):
    text = ExtractiveSummariser().summarise(turns, previous, max_words).text
    assert len(text.split()) <= max_words
    assert text == ExtractiveSummariser().summarise(turns, previous, max_words).text


def test_clip_words_keeps_whole_sentences():
    assert clip_words("One two three. Four five six. Seven.", 6) == "One two three. Four five six."
    assert clip_words("One two three four five six seven.", 3) == "One two three…"
    assert clip_words("Short.", 3) == "Short."


# --------------------------------------------------------------------------------------- LLM summariser


def test_llm_summariser_sends_the_schema_and_uses_a_good_answer(openai_double):
    openai_double.script([json_reply({"summary": "Ada told Ben the mill burned down; nobody was hurt."},
                                     prompt_tokens=123, completion_tokens=17)])
    llm = LLMSummariser(OpenAIChatModel("double-model", base_url=openai_double.url), max_tokens=150, seed=7)
    assert isinstance(llm, Summariser)
    s = llm.summarise(TALK[:3], "Ben told Ada: Hilda found the lost goat.", 40)
    assert s == Summary("Ada told Ben the mill burned down; nobody was hurt.", 123, 17)
    assert (llm.calls, llm.fallbacks) == (1, 0)
    body = openai_double.requests[0]
    assert body["response_format"] == {"type": "json_schema",
                                       "json_schema": {"name": "ConversationSummary", "schema": SUMMARY_SCHEMA}}
    assert SUMMARY_SCHEMA["properties"]["summary"]["type"] == "string" and SUMMARY_SCHEMA["required"] == ["summary"]
    assert (body["seed"], body["max_tokens"], body["temperature"]) == (7, 150, 0.0)
    system, user = body["messages"]
    assert "40 words" in system["content"]
    assert "Ben told Ada: Hilda found the lost goat." in user["content"]
    assert "Ada: Hello Ben! Did you hear? The old mill by the river burned down last night." in user["content"]


def test_llm_summariser_reads_json_in_prose_and_clips_a_long_summary(openai_double):
    long = " ".join(["The mill burned."] * 10)
    openai_double.script([prose_json({"summary": "The mill burned down.", "confidence": 0.9}),
                          json_reply({"summary": long})])
    llm = LLMSummariser(OpenAIChatModel("double-model", base_url=openai_double.url))
    assert llm.summarise(TALK[:1], None, 20).text == "The mill burned down."
    assert llm.summarise(TALK[:1], None, 7).text == "The mill burned. The mill burned."
    assert llm.fallbacks == 0


@pytest.mark.parametrize("answer", [
    garbage(prompt_tokens=50, completion_tokens=20),
    empty(prompt_tokens=50),
    reply('{"summary": "Ada told Ben that the old mill', finish_reason="length", prompt_tokens=50,
          completion_tokens=20),
    json_reply({"summary": "   "}, prompt_tokens=50, completion_tokens=20),
    json_reply({"summary": ["not", "a", "string"]}, prompt_tokens=50, completion_tokens=20),
    json_reply({"text": "Ada told Ben about the mill."}, prompt_tokens=50, completion_tokens=20),
], ids=["garbage", "empty", "truncated", "blank", "wrong-type", "wrong-key"])
def test_llm_summariser_falls_back_on_an_unusable_answer(openai_double, answer, caplog):
    openai_double.script([answer])
    llm = LLMSummariser(OpenAIChatModel("double-model", base_url=openai_double.url))
    s = llm.summarise(TALK[:10], None, 60)
    assert s.text == ExtractiveSummariser().summarise(TALK[:10], None, 60).text
    assert (s.prompt_tokens, s.completion_tokens) == (50, answer.completion_tokens or 0)
    assert (llm.calls, llm.fallbacks) == (1, 1)
    assert "no usable summary" in caplog.text


def test_history_with_the_llm_summariser_counts_tokens_and_shows_the_model_summary(openai_double):
    openai_double.script([json_reply({"summary": "Ada told Ben the old mill burned down."}, prompt_tokens=90,
                                     completion_tokens=12), garbage(prompt_tokens=95, completion_tokens=30)])
    llm = LLMSummariser(OpenAIChatModel("double-model", base_url=openai_double.url))
    h = make_history(CognitionConfig(history="window_summary", history_window=2), llm)
    h.extend(TALK[:4])
    system = h.messages_for(SYSTEM, "Ada")[0]["content"]
    assert system.endswith(SUMMARY_HEADING + "\nAda told Ben the old mill burned down.")
    h.extend(TALK[4:6])
    # the second answer is garbage: the extractive summary of the model's summary and the batch replaces it
    assert h.context().summary == "Ada told Ben the old mill burned down."
    assert json.loads(json.dumps(openai_double.requests[1]["messages"]))[1]["content"].startswith(
        "Earlier summary:\nAda told Ben the old mill burned down.")
    assert (h.summary_calls, h.summary_prompt_tokens, h.summary_completion_tokens) == (2, 185, 42)
    assert llm.fallbacks == 1
