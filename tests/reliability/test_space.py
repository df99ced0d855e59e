"""Space given back: new files are ``auto_vacuum=INCREMENTAL``, ``consolidate(vacuum=True)``
returns free pages to the disk, ``stats`` shows them, and older files keep working.

Sizes are of the database file once the store is closed (SQLite then moves its
write-ahead log into the file and removes the log), so they do not depend on
when a checkpoint ran.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import event

from loopctl_memory import (
    ConsolidationConfig,
    InMemoryStore,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
    sync,
)
from loopctl_memory.cli import DB_ENVVAR, cli
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

FIXTURE_0004 = Path(__file__).with_name("fixtures") / "memory-0004.db"
KEPT, DROPPED = 100, 900
PADDING = " and a longer note about the build cache" * 8


def _entries(prefix: str, count: int, relevance: float) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            f"{prefix} {number} {PADDING}",
            tags=[f"{prefix}-tag"],
            relevance=relevance,
        )
        for number in range(count)
    ]


def _mix() -> tuple[list[MemoryEntry], list[MemoryEntry]]:
    """Entries to keep (relevance 1) and, interleaved with them, entries consolidate prunes."""
    kept = _entries("kept", KEPT, 1.0)
    dropped = _entries("dropped", DROPPED, 0.0)
    every = DROPPED // KEPT
    mixed = []
    for number, entry in enumerate(kept):
        mixed += [entry, *dropped[number * every : (number + 1) * every]]
    return kept, mixed


def _raw(path: Path, sql: str) -> Any:
    raw = sqlite3.connect(path)
    try:
        return raw.execute(sql).fetchone()[0]
    finally:
        raw.close()


def _auto_vacuum(path: Path) -> int:
    return int(_raw(path, "PRAGMA auto_vacuum"))


INCREMENTAL, NONE = 2, 0


def _closed_size(path: Path) -> int:
    """The file's size; the store is closed, so there is no write-ahead log left."""
    assert not path.with_name(f"{path.name}-wal").exists()
    return path.stat().st_size


