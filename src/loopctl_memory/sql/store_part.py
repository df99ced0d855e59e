"""What the SQL store's parts share: its state, its unit of work, and running work in its view.

:class:`~loopctl_memory.sql.store.SqlMemoryStore` is assembled from parts (its
id lookups, its vectors) that each hold one concern; they reach the store
through this base only.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory.scopes import Scope
from loopctl_memory.sql.scope_rows import ScopeIds, scope_ids

if TYPE_CHECKING:
    from loopctl_memory.sql.store_shared import SharedState
    from loopctl_memory.sql.unit_of_work import UnitOfWork

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
        """One unit of work (:meth:`UnitOfWork.run`), ``work`` given the view's scope ids."""
        scope = self._scope

        async def scoped(connection: AsyncConnection) -> T:
            return await work(connection, await scope_ids(connection, scope))

        return await self._unit.run(action, scoped, write=write)
