"""Postings in memory: for each term of some indexed blocks, the seqs of the entries holding it.

A segment holds the rows of the blocks in a range: their seqs one block after
the other, and their *runs* (one per term and block: where its seqs start and
how many) sorted by term, then block. The seqs of any set of terms then come
out in a few vectorised steps, whatever the number of terms.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.index import TermTables

Ints = npt.NDArray[np.int64]
Seqs = npt.NDArray[np.signedinteger[Any]]
"""int32 while every seq fits (half the memory), else int64."""

_PIECE = 1 << 20  # seqs marked at a time: bounds the index arrays a common word needs
_BLOCKS_PER_FETCH = 4  # a row holds a whole block's postings (about tail_limit entries)


@dataclass(frozen=True, slots=True)
class Runs:
    """Runs of a segment's ``seqs``: their starts and lengths."""

    first: Ints
    lengths: Ints

    @property
    def postings(self) -> int:
        """How many seqs the runs hold."""
        return int(self.lengths.sum())


@dataclass(frozen=True, slots=True)
class Segment:
    """The postings of some consecutive blocks."""

    term_ids: Ints  # the terms with postings here, ascending
    term_runs: Ints  # term i's runs are those from term_runs[i] to term_runs[i + 1]
    runs_by_term: Runs
    seqs: Seqs

    def runs(self, term_ids: Ints) -> Runs:
        """Where the seqs of those of ``term_ids`` that the segment holds lie in ``seqs``."""
        where = np.searchsorted(self.term_ids, term_ids)
        inside = where < len(self.term_ids)
        where, wanted = where[inside], term_ids[inside]
        where = where[self.term_ids[where] == wanted]
        first = self.term_runs[where]
        chosen = _positions(first, self.term_runs[where + 1] - first)
        return Runs(self.runs_by_term.first[chosen], self.runs_by_term.lengths[chosen])

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
        for low, high in itertools.pairwise([0, *sorted(set(cuts.tolist())), len(ends)]):
            if high > low:
                first, lengths = runs.first[low:high], runs.lengths[low:high]
                mask[self.seqs[_positions(first, lengths)]] = True


def load_segment(
    connection: Reader, tables: TermTables, after: int, through: int, expected: int = 0
) -> Segment:
    """Read the postings of the blocks in ``(after, through]``: a row a block.

    ``expected``: about how many postings they hold, to allocate once.
    """
    statement = (
        f"SELECT block, term_ids, lengths, seqs FROM {tables.blocks.name} "  # noqa: S608
        "WHERE block > ? AND block <= ? ORDER BY block"
    )
    # Filled in place: a list of pieces joined at the end would need twice the memory.
    seqs: Seqs = np.empty(expected, seq_type(through))
    filled = 0
    # Term ids, run starts and lengths in 32 bits while they fit: they are many (a run
    # per term and block), and the regrouping by term copies them a few times.
    small = seq_type(max(expected, through))
    terms: list[Ints] = []
    starts: list[Ints] = []
    lengths: list[Ints] = []
    for rows in connection.chunks(statement, (after, through), _BLOCKS_PER_FETCH):
        for _, term_ids, counts, blob in rows:
            piece = np.frombuffer(blob, "<i8")
            if filled + len(piece) > len(seqs):
                grown = np.empty(max(2 * len(seqs), filled + len(piece)), seqs.dtype)
                grown[:filled] = seqs[:filled]
                seqs = grown
            seqs[filled : filled + len(piece)] = piece
            sizes = np.frombuffer(counts, "<i8")
            terms.append(np.frombuffer(term_ids, "<i8").astype(small))
            starts.append((filled + np.cumsum(sizes) - sizes).astype(small))
            lengths.append(sizes.astype(small))
            filled += len(piece)
    return _by_term(terms, Runs(_joined(starts), _joined(lengths)), seqs[:filled])


def distinct(seqs: Seqs, size: int) -> Seqs:
    """The distinct ``seqs`` (all below ``size``), ascending.

    Sorted when few, through a mask over every seq when many: numpy's own
    ``unique`` hashes, several times slower than either here.
    """
    if len(seqs) * 32 < size:
        ordered = np.sort(seqs)
        keep = np.empty(len(ordered), np.bool_)
        keep[:1] = True
        np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
        kept: Seqs = ordered[keep]
        return kept
    mask = np.zeros(size, np.bool_)
    mask[seqs] = True
    return np.flatnonzero(mask).astype(seqs.dtype)


def seq_type(highest: int) -> type[np.signedinteger[Any]]:
    """The smallest integer type for seqs up to ``highest``."""
    return np.int32 if highest < 2**31 else np.int64


def _joined(parts: list[Ints]) -> Ints:
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def _by_term(terms: list[Any], runs: Runs, seqs: Seqs) -> Segment:
    """Runs listed block after block, each block's by term, sorted by term then block."""
    run_terms = _joined(terms)
    terms.clear()
    order = np.argsort(run_terms, kind="stable")  # stable: blocks stay in order
    run_terms = run_terms[order]
    first_run = np.flatnonzero(np.diff(run_terms, prepend=-1))  # run_terms is sorted
    term_ids = run_terms[first_run].astype(np.int64)
    del run_terms
    term_runs = np.append(first_run, len(order)).astype(np.int64)
    by_term = Runs(runs.first[order], runs.lengths[order])
    return Segment(term_ids, term_runs, by_term, seqs)


def _positions(first: Ints, lengths: Ints) -> Ints:
    """Every position of every run, run after run."""
    # The k-th output sits at first[run] + (k - where the run begins in the output).
    begins = np.cumsum(lengths) - lengths
    offsets = np.repeat(first - begins, lengths)
    positions: Ints = np.arange(len(offsets), dtype=offsets.dtype) + offsets
    return positions
