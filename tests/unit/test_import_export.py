"""import_jsonl and export_jsonl: backups in the library, without the command line."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest

from loopctl_memory import (
    DuplicateEntryError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
)
from loopctl_memory.entry_json import entry_to_json
from loopctl_memory.jsonl import ImportFailedError, LineError, export_jsonl, import_jsonl


def entries(count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            f"entry {n} ä 🦀",
            tags=[f"t{n % 3}"] * (n % 2),
            relevance=n / count,
            id=uuid.UUID(int=n + 1),
        )
        for n in range(count)
    ]


def lines(made: list[MemoryEntry]) -> bytes:
    return b"".join(entry_to_json(entry).encode() + b"\n" for entry in made)


async def test_an_export_imports_into_the_same_entries_and_exports_the_same_bytes(tmp_path):
    made = entries(25)
    async with open_store(":memory:") as source:
        await source.store_many(made)
        assert 25 == await export_jsonl(source, tmp_path / "backup.jsonl")
    data = (tmp_path / "backup.jsonl").read_bytes()
    assert lines(made) == data
    progress: list[tuple[int, int]] = []
    async with open_store(tmp_path / "copy.db") as copy:
        report = await import_jsonl(
            copy,
            tmp_path / "backup.jsonl",
            batch_size=10,
            on_progress=lambda stored, read: progress.append((stored, read)),
        )
        assert (25, 3) == (report.entries, report.batches)
        assert report.elapsed >= 0
        assert [10, 20, 25] == [stored for stored, _ in progress]
        assert len(data) == sum(read for _, read in progress)
        assert made == [entry async for entry in copy.iter_entries()]
        stream = io.BytesIO()
        assert 25 == await export_jsonl(copy, stream)
    assert data == stream.getvalue()


async def test_a_bad_line_stops_the_import_after_the_batches_before_it():
    data = lines(entries(7)).split(b"\n")
    data[5] = b'{"id": "not even json'
    async with open_store(":memory:") as store:
        with pytest.raises(ImportFailedError) as caught:
            await import_jsonl(store, io.BytesIO(b"\n".join(data)), batch_size=2)
        assert 4 == await store.count()
    error = caught.value
    assert (6, 5, 4) == (error.lines, error.resume_line, error.imported)
    assert isinstance(error.__cause__, LineError)
    assert str(error).startswith("line 6: not valid JSON")
    assert str(error).endswith("the 4 entries before line 5 were imported, none from it on")


async def test_a_refused_batch_names_its_lines_and_stores_nothing_of_it():
    made = entries(3)
    async with open_store(":memory:") as store:
        await store.store(made[2])
        with pytest.raises(ImportFailedError) as caught:
            await import_jsonl(store, io.BytesIO(lines(made)), batch_size=2)
        assert [made[2], made[0], made[1]] == [e async for e in store.iter_entries()]
    error = caught.value
    assert ((3, 3), 3, 2) == (error.lines, error.resume_line, error.imported)
    assert isinstance(error.__cause__, DuplicateEntryError)
    assert "lines 3-3" in str(error)


async def test_nothing_imported_says_so():
    async with open_store(":memory:") as store:
        with pytest.raises(ImportFailedError, match=r"; nothing was imported$"):
            await import_jsonl(store, io.BytesIO(b"[]\n"))
        with pytest.raises(InvalidEntryError, match="batch_size"):
            await import_jsonl(store, io.BytesIO(b""), batch_size=0)
        assert 0 == (await import_jsonl(store, io.BytesIO(b"\n\n"))).entries


async def test_a_failed_export_to_a_path_leaves_no_file(tmp_path: Path):
    async with open_store(":memory:") as store:
        await store.store_many(entries(3))
        await store.close()
        with pytest.raises(StorageError, match="closed"):
            await export_jsonl(store, tmp_path / "out.jsonl")
    assert not (tmp_path / "out.jsonl").exists()
    assert not (tmp_path / ".out.jsonl.partial").exists()
