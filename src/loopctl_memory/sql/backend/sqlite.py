"""SQLite through aiosqlite: WAL, ``BEGIN IMMEDIATE`` for writes, one connection in memory."""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.pool import StaticPool

from loopctl_memory.errors import StorageError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.backend import aiosqlite_hop
from loopctl_memory.sql.backend.base import (
    BEGIN_MODE,
    Backend,
    Reader,
    Statement,
    StoredBatch,
    T,
    outside_transaction,
    register,
)
from loopctl_memory.sql.files import header
from loopctl_memory.sql.history.stamps import (
    RECORD_REPLACED,
    RECORD_STORED_ROW,
    Stamp,
    replaced_rows,
)
from loopctl_memory.sql.rows import fields
from loopctl_memory.sql.rows.fields import INSERT_FIELDS
from loopctl_memory.sql.tables import INSERT_ENTRIES, INSERT_TAGS, INSERT_VECTORS

if TYPE_CHECKING:
    from loopctl_memory.sql.backend.base import PoolOptions
    from loopctl_memory.sql.files.held import HeldFile

PAGE_SIZE = 8192
"""Bytes a page of a new SQLite file; a file keeps the page size it was created with.

Larger than SQLite's default 4096: half the write-ahead log frames and checkpoint
calls for a batch write, the same speed for single stores and retrieval."""

# Above every entry, the watermark and every removed seq (as ``index.write_position``).
_POSITION = (
    "SELECT coalesce((SELECT max(seq) FROM entries), 0),"
    " coalesce((SELECT indexed_through FROM index_state), 0),"
    " coalesce((SELECT removed_through FROM index_state), 0)"
)
_ADD_SCOPE = "INSERT INTO scopes (name) VALUES (?) ON CONFLICT (name) DO NOTHING"
_SCOPE_ID = "SELECT id FROM scopes WHERE name = ?"

# A keyed entry replaces the one of its scope holding its key: as removals.remove does,
# the removal logged for other processes, its seq never given out again, then deleted.
_LOG_KEYED = "INSERT INTO changes (seq) SELECT seq FROM entries WHERE scope_id = ? AND key = ?"
_FLOOR_KEYED = (
    "UPDATE index_state SET removed_through = max(removed_through,"
    " coalesce((SELECT max(seq) FROM entries WHERE scope_id = ? AND key = ?), 0))"
)
_DELETE_KEYED = "DELETE FROM entries WHERE scope_id = ? AND key = ?"


# KiB (negative). The random-UUID unique index misses the default 2 MiB; at 1M entries
# 32 MiB stores as fast as 64 (the OS keeps the file's pages) and the queries' pages
# fill it: it is part of every serving process's memory.
_CACHE_SIZE = -32768
_CACHE_SIZE_READING_ONCE = -2048


def _in_wal_mode(file: HeldFile | None) -> bool:
    """Whether the SQLite file's header says write-ahead logging (False if it cannot be read)."""
    if file is None:
        return False
    try:
        return header.in_wal_mode(file.header())
    except OSError:
        return False


_AUTO_VACUUM_INCREMENTAL = 2  # what PRAGMA auto_vacuum answers


def _incremental_when_created(connection: Connection) -> None:
    """Have the empty file of ``connection`` created ``auto_vacuum=INCREMENTAL``, writing nothing.

    The mode counts only until the first table is created. On an empty file the
    pragma also writes the file's first page at once; inside a transaction that
    is rolled back it writes nothing, and the connection keeps the mode for the
    transaction that creates the schema. So a file that is then refused (opened
    with ``migrate=False``) stays as it was: empty.
    """
    outside_transaction(connection, "BEGIN")
    try:
        outside_transaction(connection, "PRAGMA auto_vacuum=INCREMENTAL")
    finally:
        outside_transaction(connection, "ROLLBACK")


