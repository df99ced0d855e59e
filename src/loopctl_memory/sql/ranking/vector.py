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
view or filter leaves few) with their approximate cosines, within
:data:`~loopctl_memory.sql.ranking.graph.APPROXIMATION` of the exact ones; only
those that bound cannot rule out are read and scored exactly. ``hybrid``
starts from half as many, adds the 64 entries of highest BM25 score, then every
entry whose BM25 score could still beat the answer's last given the graphs'
lowest candidate, and asks the graphs for more while a cosine alone could; it
takes the cosines' range from the graphs' nearest and farthest entries. What
comes back is then the exact answer but for entries the graph search missed
(measured: recall@10 against exact answers in ``benchmarks/RESULTS.md``);
every score is exact.
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
from loopctl_memory.sql.lexical.arrays import values_at
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking import bm25
from loopctl_memory.sql.ranking.graph import APPROXIMATION
from loopctl_memory.sql.ranking.snapshot import Snapshot
from loopctl_memory.sql.ranking.state import Mask
from loopctl_memory.sql.ranking.topk import best, kth_highest
from loopctl_memory.sql.ranking.vectors import VectorIndex, stored_vectors

Floats = npt.NDArray[np.float64]
_FARTHEST = 64  # the graphs' farthest entries asked for, for the cosines' minimum
_LEXICAL = 64  # entries of highest BM25 score a hybrid search scores first
_WIDENINGS = 3


@dataclass(frozen=True, slots=True)
class _Near:
    """Graph-held entries worth scoring: ascending seqs, cosines, and how far those may be off."""

    seqs: Ints
    cosines: Floats
    slack: float
    """0: the cosines are exact (every eligible entry was read); else the graphs' bound."""


@dataclass(slots=True)
class _Ranking:
    """One vector retrieval's vectors, query and universe."""

    snapshot: Snapshot
    vectors: VectorIndex
    query: Vectors
    universe: Mask
    """Live entries of the view with a vector (the statistics' entries)."""
    _held: tuple[Ints, Floats] | None = None

    def held(self) -> tuple[Ints, Floats]:
        """The universe's seqs held in this process (ascending) and their binary32 cosines.

        One pass a retrieval: the cosines' range and every candidate pool take theirs from it.
        """
        if self._held is None:
            seqs = self.vectors.loose_seqs(self.universe)
            rough = self.vectors.rough_cosines(seqs, self.query).astype(np.float64)
            self._held = (seqs, rough)
        return self._held

    def graph_cosines(self, seqs: Ints) -> Floats:
        """The exact cosines of graph-held ``seqs`` (ascending), from their stored vectors."""
        found, rows = stored_vectors(
            self.snapshot.reader, self.vectors.embedder_id, seqs, self.vectors.dims
        )
        if len(found) != len(seqs):  # pragma: no cover - a graph-held entry has its vector
            raise AssertionError("an entry held by a graph has no stored vector")
        return embedding.cosines(rows, self.query)

    def loose_cosines(self, seqs: Ints) -> Floats:
        """The exact cosines of seqs held in this process."""
        return embedding.cosines(self.vectors.vectors_of(seqs), self.query)

    def near(self, eligible: Mask, count: int) -> _Near:
        """The graph-held entries of ``eligible`` worth scoring exactly.

        All of them, read, when few; else about ``count`` the graphs find
        nearest, asking for more in proportion to how few of the graphs'
        entries are eligible, with the graphs' approximate cosines.
        """
        held = self.vectors.graph_count_in(eligible)
        if held > max(self.snapshot.tuning.vector_exact, count):
            want = math.ceil(count * self.vectors.graph_count() / held)
            while 2 * want < held:
                seqs, cosines = self.vectors.search(self.query, want, eligible)
                if len(seqs) >= count or 8 * want >= held:
                    order = np.argsort(seqs[:count])
                    return _Near(seqs[:count][order], cosines[:count][order], APPROXIMATION)
                want *= 4
        every = self.vectors.graph_seqs(eligible)
        return _Near(every, self.graph_cosines(every), 0.0)


