"""Any str is a query: thousands of distinct words rank as the reference, on every backend.

Agents pass whole prompts and tool outputs as queries. Nothing about a query's
size may reach the database as an expression (SQLite's depth and parameter
limits, PostgreSQL's target lists): the words are counted in memory.
"""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import BACKENDS

SQL_BACKENDS = [backend for backend in BACKENDS if backend != "reference"]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcdefghij") for _ in range(rng.randint(1, 6)))


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            " ".join(_word(rng) for _ in range(rng.randint(0, 12))),
            tags=[_word(rng)] if rng.random() < 0.3 else [],
            relevance=rng.randrange(21) * 0.05,
            id=uuid.UUID(int=number + 1),
        )
        for number in range(count)
    ]


@pytest.mark.parametrize("backend", SQL_BACKENDS)
@pytest.mark.parametrize("words", [1_000, 5_000, 100_000])
async def test_a_query_of_many_words_ranks_as_the_reference(backend, words, store_factory):
    rng = random.Random(words)
    entries = _entries(rng, 120)
    reference = InMemoryStore(entries)
    store = await store_factory()
    await store.store_many(entries[:100])
    for entry in entries[100:]:  # and a tail of single stores
        await store.store(entry)
    # Words that occur, words that do not, repeats (they count twice).
    query = " ".join(_word(rng) for _ in range(words))
    for limit in (5, 120):
        expected = [e.id for e in await reference.retrieve(query, limit)]
        assert expected == [e.id for e in await store.retrieve(query, limit)]


async def test_a_long_query_over_indexed_blocks_and_masks(tmp_path):
    """Many words over several indexed blocks, with common words kept as masks."""
    rng = random.Random(5)
    entries = _entries(rng, 400)
    reference = InMemoryStore(entries)
    async with open_store(
        tmp_path / "memory.db", tuning=Tuning(background_folds=False, tail_limit=50)
    ) as store:
        for start in range(0, 400, 40):
            await store.store_many(entries[start : start + 40])
        query = " ".join(_word(rng) for _ in range(3_000)) + " a b c"
        expected = [e.id for e in await reference.retrieve(query, 10)]
        assert expected == [e.id for e in await store.retrieve(query, 10)]
