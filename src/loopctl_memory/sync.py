"""The blocking API: :class:`SyncMemoryStore`, the SQL store for code without an event loop.

Each store opened here runs its own event loop in a daemon thread, and every
method hands its work to that loop and waits for the answer. Calls from many
threads therefore run concurrently on the one loop, exactly as concurrent
tasks do on the async :class:`~loopctl_memory.SqlMemoryStore`.

Example:
    >>> from loopctl_memory import MemoryCategory, MemoryEntry, sync
    >>> with sync.open_store("memory.db") as store:  # doctest: +SKIP
    ...     store.store(MemoryEntry(MemoryCategory.FACT, "CI runs make test", tags=["ci"]))
    ...     for entry in store.retrieve("how does CI run", 5):
    ...         print(entry.memory)
    ...     agent = store.scope("team/agent-1")  # a view: same thread, same connections
    ...     agent.store(MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over find"))
    ...     print(store.count(), agent.count(), store.scopes())
    CI runs make test
    1 1 [('', 1), ('team/agent-1', 1)]

"""

from __future__ import annotations

import os
import uuid
import warnings
from collections.abc import (
    Callable,
    Iterable,
    Iterator,
)
from datetime import date, datetime, timedelta
from types import TracebackType
from typing import IO, Any, Unpack

from loopctl_memory import jsonl
from loopctl_memory.context import Context
from loopctl_memory.entry import ConsolidationStats, MemoryCategory, MemoryEntry, Summary
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import FlatBatch
from loopctl_memory.history import HistoryEvent
from loopctl_memory.lifecycle import UNSET, ConsolidationConfig, ConsolidationPreview, Unset
from loopctl_memory.protocol import Embedder
from loopctl_memory.rankings import Explanation
from loopctl_memory.sql.opening import OpenOptions
from loopctl_memory.sql.opening import open_store as _open_async
from loopctl_memory.sql.store.embeddings import RecordedEmbedder
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.sync_lookups import SyncLookups
from loopctl_memory.sync_loop import LoopThread, iterate

__all__ = ["SyncMemoryStore", "open_store"]


