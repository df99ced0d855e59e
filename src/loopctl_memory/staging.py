"""A batch's rows and postings in a SQLite file of their own, which a SQLite store copies.

The import's parser process writes each batch to such a file, so binding every
value is its work and not the writer's. The writer attaches the file inside its
transaction and copies the entries and tags with ``INSERT ... SELECT`` (see
``repository.insert_entries``), and the postings the same way when it indexes
the batch (``index.index_tail``); it detaches the file once the transaction is
over. The rows are those of the :class:`~loopctl_memory.flat.FlatBatch`: the
entry's number in the batch, then its fields (or the tag's); then each term of
the batch's tokens and of its tags, in term order (:meth:`Postings.rows`).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from contextlib import closing
from itertools import chain
from pathlib import Path
from typing import Any

from loopctl_memory.flat import FlatBatch, Staged

ALIAS = "loopctl_stage"
"""The schema name a store attaches a stage file under."""

ENTRY_COLUMNS = (
    "id",
    "category",
    "memory",
    "memory_lower",
    "relevance",
    "created_at_us",
    "access_count",
    "validated",
)
"""The entry's fields, in the order of :data:`~loopctl_memory.flat.FlatEntry`."""

TAG_COLUMNS = ("position", "tag", "tag_lower")

TERM_COLUMNS = ("term", "count", "numbers")
"""A term, how many entries hold it, and their numbers packed (see ``flat.pack``)."""

TOKENS = "tokens"
"""The table of the batch's tokens, named as the store's vocabulary table."""

TAG_VALUES = "tag_values"
"""The table of the batch's lowercase tags, named as the store's vocabulary table."""

PAGE_SIZE = 65_536
"""SQLite's largest page: a stage file of 25,000 entries is 10 MB, written and read whole."""


def write_stage(path: Path, batch: FlatBatch, origin: int = 0) -> Staged:
    """Write the batch's entries, tags and postings to a new file at ``path``.

    ``origin``: the number the postings give the batch's first entry (see
    :meth:`Postings.rows`); when it is the seq the store gives that entry, the
    store copies the postings as they are.

    A scratch file: no journal and no sync, since it is read once, at once, and
    a crash loses nothing the store has acknowledged; large pages, for a tenth of
    the system calls. Columns have no declared type, so every value is kept as
    the batch holds it. The tags table is in the batch's order, (number,
    position), and the term tables in term order, by rowid: no key to maintain.
    """
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(f"PRAGMA page_size={PAGE_SIZE}")
        connection.execute("PRAGMA journal_mode=OFF")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute(
            f"CREATE TABLE entries (number INTEGER PRIMARY KEY, {', '.join(ENTRY_COLUMNS)})"
        )
        connection.execute(f"CREATE TABLE tags (number, {', '.join(TAG_COLUMNS)})")
        for table in (TOKENS, TAG_VALUES):
            connection.execute(f"CREATE TABLE {table} ({', '.join(TERM_COLUMNS)})")
        connection.execute("BEGIN")
        _insert_all(connection, "entries", batch.entries, 1 + len(ENTRY_COLUMNS))
        _insert_all(connection, "tags", batch.tags, 1 + len(TAG_COLUMNS))
        _insert_all(connection, TOKENS, batch.token_postings().rows(origin), len(TERM_COLUMNS))
        _insert_all(connection, TAG_VALUES, batch.tag_postings().rows(origin), len(TERM_COLUMNS))
        connection.execute("COMMIT")
    return Staged(str(path), len(batch), origin)


ROWS_PER_INSERT = 500
"""Rows one INSERT writes, fewer where SQLite allows fewer parameters a statement.

A multi-row ``VALUES`` binds the same values as ``executemany`` but runs one
statement, not one a row: a third fewer instructions to stage a batch."""


def _insert_all(
    connection: sqlite3.Connection, table: str, rows: Sequence[tuple[Any, ...]], width: int
) -> None:
    """Insert ``rows`` of ``width`` values into ``table``, in order."""
    allowed = connection.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) // width
    per_insert = max(1, min(ROWS_PER_INSERT, allowed))
    row = f"({', '.join('?' * width)})"

    def insert(count: int) -> str:
        # Only our own table name and placeholders go in; every value is a parameter.
        return f"INSERT INTO {table} VALUES {', '.join([row] * count)}"  # noqa: S608

    full = insert(per_insert)
    for start in range(0, len(rows), per_insert):
        part = rows[start : start + per_insert]
        statement = full if len(part) == per_insert else insert(len(part))
        connection.execute(statement, list(chain.from_iterable(part)))
