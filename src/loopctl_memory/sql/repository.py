"""The repository: MemoryEntry to rows and back, and every query the store runs.

Each function runs on a connection inside a transaction the store opened; none
of them commits. Scores are never computed here: the database narrows the
candidates and ``loopctl_memory.scoring`` ranks them.
"""

from __future__ import annotations

import functools
import sqlite3
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import and_, case, column, delete, func, select, table
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import staging
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.errors import DuplicateEntryError, StorageError
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatBatch, Staged, flatten
from loopctl_memory.scoring import PRUNE_THRESHOLD, ParsedQuery
from loopctl_memory.sql import index, search
from loopctl_memory.sql.engine import outside_transaction
from loopctl_memory.sql.tables import entries, metadata, tags

# Keeps IN (...) lists under SQLite's limit on bound parameters (32766).
_IDS_PER_STATEMENT = 10_000

# Inserts go to the driver's executemany directly, with rows as tuples: SQLAlchemy's
# per-row parameter processing cost more than the database's work.
_ENTRY_FIELDS = ("seq", *staging.ENTRY_COLUMNS)
_TAG_FIELDS = ("entry_seq", *staging.TAG_COLUMNS)


@functools.lru_cache(maxsize=16)
def _insert_sql(paramstyle: str, first_seq: int | None = None) -> tuple[str, str]:
    """The entries and tags INSERT statements in the driver's parameter style.

    ``first_seq``: each row's first value is its index in the batch, and the
    statements add ``first_seq`` to it, so that the batch's tuples go to the
    driver as they are. Otherwise the first value is the seq itself.
    """

    def insert(table: str, fields: tuple[str, ...]) -> str:
        # Only our own column names and an int are formatted in; every value is a parameter.
        values = ["?"] * len(fields)
        if first_seq is not None:
            values[0] = f"? + {int(first_seq)}"
        statement = f"INSERT INTO {table} ({', '.join(fields)}) VALUES ({', '.join(values)})"  # noqa: S608
        return index.placeholders(statement, paramstyle)

    return insert("entries", _ENTRY_FIELDS), insert("tags", _TAG_FIELDS)


_ENTRY_COLUMNS = (
    entries.c.seq,
    entries.c.id,
    entries.c.category,
    entries.c.memory,
    entries.c.relevance,
    entries.c.created_at_us,
    entries.c.access_count,
    entries.c.validated,
)


# --- writing ---------------------------------------------------------------


