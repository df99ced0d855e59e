"""A read of the ranking state that fails leaves nothing half-read behind it.

A process's copy of the ranking state loads each ranking's part on first use,
at a retrieval's start. When that read fails (the database errs midway), the
retrieval fails, and the next one must rank from a whole copy: the same
answers as InMemoryStore's.
"""

from __future__ import annotations

import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, StorageError
from loopctl_memory.sql.ranking.state import RankingState

RELEVANCE = [0.1, 0.9, 0.5, 0.7, 0.3, 0.8]


async def test_a_failed_relevance_read_is_read_again(store, backend, monkeypatch):
    if backend == "reference":
        pytest.skip("the reference port keeps no ranking state")
    reference = InMemoryStore()
    entries = [
        MemoryEntry(
            MemoryCategory.FACT, f"alpha note {n}", relevance=value, id=uuid.UUID(int=n + 1)
        )
        for n, value in enumerate(RELEVANCE)
    ]
    await store.store_many(entries)
    await reference.store_many(entries)
    await store.retrieve("alpha", 3, ranking="bm25")  # the copy read, without the relevance
    unpatched = RankingState._read_columns
    failed: list[int] = []

    def failing(state: RankingState, connection: object, top: int) -> None:
        failed.append(top)
        raise StorageError("injected: the database failed midway through the read")

    monkeypatch.setattr(RankingState, "_read_columns", failing)
    with pytest.raises(StorageError, match="injected"):
        await store.retrieve("alpha", 3, ranking="reference")
    assert failed
    monkeypatch.setattr(RankingState, "_read_columns", unpatched)
    expected = await reference.retrieve_scored("alpha", 4)
    found = await store.retrieve_scored("alpha", 4, ranking="reference")
    assert [(entry.id, score) for entry, score in found] == [
        (entry.id, score) for entry, score in expected
    ]