def _old_style_file(path: Path) -> Path:
    """An empty database without auto-vacuum, as versions before this one created them."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        raw.execute("PRAGMA auto_vacuum=NONE")
        raw.execute("CREATE TABLE scratch (x)")  # fixes the mode; open_store finds no table
        raw.execute("DROP TABLE scratch")
    finally:
        raw.close()
    return path


async def _filled(path: Path) -> list[MemoryEntry]:
    """Store the mix at ``path``; return the entries a consolidation keeps."""
    kept, mixed = _mix()
    async with open_store(path) as store:
        await store.store_many(mixed)
    return kept


async def _contents(path: Path) -> list[MemoryEntry]:
    async with open_store(path) as store:
        return [entry async for entry in store.iter_entries()]


# --- new files ---------------------------------------------------------------------------


async def test_a_new_file_is_created_with_incremental_auto_vacuum(tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path):
        pass
    assert INCREMENTAL == _auto_vacuum(path)


async def test_an_empty_file_refused_stays_empty_and_is_incremental_once_created(tmp_path):
    """The mode is set without writing: a file refused with migrate=False is left as it was."""
    path = tmp_path / "memory.db"
    path.touch()
    with pytest.raises(Exception, match="not initialised"):
        await open_store(path, migrate=False)
    assert b"" == path.read_bytes()
    async with open_store(path):
        pass
    assert INCREMENTAL == _auto_vacuum(path)


async def test_consolidating_a_new_file_gives_back_its_whole_free_pages(tmp_path):
    path = tmp_path / "memory.db"
    kept = await _filled(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        assert 0 == await store.free_bytes()
        assert DROPPED == (await store.consolidate()).pruned
        assert 0 == await store.free_bytes()
    assert _closed_size(path) < before // 2
    assert kept == await _contents(path)


async def test_vacuum_packs_what_a_scattered_prune_leaves_in_part_full_pages(tmp_path):
    """Every tenth entry pruned frees few whole pages: only a vacuum gives the room back."""
    path = tmp_path / "memory.db"
    made = [
        MemoryEntry(MemoryCategory.FACT, f"note {n} {PADDING}", relevance=float(n % 10 > 0))
        for n in range(2_000)
    ]
    async with open_store(path) as store:
        await store.store_many(made)
    before = _closed_size(path)
    async with open_store(path) as store:
        assert 200 == (await store.consolidate()).pruned
    consolidated = _closed_size(path)
    async with open_store(path) as store:
        assert 0 == (await store.consolidate(vacuum=True)).pruned
    vacuumed = _closed_size(path)
    assert consolidated > before * 0.95  # the part-full pages stay
    assert vacuumed < consolidated * 0.95
    assert 1_800 == len(await _contents(path))


async def test_consolidating_with_vacuum_gives_the_free_pages_back(tmp_path):
    path = tmp_path / "memory.db"
    kept = await _filled(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        stats = await store.consolidate(vacuum=True)
        assert 0 == await store.free_bytes()
        assert [kept[7]] == await store.retrieve("kept 7", 1)
    assert (len(kept) + DROPPED, len(kept), DROPPED) == (
        stats.entries_before,
        stats.entries_after,
        stats.pruned,
    )
    assert _closed_size(path) < before // 2
    assert INCREMENTAL == _auto_vacuum(path)
    assert kept == await _contents(path)


async def test_vacuum_also_gives_back_what_earlier_deletes_freed(tmp_path):
    path = _old_style_file(tmp_path / "memory.db")
    kept, mixed = _mix()
    async with open_store(path) as store:
        await store.store_many(mixed)
        assert DROPPED == await store.forget(below=0.5)
        freed = await store.free_bytes()
        stats = await store.consolidate(vacuum=True)
        assert 0 == stats.pruned
        assert 0 == await store.free_bytes()
    assert freed is not None
    assert freed > 0
    assert kept == await _contents(path)


async def test_a_full_consolidation_with_vacuum_gives_the_pages_back_too(tmp_path):
    path = tmp_path / "memory.db"
    await _filled(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        unmerged = dataclasses.replace(ConsolidationConfig.full(), merge=False)
        stats = await store.consolidate(unmerged, vacuum=True)
        assert 0 == await store.free_bytes()
    assert stats.pruned >= DROPPED
    assert _closed_size(path) < before // 2


# --- files from before: no auto-vacuum ----------------------------------------------------


async def test_an_old_style_file_keeps_its_mode_its_size_and_its_free_pages(tmp_path):
    path = _old_style_file(tmp_path / "memory.db")
    kept = await _filled(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        assert DROPPED == (await store.consolidate()).pruned
        assert [kept[3]] == await store.retrieve("kept 3", 1)
        free = await store.free_bytes()
    assert before <= _closed_size(path)
    assert free is not None
    assert free > before // 2
    assert NONE == _auto_vacuum(path)
    assert kept == await _contents(path)


async def test_vacuum_rebuilds_an_old_style_file_smaller_in_its_own_mode(tmp_path):
    """A full VACUUM, which keeps the mode: each later vacuum rebuilds the file again."""
    path = _old_style_file(tmp_path / "memory.db")
    kept = await _filled(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        assert DROPPED == (await store.consolidate(vacuum=True)).pruned
        assert 0 == await store.free_bytes()
        assert [kept[5]] == await store.retrieve("kept 5", 1)
    assert _closed_size(path) < before // 2
    assert NONE == _auto_vacuum(path)
    assert kept == await _contents(path)


async def test_the_0004_fixture_upgrades_and_vacuum_shrinks_it(tmp_path):
    """A file written by the release at revision 0004 (4 KiB pages, no auto-vacuum)."""
    path = tmp_path / "memory.db"
    shutil.copyfile(FIXTURE_0004, path)
    assert NONE == _auto_vacuum(path)
    async with open_store(path) as store:
        expected = [entry async for entry in store.iter_entries()]
        await store.store_many(_entries("dropped", DROPPED, 0.0))
        reference = InMemoryStore(expected)
        assert DROPPED <= (await store.consolidate()).pruned
    assert NONE == _auto_vacuum(path)
    before = _closed_size(path)
    async with open_store(path) as store:
        assert 0 == (await store.consolidate(vacuum=True)).pruned
        assert 0 == await store.free_bytes()
    await reference.consolidate()
    assert _closed_size(path) < before
    assert NONE == _auto_vacuum(path)
    assert 4096 == _raw(path, "PRAGMA page_size")  # a WAL file keeps its page size
    assert "ok" == _raw(path, "PRAGMA integrity_check")
    assert [entry async for entry in reference.iter_entries()] == await _contents(path)


# --- another connection holds the file -----------------------------------------------------


@contextmanager
def _locked_after_the_pass(store: Any, path: Path) -> Iterator[sqlite3.Connection]:
    """Another connection takes the write lock as soon as the consolidation pass has committed.

    The pass's connection goes back to the pool after its commit; the vacuum runs next.
    """
    other = sqlite3.connect(path, isolation_level=None, timeout=0)

    def lock(*_: object) -> None:
        if not other.in_transaction:
            other.execute("BEGIN IMMEDIATE")

    pool = store.engine.sync_engine
    event.listen(pool, "checkin", lock)
    try:
        yield other
    finally:
        event.remove(pool, "checkin", lock)
        if other.in_transaction:
            other.execute("ROLLBACK")
        other.close()


@pytest.mark.parametrize("old_style", [False, True], ids=["incremental", "old-style"])
async def test_vacuum_while_another_connection_writes_is_refused_and_changes_nothing(
    tmp_path, old_style
):
    path = tmp_path / "memory.db"
    if old_style:
        _old_style_file(path)
    kept = await _filled(path)
    async with open_store(path, busy_timeout=0.05) as store:
        with (
            _locked_after_the_pass(store, path),
            pytest.raises(StorageError, match="another connection holds the file") as refused,
        ):
            await store.consolidate(vacuum=True)
        assert "the pass was committed" in str(refused.value)
        assert len(kept) == await store.count()
        free = await store.free_bytes()
        assert free is not None
        assert free > 0
        size = path.stat().st_size
        assert (NONE if old_style else INCREMENTAL) == _auto_vacuum(path)
        await store.consolidate(vacuum=True)  # once the other is done, it works
        assert 0 == await store.free_bytes()
        assert path.stat().st_size < size
    assert kept == await _contents(path)


# --- :memory:, the reference, the blocking API, arguments -----------------------------------


async def test_vacuum_in_memory_does_nothing_more_than_consolidate():
    kept, mixed = _mix()
    async with open_store(":memory:") as store:
        await store.store_many(mixed)
        stats = await store.consolidate(vacuum=True)
        assert None is await store.free_bytes()
        assert kept == [entry async for entry in store.iter_entries()]
        assert [kept[2]] == await store.retrieve("kept 2", 1)
    assert DROPPED == stats.pruned


async def test_the_reference_store_accepts_vacuum_and_ignores_it():
    kept, mixed = _mix()
    reference = InMemoryStore(mixed)
    assert DROPPED == (await reference.consolidate(vacuum=True)).pruned
    assert kept == [entry async for entry in reference.iter_entries()]


def test_the_blocking_store_forwards_vacuum(tmp_path):
    path = tmp_path / "memory.db"
    kept, mixed = _mix()
    with sync.open_store(path) as store:
        store.store_many(mixed)
    before = _closed_size(path)
    with sync.open_store(path) as store:
        assert DROPPED == store.consolidate(vacuum=True).pruned
        assert kept == list(store.iter_entries())
    assert _closed_size(path) < before // 2


async def test_vacuum_must_be_a_bool(tmp_path):
    async with open_store(tmp_path / "memory.db") as store:
        with pytest.raises(InvalidEntryError, match="vacuum must be a bool"):
            await store.consolidate(vacuum="yes")  # type: ignore[arg-type]


# --- the command line ---------------------------------------------------------------------


@pytest.fixture
def cli_db(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    monkeypatch.setenv("COLUMNS", "100")
    return tmp_path / "memory.db"


def _cli(path: Path, *args: str) -> Any:
    result = CliRunner().invoke(cli, ["--db", str(path), *args])
    assert 0 == result.exit_code, result.output
    return result


def _free_bytes(path: Path) -> Any:
    return json.loads(_cli(path, "stats", "--json").stdout)["free_bytes"]


@pytest.mark.parametrize("full", [[], ["--full"]], ids=["reference", "full"])
def test_the_cli_consolidate_vacuum_gives_the_space_back_and_stats_shows_it(cli_db, full):
    _old_style_file(cli_db)  # its free pages stay until a vacuum
    with sync.open_store(cli_db) as store:
        store.store_many(_mix()[1])
    assert 0 == _free_bytes(cli_db)
    _cli(cli_db, "consolidate", *full, "--yes")
    free = _free_bytes(cli_db)
    assert free > 0
    rows = [line.split() for line in _cli(cli_db, "stats").stdout.splitlines()]
    assert any(row[:1] == ["free"] and "--vacuum)" in row for row in rows), rows
    before = _closed_size(cli_db)
    result = _cli(cli_db, "consolidate", *full, "--vacuum", "--yes", "--json")
    assert 0 == json.loads(result.stdout)["pruned"]
    assert 0 == _free_bytes(cli_db)
    assert _closed_size(cli_db) < before


def test_the_cli_asks_before_it_vacuums(cli_db):
    _cli(cli_db, "init")
    result = CliRunner().invoke(cli, ["--db", str(cli_db), "consolidate", "--vacuum"], input="n\n")
    assert 0 != result.exit_code
    assert "then give the free space back" in result.output


def test_stats_json_has_no_free_bytes_in_memory(cli_db):
    del cli_db
    result = CliRunner().invoke(cli, ["--db", ":memory:", "stats", "--json"])
    assert 0 == result.exit_code, result.output
    assert None is json.loads(result.stdout)["free_bytes"]


# --- PostgreSQL ---------------------------------------------------------------------------


@NEEDS_POSTGRES
async def test_vacuum_on_postgresql_runs_and_keeps_every_survivor():
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    kept, mixed = _mix()
    async with open_store(url) as store:
        await store.store_many(mixed)
        stats = await store.consolidate(vacuum=True)
        assert None is await store.free_bytes()
        assert [kept[4]] == await store.retrieve("kept 4", 1)
        assert kept == [entry async for entry in store.iter_entries()]
        again = await store.consolidate(ConsolidationConfig.full(), vacuum=True)
    assert DROPPED == stats.pruned
    assert len(kept) == again.entries_before
