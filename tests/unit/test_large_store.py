"""A store of 100,000 entries ranks as the reference: rare words, common words, ties, tags."""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store

ENTRIES = 100_000
RARE = "zanzibar"
WORDS = ["agent", "tool", "call", "file", "search", "error", "retry", "cache", "glob", "edit"]


def _entries() -> list[MemoryEntry]:
    rng = random.Random(2026)
    made = []
    for index in range(ENTRIES):
        text = " ".join(rng.choices(WORDS, k=8))
        if index in (17, 50_000, 99_998):
            text += f" {RARE.upper()}-island"
        made.append(
            MemoryEntry(
                MemoryCategory.FACT,
                text,
                tags=[rng.choice(WORDS)] if index % 10 == 0 else [],
                relevance=rng.randrange(21) * 0.05,
                id=uuid.UUID(int=index + 1),
            )
        )
    return made


@pytest.mark.slow
async def test_a_large_store_ranks_as_the_reference(tmp_path):
    data = _entries()
    reference = InMemoryStore(data)
    queries = [f"{RARE} island", "agent", "a", "retry cache glob zanzibar", "", "tool tool edit"]
    async with open_store(tmp_path / "memory.db") as store:
        await store.store_many(data[:90_000])
        for entry in data[90_000:90_500]:  # a tail of single stores
            await store.store(entry)
        await store.store_many(data[90_500:])
        for query in queries:
            for limit in (1, 5, 50):
                expected = [e.id for e in await reference.retrieve(query, limit)]
                got = [e.id for e in await store.retrieve(query, limit)]
                assert expected == got, (query, limit)
