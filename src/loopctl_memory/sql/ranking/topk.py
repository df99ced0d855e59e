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
    if limit < 1 or size <= limit or size < 4 * _BLOCK:
        return _best_of(scores, limit)
    whole = size - size % _BLOCK
    highest = scores[:whole].reshape(-1, _BLOCK).max(axis=1)
    if whole < size:
        highest = np.append(highest, scores[whole:].max())
    if limit >= len(highest):
        return _best_of(scores, limit)
    floor = np.partition(highest, len(highest) - limit)[len(highest) - limit]
    if np.isnan(floor):  # no order to rely on: the plain path
        return _best_of(scores, limit)
    reaching = np.flatnonzero(scores >= floor)  # ascending: ties keep their order
    return [(int(reaching[n]), score) for n, score in _best_of(scores[reaching], limit)]


def _best_of(scores: Scores, limit: int) -> list[tuple[int, float]]:
    size = len(scores)
    if not size or limit < 1:
        return []
    # The values only (no index array): half the cost of an argpartition.
    kth = np.partition(scores, size - limit)[size - limit] if limit < size else scores.min()
    above = np.flatnonzero(scores > kth)
    ties = np.flatnonzero(scores == kth)[: max(limit - len(above), 0)]
    chosen = np.concatenate((above, ties))
    chosen = chosen[np.isfinite(scores[chosen])]  # no entry lives there
    order = np.lexsort((chosen, -scores[chosen]))
    chosen = chosen[order]
    return list(zip(chosen.tolist(), scores[chosen].tolist(), strict=True))


def best_above(scores: Scores, floors: Scores, limit: int) -> list[tuple[int, float]]:
    """:func:`best` among the indices whose score is above its floor (``scores > floors``)."""
    kept = np.flatnonzero(scores > floors)
    return [(int(kept[n]), score) for n, score in best(scores[kept], limit)]
