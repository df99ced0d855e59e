"""Postings in memory: for each term of some indexed blocks, the seqs of the entries holding it.

A segment is the postings table's rows for a range of blocks, regrouped by
term into three arrays (compressed sparse rows): the sorted term ids, where
each term's seqs start, and every seq. The seqs of any set of terms then come
out in a few vectorised steps, whatever the number of terms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.index import TermTables

Ints = npt.NDArray[np.int64]
Seqs = npt.NDArray[np.signedinteger[Any]]
"""int32 while every seq fits (half the memory), else int64."""
_ROWS_PER_FETCH = 32_768  # converted a chunk at a time: the raw blobs never all sit in memory


@dataclass(frozen=True, slots=True)
class Segment:
    """The postings of the blocks in ``(after, through]``, by term."""

    after: int
    through: int
    term_ids: Ints  # sorted, distinct
    starts: Ints  # term i's seqs are seqs[starts[i]:starts[i + 1]]
    seqs: Seqs

    @property
    def postings(self) -> int:
        """How many (term, entry) pairs the segment holds."""
        return len(self.seqs)

    def gather(self, term_ids: Ints) -> Seqs:
        """The seqs of the entries holding one of ``term_ids`` (an entry may come twice)."""
        where = np.searchsorted(self.term_ids, term_ids)
        inside = where < len(self.term_ids)
        where, wanted = where[inside], term_ids[inside]
        where = where[self.term_ids[where] == wanted]
        if not len(where):
            return self.seqs[:0]
        first = self.starts[where]
        lengths = self.starts[where + 1] - first
        if len(where) == 1:
            return self.seqs[first[0] : first[0] + lengths[0]]
        # The k-th seq of the output sits at first[term] + (k - where the term's run begins).
        run_starts = np.cumsum(lengths) - lengths
        offsets = np.repeat(first - run_starts, lengths)
        gathered: Seqs = self.seqs[np.arange(len(offsets), dtype=np.int64) + offsets]
        return gathered


def load_segment(connection: Connection, tables: TermTables, after: int, through: int) -> Segment:
    """Read the postings of the blocks in ``(after, through]`` (one statement)."""
    backend = backend_of(connection)
    term_id, postings = tables.term_id, tables.postings.name
    if after == 0:  # every block: in primary key order, no sort and no index needed
        statement = (
            f"SELECT {term_id}, block, seqs FROM {postings} "  # noqa: S608 - our own names
            f"ORDER BY {term_id}, block"
        )
        parameters: tuple[int, ...] = ()
    else:
        statement = (
            f"SELECT {term_id}, block, seqs FROM {postings} "  # noqa: S608
            f"WHERE block > ? AND block <= ? ORDER BY {term_id}, block"
        )
        parameters = (after, through)
    result = connection.exec_driver_sql(backend.sql(statement), parameters)
    ids: list[Ints] = []
    lengths: list[Ints] = []
    seqs: list[Seqs] = []
    while rows := result.fetchmany(_ROWS_PER_FETCH):
        if after == 0:
            rows = [row for row in rows if row[1] <= through]  # blocks indexed since the snapshot
        blobs = [bytes(row[2]) for row in rows]
        ids.append(np.fromiter((row[0] for row in rows), np.int64, len(rows)))
        lengths.append(np.fromiter(map(len, blobs), np.int64, len(rows)) // 8)
        seqs.append(np.frombuffer(b"".join(blobs), "<i8").astype(seq_type(through)))
    return _by_term(after, through, _joined(ids), _joined(lengths), _joined(seqs))


def seq_type(highest: int) -> type[np.signedinteger[Any]]:
    """The smallest integer type for seqs up to ``highest``."""
    return np.int32 if highest < 2**31 else np.int64


def _joined(parts: list[Any]) -> Any:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _by_term(after: int, through: int, row_terms: Ints, row_lengths: Ints, seqs: Seqs) -> Segment:
    """Rows sorted by term, one or more per term, merged into one run per term."""
    if not len(row_terms):
        empty = np.empty(0, np.int64)
        return Segment(after, through, empty, np.zeros(1, np.int64), empty.astype(seq_type(0)))
    last_row_of_term = np.append(np.flatnonzero(np.diff(row_terms)), len(row_terms) - 1)
    ends = np.cumsum(row_lengths)[last_row_of_term]
    return Segment(after, through, row_terms[last_row_of_term], np.concatenate(([0], ends)), seqs)
