"""The single store: one transaction on aiosqlite's thread, all of it or none of it."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import aiosqlite
import pytest

from loopctl_memory import DuplicateEntryError, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql.backend import backend_named

KNOWN_AIOSQLITE = ("0.20.0", "0.21.0", "0.22.1")
"""Versions whose private ``Connection._execute`` runs a function in the connection's thread."""


def test_the_single_store_fast_path_is_taken_on_the_installed_aiosqlite() -> None:
    assert version("aiosqlite") in KNOWN_AIOSQLITE, (
        "a new aiosqlite: check that Connection._execute(fn, *args) still runs fn in its thread,"
        " then add the version here"
    )
    assert callable(aiosqlite.Connection._execute)
    assert backend_named("sqlite").works_in_one_hop


async def test_a_single_store_commits_everything_or_nothing(tmp_path: Path) -> None:
    entry = MemoryEntry(MemoryCategory.FACT, "stored alone", tags=["x", "Y"], relevance=0.25)
    async with open_store(tmp_path / "memory.db") as store:
        await store.store(entry)
        assert entry == await store.get(entry.id)
        with pytest.raises(DuplicateEntryError):
            await store.store(MemoryEntry(MemoryCategory.FACT, "same id", tags=["z"], id=entry.id))
        assert 1 == await store.count()  # the failed transaction was rolled back
        assert entry == await store.get(entry.id)
        await store.store(MemoryEntry(MemoryCategory.FACT, "the connection is usable after"))
        assert 2 == await store.count()
