"""Concurrent writers and readers neither fail, nor lose, duplicate or tear an entry."""

from __future__ import annotations

import asyncio
import itertools
import os
import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Awaitable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, SqlMemoryStore, open_store
from tests.conftest import (
    NEEDS_POSTGRES,
    POSTGRES_URL_VARIABLE,
    integrity_check,
    reset_postgres,
)
from tests.reliability.concurrent_worker import (
    BUSY_TIMEOUT,
    PER_WORKER,
    WORKERS,
    all_expected,
    expected_entry,
    scope_of,
)

WORKER = Path(__file__).with_name("concurrent_worker.py")
CHILD_TIMEOUT = 120.0  # seconds; a hang fails the test instead of blocking the suite


def _duplicate_ids(path: Path) -> list[tuple[object, int]]:
    raw = sqlite3.connect(path)
    try:
        return raw.execute(
            "SELECT id, COUNT(*) FROM entries GROUP BY id HAVING COUNT(*) > 1"
        ).fetchall()
    finally:
        raw.close()


# --- 1. several processes writing one SQLite file at once ---


async def _create_schema(target: str | Path) -> None:
    if isinstance(target, str):
        await reset_postgres(target)
    async with open_store(target):
        pass


async def _check_every_entry(target: str | Path, *, scoped: bool) -> None:
    expected = all_expected()
    assert WORKERS * PER_WORKER == len(expected)
    async with open_store(target, busy_timeout=BUSY_TIMEOUT) as opened:
        store = opened.with_descendants() if scoped else opened
        if scoped:
            assert 0 == await opened.count()
            assert [(scope_of(w), PER_WORKER) for w in range(WORKERS)] == await opened.scopes()
            for worker in range(WORKERS):
                own = {expected_entry(worker, index).id for index in range(PER_WORKER)}
                view = opened.scope(scope_of(worker))
                assert own == {entry.id async for entry in view.iter_entries()}
        assert len(expected) == await store.count()
        stored_ids = [entry.id async for entry in store.iter_entries()]
        assert len(expected) == len(stored_ids)
        assert set(expected) == set(stored_ids)
        for entry_id, entry in expected.items():
            assert entry == await store.get(entry_id)


