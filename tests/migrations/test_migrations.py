"""The schema is owned by the alembic migrations, for every SQLite mode."""

from __future__ import annotations

import itertools
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import inspect

from loopctl_memory import (
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    SchemaError,
    SqlMemoryStore,
    migrate,
    open_store,
)
from loopctl_memory.sql.tuning import Tuning
from tests.migrations.schema_snapshot import schema_snapshot

TARGETS = [":memory:", "file"]


def _target(kind: str, tmp_path: Path) -> str:
    return ":memory:" if kind == ":memory:" else str(tmp_path / "memory.db")


def _sqlite_file(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"


@pytest.mark.parametrize("kind", TARGETS)
async def test_open_store_upgrades_an_empty_database_to_head(kind, tmp_path):
    async with open_store(_target(kind, tmp_path)) as store:
        assert migrate.head() == await store.schema_revision()
        async with store.engine.connect() as connection:
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
    assert {
        "alembic_version",
        "entries",
        "tags",
        "index_state",
        "tokens",
        "token_grams",
        "token_blocks",
        "entry_blocks",
        "piece_blocks",
        "tag_values",
        "tag_blocks",
        "words",
        "word_blocks",
        "changes",
        "scopes",
        "embedders",
        "vectors",
        "entry_fields",
        "history",
    } == tables


@pytest.mark.parametrize("kind", TARGETS)
async def test_models_and_migrations_do_not_drift(kind, tmp_path):
    """`alembic check` finds no difference between the tables and the migrations."""
    async with open_store(_target(kind, tmp_path)) as store, store.engine.connect() as connection:
        await connection.run_sync(migrate.check)


@pytest.mark.parametrize("kind", TARGETS)
async def test_downgrade_to_base_removes_every_table_and_upgrade_restores_them(kind, tmp_path):
    async with open_store(_target(kind, tmp_path)) as store:
        async with store.engine.connect() as connection:
            assert await connection.run_sync(migrate.upgrade_to, "base") is None
        async with store.engine.connect() as connection:
            tables = await connection.run_sync(lambda c: set(inspect(c).get_table_names()))
        assert tables <= {"alembic_version"}
        async with store.engine.connect() as connection:
            assert migrate.head() == await connection.run_sync(migrate.upgrade_to, "head")
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.check)
        await store.store(MemoryEntry(MemoryCategory.FACT, "works after re-upgrade"))
        assert 1 == await store.count()


async def test_migrate_false_refuses_an_uninitialised_database(tmp_path):
    path = _sqlite_file(tmp_path)
    sqlite3.connect(path).close()
    with pytest.raises(SchemaError, match="not initialised"):
        await open_store(path, migrate=False)


async def test_migrate_false_opens_a_database_at_head(tmp_path):
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "kept"))
    async with open_store(path, migrate=False) as store:
        assert 1 == await store.count()


async def test_migrate_false_refuses_an_older_database(tmp_path):
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store, store.engine.connect() as connection:
        await connection.run_sync(migrate.upgrade_to, "base")
    with pytest.raises(SchemaError, match="run `loopctl-memory migrate`"):
        await open_store(path, migrate=False)


def _set_revision(path: Path, revision: str) -> None:
    with sqlite3.connect(path) as connection:
        connection.execute("UPDATE alembic_version SET version_num = ?", (revision,))
    connection.close()


async def test_a_database_at_an_unknown_revision_is_refused_and_left_untouched(tmp_path):
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "from the future"))
    _set_revision(path, "9999_from_a_newer_version")
    before = path.read_bytes()
    with pytest.raises(SchemaError, match="9999_from_a_newer_version"):
        await open_store(path)
    assert before == path.read_bytes()


