"""Fuzzing the public API: any argument is refused cleanly or stored intact, nothing else.

Each example runs a few calls of ``store``, ``store_many``, ``retrieve``, ``get``
and ``delete`` with arbitrary arguments on one store per backend. After every
call the whole content of the store is read back: a refused call (the error contract:
InvalidEntryError, DuplicateEntryError for an id stored twice, or TypeError)
left it exactly as it was; an accepted one changed it by exactly what was asked,
and ``get`` returns each stored entry intact. Whether a call must be accepted is
judged by ``fuzz_values.verdict``, not by the library. Any other exception
(``sqlalchemy.exc``, ``sqlite3``, StorageError, ...) fails the test.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loopctl_memory import (
    DuplicateEntryError,
    InMemoryStore,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
)
from loopctl_memory.entry import validate_entry
from tests.reliability.fuzz_values import (
    EITHER,
    ID_POOL,
    INVALID,
    VALID,
    clean_texts,
    dirty_texts,
    entries,
    huge_texts,
    junk,
    mixture,
    normalised,
    text_verdict,
    valid_entries,
    verdict,
)

AnyStore = InMemoryStore | SqlMemoryStore
REFUSALS = (InvalidEntryError, TypeError)
MAX_EXAMPLES = 150  # per backend
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # one store for all examples, reset by each
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

SEEDS = [
    MemoryEntry(
        category,
        memory,
        tags=tags,
        relevance=relevance,
        id=ID_POOL[n],
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(days=n),
    )
    for n, (category, memory, tags, relevance) in enumerate(
        [
            (MemoryCategory.FACT, "seed alpha 100% _x_", ["ci"], 0.5),
            (MemoryCategory.INSIGHT, "seed beta \x00 NUL", [], 0.0),
            (MemoryCategory.WORKING, "", ["", "Seed"], 1.0),
            (MemoryCategory.ERROR_PATTERN, "seed ünïcødé 🦀 'quote'", ["x", "x"], 0.05),
        ]
    )
]

examples_run: dict[str, int] = {}


@pytest.fixture(params=["reference", "sqlite-memory", "sqlite-file"])
def fuzzed(request, tmp_path) -> Iterator[tuple[asyncio.Runner, AnyStore, str]]:
    """One store for every example of the test, on one event loop; examples reset it."""
    with asyncio.Runner() as runner:
        store: AnyStore
        if request.param == "reference":
            store = InMemoryStore()
        else:
            target = ":memory:" if request.param == "sqlite-memory" else tmp_path / "fuzz.db"
            store = runner.run(_open(target))
        try:
            runner.run(store.store_many(SEEDS))
            yield runner, store, request.param
        finally:
            runner.run(store.close())
    print(f"{request.param}: {examples_run.get(request.param, 0)} examples")


async def _open(target: Any) -> SqlMemoryStore:
    return await open_store(target)


async def _contents(store: AnyStore) -> list[MemoryEntry]:
    """Everything stored: in insertion order, or by id for InMemoryStore (no order to read)."""
    if isinstance(store, SqlMemoryStore):
        return [entry async for entry in store.iter_entries()]
    return sorted(await store.retrieve("", 2**62), key=lambda entry: entry.id)


def _as_stored(store: AnyStore, listing: list[MemoryEntry]) -> list[MemoryEntry]:
    return listing if isinstance(store, SqlMemoryStore) else sorted(listing, key=lambda e: e.id)


def _batch_verdict(items: list[Any], before: list[MemoryEntry]) -> tuple[str, bool]:
    """The verdict on a batch, and whether its ids clash (with each other or with the store)."""
    verdicts = {verdict(item) for item in items}
    overall = INVALID if INVALID in verdicts else EITHER if EITHER in verdicts else VALID
    if overall == INVALID:
        return overall, False
    ids = [item.id for item in items]
    stored = {entry.id for entry in before}
    return overall, len(set(ids)) != len(ids) or bool(stored.intersection(ids))


async def _refusal(call: Awaitable[Any]) -> Exception | None:
    """Await ``call``; return the refusal it raised (any other exception propagates)."""
    try:
        await call
    except REFUSALS as exc:
        return exc
    return None


async def _write(
    store: AnyStore, call: Any, items: list[Any], before: list[MemoryEntry], what: str
) -> list[MemoryEntry]:
    judged, clash = _batch_verdict(items, before)
    refused = await _refusal(call)
    if refused is not None:
        event(f"{what}: refused {'a clash' if clash else judged} with {type(refused).__name__}")
        assert before == await _contents(store), f"{what} was refused but changed the store"
        assert judged != VALID or clash, f"{what} refused valid input: {refused!r}"
        if judged == VALID:
            assert isinstance(refused, DuplicateEntryError), f"{what}: a clash, not {refused!r}"
        return before
    event(f"{what}: stored {len(items)} {judged}")
    assert judged != INVALID, f"{what} accepted invalid input"
    assert not clash, f"{what} accepted an id that is already stored"
    expected = [normalised(item) for item in items]
    after = await _contents(store)
    assert _as_stored(store, before + expected) == after, f"{what} did not store exactly this"
    for entry in expected:
        found = await store.get(entry.id)
        assert entry == found
        assert found is not None
        assert isinstance(found.category, MemoryCategory)
        assert type(found.relevance) is float
        assert timedelta(0) == found.created_at.utcoffset()
    return after


def _valid_query(query: object, limit: object) -> str:
    if text_verdict(query) == INVALID:
        return INVALID
    if isinstance(limit, bool):
        return EITHER
    return VALID if isinstance(limit, int) and limit >= 0 else INVALID


async def _retrieve(
    store: AnyStore, query: Any, limit: Any, before: list[MemoryEntry]
) -> list[MemoryEntry]:
    judged = _valid_query(query, limit)
    found: list[MemoryEntry] = []

    async def answer() -> None:
        found.extend(await store.retrieve(query, limit))

    refused = await _refusal(answer())
    if refused is not None:
        event(f"retrieve: refused {judged}")
        assert judged != VALID, f"retrieve refused valid arguments: {refused!r}"
    else:
        event(f"retrieve: answered {judged}")
        assert judged != INVALID, "retrieve accepted invalid arguments"
        if judged == VALID:
            assert len(found) <= limit
            if isinstance(store, SqlMemoryStore):  # ``before`` is in insertion order
                assert await InMemoryStore(before).retrieve(query, limit) == found
    assert before == await _contents(store), "retrieve changed the store"
    return before


async def _get(store: AnyStore, entry_id: Any, before: list[MemoryEntry]) -> list[MemoryEntry]:
    try:
        found = await store.get(entry_id)
    except REFUSALS:
        assert not isinstance(entry_id, uuid.UUID), "get refused a UUID"
    else:
        assert isinstance(entry_id, uuid.UUID), "get accepted a non-UUID"
        assert next((e for e in before if e.id == entry_id), None) == found
    assert before == await _contents(store), "get changed the store"
    return before


async def _delete(store: AnyStore, entry_id: Any, before: list[MemoryEntry]) -> list[MemoryEntry]:
    try:
        existed = await store.delete(entry_id)
    except REFUSALS:
        assert not isinstance(entry_id, uuid.UUID), "delete refused a UUID"
        assert before == await _contents(store), "a refused delete changed the store"
        return before
    assert isinstance(entry_id, uuid.UUID), "delete accepted a non-UUID"
    assert any(entry.id == entry_id for entry in before) == existed
    after = await _contents(store)
    assert [entry for entry in before if entry.id != entry_id] == after
    return after


def _container(kind: str, items: list[Any]) -> Any:
    if kind == "list":
        return list(items)
    if kind == "tuple":
        return tuple(items)
    return (item for item in items)


async def _reset(store: AnyStore) -> None:
    """Back to the seeds alone, so every example starts from the same small store."""
    for entry in await _contents(store):
        await store.delete(entry.id)
    await store.store_many(SEEDS)


queries = mixture(clean_texts, clean_texts, dirty_texts, huge_texts, junk)
limits = mixture(
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(0, 20),
    st.integers(-5, -1),
    st.sampled_from([2**63, 2**64, 10**30, -(2**63)]),
    st.booleans(),
    junk,
)
_batches = mixture(
    st.lists(valid_entries, min_size=1, max_size=4),
    st.lists(entries, min_size=1, max_size=4),
    st.just([]),
)
calls = mixture(
    st.tuples(st.just("store"), mixture(valid_entries, entries)),
    st.tuples(st.sampled_from(["list", "tuple", "generator"]), _batches),
    st.tuples(st.just("retrieve"), st.tuples(queries, limits)),
    st.tuples(
        st.sampled_from(["get", "delete"]), mixture(st.sampled_from(ID_POOL), st.uuids(), junk)
    ),
)


@FUZZ
@given(program=st.lists(calls, min_size=1, max_size=5))
def test_any_call_is_refused_cleanly_or_done_exactly(fuzzed, program):
    runner, store, backend = fuzzed
    examples_run[backend] = examples_run.get(backend, 0) + 1
    try:
        runner.run(_run(store, program))
    finally:
        runner.run(_reset(store))


async def _run(store: AnyStore, program: list[tuple[str, Any]]) -> None:
    before = await _contents(store)
    for action, argument in program:
        if action == "store":
            before = await _write(store, store.store(argument), [argument], before, action)
        elif action in ("list", "tuple", "generator"):
            batch = _container(action, argument)
            before = await _write(store, store.store_many(batch), argument, before, action)
        elif action == "retrieve":
            query, limit = argument
            before = await _retrieve(store, query, limit, before)
        else:
            before = await (_get if action == "get" else _delete)(store, argument, before)


@pytest.mark.parametrize("batch", [None, 5, 3.5, object()], ids=["None", "int", "float", "object"])
async def test_store_many_of_something_not_iterable_is_a_type_error_and_changes_nothing(batch):
    async with open_store(":memory:") as store:
        await store.store_many(SEEDS)
        with pytest.raises(REFUSALS):
            await store.store_many(batch)
        assert [validate_entry(seed) for seed in SEEDS] == await _contents(store)


LONG_INT = 10**5000  # more digits than Python converts to a str by default (4300)


@pytest.mark.parametrize(
    "fields", [{"relevance": LONG_INT}, {"relevance": -LONG_INT}, {"access_count": -LONG_INT}]
)
async def test_an_int_too_long_to_print_is_an_invalid_entry(fields):
    async with open_store(":memory:") as store:
        with pytest.raises(InvalidEntryError):
            await store.store(MemoryEntry(MemoryCategory.FACT, "m", **fields))
        assert await store.is_empty()
