"""Labelled retrieval queries generated from the trace of a real run (``python -m simulacra.labels RUN``).

The trace records who said which line to whom at what game time (``conversations[].lines[]`` with the ids of the
memories each line became), which world event each agent observed when, what each agent saw whom doing, and
every memory written and forgotten. From these facts, not from a retriever, the generator writes questions an
agent could ask later in the run, with the memories of that agent that answer them:

* ``said``: "What did Bram say to me about the bracket?" (the listener) or "What did I tell Yusuf about the
  bracket?" (the speaker): the asker's memory of that line (and any identical line it heard or said); asked as
  "... the last time we talked about the bracket?", the last such line between the two up to the query time;
* ``who``: "Who told me about the bracket?" / "Whom did I tell about the bracket?": every line the asker heard
  (said) containing that word, up to the query time ("Who did I talk to about the bracket?": said or heard), and
  the asker's memory of each such line's conversation when that summary, after its frame, names the word too
  (``<a> talked with <b> at <place>. <b> told <a>: ...``, or what each had been doing, names both and answers
  "who");
* ``when``: "When did I last talk with Yusuf?" (the asker's memories of the last conversation with him before the
  query time: its summary, its lines, and the sight of him talking with the asker then), "What was Ezra doing
  at 09:40?" (the asker's observation of Ezra at 09:40), "When did this happen: <event>?" (the asker's memory of
  the event);
* ``plan``: "What was I planning to do at 13:20?": the plan memories of that day covering that minute: the plan
  step's ("... from 13:00 to 14:00"), and the day's plan and the night's plan summary when they list an item
  covering it and were made by the time of the question.

Topic words of ``said`` and ``who`` are the line's rarest content words in the run (BM25's tokeniser; the words of
people's and places' names, of the calendar, pronouns, auxiliaries, filler and words under three letters left out)
among the words a determiner names ("the bracket", "a heavy branch": branch; all of them when the line has none), so
a question names what the line was about without quoting it. A question is asked at a game time drawn uniformly, in
10-minute steps, from 10 minutes after its memory formed to the run's last tick (so over the whole run: the next
day's questions about yesterday too), not just soon after it, which would reward recency by construction. The
memories asked about are drawn stratified by importance: the candidates of a category are split by the rating of the
memory asked about (low 1-3, mid 4-6, high 7-10; :data:`STRATA`) and drawn in turn from each stratum, so that low-,
mid- and high-importance memories are asked about about equally often (as far as each stratum has candidates),
whatever their share of the run. An expected memory must still be in the asker's store at the end of the run (not
forgotten), since ``simulacra tune`` scores against the final stores with later memories hidden. Every query gets a
fixed split: ``heldout`` when the first byte of the SHA-1 of ``run|agent|time|query`` is below 86 (about a third),
else ``train``. The same run and seed give the same file.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from simulacra.clock import MINUTES_PER_DAY, day_number, day_start, format_hhmm
from simulacra.errors import SimulacraError
from simulacra.memory.speech import TALK_FRAME, DialogueLine
from simulacra.trace import ADD, FORGET, REINFORCE, AddOp, agent_names, reinforced_as_add

#: the "latest" forms of a ``said`` question: the answer is the last line between the two about the words
_LAST_HEARD = "What did {s} tell me the last time we talked about {a}?"
_LAST_SAID = "What did I tell {l} the last time we talked about {a}?"

#: query categories and how many of each to draw per run (at most)
CATEGORIES = {"said": 24, "who": 12, "when": 24, "plan": 8}
#: words too common in this town's talk to name a topic (beyond English stop words)
FILLER = {"hello", "hi", "yes", "no", "just", "really", "well", "been", "have", "today", "going", "good", "morning",
          "evening", "afternoon", "day", "think", "know", "like", "got", "get", "see", "heard", "said", "tell",
          "told", "too", "oh", "right", "sure", "thank", "thanks", "let", "one", "time", "bit", "also", "still",
          "you", "your", "i", "me", "my", "we", "our", "he", "his", "him", "she", "her", "they", "them", "their", "it",
          "its", "did", "do", "does", "has", "had", "was", "were", "am", "is", "are", "up", "down", "from",
          "hear", "having", "new", "goes", "not", "can", "could", "should", "with", "about", "what", "how", "why",
          "when", "where", "who", "there", "here", "now", "then", "some", "any", "much", "many", "very", "so",
          "back", "goodbye", "bye", "later", "must", "way", "off", "out", "around", "together",
          "mine", "myself"}
#: the calendar's names: when a line was said, not what it was about ("Who told me about sunday?")
CALENDAR = frozenset("monday tuesday wednesday thursday friday saturday sunday weekend week month year tonight "
                     "tomorrow yesterday january february march april may june july august september october november "
                     "december".split())
#: step and least delay (game minutes) between a memory and the question about it
DELAY_STEP = 10
#: importance strata (upper bounds of the 1-10 rating, inclusive): low, mid, high
STRATA = (3, 6, 10)
_SPAN = re.compile(r"from (\d\d:\d\d) to (\d\d:\d\d)")
#: an item of a whole day's plan, as the day's plan memory ("16:00-18:00 mending nets ...") and the night's plan
#: summary ("mending nets ... (16:00-18:00)") list it; such memories name their day (``_DAY_PLAN``, game days from 1)
_ITEM = re.compile(r"\b(\d\d:\d\d)-(\d\d:\d\d)\b")
_DAY_PLAN = re.compile(r"'s plan for day (\d+)\b")
#: common adjectives: a determiner's next word that qualifies the word after it ("the old well", "a heavy branch")
_QUALIFIERS = frozenset(
    "old new big small little great large long short young whole last first next other same good bad fine nice "
    "red black white blue green grey gray brown dark bright cold hot warm wet dry high low heavy light loud quiet "
    "early late main own usual strange real full empty broken poor rich north south east west upper lower front "
    "back few many several every".split())
#: a determiner and the one or two words after it: what a line talks about ("the mill's wheel", "a heavy branch"),
#: not how it says it ("Who did I talk to about long?", stop 49's labels; :func:`_determined`)
_DETERMINED = re.compile(r"\b(?i:the|a|an|my|his|her|our|their|your|its|this|these|those)\s+([A-Za-z][\w'’-]*)"
                         r"(?:\s+([A-Za-z][\w'’-]*))?")


@dataclass
class RunFacts:
    """What the generator reads from a trace."""

    run: str
    seed: int
    names: dict[str, str]  # agent id -> name
    end: float  # game minute of the last tick
    adds: dict[str, list[AddOp]] = field(default_factory=dict)  # agent -> its add operations, in order
    forgotten: dict[str, set[str]] = field(default_factory=dict)  # agent -> ids forgotten by the end
    #: {time, speaker, listener, text, memory_ids, place, conversation (its index in ``conversations``)}
    lines: list[dict] = field(default_factory=list)
    conversations: list[dict] = field(default_factory=list)  # {time, participants, summary}
    ticks: list[float] = field(default_factory=list)  # game minute of each tick, in order
    places: list[str] = field(default_factory=list)  # the world's place names (not topics: "The Anchor and Gull")

    def alive(self, agent: str, memory_id: str) -> bool:
        return memory_id not in self.forgotten.get(agent, set())

    def memories(self, agent: str, kind: str | None = None) -> list[AddOp]:
        """The agent's add operations of ``kind`` whose memory is still there at the end."""
        return [op for op in self.adds.get(agent, []) if (kind is None or op["kind"] == kind)
                and self.alive(agent, op["id"])]


