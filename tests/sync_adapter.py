"""The async store API over a SyncMemoryStore, so the async contract suite runs through it.

Each call runs the blocking method in a worker thread (``asyncio.to_thread``): the
test's ``asyncio.gather`` then makes truly concurrent calls from several threads.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Generator, Iterable, Iterator
from typing import Any

from sqlalchemy.ext.asyncio import AsyncEngine

from loopctl_memory import ConsolidationConfig, ConsolidationStats, MemoryEntry
from loopctl_memory.entry import Summary
from loopctl_memory.sql.database.engine import create_engine, resolve_target
from loopctl_memory.sync import SyncMemoryStore

_DONE = object()


class AsyncOverSync:
    """The SqlMemoryStore API, each method awaiting the SyncMemoryStore's in a thread."""

    def __init__(self, sync: SyncMemoryStore, *, root: AsyncOverSync | None = None) -> None:
        self.sync = sync
        self._root = root
        self._engine: AsyncEngine | None = None

    # --- views and properties: no I/O, called directly ---

    def scope(self, name: str, *, descendants: bool = False) -> AsyncOverSync:
        return AsyncOverSync(self.sync.scope(name, descendants=descendants), root=self._base)

    def with_descendants(self) -> AsyncOverSync:
        return AsyncOverSync(self.sync.with_descendants(), root=self._base)

    @property
    def _base(self) -> AsyncOverSync:
        return self._root or self

    @property
    def scope_name(self) -> str:
        return self.sync.scope_name

    @property
    def target(self) -> str:
        return self.sync.target

    @property
    def engine(self) -> AsyncEngine:
        """An engine of its own on the same SQLite file, in the test's loop, for inspecting tables.

        The sync store's engine lives on its own loop thread and cannot be used here.
        """
        base = self._base
        if base._engine is None:
            base._engine = create_engine(resolve_target(self.target), busy_timeout=5.0)
        return base._engine

    # --- the store API ---

    async def store(self, entry: MemoryEntry) -> None:
        await asyncio.to_thread(self.sync.store, entry)

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        await asyncio.to_thread(self.sync.store_many, entries)

    async def retrieve(self, query: str, limit: int, **choices: Any) -> list[MemoryEntry]:
        return await asyncio.to_thread(self.sync.retrieve, query, limit, **choices)

    async def retrieve_scored(
        self, query: str, limit: int, **choices: Any
    ) -> list[tuple[MemoryEntry, float]]:
        return await asyncio.to_thread(self.sync.retrieve_scored, query, limit, **choices)

    async def pending_embeddings(self) -> int:
        return await asyncio.to_thread(self.sync.pending_embeddings)

    async def build_indexes(self, progress: Any = None) -> int:
        return await asyncio.to_thread(self.sync.build_indexes, progress)

    async def embed_pending(self, batch_size: int = 256) -> int:
        return await asyncio.to_thread(self.sync.embed_pending, batch_size)

    async def retrieve_explained(self, query: str, limit: int, **choices: Any) -> Any:
        return await asyncio.to_thread(self.sync.retrieve_explained, query, limit, **choices)

    async def reembed(self, embedder: Any, **choices: Any) -> int:
        return await asyncio.to_thread(self.sync.reembed, embedder, **choices)

    async def recorded_embedder(self) -> Any:
        return await asyncio.to_thread(self.sync.recorded_embedder)

    @property
    def embedder(self) -> Any:
        return self.sync.embedder

    async def consolidate(self, config: ConsolidationConfig | None = None) -> ConsolidationStats:
        return await asyncio.to_thread(self.sync.consolidate, config)

    async def count(self, **choices: Any) -> int:
        return await asyncio.to_thread(self.sync.count, **choices)

    async def is_empty(self) -> bool:
        return await asyncio.to_thread(self.sync.is_empty)

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        return await asyncio.to_thread(self.sync.get, entry_id)

    async def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[uuid.UUID]:
        return await asyncio.to_thread(self.sync.ids_with_prefix, prefix, limit)

    async def delete(self, entry_id: uuid.UUID) -> bool:
        return await asyncio.to_thread(self.sync.delete, entry_id)

    async def sweep_expired(self) -> int:
        return await asyncio.to_thread(self.sync.sweep_expired)

    async def created_per_day(self) -> Any:
        return await asyncio.to_thread(self.sync.created_per_day)

    async def newest_page(self, limit: int, **choices: Any) -> Any:
        return await asyncio.to_thread(self.sync.newest_page, limit, **choices)

    async def preview_consolidation(self, config: Any = None) -> Any:
        return await asyncio.to_thread(self.sync.preview_consolidation, config)

    async def history(self, entry_id: uuid.UUID | None = None, **choices: Any) -> Any:
        return await asyncio.to_thread(self.sync.history, entry_id, **choices)

    async def history_of(self, entry_ids: Any) -> Any:
        return await asyncio.to_thread(self.sync.history_of, list(entry_ids))

    async def get_by_key(self, key: str) -> MemoryEntry | None:
        return await asyncio.to_thread(self.sync.get_by_key, key)

    async def delete_by_key(self, key: str) -> bool:
        return await asyncio.to_thread(self.sync.delete_by_key, key)

    async def update(self, entry_id: uuid.UUID, **changes: Any) -> MemoryEntry | None:
        return await asyncio.to_thread(self.sync.update, entry_id, **changes)

    async def forget(self, **conditions: Any) -> int:
        return await asyncio.to_thread(self.sync.forget, **conditions)

    async def scopes(self) -> list[tuple[str, int]]:
        return await asyncio.to_thread(self.sync.scopes)

    async def iter_entries(
        self, batch_size: int = 1_000, **choices: Any
    ) -> AsyncIterator[MemoryEntry]:
        entries = self.sync.iter_entries(batch_size, **choices)
        try:
            while (entry := await asyncio.to_thread(next, entries, _DONE)) is not _DONE:
                assert isinstance(entry, MemoryEntry)
                yield entry
        finally:
            await asyncio.to_thread(_close, entries)

    async def summary(self) -> Summary:
        return await asyncio.to_thread(self.sync.summary)

    async def storage_bytes(self) -> int:
        return await asyncio.to_thread(self.sync.storage_bytes)

    async def schema_revision(self) -> str | None:
        return await asyncio.to_thread(self.sync.schema_revision)

    async def close(self) -> None:
        """Close the sync store (a view's close closes it too) and this adapter's engine."""
        base = self._base
        if base._engine is not None:
            await base._engine.dispose()
            base._engine = None
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncOverSync:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<AsyncOverSync {self.sync!r}>"


def _close(entries: Iterator[MemoryEntry]) -> None:
    if isinstance(entries, Generator):
        entries.close()
