"""A database written at revision 0001 (committed in fixtures/) upgrades with every entry intact.

``fixtures/memory-0001.db`` holds 300 entries of every category with awkward
text (unicode, NUL, SQL and LIKE characters, empty strings), tags (empty,
repeated), the edge relevances 0, 0.05, 1 and the binary32 boundary around
0.05, timestamps from year 1 to 9999, and gaps in the insertion numbers.
``fixtures/memory-0001.jsonl`` is what it holds; ``fixtures/make_0001_fixture.py``
regenerates both.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl_memory import (
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    SchemaError,
    migrate,
    open_store,
)
from loopctl_memory.cli import DB_ENVVAR, cli
from loopctl_memory.entry_json import entry_from_json
from tests.reliability.fixtures import make_0001_fixture

FIXTURES = Path(__file__).with_name("fixtures")
DATABASE = FIXTURES / "memory-0001.db"
JSONL = FIXTURES / "memory-0001.jsonl"

QUERIES = [
    "",
    " ",
    "cache",
    "cache retry glob",
    "the the",
    "STRASSE",
    "straße",
    "σοφία",
    "ΣΟΦΙΑ",
    "日本語",
    "🦀",
    "école",
    "e\u0301cole",
    "i̇stanbul",
    "100%",
    "under_score",
    "back\\slash",
    "'quote'",
    "DROP TABLE",
    "\x00",
    "nul\x00byte",
    "x\u00a0y",
    "ci",
    "tag with space",
    "%_",
    "same",
    "long long",
    "\U0010ffff",
    "no such words anywhere",
]


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


def test_the_fixture_is_a_revision_0001_database_with_varied_entries():
    expected = _expected()
    assert [("0001",)] == _raw(DATABASE, "SELECT version_num FROM alembic_version")
    assert [("delete",)] == _raw(DATABASE, "PRAGMA journal_mode")
    assert [(len(expected),)] == _raw(DATABASE, "SELECT count(*) FROM entries")
    assert 300 == len(expected)
    assert set(MemoryCategory) == {entry.category for entry in expected}
    relevances = {entry.relevance for entry in expected}
    assert {0.0, 0.05, 1.0} <= relevances
    assert any("\x00" in entry.memory for entry in expected)
    assert any("\x00" in tag for entry in expected for tag in entry.tags)
    assert any(entry.memory == "" for entry in expected)
    assert any(len(entry.tags) != len(set(entry.tags)) for entry in expected)
    seqs = [seq for (seq,) in _raw(DATABASE, "SELECT seq FROM entries ORDER BY seq")]
    assert seqs[-1] > len(seqs), "gaps in the insertion numbers, as deletes leave them"


def test_the_fixture_is_what_its_script_makes(tmp_path):
    """Regenerating gives the same rows and the same expected lines (fixture not stale)."""
    rebuilt = tmp_path / "rebuilt.db"
    make_0001_fixture.build(rebuilt)
    for query in (
        "SELECT * FROM alembic_version",
        "SELECT * FROM entries ORDER BY seq",
        "SELECT * FROM tags ORDER BY entry_seq, position",
    ):
        assert _raw(DATABASE, query) == _raw(rebuilt, query), query
    assert make_0001_fixture.expected_lines() == JSONL.read_text(encoding="utf-8").splitlines()


async def test_open_store_upgrades_the_fixture_with_every_entry_intact(copy):
    expected = _expected()
    async with open_store(copy) as store:
        assert migrate.head() == await store.schema_revision()
        assert len(expected) == await store.count()
        assert expected == [entry async for entry in store.iter_entries()]
        for entry in expected:
            assert entry == await store.get(entry.id)
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.check)
    assert [("ok",)] == _raw(copy, "PRAGMA integrity_check")


async def test_migrate_create_creates_a_new_database_but_never_upgrades_an_old_one(copy):
    before = copy.read_bytes()
    with pytest.raises(SchemaError, match="at revision 0001"):
        await open_store(copy, migrate="create")
    assert before == copy.read_bytes()
    with pytest.raises(SchemaError, match="not initialised"):
        await open_store(copy.with_name("new.db"), migrate=False)
    async with open_store(copy.with_name("new.db"), migrate="create") as store:
        assert migrate.head() == await store.schema_revision()


async def test_the_upgraded_fixture_retrieves_exactly_as_the_reference(copy):
    expected = _expected()
    reference = InMemoryStore(expected)
    async with open_store(copy) as store:
        for query in QUERIES:
            for limit in (1, 7, 300):
                wanted = await reference.retrieve(query, limit)
                assert wanted == await store.retrieve(query, limit), (query, limit)
        assert await reference.consolidate() == await store.consolidate()
        assert await reference.retrieve("", 300) == await store.retrieve("", 300)


async def test_the_upgraded_fixture_takes_new_entries_after_the_old_ones(copy):
    expected = _expected()
    newer = MemoryEntry(MemoryCategory.FACT, "stored after the upgrade", tags=["ci"])
    async with open_store(copy) as store:
        await store.store(newer)
    async with open_store(copy) as store:
        assert [*expected, newer] == [entry async for entry in store.iter_entries()]
        assert newer == (await store.retrieve("stored after the upgrade", 1))[0]


def test_the_cli_migrates_the_fixture_and_exports_exactly_the_expected_lines(
    copy, tmp_path, monkeypatch
):
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    runner = CliRunner()
    migrated = runner.invoke(cli, ["--db", str(copy), "migrate"])
    assert 0 == migrated.exit_code, migrated.output
    assert f"from schema revision 0001 to {migrate.head()}" in migrated.stdout
    out = tmp_path / "out.jsonl"
    exported = runner.invoke(cli, ["--db", str(copy), "export", "-o", str(out)])
    assert 0 == exported.exit_code, exported.output
    assert JSONL.read_bytes() == out.read_bytes()
