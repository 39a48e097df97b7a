"""Lexical relevance: Okapi BM25 over an agent's memory texts (``memory.relevance: lexical | hybrid``).

BM25 (Robertson et al., "Okapi at TREC-3", 1994) in the Lucene variant, as the ``bm25s`` package (Lu 2024) computes
it: for query words ``t`` (lower-cased, English stop words removed, single digits kept, each counted once;
``bm25s.tokenize``),

    bm25(d) = sum_t  ln(1 + (N - df_t + 0.5) / (df_t + 0.5)) * tf_td / (tf_td + k1 * (1 - b + b * |d| / avgdl))

with ``N`` the memories of the corpus, ``df_t`` how many contain ``t``, ``tf_td`` how often ``d`` does, ``|d|`` its
length in words and ``avgdl`` the corpus's mean length. The relevance of a memory is its BM25 divided by the
corpus's best BM25 for the query, so in [0, 1] (all 0 when no query word occurs in the corpus).

The corpus is everything the agent's retrieval can read: an agent's tiers (static, short-term, long-term and the
shared board) are one memory stream split for storage, so :func:`relevance_over` takes their indexes as one
corpus (``N``, ``df`` and the total length summed over them, one best BM25 over all; exactly what one index over
all their texts gives, tested). Divided tier by tier instead, the best weak match of a small short-term tier got
lexical relevance 1.0 and an idf measured on a handful of memories, and outranked a strong match held in long-term
memory (stop 51's audit: "When did you last talk with Hana?" put to Bram ranked Kofi's lines first). A
:class:`LexicalIndex` used alone (:meth:`LexicalIndex.relevance`) is a corpus of one tier.

Upkeep (incremental): the index follows the tier row for row (:meth:`LexicalIndex.append`, :meth:`set_row`,
:meth:`keep`, the same calls as :class:`~simulacra.memory.index.MirrorIndex`). ``bm25s`` stores precomputed
per-word scores that depend on ``N``, ``df`` and ``avgdl``, so it cannot take a write without a full rebuild
(its maintainers' answer, bm25s issues #5, #98, #129) and Chroma's local full-text search filters but does not
score. The index therefore keeps the raw statistics BM25 is made of, which a write changes locally: per word a
postings list (memory slot, term frequency), ``df`` per word, each memory's length, ``N`` and the total length.
Adding a memory appends to the postings of its words; forgetting one marks its slot dead and lowers ``df`` of its
words (dead postings are skipped, and compacted away once they are the majority). The query combines them with the
formula above at query time, in float64, so a score depends only on the current texts: it is bit for bit what an
index built from scratch over them gives (tested), and equal to ``bm25s``'s float32 scores to float32 precision.
A write costs O(words of the memory); a query O(postings of its words). Texts are tokenised once, when first
needed (dense relevance never tokenises).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from simulacra.memory.memo import LastAnswer

#: one number per write of any index (:attr:`LexicalIndex.version`): an index made anew never repeats the version
#: of the one it replaced, so a cache keyed on versions cannot mistake the two
_WRITES = itertools.count(1)

#: BM25 constants (Lucene's and ``bm25s``'s defaults)
K1 = 1.5
B = 0.75


#: texts already tokenised -> their words (:func:`tokenize`); emptied when it would pass :data:`TOKEN_CACHE_SIZE`
_TOKENS: dict[str, tuple[str, ...]] = {}
#: most texts :func:`tokenize` remembers (a town's texts repeat: every agent who sees an event stores it, and the
#: same query text is asked of several tiers)
TOKEN_CACHE_SIZE = 200_000


#: what a word is (``bm25s.tokenize``'s ``token_pattern``): a run of 2+ word characters (bm25s's default), or a
#: single digit, which the default drops: "day 4" must not match "day 5" as well as itself (a resident's plan of
#: day 4, asked on day 16, among thirty days' plans; ``docs/memory.md``, "Long horizons")
TOKEN_PATTERN = r"(?u)\b\w\w+\b|\b\d\b"


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Words of each text as BM25 counts them: lower case, runs of 2+ word characters and single digits
    (:data:`TOKEN_PATTERN`), English stop words removed (``bm25s.tokenize``). Each distinct text is tokenised once
    per process (``bm25s.tokenize`` is called once per call for the texts not seen before: it costs about 0.1 ms a
    call whatever the texts, most of it setting up its progress bar)."""
    import bm25s

    if not texts:
        return []
    found = {t: _TOKENS.get(t) for t in texts}
    missing = [t for t, words in found.items() if words is None]
    if missing:
        words = bm25s.tokenize(missing, stopwords="en", return_ids=False, show_progress=False,
                               token_pattern=TOKEN_PATTERN)
        new = dict(zip(missing, map(tuple, words)))
        if len(_TOKENS) + len(new) > TOKEN_CACHE_SIZE:
            _TOKENS.clear()
        _TOKENS.update(new)
        found.update(new)
    return [list(found[t]) for t in texts]


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query`` (:func:`tokenize`), in order of first occurrence."""
    return list(dict.fromkeys(tokenize([query])[0]))


class _Postings:
    """One word's postings: memory slots and term frequencies, append-only arrays grown by doubling."""

    __slots__ = ("slots", "tf", "n")

    def __init__(self) -> None:
        self.slots = np.zeros(4, dtype=np.int64)
        self.tf = np.zeros(4, dtype=np.float64)
        self.n = 0

    def add(self, slot: int, tf: int) -> None:
        if self.n == len(self.slots):
            self.slots = np.resize(self.slots, max(4, 2 * self.n))
            self.tf = np.resize(self.tf, max(4, 2 * self.n))
        self.slots[self.n] = slot
        self.tf[self.n] = tf
        self.n += 1

    def live(self, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The postings of live slots (compacting the arrays when at most half are live)."""
        slots, tf = self.slots[: self.n], self.tf[: self.n]
        keep = alive[slots]
        if keep.all():
            return slots, tf
        slots, tf = slots[keep], tf[keep]
        if 2 * len(slots) <= self.n:
            self.slots, self.tf, self.n = slots.copy(), tf.copy(), len(slots)
        return slots, tf


class LexicalIndex:
    """BM25 over the texts of one tier, row-aligned with the tier's records, kept incrementally (module docstring).

    Attributes:
        indexed: memories whose words were put in the postings so far (a write-counter for tests and benches);
        compactions: how many times the slot space was renumbered.
    """

    #: renumber the slots when they are more than twice the live memories and more than twice this
    compact_min = 512

    def __init__(self, k1: float = K1, b: float = B):
        self.k1 = k1
        self.b = b
        self._texts: list[str] = []
        self._row_slot = np.zeros(0, dtype=np.int64)  # per row, its slot; -1 while not tokenised
        self._n = 0
        # per slot (a memory as indexed; a rewritten or forgotten memory's slot dies)
        self._slot_words: list[Counter | None] = []
        self._slot_len = np.zeros(0, dtype=np.float64)
        self._alive = np.zeros(0, dtype=bool)
        self._slot_row = np.zeros(0, dtype=np.int64)
        self._slot_row_version = -1
        self._postings: dict[str, _Postings] = {}
        self._df: Counter = Counter()
        self._total_len = 0
        self._live = 0
        self._version = next(_WRITES)
        self._cache: LastAnswer[np.ndarray] = LastAnswer()  # the last query's relevance, until a write
        self.indexed = 0
        self.compactions = 0

    def __len__(self) -> int:
        return self._n

    @property
    def version(self) -> int:
        """A number that changes with every write (unique across all indexes of the process)."""
        return self._version

    # ----------------------------------------------------------------- writes (the mirror's calls)
    def append(self, texts: Sequence[str]) -> None:
        """Append rows with these texts (tokenised at the next query)."""
        m = len(texts)
        if not m:
            return
        self._texts.extend(texts)
        if self._n + m > len(self._row_slot):
            self._row_slot = np.resize(self._row_slot, max(self._n + m, 2 * len(self._row_slot), 64))
        self._row_slot[self._n:self._n + m] = -1
        self._n += m
        self._version = next(_WRITES)

    def set_row(self, row: int, text: str) -> None:
        """Replace the text of row ``row`` (no-op when unchanged)."""
        if self._texts[row] != text:
            self._texts[row] = text
            self._kill(int(self._row_slot[row]))
            self._row_slot[row] = -1
            self._version = next(_WRITES)

    def keep(self, mask: np.ndarray) -> None:
        """Drop the rows where ``mask`` (bool, ``(n,)``) is false, keeping order."""
        mask = np.asarray(mask, dtype=bool)
        idx = np.flatnonzero(mask)
        if len(idx) == self._n:
            return
        for slot in self._row_slot[: self._n][~mask]:
            self._kill(int(slot))
        self._texts = [self._texts[i] for i in idx]
        self._row_slot[: len(idx)] = self._row_slot[idx]
        self._n = len(idx)
        self._version = next(_WRITES)

    def _kill(self, slot: int) -> None:
        """Take a memory's words out of the statistics (its postings are skipped from now on)."""
        if slot < 0:
            return
        words = self._slot_words[slot]
        self._df.subtract(words.keys())
        self._total_len -= int(self._slot_len[slot])
        self._live -= 1
        self._alive[slot] = False
        self._slot_words[slot] = None

    def _index_pending(self) -> None:
        """Tokenise the rows written since the last query and add them to the postings."""
        rows = np.flatnonzero(self._row_slot[: self._n] < 0)
        if not len(rows):
            return
        if len(self._slot_words) > 2 * max(self._live, self.compact_min):  # mostly dead slots: renumber
            self._compact()
            rows = np.flatnonzero(self._row_slot[: self._n] < 0)
        start = len(self._slot_words)
        need = start + len(rows)
        if need > len(self._alive):
            size = max(need, 2 * len(self._alive), 64)
            self._alive = np.resize(self._alive, size)
            self._slot_len = np.resize(self._slot_len, size)
        for row, words in zip(rows, tokenize([self._texts[i] for i in rows])):
            counts = Counter(words)
            self._occupy(int(row), counts, len(words))
            self._df.update(counts.keys())
            self._total_len += len(words)
        self._live += len(rows)
        self.indexed += len(rows)

    def _compact(self) -> None:
        """Renumber the live slots 0.. and rebuild the postings from their kept word counts (no re-tokenising)."""
        old = self._row_slot[: self._n].copy()
        words = [self._slot_words[s] if s >= 0 else None for s in old]
        self._slot_words, self._postings, self._slot_row_version = [], {}, -1
        self.compactions += 1
        self._alive = np.zeros(max(64, self._n), dtype=bool)
        self._slot_len = np.zeros(len(self._alive), dtype=np.float64)
        for row, counts in enumerate(words):
            if counts is not None:
                self._occupy(row, counts, sum(counts.values()))

    def _occupy(self, row: int, counts: Counter, length: int) -> None:
        """Give row ``row`` the next slot (capacity already there) with these word counts and ``length`` words,
        and post its words; the corpus statistics (df, total length) are the caller's."""
        slot = len(self._slot_words)
        self._slot_words.append(counts)
        self._slot_len[slot] = length
        self._alive[slot] = True
        self._row_slot[row] = slot
        for word, tf in counts.items():
            post = self._postings.get(word)
            if post is None:
                post = self._postings[word] = _Postings()
            post.add(slot, tf)

    # ----------------------------------------------------------------- reads
    def _rows_of_slots(self) -> np.ndarray:
        """Row of every slot (-1 for dead slots), recomputed after a write."""
        if self._slot_row_version != self._version or len(self._slot_row) != len(self._slot_words):
            slot_row = np.full(len(self._slot_words), -1, dtype=np.int64)
            slot_row[self._row_slot[: self._n]] = np.arange(self._n)
            self._slot_row, self._slot_row_version = slot_row, self._version
        return self._slot_row

    def statistics(self, terms: Sequence[str]) -> tuple[int, int, dict[str, int]]:
        """The corpus statistics BM25 needs, indexing what was written since the last read: live memories ``N``,
        their total length in words, and ``df`` of each of ``terms``."""
        self._index_pending()
        return self._live, self._total_len, {t: self._df.get(t, 0) for t in terms}

    def _scores(self, terms: Sequence[str], big_n: int, total_len: int, df: Mapping[str, int]) -> np.ndarray:
        """BM25 of every row for the query words ``terms`` in a corpus of these statistics (which include this
        index's, :meth:`statistics` called first), float64 ``(n,)``."""
        score = np.zeros(self._n)
        if not self._n or total_len == 0:
            return score
        slot_row = self._rows_of_slots()
        norm = self.k1 / (total_len / float(big_n))  # k1 / avgdl
        for word in terms:
            count = df.get(word, 0)
            post = self._postings.get(word)
            if count <= 0 or post is None:
                continue
            idf = np.log(1.0 + (big_n - count + 0.5) / (count + 0.5))
            slots, tf = post.live(self._alive)
            if not len(slots):
                continue
            length = self._slot_len[slots]
            score[slot_row[slots]] += idf * (tf / (tf + (self.k1 * (1.0 - self.b) + self.b * norm * length)))
        return score

    def bm25(self, query: str) -> np.ndarray:
        """Raw BM25 of every row for ``query`` with this index as the corpus (module docstring), float64
        ``(n,)``, >= 0."""
        terms = query_terms(query)
        return self._scores(terms, *self.statistics(terms))

    def relevance(self, query: str) -> np.ndarray:
        """Lexical relevance of every row for ``query`` with this index alone as the corpus
        (:func:`relevance_over` of ``[self]``): float64 ``(n,)`` in [0, 1] (all 0 when no query word occurs). The
        last query's answer is kept until the next write (a read-only array)."""
        return self._cache.get((self._version, query), lambda: relevance_over([self], query)[0])


def relevance_over(indexes: Sequence[LexicalIndex], query: str) -> list[np.ndarray]:
    """Lexical relevance of the rows of ``indexes`` taken as one corpus (module docstring): per index, BM25 with
    ``N``, ``df`` and the total length summed over all of them, divided by the best BM25 over all of them; exactly
    what one index over all their texts gives, cut back into the indexes' rows.

    Args:
        indexes: the corpus's parts (an agent's tiers, :meth:`simulacra.memory.stream.AgentMemory.lexical_relevance`).
        query: the query's text (its words: :func:`query_terms`).
    Returns:
        Per index, float64 ``(len(index),)`` in [0, 1], read-only; all 0 when no query word occurs in the corpus.
    """
    terms = query_terms(query)
    stats = [ix.statistics(terms) for ix in indexes]
    big_n = sum(n for n, _, _ in stats)
    total_len = sum(t for _, t, _ in stats)
    df = {t: sum(d[t] for _, _, d in stats) for t in terms}
    scores = [ix._scores(terms, big_n, total_len, df) for ix in indexes]
    top = max((float(s.max()) for s in scores if len(s)), default=0.0)
    out = []
    for s in scores:
        rel = s / top if top > 0 else np.zeros(len(s))
        rel.flags.writeable = False
        out.append(rel)
    return out
