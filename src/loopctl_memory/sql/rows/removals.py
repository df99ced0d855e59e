"""Removing entries: every removal logged for other processes, and recorded in their history.

Each function runs inside the caller's transaction. A removed seq is never
given out again (``removed_through``); the change log tells the processes
that keep a copy of the ranking columns; the ``happened`` event, when given,
goes to each removed entry's history first (see :mod:`loopctl_memory.history`).
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence

from sqlalchemy import ColumnElement, and_, case, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import history
from loopctl_memory.flat import microseconds
from loopctl_memory.lifecycle import ForgetRule
from loopctl_memory.scoring import PRUNE_THRESHOLD
from loopctl_memory.sql.history import record as history_record
from loopctl_memory.sql.history import stamps as history_stamps
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.rows import filtering, keys
from loopctl_memory.sql.rows.scope_rows import EVERY_SCOPE, Clock, ScopeIds, expired_by, scope_id
from loopctl_memory.sql.tables import changes, entries, index_state


async def delete_entry(
    connection: AsyncConnection,
    entry_id: uuid.UUID,
    scope: ScopeIds = EVERY_SCOPE,
    stamp: Stamp | None = None,
) -> bool:
    """Delete one entry of the view (its tags cascade); return whether it existed."""
    condition = and_(entries.c.id == entry_id, scope.condition())
    return await remove(connection, condition, _happened(stamp, history.DELETED)) > 0


async def prune(
    connection: AsyncConnection, scope: ScopeIds = EVERY_SCOPE, stamp: Stamp | None = None
) -> int:
    """Delete every entry of the view whose relevance, as binary32, is below 0.05."""
    condition = and_(entries.c.relevance < PRUNE_THRESHOLD, scope.condition())
    return await remove(connection, condition, _happened(stamp, history.PRUNED))


async def remove(
    connection: AsyncConnection,
    condition: ColumnElement[bool],
    happened: history_record.Happened | None = None,
) -> int:
    """Delete the entries meeting ``condition``, logged in ``changes``; return how many.

    Other processes learn of the removal from the log; ``removed_through``
    keeps the removed seqs from ever being given out again. ``happened``: the
    event each entry's history records (None: none).
    """
    removed = select(entries.c.seq).where(condition)
    logged = await connection.execute(
        insert(changes).from_select(["seq"], removed.order_by(entries.c.seq))
    )
    if not logged.rowcount:
        return 0
    if happened is not None:
        await history_record.record_where(connection, happened, condition)
    highest = select(func.max(entries.c.seq)).where(condition).scalar_subquery()
    floor = index_state.c.removed_through
    await connection.execute(
        update(index_state).values(removed_through=case((highest > floor, highest), else_=floor))
    )
    result = await connection.execute(delete(entries).where(condition))
    return int(result.rowcount)


async def delete_keyed(
    connection: AsyncConnection,
    scope_name: str,
    key: str,
    clock: Clock,
    stamp: Stamp | None = None,
) -> bool:
    """Remove the entry of scope ``scope_name`` holding ``key``; whether a live one was there."""
    own = await scope_id(connection, scope_name)
    if own is None:
        return False
    live = ScopeIds((own,), await expired_by(connection, clock)).condition()
    happened = _happened(stamp, history.DELETED, history_stamps.details(key=key))
    return await remove(connection, and_(keys.holding(own, key), live), happened) > 0


async def sweep_expired(
    connection: AsyncConnection, scope: ScopeIds, stamp: Stamp | None = None
) -> int:
    """Remove the view's entries that expired by its ``now_us``; how many."""
    return await remove(connection, scope.expired(), _happened(stamp, history.EXPIRED))


def _happened(
    stamp: Stamp | None, event: str, detail: str | None = None
) -> history_record.Happened | None:
    return None if stamp is None else history_record.Happened(stamp, event, detail)


def forgotten(stamp: Stamp | None, rule: ForgetRule) -> history_record.Happened | None:
    """What a ``forget`` by ``rule`` records of each entry it removes (None: nothing)."""
    return _happened(
        stamp, history.FORGOTTEN, history_stamps.details(rule=history.rule_details(rule))
    )


def remove_seqs(connection: AsyncConnection, seqs: Sequence[int]) -> Awaitable[int]:
    """Remove the entries at these seqs (at most ``IDS_PER_STATEMENT``), logged."""
    return remove(connection, entries.c.seq.in_(list(seqs)))


def forget_condition(rule: ForgetRule, scope: ScopeIds) -> ColumnElement[bool]:
    """The entries of the view that ``rule`` forgets."""
    conditions = [scope.condition()]
    if rule.created_before is not None:
        conditions.append(entries.c.created_at_us < microseconds(rule.created_before))
    if rule.category is not None:
        conditions.append(entries.c.category == str(rule.category))
    if rule.below is not None:
        conditions.append(entries.c.relevance < rule.below)
    if rule.filter is not None:
        conditions.append(filtering.condition(rule.filter))
    return and_(*conditions)
