"""The SQL prefilter reads only the candidates, and never drops one the reference returns."""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql import repository

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
async def test_a_selective_query_reads_only_its_candidates(tmp_path, monkeypatch):
    data = _entries()
    reference = InMemoryStore(data)
    read: dict[str, int] = {"matched": 0, "baseline": 0}
    matching, best_baselines = repository._matching, repository._best_baselines

    async def count_matching(connection, query):
        found = await matching(connection, query)
        read["matched"] += len(found)
        return found

    async def count_baselines(connection, rows):
        found = await best_baselines(connection, rows)
        read["baseline"] += len(found)
        return found

    monkeypatch.setattr(repository, "_matching", count_matching)
    monkeypatch.setattr(repository, "_best_baselines", count_baselines)
    async with open_store(tmp_path / "memory.db") as store:
        await store.store_many(data)
        results = await store.retrieve(f"{RARE} island", 5)

    expected = await reference.retrieve(f"{RARE} island", 5)
    assert [e.id for e in expected] == [e.id for e in results]
    assert 3 == read["matched"], "only the three entries that contain a query word"
    assert read["baseline"] <= 5 + 3, "no more of the relevance index than limit + matched"
