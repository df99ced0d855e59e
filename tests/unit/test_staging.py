"""Staged batches: the import's parser writes each batch to a file, a SQLite store copies it."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import sqlite3
import tempfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import event

from loopctl_memory import DuplicateEntryError, MemoryCategory, MemoryEntry, open_store, staging
from loopctl_memory.cli import cli
from loopctl_memory.flat import FlatBatch, flatten
from loopctl_memory.jsonl import entry_to_json
from loopctl_memory.jsonl_batches import Batches, parsed_batches, read_batches
from loopctl_memory.sql.engine import REBASED
from loopctl_memory.staging import ALIAS, write_stage
from tests.unit.test_fast_import import (
    NEEDS_TWO_CORES,
    index_entries,
    read_index,
    search_all,
    varied_lines,
    write_lines,
)

TABLES = {
    "entries": "seq",
    "tags": "entry_seq, position",
    "tokens": "id",
    "postings": "token_id, block",
    "tag_values": "id",
    "tag_postings": "value_id, block",
    "index_state": "id",
}


def digest(path: Path) -> dict[str, str]:
    """Every row of every table, hashed with its values' SQLite types."""
    found = {}
    with contextlib.closing(sqlite3.connect(path)) as db:
        for table, order in TABLES.items():
            columns = [row[1] for row in db.execute(f"PRAGMA table_info({table})")]
            typed = ", ".join(f"{name}, typeof({name})" for name in columns)
            rows = db.execute(f"SELECT {typed} FROM {table} ORDER BY {order}")  # noqa: S608
            found[table] = hashlib.sha256(repr(rows.fetchall()).encode()).hexdigest()
    return found


def staged_copy(batch: FlatBatch, path: Path, origin: int = 0) -> FlatBatch:
    """The batch as the import's parser sends it: rows and postings in a stage file."""
    return FlatBatch([], [], staged=write_stage(path, batch, origin))


