"""The repository: MemoryEntry to rows and back, and every query the store runs.

Each function runs on a connection inside a transaction the store opened; none
of them commits. Scores are never computed here: the database narrows the
candidates and ``loopctl_memory.scoring`` ranks them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import ColumnElement, and_, case, delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.errors import DuplicateEntryError
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatBatch
from loopctl_memory.scoring import PRUNE_THRESHOLD
from loopctl_memory.sql import index
from loopctl_memory.sql.backend import Reader, backend_of
from loopctl_memory.sql.tables import (
    ENTRY_FIELDS,
    INSERT_ENTRIES,
    INSERT_TAGS,
    changes,
    entries,
    index_state,
    tags,
)
from loopctl_memory.sql.tuning import Tuning

# Keeps IN (...) lists under SQLite's limit on bound parameters (32766).
_IDS_PER_STATEMENT = 10_000

# What a MemoryEntry is read from: every column but the lowercase copy, kept for search.
_ENTRY_NAMES = tuple(name for name in ENTRY_FIELDS if name != "memory_lower")
_ENTRY_COLUMNS = tuple(entries.c[name] for name in _ENTRY_NAMES)


# --- writing ---------------------------------------------------------------


async def insert_entries(connection: AsyncConnection, batch: FlatBatch, tuning: Tuning) -> int:
    """Insert checked entries in order, index a long tail; return the watermark after.

    Raises:
        DuplicateEntryError: two entries of the batch share an id (a clash with a
            stored entry surfaces from the database as the same error).

    """
    if not batch.has_unique_ids():
        raise DuplicateEntryError("the batch holds two entries with the same id")
    position = await connection.run_sync(index.write_position)
    first_seq = position.next_seq
    backend = backend_of(connection)
    await connection.exec_driver_sql(
        backend.sql(INSERT_ENTRIES), backend.entry_rows(batch, first_seq)
    )
    if batch.tags:
        await connection.exec_driver_sql(
            backend.sql(INSERT_TAGS), backend.tag_rows(batch, first_seq)
        )
    if position.tail_after(len(batch)) < tuning.tail_limit:
        return position.indexed_through
    await connection.run_sync(index.index_tail, batch, first_seq, row_entries=tuning.tail_limit)
    return first_seq + len(batch) - 1


async def delete_entry(connection: AsyncConnection, entry_id: uuid.UUID) -> bool:
    """Delete one entry (its tags cascade); return whether it existed."""
    return await _remove(connection, entries.c.id == entry_id) > 0


async def prune(connection: AsyncConnection) -> int:
    """Delete every entry whose relevance, as binary32, is below 0.05; return how many."""
    return await _remove(connection, entries.c.relevance < PRUNE_THRESHOLD)


async def _remove(connection: AsyncConnection, condition: ColumnElement[bool]) -> int:
    """Delete the entries meeting ``condition``, logged in ``changes``; return how many.

    Other processes learn of the removal from the log; ``removed_through``
    keeps the removed seqs from ever being given out again.
    """
    removed = select(entries.c.seq).where(condition)
    logged = await connection.execute(
        insert(changes).from_select(["seq"], removed.order_by(entries.c.seq))
    )
    if not logged.rowcount:
        return 0
    highest = select(func.max(entries.c.seq)).where(condition).scalar_subquery()
    floor = index_state.c.removed_through
    await connection.execute(
        update(index_state).values(removed_through=case((highest > floor, highest), else_=floor))
    )
    result = await connection.execute(delete(entries).where(condition))
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
    return await connection.run_sync(lambda sync: backend_of(sync).storage_bytes(sync))


_ENTRIES_WITH_TAGS = (
    f"SELECT {', '.join(f'e.{name}' for name in _ENTRY_NAMES)}, t.tag"  # noqa: S608
    " FROM entries e LEFT JOIN tags t ON t.entry_seq = e.seq"
    " WHERE e.seq IN ({}) ORDER BY e.seq, t.position"
)


def entries_by_seq(reader: Reader, seqs: Sequence[int]) -> list[MemoryEntry]:
    """The entries with these insertion numbers, in the order given (all must exist).

    One statement (per ``_IDS_PER_STATEMENT``) reads the entries joined with their tags.
    """
    backend = reader.backend
    decode, decode_uuid = backend.decode, backend.decode_uuid
    found: dict[int, MemoryEntry] = {}
    for chunk in _chunks(seqs, _IDS_PER_STATEMENT):
        statement = _ENTRIES_WITH_TAGS.format(", ".join("?" * len(chunk)))
        for seq, entry_id, category, memory, *rest, tag in reader.all(statement, chunk):
            entry = found.get(seq)
            if entry is None:
                fields = (seq, decode_uuid(entry_id), category, decode(memory), *rest)
                entry = found[seq] = _entry(fields, [])
            if tag is not None:  # a tag is never NULL: None is the outer join's "no tag"
                entry.tags.append(decode(tag))
    return [found[seq] for seq in seqs]


async def _load(
    connection: AsyncConnection, seqs: Sequence[int], rows: Sequence[Any]
) -> dict[int, MemoryEntry]:
    """The entries of these rows of ``_ENTRY_COLUMNS``, with their tags."""
    tags_of: dict[int, list[str]] = {seq: [] for seq in seqs}
    for chunk in _chunks(seqs, _IDS_PER_STATEMENT):
        tag_result = await connection.execute(
            select(tags.c.entry_seq, tags.c.tag)
            .where(tags.c.entry_seq.in_(chunk))
            .order_by(tags.c.entry_seq, tags.c.position)
        )
        for entry_seq, tag in tag_result:
            tags_of[entry_seq].append(tag)
    return {row.seq: _entry(row, tags_of[row.seq]) for row in rows}


def _entry(fields: Sequence[Any], entry_tags: list[str]) -> MemoryEntry:
    """An entry from its ``_ENTRY_NAMES`` values, in that order, as Python values."""
    _, entry_id, category, memory, relevance, created_us, access_count, validated = fields
    return MemoryEntry(
        category=MemoryCategory(category),
        memory=memory,
        tags=entry_tags,
        relevance=relevance,
        id=entry_id,
        created_at=EPOCH + created_us * MICROSECOND,
        access_count=access_count,
        validated=bool(validated),
    )


def _chunks(items: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
