"""Nothing but SQLite opens, closes, renames or deletes a database file a store holds.

On POSIX systems, closing any descriptor of a file releases every fcntl lock
the process holds on it, SQLite's included ("How To Corrupt An SQLite
Database File", section 2.2): another process then takes the file as
unlocked, and checkpoints and resets of the write-ahead log race with writes.
These tests watch Python's own file functions while every operation runs:
the library's and the CLI's, the checks after another writer's modification,
read-only opens, and two stores of one process on one file.
"""

from __future__ import annotations

import builtins
import io
import os
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from loopctl_memory import ConsolidationConfig, MemoryCategory, MemoryEntry, MemoryFilter, sync
from loopctl_memory.cli import cli
from loopctl_memory.sql.files import held
from tests.embedders import WordsEmbedder

ROOT = Path(__file__).resolve().parents[2]
PROCESS_LOCKS = Path("/proc/locks")
NEEDS_LOCK_LIST = pytest.mark.skipif(
    not PROCESS_LOCKS.exists(), reason="the system does not list its POSIX locks (/proc/locks)"
)


class FileGuard:
    """Fails every call of Python's file functions on a database's files while watching.

    The call raises AssertionError where it is made (and is recorded, in case
    the code under test swallows the error).
    """

    def __init__(self, database: Path) -> None:
        base = os.path.realpath(database)
        self.paths = {base, *(f"{base}{suffix}" for suffix in ("-wal", "-shm", "-journal"))}
        self.watching = False
        self.calls: list[str] = []

    def identities(self) -> set[tuple[int, int]]:
        found = set()
        for path in self.paths:
            try:
                status = os.stat(path)
            except OSError:
                continue
            found.add((status.st_dev, status.st_ino))
        return found

    def named(self, what: str, path: object) -> None:
        if not self.watching or isinstance(path, int):
            return
        try:
            where = os.path.realpath(os.fsdecode(path))  # type: ignore[arg-type]
        except TypeError:
            return
        if where in self.paths:
            self._refuse(f"{what}({where})")

    def closed(self, descriptor: int) -> None:
        if not self.watching:
            return
        try:
            status = os.fstat(descriptor)
        except OSError:
            return
        if (status.st_dev, status.st_ino) in self.identities():
            self._refuse(f"os.close(a descriptor of inode {status.st_ino})")

    def _refuse(self, call: str) -> None:
        self.calls.append(call)
        raise AssertionError(f"{call} while a store of the process holds the database")

    @contextmanager
    def watch(self) -> Iterator[None]:
        self.watching = True
        try:
            yield
        finally:
            self.watching = False


