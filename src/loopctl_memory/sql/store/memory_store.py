"""SqlMemoryStore: the store's public operations, each validate, one unit of work, one call.

How an operation reaches the database is :mod:`~loopctl_memory.sql.database.unit_of_work`;
what it reads and writes is :mod:`~loopctl_memory.sql.rows.repository` and the
rankers; opening a store is :mod:`~loopctl_memory.sql.opening`.
"""

from __future__ import annotations

import functools
import uuid
import warnings
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, date, datetime, timedelta
from types import TracebackType
from typing import Any

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import lifecycle
from loopctl_memory import scopes as scope_names
from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.context import Context, check_context_for
from loopctl_memory.embedding import DEFAULT_TIMEOUT
from loopctl_memory.entry import (
    MemoryCategory,
    MemoryEntry,
    Summary,
    check_entry,
    validate_id,
    validate_query,
)
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter, check_filter
from loopctl_memory.flat import FlatBatch, flatten
from loopctl_memory.history import KEEP_HISTORY
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.rankings import EMBEDDING_RANKINGS, Explanation
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.background.folds import TailFolds
from loopctl_memory.sql.background.graph_builds import GraphBuilds
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.ranking.graph_home import GraphHome
from loopctl_memory.sql.ranking.state import RankingState
from loopctl_memory.sql.rows import removals, repository
from loopctl_memory.sql.rows.scope_rows import ScopeIds, scope_counts
from loopctl_memory.sql.store import retrieval
from loopctl_memory.sql.store.consolidation import ConsolidationOperations
from loopctl_memory.sql.store.database import DatabaseFacts
from loopctl_memory.sql.store.embeddings import EmbeddingOperations
from loopctl_memory.sql.store.expiry import ExpiryOperations
from loopctl_memory.sql.store.history import HistoryOperations
from loopctl_memory.sql.store.lookups import IdLookups
from loopctl_memory.sql.store.shared import SharedState
from loopctl_memory.sql.tuning import Tuning


def _cursor_seq(before: str | None) -> int:
    """The seq a :meth:`SqlMemoryStore.newest_page` cursor stands for (0: the newest)."""
    if before is None:
        return 0
    if not isinstance(before, str) or not before.isdigit() or int(before) < 1:
        raise InvalidArgumentError(f"before must be a cursor a page gave, not {before!r}")
    return int(before)


