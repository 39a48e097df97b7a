"""Scoring against hand-computed numbers (seed 003 formula, Generative Agents recency)."""

import math

import numpy as np
import pytest

from simulacra.memory.scoring import ScoringParams, recency_of, relevance_from_distance, score_memories

NAN = math.nan


def test_relevance_is_one_over_one_plus_distance():
    assert relevance_from_distance(np.array([0.0, 1.0, 3.0])).tolist() == [1.0, 0.5, 0.25]


def test_recency_is_one_inside_the_window_then_gamma_per_game_hour():
    r = recency_of(np.array([0, 59, 60, 180, 600]), gamma=0.9)
    assert r[:2].tolist() == [1.0, 1.0]
    assert r[2] == pytest.approx(0.9)
    assert r[3] == pytest.approx(0.9**3)
    assert r[4] == pytest.approx(0.9**10)


def test_score_matches_hand_computed_values():
    p = ScoringParams()  # 0.25, 0.25, 1.0, gamma 0.995, window 60, decay 0.99
    now = 1000.0
    terms = score_memories(
        distance=np.array([0.5, 1.0, 0.25, 1.0]),
        rating=np.array([8.0, 4.0, 6.0, NAN]),
        reference_time=np.array([now - 30, now - 180, now - 60, NAN]),
        long_term_since=np.array([NAN, NAN, now - 120, NAN]),
        now=now,
        params=p,
    )
    # fresh short-term memory: recency 1, importance 0.8, relevance 1/1.5
    assert terms.score[0] == pytest.approx(0.25 * 1 + 0.25 * 0.8 + 1 / 1.5)
    # three game hours old: recency 0.995^3 = 0.985074875
    assert terms.recency[1] == pytest.approx(0.985074875)
    assert terms.score[1] == pytest.approx(0.25 * 0.985074875 + 0.25 * 0.4 + 0.5)
    # long-term for two game hours: importance 0.6 * 0.99^2 = 0.58806; age exactly 60 min: 0.995
    assert terms.importance[2] == pytest.approx(0.58806)
    assert terms.score[2] == pytest.approx(0.25 * 0.995 + 0.25 * 0.58806 + 0.8)
    # static memory: relevance alone
    assert math.isnan(terms.recency[3]) and math.isnan(terms.importance[3])
    assert terms.score[3] == pytest.approx(0.5)


def test_weights_apply_at_query_time_to_old_memories():
    args = dict(distance=np.array([1.0]), rating=np.array([10.0]), reference_time=np.array([0.0]),
                long_term_since=np.array([NAN]), now=30.0)
    base = score_memories(**args, params=ScoringParams()).score[0]
    heavier = score_memories(**args, params=ScoringParams(a_imp=1.0)).score[0]
    assert base == pytest.approx(0.25 + 0.25 + 0.5)
    assert heavier == pytest.approx(0.25 + 1.0 + 0.5)


def test_future_timestamps_count_as_fresh():
    assert recency_of(np.array([-30.0]), 0.5)[0] == 1.0
