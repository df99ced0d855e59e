"""Fixtures shared by every test: one `store` per backend, the same contract for all."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import sqlite3
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from loopctl_memory import (
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
    sync,
)
from tests.sync_adapter import AsyncOverSync


@pytest.fixture(autouse=True, scope="session")
def _graph_files_in_a_scratch_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Stores on a server keep their vector graph files in the user's cache: not the tester's."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("cache"))


AnyStore = InMemoryStore | SqlMemoryStore | AsyncOverSync
StoreFactory = Callable[..., Awaitable[AnyStore]]

POSTGRES_URL_VARIABLE = "LOOPCTL_MEMORY_TEST_POSTGRES_URL"

NEEDS_POSTGRES = pytest.mark.skipif(
    not os.environ.get(POSTGRES_URL_VARIABLE),
    reason=f"no PostgreSQL configured: set {POSTGRES_URL_VARIABLE} "
    "(postgresql+asyncpg://...) or run .ci/run, which starts one",
)

SHARED_BACKENDS = ["sqlite-file", pytest.param("postgresql", marks=NEEDS_POSTGRES)]
"""The backends several processes can open at once."""

SCOPED = "@scope"
"""A backend name ending in this is a view of scope ``team/agent`` of a store whose other
scopes (the root, the parent, a sibling and a child) hold entries of their own."""

SYNC = "@sync"
"""A backend name ending in this is the blocking ``loopctl_memory.sync`` store, driven
through ``tests.sync_adapter.AsyncOverSync`` so the async tests run unchanged."""

BACKENDS = [
    "reference",
    "sqlite-memory",
    "sqlite-file",
    pytest.param("postgresql", marks=NEEDS_POSTGRES),
    "sqlite-memory" + SCOPED,
    "sqlite-file" + SCOPED,
    pytest.param("postgresql" + SCOPED, marks=NEEDS_POSTGRES),
    "sqlite-file" + SYNC,
]


def base_backend(backend: str) -> str:
    """The database behind a backend name, scoped or not, async or sync."""
    return backend.removesuffix(SCOPED).removesuffix(SYNC)


async def _fill_other_scopes(store: SqlMemoryStore) -> None:
    """Entries the view under test must never see (they match common test queries)."""
    noise = [
        MemoryEntry(MemoryCategory.FACT, text, tags=tags, relevance=relevance)
        for text, tags, relevance in (
            ("same stale cache x m memory test alpha", ["alpha", "x", ""], 1.0),
            ("", [], 0.0),
            ("m", ["m"], 0.01),
        )
    ]
    for scope in (None, "team", "team/agent-2", "team/agent/sub", "other"):
        view = store if scope is None else store.scope(scope)
        await view.store_many([_fresh(entry) for entry in noise])


def _fresh(entry: MemoryEntry) -> MemoryEntry:
    return dataclasses.replace(entry, id=uuid.uuid4(), tags=list(entry.tags))


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, each worker gets a PostgreSQL database of its own.

    Tests empty the database they use (:func:`reset_postgres`): two workers on one
    would empty each other's. The worker's database sits beside the configured
    one on the same server, named after it and the worker.
    """
    del config
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    url = os.environ.get(POSTGRES_URL_VARIABLE)
    if worker and url:
        os.environ[POSTGRES_URL_VARIABLE] = asyncio.run(_database_of_worker(url, worker))


async def _database_of_worker(url: str, worker: str) -> str:
    """The URL of ``url``'s database suffixed with ``worker``, created if missing."""
    given = make_url(url)
    own = f"{given.database}_{worker}"
    plain = given.set(drivername="postgresql").render_as_string(hide_password=False)
    connection = await asyncpg.connect(plain)
    try:
        found = await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", own)
        if not found:
            await connection.execute(f'CREATE DATABASE "{own}"')
    finally:
        await connection.close()
    return given.set(database=own).render_as_string(hide_password=False)


async def reset_postgres(url: str) -> None:
    """Empty every table (migrating the database first if it is new), as a fresh store is."""
    async with open_store(url) as store, store.engine.begin() as connection:
        await connection.execute(
            text(
                "TRUNCATE entries, tags, tokens, token_grams, token_blocks, entry_blocks,"
                " piece_blocks, tag_values, tag_blocks, words, word_blocks, changes, vectors,"
                " history, scopes RESTART IDENTITY CASCADE"
            )
        )
        await connection.execute(text("INSERT INTO scopes (id, name) VALUES (0, '')"))
        await connection.execute(
            text(
                "UPDATE index_state SET indexed_through = 0, removed_through = 0, generation = 0,"
                " embedder_id = NULL"
            )
        )
        await connection.execute(text("DELETE FROM embedders"))


def integrity_check(path: Path) -> list[str]:
    """What SQLite's ``PRAGMA integrity_check`` says of the file: ``["ok"]``, or its findings."""
    with contextlib.closing(sqlite3.connect(path)) as raw:
        return [row[0] for row in raw.execute("PRAGMA integrity_check")]


async def shared_target(backend: str, tmp_path: Path) -> str | Path:
    """A fresh database of one of :data:`SHARED_BACKENDS` that several stores can open."""
    if backend == "sqlite-file":
        return tmp_path / "memory.db"
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    return url


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The name of the backend under test."""
    return str(request.param)


@pytest.fixture
async def store_factory(backend: str, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """Open fresh, empty stores of the backend under test; all are closed after the test.

    For sqlite-file every store the factory opens is the same file, so a test
    can reopen it; for the others each call gives a new empty store.
    """
    opened: list[AnyStore] = []

    async def make(**options: Any) -> AnyStore:
        made: AnyStore
        database = base_backend(backend)
        if backend.endswith(SYNC):
            made = AsyncOverSync(sync.open_store(tmp_path / "memory.db", **options))
        elif database == "reference":
            options.pop("tuning", None)  # speed only: the oracle has none
            made = InMemoryStore(**options)
        elif database == "sqlite-memory":
            made = await open_store(":memory:", **options)
        elif database == "sqlite-file":
            made = await open_store(tmp_path / "memory.db", **options)
        else:
            url = os.environ[POSTGRES_URL_VARIABLE]
            if not opened:
                await reset_postgres(url)
            made = await open_store(url, **options)
        if backend.endswith(SCOPED) and isinstance(made, SqlMemoryStore):
            if not opened or database == "sqlite-memory":
                await _fill_other_scopes(made)
            made = made.scope("team/agent")
        opened.append(made)
        return made

    yield make
    for made in opened:
        await made.close()


@pytest.fixture
async def store(store_factory: StoreFactory) -> AnyStore:
    """A fresh, empty store of the backend under test."""
    return await store_factory()
