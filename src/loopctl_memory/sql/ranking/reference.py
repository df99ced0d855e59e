"""The reference ranking (loopctl 0.1.0): every entry scored exactly, in vectorised binary32.

The reference computes, in binary32, one operation at a time::

    score = relevance*0.5 + overlap*0.4 + tag + 0.1,   overlap = matches / words

Each step here is one numpy ufunc on ``float32`` arrays (never fused), so it
rounds exactly as the crate rounds:

1. ``half = relevance*0.5`` per entry comes from the ranking state.
2. The weighted number of query words each entry contains: for each distinct
   word, the entries holding it (from the token index, through the state).
3. ``overlap*0.4`` takes at most ``words + 1`` values: a table, looked up.
4. ``+ 0.3`` where a tag contains the whole query, then ``+ 0.1``.
5. The best ``limit`` by (score desc, seq asc): a partition finds the
   ``limit``-th score; the entries above it and the first that tie it, in
   insertion order, are sorted exactly.

The cost is a few passes over one ``float32`` per entry plus the postings of
the query's words, whether its words are rare or common (a mask of each
common word is kept by the state).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.binary32 import SCORE_BASELINE, SCORE_OVERLAP_WEIGHT, SCORE_TAG_BONUS
from loopctl_memory.scopes import Scope
from loopctl_memory.scoring import ParsedQuery
from loopctl_memory.sql.lexical.arrays import distinct
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking.snapshot import Snapshot
from loopctl_memory.sql.ranking.state import Mask, Members, RankingState
from loopctl_memory.sql.ranking.topk import Scores, best, best_above

_OVERLAP_WEIGHT = np.float32(SCORE_OVERLAP_WEIGHT)
_TAG_BONUS = np.float32(SCORE_TAG_BONUS)
_BASELINE = np.float32(SCORE_BASELINE)

# A scope holding less than this share of the store is scored on its own entries only.
_SMALL_SCOPE = 4
# Substring tests (entries times distinct words) worth making on a small scope's texts.
_TEXT_BUDGET = 2_000_000


def top_scored(
    snapshot: Snapshot,
    query: ParsedQuery,
    limit: int,
    scope: Scope | None = None,
    *,
    read_texts: bool = True,
    matched_only: bool = False,
    allowed: Mask | None = None,
) -> list[tuple[int, float]]:
    """The seqs and scores of the best ``limit`` entries, best first, as the reference ranks them.

    Only the entries of ``scope`` (default: every scope) compete, and of those,
    when ``allowed`` (a mask by seq) is given, only the ones it holds; with
    ``matched_only``, only those the query raised above their baseline score
    (a word or a tag matched). A small scope costs its own entries: their texts
    (kept by the state, read the first time if ``read_texts``) or the postings of
    the query's words, never a pass over every entry. ``snapshot`` is taken
    with ``Needs.reference``, and ranked within the state's ``looking_up``.
    """
    state, size = snapshot.state, snapshot.size
    if limit == 0 or size <= 1:
        return []
    members = snapshot.members(scope or Scope(descendants=True))
    if allowed is not None:
        members = _narrowed(snapshot, members, allowed)
    if members is None:
        return _ranked(_scores(state, query, size), state.half[:size], limit, matched_only)
    universe = members.seqs
    if not len(universe):
        return []
    small = len(universe) <= state.tuning.small_scope
    if read_texts and small and len(universe) * len(query.words) <= _TEXT_BUDGET:
        texts = state.texts(snapshot.reader, universe)
        scores = _scores_of_texts(state, query, universe, texts)
    elif len(universe) * _SMALL_SCOPE < size:
        scores = _scores_within(state, query, universe)
    else:
        scores = _scores(state, query, size)
        scores[~members.mask] = -np.inf
        return _ranked(scores, state.half[:size], limit, matched_only)
    ranked = _ranked(scores, state.half[universe], limit, matched_only)
    return [(int(universe[n]), score) for n, score in ranked]


def _narrowed(snapshot: Snapshot, members: Members | None, allowed: Mask) -> Members:
    """The live members that ``allowed`` (a mask by seq) also holds."""
    mask = allowed[: snapshot.size] & snapshot.live
    if members is not None:
        mask &= members.mask
    return Members(np.flatnonzero(mask), mask)


def _ranked(
    scores: Scores, half: Scores, limit: int, matched_only: bool
) -> list[tuple[int, float]]:
    """The best ``limit``; with ``matched_only``, among those above their baseline (half + 0.1)."""
    return best_above(scores, half + _BASELINE, limit) if matched_only else best(scores, limit)


def _scores_within(state: RankingState, query: ParsedQuery, universe: Ints) -> Scores:
    """The scores of the entries at ``universe`` (ascending seqs), in that order."""
    counts = np.zeros(len(universe), _count_type(query.word_count))
    for word, weight in zip(query.words, query.weights, strict=True):
        found, _ = state.word_entries(word)
        seqs: npt.NDArray[Any] = found
        if found.dtype == np.bool_:
            held = universe[universe < len(found)]
            counts[np.flatnonzero(found[held])] += counts.dtype.type(weight)
            seqs = np.empty(0, np.int64)
        tail = state.word_tail(word)
        if tail:
            seqs = np.concatenate((seqs, np.array(tail, seqs.dtype)))
        counts[_positions(universe, seqs)] += counts.dtype.type(weight)
    tagged = _positions(universe, state.tagged(query.text))
    scores = _combined(state.half[universe], counts, tagged, query)
    if len(state.rewritten):
        _rescore_rewritten(state, query, scores, universe)
    return scores


def _scores_of_texts(
    state: RankingState,
    query: ParsedQuery,
    universe: Ints,
    texts: list[tuple[str, tuple[str, ...]]],
) -> Scores:
    """The scores of the entries at ``universe``, from their current lowercase texts."""
    counts = np.zeros(len(universe), np.int64)
    memories = [memory for memory, _ in texts]
    for word, weight in zip(query.words, query.weights, strict=True):
        counts[[n for n, memory in enumerate(memories) if word in memory]] += weight
    text = query.text
    tagged = [n for n, (_, tags) in enumerate(texts) if any(text in tag for tag in tags)]
    return _combined(state.half[universe], counts, tagged, query)


def _combined(half: Scores, counts: Any, tagged: Any, query: ParsedQuery) -> Scores:
    """``half + overlap(counts)``, ``+ 0.3`` at ``tagged``, ``+ 0.1``: each step in binary32."""
    scores = half + _overlap_terms(query.word_count)[counts] if query.words else half.copy()
    scores[tagged] = scores[tagged] + _TAG_BONUS
    scores += _BASELINE
    return scores


def _positions(universe: Ints, seqs: npt.NDArray[Any]) -> Ints:
    """Where the distinct ``seqs`` that ``universe`` holds sit in it."""
    if not len(seqs):
        return np.empty(0, np.int64)
    seqs = np.unique(seqs)
    where = np.searchsorted(universe, seqs)
    inside = where < len(universe)
    where, seqs = where[inside], seqs[inside]
    found: Ints = where[universe[where] == seqs]
    return found


def _scores(state: RankingState, query: ParsedQuery, size: int) -> Scores:
    half = state.half[:size]
    if not query.words:
        scores = half.copy()
    else:
        overlap = _overlap_terms(query.word_count)
        counts, touched, touched_counts = _matches(state, query, size)
        scores = half + overlap[counts] if counts is not None else half.copy()
        if len(touched):
            scores[touched] = half[touched] + overlap[touched_counts]
    tagged = distinct(state.tagged(query.text), size)
    if len(tagged):
        scores[tagged] = scores[tagged] + _TAG_BONUS
    scores += _BASELINE
    if len(state.rewritten):
        _rescore_rewritten(state, query, scores, None)
    return scores


def _rescore_rewritten(
    state: RankingState, query: ParsedQuery, scores: Scores, universe: Ints | None
) -> None:
    """Score again, from their current words, the entries rewritten since they were indexed.

    ``scores`` are by seq, or (with ``universe``) those of the seqs ``universe`` holds.
    """
    rewritten = state.rewritten
    seqs = np.array(rewritten.seqs(), np.int64)
    if universe is None:
        seqs = seqs[seqs < len(scores)]
        places = seqs
    else:
        places = _positions(universe, seqs)
        seqs = universe[places]
    if not len(seqs):
        return
    counts = np.zeros(len(seqs), np.int64)
    for word, weight in zip(query.words, query.weights, strict=True):
        counts[_positions(seqs, np.array(rewritten.word_seqs(word), np.int64))] += weight
    tagged = _positions(seqs, np.array(rewritten.tag_seqs(query.text), np.int64))
    scores[places] = _combined(state.half[seqs], counts, tagged, query)


def _overlap_terms(word_count: int) -> Scores:
    """``f32(f32(m / words) * 0.4)`` for every weighted match count m (0 for none)."""
    matches = np.arange(word_count + 1, dtype=np.float64).astype(np.float32)
    terms: Scores = (matches / np.float32(max(word_count, 1))) * _OVERLAP_WEIGHT
    terms[0] = 0.0
    return terms


def _matches(
    state: RankingState, query: ParsedQuery, size: int
) -> tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """Weighted matches: a dense count per entry, or sparse (seqs, counts) when few.

    Words many entries hold come as masks and are added densely. The others
    come as distinct seqs: kept aside while they are few, added to a dense
    count once they are not (so memory stays one count per entry, whatever
    the number of words).
    """
    counts = _Counts(size, _count_type(query.word_count))
    for word, weight in zip(query.words, query.weights, strict=True):
        found, is_distinct = state.word_entries(word)
        tail = state.word_tail(word)
        if found.dtype == np.bool_:
            counts.add_mask(found, weight)
            if tail:
                counts.add_seqs(distinct(np.array(tail, np.int64), size), weight)
        elif tail:
            counts.add_seqs(
                distinct(np.concatenate((found, np.array(tail, found.dtype))), size), weight
            )
        elif len(found):
            counts.add_seqs(found if is_distinct else distinct(found, size), weight)  # type: ignore[arg-type]
    return counts.result()


class _Counts:
    """Weighted match counts, sparse until they are many."""

    def __init__(self, size: int, count_type: type[np.unsignedinteger[Any]]) -> None:
        self._size = size
        self._type = count_type
        self.dense: Any = None
        self._seqs: list[Any] = []
        self._weights: list[int] = []
        self._pending = 0

    def _densify(self) -> Any:
        if self.dense is None:
            self.dense = np.zeros(self._size, self._type)
            for seqs, weight in zip(self._seqs, self._weights, strict=True):
                self.dense[seqs] += self._type(weight)  # distinct seqs: one addition each
            self._seqs, self._weights = [], []
        return self.dense

    def add_mask(self, mask: Any, weight: int) -> None:
        part = self._densify()[: len(mask)]
        if weight == 1:
            np.add(part, mask, out=part, casting="unsafe")
        else:
            part += mask.astype(self._type) * self._type(weight)

    def add_seqs(self, seqs: Any, weight: int) -> None:
        """Add distinct seqs."""
        if self.dense is not None:
            self.dense[seqs] += self._type(weight)
            return
        self._seqs.append(seqs)
        self._weights.append(weight)
        self._pending += len(seqs)
        if self._pending * 32 >= self._size:
            self._densify()

    def result(self) -> tuple[Any, npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(dense counts, None, None) or (None, touched seqs, their counts)."""
        none = np.empty(0, np.int64)
        if self.dense is not None or not self._seqs:
            return self.dense, none, none
        every = np.concatenate(self._seqs)
        each = np.repeat(np.array(self._weights, np.int64), [len(part) for part in self._seqs])
        order = np.argsort(every, kind="stable")
        every, each = every[order], each[order]
        first = np.flatnonzero(np.diff(every, prepend=-1))
        return None, every[first].astype(np.int64), np.add.reduceat(each, first)


def _count_type(word_count: int) -> type[np.unsignedinteger[Any]]:
    if word_count < 2**8:
        return np.uint8
    return np.uint16 if word_count < 2**16 else np.uint32