@pytest.mark.parametrize("scoped", [False, True], ids=["root", "a-scope-each"])
@pytest.mark.parametrize(
    "backend", ["sqlite-file", pytest.param("postgresql", marks=NEEDS_POSTGRES)]
)
def test_processes_writing_one_database_at_once_lose_nothing(tmp_path, backend, scoped):
    """With a scope each, each scope holds exactly its writer's entries and no other's."""
    path: str | Path = (
        tmp_path / "memory.db" if backend == "sqlite-file" else os.environ[POSTGRES_URL_VARIABLE]
    )
    go_file = tmp_path / "go"
    asyncio.run(_create_schema(path))  # the schema exists before the writers race
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    children = [
        subprocess.Popen(
            [
                sys.executable,
                str(WORKER),
                str(path),
                str(worker),
                str(go_file),
                *(["scoped"] if scoped else []),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for worker in range(WORKERS)
    ]
    outputs: list[tuple[int | None, str, str]] = []
    try:
        for child in children:  # every writer has opened the store ...
            assert child.stdout is not None
            line = child.stdout.readline()
            assert "ready\n" == line, f"worker failed to start: {line!r}"
        go_file.touch()  # ... before any of them writes
        for child in children:
            out, err = child.communicate(timeout=CHILD_TIMEOUT)
            outputs.append((child.returncode, out, err))
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.communicate()

    for worker, (returncode, out, err) in enumerate(outputs):
        assert 0 == returncode, f"worker {worker} failed:\n{err}"
        assert f"done {PER_WORKER}\n" == out
        assert "locked" not in err.lower()
        assert "Traceback" not in err

    if isinstance(path, Path):
        assert ["ok"] == integrity_check(path)
        assert [] == _duplicate_ids(path)
    # exact count, every id once, every entry intact (and in its writer's scope)
    asyncio.run(_check_every_entry(path, scoped=scoped))


# --- 2. many tasks sharing one store inside one process ---

PRUNABLE = 30  # stored before the concurrent phase, relevance 0.01: the only ones consolidate drops
KEEPERS = 10  # stored before the concurrent phase, never pruned
SINGLE_TASKS, SINGLES_PER_TASK = 16, 5
BATCH_TASKS, BATCH_SIZE = 8, 20
RETRIEVE_TASKS, RETRIEVES_PER_TASK = 8, 5
COUNT_TASKS, COUNTS_PER_TASK = 4, 5
CONSOLIDATE_TASKS, CONSOLIDATES_PER_TASK = 4, 2
TASKS = SINGLE_TASKS + BATCH_TASKS + RETRIEVE_TASKS + COUNT_TASKS + CONSOLIDATE_TASKS
CONCURRENT_WRITES = SINGLE_TASKS * SINGLES_PER_TASK + BATCH_TASKS * BATCH_SIZE
QUERIES = [("task memory", 5), ("shared alpha", 50), ("", 3), ("batch 3", 1000), ("single", 0)]

_NAMESPACE = uuid.UUID("9d1f6a2b-5c3e-4e7a-8b90-1a2b3c4d5e6f")
_CATEGORIES = list(MemoryCategory)


def _entry(label: str, index: int, relevance: float) -> MemoryEntry:
    return MemoryEntry(
        _CATEGORIES[index % len(_CATEGORIES)],
        f"{label} task memory {index} ✓ " + "z" * (index % 23),
        tags=["shared", "alpha", label, f"n{index}"][: index % 5],
        relevance=relevance,
        id=uuid.uuid5(_NAMESPACE, f"{label}/{index}"),
        created_at=datetime(2026, 2, 1, tzinfo=UTC) + timedelta(seconds=index),
        access_count=index % 3,
        validated=index % 2 == 1,
    )


def _relevance(index: int) -> float:
    return 0.1 + (index % 9) * 0.1  # 0.1 .. 0.9: never pruned


PRE = [_entry("prunable", i, 0.01) for i in range(PRUNABLE)] + [
    _entry("keeper", i, 0.5) for i in range(KEEPERS)
]
SINGLES = [
    [_entry(f"single {t}", i, _relevance(i)) for i in range(SINGLES_PER_TASK)]
    for t in range(SINGLE_TASKS)
]
BATCHES = [
    [_entry(f"batch {t}", i, _relevance(i + t)) for i in range(BATCH_SIZE)]
    for t in range(BATCH_TASKS)
]
ORIGINALS = {
    entry.id: entry for entry in [*PRE, *itertools.chain(*SINGLES), *itertools.chain(*BATCHES)]
}


@pytest.fixture(params=[":memory:", "file", pytest.param("postgresql", marks=NEEDS_POSTGRES)])
async def shared_store(request, tmp_path):
    target: str | Path = {
        ":memory:": ":memory:",
        "file": tmp_path / "memory.db",
        "postgresql": os.environ.get(POSTGRES_URL_VARIABLE, ""),
    }[request.param]
    if request.param == "postgresql":
        await reset_postgres(str(target))
    async with open_store(target, busy_timeout=BUSY_TIMEOUT) as store:
        yield store
    if request.param == "file":
        assert ["ok"] == integrity_check(tmp_path / "memory.db")


async def _serial_reference() -> InMemoryStore:
    reference = InMemoryStore()
    await reference.store_many(PRE)
    await reference.consolidate()
    for entries in SINGLES:
        for entry in entries:
            await reference.store(entry)
    for batch in BATCHES:
        await reference.store_many(batch)
    return reference


async def test_tasks_sharing_one_store_end_as_a_serial_run(shared_store: SqlMemoryStore):
    store = shared_store
    await store.store_many(PRE)
    retrieved: list[object] = []
    counts: list[int] = []
    pruned: list[int] = []

    async def singles(entries: list[MemoryEntry]) -> None:
        for entry in entries:
            await store.store(entry)

    async def batch(entries: list[MemoryEntry]) -> None:
        await store.store_many(entries)

    async def retrieves(task: int) -> None:
        for i in range(RETRIEVES_PER_TASK):
            query, limit = QUERIES[(task + i) % len(QUERIES)]
            found = await store.retrieve(query, limit)
            retrieved.append(found)
            assert isinstance(found, list)
            assert len(found) <= limit

    async def counting() -> None:
        counts.extend([await store.count() for _ in range(COUNTS_PER_TASK)])

    async def consolidating() -> None:
        for _ in range(CONSOLIDATES_PER_TASK):
            stats = await store.consolidate()
            assert stats.entries_after == stats.entries_before - stats.pruned
            pruned.append(stats.pruned)

    work: list[Awaitable[None]] = [
        *(singles(entries) for entries in SINGLES),
        *(batch(entries) for entries in BATCHES),
        *(retrieves(task) for task in range(RETRIEVE_TASKS)),
        *(counting() for _ in range(COUNT_TASKS)),
        *(consolidating() for _ in range(CONSOLIDATE_TASKS)),
    ]
    assert TASKS == len(work) == 40
    # Interleave the kinds of work so no kind runs all before another starts.
    order = sorted(range(len(work)), key=lambda i: (i * 7) % len(work))
    await asyncio.gather(*(work[i] for i in order))

    # Every read saw only whole, original entries.
    assert RETRIEVE_TASKS * RETRIEVES_PER_TASK == len(retrieved)
    for found in retrieved:
        assert isinstance(found, list)
        for entry in found:
            assert ORIGINALS[entry.id] == entry
    assert COUNT_TASKS * COUNTS_PER_TASK == len(counts)
    assert all(KEEPERS <= c <= len(PRE) + CONCURRENT_WRITES for c in counts)
    # The prunable entries were pruned once in all, whichever consolidate got them.
    assert CONSOLIDATE_TASKS * CONSOLIDATES_PER_TASK == len(pruned)
    assert PRUNABLE == sum(pruned)

    # The final state is the serial run's.
    reference = await _serial_reference()
    assert KEEPERS + CONCURRENT_WRITES == await reference.count()
    assert await reference.count() == await store.count()
    everything = len(ORIGINALS)
    expected = {entry.id: entry for entry in await reference.retrieve("", everything)}
    stored = [entry async for entry in store.iter_entries()]
    assert len(expected) == len(stored)
    assert expected == {entry.id: entry for entry in stored}
    assert {e.id for e in await reference.retrieve("task memory", everything)} == {
        e.id for e in await store.retrieve("task memory", everything)
    }
    for entry_id, entry in ORIGINALS.items():
        assert (entry if entry.relevance >= 0.05 else None) == await store.get(entry_id)
