"""Files in bad shape: empty, read-only, in a read-only directory, on a full disk.

What is refused raises StorageError (or SchemaError) with the driver's error
chained, and leaves the file byte for byte as it was; the store stays usable
for what it can still do. Corrupt and foreign files are in
tests/unit/test_sqlite_files.py. The tests run as root, which file modes do not
stop, so read-only means a read-only bind mount and a full disk a small tmpfs;
where mounting is not permitted they are skipped.
"""

from __future__ import annotations

import asyncio
import errno
import shutil
import sqlite3
import subprocess
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from loopctl_memory import (
    MemoryCategory,
    MemoryEntry,
    SchemaError,
    SqlMemoryStore,
    StorageError,
    migrate,
    open_store,
)
from loopctl_memory.cli import DB_ENVVAR, cli
from loopctl_memory.entry_json import entry_from_json

FIXTURES = Path(__file__).with_name("fixtures")


def _entries(label: str, count: int, size: int = 10) -> list[MemoryEntry]:
    return [
        MemoryEntry(MemoryCategory.FACT, f"{label} {n} " + "z" * size, tags=[label], relevance=0.01)
        for n in range(count)
    ]


async def _contents(store: SqlMemoryStore) -> list[MemoryEntry]:
    return [entry async for entry in store.iter_entries()]


async def _filled(path: Path) -> list[MemoryEntry]:
    """Store a few entries in a new database at ``path`` and close it; return them."""
    entries = _entries("kept", 20)
    async with open_store(path) as store:
        await store.store_many(entries)
    return entries


def _sidecars(path: Path) -> list[Path]:
    return [path.with_name(f"{path.name}{suffix}") for suffix in ("-wal", "-shm", "-journal")]


# --- mounts --------------------------------------------------------------------------


MOUNT, UMOUNT = shutil.which("mount"), shutil.which("umount")


def _mount(*args: str) -> None:
    if MOUNT is None or UMOUNT is None:
        pytest.skip("no mount and umount commands here")
    try:
        subprocess.run([MOUNT, *args], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", "") or exc
        pytest.skip(f"cannot mount here (needs root and mount permission): {detail}")


def _unmount(target: Path) -> None:
    assert UMOUNT is not None
    if subprocess.run([UMOUNT, str(target)], capture_output=True, check=False).returncode:
        subprocess.run([UMOUNT, "-l", str(target)], capture_output=True, check=True)


@contextmanager
def read_only(path: Path) -> Iterator[Path]:
    """``path`` (a file or a directory) bind-mounted read-only onto itself."""
    _mount("--bind", str(path), str(path))
    try:
        _mount("-o", "remount,ro,bind", str(path))
        yield path
    finally:
        _unmount(path)


@contextmanager
def small_disk(directory: Path, size: str) -> Iterator[Path]:
    """A tmpfs of ``size`` mounted on ``directory``."""
    directory.mkdir()
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory))
    try:
        yield directory
    finally:
        _unmount(directory)


def fill(directory: Path) -> Path:
    """Write a file in ``directory`` until the disk is full; return it."""
    filler = directory / "filler"
    with filler.open("wb", buffering=0) as stream:
        chunk = b"\0" * 4096
        try:
            while True:
                stream.write(chunk)
        except OSError as exc:
            if exc.errno != errno.ENOSPC:
                raise
    return filler


# --- an empty file ---------------------------------------------------------------------


async def test_an_empty_file_is_an_empty_database_that_open_store_initialises(tmp_path):
    """SQLite reads a zero-length file as a database without tables; open_store gives it
    the schema, as it does to a file it creates."""
    path = tmp_path / "memory.db"
    path.touch()
    async with open_store(path) as store:
        assert migrate.head() == await store.schema_revision()
        assert await store.is_empty()
        await store.store(MemoryEntry(MemoryCategory.FACT, "first"))
        assert 1 == await store.count()
    assert path.stat().st_size > 0


