"""A SQLite file removed, renamed or replaced under an open store: noticed, nothing acknowledged.

SQLite keeps answering from its open file descriptor and its cache after the
path stops naming that file, so writes would report success and be lost at the
next open. The store checks the path after each operation and refuses from
then on, naming the path.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore, StorageError, open_store


def _entry(text: str) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text)


def _remove(path: Path) -> None:
    for file in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        file.unlink(missing_ok=True)


def _remove_only_the_database(path: Path) -> None:
    path.unlink()


def _rename(path: Path) -> None:
    path.rename(path.with_name("moved.db"))


def _replace(path: Path) -> None:
    other = path.with_name("other.db")
    shutil.copyfile(path, other)  # a copy: the same contents, another file
    os.replace(other, path)


CHANGES: dict[str, Callable[[Path], None]] = {
    "removed with its sidecars": _remove,
    "removed": _remove_only_the_database,
    "renamed": _rename,
    "replaced": _replace,
}

OPERATIONS: dict[str, Callable[[SqlMemoryStore], Awaitable[object]]] = {
    "store": lambda store: store.store(_entry("after the change")),
    "store_many": lambda store: store.store_many([_entry("after"), _entry("the change")]),
    "retrieve": lambda store: store.retrieve("kept", 5),
    "count": lambda store: store.count(),
    "consolidate": lambda store: store.consolidate(),
}


@pytest.mark.parametrize("operation", OPERATIONS)
@pytest.mark.parametrize("change", CHANGES)
async def test_the_next_operation_names_the_path_and_none_after_it_succeeds(
    tmp_path, change, operation
):
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(_entry("kept before"))
        await store.retrieve("kept", 5)
        CHANGES[change](path)
        with pytest.raises(StorageError, match=str(path)):
            await OPERATIONS[operation](store)
        for later in OPERATIONS.values():
            with pytest.raises(StorageError, match="acknowledges nothing more"):
                await later(store)


async def test_nothing_acknowledged_after_a_removal_is_lost_on_reopening(tmp_path):
    path = tmp_path / "memory.db"
    acknowledged: list[MemoryEntry] = []
    async with open_store(path) as store:
        first = _entry("kept before")
        await store.store(first)
        acknowledged.append(first)
        _remove(path)
        for text in ("one", "two", "three"):
            try:
                entry = _entry(text)
                await store.store(entry)
                acknowledged.append(entry)
            except StorageError:
                pass
    assert [first] == acknowledged
    async with open_store(path) as reopened:  # a new, empty database at the path
        assert 0 == await reopened.count()


async def test_a_read_only_store_and_a_scope_view_notice_too(tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(_entry("kept"))
    async with open_store(path, read_only=True) as reader:
        view = reader.scope("team")
        assert 0 == await view.count()
        _rename(path)
        with pytest.raises(StorageError, match="renamed"):
            await view.count()
        with pytest.raises(StorageError, match="renamed"):
            await reader.retrieve("kept", 5)


async def test_a_file_moved_back_is_the_same_file(tmp_path):
    """The path must name the file opened when the store looks: not a copy, the file."""
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(_entry("kept"))
        moved = path.with_name("moved.db")
        path.rename(moved)
        moved.rename(path)
        await store.store(_entry("still the same file"))
        assert 2 == await store.count()