@pytest.fixture
def guard(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FileGuard:
    """Python's open, os.open, os.close, unlink, rename, replace: watched on tmp_path/memory.db."""
    watched = FileGuard(tmp_path / "memory.db")

    def naming(what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def checked(path: Any, *args: Any, **kwargs: Any) -> Any:
            watched.named(what, path)
            return original(path, *args, **kwargs)

        return checked

    original_close = os.close

    def close(descriptor: int) -> None:
        watched.closed(descriptor)
        original_close(descriptor)

    monkeypatch.setattr(builtins, "open", naming("open", builtins.open))
    monkeypatch.setattr(io, "open", naming("io.open", io.open))
    for name in ("open", "unlink", "remove", "rename", "replace"):
        monkeypatch.setattr(os, name, naming(f"os.{name}", getattr(os, name)))
    monkeypatch.setattr(os, "close", close)
    return watched


def _entries(label: str, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            f"{label} {i}: deploy the agent cache",
            tags=[label],
            relevance=0.01 if i % 4 == 0 else 0.8,
        )
        for i in range(count)
    ]


def _every_operation(store: sync.SyncMemoryStore, label: str) -> None:
    """Every operation of the store, reads and writes, each at least once."""
    store.store(_entries(label, 1)[0])
    batch = _entries(f"{label}-batch", 8)
    store.store_many(batch)
    for ranking in ("reference", "bm25", "vector", "hybrid"):
        assert store.retrieve("deploy cache", 3, ranking=ranking)
    assert store.retrieve_scored("agent", 2, filter=MemoryFilter(tags_any=[label]))
    assert store.update(batch[1].id, memory=f"{label} updated", relevance=0.7) is not None
    assert store.delete(batch[2].id)
    assert store.get(batch[3].id) == batch[3]
    assert store.count() > 0
    assert store.summary().entries > 0
    assert store.scopes()
    assert list(store.iter_entries(batch_size=3))
    assert store.ids_with_prefix(batch[3].id.hex[:6])
    assert store.storage_bytes() > 0
    assert store.free_bytes() is not None
    assert store.schema_revision()
    store.embed_pending()
    assert store.pending_embeddings() == 0
    assert store.forget(below=0.05) > 0
    store.scope(f"{label}/sub").store_many(_entries(f"{label}-sub", 4))
    store.consolidate(ConsolidationConfig.full())
    store.consolidate(vacuum=True)


def _write_from_another_process(database: Path) -> None:
    code = (
        "import sys\n"
        "from loopctl_memory import MemoryCategory, MemoryEntry, sync\n"
        "with sync.open_store(sys.argv[1]) as store:\n"
        "    store.store(MemoryEntry(MemoryCategory.FACT, 'written by another process'))\n"
    )
    subprocess.run(
        [sys.executable, "-c", code, str(database)],
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
    )


def _cli(database: Path, *arguments: str) -> str:
    result = CliRunner().invoke(cli, ["--db", str(database), *arguments])
    assert 0 == result.exit_code, result.output
    return result.output


def test_no_operation_touches_the_database_files_outside_sqlite(tmp_path, guard):
    database = tmp_path / "memory.db"
    with sync.open_store(database, embedder=WordsEmbedder()) as first:
        first.store_many(_entries("seed", 20))
        with guard.watch():
            _every_operation(first, "first")
            with sync.open_store(database, embedder=WordsEmbedder()) as second:
                second.store(_entries("second", 1)[0])  # a modification the first did not make
                _every_operation(first, "after-second")  # its writes check the header first
                _every_operation(second, "second")
            with sync.open_store(database, read_only=True) as reader:
                assert reader.retrieve("deploy", 5, ranking="bm25")
                assert reader.count() == first.count()
            _write_from_another_process(database)
            _every_operation(first, "after-another-process")
            added = _cli(database, "add", "from the command line", "-c", "fact").strip()
            assert "from the command line" in _cli(database, "search", "command line")
            assert "from the command line" in _cli(database, "get", added)
            assert "size" in _cli(database, "stats")
            _cli(database, "export", "-o", str(tmp_path / "all.jsonl"))
            _cli(database, "import", str(tmp_path / "all.jsonl"), "--on-duplicate", "skip")
            _cli(database, "update", added, "--relevance", "0.01")
            _cli(database, "consolidate", "--yes")
            _cli(database, "--read-only", "scopes")
            assert first.count() > 0
    assert [] == guard.calls


def _locks_on(database: Path) -> int:
    """How many POSIX locks this process holds on the file (its device and inode)."""
    status = os.stat(database)
    me = str(os.getpid())
    file = f"{os.major(status.st_dev):02x}:{os.minor(status.st_dev):02x}:{status.st_ino}"
    return sum(
        1
        for line in PROCESS_LOCKS.read_text().splitlines()
        if line.split()[1:2] == ["POSIX"] and line.split()[4:6] == [me, file]
    )


@NEEDS_LOCK_LIST
def test_a_store_closing_leaves_the_locks_of_another_store_of_the_process(tmp_path):
    database = tmp_path / "memory.db"
    with sync.open_store(database) as first:
        first.store_many(_entries("seed", 10))
        with sync.open_store(database) as second:
            second.store(_entries("second", 1)[0])
            first.store(_entries("first", 1)[0])  # checks the header after the second's write
            assert first.count() == 12  # a read: its connection keeps SQLite's shared lock
            assert _locks_on(database) > 0
        assert _locks_on(database) > 0, "closing the second store dropped the first's locks"
        assert first.count() == 12
    assert 0 == _locks_on(database)


@NEEDS_LOCK_LIST
def test_the_last_store_closing_leaves_the_descriptor_to_a_connection_still_locking(tmp_path):
    """The caller's own SQLite connection to the file keeps its lock when the last store closes;
    the descriptor is closed at the next open or close once that connection is gone."""
    database = tmp_path / "memory.db"
    before = held.held_count()
    with sync.open_store(database) as store:
        store.store_many(_entries("seed", 3))
        assert before + 1 == held.held_count()
        own = sqlite3.connect(database)
        assert [(3,)] == own.execute("SELECT count(*) FROM entries").fetchall()
    try:
        assert _locks_on(database) > 0, "the store's close dropped the caller's lock"
        assert before + 1 == held.held_count()
        with sync.open_store(database, read_only=True) as reader:  # shares the kept descriptor
            assert 3 == reader.count()
    finally:
        own.close()
    with sync.open_store(tmp_path / "other.db"):
        pass
    assert before == held.held_count()


def test_stores_of_one_process_share_one_descriptor_until_the_last_closes(tmp_path):
    database = tmp_path / "memory.db"
    before = held.held_count()
    first = sync.open_store(database)
    try:
        second = sync.open_store(str(database.parent / "." / "memory.db"))
        with second, sync.open_store(database, read_only=True):
            assert before + 1 == held.held_count()
        assert before + 1 == held.held_count()
        first.store(_entries("after", 1)[0])
    finally:
        first.close()
    assert before == held.held_count()


def test_a_store_that_fails_to_open_lets_go_of_the_file(tmp_path):
    database = tmp_path / "memory.db"
    database.write_bytes(b"not a database at all" * 400)
    before = held.held_count()
    with pytest.raises(Exception, match="not a database"):
        sync.open_store(database)
    assert before == held.held_count()
