"""A child process for the kill tests: consolidate or migrate, and stop at a chosen point.

Usage: python kill_worker.py MODE DB_PATH PAUSE_AT CACHE_PAGES

MODE "consolidate": create DB_PATH, store ``expected_entries()`` in one batch,
then consolidate. MODE "migrate": open DB_PATH, a database at revision 0001,
with ``open_store``, which upgrades it to head.

SQLite calls a progress handler every ``PROGRESS_OPS`` virtual-machine
instructions. While the operation runs, the handler counts its calls; at call
number PAUSE_AT (0: never) it prints ``paused <call> intx=<0|1>`` (whether the
connection is inside a transaction at that instruction) and blocks inside
SQLite, so the parent kills the process at exactly that point of the work.
CACHE_PAGES > 0 sets that small a page cache on every connection, so SQLite
spills uncommitted pages into the WAL (or the database file, with a rollback
journal) in the middle of the transaction.

Prints ``armed`` just before the operation starts and ``done <calls> <result>``
when it has returned; then it waits, with the store still open, to be killed.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import event
from sqlalchemy.pool import Pool

from loopctl_memory import MemoryCategory, MemoryEntry, open_store

ENTRIES = 3_000
PROGRESS_OPS = 100
PRUNABLE_RELEVANCES = (0.0, 0.01, 0.0499, 5e-324)

_NAMESPACE = uuid.UUID("5d7c2a94-8b1e-4f63-a0d2-6e9b3c1f7a45")
_CATEGORIES = list(MemoryCategory)


def is_prunable(index: int) -> bool:
    """Whether entry ``index`` has a relevance that consolidate removes (one in seven)."""
    return index % 7 == 3


def expected_entry(index: int) -> MemoryEntry:
    """Entry ``index``: the same in the child and in the test."""
    if is_prunable(index):
        relevance = PRUNABLE_RELEVANCES[index % len(PRUNABLE_RELEVANCES)]
    else:
        relevance = (index % 20 + 1) * 0.05  # 0.05 .. 1.0: kept
    return MemoryEntry(
        _CATEGORIES[index % len(_CATEGORIES)],
        f"kill test memory {index}: ünïcødé ✓ \x00 " + "w" * (index % 83),
        tags=[f"t{index % 5}", "Shared", f"n{index}"][: index % 4],
        relevance=min(relevance, 1.0),
        id=uuid.uuid5(_NAMESPACE, str(index)),
        created_at=datetime(2026, 3, 1, tzinfo=UTC) + timedelta(microseconds=index * 1_003),
        access_count=index % 9,
        validated=index % 3 == 0,
    )


def expected_entries() -> list[MemoryEntry]:
    """Every entry the consolidate child stores, in order."""
    return [expected_entry(index) for index in range(ENTRIES)]


@dataclass
class _Probe:
    armed: bool = False
    calls: int = 0
    pause_at: int = 0
    cache_pages: int = 0


_probe = _Probe()


def _handler(connection: sqlite3.Connection) -> Callable[[], int]:
    def progress() -> int:
        if _probe.armed:
            _probe.calls += 1
            if _probe.calls == _probe.pause_at:
                _say(f"paused {_probe.calls} intx={int(connection.in_transaction)}")
                threading.Event().wait()  # inside SQLite, until the parent kills us
        return 0  # never interrupt the statement

    return progress


def _raw(dbapi_connection: Any) -> sqlite3.Connection:
    raw: sqlite3.Connection = dbapi_connection.driver_connection._conn
    return raw


def _on_connect(dbapi_connection: Any, _record: object) -> None:
    raw = _raw(dbapi_connection)
    raw.set_progress_handler(_handler(raw), PROGRESS_OPS)


def _on_checkout(dbapi_connection: Any, _record: object, _proxy: object) -> None:
    # After the store's own connect listener, which sets a large cache.
    if _probe.cache_pages:
        _raw(dbapi_connection).execute(f"PRAGMA cache_size={_probe.cache_pages}")


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


async def _consolidate(path: str) -> None:
    async with open_store(path) as store:
        await store.store_many(expected_entries())
        _probe.armed = True
        _say("armed")
        stats = await store.consolidate()
        _probe.armed = False
        _say(f"done {_probe.calls} {stats.pruned}")
        await asyncio.Event().wait()  # killed here, before close() checkpoints


async def _migrate(path: str) -> None:
    _probe.armed = True
    _say("armed")
    async with open_store(path) as store:
        _probe.armed = False
        _say(f"done {_probe.calls} {await store.schema_revision()}")
        await asyncio.Event().wait()


if __name__ == "__main__":
    # Only in the child: every pool of the process gets the handler (the test imports this module).
    event.listen(Pool, "connect", _on_connect)
    event.listen(Pool, "checkout", _on_checkout)
    mode, database, pause_at, cache_pages = sys.argv[1:5]
    _probe.pause_at, _probe.cache_pages = int(pause_at), int(cache_pages)
    asyncio.run(_consolidate(database) if mode == "consolidate" else _migrate(database))