async def test_a_database_with_foreign_tables_is_refused_and_left_untouched(tmp_path):
    path = _sqlite_file(tmp_path)
    with sqlite3.connect(path) as connection:
        connection.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
    connection.close()
    before = path.read_bytes()
    with pytest.raises(SchemaError, match="not a loopctl-memory database"):
        await open_store(path)
    assert before == path.read_bytes()


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    words = ["cache", "retry", "glob", "edit", "the", "a", "straße", "ΣΟΦΙΑ"]
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            " ".join(rng.choices(words, k=rng.randint(1, 8))),
            tags=rng.sample(words, k=rng.randint(0, 2)),
            relevance=rng.randrange(21) * 0.05,
        )
        for _ in range(count)
    ]


async def test_an_older_database_is_upgraded_with_its_data(tmp_path):
    """Downgrade a filled store to 0001, reopen: every entry is intact at head, the
    token index is rebuilt, and retrieval answers exactly as the reference."""
    stored = _entries(random.Random(1), 2_500)
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store:
        await store.store_many(stored)
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.upgrade_to, "0001")
    with sqlite3.connect(path) as raw:
        assert [("0001",)] == raw.execute("SELECT version_num FROM alembic_version").fetchall()
    raw.close()

    reference = InMemoryStore(stored)
    async with open_store(path) as store:
        assert migrate.head() == await store.schema_revision()
        assert len(stored) == await store.count()
        for entry in stored[::250]:
            assert entry == await store.get(entry.id)
        for query in ["cache retry", "straße", "σοφια glob", "the a", "", "e"]:
            expected = [e.id for e in await reference.retrieve(query, 7)]
            assert expected == [e.id for e in await store.retrieve(query, 7)], query
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.check)


def test_history_lists_every_revision_oldest_first():
    revisions = migrate.history()
    assert revisions[0].down_revision is None
    assert migrate.head() == revisions[-1].revision
    for older, newer in itertools.pairwise(revisions):
        assert older.revision == newer.down_revision


def test_the_head_constant_is_the_newest_migration():
    """Opening at head reads HEAD_REVISION instead of loading alembic: it must be the head."""
    assert migrate.head() == migrate.HEAD_REVISION


@pytest.mark.parametrize("kind", TARGETS)
async def test_a_created_database_is_the_migrated_one(kind, tmp_path):
    """A new database is created from the tables, not by running every migration: the
    result must be the same schema, rows and version stamp as alembic's upgrade gives."""
    async with open_store(_target(kind, tmp_path)) as store:
        async with store.engine.connect() as connection:
            created = await connection.run_sync(schema_snapshot)
            await connection.rollback()
            await connection.run_sync(migrate.upgrade_to, "base")
            await connection.run_sync(migrate.upgrade_to, "head")
            migrated = await connection.run_sync(schema_snapshot)
        assert migrated == created
        assert created["tables"]["entries"]["indexes"], "the snapshot sees the indexes"
        assert "WITHOUT ROWID" in str(created["ddl"]), "the snapshot sees the table options"


async def test_a_created_database_migrates_down_and_up_with_its_entries(tmp_path):
    path = _sqlite_file(tmp_path)
    entries = [MemoryEntry(MemoryCategory.FACT, f"kept {n}", tags=["t"]) for n in range(30)]
    async with open_store(path) as store:
        await store.store_many(entries)
        async with store.engine.connect() as connection:
            assert "0001" == await connection.run_sync(migrate.upgrade_to, "0001")
    async with open_store(path) as store:
        assert migrate.HEAD_REVISION == await store.schema_revision()
        assert [e.id for e in entries[:3]] == [e.id for e in await store.retrieve("kept", 3)]


def test_creating_and_opening_a_database_do_not_load_alembic(tmp_path):
    path = _sqlite_file(tmp_path)
    script = (
        "import asyncio, sys\n"
        "from loopctl_memory import open_store\n"
        "async def main():\n"
        f"    async with open_store({str(path)!r}) as store:\n"
        "        await store.count()\n"
        "asyncio.run(main())\n"
        "asyncio.run(main())\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] == 'alembic'))\n"
    )
    ran = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert "[]" == ran.stdout.strip()


