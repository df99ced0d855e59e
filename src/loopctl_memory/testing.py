"""A pytest plugin for people testing their own agents: a fresh in-memory store per test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from loopctl_memory.sql.store import SqlMemoryStore, open_store


@pytest.fixture
async def memory_store() -> AsyncIterator[SqlMemoryStore]:
    """A fresh, migrated ``:memory:`` SqlMemoryStore, closed after the test."""
    async with open_store(":memory:") as store:
        yield store