def read_facts(run_dir: str | Path) -> RunFacts:
    """Read a run folder's trace (:func:`simulacra.trace.stream_trace`).

    Raises:
        SimulacraError: no trace, or a trace without a header or ticks.
    """
    from simulacra.trace import stream_trace

    path = Path(run_dir) / "trace.jsonl"
    if not path.is_file():
        raise SimulacraError(f"{run_dir}: not a run folder (no trace.jsonl)")
    header, ticks = stream_trace(path)
    names = agent_names(header)
    facts = RunFacts(Path(run_dir).name, int(header.get("seed", 0)), names, float(header.get("start_minute", 0)))
    facts.places = [str(p.get("name", pid)) for pid, p in ((header.get("world") or {}).get("places") or {}).items()]
    for rec in ticks:
        facts.end = float(rec["time"])
        facts.ticks.append(facts.end)
        for op in rec["memory"]:
            if op["op"] == ADD:
                facts.adds.setdefault(op["agent"], []).append(op)
            elif op["op"] == FORGET:
                facts.forgotten.setdefault(op["agent"], set()).add(op["id"])
            elif op["op"] == REINFORCE:  # the text lives on under a new id
                facts.adds.setdefault(op["agent"], []).append(reinforced_as_add(op))
                facts.forgotten.setdefault(op["agent"], set()).update(op["from_ids"] + op["replaces"])
        for conv in rec["conversations"]:
            facts.conversations.append({"time": float(rec["time"]), "participants": conv["participants"],
                                        "summary": conv.get("summary")})
            for line in conv["lines"]:
                facts.lines.append({**line, "time": float(rec["time"]), "place": conv["place"],
                                    "conversation": len(facts.conversations) - 1})
    if not facts.adds:
        raise SimulacraError(f"{path}: no memories in the trace")
    return facts


