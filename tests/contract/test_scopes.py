"""Scopes: one store, many agents and users, each seeing only its own memories.

A view (``store.scope(name)``) reads its scope's entries, or with
``descendants=True`` those of every scope below it too, and writes into its
own; retrieval in it is the reference over exactly those entries.
"""

from __future__ import annotations

import os
import random
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import (
    DuplicateEntryError,
    InMemoryStore,
    InvalidEntryError,
    LoopMemory,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
)
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres

SQL_BACKENDS = ["sqlite-memory", "sqlite-file", pytest.param("postgresql", marks=NEEDS_POSTGRES)]
WORDS = ["cache", "Retry", "glob", "a", "the", "ß", "tool", "x%", "agent"]


async def _open(backend: str, tmp_path: Path, **options: Any) -> Any:
    if backend == "sqlite-memory":
        return await open_store(":memory:", **options)
    if backend == "sqlite-file":
        return await open_store(tmp_path / "memory.db", **options)
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    return await open_store(url, **options)


@pytest.fixture(params=SQL_BACKENDS)
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    opened = await _open(str(request.param), tmp_path)
    yield opened
    await opened.close()


def fact(memory: str, **fields: Any) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, memory, **fields)


# --- names -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    [
        *("", "/", "a/", "/a", "a//b", "x" * 256, 7, None, "bad\udc80surrogate"),
        *(".", "..", "../etc", "a/./b", "a/..", "acme/../other"),
    ],
)
async def test_a_scope_name_must_be_a_non_empty_path_of_non_empty_segments(store, name):
    with pytest.raises(InvalidEntryError):
        store.scope(name)


async def test_names_are_relative_to_the_view_and_the_root_is_the_empty_scope(store):
    assert "" == store.scope_name
    assert "acme/support/agent-7" == store.scope("acme").scope("support/agent-7").scope_name
    assert "x" * 255 == store.scope("x" * 255).scope_name
    with pytest.raises(InvalidEntryError, match="longer than 255"):
        store.scope("x" * 200).scope("y" * 60)


async def test_a_view_is_a_loop_memory(store):
    assert isinstance(store.scope("a"), LoopMemory)
    assert isinstance(store.scope("a", descendants=True), LoopMemory)


# --- isolation -------------------------------------------------------------------------


async def test_each_scope_sees_only_its_own_entries(store):
    alice, bob = store.scope("users/alice"), store.scope("users/bob")
    mine, theirs, root = fact("alice cache"), fact("bob cache"), fact("root cache")
    await alice.store(mine)
    await bob.store_many([theirs])
    await store.store(root)

    assert [mine] == await alice.retrieve("cache", 10)
    assert [theirs] == await bob.retrieve("cache", 10)
    assert [root] == await store.retrieve("cache", 10)
    assert (1, 1, 1) == (await alice.count(), await bob.count(), await store.count())
    assert await store.scope("users").is_empty()
    assert mine == await alice.get(mine.id)
    assert None is await bob.get(mine.id)
    assert None is await store.get(mine.id)
    assert not await bob.delete(mine.id)
    assert None is await bob.update(mine.id, relevance=0.1)
    assert [mine] == [entry async for entry in alice.iter_entries()]


async def test_descendants_read_every_scope_below_and_write_into_their_own(store):
    team = store.scope("team", descendants=True)
    await store.scope("team/a").store(fact("a cache", relevance=0.2))
    await store.scope("team/a/deep").store(fact("deep cache", relevance=0.3))
    await store.scope("teammate").store(fact("not below team", relevance=1.0))
    own = fact("team cache", relevance=0.1)
    await team.store(own)

    assert ["deep cache", "a cache", "team cache"] == [
        entry.memory for entry in await team.retrieve("cache", 10)
    ]
    assert 3 == await team.count()
    assert [own] == await store.scope("team").retrieve("cache", 10)
    assert 4 == await store.with_descendants().count()
    assert [("", 0)] != await store.scopes()


