"""The history table written: each write's events, in its transaction.

An entry's events are found by its seq, which it keeps for life (a
consolidation that writes a merged memory at another member's seq swaps the
two histories: :func:`swap_histories`). The event that removes an entry
holds its id, so that its history is found after it is gone. Every function
runs inside the caller's transaction; a write that rolls back records nothing.
See :mod:`loopctl_memory.history` for the events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    case,
    delete,
    false,
    insert,
    literal,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import history as events
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.rows.scope_rows import ScopeIds
from loopctl_memory.sql.tables import entries, history

_DAY_US = 86_400_000_000


async def record_stored(connection: AsyncConnection, stamp: Stamp, first_seq: int) -> None:
    """Record the ``stored`` event of every entry from ``first_seq`` on (the write's own)."""
    await connection.execute(
        insert(history).from_select(
            ["entry_seq", "scope_id", "at_us", "event", "cause"],
            select(
                entries.c.seq,
                entries.c.scope_id,
                literal(stamp.at_us),
                literal(events.STORED),
                literal(stamp.cause),
            )
            .where(entries.c.seq >= first_seq)
            .order_by(entries.c.seq),
        )
    )


@dataclass(frozen=True, slots=True)
class Happened:
    """An event a write records for many entries alike, with its details."""

    stamp: Stamp
    event: str
    detail: str | None = None


async def record_where(
    connection: AsyncConnection, happened: Happened, condition: ColumnElement[bool]
) -> None:
    """Record ``happened`` for each entry meeting ``condition``.

    A removal (:data:`loopctl_memory.history.REMOVALS`) is recorded before the
    entries are deleted, and keeps each one's id and relevance (not its text:
    what is forgotten is gone).
    """
    stamp = happened.stamp
    names = ["entry_seq", "scope_id", "at_us", "event", "cause", "detail"]
    columns: list[Any] = [
        entries.c.seq,
        entries.c.scope_id,
        literal(stamp.at_us),
        literal(happened.event),
        literal(stamp.cause),
        literal(happened.detail, history.c.detail.type),
    ]
    if happened.event in events.REMOVALS:
        names += ["entry_id", "relevance"]
        columns += [entries.c.id, entries.c.relevance]
    await connection.execute(
        insert(history).from_select(
            names, select(*columns).where(condition).order_by(entries.c.seq)
        )
    )


async def record(
    connection: AsyncConnection, stamp: Stamp, rows: Sequence[Mapping[str, Any]]
) -> None:
    """Record events given in full: each a mapping of ``history`` columns but the stamp's."""
    # One set of columns for every row: an executemany takes the first row's.
    blank = dict.fromkeys(("entry_id", "relevance", "count", "detail"))
    if rows:
        await connection.execute(
            insert(history),
            [{**blank, "at_us": stamp.at_us, "cause": stamp.cause, **row} for row in rows],
        )


async def swap_histories(connection: AsyncConnection, moved: Sequence[tuple[int, int]]) -> None:
    """Swap the histories of each (seq, seq) pair: a merged memory written at another's seq."""
    for first, second in moved:
        await connection.execute(
            update(history)
            .where(history.c.entry_seq.in_((first, second)))
            .values(
                entry_seq=case((history.c.entry_seq == first, second), else_=first),
            )
        )


def accessed(seqs: Sequence[int], now_us: int) -> list[tuple[str, tuple[Any, ...]]]:
    """The statements recording that a retrieval returned the entries at ``seqs`` at ``now_us``.

    One ``accessed`` event an entry a UTC day: the day's event counts one more,
    or the first of the day is written.
    """
    day = now_us - now_us % _DAY_US
    marks = ", ".join("?" * len(seqs))
    return [
        (_COUNT_ACCESS.format(marks), (*seqs, day)),
        (_FIRST_ACCESS.format(marks), (now_us, *seqs, day)),
    ]


_COUNT_ACCESS = (
    "UPDATE history SET count = count + 1"
    " WHERE entry_seq IN ({}) AND event = 'accessed' AND at_us >= ?"
)
_FIRST_ACCESS = (
    "INSERT INTO history (entry_seq, scope_id, at_us, event, cause, count)"
    " SELECT seq, scope_id, ?, 'accessed', 'retrieve', 1 FROM entries WHERE seq IN ({})"
    " AND NOT EXISTS (SELECT 1 FROM history WHERE history.entry_seq = entries.seq"
    " AND event = 'accessed' AND at_us >= ?) ORDER BY seq"
)


async def sweep(connection: AsyncConnection, scope: ScopeIds, before_us: int) -> int:
    """Delete the events of the view's scopes older than ``before_us``; how many."""
    result = await connection.execute(
        delete(history).where(history.c.at_us < before_us, in_scopes(scope))
    )
    return int(result.rowcount)


def in_scopes(scope: ScopeIds) -> ColumnElement[bool]:
    """The events of the view's scopes (every event for a view of every scope)."""
    if scope.read is None:
        return true()
    if not scope.read:
        return false()
    return history.c.scope_id.in_(scope.read)