def _determined(text: str) -> list[str]:
    """The words a determiner names in ``text`` (:data:`_DETERMINED`): the word after it, or, when that word
    qualifies the next (an adjective of :data:`_QUALIFIERS`, a hyphenated word, a possessive), the next one:
    "the bracket needs" -> bracket, "a heavy branch" -> branch, "the mill's wheel" -> wheel."""
    out = []
    for m in _DETERMINED.finditer(text):
        first, second = m.group(1), m.group(2)
        qualifies = first.lower() in _QUALIFIERS or "-" in first or first.lower().endswith(("'s", "’s"))
        out.append(second if qualifies and second else first)
    return out


def _body(summary: str | None) -> str:
    """A conversation summary after its frame ``<a> talked with <b> at <place>.``: who told whom what, or what each
    had been doing (the place's name is not what the talk was about)."""
    return TALK_FRAME.sub("", summary or "", count=1)


def _when(minute: float, start: float, end: float | None = None) -> str:
    """``HH:MM``, with ``on day N`` after the run's first day, or on every day when the run (``start`` to
    ``end``) spans several days (a question asked on day 2 about 16:20 must say which day's)."""
    day = int(minute) // MINUTES_PER_DAY
    first = int(start) // MINUTES_PER_DAY
    several = end is not None and int(end) // MINUTES_PER_DAY != first
    return format_hhmm(minute) + ("" if day == first and not several else f" on day {day + 1}")