class SqliteBackend(Backend):
    """SQLite through aiosqlite: WAL, ``BEGIN IMMEDIATE`` for writes, one connection in memory."""

    name = "sqlite"
    works_in_one_hop = aiosqlite_hop.AVAILABLE

    def engine_options(
        self, *, memory: bool, busy_timeout: float, pool: PoolOptions, read_only: bool = False
    ) -> dict[str, Any]:
        """A busy timeout; ``:memory:`` is one shared connection (StaticPool)."""
        del pool, read_only  # a file's connections are cheap; read-only is in the URL
        options: dict[str, Any] = {
            "connect_args": {"timeout": busy_timeout, "check_same_thread": False},
            # Every unit of work ends in COMMIT or ROLLBACK: the pool's reset is a wasted trip.
            "pool_reset_on_return": None,
        }
        if memory:
            options["poolclass"] = StaticPool
        return options

    def read_only_url(self, url: URL, file: HeldFile | None) -> URL:
        """The file as a URI, ``mode=ro``; ``immutable=1`` where ``mode=ro`` cannot open it.

        A file in write-ahead-log mode needs its ``-shm`` file: a read-only
        connection creates it, unless the directory cannot be written (a
        read-only mount, a directory of another user). There, when no ``-shm``
        exists, no process has the database open in WAL mode, and SQLite can read
        it only as ``immutable``: it then assumes that the file does not change
        while it is open (a writer that starts later, with the rights to, is not
        seen). The header is read through ``file``, the process's descriptor of
        the database (see :mod:`~loopctl_memory.sql.files.held`).
        """
        path = os.path.abspath(str(url.database))
        query = {"mode": "ro"}
        if (
            _in_wal_mode(file)
            and not os.path.exists(f"{path}-shm")
            and not os.access(os.path.dirname(path), os.W_OK)
        ):
            query = {"immutable": "1"}
        return url.set(database=Path(path).as_uri(), query={**query, "uri": "true"})

    def caller_connection(
        self, engine: AsyncEngine, *, memory: bool, busy_timeout: float
    ) -> Callable[[], Any] | None:
        """A file's: ``sqlite3`` opening the engine's URL as its connections do.

        The same URL (``mode=ro`` included) and busy timeout, set ``query_only``.
        None for ``:memory:``, which is a database of one connection's own.
        """
        if memory:
            return None
        arguments, options = engine.dialect.create_connect_args(engine.url)

        opener: Callable[..., sqlite3.Connection] = sqlite3.connect
        settings = {**options, "timeout": busy_timeout, "check_same_thread": False}

        def connect() -> sqlite3.Connection:
            connection = opener(*arguments, **settings, isolation_level=None)
            try:
                connection.execute("PRAGMA query_only=ON")
            except BaseException:
                connection.close()
                raise
            return connection

        return connect

    async def drop_cached_pages(self, driver: Any) -> None:
        """Release the connection's page cache (outside any transaction)."""
        cursor = await driver.execute("PRAGMA shrink_memory")
        await cursor.close()

    def configure(self, engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
        """Pragmas on every connection; BEGIN emitted by us, IMMEDIATE for writes."""

        @event.listens_for(engine.sync_engine, "do_connect")
        def _do_connect(
            dialect: Any, _record: object, cargs: list[Any], cparams: dict[str, Any]
        ) -> Any:
            # The dialect's own connect, with its arguments from the URL, through our connect.
            return dialect.loaded_dbapi.connect(
                *cargs, async_creator_fn=aiosqlite_hop.connect, **cparams
            )

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
                    cursor.execute(f"PRAGMA cache_size={_CACHE_SIZE}")
            finally:
                cursor.close()

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Connection) -> None:
            # BEGIN IMMEDIATE for writes: a deferred transaction that upgrades to a
            # write fails at once with "database is locked" under WAL, whatever the timeout.
            mode = connection.get_execution_options().get(BEGIN_MODE, "")
            connection.exec_driver_sql(f"BEGIN {mode}".rstrip())

    async def store_batch(
        self,
        driver: Any,
        batch: FlatBatch,
        scopes: Mapping[str, str],
        known: Mapping[str, int],
        stamp: Stamp | None = None,
    ) -> StoredBatch:
        """One hop to aiosqlite's thread for the whole transaction, where SQLAlchemy makes a dozen.

        See :mod:`~loopctl_memory.sql.backend.aiosqlite_hop`; where it is missing, batches
        take the connection lane.
        """
        return await aiosqlite_hop.run_in_one_hop(
            driver, self._store_blocking, batch, scopes, known, stamp
        )

    def _store_blocking(
        self,
        connection: sqlite3.Connection,
        batch: FlatBatch,
        scopes: Mapping[str, str],
        known: Mapping[str, int],
        stamp: Stamp | None,
    ) -> StoredBatch:
        """Store a checked batch in its own transaction on a ``sqlite3`` connection."""
        connection.execute("BEGIN IMMEDIATE")
        try:
            ids = {name: known[name] for name in scopes.values() if name in known}
            for name in set(scopes.values()) - ids.keys():
                connection.execute(_ADD_SCOPE, (name,))
                ids[name] = int(connection.execute(_SCOPE_ID, (name,)).fetchone()[0])
            by_relative = {relative: ids[name] for relative, name in scopes.items()}
            keyed = [(by_relative[entry[10]], entry[12]) for entry in batch.entries if entry[12]]
            if keyed and stamp is not None:
                replacing = [uuid.UUID(hex=entry[0]) for entry in batch.entries if entry[12]]
                connection.executemany(RECORD_REPLACED, replaced_rows(stamp, keyed, replacing))
            if keyed and connection.executemany(_LOG_KEYED, keyed).rowcount:
                connection.executemany(_FLOOR_KEYED, keyed)
                connection.executemany(_DELETE_KEYED, keyed)
            top, mark, removed = connection.execute(_POSITION).fetchone()
            first = max(top, mark, removed) + 1
            connection.executemany(INSERT_ENTRIES, self.entry_rows(batch, first, by_relative))
            if batch.tags:
                connection.executemany(INSERT_TAGS, self.tag_rows(batch, first))
            field_rows = fields.batch_rows(self.encode, batch, first)
            if field_rows:
                connection.executemany(INSERT_FIELDS, field_rows)
            made = self.vector_rows(batch, first)
            if made:
                connection.executemany(INSERT_VECTORS, made)
            if stamp is not None:
                at, cause = stamp.at_us, stamp.cause
                connection.executemany(
                    RECORD_STORED_ROW,
                    [
                        (first + n, by_relative[e[10]], at, cause)
                        for n, e in enumerate(batch.entries)
                    ],
                )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return StoredBatch(mark, first + len(batch) - 1, ids)

    def storage_bytes(self, connection: Connection) -> int:
        """Pages times page size (the write-ahead log excluded)."""
        pages = connection.exec_driver_sql("PRAGMA page_count").scalar_one()
        page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
        return int(pages) * int(page_size)

    def free_bytes(self, connection: Connection, *, memory: bool) -> int | None:
        """Free pages times page size: space the file holds for later writes; None in memory."""
        if memory:
            return None
        pages = connection.exec_driver_sql("PRAGMA freelist_count").scalar_one()
        page_size = connection.exec_driver_sql("PRAGMA page_size").scalar_one()
        return int(pages) * int(page_size)

    async def vacuum(self, driver: Any, *, memory: bool, where: str) -> None:
        """Give a file's free space back to the filesystem; nothing to do in memory.

        A full ``VACUUM`` rebuilds the file packed: it gives back the free pages
        and the room deletes left in part-full pages (``PRAGMA
        incremental_vacuum``, which new files are set up for, gives back only
        whole free pages, a small part of what a relevance prune frees: see
        ``benchmarks/RESULTS.md``). It rewrites the whole file (about as
        long as copying it; room for twice the result on disk meanwhile) and keeps
        it to itself for writing meanwhile (other writers wait; readers go on). It
        keeps the file's ``auto_vacuum`` mode. Then a checkpoint moves the
        write-ahead log into the file and empties it; it waits up to the busy
        timeout for readers, and if one is still reading, the file shrinks at a
        later checkpoint.

        Raises:
            StorageError: another connection holds the file (SQLite's "database
                is locked" once the busy timeout has passed); nothing was changed.

        """
        if memory:
            return
        try:
            await driver.execute("VACUUM")
            async with driver.execute("PRAGMA wal_checkpoint(TRUNCATE)") as cursor:
                await cursor.fetchall()
        except sqlite3.OperationalError as exc:
            if driver.in_transaction:
                await driver.rollback()
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise
            raise StorageError(
                f"give back the free space of {where}: another connection holds the file"
                f" ({exc}); nothing was changed: try again once it is done"
            ) from exc

    async def give_back_free_pages(self, driver: Any, *, memory: bool) -> None:
        """On a file created ``auto_vacuum=INCREMENTAL``, cut its whole free pages off.

        One short write transaction (``PRAGMA incremental_vacuum``); part-full
        pages stay (a full ``VACUUM`` packs them). An older file, without
        auto-vacuum, keeps its free pages for later writes. Another writer
        holding the file past the busy timeout only leaves the pages for the
        next time.
        """
        if memory:
            return
        async with driver.execute("PRAGMA auto_vacuum") as cursor:
            (mode,) = await cursor.fetchone()
        if mode != _AUTO_VACUUM_INCREMENTAL:
            return
        try:
            # executescript runs the pragma to its end; execute() steps it once: one page.
            await driver.executescript("BEGIN IMMEDIATE; PRAGMA incremental_vacuum; COMMIT")
        except sqlite3.OperationalError as exc:
            if driver.in_transaction:
                await driver.rollback()
            if exc.sqlite_errorcode & 0xFF not in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED):
                raise

    def after_open(self, connection: Connection, *, memory: bool) -> None:
        """Switch a file to write-ahead logging (a persistent property of the file).

        Only once the schema is known to be ours: the switch rewrites the file
        header, and a file we refuse must be left exactly as it was. It needs the
        file to itself and SQLite does not wait here, so the caller retries.
        """
        if memory:
            return
        mode = outside_transaction(connection, "PRAGMA journal_mode")
        if not mode or str(mode[0][0]).lower() != "wal":
            outside_transaction(connection, "PRAGMA journal_mode=WAL")

    @contextmanager
    def reading_once(self, reader: Reader) -> Iterator[None]:
        """A small page cache meanwhile, the usual one after.

        Pages read once would only fill the cache, which is per connection and
        stays allocated: memory the process needs for what it read.
        """
        if reader.memory:  # the cache is the database
            yield
            return
        reader.execute(f"PRAGMA cache_size={_CACHE_SIZE_READING_ONCE}")
        try:
            yield
        finally:
            reader.execute(f"PRAGMA cache_size={_CACHE_SIZE}")

    def decode_uuid(self, stored: Any) -> uuid.UUID:
        """32 hex digits, as SQLAlchemy's ``Uuid`` stores one on SQLite."""
        return uuid.UUID(hex=stored)

    def encode_uuid(self, value: uuid.UUID) -> Any:
        """32 hex digits, as SQLAlchemy's ``Uuid`` stores one on SQLite."""
        return value.hex

    async def read_directly(
        self,
        driver: Any,
        work: Callable[[Reader], T],
        *,
        memory: bool,
        then_write: Callable[[T], Sequence[Statement]] | None = None,
    ) -> T:
        """One hop to aiosqlite's thread for a whole read transaction (see :meth:`store_one`).

        A write after it (an access stamp) goes in the same hop, in ``BEGIN IMMEDIATE``.
        """
        return await aiosqlite_hop.run_in_one_hop(
            driver, self._read_blocking, work, memory, then_write
        )

    def _read_blocking(
        self,
        connection: Any,
        work: Callable[[Reader], T],
        memory: bool,
        then_write: Callable[[T], Sequence[Statement]] | None,
    ) -> T:
        result = Reader.in_transaction(connection, self, work, memory=memory)
        written = then_write(result) if then_write is not None else ()
        if written:
            connection.execute("BEGIN IMMEDIATE")
            try:
                for statement in written:
                    connection.execute(*statement)
                connection.execute("COMMIT")
            except BaseException:
                if connection.in_transaction:
                    connection.execute("ROLLBACK")
                raise
        return result

    @contextmanager
    def migrating(self, connection: Connection) -> Iterator[None]:
        """Foreign keys off, outside any transaction (inside one SQLite ignores the pragma).

        A batch migration rebuilds a table; with foreign keys on, dropping the old
        parent table would cascade-delete every child row. The migration checks
        ``PRAGMA foreign_key_check`` before it commits instead.

        A file still empty is about to be created: it will be
        ``auto_vacuum=INCREMENTAL``, so that :meth:`vacuum` is cheap (see
        :func:`_incremental_when_created`). An existing file keeps its mode.
        """
        if outside_transaction(connection, "PRAGMA page_count")[0][0] == 0:
            _incremental_when_created(connection)
        outside_transaction(connection, "PRAGMA foreign_keys=OFF")
        try:
            yield
        finally:
            outside_transaction(connection, "PRAGMA foreign_keys=ON")


register(SqliteBackend())
