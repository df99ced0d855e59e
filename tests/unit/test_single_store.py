"""The single-store fast path in both forms: one hop to aiosqlite's thread, or four calls."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import DuplicateEntryError, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql import repository


class PublicOnly:
    """An aiosqlite connection seen through its public methods only (no ``_execute``)."""

    def __init__(self, driver: Any) -> None:
        self._driver = driver

    async def execute(self, sql: str, parameters: Any = ()) -> Any:
        return await self._driver.execute(sql, parameters)

    async def executemany(self, sql: str, rows: Any) -> Any:
        return await self._driver.executemany(sql, rows)

    @property
    def in_transaction(self) -> bool:
        return bool(self._driver.in_transaction)


@pytest.mark.parametrize("wrap", [lambda driver: driver, PublicOnly], ids=["one-hop", "four-calls"])
async def test_a_single_store_commits_everything_or_nothing(tmp_path: Path, wrap: Any) -> None:
    entry = MemoryEntry(MemoryCategory.FACT, "stored alone", tags=["x", "Y"], relevance=0.25)
    async with open_store(tmp_path / "memory.db") as store:

        async def insert(driver: Any) -> int:
            return await repository.insert_one_sqlite(wrap(driver), entry)

        seq = await store._run_raw("store", insert)  # the path store() takes
        assert seq >= 1
        assert entry == await store.get(entry.id)

        with pytest.raises(DuplicateEntryError):
            await store._run_raw("store", insert)
        assert 1 == await store.count()  # the failed transaction was rolled back
        await store.store(MemoryEntry(MemoryCategory.FACT, "the connection is usable after"))
        assert 2 == await store.count()
