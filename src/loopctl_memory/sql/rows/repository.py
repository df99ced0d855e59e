"""The repository: MemoryEntry to rows and back, and every query the store runs.

Each function runs on a connection inside a transaction the store opened; none
of them commits. Scores are never computed here: the database narrows the
candidates and ``loopctl_memory.scoring`` ranks them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from sqlalchemy import (
    ColumnElement,
    and_,
    bindparam,
    case,
    delete,
    func,
    insert,
    select,
    true,
    update,
)
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import history
from loopctl_memory import scopes as scope_names
from loopctl_memory.entry import MemoryCategory, MemoryEntry, Summary
from loopctl_memory.errors import DuplicateEntryError
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import FlatBatch, microseconds
from loopctl_memory.keys import keys_of_batch
from loopctl_memory.metadata import encoded
from loopctl_memory.sql.backend import Statement, backend_of
from loopctl_memory.sql.history import record as history_record
from loopctl_memory.sql.history import stamps as history_stamps
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.lexical.term_ids import KnownTerms
from loopctl_memory.sql.rows import fields, filtering, keys, removals
from loopctl_memory.sql.rows.entry_rows import ENTRY_NAMES, IDS_PER_STATEMENT, chunks, entry_of
from loopctl_memory.sql.rows.fields import INSERT_FIELDS
from loopctl_memory.sql.rows.scope_rows import (
    EVERY_SCOPE,
    ScopeIds,
    ensure_scopes,
)
from loopctl_memory.sql.tables import (
    INSERT_ENTRIES,
    INSERT_TAGS,
    INSERT_VECTORS,
    changes,
    entries,
    index_state,
    scopes,
    tags,
    vectors,
)
from loopctl_memory.sql.tuning import Tuning

_ENTRY_COLUMNS = tuple(entries.c[name] for name in ENTRY_NAMES)


# --- writing ---------------------------------------------------------------


async def insert_entries(
    connection: AsyncConnection,
    batch: FlatBatch,
    tuning: Tuning,
    base: str = "",
    known: Mapping[str, int] | None = None,
    *,
    term_ids: KnownTerms | None = None,
    fold_at: int | None = None,
    stamp: Stamp | None = None,
) -> tuple[int, int, dict[str, int]]:
    """Insert checked entries in order, index a tail of ``fold_at`` entries or more.

    Each entry goes into its scope (relative to ``base``, the writing view's scope);
    ``known``: ids of scope names already looked up; ``term_ids``: the store's
    term ids, for indexing; ``fold_at``: default, the tuning's ``tail_limit``;
    ``stamp``: the write's events (None: none recorded).
    Returns the watermark after, the last entry's seq, and the id of each
    scope name the batch went into.

    Raises:
        DuplicateEntryError: two entries of the batch share an id (a clash with a
            stored entry surfaces from the database as the same error).
        InvalidArgumentError: a scope name joined to ``base`` is too long.

    """
    absolute = checked_scopes(batch, base)
    relative = absolute.keys()
    known = known or {}
    ids = {name: known[name] for name in absolute.values() if name in known}
    ids.update(await ensure_scopes(connection, set(absolute.values()) - ids.keys()))
    scope_ids_by_name = {name: ids[absolute[name]] for name in relative}
    backend = backend_of(connection)
    if stamp is not None:
        keyed = [(scope_ids_by_name[e[10]], e[12], e[0]) for e in batch.entries if e[12]]
        if keyed:
            await connection.exec_driver_sql(
                backend.sql(history_stamps.RECORD_REPLACED),
                history_stamps.replaced_rows(
                    stamp,
                    [(scope, backend.encode(key)) for scope, key, _ in keyed],
                    [uuid.UUID(hex=new) for _, _, new in keyed],
                ),
            )
    for condition in keys.replaced(batch, scope_ids_by_name):
        await removals.remove(connection, condition)
    position = await connection.run_sync(index.write_position)
    first_seq = position.next_seq
    await connection.exec_driver_sql(
        backend.sql(INSERT_ENTRIES), backend.entry_rows(batch, first_seq, scope_ids_by_name)
    )
    if batch.tags:
        await connection.exec_driver_sql(
            backend.sql(INSERT_TAGS), backend.tag_rows(batch, first_seq)
        )
    field_rows = fields.batch_rows(backend.encode, batch, first_seq)
    if field_rows:
        await connection.exec_driver_sql(backend.sql(INSERT_FIELDS), field_rows)
    made = backend.vector_rows(batch, first_seq)
    if made:
        await connection.exec_driver_sql(backend.sql(INSERT_VECTORS), made)
    if stamp is not None:
        await history_record.record_stored(connection, stamp, first_seq)
    last = first_seq + len(batch) - 1
    if position.tail_after(len(batch)) < (fold_at or tuning.tail_limit) and not (
        batch.holds_memory_of(tuning.giant_memory)
    ):
        return position.indexed_through, last, ids
    await connection.run_sync(
        index.index_tail, batch, first_seq, row_entries=tuning.tail_limit, known=term_ids
    )
    return last, last, ids


def checked_scopes(batch: FlatBatch, base: str) -> dict[str, str]:
    """The scope name each relative name of a batch written from ``base`` stands for.

    Raises:
        DuplicateEntryError: two entries of the batch share an id.
        InvalidArgumentError: two entries share a key in one scope, or a name
            joined to ``base`` is too long.

    """
    if not batch.has_unique_ids():
        raise DuplicateEntryError("the batch holds two entries with the same id")
    absolute = {name: scope_names.join(base, name) for name in {e[10] for e in batch.entries}}
    keys_by_scope: dict[str, list[str | None]] = {}
    for entry in batch.entries:
        keys_by_scope.setdefault(absolute[entry[10]], []).append(entry[12])
    for in_scope in keys_by_scope.values():
        keys_of_batch(in_scope)
    return absolute


async def count(
    connection: AsyncConnection,
    scope: ScopeIds = EVERY_SCOPE,
    passes: MemoryFilter | None = None,
) -> int:
    """The number of entries the view reads (that ``passes`` passes)."""
    # Those of its scopes less the expired ones: the second count reads the expiry index,
    # where the first would otherwise read every row's expiry.
    statement = select(func.count()).select_from(entries)
    if passes is not None:
        statement = statement.where(filtering.condition(passes))
    in_scopes = statement if scope.read is None else statement.where(scope.scope_condition())
    total = int((await connection.execute(in_scopes)).scalar_one())
    if scope.now_us is None:
        return total
    return total - int((await connection.execute(statement.where(scope.expired()))).scalar_one())


async def set_expiry(
    connection: AsyncConnection, ids: Sequence[uuid.UUID], expires_us: int
) -> None:
    """Move the expiry of the entries with these ids that have one to ``expires_us``."""
    await connection.execute(
        update(entries)
        .where(entries.c.id.in_(ids), entries.c.expires_at_us.is_not(None))
        .values(expires_at_us=expires_us)
    )


async def get_entry(
    connection: AsyncConnection, entry_id: uuid.UUID, scope: ScopeIds = EVERY_SCOPE
) -> MemoryEntry | None:
    """The view's entry with this id, or None."""
    found = await seq_of(connection, entry_id, scope)
    return None if found is None else found[1]


async def page(
    connection: AsyncConnection,
    scope: ScopeIds,
    *,
    after_seq: int,
    size: int,
    passes: MemoryFilter | None = None,
    newest_first: bool = False,
) -> list[tuple[int, MemoryEntry, str]]:
    """Up to ``size`` entries of the view after insertion number ``after_seq``, in order.

    Each with its seq and its scope's name; only those ``passes`` passes. With
    ``newest_first``, those before ``after_seq`` (0: from the newest), newest first.
    """
    after: ColumnElement[bool]
    order: Any
    if newest_first:
        after = entries.c.seq < after_seq if after_seq else true()
        order = entries.c.seq.desc()
    else:
        after, order = entries.c.seq > after_seq, entries.c.seq
    rows = (
        await connection.execute(
            select(*_ENTRY_COLUMNS, scopes.c.name.label("scope_name"))
            .select_from(entries.join(scopes, scopes.c.id == entries.c.scope_id))
            .where(after, scope.condition(), filtering.condition(passes))
            .order_by(order)
            .limit(size)
        )
    ).all()
    found = await _load(connection, [row.seq for row in rows], rows=rows)
    return [(row.seq, found[row.seq], row.scope_name) for row in rows]


async def entries_with_seqs(
    connection: AsyncConnection, scope: ScopeIds
) -> tuple[list[int], list[MemoryEntry]]:
    """Every entry of the view, in insertion order, with their seqs (a consolidation reads them)."""
    rows = (
        await connection.execute(
            select(*_ENTRY_COLUMNS).where(scope.condition()).order_by(entries.c.seq)
        )
    ).all()
    seqs = [row.seq for row in rows]
    found = await _load(connection, seqs, rows=rows)
    return seqs, [found[seq] for seq in seqs]


async def rewrite(
    connection: AsyncConnection,
    rows: Sequence[tuple[int, MemoryEntry]],
    *,
    log: Iterable[int] = (),
    tags_of: Iterable[int] = (),
    fields_of: Iterable[int] = (),
    texts_changed: Iterable[int] = (),
) -> None:
    """Write each (seq, entry) over the row at seq: the entry's every field, its id too.

    ``tags_of``: the seqs whose tags are written again; ``fields_of``: those
    whose metadata changed, whose ``entry_fields`` rows are written again; ``log``: the seqs other
    processes must read again (their text, tags or relevance changed);
    ``texts_changed``: the seqs whose memory changed, whose vectors go (they
    were made from the old text).
    """
    for changed in chunks(sorted(set(texts_changed)), IDS_PER_STATEMENT):
        await connection.execute(delete(vectors).where(vectors.c.entry_seq.in_(changed)))
    if rows:
        statement = (
            update(entries)
            .where(entries.c.seq == bindparam("b_seq"))
            .values(
                id=bindparam("b_id"),
                category=bindparam("b_category"),
                memory=bindparam("b_memory"),
                memory_lower=bindparam("b_memory_lower"),
                relevance=bindparam("b_relevance"),
                created_at_us=bindparam("b_created_at_us"),
                access_count=bindparam("b_access_count"),
                validated=bindparam("b_validated"),
                last_accessed_us=bindparam("b_last_accessed_us"),
                last_decayed_us=bindparam("b_last_decayed_us"),
                metadata=bindparam("b_metadata"),
                key=bindparam("b_key"),
                expires_at_us=bindparam("b_expires_at_us"),
            )
        )
        await connection.execute(
            statement,
            [
                {
                    "b_seq": seq,
                    "b_id": entry.id,
                    "b_category": str(entry.category),
                    "b_memory": entry.memory,
                    "b_memory_lower": entry.memory.lower(),
                    "b_relevance": float(entry.relevance),
                    "b_created_at_us": microseconds(entry.created_at),
                    "b_access_count": entry.access_count,
                    "b_validated": entry.validated,
                    "b_last_accessed_us": microseconds(entry.last_accessed),
                    "b_last_decayed_us": microseconds(entry.last_decayed),
                    "b_metadata": encoded(entry.metadata),
                    "b_key": entry.key,
                    "b_expires_at_us": microseconds(entry.expires_at),
                }
                for seq, entry in rows
            ],
        )
    retagged = set(tags_of)
    if retagged:
        by_seq = dict(rows)
        for chunk in chunks(sorted(retagged), IDS_PER_STATEMENT):
            await connection.execute(delete(tags).where(tags.c.entry_seq.in_(chunk)))
        tag_rows = [
            {"entry_seq": seq, "position": position, "tag": tag, "tag_lower": tag.lower()}
            for seq in sorted(retagged)
            for position, tag in enumerate(by_seq[seq].tags)
        ]
        if tag_rows:
            await connection.execute(insert(tags), tag_rows)
    refielded = set(fields_of)
    if refielded:
        await fields.write_again(
            connection,
            backend_of(connection),
            [(seq, encoded(entry.metadata)) for seq, entry in rows if seq in refielded],
        )
    logged = sorted(set(log))
    if logged:
        await connection.execute(insert(changes), [{"seq": seq} for seq in logged])


async def scope_version(connection: AsyncConnection, scope: ScopeIds) -> tuple[int, ...]:
    """What changes whenever an entry the view reads is stored, removed, rewritten or stamped.

    (entries, highest seq, latest access stamp, last change logged for one of them.)
    """
    where = scope.condition()
    counted = (
        await connection.execute(
            select(
                func.count(),
                func.coalesce(func.max(entries.c.seq), 0),
                func.coalesce(func.max(entries.c.last_accessed_us), 0),
            ).where(where)
        )
    ).one()
    logged = (
        await connection.execute(
            select(func.coalesce(func.max(changes.c.id), 0))
            .select_from(changes.join(entries, entries.c.seq == changes.c.seq))
            .where(where)
        )
    ).scalar_one()
    return (*(int(value) for value in counted), int(logged))


async def run_statements(connection: AsyncConnection, statements: Sequence[Statement]) -> None:
    """Run statements such as :func:`access_stamp` gives in the caller's transaction."""
    backend = backend_of(connection)
    for text, arguments in statements:
        await connection.exec_driver_sql(backend.sql(text), tuple(arguments))


async def raise_generation(connection: AsyncConnection) -> None:
    """Make every process read its copy of the ranking columns again."""
    await connection.execute(update(index_state).values(generation=index_state.c.generation + 1))


async def seq_of(
    connection: AsyncConnection, entry_id: uuid.UUID, scope: ScopeIds
) -> tuple[int, MemoryEntry] | None:
    """The view's entry with this id and its seq, or None."""
    return await _one_with_tags(connection, entries, entries.c.id == entry_id, scope.condition())


async def _one_with_tags(
    connection: AsyncConnection, source: Any, *conditions: ColumnElement[bool]
) -> tuple[int, MemoryEntry] | None:
    """The one entry of ``source`` meeting ``conditions`` (a unique lookup), and its seq.

    Its tags come in the same statement, a row each (one lookup, not two).
    """
    rows = (
        await connection.execute(
            select(*_ENTRY_COLUMNS, tags.c.tag.label("joined_tag"))
            .select_from(source.outerjoin(tags, tags.c.entry_seq == entries.c.seq))
            .where(*conditions)
            .order_by(tags.c.position)
        )
    ).all()
    if not rows:
        return None
    first = rows[0]
    return first.seq, entry_of(
        first, [row.joined_tag for row in rows if row.joined_tag is not None]
    )


async def update_entry(
    connection: AsyncConnection,
    entry_id: uuid.UUID,
    change: Callable[[MemoryEntry], MemoryEntry],
    scope: ScopeIds,
    *,
    vector: tuple[int, str, bytes] | None = None,
    stamp: Stamp | None = None,
) -> MemoryEntry | None:
    """Rewrite the entry with this id in ``scope`` as ``change`` makes it; it, or None if absent.

    The entry keeps its seq; the rewrite is logged, so other processes (and a
    consolidation pass planned meanwhile) see it. A new memory's vectors go;
    ``vector`` (embedder id, the memory it was made from, the vector) is
    written in their place when it was made from the new memory. ``stamp``:
    the ``updated`` event's (None: none recorded).
    """
    found = await seq_of(connection, entry_id, scope)
    if found is None:
        return None
    seq, before = found
    after = change(before)
    if after != before:
        texts_changed = [seq] if before.memory != after.memory else []
        await rewrite(
            connection,
            [(seq, after)],
            log=[seq],
            tags_of=[seq] if before.tags != after.tags else [],
            fields_of=[seq] if before.metadata != after.metadata else [],
            texts_changed=texts_changed,
        )
        if texts_changed and vector is not None and vector[1] == after.memory:
            await connection.exec_driver_sql(  # none if reembed replaced the embedder meanwhile
                backend_of(connection).sql(INSERT_VECTORS), (seq, vector[2], vector[0])
            )
        changed = history.changed_fields(before, after)
        if stamp is not None and changed:
            await history_record.record_where(
                connection,
                history_record.Happened(
                    stamp, history.UPDATED, history_stamps.details(changed=changed)
                ),
                entries.c.seq == seq,
            )
    return after


async def scope_ids_of(connection: AsyncConnection, seqs: Sequence[int]) -> dict[int, int]:
    """The scope id of the entry at each of ``seqs`` (those stored)."""
    found: dict[int, int] = {}
    for chunk in chunks(list(seqs), IDS_PER_STATEMENT):
        rows = await connection.execute(
            select(entries.c.seq, entries.c.scope_id).where(entries.c.seq.in_(chunk))
        )
        found.update((int(seq), int(scope)) for seq, scope in rows)
    return found


async def ids_between(
    connection: AsyncConnection, low: uuid.UUID, high: uuid.UUID, scope: ScopeIds, limit: int
) -> list[uuid.UUID]:
    """Up to ``limit`` ids of the view from ``low`` to ``high`` inclusive, in id order."""
    rows = await connection.execute(
        select(entries.c.id)
        .where(entries.c.id >= low, entries.c.id <= high, scope.condition())
        .order_by(entries.c.id)
        .limit(limit)
    )
    return list(rows.scalars())


async def existing_ids(connection: AsyncConnection, ids: Sequence[uuid.UUID]) -> set[uuid.UUID]:
    """Which of ``ids`` an entry of any scope holds: a lookup of the unique id index."""
    found: set[uuid.UUID] = set()
    for start in range(0, len(ids), IDS_PER_STATEMENT):
        chunk = ids[start : start + IDS_PER_STATEMENT]
        rows = await connection.execute(select(entries.c.id).where(entries.c.id.in_(chunk)))
        found.update(rows.scalars())
    return found


async def summarise(connection: AsyncConnection, scope: ScopeIds = EVERY_SCOPE) -> Summary:
    """Count the view's entries, by category and by relevance bin, in two statements."""
    by_category = dict.fromkeys(MemoryCategory, 0)
    grouped = await connection.execute(
        select(entries.c.category, func.count())
        .where(scope.condition())
        .group_by(entries.c.category)
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
    histogram = [
        int(n) for n in (await connection.execute(select(*bins).where(scope.condition()))).one()
    ]
    return Summary(sum(by_category.values()), by_category, histogram)


async def created_per_day(
    connection: AsyncConnection, scope: ScopeIds = EVERY_SCOPE
) -> list[tuple[int, int]]:
    """(UTC day since the epoch, entries created that day) of the view, oldest day first.

    Integer division truncates: a day before 1970 counts with the one after it.
    """
    day = entries.c.created_at_us // _DAY_US
    grouped = await connection.execute(
        select(day, func.count()).where(scope.condition()).group_by(day)
    )
    return sorted((int(when), int(number)) for when, number in grouped)


_DAY_US = 86_400_000_000


async def _load(
    connection: AsyncConnection, seqs: Sequence[int], rows: Sequence[Any]
) -> dict[int, MemoryEntry]:
    """The entries of these rows of ``_ENTRY_COLUMNS``, with their tags."""
    tags_of: dict[int, list[str]] = {seq: [] for seq in seqs}
    for chunk in chunks(seqs, IDS_PER_STATEMENT):
        tag_result = await connection.execute(
            select(tags.c.entry_seq, tags.c.tag)
            .where(tags.c.entry_seq.in_(chunk))
            .order_by(tags.c.entry_seq, tags.c.position)
        )
        for entry_seq, tag in tag_result:
            tags_of[entry_seq].append(tag)
    return {row.seq: entry_of(row, tags_of[row.seq]) for row in rows}
