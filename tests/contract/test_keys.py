"""Keys on every backend: storing a key again replaces its memory, in one scope."""

from __future__ import annotations

import dataclasses
import io

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    DuplicateEntryError,
    InvalidArgumentError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    SqlMemoryStore,
)
from loopctl_memory.jsonl import export_jsonl, import_jsonl


def _entry(text: str, key: str | None = None, **fields: object) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text, key=key, **fields)  # type: ignore[arg-type]


async def test_storing_a_key_again_replaces_its_memory(store):
    first, other = _entry("prefers dark mode", "prefs"), _entry("unkeyed note")
    await store.store(first)
    await store.store(other)
    second = _entry("prefers light mode", "prefs")
    await store.store(second)
    assert 2 == await store.count()
    assert second == await store.get_by_key("prefs")
    assert await store.get(first.id) is None
    assert [other.id, second.id] == [entry.id async for entry in store.iter_entries()]
    found = await store.retrieve("prefers mode", 5)
    assert first.id not in [entry.id for entry in found]
    assert second.id == found[0].id


async def test_store_many_replaces_keys_and_refuses_one_key_twice(store):
    await store.store_many([_entry("a1", "a"), _entry("b1", "b"), _entry("plain")])
    await store.store_many([_entry("a2", "a"), _entry("c1", "c")])
    assert ["b1", "plain", "a2", "c1"] == [e.memory async for e in store.iter_entries()]
    with pytest.raises(InvalidArgumentError, match="two entries with the key 'x'"):
        await store.store_many([_entry("x1", "x"), _entry("x2", "x")])
    assert 4 == await store.count()


async def test_storing_the_same_keyed_entry_again_is_no_duplicate(store):
    entry = _entry("kept once", "k")
    await store.store(entry)
    await store.store(dataclasses.replace(entry, memory="kept once, updated"))
    assert ["kept once, updated"] == [e.memory async for e in store.iter_entries()]
    with pytest.raises(DuplicateEntryError):
        await store.store(dataclasses.replace(entry, key="other"))
    assert 1 == await store.count()


async def test_delete_by_key_removes_only_that_memory(store):
    await store.store_many([_entry("one", "1"), _entry("two", "2")])
    assert await store.delete_by_key("1")
    assert not await store.delete_by_key("1")
    assert await store.get_by_key("1") is None
    assert ["two"] == [e.memory async for e in store.iter_entries()]


@pytest.mark.parametrize("bad", ["", "k" * 1_025, 3, None, "\ud800"])
async def test_a_bad_key_is_refused_and_nothing_stored(store, bad):
    with pytest.raises(InvalidEntryError, match="key"):
        await store.store(_entry("never stored", bad) if bad is not None else _entry("x", 5))  # type: ignore[arg-type]
    assert 0 == await store.count()
    if isinstance(bad, str):
        with pytest.raises(InvalidArgumentError, match="key"):
            await store.get_by_key(bad)


async def test_keys_filter_and_merge_keep_the_kept_memorys_key(store):
    first = _entry("the deploy script needs the staging token", "deploy")
    second = _entry("the deploy script needs the staging token", "token")
    await store.store_many([first, second])
    await store.consolidate(ConsolidationConfig.full())
    [kept] = [entry async for entry in store.iter_entries()]
    assert kept.key == (first if kept.id == first.id else second).key
    assert kept == await store.get_by_key(kept.key)
    gone = "token" if kept.key == "deploy" else "deploy"
    assert await store.get_by_key(gone) is None
    assert 1 == await store.count(filter=MemoryFilter(metadata={"absent": None}))


async def test_keys_survive_export_and_import(store):
    if not isinstance(store, SqlMemoryStore):
        pytest.skip("JSON Lines move memories between SQL stores")
    await store.store_many([_entry("keyed", "k"), _entry("plain")])
    out = io.BytesIO()
    await export_jsonl(store, out)
    exported = out.getvalue()
    assert b'"key":"k"' in exported
    await store.forget(everything=True)
    await import_jsonl(store, io.BytesIO(exported))
    found = await store.get_by_key("k")
    assert found is not None
    assert "keyed" == found.memory
    first_line = exported.splitlines()[0].replace(b"keyed", b"x")
    first_line = first_line.replace(b'"id":"', b'"id":"0').replace(b'"id":"0', b'"id":"', 1)
    await import_jsonl(store, io.BytesIO(first_line + b"\n"))
    found = await store.get_by_key("k")
    assert found is not None
    assert "x" == found.memory
    assert 2 == await store.count()