class SyncMemoryStore(SyncLookups):
    """The SQL memory store with a blocking API, safe to share between threads.

    Open one with :func:`open_store`. Every method is the method of the same name
    of :class:`~loopctl_memory.SqlMemoryStore`, run to completion: the same
    arguments, results and errors (each operation one transaction, committed or
    rolled back as a whole). Calls from several threads run concurrently, as
    concurrent tasks do on the async store.

    Close it (or use ``with``): that closes the database connections and stops
    the store's thread. A store garbage-collected unclosed warns with a
    ``ResourceWarning`` and is then closed. Any method called after
    :meth:`close` raises :class:`~loopctl_memory.StorageError`.
    """

    def __init__(
        self,
        runner: LoopThread,
        store: SqlMemoryStore,
        *,
        root: SyncMemoryStore | None = None,
        descendants: bool = False,
    ) -> None:
        """Not for users: see :func:`open_store`, :meth:`scope` and :meth:`with_descendants`."""
        self._runner = runner
        self._store = store
        self._root = root  # a view keeps its store alive: only the store warns if unclosed
        self._descendants = descendants

    # --- views ---

    def scope(self, name: str, *, descendants: bool = False) -> SyncMemoryStore:
        """A view limited to scope ``name`` (relative to this view's scope).

        It writes into scope ``name`` and reads that scope's entries, with
        ``descendants=True`` those of every scope below it too. It shares this
        store's thread and connections: closing it closes the store.

        Raises:
            InvalidArgumentError: ``name`` is not a non-empty ``/``-separated path of
                at most 255 characters without empty segments.

        """
        view = self._store.scope(name, descendants=descendants)
        return SyncMemoryStore(self._runner, view, root=self._root or self, descendants=descendants)

    def with_descendants(self) -> SyncMemoryStore:
        """A view of this store's scope and every scope below it; it writes where this one does."""
        return SyncMemoryStore(
            self._runner, self._store.with_descendants(), root=self._root or self, descendants=True
        )

    @property
    def scope_name(self) -> str:
        """The scope this store writes into (``""``: the root)."""
        return self._store.scope_name

    @property
    def target(self) -> str:
        """Where the store lives (":memory:", a file path, or a URL without password)."""
        return self._store.target

    @property
    def read_only(self) -> bool:
        """Whether the store was opened with ``read_only=True`` (every write raises)."""
        return self._store.read_only

    # --- the LoopMemory contract, blocking ---

    def store(self, entry: MemoryEntry) -> None:
        """Store one entry durably.

        Raises:
            InvalidEntryError: the entry is not valid (nothing is stored).
            DuplicateEntryError: an entry with this id is already stored.
            StorageError: the database refused the write, or the store is closed.

        """
        self._runner.run(self._store.store(entry))

    def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Store every entry in one transaction, in order: all of them or none.

        ``entries`` is read in the calling thread, before anything is stored.

        Raises:
            InvalidEntryError: an entry is not valid (nothing is stored).
            DuplicateEntryError: an id repeats in the batch or is already stored.
            StorageError: the database refused the write, or the store is closed.

        """
        # Read here, not on the loop: a generator may use thread-local state, or this store.
        self._runner.run(self._store.store_many(list(entries)))

    def store_flat(self, batch: FlatBatch) -> None:
        """Store a batch of already checked, flattened entries in one transaction.

        See :meth:`loopctl_memory.SqlMemoryStore.store_flat`.
        """
        self._runner.run(self._store.store_flat(batch))

    def retrieve(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        context: Context | None = None,
    ) -> list[MemoryEntry]:
        """Return up to ``limit`` entries, best first by ``ranking`` (default: the store's).

        Only the entries ``filter`` passes compete; ``context`` weighs each
        entry's neighbours (default: the store's). See
        :meth:`loopctl_memory.SqlMemoryStore.retrieve`.

        Raises:
            InvalidEntryError: ``query`` is not a str or ``limit`` is not an int >= 0.
            InvalidArgumentError: an unknown ranking, or ``filter`` is not a MemoryFilter.
            StorageError: the store is closed or the database failed.

        """
        return self._runner.run(
            self._store.retrieve(query, limit, ranking=ranking, filter=filter, context=context)
        )

    def retrieve_scored(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        """Like :meth:`retrieve`, each entry with its score for ``query``.

        ``matched_only``: leave out the entries that matched no query word or tag.
        See :meth:`loopctl_memory.SqlMemoryStore.retrieve_scored`.
        """
        return self._runner.run(
            self._store.retrieve_scored(
                query,
                limit,
                ranking=ranking,
                filter=filter,
                matched_only=matched_only,
                context=context,
            )
        )

    def retrieve_explained(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, Explanation]]:
        """:meth:`retrieve_scored`, each score with its parts (see the async store)."""
        return self._runner.run(
            self._store.retrieve_explained(
                query,
                limit,
                ranking=ranking,
                filter=filter,
                matched_only=matched_only,
                context=context,
            )
        )

    def consolidate(
        self, config: ConsolidationConfig | None = None, *, vacuum: bool = False
    ) -> ConsolidationStats:
        """Run a consolidation pass over the view's entries, in one transaction.

        ``config`` defaults to the store's (``open_store(consolidation=...)``,
        itself by default ``ConsolidationConfig()``, loopctl 0.1.0's pruning rule).
        ``vacuum=True``: then give the database's free space back (see
        :meth:`loopctl_memory.SqlMemoryStore.consolidate`).
        """
        return self._runner.run(self._store.consolidate(config, vacuum=vacuum))

    def preview_consolidation(
        self, config: ConsolidationConfig | None = None
    ) -> ConsolidationPreview:
        """What :meth:`consolidate` with ``config`` would do now, and why; nothing is written."""
        return self._runner.run(self._store.preview_consolidation(config))

    def count(self, *, filter: MemoryFilter | None = None) -> int:
        """Return the number of entries the store (or view) reads (that ``filter`` passes)."""
        return self._runner.run(self._store.count(filter=filter))

    def is_empty(self) -> bool:
        """Return whether the store (or view) reads no entry."""
        return self._runner.run(self._store.is_empty())

    # --- beyond the contract ---

    def pending_embeddings(self) -> int:
        """How many entries of the view wait for a vector (see the async store)."""
        return self._runner.run(self._store.pending_embeddings())

    def export_jsonl(
        self,
        target: str | os.PathLike[str] | IO[bytes],
        *,
        batch_size: int = jsonl.EXPORT_BATCH,
        history: bool = False,
    ) -> int:
        """Write every entry as JSON Lines; how many (:func:`loopctl_memory.jsonl.export_jsonl`)."""
        return self._runner.run(
            jsonl.export_jsonl(self._store, target, batch_size=batch_size, history=history)
        )

    def import_jsonl(
        self,
        source: str | os.PathLike[str] | IO[bytes],
        *,
        batch_size: int = jsonl.IMPORT_BATCH,
        on_progress: jsonl.Progress | None = None,
        on_duplicate: jsonl.OnDuplicate = "fail",
    ) -> jsonl.ImportReport:
        """Store a JSON Lines file or stream (:func:`loopctl_memory.jsonl.import_jsonl`)."""
        return self._runner.run(
            jsonl.import_jsonl(
                self._store,
                source,
                batch_size=batch_size,
                on_progress=on_progress,
                on_duplicate=on_duplicate,
            )
        )

    def build_indexes(self, progress: Callable[[int, int], object] | None = None) -> int:
        """Build the graph files due now; how many vectors they hold (see the async store)."""
        return self._runner.run(self._store.build_indexes(progress))

    def start_upkeep(self) -> None:
        """Start the index upkeep due in the background, without waiting (see the async store)."""
        self._runner.run(self._store.start_upkeep())

    def embed_pending(self, batch_size: int = 256) -> int:
        """Make the vectors of the view's pending entries; how many (see the async store)."""
        return self._runner.run(self._store.embed_pending(batch_size))

    def reembed(
        self,
        embedder: Embedder | str,
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], object] | None = None,
    ) -> int:
        """Make every vector again with ``embedder`` (see the async store)."""
        return self._runner.run(
            self._store.reembed(embedder, batch_size=batch_size, progress=progress)
        )

    @property
    def embedder(self) -> Embedder | None:
        """The embedder that makes this store's vectors, or None."""
        return self._store.embedder

    def recorded_embedder(self) -> RecordedEmbedder | None:
        """The embedder the store records, and the view's pending entries (or None)."""
        return self._runner.run(self._store.recorded_embedder())

    def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None (also when it is in a scope not read here)."""
        return self._runner.run(self._store.get(entry_id))

    def delete(self, entry_id: uuid.UUID) -> bool:
        """Delete the entry with this id; return whether it existed (in a scope read here)."""
        return self._runner.run(self._store.delete(entry_id))

    def sweep_expired(self) -> int:
        """Delete the view's entries that have expired; return how many."""
        return self._runner.run(self._store.sweep_expired())

    def history(
        self,
        entry_id: uuid.UUID | None = None,
        *,
        filter: MemoryFilter | None = None,
        since: datetime | timedelta | None = None,
        events: Iterable[str] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[HistoryEvent]:
        """The events of the view's memories (:meth:`SqlMemoryStore.history`)."""
        return self._runner.run(
            self._store.history(
                entry_id,
                filter=filter,
                since=since,
                events=events,
                limit=limit,
                newest_first=newest_first,
            )
        )

    def newest_page(
        self, limit: int, *, filter: MemoryFilter | None = None, before: str | None = None
    ) -> tuple[list[tuple[str, MemoryEntry]], str | None]:
        """One page of the view's entries, newest first, and the next page's cursor."""
        return self._runner.run(self._store.newest_page(limit, filter=filter, before=before))

    def history_of(self, entry_ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, list[HistoryEvent]]:
        """The events of each of ``entry_ids`` the view stores, oldest first, in one read."""
        return self._runner.run(self._store.history_of(entry_ids))

    def update(
        self,
        entry_id: uuid.UUID,
        *,
        memory: str | Unset = UNSET,
        category: MemoryCategory | str | Unset = UNSET,
        tags: list[str] | Unset = UNSET,
        relevance: float | Unset = UNSET,
        validated: bool | Unset = UNSET,
        metadata: dict[str, Any] | Unset = UNSET,
        merge_metadata: dict[str, Any] | Unset = UNSET,
        expires_at: datetime | Unset | None = UNSET,
    ) -> MemoryEntry | None:
        """Change the fields given of the entry with this id; return it updated, or None.

        The entry keeps its id, ``created_at``, access stamps and place in
        insertion order. ``metadata`` replaces the object, ``merge_metadata``
        sets only the keys it gives; ``expires_at`` sets when it expires (None: never).

        Raises:
            InvalidEntryError: a new value is not valid (nothing changes).

        """
        return self._runner.run(
            self._store.update(
                entry_id,
                memory=memory,
                category=category,
                tags=tags,
                relevance=relevance,
                validated=validated,
                metadata=metadata,
                merge_metadata=merge_metadata,
                expires_at=expires_at,
            )
        )

    def forget(
        self,
        *,
        older_than: datetime | timedelta | None = None,
        category: MemoryCategory | str | None = None,
        below: float | None = None,
        filter: MemoryFilter | None = None,
        everything: bool = False,
    ) -> int:
        """Delete, in one transaction, the entries that meet every condition given.

        ``older_than``: created before this time (or this long before now);
        ``category``: of this category; ``below``: relevance below this;
        ``filter``: the entries it passes.
        Return how many were deleted.

        Raises:
            InvalidArgumentError: no condition is given and ``everything`` is not
                True, or a condition is not valid.

        """
        return self._runner.run(
            self._store.forget(
                older_than=older_than,
                category=category,
                below=below,
                filter=filter,
                everything=everything,
            )
        )

    def scopes(self) -> list[tuple[str, int]]:
        """(name, number of entries) of this scope and every scope below it, sorted by name."""
        return self._runner.run(self._store.scopes())

    def iter_entries(
        self,
        batch_size: int = 1_000,
        *,
        filter: MemoryFilter | None = None,
        newest_first: bool = False,
    ) -> Iterator[MemoryEntry]:
        """Yield every entry the view reads (that ``filter`` passes) in insertion order.

        ``batch_size`` at a time; ``newest_first``: in the reverse order.

        Each batch is its own short read transaction, so the store stays usable
        (from this thread too) while you iterate. Closing the iterator early
        (``close()``, or leaving a ``for`` loop that owned it) releases it at
        once. One iterator belongs to one thread at a time.
        """
        return iterate(
            self._runner,
            lambda: self._store.iter_entries(batch_size, filter=filter, newest_first=newest_first),
            batch_size,
        )

    def iter_scoped_entries(
        self,
        batch_size: int = 1_000,
        *,
        filter: MemoryFilter | None = None,
        newest_first: bool = False,
    ) -> Iterator[tuple[str, MemoryEntry]]:
        """Like :meth:`iter_entries`, each entry with its scope relative to this view's."""
        return iterate(
            self._runner,
            lambda: self._store.iter_scoped_entries(
                batch_size, filter=filter, newest_first=newest_first
            ),
            batch_size,
        )

    def created_per_day(self) -> list[tuple[date, int]]:
        """How many of the view's entries were created each UTC day, oldest day first."""
        return self._runner.run(self._store.created_per_day())

    def summary(self) -> Summary:
        """Count the view's entries: in all, by category, and in ten relevance bins."""
        return self._runner.run(self._store.summary())

    def storage_bytes(self) -> int:
        """Bytes the store's tables and indexes take (a SQLite file's write-ahead log excluded)."""
        return self._runner.run(self._store.storage_bytes())

    def schema_revision(self) -> str | None:
        """The alembic revision the database is at."""
        return self._runner.run(self._store.schema_revision())

    def free_bytes(self) -> int | None:
        """Bytes of free pages in a SQLite file (None for ``:memory:`` and PostgreSQL)."""
        return self._runner.run(self._store.free_bytes())

    # --- lifecycle ---

    @property
    def closed(self) -> bool:
        """Whether the store (closed through it or any of its views) is closed."""
        return self._runner.closed

    def close(self) -> None:
        """Close the database connections and stop the store's thread. Idempotent, thread-safe.

        Closing a view closes the whole store, as on the async store. A call still
        running in another thread meanwhile ends with StorageError.
        """
        self._runner.close(self._store)

    def __enter__(self) -> SyncMemoryStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __del__(self) -> None:
        runner = getattr(self, "_runner", None)
        if runner is None or self._root is not None or runner.closed:
            return
        # Closed first, so the async store, closed too, does not warn a second time.
        runner.abandon(self._store)
        warnings.warn(
            f"SyncMemoryStore({runner.describe}) was never closed; use"
            " `with sync.open_store(...)` or `store.close()`",
            ResourceWarning,
            stacklevel=2,
        )

    def __repr__(self) -> str:
        scope = ""
        if self._root is not None:
            scope = f" scope {self.scope_name!r}" + (" and below" if self._descendants else "")
        state = "closed" if self._runner.closed else "open"
        return f"<SyncMemoryStore {self.target}{scope} ({state})>"


def open_store(
    target: str | os.PathLike[str] = ":memory:", **options: Unpack[OpenOptions]
) -> SyncMemoryStore:
    """Open a :class:`SyncMemoryStore` at ``target``, migrating its schema to head.

    ``target`` and the options are those of :func:`loopctl_memory.open_store`
    (:class:`~loopctl_memory.OpenOptions`).
    The store gets a thread of its own, running its event loop; close the
    store (or use ``with``) to stop it.

    Raises:
        SchemaError: the schema is unknown, newer, or older and ``migrate`` is false.
        StorageError: the database cannot be opened.
        TypeError: an unknown option (no thread is left behind on any error).

    """
    runner = LoopThread()
    try:
        store = runner.run(_opened(target, options))
    except BaseException:
        runner.close(None)
        raise
    runner.describe = store.target
    return SyncMemoryStore(runner, store)


async def _opened(target: str | os.PathLike[str], options: OpenOptions) -> SqlMemoryStore:
    return await _open_async(target, **options)
