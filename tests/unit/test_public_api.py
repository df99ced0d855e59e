"""The public API: one curated namespace, typed, used as a user would."""

from __future__ import annotations

import asyncio
import gc
import warnings

import loopctl_memory
from loopctl_memory import (
    ConsolidationStats,
    InMemoryStore,
    LoopMemory,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
)


def test_all_is_sorted_and_every_name_exists():
    assert sorted(loopctl_memory.__all__) == loopctl_memory.__all__
    for name in loopctl_memory.__all__:
        assert hasattr(loopctl_memory, name)


def test_the_version_comes_from_the_installed_metadata():
    assert "0.0.0" != loopctl_memory.__version__


async def _agent_turn(memory: LoopMemory) -> list[str]:
    """What an agent loop does, typed against the protocol only."""
    await memory.store(MemoryEntry(MemoryCategory.ERROR_PATTERN, "Edit fails on stale content"))
    found = await memory.retrieve("stale edit", 3)
    stats: ConsolidationStats = await memory.consolidate()
    assert 0 == stats.pruned
    return [entry.memory for entry in found]


async def test_both_stores_serve_an_agent_typed_against_the_protocol():
    reference = InMemoryStore()
    async with open_store(":memory:") as durable:
        assert isinstance(durable, SqlMemoryStore)
        assert await _agent_turn(reference) == await _agent_turn(durable)


async def test_open_store_can_be_awaited_then_closed():
    store = await open_store()
    try:
        assert await store.is_empty()
    finally:
        await store.close()
    await store.close()  # idempotent


def test_a_store_that_is_never_closed_warns():
    store = asyncio.run(_open_unclosed())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        del store
        gc.collect()
    assert any(issubclass(w.category, ResourceWarning) for w in caught)


async def _open_unclosed() -> SqlMemoryStore:
    store = await open_store()
    await store.engine.dispose()  # release the connection, but never call close()
    return store
