"""The SQL store's facts about its database: where, how opened, its room and schema revision.

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`, kept apart so that
the store module holds the contract's operations.
"""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from loopctl_memory import migrate
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.store.part import StorePart


class DatabaseFacts(StorePart):
    """Where the database is, how it was opened, the room it takes and its schema revision."""

    @property
    def target(self) -> str:
        """Where the store lives (":memory:", a file path, or a URL without password)."""
        return self._unit.where

    @property
    def read_only(self) -> bool:
        """Whether the store was opened with ``read_only=True`` (every write raises)."""
        return self._unit.read_only

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine, for tools such as migrations; not for writing entries."""
        return self._unit.engine

    async def storage_bytes(self) -> int:
        """Bytes the store's tables and indexes take (a SQLite file's write-ahead log excluded)."""
        return await self._unit.run("measure the database", _storage_bytes, write=False)

    async def free_bytes(self) -> int | None:
        """Bytes of free pages in a SQLite file, kept for later writes (see ``consolidate``).

        None for ``:memory:`` and PostgreSQL.
        """
        memory = self._unit.target.is_memory

        async def measure(connection: AsyncConnection) -> int | None:
            return await _free_bytes(connection, memory=memory)

        return await self._unit.run("measure the database", measure, write=False)

    async def schema_revision(self) -> str | None:
        """The alembic revision the database is at."""
        return await self._unit.run_untransacted(
            "read the schema revision", lambda c: c.run_sync(migrate.current)
        )


async def _storage_bytes(connection: AsyncConnection) -> int:
    """Bytes the store's tables and indexes take in the database."""
    return await connection.run_sync(lambda sync: backend_of(sync).storage_bytes(sync))


async def _free_bytes(connection: AsyncConnection, *, memory: bool) -> int | None:
    """Bytes of free pages in the database (None where the backend does not know)."""
    return await connection.run_sync(lambda sync: backend_of(sync).free_bytes(sync, memory=memory))
