"""PostgreSQL specifics: server errors are StorageError, options reach the pool, the CLI works."""

from __future__ import annotations

import asyncio
import json
import os
import socket

import pytest
from click.testing import CliRunner
from sqlalchemy import text
from sqlalchemy.engine import make_url

from loopctl_memory import MemoryCategory, MemoryEntry, StorageError, migrate, open_store
from loopctl_memory.cli import cli
from loopctl_memory.sql.backend import WRITERS_LOCK
from tests.conftest import NEEDS_POSTGRES, POSTGRES_URL_VARIABLE, reset_postgres
from tests.migrations.schema_snapshot import schema_snapshot

pytestmark = NEEDS_POSTGRES


@pytest.fixture
async def url() -> str:
    """The test server's URL, with every table emptied."""
    found = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(found)
    return found


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])  # nothing listens once the socket is closed


async def test_an_unreachable_server_is_a_storage_error_naming_the_target():
    target = f"postgresql+asyncpg://nobody@127.0.0.1:{_closed_port()}/none"
    with pytest.raises(StorageError, match=r"open postgresql\+asyncpg://nobody@127\.0\.0\.1"):
        await open_store(target, connect_timeout=5)


async def test_an_unknown_role_is_a_storage_error(url):
    target = make_url(url).set(username="no_such_role_here").render_as_string(hide_password=False)
    with pytest.raises(StorageError, match="no_such_role_here"):
        await open_store(target)


async def test_a_missing_database_is_a_storage_error(url):
    target = make_url(url).set(database="no_such_database_here").render_as_string(False)
    with pytest.raises(StorageError, match="no_such_database_here"):
        await open_store(target)


async def test_a_writer_waits_for_the_writers_lock_then_gives_up_with_storage_error(url):
    async with open_store(url) as holder, open_store(url, busy_timeout=0.2) as waiter:
        async with holder.engine.connect() as connection:
            await connection.execute(text(f"SELECT pg_advisory_lock({WRITERS_LOCK})"))
            with pytest.raises(StorageError, match="lock timeout"):
                await waiter.store(MemoryEntry(MemoryCategory.FACT, "never stored"))
            await connection.execute(text(f"SELECT pg_advisory_unlock({WRITERS_LOCK})"))
            await connection.commit()
        assert 0 == await waiter.count()  # nothing half-written
        await waiter.store(MemoryEntry(MemoryCategory.FACT, "stored once the lock is free"))
        assert 1 == await holder.count()


async def test_a_statement_over_the_statement_timeout_is_a_storage_error(url):
    async with (
        open_store(url) as holder,
        open_store(url, statement_timeout=0.2, busy_timeout=60) as reader,
    ):
        async with holder.engine.connect() as connection:
            # Readers of entries wait behind this lock until the server cancels them.
            await connection.execute(text("LOCK TABLE entries IN ACCESS EXCLUSIVE MODE"))
            with pytest.raises(StorageError, match="statement timeout"):
                await reader.count()
            await connection.rollback()
        assert 0 == await reader.count()  # the store works on


async def test_pool_options_reach_the_engine(url):
    async with open_store(url, pool_size=3, max_overflow=2, pool_timeout=7) as store:
        pool = store.engine.pool
        assert 3 == pool.size()  # type: ignore[attr-defined]
        assert 2 == pool._max_overflow  # type: ignore[attr-defined]
        assert 7 == pool._timeout  # type: ignore[attr-defined]


async def test_the_schema_matches_the_migrations_and_keeps_text_as_bytes(url):
    async with open_store(url) as store, store.engine.connect() as connection:
        await connection.run_sync(migrate.check)  # alembic check: no drift on PostgreSQL
        types: dict[str, str] = dict(
            (
                await connection.execute(
                    text(
                        "SELECT column_name, data_type FROM information_schema.columns "
                        "WHERE table_name = 'entries'"
                    )
                )
            ).all()
        )
    assert "bytea" == types["memory"] == types["memory_lower"]
    assert "uuid" == types["id"]


async def test_many_connections_of_one_store_write_at_once(url):
    async with open_store(url, pool_size=4, max_overflow=4) as store:
        batches = [
            [MemoryEntry(MemoryCategory.FACT, f"task {task} entry {n}") for n in range(20)]
            for task in range(8)
        ]
        await asyncio.gather(*(store.store_many(batch) for batch in batches))
        assert 160 == await store.count()
        found = await store.retrieve("task 3 entry", 500)
        assert 160 == len(found)
        assert len({entry.id for entry in found}) == 160


def test_the_cli_migrates_and_uses_a_postgresql_url(url):
    runner = CliRunner()
    assert 0 == runner.invoke(cli, ["--db", url, "migrate"]).exit_code
    added = runner.invoke(cli, ["--db", url, "add", "shared by every worker", "--category", "fact"])
    assert 0 == added.exit_code, added.output
    found = runner.invoke(cli, ["--db", url, "search", "worker", "--json"])
    assert 0 == found.exit_code, found.output
    assert "shared by every worker" in found.output
    stats = runner.invoke(cli, ["--db", url, "stats", "--json"])
    assert 0 == stats.exit_code, stats.output
    reported = json.loads(stats.output)
    assert reported["database"].startswith("postgresql+asyncpg://")
    assert reported["size_bytes"] > 8192  # the tables and indexes on the server
    assert 1 == reported["entries"]


async def test_a_created_database_is_the_migrated_one(url):
    """A new database is created from the tables, not by the migrations: same schema."""
    async with open_store(url) as store, store.engine.connect() as connection:
        await connection.run_sync(migrate.upgrade_to, "base")
        await connection.run_sync(migrate.ensure_schema, upgrade=True)
        created = await connection.run_sync(schema_snapshot)
        await connection.rollback()
        await connection.run_sync(migrate.upgrade_to, "base")
        await connection.run_sync(migrate.upgrade_to, "head")
        migrated = await connection.run_sync(schema_snapshot)
        await connection.rollback()
    assert migrated == created
    assert "insertion order" in str(created["tables"]["entries"]["columns"]), "sees comments"
