"""The vector and hybrid rankings over the ranking state: cosine, and its fusion with BM25.

The query's vector is made before the read (never holding a transaction over
the embedder). Scores are :func:`loopctl_memory.embedding.cosines` (exact, as
``InMemoryStore`` computes them) and, for ``hybrid``,
:func:`loopctl_memory.fusion.fuse` of those and BM25's positive scores;
statistics (BM25's, the cosines' range) are the view's, whatever the filter,
which only removes entries from competing.

Scoring every entry exactly would read the vectors again in binary64, so one
binary32 pass (BLAS) scores them all within a known bound
(:func:`loopctl_memory.embedding.error_bound`), and only the entries the bound
cannot rule out (near the k-th best, or near the range's ends) are scored
exactly: the answer is the one exact scores of every entry give.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from loopctl_memory import embedding, fusion
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.embedding import Vectors
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking import bm25
from loopctl_memory.sql.ranking.state import Mask, RankingState
from loopctl_memory.sql.ranking.topk import best
from loopctl_memory.sql.ranking.vectors import VectorIndex
from loopctl_memory.sql.segments import Ints

Floats = npt.NDArray[np.float64]


def top_scored(  # noqa: PLR0917 - the retrieval's arguments
    state: RankingState,
    reader: Reader,
    query: Vectors,
    limit: int,
    scope: Scope,
    embedder_id: int,
    allowed: Mask | None = None,
    lexical: tuple[list[str], Bm25Parameters] | None = None,
) -> list[tuple[int, float]]:
    """The seqs and scores of the best ``limit`` entries of ``scope``, best first.

    ``lexical`` (the query's BM25 tokens and parameters) makes it ``hybrid``;
    without it, ``vector``. Ties keep insertion order.
    """
    size = state.top + 1
    if limit == 0 or size <= 1:
        return []
    vectors, universe = _ranked(state, reader, len(query), scope, embedder_id)
    seqs = np.flatnonzero(universe)
    rough = embedding.approximate_cosines(vectors.matrix[:size], query)[seqs].astype(np.float64)
    bound = embedding.error_bound(len(query))

    def exact(rows: Ints) -> Floats:
        return embedding.cosines(vectors.matrix[seqs[rows]], query)

    if lexical is None:
        rows = np.arange(len(seqs)) if allowed is None else np.flatnonzero(allowed[seqs])
        return _best_exactly(
            seqs[rows], rough[rows], bound, lambda picked: exact(rows[picked]), limit
        )
    tokens, parameters = lexical
    matched, lexical_scores = bm25.positive_scores(state, reader, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    span = _exact_range(rough, bound, exact)
    # Every entry with a vector competes, and the matched ones without (pending): by seq.
    by_seq = np.zeros(size, np.float64)
    by_seq[matched] = lexical_scores
    pending = matched[~universe[matched]]
    if len(pending):
        every = np.union1d(seqs, pending)
        has_vector = universe[every]
        row_of = np.searchsorted(seqs, every)  # the rough row of those with a vector
    else:
        every, has_vector, row_of = seqs, np.ones(len(seqs), np.bool_), np.arange(len(seqs))
    bm = by_seq[every]
    candidates = np.arange(len(every)) if allowed is None else np.flatnonzero(allowed[every])

    def fused(picked: Ints, cosine_of: Callable[[Ints], Floats]) -> Floats:
        chosen = candidates[picked]
        cosines = np.zeros(len(chosen), np.float64)
        vectored = has_vector[chosen]
        cosines[vectored] = cosine_of(row_of[chosen[vectored]])
        return fusion.fuse(bm[chosen], cosines, vectored, top, span)

    if allowed is None and not len(pending):  # the usual case: no gathers
        estimate = fusion.fuse(bm, rough, has_vector, top, span)
    else:
        estimate = fused(np.arange(len(candidates)), lambda rows: rough[rows])
    low, high = span
    slack = fusion.COSINE_WEIGHT * bound / (high - low) if high > low else 0.0
    return _best_exactly(
        every[candidates], estimate, slack, lambda picked: fused(picked, exact), limit
    )


def _ranked(
    state: RankingState, reader: Reader, dims: int, scope: Scope, embedder_id: int
) -> tuple[VectorIndex, Mask]:
    """The embedder's vectors, and which seqs rank: live entries of ``scope`` with a vector."""
    size = state.top + 1
    vectors = state.vectors(reader, embedder_id, dims)
    universe = state.live(size) & vectors.present[:size]
    members = state.members(scope, size)
    if members is not None:
        universe &= members.mask
    return vectors, universe


def _best_exactly(
    labels: Ints,
    estimate: Floats,
    slack: float,
    exact_of: Callable[[Ints], Floats],
    limit: int,
) -> list[tuple[int, float]]:
    """The best ``limit`` of ``labels`` (ascending seqs) by exact score, ties in their order.

    ``estimate``: each one's score within ``slack`` of the exact one, which
    ``exact_of`` gives for the positions asked. Only the positions whose
    estimate is within twice ``slack`` of the k-th best estimate can be among
    the best, so only those are scored exactly.
    """
    if not len(labels):
        return []
    near = np.arange(len(labels))
    if len(labels) > limit:
        kth = float(np.partition(estimate, len(estimate) - limit)[len(estimate) - limit])
        near = np.flatnonzero(estimate >= kth - 2 * slack)
    scores = exact_of(near)
    return [(int(labels[near[n]]), score) for n, score in best(scores, limit)]


def _exact_range(
    rough: Floats, bound: float, exact: Callable[[Ints], Floats]
) -> tuple[float, float]:
    """The exact smallest and largest cosine, from the rough ones and their bound."""
    if not len(rough):
        return 0.0, 0.0
    lowest = np.flatnonzero(rough <= float(rough.min()) + 2 * bound)
    highest = np.flatnonzero(rough >= float(rough.max()) - 2 * bound)
    return float(exact(lowest).min()), float(exact(highest).max())


def hybrid_parts(  # noqa: PLR0917 - the retrieval's arguments
    state: RankingState,
    reader: Reader,
    query: Vectors,
    seqs: list[int],
    scope: Scope,
    embedder_id: int,
    lexical: tuple[list[str], Bm25Parameters],
) -> list[tuple[float, float | None, float, tuple[float, float]]]:
    """Each seq's (BM25 score, cosine or None, the view's BM25 maximum, its cosine range).

    What :func:`top_scored` fused for ``hybrid``, computed again exactly for the
    entries it returned (``retrieve_explained``: a rare call, kept plain).
    """
    size = state.top + 1
    vectors, universe = _ranked(state, reader, len(query), scope, embedder_id)
    every = embedding.cosines(vectors.matrix[np.flatnonzero(universe)], query)
    span = (float(every.min()), float(every.max())) if len(every) else (0.0, 0.0)
    tokens, parameters = lexical
    matched, lexical_scores = bm25.positive_scores(state, reader, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    by_seq = dict(zip(matched.tolist(), lexical_scores.tolist(), strict=True))
    parts: list[tuple[float, float | None, float, tuple[float, float]]] = []
    for seq in seqs:
        cosine = None
        if seq < size and universe[seq]:
            cosine = float(embedding.cosines(vectors.matrix[[seq]], query)[0])
        parts.append((float(by_seq.get(seq, 0.0)), cosine, top, span))
    return parts
