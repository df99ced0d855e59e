"""Keys: a caller's names for memories, unique within a scope.

Storing an entry whose key a memory of its scope already has replaces that
memory: the old one is removed and the new one stored, in one transaction, so
no two live memories ever share a key and a reader sees one or the other. A
batch may not give one key twice in one scope. ``get_by_key`` and
``delete_by_key`` address the memory of the store's own scope that holds a key.
Keys travel with the entry (``MemoryEntry.key``): JSON Lines carry them, and a
consolidation merge keeps the kept memory's key, else the first duplicate's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.errors import InvalidArgumentError


def replaced_ids(stored: Iterable[MemoryEntry], batch: Sequence[MemoryEntry]) -> set[uuid.UUID]:
    """The ids of the stored entries (of one scope) whose keys the batch's entries take.

    Raises:
        InvalidArgumentError: two entries of the batch have one key.

    """
    keys: set[str] = set()
    for entry in batch:
        if entry.key is None:
            continue
        if entry.key in keys:
            raise InvalidArgumentError(
                f"the batch holds two entries with the key {entry.key!r} in one scope"
            )
        keys.add(entry.key)
    if not keys:
        return set()
    return {entry.id for entry in stored if entry.key is not None and entry.key in keys}


def keyed(stored: Iterable[MemoryEntry], key: str) -> MemoryEntry | None:
    """The stored entry (of one scope) holding ``key``, or None."""
    return next((entry for entry in stored if entry.key == key), None)
