"""Array steps the index modules share."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]
Seqs = npt.NDArray[np.signedinteger[Any]]


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
