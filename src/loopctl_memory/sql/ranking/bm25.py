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

import numpy as np
import numpy.typing as npt

from loopctl_memory import bm25
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.arrays import distinct
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking.state import Mask, Members, RankingState
from loopctl_memory.sql.ranking.topk import best
from loopctl_memory.sql.ranking.words import WordIndex
from loopctl_memory.sql.segments import Ints

Floats = npt.NDArray[np.float64]

# Scopes whose statistics are kept at once (a process serves a few agents' scopes).
_STATISTICS_KEPT = 64
# Below this share of the entries, a query's candidates are scored apart; above, densely.
_SPARSE = 8


def top_scored(  # noqa: PLR0917 - the retrieval's arguments, as the reference ranker's
    state: RankingState,
    reader: Reader,
    tokens: list[str],
    limit: int,
    scope: Scope,
    parameters: Bm25Parameters,
    allowed: Mask | None = None,
) -> list[tuple[int, float]]:
    """The seqs and BM25 scores of the best ``limit`` entries of ``scope``, best first.

    Only entries with a positive score compete, and (when given) only those
    ``allowed`` holds (a mask by seq); ties keep insertion order.
    """
    if limit == 0:
        return []
    candidates, scores = positive_scores(state, reader, tokens, scope, parameters, allowed)
    return [(int(candidates[n]), score) for n, score in best(scores, limit)]


def positive_scores(  # noqa: PLR0917 - as top_scored
    state: RankingState,
    reader: Reader,
    tokens: list[str],
    scope: Scope,
    parameters: Bm25Parameters,
    allowed: Mask | None = None,
) -> tuple[Ints, Floats]:
    """The seqs (ascending) of ``scope``'s entries with a positive BM25 score, and the scores.

    Only those ``allowed`` holds, when given; the statistics are the scope's whatever it holds.
    """
    size = state.top + 1
    nothing = (np.empty(0, np.int64), np.empty(0, np.float64))
    if size <= 1 or not tokens:
        return nothing
    words = state.words(reader)
    members = state.members(scope, size)
    documents, average = _statistics(state, words, scope, members, size)
    if not documents:
        return nothing
    k1, b = parameters.k1, parameters.b
    all_seqs: list[Ints] = []
    all_scores: list[Floats] = []
    for token, times in bm25.query_weights(tokens).items():
        seqs, tf = words.postings(token)
        competing = np.isfinite(state.half[seqs])  # a live entry
        if members is not None:
            competing &= members.mask[seqs]
        holding = int(np.count_nonzero(competing))  # df: a filter never changes it
        if allowed is not None:
            competing &= allowed[seqs]
        seqs, tf = seqs[competing], tf[competing]
        if not len(seqs):
            continue
        weight = times * bm25.idf(documents, holding)
        dl = words.lengths[seqs].astype(np.float64)
        # The operations of bm25.scores, in its order (no fused multiply-add in numpy).
        norm = k1 * ((1.0 - b) + (b * dl) / average)
        all_seqs.append(seqs)
        all_scores.append(weight * (tf / (tf + norm)))
    if not all_seqs:
        return nothing
    seqs = np.concatenate(all_seqs)
    parts = np.concatenate(all_scores)
    scores: Floats
    if len(seqs) * _SPARSE < size:
        candidates = distinct(seqs, size)
        # bincount adds each bin's weights in input order, from 0.0: as bm25.scores does.
        where = np.searchsorted(candidates, seqs)
        scores = np.asarray(np.bincount(where, parts, len(candidates)), np.float64)
    else:
        dense = np.asarray(np.bincount(seqs, parts, size), np.float64)
        candidates = np.flatnonzero(dense > 0)
        scores = dense[candidates]
    positive = scores > 0
    return candidates[positive].astype(np.int64), scores[positive]


def _statistics(
    state: RankingState, words: WordIndex, scope: Scope, members: Members | None, size: int
) -> tuple[int, float]:
    """N and the average document length over the live entries of ``scope``.

    Kept until the state moves (a new entry, change, block or generation): a
    pass over every entry's length, not worth making at every query.
    """
    key = (state.top, state.change, state.mark, state.generation, scope)
    known = words.statistics.get(key)
    if known is None:
        universe = state.live(size)
        if members is not None:
            universe &= members.mask
        documents = int(np.count_nonzero(universe))
        total = int(words.lengths[:size][universe].sum())
        known = (documents, total / documents if documents else 0.0)
        if len(words.statistics) >= _STATISTICS_KEPT:
            words.statistics.clear()
        words.statistics[key] = known
    return known
