"""The vector and hybrid rankings over the ranking state: cosine, and its fusion with BM25.

The query's vector is made before the read (never holding a transaction over
the embedder). Scores are :func:`loopctl_memory.embedding.cosines` (exact, as
``InMemoryStore`` computes them) and, for ``hybrid``,
:func:`loopctl_memory.fusion.fuse` of those and BM25's positive scores;
statistics (BM25's, the cosines' range) are the view's, whatever the filter,
which only removes entries from competing.

The vectors a process holds itself (:mod:`~loopctl_memory.sql.ranking.vectors`:
every one, in a store with few) are scored in one binary32 pass (BLAS) within
a known bound (:func:`loopctl_memory.embedding.error_bound`), and only the
entries the bound cannot rule out are scored exactly: their answer is the one
exact scores of every entry give.

The vectors in graph files are approximate twice (the graph, bytes per
dimension). A view or filter with few of them (``Tuning.vector_exact``) has
them all read from the database and scored exactly. Otherwise the graphs give
``Tuning.vector_candidates`` entries near the query (more in proportion when a
view or filter leaves few), which are read and scored exactly; ``hybrid``
adds the entries of highest BM25 score and widens both until no entry left
out could beat the answer's last by its bounds, and takes the cosines' range
from the graphs' nearest and farthest entries. What comes back is then the
exact answer but for entries the graph search missed (measured: recall@10
against exact cosine in ``benchmarks/RESULTS.md``); every score is exact.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

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
from loopctl_memory.sql.ranking.vectors import VectorIndex, stored_vectors
from loopctl_memory.sql.segments import Ints

Floats = npt.NDArray[np.float64]
_FARTHEST = 64  # candidates of the graphs' farthest entries, for the cosines' minimum
_WIDENINGS = 3


@dataclass(slots=True)
class _Ranking:
    """One vector retrieval's vectors, query and universe."""

    state: RankingState
    reader: Reader
    vectors: VectorIndex
    query: Vectors
    universe: Mask
    """Live entries of the view with a vector (the statistics' entries)."""

    def exact(self, seqs: Ints) -> tuple[Ints, Floats]:
        """The seqs of ``seqs`` (ascending) whose vectors the graphs hold, with exact cosines."""
        found, rows = stored_vectors(self.reader, self.vectors.embedder_id, seqs, self.vectors.dims)
        return found, embedding.cosines(rows, self.query)

    def loose_cosine(self, seqs: Ints) -> Floats:
        """The exact cosines of seqs held in this process."""
        return embedding.cosines(self.vectors.vectors_of(seqs), self.query)

    def graph_candidates(self, eligible: Mask, count: int) -> tuple[Ints, bool]:
        """The graph-held seqs of ``eligible`` worth scoring exactly, and whether that is all.

        All of them when few; else about ``count`` the graphs find nearest, asking
        for more in proportion to how few of the graphs' entries are eligible.
        """
        held = self.vectors.graph_seqs(eligible)
        tuning = self.state.tuning
        if len(held) <= max(tuning.vector_exact, count):
            return held, True
        want = math.ceil(count * self.vectors.graph_count() / len(held))
        while 2 * want < len(held):
            found = self.vectors.search(self.query, want, eligible)
            if len(found) >= min(count, len(held)) or 8 * want >= len(held):
                return np.sort(found[:count]), False
            want *= 4
        return held, True


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
    if limit == 0 or state.top < 1:
        return []
    ranking = _ranking(state, reader, query, scope, embedder_id)
    eligible = ranking.universe if allowed is None else ranking.universe & allowed[: state.top + 1]
    if lexical is None:
        return _vector_best(ranking, eligible, limit)
    return _hybrid_best(ranking, eligible, allowed, limit, lexical, scope)


def _ranking(
    state: RankingState, reader: Reader, query: Vectors, scope: Scope, embedder_id: int
) -> _Ranking:
    size = state.top + 1
    vectors = state.vectors(reader, embedder_id, len(query))
    universe = state.live(size) & vectors.present[:size]
    members = state.members(scope, size)
    if members is not None:
        universe &= members.mask
    return _Ranking(state, reader, vectors, query, universe)


