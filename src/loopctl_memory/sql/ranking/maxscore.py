"""MaxScore for BM25's best k: skip scoring the terms that cannot decide the answer, exactly.

A term adds at most its bound to any entry's score (its weight times the
largest ``tf / (tf + norm)`` its counts allow). The terms are scored heaviest
first into a dense array; after each, the ``limit``-th highest partial sum
among that term's entries is a floor the final ``limit``-th score reaches (a
score only grows as terms are added). Once the bounds of the terms left add up
to less than that floor, an entry none of the scored terms holds cannot reach
the answer, and neither can one whose partial sum plus those bounds stays
below it: the terms left (the common ones, with the longest postings) are only
looked up for the few entries that survive, never scored throughout.

The survivors' scores are then summed again in query order from 0.0 (a term
absent adds nothing), so every score is the one the full sum gives to the last
bit; ties keep insertion order. The bounds are compared with a relative slack
far above the rounding of a few additions, so no entry that could tie or beat
the answer is ever dropped.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.lexical.arrays import distinct
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking.topk import best, kth_highest

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]

SLACK = 1e-9
"""The relative margin of every bound: rounding moves a sum of a few terms by ~1e-16."""


class Term(Protocol):
    """One query term, as MaxScore asks it."""

    @property
    def bound(self) -> float:
        """No entry's score from this term reaches more than this."""
        ...

    def part(self) -> tuple[Ints, Floats]:
        """Its competing entries (ascending seqs) and its score in each."""
        ...

    def among(self, survivors: Ints, chosen: Mask) -> tuple[Ints, Floats]:
        """Which of ``survivors`` it holds (ascending) and its score in each.

        ``survivors``: ascending seqs of competing entries; ``chosen``: a mask
        by seq, true exactly there.
        """
        ...


def pruned_best(
    terms: Sequence[Term], limit: int, sums: Floats, chosen: Mask
) -> list[tuple[int, float]] | None:
    """The best ``limit`` positive scores and their seqs, or None if no term can be skipped.

    ``terms`` in query order; ``sums`` and ``chosen``: dense arrays by seq, all
    zero and all false, left so. None: every term had to be scored throughout
    (the caller sums them, in query order, as it would have).
    """
    bounds = [term.bound for term in terms]
    order = sorted(range(len(terms)), key=lambda number: -bounds[number])
    floor, scored, left = 0.0, 0, math.fsum(bounds)
    try:
        for number in order:
            seqs, values = terms[number].part()
            sums[seqs] += values
            scored += 1
            if len(seqs) >= limit:
                reached = sums[seqs]
                kth = kth_highest(reached, limit)
                floor = max(floor, float(kth))
            left = math.fsum(bounds[other] for other in order[scored:])
            if left < floor * (1 - SLACK):
                break
        if scored == len(terms):
            return None
        # An entry's partial sum depends on the entry alone: one kept in a part is kept in all.
        needed = floor * (1 - SLACK) - left
        kept = {n: sums[terms[n].part()[0]] >= needed for n in order[:scored]}
        survivors = distinct(np.concatenate([terms[n].part()[0][kept[n]] for n in kept]), len(sums))
    finally:
        for number in order[:scored]:
            sums[terms[number].part()[0]] = 0.0
    chosen[survivors] = True
    try:
        for number, term in enumerate(terms):  # in query order, from 0.0, as the full sum
            if number in kept:
                seqs, values = term.part()
                seqs, values = seqs[kept[number]], values[kept[number]]
            else:
                seqs, values = term.among(survivors, chosen)
            sums[seqs] += values
        totals = sums[survivors]
    finally:
        sums[survivors] = 0.0
        chosen[survivors] = False
    return [(int(survivors[n]), score) for n, score in best(totals, limit) if score > 0]
