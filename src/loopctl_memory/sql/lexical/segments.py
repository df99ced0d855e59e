"""Postings in memory: for each term of some indexed blocks, the seqs of the entries holding it.

A segment regroups the rows of a range of blocks (one row a block in the
database) by term: the sorted term ids, where each term's seqs start, and
every seq, term after term (compressed sparse rows). The seqs of any set of
terms then come out in a few vectorised steps, whatever the number of terms.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical.arrays import run_positions, seq_type
from loopctl_memory.sql.lexical.index import TermTables

Ints = npt.NDArray[np.int64]
Narrow = npt.NDArray[np.signedinteger[Any]]
"""int32 while every value fits (half the memory), else int64."""
Counts = npt.NDArray[np.uint8] | npt.NDArray[np.int32]
Seqs = npt.NDArray[np.signedinteger[Any]]
"""int32 while every seq fits (half the memory), else int64."""

_PIECE = 1 << 20  # seqs marked at a time: bounds the index arrays a common word needs
_BYTE = 255
_BLOCKS_PER_FETCH = 4  # a row holds a whole block's postings (about tail_limit entries)


@dataclass(frozen=True, slots=True)
class Runs:
    """Runs of a segment's ``seqs``: their starts and lengths."""

    first: Narrow
    lengths: Narrow

    @property
    def postings(self) -> int:
        """How many seqs the runs hold."""
        return int(self.lengths.sum())


@dataclass(frozen=True, slots=True)
class Segment:
    """The postings of some consecutive blocks, by term."""

    term_ids: Narrow  # the terms with postings here, ascending
    starts: Narrow  # term i's seqs are seqs[starts[i]:starts[i + 1]]
    seqs: Seqs
    counts: Counts | None = None  # of a counted vocabulary: each posting's count

    def run_of(self, term_id: int) -> tuple[Seqs, Counts] | None:
        """The seqs holding one term of a counted vocabulary, and their counts; None if none."""
        where = int(np.searchsorted(self.term_ids, term_id))
        if where >= len(self.term_ids) or self.term_ids[where] != term_id or self.counts is None:
            return None
        low, high = self.starts[where], self.starts[where + 1]
        return self.seqs[low:high], self.counts[low:high]

    def runs(self, term_ids: Ints) -> Runs:
        """Where the seqs of those of ``term_ids`` (distinct) the segment holds lie in ``seqs``.

        Many terms (a word of one or two letters is in millions of tokens) are
        found through a mask of the wanted ids, one pass over the segment's
        terms, instead of a binary search each.
        """
        # In the segment's own width (a cast of the segment's arrays would cost each
        # call their size): ids above its highest hold nothing here.
        held_ids = self.term_ids
        if len(held_ids) and len(term_ids):
            term_ids = term_ids[term_ids <= held_ids[-1]].astype(held_ids.dtype)
        if len(term_ids) * 16 > len(self.term_ids) and len(term_ids):
            highest = int(term_ids.max())
            wanted_mask = np.zeros(highest + 1, np.bool_)
            wanted_mask[term_ids] = True
            held = self.term_ids[: np.searchsorted(self.term_ids, highest, side="right")]
            where = np.flatnonzero(wanted_mask[held])
        else:
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
        gathered: Seqs = self.seqs[run_positions(runs.first, runs.lengths)]
        return gathered

    def mark(self, runs: Runs, mask: npt.NDArray[np.bool_]) -> None:
        """Set ``mask[seq]`` for every seq in these runs, a bounded piece at a time."""
        ends = np.cumsum(runs.lengths)
        cuts = np.searchsorted(ends, np.arange(_PIECE, int(ends[-1]) if len(ends) else 0, _PIECE))
        for low, high in itertools.pairwise([0, *sorted(set(cuts.tolist())), len(ends)]):
            if high > low:
                first, lengths = runs.first[low:high], runs.lengths[low:high]
                mask[self.seqs[run_positions(first, lengths)]] = True


def load_segment(
    connection: Reader,
    tables: TermTables,
    after: int,
    through: int,
    lengths_into: npt.NDArray[np.integer[Any]] | None = None,
) -> Segment:
    """Read the postings of the blocks in ``(after, through]`` (a row a block), by term.

    Two passes: the rows' term ids and counts first, which size every term's
    run, then their seqs, each copied straight to its place. The rows never
    all sit in memory, and the seqs are held once. Of a counted vocabulary,
    each posting's count comes too, and each document's length is written to
    ``lengths_into`` (by seq).
    """
    window = (after, through)
    table = tables.blocks.name
    # Each term's seq count, by term id: a row names a term once, so a row adds in one step.
    by_id = np.zeros(0, np.int64)
    sizes = f"SELECT term_ids, lengths FROM {table} WHERE block > ? AND block <= ?"  # noqa: S608
    for rows in connection.chunks(sizes, window, 256):
        for held, lengths in rows:
            ids = np.frombuffer(held, "<i8")
            if len(ids) and int(ids[-1]) >= len(by_id):  # ascending: the last is the largest
                grown = np.zeros(max(int(ids[-1]) + 1, 2 * len(by_id)), np.int64)
                grown[: len(by_id)] = by_id
                by_id = grown
            by_id[ids] += np.frombuffer(lengths, "<i8")
    term_ids = np.flatnonzero(by_id).astype(seq_type(len(by_id)))
    place = np.zeros(len(by_id), seq_type(len(term_ids)))  # where each term id is in term_ids
    place[term_ids] = np.arange(len(term_ids))
    starts = np.cumsum(by_id[term_ids])
    starts = np.concatenate(([0], starts)).astype(seq_type(int(starts[-1]) if len(starts) else 0))
    del by_id
    cursor = starts[:-1].copy()
    seqs: Seqs = np.empty(int(starts[-1]), seq_type(through))
    # Most counts are small: a byte each, widened the first time one is not.
    tallies: Counts | None = np.empty(len(seqs), np.uint8) if tables.counted else None
    extra = ", counts, document_lengths, block" if tables.counted else ""
    everything = (
        f"SELECT term_ids, lengths, seqs{extra} "  # noqa: S608
        f"FROM {table} WHERE block > ? AND block <= ? ORDER BY block"
    )
    for rows in connection.chunks(everything, window, _BLOCKS_PER_FETCH):
        for row in rows:
            where = place[np.frombuffer(row[0], "<i8")]
            run_lengths = np.frombuffer(row[1], "<i8").astype(np.int64)
            places = run_positions(cursor[where], run_lengths)
            seqs[places] = np.frombuffer(row[2], "<i8")
            if tallies is not None:
                held = np.frombuffer(row[3], "<i4")
                if len(held) and tallies.dtype == np.uint8 and held.max() > _BYTE:
                    tallies = tallies.astype(np.int32)
                tallies[places] = held
                if lengths_into is not None:
                    documents = np.frombuffer(row[4], "<i4")
                    lengths_into[row[5] : row[5] + len(documents)] = documents
            cursor[where] += run_lengths
    return Segment(term_ids, starts, seqs, tallies)
