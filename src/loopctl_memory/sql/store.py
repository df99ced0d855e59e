"""SqlMemoryStore: the LoopMemory contract over SQLAlchemy 2 async, and open_store."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable
from contextlib import AbstractAsyncContextManager
from types import TracebackType
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from loopctl_memory import migrate
from loopctl_memory.entry import (
    ConsolidationStats,
    MemoryEntry,
    check_entry,
    validate_id,
    validate_query,
)
from loopctl_memory.errors import InvalidEntryError, StorageError
from loopctl_memory.flat import FlatBatch, flatten
from loopctl_memory.scoring import parse_query
from loopctl_memory.sql import index, repository, search
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.boundary import translate_errors
from loopctl_memory.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    PoolOptions,
    Target,
    create_engine,
    resolve_target,
)
from loopctl_memory.sql.ranking_state import RankingState
from loopctl_memory.sql.repository import Summary
from loopctl_memory.sql.tuning import Tuning

T = TypeVar("T")


class SqlMemoryStore:
    """The loopctl memory contract, persistent, on SQLite or PostgreSQL.

    Open one with :func:`open_store`. Every operation is one transaction: it
    commits on success, and on any failure rolls back and leaves the store as
    it was. Writes on SQLite start as ``BEGIN IMMEDIATE`` so concurrent writers
    wait (up to ``busy_timeout``) instead of failing. A ``:memory:`` database is
    one connection, so its operations run one at a time.
    """

    def __init__(self, engine: AsyncEngine, target: Target, tuning: Tuning | None = None) -> None:
        self._engine = engine
        self._target = target
        self._backend = target.backend
        self._tuning = tuning or Tuning()
        # :memory: is a single connection and so a single transaction: serialise.
        self._serial: AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if target.is_memory else contextlib.nullcontext()
        )
        self._closed = False
        self._ranking = RankingState(self._tuning)  # this process's copy for retrieval
        # One retrieval at a time uses the copy, and opens its transaction only once it
        # holds the lock: the copy then only ever moves forward in time.
        self._ranking_lock = asyncio.Lock()
        self._watermark_seen = 0  # when single stores should check the tail's length

    @classmethod
    async def open(
        cls,
        target: str | os.PathLike[str] = ":memory:",
        *,
        migrate: bool | Literal["create"] = True,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
        echo: bool = False,
        pool_size: int = PoolOptions.pool_size,
        max_overflow: int = PoolOptions.max_overflow,
        pool_timeout: float = PoolOptions.pool_timeout,
        statement_timeout: float | None = PoolOptions.statement_timeout,
        connect_timeout: float = PoolOptions.connect_timeout,
        tuning: Tuning | None = None,
    ) -> SqlMemoryStore:
        """Connect to ``target`` and check (or bring) its schema to the current revision.

        The pool and timeout options apply to PostgreSQL (see :func:`open_store`).

        Raises:
            SchemaError: the schema is unknown, newer, or older and ``migrate`` is false.
            StorageError: the database cannot be opened.

        """
        resolved = resolve_target(target)
        with translate_errors(f"open {resolved.describe()}"):
            pool = PoolOptions(
                pool_size, max_overflow, pool_timeout, statement_timeout, connect_timeout
            )
            engine = create_engine(resolved, busy_timeout=busy_timeout, echo=echo, pool=pool)
        store = cls(engine, resolved, tuning)
        try:
            with translate_errors(f"open {resolved.describe()}"):
                async with engine.connect() as connection:
                    await connection.run_sync(
                        migrate_schema, upgrade=migrate is True, create=migrate is not False
                    )
            await _after_open(engine, resolved, busy_timeout)
        except BaseException:
            await store.close()
            raise
        return store

    @property
    def target(self) -> str:
        """Where the store lives (":memory:", a file path, or a URL without password)."""
        return self._target.describe()

    @property
    def engine(self) -> AsyncEngine:
        """The SQLAlchemy engine, for tools such as migrations; not for writing entries."""
        return self._engine

    # --- the LoopMemory contract ---

    async def store(self, entry: MemoryEntry) -> None:
        """Store one entry durably.

        Raises:
            InvalidEntryError: the entry is not valid (nothing is stored).
            DuplicateEntryError: an entry with this id is already stored.
            StorageError: the database refused the write.

        """
        batch = flatten((check_entry(entry),))
        backend = self._backend
        if not backend.works_in_one_hop:
            await self.store_flat(batch)
            return
        seq = await self._run_raw("store", lambda driver: backend.store_one(driver, batch))
        if seq - self._watermark_seen >= self._tuning.tail_limit:
            limit = self._tuning.tail_limit
            self._watermark_seen = await self._run(
                "index", lambda c: c.run_sync(index.shorten_tail, limit), write=True
            )

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Store every entry in one transaction, in order: all of them or none."""
        await self.store_flat(flatten(check_entry(entry) for entry in entries))

    async def store_flat(self, batch: FlatBatch) -> None:
        """Store a batch of already checked, flattened entries in one transaction.

        The lane under :meth:`store` and :meth:`store_many`, for a batch built by
        :func:`loopctl_memory.flat.flatten` or read by
        :func:`loopctl_memory.jsonl.read_batches` (as an import does).

        Raises:
            DuplicateEntryError: an id repeats in the batch or is already stored.
            StorageError: the database refused the write (nothing is stored).

        """
        if not len(batch):
            return
        tuning = self._tuning
        self._watermark_seen = await self._run(
            "store", lambda c: repository.insert_entries(c, batch, tuning), write=True
        )

    async def retrieve(self, query: str, limit: int) -> list[MemoryEntry]:
        """Return up to ``limit`` entries exactly as the reference ranks them.

        Raises:
            InvalidEntryError: ``query`` is not a str or ``limit`` is not an int >= 0.

        """
        validate_query(query, limit)
        parsed = parse_query(query)

        ranking, backend = self._ranking, self._backend

        def answer(reader: Reader) -> list[MemoryEntry]:
            ranking.refresh(reader)
            return repository.entries_by_seq(reader, search.top_seqs(ranking, parsed, limit))

        memory = self._target.is_memory
        async with self._ranking_lock:
            if backend.works_in_one_hop:  # one hop to the driver's thread: see store()
                return await self._run_raw(
                    "retrieve", lambda driver: backend.read_directly(driver, answer, memory=memory)
                )
            return await self._run(
                "retrieve",
                lambda connection: connection.run_sync(
                    lambda sync: answer(Reader.of(sync, memory=memory))
                ),
                write=False,
            )

    async def consolidate(self) -> ConsolidationStats:
        """Delete every entry whose relevance, as binary32, is below 0.05, in one transaction."""

        async def work(connection: AsyncConnection) -> tuple[int, int]:
            return await repository.count(connection), await repository.prune(connection)

        before, pruned = await self._run("consolidate", work, write=True)
        return ConsolidationStats(
            entries_before=before, entries_after=before - pruned, pruned=pruned
        )

    async def count(self) -> int:
        """Return the number of stored entries."""
        return await self._run("count", repository.count, write=False)

    async def is_empty(self) -> bool:
        """Return whether no entry is stored."""
        return await self.count() == 0

    # --- beyond the contract ---

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None."""
        entry_id = validate_id(entry_id)
        return await self._run("get", lambda c: repository.get_entry(c, entry_id), write=False)

    async def delete(self, entry_id: uuid.UUID) -> bool:
        """Delete the entry with this id; return whether it existed."""
        entry_id = validate_id(entry_id)
        return await self._run("delete", lambda c: repository.delete_entry(c, entry_id), write=True)

    async def iter_entries(self, batch_size: int = 1_000) -> AsyncIterator[MemoryEntry]:
        """Yield every entry in insertion order, reading ``batch_size`` at a time.

        Each batch is its own short read transaction, so the store stays usable
        while you iterate; an entry stored meanwhile may or may not be included.
        """
        if batch_size < 1:
            raise InvalidEntryError(f"batch_size must be >= 1, got {batch_size}")
        after = 0
        while True:
            read_page = functools.partial(repository.page, after_seq=after, size=batch_size)
            batch = await self._run("export", read_page, write=False)
            for _, entry in batch:
                yield entry
            if len(batch) < batch_size:
                return
            after = batch[-1][0]

    async def summary(self) -> Summary:
        """Count the entries: in all, by category, and in ten relevance bins."""
        return await self._run("summary", repository.summarise, write=False)

    async def storage_bytes(self) -> int:
        """Bytes the store's tables and indexes take (a SQLite file's write-ahead log excluded)."""
        return await self._run("measure the database", repository.storage_bytes, write=False)

    async def schema_revision(self) -> str | None:
        """The alembic revision the database is at."""
        self._check_open()
        async with self._serial:
            with translate_errors("read the schema revision"):
                async with self._engine.connect() as connection:
                    return await connection.run_sync(migrate.current)

    async def close(self) -> None:
        """Release every connection. Idempotent."""
        if self._closed:
            return
        self._closed = True
        with translate_errors("close"):
            await self._engine.dispose()

    async def __aenter__(self) -> SqlMemoryStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    def __del__(self) -> None:
        if not getattr(self, "_closed", True):
            warnings.warn(
                f"SqlMemoryStore({self.target}) was never closed; use `async with open_store(...)`"
                " or `await store.close()`",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<SqlMemoryStore {self.target} ({state})>"

    # --- the unit of work ---

    def _check_open(self) -> None:
        if self._closed:
            raise StorageError(f"the store at {self.target} is closed")

    async def _run(
        self,
        action: str,
        work: Callable[[AsyncConnection], Awaitable[T]],
        *,
        write: bool,
    ) -> T:
        """Run ``work`` as one transaction: commit if it succeeds, roll back if anything fails.

        The transaction runs in a task of its own that the caller's cancellation
        cannot interrupt half way (an interrupted statement makes SQLAlchemy drop
        the connection, and with it a whole ``:memory:`` database). A cancelled
        caller instead makes the transaction roll back at its next step and then
        sees CancelledError; only a commit already under way still completes.
        """
        self._check_open()
        abort = asyncio.Event()
        async with self._serial:
            unit = asyncio.ensure_future(self._unit_of_work(action, work, write, abort))
            return await _await_uncancellable(unit, abort)

    async def _run_raw(self, action: str, work: Callable[[Any], Awaitable[T]]) -> T:
        """Like ``_run``, with ``work`` given the driver's own connection.

        ``work`` owns the transaction (it begins, commits or rolls back): for the
        single store an agent makes after every tool call. A caller cancelled
        meanwhile sees CancelledError once the transaction has ended either way
        (it is too short to stop half way).
        """
        self._check_open()
        async with self._serial:
            unit = asyncio.ensure_future(self._raw_unit_of_work(action, work))
            return await _await_uncancellable(unit, asyncio.Event())

    async def _raw_unit_of_work(self, action: str, work: Callable[[Any], Awaitable[T]]) -> T:
        with translate_errors(action):
            async with self._engine.connect() as connection:
                driver: Any = (await connection.get_raw_connection()).driver_connection
                return await work(driver)

    async def _unit_of_work(
        self,
        action: str,
        work: Callable[[AsyncConnection], Awaitable[T]],
        write: bool,
        abort: asyncio.Event,
    ) -> T:
        with translate_errors(action):
            async with self._engine.connect() as connection:
                if write:
                    await connection.execution_options(**self._backend.begin_options(write=True))
                async with connection.begin() as transaction:
                    result = await work(connection)
                    if abort.is_set():
                        await transaction.rollback()
                return result


async def _await_uncancellable(unit: asyncio.Future[T], abort: asyncio.Event) -> T:
    """Wait for ``unit`` to finish even if the caller is cancelled meanwhile.

    A cancellation sets ``abort`` (the unit then rolls back at its next step) and
    is re-raised once the unit is done, so the connection is never dropped
    half way through a statement.
    """
    cancelled = False
    while not unit.done():
        try:
            await asyncio.wait((unit,))
        except asyncio.CancelledError:
            cancelled = True
            abort.set()
    if cancelled:
        unit.exception()  # retrieved, so asyncio does not log it as never awaited
        raise asyncio.CancelledError
    return unit.result()


def migrate_schema(connection: Connection, *, upgrade: bool, create: bool | None = None) -> None:
    """Bring the schema to head, or check it is there (see :func:`migrate.ensure_schema`)."""
    migrate.ensure_schema(connection, upgrade=upgrade, create=create)


async def _after_open(engine: AsyncEngine, target: Target, busy_timeout: float) -> None:
    """The backend's last step of an open (a SQLite file: WAL), retried while another opens it.

    Switching a file to WAL needs the file to itself and SQLite fails at once
    instead of waiting, so several processes opening a new file together retry
    here, up to ``busy_timeout``.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + busy_timeout
    delay = 0.005
    while True:
        try:
            with translate_errors(f"open {target.describe()}"):
                async with engine.connect() as connection:
                    await connection.run_sync(target.backend.after_open, memory=target.is_memory)
        except StorageError as exc:
            if "locked" not in str(exc) or loop.time() >= deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.1)
        else:
            return


