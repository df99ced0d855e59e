"""Which ranker answers a retrieval: the ranking named, the filter applied, in one read.

Every ranker scores the entries of a scope from the ranking state and hands
the best to :mod:`~loopctl_memory.sql.ranking.topk`; a filter becomes the
ascending seqs of the entries it passes, read in the same transaction, and
only narrows who competes (never BM25's statistics).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.bm25_tokens import query_tokens
from loopctl_memory.context import Context
from loopctl_memory.embedding import Vectors
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.lifecycle import access_matches, check_now, stamp_accessed
from loopctl_memory.rankings import EMBEDDING_RANKINGS, Explanation, explain_single
from loopctl_memory.scopes import Scope
from loopctl_memory.scoring import parse_query
from loopctl_memory.sql.backend import Reader, Statement
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.history import record as history_record
from loopctl_memory.sql.ranking import bm25, context, reference, vector
from loopctl_memory.sql.ranking.context import Scored
from loopctl_memory.sql.ranking.snapshot import Needs, Snapshot, take
from loopctl_memory.sql.ranking.state import Mask, RankingState
from loopctl_memory.sql.rows import entry_rows, filtering


@dataclass(frozen=True, slots=True)
class Request:
    """One retrieval's checked arguments: what to rank, how, and among which entries."""

    query: str
    limit: int
    scope: Scope
    ranking: str
    parameters: Bm25Parameters
    passes: MemoryFilter | None
    matched_only: bool
    query_vector: Vectors | None = None
    """The query's vector, made before the read, for the vector and hybrid rankings."""
    embedder_id: int = 0
    dims: int = 0
    """The store's embedder's dimensions (0: none): its vectors measure ``"auto"`` context."""
    context: Context = 0.0
    """The context weight, or ``"auto"`` (:mod:`loopctl_memory.context`)."""
    explain: bool = False
    """Also each score's parts (``retrieve_explained``)."""
    clock: Callable[[], int] | None = None
    """The store's clock (microseconds): entries expired by its now compete for nothing
    (None: every entry competes)."""


async def retrieve_explained(
    unit: UnitOfWork,
    state: RankingState,
    lock: asyncio.Lock,
    request: Request,
    *,
    clock: Callable[[], datetime] | None,
    history: bool = False,
) -> list[tuple[MemoryEntry, Explanation]]:
    """The best entries for ``request``, each score with its parts, in one read transaction.

    The parts are only the score unless ``request.explain`` asks. ``state`` is
    brought up to date in that transaction (:func:`take`), holding ``lock``
    (one retrieval at a time moves the copy forward). With a ``clock``, an
    access of each returned entry the query matched is recorded after the
    read, at its time (and, with ``history``, in each one's history).
    """
    Answer = tuple[list[int], list[MemoryEntry], list[Explanation]]  # noqa: N806

    def answer(reader: Reader) -> Answer:
        snapshot = take(state, reader, needs(request))
        found = ranked(snapshot, request)
        seqs = [item.seq for item in found]
        return (
            seqs,
            entry_rows.entries_by_seq(reader, seqs),
            _explained(snapshot, request, found),
        )

    def stamp(answered: Answer) -> list[Statement]:
        assert clock is not None  # noqa: S101 - only passed with one
        seqs, found, _ = answered
        every = request.ranking != "reference"  # the others return only what the query matched
        return access_stamp(request.query, seqs, found, clock(), every=every, history=history)

    async with lock:
        _, found, parts = await unit.read(
            "retrieve", answer, then_write=stamp if clock is not None else None
        )
    return list(zip(found, parts, strict=True))


def _explained(snapshot: Snapshot, request: Request, found: list[Scored]) -> list[Explanation]:
    """Each score of ``found`` with its parts (only the score unless ``request.explain``)."""
    if not request.explain:
        return [Explanation(item.score) for item in found]
    if request.ranking != "hybrid" or request.query_vector is None:
        own = [explain_single(request.ranking, item.own) for item in found]
    else:
        parts = vector.hybrid_parts(
            snapshot,
            request.query_vector,
            [item.seq for item in found],
            request.scope,
            (query_tokens(request.query), request.parameters),
        )
        own = [
            Explanation(item.own, lexical, cosine, top, span[0], span[1])
            for item, (lexical, cosine, top, span) in zip(found, parts, strict=True)
        ]
    if request.ranking == "vector":  # an entry competing by its neighbours alone has no vector
        own = [
            part if item.alone else Explanation(item.own)
            for item, part in zip(found, own, strict=True)
        ]
    return [
        part
        if item.weight == 0.0
        else Explanation(
            item.score,
            part.bm25,
            part.cosine,
            part.bm25_max,
            part.cosine_min,
            part.cosine_max,
            context=item.part,
            context_weight=item.weight,
        )
        for item, part in zip(found, own, strict=True)
    ]


