"""A child process for the cross-process concurrency test.

Usage: python concurrent_worker.py DB_PATH WORKER GO_FILE [scoped]

Opens the store, prints "ready", waits until GO_FILE exists (the start
barrier), then writes its entries: in each of ``BLOCKS`` blocks, ``SINGLES``
one-by-one ``store`` calls (a ``retrieve`` after every ``RETRIEVE_EVERY`` of
them) followed by one ``store_many`` of ``BATCH`` entries. Every retrieved
entry must equal the expected entry with its id, or the worker fails. Prints
"done <entries written>" and exits 0 when everything succeeded. With
``scoped``, the worker writes into its own scope (:func:`scope_of`), created by
its first write while the others create theirs, and every retrieved entry must
be one of its own.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore, open_store

WORKERS = 4
BLOCKS = 3
SINGLES = 50  # per block: BLOCKS * SINGLES = 150 single stores per worker
BATCH = 50  # per block: BLOCKS batches of 50 per worker
PER_WORKER = BLOCKS * (SINGLES + BATCH)
RETRIEVE_EVERY = 5
BUSY_TIMEOUT = 30.0

_NAMESPACE = uuid.UUID("0b7e3c52-41a2-4f4e-9d0c-3c5f6a1e8d21")
_CATEGORIES = list(MemoryCategory)


def expected_entry(worker: int, index: int) -> MemoryEntry:
    """Entry ``index`` of ``worker``: the same in the child and in the test."""
    number = worker * 10_000 + index
    return MemoryEntry(
        _CATEGORIES[number % len(_CATEGORIES)],
        f"worker {worker} memory {index}: ünïcødé ✓ " + "y" * (number % 61),
        tags=[f"w{worker}", f"tag{index % 7}", "shared"][: number % 4],
        relevance=(number % 19 + 1) * 0.05,
        id=uuid.uuid5(_NAMESPACE, f"{worker}/{index}"),
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=number * 997),
        access_count=number % 5,
        validated=number % 2 == 0,
    )


def scope_of(worker: int) -> str:
    """The scope a scoped worker writes into."""
    return f"tenants/t{worker}"


def all_expected() -> dict[uuid.UUID, MemoryEntry]:
    """Every entry any worker writes, by id."""
    return {
        entry.id: entry
        for entry in (
            expected_entry(worker, index)
            for worker in range(WORKERS)
            for index in range(PER_WORKER)
        )
    }


async def _check_retrieve(
    store: SqlMemoryStore, worker: int, known: dict[uuid.UUID, MemoryEntry], *, scoped: bool
) -> None:
    found = await store.retrieve(f"worker {worker} memory shared", 10)
    if not isinstance(found, list):
        raise TypeError(f"retrieve returned {type(found).__name__}, not a list")
    for entry in found:
        if known.get(entry.id) != entry:
            raise AssertionError(f"retrieve returned a damaged or unknown entry: {entry!r}")
        if scoped and not entry.memory.startswith(f"worker {worker} "):
            raise AssertionError(f"another scope's entry crossed over: {entry!r}")


def _wait_for(go_file: Path) -> None:
    """The start barrier: return once the parent has created ``go_file``."""
    while not go_file.exists():
        time.sleep(0.001)


async def _run(path: str, worker: int, go_file: Path, *, scoped: bool) -> None:
    known = all_expected()
    async with open_store(path, busy_timeout=BUSY_TIMEOUT) as opened:
        store = opened.scope(scope_of(worker)) if scoped else opened
        sys.stdout.write("ready\n")
        sys.stdout.flush()
        await asyncio.to_thread(_wait_for, go_file)
        index = 0
        for _ in range(BLOCKS):
            for single in range(1, SINGLES + 1):
                await store.store(expected_entry(worker, index))
                index += 1
                if single % RETRIEVE_EVERY == 0:
                    await _check_retrieve(store, worker, known, scoped=scoped)
            await store.store_many(expected_entry(worker, i) for i in range(index, index + BATCH))
            index += BATCH
            await _check_retrieve(store, worker, known, scoped=scoped)
    sys.stdout.write(f"done {index}\n")
    sys.stdout.flush()


if __name__ == "__main__":
    scoped = sys.argv[4:] == ["scoped"]
    asyncio.run(_run(sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), scoped=scoped))
