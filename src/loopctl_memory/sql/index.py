"""The token index: which entries hold which tokens, so retrieval reads candidates, not the table.

A query word never contains whitespace, so it occurs in a memory exactly when
it occurs inside one of the memory's lowercase whitespace-separated *tokens*.
The vocabulary of distinct tokens is small, so a substring scan of it is cheap,
and the postings of the tokens that contain a word name every entry that
contains the word. Whole lowercase tags are indexed the same way, for the tag
bonus (a tag must contain the whole query).

Entries are indexed in blocks, not one by one: every entry with
``seq <= indexed_through`` is in the postings, and the newer *tail* is read
directly. A write that leaves the tail at ``TAIL_LIMIT`` entries or more
indexes it in the same transaction, so the tail stays small.

Postings of deleted entries stay behind: a candidate is always checked against
the entries table, so they cost a little space and nothing else. Insertion
numbers are never reused below the watermark (see ``write_position``).

These functions take a synchronous connection inside the caller's transaction
(``AsyncConnection.run_sync``); none of them commits.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, CursorResult, Table, func, select, update
from sqlalchemy.util.typing import TupleAny

from loopctl_memory import staging
from loopctl_memory.flat import FlatBatch, invert_tags, invert_tokens, pack, rebased, unpack
from loopctl_memory.sql.engine import REBASED
from loopctl_memory.sql.tables import (
    entries,
    index_state,
    int_list,
    postings,
    tag_postings,
    tag_values,
    tags,
    tokens,
)
from loopctl_memory.sql.text import as_stored, from_stored

_TERMS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters

TAIL_LIMIT = 10_000
"""Entries a write may leave unindexed; retrieval scans at most about this many directly."""


@dataclass(frozen=True, slots=True)
class _Vocabulary:
    """A vocabulary table (distinct terms) and its postings table."""

    terms: Table
    term: str
    postings: Table
    term_id: str
    staged: str
    """Its terms' table in an attached stage file (see :mod:`loopctl_memory.staging`)."""


_INDEX_TABLES = (tags, tokens, postings, tag_values, tag_postings)

TOKENS = _Vocabulary(tokens, "token", postings, "token_id", f"{staging.ALIAS}.{staging.TOKENS}")
TAG_VALUES = _Vocabulary(
    tag_values, "value", tag_postings, "value_id", f"{staging.ALIAS}.{staging.TAG_VALUES}"
)


def watermark(connection: Connection) -> int:
    """The highest seq whose entry is in the postings (0 before any indexing)."""
    value = connection.execute(select(index_state.c.indexed_through)).scalar_one_or_none()
    return int(value or 0)


@dataclass(frozen=True, slots=True)
class WritePosition:
    """Where the next write goes: the first free seq, and the watermark."""

    next_seq: int
    indexed_through: int

    def tail_after(self, written: int) -> int:
        """How many entries are unindexed once ``written`` more are stored."""
        return self.next_seq + written - 1 - self.indexed_through


def write_position(connection: Connection) -> WritePosition:
    """Read the first free insertion number (above every entry and the watermark) in one query.

    Never reusing a seq at or below the watermark keeps the postings of a
    deleted entry from ever naming a new one.
    """
    top, mark = connection.execute(
        select(func.max(entries.c.seq), select(index_state.c.indexed_through).scalar_subquery())
    ).one()
    mark = int(mark or 0)
    return WritePosition(max(int(top or 0), mark) + 1, mark)


def shorten_tail(connection: Connection) -> int:
    """Index the tail if it has reached ``TAIL_LIMIT`` entries; return the watermark after."""
    position = write_position(connection)
    if position.tail_after(0) >= TAIL_LIMIT:
        index_tail(connection)
        return watermark(connection)
    return position.indexed_through


@dataclass(frozen=True, slots=True)
class Fresh:
    """Entries just inserted in this transaction from ``first_seq`` on, still in memory.

    Indexing takes their tokens and tags from here instead of reading them back.
    """

    first_seq: int
    batch: FlatBatch


