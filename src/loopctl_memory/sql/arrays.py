"""Array steps the index modules share."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Ints = npt.NDArray[np.int64]


def run_positions(first: Ints, lengths: Ints) -> Ints:
    """Every position of every run ``first[k], first[k] + 1, ...`` of ``lengths[k]``, in order."""
    # The k-th output sits at first[run] + (k - where the run begins in the output).
    begins = np.cumsum(lengths) - lengths
    offsets = np.repeat(first - begins, lengths)
    positions: Ints = np.arange(len(offsets), dtype=offsets.dtype) + offsets
    return positions
