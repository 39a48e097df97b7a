"""Defensive parsing of LLM answers (simulacra.rating.parsing): ratings, batches of ratings, reflection insights."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simulacra.rating.parsing import MAX_CHARS, ParsedRating, parse_insights, parse_rating, parse_ratings

# --------------------------------------------------------------------------------------------- one rating


@pytest.mark.parametrize(
    "text, rating, how",
    [
        # JSON, as asked, with the rating as a number or a numeric string, under the usual keys
        ('{"rating": 7, "explanation": "The mill broke."}', 7, "json"),
        ('{"rating": "8", "explanation": "x"}', 8, "json"),
        ('{"rating": "7/10"}', 7, "json"),
        ('{"rating": "seven"}', 7, "json"),
        ('{"score": 4}', 4, "json"),
        ('{"Poignancy": 9}', 9, "json"),
        ('{"importance_score": 6, "reason": "a wedding"}', 6, "json"),
        ('{"result": {"rating": 5}}', 5, "json"),
        ('[{"rating": 5}]', 5, "json"),
        ('{"rating": 7,}', 7, "json"),  # a trailing comma is forgiven
        ('{"explanation": "first the why", "rating": 2}', 2, "json"),
        ('{"rating": 3, "score": 9}', 3, "json"),  # "rating" outranks "score"
        # JSON in prose or in a fence
        ('Sure! Here it is: {"rating": 6, "explanation": "A storm."} Hope it helps.', 6, "json"),
        ('```json\n{"rating": 3, "explanation": "Chores."}\n```', 3, "json"),
        ('I think this:\n```\n{"rating": 9}\n```\nThanks', 9, "json"),
        # the whole answer is one value
        ("7", 7, "number"),
        (" 7. ", 7, "number"),
        ("**7**", 7, "number"),
        ('"7"', 7, "number"),
        ("(7)", 7, "number"),
        ("7/10", 7, "number"),
        ("seven", 7, "number"),
        ("Seven out of ten", 7, "number"),
        ("Seven out of ten.", 7, "number"),
        ("4/5", 8, "number"),  # rescaled to /10
        ("85/100", 9, "number"),  # 8.5 rounds half up
        # round half up, clamp 0..11 to 1..10
        ("7.5", 8, "number"),
        ("6.5", 7, "number"),
        ("2.5", 3, "number"),
        ("6.49", 6, "number"),
        ("0", 1, "number"),
        ("0.4", 1, "number"),
        ("11", 10, "number"),
        ("10.6", 10, "number"),
        ("zero", 1, "number"),
        ("eleven", 10, "number"),
        ('{"rating": 0}', 1, "json"),
        ('{"rating": 11}', 10, "json"),
        ('{"poignancy": 9.5}', 10, "json"),
        # labels
        ("Rating: 7", 7, "label"),
        ("rating:7", 7, "label"),
        ("RATING = 4", 4, "label"),
        ("Score = 8/10", 8, "label"),
        ("Poignancy: seven.", 7, "label"),
        ("**Rating:** 8\n**Explanation:** The mill stopped.", 8, "label"),
        ("Rating (1-10): 5", 5, "label"),
        ("Rating - 6", 6, "label"),
        ("The mill broke down. Rating: 6", 6, "label"),
        ("My rating would be 4 because it is a chore.", 4, "label"),
        ("The score is 9 out of 10 because it hurts.", 9, "label"),
        ("The memory mentions 3 people. Rating: 6", 6, "label"),
        ("{'rating': 7, 'explanation': 'single quotes are not JSON'}", 7, "label"),
        # fractions inside prose
        ("I'd put this at 7/10 overall.", 7, "verb"),
        ("Definitely 9/10.", 9, "fraction"),
        ("This deserves eight out of ten for the loss.", 8, "fraction"),
        # verbs; the scale's own numbers are not the rating
        ("On a scale of 1 to 10, I'd say 3", 3, "verb"),
        ("On a scale from one to ten, I would say 4.", 4, "verb"),
        ("I would rate this memory a 2 on a scale of 1-10 where 10 is extremely poignant.", 2, "verb"),
        ("On a scale of 1 to 10, with 10 being the most poignant, I would rate this memory as a 9.", 9, "verb"),
        ("Where 1 is mundane and 10 is extremely poignant, I'd give it 6.", 6, "verb"),
        ("I give it a ten!", 10, "verb"),
        ("I'd rate it 8 - a rating of 3 would be too low.", 8, "verb"),  # the earliest explicit rating
        # a leading number with a separator
        ("7 - because the wheel broke 3 times", 7, "leading"),
        ("7: the mill stopped in 1999", 7, "leading"),
        ("7. Because the wheel broke", 7, "leading"),
        ("7 because it hurts 2 people", 7, "leading"),
        # one number left
        ("Importance is high here: 8", 8, "lone-number"),
        ("The wedding matters a lot to her. 8", 8, "lone-number"),
        ("The 3rd time. 5", 5, "lone-number"),  # ordinals are not numbers
        ("Between 1 and 10 it is clearly a 9 ... 9", 9, "lone-number"),
    ],
)
def test_parse_rating_table(text, rating, how):
    parsed = parse_rating(text)
    assert parsed is not None, text
    assert (parsed.rating, parsed.how) == (rating, how), text
    assert isinstance(parsed.explanation, str)


@pytest.mark.parametrize(
    "text",
    [
        "", "   ", "\n\t", "garbage", "This memory is mundane.", "N/A", "{}", "[]", "null", "{not json",
        "1000", "12", "-3", "-0.5", "Rating: -3", "Rating: 12", "Rating: 1000", "I'd say 42.", "70%", "1e3",
        "At 7:30 the bakery opened.", "It happened 3 times and 2 people saw it.",  # two numbers: ambiguous
        "This is one of the saddest days.", "I'd say one of the saddest.",  # number words inside prose
        "On a scale of 1 to 10.", "(1 = mundane, 10 = poignant)",  # only the scale
        '{"rating": null, "explanation": "I cannot rate it, maybe 7"}',  # JSON decides alone
        '{"rating": true}', '{"rating": "high"}', '{"rating": 1000}', '{"rating": -2}', '{"rating": [7]}',
        '{"rating": NaN}', '{"rating": Infinity}', '{"rating": 1e999}',
        "[" * 5000, "{" * 5000, '{"rating": ' * 3000,
        "7th", "10am", "1234567890123456789012345678901234567890",
    ],
)
def test_parse_rating_gives_none_when_nothing_usable(text):
    assert parse_rating(text) is None


def test_parse_rating_non_strings_give_none():
    assert parse_rating(None) is None
    assert parse_rating(7) is None


def test_explanations():
    assert parse_rating('{"rating": 7, "explanation": " The mill broke. "}').explanation == "The mill broke"
    assert parse_rating('{"rating": 7, "reasoning": "a storm"}').explanation == "a storm"
    assert parse_rating('{"rating": 7}').explanation == ""
    assert parse_rating("7").explanation == ""
    assert parse_rating("7 - because the wheel broke").explanation == "because the wheel broke"
    assert parse_rating("The mill broke down. Rating: 6").explanation == "The mill broke down"
    assert parse_rating("Rating: 8\nExplanation: the mill stopped.").explanation == "the mill stopped"
    said = "On a scale of 1 to 10, I'd say 3 since it is a chore."
    assert parse_rating(said).explanation == said.rstrip(".")  # a verb's sentence stays whole
    assert len(parse_rating("Rating: 5. " + "word " * 1000).explanation) <= 500


def test_only_the_first_max_chars_are_read():
    assert parse_rating("x" * MAX_CHARS + " Rating: 7") is None
    assert parse_rating("x" * (MAX_CHARS - 20) + " Rating: 7").rating == 7


@settings(max_examples=400, deadline=None)
@given(st.text())
def test_parse_rating_never_raises_and_stays_in_range(text):
    parsed = parse_rating(text)
    assert parsed is None or (isinstance(parsed, ParsedRating) and 1 <= parsed.rating <= 10
                              and isinstance(parsed.rating, int))


_PIECES = ["{", "}", "[", "]", '"rating"', '"score"', ":", ",", " ", "\n", "7", "7.5", "-3", "1000", "11", "0",
           "NaN", "Infinity", "1e999", "seven", "out of", "ten", "/", "10", "Rating", "```json", "```", "I'd say",
           "scale of 1 to 10", '"explanation"', '"x"', "null", "true", "%", ":30", "\ud800", "١", "٧"]


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=40).map("".join))
def test_parse_rating_never_raises_on_rating_like_noise(text):
    parsed = parse_rating(text)
    assert parsed is None or 1 <= parsed.rating <= 10


@settings(max_examples=200, deadline=None)
@given(st.integers(min_value=0, max_value=11), st.sampled_from(["{}", '{{"rating": {}}}', "Rating: {}", "{}/10",
                                                                 "I'd say {}.", '```json\n{{"score": "{}"}}\n```']))
def test_every_shape_reads_every_valid_rating(value, template):
    assert parse_rating(template.format(value)).rating == min(10, max(1, value))


# ----------------------------------------------------------------------------------------------- batches


def ratings(items):
    return [None if p is None else p.rating for p in items]


@pytest.mark.parametrize(
    "text, n, expected",
    [
        ("[7, 3, 5]", 3, [7, 3, 5]),
        ('["7", "3/10", "seven"]', 3, [7, 3, 7]),
        ("[7, 3]", 3, [7, 3, None]),  # missing: None at the end
        ("[7, 3, 5, 9]", 3, [7, 3, 5]),  # extra: ignored
        ('[7, "garbage", 5]', 3, [7, None, 5]),  # unreadable: None in its place, nothing shifts
        ("[7, null, 1000]", 3, [7, None, None]),
        ('{"ratings": [{"rating": 2, "explanation": "a"}, {"rating": "9/10"}]}', 2, [2, 9]),
        ('{"scores": [4, 6]}', 2, [4, 6]),
        ('[{"index": 2, "rating": 8}, {"index": 1, "rating": 3}]', 3, [3, 8, None]),  # placed by number
        ('[{"id": 0, "rating": 5}, {"id": 1, "rating": 6}]', 2, [5, 6]),  # 0-based when some says 0
        ('[{"index": 1, "rating": 5}, {"index": 1, "rating": 9}, {"index": 7, "rating": 2}]', 2, [5, None]),
        ('{"1": 7, "3": 2}', 3, [7, None, 2]),
        ('```json\n[4, "eight", null]\n```', 3, [4, 8, None]),
        ('Here you go: [{"rating": 7}, {"rating": 2}] as asked.', 2, [7, 2]),
        ('Memories [1] and [2] are about the mill. Answer: [{"rating": 7}, {"rating": 2}]', 2, [7, 2]),
        ('{"rating": 4}', 1, [4]),
        # answers cut at max_tokens: the complete items of the cut array, never a half-written last one
        ('{"ratings": [{"explanation": "a", "rating": 3}, {"explanation": "b", "rating": 7}, {"explana', 4,
         [3, 7, None, None]),
        ("[3, 7, 2, 1", 5, [3, 7, 2, None, None]),  # "1" may be the start of "10"
        ("[3, 7, 2, 1, ", 5, [3, 7, 2, 1, None]),
        ('[{"index": 2, "rating": 8}, {"index": 1, "rating": 3}, {"index": 3, "ra', 3, [3, 8, None]),
        ('See [1]. {"ratings": [5, 6, "sev', 3, [5, 6, None]),
        # numbered lines and blocks
        ("Here you go:\n1. 7 - because the mill\n2. 3 - chores\n3: Rating: 9", 3, [7, 3, 9]),
        ("1. 7\n3. 5", 3, [7, None, 5]),  # memory 2 missing: None, memory 3 stays third
        ("2) 4\n1) 6", 2, [6, 4]),
        ("Memory 1: 8\nMemory 2: 2", 2, [8, 2]),
        ("- #1 - 5\n- #2 - 6", 2, [5, 6]),
        ("1. The mill broke.\n   Rating: 8\n2. I fed the hens.\n   Rating: 2", 2, [8, 2]),
        ("1. 7\n2. no idea\n3. 4\n4. 9", 3, [7, None, 4]),  # numbered beyond n: ignored
        ("See [1] below.\n1. 7\n2. 3", 2, [7, 3]),  # a stray [1] does not outvote the numbered list
        # plain lines, exactly n
        ("7\n3\n5", 3, [7, 3, 5]),
        ("Rating: 7\nRating: 3", 2, [7, 3]),
        ("Ratings:\n7\n3", 3, [None, None, None]),  # 2 lines for 3 memories: positions unknown
        ("garbage", 2, [None, None]),
        ("", 2, [None, None]),
        ("[7, 3]", 0, []),
    ],
)
def test_parse_ratings_table(text, n, expected):
    got = parse_ratings(text, n)
    assert len(got) == n and ratings(got) == expected, got


def test_parse_ratings_hows_and_explanations():
    got = parse_ratings('{"ratings": [{"rating": 2, "explanation": "a chore"}, 8]}', 2)
    assert [(p.how, p.explanation) for p in got] == [("json-object/json", "a chore"), ("json-object/number", "")]
    got = parse_ratings("1. 7 - because the mill\n2. Rating: 3", 2)
    assert [(p.how, p.explanation) for p in got] == [("numbered/leading", "because the mill"), ("numbered/label", "")]
    assert parse_ratings("7\n3", 2)[0].how == "lines/number"
    assert parse_ratings('{"1": 7}', 1)[0].how == "json-index/number"
    assert parse_ratings('{"ratings": [{"rating": 2}, {"rat', 2)[0].how == "json-cut/json"


def test_parse_ratings_rejects_a_negative_count():
    with pytest.raises(ValueError):
        parse_ratings("[1]", -1)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(_PIECES + ["1.", "2)", "3:", "\n", '"ratings"']),
                                     max_size=40).map("".join)),
       st.integers(min_value=0, max_value=6))
def test_parse_ratings_never_raises_and_keeps_length(text, n):
    got = parse_ratings(text, n)
    assert len(got) == n and all(p is None or 1 <= p.rating <= 10 for p in got)


# ----------------------------------------------------------------------------------------------- insights

IDS = {"mill-1", "mill-2", "storm-1", "7"}


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[{"text": "Bram cares about the mill.", "evidence": ["mill-1", "mill-2"]}]',
         [{"text": "Bram cares about the mill.", "evidence": ["mill-1", "mill-2"]}]),
        ('{"insights": [{"text": "Storm worries.", "evidence_ids": ["storm-1"]}]}',
         [{"text": "Storm worries.", "evidence": ["storm-1"]}]),
        ('Sure:\n```json\n{"insights": [{"insight": "Storm  worries.", "evidence": "storm-1, mill-1"}]}\n```',
         [{"text": "Storm worries.", "evidence": ["storm-1", "mill-1"]}]),
        ('Here: [{"text": "A", "evidence": ["mill-1"]}] done', [{"text": "A", "evidence": ["mill-1"]}]),
        ('{"text": "Single.", "evidence": ["mill-2"]}', [{"text": "Single.", "evidence": ["mill-2"]}]),
        # unknown ids dropped, repeats dropped, order kept; insights without text or evidence dropped
        ('[{"text": "A", "evidence": ["ghost", "mill-2", "mill-1", "mill-2"]}, {"text": "", "evidence": ["mill-1"]},'
         ' {"text": "B", "evidence": ["ghost"]}, {"text": "C"}, {"evidence": ["mill-1"]}, "D", {"text": 5,'
         ' "evidence": ["mill-1"]}, {"text": "E", "evidence": [7, true, null, "storm-1"]}]',
         [{"text": "A", "evidence": ["mill-2", "mill-1"]}, {"text": "E", "evidence": ["7", "storm-1"]}]),
        # the Generative Agents paper's numbered lines
        ("1. Bram cares for the mill (because of mill-1, mill-2)\n2. Nothing (because of 9)\n3. No evidence",
         [{"text": "Bram cares for the mill", "evidence": ["mill-1", "mill-2"]}]),
        ('Evidence ["mill-1"] first, then {"insights": [{"text": "X", "evidence": ["storm-1"]}]}',
         [{"text": "X", "evidence": ["storm-1"]}]),
        ('{"insights": []}', []),
        ("no insights here", []),
        ("", []),
        ("[" * 5000, []),
    ],
)
def test_parse_insights_table(text, expected):
    assert parse_insights(text, IDS) == expected


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.lists(st.sampled_from(['{"insights": [', '{"text": "a", ', '"evidence": [',
                                                      '"mill-1"', '"ghost"', "7", "]", "}", ",", "```json\n",
                                                      "1. x (because of mill-1)", "\n", "null"]),
                                     max_size=30).map("".join)))
def test_parse_insights_never_raises_and_cites_only_known_ids(text):
    for insight in parse_insights(text, IDS):
        assert insight["text"].strip() and insight["evidence"]
        assert set(insight["evidence"]) <= IDS and len(set(insight["evidence"])) == len(insight["evidence"])


@pytest.mark.parametrize("text", [
    " " * MAX_CHARS, "rating" + "*" * MAX_CHARS, "rating " + "would be " * 5000, "say" + " " * MAX_CHARS,
    "```" + " " * MAX_CHARS, "1" + " \t" * 25000, "[" * MAX_CHARS, "1. 7\n" * 10000, "rating: " * 6000,
    "I'd say it this that a " * 2000, "9" * MAX_CHARS,
])
def test_long_pathological_answers_parse_quickly(text):
    """Regular expressions that backtrack (nested quantifiers, adjacent blank runs) took minutes here."""
    import time

    start = time.perf_counter()
    parse_rating(text), parse_ratings(text, 5), parse_insights(text, IDS)
    assert time.perf_counter() - start < 3.0
