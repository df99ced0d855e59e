"""Opening a store: the options, their validation, the engine, the schema, and ``open_store``.

:class:`OpenOptions` is the one declared set of options, shared by
:func:`open_store` here and :func:`loopctl_memory.sync.open_store`, and
documented once, on it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable, Generator, Iterator
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any, Literal, TypedDict, Unpack

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from loopctl_memory import embedding, migrate
from loopctl_memory.bm25 import DEFAULT_B, DEFAULT_K1, Bm25Parameters
from loopctl_memory.context import AUTO, Context, check_context
from loopctl_memory.embedding import check_timeout
from loopctl_memory.errors import (
    DatabaseBusyError,
    EmbedderError,
    InvalidArgumentError,
    LoopMemoryError,
    StorageError,
)
from loopctl_memory.expiry import check_refresh, check_ttl
from loopctl_memory.history import KEEP_HISTORY
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.protocol import Embedder
from loopctl_memory.rankings import check_ranking
from loopctl_memory.sql.backend import PoolOptions
from loopctl_memory.sql.background.folds import TailFolds
from loopctl_memory.sql.background.graph_builds import GraphBuilds
from loopctl_memory.sql.database.boundary import translate_errors
from loopctl_memory.sql.database.caller_lane import CallerLane
from loopctl_memory.sql.database.engine import (
    DEFAULT_BUSY_TIMEOUT,
    Target,
    create_engine,
    resolve_target,
)
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.files.held import HeldFile, hold
from loopctl_memory.sql.ranking.graph_home import beside_file, in_user_cache
from loopctl_memory.sql.store import embedder as embedder_rows
from loopctl_memory.sql.store.embedder import StoreEmbedder
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.sql.tuning import Tuning


class OpenOptions(TypedDict, total=False):
    """The options of :func:`open_store` (and of :func:`loopctl_memory.sync.open_store`).

    Every option is a keyword argument; an unknown one is a ``TypeError``.

    Attributes:
        migrate: create the schema of a new database and upgrade an older one
            (True, the default); create a new one but never upgrade ("create");
            or neither (False): then an older or empty database raises SchemaError.
        busy_timeout: seconds a writer waits for another writer's lock before
            StorageError (default 5; on PostgreSQL the ``lock_timeout``).
        echo: log every SQL statement (default False).
        pool_size: PostgreSQL connections kept open (default 5).
        max_overflow: PostgreSQL connections opened beyond ``pool_size`` under
            load (default 10).
        pool_timeout: seconds to wait for a free connection (default 30).
        statement_timeout: seconds one statement may run on PostgreSQL before the
            server cancels it (default None: no limit).
        connect_timeout: seconds to wait for PostgreSQL when connecting (default 10).
        tuning: the token index's and the search's thresholds
            (:class:`loopctl_memory.sql.tuning.Tuning`); they set speed, never answers.
        track_access: ``retrieve`` records an access of each returned entry that
            matched a query word or tag (``access_count`` + 1, ``last_accessed``),
            in a short write after the read (default False).
        consolidation: what ``consolidate()`` does by default (default
            ``ConsolidationConfig()``, loopctl 0.1.0's rule).
        clock: the time now, for access stamps, decay and
            ``forget(older_than=timedelta)`` (default: the system clock, UTC).
        read_only: open an existing database without writing anything (default
            False): every read is served, every write raises ReadOnlyStoreError,
            the schema is checked and never migrated. A SQLite file opens with
            ``mode=ro``, or as ``immutable`` where SQLite cannot open it otherwise
            (a WAL file with no ``-shm`` in a directory that cannot be written: a
            read-only mount, another user's directory), which assumes nobody
            writes it meanwhile. PostgreSQL runs read-only transactions.
        embedder: makes each entry's vector (see :mod:`loopctl_memory.embedding`):
            an :class:`~loopctl_memory.Embedder`, or a spec string that
            :func:`loopctl_memory.embedders.embedder_from_spec` makes one of (the
            store records the spec, so the CLI and the MCP server can make it
            again), or ``"recorded"``: the one whose spec the store recorded (none
            if it recorded none; a ``python:`` spec, which runs code, only when
            given). The store records it the first time and refuses
            another until ``reembed``; an entry whose vector could not be made is
            stored and pending (``pending_embeddings``, ``embed_pending``).
        embed_timeout: seconds an embedder call may take (default 30).
        context: how much each entry's neighbours in its scope's insertion order
            count in the ``bm25``, ``vector`` and ``hybrid`` rankings
            (:mod:`loopctl_memory.context`): ``"auto"`` (the default: by how
            coherent each scope's stream is) or a weight >= 0 (0: none).
        ttl: each entry stored without ``expires_at`` expires this long after
            it is stored (a positive timedelta; default None: never). See
            :mod:`loopctl_memory.expiry`.
        refresh_on_read: ``retrieve``, ``get`` and ``get_by_key`` move the
            expiry of each memory they return to ``ttl`` from now (needs
            ``ttl``; default False).
        history: each write records what it did to each memory, in its
            transaction (default True; see :mod:`loopctl_memory.history`).
        keep_history: how long events are kept: a consolidation deletes the
            older events of the scopes it passes over (a positive timedelta;
            default 90 days; None: for ever).

    """

    migrate: bool | Literal["create"]
    busy_timeout: float
    echo: bool
    pool_size: int
    max_overflow: int
    pool_timeout: float
    statement_timeout: float | None
    connect_timeout: float
    tuning: Tuning | None
    track_access: bool
    consolidation: ConsolidationConfig | None
    clock: Callable[[], datetime] | None
    read_only: bool
    ranking: str
    bm25_k1: float
    bm25_b: float
    embedder: Embedder | str | None
    embed_timeout: float
    context: Context
    ttl: timedelta | None
    refresh_on_read: bool
    history: bool
    keep_history: timedelta | None


RECORDED = "recorded"
"""The ``embedder`` option that means the embedder whose spec the store recorded."""


def open_store(
    target: str | os.PathLike[str] = ":memory:", **options: Unpack[OpenOptions]
) -> OpeningStore:
    """Open a :class:`SqlMemoryStore` at ``target``, migrating its schema to head.

    ``target`` is ``":memory:"``, a file path, or a SQLAlchemy URL
    (``sqlite+aiosqlite:///...``, ``postgresql+asyncpg://...``). The options are
    :class:`OpenOptions`. Await the result, or use it as an async context
    manager that closes the store on exit.

    A SQLite store checks after every operation that its path still names the
    file it opened (one ``stat``): once the file was removed, renamed or
    replaced, every operation raises StorageError naming the path.

    Raises:
        TypeError: an option that is not one of :class:`OpenOptions`.
        InvalidArgumentError: an option's value is not valid.
        SchemaError: the schema is unknown, newer, or older and ``migrate`` is
            false (or ``read_only``).
        StorageError: the database cannot be opened.

    Example:
        >>> async def main() -> None:
        ...     async with open_store("memory.db") as store:
        ...         await store.store(MemoryEntry(MemoryCategory.FACT, "CI runs make test"))

    """
    unknown = sorted(set(options) - set(OpenOptions.__annotations__))
    if unknown:
        raise TypeError(f"open_store() got an unexpected keyword argument {unknown[0]!r}")
    return OpeningStore(target, options)


class OpeningStore:
    """What :func:`open_store` returns: await it, or use it as an async context manager."""

    def __init__(self, target: str | os.PathLike[str], options: OpenOptions) -> None:
        self._target = target
        self._options = options
        self._store: SqlMemoryStore | None = None

    def __await__(self) -> Generator[Any, None, SqlMemoryStore]:
        return open_sql_store(self._target, self._options).__await__()

    async def __aenter__(self) -> SqlMemoryStore:
        self._store = await open_sql_store(self._target, self._options)
        return self._store

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._store is not None:
            await self._store.close()


async def open_sql_store(target: str | os.PathLike[str], options: OpenOptions) -> SqlMemoryStore:
    """Connect to ``target`` and check (or bring) its schema to the current revision.

    The work of :func:`open_store`, which documents the options and errors.
    """
    resolved = resolve_target(target)
    read_only = _flag(options, "read_only")
    track_access = _flag(options, "track_access")
    consolidation = _consolidation(options)
    given = options.get("embedder")
    seconds = check_timeout(options.get("embed_timeout", embedding.DEFAULT_TIMEOUT))
    store_embedder = (
        None if given is None or given == RECORDED else StoreEmbedder.made(given, seconds)
    )
    ranking = check_ranking(options.get("ranking", "reference"), has_embedder=given is not None)
    bm25 = Bm25Parameters(options.get("bm25_k1", DEFAULT_K1), options.get("bm25_b", DEFAULT_B))
    weighing = check_context(options.get("context", AUTO))
    ttl = check_ttl(options.get("ttl"))
    refresh_on_read = check_refresh(options.get("refresh_on_read", False), ttl)
    recording = _flag(options, "history", default=True), _keep_history(options)
    if read_only and track_access:
        raise InvalidArgumentError("track_access=True writes access stamps: not read_only")
    if read_only and resolved.is_memory:
        raise InvalidArgumentError("read_only=True needs an existing database, not :memory:")
    file = resolved.sqlite_file
    if read_only and file is not None and not file.exists():
        raise StorageError(f"no database at {file}: read_only=True opens an existing one")
    busy_timeout = options.get("busy_timeout", DEFAULT_BUSY_TIMEOUT)
    where = f"open {resolved.describe()}"
    held = _held_before_connecting(resolved, read_only)
    with _released_on_failure(held), translate_errors(where):
        pool = PoolOptions(
            options.get("pool_size", PoolOptions.pool_size),
            options.get("max_overflow", PoolOptions.max_overflow),
            options.get("pool_timeout", PoolOptions.pool_timeout),
            options.get("statement_timeout", PoolOptions.statement_timeout),
            options.get("connect_timeout", PoolOptions.connect_timeout),
        )
        engine = create_engine(
            resolved,
            busy_timeout=busy_timeout,
            echo=options.get("echo", False),
            pool=pool,
            read_only=read_only,
            held=held,
        )
    connect_here = resolved.backend.caller_connection(
        engine, memory=resolved.is_memory, busy_timeout=busy_timeout
    )
    lane = (
        None
        if connect_here is None
        else CallerLane(connect_here, resolved.backend, resolved.describe())
    )
    unit = UnitOfWork(engine, resolved, read_only=read_only, held=held, caller_lane=lane)
    tuning = options.get("tuning") or Tuning()
    store = SqlMemoryStore.over(
        unit,
        tuning=tuning,
        track_access=track_access,
        consolidation=consolidation,
        clock=options.get("clock"),
        ranking=ranking,
        bm25=bm25,
        context=weighing,
        embed_timeout=seconds,
        ttl=ttl,
        refresh_on_read=refresh_on_read,
        history=recording[0],
        keep_history=recording[1],
        graph_home=None
        if resolved.is_memory
        else (in_user_cache() if file is None else beside_file(file)),
        graph_builds=GraphBuilds(
            _child_target(resolved),
            enabled=tuning.background_builds and not resolved.is_memory,
            vector_loose=tuning.vector_loose,
        ),
        folds=TailFolds(
            _child_target(resolved),
            enabled=tuning.background_folds and not resolved.is_memory and not read_only,
            tail_limit=tuning.tail_limit,
        ),
    )
    migrating = options.get("migrate", True)
    try:
        with _unwritable_explained(resolved, read_only), translate_errors(where):
            async with engine.connect() as connection:
                await connection.run_sync(
                    migrate_schema,
                    upgrade=migrating is True and not read_only,
                    create=migrating is not False and not read_only,
                )
        if not read_only:
            await _after_open(engine, resolved, busy_timeout)
        if given == RECORDED:
            store_embedder = await _recorded(unit, seconds)
            if store_embedder is None:
                check_ranking(ranking, has_embedder=False)  # an embedding one needs it
        if store_embedder is not None:
            await store._bind_embedder(store_embedder, record=not read_only)
        unit.watch_file()
    except BaseException:
        await store.close()
        raise
    return store


def _child_target(target: Target) -> str:
    """What a child process of the store opens: the file's path, or the URL with its password."""
    file = target.sqlite_file
    return str(file) if file is not None else target.url.render_as_string(hide_password=False)


async def _recorded(unit: UnitOfWork, seconds: float) -> StoreEmbedder | None:
    """The embedder whose spec the store recorded, or None if it recorded none.

    A ``python:`` spec is never made from the database alone: it names code to
    import and run, and a database file is data (one from elsewhere could name
    any module). It is made when the caller gives it, as any spec is.

    Raises:
        EmbedderError: the spec no longer makes an embedder (say, its extra is
            gone), or it is a ``python:`` one.

    """
    named = await unit.run("open", embedder_rows.recorded, write=False)
    if named is None or named.spec is None:
        return None
    if named.spec.startswith("python:"):
        raise EmbedderError(
            f"this store's embedder {named.spec!r} is code to run, which is never made from"
            f" the database alone: give it to run it (embedder={named.spec!r};"
            f" --embedder {named.spec} or LOOPCTL_MEMORY_EMBEDDER), or open the store"
            f" {_WITHOUT_ONE}"
        )
    try:
        return StoreEmbedder.made(named.spec, seconds)
    except LoopMemoryError as exc:
        raise EmbedderError(
            f"this store's embedder {named.spec!r} cannot be made: {exc}; open the store"
            f" {_WITHOUT_ONE}"
        ) from exc


_WITHOUT_ONE = (
    "without an embedder (embedder=None; --embedder none): new memories then wait for"
    " their vectors (embed_pending)"
)


def _held_before_connecting(target: Target, read_only: bool) -> HeldFile | None:
    """The process's descriptor of a SQLite file, before the engine's first connection.

    A file that is missing (and not to be created) or a directory is left to
    the engine and SQLite, which say why they cannot open it; a file that
    cannot be read now is held once SQLite has opened it, if it can
    (:meth:`UnitOfWork.watch_file`).
    """
    file = target.sqlite_file
    if file is None or file.is_dir() or not file.parent.is_dir():
        return None
    try:
        return hold(file, create=not read_only)
    except OSError:
        return None


@contextlib.contextmanager
def _released_on_failure(held: HeldFile | None) -> Iterator[None]:
    """Let go of ``held`` if the block fails (no engine, so no connection, holds the file yet)."""
    try:
        yield
    except BaseException:
        if held is not None:
            held.release()
        raise


def _flag(
    options: OpenOptions,
    name: Literal["read_only", "track_access", "history"],
    *,
    default: bool = False,
) -> bool:
    value = options.get(name, default)
    if type(value) is not bool:
        raise InvalidArgumentError(f"{name} must be a bool, not {type(value).__name__}")
    return value


def _consolidation(options: OpenOptions) -> ConsolidationConfig:
    consolidation = options.get("consolidation") or ConsolidationConfig()
    if not isinstance(consolidation, ConsolidationConfig):
        raise InvalidArgumentError(
            f"consolidation must be a ConsolidationConfig, not {type(consolidation).__name__}"
        )
    return consolidation


def _keep_history(options: OpenOptions) -> timedelta | None:
    value = options.get("keep_history", KEEP_HISTORY)
    if value is None:
        return None
    if not isinstance(value, timedelta) or value <= timedelta(0):
        raise InvalidArgumentError(
            f"keep_history must be a positive timedelta or None, not {value!r}"
        )
    return value


def migrate_schema(connection: Connection, *, upgrade: bool, create: bool | None = None) -> None:
    """Bring the schema to head, or check it is there (see :func:`migrate.ensure_schema`)."""
    migrate.ensure_schema(connection, upgrade=upgrade, create=create)


@contextlib.contextmanager
def _unwritable_explained(target: Target, read_only: bool) -> Iterator[None]:
    """An open that failed on a file (or directory) that cannot be written says so."""
    try:
        yield
    except StorageError as exc:
        file = target.sqlite_file
        if read_only or file is None or not os.path.exists(file):
            raise
        directory = os.path.dirname(os.path.abspath(file))
        if os.access(file, os.W_OK) and os.access(directory, os.W_OK):
            raise
        raise StorageError(
            f"cannot open {file} for writing: the file or its directory is read-only; "
            "open it with read_only=True (`loopctl-memory --read-only ...`) to read it"
        ) from exc.__cause__


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
        except DatabaseBusyError:
            if loop.time() >= deadline:
                raise
            await asyncio.sleep(delay)
            delay = min(2 * delay, 0.1)
        else:
            return
