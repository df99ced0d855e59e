"""A batch's rows in a SQLite file of their own, which a SQLite store copies in two statements.

The import's parser process writes each batch to such a file, so binding every
value is its work and not the writer's. The writer attaches the file inside its
transaction and copies the entries and tags with ``INSERT ... SELECT`` (see
``repository.insert_entries``), then detaches it once the transaction is over.
The rows are those of the :class:`~loopctl_memory.flat.FlatBatch`: the entry's
number in the batch, then its fields (or the tag's).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

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

PAGE_SIZE = 65_536
"""SQLite's largest page: a stage file of 25,000 entries is 10 MB, written and read whole."""


def write_stage(path: Path, batch: FlatBatch) -> Staged:
    """Write the batch's entries and tags to a new file at ``path``.

    A scratch file: no journal and no sync, since it is read once, at once, and
    a crash loses nothing the store has acknowledged; large pages, for a tenth of
    the system calls. Columns have no declared type, so every value is kept as
    the batch holds it. The tags table is in the batch's order, (number,
    position), by rowid: no key to maintain.
    """
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute(f"PRAGMA page_size={PAGE_SIZE}")
        connection.execute("PRAGMA journal_mode=OFF")
        connection.execute("PRAGMA synchronous=OFF")
        connection.execute(
            f"CREATE TABLE entries (number INTEGER PRIMARY KEY, {', '.join(ENTRY_COLUMNS)})"
        )
        connection.execute(f"CREATE TABLE tags (number, {', '.join(TAG_COLUMNS)})")
        connection.execute("BEGIN")
        marks = ", ".join("?" * (1 + len(ENTRY_COLUMNS)))
        connection.executemany(f"INSERT INTO entries VALUES ({marks})", batch.entries)  # noqa: S608
        connection.executemany("INSERT INTO tags VALUES (?, ?, ?, ?)", batch.tags)
        connection.execute("COMMIT")
    return Staged(str(path), len(batch))
