"""The vector and hybrid rankings over the ranking state: cosine, and its fusion with BM25.

The query's vector is made before the read (never holding a transaction over
the embedder); the scores are :func:`loopctl_memory.embedding.cosines` over the
vectors of the view's live entries that have one, and for ``hybrid``
:func:`loopctl_memory.fusion.hybrid_scores` of those and BM25's positive
scores. Statistics (BM25's, the fusion's maximum and range) are the view's,
whatever the filter; the filter only removes entries from competing.
"""

from __future__ import annotations

import numpy as np

from loopctl_memory import embedding, fusion
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.embedding import Vectors
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking import bm25
from loopctl_memory.sql.ranking.state import Mask, RankingState
from loopctl_memory.sql.ranking.topk import best


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
    vectors = state.vectors(reader, embedder_id, len(query))
    universe = state.live(size) & vectors.present[:size]
    members = state.members(scope, size)
    if members is not None:
        universe &= members.mask
    seqs = np.flatnonzero(universe)
    cosines = embedding.cosines(vectors.matrix[seqs], query)
    if lexical is None:
        keep = np.ones(len(seqs), np.bool_) if allowed is None else allowed[seqs]
        return [(int(seqs[keep][n]), score) for n, score in best(cosines[keep], limit)]
    tokens, parameters = lexical
    matched, scores = bm25.positive_scores(state, reader, tokens, scope, parameters)
    every = np.union1d(seqs, matched)
    lexical_scores = np.zeros(len(every), np.float64)
    lexical_scores[np.searchsorted(every, matched)] = scores
    every_cosine = np.zeros(len(every), np.float64)
    has_vector = np.zeros(len(every), np.bool_)
    where = np.searchsorted(every, seqs)
    every_cosine[where] = cosines
    has_vector[where] = True
    fused = fusion.hybrid_scores(lexical_scores, every_cosine, has_vector)
    keep = fusion.competing(lexical_scores, has_vector)
    if allowed is not None:
        keep &= allowed[every]
    chosen, fused = every[keep], fused[keep]
    return [(int(chosen[n]), score) for n, score in best(fused, limit)]
