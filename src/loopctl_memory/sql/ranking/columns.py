"""The columns a filter tests, by seq, in a process: category, validated, creation time, relevance.

A third family of the ranking state, read on the first filtered retrieval and
kept current by the same refresh (new entries by seq, rewritten ones from the
change log; a pass over many entries raises the generation and every family
is read again). Tags are not here: the tag postings the state already keeps
answer "which entries carry this tag".
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loopctl_memory.entry import MemoryCategory
from loopctl_memory.sql.backend import Reader

CATEGORY_CODES = {category.value: code for code, category in enumerate(MemoryCategory)}
"""Each category's value and the small integer it is held as."""

_ROWS_PER_FETCH = 65_536
_NO_CATEGORY = 255  # where no entry lives


class FilterColumns:
    """Each entry's category (as its code), validated flag, creation time and relevance."""

    def __init__(self) -> None:
        self.category: npt.NDArray[np.uint8] = np.full(1, _NO_CATEGORY, np.uint8)
        self.validated: npt.NDArray[np.bool_] = np.zeros(1, np.bool_)
        self.created_us: npt.NDArray[np.int64] = np.zeros(1, np.int64)
        self.relevance: npt.NDArray[np.float64] = np.zeros(1, np.float64)
        self.field_masks: dict[object, npt.NDArray[np.bool_]] = {}
        """Metadata conditions' masks, by condition and state position (filtering keeps them)."""

    def read(self, connection: Reader, after: int, through: int) -> None:
        """Read the entries with ``after < seq <= through``."""
        self._grow(through)
        statement = (
            "SELECT seq, category, validated, created_at_us, relevance FROM entries"
            " WHERE seq > ? AND seq <= ?"
        )
        codes = CATEGORY_CODES
        for rows in connection.chunks(statement, (after, through), _ROWS_PER_FETCH):
            seqs = np.fromiter((row[0] for row in rows), np.int64, len(rows))
            self.category[seqs] = np.fromiter((codes[row[1]] for row in rows), np.uint8, len(rows))
            self.validated[seqs] = np.fromiter((bool(row[2]) for row in rows), np.bool_, len(rows))
            self.created_us[seqs] = np.fromiter((row[3] for row in rows), np.int64, len(rows))
            self.relevance[seqs] = np.fromiter((row[4] for row in rows), np.float64, len(rows))

    def rewrite(self, seq: int, category: str, validated: object, relevance: float) -> None:
        """Entry ``seq`` now has these values (its creation time never changes)."""
        if seq < len(self.category):
            self.category[seq] = CATEGORY_CODES[category]
            self.validated[seq] = bool(validated)
            self.relevance[seq] = relevance

    def _grow(self, through: int) -> None:
        size = len(self.category)
        if size > through:
            return
        grown = max(through + 1, 2 * size)
        category = np.full(grown, _NO_CATEGORY, np.uint8)
        category[:size] = self.category
        validated = np.zeros(grown, np.bool_)
        validated[:size] = self.validated
        created = np.zeros(grown, np.int64)
        created[:size] = self.created_us
        relevance = np.zeros(grown, np.float64)
        relevance[:size] = self.relevance
        self.category, self.validated, self.created_us, self.relevance = (
            category,
            validated,
            created,
            relevance,
        )