def top_scored(  # noqa: PLR0917 - the retrieval's arguments
    snapshot: Snapshot,
    query: Vectors,
    limit: int,
    scope: Scope,
    allowed: Mask | None = None,
    lexical: tuple[list[str], Bm25Parameters] | None = None,
) -> list[tuple[int, float]]:
    """The seqs and scores of the best ``limit`` entries of ``scope``, best first.

    ``lexical`` (the query's BM25 tokens and parameters) makes it ``hybrid``;
    without it, ``vector``. Ties keep insertion order.
    """
    if limit == 0 or snapshot.size <= 1:
        return []
    ranking = _ranking(snapshot, query, scope)
    eligible = ranking.universe if allowed is None else ranking.universe & allowed[: snapshot.size]
    count = max(snapshot.tuning.vector_candidates, limit)
    if lexical is None:
        return _vector_best(ranking, eligible, count, limit)
    count = max(count // 2, limit)  # hybrid widens when its bound needs more
    near = ranking.near(ranking.universe, count)
    span = _span(ranking, near)
    if allowed is not None:
        near = ranking.near(eligible, count)
    return _hybrid_best(ranking, (eligible, allowed), near, span, limit, lexical, scope)


def _ranking(snapshot: Snapshot, query: Vectors, scope: Scope) -> _Ranking:
    vectors = snapshot.vector_index()
    universe = snapshot.live & vectors.present[: snapshot.size]
    members = snapshot.members(scope)
    if members is not None:
        universe &= members.mask
    return _Ranking(snapshot, vectors, query, universe)


@dataclass(frozen=True, slots=True)
class _Pool:
    """The entries a retrieval scores, ascending by seq, with their cosines' estimates."""

    labels: Ints
    cosines: Floats
    slack: Floats
    """How far each cosine may be from the exact one (0: exact)."""
    loose: Mask
    """Held in this process: the exact cosine from memory (else from the stored vector)."""
    has_vector: Mask

    @classmethod
    def of(cls, ranking: _Ranking, eligible: Mask, near: _Near, others: Ints) -> _Pool:
        """Every eligible entry held in this process, ``near``, and ``others`` (no vector)."""
        seqs, cosines = ranking.held()
        keep = eligible[seqs]
        loose, rough = (seqs, cosines) if keep.all() else (seqs[keep], cosines[keep])
        bound = embedding.error_bound(len(ranking.query))
        if not len(near.seqs) and not len(others):  # no graph yet: already in order
            every = np.ones(len(loose), np.bool_)
            return cls(loose, rough, np.full(len(loose), bound), every, every)
        labels = np.concatenate([loose, near.seqs, others])
        order = np.argsort(labels, kind="stable")
        sizes = (len(loose), len(near.seqs), len(others))
        return cls(
            labels[order],
            np.concatenate([rough, near.cosines, np.zeros(sizes[2])])[order],
            np.concatenate(
                [np.full(sizes[0], bound), np.full(sizes[1], near.slack), np.zeros(sizes[2])]
            )[order],
            np.repeat([True, False, False], sizes)[order],
            np.repeat([True, True, False], sizes)[order],
        )

    def exact(self, ranking: _Ranking, picked: Ints) -> Floats:
        """The exact cosines of the positions ``picked`` (ascending)."""
        found = self.cosines[picked].copy()
        mine = self.loose[picked]
        found[mine] = ranking.loose_cosines(self.labels[picked[mine]])
        read = ~mine & (self.slack[picked] > 0)
        found[read] = ranking.graph_cosines(self.labels[picked[read]])
        return found


def _vector_best(
    ranking: _Ranking, eligible: Mask, count: int, limit: int
) -> list[tuple[int, float]]:
    pool = _Pool.of(ranking, eligible, ranking.near(eligible, count), np.empty(0, np.int64))
    return _best_exactly(
        pool.labels, pool.cosines, pool.slack, lambda picked: pool.exact(ranking, picked), limit
    )


def _hybrid_best(  # noqa: PLR0917 - the retrieval's parts
    ranking: _Ranking,
    masks: tuple[Mask, Mask | None],
    near: _Near,
    span: tuple[float, float],
    limit: int,
    lexical: tuple[list[str], Bm25Parameters],
    scope: Scope,
) -> list[tuple[int, float]]:
    tokens, parameters = lexical
    eligible, allowed = masks  # eligible: allowed, in the universe
    snapshot = ranking.snapshot
    matched, lexical_scores = bm25.positive_scores(snapshot, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    by_seq = np.zeros(snapshot.size, np.float64)
    by_seq[matched] = lexical_scores
    # Matched entries without a vector (pending) compete by their BM25 part alone.
    pending = matched[~ranking.universe[matched]]
    if allowed is not None:
        pending = pending[allowed[pending]]
    low, high = span
    scale = fusion.COSINE_WEIGHT / (high - low) if high > low else 0.0
    held, held_scores = _held_matched(ranking, eligible, matched, lexical_scores)
    count = len(near.seqs)
    first = max(_LEXICAL, 4 * limit)
    chosen = (
        held if len(held) <= first else np.sort(held[np.argpartition(-held_scores, first)[:first]])
    )
    for widening in range(_WIDENINGS + 1):
        extra = np.setdiff1d(chosen, near.seqs, assume_unique=True)
        rough = ranking.vectors.graph_cosines(extra, ranking.query)
        pool = _Pool.of(
            ranking, eligible, _joined(near, _Near(extra, rough, APPROXIMATION)), pending
        )
        bm = by_seq[pool.labels]
        estimate = fusion.fuse(bm, pool.cosines, pool.has_vector, top, span)

        def exact_of(picked: Ints, pool: _Pool = pool, bm: Floats = bm) -> Floats:
            cosines = pool.exact(ranking, picked)
            return fusion.fuse(bm[picked], cosines, pool.has_vector[picked], top, span)

        found = _best_exactly(pool.labels, estimate, pool.slack * scale, exact_of, limit)
        if near.slack == 0 or len(found) < limit:
            return found
        # An entry left out has a cosine of at most the graphs' lowest candidate's
        # (within their bound): with no BM25 score, it cannot beat the last one kept
        # unless that part alone does (then the graphs give more); with one, only if
        # its BM25 score is high enough, and every such entry is scored.
        cosine = float(near.cosines.min()) + near.slack
        cosine_part = fusion.fuse(np.zeros(1), np.array([cosine]), np.ones(1, np.bool_), top, span)[
            0
        ]
        last = found[-1][1]
        if cosine_part >= last and widening < _WIDENINGS:
            count *= 4
            near = ranking.near(eligible, count)
            continue
        if top <= 0:
            return found
        needed = (last - cosine_part) / fusion.BM25_WEIGHT * top * (1 - 1e-9)
        missing = np.setdiff1d(held[held_scores >= needed], np.union1d(chosen, near.seqs))
        if not len(missing):
            return found
        chosen = np.union1d(chosen, missing)
    return found


def _held_matched(
    ranking: _Ranking, eligible: Mask, matched: Ints, scores: Floats
) -> tuple[Ints, Floats]:
    """The matched entries (ascending) of ``eligible`` a graph holds, and their BM25 scores."""
    holder = ranking.vectors.holder
    inside = matched < len(holder)
    keep = inside.copy()
    keep[inside] = (holder[matched[inside]] >= 0) & eligible[matched[inside]]
    return matched[keep], scores[keep]


def _joined(first: _Near, second: _Near) -> _Near:
    """Two disjoint sets of graph-held entries as one (the bound of the rougher)."""
    seqs = np.concatenate([first.seqs, second.seqs])
    order = np.argsort(seqs, kind="stable")
    cosines = np.concatenate([first.cosines, second.cosines])[order]
    return _Near(seqs[order], cosines, max(first.slack, second.slack))


def _span(ranking: _Ranking, near: _Near) -> tuple[float, float]:
    """The view's smallest and largest cosine.

    Exact; but of the entries in graphs, only the nearest and farthest the
    graphs find count (``near``: the view's graph-held entries near the query).
    """
    bound = embedding.error_bound(len(ranking.query))
    lows: list[float] = []
    highs: list[float] = []
    loose, rough = ranking.held()
    if len(loose):
        low, high = _exact_range(rough, bound, lambda rows: ranking.loose_cosines(loose[rows]))
        lows.append(low)
        highs.append(high)
    if len(near.seqs) and near.slack == 0:
        lows.append(float(near.cosines.min()))
        highs.append(float(near.cosines.max()))
    elif len(near.seqs):
        top = near.seqs[near.cosines >= float(near.cosines.max()) - 2 * near.slack]
        highs.append(float(ranking.graph_cosines(top).max()))
        seqs, cosines = ranking.vectors.search(-ranking.query, _FARTHEST, ranking.universe)
        cosines = -cosines
        bottom = np.sort(seqs[cosines <= float(cosines.min()) + 2 * near.slack])
        lows.append(float(ranking.graph_cosines(bottom).min()))
    if not lows:
        return 0.0, 0.0
    return min(lows), max(highs)


def _best_exactly(
    labels: Ints,
    estimate: Floats,
    slack: Floats,
    exact_of: Callable[[Ints], Floats],
    limit: int,
) -> list[tuple[int, float]]:
    """The best ``limit`` of ``labels`` (ascending seqs) by exact score, ties in their order.

    ``estimate``: each one's score within its ``slack`` of the exact one, which
    ``exact_of`` gives for the positions asked. Only the positions whose
    estimate plus slack reaches the ``limit``-th best estimate less slack can be
    among the best, so only those are scored exactly.
    """
    if not len(labels):
        return []
    near = np.arange(len(labels))
    if len(labels) > limit:
        lowest = estimate - slack
        kth = float(kth_highest(lowest, limit))
        near = np.flatnonzero(estimate + slack >= kth)
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


def hybrid_parts(
    snapshot: Snapshot,
    query: Vectors,
    seqs: list[int],
    scope: Scope,
    lexical: tuple[list[str], Bm25Parameters],
) -> list[tuple[float, float | None, float, tuple[float, float]]]:
    """Each seq's (BM25 score, cosine or None, the view's BM25 maximum, its cosine range).

    What :func:`top_scored` fused for ``hybrid``, computed again for the entries
    it returned (``retrieve_explained``: a rare call, kept plain).
    """
    ranking = _ranking(snapshot, query, scope)
    count = max(snapshot.tuning.vector_candidates, len(seqs))
    span = _span(ranking, ranking.near(ranking.universe, count))
    tokens, parameters = lexical
    matched, lexical_scores = bm25.positive_scores(snapshot, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    by_seq = dict(zip(matched.tolist(), lexical_scores.tolist(), strict=True))
    wanted = np.zeros(len(ranking.universe), np.bool_)
    wanted[[seq for seq in seqs if seq < len(wanted)]] = True
    wanted &= ranking.universe
    loose = ranking.vectors.loose_seqs(wanted)
    cosine_of = dict(zip(loose.tolist(), ranking.loose_cosines(loose).tolist(), strict=True))
    held = np.setdiff1d(np.flatnonzero(wanted), loose)
    cosine_of.update(zip(held.tolist(), ranking.graph_cosines(held).tolist(), strict=True))
    return [(float(by_seq.get(seq, 0.0)), cosine_of.get(seq), top, span) for seq in seqs]


def own_scores(
    snapshot: Snapshot,
    query: Vectors,
    scope: Scope,
    lexical: tuple[list[str], Bm25Parameters] | None = None,
) -> tuple[Callable[[Ints], Floats], Callable[[Ints], Mask]]:
    """Any entries' exact own scores in ``vector`` (or, with ``lexical``, ``hybrid``), for context.

    The first function gives the scores of some ascending seqs of the view
    (0.0 where an entry has neither a vector nor, in hybrid, a BM25 score);
    the second whether each competes without context. Hybrid's statistics are
    those :func:`top_scored` takes.
    """
    ranking = _ranking(snapshot, query, scope)
    universe = ranking.universe

    def has(seqs: Ints) -> Mask:
        has_vector = np.zeros(len(seqs), np.bool_)
        inside = seqs < len(universe)
        has_vector[inside] = universe[seqs[inside]]
        return has_vector

    def cosines(seqs: Ints) -> tuple[Floats, Mask]:
        has_vector = has(seqs)
        found = np.zeros(len(seqs), np.float64)
        wanted = np.zeros(len(universe), np.bool_)
        wanted[seqs[has_vector]] = True
        loose = ranking.vectors.loose_seqs(wanted)
        found[np.searchsorted(seqs, loose)] = ranking.loose_cosines(loose)
        held = np.setdiff1d(seqs[has_vector], loose, assume_unique=True)
        found[np.searchsorted(seqs, held)] = ranking.graph_cosines(held)
        return found, has_vector

    if lexical is None:
        return (lambda seqs: cosines(seqs)[0]), has
    tokens, parameters = lexical
    matched, lexical_scores = bm25.positive_scores(snapshot, tokens, scope, parameters)
    top = float(lexical_scores.max()) if len(lexical_scores) else 0.0
    count = max(snapshot.tuning.vector_candidates // 2, 1)
    span = _span(ranking, ranking.near(universe, count))

    def fused(seqs: Ints) -> Floats:
        found, has_vector = cosines(seqs)
        return fusion.fuse(values_at(matched, lexical_scores, seqs), found, has_vector, top, span)

    def alone(seqs: Ints) -> Mask:
        return fusion.competing(values_at(matched, lexical_scores, seqs), has(seqs))

    return fused, alone
