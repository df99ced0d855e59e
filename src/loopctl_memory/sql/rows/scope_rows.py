"""The scopes table: the ids of a view's scopes, and the ids of new scope names.

A scope name, once given an id, keeps it for ever; a view reads the entries of
its scope (and, with descendants, of every scope below it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import ColumnElement, and_, false, func, or_, select, true
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.tables import entries, scopes


@dataclass(frozen=True, slots=True)
class ScopeIds:
    """The ids of the scopes a view reads, and the time it reads at."""

    read: tuple[int, ...] | None
    """The ids of the scopes read; None: every scope."""
    now_us: int | None = None
    """The time of the read, microseconds since the epoch: entries that expired by then
    are not read (:mod:`loopctl_memory.expiry`). None: every entry (none had expired)."""

    def condition(self) -> ColumnElement[bool]:
        """The entries the view reads now, as a WHERE condition."""
        if self.now_us is None:
            return self.scope_condition()
        expires = entries.c.expires_at_us
        return and_(self.scope_condition(), or_(expires.is_(None), expires > self.now_us))

    def expired(self) -> ColumnElement[bool]:
        """The entries of the view's scopes that expired by ``now_us`` (none for None)."""
        if self.now_us is None:
            return false()
        return and_(self.scope_condition(), entries.c.expires_at_us <= self.now_us)

    def scope_condition(self) -> ColumnElement[bool]:
        """The entries of the view's scopes, expired or not, as a WHERE condition."""
        if self.read is None:
            return true()
        if not self.read:
            return false()
        if len(self.read) == 1:
            return entries.c.scope_id == self.read[0]
        return entries.c.scope_id.in_(self.read)


EVERY_SCOPE = ScopeIds(None)
"""The view of every entry."""


Clock = Callable[[], int]
"""The store's clock, microseconds since the epoch."""


async def expired_by(connection: AsyncConnection, clock: Clock | None) -> int | None:
    """``clock()`` if an entry of the store has expired by then, else None.

    The earliest expiry is one step into the expiry index, which holds only the
    entries that have one: a store without any never reads the clock.
    """
    if clock is None:
        return None
    # The WHERE lets the partial index serve the min (without it: a scan of every row).
    expiring = entries.c.expires_at_us.is_not(None)
    soonest = (
        await connection.execute(select(func.min(entries.c.expires_at_us)).where(expiring))
    ).scalar()
    return now_if_expired(soonest, clock)


def now_if_expired(soonest: int | None, clock: Clock) -> int | None:
    """``clock()`` if the soonest expiry (None: none) has passed by then, else None.

    The clock is read only when there is an expiry.
    """
    if soonest is None:
        return None
    now_us = clock()
    return now_us if soonest <= now_us else None


async def scope_ids(
    connection: AsyncConnection, scope: Scope, clock: Clock | None = None
) -> ScopeIds:
    """The ids of ``scope``'s scopes as the database holds them now, read at ``clock()``.

    Its ``now_us`` is None unless an entry has expired (see :func:`expired_by`).
    """
    now_us = await expired_by(connection, clock)
    if scope.everything:
        return ScopeIds(None, now_us)
    if not scope.name and not await _has_scopes(connection):
        return ScopeIds(None, now_us)  # every entry is the root's: no condition to check
    if not scope.descendants:
        own = await scope_id(connection, scope.name)
        return ScopeIds(() if own is None else (own,), now_us)
    rows = (await connection.execute(select(scopes.c.id, scopes.c.name))).all()
    return ScopeIds(tuple(sorted(int(row.id) for row in rows if scope.holds(row.name))), now_us)


async def _has_scopes(connection: AsyncConnection) -> bool:
    """Whether any scope but the root was ever given an id."""
    highest = (await connection.execute(select(func.max(scopes.c.id)))).scalar_one_or_none()
    return bool(highest)


async def scope_id(connection: AsyncConnection, name: str) -> int | None:
    """The id of the scope named ``name`` (0 for the root), or None if it has none yet."""
    if not name:
        return 0
    found = (
        await connection.execute(select(scopes.c.id).where(scopes.c.name == name))
    ).scalar_one_or_none()
    return None if found is None else int(found)


async def ensure_scopes(connection: AsyncConnection, names: Iterable[str]) -> dict[str, int]:
    """The id of each scope named, giving an id to a name that has none yet."""
    found: dict[str, int] = {}
    for name in set(names):
        known = await scope_id(connection, name)
        if known is None:
            backend = backend_of(connection)
            await connection.exec_driver_sql(
                backend.sql("INSERT INTO scopes (name) VALUES (?) ON CONFLICT (name) DO NOTHING"),
                (backend.encode(name),),
            )
            known = await scope_id(connection, name)
        if known is None:  # pragma: no cover - inserted just above, in this transaction
            raise RuntimeError(f"scope {name!r} was not created")
        found[name] = known
    return found


async def scope_counts(connection: AsyncConnection, scope: Scope) -> list[tuple[str, int]]:
    """(name, entries) of ``scope`` and every scope below it that holds entries, by name."""
    rows = await connection.execute(
        select(scopes.c.name, func.count())
        .select_from(entries.join(scopes, scopes.c.id == entries.c.scope_id))
        .group_by(scopes.c.name)
    )
    everything_below = Scope(scope.name, descendants=True)
    return sorted((name, int(number)) for name, number in rows if everything_below.holds(name))
