"""The unit of work: how every operation of a store reaches the database, as one transaction.

A :class:`UnitOfWork` is shared by a store and all its views. Each operation
runs as one transaction on one pooled connection, through one of two lanes:

- the connection lane: SQLAlchemy's ``AsyncConnection``, in a transaction the
  unit begins and commits (or rolls back on any failure);
- the driver lane: a whole transaction in one hop to aiosqlite's thread, on
  the driver's own connection, for the two calls an agent makes most (a single
  ``store`` after every tool call, ``retrieve`` before every turn), where the
  backend can (:attr:`~loopctl_memory.sql.backend.Backend.works_in_one_hop`);
- the caller's lane: a point read on the calling thread, for the blocking API,
  where the database is a SQLite file (:mod:`~loopctl_memory.sql.database.caller_lane`,
  :meth:`UnitOfWork.read_here`).

The first two lanes are chosen here, in :meth:`UnitOfWork.read` and
:meth:`UnitOfWork.store_batch`, not by each operation. Around every unit: the
store's state is checked (closed, read-only, its file lost), a caller's
cancellation never interrupts a statement half way, errors are translated
(:mod:`~loopctl_memory.sql.database.boundary`), and a SQLite file is watched
(:mod:`~loopctl_memory.sql.files.watch`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from loopctl_memory.errors import ReadOnlyStoreError, StorageError, StoreClosedError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.backend import Reader, Statement, StoredBatch
from loopctl_memory.sql.database.boundary import KEY_RACE_ATTEMPTS, KeyRaceError, translate_errors
from loopctl_memory.sql.database.caller_lane import CallerLane
from loopctl_memory.sql.database.engine import Target
from loopctl_memory.sql.files.held import HeldFile, hold
from loopctl_memory.sql.files.watch import PAGES_AS_OF, FileWatch
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.rows import repository

T = TypeVar("T")


class UnitOfWork:
    """Runs a store's operations, each as one transaction, on its engine.

    Shared by a store and every view of it. A ``:memory:`` database is a single
    connection and so a single transaction: its units run one at a time.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        target: Target,
        *,
        read_only: bool = False,
        held: HeldFile | None = None,
        caller_lane: CallerLane | None = None,
    ) -> None:
        self.engine = engine
        self.target = target
        self.backend = target.backend
        self.read_only = read_only
        self.closed = False
        # The process that opened the connections: a fork()ed child must not use them.
        self.opened_in = os.getpid()
        # :memory: is a single connection and so a single transaction: serialise.
        self._serial: AbstractAsyncContextManager[Any] = (
            asyncio.Lock() if target.is_memory else contextlib.nullcontext()
        )
        # Reads on a caller's thread (a SQLite file's), closed with the engine.
        self._caller_lane = caller_lane
        # The process's descriptor of the SQLite file, released once the engine is disposed.
        self._held = held
        # The SQLite file as opened, (device, inode): a store notices when it is gone.
        self.file: FileWatch | None = None
        # Why the store stopped answering (its file vanished), once it did.
        self._lost: str | None = None

    @property
    def where(self) -> str:
        """Where the database lives, for messages (a URL without its password)."""
        return self.target.describe()

    def watch_file(self) -> None:
        """Start watching the SQLite file the store opened (nothing for ``:memory:`` or servers).

        Raises:
            StorageError: the file, which SQLite opened, cannot be read.

        """
        file = self.target.sqlite_file
        if file is None:
            return
        with translate_errors(f"open {self.where}"):
            if self._held is None:  # it could not be held before SQLite opened it
                self._held = hold(file, create=False)
            self.file = FileWatch(self._held)

    async def run(
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

        Raises:
            StoreClosedError: the store was closed.
            ReadOnlyStoreError: ``write`` on a store opened read-only.
            StorageError: the database refused the work (nothing changed), or
                the file was removed or replaced (then nothing more is acknowledged).

        """
        self._check_open(write=write)
        abort = asyncio.Event()
        async with self._serial:
            self._look_before(write=write)
            unit = asyncio.ensure_future(self._in_transaction(action, work, write, abort))
            result = await _await_uncancellable(unit, abort)
        self._check_file(wrote=write)
        return result

    async def run_keyed_write(
        self, action: str, work: Callable[[AsyncConnection], Awaitable[T]]
    ) -> T:
        """:meth:`run` as a write, tried again while others take its entries' keys.

        Only PostgreSQL runs writers at once; SQLite runs one at a time.
        """
        for attempt in range(1, KEY_RACE_ATTEMPTS + 1):
            try:
                return await self.run(action, work, write=True)
            except KeyRaceError:
                if attempt == KEY_RACE_ATTEMPTS:
                    raise
        raise AssertionError("unreachable")  # pragma: no cover

    async def run_on_driver(
        self, action: str, work: Callable[[Any], Awaitable[T]], *, write: bool
    ) -> T:
        """Like :meth:`run`, with ``work`` given the driver's own connection.

        ``work`` owns the transaction (it begins, commits or rolls back). A caller
        cancelled meanwhile sees CancelledError once the transaction has ended
        either way (it is too short to stop half way).
        """
        self._check_open(write=write)
        async with self._serial:
            self._look_before(write=write)
            unit = asyncio.ensure_future(self._on_driver(action, work, write))
            result = await _await_uncancellable(unit, asyncio.Event())
        self._check_file(wrote=write)
        return result

    async def run_untransacted(
        self, action: str, work: Callable[[AsyncConnection], Awaitable[T]]
    ) -> T:
        """``work`` on a connection outside our transactions (it begins its own, as alembic)."""
        self._check_open(write=False)
        async with self._serial:
            with translate_errors(action):
                async with self.engine.connect() as connection:
                    return await work(connection)

    @property
    def reads_here(self) -> bool:
        """Whether :meth:`read_here` can read on the calling thread (a SQLite file)."""
        return self._caller_lane is not None

    def read_here(self, action: str, answer: Callable[[Reader], T]) -> T:
        """``answer`` in one read transaction on the calling thread, blocking it.

        Only where :attr:`reads_here`. The same checks as every unit: the store
        open (:class:`StoreClosedError` if it closes meanwhile), errors translated,
        the file still the one opened.
        """
        lane = self._caller_lane
        if lane is None:
            raise RuntimeError("no caller's lane: check reads_here first")
        self._check_open(write=False)
        with translate_errors(action):
            result = lane.read(answer)
        self._check_file(wrote=False, noting=False)
        return result

    async def read(
        self,
        action: str,
        answer: Callable[[Reader], T],
        *,
        then_write: Callable[[T], Sequence[Statement]] | None = None,
    ) -> T:
        """``answer`` in one read transaction, then the statements ``then_write`` makes of it.

        The write (an access stamp), if any, is a transaction of its own after
        the read: in the same hop to the driver's thread where the backend can,
        else a second unit. Either way a read-only store refuses it.
        """
        backend, memory = self.backend, self.target.is_memory
        if backend.works_in_one_hop:
            return await self.run_on_driver(
                action,
                lambda driver: backend.read_directly(
                    driver, answer, memory=memory, then_write=then_write
                ),
                write=False,
            )
        answered = await self.run(
            action,
            lambda connection: connection.run_sync(
                lambda sync: answer(Reader.of(sync, memory=memory))
            ),
            write=False,
        )
        written = then_write(answered) if then_write is not None else ()
        if written:
            await self.run(
                "record access", lambda c: repository.run_statements(c, written), write=True
            )
        return answered

    async def store_batch(
        self, batch: FlatBatch, base: str, known: Mapping[str, int], stamp: Stamp | None = None
    ) -> StoredBatch | None:
        """Store a checked batch in one hop to the driver, or None where there is no such lane.

        ``base``: the writing view's scope, which the batch's scope names are
        relative to; ``known``: ids of scope names already looked up; ``stamp``:
        the write's events (None: none recorded). Where the
        backend has no one-hop lane, nothing is done: the caller stores the
        batch through the connection lane (:func:`repository.insert_entries`).

        Raises:
            DuplicateEntryError: two entries share an id, or one is already stored.
            InvalidArgumentError: two entries share a key in one scope, or a
                scope name joined to ``base`` is too long.

        """
        backend = self.backend
        if not backend.works_in_one_hop:
            return None
        scopes = repository.checked_scopes(batch, base)
        return await self.run_on_driver(
            "store",
            lambda driver: backend.store_batch(driver, batch, scopes, known, stamp),
            write=True,
        )

    async def give_back_free_pages(self) -> None:
        """After deletes, cut the whole free pages off a file set up for it."""
        backend, memory = self.backend, self.target.is_memory
        await self.run_on_driver(
            "give back free pages",
            lambda driver: backend.give_back_free_pages(driver, memory=memory),
            write=True,
        )

    async def vacuum(self) -> None:
        """Give all the database's free space back, outside a transaction (see ``consolidate``)."""
        backend, memory, where = self.backend, self.target.is_memory, self.where
        await self.run_on_driver(
            "give back the free space",
            lambda driver: backend.vacuum(driver, memory=memory, where=where),
            write=True,
        )

    async def close(self) -> None:
        """Release every connection. Idempotent.

        In a child process forked while the store was open, only marks it closed:
        the connections are the parent's, and SQLite forbids closing them here.
        """
        if self.closed:
            return
        self.closed = True
        if os.getpid() != self.opened_in:
            return
        with translate_errors("close"):
            if self._caller_lane is not None:
                self._caller_lane.close()
            await self.engine.dispose()
        # Only now that every connection is closed (a failed dispose keeps it): closing
        # a descriptor of the file drops every lock the process's connections hold on it.
        if self._held is not None:
            self._held.release()

    def _check_open(self, *, write: bool) -> None:
        if self.closed:
            raise StoreClosedError(f"the store at {self.where} is closed")
        if os.getpid() != self.opened_in:
            raise forked_error(self.where, self.opened_in)
        if self._lost is not None:
            raise StorageError(self._lost)
        if write and self.read_only:
            raise ReadOnlyStoreError(
                f"the store at {self.where} is read-only (opened with read_only=True): "
                "it writes nothing"
            )

    def _check_file(self, *, wrote: bool, noting: bool = True) -> None:
        """After each unit of work, check that the file is the one opened (one ``stat``).

        Checked once the work is done, so that a write that went to a file
        removed or replaced meanwhile is not acknowledged. Not ``noting`` (the
        caller's lane): a change someone else made is left for the next write
        to see, so that a read there touches none of the state the loop keeps.
        """
        if self.file is not None and self._lost is None:
            lost = self.file.lost(wrote=wrote) if noting else self.file.gone()
            if lost is not None:
                self._lost = lost
                raise StorageError(lost)

    def _look_before(self, *, write: bool) -> None:
        """Before a write, note whether someone else modified the file since the store looked.

        If someone did (now or seen after a read), the file's header is checked
        first: a write is never acknowledged into a file overwritten or truncated.
        """
        watch = self.file
        if not write or watch is None:
            return
        watch.look_before_writing()
        if watch.changes > watch.checked:
            damage = watch.damage()
            if damage is not None:
                self._lost = (
                    f"the database file {watch.path} {damage} while the store had it open: "
                    "the store acknowledges nothing more; reopen it"
                )
                raise StorageError(self._lost)
            watch.checked = watch.changes

    async def _fresh_pages(self, connection: AsyncConnection) -> Any:
        """The driver's connection, its cached pages dropped if the file changed meanwhile.

        A write then reads every page it touches from the file, and one that
        someone else overwrote with garbage fails (as SQLite finds it malformed)
        instead of being written over pages only the cache still holds.
        """
        raw = await connection.get_raw_connection()
        watch = self.file
        if watch is not None and raw.info.get(PAGES_AS_OF, 0) < watch.changes:
            await self.backend.drop_cached_pages(raw.driver_connection)
            raw.info[PAGES_AS_OF] = watch.changes
        return raw.driver_connection

    async def _on_driver(self, action: str, work: Callable[[Any], Awaitable[T]], write: bool) -> T:
        with translate_errors(action):
            async with self.engine.connect() as connection:
                if write:
                    driver = await self._fresh_pages(connection)
                else:
                    driver = (await connection.get_raw_connection()).driver_connection
                return await work(driver)

    async def _in_transaction(
        self,
        action: str,
        work: Callable[[AsyncConnection], Awaitable[T]],
        write: bool,
        abort: asyncio.Event,
    ) -> T:
        with translate_errors(action):
            async with self.engine.connect() as connection:
                if write:
                    await self._fresh_pages(connection)
                    await connection.execution_options(**self.backend.begin_options(write=True))
                async with connection.begin() as transaction:
                    result = await work(connection)
                    if abort.is_set():
                        await transaction.rollback()
                return result


def forked_error(where: str, opened_in: int) -> StorageError:
    """The error of a store used in a child process forked after it was opened."""
    return StorageError(
        f"the store at {where} was opened in process {opened_in}, which this process was"
        " forked from: SQLite connections must not cross a fork(); open a store in this process"
    )


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