def index_tail(connection: Connection, fresh: Fresh | None = None) -> int:
    """Add every entry above the watermark to the postings; return how far it moved.

    ``fresh``: the tail's newest entries, if the caller holds them (they must be
    the last ones of the tail); the older rest of the tail is read back.
    """
    start = watermark(connection)
    by_token: dict[str, list[int]] = {}
    by_tag: dict[str, list[int]] = {}
    last = start
    read_before = fresh.first_seq if fresh is not None else sys.maxsize
    if read_before > start + 1:
        last = _read_back(connection, start, read_before, by_token, by_tag)
    fresh_tokens: dict[str, bytes] = {}
    fresh_tags: dict[str, bytes] = {}
    # A staged batch's postings are in its stage file: its numbers plus this are seqs.
    stage_shift = None
    if fresh is not None and fresh.batch.staged is not None:
        stage_shift = fresh.first_seq - fresh.batch.staged.origin
    if fresh is not None and len(fresh.batch):
        batch, base = fresh.batch, fresh.first_seq
        last = base + len(batch) - 1
        if stage_shift is None:
            # By index in the batch (the import's parser inverted them already), as seqs.
            fresh_tokens = batch.token_postings().seqs(base)
            fresh_tags = batch.tag_postings().seqs(base)
    if last == start:
        return 0
    block = start + 1
    if stage_shift is not None:
        _add_staged_postings(connection, TOKENS, block, by_token, stage_shift)
        _add_staged_postings(connection, TAG_VALUES, block, by_tag, stage_shift)
    else:
        _add_postings(connection, TOKENS, block, _joined(by_token, fresh_tokens))
        _add_postings(connection, TAG_VALUES, block, _joined(by_tag, fresh_tags))
    connection.execute(update(index_state).values(indexed_through=last))
    if connection.dialect.name == "postgresql":
        _refresh_statistics(connection)
    return last - start


def _read_back(
    connection: Connection,
    after: int,
    before: int,
    by_token: dict[str, list[int]],
    by_tag: dict[str, list[int]],
) -> int:
    """Invert the stored entries with ``after < seq < before``; return the last seq read."""
    decode = from_stored(connection.dialect)
    # Through the driver: SQLAlchemy's per-row result processing would cost more than the rest.
    rows = _driver_sql(
        connection,
        "SELECT seq, memory_lower FROM entries WHERE seq > ? AND seq < ? ORDER BY seq",
        (after, before),
    ).all()
    invert_tokens(((seq, decode(text)) for seq, text in rows), by_token)
    tag_rows = _driver_sql(
        connection,
        "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > ? AND entry_seq < ? "
        "ORDER BY entry_seq",
        (after, before),
    )
    invert_tags(((seq, decode(stored)) for seq, stored in tag_rows), by_tag)
    return int(rows[-1][0]) if rows else after


def _joined(older: dict[str, list[int]], newer: dict[str, bytes]) -> dict[str, bytes]:
    """Packed postings: the ``older`` seqs of a term, then its ``newer`` (greater) packed ones."""
    if not older:
        return newer
    blobs = {term: pack(seqs) for term, seqs in older.items()}
    for term, blob in newer.items():
        found = blobs.get(term)
        blobs[term] = blob if found is None else found + blob
    return blobs


def _refresh_statistics(connection: Connection) -> None:
    """ANALYZE our tables once a fifth of the entries changed since the last time.

    Autovacuum does it too, but up to a minute later; until then the planner
    takes a bulk-loaded table for an empty one and scans where it should seek.
    """
    changed, live = connection.exec_driver_sql(
        "SELECT coalesce(n_mod_since_analyze, 0), coalesce(n_live_tup, 0) "
        "FROM pg_stat_user_tables WHERE relid = 'entries'::regclass"
    ).one()
    if changed > 0.2 * live:
        names = ", ".join(table.name for table in (entries, *_INDEX_TABLES))
        connection.exec_driver_sql(f"ANALYZE {names}")


