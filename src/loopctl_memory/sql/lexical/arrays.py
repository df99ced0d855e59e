"""Array steps the index modules share."""

from __future__ import annotations

import mmap
from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Seqs = npt.NDArray[np.signedinteger[Any]]
Float32Rows = npt.NDArray[np.float32]

_PLAIN_PAGES_FROM = 64 << 20  # bytes


def zeroed_rows(rows: int, columns: int) -> Float32Rows:
    """A new ``rows`` x ``columns`` binary32 array of zeros; a large one in plain pages.

    numpy asks Linux for transparent huge pages for a large array, and where
    the kernel then compacts memory to find them on first touch (``defrag``
    set to ``madvise``, the usual default), filling a fresh 1.5 GB array took
    2.8-3.7 s here once a 2.4 GB file had filled the page cache, against
    0.5-0.7 s in 4 KiB pages: the first vector search of a process paid it.
    A private anonymous mapping gets plain pages, zeroed by the kernel as they
    are first touched. A BLAS pass over it measured 13-16% slower (more TLB
    misses), which only exact passes over many held vectors pay: no graph
    holds them yet.
    """
    size = rows * columns * 4
    if size < _PLAIN_PAGES_FROM or not hasattr(mmap, "MAP_PRIVATE"):
        return np.zeros((rows, columns), np.float32)
    pages = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE)
    return np.frombuffer(pages, np.float32).reshape(rows, columns)


def run_positions(first: Ints, lengths: Ints) -> Ints:
    """Every position of every run ``first[k], first[k] + 1, ...`` of ``lengths[k]``, in order."""
    # The k-th output sits at first[run] + (k - where the run begins in the output).
    begins = np.cumsum(lengths) - lengths
    offsets = np.repeat(first - begins, lengths)
    positions: Ints = np.arange(len(offsets), dtype=offsets.dtype) + offsets
    return positions


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


def found_at(seqs: Ints, wanted: Ints) -> tuple[Ints, npt.NDArray[np.bool_]]:
    """Where each of ``wanted`` is in ``seqs`` (ascending), and whether it is there at all."""
    at = np.searchsorted(seqs, wanted)
    hit = at < len(seqs)
    hit[hit] = seqs[at[hit]] == wanted[hit]
    return at, hit


def values_at(seqs: Ints, values: npt.NDArray[np.float64], wanted: Ints) -> npt.NDArray[np.float64]:
    """The value of each of ``wanted`` where ``seqs`` (ascending) holds it, else 0.0."""
    found = np.zeros(len(wanted), np.float64)
    at, hit = found_at(seqs, wanted)
    found[hit] = values[at[hit]]
    return found


def seq_type(highest: int) -> type[np.signedinteger[Any]]:
    """The smallest integer type for seqs (or term ids, or positions) up to ``highest``."""
    return np.int32 if highest < 2**31 else np.int64
