"""Opening SQLite files: what is refused is reported clearly and left as it was."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, StorageError, errors, migrate, open_store
from loopctl_memory.errors import LoopMemoryError
from loopctl_memory.sql.backend import sqlite as backend
from loopctl_memory.sql.database.engine import resolve_target


async def test_a_file_that_is_not_a_database_raises_storage_error_and_is_untouched(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_bytes(b"these are my notes, not a database\n" * 200)
    before = path.read_bytes()
    with pytest.raises(StorageError, match="not a database") as caught:
        await open_store(path)
    assert isinstance(caught.value.__cause__, Exception)
    assert before == path.read_bytes()


async def test_a_corrupt_database_raises_storage_error_and_is_untouched(tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "soon to be damaged"))
    damaged = bytearray(path.read_bytes())
    damaged[0:16] = b"garbage-garbage!"
    path.write_bytes(bytes(damaged))
    with pytest.raises(StorageError):
        await open_store(path)
    assert bytes(damaged) == path.read_bytes()


async def test_a_missing_directory_raises_storage_error(tmp_path):
    missing = tmp_path / "no" / "such" / "dir"
    with pytest.raises(StorageError, match=f"the directory {missing} does not exist"):
        await open_store(missing / "memory.db")


@pytest.mark.parametrize("read_only", [False, True])
async def test_a_directory_is_refused_as_one_not_as_a_file_sqlite_cannot_open(tmp_path, read_only):
    with pytest.raises(StorageError, match=f"{tmp_path} is a directory, not a database file"):
        await open_store(tmp_path, read_only=read_only)
    with pytest.raises(StorageError, match="is a directory"):
        await migrate.migrate_to(tmp_path)
    assert [] == list(tmp_path.iterdir())


async def test_an_unsupported_url_raises_storage_error():
    with pytest.raises(StorageError, match="unsupported database URL"):
        await open_store("mysql://localhost/memory")
    with pytest.raises(StorageError, match="unsupported database URL"):
        await open_store("sqlite+pysqlite:///memory.db")


async def test_a_busy_writer_past_the_timeout_raises_storage_error_and_changes_nothing(tmp_path):
    """Another process holds the write lock longer than our busy timeout."""
    path = tmp_path / "memory.db"
    async with open_store(path, busy_timeout=0.05) as store:
        blocker = sqlite3.connect(path, isolation_level=None)
        try:
            blocker.execute("BEGIN IMMEDIATE")
            with pytest.raises(StorageError, match="locked") as caught:
                await store.store(MemoryEntry(MemoryCategory.FACT, "has to wait"))
            assert not isinstance(caught.value, sqlite3.Error)
            # One class and one message on either lane (single store, a batch).
            assert isinstance(caught.value, errors.DatabaseBusyError)
            assert "busy past the busy timeout" in str(caught.value)
            with pytest.raises(errors.DatabaseBusyError, match="busy past the busy timeout"):
                await store.store_many([MemoryEntry(MemoryCategory.FACT, "has to wait too")])
            blocker.execute("ROLLBACK")
        finally:
            blocker.close()
        assert 0 == await store.count()


async def test_a_new_file_gets_large_pages_and_an_older_file_keeps_its_own(tmp_path, monkeypatch):
    """Page size is fixed when a file is created: files made before 8 KiB pages stay 4 KiB."""
    new, old = tmp_path / "new.db", tmp_path / "old.db"
    async with open_store(new) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "written in a new file"))
    monkeypatch.setattr(backend, "PAGE_SIZE", 4096)  # as every file was made before
    async with open_store(old) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "written with small pages"))
    monkeypatch.undo()
    async with open_store(old) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "written later with small pages"))
        found = [entry.memory for entry in await store.retrieve("written with", 5)]
    assert ["written with small pages", "written later with small pages"] == found
    assert 8192 == backend.PAGE_SIZE == _pragma(new, "page_size")
    assert 4096 == _pragma(old, "page_size")
    assert "ok" == _pragma(old, "integrity_check")


def _pragma(path: Path, name: str) -> object:
    with closing(sqlite3.connect(path)) as raw:
        return raw.execute(f"PRAGMA {name}").fetchone()[0]


def test_every_library_error_derives_from_the_root():
    for name in ("InvalidEntryError", "DuplicateEntryError", "SchemaError", "StorageError"):
        assert issubclass(getattr(errors, name), LoopMemoryError)
    assert issubclass(errors.InvalidEntryError, ValueError)
    assert issubclass(errors.DuplicateEntryError, errors.InvalidEntryError)


def test_paths_and_urls_resolve_to_the_async_sqlite_driver(tmp_path: Path):
    assert "sqlite+aiosqlite" == resolve_target(tmp_path / "m.db").url.drivername
    assert "sqlite+aiosqlite" == resolve_target("sqlite:///m.db").url.drivername
    assert resolve_target(":memory:").is_memory
    assert not resolve_target("m.db").is_memory
    assert "postgresql+asyncpg" == resolve_target("postgresql://u@h/db").url.drivername