async def test_an_empty_file_opened_without_migrating_is_refused_and_stays_empty(tmp_path):
    path = tmp_path / "memory.db"
    path.touch()
    with pytest.raises(SchemaError, match="not initialised"):
        await open_store(path, migrate=False)
    assert b"" == path.read_bytes()
    assert not any(sidecar.exists() for sidecar in _sidecars(path))


def test_the_cli_reports_an_empty_file_as_not_initialised_and_leaves_it_empty(
    tmp_path, monkeypatch
):
    """Commands that read never create the schema: that is what `init` is for."""
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    path = tmp_path / "memory.db"
    path.touch()
    result = CliRunner().invoke(cli, ["--db", str(path), "stats"])
    assert 1 == result.exit_code
    assert isinstance(result.exception, SystemExit)
    [line] = result.stderr.splitlines()
    # In the command line's words, not Python's (no "migrate=True").
    assert f"Error: {path} has no schema yet: `loopctl-memory init` creates it" == line
    assert b"" == path.read_bytes()


# --- read-only -------------------------------------------------------------------------


async def test_a_read_only_file_can_be_read_and_every_write_is_refused(tmp_path):
    path = tmp_path / "memory.db"
    entries = await _filled(path)
    before = path.read_bytes()
    with read_only(path):
        async with open_store(path) as store:
            assert entries == await _contents(store)
            assert entries[:3] == await store.retrieve("kept", 3)
            assert entries[0] == await store.get(entries[0].id)
            writes: dict[str, Callable[[], Awaitable[object]]] = {
                "store": lambda: store.store(MemoryEntry(MemoryCategory.FACT, "new")),
                "store_many": lambda: store.store_many(_entries("new", 5)),
                "delete": lambda: store.delete(entries[0].id),
                "consolidate": store.consolidate,
            }
            for name, write in writes.items():
                with pytest.raises(StorageError, match="readonly") as caught:
                    await write()
                assert isinstance(caught.value.__cause__, Exception), name
            assert entries == await _contents(store)
    assert before == path.read_bytes()


async def test_a_read_only_file_at_an_older_revision_is_refused_and_untouched(tmp_path):
    path = tmp_path / "memory-0001.db"
    shutil.copyfile(FIXTURES / "memory-0001.db", path)
    before = path.read_bytes()
    with read_only(path):
        with pytest.raises(StorageError, match=r"read-only.*--read-only"):
            await open_store(path)
        with pytest.raises(SchemaError, match="0001"):
            await open_store(path, migrate=False)
        with pytest.raises(SchemaError, match="0001"):
            await open_store(path, read_only=True)
    assert before == path.read_bytes()


async def test_a_database_on_a_read_only_mount_is_read_with_read_only_and_untouched(tmp_path):
    """A WAL database needs its -shm file next to it: without a way to create one,
    SQLite opens it only as immutable, which a read-only mount makes true."""
    directory = tmp_path / "data"
    directory.mkdir()
    path = directory / "memory.db"
    entries = await _filled(path)
    before = {file.name: file.read_bytes() for file in directory.iterdir()}
    with read_only(directory):
        with pytest.raises(StorageError, match=r"read-only.*read_only=True") as caught:
            await open_store(path)
        assert isinstance(caught.value.__cause__, Exception)
        with pytest.raises(StorageError, match="unable to open"):
            await open_store(directory / "new.db")
        with pytest.raises(StorageError, match="no database at"):
            await open_store(directory / "new.db", read_only=True)
        async with open_store(path, read_only=True) as store:
            assert entries == await _contents(store)
            assert entries[:3] == await store.retrieve("kept", 3)
            for write in (
                lambda: store.store(MemoryEntry(MemoryCategory.FACT, "new")),
                lambda: store.store_many(_entries("new", 5)),
                lambda: store.delete(entries[0].id),
                lambda: store.update(entries[0].id, relevance=0.5),
                lambda: store.forget(everything=True),
                store.consolidate,
            ):
                with pytest.raises(StorageError, match="read-only"):
                    await write()
            assert entries == await _contents(store)
    assert before == {file.name: file.read_bytes() for file in directory.iterdir()}


