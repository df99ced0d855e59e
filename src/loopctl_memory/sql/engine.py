"""Engines: from a target (``:memory:``, a path or a URL) to a configured AsyncEngine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import event, make_url
from sqlalchemy.engine import URL, Connection
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import StaticPool

from loopctl_memory.errors import StorageError
from loopctl_memory.flat import rebased

WRITE = "IMMEDIATE"
"""Execution option value for write transactions (see ``begin_mode``)."""

_BEGIN_MODE = "loopctl_begin"

PAGE_SIZE = 8192
"""Bytes a page of a new SQLite file; a file keeps the page size it was created with.

Measured side by side against SQLite's default of 4096 (benchmarks/RESULTS.md,
session 7): an import 5-10% faster (half the WAL and checkpoint system calls);
single stores, ``store_many``, ``consolidate`` and retrieval at 100,000 entries
the same; retrieval at 1,000,000 the same on average, its median 4.5% higher in
the median of 20 alternating pairs (higher in 13 of them)."""


@dataclass(frozen=True, slots=True)
class Target:
    """Where a store lives, resolved from what the caller passed."""

    url: URL

    @property
    def is_sqlite(self) -> bool:
        """Whether the database is SQLite (file or memory)."""
        return self.url.get_backend_name() == "sqlite"

    @property
    def is_memory(self) -> bool:
        """Whether this is a private, process-local SQLite ``:memory:`` database."""
        return self.is_sqlite and self.url.database in (None, "", ":memory:")

    def describe(self) -> str:
        """The target for messages, without a password."""
        if self.is_memory:
            return ":memory:"
        if self.is_sqlite:
            return str(self.url.database)
        return self.url.render_as_string(hide_password=True)


def resolve_target(target: str | os.PathLike[str]) -> Target:
    """Turn ``":memory:"``, a filesystem path or a SQLAlchemy URL into a Target.

    ``sqlite://`` URLs are given the async aiosqlite driver and
    ``postgresql://`` URLs the asyncpg driver; other drivers are refused.

    Raises:
        StorageError: the URL cannot be parsed or names a synchronous driver.

    """
    if isinstance(target, os.PathLike):
        return Target(URL.create("sqlite+aiosqlite", database=os.fspath(target)))
    if target == ":memory:":
        return Target(URL.create("sqlite+aiosqlite", database=":memory:"))
    if "://" not in target:
        return Target(URL.create("sqlite+aiosqlite", database=str(Path(target))))
    try:
        url = make_url(target)
    except ArgumentError as exc:
        raise StorageError(f"cannot parse database URL {target!r}: {exc}") from exc
    drivers = {"sqlite": "sqlite+aiosqlite", "postgresql": "postgresql+asyncpg"}
    wanted = drivers.get(url.get_backend_name())
    if wanted is None or url.drivername not in (url.get_backend_name(), wanted):
        raise StorageError(
            f"unsupported database URL {url.drivername!r}: "
            "use sqlite+aiosqlite://... or postgresql+asyncpg://..."
        )
    url = url.set(drivername=wanted)
    return Target(url)


@dataclass(frozen=True)  # no slots: the class attributes are the defaults open() shows
class PoolOptions:
    """Connection pool and timeouts for a server database (PostgreSQL)."""

    pool_size: int = 5
    """Connections kept open."""
    max_overflow: int = 10
    """Connections opened beyond ``pool_size`` under load, closed when idle."""
    pool_timeout: float = 30.0
    """Seconds to wait for a free connection before StorageError."""
    statement_timeout: float | None = None
    """Seconds one statement may run before the server cancels it (None: no limit)."""
    connect_timeout: float = 10.0
    """Seconds to wait for the server when connecting."""


WRITERS_LOCK = 0x6C6F6F70_6D656D  # "loopmem": the PostgreSQL advisory lock writers queue on


def create_engine(
    target: Target,
    *,
    busy_timeout: float,
    echo: bool = False,
    pool: PoolOptions | None = None,
) -> AsyncEngine:
    """Create the engine for ``target`` with the pragmas and transaction handling we rely on.

    SQLite: ``:memory:`` uses one shared connection (StaticPool); a file uses
    WAL, ``synchronous=NORMAL``, ``foreign_keys=ON``, a busy timeout and, when
    new, pages of :data:`PAGE_SIZE` bytes. The driver's own transaction handling
    is switched off so that we emit BEGIN ourselves: deferred for reads,
    ``BEGIN IMMEDIATE`` for writes.

    PostgreSQL: reads run in REPEATABLE READ (one snapshot, like a SQLite read);
    writes in READ COMMITTED after taking one advisory lock, so writers queue
    (up to ``busy_timeout``) exactly as on SQLite and ids grow in commit order.
    """
    # Parameters carry memory text: never in logs (even with echo) nor in error messages.
    options: dict[str, Any] = {"echo": echo, "hide_parameters": True}
    if target.is_sqlite:
        options["connect_args"] = {"timeout": busy_timeout, "check_same_thread": False}
        # Every unit of work ends in COMMIT or ROLLBACK, so the pool's reset is a wasted round trip.
        options["pool_reset_on_return"] = None
        if target.is_memory:
            options["poolclass"] = StaticPool
    else:
        pool = pool or PoolOptions()
        settings = {"lock_timeout": str(_milliseconds(busy_timeout))}
        if pool.statement_timeout is not None:
            settings["statement_timeout"] = str(_milliseconds(pool.statement_timeout))
        options.update(
            isolation_level="REPEATABLE READ",
            pool_size=pool.pool_size,
            max_overflow=pool.max_overflow,
            pool_timeout=pool.pool_timeout,
            pool_pre_ping=True,
            connect_args={"server_settings": settings, "timeout": pool.connect_timeout},
        )
    engine = create_async_engine(target.url, **options)
    if target.is_sqlite:
        _configure_sqlite(engine, memory=target.is_memory, busy_timeout=busy_timeout)
    else:
        _configure_postgresql(engine)
    return engine


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def _configure_postgresql(engine: AsyncEngine) -> None:
    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        if connection.get_execution_options().get(_BEGIN_MODE) == WRITE:
            # Held until COMMIT or ROLLBACK: one writer at a time, as on SQLite.
            connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITERS_LOCK})")


REBASED = "loopctl_rebased"
"""The SQL name of :func:`~loopctl_memory.flat.rebased` on every SQLite connection."""


def _configure_sqlite(engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: object) -> None:
        # None: the driver never emits BEGIN on its own; the "begin" listener does.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
            if not memory:
                # Takes effect only while the file is still empty; SQLite ignores it after.
                cursor.execute(f"PRAGMA page_size={PAGE_SIZE}")
                cursor.execute("PRAGMA synchronous=NORMAL")
                # 64 MiB of page cache: the random-UUID unique index misses the default 2 MiB.
                cursor.execute("PRAGMA cache_size=-65536")
        finally:
            cursor.close()
        # For the postings of a staged batch (index.index_tail): its packed numbers as seqs.
        dbapi_connection.create_function(REBASED, 2, rebased, deterministic=True)

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(connection: Connection) -> None:
        # BEGIN IMMEDIATE for writes: a deferred transaction that upgrades to a
        # write fails at once with "database is locked" under WAL, whatever the timeout.
        mode = connection.get_execution_options().get(_BEGIN_MODE, "")
        connection.exec_driver_sql(f"BEGIN {mode}".rstrip())


def enable_wal(connection: Connection) -> None:
    """Switch a SQLite file to write-ahead logging (a persistent property of the file).

    Done once the schema is known to be ours, never before: the switch rewrites
    the file header, and a file we refuse must be left exactly as it was.
    """
    mode = outside_transaction(connection, "PRAGMA journal_mode")
    if not mode or str(mode[0][0]).lower() != "wal":
        # Needs the file to itself; SQLite does not wait here, so the caller retries.
        outside_transaction(connection, "PRAGMA journal_mode=WAL")


def outside_transaction(connection: Connection, statement: str) -> list[Any]:
    """Run ``statement`` on the driver's own connection and return its rows.

    For what SQLite refuses or ignores inside a transaction (``DETACH``, the
    journal mode, ``PRAGMA foreign_keys``): ``Connection.execute`` would begin
    one first. The connection must not be in a transaction.
    """
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
        return list(cursor.fetchall())
    finally:
        cursor.close()


def transaction_options(connection: Connection | AsyncConnection, *, write: bool) -> dict[str, Any]:
    """Execution options for the connection's next transactions: a write or a read.

    SQLite: ``BEGIN IMMEDIATE`` or a deferred ``BEGIN``. PostgreSQL: READ
    COMMITTED behind the writers' lock, or a REPEATABLE READ snapshot.
    """
    options: dict[str, Any] = {_BEGIN_MODE: WRITE if write else ""}
    if connection.dialect.name == "postgresql":
        options["isolation_level"] = "READ COMMITTED" if write else "REPEATABLE READ"
    return options
