"""Engines: from a target (``:memory:``, a path or a URL) to a configured AsyncEngine."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import make_url
from sqlalchemy.engine import URL
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from loopctl_memory.errors import StorageError
from loopctl_memory.sql.backend import Backend, PoolOptions, backend_named
from loopctl_memory.sql.files.held import HeldFile


@dataclass(frozen=True, slots=True)
class Target:
    """Where a store lives, resolved from what the caller passed."""

    url: URL

    @property
    def backend(self) -> Backend:
        """The backend of the target's database."""
        return backend_named(self.url.get_backend_name())

    @property
    def is_memory(self) -> bool:
        """Whether this is a private, process-local SQLite ``:memory:`` database."""
        return self.url.get_backend_name() == "sqlite" and self.url.database in (
            None,
            "",
            ":memory:",
        )

    @property
    def sqlite_file(self) -> Path | None:
        """The SQLite file the database is, or None for ``:memory:`` and servers."""
        if self.url.get_backend_name() != "sqlite" or self.is_memory:
            return None
        return Path(str(self.url.database))

    def describe(self) -> str:
        """The target for messages, without a password."""
        if self.is_memory:
            return ":memory:"
        if self.sqlite_file is not None:
            return str(self.sqlite_file)
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
    return Target(url.set(drivername=wanted))


DEFAULT_BUSY_TIMEOUT = 5.0
"""Seconds a writer waits for another writer's lock before StorageError."""


def create_engine(
    target: Target,
    *,
    busy_timeout: float,
    echo: bool = False,
    pool: PoolOptions | None = None,
    read_only: bool = False,
    held: HeldFile | None = None,
) -> AsyncEngine:
    """Create the engine for ``target`` with the settings its backend needs.

    SQLite: ``:memory:`` uses one shared connection; a file uses WAL,
    ``synchronous=NORMAL``, ``foreign_keys=ON`` and a busy timeout, and writes
    begin as ``BEGIN IMMEDIATE``. PostgreSQL: reads run in REPEATABLE READ (one
    snapshot, like a SQLite read); writes in READ COMMITTED after taking one
    advisory lock, so writers queue (up to ``busy_timeout``) as on SQLite.
    ``read_only``: the database is opened so that nothing can be written (see
    the backends' :meth:`~loopctl_memory.sql.backend.Backend.read_only_url`, which
    reads the header of a SQLite file through ``held``, the process's descriptor of it).

    Raises:
        StorageError: the SQLite file named is a directory, or in a directory that does not exist.

    """
    file = target.sqlite_file
    if file is not None and file.is_dir():
        raise StorageError(
            f"{file} is a directory, not a database file: name a file, such as {file / 'memory.db'}"
        )
    if file is not None and not file.parent.is_dir():
        raise StorageError(f"cannot open {file}: the directory {file.parent} does not exist")
    backend = target.backend
    options = backend.engine_options(
        memory=target.is_memory,
        busy_timeout=busy_timeout,
        pool=pool or PoolOptions(),
        read_only=read_only,
    )
    url = backend.read_only_url(target.url, held) if read_only else target.url
    # Parameters carry memory text: never in logs (even with echo) nor in error messages.
    engine = create_async_engine(url, echo=echo, hide_parameters=True, **options)
    backend.configure(engine, memory=target.is_memory, busy_timeout=busy_timeout)
    return engine
