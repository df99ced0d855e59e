"""The ids of a store's terms (tokens, tag values, BM25 words) as its writers learn them.

Postings name terms by id. A term keeps its id for ever: no statement
deletes a term, and an id is given out once. So a writer that has seen a
term's id need not look for it again; indexing a block then costs a database
round trip only for the terms this process has not met, which for a natural
vocabulary is a small part of each block.

Only committed ids are kept: those at or below the highest id of the table
when the lookup began, under the write transaction, whatever becomes of the
transaction. Ids the transaction gives out itself serve it and are learnt at
a later write, so a rolled-back write never leaves an id behind that names
nothing, or another term.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.sql.backend import backend_of

_TERMS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters
# Terms kept a vocabulary: a natural one fits whole; a store of identifiers and
# hashes meets new terms at every block, and is better served by a cleared cache.
_KEPT = 1 << 18


class KnownTerms:
    """Term -> id, a vocabulary (terms table) at a time, for one store in this process.

    Not thread-safe: a store's writes run one at a time.
    """

    def __init__(self, kept: int = _KEPT) -> None:
        self._kept = kept
        self._ids: dict[str, dict[str, int]] = {}

    def ids(
        self, connection: Connection, table: str, column: str, terms: list[str]
    ) -> tuple[npt.NDArray[np.int64], dict[str, int]]:
        """The id of each of ``terms`` (distinct) in ``table``, creating those missing.

        Also returns the terms this call created, with their ids. Runs in the
        caller's write transaction (SQLite's ``BEGIN IMMEDIATE``, or
        PostgreSQL's, where another writer's new term waits on its commit).
        """
        known = self._ids.setdefault(table, {})
        # Sorted: the terms' B-tree is then written front to back, not at random.
        missing = sorted(term for term in terms if term not in known)
        if missing:
            found = _look_up(connection, table, column, missing)
            every = {**found.created, **found.committed}
            ids = np.fromiter(
                (known[term] if term in known else every[term] for term in terms),
                np.int64,
                len(terms),
            )
            if len(known) + len(found.committed) > self._kept:
                known.clear()
            known.update(found.committed)
            return ids, found.created
        return np.fromiter(map(known.__getitem__, terms), np.int64, len(terms)), {}


class _Found:
    __slots__ = ("committed", "created")

    def __init__(self) -> None:
        self.committed: dict[str, int] = {}
        self.created: dict[str, int] = {}


def _look_up(connection: Connection, table: str, column: str, terms: list[str]) -> _Found:
    """Create the terms not in ``table``; return every term's id, committed ones apart."""
    backend = backend_of(connection)
    (highest,) = connection.exec_driver_sql(
        f"SELECT coalesce(max(id), 0) FROM {table}"  # noqa: S608 - our own names only
    ).one()
    encoded = [backend.encode(term) for term in terms]
    connection.exec_driver_sql(
        backend.sql(
            f"INSERT INTO {table} ({column}) VALUES (?) ON CONFLICT ({column}) DO NOTHING"  # noqa: S608
        ),
        [(term,) for term in encoded],
    )
    found = _Found()
    decode = backend.decode
    # Bound parameters, not a JSON list: terms may hold NUL, which SQLite's JSON cuts short.
    for start in range(0, len(encoded), _TERMS_PER_LOOKUP):
        chunk = encoded[start : start + _TERMS_PER_LOOKUP]
        marks = ", ".join(["?"] * len(chunk))
        for stored, term_id in connection.exec_driver_sql(
            backend.sql(f"SELECT {column}, id FROM {table} WHERE {column} IN ({marks})"),  # noqa: S608
            tuple(chunk),
        ).all():
            (found.committed if term_id <= highest else found.created)[decode(stored)] = term_id
    return found