def test_the_cli_reads_a_read_only_mount_with_read_only(tmp_path, monkeypatch):
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    directory = tmp_path / "data"
    directory.mkdir()
    path = directory / "memory.db"
    asyncio.run(_filled(path))
    with read_only(directory):
        refused = CliRunner().invoke(cli, ["--db", str(path), "stats"])
        assert 1 == refused.exit_code
        assert "--read-only" in refused.stderr
        found = CliRunner().invoke(cli, ["--db", str(path), "--read-only", "search", "kept"])
        assert 0 == found.exit_code, found.stderr
        assert "kept 0" in found.stdout
        added = CliRunner().invoke(
            cli, ["--db", str(path), "--read-only", "add", "x", "--category", "fact"]
        )
        assert 1 == added.exit_code
        assert "read-only" in added.stderr


# --- a full disk ---------------------------------------------------------------------


async def test_on_a_full_disk_writes_are_refused_then_succeed_once_there_is_room(tmp_path):
    with small_disk(tmp_path / "disk", "4m") as disk:
        path = disk / "memory.db"
        async with open_store(path) as store:
            kept = _entries("kept", 20)
            await store.store_many(kept)
            filler = fill(disk)
            before = path.read_bytes()
            writes: dict[str, Callable[[], Awaitable[object]]] = {
                "a large store": lambda: store.store(
                    MemoryEntry(MemoryCategory.FACT, "x" * 300_000)
                ),
                "a large batch": lambda: store.store_many(_entries("big", 2_000, size=200)),
                "a small store": lambda: store.store(MemoryEntry(MemoryCategory.FACT, "small")),
            }
            for name, write in writes.items():
                with pytest.raises(StorageError, match="full") as caught:
                    await write()
                assert isinstance(caught.value.__cause__, Exception), name
                assert kept == await _contents(store), f"{name} left something behind"
            assert kept == await store.retrieve("kept", 100)
            assert before == path.read_bytes()

            filler.unlink()
            batch = _entries("after", 1_000, size=200)
            await store.store_many(batch)
            assert [*kept, *batch] == await _contents(store)
            assert (await store.consolidate()).pruned == len(kept) + len(batch)
        raw = sqlite3.connect(path)
        try:
            assert [("ok",)] == raw.execute("PRAGMA integrity_check").fetchall()
        finally:
            raw.close()


async def test_a_new_database_on_a_full_disk_is_refused_and_opens_once_there_is_room(tmp_path):
    """SQLite may leave the new file behind, empty: an empty file is an empty database."""
    with small_disk(tmp_path / "disk", "512k") as disk:
        filler = fill(disk)
        path = disk / "memory.db"
        with pytest.raises(StorageError, match="full"):
            await open_store(path)
        assert not path.exists() or 0 == path.stat().st_size
        filler.unlink()
        async with open_store(path) as store:
            assert migrate.head() == await store.schema_revision()
            assert await store.is_empty()


async def test_an_upgrade_on_a_full_disk_is_refused_and_leaves_the_file_at_0001(tmp_path):
    expected = [
        entry_from_json(line)
        for line in (FIXTURES / "memory-0001.jsonl").read_text(encoding="utf-8").splitlines()
    ]
    with small_disk(tmp_path / "disk", "1m") as disk:
        path = disk / "memory.db"
        shutil.copyfile(FIXTURES / "memory-0001.db", path)
        before = path.read_bytes()
        filler = fill(disk)
        with pytest.raises(StorageError, match="full"):
            await open_store(path)
        assert before == path.read_bytes()
        filler.unlink()
        async with open_store(path) as store:
            assert migrate.head() == await store.schema_revision()
            assert expected == await _contents(store)