def _native_rows(
    batch: FlatBatch, first_seq: int
) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Entry rows and tag rows numbered from ``first_seq``, as asyncpg takes them.

    The driver takes a UUID and a bool, and text goes in as UTF-8 bytes (see
    :class:`~loopctl_memory.sql.text.Utf8Text`).
    """
    entry_rows = [
        (
            first_seq + offset,
            uuid.UUID(hex=hex_id),
            category,
            memory.encode(),
            memory_lower.encode(),
            relevance,
            created_at_us,
            access_count,
            bool(validated),
        )
        for (
            offset,
            hex_id,
            category,
            memory,
            memory_lower,
            relevance,
            created_at_us,
            access_count,
            validated,
        ) in batch.entries
    ]
    tag_rows = [
        (first_seq + offset, position, tag.encode(), tag_lower.encode())
        for offset, position, tag, tag_lower in batch.tags
    ]
    return entry_rows, tag_rows


async def insert_entries(connection: AsyncConnection, batch: FlatBatch) -> None:
    """Insert checked entries in order, then index a long tail.

    The rows go in with one executemany per table, or, for a staged batch (SQLite
    only), with one ``INSERT ... SELECT`` per table from the attached stage file;
    :func:`detach_stage` must run once the transaction is over.

    Raises:
        DuplicateEntryError: two entries of the batch share an id (a clash with a
            stored entry surfaces from the database as the same error).
        StorageError: a staged batch given to a database other than SQLite.

    """
    if batch.staged is None and not batch.has_unique_ids():
        raise DuplicateEntryError("the batch holds two entries with the same id")
    position = await connection.run_sync(index.write_position)
    if batch.staged is not None:
        await _copy_staged(connection, batch.staged, position.next_seq)
    else:
        await _insert_rows(connection, batch, position.next_seq)
    if position.tail_after(len(batch)) >= index.TAIL_LIMIT:
        fresh = index.Fresh(position.next_seq, batch)
        await connection.run_sync(index.index_tail, fresh)


async def next_seq(connection: AsyncConnection) -> int:
    """The seq the next stored entry gets, unless another write comes first."""
    position = await connection.run_sync(index.write_position)
    return position.next_seq


async def _insert_rows(connection: AsyncConnection, batch: FlatBatch, first_seq: int) -> None:
    dialect = connection.dialect
    if dialect.name == "sqlite":  # SQLite takes the batch's tuples as they are
        entry_sql, tag_sql = _insert_sql(dialect.paramstyle, first_seq)
        entry_rows: list[Any] = batch.entries
        tag_rows: list[Any] = batch.tags
    else:
        entry_sql, tag_sql = _insert_sql(dialect.paramstyle)
        entry_rows, tag_rows = _native_rows(batch, first_seq)
    await connection.exec_driver_sql(entry_sql, entry_rows)
    if tag_rows:
        await connection.exec_driver_sql(tag_sql, tag_rows)


async def _copy_staged(connection: AsyncConnection, staged: Staged, first_seq: int) -> None:
    if connection.dialect.name != "sqlite":
        raise StorageError("a staged batch can only be stored in SQLite; pass the rows instead")
    stage = staging.ALIAS
    fields = ", ".join(staging.ENTRY_COLUMNS)
    tag_fields = ", ".join(staging.TAG_COLUMNS)
    # Only our own names are formatted in; the path and the first seq are parameters.
    await connection.exec_driver_sql(f"ATTACH ? AS {stage}", (staged.path,))
    await connection.exec_driver_sql(
        f"INSERT INTO entries (seq, {fields}) "  # noqa: S608
        f"SELECT number + ?, {fields} FROM {stage}.entries ORDER BY number",
        (first_seq,),
    )
    await connection.exec_driver_sql(
        f"INSERT INTO tags (entry_seq, {tag_fields}) "  # noqa: S608
        f"SELECT number + ?, {tag_fields} FROM {stage}.tags ORDER BY rowid",
        (first_seq,),
    )


async def detach_stage(connection: AsyncConnection) -> None:
    """Detach a stage file if one is attached: outside any transaction, as SQLite requires."""
    await connection.run_sync(_detach_stage)


def _detach_stage(connection: Connection) -> None:
    if connection.dialect.name != "sqlite":
        return  # nothing was attached: _copy_staged refused the batch
    attached = outside_transaction(connection, "PRAGMA database_list")
    if any(row[1] == staging.ALIAS for row in attached):
        outside_transaction(connection, f"DETACH {staging.ALIAS}")


@functools.cache
def _insert_one_sql() -> str:
    # The seq comes from the statement itself (above every entry and the watermark),
    # so one entry is one round trip; the driver reports it as lastrowid.
    columns = ", ".join(_ENTRY_FIELDS)
    values = ", ".join(["?"] * (len(_ENTRY_FIELDS) - 1))
    next_seq = (
        "(SELECT max(coalesce(max(seq), 0), "
        "coalesce((SELECT indexed_through FROM index_state), 0)) + 1 FROM entries)"
    )
    return f"INSERT INTO entries ({columns}) VALUES ({next_seq}, {values})"  # noqa: S608


async def insert_one_sqlite(driver: Any, entry: MemoryEntry) -> int:
    """Store one checked entry on a raw aiosqlite connection in its own transaction; its seq.

    The single-store fast path: ``BEGIN IMMEDIATE``, the entry, its tags and
    ``COMMIT`` run as one call in the driver's thread where aiosqlite allows
    it (one hop instead of four: the hops are most of a single store's time),
    else as four awaited calls. Either way all of it commits or none of it.
    """
    flat = flatten((entry,))
    entry_row, tag_rows = flat.entries[0], flat.tags
    run_in_thread = getattr(driver, "_execute", None)  # aiosqlite's own; not public API
    if run_in_thread is not None and hasattr(driver, "_conn"):
        seq: int = await run_in_thread(_insert_one_blocking, driver._conn, entry_row, tag_rows)
        return seq
    await driver.execute("BEGIN IMMEDIATE")
    try:
        cursor = await driver.execute(_insert_one_sql(), entry_row[1:])
        seq = int(cursor.lastrowid)
        if tag_rows:
            _, tag_sql = _insert_sql("qmark")
            await driver.executemany(tag_sql, [(seq, *row[1:]) for row in tag_rows])
        await driver.execute("COMMIT")
    except BaseException:
        if driver.in_transaction:
            await driver.execute("ROLLBACK")
        raise
    return seq


def _insert_one_blocking(
    connection: sqlite3.Connection, entry_row: tuple[Any, ...], tag_rows: list[tuple[Any, ...]]
) -> int:
    connection.execute("BEGIN IMMEDIATE")
    try:
        seq = connection.execute(_insert_one_sql(), entry_row[1:]).lastrowid
        if tag_rows:
            _, tag_sql = _insert_sql("qmark")
            connection.executemany(tag_sql, [(seq, *row[1:]) for row in tag_rows])
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    return int(seq or 0)


async def delete_entry(connection: AsyncConnection, entry_id: uuid.UUID) -> bool:
    """Delete one entry (its tags cascade); return whether it existed."""
    result = await connection.execute(delete(entries).where(entries.c.id == entry_id))
    return bool(result.rowcount)


async def prune(connection: AsyncConnection) -> int:
    """Delete every entry whose relevance, as binary32, is below 0.05; return how many."""
    result = await connection.execute(delete(entries).where(entries.c.relevance < PRUNE_THRESHOLD))
    return int(result.rowcount)


async def count(connection: AsyncConnection) -> int:
    """The number of stored entries."""
    return int((await connection.execute(select(func.count()).select_from(entries))).scalar_one())


async def get_entry(connection: AsyncConnection, entry_id: uuid.UUID) -> MemoryEntry | None:
    """The entry with this id, or None."""
    row = (
        await connection.execute(select(*_ENTRY_COLUMNS).where(entries.c.id == entry_id))
    ).one_or_none()
    if row is None:
        return None
    found = await _load(connection, [row.seq], rows=[row])
    return found[row.seq]


async def page(
    connection: AsyncConnection, after_seq: int, size: int
) -> list[tuple[int, MemoryEntry]]:
    """Up to ``size`` entries stored after insertion number ``after_seq``, in insertion order."""
    rows = (
        await connection.execute(
            select(*_ENTRY_COLUMNS)
            .where(entries.c.seq > after_seq)
            .order_by(entries.c.seq)
            .limit(size)
        )
    ).all()
    found = await _load(connection, [row.seq for row in rows], rows=rows)
    return [(row.seq, found[row.seq]) for row in rows]


@dataclass(frozen=True, slots=True)
class Summary:
    """What a store holds, in numbers."""

    entries: int
    by_category: dict[MemoryCategory, int]
    relevance_histogram: list[int]
    """Counts in ten bins of width 0.1: [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]."""


async def summarise(connection: AsyncConnection) -> Summary:
    """Count the entries, by category and by relevance bin, in two statements."""
    by_category = dict.fromkeys(MemoryCategory, 0)
    grouped = await connection.execute(
        select(entries.c.category, func.count()).group_by(entries.c.category)
    )
    for category, number in grouped:
        by_category[MemoryCategory(category)] = number
    relevance = entries.c.relevance
    bins = [
        func.coalesce(
            func.sum(case((and_(relevance >= low / 10, relevance < (low + 1) / 10), 1), else_=0)),
            0,
        )
        for low in range(9)
    ]
    bins.append(func.coalesce(func.sum(case((relevance >= 0.9, 1), else_=0)), 0))
    histogram = [int(n) for n in (await connection.execute(select(*bins))).one()]
    return Summary(sum(by_category.values()), by_category, histogram)


async def storage_bytes(connection: AsyncConnection) -> int:
    """Bytes the store's tables and indexes take in the database."""
    if connection.dialect.name == "postgresql":
        total = func.coalesce(func.sum(func.pg_total_relation_size(_pg_class.c.oid)), 0)
        statement = select(total).where(
            _pg_class.c.relkind == "r",
            _pg_class.c.relname.in_([*metadata.tables, "alembic_version"]),
            _pg_class.c.relnamespace
            == select(_pg_namespace.c.oid)
            .where(_pg_namespace.c.nspname == func.current_schema())
            .scalar_subquery(),
        )
        return int((await connection.execute(statement)).scalar_one())
    pages = (await connection.exec_driver_sql("PRAGMA page_count")).scalar_one()
    page_size = (await connection.exec_driver_sql("PRAGMA page_size")).scalar_one()
    return int(pages) * int(page_size)


_pg_class = table(
    "pg_class", column("oid"), column("relname"), column("relkind"), column("relnamespace")
)
_pg_namespace = table("pg_namespace", column("oid"), column("nspname"))


async def top_candidates(
    connection: AsyncConnection, query: ParsedQuery, limit: int, vocabulary: search.Vocabulary
) -> list[search.Candidate]:
    """The best ``limit`` entries for ``query``; see :mod:`loopctl_memory.sql.search`."""
    return await connection.run_sync(search.top_candidates, query, limit, vocabulary)


async def fetch_entries(connection: AsyncConnection, seqs: Sequence[int]) -> list[MemoryEntry]:
    """The entries with these insertion numbers, in the order given."""
    found = await _load(connection, seqs)
    return [found[seq] for seq in seqs]


async def _load(
    connection: AsyncConnection, seqs: Sequence[int], rows: Sequence[Any] | None = None
) -> dict[int, MemoryEntry]:
    entry_rows = list(rows) if rows is not None else []
    tags_of: dict[int, list[str]] = {seq: [] for seq in seqs}
    for chunk in _chunks(seqs, _IDS_PER_STATEMENT):
        if rows is None:
            entry_rows.extend(
                await connection.execute(select(*_ENTRY_COLUMNS).where(entries.c.seq.in_(chunk)))
            )
        tag_result = await connection.execute(
            select(tags.c.entry_seq, tags.c.tag)
            .where(tags.c.entry_seq.in_(chunk))
            .order_by(tags.c.entry_seq, tags.c.position)
        )
        for entry_seq, tag in tag_result:
            tags_of[entry_seq].append(tag)
    return {
        row.seq: MemoryEntry(
            category=MemoryCategory(row.category),
            memory=row.memory,
            tags=tags_of[row.seq],
            relevance=row.relevance,
            id=row.id,
            created_at=EPOCH + row.created_at_us * MICROSECOND,
            access_count=row.access_count,
            validated=bool(row.validated),
        )
        for row in entry_rows
    }


def _chunks(items: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
