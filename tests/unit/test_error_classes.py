"""Errors a caller can tell apart, each a subclass of the error it was before."""

from __future__ import annotations

from pathlib import Path

import pytest

from loopctl_memory import (
    InMemoryStore,
    InvalidArgumentError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    ReadOnlyStoreError,
    StorageError,
    StoreClosedError,
    open_store,
)


def test_each_new_class_is_a_subclass_of_the_one_raised_before():
    assert issubclass(InvalidArgumentError, InvalidEntryError)
    assert issubclass(InvalidArgumentError, ValueError)
    assert issubclass(StoreClosedError, StorageError)
    assert issubclass(ReadOnlyStoreError, StorageError)


async def test_a_closed_store_raises_store_closed():
    store = await open_store()
    await store.close()
    with pytest.raises(StoreClosedError, match="closed"):
        await store.count()


async def test_a_write_to_a_read_only_store_raises_read_only(tmp_path: Path):
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "kept"))
    async with open_store(path, read_only=True) as reader:
        with pytest.raises(ReadOnlyStoreError, match="read-only"):
            await reader.store(MemoryEntry(MemoryCategory.FACT, "refused"))
        assert 1 == await reader.count()


async def test_a_bad_entry_is_an_invalid_entry_not_an_invalid_argument():
    async with open_store() as store:
        with pytest.raises(InvalidEntryError) as raised:
            await store.store(MemoryEntry(MemoryCategory.FACT, "x", relevance=2.0))
    assert not isinstance(raised.value, InvalidArgumentError)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda store: store.forget(), id="forget without a condition"),
        pytest.param(lambda store: store.ids_with_prefix("xyz"), id="an id prefix not hex"),
        pytest.param(lambda store: store.consolidate(config=5), id="a config not a config"),
        pytest.param(lambda store: store.consolidate(vacuum="yes"), id="vacuum not a bool"),
    ],
)
async def test_a_bad_argument_is_an_invalid_argument(call):
    async with open_store() as store:
        with pytest.raises(InvalidArgumentError):
            await call(store)


async def test_a_bad_scope_name_and_a_bad_option_are_invalid_arguments():
    async with open_store() as store:
        with pytest.raises(InvalidArgumentError):
            store.scope("a//b")
    with pytest.raises(InvalidArgumentError):
        await open_store(track_access="yes")  # type: ignore[arg-type]


async def test_the_reference_port_raises_the_same_classes():
    store = InMemoryStore()
    with pytest.raises(InvalidArgumentError):
        await store.consolidate(config=5)  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        await store.forget()