def test_databases_created_by_different_processes_hold_their_indexes_in_one_order(tmp_path):
    """The order of a table's indexes decides the work of each write (the kill tests count
    it); SQLAlchemy keeps them in a set, whose order follows where objects land in memory."""
    script = (
        "import asyncio, sys\n"
        "from loopctl_memory import open_store\n"
        "async def main():\n"
        "    async with open_store(sys.argv[1]) as store:\n"
        "        await store.count()\n"
        "asyncio.run(main())\n"
    )
    orders = set()
    for attempt in range(6):
        path = tmp_path / f"{attempt}.db"
        # Objects made before the import move where the store's tables land in memory.
        padded = f"padding = [object() for _ in range({attempt * 997})]\n" + script
        subprocess.run([sys.executable, "-c", padded, str(path)], check=True)
        raw = sqlite3.connect(path)
        try:
            rows = raw.execute("SELECT name FROM sqlite_master ORDER BY rowid").fetchall()
        finally:
            raw.close()
        orders.add(tuple(name for (name,) in rows))
    assert 1 == len(orders), orders
    (order,) = orders
    assert "uq_entries_scope_id_key" in order


async def test_a_version_table_with_two_revisions_is_refused(tmp_path):
    path = _sqlite_file(tmp_path)
    async with open_store(path):
        pass
    with sqlite3.connect(path) as connection:
        connection.execute("INSERT INTO alembic_version VALUES ('0001')")
    connection.close()
    with pytest.raises(SchemaError, match="2 schema revisions at once"):
        await open_store(path)


async def test_a_database_downgraded_to_base_is_created_again_on_open(tmp_path):
    """Base leaves an empty version table behind; opening creates the schema beside it."""
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store, store.engine.connect() as connection:
        assert await connection.run_sync(migrate.upgrade_to, "base") is None
    async with open_store(path) as store:
        assert migrate.HEAD_REVISION == await store.schema_revision()
        await store.store(MemoryEntry(MemoryCategory.FACT, "stored after re-creation"))
        assert ["stored after re-creation"] == [e.memory for e in await store.retrieve("", 5)]


@pytest.mark.parametrize("schema", ["created", "migrated from 0002", "downgraded to 0002"])
async def test_the_category_check_builds_no_temporary_table_per_row_from_0003(schema, tmp_path):
    """SQLite checks an IN list of more than two constants against a temporary table,
    built again for each inserted row; 0003 checks with comparisons instead."""
    path = _sqlite_file(tmp_path)
    async with open_store(path) as store, store.engine.connect() as connection:
        if schema == "migrated from 0002":
            assert "0002" == await connection.run_sync(migrate.upgrade_to, "0002")
            assert "0003" == await connection.run_sync(migrate.upgrade_to, "0003")
        elif schema == "downgraded to 0002":
            assert "0002" == await connection.run_sync(migrate.upgrade_to, "0002")
    insert = (
        "EXPLAIN INSERT INTO entries (id, category, memory, memory_lower, relevance, "
        "created_at_us, access_count, validated) VALUES (?, ?, 'm', 'm', 0.5, 0, 0, 0)"
    )
    with sqlite3.connect(path) as raw:
        opcodes = {row[1] for row in raw.execute(insert, ("0" * 32, "fact"))}
        for number, category in enumerate(MemoryCategory):
            raw.execute(insert.removeprefix("EXPLAIN "), (f"{number:032x}", category.value))
        with pytest.raises(sqlite3.IntegrityError, match="ck_entries_category"):
            raw.execute(insert.removeprefix("EXPLAIN "), ("f" * 32, "Fact"))
    raw.close()
    assert "Insert" in opcodes, "the plan is read"
    assert ("OpenEphemeral" in opcodes) == (schema == "downgraded to 0002")