def stage_terms(path: str | Path) -> tuple[list[Any], list[Any]]:
    """The token and tag term rows of a stage file, in the order the store reads them."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        return (
            db.execute("SELECT * FROM tokens ORDER BY rowid").fetchall(),
            db.execute("SELECT * FROM tag_values ORDER BY rowid").fetchall(),
        )


def test_a_stage_file_holds_the_batch_rows_as_they_are(tmp_path):
    lines = varied_lines(500, seed=3)
    [parsed] = list(read_batches(iter(lines), 1_000))
    batch = parsed.entries
    staged = write_stage(tmp_path / "stage.db", batch)
    assert (str(tmp_path / "stage.db"), len(batch)) == (staged.path, staged.entries)
    with contextlib.closing(sqlite3.connect(staged.path)) as db:
        entries = db.execute("SELECT * FROM entries ORDER BY number").fetchall()
        tags = db.execute("SELECT * FROM tags ORDER BY rowid").fetchall()  # as the copy reads
        kinds = db.execute("SELECT DISTINCT typeof(relevance), typeof(memory) FROM entries")
        assert [("real", "text")] == kinds.fetchall()
        assert [(staging.PAGE_SIZE,)] == db.execute("PRAGMA page_size").fetchall()
    assert batch.entries == entries  # NUL characters, -0.0 and non-ASCII text included
    assert batch.tags == tags
    assert sorted(tags) == tags
    tokens, tag_values = stage_terms(staged.path)
    assert batch.token_postings().rows() == tokens
    assert batch.tag_postings().rows() == tag_values
    assert sorted(tokens) == tokens
    assert len(tokens) > 20
    assert any("\x00" in term for term, _, _ in tokens)  # a NUL kept, not cut short


@pytest.mark.parametrize("rows_per_insert", [1, 7, 500])
def test_a_stage_file_keeps_the_rows_in_order_across_its_inserts(
    tmp_path, monkeypatch, rows_per_insert
):
    monkeypatch.setattr(staging, "ROWS_PER_INSERT", rows_per_insert)
    [parsed] = list(read_batches(iter(varied_lines(300, seed=5)), 1_000))
    batch = parsed.entries
    assert len(batch.tags) % 7, "a last, shorter insert of tags"
    with contextlib.closing(sqlite3.connect(write_stage(tmp_path / "stage.db", batch).path)) as db:
        assert batch.entries == db.execute("SELECT * FROM entries ORDER BY number").fetchall()
        assert batch.tags == db.execute("SELECT * FROM tags ORDER BY rowid").fetchall()


def test_staging_binds_no_more_values_a_statement_than_sqlite_allows():
    rows = [(number, 0, f"tag {number}", f"tag {number}") for number in range(5)]
    with contextlib.closing(sqlite3.connect(":memory:")) as db:
        db.execute("CREATE TABLE tags (number, position, tag, tag_lower)")
        db.setlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER, 10)  # as old SQLite's 999, in small
        staging._insert_all(db, "tags", rows, 4)  # two rows an insert, then one
        assert rows == db.execute("SELECT * FROM tags ORDER BY rowid").fetchall()


@pytest.mark.parametrize(
    "sizes",
    [
        pytest.param((4_000, 10_000, 11_000), id="indexed with and without a tail read back"),
        pytest.param((3_000,), id="left in the tail"),
    ],
)
@pytest.mark.parametrize(
    "guess",
    [
        pytest.param(None, id="numbered from 0"),
        pytest.param(0, id="numbered by seq"),
        pytest.param(5, id="numbered from above its seqs"),
        pytest.param(-1, id="numbered from below its seqs"),
    ],
)
async def test_a_staged_batch_is_stored_exactly_as_its_rows(tmp_path, sizes, guess):
    made = index_entries()
    rows_path, staged_path = tmp_path / "rows.db", tmp_path / "staged.db"
    async with open_store(rows_path) as rows, open_store(staged_path) as staged:
        start = 0
        for number, size in enumerate(sizes):
            batch = flatten(made[start : start + size])
            origin = 0 if guess is None else start + 1 + guess  # its first seq is start + 1
            start += size
            await rows.store_flat(batch)
            await staged.store_flat(staged_copy(batch, tmp_path / f"{number}.db", origin))
        assert start == await staged.count()
        assert await search_all(rows) == await search_all(staged)
    assert digest(rows_path) == digest(staged_path)
    read_index(staged_path)  # the postings are the entries' tokens and tags


async def test_a_staged_batch_after_a_deleted_tail_is_stored_exactly_as_its_rows(tmp_path):
    """Nothing to read back: the batch takes the deleted entries' seqs and its own block."""
    made = index_entries()
    rows_path, staged_path = tmp_path / "rows.db", tmp_path / "staged.db"
    async with open_store(rows_path) as rows, open_store(staged_path) as staged:
        for store in (rows, staged):
            await store.store_many(made[:5])  # left unindexed, then gone
            for entry in made[:5]:
                assert await store.delete(entry.id)
        batch = flatten(made[5:10_005])  # past TAIL_LIMIT: indexed in its transaction
        await rows.store_flat(batch)
        await staged.store_flat(staged_copy(batch, tmp_path / "stage.db"))
        assert await search_all(rows) == await search_all(staged)
    assert digest(rows_path) == digest(staged_path)
    with contextlib.closing(sqlite3.connect(staged_path)) as db:
        assert [(1,)] == db.execute("SELECT DISTINCT block FROM postings").fetchall()
        assert (1, 10_000) == db.execute("SELECT min(seq), max(seq) FROM entries").fetchone()
    read_index(staged_path)


async def test_a_staged_batch_after_a_tail_without_terms_is_stored_exactly_as_its_rows(tmp_path):
    """Older entries with no tokens or tags share the block, which starts below the batch."""
    blank = [MemoryEntry(MemoryCategory.FACT, " \t ") for _ in range(3)]
    made = index_entries()[:10_000]
    rows_path, staged_path = tmp_path / "rows.db", tmp_path / "staged.db"
    async with open_store(rows_path) as rows, open_store(staged_path) as staged:
        await rows.store_many(blank)
        await staged.store_many(blank)
        await rows.store_flat(flatten(made))
        await staged.store_flat(staged_copy(flatten(made), tmp_path / "stage.db"))
        assert await search_all(rows) == await search_all(staged)
    assert digest(rows_path) == digest(staged_path)
    with contextlib.closing(sqlite3.connect(staged_path)) as db:
        assert [(1,)] == db.execute("SELECT DISTINCT block FROM postings").fetchall()
        assert (10_003,) == db.execute("SELECT indexed_through FROM index_state").fetchone()
    read_index(staged_path)