def _add_postings(
    connection: Connection, vocabulary: _Vocabulary, block: int, blobs: dict[str, bytes]
) -> None:
    """Add one block's postings (packed seqs by term), creating or counting the terms."""
    if not blobs:
        return
    table = vocabulary.terms.name
    encode, decode = as_stored(connection.dialect), from_stored(connection.dialect)
    # In key order: each B-tree is then written front to back, not at random.
    counts = sorted((encode(term), len(blob) // 8) for term, blob in blobs.items())
    # Upsert (SQLite >= 3.24 and PostgreSQL): new terms get an id, known ones a larger count.
    term = vocabulary.term
    _driver_sql(
        connection,
        f"INSERT INTO {table} ({term}, entries) VALUES (?, ?) "  # noqa: S608
        f"ON CONFLICT ({term}) DO UPDATE SET entries = {table}.entries + excluded.entries",
        counts,
    )
    # Bound parameters, not json_each: terms may hold NUL, which SQLite's JSON cuts short.
    known = [stored for stored, _ in counts]
    ids: dict[str, int] = {}
    for start in range(0, len(known), _TERMS_PER_LOOKUP):
        chunk = known[start : start + _TERMS_PER_LOOKUP]
        marks = ", ".join(["?"] * len(chunk))
        found = _driver_sql(
            connection,
            f"SELECT {term}, id FROM {table} WHERE {term} IN ({marks})",  # noqa: S608
            tuple(chunk),
        )
        ids.update((decode(text), term_id) for text, term_id in found)
    _driver_sql(
        connection,
        f"INSERT INTO {vocabulary.postings.name} ({vocabulary.term_id}, block, seqs) "  # noqa: S608
        "VALUES (?, ?, ?)",
        sorted((ids[term], block, blob) for term, blob in blobs.items()),
    )


def _add_staged_postings(
    connection: Connection,
    vocabulary: _Vocabulary,
    block: int,
    older: dict[str, list[int]],
    shift: int,
) -> None:
    """Add one block's postings: ``older`` seqs, then the attached stage's numbers plus ``shift``.

    Without older seqs the database copies the stage's terms and postings itself,
    in the order :func:`_add_postings` writes them, so the rows are the same. The
    stage's numbers are usually the seqs already (``shift`` 0): an import's parser
    is told the seq its batch will start at (see ``jsonl_batches``).
    """
    if older:  # one row a term for both: joined here
        newer = _staged_seqs(connection, vocabulary, shift)
        _add_postings(connection, vocabulary, block, _joined(older, newer))
        return
    table, term, stage = vocabulary.terms.name, vocabulary.term, vocabulary.staged
    # Only our own names are formatted in; block and shift are parameters. "WHERE
    # true" tells SQLite's parser that ON begins the upsert, not a join.
    connection.exec_driver_sql(
        f"INSERT INTO main.{table} ({term}, entries) "  # noqa: S608
        f"SELECT term, count FROM {stage} WHERE true ORDER BY rowid "
        f"ON CONFLICT ({term}) DO UPDATE SET entries = {table}.entries + excluded.entries"
    )
    # A shift calls back into Python for every term: a third of the copy's time.
    seqs = f"{REBASED}(staged.numbers, ?)" if shift else "staged.numbers"
    parameters: tuple[int, ...] = (block, shift) if shift else (block,)
    connection.exec_driver_sql(
        f"INSERT INTO main.{vocabulary.postings.name} ({vocabulary.term_id}, block, seqs) "  # noqa: S608
        f"SELECT known.id, ?, {seqs} FROM {stage} AS staged "
        f"JOIN main.{table} AS known ON known.{term} = staged.term ORDER BY known.id",
        parameters,
    )


def _staged_seqs(connection: Connection, vocabulary: _Vocabulary, shift: int) -> dict[str, bytes]:
    """The attached stage's postings of this vocabulary: term -> numbers plus ``shift``, packed."""
    rows = connection.exec_driver_sql(f"SELECT term, numbers FROM {vocabulary.staged}")  # noqa: S608
    return {term: rebased(numbers, shift) for term, numbers in rows}


def _driver_sql(connection: Connection, statement: str, parameters: Any) -> CursorResult[*TupleAny]:
    """Run SQL written with ``?`` placeholders on the driver, in its own parameter style."""
    statement = placeholders(statement, connection.dialect.paramstyle)
    return connection.exec_driver_sql(statement, parameters)


def placeholders(statement: str, paramstyle: str) -> str:
    """``statement`` with its ``?`` placeholders in the driver's style (``$1``... for asyncpg).

    Only for our own statements, which never hold a literal question mark.
    """
    if paramstyle == "qmark":
        return statement
    pieces = statement.split("?")
    numbered = [f"{piece}${number}" for number, piece in enumerate(pieces[:-1], start=1)]
    return "".join(numbered) + pieces[-1]


def entries_with_terms(
    connection: Connection, vocabulary: _Vocabulary, term_ids: Iterable[int]
) -> set[int]:
    """Every indexed seq (deleted ones included) whose postings name one of these terms."""
    found: set[int] = set()
    ids = list(term_ids)
    if not ids:
        return found
    term_id = vocabulary.postings.c[vocabulary.term_id]
    blobs = connection.execute(
        select(vocabulary.postings.c.seqs).where(term_id.in_(int_list(ids, connection.dialect)))
    )
    for (blob,) in blobs:
        found.update(unpack(blob))
    return found