def _vector_best(ranking: _Ranking, eligible: Mask, limit: int) -> list[tuple[int, float]]:
    loose = ranking.vectors.loose_seqs(eligible)
    rough = ranking.vectors.rough_cosines(loose, ranking.query).astype(np.float64)
    found = _best_exactly(
        loose,
        rough,
        embedding.error_bound(len(ranking.query)),
        lambda picked: ranking.loose_cosine(loose[picked]),
        limit,
    )
    count = max(ranking.state.tuning.vector_candidates, limit)
    candidates, _ = ranking.graph_candidates(eligible, count)
    if len(candidates):
        seqs, cosines = ranking.exact(candidates)
        found += [(int(seqs[n]), score) for n, score in best(cosines, limit)]
    found.sort(key=lambda pair: (-pair[1], pair[0]))
    return found[:limit]


def _hybrid_best(  # noqa: PLR0917 - the retrieval's parts
    ranking: _Ranking,
    eligible: Mask,
    allowed: Mask | None,
    limit: int,
    lexical: tuple[list[str], Bm25Parameters],
    scope: Scope,
) -> list[tuple[int, float]]:
    tokens, parameters = lexical
    state = ranking.state
    matched, lexical_scores = bm25.positive_scores(state, ranking.reader, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    span = _span(ranking)
    low, high = span
    by_seq = np.zeros(state.top + 1, np.float64)
    by_seq[matched] = lexical_scores
    # Matched entries without a vector (pending) compete by their BM25 part alone.
    pending = matched[~ranking.universe[matched]]
    if allowed is not None:
        pending = pending[allowed[pending]]
    bound = embedding.error_bound(len(ranking.query))
    slack = fusion.COSINE_WEIGHT * bound / (high - low) if high > low else 0.0
    count = max(state.tuning.vector_candidates, limit)
    lexical_count = count
    while True:
        candidates, complete = ranking.graph_candidates(eligible, count)
        lexical_held, lexical_floor = _best_lexical(
            ranking, eligible, matched, lexical_scores, lexical_count
        )
        graph_seqs, graph_cosines = ranking.exact(np.union1d(candidates, lexical_held))
        loose = ranking.vectors.loose_seqs(eligible)
        rough = ranking.vectors.rough_cosines(loose, ranking.query).astype(np.float64)
        labels = np.concatenate([loose, graph_seqs, pending])
        cosines = np.concatenate([rough, graph_cosines, np.zeros(len(pending))])
        has_vector = np.concatenate(
            [np.ones(len(loose) + len(graph_seqs), np.bool_), np.zeros(len(pending), np.bool_)]
        )
        order = np.argsort(labels, kind="stable")
        labels, cosines, has_vector = labels[order], cosines[order], has_vector[order]
        found = _fused_best(
            ranking,
            _Candidates(labels, cosines, has_vector, np.isin(labels, loose), by_seq[labels]),
            (top, span, slack),
            limit,
        )
        if complete or len(found) < limit:
            return found
        # No entry left out can beat the last one kept: its BM25 score is at most the
        # floor and its cosine at most the lowest of the graphs' candidates.
        lowest = (
            float(graph_cosines[np.isin(graph_seqs, candidates)].min()) if len(candidates) else high
        )
        ceiling = fusion.fuse(
            np.array([lexical_floor]), np.array([lowest]), np.array([True]), top, span
        )[0]
        if found[-1][1] >= ceiling or count >= 4**_WIDENINGS * state.tuning.vector_candidates:
            return found
        count *= 4
        lexical_count *= 4


@dataclass(frozen=True, slots=True)
class _Candidates:
    """The entries a hybrid retrieval scores, ascending by seq."""

    labels: Ints
    cosines: Floats
    """Exact, but rough (binary32, within the error bound) where held in this process."""
    has_vector: Mask
    loose: Mask
    """Held in this process (its cosine rough)."""
    bm: Floats


def _fused_best(
    ranking: _Ranking,
    candidates: _Candidates,
    fusing: tuple[float, tuple[float, float], float],
    limit: int,
) -> list[tuple[int, float]]:
    """The best ``limit`` candidates by exact hybrid score (``fusing``: BM25 top, span, slack)."""
    top, span, slack = fusing
    c = candidates
    estimate = fusion.fuse(c.bm, c.cosines, c.has_vector, top, span)

    def exact_of(picked: Ints) -> Floats:
        exact = c.cosines[picked].copy()
        mine = c.loose[picked]
        exact[mine] = ranking.loose_cosine(c.labels[picked[mine]])
        return fusion.fuse(c.bm[picked], exact, c.has_vector[picked], top, span)

    return _best_exactly(c.labels, estimate, slack, exact_of, limit)


def _best_lexical(
    ranking: _Ranking, eligible: Mask, matched: Ints, scores: Floats, count: int
) -> tuple[Ints, float]:
    """The ``count`` graph-held eligible seqs of highest BM25 score, and the highest left out."""
    holder = ranking.vectors.holder
    inside = matched < len(holder)
    keep = inside.copy()
    keep[inside] = (holder[matched[inside]] >= 0) & eligible[matched[inside]]
    seqs, held_scores = matched[keep], scores[keep]
    if len(seqs) <= count:
        return seqs, 0.0
    cut = np.argpartition(-held_scores, count)
    return np.sort(seqs[cut[:count]]), float(held_scores[cut[count:]].max())


def _span(ranking: _Ranking) -> tuple[float, float]:
    """The view's exact smallest and largest cosine (the graphs': of the entries they find)."""
    loose = ranking.vectors.loose_seqs(ranking.universe)
    rough = ranking.vectors.rough_cosines(loose, ranking.query).astype(np.float64)
    lows: list[float] = []
    highs: list[float] = []
    if len(loose):
        low, high = _exact_range(
            rough,
            embedding.error_bound(len(ranking.query)),
            lambda rows: ranking.loose_cosine(loose[rows]),
        )
        lows.append(low)
        highs.append(high)
    tuning = ranking.state.tuning
    held = ranking.vectors.graph_seqs(ranking.universe)
    if len(held) and len(held) <= tuning.vector_exact:
        _, cosines = ranking.exact(held)
        lows.append(float(cosines.min()))
        highs.append(float(cosines.max()))
    elif len(held):
        nearest, _ = ranking.graph_candidates(ranking.universe, tuning.vector_candidates)
        farthest = ranking.vectors.search(-ranking.query, _FARTHEST, ranking.universe)
        _, cosines = ranking.exact(np.union1d(nearest, farthest))
        lows.append(float(cosines.min()))
        highs.append(float(cosines.max()))
    if not lows:
        return 0.0, 0.0
    return min(lows), max(highs)


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

    What :func:`top_scored` fused for ``hybrid``, computed again for the entries
    it returned (``retrieve_explained``: a rare call, kept plain).
    """
    ranking = _ranking(state, reader, query, scope, embedder_id)
    span = _span(ranking)
    tokens, parameters = lexical
    matched, lexical_scores = bm25.positive_scores(state, reader, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    by_seq = dict(zip(matched.tolist(), lexical_scores.tolist(), strict=True))
    wanted = np.zeros(len(ranking.universe), np.bool_)
    wanted[[seq for seq in seqs if seq < len(wanted)]] = True
    wanted &= ranking.universe
    loose = ranking.vectors.loose_seqs(wanted)
    cosine_of = dict(zip(loose.tolist(), ranking.loose_cosine(loose).tolist(), strict=True))
    graph_seqs, graph_cosines = ranking.exact(np.setdiff1d(np.flatnonzero(wanted), loose))
    cosine_of.update(zip(graph_seqs.tolist(), graph_cosines.tolist(), strict=True))
    return [(float(by_seq.get(seq, 0.0)), cosine_of.get(seq), top, span) for seq in seqs]
