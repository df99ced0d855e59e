"""InMemoryStore: the reference port, a list in process memory, no database."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

from loopctl_memory.entry import (
    ConsolidationStats,
    MemoryEntry,
    copy_entry,
    validate_entry,
    validate_id,
    validate_query,
)
from loopctl_memory.errors import DuplicateEntryError
from loopctl_memory.scoring import PRUNE_BELOW, f32, parse_query


class InMemoryStore:
    """loopctl 0.1.0's ``InMemoryStore``, ported line for line.

    Entries live in a list in insertion order and are lost with the process.
    It validates input exactly as the SQL store does, so on valid input both
    return the same entries in the same order.

    Example:
        >>> import asyncio
        >>> from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry
        >>> store = InMemoryStore()
        >>> entry = MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over manual file search")
        >>> asyncio.run(store.store(entry))
        >>> len(asyncio.run(store.retrieve("file search", 5)))
        1

    """

    def __init__(self, entries: Iterable[MemoryEntry] | None = None) -> None:
        self._entries: list[MemoryEntry] = []
        self._ids: set[uuid.UUID] = set()
        if entries is not None:
            self._append_all([validate_entry(entry) for entry in entries])

    def _append_all(self, entries: list[MemoryEntry]) -> None:
        seen: set[uuid.UUID] = set()
        for entry in entries:
            if entry.id in self._ids or entry.id in seen:
                raise DuplicateEntryError(f"an entry with id {entry.id} is already stored")
            seen.add(entry.id)
        self._entries.extend(entries)
        self._ids.update(seen)

    async def store(self, entry: MemoryEntry) -> None:
        """Append ``entry`` (a copy of it)."""
        self._append_all([validate_entry(entry)])

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Append every entry, or none if any is invalid."""
        self._append_all([validate_entry(entry) for entry in entries])

    async def retrieve(self, query: str, limit: int) -> list[MemoryEntry]:
        """Score every entry as the reference does; return the best ``limit``, stably."""
        validate_query(query, limit)
        parsed = parse_query(query)
        scored = [
            (parsed.score_of(entry.relevance, entry.memory, entry.tags), entry)
            for entry in self._entries
        ]
        scored.sort(key=lambda pair: pair[0], reverse=True)  # stable: ties keep insertion order
        return [copy_entry(entry) for _, entry in scored[:limit]]

    async def consolidate(self) -> ConsolidationStats:
        """Drop every entry whose relevance, as binary32, is below 0.05."""
        before = len(self._entries)
        kept = [entry for entry in self._entries if f32(entry.relevance) >= PRUNE_BELOW]
        self._entries = kept
        self._ids = {entry.id for entry in kept}
        return ConsolidationStats(
            entries_before=before, entries_after=len(kept), pruned=before - len(kept)
        )

    async def count(self) -> int:
        """Return the number of entries."""
        return len(self._entries)

    async def is_empty(self) -> bool:
        """Return whether there are no entries."""
        return not self._entries

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None."""
        validate_id(entry_id)
        for entry in self._entries:
            if entry.id == entry_id:
                return copy_entry(entry)
        return None

    async def delete(self, entry_id: uuid.UUID) -> bool:
        """Remove the entry with this id; return whether there was one."""
        validate_id(entry_id)
        for index, entry in enumerate(self._entries):
            if entry.id == entry_id:
                del self._entries[index]
                self._ids.discard(entry_id)
                return True
        return False

    async def close(self) -> None:
        """Nothing to release; present so every backend closes the same way."""
