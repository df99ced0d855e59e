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
    keys = keys_of_batch(entry.key for entry in batch)
    if not keys:
        return set()
    return {entry.id for entry in stored if entry.key is not None and entry.key in keys}


def keys_of_batch(keys: Iterable[str | None]) -> set[str]:
    """The keys a batch gives in one scope (None: an entry without one).

    Raises:
        InvalidArgumentError: one key twice.

    """
    found: set[str] = set()
    for key in keys:
        if key is None:
            continue
        if key in found:
            raise InvalidArgumentError(
                f"the batch holds two entries with the key {key!r} in one scope"
            )
        found.add(key)
    return found


def keyed(stored: Iterable[MemoryEntry], key: str) -> MemoryEntry | None:
    """The stored entry (of one scope) holding ``key``, or None."""
    return next((entry for entry in stored if entry.key == key), None)
