"""A file overwritten in place or truncated while a store has it open: no write is acknowledged.

Removing, renaming or replacing the file is noticed after any unit of work
(``test_vanished_file``). Damage in place keeps the path's inode: the store
counts the modification whenever it sees it, after a read as before a write,
and the next write checks the file's header first. A read in between (whose
pages come from the store's cache and the write-ahead log) no longer hides it.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore, StorageError, open_store


def _entries(label: str, count: int, relevance: float = 1.0) -> list[MemoryEntry]:
    return [
        MemoryEntry(MemoryCategory.FACT, f"{label} {n} about the deploy", relevance=relevance)
        for n in range(count)
    ]


def _garbage(path: Path) -> None:
    """Overwrite every byte in place (same inode, same size), later than the store looked."""
    size = path.stat().st_size
    with path.open("r+b") as file:
        file.write(random.Random(7).randbytes(size))
    _later(path)


def _truncated(path: Path) -> None:
    os.truncate(path, 0)
    _later(path)


def _later(path: Path) -> None:
    """A modification time the store has not seen (a filesystem's clock may be coarse)."""
    seen = path.stat().st_mtime_ns
    os.utime(path, ns=(seen + 10**9, seen + 10**9))


DAMAGES = {"garbage in place": _garbage, "truncated to 0 bytes": _truncated}


async def _count(store: SqlMemoryStore) -> object:
    return await store.count()


async def _retrieve(store: SqlMemoryStore) -> object:
    return await store.retrieve("deploy", 5)


READS: dict[str, Callable[[SqlMemoryStore], Awaitable[object]] | None] = {
    "no read": None,
    "count": _count,
    "retrieve": _retrieve,
}


async def _store(store: SqlMemoryStore) -> object:
    await store.store(_entries("after", 1)[0])
    return None


async def _store_many(store: SqlMemoryStore) -> object:
    await store.store_many(_entries("after many", 100))
    return None


async def _consolidate(store: SqlMemoryStore) -> object:
    return await store.consolidate()


WRITES = {"store": _store, "store_many": _store_many, "consolidate": _consolidate}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
@pytest.mark.parametrize("read", sorted(READS))
@pytest.mark.parametrize("write", sorted(WRITES))
async def test_the_next_write_after_damage_in_place_is_refused_naming_the_file(
    tmp_path: Path, damage: str, read: str, write: str
) -> None:
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store_many(_entries("kept", 2_000) + _entries("faded", 100, relevance=0.01))
    async with open_store(path) as store:
        await store.store(_entries("before", 1)[0])
        assert 2_101 == await store.count()  # the pages the writes touch are cached now
        DAMAGES[damage](path)
        reading = READS[read]
        if reading is not None:
            with contextlib.suppress(StorageError):  # from the cache and the log, or refused
                await reading(store)
        with pytest.raises(StorageError) as refused:
            await WRITES[write](store)
        assert str(path) in str(refused.value)
        for later in WRITES.values():  # nothing more is acknowledged, whatever the call
            with pytest.raises(StorageError):
                await later(store)


async def test_writes_by_another_store_on_the_file_are_never_taken_for_damage(tmp_path):
    """Another store's checkpoints modify the file: the check reads the header, and passes."""
    path = tmp_path / "memory.db"
    async with open_store(path) as store, open_store(path) as other:
        for round_number in range(5):
            await other.store_many(_entries(f"other {round_number}", 2_000))
            await store.count()  # a read sees the change: the next write checks the header
            await store.store(_entries(f"mine {round_number}", 1)[0])
        assert 10_005 == await store.count()
