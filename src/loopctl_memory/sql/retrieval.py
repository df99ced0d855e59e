"""Which ranker answers a retrieval: the ranking named, the filter applied, in one read.

Every ranker scores the entries of a scope from the ranking state and hands
the best to :mod:`~loopctl_memory.sql.ranking.topk`; a filter becomes the
ascending seqs of the entries it passes, read in the same transaction, and
only narrows who competes (never BM25's statistics).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.bm25_tokens import query_tokens
from loopctl_memory.embedding import Vectors
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.lifecycle import access_matches, check_now, stamp_accessed
from loopctl_memory.rankings import Explanation, explain_single
from loopctl_memory.scopes import Scope
from loopctl_memory.scoring import parse_query
from loopctl_memory.sql import filtering, repository
from loopctl_memory.sql.backend import Reader, Statement
from loopctl_memory.sql.ranking import bm25, reference, vector
from loopctl_memory.sql.ranking.state import RankingState
from loopctl_memory.sql.unit_of_work import UnitOfWork


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
    explain: bool = False
    """Also each score's parts (``retrieve_explained``)."""


async def retrieve_explained(
    unit: UnitOfWork,
    state: RankingState,
    lock: asyncio.Lock,
    request: Request,
    *,
    clock: Callable[[], datetime] | None,
) -> list[tuple[MemoryEntry, Explanation]]:
    """The best entries for ``request``, each score with its parts, in one read transaction.

    The parts are only the score unless ``request.explain`` asks. ``state`` is
    refreshed in that transaction, holding ``lock`` (one retrieval at a time
    moves the copy forward). With a ``clock``, an access of each returned entry
    the query matched is recorded after the read, at its time.
    """
    Answer = tuple[list[int], list[MemoryEntry], list[Explanation]]  # noqa: N806

    def answer(reader: Reader) -> Answer:
        state.refresh(reader)
        found = ranked(state, reader, request)
        seqs = [seq for seq, _ in found]
        return (
            seqs,
            repository.entries_by_seq(reader, seqs),
            _explained(state, reader, request, found),
        )

    def stamp(answered: Answer) -> Statement | None:
        assert clock is not None  # noqa: S101 - only passed with one
        seqs, found, _ = answered
        every = request.ranking != "reference"  # the others return only what the query matched
        return access_stamp(request.query, seqs, found, clock(), every=every)

    async with lock:
        _, found, parts = await unit.read(
            "retrieve", answer, then_write=stamp if clock is not None else None
        )
    return list(zip(found, parts, strict=True))


def _explained(
    state: RankingState, reader: Reader, request: Request, found: list[tuple[int, float]]
) -> list[Explanation]:
    """Each score of ``found`` with its parts (only the score unless ``request.explain``)."""
    if not request.explain or request.ranking != "hybrid" or request.query_vector is None:
        ranking = request.ranking if request.explain else "reference"
        return [explain_single(ranking, score) for _, score in found]
    parts = vector.hybrid_parts(
        state,
        reader,
        request.query_vector,
        [seq for seq, _ in found],
        request.scope,
        request.embedder_id,
        (query_tokens(request.query), request.parameters),
    )
    return [
        Explanation(score, lexical, cosine, top, span[0], span[1])
        for (_, score), (lexical, cosine, top, span) in zip(found, parts, strict=True)
    ]


def ranked(state: RankingState, reader: Reader, request: Request) -> list[tuple[int, float]]:
    """The seqs and scores of the best entries for ``request``, best first.

    ``state`` must already be refreshed in ``reader``'s transaction.
    """
    passes, scope, limit = request.passes, request.scope, request.limit
    size = state.top + 1
    allowed = filtering.passing(state, reader, passes, size) if passes is not None else None
    if request.ranking == "bm25":
        tokens = query_tokens(request.query)
        return bm25.top_scored(state, reader, tokens, limit, scope, request.parameters, allowed)
    if request.query_vector is not None:
        lexical = (
            (query_tokens(request.query), request.parameters)
            if request.ranking == "hybrid"
            else None
        )
        return vector.top_scored(
            state,
            reader,
            request.query_vector,
            limit,
            scope,
            request.embedder_id,
            allowed,
            lexical,
        )
    query = parse_query(request.query)
    state.lexical(reader)
    state.relevance(reader)
    with state.looking_up(reader, query.words):
        return reference.top_scored(
            state,
            query,
            limit,
            scope,
            # A scope's texts are worth keeping; the entries of one filter are not.
            reader if allowed is None else None,
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
) -> Statement | None:
    """The write recording an access, at ``now``, of each entry ``query`` matched; or None.

    ``found`` are the entries a retrieval returns, at ``seqs``; those matched
    (``every``: all of them, as the ranking matched each) are stamped as the
    write will leave them (one more access, last at ``now`` or later). The
    statement (``?`` placeholders) and its arguments, for the caller to run.
    """
    matched = [True] * len(found) if every else access_matches(query, found)
    stamped = [seq for seq, hit in zip(seqs, matched, strict=True) if hit]
    if not stamped:
        return None
    now = check_now(now)
    stamp_accessed([entry for entry, hit in zip(found, matched, strict=True) if hit], now)
    now_us = (now - EPOCH) // MICROSECOND
    return _ACCESS_STAMP.format(", ".join("?" * len(stamped))), (
        INT64_MAX,
        now_us,
        now_us,
        *stamped,
    )