async def test_a_staged_batch_numbered_by_its_seqs_is_copied_without_calling_python(tmp_path):
    statements: list[str] = []
    made = index_entries()[:20_000]
    async with open_store(tmp_path / "memory.db") as store:

        @event.listens_for(store.engine.sync_engine, "before_cursor_execute")
        def record(_connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
            statements.append(statement)

        await store.store_flat(staged_copy(flatten(made[:10_000]), tmp_path / "a.db", 1))
        told = [statement for statement in statements if REBASED in statement]
        await store.store_flat(staged_copy(flatten(made[10_000:]), tmp_path / "b.db", 10_002))
        guessed_wrong = [statement for statement in statements if REBASED in statement]
    assert [] == told
    assert 2 == len(guessed_wrong)  # tokens and tags, shifted by SQLite calling rebased
    read_index(tmp_path / "memory.db")


def test_a_staged_batch_has_no_postings_to_compute(tmp_path):
    batch = flatten([MemoryEntry(MemoryCategory.FACT, "some words", tags=["t"])])
    staged = staged_copy(batch, tmp_path / "stage.db")
    with pytest.raises(ValueError, match="stage file"):
        staged.token_postings()
    with pytest.raises(ValueError, match="stage file"):
        staged.tag_postings()


async def test_the_stage_is_detached_after_a_batch_stored_or_refused(tmp_path):
    made = [MemoryEntry(MemoryCategory.FACT, f"memory {n}", tags=["t"]) for n in range(30)]
    async with open_store(tmp_path / "memory.db") as store:
        await store.store_flat(staged_copy(flatten(made[:10]), tmp_path / "a.db"))
        clash = flatten([*made[10:15], made[3]])  # an id already stored
        with pytest.raises(DuplicateEntryError):
            await store.store_flat(staged_copy(clash, tmp_path / "b.db"))
        assert 10 == await store.count()  # nothing of the refused batch
        # The same alias again: only possible if each batch detached its file.
        await store.store_flat(staged_copy(flatten(made[10:30]), tmp_path / "c.db"))
        assert [e.id for e in made] == [e.id async for e in store.iter_entries()]
        async with store.engine.connect() as connection:
            attached = await connection.exec_driver_sql("PRAGMA database_list")
            assert ALIAS not in [str(row.name) for row in attached]


@NEEDS_TWO_CORES
def test_the_parser_stages_every_batch_but_one_whose_ids_repeat(tmp_path):
    lines = varied_lines(2_000, seed=4)
    at = next(i for i in range(600, len(lines)) if lines[i].strip())
    lines.insert(at + 1, lines[at])  # the same entry twice in a row, so in one batch
    source = write_lines(tmp_path / "in.jsonl", lines)
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    expected = list(read_batches(iter(lines), 300, tokens=True))
    with source.open("rb") as stream, parsed_batches(stream, 300, stage_dir) as batches:
        received = list(batches)
    assert [b.first_line for b in expected] == [b.first_line for b in received]
    unique = [batch.entries.has_unique_ids() for batch in expected]
    assert 1 == unique.count(False)
    assert unique == [batch.entries.staged is not None for batch in received]
    repeated = unique.index(False)
    assert expected[repeated].entries.entries == received[repeated].entries.entries
    for want, got in zip(expected, received, strict=True):
        assert (want.last_line, want.consumed, len(want.entries)) == (
            got.last_line,
            got.consumed,
            len(got.entries),
        )
        if got.entries.staged is None:
            assert want.entries.tokens == got.entries.tokens
            assert want.entries.tag_values == got.entries.tag_values
        else:  # the postings are in the stage file, not sent
            assert (None, None) == (got.entries.tokens, got.entries.tag_values)
            tokens, tag_values = stage_terms(got.entries.staged.path)
            assert want.entries.token_postings().rows() == tokens
            assert want.entries.tag_postings().rows() == tag_values
    assert len(received) - 1 == len(list(stage_dir.iterdir()))


@NEEDS_TWO_CORES
@pytest.mark.parametrize("first_seq", [None, 0, 1, 12_345])
def test_the_parser_numbers_staged_postings_from_the_seq_it_is_told(tmp_path, first_seq):
    lines = varied_lines(2_000, seed=6)  # blank lines too: batches count entries
    source = write_lines(tmp_path / "in.jsonl", lines)
    stage_dir = tmp_path / "stage"
    stage_dir.mkdir()
    expected = list(read_batches(iter(lines), 300, tokens=True))
    with source.open("rb") as stream, parsed_batches(stream, 300, stage_dir) as batches:
        if first_seq is not None:
            batches.start_at(first_seq)
        received = list(batches)
        batches.start_at(99)  # too late: nothing changes, nothing fails
    assert len(expected) == len(received) > 4
    before = 0
    for want, got in zip(expected, received, strict=True):
        staged = got.entries.staged
        assert staged is not None
        origin = first_seq + before if first_seq else 0
        assert origin == staged.origin
        tokens, tag_values = stage_terms(staged.path)
        assert want.entries.token_postings().rows(origin) == tokens
        assert want.entries.tag_postings().rows(origin) == tag_values
        before += len(want.entries)


@pytest.fixture
def scratch(tmp_path, monkeypatch) -> Path:
    """The temporary directory the import stages its batches under."""
    place: Path = tmp_path / "tmp"
    place.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(place))
    return place


