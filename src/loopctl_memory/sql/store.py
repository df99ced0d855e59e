"""SqlMemoryStore: the LoopMemory contract over SQLAlchemy 2 async, and open_store."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import uuid
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterable, Iterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from loopctl_memory import lifecycle, migrate
from loopctl_memory import scopes as scope_names
from loopctl_memory.entry import (
    SHORT_ID_DIGITS,
    ConsolidationStats,
    MemoryCategory,
    MemoryEntry,
    check_entry,
    id_range,
    shared_prefix_length,
    validate_id,
    validate_query,
)
from loopctl_memory.errors import (
    InvalidEntryError,
    ReadOnlyStoreError,
    StorageError,
    StoreClosedError,
)
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatBatch, flatten
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.scopes import Scope
from loopctl_memory.scoring import parse_query
from loopctl_memory.sql import index, repository, search
from loopctl_memory.sql.backend import Reader, Statement
from loopctl_memory.sql.boundary import translate_errors
from loopctl_memory.sql.engine import (
    DEFAULT_BUSY_TIMEOUT,
    PoolOptions,
    Target,
    create_engine,
    resolve_target,
)
from loopctl_memory.sql.ranking_state import RankingState
from loopctl_memory.sql.repository import ScopeIds, Summary
from loopctl_memory.sql.tuning import Tuning

T = TypeVar("T")


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class _Shared:
    """What a store and every view of it share: the engine, the copy for retrieval, options."""

    track_access: bool
    consolidation: ConsolidationConfig
    clock: Callable[[], datetime]
    # :memory: is a single connection and so a single transaction: serialise.
    serial: AbstractAsyncContextManager[Any]
    ranking: RankingState
    # One retrieval at a time uses the copy, and opens its transaction only once it
    # holds the lock: the copy then only ever moves forward in time.
    ranking_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watermark_seen: int = 0  # when single stores should check the tail's length
    closed: bool = False
    read_only: bool = False
    # The SQLite file as opened, (device, inode): a store notices when it is gone.
    file: FileWatch | None = None
    # Why the store stopped answering (its file vanished), once it did.
    lost: str | None = None
    # A scope name keeps its id for ever, so a view asks for it once.
    scope_ids: dict[str, int] = field(default_factory=lambda: {"": 0})


class SqlMemoryStore:
    """The loopctl memory contract, persistent, on SQLite or PostgreSQL.

    Open one with :func:`open_store`. Every operation is one transaction: it
    commits on success, and on any failure rolls back and leaves the store as
    it was. Writes on SQLite start as ``BEGIN IMMEDIATE`` so concurrent writers
    wait (up to ``busy_timeout``) instead of failing. A ``:memory:`` database is
    one connection, so its operations run one at a time.
    """

    def __init__(
        self,
        engine: AsyncEngine,
        target: Target,
        tuning: Tuning | None = None,
        *,
        track_access: bool = False,
        consolidation: ConsolidationConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        read_only: bool = False,
    ) -> None:
        tuning = tuning or Tuning()
        if consolidation is not None and not isinstance(consolidation, ConsolidationConfig):
            raise InvalidEntryError(
                f"consolidation must be a ConsolidationConfig, not {type(consolidation).__name__}"
            )
        if type(track_access) is not bool:
            raise InvalidEntryError(
                f"track_access must be a bool, not {type(track_access).__name__}"
            )
        if read_only and track_access:
            raise InvalidEntryError("track_access=True writes access stamps: not read_only")
        self._shared = _Shared(
            track_access=track_access,
            consolidation=consolidation or ConsolidationConfig(),
            clock=clock or _utc_now,
            serial=asyncio.Lock() if target.is_memory else contextlib.nullcontext(),
            ranking=RankingState(tuning),  # this process's copy for retrieval
            read_only=read_only,
        )
        self._scope = Scope()
        self._root: SqlMemoryStore | None = None  # a view keeps its store alive
        self._engine = engine
        self._target = target
        self._backend = target.backend
        self._tuning = tuning

    def scope(self, name: str, *, descendants: bool = False) -> SqlMemoryStore:
        """A view of this store limited to scope ``name`` (relative to this view's scope).

        The view has the whole store API and satisfies ``LoopMemory``. It writes
        into scope ``name``; it reads that scope's entries, and with
        ``descendants=True`` those of every scope below it too. It shares this
        store's connections: close the store, not the view.

        Raises:
            InvalidEntryError: ``name`` is not a non-empty ``/``-separated path of
                at most 255 characters without empty segments.

        """
        return self._view(self._scope.narrowed(name, descendants=descendants))

    def with_descendants(self) -> SqlMemoryStore:
        """A view of this store's scope and every scope below it (of the root: every entry).

        It writes into this store's scope, as the store does.
        """
        return self._view(Scope(self._scope.name, descendants=True))

    def _view(self, scope: Scope) -> SqlMemoryStore:
        view = object.__new__(SqlMemoryStore)
        view._shared = self._shared
        view._scope = scope
        view._root = self._root or self
        view._engine = self._engine
        view._target = self._target
        view._backend = self._backend
        view._tuning = self._tuning
        return view

    @property
    def scope_name(self) -> str:
        """The scope this store writes into (``""``: the root)."""
        return self._scope.name

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
        track_access: bool = False,
        consolidation: ConsolidationConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        read_only: bool = False,
    ) -> SqlMemoryStore:
        """Connect to ``target`` and check (or bring) its schema to the current revision.

        The pool and timeout options apply to PostgreSQL (see :func:`open_store`).
        ``read_only``: write nothing, ever (see :func:`open_store`).

        Raises:
            SchemaError: the schema is unknown, newer, or older and ``migrate`` is
                false (or ``read_only``).
            StorageError: the database cannot be opened.

        """
        resolved = resolve_target(target)
        if type(read_only) is not bool:
            raise InvalidEntryError(f"read_only must be a bool, not {type(read_only).__name__}")
        if read_only and resolved.is_memory:
            raise InvalidEntryError("read_only=True needs an existing database, not :memory:")
        file = resolved.sqlite_file
        if read_only and file is not None and not file.exists():
            raise StorageError(f"no database at {file}: read_only=True opens an existing one")
        where = f"open {resolved.describe()}"
        with translate_errors(where):
            pool = PoolOptions(
                pool_size, max_overflow, pool_timeout, statement_timeout, connect_timeout
            )
            engine = create_engine(
                resolved, busy_timeout=busy_timeout, echo=echo, pool=pool, read_only=read_only
            )
        try:
            store = cls(
                engine,
                resolved,
                tuning,
                track_access=track_access,
                consolidation=consolidation,
                clock=clock,
                read_only=read_only,
            )
        except BaseException:
            await engine.dispose()
            raise
        try:
            with _unwritable_explained(resolved, read_only), translate_errors(where):
                async with engine.connect() as connection:
                    await connection.run_sync(
                        migrate_schema,
                        upgrade=migrate is True and not read_only,
                        create=migrate is not False and not read_only,
                    )
            if not read_only:
                await _after_open(engine, resolved, busy_timeout)
            store._shared.file = FileWatch.of(resolved.sqlite_file)
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
        backend, shared = self._backend, self._shared
        scope_id = shared.scope_ids.get(self._scope.name)
        if not backend.works_in_one_hop or scope_id is None:
            await self.store_flat(batch)
            return
        seq = await self._run_raw(
            "store", lambda driver: backend.store_one(driver, batch, scope_id), write=True
        )
        if seq - shared.watermark_seen >= self._tuning.tail_limit:
            limit = self._tuning.tail_limit
            shared.watermark_seen = await self._run(
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
        tuning, base, shared = self._tuning, self._scope.name, self._shared
        shared.watermark_seen, ids = await self._run(
            "store",
            lambda c: repository.insert_entries(c, batch, tuning, base, shared.scope_ids),
            write=True,
        )
        shared.scope_ids.update(ids)  # once committed: a name keeps its id for ever

    async def retrieve(self, query: str, limit: int) -> list[MemoryEntry]:
        """Return up to ``limit`` entries exactly as the reference ranks them.

        Raises:
            InvalidEntryError: ``query`` is not a str or ``limit`` is not an int >= 0.

        """
        return [entry for entry, _ in await self.retrieve_scored(query, limit)]

    async def retrieve_scored(
        self, query: str, limit: int, *, matched_only: bool = False
    ) -> list[tuple[MemoryEntry, float]]:
        """:meth:`retrieve` with each entry's reference score (its binary32 value, as a float).

        With ``matched_only``, only the entries a word or a tag of the query
        raised above their baseline score compete (the reference pads its answer
        with unmatched entries); the ranking among them is unchanged.

        Raises:
            InvalidEntryError: ``query`` is not a str or ``limit`` is not an int >= 0.

        """
        validate_query(query, limit)
        parsed = parse_query(query)
        shared, backend, scope = self._shared, self._backend, self._scope
        ranking = shared.ranking
        Answer = tuple[list[int], list[MemoryEntry], list[float]]  # noqa: N806

        def answer(reader: Reader) -> Answer:
            ranking.refresh(reader)
            ranked = search.top_scored(
                ranking, parsed, limit, scope, reader, matched_only=matched_only
            )
            seqs = [seq for seq, _ in ranked]
            return seqs, repository.entries_by_seq(reader, seqs), [score for _, score in ranked]

        def stamp(answered: Answer) -> Statement | None:
            seqs, found, _ = answered
            return self._access_stamp(query, seqs, found) if shared.track_access else None

        memory = self._target.is_memory
        written: Statement | None = None
        async with shared.ranking_lock:
            if backend.works_in_one_hop:  # one hop to the driver's thread: see store()
                answered = await self._run_raw(
                    "retrieve",
                    lambda driver: backend.read_directly(
                        driver, answer, memory=memory, then_write=stamp
                    ),
                    write=False,  # an access stamp: never on a read-only store
                )
            else:
                answered = await self._run(
                    "retrieve",
                    lambda connection: connection.run_sync(
                        lambda sync: answer(Reader.of(sync, memory=memory))
                    ),
                    write=False,
                )
                written = stamp(answered)
        if written is not None:
            statement = written
            await self._run(
                "record access", lambda c: repository.run_statement(c, statement), write=True
            )
        _, found, scores = answered
        return list(zip(found, scores, strict=True))

    def _access_stamp(
        self, query: str, seqs: list[int], found: list[MemoryEntry]
    ) -> Statement | None:
        """The write recording an access of each returned entry the query matched, if any.

        The returned entries are stamped as the write will leave them.
        """
        matched = lifecycle.access_matches(query, found)
        stamped = [seq for seq, hit in zip(seqs, matched, strict=True) if hit]
        if not stamped:
            return None
        now = lifecycle.check_now(self._shared.clock())
        lifecycle.stamp_accessed(
            [entry for entry, hit in zip(found, matched, strict=True) if hit], now
        )
        return repository.access_stamp(stamped, (now - EPOCH) // MICROSECOND)

    async def consolidate(
        self, config: ConsolidationConfig | None = None, *, vacuum: bool = False
    ) -> ConsolidationStats:
        """Run a consolidation pass over the view's entries, in one transaction.

        ``config`` (default: the store's, set by ``open_store(consolidation=...)``,
        itself by default ``ConsolidationConfig()``, the 0.1.0 rule: delete every
        entry whose relevance, as binary32, is below 0.05).
        ``ConsolidationConfig.full()`` also decays, merges near-duplicates and
        prunes on quality (see :mod:`loopctl_memory.lifecycle`).

        On a SQLite file created by this version (``auto_vacuum=INCREMENTAL``)
        the whole pages the pass freed are cut off the file right after it, in
        a short write of its own; the room removed entries leave in part-full
        pages stays for later writes. ``vacuum=True`` gives back all the
        database's free space once the pass has committed (every scope's,
        earlier deletes' too):

        - SQLite: a full ``VACUUM`` rewrites the whole file packed. It takes
          about as long as copying the file, needs room on disk for twice the
          result, and needs the file to itself for writing meanwhile: other
          writers wait. Then a checkpoint empties the write-ahead log.
        - ``:memory:``: nothing to do.
        - PostgreSQL: a plain ``VACUUM`` of the store's tables makes the space
          reusable; it does not shrink the files.

        Raises:
            InvalidEntryError: ``config`` is not a ConsolidationConfig, or
                ``vacuum`` not a bool.
            StorageError: the pass failed (nothing changed), or, with ``vacuum``,
                another connection holds the SQLite file: the pass was committed,
                the file is as it was.

        """
        if type(vacuum) is not bool:
            raise InvalidEntryError(f"vacuum must be a bool, not {type(vacuum).__name__}")
        stats = await self._consolidate_pass(config)
        if (stats.pruned or stats.merged) and not vacuum:
            await self._give_back_free_pages()
        if vacuum:
            try:
                await self._vacuum()
            except StorageError as exc:
                raise StorageError(
                    f"consolidate: the pass was committed ({stats.entries_before} entries,"
                    f" {stats.entries_after} now), but: {exc}"
                ) from exc
        return stats

    async def _give_back_free_pages(self) -> None:
        """After deletes, cut the whole free pages off a file set up for it."""
        backend, memory = self._backend, self._target.is_memory
        await self._run_raw(
            "give back free pages",
            lambda driver: backend.give_back_free_pages(driver, memory=memory),
            write=True,
        )

    async def _vacuum(self) -> None:
        """Give the database's free space back (see :meth:`consolidate`), outside a transaction."""
        backend, memory, where = self._backend, self._target.is_memory, self.target
        await self._run_raw(
            "give back the free space",
            lambda driver: backend.vacuum(driver, memory=memory, where=where),
            write=True,
        )

    async def _consolidate_pass(self, config: ConsolidationConfig | None) -> ConsolidationStats:
        """:meth:`consolidate` without the vacuum."""
        if config is None:
            config = self._shared.consolidation
        elif not isinstance(config, ConsolidationConfig):
            raise InvalidEntryError(
                f"config must be a ConsolidationConfig, not {type(config).__name__}"
            )
        config = config.normalized()
        scope = self._scope
        if config.is_reference:

            async def prune(connection: AsyncConnection) -> tuple[int, int]:
                ids = await repository.scope_ids(connection, scope)
                before = await repository.count(connection, ids)
                return before, await repository.prune(connection, ids)

            before, pruned = await self._run("consolidate", prune, write=True)
            return ConsolidationStats(
                entries_before=before, entries_after=before - pruned, pruned=pruned
            )
        now = lifecycle.check_now(self._shared.clock())
        tuning = self._tuning

        async def read(connection: AsyncConnection) -> _Read:
            ids = await repository.scope_ids(connection, scope)
            version = await repository.scope_version(connection, ids)
            return _Read(ids, version, *await repository.entries_with_seqs(connection, ids))

        # Worked out before the write transaction, so that other writers wait only
        # for the pass to be written, unless the entries changed meanwhile.
        planned = await self._run("consolidate", read, write=False)
        result = await asyncio.to_thread(
            lifecycle.consolidate_entries, planned.entries, config, now
        )

        async def write(connection: AsyncConnection) -> ConsolidationStats:
            ids = await repository.scope_ids(connection, scope)
            if ids == planned.ids and planned.version == await repository.scope_version(
                connection, ids
            ):
                return await write_pass(
                    connection, planned.seqs, planned.entries, result, config, tuning=tuning
                )
            seqs, entries = await repository.entries_with_seqs(connection, ids)
            again = lifecycle.consolidate_entries(entries, config, now)
            return await write_pass(connection, seqs, entries, again, config, tuning=tuning)

        return await self._run("consolidate", write, write=True)

    async def count(self) -> int:
        """Return the number of entries the store (or view) reads."""
        return await self._in_scope("count", repository.count, write=False)

    async def is_empty(self) -> bool:
        """Return whether no entry is stored."""
        return await self.count() == 0

    # --- beyond the contract ---

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None (also when it is in a scope not read here)."""
        entry_id = validate_id(entry_id)
        return await self._in_scope(
            "get", lambda c, ids: repository.get_entry(c, entry_id, ids), write=False
        )

    async def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[uuid.UUID]:
        """Up to ``limit`` ids of the view whose hexadecimal form starts with ``prefix``.

        ``prefix`` is hexadecimal digits, dashes ignored, any case: a short id as
        the CLI shows it. A lookup of the unique id index.

        Raises:
            InvalidEntryError: ``prefix`` is empty, longer than an id or not hexadecimal.

        """
        low, high = id_range(prefix)
        return await self._in_scope(
            "find ids",
            lambda c, ids: repository.ids_between(c, low, high, ids, limit),
            write=False,
        )

    async def short_id(self, entry_id: uuid.UUID) -> str:
        """The fewest leading hex digits (at least 8) of ``entry_id`` no other id in the view has.

        One lookup when 8 digits are unique, as they nearly always are (among a
        million ids, about one in 4,300 shares its first 8 digits with another);
        each further lookup skips to the first digit at which the ids found differ.
        :meth:`ids_with_prefix` finds the entry again by it.

        Raises:
            InvalidEntryError: ``entry_id`` is not a ``uuid.UUID``.

        """
        digits = validate_id(entry_id).hex
        length = SHORT_ID_DIGITS
        while length < len(digits):
            others = [
                other.hex
                for other in await self.ids_with_prefix(digits[:length])
                if other != entry_id
            ]
            if not others:
                break
            length = max(length, *(shared_prefix_length(digits, other) for other in others)) + 1
        return digits[:length]

    async def existing_ids(self, ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``ids`` are already stored, in any scope: ids are unique across the store.

        Unlike :meth:`get`, it looks beyond the view's scopes, as a write would
        (an import skipping what it finds here cannot then clash). One read
        transaction, one lookup of the id index per 10,000 ids.

        Raises:
            InvalidEntryError: an id is not a ``uuid.UUID``.

        """
        wanted = [validate_id(entry_id) for entry_id in ids]
        if not wanted:
            return set()
        return await self._run(
            "find stored ids", lambda c: repository.existing_ids(c, wanted), write=False
        )

    async def delete(self, entry_id: uuid.UUID) -> bool:
        """Delete the entry with this id; return whether it existed (in a scope read here)."""
        entry_id = validate_id(entry_id)
        return await self._in_scope(
            "delete", lambda c, ids: repository.delete_entry(c, entry_id, ids), write=True
        )

    async def update(
        self,
        entry_id: uuid.UUID,
        *,
        memory: str | lifecycle.Unset = lifecycle.UNSET,
        category: MemoryCategory | str | lifecycle.Unset = lifecycle.UNSET,
        tags: list[str] | lifecycle.Unset = lifecycle.UNSET,
        relevance: float | lifecycle.Unset = lifecycle.UNSET,
        validated: bool | lifecycle.Unset = lifecycle.UNSET,
    ) -> MemoryEntry | None:
        """Change the fields given of the entry with this id; return it updated, or None.

        The entry keeps its id, ``created_at``, access stamps and place in
        insertion order (ties in retrieval break as before). One transaction;
        the next retrieval finds it by its new words only.

        Raises:
            InvalidEntryError: a new value is not valid (nothing changes).

        """
        entry_id = validate_id(entry_id)

        def changed(entry: MemoryEntry) -> MemoryEntry:
            return lifecycle.apply_update(
                entry,
                memory=memory,
                category=category,
                tags=tags,
                relevance=relevance,
                validated=validated,
            )

        async def work(connection: AsyncConnection, ids: ScopeIds) -> MemoryEntry | None:
            found = await repository.seq_of(connection, entry_id, ids)
            if found is None:
                return None
            seq, before = found
            after = changed(before)
            if after != before:  # logged: other processes, and a pass planned meanwhile, see it
                await repository.rewrite(
                    connection,
                    [(seq, after)],
                    log=[seq],
                    tags_of=[seq] if before.tags != after.tags else [],
                )
            return after

        changed(MemoryEntry(MemoryCategory.FACT, ""))  # invalid input: an error before any I/O
        return await self._in_scope("update", work, write=True)

    async def forget(
        self,
        *,
        older_than: datetime | timedelta | None = None,
        category: MemoryCategory | str | None = None,
        below: float | None = None,
        everything: bool = False,
    ) -> int:
        """Delete, in one transaction, the entries that meet every condition given.

        ``older_than``: created before this time (or this long before now);
        ``category``: of this category; ``below``: relevance below this.
        Return how many were deleted.

        Raises:
            InvalidEntryError: no condition is given and ``everything`` is not
                True (emptying a store is said explicitly), or a condition is
                not valid.

        """
        rule = lifecycle.forget_rule(
            older_than=older_than,
            category=category,
            below=below,
            everything=everything,
            now=self._shared.clock(),
        )

        async def work(connection: AsyncConnection, ids: ScopeIds) -> int:
            return await repository.remove(connection, repository.forget_condition(rule, ids))

        forgotten = await self._in_scope("forget", work, write=True)
        if forgotten:
            await self._give_back_free_pages()
        return forgotten

    async def scopes(self) -> list[tuple[str, int]]:
        """(name, number of entries) of this scope and every scope below it, sorted by name.

        Names are full paths (``""`` is the root); scopes without entries are left out.
        """
        scope = self._scope
        return await self._run(
            "list scopes", lambda c: repository.scope_counts(c, scope), write=False
        )

    async def iter_entries(self, batch_size: int = 1_000) -> AsyncIterator[MemoryEntry]:
        """Yield every entry the view reads in insertion order, ``batch_size`` at a time.

        Each batch is its own short read transaction, so the store stays usable
        while you iterate; an entry stored meanwhile may or may not be included.
        """
        async for _, entry in self.iter_scoped_entries(batch_size):
            yield entry

    async def iter_scoped_entries(
        self, batch_size: int = 1_000
    ) -> AsyncIterator[tuple[str, MemoryEntry]]:
        """Like :meth:`iter_entries`, each entry with its scope relative to this view's."""
        if batch_size < 1:
            raise InvalidEntryError(f"batch_size must be >= 1, got {batch_size}")
        after = 0
        base = self._scope.name
        while True:
            read_page = functools.partial(repository.page, after_seq=after, size=batch_size)
            batch = await self._in_scope("export", read_page, write=False)
            for _, entry, name in batch:
                yield scope_names.relative(base, name), entry
            if len(batch) < batch_size:
                return
            after = batch[-1][0]

    async def summary(self) -> Summary:
        """Count the view's entries: in all, by category, and in ten relevance bins."""
        return await self._in_scope("summary", repository.summarise, write=False)

    async def storage_bytes(self) -> int:
        """Bytes the store's tables and indexes take (a SQLite file's write-ahead log excluded)."""
        return await self._run("measure the database", repository.storage_bytes, write=False)

    async def free_bytes(self) -> int | None:
        """Bytes of free pages in a SQLite file, kept for later writes (see ``consolidate``).

        None for ``:memory:`` and PostgreSQL.
        """
        memory = self._target.is_memory

        async def measure(connection: AsyncConnection) -> int | None:
            return await repository.free_bytes(connection, memory=memory)

        return await self._run("measure the database", measure, write=False)

    async def schema_revision(self) -> str | None:
        """The alembic revision the database is at."""
        self._check_open(write=False)
        async with self._shared.serial:
            with translate_errors("read the schema revision"):
                async with self._engine.connect() as connection:
                    return await connection.run_sync(migrate.current)

    async def close(self) -> None:
        """Release every connection (of the store and all its views). Idempotent."""
        if self._shared.closed:
            return
        self._shared.closed = True
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
        shared = getattr(self, "_shared", None)
        if shared is not None and not shared.closed and self._root is None:
            warnings.warn(
                f"SqlMemoryStore({self.target}) was never closed; use `async with open_store(...)`"
                " or `await store.close()`",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        state = "closed" if self._shared.closed else "open"
        scope = ""
        if self._root is not None:
            scope = f" scope {self._scope.name!r}" + (
                " and below" if self._scope.descendants else ""
            )
        return f"<SqlMemoryStore {self.target}{scope} ({state})>"

    # --- the unit of work ---

    def _check_open(self, *, write: bool) -> None:
        shared = self._shared
        if shared.closed:
            raise StoreClosedError(f"the store at {self.target} is closed")
        if shared.lost is not None:
            raise StorageError(shared.lost)
        if write and shared.read_only:
            raise ReadOnlyStoreError(
                f"the store at {self.target} is read-only (opened with read_only=True): "
                "it writes nothing"
            )

    def _check_file(self) -> None:
        """After each unit of work, check that the file is the one opened (one ``stat``).

        Checked once the work is done, so that a write that went to a file
        removed or replaced meanwhile is not acknowledged.
        """
        shared = self._shared
        if shared.file is not None and shared.lost is None:
            shared.lost = shared.file.lost()
            if shared.lost is not None:
                raise StorageError(shared.lost)

    async def _in_scope(
        self,
        action: str,
        work: Callable[[AsyncConnection, ScopeIds], Awaitable[T]],
        *,
        write: bool,
    ) -> T:
        """Like :meth:`_run`, ``work`` given the ids of the scopes this view reads."""
        scope = self._scope

        async def scoped(connection: AsyncConnection) -> T:
            return await work(connection, await repository.scope_ids(connection, scope))

        return await self._run(action, scoped, write=write)

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
        self._check_open(write=write)
        abort = asyncio.Event()
        async with self._shared.serial:
            self._look_before(write=write)
            unit = asyncio.ensure_future(self._unit_of_work(action, work, write, abort))
            result = await _await_uncancellable(unit, abort)
        self._check_file()
        return result

    async def _run_raw(self, action: str, work: Callable[[Any], Awaitable[T]], *, write: bool) -> T:
        """Like ``_run``, with ``work`` given the driver's own connection.

        ``work`` owns the transaction (it begins, commits or rolls back): for the
        single store an agent makes after every tool call. A caller cancelled
        meanwhile sees CancelledError once the transaction has ended either way
        (it is too short to stop half way).
        """
        self._check_open(write=write)
        async with self._shared.serial:
            self._look_before(write=write)
            unit = asyncio.ensure_future(self._raw_unit_of_work(action, work, write))
            result = await _await_uncancellable(unit, asyncio.Event())
        self._check_file()
        return result

    def _look_before(self, *, write: bool) -> None:
        """Before a write, note whether someone else modified the file since the store looked."""
        if write and self._shared.file is not None:
            self._shared.file.look_before_writing()

    async def _fresh_pages(self, connection: AsyncConnection) -> Any:
        """The driver's connection, its cached pages dropped if the file changed meanwhile.

        A write then reads every page it touches from the file, and one that
        someone else overwrote with garbage fails (as SQLite finds it malformed)
        instead of being written over pages only the cache still holds.
        """
        raw = await connection.get_raw_connection()
        watch = self._shared.file
        if watch is not None and raw.info.get(_PAGES_AS_OF, 0) < watch.changes:
            await self._backend.drop_cached_pages(raw.driver_connection)
            raw.info[_PAGES_AS_OF] = watch.changes
        return raw.driver_connection

    async def _raw_unit_of_work(
        self, action: str, work: Callable[[Any], Awaitable[T]], write: bool
    ) -> T:
        with translate_errors(action):
            async with self._engine.connect() as connection:
                if write:
                    driver = await self._fresh_pages(connection)
                else:
                    driver = (await connection.get_raw_connection()).driver_connection
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
                    await self._fresh_pages(connection)
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


@dataclass(frozen=True, slots=True)
class _Read:
    """What a consolidation pass works from: the view's entries, and how to tell they changed."""

    ids: ScopeIds
    version: tuple[int, ...]
    seqs: list[int]
    entries: list[MemoryEntry]


async def write_pass(
    connection: AsyncConnection,
    seqs: list[int],
    before: list[MemoryEntry],
    result: lifecycle.ConsolidationResult,
    config: ConsolidationConfig,
    *,
    tuning: Tuning,
) -> ConsolidationStats:
    """Write what a pass over ``before`` (the entries at ``seqs``) made of them.

    Each survivor is written at the seq of its cluster's first member (so it
    keeps that place in insertion order); the others are removed. Other
    processes learn of rewritten entries from the change log (or, when many
    were rewritten, the index is built again), and read every entry again when
    a decay changed them all.
    """
    kept = {seqs[slot] for slot in result.slots}
    gone = [seq for seq in seqs if seq not in kept]
    for start in range(0, len(gone), 10_000):
        await repository.remove_seqs(connection, gone[start : start + 10_000])
    rows: list[tuple[int, MemoryEntry]] = []
    log: list[int] = []
    retagged: list[int] = []
    for slot, after in zip(result.slots, result.entries, strict=True):
        seq, old = seqs[slot], before[slot]
        if after == old:
            continue
        rows.append((seq, after))
        if old.tags != after.tags:
            retagged.append(seq)
        text_changed = (old.memory, old.tags) != (after.memory, after.tags)
        if text_changed or (not config.decay and old.relevance != after.relevance):
            log.append(seq)
    reindex = len(log) > tuning.reindex_above
    await repository.rewrite(connection, rows, log=[] if reindex else log, tags_of=retagged)
    if reindex:
        await connection.run_sync(index.rebuild, row_entries=tuning.tail_limit)
    if reindex or (config.decay and rows):
        await repository.raise_generation(connection)
    return result.stats


def migrate_schema(connection: Connection, *, upgrade: bool, create: bool | None = None) -> None:
    """Bring the schema to head, or check it is there (see :func:`migrate.ensure_schema`)."""
    migrate.ensure_schema(connection, upgrade=upgrade, create=create)


_PAGES_AS_OF = "loopctl_pages_as_of"
"""A pooled connection's note of the file's modification count its cached pages reflect."""


class FileWatch:
    """The SQLite file a store opened, watched with one ``stat`` at a time.

    It tells whether the path still names that file (same device and inode),
    and whether the file was modified since the store last looked, by some
    writer other than the store's own writes and their checkpoints: then the
    pages a connection has cached may no longer be what the file holds.
    """

    __slots__ = ("_identity", "_seen", "changes", "path")

    def __init__(self, file: Path) -> None:
        self.path = os.path.abspath(file)  # as opened, whatever the working directory
        found = os.stat(self.path)
        self._identity = (found.st_dev, found.st_ino)
        self._seen = (found.st_mtime_ns, found.st_size)
        self.changes = 0
        """How many times the file was seen modified by someone else."""

    @classmethod
    def of(cls, file: Path | None) -> FileWatch | None:
        """A watch of ``file`` (None for ``:memory:`` and servers)."""
        return None if file is None else cls(file)

    def look_before_writing(self) -> None:
        """Count a modification made since the store last looked (it then reads afresh)."""
        with contextlib.suppress(OSError):  # a vanished file: told after the write
            found = os.stat(self.path)
            if (found.st_mtime_ns, found.st_size) != self._seen:
                self.changes += 1

    def lost(self) -> str | None:
        """After the store's work: why the path no longer names the file, or None."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            what = "was removed or renamed"
        except OSError as exc:
            what = f"can no longer be examined ({exc.strerror})"
        else:
            if (found.st_dev, found.st_ino) == self._identity:
                self._seen = (found.st_mtime_ns, found.st_size)
                return None
            what = "was replaced by another file"
        return (
            f"the database file {self.path} {what} while the store had it open: "
            "the store acknowledges nothing more; reopen it"
        )


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
        track_access (bool): ``retrieve`` records an access of each returned
            entry that matched a query word or tag (``access_count`` + 1,
            ``last_accessed``), in a short write after the read (default False).
        consolidation (ConsolidationConfig): what ``consolidate()`` does by
            default (default ``ConsolidationConfig()``, loopctl 0.1.0's rule).
        clock (Callable[[], datetime]): the time now, for access stamps, decay
            and ``forget(older_than=timedelta)`` (default: the system clock, UTC).
        read_only (bool): open an existing database without writing anything
            (default False): every read is served, every write raises
            StorageError, the schema is checked and never migrated. A SQLite file
            opens with ``mode=ro``, or as ``immutable`` where SQLite cannot open
            it otherwise (a WAL file with no ``-shm`` in a directory that cannot
            be written: a read-only mount, another user's directory), which
            assumes nobody writes it meanwhile. PostgreSQL runs read-only
            transactions.

    A SQLite store checks after every operation that its path still names the
    file it opened (one ``stat``): once the file was removed, renamed or
    replaced, every operation raises StorageError naming the path.

    Example:
        >>> async def main() -> None:
        ...     async with open_store("memory.db") as store:
        ...         await store.store(MemoryEntry(MemoryCategory.FACT, "CI runs make test"))

    """
    return _OpenStore(target, options)
