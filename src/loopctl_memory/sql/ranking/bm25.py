"""The BM25 ranking: Lucene's BM25 over the word postings, vectorised, exactly as defined.

:mod:`loopctl_memory.bm25` defines the score and computes it in plain Python;
this module performs the same binary64 operations in the same order on numpy
arrays, so both give the same scores to the last bit. N, df and the average
document length are those of the live entries of the scope; a filter only
removes entries from competing. The work is proportional to the postings of
the query's words (stopwords never reach them) plus, per distinct scope or
change, one pass over the entries' lengths.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator

import numpy as np
import numpy.typing as npt

from loopctl_memory import bm25
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.lexical.arrays import distinct, found_at
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking import maxscore
from loopctl_memory.sql.ranking.snapshot import Snapshot
from loopctl_memory.sql.ranking.state import Mask, Members
from loopctl_memory.sql.ranking.topk import best
from loopctl_memory.sql.ranking.words import Lengths, Tallies, WordIndex

Floats = npt.NDArray[np.float64]

# Scopes whose statistics are kept at once (a process serves a few agents' scopes).
_STATISTICS_KEPT = 64
# Below this share of the entries, a query's candidates are summed apart; above, densely.
_SPARSE = 64
# Survivors fewer than 1/16 of a term's postings are looked up in them; more, picked out.
_LOOKED_UP = 16
# Document lengths up to this take their norms from a table; a longer one, one by one.
_TABLE_UP_TO = 4_096
# Above this many answers, MaxScore's floor is too low to skip a term (measured at 1M).
_PRUNED_UP_TO = 512


def top_scored(  # noqa: PLR0917 - the retrieval's arguments, as the reference ranker's
    snapshot: Snapshot,
    tokens: list[str],
    limit: int,
    scope: Scope,
    parameters: Bm25Parameters,
    allowed: Mask | None = None,
) -> list[tuple[int, float]]:
    """The seqs and BM25 scores of the best ``limit`` entries of ``scope``, best first.

    Only entries with a positive score compete, and (when given) only those
    ``allowed`` holds (a mask by seq); ties keep insertion order. Terms that
    cannot change the answer are not scored throughout (:mod:`.maxscore`).
    """
    if limit == 0:
        return []
    words, terms, size = _terms(snapshot, tokens, scope, parameters, allowed)
    if words is not None and len(terms) > 1 and limit <= _PRUNED_UP_TO:
        found = maxscore.pruned_best(terms, limit, words.sums(size), words.chosen(size))
        if found is not None:
            return found
    parts = [term.part() for term in terms]
    if _few(parts, size):
        candidates, scores = _summed_apart(parts, size)
        return [(int(candidates[n]), score) for n, score in best(scores, limit)]
    with _summed_densely(words, parts, size) as sums:
        return [(seq, score) for seq, score in best(sums, limit) if score > 0]


def positive_scores(
    snapshot: Snapshot,
    tokens: list[str],
    scope: Scope,
    parameters: Bm25Parameters,
    allowed: Mask | None = None,
) -> tuple[Ints, Floats]:
    """The seqs (ascending) of ``scope``'s entries with a positive BM25 score, and the scores.

    Only those ``allowed`` holds, when given; the statistics are the scope's whatever it holds.
    """
    words, terms, size = _terms(snapshot, tokens, scope, parameters, allowed)
    parts = [term.part() for term in terms]
    if _few(parts, size):
        return _summed_apart(parts, size)
    with _summed_densely(words, parts, size) as sums:
        candidates = np.flatnonzero(sums > 0)
        return candidates.astype(np.int64), sums[candidates]


_Parts = list[tuple[Ints, Floats]]
"""Each query term's competing entries (ascending seqs) and its score in each, in query order."""


class _Term:
    """A query term: its weight, its postings, and its part of the score once asked for."""

    __slots__ = (
        "_competing",
        "_least_norm",
        "_lengths",
        "_norms",
        "_part",
        "_seqs",
        "_tf",
        "weight",
    )

    def __init__(  # noqa: PLR0917 - a term's facts
        self,
        weight: float,
        seqs: Ints,
        tf: Tallies,
        competing: Mask,
        lengths: Lengths,
        norms: Callable[[Lengths], Floats],
        least_norm: float,
    ) -> None:
        self.weight = weight
        """Its idf times its count in the query."""
        self._seqs, self._tf, self._competing = seqs, tf, competing
        self._lengths, self._norms, self._least_norm = lengths, norms, least_norm
        self._part: tuple[Ints, Floats] | None = None

    @property
    def bound(self) -> float:
        """Above its score in any entry: ``tf / (tf + norm)`` grows with tf, and norm >= k1 (1 - b).

        Made from the largest count of any posting (one pass over the counts,
        not over the entries' lengths).
        """
        most = float(self._tf.max())
        return self.weight * (most / (most + self._least_norm))

    def part(self) -> tuple[Ints, Floats]:
        """Its competing entries (ascending seqs) and its score in each (made once)."""
        if self._part is None:
            seqs, tf = self._seqs[self._competing], self._tf[self._competing]
            self._part = (seqs, self._scores(seqs, tf))
        return self._part

    def among(self, survivors: Ints, chosen: Mask) -> tuple[Ints, Floats]:
        """Which of ``survivors`` (competing entries; ``chosen`` by seq) it holds, and its scores.

        Few survivors are looked up in its postings; many are picked out by a
        pass over its postings through ``chosen`` (still no length or score
        made but theirs).
        """
        if len(survivors) * _LOOKED_UP < len(self._seqs):
            at, hit = found_at(self._seqs, survivors)
            seqs, tf = survivors[hit], self._tf[at[hit]]
        else:
            hit = chosen[self._seqs]
            seqs, tf = self._seqs[hit], self._tf[hit]
        return seqs, self._scores(seqs, tf)

    def _scores(self, seqs: Ints, tf: Tallies) -> Floats:
        # The operations of bm25.scores, in its order (no fused multiply-add in numpy).
        return np.asarray(self.weight * (tf / (tf + self._norms(self._lengths[seqs]))))


