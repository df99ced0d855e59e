from loopctl_memory import MemoryCategory, MemoryEntry


async def test_store_then_count(store):
    await store.store(MemoryEntry(MemoryCategory.FACT, "x"))
    assert await store.count() == 1
