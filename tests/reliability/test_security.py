"""Hostile text is only text, files are created as the umask says, memories stay out of logs.

Single SQL wildcard characters in a query, and SQL in stored text, are in
tests/contract/test_contract.py; here whole SQL fragments go through both
search paths (the token index and the unindexed tail) and the tag test.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from sqlalchemy import inspect

from loopctl_memory import (
    DuplicateEntryError,
    InMemoryStore,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
)
from loopctl_memory.cli import DB_ENVVAR, cli
from loopctl_memory.sql.tuning import Tuning

HOSTILE = [
    "'; DROP TABLE entries; --",
    "' OR '1'='1",
    "x' UNION SELECT id, memory FROM entries --",
    "); DELETE FROM tags; --",
    '" OR ""="',
    "100% sure",
    "%",
    "%%",
    "_",
    "__init__",
    "a%b_c",
    "\\",
    "back\\slash",
    "\\%",
    "\\_",
    "[abc]",
    "[%]",
    "^$.*+?",
    "*/ /*",
    "|| 'x' ||",
    "$1 ? :name @p0 %(memory)s",
    "ESCAPE '\\'",
    "char(0)",
    "\x00",
]


def _hostile_entries(label: str) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            f"{label} {text} end",
            tags=[text, f"{label}{text}"],
            relevance=(n % 20) * 0.05,
        )
        for n, text in enumerate(HOSTILE)
    ]


FILLERS = [
    MemoryEntry(MemoryCategory.WORKING, f"filler number {n}", relevance=0.3)
    for n in range(Tuning().tail_limit)
]
# Before the fillers, the hostile entries end up in the token index; after them, in the tail.
ENTRIES = [*_hostile_entries("indexed"), *FILLERS, *_hostile_entries("tail")]


@pytest.fixture(params=["sqlite-memory", "sqlite-file"])
async def hostile_store(request, tmp_path) -> AsyncIterator[SqlMemoryStore]:
    target = ":memory:" if request.param == "sqlite-memory" else tmp_path / "memory.db"
    async with open_store(target) as store:
        await store.store_many(ENTRIES[: len(HOSTILE)])
        await store.store_many(FILLERS)  # a tail this long is indexed
        for entry in ENTRIES[len(HOSTILE) + len(FILLERS) :]:
            await store.store(entry)
        yield store


async def _tables(store: SqlMemoryStore) -> set[str]:
    async with store.engine.connect() as connection:
        return await connection.run_sync(lambda c: set(inspect(c).get_table_names()))


async def test_sql_fragments_in_queries_are_only_text(hostile_store):
    store = hostile_store
    tables = await _tables(store)
    reference = InMemoryStore(ENTRIES)
    for query in [*HOSTILE, "indexed %", "tail _", "' OR 1=1 --", "%' OR '%'='"]:
        expected = await reference.retrieve(query, 30)
        assert expected == await store.retrieve(query, 30), repr(query)
    assert len(ENTRIES) == await store.count()
    assert tables == await _tables(store)


# --- file modes ------------------------------------------------------------------------


@pytest.fixture
def umask(request) -> Iterator[int]:
    mask: int = request.param
    previous = os.umask(mask)
    try:
        yield mask
    finally:
        os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("umask", [0o077, 0o027], indirect=True, ids=oct)
async def test_files_open_store_creates_respect_the_umask(umask, tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "private"))
        files = [path, path.with_name("memory.db-wal"), path.with_name("memory.db-shm")]
        modes = {file.name: _mode(file) for file in files}
    assert dict.fromkeys(modes, 0o644 & ~umask) == modes  # SQLite creates files 0644


@pytest.mark.parametrize("umask", [0o077], indirect=True, ids=oct)
def test_the_cli_creates_its_default_directory_and_database_private_under_umask_077(
    umask, tmp_path, monkeypatch
):
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    result = CliRunner().invoke(cli, ["init"])
    assert 0 == result.exit_code, result.output
    directory = tmp_path / "home" / "data" / "loopctl-memory"
    assert 0o700 == _mode(directory)
    assert 0o600 == _mode(directory / "memory.db")


# --- logs --------------------------------------------------------------------------------

MARKER = "Mem0ry-Marker-5f2c9e"  # mixed case: the store also keeps a lowercased copy


async def _use_every_operation(target: str | Path) -> None:
    async with open_store(target) as store:
        entry = MemoryEntry(MemoryCategory.FACT, f"the {MARKER} text", tags=[MARKER])
        await store.store(entry)
        await store.store_many([MemoryEntry(MemoryCategory.INSIGHT, f"batch {MARKER}")])
        assert entry == (await store.retrieve(MARKER, 5))[0]
        assert entry == await store.get(entry.id)
        with pytest.raises(DuplicateEntryError):
            await store.store(entry)
        with pytest.raises(InvalidEntryError):
            await store.store(MemoryEntry(MemoryCategory.FACT, MARKER, relevance=2.0))
        async for _ in store.iter_entries():
            pass
        await store.delete(entry.id)
        await store.consolidate()


def _leaks(records: list[logging.LogRecord]) -> list[str]:
    """Records at INFO or above that hold the marker, in any case, message or traceback."""
    formatter = logging.Formatter()
    leaked = []
    for record in records:
        text = record.getMessage() + (
            formatter.formatException(record.exc_info) if record.exc_info else ""
        )
        if record.levelno >= logging.INFO and MARKER.lower() in text.lower():
            leaked.append(f"{record.name} {record.levelname}: {text[:200]}")
    return leaked


@pytest.mark.parametrize("where", ["memory", "file"])
async def test_memory_text_is_not_logged_at_info_or_above(where, caplog, tmp_path):
    """With every logger at DEBUG (the root's level; libraries keep their own defaults)."""
    caplog.set_level(logging.DEBUG)
    await _use_every_operation(":memory:" if where == "memory" else tmp_path / "memory.db")
    assert caplog.records, "nothing was captured: the test would prove nothing"
    assert [] == _leaks(caplog.records)


@pytest.mark.parametrize("where", ["memory", "file"])
async def test_memory_text_is_not_logged_at_info_even_with_sqlalchemy_logging_on(
    where, caplog, tmp_path
):
    for name in ("", "sqlalchemy", "aiosqlite"):
        caplog.set_level(logging.DEBUG, logger=name or None)
    await _use_every_operation(":memory:" if where == "memory" else tmp_path / "memory.db")
    assert any(record.name.startswith("sqlalchemy") for record in caplog.records)
    assert [] == _leaks(caplog.records)