def needs(request: Request) -> Needs:
    """The parts of the ranking state ``request`` ranks by."""
    taken = filtering.needs(request.passes) if request.passes is not None else Needs()
    ranking, query_vector = request.ranking, request.query_vector
    if ranking == "reference" or (ranking != "bm25" and query_vector is None):
        return dataclasses.replace(taken, reference=True)
    weighed = (request.embedder_id, request.dims) if request.context != 0.0 else None
    return dataclasses.replace(
        taken,
        words=ranking != "vector",
        vectors=(
            None
            if ranking == "bm25" or query_vector is None
            else (request.embedder_id, len(query_vector))
        ),
        context=weighed,
    )


def ranked(snapshot: Snapshot, request: Request) -> list[Scored]:
    """The best entries for ``request``, best first, with their scores' own and context parts.

    ``vector`` and ``hybrid`` return only entries scored above 0 (a cosine, or
    both parts, at their lowest: nothing in common with the query). ``snapshot``
    is taken with (at least) :func:`needs`.
    """
    passes = request.passes
    allowed = filtering.passing(snapshot, passes) if passes is not None else None
    if request.clock is not None:
        allowed = filtering.unexpired(snapshot.reader, request.clock, snapshot.size, allowed)
    found: list[Scored] | None = None
    if request.ranking != "reference" and request.context != 0.0:
        weights = context.weights(snapshot, request.scope, request.context)
        if weights is not None:
            scorer = _scorer(snapshot, request)
            found = context.top_scored(snapshot, scorer, weights, allowed, request.limit)
    if found is None:
        plain = _plain(snapshot, request, allowed)
        found = [Scored(seq, score, score, 0.0, 0.0) for seq, score in plain]
    if request.ranking in EMBEDDING_RANKINGS:  # best first: what scores 0 or less is last
        found = [item for item in found if item.score > 0.0]
    return found


def _scorer(snapshot: Snapshot, request: Request) -> context.Scorer:
    """What context asks of ``request``'s ranking: its plain best, and any entry's own score."""

    def plain_best(limit: int, allowed: Mask | None) -> list[tuple[int, float]]:
        return _plain(snapshot, dataclasses.replace(request, limit=limit), allowed)

    if request.ranking == "bm25":
        tokens = query_tokens(request.query)
        matched, scores = bm25.positive_scores(snapshot, tokens, request.scope, request.parameters)
        return context.Scorer.over(matched, scores)
    if request.query_vector is None:  # pragma: no cover - made for these rankings
        raise AssertionError("the vector rankings need the query's vector")
    lexical = (
        (query_tokens(request.query), request.parameters) if request.ranking == "hybrid" else None
    )
    own, alone = vector.own_scores(snapshot, request.query_vector, request.scope, lexical)
    return context.Scorer(plain_best, own, alone)


def _plain(snapshot: Snapshot, request: Request, allowed: Mask | None) -> list[tuple[int, float]]:
    """The seqs and scores of the best entries for ``request`` without context, best first."""
    scope, limit = request.scope, request.limit
    if request.ranking == "bm25":
        tokens = query_tokens(request.query)
        return bm25.top_scored(snapshot, tokens, limit, scope, request.parameters, allowed)
    if request.query_vector is not None:
        lexical = (
            (query_tokens(request.query), request.parameters)
            if request.ranking == "hybrid"
            else None
        )
        return vector.top_scored(snapshot, request.query_vector, limit, scope, allowed, lexical)
    query = parse_query(request.query)
    with snapshot.state.looking_up(snapshot.reader, query.words):
        return reference.top_scored(
            snapshot,
            query,
            limit,
            scope,
            # A scope's texts are worth keeping; the entries of one filter are not.
            read_texts=allowed is None,
            matched_only=request.matched_only,
            allowed=allowed,
        )


_ACCESS_STAMP = (
    "UPDATE entries SET access_count = CASE WHEN access_count < ? THEN access_count + 1"
    " ELSE access_count END, last_accessed_us = CASE WHEN last_accessed_us IS NULL"
    " OR last_accessed_us < ? THEN ? ELSE last_accessed_us END WHERE seq IN ({})"
)


def access_stamp(
    query: str,
    seqs: Sequence[int],
    found: Sequence[MemoryEntry],
    now: datetime,
    *,
    every: bool = False,
    history: bool = False,
) -> list[Statement]:
    """The writes recording an access, at ``now``, of each entry ``query`` matched; or none.

    ``found`` are the entries a retrieval returns, at ``seqs``; those matched
    (``every``: all of them, as the ranking matched each) are stamped as the
    write will leave them (one more access, last at ``now`` or later). Each
    statement (``?`` placeholders) with its arguments, for the caller to run;
    with ``history``, those recording the access in each entry's history first.
    """
    matched = [True] * len(found) if every else access_matches(query, found)
    stamped = [seq for seq, hit in zip(seqs, matched, strict=True) if hit]
    if not stamped:
        return []
    now = check_now(now)
    stamp_accessed([entry for entry, hit in zip(found, matched, strict=True) if hit], now)
    now_us = (now - EPOCH) // MICROSECOND
    recorded = history_record.accessed(stamped, now_us) if history else []
    stamp = (
        _ACCESS_STAMP.format(", ".join("?" * len(stamped))),
        (INT64_MAX, now_us, now_us, *stamped),
    )
    return [*recorded, stamp]
