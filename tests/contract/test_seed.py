"""The reference's own tests and doc examples, ported, run against every backend.

Each test keeps the name of the test in loopctl 0.1.0's ``src/memory/builtin.rs``
(``mod tests``); the doc examples are named ``test_doc_*`` after the section
they come from. ``MemoryEntry::new(c, m)`` is ``MemoryEntry(c, m)``,
``store.len()`` is ``await store.count()``, and ``with_entries`` is
``store_many`` (or, for the reference port, its constructor).
"""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store

# --- mod tests ---------------------------------------------------------------


async def test_store_and_retrieve(store):
    await store.store(MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over manual file search"))
    await store.store(
        MemoryEntry(
            MemoryCategory.ERROR_PATTERN, "Edit failures often caused by stale file content"
        )
    )

    results = await store.retrieve("Glob manual file search", 5)

    assert results != []
    assert results[0].category == MemoryCategory.INSIGHT


async def test_retrieve_respects_limit(store):
    for i in range(10):
        await store.store(MemoryEntry(MemoryCategory.FACT, f"Fact number {i} about testing"))

    results = await store.retrieve("testing", 3)

    assert len(results) == 3


async def test_retrieve_empty_store(store):
    assert await store.retrieve("anything", 5) == []


async def test_len_and_is_empty(store):
    assert await store.is_empty()
    assert await store.count() == 0


async def test_consolidate_prunes_low_relevance(store):
    good_entry = MemoryEntry(MemoryCategory.INSIGHT, "useful insight")
    good_entry.relevance = 0.9
    await store.store(good_entry)
    bad_entry = MemoryEntry(MemoryCategory.WORKING, "temporary data")
    bad_entry.relevance = 0.01
    await store.store(bad_entry)
    assert await store.count() == 2

    stats = await store.consolidate()

    assert stats.entries_before == 2
    assert stats.pruned == 1
    assert await store.count() == 1


async def test_with_entries(store):
    entries = [
        MemoryEntry(MemoryCategory.FACT, "fact 1"),
        MemoryEntry(MemoryCategory.FACT, "fact 2"),
    ]

    await store.store_many(entries)

    assert await store.count() == 2


async def test_with_entries_in_the_constructor():
    """The reference port takes its initial entries in the constructor, as ``with_entries``."""
    entries = [
        MemoryEntry(MemoryCategory.FACT, "fact 1"),
        MemoryEntry(MemoryCategory.FACT, "fact 2"),
    ]

    store = InMemoryStore(entries=entries)

    assert await store.count() == 2


async def test_tag_matching_boosts_relevance(store):
    tagged = MemoryEntry(MemoryCategory.STRATEGY, "use iterators for loops").with_tag("rust")
    await store.store(tagged)
    await store.store(MemoryEntry(MemoryCategory.STRATEGY, "use caching for performance"))

    results = await store.retrieve("rust iterators", 2)

    assert results != []
    assert "iterators" in results[0].memory


async def test_default_is_empty(store):
    assert await store.is_empty()


async def test_default_is_empty_for_open_store_without_arguments():
    """``open_store()`` defaults to a private ``:memory:`` database, which starts empty."""
    async with open_store() as store:
        assert await store.is_empty()


async def test_default_is_empty_for_in_memory_store_without_arguments():
    assert await InMemoryStore().is_empty()


async def test_retrieve_does_not_block_writers(store):
    for i in range(200):
        await store.store(MemoryEntry(MemoryCategory.FACT, f"Fact number {i} about concurrency"))

    retrieved, stored = await asyncio.gather(
        store.retrieve("concurrency", 5),
        store.store(MemoryEntry(MemoryCategory.INSIGHT, "writer proceeds concurrently")),
    )

    assert stored is None
    assert len(retrieved) == 5
    assert await store.count() == 201  # 200 originals + 1 concurrent store


async def test_retrieve_ranking_preserved(store):
    high = MemoryEntry(MemoryCategory.INSIGHT, "rust rust rust rust", relevance=0.95)
    mid = MemoryEntry(MemoryCategory.FACT, "rust rust rust", relevance=0.5)
    low = MemoryEntry(MemoryCategory.WORKING, "rust rust", relevance=0.1)
    await store.store(dataclasses.replace(low))
    await store.store(dataclasses.replace(high))
    await store.store(dataclasses.replace(mid))

    results = await store.retrieve("rust", 3)

    assert len(results) == 3
    # Descending score: the highest relevance first, the lowest last.
    assert results[0].relevance == pytest.approx(0.95, abs=1e-6)
    assert results[1].relevance == pytest.approx(0.5, abs=1e-6)
    assert results[2].relevance == pytest.approx(0.1, abs=1e-6)


# --- doc examples ------------------------------------------------------------


async def test_doc_quick_start(store):
    """Module docs, "Quick Start" (also the ``InMemoryStore`` "Example")."""
    await store.store(MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over manual file search"))

    results = await store.retrieve("file search", 5)

    assert len(results) == 1


async def test_doc_construction_empty(store):
    """``InMemoryStore`` docs, "Construction": an empty store."""
    assert await store.count() == 0


async def test_doc_construction_pre_populated(store):
    """``InMemoryStore`` docs, "Construction": a pre-populated store."""
    await store.store_many([MemoryEntry(MemoryCategory.FACT, "The project uses Rust 1.95")])

    assert await store.count() == 1
    [entry] = await store.retrieve("", 5)
    assert entry.memory == "The project uses Rust 1.95"


async def test_doc_new(store):
    """``InMemoryStore::new`` docs: a fresh store is empty."""
    assert await store.is_empty()


async def test_doc_with_entries(store):
    """``InMemoryStore::with_entries`` docs: two entries given, two stored."""
    await store.store_many(
        [
            MemoryEntry(MemoryCategory.FACT, "Rust 1.75 stabilised async fn in trait"),
            MemoryEntry(MemoryCategory.STRATEGY, "Start refactors with tests"),
        ]
    )

    assert await store.count() == 2


async def test_doc_retrieve_example(store):
    """``retrieve`` docs, "Example": the stored fact comes back with its category."""
    await store.store(MemoryEntry(MemoryCategory.FACT, "file search uses Glob"))

    results = await store.retrieve("file search", 5)

    assert [MemoryCategory.FACT] == [entry.category for entry in results]


async def test_doc_consolidate_example(store):
    """``consolidate`` docs, "Example": consolidating an empty store prunes nothing."""
    stats = await store.consolidate()

    assert stats.pruned == 0
