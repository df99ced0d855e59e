"""The lifecycle on every backend: access stamps, configured consolidation, update, forget.

loopctl's later ``retrieve`` tests (``memory/builtin.rs``) and the store-level
lifecycle tests, asserted identically on ``InMemoryStore`` and on the SQL store
(SQLite ``:memory:``, a file, PostgreSQL), each store given a fixed clock.
"""

from __future__ import annotations

import dataclasses
import math
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    InMemoryStore,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    open_store,
)
from loopctl_memory import lifecycle as lc
from loopctl_memory.entry import ConsolidationStats
from loopctl_memory.lifecycle import UNSET, apply_update, consolidate_entries, forget_rule
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
INT64_MAX = 2**63 - 1
Make = Callable[..., Awaitable[Any]]


def entry(category: MemoryCategory, text: str, **fields: Any) -> MemoryEntry:
    fields.setdefault("created_at", NOW)
    return MemoryEntry(category, text, **fields)


@pytest.fixture(
    params=[
        "reference",
        "sqlite-memory",
        "sqlite-file",
        pytest.param("postgresql", marks=NEEDS_POSTGRES),
    ]
)
async def make(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Make]:
    """make(entries=(), **options): a new store of the backend holding ``entries``."""
    opened: list[Any] = []

    async def new(entries: list[MemoryEntry] | tuple[()] = (), **options: Any) -> Any:
        if request.param == "reference":
            return InMemoryStore(entries, **options)
        if request.param == "sqlite-memory":
            target: Any = ":memory:"
        elif request.param == "sqlite-file":
            target = tmp_path / f"memory-{len(opened)}.db"
        else:
            if opened:  # one database: a test's stores on PostgreSQL take turns
                await opened.pop().close()
            target = os.environ[POSTGRES_URL_VARIABLE]
            await reset_postgres(target)
        store = await open_store(target, **options)
        opened.append(store)
        if entries:
            await store.store_many(entries)
        return store

    yield new
    for store in opened:
        await store.close()


async def test_baseline_only_retrievals_are_never_stamped(make):
    store = await make(track_access=True, clock=lambda: NOW)
    await store.store(entry(MemoryCategory.INSIGHT, "deploy checklist nightly", relevance=0.4))
    for index in range(4):
        await store.store(
            entry(MemoryCategory.FACT, f"unrelated fact number {index} about rust compilers")
        )
    hits = await store.retrieve("deploy checklist", 3)
    assert 3 == len(hits)
    assert any("deploy" in hit.memory for hit in hits)
    for hit in hits:
        stamped = "deploy" in hit.memory
        assert (hit.access_count, hit.last_accessed) == ((1, NOW) if stamped else (0, None))
    stored = await store.get(next(hit.id for hit in hits if "deploy" in hit.memory))
    assert stored is not None
    assert (1, NOW) == (stored.access_count, stored.last_accessed)


async def test_an_empty_query_returns_the_baseline_without_stamping_tagged_entries(make):
    store = await make(track_access=True, clock=lambda: NOW)
    for tag in ["rust", "release", "docs"]:
        await store.store(entry(MemoryCategory.FACT, f"note about {tag}", tags=[tag]))
    assert 2 == len(await store.retrieve("", 2))
    assert 2 == len(await store.retrieve("   ", 2))
    for stored in await store.retrieve("nothing matches this", 3):
        assert (0, None) == (stored.access_count, stored.last_accessed)


async def test_a_padded_query_keeps_the_tag_match(make):
    store = await make(track_access=True, clock=lambda: NOW)
    await store.store(entry(MemoryCategory.FACT, "note about releases", tags=["Rust"]))
    hits = await store.retrieve(" rust ", 3)
    assert [(1, NOW)] == [(hit.access_count, hit.last_accessed) for hit in hits]


async def test_access_never_rewinds_a_fresher_last_accessed_and_saturates(make):
    later = NOW + timedelta(hours=24)
    store = await make(track_access=True, clock=lambda: NOW)
    await store.store(
        entry(MemoryCategory.FACT, "seeded", last_accessed=later, access_count=INT64_MAX)
    )
    hits = await store.retrieve("seeded", 3)
    assert [(INT64_MAX, later)] == [(hit.access_count, hit.last_accessed) for hit in hits]


async def test_access_is_counted_per_retrieval_and_only_when_tracked(make):
    now = [NOW]
    counted = []
    for options in ({"track_access": True, "clock": lambda: now[0]}, {}):
        store = await make(**options)  # one after the other: PostgreSQL's stores take turns
        await store.store(entry(MemoryCategory.FACT, "rust notes", id=uuid.UUID(int=1)))
        await store.retrieve("rust", 1)
        now[0] = NOW + HOUR
        await store.retrieve("rust", 1)
        found = await store.get(uuid.UUID(int=1))
        counted.append((found.access_count, found.last_accessed))
    assert [(2, NOW + HOUR), (0, None)] == counted


