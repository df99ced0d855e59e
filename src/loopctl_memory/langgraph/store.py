"""A LangGraph ``BaseStore`` on this memory: ``LangGraphStore.from_conn_string("memory.db")``.

Each LangGraph namespace is a scope (:mod:`.namespaces`), each item the memory
of its scope that holds its key: ``put`` stores a memory with the key (replacing
the one that had it), ``value=None`` deletes it. The value is the memory's
metadata; its indexed fields are the memory's text (:mod:`.values`).

Semantics, where LangGraph's own stores differ, which this one follows and why:

- A batch reads first (gets, searches, listings see the store as it was
  before the batch), then writes; of two puts of one item the last wins; all
  the batch's puts are one transaction. As ``InMemoryStore`` does: the one
  definition LangGraph's tests hold every store to.
- ``search`` without a query lists the newest first (the last put first), as
  ``SqliteStore`` and ``PostgresStore`` do (``ORDER BY updated_at DESC``);
  ``InMemoryStore`` lists by namespace, then by first put. A persistent store's
  users see the database stores' order, and an agent listing its memories
  wants the latest first.
- ``search`` with a query ranks by ``hybrid`` with an embedder, ``bm25``
  without (``ranking=`` picks another), items the ranking does not list (no
  word of the query, no text, or ``index=False``) following, newest first,
  with ``score=None``, as ``InMemoryStore`` adds its unembedded items: a
  filter that leaves fewer items than the limit answers all of them, as in
  every LangGraph store.
- ``list_namespaces`` lists the namespaces that hold items, in tuple order.
  ``InMemoryStore`` also lists namespaces emptied or only read from (an
  accident of its dictionaries); ``SqliteStore`` orders by the dotted text,
  which puts ``("a-b",)`` before ``("a", "b")``.
- An item expires ``ttl`` minutes after its put: from then on no read sees
  it (``SqliteStore`` and ``PostgresStore`` show it until their sweeper runs,
  so what a read returns would depend on a timer); a read with
  ``refresh_ttl`` moves its expiry to ``ttl`` minutes after the read.
  ``TTLConfig(sweep_interval_minutes=...)`` deletes expired items on a timer;
  ``sweep_ttl()`` does it now.
- A filter key is a top-level key of the value, as in ``InMemoryStore``
  (``SqliteStore`` reads ``"a.b"`` as a path into the value); an operator
  LangGraph does not know is an error whatever the store holds.

Limits LangGraph's stores do not have: a key is 1 to 1,024 characters, a
namespace at most 255 once its labels are joined (escaped), and a value is
JSON (integers of at most 64 bits): anything else raises ``ValueError``
(:class:`~loopctl_memory.InvalidEntryError`) and stores nothing of the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any, cast

from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from loopctl_memory.entry import MemoryCategory, MemoryEntry, check_entry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import FlatBatch, flat_entry
from loopctl_memory.langgraph import namespaces, values
from loopctl_memory.langgraph.embeddings import embedder_of
from loopctl_memory.rankings import check_ranking
from loopctl_memory.sql.opening import OpenOptions, open_store
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.sync_loop import LoopThread

logger = logging.getLogger(__name__)

TTL_TAG = "langgraph-ttl-minutes="
"""The tag that records an item's ttl (in minutes), by which a read refreshes it."""

_PAGE = 256
_SAID_OTHERWISE = frozenset({"embedder", "ttl", "refresh_on_read"})


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _ttl_of(entry: MemoryEntry) -> float | None:
    for tag in entry.tags:
        if tag.startswith(TTL_TAG):
            return float(tag[len(TTL_TAG) :])
    return None


def _check_put_namespace(namespace: tuple[str, ...]) -> None:
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(
            f'Root label for namespace cannot be "langgraph". Got: {namespace}'
        )


