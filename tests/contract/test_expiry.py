"""Expiry on every backend: an expired memory is invisible to every read at once.

The store's clock is a variable of the test, so nothing sleeps.
"""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    InMemoryStore,
    InvalidArgumentError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    SqlMemoryStore,
)
from loopctl_memory.jsonl import export_jsonl, import_jsonl
from tests.embedders import WordsEmbedder

START = datetime(2026, 6, 1, tzinfo=UTC)
RANKINGS = ["reference", "bm25", "vector", "hybrid"]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


def _entry(text: str, expires_in: timedelta | None = None, **fields: object) -> MemoryEntry:
    expires_at = None if expires_in is None else START + expires_in
    return MemoryEntry(MemoryCategory.FACT, text, expires_at=expires_at, **fields)  # type: ignore[arg-type]


async def _texts(store) -> list[str]:
    return [entry.memory async for entry in store.iter_entries()]


async def test_an_expired_memory_is_invisible_to_every_read(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock, embedder=WordsEmbedder(dims=16))
    soon = _entry("deploy token rotates soon", timedelta(hours=1), key="token")
    later = _entry("deploy token kept longer", timedelta(days=1))
    never = _entry("deploy notes never expire")
    await store.store_many([soon, later, never])
    assert 3 == await store.count()
    clock.now = START + timedelta(hours=1)  # at expires_at itself: expired
    assert 2 == await store.count()
    assert ["deploy token kept longer", "deploy notes never expire"] == await _texts(store)
    assert await store.get(soon.id) is None
    assert await store.get_by_key("token") is None
    assert later == await store.get(later.id)
    for ranking in RANKINGS:
        found = await store.retrieve("deploy token", 5, ranking=ranking)
        assert soon.id not in [entry.id for entry in found], ranking
        assert {later.id, never.id} == {entry.id for entry in found}, ranking
    assert 2 == await store.count(filter=MemoryFilter(min_relevance=0.5))
    assert not await store.delete(soon.id)
    assert await store.update(soon.id, memory="changed") is None
    clock.now = START + timedelta(days=2)
    assert ["deploy notes never expire"] == await _texts(store)
    assert 1 == await store.count()


async def test_expired_memories_are_deleted_by_sweep_and_consolidate(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock)
    await store.store_many(
        [_entry("a", timedelta(minutes=1)), _entry("b", timedelta(minutes=2)), _entry("c")]
    )
    assert 0 == await store.sweep_expired()
    clock.now = START + timedelta(minutes=1)
    assert 1 == await store.sweep_expired()
    clock.now = START + timedelta(minutes=5)
    await store.consolidate(ConsolidationConfig())
    assert 0 == await store.sweep_expired()
    clock.now = START  # nothing comes back: the rows are gone
    assert ["c"] == await _texts(store)


async def test_a_store_ttl_gives_entries_without_one_an_expiry(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock, ttl=timedelta(minutes=10))
    await store.store(_entry("default ttl"))
    await store.store_many([_entry("own expiry", timedelta(hours=5)), _entry("batch default")])
    stored = {entry.memory: entry.expires_at async for entry in store.iter_entries()}
    assert stored == {
        "default ttl": START + timedelta(minutes=10),
        "own expiry": START + timedelta(hours=5),
        "batch default": START + timedelta(minutes=10),
    }
    clock.now = START + timedelta(minutes=10)
    assert ["own expiry"] == await _texts(store)


async def test_refresh_on_read_moves_the_expiry_of_what_a_read_returns(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock, ttl=timedelta(minutes=10), refresh_on_read=True)
    read, unread = _entry("refreshed memory", key="r"), _entry("forgotten note")
    await store.store_many([read, unread])
    clock.now = START + timedelta(minutes=8)
    found = await store.retrieve("refreshed", 1, ranking="bm25")
    assert [START + timedelta(minutes=18)] == [entry.expires_at for entry in found]
    clock.now = START + timedelta(minutes=15)
    got = await store.get_by_key("r")
    assert got is not None
    assert START + timedelta(minutes=25) == got.expires_at
    assert ["refreshed memory"] == await _texts(store)  # iteration does not refresh
    fetched = await store.get(read.id)
    assert fetched is not None
    assert START + timedelta(minutes=25) == fetched.expires_at


@pytest.mark.parametrize(
    ("options", "words"),
    [
        ({"ttl": timedelta(0)}, "ttl must be positive"),
        ({"ttl": 60}, "ttl must be a timedelta"),
        ({"refresh_on_read": True}, "needs a ttl"),
        ({"ttl": timedelta(1), "refresh_on_read": 1}, "must be a bool"),
    ],
)
async def test_bad_expiry_options_are_refused(store_factory, options, words):
    with pytest.raises(InvalidArgumentError, match=words):
        await store_factory(**options)


async def test_a_naive_expiry_is_refused_and_nothing_stored(store):
    with pytest.raises(InvalidEntryError, match="expires_at"):
        await store.store(MemoryEntry(MemoryCategory.FACT, "x", expires_at=datetime(2026, 1, 1)))
    assert 0 == await store.count()


async def test_a_merge_expires_with_its_longest_lived_member(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock)
    text = "the deploy script needs the staging token"
    await store.store_many(
        [_entry(text, timedelta(hours=1)), _entry(text, timedelta(hours=3)), _entry("other")]
    )
    await store.consolidate(ConsolidationConfig.full())
    merged = [entry async for entry in store.iter_entries() if entry.memory == text]
    assert [START + timedelta(hours=3)] == [entry.expires_at for entry in merged]


async def test_expiry_survives_export_and_import(store_factory):
    clock = Clock()
    store = await store_factory(clock=clock)
    if not isinstance(store, SqlMemoryStore):
        pytest.skip("JSON Lines move memories between SQL stores")
    await store.store_many([_entry("expiring", timedelta(hours=1)), _entry("plain")])
    out = io.BytesIO()
    await export_jsonl(store, out)
    assert b'"expires_at":"2026-06-01T01:00:00.000000+00:00"' in out.getvalue()
    await store.forget(everything=True)
    await import_jsonl(store, io.BytesIO(out.getvalue()))
    assert [START + timedelta(hours=1), None] == [
        entry.expires_at async for entry in store.iter_entries()
    ]


def test_the_in_memory_store_takes_the_same_options():
    store = InMemoryStore(ttl=timedelta(minutes=1), refresh_on_read=True, clock=Clock())
    assert store is not None