async def test_store_consolidation_uses_its_config_or_the_one_given(make):
    text = "run cargo check after multi-file edits"
    entries = [
        entry(MemoryCategory.STRATEGY, text, relevance=0.6, created_at=NOW - timedelta(days=1)),
        entry(MemoryCategory.FACT, "low", relevance=0.01),
        entry(MemoryCategory.STRATEGY, text, relevance=0.6),
    ]
    reference = await make(entries, clock=lambda: NOW)
    assert ConsolidationStats(3, 2, 1) == await reference.consolidate()
    assert [entries[0], entries[2]] == await reference.retrieve("", 5)

    full = await make(entries, consolidation=ConsolidationConfig.full(), clock=lambda: NOW)
    expected = consolidate_entries(entries, ConsolidationConfig.full(), NOW)
    assert expected.stats == await full.consolidate()
    assert 1 == await full.count()
    assert expected.entries == await full.retrieve("", 5)

    given = await make(entries, clock=lambda: NOW)
    assert expected.stats == await given.consolidate(ConsolidationConfig.full())
    assert ConsolidationStats(1, 1, 0) == await given.consolidate()
    with pytest.raises(InvalidEntryError):
        await given.consolidate("full")
    with pytest.raises(InvalidEntryError):
        await make(consolidation="full")
    with pytest.raises(InvalidEntryError):
        await make(track_access=1)
    naive = await make(clock=lambda: NOW.replace(tzinfo=None))
    with pytest.raises(InvalidEntryError):
        await naive.consolidate(ConsolidationConfig.full())
    if not isinstance(naive, InMemoryStore):  # a SQL store's history reads the clock
        with pytest.raises(InvalidEntryError):
            await naive.store_many(entries)
        assert 0 == await naive.count()


async def test_update_replaces_the_given_fields_in_place(make):
    first = entry(
        MemoryCategory.FACT,
        "old text",
        tags=["a"],
        relevance=0.5,
        access_count=4,
        last_accessed=NOW,
        last_decayed=NOW,
    )
    second = entry(MemoryCategory.FACT, "second")
    store = await make([first, second])
    updated = await store.update(first.id, memory="new text", category="insight", relevance=1)
    assert (
        dataclasses.replace(
            first, memory="new text", category=MemoryCategory.INSIGHT, relevance=1.0
        )
        == updated
    )
    assert isinstance(updated.relevance, float)
    assert [updated, second] == await store.retrieve("", 5)  # same place
    assert updated == await store.update(first.id)  # nothing given, nothing changed
    again = await store.update(first.id, tags=["b", "c"], validated=True)
    assert (["b", "c"], True) == (again.tags, again.validated)
    assert None is await store.update(uuid.UUID(int=99), memory="x")
    assert UNSET is lc.UNSET
    assert "UNSET" == repr(UNSET)


async def test_update_rejects_invalid_values_and_changes_nothing(make):
    stored = entry(MemoryCategory.FACT, "text", tags=["a"], relevance=0.5)
    store = await make([stored])
    for bad in (
        {"memory": 3},
        {"memory": "\ud800"},
        {"category": "nonsense"},
        {"tags": ("a",)},
        {"tags": ["a", 1]},
        {"relevance": 1.5},
        {"relevance": math.nan},
        {"relevance": True},
        {"validated": 1},
    ):
        with pytest.raises(InvalidEntryError):
            await store.update(stored.id, **bad)
        with pytest.raises(InvalidEntryError):
            await store.update(uuid.UUID(int=99), **bad)  # for an unknown id too
    with pytest.raises(InvalidEntryError):
        await store.update(str(stored.id), memory="x")
    assert [stored] == await store.retrieve("", 5)
    kept = apply_update(stored, relevance=0.25)
    assert (kept.id, kept.created_at, 0.5) == (stored.id, stored.created_at, stored.relevance)


async def test_forget_deletes_what_meets_every_condition(make):
    entries = [
        entry(MemoryCategory.FACT, "old fact", relevance=0.2, created_at=NOW - timedelta(days=40)),
        entry(MemoryCategory.FACT, "new fact", relevance=0.2, created_at=NOW),
        entry(MemoryCategory.WORKING, "old work", relevance=0.9, created_at=NOW - timedelta(40)),
        entry(MemoryCategory.WORKING, "new work", relevance=0.1, created_at=NOW - HOUR),
    ]
    store = await make(entries, clock=lambda: NOW)
    assert 0 == await store.forget(older_than=timedelta(days=30), below=0.1)
    assert 1 == await store.forget(older_than=timedelta(days=30), category="fact")
    assert 1 == await store.forget(category=MemoryCategory.WORKING, below=0.5)
    assert [entries[2], entries[1]] == await store.retrieve("", 5)
    assert 0 == await store.forget(older_than=timedelta.max)  # nothing is that old
    assert 1 == await store.forget(older_than=NOW - timedelta(days=1), everything=True)
    eastern = timezone(timedelta(hours=5))
    assert 0 == await store.forget(older_than=NOW.astimezone(eastern))  # not before NOW itself
    assert 1 == await store.forget(older_than=NOW.astimezone(eastern) + timedelta(seconds=1))
    await store.store_many(entries)
    assert 4 == await store.forget(everything=True)
    assert await store.is_empty()


async def test_forget_validates_its_arguments(make):
    store = await make([entry(MemoryCategory.FACT, "kept")], clock=lambda: NOW)
    for bad in (
        {},
        {"everything": False},
        {"everything": 1},
        {"older_than": timedelta(seconds=-1)},
        {"older_than": NOW.replace(tzinfo=None)},
        {"older_than": 30},
        {"older_than": "30d"},
        {"category": "nonsense"},
        {"category": 3},
        {"below": math.nan},
        {"below": math.inf},
        {"below": "0.5"},
        {"below": True},
        {"below": 0.5, "everything": "yes"},
    ):
        with pytest.raises(InvalidEntryError):
            await store.forget(**bad)
    assert 1 == await store.count()
    rule = forget_rule(None, None, 0.5, False, NOW)
    assert (None, None, 0.5, False) == (
        rule.created_before,
        rule.category,
        rule.below,
        rule.is_everything,
    )
    assert forget_rule(None, None, None, True, NOW).is_everything
    with pytest.raises(InvalidEntryError):
        forget_rule(None, None, None, True, NOW.replace(tzinfo=None))
