"""Postings in memory: for each term of some indexed blocks, the seqs of the entries holding it.

A segment is the postings table's rows for a range of blocks, regrouped by
term into three arrays (compressed sparse rows): the sorted term ids, where
each term's seqs start, and every seq. The seqs of any set of terms then come
out in a few vectorised steps, whatever the number of terms.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.sql.backend import row_chunks
from loopctl_memory.sql.index import TermTables

Ints = npt.NDArray[np.int64]
Seqs = npt.NDArray[np.signedinteger[Any]]
"""int32 while every seq fits (half the memory), else int64."""
_PIECE = 1 << 20  # seqs marked at a time: bounds the index arrays a common word needs
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

    def runs(self, term_ids: Ints) -> Runs:
        """Where the seqs of those of ``term_ids`` that the segment holds lie in ``seqs``."""
        where = np.searchsorted(self.term_ids, term_ids)
        inside = where < len(self.term_ids)
        where, wanted = where[inside], term_ids[inside]
        where = where[self.term_ids[where] == wanted]
        first = self.starts[where]
        return Runs(first, self.starts[where + 1] - first)

    def gather(self, runs: Runs) -> Seqs:
        """The seqs in these runs, one after the other (an entry may come twice)."""
        if len(runs.first) == 1:
            return self.seqs[runs.first[0] : runs.first[0] + runs.lengths[0]]
        gathered: Seqs = self.seqs[_positions(runs.first, runs.lengths)]
        return gathered

    def mark(self, runs: Runs, mask: npt.NDArray[np.bool_]) -> None:
        """Set ``mask[seq]`` for every seq in these runs, a bounded piece at a time."""
        ends = np.cumsum(runs.lengths)
        cuts = np.searchsorted(ends, np.arange(_PIECE, int(ends[-1]) if len(ends) else 0, _PIECE))
        for low, high in itertools.pairwise([0, *np.unique(cuts).tolist(), len(ends)]):
            if high > low:
                first, lengths = runs.first[low:high], runs.lengths[low:high]
                mask[self.seqs[_positions(first, lengths)]] = True


@dataclass(frozen=True, slots=True)
class Runs:
    """Runs of a segment's ``seqs``: their starts and lengths."""

    first: Ints
    lengths: Ints

    @property
    def postings(self) -> int:
        """How many seqs the runs hold."""
        return int(self.lengths.sum())


def _positions(first: Ints, lengths: Ints) -> Ints:
    """Every position of every run, run after run."""
    # The k-th output sits at first[run] + (k - where the run begins in the output).
    begins = np.cumsum(lengths) - lengths
    offsets = np.repeat(first - begins, lengths)
    positions: Ints = np.arange(len(offsets), dtype=offsets.dtype) + offsets
    return positions


def load_segment(
    connection: Connection, tables: TermTables, after: int, through: int, expected: int = 0
) -> Segment:
    """Read the postings of the blocks in ``(after, through]`` (one statement).

    ``expected``: about how many postings they hold, to allocate once.
    """
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
    ids: list[Ints] = []
    lengths: list[Ints] = []
    # Filled in place: a list of pieces joined at the end would need twice the memory.
    seqs: Seqs = np.empty(expected, seq_type(through))
    filled = 0
    for chunk in row_chunks(connection, statement, parameters, _ROWS_PER_FETCH):
        # A full read also filters out the blocks indexed since the snapshot's watermark.
        rows = [row for row in chunk if row[1] <= through] if after == 0 else chunk
        blobs = [bytes(row[2]) for row in rows]
        ids.append(np.fromiter((row[0] for row in rows), np.int64, len(rows)))
        lengths.append(np.fromiter(map(len, blobs), np.int64, len(rows)) // 8)
        piece = np.frombuffer(b"".join(blobs), "<i8")
        if filled + len(piece) > len(seqs):
            seqs = np.concatenate((seqs[:filled], np.empty(max(len(seqs), len(piece)), seqs.dtype)))
        seqs[filled : filled + len(piece)] = piece
        filled += len(piece)
    return _by_term(after, through, _joined(ids), _joined(lengths), seqs[:filled])


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
