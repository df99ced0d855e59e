"""Several processes opening a brand-new database file at once all succeed."""

from __future__ import annotations

import asyncio
import os
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from loopctl_memory import migrate, open_store
from loopctl_memory.sql import opening as store_module
from tests.conftest import POSTGRES_URL_VARIABLE, SHARED_BACKENDS

OPENER = """
import asyncio, os, sys, time
from loopctl_memory import MemoryCategory, MemoryEntry, open_store

async def main():
    print("ready", flush=True)
    while not os.path.exists(sys.argv[2]):
        time.sleep(0.001)
    async with open_store(sys.argv[1], busy_timeout=30) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "opened together"))

asyncio.run(main())
"""

PROCESSES = 5
ROUNDS = 2


@pytest.mark.slow
@pytest.mark.parametrize("round_number", range(ROUNDS))
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_processes_creating_one_new_database_together_all_succeed(round_number, backend, tmp_path):
    """SQLite: switching a new file to WAL needs it alone; PostgreSQL: every opener
    finds no schema and migrates. The others must wait, not fail."""
    database: str | Path = tmp_path / f"new-{round_number}.db"
    if backend == "postgresql":
        database = os.environ[POSTGRES_URL_VARIABLE]
        asyncio.run(_drop_schema(database))
    go = tmp_path / "go"
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    children = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, str(database), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(PROCESSES)
    ]
    for child in children:
        assert child.stdout is not None
        assert "ready\n" == child.stdout.readline()
    go.touch()
    errors = []
    for child in children:
        _, stderr = child.communicate(timeout=120)
        if child.returncode != 0:
            errors.append(stderr.strip().splitlines()[-1:])
    assert [] == errors
    assert PROCESSES == asyncio.run(_count(database))


async def _count(database: str | Path) -> int:
    async with open_store(database) as store:
        return await store.count()


async def _drop_schema(url: str) -> None:
    async with open_store(url) as store, store.engine.connect() as connection:
        await connection.run_sync(migrate.upgrade_to, "base")
        assert await connection.run_sync(migrate.current) is None


def test_opening_waits_for_a_writer_before_switching_to_wal(tmp_path, monkeypatch):
    """Another process writes between our migration and our switch to WAL, which
    needs the file alone and does not wait by itself: the open must wait, not fail."""
    database = tmp_path / "memory.db"
    writer = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    release = threading.Timer(0.3, writer.execute, args=("COMMIT",))
    migrate_schema = store_module.migrate_schema

    def migrate_then_let_another_write(connection, **options):
        migrate_schema(connection, **options)
        connection.commit()
        writer.execute("BEGIN IMMEDIATE")
        release.start()

    monkeypatch.setattr(store_module, "migrate_schema", migrate_then_let_another_write)
    try:
        assert 0 == asyncio.run(_count(database))
    finally:
        release.join()
        writer.close()
    with sqlite3.connect(database) as raw:
        assert [("wal",)] == raw.execute("PRAGMA journal_mode").fetchall()
    raw.close()