class _Generator:
    def __init__(self, facts: RunFacts, seed: int, start: float):
        from simulacra.memory.lexical import tokenize

        self.f = facts
        self.start = start
        self.rng = np.random.default_rng([seed, 1234])
        self.tokenize = tokenize
        name_words = {w for name in [*facts.names.values(), *facts.places] for w in tokenize([name])[0]}
        self.stop = FILLER | CALENDAR | name_words
        self.line_words = [[w for w in dict.fromkeys(toks) if w not in self.stop and not w.isdigit() and len(w) > 2]
                           for toks in tokenize([ln["text"] for ln in facts.lines])]
        self.named = [set(toks) for toks in tokenize([" ".join(_determined(ln["text"])) for ln in facts.lines])]
        df: dict[str, int] = defaultdict(int)
        for words in self.line_words:
            for w in words:
                df[w] += 1
        self.df = df
        self.rating = {op["id"]: op.get("rating") for ops in facts.adds.values() for op in ops}
        self.talk_ratings: dict[tuple, list] = defaultdict(list)  # (agent, summary, time) -> ratings
        for agent in facts.adds:
            for op in facts.memories(agent, "conversation"):
                if op.get("rating") is not None:
                    self.talk_ratings[(agent, op["text"], op["timestamp"])].append(op["rating"])

    def later(self, t: float) -> float:
        """A query time ``t + 10 k`` game minutes, ``k`` uniform over ``1 .. (end - t) // 10`` (the run's last
        tick ``end`` when ``t`` is less than 10 minutes before it)."""
        steps = int((self.f.end - t) // DELAY_STEP)
        if steps < 1:
            return float(self.f.end)
        return float(t + DELAY_STEP * int(self.rng.integers(1, steps + 1)))

    def line_rating(self, line: dict) -> float | None:
        """Importance of a line: the highest rating of the memories it became (``None``: none rated)."""
        rated = [r for i in line.get("memory_ids") or [] if (r := self.rating.get(i)) is not None]
        return max(rated) if rated else None

    def talk_rating(self, conv: dict) -> float | None:
        """Importance of a conversation: the highest rating of its participants' memories of it."""
        rated = [r for a in conv["participants"] for r in self.talk_ratings.get((a, conv["summary"], conv["time"]), [])]
        return max(rated) if rated else None

    def topic(self, i: int) -> list[str]:
        """The rarest one or two content words of line ``i`` (ties: order in the line) among those a determiner
        names (:data:`_DETERMINED`: "the bracket", "a heavy branch"), or among all when none is."""
        pool = [w for w in self.line_words[i] if w in self.named[i]] or self.line_words[i]
        words = sorted(pool, key=lambda w: (self.df[w], self.line_words[i].index(w)))
        return words[:2] if len(words) > 1 and self.rng.random() < 0.5 else words[:1]

    def own_copy(self, agent: str, line: dict) -> list[str]:
        """The agent's live memories of a line: speaker and listener each remember ``<speaker> said to <listener>:
        "<line>"`` (the tick's dialogue memory); identical lines said again count too."""
        text = DialogueLine(self.f.names[line["speaker"]], self.f.names[line["listener"]], line["text"]).text
        return [op["id"] for op in self.f.memories(agent, "dialogue") if op["text"] == text]

    def talk_memories(self, agent: str, conv: dict) -> list[str]:
        """The agent's live memories of a conversation: the summary both participants remember (``<a> talked
        with <b> at <place>. <b> told <a>: <topic>.``), written at the conversation's tick."""
        return [op["id"] for op in self.f.memories(agent, "conversation")
                if op["text"] == conv["summary"] and op["timestamp"] == conv["time"]]

    def talk_sightings(self, agent: str, other: str, conv: dict, now: float) -> list[str]:
        """The agent's live observations of ``other`` talking with it during a conversation: at its tick or the
        next (the talk is perceived at the tick after it starts), up to ``now``."""
        after = next((t for t in self.f.ticks if t > conv["time"]), conv["time"])
        head = f"{self.f.names[other]} is talking with {self.f.names[agent]} "
        return [op["id"] for op in self.f.memories(agent, "observation") if op["text"].startswith(head)
                and conv["time"] <= op["timestamp"] <= min(after, now)]

    def pick(self, items: Sequence, n: int, rating: Callable[[object], float | None]) -> list:
        """At most ``n`` of ``items`` stratified by importance: each stratum of :data:`STRATA` (``rating(item)``;
        unrated items form a stratum of their own) shuffled, then taken in turn, high first, until ``n`` are
        drawn; callers that skip unusable items and stop at their count keep the strata balanced."""
        strata: list[list] = [[] for _ in range(len(STRATA) + 1)]
        for item in items:
            r = rating(item)
            strata[len(STRATA) if r is None else next((k for k, hi in enumerate(STRATA) if r <= hi),
                                                        len(STRATA) - 1)].append(item)
        queues = [[s[i] for i in self.rng.permutation(len(s))] for s in reversed(strata[:-1])] + [
            [strata[-1][i] for i in self.rng.permutation(len(strata[-1]))]]
        out: list = []
        while len(out) < n and any(queues):
            for q in queues:
                if q and len(out) < n:
                    out.append(q.pop(0))
        return out

    # --------------------------------------------------------------------------------- categories
    def said(self, n: int) -> list[dict]:
        out = []
        for i in self.pick(range(len(self.f.lines)), 3 * n, lambda i: self.line_rating(self.f.lines[i])):
            line = self.f.lines[i]
            words = self.topic(i)
            if not words:
                continue
            about = " and ".join(words)
            listener_asks = self.rng.random() < 0.6
            asker = line["listener"] if listener_asks else line["speaker"]
            if not self.own_copy(asker, line):
                continue
            if listener_asks:
                forms = ["What did {s} say to me about {a}?", "What did {s} tell me about {a}?",
                         "What was {s} saying about {a} when we talked?", _LAST_HEARD]
            else:
                forms = ["What did I say to {l} about {a}?", "What did I tell {l} about {a}?", _LAST_SAID]
            form = forms[int(self.rng.integers(len(forms)))]
            query = form.format(s=self.f.names[line["speaker"]], l=self.f.names[line["listener"]], a=about)
            now = self.later(line["time"])
            if form in (_LAST_HEARD, _LAST_SAID):  # the latest line between them about the words, up to now
                line = max((x for j, x in enumerate(self.f.lines) if x["speaker"] == line["speaker"]
                            and x["listener"] == line["listener"] and x["time"] <= now
                            and set(words) <= set(self.line_words[j]) and self.own_copy(asker, x)),
                           key=lambda x: x["time"])
            out.append(self.query("said", asker, now, query, self.own_copy(asker, line),
                                  f"{line['speaker']} to {line['listener']} at {_when(line['time'], self.start)}"))
            if len(out) == n:
                break
        return out

    def who(self, n: int) -> list[dict]:
        out = []
        for i in self.pick(range(len(self.f.lines)), 3 * n, lambda i: self.line_rating(self.f.lines[i])):
            line = self.f.lines[i]
            words = self.topic(i)[:1]
            if not words:
                continue
            word = words[0]
            heard = self.rng.random() < 0.6
            asker = line["listener"] if heard else line["speaker"]
            now = self.later(line["time"])
            form = int(self.rng.integers(2))
            # "Who did I talk to" goes both ways: the lines the asker said and heard
            roles = ("speaker", "listener") if not heard and form == 1 else ("listener" if heard else "speaker",)
            expected, who = [], set()
            for j, other in enumerate(self.f.lines):
                role = next((r for r in roles if other[r] == asker), None)
                if role is not None and other["time"] <= now and word in self.line_words[j]:
                    conv = self.f.conversations[other["conversation"]]
                    ids = self.own_copy(asker, other) + (
                        self.talk_memories(asker, conv) if word in self.tokenize([_body(conv["summary"])])[0] else [])
                    expected += ids
                    if ids:
                        who.add(other["speaker" if role == "listener" else "listener"])
            expected = list(dict.fromkeys(expected))
            if not expected:
                continue
            query = (["Who told me about {w}?", "Who was talking to me about {w}?"] if heard
                     else ["Whom did I tell about {w}?", "Who did I talk to about {w}?"])[form]
            way = "from" if heard else "with" if len(roles) == 2 else "to"
            out.append(self.query("who", asker, now, query.format(w=word), expected, f"{way} {', '.join(sorted(who))}"))
            if len(out) == n:
                break
        return out

    def when(self, n: int) -> list[dict]:
        out = self._last_talk(n // 3) + self._events(max(1, n // 9))
        return out + self._doing(n - len(out))

    def _last_talk(self, n: int) -> list[dict]:
        out = []
        for c in self.pick(self.f.conversations, 3 * n, self.talk_rating):
            if len(c["participants"]) < 2:
                continue
            asker, other = (c["participants"] if self.rng.random() < 0.5 else c["participants"][::-1])[:2]
            now = self.later(c["time"])
            talks = [x for x in self.f.conversations if asker in x["participants"] and other in x["participants"]
                     and x["time"] <= now]
            last = talks[-1]
            expected = self.talk_memories(asker, last) + self.talk_sightings(asker, other, last, now) + [
                i for line in self.f.lines if self.f.conversations[line["conversation"]] is last
                for i in self.own_copy(asker, line)]
            if not expected:
                continue
            query = ["When did I last talk with {o}?", "When did I last speak to {o}?"][int(self.rng.integers(2))]
            out.append(self.query("when", asker, now, query.format(o=self.f.names[other]), expected,
                                  f"last talk at {_when(last['time'], self.start)}"))
            if len(out) == n:
                break
        return out

    def _events(self, n: int) -> list[dict]:
        seen = [(a, op) for a in sorted(self.f.adds) for op in self.f.memories(a, "event")]
        out = []
        for agent, op in self.pick(seen, n, lambda x: x[1].get("rating")):
            gist = re.split(r"[;,]", op["text"], maxsplit=1)[0].rstrip(".").strip()
            gist = gist[0].lower() + gist[1:] if gist else gist
            query = f"When did this happen: {gist}?"
            expected = [x["id"] for x in self.f.memories(agent, "event") if x["text"] == op["text"]]
            out.append(self.query("when", agent, self.later(op["timestamp"]), query, expected,
                                  f"event at {_when(op['timestamp'], self.start)}"))
        return out

    def _doing(self, n: int) -> list[dict]:
        seen = []
        for agent in sorted(self.f.adds):
            for op in self.f.memories(agent, "observation"):
                who = [a for a, name in self.f.names.items() if a != agent and op["text"].startswith(name + " ")]
                if who:
                    seen.append((agent, who[0], op))
        out = []
        for agent, person, op in self.pick(seen, n, lambda x: x[2].get("rating")):
            at = _when(op["timestamp"], self.start, self.f.end)
            form = ["What was {p} doing at {t}?", "Where was {p} at {t}?", "What did I see {p} doing at {t}?"]
            query = form[int(self.rng.integers(3))].format(p=self.f.names[person], t=at)
            expected = [x["id"] for x in self.f.memories(agent, "observation")
                        if x["timestamp"] == op["timestamp"] and x["text"].startswith(self.f.names[person] + " ")]
            out.append(self.query("when", agent, self.later(op["timestamp"]), query, expected,
                                  f"{person} seen at {at}"))
        return out

    def plan(self, n: int) -> list[dict]:
        items = []
        for agent in sorted(self.f.adds):
            for op in self.f.memories(agent, "plan"):
                m = _SPAN.search(op["text"])
                if m:
                    items.append((agent, op, m))
        out = []
        for agent, op, m in self.pick(items, n, lambda x: x[1].get("rating")):
            lo, hi = _span(m, day_start(op["timestamp"]))
            if hi <= lo:
                continue
            minute = float(lo + 10 * int(self.rng.integers(max(1, (hi - lo) // 10))))
            query = ["What was I planning to do at {t}?", "What did I plan for {t}?"][int(self.rng.integers(2))]
            now = self.later(max(minute, op["timestamp"]))
            covering = [x["id"] for x in self.f.memories(agent, "plan") if x["timestamp"] <= minute
                        and (s := _SPAN.search(x["text"])) and _covers(s, minute, day_start(x["timestamp"]))]
            covering += [x["id"] for kind in ("plan", "summary") for x in self.f.memories(agent, kind)
                         if x["timestamp"] <= now and (d := _DAY_PLAN.search(x["text"]))
                         and int(d.group(1)) == day_number(minute)
                         and any(_covers(i, minute, day_start(minute)) for i in _ITEM.finditer(x["text"]))]
            out.append(self.query("plan", agent, now, query.format(t=_when(minute, self.start, self.f.end)), covering,
                                  f"plan item {m.group(1)}-{m.group(2)}"))
        return out

    def query(self, category: str, agent: str, time: float, text: str, expected: list[str], note: str) -> dict:
        return {"agent": agent, "time": time, "query": text, "category": category,
                "expected": [{"id": i} for i in dict.fromkeys(expected)], "note": note,
                "split": split_of(self.f.run, agent, time, text)}


def split_of(run: str, agent: str, time: float, text: str) -> str:
    """The fixed split of a generated query: ``heldout`` when the first byte of the SHA-1 of
    ``run|agent|time|query`` is under 86 (about a third), else ``train``."""
    key = f"{run}|{agent}|{time:g}|{text}".encode()
    return "heldout" if hashlib.sha1(key).digest()[0] < 86 else "train"


def _span(match: re.Match, day: int) -> tuple[int, int]:
    """The game minutes ``(start, end)`` of the plan span ``match`` ("from 16:00 to 18:00", :data:`_SPAN`) on the day
    whose first game minute is ``day`` (``end <= start`` for a span past midnight)."""
    lo, hi = (day + int(x[:2]) * 60 + int(x[3:]) for x in match.groups())
    return lo, hi


def _covers(match: re.Match, minute: float, day: int) -> bool:
    """Whether the plan span ``match`` of the plan memory formed on ``day`` (its first game minute) covers
    ``minute``: the same clock times on another day do not."""
    lo, hi = _span(match, day)
    return lo <= minute < hi


def generate(run_dir: str | Path, seed: int = 0, counts: dict[str, int] | None = None) -> list[dict]:
    """Labelled queries for one run (module docstring): a list of query mappings as ``simulacra tune`` reads
    them (``agent``, ``time`` in game minutes, ``query``, ``category``, ``expected`` ids, ``note``, ``split``),
    deterministic for the run and ``seed``; queries asked twice (same agent, time and text) are kept once.

    Raises:
        SimulacraError: the folder has no trace or no memories.
    """
    from simulacra.trace import read_header

    facts = read_facts(run_dir)
    start = float(read_header(Path(run_dir) / "trace.jsonl").get("start_minute", 0))
    gen = _Generator(facts, seed, start)
    out: dict[tuple, dict] = {}
    for category, n in (counts or CATEGORIES).items():
        for q in getattr(gen, category)(n):
            if q["expected"]:
                out.setdefault((q["agent"], q["time"], q["query"]), q)
    return list(out.values())


def generate_draws(run_dir: str | Path, seeds: Sequence[int]) -> list[dict]:
    """The queries of several draws over one run (:func:`generate` with each of ``seeds``), in order, a question
    drawn again (same agent, time and text) kept once: more questions from a long run (the thirty-day files of
    ``data/queries-30days`` are seeds 0 to 5).

    Raises:
        SimulacraError: as :func:`generate`.
    """
    seen: set[tuple] = set()
    merged = []
    for seed in seeds:
        for q in generate(run_dir, seed):
            key = (q["agent"], q["time"], q["query"])
            if key not in seen:
                seen.add(key)
                merged.append(q)
    return merged


def write(queries: list[dict], run: str, path: str | Path, source: str) -> Path:
    """Write a query file (``simulacra tune --queries``) with a header saying how it was made."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    counts = defaultdict(int)
    for q in queries:
        counts[q["category"]] += 1
    held = sum(q["split"] == "heldout" for q in queries)
    head = (f"# Generated by `python -m simulacra.labels {source}`\n# from the trace of the run {run} "
            f"(simulacra/labels.py, docs/tuning.md):\n# {len(queries)} queries ("
            + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
            + f"), {held} held out. Times are game minutes.\n")
    p.write_text(head + yaml.safe_dump({"run": run, "queries": queries}, sort_keys=False, allow_unicode=True,
                                       width=120), encoding="utf-8")
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m simulacra.labels", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", help="run folder (database/<run>)")
    ap.add_argument("--out", default=None, help="query file to write [data/queries/<run>.yaml]")
    ap.add_argument("--seed", type=int, default=0, help="seed of the draws [%(default)s]")
    ap.add_argument("--draws", type=int, default=1,
                    help="draws merged, seeds SEED to SEED+DRAWS-1, a question drawn again kept once [%(default)s]")
    args = ap.parse_args(argv)
    if args.draws < 1:
        ap.error("--draws must be at least 1")
    try:
        queries = generate_draws(args.run, range(args.seed, args.seed + args.draws))
    except SimulacraError as err:
        print(f"simulacra.labels: error: {err}", file=sys.stderr)
        return 2
    run = Path(args.run).name
    source = f"{args.run} --seed {args.seed}" + (f" --draws {args.draws}" if args.draws > 1 else "")
    out = write(queries, run, args.out or Path("data/queries") / f"{run}.yaml", source)
    print(f"{len(queries)} queries -> {out}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
