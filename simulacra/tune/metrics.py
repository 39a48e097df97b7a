"""Ranking metrics of one retrieval against its labelled memories (binary relevance), pure functions.

``returned`` is the retrieval's result, ids in rank order (rank 1 first); ``relevant`` the ids a labelled query
expects. The search averages each over the queries (:func:`simulacra.tune.search.evaluate`), with ``k`` the most
memories a setting returns.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: the metrics a search can rank settings by (:func:`simulacra.tune.search.tune`'s ``metric``)
METRICS = ("ndcg", "mrr", "recall")


def recall_at_k(returned: Sequence[str], relevant: set[str], k: int) -> float:
    """Recall@k: ``|relevant ∩ returned[:k]| / |relevant|``.

    Args:
        returned: ids in rank order; relevant: the expected ids; k: how many of ``returned`` count.
    Returns:
        A fraction in ``[0, 1]``; 0 when nothing is relevant.
    """
    if not relevant:
        return 0.0
    return len(set(returned[:k]) & relevant) / len(relevant)


def reciprocal_rank(returned: Sequence[str], relevant: set[str]) -> float:
    """Reciprocal rank: ``1 / r`` with ``r`` the rank (from 1) of the first relevant id in ``returned``.

    Returns:
        A value in ``[0, 1]`` (1: the first result is relevant); 0 when no relevant id was returned. Its mean
        over queries is the MRR.
    """
    for i, mid in enumerate(returned, start=1):
        if mid in relevant:
            return 1.0 / i
    return 0.0


def ndcg_at_k(returned: Sequence[str], relevant: set[str], k: int) -> float:
    """nDCG@k with binary relevance: ``DCG / IDCG``, ``DCG = sum 1 / log2(r + 1)`` over the ranks ``r <= k`` of
    the relevant ids in ``returned``, ``IDCG = sum_{r=1}^{min(|relevant|, k)} 1 / log2(r + 1)`` (all relevant ids
    first).

    Returns:
        A value in ``[0, 1]`` (1: the first ``min(|relevant|, k)`` results are all relevant); 0 when nothing is
        relevant or ``k <= 0``.
    """
    if not relevant or k <= 0:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 1) for i, mid in enumerate(returned[:k], start=1) if mid in relevant)
    ideal = sum(1.0 / math.log2(i + 1) for i in range(1, min(len(relevant), k) + 1))
    return dcg / ideal
