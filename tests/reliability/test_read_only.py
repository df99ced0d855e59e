"""`read_only=True`: every read served, every write refused, the database file never written.

A read-only mount is in test_damaged_files.py. Here: a directory the process
cannot write (as root, whom file modes do not stop, in a child that gave up the
capability to override them), a reader beside a writer, the options that
cannot go with it, and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from loopctl_memory import (
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
    sync,
)
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

WORKER = Path(__file__).with_name("read_only_worker.py")
SETPRIV = shutil.which("setpriv")
_NO_OVERRIDE = "-dac_override,-dac_read_search"


def _as_a_user_without_override(command: list[str]) -> list[str]:
    """``command`` run so that file modes apply to it (root gives up overriding them)."""
    if os.geteuid() != 0:
        return command
    if SETPRIV is None:
        pytest.skip("running as root without setpriv: file modes cannot be made to apply")
    return [SETPRIV, "--bounding-set", _NO_OVERRIDE, "--inh-caps", _NO_OVERRIDE, *command]


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


async def _filled(path: Path) -> None:
    async with open_store(path) as store:
        await store.store_many(
            [
                MemoryEntry(MemoryCategory.FACT, "read only mounts are served"),
                MemoryEntry(MemoryCategory.FACT, "unrelated", relevance=0.01),
            ]
        )


def test_a_database_in_a_directory_that_cannot_be_written_is_read(tmp_path):
    directory = tmp_path / "data"
    directory.mkdir()
    path = directory / "memory.db"
    asyncio.run(_filled(path))
    before = _digest(path)
    tmp_path.chmod(0o755)  # the worker must reach the directory, not write it
    directory.chmod(0o555)
    try:
        done = subprocess.run(
            _as_a_user_without_override([sys.executable, str(WORKER), str(path)]),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            cwd=Path(__file__).parents[2],
        )
    finally:
        directory.chmod(0o755)
    assert 0 == done.returncode, done.stderr
    report = json.loads(done.stdout)
    assert report["writable_open"].startswith("StorageError")
    assert "read_only=True" in report["writable_open"]
    assert (2, 2) == (report["count"], report["count_after"])
    assert ["read only mounts are served", "unrelated"] == report["found"]
    for write in ("store", "consolidate"):
        assert report[write].startswith("ReadOnlyStoreError"), write
        assert "read-only" in report[write]
    assert before == _digest(path)
    assert ["memory.db"] == sorted(file.name for file in directory.iterdir())


async def test_a_read_only_store_sees_what_a_writer_stores_meanwhile(tmp_path):
    path = tmp_path / "memory.db"
    await _filled(path)
    async with open_store(path, read_only=True) as reader, open_store(path) as writer:
        assert 2 == await reader.count()
        stored = MemoryEntry(MemoryCategory.FACT, "read only readers follow the writer")
        await writer.store(stored)
        assert 3 == await reader.count()
        [first, *_] = await reader.retrieve("readers follow", 5)
        assert stored == first
        await writer.update(stored.id, memory="read only text rewritten")
        [again, *_] = await reader.retrieve("rewritten", 5)
        assert stored.id == again.id


async def test_a_read_only_store_writes_nothing_into_the_database_file(tmp_path):
    path = tmp_path / "memory.db"
    await _filled(path)
    before = _digest(path)
    async with open_store(path, read_only=True) as store:
        [entry, *_] = await store.retrieve("read only", 5)
        with pytest.raises(StorageError, match="read-only"):
            await store.store(MemoryEntry(MemoryCategory.FACT, "refused"))
        with pytest.raises(StorageError, match="read-only"):
            await store.scope("team").store_many([MemoryEntry(MemoryCategory.FACT, "refused")])
        with pytest.raises(StorageError, match="read-only"):
            await store.update(entry.id, relevance=0.1)
        assert entry == await store.get(entry.id)
        assert [("", 2)] == await store.scopes()
    assert before == _digest(path)


async def test_what_cannot_go_with_read_only(tmp_path):
    with pytest.raises(InvalidEntryError, match="memory"):
        await open_store(":memory:", read_only=True)
    with pytest.raises(StorageError, match="no database at"):
        await open_store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()
    path = tmp_path / "memory.db"
    await _filled(path)
    with pytest.raises(InvalidEntryError, match="track_access"):
        await open_store(path, read_only=True, track_access=True)
    with pytest.raises(InvalidEntryError, match="read_only"):
        await open_store(path, read_only="yes")  # type: ignore[arg-type]


@NEEDS_POSTGRES
async def test_postgresql_read_only_serves_reads_and_refuses_writes():
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    async with open_store(url) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "read only on the server"))
    async with open_store(url, read_only=True) as store:
        assert 1 == await store.count()
        [entry] = await store.retrieve("server", 5)
        for write in (
            lambda: store.store(MemoryEntry(MemoryCategory.FACT, "refused")),
            lambda: store.delete(entry.id),
            store.consolidate,
        ):
            with pytest.raises(StorageError, match="read-only"):
                await write()
        assert 1 == await store.count()


def test_the_blocking_store_opens_read_only_too(tmp_path):
    path = tmp_path / "memory.db"
    asyncio.run(_filled(path))
    before = _digest(path)
    with sync.open_store(path, read_only=True) as store:
        assert 2 == store.count()
        assert 0 == store.free_bytes()
        [first, *_] = store.retrieve("read only", 5)
        assert {first.id} == store.existing_ids([first.id, uuid.uuid4()])
        with pytest.raises(StorageError, match="read-only"):
            store.store(MemoryEntry(MemoryCategory.FACT, "refused"))
    assert before == _digest(path)
