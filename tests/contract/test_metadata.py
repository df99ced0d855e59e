"""A memory's metadata on every backend: stored as given, refused when not JSON, updated, merged."""

from __future__ import annotations

import io
import math
from typing import Any

import pytest

from loopctl_memory import (
    ConsolidationConfig,
    InvalidArgumentError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    SqlMemoryStore,
)
from loopctl_memory.jsonl import export_jsonl, import_jsonl
from loopctl_memory.metadata import MAX_BYTES, MAX_DEPTH

RICH = {
    "user": "ann",
    "score": 3,
    "ratio": 0.25,
    "ok": True,
    "none": None,
    "team": {"lead": "bo", "size": 4, "tags": ["a", "b"]},
    "mixed": [1, "two", 3.5, False, None, {"deep": [[]]}],
    "ünïcode ✓": "zoë \u0000 and \u2028",
    "big": 2**62,
    "": "an empty key",
}


def _entry(text: str, metadata: dict[str, Any] | None = None) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text, metadata={} if metadata is None else metadata)


async def test_metadata_comes_back_as_given_from_every_read(store):
    plain, rich = _entry("plain"), _entry("rich cache", RICH)
    await store.store(plain)
    await store.store_many([rich])
    assert {} == (await store.get(plain.id)).metadata
    assert RICH == (await store.get(rich.id)).metadata
    assert [plain, rich] == [entry async for entry in store.iter_entries()]
    for ranking in ("reference", "bm25"):
        found = await store.retrieve("rich cache", 5, ranking=ranking)
        assert RICH == next(entry.metadata for entry in found if entry.id == rich.id)


async def test_metadata_survives_closing_the_store(store_factory, backend):
    store = await store_factory()
    await store.store(_entry("kept", RICH))
    if not backend.startswith("sqlite-file"):
        return
    await store.close()
    again = await store_factory()
    assert [RICH] == [entry.metadata async for entry in again.iter_entries()]


async def test_a_tuple_comes_back_as_a_list_and_the_caller_shares_nothing(store):
    given = {"pair": (1, 2), "nested": {"list": [1]}}
    entry = _entry("shared", given)
    await store.store(entry)
    given["nested"]["list"].append(2)  # type: ignore[index]
    assert {"pair": [1, 2], "nested": {"list": [1]}} == (await store.get(entry.id)).metadata


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        (["not", "an", "object"], "must be a dict"),
        ({1: "int key"}, "keys must be str"),
        ({"n": math.nan}, "not a JSON number"),
        ({"n": {"deeper": [math.inf]}}, r"at 'n.deeper\[0\]'"),
        ({"s": {1, 2}}, "set: not a JSON value"),
        ({"b": b"bytes"}, "bytes: not a JSON value"),
        ({"s": "\ud800"}, "cannot be encoded as UTF-8"),
        ({"big": "x" * MAX_BYTES}, "at most 65,536"),
    ],
)
async def test_metadata_that_is_not_a_json_object_is_refused_and_nothing_stored(
    store, metadata, message
):
    good = _entry("good")
    with pytest.raises(InvalidArgumentError, match=message):
        await store.store(_entry("bad", metadata))
    with pytest.raises(InvalidArgumentError, match=message):
        await store.store_many([good, _entry("bad", metadata)])
    assert 0 == await store.count()


def _deep(levels: int) -> object:
    value: object = "bottom"
    for _ in range(levels):
        value = [value]
    return value


async def test_metadata_nested_deeper_than_the_limit_is_refused(store):
    await store.store(_entry("deep enough", {"d": _deep(MAX_DEPTH - 1)}))
    with pytest.raises(InvalidArgumentError, match="deeper than 32"):
        await store.store(_entry("too deep", {"d": _deep(MAX_DEPTH)}))
    assert 1 == await store.count()


async def test_update_replaces_or_merges_the_metadata(store):
    entry = _entry("note", {"a": 1, "b": {"x": 1}})
    await store.store(entry)
    merged = await store.update(entry.id, merge_metadata={"b": {"y": 2}, "c": None})
    assert {"a": 1, "b": {"y": 2}, "c": None} == merged.metadata
    assert merged == await store.get(entry.id)
    replaced = await store.update(entry.id, metadata={"only": "this"})
    assert {"only": "this"} == replaced.metadata == (await store.get(entry.id)).metadata
    cleared = await store.update(entry.id, metadata={})
    assert {} == cleared.metadata
    with pytest.raises(InvalidArgumentError, match="not both"):
        await store.update(entry.id, metadata={"a": 1}, merge_metadata={"b": 2})
    with pytest.raises(InvalidArgumentError, match="merge_metadata must be a dict"):
        await store.update(entry.id, merge_metadata=["a"])
    with pytest.raises(InvalidEntryError, match="not a JSON number"):
        await store.update(entry.id, merge_metadata={"n": math.nan})
    assert {} == (await store.get(entry.id)).metadata


async def test_a_merge_of_near_duplicates_keeps_every_key_the_kept_memory_first(store):
    first = MemoryEntry(
        MemoryCategory.FACT, "the deploy script needs the staging token", metadata={"a": 1, "x": 1}
    )
    second = MemoryEntry(
        MemoryCategory.FACT, "the deploy script needs the staging token", metadata={"b": 2, "x": 2}
    )
    await store.store_many([first, second])
    stats = await store.consolidate(ConsolidationConfig.full())
    assert 1 == stats.merged
    [kept] = [entry async for entry in store.iter_entries()]
    assert {"a", "b", "x"} == set(kept.metadata)
    original = first if kept.id == first.id else second
    assert original.metadata["x"] == kept.metadata["x"]
    for key, value in kept.metadata.items():  # filters see the merged metadata
        assert 1 == await store.count(filter=MemoryFilter(metadata={key: value}))
    assert 0 == await store.count(filter=MemoryFilter(metadata={"x": 3 - kept.metadata["x"]}))


async def test_metadata_survives_export_and_import(store):
    if not isinstance(store, SqlMemoryStore):
        pytest.skip("JSON Lines move memories between SQL stores")
    await store.store_many([_entry("rich", RICH), _entry("plain")])
    stream = io.BytesIO()
    await export_jsonl(store, stream)
    await store.forget(everything=True)
    stream.seek(0)
    report = await import_jsonl(store, stream)
    assert 2 == report.entries
    assert [RICH, {}] == [entry.metadata async for entry in store.iter_entries()]