def _terms(
    snapshot: Snapshot,
    tokens: list[str],
    scope: Scope,
    parameters: Bm25Parameters,
    allowed: Mask | None,
) -> tuple[WordIndex | None, list[_Term], int]:
    """The word index, the query's terms some competing entry holds, and the size of seq arrays."""
    size = snapshot.size
    if size <= 1 or not tokens:
        return None, [], size
    words = snapshot.word_index()
    members = snapshot.members(scope)
    documents, average = _statistics(snapshot, words, scope, members)
    if not documents:
        return words, [], size
    norms = functools.partial(_norms, k1=parameters.k1, b=parameters.b, average=average)
    least_norm = parameters.k1 * (1.0 - parameters.b)  # a norm's, whatever the length
    live = snapshot.live
    terms: list[_Term] = []
    for token, times in bm25.query_weights(tokens).items():
        seqs, tf = words.postings(token)
        competing = live[seqs]
        if members is not None:
            competing &= members.mask[seqs]
        holding = int(np.count_nonzero(competing))  # df: a filter never changes it
        if allowed is not None:
            competing &= allowed[seqs]
            if not competing.any():
                continue
        elif not holding:
            continue
        weight = times * bm25.idf(documents, holding)
        terms.append(_Term(weight, seqs, tf, competing, words.lengths, norms, least_norm))
    return words, terms, size


def _norms(lengths: Lengths, k1: float, b: float, average: float) -> Floats:
    """``k1 * ((1 - b) + b * dl / average)`` of each length, the operations of bm25.scores.

    Lengths take few values: each distinct one is computed once, in a table,
    with the same binary64 operations in the same order (no fused multiply-add
    in numpy), so every value is the one computed entry by entry.
    """
    if not len(lengths):
        return np.empty(0, np.float64)
    longest = int(lengths.max())
    if longest > _TABLE_UP_TO:
        return np.asarray(k1 * ((1.0 - b) + (b * lengths.astype(np.float64)) / average))
    table = k1 * ((1.0 - b) + (b * np.arange(longest + 1, dtype=np.float64)) / average)
    return np.asarray(table[lengths])


def _few(parts: _Parts, size: int) -> bool:
    """Whether the postings are few enough beside the seqs to sum apart from a dense array."""
    return sum(len(seqs) for seqs, _ in parts) * _SPARSE < size


def _summed_apart(parts: _Parts, size: int) -> tuple[Ints, Floats]:
    """The entries the parts name (ascending) and their positive sums, from sorted candidates."""
    if not parts:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    seqs = np.concatenate([part_seqs for part_seqs, _ in parts])
    candidates = distinct(seqs, size)
    # bincount adds each bin's weights in input order, from 0.0: as bm25.scores does.
    where = np.searchsorted(candidates, seqs)
    scores = np.bincount(where, np.concatenate([scored for _, scored in parts]), len(candidates))
    positive = scores > 0
    return candidates[positive].astype(np.int64), np.asarray(scores[positive], np.float64)


@contextlib.contextmanager
def _summed_densely(words: WordIndex | None, parts: _Parts, size: int) -> Iterator[Floats]:
    """The parts summed by seq into the word index's dense sums (zero where none), for a while.

    Each seq's terms are added in query order, from 0.0, as bm25.scores adds
    them. The array is kept between queries (no 8 bytes an entry to allocate and
    fault in each time) and left all zero again: only the seqs the parts name
    are reset.
    """
    assert words is not None  # noqa: S101 - parts come from a word index
    sums = words.sums(size)
    try:
        first, *others = parts
        sums[first[0]] = first[1]  # 0.0 + x is x: the first term is written, not added
        for seqs, scored in others:
            sums[seqs] += scored  # each term names a seq once
        yield sums
    finally:
        for seqs, _ in parts:
            sums[seqs] = 0.0


def _statistics(
    snapshot: Snapshot, words: WordIndex, scope: Scope, members: Members | None
) -> tuple[int, float]:
    """N and the average document length over the live entries of ``scope``.

    Kept while nothing but new entries moves the state (no change, block or
    generation): then only the entries stored since are added, not a pass over
    every entry's length at each query after a write.
    """
    state, size = snapshot.state, snapshot.size
    key = (state.change, state.mark, state.generation, scope)
    through, documents, total = words.statistics.get(key, (0, 0, 0))
    if through > size:  # pragma: no cover - seqs only grow while the key holds
        through, documents, total = 0, 0, 0
    if through < size:
        universe = snapshot.live[through:]
        if members is not None:
            universe = universe & members.mask[through:size]
        documents += int(np.count_nonzero(universe))
        total += int(words.lengths[through:size][universe].sum())
        if len(words.statistics) >= _STATISTICS_KEPT:
            words.statistics.clear()
        words.statistics[key] = (size, documents, total)
    return documents, total / documents if documents else 0.0