async def test_0004_regroups_postings_of_many_blocks_and_back(tmp_path):
    """Down to 0003 (postings a term and block to a row) and up again (a block to a row):
    several blocks, deleted entries, and retrieval exactly as the reference after each."""
    stored = _entries(random.Random(4), 600)
    path = _sqlite_file(tmp_path)
    async with open_store(path, tuning=Tuning(background_folds=False, tail_limit=50)) as store:
        for start in range(0, 600, 60):  # a block per batch, and a tail
            await store.store_many(stored[start : start + 60])
        for entry in stored[::7]:
            await store.delete(entry.id)
    reference = InMemoryStore([entry for n, entry in enumerate(stored) if n % 7])

    async def answers_as_the_reference(store: SqlMemoryStore) -> None:
        for query in ["cache retry", "straße", "the a", "", "e", "glob edit"]:
            expected = [e.id for e in await reference.retrieve(query, 9)]
            assert expected == [e.id for e in await store.retrieve(query, 9)], query

    async with open_store(path) as store:
        await answers_as_the_reference(store)
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.upgrade_to, "0003")
    with sqlite3.connect(path) as raw:
        blocks = raw.execute("SELECT count(DISTINCT block) FROM postings").fetchone()[0]
    raw.close()
    assert blocks >= 10
    async with open_store(path) as store:
        assert migrate.head() == await store.schema_revision()
        await answers_as_the_reference(store)
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.check)


async def test_the_previous_head_upgrades_with_every_entry_and_no_metadata_key_or_expiry(tmp_path):
    """0013 adds metadata ('{}'), keys and expiry (none) to every existing entry."""
    path = _sqlite_file(tmp_path)
    stored = _entries(random.Random(2), 300)
    async with open_store(path) as store:
        await store.store_many(stored)
        async with store.engine.connect() as connection:
            assert "0012" == await connection.run_sync(migrate.upgrade_to, "0012")
    with sqlite3.connect(path) as raw:
        columns = [row[1] for row in raw.execute("PRAGMA table_info(entries)")]
    raw.close()
    assert not {"metadata", "key", "expires_at_us"} & set(columns)
    async with open_store(path) as store:
        assert migrate.HEAD_REVISION == await store.schema_revision()
        assert stored == [entry async for entry in store.iter_entries()]
    with sqlite3.connect(path) as raw:
        added = raw.execute("SELECT DISTINCT metadata, key, expires_at_us FROM entries").fetchall()
        checked = raw.execute("PRAGMA integrity_check").fetchall()
        dangling = raw.execute("PRAGMA foreign_key_check").fetchall()
    raw.close()
    assert [("{}", None, None)] == added
    assert [("ok",)] == checked
    assert [] == dangling


async def test_0014_gives_every_existing_entry_its_stored_event(tmp_path):
    """0014 creates the history: each entry stored before it gets one event, at its
    created_at, caused by the upgrade; its later events follow; down and up again."""
    path = _sqlite_file(tmp_path)
    stored = _entries(random.Random(3), 200)
    async with open_store(path) as store:
        await store.store_many(stored)
        async with store.engine.connect() as connection:
            assert "0013" == await connection.run_sync(migrate.upgrade_to, "0013")
    with sqlite3.connect(path) as raw:
        tables = {row[0] for row in raw.execute("SELECT name FROM sqlite_master")}
    raw.close()
    assert "history" not in tables
    async with open_store(path) as store:
        assert migrate.HEAD_REVISION == await store.schema_revision()
        assert stored == [entry async for entry in store.iter_entries()]
        for entry in stored[::37]:
            (event,) = await store.history(entry.id)
            assert ("stored", entry.created_at, "upgrade") == (event.event, event.at, event.cause)
        await store.delete(stored[0].id)
        assert ["stored", "deleted"] == [e.event for e in await store.history(stored[0].id)]
        async with store.engine.connect() as connection:
            await connection.run_sync(migrate.upgrade_to, "0013")
            await connection.run_sync(migrate.upgrade_to, "head")
            await connection.run_sync(migrate.check)
        assert 199 == len(await store.history())
    with sqlite3.connect(path) as raw:
        checked = raw.execute("PRAGMA integrity_check").fetchall()
    raw.close()
    assert [("ok",)] == checked
