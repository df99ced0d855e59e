"""A pytest plugin for people testing their own agents: a fresh in-memory store per test.

Installing loopctl-memory registers this plugin (the ``pytest11`` entry point),
so a test only has to ask for the ``memory_store`` fixture: a migrated,
empty ``:memory:`` :class:`~loopctl_memory.SqlMemoryStore`, closed after the
test. It needs pytest-asyncio (``pip install pytest-asyncio``) and works in its
strict and auto modes alike; without it, the plugin still loads and only a
test that asks for ``memory_store`` fails, saying what to install.

Example:
    .. code-block:: python

        import pytest

        from loopctl_memory import MemoryCategory, MemoryEntry


        @pytest.mark.asyncio  # not needed with asyncio_mode = "auto"
        async def test_my_agent_remembers_the_fix(memory_store):
            await memory_store.store(
                MemoryEntry(MemoryCategory.ERROR_PATTERN, "database is locked: BEGIN IMMEDIATE")
            )
            [best] = await memory_store.retrieve("locked", 1)
            assert best.memory.startswith("database is locked")

"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

MISSING_PYTEST_ASYNCIO = (
    "the memory_store fixture needs pytest-asyncio: pip install pytest-asyncio "
    "(loopctl-memory's stores are async)"
)


def _async_fixture() -> Callable[..., Any] | None:
    """pytest-asyncio's fixture decorator, or None when it is not installed."""
    try:
        import pytest_asyncio  # noqa: PLC0415 - optional: the plugin must load without it
    except ImportError:
        return None
    return pytest_asyncio.fixture


async def _fresh_store() -> AsyncIterator[SqlMemoryStore]:
    """A fresh, migrated ``:memory:`` SqlMemoryStore, closed after the test."""
    # Imported here so that merely loading the plugin stays cheap for every pytest run.
    from loopctl_memory.sql.opening import open_store  # noqa: PLC0415

    async with open_store(":memory:") as store:
        yield store


_fixture = _async_fixture()
if _fixture is not None:
    memory_store = _fixture(_fresh_store, name="memory_store")
else:

    @pytest.fixture(name="memory_store")
    def _memory_store_unavailable() -> SqlMemoryStore:
        """Fails the test: there is no event loop to run an async store on."""
        pytest.fail(MISSING_PYTEST_ASYNCIO, pytrace=False)