class LangGraphStore(BaseStore):
    """LangGraph's ``BaseStore`` on a loopctl-memory store (SQLite file, ``:memory:``, PostgreSQL).

    Open it with :meth:`from_conn_string`; use it as any LangGraph store
    (``put``, ``get``, ``search``, ``delete``, ``list_namespaces`` and their
    async forms, or ``graph.compile(store=store)``); close it, or use it in a
    ``with`` (or ``async with``) block. Its work runs on an event loop of its
    own, so the sync and async methods may be called from any thread or loop.
    """

    supports_ttl = True

    def __init__(
        self,
        memory: SqlMemoryStore,
        runner: LoopThread,
        *,
        fields: Sequence[str] | None,
        ranking: str,
        ttl: TTLConfig | None,
        clock: Callable[[], datetime],
    ) -> None:
        """Use :meth:`from_conn_string`; this takes a store already opened on ``runner``."""
        self._memory = memory  # bound to the runner's loop: used from it only
        self.ranking = ranking
        """How a search with a query ranks: ``hybrid``, ``bm25``, ``vector`` or ``reference``."""
        self.ttl_config = ttl
        self._runner = runner
        self._paths = values.paths_of(fields)
        self._everything = memory.with_descendants()
        self._clock = clock
        self._views: dict[str, SqlMemoryStore] = {}
        self._finalizer = weakref.finalize(self, runner.close, memory)
        minutes = (ttl or {}).get("sweep_interval_minutes")
        if minutes:
            runner.loop.call_soon_threadsafe(self._start_sweeper, float(minutes))

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str | os.PathLike[str] = ":memory:",
        *,
        index: IndexConfig | Mapping[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        ranking: str | None = None,
        **options: Any,
    ) -> LangGraphStore:
        """Open a store: ``":memory:"``, a SQLite file's path, or a PostgreSQL URL.

        ``index``: LangGraph's ``IndexConfig`` (``embed``, ``dims``, ``fields``;
        see :mod:`loopctl_memory.langgraph.embeddings`), or None to rank by
        words only. ``ttl``: LangGraph's ``TTLConfig`` (``default_ttl`` and
        ``sweep_interval_minutes`` in minutes, ``refresh_on_read``).
        ``ranking``: how a search with a query ranks (default ``"hybrid"``
        with an embedder, ``"bm25"`` without). ``options``: those of
        :func:`loopctl_memory.open_store` (``clock``, ``context``, pool sizes...).

        Raises:
            InvalidArgumentError: a bad index, ranking or option.
            StorageError, SchemaError: the database cannot be opened.

        """
        embedder = embedder_of(index)
        chosen = check_ranking(
            ranking or ("hybrid" if embedder is not None else "bm25"),
            has_embedder=embedder is not None,
        )
        taken = sorted(set(options) & _SAID_OTHERWISE)
        if taken:
            raise InvalidArgumentError(
                f"{', '.join(taken)}: give the embedder as index={{'embed': ...}}, expiry as"
                " ttl=TTLConfig(...) and put(ttl=...)"
            )
        runner = LoopThread()
        try:
            memory = runner.run(_opened(conn_string, embedder, options))
        except BaseException:
            runner.close(None)
            raise
        runner.describe = memory.target
        return cls(
            memory,
            runner,
            fields=(index or {}).get("fields"),
            ranking=chosen,
            ttl=ttl,
            clock=options.get("clock") or _utc_now,
        )

    # --- BaseStore ---

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order of reads, then writes; their results in the ops' order.

        Gets alone, on a SQLite file, are read on the calling thread (see
        :mod:`loopctl_memory.sql.database.caller_lane`); the rest runs on the store's loop.
        """
        listed = _checked(ops)
        if listed and self._memory.reads_here and all(isinstance(op, GetOp) for op in listed):
            return self._get_here(cast(list[GetOp], listed))
        return self._runner.run(self._batch(listed))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` for async callers (it runs on the store's own loop)."""
        listed = _checked(ops)
        return await self._runner.arun(self._batch(listed))

    def setup(self) -> None:
        """Nothing to do: the schema is made or upgraded when the store opens.

        There for code written for LangGraph's ``SqliteStore``, which needs it.
        """

    async def asetup(self) -> None:
        """:meth:`setup`, for async callers: nothing to do."""

    def sweep_ttl(self) -> int:
        """Delete the items that have expired now; return how many (reads never see them)."""
        return self._runner.run(self._everything.sweep_expired())

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` for async callers."""
        return await self._runner.arun(self._everything.sweep_expired())

    def close(self) -> None:
        """Close the store and its connections. Idempotent."""
        self._finalizer()

    def __enter__(self) -> LangGraphStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> LangGraphStore:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.close)

    def __repr__(self) -> str:
        return f"LangGraphStore({self._runner.describe!r}, ranking={self.ranking!r})"

    # --- the batch, on the store's loop ---

    async def _batch(self, ops: list[Op]) -> list[Result]:
        results: list[Result] = [None] * len(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for at, op in enumerate(ops):
            if isinstance(op, GetOp):
                results[at] = await self._get(op)
            elif isinstance(op, SearchOp):
                results[at] = await self._search(op)
            elif isinstance(op, ListNamespacesOp):
                results[at] = await self._list_namespaces(op)
            else:
                puts.pop((op.namespace, op.key), None)  # the last put of an item is the one
                puts[(op.namespace, op.key)] = op
        if puts:
            await self._write(list(puts.values()))
        return results

    def _view(self, scope: str) -> SqlMemoryStore:
        """The view of ``scope``, kept (on the loop's thread only)."""
        view = self._views.get(scope)
        if view is None:
            if len(self._views) >= 4096:
                self._views.clear()
            view = self._views[scope] = self._view_made(scope)
        return view

    def _view_made(self, scope: str) -> SqlMemoryStore:
        return self._memory.scope(scope) if scope else self._memory

    async def _get(self, op: GetOp) -> Item | None:
        if not op.namespace:
            return None
        found = await self._view(namespaces.scope_of(op.namespace)).get_by_key(str(op.key))
        if found is None:
            return None
        if op.refresh_ttl:
            await self._refresh([found])
        return _item(found, tuple(op.namespace))

    def _get_here(self, ops: list[GetOp]) -> list[Result]:
        """Gets on the calling thread; the refreshes of ttls they call for on the loop."""
        found = [
            self._view_made(namespaces.scope_of(op.namespace)).get_by_key_here(str(op.key))
            if op.namespace
            else None
            for op in ops
        ]
        refreshed = [
            entry
            for op, entry in zip(ops, found, strict=True)
            if entry is not None and op.refresh_ttl and _ttl_of(entry) is not None
        ]
        if refreshed:
            self._runner.run(self._refresh(refreshed))
        return [
            None if entry is None else _item(entry, tuple(op.namespace))
            for op, entry in zip(ops, found, strict=True)
        ]

    async def _write(self, puts: list[PutOp]) -> None:
        now = self._clock()
        stored = [
            (namespaces.scope_of(op.namespace), self._entry(op, now))
            for op in puts
            if op.value is not None
        ]
        if len(stored) == 1:  # one put (the usual): the store's lane for one entry
            scope, entry = stored[0]
            await self._view(scope).store(entry)
        elif stored:  # one transaction for them all
            batch = FlatBatch([], [])
            for scope, entry in stored:
                batch.add(flat_entry(entry, scope), entry.tags)
            await self._memory.store_flat(batch)
        for op in puts:
            if op.value is None:
                await self._view(namespaces.scope_of(op.namespace)).delete_by_key(str(op.key))

    def _entry(self, op: PutOp, now: datetime) -> MemoryEntry:
        value = op.value
        if not isinstance(value, Mapping):
            raise InvalidArgumentError(f"a value is a dict, not {type(value).__name__}")
        ttl = op.ttl
        # Checked before its text is read: the value is JSON (the text, a str of it), or an error.
        entry = check_entry(
            MemoryEntry(
                MemoryCategory.FACT,
                "",
                tags=[] if ttl is None else [f"{TTL_TAG}{float(ttl)!r}"],
                created_at=now,
                metadata=dict(value),
                key=str(op.key),
                expires_at=None if ttl is None else now + timedelta(minutes=ttl),
            )
        )
        if op.index is not False:
            paths = self._paths if op.index is None else values.paths_of(op.index)
            entry.memory = values.text_of(entry.metadata, paths)
        return entry

    async def _refresh(self, found: Iterable[MemoryEntry]) -> None:
        """Each of ``found`` that has a ttl expires that long after now (in the store and here)."""
        if self._memory.read_only:
            return
        now = self._clock()
        for entry in found:
            ttl = _ttl_of(entry)
            if ttl is None or entry.expires_at is None:
                continue
            expires_at = now + timedelta(minutes=ttl)
            await self._everything.update(entry.id, expires_at=expires_at)
            entry.expires_at = expires_at

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        if op.limit < 0 or op.offset < 0:
            raise InvalidArgumentError("a search's limit and offset are ints >= 0")
        values.check_filter(op.filter)
        prefix = namespaces.scope_of(op.namespace_prefix)
        view = self._memory.scope(prefix, descendants=True) if prefix else self._everything
        pushed = values.pushed_down(op.filter)
        passes = None if pushed is None else MemoryFilter(metadata=pushed)
        want = op.offset + op.limit
        ranked: list[tuple[MemoryEntry, float | None]] = []
        if op.query and want:
            ranked = await self._ranked(view, op, passes, want)
        found = ranked[:want]
        if len(found) < want:
            listed = {entry.id for entry, _ in found}
            newest = self._newest(view, op, passes)
            async with contextlib.aclosing(newest):
                async for entry in newest:
                    if entry.id not in listed:
                        found.append((entry, None))
                        if len(found) == want:
                            break
        found = found[op.offset :]
        where = await self._everything.scopes_of([entry.id for entry, _ in found])
        items = [
            _search_item(entry, namespaces.namespace_of(where[entry.id]), score)
            for entry, score in found
            if where.get(entry.id)
        ]
        if op.refresh_ttl:
            await self._refresh(entry for entry, _ in found)
        return items

    async def _ranked(
        self, view: SqlMemoryStore, op: SearchOp, passes: MemoryFilter | None, want: int
    ) -> list[tuple[MemoryEntry, float | None]]:
        """The items the ranking lists, best first: at least ``want`` if there are as many."""
        query, asked = str(op.query), want
        while True:
            hits = await view.retrieve_scored(query, asked, ranking=self.ranking, filter=passes)
            kept: list[tuple[MemoryEntry, float | None]] = [
                (entry, score)
                for entry, score in hits
                if entry.memory and values.matches(entry.metadata, op.filter)
            ]
            if len(kept) >= want or len(hits) < asked:
                return kept
            asked *= 4

    async def _newest(
        self, view: SqlMemoryStore, op: SearchOp, passes: MemoryFilter | None
    ) -> AsyncGenerator[MemoryEntry, None]:
        """The view's items that pass ``op``'s filter, the newest first (not the root's own)."""
        async for scope, entry in view.iter_scoped_entries(_PAGE, filter=passes, newest_first=True):
            if (scope or view.scope_name) and values.matches(entry.metadata, op.filter):
                yield entry

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        if not self._memory.read_only:
            await self._everything.sweep_expired()  # an expired item's namespace holds nothing
        held = [namespaces.namespace_of(name) for name, _ in await self._memory.scopes() if name]
        return namespaces.listed(held, op.match_conditions, op.max_depth, op.limit, op.offset)

    # --- the sweeper ---

    def _start_sweeper(self, minutes: float) -> None:
        self._runner.loop.create_task(self._sweep_every(minutes * 60))

    async def _sweep_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            try:
                swept = await self._everything.sweep_expired()
            except Exception:  # a sweep can fail (a locked database): the next one may not
                logger.exception("sweeping expired items failed")
                continue
            if swept:
                logger.debug("swept %d expired items", swept)


async def _opened(
    target: str | os.PathLike[str], embedder: Any, options: dict[str, Any]
) -> SqlMemoryStore:
    return await open_store(target, **cast(OpenOptions, {**options, "embedder": embedder}))


def _checked(ops: Iterable[Op]) -> list[Op]:
    listed = list(ops)
    for op in listed:
        validate_op_namespace(op)
        if isinstance(op, PutOp):
            _check_put_namespace(tuple(op.namespace))
        elif not isinstance(op, GetOp | SearchOp | ListNamespacesOp):
            raise TypeError(f"Unknown operation type: {type(op)}")
    return listed


def _item(entry: MemoryEntry, namespace: tuple[str, ...]) -> Item:
    return Item(**_item_fields(entry, namespace))


def _search_item(entry: MemoryEntry, namespace: tuple[str, ...], score: float | None) -> SearchItem:
    return SearchItem(**_item_fields(entry, namespace), score=score)


def _item_fields(entry: MemoryEntry, namespace: tuple[str, ...]) -> dict[str, Any]:
    """An item's fields: a memory without a key (stored by other means) is keyed by its id."""
    return {
        "namespace": namespace,
        "key": entry.key if entry.key is not None else str(entry.id),
        "value": entry.metadata,
        "created_at": entry.created_at,
        "updated_at": entry.created_at,
    }


__all__ = ["TTL_TAG", "LangGraphStore"]
