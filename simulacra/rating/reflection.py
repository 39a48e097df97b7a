"""Offline reflection: summarise several memories into insights that cite them (seed 003; Generative Agents).

Seed 003: agents "reflect and summarize multiple long-term memories into a new one". The Generative Agents
paper (Park et al., 2023) asks an LLM for high-level insights together with the memories each rests on.
Offline, :class:`OfflineReflector` does the same from the embeddings, deterministically:

1. strip each distinct text to what it is about (:func:`topic_view`), embed it, and cluster by
   average-linkage agglomeration on cosine distance cut at :data:`DEFAULT_THRESHOLD` (chosen on town
   memories with ``python -m simulacra.rating.evaluate_reflection``; figures in ``docs/rater.md``);
2. keep clusters of at least two distinct texts and rank them by summed rating (a missing rating counts as
   :data:`MISSING_RATING`), then by number of memories, then by the position of their first memory;
3. word each of the best: the content words common to at least half (and at least two) of its distinct texts
   (:func:`shared_words`), how many memories it holds, and its most important memory, quoted.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.cluster.hierarchy import fcluster, linkage
from scipy.spatial.distance import pdist

from simulacra.memory.speech import TALK_FRAME, DialogueLine, read_dialogue
from simulacra.text import STOP_WORDS, join_words

#: average-linkage cut on cosine distance (1 - cos, in [0, 2]) between all-MiniLM-L6-v2 embeddings of topic
#: views; best pairwise F1 against the labelled town scenes (docs/rater.md)
DEFAULT_THRESHOLD = 0.65
#: rating assumed for a memory sent without one (the middle of 1..10)
MISSING_RATING = 5

_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*[A-Za-z]|[A-Za-z]")
_SENTENCE_END = ".!?:;\"“”(["
# The conversational formulae of simulacra.cognition.scripted, and the "plans to be ... from HH:MM to HH:MM"
# of plans: framing that every memory of its kind shares, not what it is about.
_FORMULAE = re.compile(
    r"Hello, I'm [\w'-]+\.|Hello, [\w' -]+!|Did you hear\?|I heard from [^:]{1,80}:|Yes, I heard that too\."
    r"|Really\? I had not heard\.|I should get back to it\.|Goodbye, [\w' -]+\."
)
_PLAN = re.compile(r"\bplans to be\b|\bfrom \d{1,2}:\d\d to \d{1,2}:\d\d\b")
# The first sentence of the scripted mind's conversation summary ("A talked with B at <place>. B told A: <news>;
# <news>. A told B: <news>."): a quote of the summary keeps it and goes on to one clause of what was told (with the
# "B told A:" that says who told whom) or, with no news told, of what was done ("A had been ...; B had been ...") --
# the clause holding the most of the insight's shared words (:func:`_quote`); its frame is
# :data:`simulacra.memory.speech.TALK_FRAME`.
# A clause ends at ";" or a sentence end followed by a space.
_CLAUSE_END = re.compile(r"(?<=[.!?;])\s")
# The frame of this module's own insights, which become memories and may be reflected on again.
_INSIGHT = re.compile(
    r"\b(?:There are|has) \d+ memories (?:that share|about one matter)|the most important(?: \(rated \d+\))?:"
)
# Function words, plus the fixed words of the simulation's templates ("X said to Y", "X plans to be ...",
# "Did you hear?", "I heard from ...", "We have been ... together.", "X talked with Y at ... Y told X: ...") and of
# this module's insights, which every memory of a kind shares.
_STOP = STOP_WORDS | frozenset("""
asked asks back down important made make many matter may memories mustn't near never often one ought plan
plans rated shan't share since still talked together when's why's
""".split())


@dataclass(frozen=True)
class Insight:
    """A reflection: one sentence ``text`` and the ids of the memories it rests on (``evidence``, input order)."""

    text: str
    evidence: list[str]

    def to_dict(self) -> dict:
        return {"text": self.text, "evidence": list(self.evidence)}


def _reported(text: str) -> DialogueLine | None:
    """A dialogue memory's line when ``text`` is one said to someone (``S said to L: "..."``); a line with no
    listener (``S said: "..."``) is quoted whole, as any other text."""
    line = read_dialogue(text)
    return line if line is not None and line.listener is not None else None


def topic_view(text: str, agent: str | None = None) -> str:
    """What ``text`` is about, without the framing that every memory of its kind shares.

    Keeps the quote of reported speech (``A said to B: "..."``) minus the simulation's conversational
    formulae ("Hello, Bram!", "Did you hear?", "I heard from X:", ...); drops "plans to be", clock spans, the
    frame of an earlier insight ("has 3 memories that share"), and the reflecting ``agent``'s own name (every
    memory is the agent's, so its name tells no topic from another). Returns ``""`` when no letter is left:
    a memory that is all formula is about nothing.
    """
    speech = _reported(text)
    view = speech.words if speech is not None else text.strip()
    view = _INSIGHT.sub(" ", _PLAN.sub(" ", _FORMULAE.sub(" ", view)))
    if agent:
        for name in dict.fromkeys(n for n in [agent.strip(), *agent.split()] if n):
            view = re.sub(rf"\b{re.escape(name)}\b(?:['’]s)?", " ", view)
    view = re.sub(r"\s+([.,;:!?])", r"\1", " ".join(view.split()))
    return view if re.search(r"[A-Za-z]", view) else ""


def _tokens(text: str) -> list[tuple[str, str, bool | None]]:
    """``(key, surface, proper)`` per word, ``key`` lower-cased, possessive ``'s`` and edge quotes dropped.

    ``proper`` is true for a capitalised word inside a sentence, or at its start when the next word is
    capitalised too ("Hana Novak said ..."); false for a lower-case word; ``None`` (unknown) for any other
    capitalised word at the start of a sentence.
    """
    found = []
    for m in _WORD.finditer(text):
        surface = re.sub(r"['’]s$", "", m.group()).strip("'’-")
        if surface:
            before = text[: m.start()].rstrip(" '‘’\"“”")
            found.append((surface, not before or before[-1] in _SENTENCE_END))
    out = []
    for i, (surface, initial) in enumerate(found):
        proper: bool | None = surface[0].isupper()
        if proper and initial and not (i + 1 < len(found) and found[i + 1][0][0].isupper() and not found[i + 1][1]):
            proper = None
        out.append((surface.lower(), surface, proper))
    return out


def shared_words(texts: Sequence[str], share: float = 0.5, exclude: frozenset[str] = frozenset(),
                 limit: int = 5) -> list[str]:
    """Content words that occur in at least ``share`` (0..1] of ``texts``, and in at least two of them.

    Stop words, the simulation's template words ("said", "plans", ...), one-letter words and the lower-cased
    words in ``exclude`` are left out. A word is written with its capital when most of its telling uses are
    proper nouns ("Bram", "Mill", "Festival"; see :func:`_tokens`; ties to the use seen first), else
    lower-case. Returns at most ``limit`` words, none twice, the most widespread first, ties to the word
    seen first.
    """
    spread: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    forms: dict[str, Counter[str]] = {}
    for text in texts:
        here = set()
        for key, surface, proper in _tokens(text):
            if len(key) < 2 or key in _STOP or key in exclude:
                continue
            first_seen.setdefault(key, len(first_seen))
            votes = forms.setdefault(key, Counter())
            if proper is not None:
                votes[surface if proper else key] += 1
            here.add(key)
        spread.update(here)
    need = max(2, math.ceil(share * len(texts)))
    keys = sorted((k for k, n in spread.items() if n >= need), key=lambda k: (-spread[k], first_seen[k]))
    return [forms[k].most_common(1)[0][0] if forms[k] else k for k in keys[:limit]]


def _best_clause(text: str, keys: frozenset[str] = frozenset()) -> tuple[str, int]:
    """The clause of ``text`` (split after ``;`` and sentence ends) holding the most of ``keys`` (:func:`_tokens`
    keys, each counted once), ties to the first, and how many it holds: with no ``keys`` (or none in any clause),
    the first clause."""
    clauses = _CLAUSE_END.split(" ".join(text.split()))
    held = [len(keys.intersection(key for key, _, _ in _tokens(c))) for c in clauses]
    best = held.index(max(held))
    return clauses[best], held[best]


def _cut(clause: str, limit: int = 140) -> str:
    """``clause`` cut at a word within ``limit`` chars; ``...`` marks a cut, and replaces a trailing ``;``."""
    if clause.endswith(";"):
        clause = clause[:-1] + "..."
    if len(clause) > limit:
        clause = clause[:limit].rsplit(" ", 1)[0].rstrip(",;:") + "..."
    return clause


def _quote(text: str, words: Sequence[str] = ()) -> str:
    """A memory quoted in an insight by one clause (:func:`_best_clause`, cut by :func:`_cut`): the one holding the
    most of the insight's shared ``words`` (compared by :func:`_tokens` key, as :func:`shared_words` counts them),
    ties to the first, so with no ``words`` (or none in any clause) the first.

    Reported speech becomes ``A said '<clause>'``, the clause taken from what was said without the formulae. A
    conversation's summary keeps its first sentence and adds one clause of what was told, with who told whom:
    ``A talked with B at P. B told A: <clause>``, the clause the best over every "told" sentence's clauses (a
    summary of what was done rather than told, ``A had been ...; B had been ...``, adds its best clause). Anything
    else is its best clause. Double quotes become single.
    """
    keys = frozenset(key for word in words for key, _, _ in _tokens(word))
    speech = _reported(text)
    if speech is not None:
        said = " ".join(_FORMULAE.sub(" ", speech.words).split())
        if said:
            return f"{speech.speaker} said '{_cut(_best_clause(said, keys)[0])}'".replace('"', "'")
    flat = " ".join(text.split())
    talk = TALK_FRAME.match(flat)
    if not talk:
        return _cut(_best_clause(flat, keys)[0]).replace('"', "'")
    rest = flat[talk.end():]
    a, b = re.escape(talk["a"]), re.escape(talk["b"])
    tellers = list(re.finditer(rf"(?:^|(?<=[.!?] ))(?:{a} told {b}|{b} told {a}):(?: |$)", rest))
    if not tellers or tellers[0].start() > 0:
        return (talk.group(0) + _cut(_best_clause(rest, keys)[0])).replace('"', "'")
    best, most = "", -1
    for teller, after in zip(tellers, [*tellers[1:], None]):
        told = rest[teller.start():after.start() if after else len(rest)].strip()
        prefix = teller.group().strip()
        clause, held = _best_clause(told[len(prefix):], keys)
        if held > most:
            best, most = f"{prefix} {clause}".rstrip(), held
    return (talk.group(0) + _cut(best)).replace('"', "'")


def _rating(memory: dict) -> int:
    rating = memory.get("rating")
    return MISSING_RATING if rating is None else int(rating)


class OfflineReflector:
    """Insights from a set of memories by clustering their embeddings (method in the module docstring).

    Args:
        embedder: any :class:`simulacra.embeddings.Embedder`; ``embed(list[str])`` -> float32 ``(n, dim)``.
        threshold: average-linkage cut on cosine distance, in (0, 2); larger merges more.
        share: fraction (0..1] of a cluster's distinct texts that a word must occur in to be named.
        max_words: most shared words named per insight (>= 1).

    Raises:
        ValueError: a parameter out of range.
    """

    def __init__(self, embedder, threshold: float = DEFAULT_THRESHOLD, share: float = 0.5, max_words: int = 5):
        if not 0.0 < threshold < 2.0:
            raise ValueError(f"threshold must lie in (0, 2), got {threshold}")
        if not 0.0 < share <= 1.0:
            raise ValueError(f"share must lie in (0, 1], got {share}")
        if max_words < 1:
            raise ValueError(f"max_words must be at least 1, got {max_words}")
        self.embedder = embedder
        self.threshold = threshold
        self.share = share
        self.max_words = max_words

    def clusters(self, texts: Sequence[str], agent: str | None = None) -> np.ndarray:
        """Cluster label (int >= 1) per text, shape ``(len(texts),)``.

        Average linkage on the cosine distance between the embeddings of the texts' :func:`topic_view`, cut
        at ``threshold``; a text whose view is empty is alone in its cluster.
        """
        views = [topic_view(t, agent) for t in texts]
        labels = np.arange(1, len(texts) + 1)
        topical = [i for i, v in enumerate(views) if v]
        if len(topical) >= 2:
            vectors = np.asarray(self.embedder.embed([views[i] for i in topical]), dtype=np.float64)
            distances = np.nan_to_num(pdist(vectors, "cosine"), nan=1.0).clip(0.0, 2.0)
            found = fcluster(linkage(distances, method="average"), t=self.threshold, criterion="distance")
            labels[topical] = len(texts) + found
        return labels

    def reflect(self, memories: Sequence[dict], agent: str | None = None, max_insights: int = 3) -> list[Insight]:
        """Insights about ``memories``, the best first.

        Args:
            memories: ``{"id": str, "text": str, "rating": int 1..10 | None}`` each; ids unique, texts
                non-empty. Memories with the same text (after trimming) are one text for clustering and
                wording, but each of their ids is evidence and each of their ratings counts.
            agent: the reflecting agent's name: named in each insight, left out of the words it lists, and
                removed from the texts before embedding (clusters are better with it).
            max_insights: at most this many insights (>= 1).

        Returns:
            Up to ``max_insights`` :class:`Insight`, ranked by the summed rating of their memories, then the
            number of memories, then the position of the first one; ``[]`` when no two distinct texts cluster.
            An insight's ``evidence`` is exactly the ids of its cluster's memories, in input order.

        Raises:
            ValueError: duplicate ids, an empty text, or ``max_insights`` < 1.
        """
        if max_insights < 1:
            raise ValueError(f"max_insights must be at least 1, got {max_insights}")
        agent = (agent.strip() or None) if agent else None
        ids = [m["id"] for m in memories]
        if len(set(ids)) != len(ids):
            raise ValueError("memory ids must be unique")
        stripped = [str(m.get("text") or "").strip() for m in memories]
        if not all(stripped):
            raise ValueError("every memory needs a non-empty text")
        texts = list(dict.fromkeys(stripped))
        label_of = dict(zip(texts, self.clusters(texts, agent)))
        members: dict[int, list[int]] = {}
        for i, text in enumerate(stripped):
            members.setdefault(int(label_of[text]), []).append(i)
        groups = [g for g in members.values() if len({stripped[i] for i in g}) >= 2]
        groups.sort(key=lambda g: (-sum(_rating(memories[i]) for i in g), -len(g), g[0]))
        return [self._insight([memories[i] for i in g], [stripped[i] for i in g], agent)
                for g in groups[:max_insights]]

    def _insight(self, group: list[dict], texts: list[str], agent: str | None) -> Insight:
        exclude = frozenset(key for key, _, _ in _tokens(agent)) if agent else frozenset()
        words = shared_words(list(dict.fromkeys(texts)), self.share, exclude, self.max_words)
        who = f"{agent} has" if agent else "There are"
        about = f"that share {join_words(words)}" if words else "about one matter"
        # quote the most important experience, not an earlier insight (an insight quoting an insight reads badly)
        experiences = [i for i in range(len(group)) if not _INSIGHT.search(texts[i])]
        if not experiences:
            return Insight(f"{who} {len(group)} memories {about}, all of them earlier reflections",
                           [m["id"] for m in group])
        top = max(experiences, key=lambda i: _rating(group[i]))  # ties: the first
        rated = f" (rated {group[top]['rating']})" if group[top].get("rating") is not None else ""
        text = f'{who} {len(group)} memories {about}; the most important{rated}: "{_quote(texts[top], words)}"'
        return Insight(text, [m["id"] for m in group])
