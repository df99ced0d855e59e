"""A store used in a child process forked after it was opened refuses, and the parent goes on.

SQLite connections must not cross a fork() ("How To Corrupt An SQLite
Database File", section 2.7): not used in the child, not even closed there.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, StorageError, open_store, sync
from tests.conftest import integrity_check

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="the system has no fork()"),
    pytest.mark.filterwarnings("ignore:This process .* fork:DeprecationWarning"),
]


def _in_child(work: Callable[[], bool]) -> bool:
    """Whether ``work`` returned True in a forked child."""
    child = os.fork()
    if child == 0:  # pragma: no cover - measured by the parent
        status = 2
        try:
            status = 0 if work() else 1
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status) == 0


def _refuses(call: Callable[[], object]) -> bool:
    """Whether ``call`` raises the error of a store used across a fork."""
    try:
        call()
    except StorageError as exc:
        return "fork" in str(exc)
    return False


def _entry(text: str) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text)


def test_a_blocking_store_refuses_in_a_forked_child_and_closing_it_there_leaves_the_parent(
    tmp_path,
):
    database = tmp_path / "memory.db"
    with sync.open_store(database) as store:
        store.store(_entry("before the fork"))

        def close_then_open_its_own() -> bool:
            store.close()  # returns at once: the loop and connections are the parent's
            with sync.open_store(database) as own:
                own.store(_entry("in the child, by its own store"))
                return own.count() == 2

        assert _in_child(lambda: _refuses(store.count))
        assert _in_child(close_then_open_its_own)
        store.store(_entry("after the fork"))
        assert 3 == store.count()
    assert ["ok"] == integrity_check(database)


def test_an_async_store_refuses_in_a_forked_child(tmp_path):
    database = tmp_path / "memory.db"
    loop = asyncio.new_event_loop()
    try:
        store = loop.run_until_complete(open_store(database))
        loop.run_until_complete(store.store(_entry("before the fork")))

        async def close_then_open_its_own() -> bool:
            await store.close()  # marks it closed, touching nothing of the parent's
            async with open_store(database) as own:
                await own.store(_entry("in the child, by its own store"))
                return await own.count() == 2

        assert _in_child(lambda: _refuses(lambda: asyncio.run(store.count())))
        assert _in_child(lambda: asyncio.run(close_then_open_its_own()))
        loop.run_until_complete(store.store(_entry("after the fork")))
        assert 3 == loop.run_until_complete(store.count())
        loop.run_until_complete(store.close())
    finally:
        loop.close()
    assert ["ok"] == integrity_check(database)
