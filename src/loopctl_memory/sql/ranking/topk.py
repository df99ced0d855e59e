"""Top-k selection: the best ``limit`` scores by (score descending, insertion order), exactly.

Every ranker hands its scores (one ``float32`` per candidate, ``-inf`` where
no entry competes) to :func:`best`; ties keep insertion order, as the
reference's stable sort does.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Scores = npt.NDArray[np.floating[Any]]


_BLOCK = 1_024  # scores a block of the first pass
# From this many values on, a sample tells whether one value holds most of them.
_SAMPLED = 16_384
_SAMPLE = 256


def best(scores: Scores, limit: int) -> list[tuple[int, float]]:
    """The ``limit`` best finite scores and their indices, by (score desc, index asc).

    Scores come by the million, mostly far below the best: a first pass takes
    each block's highest score, and the ``limit``-th highest of those is a
    floor that at least ``limit`` scores reach (each from a block of its own),
    so every score of the answer is among those at or above it. Of those, a
    partition finds the ``limit``-th score; the entries above it and the first
    that tie it, in index order, are sorted exactly.
    """
    size = len(scores)
    # Blocks enough that the floor leaves few: four per answer, of 16 to _BLOCK scores.
    block = min(_BLOCK, size // (4 * max(limit, 1)))
    if limit < 1 or size <= limit or block < min(16, _BLOCK):
        return _best_of(scores, limit)
    whole = size - size % block
    highest = scores[:whole].reshape(-1, block).max(axis=1)
    if whole < size:
        highest = np.append(highest, scores[whole:].max())
    if limit >= len(highest):
        return _best_of(scores, limit)
    floor = kth_highest(highest, limit)
    if np.isnan(floor):  # no order to rely on: the plain path
        return _best_of(scores, limit)
    reaching = np.flatnonzero(scores >= floor)  # ascending: ties keep their order
    return [(int(reaching[n]), score) for n, score in _best_of(scores[reaching], limit)]


def _best_of(scores: Scores, limit: int) -> list[tuple[int, float]]:
    size = len(scores)
    if not size or limit < 1:
        return []
    kth = kth_highest(scores, limit) if limit < size else scores.min()
    above = np.flatnonzero(scores > kth)
    ties = np.flatnonzero(scores == kth)[: max(limit - len(above), 0)]
    chosen = np.concatenate((above, ties))
    chosen = chosen[np.isfinite(scores[chosen])]  # no entry lives there
    order = np.lexsort((chosen, -scores[chosen]))
    chosen = chosen[order]
    return list(zip(chosen.tolist(), scores[chosen].tolist(), strict=True))


def kth_highest(values: Scores, limit: int) -> Any:
    """The ``limit``-th highest of ``values`` (``1 <= limit <= len(values)``), NaN highest.

    ``np.partition``'s value at ``len - limit``, found without its worst case:
    where one value holds most of them (0.0 where no term matched, a baseline
    most entries share), a partition takes 15-30 times its usual time, so
    that value is set apart and the rest partitioned, or the answer is it.
    """
    size = len(values)
    if size >= _SAMPLED:
        sample, counts = np.unique(values[:: size // _SAMPLE], return_counts=True)
        common = sample[counts.argmax()]
        if counts.max() * 4 > counts.sum() and not np.isnan(common):
            above = values[(values > common) | np.isnan(values)]
            if len(above) >= limit:
                return kth_highest(above, limit)
            below = values[values < common]
            if size - len(below) >= limit:
                return common
            return kth_highest(below, limit - (size - len(below)))
    # The values only (no index array): half the cost of an argpartition.
    return np.partition(values, size - limit)[size - limit]


def best_above(scores: Scores, floors: Scores, limit: int) -> list[tuple[int, float]]:
    """:func:`best` among the indices whose score is above its floor (``scores > floors``)."""
    kept = np.flatnonzero(scores > floors)
    return [(int(kept[n]), score) for n, score in best(scores[kept], limit)]