async def test_ids_are_unique_across_scopes(store):
    entry = fact("once")
    await store.scope("a").store(entry)
    with pytest.raises(DuplicateEntryError):
        await store.scope("b").store(fact("twice", id=entry.id))
    with pytest.raises(DuplicateEntryError):
        await store.store_many([fact("thrice", id=entry.id)])
    assert 0 == await store.scope("b").count()


async def test_scopes_lists_the_scopes_that_hold_entries_by_name(store):
    await store.store(fact("root"))
    for name, number in [("b", 2), ("a/x", 1), ("a", 3)]:
        await store.scope(name).store_many([fact(f"{name} {n}") for n in range(number)])
    gone = fact("deleted")
    await store.scope("c").store(gone)
    await store.scope("c").delete(gone.id)

    assert [("", 1), ("a", 3), ("a/x", 1), ("b", 2)] == await store.scopes()
    assert [("a", 3), ("a/x", 1)] == await store.scope("a").scopes()


@pytest.mark.parametrize("backend", SQL_BACKENDS)
async def test_scopes_of_says_where_each_entry_the_view_reads_lives(backend, tmp_path):
    now = [datetime(2026, 1, 1, tzinfo=UTC)]
    async with await _open(backend, tmp_path, clock=lambda: now[0]) as store:
        root, inner, deep, other = fact("r"), fact("a"), fact("a/x"), fact("b")
        soon = fact("expires", expires_at=now[0] + timedelta(minutes=1))
        await store.store(root)
        await store.scope("a").store_many([inner, soon])
        await store.scope("a/x").store(deep)
        await store.scope("b").store(other)
        ids = [entry.id for entry in (root, inner, deep, other, soon)] + [uuid.uuid4()]
        assert await store.with_descendants().scopes_of(ids) == {
            root.id: "",
            inner.id: "a",
            deep.id: "a/x",
            other.id: "b",
            soon.id: "a",
        }
        below_a = store.scope("a", descendants=True)
        assert await below_a.scopes_of(ids) == {inner.id: "", deep.id: "x", soon.id: ""}
        assert await store.scope("a").scopes_of(ids) == {inner.id: "", soon.id: ""}
        assert await store.scopes_of(ids) == {root.id: ""}
        now[0] += timedelta(minutes=1)
        assert await store.scope("a").scopes_of(ids) == {inner.id: ""}
        assert await store.scopes_of([]) == {}


async def test_consolidate_and_forget_in_a_scope_touch_nothing_else(store):
    for scope in (store, store.scope("a"), store.scope("a/b"), store.scope("z")):
        await scope.store_many([fact("low", relevance=0.01), fact("high", relevance=0.9)])

    stats = await store.scope("a", descendants=True).consolidate()

    assert (4, 2, 2) == (stats.entries_before, stats.entries_after, stats.pruned)
    assert [("", 2), ("a", 1), ("a/b", 1), ("z", 2)] == await store.scopes()
    assert 1 == await store.scope("z").forget(below=0.5)
    assert [("", 2), ("a", 1), ("a/b", 1), ("z", 1)] == await store.scopes()


async def test_closing_a_view_closes_the_store(tmp_path):
    store = await open_store(":memory:")
    view = store.scope("a")
    await view.close()
    with pytest.raises(StorageError, match="closed"):
        await store.count()


# --- retrieval in a scope is the reference over the scope's entries -------------------


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        rng.choice(list(MemoryCategory)),
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))),
        tags=[rng.choice(WORDS) for _ in range(rng.choice([0, 0, 1, 2]))],
        relevance=rng.choice([rng.randrange(21) * 0.05, 0.02, 0.0]),
        id=uuid.UUID(int=rng.getrandbits(128)),
    )


SCOPES = ["", "a", "a/b", "a/b/c", "a/bc", "b", "ü/ß"]


