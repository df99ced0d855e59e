"""The best ``limit`` scores, exactly as a stable sort by score descending picks them.

Every ranker hands its scores to :func:`best`; the first pass over blocks'
highest scores must never change the answer, whatever the ties, the entries
that do not live (``-inf``) and where the block bounds fall.
"""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_memory.sql.ranking import topk


def _sorted(scores: np.ndarray, limit: int) -> list[tuple[int, float]]:
    """The oracle: every finite score, stably sorted by score descending, cut at ``limit``."""
    finite = [(index, float(score)) for index, score in enumerate(scores) if np.isfinite(score)]
    return sorted(finite, key=lambda pair: -pair[1])[:limit]


# Few distinct values: ties everywhere, as scores of a few relevance levels are.
_SCORES = st.lists(
    st.sampled_from([-np.inf, 0.1, 0.25, 0.25, 0.5, 0.7, 0.9]), min_size=0, max_size=400
)


@settings(max_examples=300, deadline=None)
@given(_SCORES, st.integers(1, 12), st.sampled_from([1, 2, 3, 7, 16]))
def test_the_best_are_those_a_stable_sort_puts_first(values, limit, block):
    scores = np.array(values, np.float32)
    with patch.object(topk, "_BLOCK", block):
        assert topk.best(scores, limit) == _sorted(scores, limit)


def test_a_million_scores_of_few_values_give_the_first_of_the_ties():
    rng = np.random.default_rng(7)
    scores = rng.choice(np.array([0.1, 0.3, 0.5, 0.8], np.float32), 1_000_003)
    scores[rng.choice(len(scores), 50_000, replace=False)] = -np.inf
    for limit in (1, 5, 10, 1_000):
        assert topk.best(scores, limit) == _sorted(scores, limit)


def _kth_by_sorting(values: np.ndarray, limit: int) -> float:
    """The oracle: the ``limit``-th highest once sorted (NaN highest, as numpy sorts it)."""
    return float(np.sort(values)[len(values) - limit])


_VALUES = st.lists(
    st.sampled_from([-np.inf, 0.0, 0.0, 0.0, 0.25, 0.5, 0.9, np.inf, np.nan]),
    min_size=1,
    max_size=200,
)


@settings(max_examples=400, deadline=None)
@given(_VALUES, st.data())
def test_the_kth_highest_is_the_sorted_one_whatever_value_dominates(values, data):
    scores = np.array(values, np.float64)
    limit = data.draw(st.integers(1, len(scores)))
    with patch.object(topk, "_SAMPLED", 4), patch.object(topk, "_SAMPLE", 2):
        found = float(topk.kth_highest(scores, limit))
    expected = _kth_by_sorting(scores, limit)
    assert found == expected or (np.isnan(found) and np.isnan(expected))


def test_a_million_scores_mostly_zero_give_the_best_of_many():
    rng = np.random.default_rng(11)
    scores = np.zeros(1_000_000)
    matched = rng.choice(len(scores), 120_000, replace=False)
    scores[matched] = rng.choice([1.5, 2.25, 3.0, 3.75], len(matched))
    order = np.lexsort((np.arange(len(scores)), -scores))
    for limit in (5, 1_000, 4_096):
        expected = [(int(index), float(scores[index])) for index in order[:limit]]
        assert topk.best(scores, limit) == expected
        assert topk.kth_highest(scores, limit) == scores[order[limit - 1]]
