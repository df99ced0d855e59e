"""The blocking store's id lookups: short ids, which ids are stored and where, lookups by key.

A part of :class:`~loopctl_memory.sync.SyncMemoryStore`, as
:class:`~loopctl_memory.sql.store.lookups.IdLookups` is of the async store.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING

from loopctl_memory.entry import MemoryEntry

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore
    from loopctl_memory.sync_loop import LoopThread


class SyncLookups:
    """``ids_with_prefix``, ``short_id``, ``existing_ids``, ``scopes_of``, lookups by key."""

    _runner: LoopThread
    _store: SqlMemoryStore

    def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[uuid.UUID]:
        """Up to ``limit`` ids of the view whose hexadecimal form starts with ``prefix``.

        ``prefix`` is hexadecimal digits, dashes ignored, any case: a short id as
        the CLI shows it.

        Raises:
            InvalidArgumentError: ``prefix`` is empty, longer than an id or not hexadecimal.

        """
        return self._runner.run(self._store.ids_with_prefix(prefix, limit))

    def short_id(self, entry_id: uuid.UUID) -> str:
        """The fewest leading hex digits (at least 8) of ``entry_id`` no other id here has."""
        return self._runner.run(self._store.short_id(entry_id))

    def get_by_key(self, key: str) -> MemoryEntry | None:
        """The entry of the store's own scope holding ``key``, or None.

        On a SQLite file it is read on the calling thread (one statement).
        """
        store = self._store
        if store.reads_here:
            return store.get_by_key_here(key)
        return self._runner.run(store.get_by_key(key))

    def delete_by_key(self, key: str) -> bool:
        """Delete the entry of the store's own scope holding ``key``; whether there was one."""
        return self._runner.run(self._store.delete_by_key(key))

    def existing_ids(self, ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``ids`` are already stored, in any scope (ids are unique across the store)."""
        return self._runner.run(self._store.existing_ids(list(ids)))

    def scopes_of(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The scope of each of ``ids`` the view reads, relative to the view (``""``: its own)."""
        return self._runner.run(self._store.scopes_of(list(ids)))
