"""A cancelled operation leaves no partial effect, and the store stays usable."""

from __future__ import annotations

import asyncio

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, open_store

BATCH = 2_000


def _batch(label: str) -> list[MemoryEntry]:
    return [
        MemoryEntry(MemoryCategory.FACT, f"{label} {i}", tags=["a", "b"], relevance=0.01)
        for i in range(BATCH)
    ]


@pytest.fixture(params=[":memory:", "file"])
async def sql_store(request, tmp_path):
    target = ":memory:" if request.param == ":memory:" else tmp_path / "memory.db"
    async with open_store(target) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "kept", relevance=0.9))
        yield store


async def _cancel_after(operation, yields: int):
    """Start ``operation``, let the loop run ``yields`` times, cancel it; report how it ended."""
    task = asyncio.ensure_future(operation)
    for _ in range(yields):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "completed"


@pytest.mark.parametrize("yields", [0, 1, 2, 5, 20, 100])
async def test_a_cancelled_store_many_stores_all_or_nothing(sql_store, yields):
    await _cancel_after(sql_store.store_many(_batch("cancelled")), yields)
    assert await sql_store.count() in (1, 1 + BATCH)
    await sql_store.store(MemoryEntry(MemoryCategory.FACT, "after the cancellation"))
    assert [] != await sql_store.retrieve("after the cancellation", 1)


@pytest.mark.parametrize("yields", [0, 1, 2, 5, 20, 100])
async def test_a_cancelled_consolidate_prunes_all_or_nothing(sql_store, yields):
    await sql_store.store_many(_batch("prunable"))
    await _cancel_after(sql_store.consolidate(), yields)
    assert await sql_store.count() in (1, 1 + BATCH)
    assert 1 == (await sql_store.consolidate()).entries_after


@pytest.mark.parametrize("yields", [0, 1, 2, 5, 20])
async def test_a_cancelled_retrieve_leaves_the_store_usable(sql_store, yields):
    await sql_store.store_many(_batch("readable"))
    await _cancel_after(sql_store.retrieve("readable 1", 50), yields)
    assert 1 + BATCH == await sql_store.count()
    assert "kept" == (await sql_store.retrieve("kept", 1))[0].memory
