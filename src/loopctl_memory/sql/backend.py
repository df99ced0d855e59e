"""Where SQLite and PostgreSQL differ, in one place: a :class:`Backend` for each.

Everything else under ``sql/`` is written once, in SQLAlchemy Core or in plain
SQL with ``?`` placeholders, and asks the backend of its connection
(:func:`backend_of`) for what the two databases do differently: engine options
and transaction handling, how a batch of rows is bound, text encoding, lists of
integers, substring tests, statistics and storage size.
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

import aiosqlite
from sqlalchemy import event
from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine
from sqlalchemy.pool import StaticPool

from loopctl_memory.errors import StorageError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.tables import ENTRY_FIELDS, INSERT_TAGS, metadata

if TYPE_CHECKING:
    from loopctl_memory.sql.engine import PoolOptions

_BEGIN_MODE = "loopctl_begin"  # execution option read by the "begin" listeners
WRITE = "IMMEDIATE"

PAGE_SIZE = 8192
"""Bytes a page of a new SQLite file; a file keeps the page size it was created with.

Larger than SQLite's default 4096: half the write-ahead log frames and checkpoint
calls for a batch write, the same speed for single stores and retrieval."""

WRITERS_LOCK = 0x6C6F6F70_6D656D  # "loopmem": the PostgreSQL advisory lock writers queue on

EntryRow = tuple[Any, ...]
T = TypeVar("T")
Statement = tuple[str, Sequence[Any]]
"""SQL with ``?`` placeholders, and its arguments."""

_INSERT_ONE = (
    f"INSERT INTO entries ({', '.join(ENTRY_FIELDS)}) VALUES ("  # noqa: S608 - our own names
    "(SELECT max(coalesce(max(seq), 0), coalesce((SELECT max(indexed_through, removed_through)"
    f" FROM index_state), 0)) + 1 FROM entries), {', '.join('?' * (len(ENTRY_FIELDS) - 1))})"
)


class Backend:
    """What one database does its own way. One instance per dialect, shared."""

    name: ClassVar[str]
    works_in_one_hop: ClassVar[bool] = False
    """Whether :meth:`store_one` and :meth:`read_directly` run a single store and a retrieval
    in one hop to the driver's thread, faster than SQLAlchemy's statement-by-statement path."""

    def engine_options(
        self, *, memory: bool, busy_timeout: float, pool: PoolOptions, read_only: bool = False
    ) -> dict[str, Any]:
        """Keyword arguments for ``create_async_engine`` besides the URL."""
        raise NotImplementedError

    def read_only_url(self, url: URL) -> URL:
        """``url`` opened so that the database refuses every write."""
        return url

    async def drop_cached_pages(self, driver: Any) -> None:
        """Make the driver's connection read its next pages from the database (SQLite)."""
        del driver

    def configure(self, engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
        """Install the engine's connection and transaction listeners."""
        raise NotImplementedError

    def begin_options(self, *, write: bool) -> dict[str, Any]:
        """Execution options for the connection's next transactions: a write or a read."""
        return {_BEGIN_MODE: WRITE if write else ""}

    def encode(self, text: str) -> Any:
        """A str as the driver takes it for a ``Utf8Text`` column (raw SQL paths)."""
        return text

    def decode(self, stored: Any) -> str:
        """A ``Utf8Text`` value as the driver returns it (raw SQL paths), as a str."""
        return str(stored)

    def sql(self, statement: str) -> str:
        """``statement``, written with ``?`` placeholders, in the driver's style."""
        return statement

    def entry_rows(
        self, batch: FlatBatch, first_seq: int, scope_ids: Mapping[str, int]
    ) -> list[EntryRow]:
        """The batch's entries as rows for ``INSERT INTO entries (seq, ...)``, numbered on.

        ``scope_ids``: the id of each scope the batch names.
        """
        return [
            (first_seq + index, *entry[:10], scope_ids[entry[10]])
            for index, entry in enumerate(batch.entries)
        ]

    def tag_rows(self, batch: FlatBatch, first_seq: int) -> list[EntryRow]:
        """The batch's tags as rows for ``INSERT INTO tags (entry_seq, ...)``."""
        return [(first_seq + index, *rest) for index, *rest in batch.tags]

    def storage_bytes(self, connection: Connection) -> int:
        """Bytes the store's tables and indexes take in the database."""
        raise NotImplementedError

    def free_bytes(self, connection: Connection, *, memory: bool) -> int | None:
        """Bytes of free pages inside the database, or None where that is not known."""
        del connection, memory
        return None

    async def vacuum(self, driver: Any, *, memory: bool, where: str) -> None:
        """Give the database's free space back, on the driver's connection, outside a transaction.

        ``where``: the database, for messages.
        """
        raise NotImplementedError

    async def give_back_free_pages(self, driver: Any, *, memory: bool) -> None:
        """Cheaply give back what the last deletes freed, where the database can (SQLite)."""
        del driver, memory

    def after_indexing(self, connection: Connection, tables: list[str]) -> None:
        """Called once a write added a block of postings; nothing to do by default."""

    async def store_one(self, driver: Any, batch: FlatBatch, scope_id: int) -> int:
        """Store a batch of one entry, in scope ``scope_id``, in a transaction of its own.

        On the driver's connection; returns the entry's seq. Only where
        :attr:`works_in_one_hop`.
        """
        raise NotImplementedError

    @contextmanager
    def migrating(self, connection: Connection) -> Iterator[None]:
        """Around a migration's transaction; nothing to do by default."""
        yield

    def after_open(self, connection: Connection, *, memory: bool) -> None:
        """Run once the schema is known to be ours, outside any transaction; may raise "locked"."""

    @contextmanager
    def reading_once(self, reader: Reader) -> Iterator[None]:
        """Around a read of most of the database that will not be read again soon."""
        yield

    def decode_uuid(self, stored: Any) -> uuid.UUID:
        """A ``Uuid`` column's value as the driver returns it (raw SQL paths), as a UUID."""
        return stored if type(stored) is uuid.UUID else uuid.UUID(str(stored))

    async def read_directly(
        self,
        driver: Any,
        work: Callable[[Reader], T],
        *,
        memory: bool,
        then_write: Callable[[T], Statement | None] | None = None,
    ) -> T:
        """Run ``work`` in one read transaction on the driver's connection, in one hop.

        ``then_write``: given what ``work`` returned, a statement (``?``
        placeholders) to run next in a write transaction of its own, or None.
        Only where :attr:`works_in_one_hop`.
        """
        raise NotImplementedError


_CACHE_SIZE = -65536  # KiB (negative): the random-UUID unique index misses the default 2 MiB
_CACHE_SIZE_READING_ONCE = -2048


def _in_wal_mode(file: str) -> bool:
    """Whether the SQLite file's header says write-ahead logging (read and write versions 2)."""
    try:
        with open(file, "rb") as opened:
            header = opened.read(20)
    except OSError:
        return False
    return len(header) == 20 and header[18:20] == b"\x02\x02"


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
    works_in_one_hop = callable(getattr(aiosqlite.Connection, "_execute", None))

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

    def read_only_url(self, url: URL) -> URL:
        """The file as a URI, ``mode=ro``; ``immutable=1`` where ``mode=ro`` cannot open it.

        A file in write-ahead-log mode needs its ``-shm`` file: a read-only
        connection creates it, unless the directory cannot be written (a
        read-only mount, a directory of another user). There, when no ``-shm``
        exists, no process has the database open in WAL mode, and SQLite can read
        it only as ``immutable``: it then assumes that the file does not change
        while it is open (a writer that starts later, with the rights to, is not
        seen).
        """
        file = os.path.abspath(str(url.database))
        query = {"mode": "ro"}
        if (
            _in_wal_mode(file)
            and not os.path.exists(f"{file}-shm")
            and not os.access(os.path.dirname(file), os.W_OK)
        ):
            query = {"immutable": "1"}
        return url.set(database=Path(file).as_uri(), query={**query, "uri": "true"})

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
            # The dialect's own connect, with its arguments from the URL, through _open_aiosqlite.
            return dialect.loaded_dbapi.connect(*cargs, async_creator_fn=_open_aiosqlite, **cparams)

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
            mode = connection.get_execution_options().get(_BEGIN_MODE, "")
            connection.exec_driver_sql(f"BEGIN {mode}".rstrip())

    async def store_one(self, driver: Any, batch: FlatBatch, scope_id: int) -> int:
        """One hop to aiosqlite's thread for the whole transaction, where a batch makes a dozen.

        aiosqlite has no public call that runs a function in its thread, so this
        uses its ``_execute`` (``tests/unit/test_single_store.py`` pins the
        versions it is known on); without it, single entries go as batches.
        """
        seq: int = await driver._execute(self._store_blocking, driver._conn, batch, scope_id)
        return seq

    def _store_blocking(self, connection: Any, batch: FlatBatch, scope_id: int) -> int:
        """Store a batch of one in its own transaction on a ``sqlite3`` connection; its seq.

        The seq comes from the statement itself (above every entry and the
        watermark, as ``index.write_position`` reads it).
        """
        connection.execute("BEGIN IMMEDIATE")
        try:
            row = (*batch.entries[0][:10], scope_id)
            seq = int(connection.execute(_INSERT_ONE, row).lastrowid)
            if batch.tags:
                connection.executemany(INSERT_TAGS, self.tag_rows(batch, seq))
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        return seq

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
        whole free pages: 0.4% of a file where a pass pruned a tenth of the
        entries by relevance, against 8.5%). It rewrites the whole file (about as
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

    async def read_directly(
        self,
        driver: Any,
        work: Callable[[Reader], T],
        *,
        memory: bool,
        then_write: Callable[[T], Statement | None] | None = None,
    ) -> T:
        """One hop to aiosqlite's thread for a whole read transaction (see :meth:`store_one`).

        A write after it (an access stamp) goes in the same hop, in ``BEGIN IMMEDIATE``.
        """
        result: T = await driver._execute(
            self._read_blocking, driver._conn, work, memory, then_write
        )
        return result

    def _read_blocking(
        self,
        connection: Any,
        work: Callable[[Reader], T],
        memory: bool,
        then_write: Callable[[T], Statement | None] | None,
    ) -> T:
        connection.execute("BEGIN")
        try:
            result = work(Reader(connection.cursor, self, memory=memory))
        finally:
            connection.execute("ROLLBACK")  # it wrote nothing: ending it either way is the same
        written = then_write(result) if then_write is not None else None
        if written is not None:
            connection.execute("BEGIN IMMEDIATE")
            try:
                connection.execute(*written)
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


class PostgresqlBackend(Backend):
    """PostgreSQL through asyncpg: a pool, writers queued on one advisory lock, text as bytes."""

    name = "postgresql"

    def engine_options(
        self, *, memory: bool, busy_timeout: float, pool: PoolOptions, read_only: bool = False
    ) -> dict[str, Any]:
        """The pool, the lock and statement timeouts, REPEATABLE READ reads.

        ``read_only``: every transaction of the session is read-only, by the server's rule.
        """
        del memory
        settings = {"lock_timeout": str(_milliseconds(busy_timeout))}
        if read_only:
            settings["default_transaction_read_only"] = "on"
        if pool.statement_timeout is not None:
            settings["statement_timeout"] = str(_milliseconds(pool.statement_timeout))
        return {
            "isolation_level": "REPEATABLE READ",
            "pool_size": pool.pool_size,
            "max_overflow": pool.max_overflow,
            "pool_timeout": pool.pool_timeout,
            "pool_pre_ping": True,
            "connect_args": {"server_settings": settings, "timeout": pool.connect_timeout},
        }

    def configure(self, engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
        """A write transaction first takes the writers' lock."""

        @event.listens_for(engine.sync_engine, "begin")
        def _on_begin(connection: Connection) -> None:
            if connection.get_execution_options().get(_BEGIN_MODE) == WRITE:
                # Held until COMMIT or ROLLBACK: one writer at a time, as on SQLite.
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({WRITERS_LOCK})")

    def begin_options(self, *, write: bool) -> dict[str, Any]:
        """Writes in READ COMMITTED behind the lock; reads in one REPEATABLE READ snapshot."""
        isolation = "READ COMMITTED" if write else "REPEATABLE READ"
        return {**super().begin_options(write=write), "isolation_level": isolation}

    def encode(self, text: str) -> Any:
        """UTF-8 bytes: the column is BYTEA (see ``Utf8Text``)."""
        return text.encode()

    def decode(self, stored: Any) -> str:
        """Bytes back to a str."""
        return bytes(stored).decode()

    def sql(self, statement: str) -> str:
        """``$1``, ``$2``... for asyncpg (our statements never hold a literal ``?``)."""
        pieces = statement.split("?")
        numbered = [f"{piece}${number}" for number, piece in enumerate(pieces[:-1], start=1)]
        return "".join(numbered) + pieces[-1]

    def entry_rows(
        self, batch: FlatBatch, first_seq: int, scope_ids: Mapping[str, int]
    ) -> list[EntryRow]:
        """A UUID, a bool and text as bytes, as asyncpg binds them."""
        return [
            (
                first_seq + index,
                uuid.UUID(hex=hex_id),
                category,
                memory.encode(),
                memory_lower.encode(),
                relevance,
                created_at_us,
                access_count,
                bool(validated),
                last_accessed_us,
                last_decayed_us,
                scope_ids[scope],
            )
            for index, (
                hex_id,
                category,
                memory,
                memory_lower,
                relevance,
                created_at_us,
                access_count,
                validated,
                last_accessed_us,
                last_decayed_us,
                scope,
            ) in enumerate(batch.entries)
        ]

    def tag_rows(self, batch: FlatBatch, first_seq: int) -> list[EntryRow]:
        """Tags as bytes."""
        return [
            (first_seq + index, position, tag.encode(), lower.encode())
            for index, position, tag, lower in batch.tags
        ]

    def storage_bytes(self, connection: Connection) -> int:
        """The total relation size of our tables in the current schema."""
        return int(
            connection.exec_driver_sql(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind = 'r' AND n.nspname = current_schema() "
                "AND c.relname IN ('entries', 'tags', 'tokens', 'token_blocks', 'tag_values', "
                "'tag_blocks', 'index_state', 'changes', 'alembic_version')"
            ).scalar_one()
        )

    async def vacuum(self, driver: Any, *, memory: bool, where: str) -> None:
        """A plain ``VACUUM`` of our tables, outside a transaction (PostgreSQL refuses one in it).

        It makes the space of deleted rows reusable by later writes; it does not
        shrink the files (only ``VACUUM FULL`` does, and it locks every table
        meanwhile). Autovacuum would do the same, later.
        """
        del memory, where
        await driver.execute(f"VACUUM {', '.join(sorted(metadata.tables))}")

    def after_indexing(self, connection: Connection, tables: list[str]) -> None:
        """ANALYZE our tables once a fifth of the entries changed since the last time.

        Autovacuum does it too, but up to a minute later; until then the planner
        takes a bulk-loaded table for an empty one and scans where it should seek.
        """
        changed, live = connection.exec_driver_sql(
            "SELECT coalesce(n_mod_since_analyze, 0), coalesce(n_live_tup, 0) "
            "FROM pg_stat_user_tables WHERE relid = 'entries'::regclass"
        ).one()
        if changed > 0.2 * live:
            connection.exec_driver_sql(f"ANALYZE {', '.join(tables)}")


async def _open_aiosqlite(*args: Any, **kwargs: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect``, which on failure also waits for the worker thread to stop.

    When opening fails (a missing directory, a file it may not read), aiosqlite
    queues the stop of its worker thread without waiting for it; the thread then
    hands the stop's result to the event loop, and if the loop has closed
    meanwhile (``asyncio.run`` returning, a test ending) it dies with "Event loop
    is closed". Waiting here keeps the loop open until then.
    """
    connection = aiosqlite.connect(*args, **kwargs)
    # Before 0.22 the connection is the thread itself.
    worker = connection if isinstance(connection, threading.Thread) else connection._thread
    worker.daemon = True  # as SQLAlchemy makes the threads it starts: never keep the process
    try:
        return await connection
    except BaseException:
        await asyncio.to_thread(worker.join, 1.0)  # it has nothing left to do but stop
        raise


def _milliseconds(seconds: float) -> int:
    return max(1, round(seconds * 1000))


_BACKENDS: dict[str, Backend] = {"sqlite": SqliteBackend(), "postgresql": PostgresqlBackend()}


def backend_named(name: str) -> Backend:
    """The backend of a dialect name ("sqlite", "postgresql")."""
    return _BACKENDS[name]


def backend_of(connection: Connection | AsyncConnection) -> Backend:
    """The backend of a connection's database."""
    return _BACKENDS[connection.dialect.name]


def outside_transaction(connection: Connection, statement: str) -> list[Any]:
    """Run ``statement`` on the driver's own connection and return its rows.

    For what SQLite refuses or ignores inside a transaction (the journal mode,
    ``PRAGMA foreign_keys``): ``Connection.execute`` would begin one first. The
    connection must not be in a transaction.
    """
    cursor = connection.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(statement)
        return list(cursor.fetchall())
    finally:
        cursor.close()


class Reader:
    """The statements of one read transaction, through the driver's own cursors.

    For the reads a process makes to keep its copy for ranking, and for the
    entries it returns: SQLAlchemy's row objects cost more per row than the
    rest of the work, and its async drivers' ordinary cursors fetch every row
    at once (a server-side cursor fetches a chunk at a time, so a whole table
    never sits in memory). Statements use ``?`` placeholders.
    """

    def __init__(self, cursor: Callable[[], Any], backend: Backend, *, memory: bool) -> None:
        self._cursor = cursor
        self.backend = backend
        self.memory = memory
        """Whether the database is SQLite's ``:memory:``."""

    @classmethod
    def of(cls, connection: Connection, *, memory: bool) -> Reader:
        """A reader in the transaction of a SQLAlchemy connection (inside ``run_sync``)."""

        def cursor() -> Any:
            return connection.connection.cursor(server_side=True)

        return cls(cursor, backend_of(connection), memory=memory)

    def chunks(
        self, statement: str, parameters: Sequence[Any], size: int
    ) -> Iterator[Sequence[Any]]:
        """The rows, ``size`` at a time."""
        cursor = self._cursor()
        try:
            cursor.execute(self.backend.sql(statement), tuple(parameters))
            while rows := cursor.fetchmany(size):
                yield rows
        finally:
            cursor.close()

    def all(self, statement: str, parameters: Sequence[Any] = ()) -> list[Any]:
        """Every row."""
        return [row for rows in self.chunks(statement, parameters, 4_096) for row in rows]

    def one(self, statement: str, parameters: Sequence[Any] = ()) -> Any:
        """The only row."""
        (row,) = self.all(statement, parameters)
        return row

    def execute(self, statement: str) -> None:
        """A statement with no rows (a pragma)."""
        cursor = self._cursor()
        try:
            cursor.execute(statement)
        finally:
            cursor.close()
