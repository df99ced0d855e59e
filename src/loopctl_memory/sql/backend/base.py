"""What every backend answers: the Backend interface, the Reader, and the registry."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from sqlalchemy.engine import URL, Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from loopctl_memory.flat import FlatBatch

if TYPE_CHECKING:
    from loopctl_memory.sql.files.held import HeldFile
    from loopctl_memory.sql.history.stamps import Stamp

BEGIN_MODE = "loopctl_begin"  # execution option read by the "begin" listeners
WRITE = "IMMEDIATE"

EntryRow = tuple[Any, ...]
T = TypeVar("T")
Statement = tuple[str, Sequence[Any]]
"""SQL with ``?`` placeholders, and its arguments."""


@dataclass(frozen=True, slots=True)
class StoredBatch:
    """What a write in one hop left: the watermark it saw, its last seq, the scope ids it used."""

    indexed_through: int
    last_seq: int
    scope_ids: dict[str, int]


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


class Backend:
    """What one database does its own way. One instance per dialect, shared."""

    name: ClassVar[str]
    works_in_one_hop: ClassVar[bool] = False
    """Whether :meth:`store_batch` and :meth:`read_directly` run a write and a retrieval
    in one hop to the driver's thread, faster than SQLAlchemy's statement-by-statement path."""

    def engine_options(
        self, *, memory: bool, busy_timeout: float, pool: PoolOptions, read_only: bool = False
    ) -> dict[str, Any]:
        """Keyword arguments for ``create_async_engine`` besides the URL."""
        raise NotImplementedError

    def read_only_url(self, url: URL, file: HeldFile | None) -> URL:
        """``url`` opened so that the database refuses every write (``file``: a SQLite file's)."""
        del file
        return url

    def caller_connection(
        self, engine: AsyncEngine, *, memory: bool, busy_timeout: float
    ) -> Callable[[], Any] | None:
        """How to open a blocking connection for reads on a caller's thread, or None.

        See :mod:`~loopctl_memory.sql.database.caller_lane`; None where the backend has no
        such lane.
        """
        del engine, memory, busy_timeout
        return None

    async def drop_cached_pages(self, driver: Any) -> None:
        """Make the driver's connection read its next pages from the database (SQLite)."""
        del driver

    def configure(self, engine: AsyncEngine, *, memory: bool, busy_timeout: float) -> None:
        """Install the engine's connection and transaction listeners."""
        raise NotImplementedError

    def begin_options(self, *, write: bool) -> dict[str, Any]:
        """Execution options for the connection's next transactions: a write or a read."""
        return {BEGIN_MODE: WRITE if write else ""}

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
            (first_seq + index, *entry[:10], scope_ids[entry[10]], *entry[11:])
            for index, entry in enumerate(batch.entries)
        ]

    def tag_rows(self, batch: FlatBatch, first_seq: int) -> list[EntryRow]:
        """The batch's tags as rows for ``INSERT INTO tags (entry_seq, ...)``."""
        return [(first_seq + index, *rest) for index, *rest in batch.tags]

    def vector_rows(self, batch: FlatBatch, first_seq: int) -> list[tuple[int, bytes, int]]:
        """The batch's vectors as rows for ``INSERT INTO vectors`` (none where it has none)."""
        if batch.vectors is None:
            return []
        made_by = batch.embedder_id
        return [
            (first_seq + index, row, made_by)
            for index, row in enumerate(batch.vectors)
            if row is not None
        ]

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

    async def store_batch(
        self,
        driver: Any,
        batch: FlatBatch,
        scopes: Mapping[str, str],
        known: Mapping[str, int],
        stamp: Stamp | None = None,
    ) -> StoredBatch:
        """Store a checked batch in a transaction of its own, on the driver's connection.

        ``scopes``: the scope name each relative name of the batch stands for;
        ``known``: ids of scope names already looked up (a name without one is
        given one). A keyed entry first removes the one of its scope holding
        its key. ``stamp``: the write's events (None: none recorded). Nothing is
        indexed: the entries join the tail. Only where :attr:`works_in_one_hop`.

        Raises:
            DuplicateEntryError: (from the database, as an integrity error) an
                entry's id is already stored.

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

    def encode_uuid(self, value: uuid.UUID) -> Any:
        """A UUID as the driver takes it for a ``Uuid`` column (raw SQL paths)."""
        return value

    async def read_directly(
        self,
        driver: Any,
        work: Callable[[Reader], T],
        *,
        memory: bool,
        then_write: Callable[[T], Sequence[Statement]] | None = None,
    ) -> T:
        """Run ``work`` in one read transaction on the driver's connection, in one hop.

        ``then_write``: given what ``work`` returned, the statements (``?``
        placeholders) to run next in a write transaction of their own (none: no write).
        Only where :attr:`works_in_one_hop`.
        """
        raise NotImplementedError


_BACKENDS: dict[str, Backend] = {}


def register(backend: Backend) -> Backend:
    """Make ``backend`` the one of its dialect (each backend module registers its own)."""
    _BACKENDS[backend.name] = backend
    return backend


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

    @classmethod
    def in_transaction(
        cls, connection: Any, backend: Backend, work: Callable[[Reader], T], *, memory: bool
    ) -> T:
        """``work`` in one read transaction of a DB-API ``connection`` that begins none itself."""
        connection.execute("BEGIN")
        try:
            return work(cls(connection.cursor, backend, memory=memory))
        finally:
            connection.execute("ROLLBACK")  # it wrote nothing: ending it either way is the same

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
