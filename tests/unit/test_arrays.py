"""Arrays the rankings hold: a large block of vectors comes zeroed and writable, in plain pages."""

from __future__ import annotations

import numpy as np
import pytest

from loopctl_memory.sql.lexical import arrays


@pytest.mark.parametrize("rows", [1, 3, 50_000])  # 50,000 x 384 binary32: past the 64 MiB mark
def test_zeroed_rows_are_zeros_that_take_writes(rows: int) -> None:
    block = arrays.zeroed_rows(rows, 384)
    assert block.shape == (rows, 384)
    assert block.dtype == np.float32
    assert not block.any()
    block[-1, -1] = 1.5
    block[0, 0] = -2.0
    assert (block[-1, -1], block[0, 0], float(block.sum())) == (1.5, -2.0, -0.5)
    copied = arrays.zeroed_rows(2 * rows, 384)
    copied[:rows] = block
    assert np.array_equal(copied[:rows], block)
    assert not copied[rows:].any()
