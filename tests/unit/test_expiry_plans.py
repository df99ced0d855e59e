"""What expiry asks of SQLite on every operation is an index step, never a scan.

Every statement a store runs that names ``expires_at_us`` is traced, then planned
with ``EXPLAIN QUERY PLAN``: each step on the entries table must search it
through an index. (A ``min()`` of the column without ``WHERE expires_at_us IS
NOT NULL`` cannot use the partial index: SQLite plans it as ``SEARCH entries``
without an index, and read every row on every retrieve.)
"""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from sqlalchemy import event
from sqlalchemy.pool import Pool

from loopctl_memory import MemoryCategory, MemoryEntry, MemoryFilter, open_store


@pytest.mark.parametrize("expiring", [False, True], ids=["no-expiry", "some-expired"])
async def test_no_operation_scans_the_entries_for_their_expiry(tmp_path, expiring):
    path = tmp_path / "memory.db"
    traced: list[str] = []

    def on_connect(dbapi_connection: Any, _record: object) -> None:
        raw: sqlite3.Connection = dbapi_connection.driver_connection._conn
        raw.set_trace_callback(traced.append)

    entries = [
        MemoryEntry(MemoryCategory.FACT, f"deploy note {n}", metadata={"n": n}, key=f"k{n}")
        for n in range(200)
    ]
    if expiring:
        entries[3].expires_at = datetime(2020, 1, 1, tzinfo=UTC)
        entries[4].expires_at = datetime.now(UTC) + timedelta(days=1)
    event.listen(Pool, "connect", on_connect)
    try:
        async with open_store(path) as store:
            await store.store_many(entries)
            await store.store(MemoryEntry(MemoryCategory.FACT, "one more"))
            for ranking in ("reference", "bm25"):
                await store.retrieve("deploy", 5, ranking=ranking)
            await store.count()
            await store.count(filter=MemoryFilter(metadata={"n": {"$gt": 100}}))
            await store.get(entries[0].id)
            await store.get_by_key("k5")
            await store.sweep_expired()
            _ = [entry async for entry in store.iter_entries()]
    finally:
        event.remove(Pool, "connect", on_connect)
    named = [sql for sql in traced if "expires_at_us" in sql and sql.lstrip().startswith("SELECT")]
    assert named, "the operations read the expiry"
    raw = sqlite3.connect(path)
    try:
        for sql in named:
            steps = [row[3] for row in raw.execute(f"EXPLAIN QUERY PLAN {sql}")]
            on_entries = [step for step in steps if step.split()[1:2] == ["entries"]]
            # A SCAN reads every row (or index entry); a SEARCH without USING, too.
            assert all(step.startswith("SEARCH entries USING") for step in on_entries), (sql, steps)
    finally:
        raw.close()
