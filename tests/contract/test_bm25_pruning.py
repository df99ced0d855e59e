"""BM25 skips the terms that cannot change its best k (MaxScore) and answers exactly as without.

Queries mix a rare word with common ones, so that the common words' postings
are only looked up for a few entries; the answers (entries, scores to the bit,
order, ties in insertion order) must be InMemoryStore's plain BM25, through
updates, removals and filters, on every backend, view and the sync store. The
test also checks that the pruned path ran, so that it cannot pass vacuously.
"""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, MemoryFilter
from loopctl_memory.sql.ranking import maxscore

COMMON = ["deploy", "cache", "agent", "build", "test"]
RARE = [f"rare{number}" for number in range(12)]
QUERIES = [
    "rare0 deploy cache",
    "rare1 rare2 agent build test",
    "deploy deploy rare3 cache",
    "rare4 deploy cache agent build test",
    "rare5 rare6 rare7",
    "deploy cache",
    "rare8 ghost deploy",
    "test rare9 rare10 rare11 agent",
]
LIMITS = (1, 2, 3, 7, 40)


def _entry(rng: random.Random, number: int) -> MemoryEntry:
    words = rng.choices(COMMON, k=rng.randint(1, 8))
    if rng.random() < 0.15:
        words.append(rng.choice(RARE))
    if rng.random() < 0.2:  # the same document again: ties, kept in insertion order
        words = ["deploy", "cache", "rare0"]
    return MemoryEntry(
        MemoryCategory.FACT,
        " ".join(words),
        tags=rng.sample(["db", "ci"], rng.randint(0, 1)),
        relevance=rng.choice([0.25, 0.5, 1.0]),
        id=uuid.UUID(int=number + 1),
    )


@pytest.fixture
def pruned_answers(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many answers the pruned path gave (it gives None when it cannot prune)."""
    given: list[int] = []
    unspied = maxscore.pruned_best

    def spied(*arguments: object) -> list[tuple[int, float]] | None:
        found = unspied(*arguments)  # type: ignore[arg-type]
        if found is not None:
            given.append(len(found))
        return found

    monkeypatch.setattr(maxscore, "pruned_best", spied)
    return given


async def _same(store, reference: InMemoryStore, chosen: MemoryFilter | None) -> None:
    for query in QUERIES:
        for limit in LIMITS:
            expected = await reference.retrieve_scored(query, limit, ranking="bm25", filter=chosen)
            found = await store.retrieve_scored(query, limit, ranking="bm25", filter=chosen)
            assert [(e.id, score) for e, score in expected] == [
                (e.id, score) for e, score in found
            ], (query, limit, chosen)


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_pruned_answers_are_the_full_sums(store, backend, pruned_answers, seed):
    rng = random.Random(seed)
    reference = InMemoryStore()
    entries = [_entry(rng, number) for number in range(400)]
    for start in range(0, len(entries), 100):
        await store.store_many(entries[start : start + 100])
        await reference.store_many(entries[start : start + 100])
    await _same(store, reference, None)
    for entry in rng.sample(entries, 40):
        memory = " ".join(rng.choices(COMMON + RARE, k=4))
        assert await reference.update(entry.id, memory=memory) == await store.update(
            entry.id, memory=memory
        )
    for entry in rng.sample(entries, 40):
        assert await reference.delete(entry.id) == await store.delete(entry.id)
    await _same(store, reference, None)
    await _same(store, reference, MemoryFilter(tags_any=["db"]))
    if backend != "reference":  # InMemoryStore sums every term: nothing to prune
        assert len(pruned_answers) > len(QUERIES)
