"""What the SQL store's parts share: its state, its unit of work, and running work in its view.

:class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore` is assembled from parts (its
id lookups, its vectors) that each hold one concern; they reach the store
through this base only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.rows import repository
from loopctl_memory.sql.rows.scope_rows import ScopeIds, scope_ids

if TYPE_CHECKING:
    from loopctl_memory.sql.database.unit_of_work import UnitOfWork
    from loopctl_memory.sql.store.shared import SharedState

T = TypeVar("T")


class StorePart:
    """The store's shared state, unit of work and scope, and :meth:`_in_scope`."""

    _shared: SharedState
    _unit: UnitOfWork
    _scope: Scope

    async def _in_scope(
        self,
        action: str,
        work: Callable[[AsyncConnection, ScopeIds], Awaitable[T]],
        *,
        write: bool,
    ) -> T:
        """One unit of work (:meth:`UnitOfWork.run`), ``work`` given the view's scope ids.

        The view reads at the store's clock's now: expired entries are not in it (the
        clock is read only when the store holds an entry with an expiry).
        """
        scope, clock = self._scope, self._shared.now_us

        async def scoped(connection: AsyncConnection) -> T:
            return await work(connection, await scope_ids(connection, scope, clock))

        return await self._unit.run(action, scoped, write=write)

    async def _refreshed(self, found: MemoryEntry | None) -> MemoryEntry | None:
        """``found``, its expiry refreshed (see :meth:`_refresh`)."""
        if found is not None:
            await self._refresh([found])
        return found

    async def _refresh(self, found: list[MemoryEntry]) -> None:
        """With ``refresh_on_read``, each of ``found`` that has an expiry expires ttl from now.

        In the database and in ``found``. A read-only store reads without refreshing.
        """
        shared = self._shared
        expiring = [entry for entry in found if entry.expires_at is not None]
        if not shared.refresh_on_read or shared.ttl is None or not expiring:
            return
        if self._unit.read_only:
            return
        expires_us = shared.expiry_us()
        expires_at = EPOCH + expires_us * MICROSECOND
        ids = [entry.id for entry in expiring]
        await self._unit.run(
            "refresh", lambda c: repository.set_expiry(c, ids, expires_us), write=True
        )
        for entry in expiring:
            entry.expires_at = expires_at