_EPOCH_DAY = date(1970, 1, 1)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class SqlMemoryStore(
    EmbeddingOperations,
    IdLookups,
    ExpiryOperations,
    HistoryOperations,
    ConsolidationOperations,
    DatabaseFacts,
):
    """The loopctl memory contract, persistent, on SQLite or PostgreSQL.

    Open one with :func:`~loopctl_memory.sql.opening.open_store`. Every operation
    is one transaction: it commits on success, and on any failure rolls back and
    leaves the store as it was. Writes on SQLite start as ``BEGIN IMMEDIATE`` so
    concurrent writers wait (up to ``busy_timeout``) instead of failing. A
    ``:memory:`` database is one connection, so its operations run one at a time.
    """

    def __init__(
        self, shared: SharedState, scope: Scope, root: SqlMemoryStore | None = None
    ) -> None:
        """A store over ``shared`` reading ``scope``; ``root`` is the store a view belongs to."""
        self._shared = shared
        self._unit = shared.unit
        self._scope = scope
        self._root = root  # a view keeps its store alive

    @classmethod
    def over(
        cls,
        unit: UnitOfWork,
        *,
        tuning: Tuning,
        track_access: bool,
        consolidation: ConsolidationConfig,
        clock: Callable[[], datetime] | None,
        ranking: str = "reference",
        bm25: Bm25Parameters | None = None,
        context: Context = "auto",
        embed_timeout: float = DEFAULT_TIMEOUT,
        graph_home: GraphHome | None = None,
        graph_builds: GraphBuilds | None = None,
        folds: TailFolds | None = None,
        ttl: timedelta | None = None,
        refresh_on_read: bool = False,
        history: bool = True,
        keep_history: timedelta | None = KEEP_HISTORY,
    ) -> SqlMemoryStore:
        """The root store over ``unit``, with options already checked (see ``open_store``).

        ``graph_home``: where the vectors' graph files go (None: nowhere, every vector
        is held in memory); ``graph_builds``: who builds them when one is due (None: none);
        ``folds``: who indexes a long tail (None: each write indexes its own).
        """
        shared = SharedState(
            unit=unit,
            tuning=tuning,
            track_access=track_access,
            consolidation=consolidation,
            clock=clock or _utc_now,
            ranking=RankingState(tuning, graph_home),  # this process's copy for retrieval
            graph_builds=graph_builds or GraphBuilds("", enabled=False),
            folds=folds or TailFolds("", enabled=False, tail_limit=tuning.tail_limit),
            ranks_by=ranking,
            bm25=bm25 or Bm25Parameters(),
            context=context,
            embed_timeout=embed_timeout,
            ttl=ttl,
            refresh_on_read=refresh_on_read,
            history=history,
            keep_history=keep_history,
        )
        return cls(shared, Scope())

    def scope(self, name: str, *, descendants: bool = False) -> SqlMemoryStore:
        """A view of this store limited to scope ``name`` (relative to this view's scope).

        The view has the whole store API and satisfies ``LoopMemory``. It writes
        into scope ``name``; it reads that scope's entries, and with
        ``descendants=True`` those of every scope below it too. It shares this
        store's connections: close the store, not the view.

        Raises:
            InvalidArgumentError: ``name`` is not a non-empty ``/``-separated path of
                at most 255 characters without empty segments.

        """
        return self._view(self._scope.narrowed(name, descendants=descendants))

    def with_descendants(self) -> SqlMemoryStore:
        """A view of this store's scope and every scope below it (of the root: every entry).

        It writes into this store's scope, as the store does.
        """
        return self._view(Scope(self._scope.name, descendants=True))

    def _view(self, scope: Scope) -> SqlMemoryStore:
        return SqlMemoryStore(self._shared, scope, self._root or self)

    @property
    def scope_name(self) -> str:
        """The scope this store writes into (``""``: the root)."""
        return self._scope.name

    # --- the LoopMemory contract ---

    async def store(self, entry: MemoryEntry) -> None:
        """Store one entry durably.

        Raises:
            InvalidEntryError: the entry is not valid (nothing is stored).
            DuplicateEntryError: an entry with this id is already stored.
            StorageError: the database refused the write.

        """
        batch = self._with_default_expiry(flatten((check_entry(entry),)))
        embedded = await self._embed(batch)
        await self._write(batch)
        if embedded:
            await self._after_embedded_write(1)

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
        batch = self._with_default_expiry(batch)
        embedded = await self._embed(batch)
        await self._write(batch)
        if embedded:
            await self._after_embedded_write(len(batch))

    async def retrieve(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        context: Context | None = None,
    ) -> list[MemoryEntry]:
        """Return up to ``limit`` entries, best first by ``ranking`` (default: the store's).

        ``"reference"`` ranks exactly as loopctl 0.1.0; ``"bm25"`` by Lucene
        BM25 (:mod:`loopctl_memory.bm25`), only entries that share a word with
        the query. Only the entries ``filter`` passes compete. ``context``
        (default: the store's, ``"auto"`` unless ``open_store(context=)`` says
        otherwise) weighs each entry's neighbours in its scope's insertion
        order in ``bm25``, ``vector`` and ``hybrid`` (:mod:`loopctl_memory.context`).

        Raises:
            InvalidEntryError: ``query`` is not a str or ``limit`` is not an int >= 0.
            InvalidArgumentError: an unknown ranking, ``filter`` is not a MemoryFilter,
                or ``context`` is neither ``"auto"`` nor a weight >= 0 (or one > 0
                for ``reference``, which ranks as loopctl 0.1.0 does).

        """
        found = await self.retrieve_scored(
            query, limit, ranking=ranking, filter=filter, context=context
        )
        return [entry for entry, _ in found]

    async def retrieve_scored(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        """:meth:`retrieve` with each entry's score (reference: its binary32 value, as a float).

        With ``matched_only``, only the entries a word or a tag of the query
        raised above their baseline score compete (the reference pads its answer
        with unmatched entries; BM25 never does); the ranking among them is
        unchanged. Raises as :meth:`retrieve` does.
        """
        found = await self._retrieve(
            query, limit, ranking, filter, matched_only, context=context, explain=False
        )
        return [(entry, parts.score) for entry, parts in found]

    async def retrieve_explained(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, Explanation]]:
        """:meth:`retrieve_scored`, each score with its parts (:class:`Explanation`).

        ``hybrid``: the BM25 score and cosine fused, and the view's BM25 maximum
        and cosine range they were scaled by; ``bm25`` and ``vector``: the one
        part; with context, also what the neighbours added and at what weight.
        Raises as :meth:`retrieve` does.
        """
        return await self._retrieve(
            query, limit, ranking, filter, matched_only, context=context, explain=True
        )

    async def _retrieve(
        self,
        query: str,
        limit: int,
        ranking: str | None,
        filter: MemoryFilter | None,
        matched_only: bool,
        *,
        context: Context | None,
        explain: bool,
    ) -> list[tuple[MemoryEntry, Explanation]]:
        validate_query(query, limit)
        shared = self._shared
        chosen = shared.ranks_by if ranking is None else self._check_ranking(ranking)
        # A store's own weight applies to the rankings it can; a call's is checked.
        weighing = shared.context if context is None else check_context_for(chosen, context)
        passes = check_filter(filter)
        embedder = shared.embedder
        made = await self._query_vector(query) if chosen in EMBEDDING_RANKINGS else None
        found = await retrieval.retrieve_explained(
            self._unit,
            shared.ranking,
            shared.ranking_lock,
            retrieval.Request(
                query,
                limit,
                self._scope,
                ranking=chosen,
                parameters=shared.bm25,
                passes=passes,
                matched_only=matched_only,
                query_vector=made,
                embedder_id=0 if embedder is None else embedder.embedder_id,
                dims=0 if embedder is None else embedder.embedder.dims,
                context=weighing,
                explain=explain,
                clock=shared.now_us,
            ),
            clock=shared.clock if shared.track_access else None,
            history=shared.history,
        )
        # Only a retrieval that ranked by vectors has just followed the manifest: after
        # any other, build_due may still say what a child has since built.
        files = shared.ranking.vector_files
        if made is not None and embedder is not None and files is not None and files.build_due:
            shared.graph_builds.start(embedder.embedder.name, embedder.embedder.dims)
        await self._refresh([entry for entry, _ in found])
        return found

    async def count(self, *, filter: MemoryFilter | None = None) -> int:
        """Return the number of entries the store (or view) reads (that ``filter`` passes)."""
        passes = check_filter(filter)
        return await self._in_scope(
            "count", lambda c, ids: repository.count(c, ids, passes), write=False
        )

    async def is_empty(self) -> bool:
        """Return whether no entry is stored."""
        return await self.count() == 0

    # --- beyond the contract ---

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None (also when it is in a scope not read here)."""
        entry_id = validate_id(entry_id)
        found = await self._in_scope(
            "get", lambda c, ids: repository.get_entry(c, entry_id, ids), write=False
        )
        return await self._refreshed(found)

    async def delete(self, entry_id: uuid.UUID) -> bool:
        """Delete the entry with this id; return whether it existed (in a scope read here)."""
        entry_id = validate_id(entry_id)
        stamp = self._shared.stamp("delete")
        return await self._in_scope(
            "delete", lambda c, ids: removals.delete_entry(c, entry_id, ids, stamp), write=True
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
        metadata: dict[str, Any] | lifecycle.Unset = lifecycle.UNSET,
        merge_metadata: dict[str, Any] | lifecycle.Unset = lifecycle.UNSET,
        expires_at: datetime | lifecycle.Unset | None = lifecycle.UNSET,
    ) -> MemoryEntry | None:
        """Change the fields given of the entry with this id; return it updated, or None.

        The entry keeps its id, ``created_at``, access stamps and place in
        insertion order (ties in retrieval break as before). One transaction;
        the next retrieval finds it by its new words only. A new memory's
        vector is made before it, or the entry is pending. ``metadata``
        replaces the object, ``merge_metadata`` sets only the keys it gives.
        ``expires_at`` sets when it expires (None: never; see :mod:`loopctl_memory.expiry`).

        Raises:
            InvalidEntryError: a new value is not valid (nothing changes).

        """
        entry_id = validate_id(entry_id)
        changed = lifecycle.updater(
            memory=memory,
            category=category,
            tags=tags,
            relevance=relevance,
            validated=validated,
            metadata=metadata,
            merge_metadata=merge_metadata,
            expires_at=expires_at,
        )
        vector = await self._embed_text(memory) if isinstance(memory, str) else None
        stamp = self._shared.stamp("update")
        return await self._in_scope(
            "update",
            lambda c, ids: repository.update_entry(
                c, entry_id, changed, ids, vector=vector, stamp=stamp
            ),
            write=True,
        )

    async def forget(
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
                True (emptying a store is said explicitly), or a condition is
                not valid.

        """
        rule = lifecycle.forget_rule(
            older_than=older_than,
            category=category,
            below=below,
            filter=filter,
            everything=everything,
            now=self._shared.clock(),
        )

        happened = removals.forgotten(self._shared.stamp("forget"), rule)

        async def work(connection: AsyncConnection, ids: ScopeIds) -> int:
            condition = removals.forget_condition(rule, ids)
            return await removals.remove(connection, condition, happened)

        forgotten = await self._in_scope("forget", work, write=True)
        if forgotten:
            await self._unit.give_back_free_pages()
        return forgotten

    async def scopes(self) -> list[tuple[str, int]]:
        """(name, number of entries) of this scope and every scope below it, sorted by name.

        Names are full paths (``""`` is the root); scopes without entries are left out.
        """
        scope = self._scope
        return await self._unit.run("list scopes", lambda c: scope_counts(c, scope), write=False)

    async def iter_entries(
        self,
        batch_size: int = 1_000,
        *,
        filter: MemoryFilter | None = None,
        newest_first: bool = False,
    ) -> AsyncIterator[MemoryEntry]:
        """Yield every entry the view reads (that ``filter`` passes) in insertion order.

        ``batch_size`` at a time, each batch its own short read transaction, so
        the store stays usable while you iterate; an entry stored meanwhile may
        or may not be included. ``newest_first``: in the reverse order.
        """
        async for _, entry in self.iter_scoped_entries(
            batch_size, filter=filter, newest_first=newest_first
        ):
            yield entry

    async def iter_scoped_entries(
        self,
        batch_size: int = 1_000,
        *,
        filter: MemoryFilter | None = None,
        newest_first: bool = False,
    ) -> AsyncIterator[tuple[str, MemoryEntry]]:
        """Like :meth:`iter_entries`, each entry with its scope relative to this view's."""
        if batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be >= 1, got {batch_size}")
        passes = check_filter(filter)
        after = 0
        base = self._scope.name
        while True:
            read_page = functools.partial(
                repository.page,
                after_seq=after,
                size=batch_size,
                passes=passes,
                newest_first=bool(newest_first),
            )
            batch = await self._in_scope("export", read_page, write=False)
            for _, entry, name in batch:
                yield scope_names.relative(base, name), entry
            if len(batch) < batch_size:
                return
            after = batch[-1][0]

    async def newest_page(
        self, limit: int, *, filter: MemoryFilter | None = None, before: str | None = None
    ) -> tuple[list[tuple[str, MemoryEntry]], str | None]:
        """One page of the view's entries, newest stored first, for a person paging through.

        Up to ``limit`` entries (each with its scope relative to the view) that
        ``filter`` passes, stored before the page that gave ``before`` (None:
        from the newest); and the cursor of the next page, None after the last.
        One read transaction on the insertion-order index: as fast on the
        hundredth page as on the first.

        Raises:
            InvalidArgumentError: ``limit`` is not an int >= 1, or ``before`` not
                a cursor this method gave.

        """
        if type(limit) is not int or limit < 1:
            raise InvalidArgumentError(f"limit must be an int >= 1, not {limit!r}")
        passes = check_filter(filter)
        after = _cursor_seq(before)
        read_page = functools.partial(
            repository.page, after_seq=after, size=limit + 1, passes=passes, newest_first=True
        )
        batch = await self._in_scope("list", read_page, write=False)
        base = self._scope.name
        shown = [(scope_names.relative(base, name), entry) for _, entry, name in batch[:limit]]
        return shown, (str(batch[limit - 1][0]) if len(batch) > limit else None)

    async def created_per_day(self) -> list[tuple[date, int]]:
        """How many of the view's entries were created each UTC day, oldest day first.

        Days without one are left out. One read (a pass over the view's rows).
        """
        found = await self._in_scope("count by day", repository.created_per_day, write=False)
        return [(_EPOCH_DAY + timedelta(days=day), number) for day, number in found]

    async def summary(self) -> Summary:
        """Count the view's entries: in all, by category, and in ten relevance bins."""
        return await self._in_scope("summary", repository.summarise, write=False)

    async def close(self) -> None:
        """Release every connection (of the store and all its views). Idempotent.

        A graph build under way in a child process is stopped (see ``build_indexes``);
        so is a child indexing the tail, and what is still due is indexed here.
        """
        await self._shared.graph_builds.stop()
        await self._finish_upkeep()
        await self._unit.close()

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
        if shared is not None and not shared.unit.closed and self._root is None:
            warnings.warn(
                f"SqlMemoryStore({self.target}) was never closed; use `async with open_store(...)`"
                " or `await store.close()`",
                ResourceWarning,
                stacklevel=2,
            )

    def __repr__(self) -> str:
        state = "closed" if self._unit.closed else "open"
        scope = ""
        if self._root is not None:
            scope = f" scope {self._scope.name!r}" + (
                " and below" if self._scope.descendants else ""
            )
        return f"<SqlMemoryStore {self.target}{scope} ({state})>"
