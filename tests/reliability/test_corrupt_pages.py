"""Garbage written over pages of a live file: a write that touches them fails, unacknowledged.

A connection keeps the pages it read in its cache, and SQLite trusts that cache
while no other connection commits: a write over a page that is garbage on disk
would succeed from the cache. Before a write, the store looks at the file (one
``stat``); if someone else modified it since the store last looked, the
connection drops its cached pages, and the write reads every page it touches
from the file. What stays undetected: garbage on pages no write touches (found
by the reads that do), and garbage written within the same nanosecond and size
as the store's own last change.
"""

from __future__ import annotations

import random
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, StorageError, open_store

PAGE_SIZE = 8192  # a new file's page size (loopctl_memory.sql.backend.PAGE_SIZE)


# Fixed ids: with random ones, the id index's root page is rewritten (so lives in the log,
# past the garbage) whenever the "before" entry happens to split a leaf, which random ids
# do now and then. With these, the pages each write touches are the same on every run.
def _ids(seed: str) -> Iterator[uuid.UUID]:
    rng = random.Random(seed)
    while True:
        yield uuid.UUID(int=rng.getrandbits(128), version=4)


def _entries(count: int, ids: Iterator[uuid.UUID]) -> list[MemoryEntry]:
    return [
        MemoryEntry(MemoryCategory.FACT, f"entry {n} with a few words", id=next(ids))
        for n in range(count)
    ]


def _root_page(path: Path, name: str) -> int:
    """The page (from 1) where table or index ``name`` starts."""
    with sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True) as connection:
        [(page,)] = connection.execute(
            "SELECT rootpage FROM sqlite_schema WHERE name = ?", (name,)
        ).fetchall()
    return int(page)


def _overwrite(path: Path, page: int) -> None:
    with path.open("r+b") as file:
        file.seek((page - 1) * PAGE_SIZE)
        file.write(bytes(range(256)) * (PAGE_SIZE // 256))


# The roots of the table and its indexes: every insert reads them, none rewrites them
# (the store before the garbage changed leaves only, which now live in the log).
@pytest.mark.parametrize(
    "name", ["entries", "sqlite_autoindex_entries_1", "ix_entries_relevance_seq"]
)
async def test_a_write_over_a_page_overwritten_with_garbage_fails(tmp_path, name):
    path = tmp_path / "memory.db"
    ids = _ids(f"corrupt-pages-{name}")

    def fact(memory: str) -> MemoryEntry:
        return MemoryEntry(MemoryCategory.FACT, memory, tags=["t"], id=next(ids))

    async with open_store(path) as store:
        await store.store_many(_entries(5_000, ids))
    page = _root_page(path, name)
    async with open_store(path) as store:
        await store.store(fact("before"))
        assert 5_001 == await store.count()  # every page the writes touch is cached now
        _overwrite(path, page)
        with pytest.raises(StorageError, match="malformed"):
            await store.store(fact("after"))
        with pytest.raises(StorageError, match="malformed"):
            await store.store_many([fact("after")])


async def test_a_write_after_an_unrelated_change_to_the_file_still_succeeds(tmp_path):
    """Another store's writes modify the file too: dropping the cache costs, never fails."""
    path = tmp_path / "memory.db"
    async with open_store(path) as store, open_store(path) as other:
        ids = _ids("unrelated-change")
        await store.store_many(_entries(2_000, ids))
        for n in range(3):
            await other.store_many(_entries(500, ids))
            await store.store(MemoryEntry(MemoryCategory.FACT, f"single {n}"))
        assert 3_503 == await store.count()