@pytest.mark.parametrize("backend", SQL_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5, 6])
async def test_every_scoped_retrieve_and_consolidate_is_the_reference_over_its_entries(
    backend, seed, tmp_path
):
    rng = random.Random(seed)
    tuning = Tuning(
        background_folds=False,
        tail_limit=rng.choice([4, 30, 10_000]),
        word_cache_bytes=rng.choice([0, 2**20]),
        small_scope=rng.choice([0, 20_000]),  # ranked from the postings, or from the texts
    )
    store = await _open(backend, tmp_path, tuning=tuning)
    held: list[tuple[str, MemoryEntry]] = []  # every stored entry with its scope, in order
    try:
        for _ in range(12):
            name = rng.choice(SCOPES)
            batch = [_entry(rng) for _ in range(rng.randint(1, 25))]
            if rng.random() < 0.5:
                await _view(store, name, descendants=False).store_many(batch)
            else:
                for entry in batch:
                    await _view(store, name, descendants=False).store(entry)
            held += [(name, entry) for entry in batch]
            if rng.random() < 0.25:
                name, descendants = rng.choice(SCOPES), rng.random() < 0.5
                reference = InMemoryStore(_read_by(held, name, descendants))
                view = _view(store, name, descendants=descendants)
                assert await reference.consolidate() == await view.consolidate()
                kept = {entry.id async for entry in store.with_descendants().iter_entries()}
                held = [(scope, entry) for scope, entry in held if entry.id in kept]
            for name in SCOPES:
                for descendants in (False, True):
                    view = _view(store, name, descendants=descendants)
                    reference = InMemoryStore(_read_by(held, name, descendants))
                    for query in ("", "cache", "the a", rng.choice(WORDS), "x% agent glob"):
                        for limit in (1, 5, 500):
                            want = [e.id for e in await reference.retrieve(query, limit)]
                            got = [e.id for e in await view.retrieve(query, limit)]
                            assert want == got, (name, descendants, query, limit)
    finally:
        await store.close()


def _view(store: Any, name: str, *, descendants: bool) -> Any:
    if name:
        return store.scope(name, descendants=descendants)
    return store.with_descendants() if descendants else store


def _read_by(
    held: list[tuple[str, MemoryEntry]], name: str, descendants: bool
) -> list[MemoryEntry]:
    """The entries the view of ``name`` reads, in insertion order."""
    return [
        entry
        for scope, entry in held
        if scope == name or (descendants and (not name or scope.startswith(name + "/")))
    ]


@pytest.mark.parametrize("backend", SQL_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
async def test_updated_entries_rank_by_their_new_fields_in_scopes_and_at_the_root(
    backend, seed, tmp_path
):
    """An update keeps the entry's place; its old words never find it again."""
    rng = random.Random(seed)
    tuning = Tuning(
        background_folds=False,
        tail_limit=rng.choice([4, 30]),
        word_cache_bytes=rng.choice([0, 2**20]),
        small_scope=rng.choice([0, 20_000]),
    )
    store = await _open(backend, tmp_path, tuning=tuning)
    held: list[tuple[str, MemoryEntry]] = []
    try:
        for _ in range(10):
            name = rng.choice(SCOPES[:4])
            batch = [_entry(rng) for _ in range(rng.randint(1, 20))]
            await _view(store, name, descendants=False).store_many(batch)
            held += [(name, entry) for entry in batch]
            for place in rng.sample(range(len(held)), min(len(held), rng.randint(1, 8))):
                scope, entry = held[place]
                fresh = _entry(rng)
                changes = {
                    key: getattr(fresh, key)
                    for key in rng.sample(["memory", "tags", "relevance", "category"], 2)
                }
                updated = await _view(store, scope, descendants=False).update(entry.id, **changes)
                assert updated is not None
                assert (entry.id, entry.created_at) == (updated.id, updated.created_at)
                held[place] = (scope, updated)
            for name in SCOPES[:4]:
                for descendants in (False, True):
                    view = _view(store, name, descendants=descendants)
                    reference = InMemoryStore(_read_by(held, name, descendants))
                    for query in ("", "cache", "the a", rng.choice(WORDS), "x% agent glob"):
                        want = [e.id for e in await reference.retrieve(query, 50)]
                        assert want == [e.id for e in await view.retrieve(query, 50)], query
    finally:
        await store.close()
