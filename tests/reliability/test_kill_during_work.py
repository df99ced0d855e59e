"""kill -9 in the middle of consolidate or of a migration: all of it or none of it, nothing lost.

A child process (``kill_worker.py``) runs the operation with a SQLite progress
handler. A first run goes to the end and reports how many progress callbacks
the operation made; the following runs stop at chosen callbacks (the first, a
quarter, half, three quarters, the last), report whether SQLite was inside a
transaction there, and block inside SQLite until they are SIGKILLed: the kill
points are chosen by the work itself, not by a clock. A few more runs are
killed after arbitrary delays, and there only what must hold at any moment is
asserted.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.entry_json import entry_from_json
from tests.reliability.kill_worker import expected_entries, is_prunable

WORKER = Path(__file__).with_name("kill_worker.py")
FIXTURES = Path(__file__).with_name("fixtures")
ROOT = Path(__file__).resolve().parents[2]
CHILD_TIMEOUT = 60.0  # seconds; a child that hangs fails the test instead of blocking the suite
# Seconds after "armed" (consolidate takes about 0.02 s, the 3,000-entry upgrade about 0.1 s)
# for the checks that hold whenever the kill lands.
CONSOLIDATE_DELAYS = [0.0, 0.005, 0.02, 0.08]
MIGRATION_DELAYS = [0.0, 0.03, 0.08, 0.3]
PARALLEL = 2  # children at once; the kill points do not depend on it


@dataclass(frozen=True, slots=True)
class Kill:
    """How a child ended: paused at a callback, or done, or killed after a delay."""

    kind: str  # "paused", "done" or "delay"
    calls: int | None = None  # "paused": the callback it stopped at; "done": how many there were
    in_transaction: bool | None = None  # "paused": inside a transaction at that point
    result: str | None = None  # "done": what the operation returned


def _kill_child(
    mode: str, path: Path, *, pause_at: int = 0, cache_pages: int = 0, delay: float | None = None
) -> Kill:
    """Run the worker on ``path``; SIGKILL it when it pauses, is done, or after ``delay``."""
    # One hash seed for every child: the same work, so the same count of progress callbacks.
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONHASHSEED": "0"}
    command = [sys.executable, str(WORKER), mode, str(path), str(pause_at), str(cache_pages)]
    lines: list[str] = []
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    ) as child:
        watchdog = threading.Timer(CHILD_TIMEOUT, child.kill)
        watchdog.start()
        try:
            assert child.stdout is not None
            lines.append(child.stdout.readline())
            if lines[0] == "armed\n":
                if delay is None:
                    lines.append(child.stdout.readline())
                else:
                    time.sleep(delay)  # where this lands is up to timing: invariants only
        finally:
            child.send_signal(signal.SIGKILL)
            _, stderr = child.communicate()
            watchdog.cancel()
    assert -signal.SIGKILL == child.returncode, stderr
    assert "armed\n" == lines[0], f"the worker failed before starting:\n{stderr}"
    if delay is not None:
        return Kill("delay")
    words = lines[1].split()
    if words[:1] == ["paused"]:
        return Kill("paused", calls=int(words[1]), in_transaction=words[2] == "intx=1")
    assert words[:1] == ["done"], f"unexpected worker output {lines!r}:\n{stderr}"
    return Kill("done", calls=int(words[1]), result=words[2])


def _kill_points(calls: int) -> list[int]:
    """The first, a quarter, half, three quarters and the last progress callback."""
    return sorted({max(1, calls * share // 4) for share in range(5)})


def _in_parallel(work: Callable[[int], Kill], points: list[int]) -> list[Kill]:
    with ThreadPoolExecutor(PARALLEL) as pool:
        return list(pool.map(work, points))


def _check_integrity(path: Path) -> None:
    """The file is a sound database once SQLite has recovered it (the first open does)."""
    raw = sqlite3.connect(path)
    try:
        assert [("ok",)] == raw.execute("PRAGMA integrity_check").fetchall()
        assert [] == raw.execute("PRAGMA foreign_key_check").fetchall()
    finally:
        raw.close()


Schema = list[tuple[str, str, str, tuple[str, ...]]]


def _revision_and_schema(path: Path) -> tuple[str, Schema]:
    """The revision, and every table and index with its definition.

    A definition is compared as its lines in any order: a batch migration
    rebuilds a table with its constraints in an order that varies from one
    process to the next.
    """
    raw = sqlite3.connect(path)
    try:
        (revision,) = raw.execute("SELECT version_num FROM alembic_version").fetchone()
        rows = raw.execute(
            "SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master ORDER BY name"
        ).fetchall()
    finally:
        raw.close()
    pieces = [
        (kind, name, table, tuple(sorted(line.strip(" \t,") for line in sql.splitlines())))
        for kind, name, table, sql in rows
    ]
    return revision, pieces


async def _contents_then_one_more(path: Path) -> list[MemoryEntry]:
    """Every entry in insertion order; then check that the store still takes a write."""
    async with open_store(path) as store:
        stored = [entry async for entry in store.iter_entries()]
        await store.store(MemoryEntry(MemoryCategory.FACT, "written after the kill"))
        assert len(stored) + 1 == await store.count()
        assert migrate.head() == await store.schema_revision()
    return stored


# --- consolidate ---------------------------------------------------------------------

EXPECTED = expected_entries()
KEPT = [entry for index, entry in enumerate(EXPECTED) if not is_prunable(index)]
PRUNED = len(EXPECTED) - len(KEPT)


def _consolidate_outcome(path: Path) -> str:
    """ "none" if nothing was pruned, "all" if every prunable entry was; fails otherwise."""
    _check_integrity(path)
    stored = asyncio.run(_contents_then_one_more(path))
    if stored == EXPECTED:
        return "none"
    assert KEPT == stored, (
        f"{len(stored)} entries after the kill: neither all {len(EXPECTED)} "
        f"nor the {len(KEPT)} kept ones, intact and in order"
    )
    return "all"


def test_the_consolidate_workload_has_entries_to_prune_and_to_keep():
    assert 3_000 == len(EXPECTED)
    assert 400 < PRUNED < 500
    assert all(entry.relevance >= 0.05 for entry in KEPT)


@pytest.mark.slow
@pytest.mark.parametrize("cache_pages", [0, 8], ids=["store-cache", "8-page-cache-spills"])
def test_consolidate_killed_at_chosen_points_prunes_nothing_and_loses_nothing(
    cache_pages, tmp_path
):
    done = _kill_child("consolidate", tmp_path / "done.db", cache_pages=cache_pages)
    assert ("done", str(PRUNED)) == (done.kind, done.result)
    assert "all" == _consolidate_outcome(tmp_path / "done.db"), "an acknowledged consolidate"
    assert done.calls is not None
    points = _kill_points(done.calls)
    assert 5 == len(points)

    def kill_at(point: int) -> Kill:
        return _kill_child(
            "consolidate", tmp_path / f"at-{point}.db", pause_at=point, cache_pages=cache_pages
        )

    for point, kill in zip(points, _in_parallel(kill_at, points), strict=True):
        assert Kill("paused", calls=point, in_transaction=True) == kill
        assert "none" == _consolidate_outcome(tmp_path / f"at-{point}.db"), f"killed at {point}"


@pytest.mark.slow
def test_consolidate_killed_at_any_moment_prunes_all_or_nothing(tmp_path):
    def kill_after(index: int) -> Kill:
        path = tmp_path / f"{index}.db"
        return _kill_child("consolidate", path, delay=CONSOLIDATE_DELAYS[index])

    indexes = list(range(len(CONSOLIDATE_DELAYS)))
    assert all(kill.kind == "delay" for kill in _in_parallel(kill_after, indexes))
    outcomes = [_consolidate_outcome(tmp_path / f"{index}.db") for index in indexes]
    assert set(outcomes) <= {"none", "all"}
    print(f"consolidate killed after {CONSOLIDATE_DELAYS} s: pruned {outcomes}")


# --- migration from 0001 to head -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Source:
    """A database at revision 0001, what it holds, and its schema before and after upgrading."""

    path: Path
    entries: list[MemoryEntry]
    schema_0001: Schema
    schema_head: Schema


def _source(path: Path, entries: list[MemoryEntry], scratch: Path) -> Source:
    revision, schema_0001 = _revision_and_schema(path)
    assert "0001" == revision
    upgraded = scratch / f"upgraded-{path.name}"
    shutil.copyfile(path, upgraded)
    asyncio.run(_contents_then_one_more(upgraded))
    revision, schema_head = _revision_and_schema(upgraded)
    assert migrate.head() == revision
    assert schema_0001 != schema_head
    return Source(path, entries, schema_0001, schema_head)


async def _fill_then_downgrade(path: Path, entries: list[MemoryEntry]) -> None:
    """A revision-0001 database with data, made as tests/migrations makes one."""
    async with open_store(path) as store:
        await store.store_many(entries)
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.upgrade_to, "0001")


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Source]:
    scratch = tmp_path_factory.mktemp("sources")
    fixture = scratch / "memory-0001.db"
    shutil.copyfile(FIXTURES / "memory-0001.db", fixture)
    lines = (FIXTURES / "memory-0001.jsonl").read_text(encoding="utf-8").splitlines()
    wal = scratch / "wal-0001.db"
    asyncio.run(_fill_then_downgrade(wal, EXPECTED))
    assert not wal.with_name(f"{wal.name}-wal").exists()
    return {
        "fixture": _source(fixture, [entry_from_json(line) for line in lines], scratch),
        "wal": _source(wal, EXPECTED, scratch),
    }


QUERIES = ["memory 12", "ünïcødé shared", "cache retry", "t3", ""]


async def _retrievals(path: Path) -> list[list[MemoryEntry]]:
    async with open_store(path) as store:
        return [await store.retrieve(query, 7) for query in QUERIES]


async def _reference_retrievals(entries: list[MemoryEntry]) -> list[list[MemoryEntry]]:
    reference = InMemoryStore(entries)
    return [await reference.retrieve(query, 7) for query in QUERIES]


def _migration_outcome(path: Path, source: Source) -> str:
    """The revision the killed migration left: 0001 or head, never a schema in between."""
    _check_integrity(path)
    revision, schema = _revision_and_schema(path)
    assert (revision, schema) in [
        ("0001", source.schema_0001),
        (migrate.head(), source.schema_head),
    ], f"a database between revisions: {revision}"
    assert asyncio.run(_retrievals(path)) == asyncio.run(_reference_retrievals(source.entries))
    assert source.entries == asyncio.run(_contents_then_one_more(path))
    return str(revision)


# "fixture": the committed 0001 file, rollback journal; "wal": 3,000 entries in WAL mode,
# with a page cache so small that the rebuilt tables spill into the WAL before the commit.
MIGRATION_CASES = [("fixture", 0), ("wal", 8)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "cache_pages"), MIGRATION_CASES, ids=["fixture", "wal-3000"])
def test_a_migration_killed_at_chosen_points_is_at_0001_or_head(
    name, cache_pages, sources, tmp_path
):
    source = sources[name]
    done_path = tmp_path / "done.db"
    shutil.copyfile(source.path, done_path)
    done = _kill_child("migrate", done_path, cache_pages=cache_pages)
    assert ("done", migrate.head()) == (done.kind, done.result)
    assert migrate.head() == _migration_outcome(done_path, source), "an acknowledged upgrade"
    assert done.calls is not None
    points = _kill_points(done.calls)
    assert 5 == len(points)

    def kill_at(point: int) -> Kill:
        path = tmp_path / f"at-{point}.db"
        shutil.copyfile(source.path, path)
        return _kill_child("migrate", path, pause_at=point, cache_pages=cache_pages)

    outcomes = []
    for point, kill in zip(points, _in_parallel(kill_at, points), strict=True):
        assert ("paused", point) == (kill.kind, kill.calls)
        revision = _migration_outcome(tmp_path / f"at-{point}.db", source)
        if kill.in_transaction:
            assert "0001" == revision, f"killed inside the upgrade's transaction at {point}"
        outcomes.append((point, kill.in_transaction, revision))
    print(f"migration {name}: killed at (callback, in transaction, revision) {outcomes}")


@pytest.mark.slow
def test_a_migration_killed_at_any_moment_is_at_0001_or_head(sources, tmp_path):
    source = sources["wal"]

    def kill_after(index: int) -> Kill:
        path = tmp_path / f"{index}.db"
        shutil.copyfile(source.path, path)
        return _kill_child("migrate", path, delay=MIGRATION_DELAYS[index])

    indexes = list(range(len(MIGRATION_DELAYS)))
    assert all(kill.kind == "delay" for kill in _in_parallel(kill_after, indexes))
    revisions = [_migration_outcome(tmp_path / f"{index}.db", source) for index in indexes]
    assert set(revisions) <= {"0001", migrate.head()}
    print(f"migration killed after {MIGRATION_DELAYS} s: at revisions {revisions}")
