"""Fixtures for the command line: an isolated environment, a database path, and a runner."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from loopctl_memory import MemoryEntry, open_store
from loopctl_memory.cli import DB_ENVVAR, RANKING_ENVVAR, cli
from loopctl_memory.names import EMBEDDER_ENVVAR

Invoke = Callable[..., Result]


@pytest.fixture(autouse=True)
def isolated_environment(tmp_path, monkeypatch):
    """No test sees the user's database or ranking variable or writes to their data directory."""
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    monkeypatch.delenv(RANKING_ENVVAR, raising=False)
    monkeypatch.delenv(EMBEDDER_ENVVAR, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "home" / "data"))
    monkeypatch.setenv("COLUMNS", "100")


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """Where a test's database file goes (not created)."""
    return tmp_path / "memory.db"


@pytest.fixture
def invoke() -> Invoke:
    """Run the CLI in-process: invoke("--db", path, "add", ...)."""
    runner = CliRunner()

    def run(*args: object, input: str | None = None) -> Result:
        return runner.invoke(cli, [str(arg) for arg in args], input=input)

    return run


@pytest.fixture
def on_db(invoke: Invoke, db: Path) -> Invoke:
    """Run the CLI on the test's database: on_db("search", "x")."""

    def run(*args: object, input: str | None = None) -> Result:
        return invoke("--db", db, *args, input=input)

    return run


def json_score(score: float, ranking: str = "reference") -> float:
    """What ``search --json`` prints for a score the library gave: a binary32 score
    (reference, vector) as the shortest decimal that reads back as it, a binary64
    one (bm25, hybrid) whole."""
    if ranking in {"bm25", "hybrid"}:
        return score
    single = np.float32(score)
    assert float(single) == score, "a binary32 ranking gave a score that is not binary32"
    return next(
        float(text)
        for text in (f"{score:.{digits}g}" for digits in range(1, 10))
        if np.float32(float(text)) == single
    )


def store_entries(target: Path | str, entries: Sequence[MemoryEntry]) -> None:
    """Store entries with the library, as an agent would have."""

    async def work() -> None:
        async with open_store(target) as store:
            await store.store_many(entries)

    asyncio.run(work())


def stored_entries(target: Path | str) -> list[MemoryEntry]:
    """Every entry in the database, in insertion order, read with the library."""

    async def work() -> list[MemoryEntry]:
        async with open_store(target, migrate=False) as store:
            return [entry async for entry in store.iter_entries()]

    return asyncio.run(work())


def assert_fails(result: Result, exit_code: int, *fragments: str) -> str:
    """The command failed with one ``Error:`` line on stderr, no traceback; return that line."""
    assert exit_code == result.exit_code, result.output
    assert isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: ")
    for fragment in fragments:
        assert fragment in line
    return line
