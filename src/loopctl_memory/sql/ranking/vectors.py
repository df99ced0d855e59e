"""Each entry's vector in a process: a binary32 matrix by seq, kept current with the rest.

The third posting-like family of the ranking state: read on the first vector
or hybrid retrieval (the vectors of the store's embedder), then kept current
by the same refresh: new entries by seq, and every entry the change log names
(rewritten, removed, or given its vector later by ``embed_pending``) read
again. A row without a vector (a pending entry) is marked absent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader

_ROWS_PER_FETCH = 8_192
_SEQS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters


class VectorIndex:
    """The vectors by one embedder of every entry up to the state's highest seq."""

    def __init__(self, embedder_id: int, dims: int) -> None:
        self.embedder_id = embedder_id
        self.dims = dims
        self.matrix: npt.NDArray[np.float32] = np.zeros((1, dims), np.float32)
        self.present: npt.NDArray[np.bool_] = np.zeros(1, np.bool_)
        """Whether the entry at each seq has a vector (a pending one has none)."""

    def read(self, connection: Reader, after: int, through: int) -> None:
        """Read the vectors of the entries with ``after < seq <= through``."""
        self._grow(through)
        for rows in connection.chunks(
            "SELECT entry_seq, vector FROM vectors"
            " WHERE embedder_id = ? AND entry_seq > ? AND entry_seq <= ?",
            (self.embedder_id, after, through),
            _ROWS_PER_FETCH,
        ):
            self._place(rows)

    def read_again(self, connection: Reader, seqs: list[int]) -> None:
        """Read again the vectors of ``seqs`` (rewritten, removed, or embedded since)."""
        for start in range(0, len(seqs), _SEQS_PER_LOOKUP):
            chunk = [
                seq for seq in seqs[start : start + _SEQS_PER_LOOKUP] if seq < len(self.present)
            ]
            if not chunk:
                continue
            self.present[chunk] = False
            marks = ", ".join("?" * len(chunk))
            self._place(
                connection.all(
                    f"SELECT entry_seq, vector FROM vectors WHERE embedder_id = ?"  # noqa: S608
                    f" AND entry_seq IN ({marks})",
                    (self.embedder_id, *chunk),
                )
            )

    def _place(self, rows: Sequence[Any]) -> None:
        held = list(rows)
        if not held:
            return
        seqs = np.fromiter((int(row[0]) for row in held), np.int64, len(held))
        blob = b"".join(bytes(row[1]) for row in held)
        self.matrix[seqs] = np.frombuffer(blob, "<f4").reshape(len(held), self.dims)
        self.present[seqs] = True

    def _grow(self, through: int) -> None:
        if len(self.present) > through:
            return
        size = max(through + 1, 2 * len(self.present))
        matrix = np.zeros((size, self.dims), np.float32)
        matrix[: len(self.matrix)] = self.matrix
        present = np.zeros(size, np.bool_)
        present[: len(self.present)] = self.present
        self.matrix, self.present = matrix, present
