"""Where one query's words are found: kept entries, a piece's rows, or the tokens holding them.

A query may have thousands of words (a whole prompt passed as a query). Its
words of three code points or more are looked up a batch at a time, as the
ranking reaches them, so the token ids and trigram rows in memory at once stay
bounded whatever its length; a shorter word's entries are read when it is reached.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical import pieces
from loopctl_memory.sql.lexical.grams import TokenFinder

Ints = npt.NDArray[np.int64]

_WORDS_A_BATCH = 128


class QueryWords:
    """The words of one query being ranked in ``reader``'s transaction, through ``mark``."""

    def __init__(
        self,
        reader: Reader,
        words: Iterable[str],
        finder: TokenFinder,
        mark: int,
        kept: Mapping[str, npt.NDArray[Any]],
    ) -> None:
        self._reader, self._finder, self._mark = reader, finder, mark
        self._words = list(dict.fromkeys(words))
        self._place = {word: n for n, word in enumerate(self._words)}
        # Words whose entries the state keeps are held for this query, whatever the
        # words looked up next make the state's budget drop.
        self.kept = {word: kept[word] for word in self._words if word in kept}
        self._tokens: dict[str, Ints] = {}

    def entries_of(self, word: str) -> Ints | npt.NDArray[np.bool_] | None:
        """The indexed entries holding a word of one or two code points; else None.

        Their seqs, ascending, or a mask by seq through the watermark (see
        :func:`~loopctl_memory.sql.lexical.pieces.entries_holding`).

        Read when asked, one word at a time: a piece is one statement however it
        is batched, and the entries of a common one are a few MB each.
        """
        if len(word) > 2:
            return None
        return pieces.entries_holding(self._reader, word, self._mark)

    def tokens_of(self, word: str) -> Ints:
        """The ids of the tokens holding a word of three code points or more, ascending."""
        if word not in self._tokens:
            self._look_up_from(word)
        return self._tokens[word]

    def _look_up_from(self, word: str) -> None:
        """Look up ``word`` and the next long words of the query not yet known; forget the last."""
        start = self._place.get(word)
        batch = [word] if start is None else self._words[start : start + _WORDS_A_BATCH]
        # Never drops ``word``: see kept.
        batch = [each for each in batch if len(each) > 2 and each not in self.kept]
        self._tokens = self._finder.look_up(self._reader, batch)
