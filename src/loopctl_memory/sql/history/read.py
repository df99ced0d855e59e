"""The history table read: the events a store is asked for (see :mod:`loopctl_memory.history`)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, select
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import scopes as scope_names
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.history import HistoryEvent
from loopctl_memory.sql.history.record import in_scopes
from loopctl_memory.sql.rows import filtering
from loopctl_memory.sql.rows.entry_rows import IDS_PER_STATEMENT, chunks
from loopctl_memory.sql.rows.scope_rows import ScopeIds
from loopctl_memory.sql.tables import entries, history, scopes


@dataclass(frozen=True, slots=True)
class Question:
    """Which events a history read returns (every condition given must hold)."""

    entry_id: uuid.UUID | None = None
    passes: MemoryFilter | None = None
    since_us: int | None = None
    kinds: Collection[str] | None = None
    limit: int | None = None
    newest_first: bool = False


async def read(
    connection: AsyncConnection, scope: ScopeIds, base: str, question: Question
) -> list[HistoryEvent]:
    """The view's events ``question`` asks for, in the order they were recorded.

    ``base``: the view's scope name, which each event's scope is made relative to.
    """
    conditions: list[ColumnElement[bool]] = [in_scopes(scope)]
    if question.entry_id is not None:
        seq = await _seq_of(connection, question.entry_id, scope)
        if seq is None:
            return []
        conditions.append(history.c.entry_seq == seq)
    if question.passes is not None:
        conditions.append(
            history.c.entry_seq.in_(
                select(entries.c.seq).where(
                    filtering.condition(question.passes), scope.scope_condition()
                )
            )
        )
    if question.since_us is not None:
        conditions.append(history.c.at_us >= question.since_us)
    if question.kinds is not None:
        conditions.append(history.c.event.in_(sorted(question.kinds)))
    order = history.c.id.desc() if question.newest_first else history.c.id
    statement = (
        select(history, scopes.c.name.label("scope_name"))
        .select_from(history.join(scopes, scopes.c.id == history.c.scope_id))
        .where(*conditions)
        .order_by(order)
    )
    if question.limit is not None:
        statement = statement.limit(question.limit)
    rows = (await connection.execute(statement)).all()
    ids = (
        dict.fromkeys((row.entry_seq for row in rows), question.entry_id)
        if question.entry_id is not None
        else await _ids_of(connection, {row.entry_seq for row in rows if row.entry_id is None})
    )
    found: list[HistoryEvent] = []
    for row in rows:
        entry_id = row.entry_id or ids.get(row.entry_seq)
        if entry_id is None:  # its removal swept before it (a clock moved back)
            continue
        found.append(_event(row, entry_id, base))
    return found


def _event(row: Any, entry_id: uuid.UUID, base: str) -> HistoryEvent:
    """A history row (with its ``scope_name``) as the event of ``entry_id``."""
    return HistoryEvent(
        entry_id=entry_id,
        event=row.event,
        at=EPOCH + row.at_us * MICROSECOND,
        scope=scope_names.relative(base, row.scope_name),
        cause=row.cause,
        relevance=row.relevance,
        count=row._mapping["count"],
        details={} if row.detail is None else json.loads(row.detail),
    )


async def _seq_of(connection: AsyncConnection, entry_id: uuid.UUID, scope: ScopeIds) -> int | None:
    """Where the history of the entry with this id lives, if the view reads its scope."""
    live = (
        await connection.execute(
            select(entries.c.seq).where(entries.c.id == entry_id, scope.scope_condition())
        )
    ).scalar_one_or_none()
    if live is not None:
        return int(live)
    gone = (
        await connection.execute(
            select(history.c.entry_seq)
            .where(history.c.entry_id == entry_id, in_scopes(scope))
            .order_by(history.c.id.desc())
            .limit(1)
        )
    ).scalar_one_or_none()
    return None if gone is None else int(gone)


async def _ids_of(connection: AsyncConnection, seqs: set[int]) -> dict[int, uuid.UUID]:
    """The id of the entry at each seq: the live entry's, or the one its removal recorded."""
    found: dict[int, uuid.UUID] = {}
    for chunk in chunks(sorted(seqs), IDS_PER_STATEMENT):
        live = select(entries.c.seq, entries.c.id).where(entries.c.seq.in_(chunk))
        found.update((int(seq), entry_id) for seq, entry_id in await connection.execute(live))
        gone = select(history.c.entry_seq, history.c.entry_id).where(
            history.c.entry_seq.in_([seq for seq in chunk if seq not in found]),
            history.c.entry_id.is_not(None),
        )
        found.update((int(seq), entry_id) for seq, entry_id in await connection.execute(gone))
    return found


async def read_each(
    connection: AsyncConnection, scope: ScopeIds, base: str, ids: list[uuid.UUID]
) -> dict[uuid.UUID, list[HistoryEvent]]:
    """The events of each stored entry of ``ids`` the view reads, oldest first."""
    found: dict[uuid.UUID, list[HistoryEvent]] = {}
    for chunk in chunks(ids, IDS_PER_STATEMENT):
        stored = select(entries.c.seq, entries.c.id).where(
            entries.c.id.in_(chunk), scope.scope_condition()
        )
        seqs = {int(seq): entry_id for seq, entry_id in await connection.execute(stored)}
        if not seqs:
            continue
        rows = await connection.execute(
            select(history, scopes.c.name.label("scope_name"))
            .select_from(history.join(scopes, scopes.c.id == history.c.scope_id))
            .where(history.c.entry_seq.in_(list(seqs)))
            .order_by(history.c.id)
        )
        for row in rows:
            entry_id = seqs[row.entry_seq]
            found.setdefault(entry_id, []).append(_event(row, entry_id, base))
    return found
