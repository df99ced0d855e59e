"""`ids_with_prefix`: ids found by the start of their hexadecimal form, in the view's scope."""

from __future__ import annotations

import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry
from loopctl_memory.errors import InvalidEntryError


def _entry(hex_id: str) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, f"entry {hex_id}", id=uuid.UUID(hex_id))


IDS = [
    "3f2b6c1e8d4a4f5e9a7b1c2d3e4f5a6b",
    "3f2b6c1e8d4a4f5e9a7b1c2d3e4f5a6c",
    "3f2b7000000040008000000000000000",
    "ffffffffffffffffffffffffffffffff",
    "00000000000000000000000000000000",
]


async def test_ids_are_found_by_their_prefix(store):
    if isinstance(store, InMemoryStore):
        pytest.skip("the reference port has no id index to search")
    await store.store_many([_entry(hex_id) for hex_id in IDS])
    full = [uuid.UUID(hex_id) for hex_id in IDS]
    assert full[:2] == await store.ids_with_prefix("3f2b6c")
    assert full[:3] == await store.ids_with_prefix("3F2B", limit=10)
    assert [full[2]] == await store.ids_with_prefix("3f2b7")
    assert [full[0]] == await store.ids_with_prefix("3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b")
    assert [full[3]] == await store.ids_with_prefix("f")
    assert [full[4]] == await store.ids_with_prefix("0000")
    assert [] == await store.ids_with_prefix("3f2c")
    assert [full[0]] == await store.ids_with_prefix("3f", limit=1)
    for bad in ("", "-", "xyz", "3f2b 6c", "0" * 33):
        with pytest.raises(InvalidEntryError, match="hexadecimal"):
            await store.ids_with_prefix(bad)
