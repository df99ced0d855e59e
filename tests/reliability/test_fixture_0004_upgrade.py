"""A database written at revision 0004 (committed in fixtures/) upgrades with every entry intact.

``fixtures/memory-0004.db`` is ``memory-0001.db`` opened (so upgraded) by the
release whose head was 0004, with 120 more entries stored in blocks of 40
(so it holds block postings, a tail and the change log of three deletes).
``fixtures/memory-0004.jsonl`` is what it held, exported by that release.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.entry_json import entry_from_json

FIXTURES = Path(__file__).with_name("fixtures")
DATABASE = FIXTURES / "memory-0004.db"
JSONL = FIXTURES / "memory-0004.jsonl"
QUERIES = ["", "cache", "revision four note", "cache retry glob", "é3", "four", "t1", "no such"]


def _expected() -> list[MemoryEntry]:
    return [entry_from_json(line) for line in JSONL.read_text(encoding="utf-8").splitlines()]


def _raw(path: Path, sql: str) -> list[tuple[Any, ...]]:
    raw = sqlite3.connect(path)
    try:
        return raw.execute(sql).fetchall()
    finally:
        raw.close()


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """The fixture, copied: the committed file is never opened for writing."""
    path = tmp_path / "memory.db"
    shutil.copyfile(DATABASE, path)
    return path


def test_the_fixture_is_a_revision_0004_database_with_postings_and_a_change_log():
    assert [("0004",)] == _raw(DATABASE, "SELECT version_num FROM alembic_version")
    assert [(417,)] == _raw(DATABASE, "SELECT count(*) FROM entries")
    assert 417 == len(_expected())
    assert _raw(DATABASE, "SELECT count(*) FROM token_blocks")[0][0] > 1
    assert [(3,)] == _raw(DATABASE, "SELECT count(*) FROM changes")


async def test_open_store_upgrades_the_fixture_with_every_entry_intact(copy):
    expected = _expected()
    async with open_store(copy) as store:
        assert migrate.head() == await store.schema_revision()
        assert expected == [entry async for entry in store.iter_entries()]
        for entry in expected:
            assert entry == await store.get(entry.id)
        assert [("", len(expected))] == await store.scopes()
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.check)
    assert [("ok",)] == _raw(copy, "PRAGMA integrity_check")


async def test_the_upgraded_fixture_retrieves_exactly_as_the_reference(copy):
    reference = InMemoryStore(_expected())
    async with open_store(copy) as store:
        for query in QUERIES:
            for limit in (1, 7, 500):
                want = [entry.id for entry in await reference.retrieve(query, limit)]
                got = [entry.id for entry in await store.retrieve(query, limit)]
                assert want == got, (query, limit)


async def test_the_upgraded_fixture_takes_updates_and_scoped_entries(copy):
    expected = _expected()
    async with open_store(copy) as store:
        first = expected[0]
        updated = await store.update(first.id, memory="rewritten after the upgrade")
        assert updated is not None
        assert first.created_at == updated.created_at
        reference = InMemoryStore([updated, *expected[1:]])
        for query in ("rewritten after", "rewritten", first.memory, ""):
            want = [entry.id for entry in await reference.retrieve(query, 20)]
            assert want == [entry.id for entry in await store.retrieve(query, 20)], query
        await store.scope("team/a").store(MemoryEntry(MemoryCategory.FACT, "scoped cache"))
        assert [("", 417), ("team/a", 1)] == await store.scopes()
        assert ["scoped cache"] == [
            e.memory for e in await store.scope("team").with_descendants().retrieve("cache", 5)
        ]
        assert 417 == await store.count()
