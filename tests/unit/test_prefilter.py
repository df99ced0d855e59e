"""The SQL prefilter reads only the candidates, and never drops one the reference returns."""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.scoring import parse_query
from loopctl_memory.sql import search
from loopctl_memory.sql.tuning import Tuning
from loopctl_memory.sql.vocabulary import Vocabulary

ENTRIES = 100_000
RARE = "zanzibar"


def _entries() -> list[MemoryEntry]:
    rng = random.Random(2026)
    words = ["agent", "tool", "call", "file", "search", "error", "retry", "cache", "glob", "edit"]
    made = []
    for index in range(ENTRIES):
        text = " ".join(rng.choices(words, k=8))
        if index in (17, 50_000, 99_998):
            text += f" {RARE.upper()}-island"
        made.append(
            MemoryEntry(
                MemoryCategory.FACT,
                text,
                relevance=rng.randrange(21) * 0.05,
                id=uuid.UUID(int=index + 1),
            )
        )
    return made


@pytest.mark.slow
async def test_a_selective_query_reads_only_its_candidates(tmp_path):
    data = _entries()
    reference = InMemoryStore(data)
    query = f"{RARE} island"
    async with open_store(tmp_path / "memory.db") as store:
        await store.store_many(data)
        results = await store.retrieve(query, 5)
        read = search.SearchStats()
        async with store.engine.connect() as connection:
            await connection.run_sync(
                lambda sync: search.top_candidates(
                    sync, parse_query(query), 5, Vocabulary(), Tuning(), stats=read
                )
            )

    expected = await reference.retrieve(query, 5)
    assert [e.id for e in expected] == [e.id for e in results]
    # At most the three entries that contain a query word: fewer when the first
    # chunk of the walk scored one, or its floor rules one out by relevance.
    assert 1 <= read.checked <= 3
    assert read.walked <= Tuning().first_chunk, "then one chunk of the relevance index"
