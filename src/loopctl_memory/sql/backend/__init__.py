"""Where SQLite and PostgreSQL differ, in one place: a :class:`Backend` for each.

Everything else under ``sql/`` is written once, in SQLAlchemy Core or in plain
SQL with ``?`` placeholders, and asks the backend of its connection
(:func:`backend_of`) for what the two databases do differently: engine options
and transaction handling, how a batch of rows is bound, text encoding, lists of
integers, substring tests, statistics and storage size. The interface is
:mod:`.base`; each dialect's answers are a module of their own.
"""

from loopctl_memory.sql.backend.base import (
    Backend,
    EntryRow,
    PoolOptions,
    Reader,
    Statement,
    StoredBatch,
    backend_named,
    backend_of,
    outside_transaction,
)
from loopctl_memory.sql.backend.postgresql import WRITERS_LOCK, PostgresqlBackend
from loopctl_memory.sql.backend.sqlite import PAGE_SIZE, SqliteBackend

__all__ = [
    "PAGE_SIZE",
    "WRITERS_LOCK",
    "Backend",
    "EntryRow",
    "PoolOptions",
    "PostgresqlBackend",
    "Reader",
    "SqliteBackend",
    "Statement",
    "StoredBatch",
    "backend_named",
    "backend_of",
    "outside_transaction",
]
