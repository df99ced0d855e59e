"""A ranking with context: own scores plus the neighbours' (:mod:`loopctl_memory.context`).

Over any ranking that can give its plain best and any entry's own score
(:class:`Scorer`): the plain best ``k`` of the view (and of the entries the
filter allows) seed the candidates, with their neighbours; every candidate's
score is then computed exactly from its own and its neighbours' own scores.
An entry left out has at most the ``k``-th own score of the allowed entries
(or 0), and neighbours of at most the ``k``-th of the view (or 0), so it
scores at most ``max(a, 0) + 3 λ max(b, 0)``; while the answer's last score does not beat that,
``k`` grows fourfold. The answer is then the one the plain definition gives
(with the graphs' approximation of the vector rankings, as without context).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loopctl_memory import context
from loopctl_memory.context import Context
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.lexical.arrays import distinct, values_at
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking.snapshot import Snapshot
from loopctl_memory.sql.ranking.streams import Streams
from loopctl_memory.sql.ranking.topk import best

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]
_FIRST = 64  # plain answers that seed the candidates, at least
_WEIGHED_AT_ONCE = 8  # scopes of a view whose weights are measured before ranking


@dataclass(frozen=True, slots=True)
class Scorer:
    """What context asks of a ranking."""

    best: Callable[[int, Mask | None], list[tuple[int, float]]]
    """The plain best ``k`` (seq, own score) among the view's entries (those a mask allows)."""
    own: Callable[[Ints], Floats]
    """The exact own score of each of some ascending seqs of the view (0.0: none)."""
    alone: Callable[[Ints], Mask]
    """Whether each of some ascending seqs competes without context."""
    reaching: Callable[[float], int] | None = None
    """How many of the view's entries score at least a floor on their own (None: unknown)."""

    @classmethod
    def over(cls, seqs: Ints, scores: Floats) -> Scorer:
        """The scorer of a ranking whose every positive own score is known (``bm25``).

        ``seqs``: ascending, the entries with a positive score; every other scores 0.
        """

        def plain_best(limit: int, allowed: Mask | None) -> list[tuple[int, float]]:
            index = np.arange(len(seqs)) if allowed is None else np.flatnonzero(allowed[seqs])
            return [(int(seqs[index[n]]), score) for n, score in best(scores[index], limit)]

        def own(wanted: Ints) -> Floats:
            return values_at(seqs, scores, wanted)

        def reaching(floor: float) -> int:
            return int(np.count_nonzero(scores >= floor))

        return cls(plain_best, own, lambda wanted: own(wanted) > 0, reaching)


@dataclass(frozen=True, slots=True)
class Scored:
    """One answer of a ranking with context."""

    seq: int
    score: float
    own: float
    part: float
    weight: float
    alone: bool = True
    """Whether it competes without context (else by its neighbours' part)."""


Weights = tuple[Callable[[Ints], Floats], float]
"""Each of some seqs' context weight (its scope's), and the heaviest of the view's."""


def weights(snapshot: Snapshot, scope: Scope, chosen: Context) -> Weights | None:
    """The context weights of ``scope``'s streams; None when every one is 0.

    ``snapshot`` is taken with ``Needs.context``: ``"auto"`` measures its
    vectors, or words without. The weights of a view of many scopes are
    measured as its entries are ranked, bounded by the full weight meanwhile.
    """
    state, live, streams = snapshot.state, snapshot.live, snapshot.state.streams
    if chosen != context.AUTO:
        fixed = float(chosen)
        return (lambda seqs: np.full(len(seqs), fixed), fixed) if fixed > 0 else None
    vectors = snapshot.vectors
    embedder_id = 0 if vectors is None else vectors.embedder_id
    keep = None if vectors is None else vectors.present
    reader = snapshot.reader
    known: dict[int, float] = {}

    def weight_of_scope(number: int) -> float:
        found = known.get(number)
        if found is None:
            newest = functools.partial(streams.newest, number, live, context.RECENT, keep)
            stand = (streams.last(number), state.change, embedder_id)
            found = streams.coherence.weight(number, newest, stand, reader, state.texts, vectors)
            known[number] = found
        return found

    wanted = state.scope_ids(scope)
    numbers = streams.scopes() if wanted is None else wanted.tolist()
    heaviest = context.FULL_WEIGHT
    if len(numbers) <= _WEIGHED_AT_ONCE:
        heaviest = max((weight_of_scope(number) for number in numbers), default=0.0)
        if heaviest == 0.0:
            return None

    def weight_of(seqs: Ints) -> Floats:
        numbers, where = np.unique(state.scope_of[seqs], return_inverse=True)
        return np.array([weight_of_scope(int(number)) for number in numbers], np.float64)[where]

    return weight_of, heaviest