@NEEDS_TWO_CORES
@pytest.mark.parametrize("bad_line", [None, 2_500])
def test_an_import_leaves_no_stage_files(tmp_path, scratch, bad_line):
    made = [MemoryEntry(MemoryCategory.FACT, f"memory {n}") for n in range(3_000)]
    lines = [entry_to_json(entry) for entry in made]
    if bad_line is not None:
        lines[bad_line - 1] = "{not json"
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["--db", str(tmp_path / "memory.db"), "import", "--batch-size", "1000", str(source)]
    result = CliRunner().invoke(cli, args)
    assert (0 if bad_line is None else 1) == result.exit_code, result.output
    assert [] == list(scratch.iterdir())


@NEEDS_TWO_CORES
@pytest.mark.parametrize("batch_size", [5_000, 10_000])
@pytest.mark.parametrize("held", [0, 7], ids=["into an empty store", "after entries stored"])
def test_a_staged_import_matches_an_import_of_rows(
    tmp_path, scratch, monkeypatch, batch_size, held
):
    told: list[int] = []
    tell = Batches.start_at

    def start_at(self: Batches, seq: int) -> None:
        told.append(seq)
        tell(self, seq)

    monkeypatch.setattr(Batches, "start_at", start_at)
    made = index_entries()
    imported, earlier = made[:21_000], made[21_000 : 21_000 + held]
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"".join(entry_to_json(e).encode() + b"\n" for e in imported))
    staged_db, rows_db = tmp_path / "staged.db", tmp_path / "rows.db"

    async def store_earlier(path: Path) -> None:
        async with open_store(path) as store:
            await store.store_many(earlier)

    asyncio.run(store_earlier(staged_db))
    args = ["import", "--batch-size", str(batch_size), str(source)]
    result = CliRunner().invoke(cli, ["--db", str(staged_db), *args])
    assert 0 == result.exit_code, result.output

    async def store_rows() -> None:
        async with open_store(rows_db) as store:
            await store.store_many(earlier)
            for batch in read_batches(io.BytesIO(source.read_bytes()), batch_size):
                await store.store_flat(batch.entries)

    asyncio.run(store_rows())
    assert digest(rows_db) == digest(staged_db)
    read_index(staged_db)
    assert [held + 1] == told  # the parsers numbered the postings by seq