class _OpenStore:
    """What :func:`open_store` returns: await it, or use it as an async context manager."""

    def __init__(self, target: str | os.PathLike[str], options: dict[str, Any]) -> None:
        self._target = target
        self._options = options
        self._store: SqlMemoryStore | None = None

    def __await__(self) -> Generator[Any, None, SqlMemoryStore]:
        return SqlMemoryStore.open(self._target, **self._options).__await__()

    async def __aenter__(self) -> SqlMemoryStore:
        self._store = await SqlMemoryStore.open(self._target, **self._options)
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()


def open_store(target: str | os.PathLike[str] = ":memory:", **options: Any) -> _OpenStore:
    """Open a :class:`SqlMemoryStore` at ``target``, migrating its schema to head.

    ``target`` is ``":memory:"``, a file path, or a SQLAlchemy URL
    (``sqlite+aiosqlite:///...``, ``postgresql+asyncpg://...``).

    Options:
        migrate (bool | "create"): create the schema of a new database and
            upgrade an older one (True, the default); create a new one but never
            upgrade ("create"); or neither (False): then an older or empty
            database raises SchemaError.
        busy_timeout (float): seconds a writer waits for another writer's lock
            before StorageError (default 5; on PostgreSQL the ``lock_timeout``).
        echo (bool): log every SQL statement.
        pool_size, max_overflow (int): PostgreSQL connections kept open (default
            5) and opened beyond them under load (default 10).
        pool_timeout (float): seconds to wait for a free connection (default 30).
        statement_timeout (float | None): seconds one statement may run on
            PostgreSQL before the server cancels it (default: no limit).
        connect_timeout (float): seconds to wait for PostgreSQL when connecting
            (default 10).
        tuning (Tuning): the token index's and the search's thresholds
            (:class:`loopctl_memory.sql.tuning.Tuning`); they set speed, never answers.

    Example:
        >>> async def main() -> None:
        ...     async with open_store("memory.db") as store:
        ...         await store.store(MemoryEntry(MemoryCategory.FACT, "CI runs make test"))

    """
    return _OpenStore(target, options)