def top_scored(
    snapshot: Snapshot,
    scorer: Scorer,
    weights: Weights,
    allowed: Mask | None,
    limit: int,
) -> list[Scored]:
    """The best ``limit`` entries by own score plus context, best first, ties in insertion order.

    ``weights`` as :func:`weights` gives them (from the same snapshot).
    """
    if limit == 0:
        return []
    size, streams, live = snapshot.size, snapshot.state.streams, snapshot.live
    weight_of, heaviest = weights
    k = max(4 * limit, _FIRST)
    while True:
        everyone = scorer.best(k, None)
        chosen = everyone if allowed is None else scorer.best(k, allowed)
        seeds = distinct(
            np.array([seq for seq, _ in everyone] + [seq for seq, _ in chosen], np.int64), size
        )
        around = streams.neighbours(seeds, live)
        candidates = distinct(np.concatenate([seeds, *(seqs[seqs >= 0] for seqs in around)]), size)
        if allowed is not None:
            candidates = candidates[allowed[candidates]]
        found = _scored(streams, live, scorer, weight_of, candidates, limit)
        full = len(everyone) == k
        if not full:
            return found  # every entry that competes alone is a seed: no one else can
        a = chosen[-1][1] if len(chosen) == k else 0.0
        b = everyone[-1][1] if full else 0.0
        # An entry that competes only by its neighbours scores 0 of its own.
        bound = max(a, 0.0) + 3.0 * heaviest * max(b, 0.0)
        if len(found) == limit and found[-1].score > bound:
            return found
        k = _next_k(scorer, k, found[-1].score if len(found) == limit else None, heaviest)


def _next_k(scorer: Scorer, k: int, kth: float | None, heaviest: float) -> int:
    """How many plain answers to seed from next: four times more, or as many as it takes.

    With ``kth`` (the ``limit``-th score with context so far), an entry beyond
    the plain answers cannot beat it once their last own score ``b`` is below
    ``kth / (1 + 3 heaviest)`` (the bound is at most ``b + 3 heaviest b``): where
    the scorer can count the entries at or above that floor, go straight there.
    """
    if kth is None or scorer.reaching is None or kth <= 0:
        return 4 * k
    return max(4 * k, scorer.reaching(kth / (1.0 + 3.0 * heaviest)) + 1)


def _scored(  # noqa: PLR0917 - as top_scored
    streams: Streams,
    live: Mask,
    scorer: Scorer,
    weights: Callable[[Ints], Floats],
    candidates: Ints,
    limit: int,
) -> list[Scored]:
    """The best of ``candidates`` (ascending) by own score plus context."""
    if not len(candidates):
        return []
    around = streams.neighbours(candidates, live)
    needed = distinct(
        np.concatenate([candidates, *(seqs[seqs >= 0] for seqs in around)]), len(live)
    )
    own_needed = scorer.own(needed)

    def own(seqs: Ints) -> Floats:
        found = np.zeros(len(seqs), np.float64)
        present = seqs >= 0
        found[present] = own_needed[np.searchsorted(needed, seqs[present])]
        return found

    weight = weights(candidates)
    mine = own(candidates)
    parts = context.part(weight, *(own(seqs) for seqs in around))
    scores = mine + parts
    alone = scorer.alone(candidates)
    competing = alone | (parts > 0)
    index = np.flatnonzero(competing)
    return [
        Scored(
            int(candidates[index[n]]),
            score,
            float(mine[index[n]]),
            float(parts[index[n]]),
            float(weight[index[n]]),
            bool(alone[index[n]]),
        )
        for n, score in best(scores[index], limit)
    ]
