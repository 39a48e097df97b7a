"""Lexical relevance: Okapi BM25 over the memory texts of one tier (``memory.relevance: lexical | hybrid``).

BM25 (Robertson et al., "Okapi at TREC-3", 1994) in the Lucene variant, computed by the ``bm25s`` package
(Lu 2024): for query words ``t`` (lower-cased, English stop words removed, each counted once),

    bm25(d) = sum_t  ln(1 + (N - df_t + 0.5) / (df_t + 0.5)) * tf_td / (tf_td + k1 * (1 - b + b * |d| / avgdl))

with ``N`` the memories of the tier, ``df_t`` how many contain ``t``, ``tf_td`` how often ``d`` does, ``|d|`` its
length in words and ``avgdl`` the tier's mean length. The relevance of a memory is its BM25 divided by the
tier's best BM25 for the query, so in [0, 1] (all 0 when no query word occurs in the tier).

Upkeep: the index follows the tier row for row (:meth:`LexicalIndex.append`, :meth:`set_row`, :meth:`keep`, the
same calls as :class:`~simulacra.memory.index.MirrorIndex`). Texts are tokenised once, when first needed. The
statistics every score depends on (``N``, ``df``, ``avgdl``) change with every write, and ``bm25s`` stores
precomputed per-word scores, so its matrix cannot be updated in place: it is rebuilt from the kept tokens on the
first query after a write (measured in ``docs/memory.md``), and queries between writes reuse it. Scores are
therefore always those of a fresh index over the tier's current texts.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

import numpy as np

#: BM25 constants (Lucene's and ``bm25s``'s defaults)
K1 = 1.5
B = 0.75


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Words of each text as BM25 counts them: lower case, runs of 2+ word characters, English stop words
    removed (``bm25s.tokenize``)."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(list(texts), stopwords="en", return_ids=False, show_progress=False)


def query_terms(query: str) -> list[str]:
    """The distinct words of ``query`` (:func:`tokenize`), in order of first occurrence."""
    return list(dict.fromkeys(tokenize([query])[0]))


class LexicalIndex:
    """BM25 over the texts of one tier, row-aligned with the tier's records (see the module docstring).

    Attributes:
        rebuilds: how many times the BM25 matrix was built; ``last_build_s``: seconds the last build took.
    """

    def __init__(self, k1: float = K1, b: float = B):
        self.k1 = k1
        self.b = b
        self._texts: list[str] = []
        self._tokens: list[list[str] | None] = []  # None: not tokenised yet
        self._version = 0
        self._built_version = -1
        self._bm25 = None
        self._cache: tuple[tuple[int, str], np.ndarray] | None = None
        self.rebuilds = 0
        self.last_build_s = 0.0

    def __len__(self) -> int:
        return len(self._texts)

    # ----------------------------------------------------------------- writes (the mirror's calls)
    def append(self, texts: Sequence[str]) -> None:
        """Append rows with these texts."""
        if texts:
            self._texts.extend(texts)
            self._tokens.extend([None] * len(texts))
            self._version += 1

    def set_row(self, row: int, text: str) -> None:
        """Replace the text of row ``row`` (no-op when unchanged)."""
        if self._texts[row] != text:
            self._texts[row] = text
            self._tokens[row] = None
            self._version += 1

    def keep(self, mask: np.ndarray) -> None:
        """Drop the rows where ``mask`` (bool, ``(n,)``) is false, keeping order."""
        idx = np.flatnonzero(mask)
        if len(idx) == len(self._texts):
            return
        self._texts = [self._texts[i] for i in idx]
        self._tokens = [self._tokens[i] for i in idx]
        self._version += 1

    # ----------------------------------------------------------------- reads
    def _index(self):
        """The ``bm25s`` index of the current texts (rebuilt when a write happened since the last build), or
        ``None`` when no text has a word."""
        if self._built_version == self._version:
            return self._bm25
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every build at DEBUG
        t = time.perf_counter()
        todo = [i for i, tok in enumerate(self._tokens) if tok is None]
        for i, tok in zip(todo, tokenize([self._texts[i] for i in todo])):
            self._tokens[i] = tok
        bm25 = None
        if any(self._tokens):
            bm25 = bm25s.BM25(method="lucene", k1=self.k1, b=self.b)
            bm25.index(self._tokens, show_progress=False)
        self._bm25, self._built_version = bm25, self._version
        self.rebuilds += 1
        self.last_build_s = time.perf_counter() - t
        return bm25

    def bm25(self, query: str) -> np.ndarray:
        """Raw BM25 of every row for ``query`` (module docstring), float64 ``(n,)``, >= 0."""
        n = len(self._texts)
        bm25 = self._index() if n else None
        if bm25 is None:
            return np.zeros(n)
        ids = bm25.get_tokens_ids(query_terms(query))
        if not ids:
            return np.zeros(n)
        return np.asarray(bm25.get_scores_from_ids(ids), dtype=np.float64)

    def relevance(self, query: str) -> np.ndarray:
        """Lexical relevance of every row for ``query``: BM25 over the tier's best, float64 ``(n,)`` in [0, 1]
        (all 0 when no query word occurs). The last query's answer is kept until the next write (a read-only
        array)."""
        key = (self._version, query)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        s = self.bm25(query)
        top = float(s.max()) if len(s) else 0.0
        rel = s / top if top > 0 else np.zeros(len(s))
        rel.flags.writeable = False
        self._cache = (key, rel)
        return rel
