"""The ``hybrid`` ranking: BM25 and cosine on one scale, weighted equally.

For the entries of a view, with BM25 scores ``bm`` (0 where none is positive)
and ``vector`` scores ``cos`` (for the entries that have a vector)::

    hybrid = 0.5 * bm / max(bm)  +  0.5 * (cos - min(cos)) / (max(cos) - min(cos))

each part 0 where its maximum is 0, its range empty, or (the cosine part) the
entry has no vector yet. Maximum, minimum and range are over the entries the
view reads, whatever filter applies (as BM25's statistics are). Every entry
with a vector or a positive BM25 score competes, best first, ties in insertion
order; the arithmetic is binary64, in the order written.

Chosen on the LoCoMo dev set (``../shared/eval``: all-MiniLM-L6-v2 vectors,
BM25 k1 0.9, b 0.4; hit@5 over 382 questions): BM25 alone 0.589, cosine alone
0.416, reciprocal-rank fusion (k 60) 0.550, this fusion 0.628 — and 0.626,
0.628, 0.628 at BM25 weights 0.4, 0.5, 0.6, so the equal weights sit in a flat
region rather than on a tuned peak. Relevance takes no part: the dev set's is
the same for every turn, so nothing could be measured for it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

BM25_WEIGHT = 0.5
COSINE_WEIGHT = 0.5


def hybrid_scores(bm25_scores: Floats, cosines: Floats, has_vector: Mask) -> Floats:
    """The hybrid score of each entry of a view (see the module), in its order.

    ``bm25_scores``: each entry's BM25 score (0 where not positive);
    ``cosines``: each entry's vector score (any value where ``has_vector`` is false).
    """
    top = float(bm25_scores.max()) if len(bm25_scores) else 0.0
    held = cosines[has_vector]
    low, high = (float(held.min()), float(held.max())) if len(held) else (0.0, 0.0)
    return fuse(bm25_scores, cosines, has_vector, top, (low, high))


def fuse(
    bm25_scores: Floats, cosines: Floats, has_vector: Mask, top: float, span: tuple[float, float]
) -> Floats:
    """The hybrid scores of some entries, given the view's BM25 maximum and cosine range."""
    bm25_part = bm25_scores / top if top > 0 else np.zeros(len(bm25_scores), np.float64)
    low, high = span
    if high > low and has_vector.all():  # the usual case, without masking a million entries
        cosine_part = (cosines - low) / (high - low)
    else:
        cosine_part = np.zeros(len(cosines), np.float64)
        if high > low:
            cosine_part[has_vector] = (cosines[has_vector] - low) / (high - low)
    # In place, the same operations in the same order: the same bits as a * x + b * y.
    bm25_part *= BM25_WEIGHT
    cosine_part *= COSINE_WEIGHT
    bm25_part += cosine_part
    return bm25_part


def competing(bm25_scores: Floats, has_vector: Mask) -> Mask:
    """Which entries the hybrid ranking returns: a vector, or a positive BM25 score."""
    return has_vector | (bm25_scores > 0)
