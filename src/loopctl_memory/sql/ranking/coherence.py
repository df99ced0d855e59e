"""Each scope's context weight in a process: ``"auto"`` measured on the scope's newest entries.

:func:`loopctl_memory.context.coherence` of the newest
:data:`~loopctl_memory.context.RECENT` live entries of a scope: their vectors
when the store ranks with an embedder (those that have one), else their words
(:func:`~loopctl_memory.context.lexical_rows`), exactly as ``InMemoryStore``
measures its one stream. A scope's weight is kept until its stream moves (a
new entry in it, or any removal or rewrite in the store).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from loopctl_memory import context
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking.vectors import VectorIndex, stored_vectors

Floats = npt.NDArray[np.float64]
Texts = Callable[[Reader, Ints], list[tuple[str, tuple[str, ...]]]]
"""The ranking state's reader of entries' lowercase memories and tags."""
Stand = tuple[int, int, int]
"""What a scope's stream is as of: its newest seq, the store's last change, the embedder."""
_ROWS_KEPT = 8 * context.RECENT  # word rows kept (their scopes' newest entries)


class Coherence:
    """The ``"auto"`` weights of the scopes a process ranks, kept while their streams stand."""

    def __init__(self) -> None:
        self._weights: dict[int, tuple[Stand, float]] = {}
        self._rows: dict[int, Floats] = {}  # word rows by seq
        self._rows_as_of = -1  # the change their texts are as of

    def weight(  # noqa: PLR0917 - a retrieval's parts
        self,
        scope: int,
        newest: Callable[[], Ints],
        stand: Stand,
        reader: Reader,
        texts: Texts,
        vectors: VectorIndex | None,
    ) -> float:
        """The weight of ``scope``, whose newest entries (ascending) ``newest`` gives.

        ``stand``: what its stream is as of (its weight is kept while it is the
        same); ``vectors``: the store's vectors when it ranks with an embedder (then
        ``newest`` are entries that have one).
        """
        known = self._weights.get(scope)
        if known is not None and known[0] == stand:
            return known[1]
        rows = (
            self._vector_rows(reader, vectors, newest())
            if vectors is not None
            else self._word_rows(reader, texts, newest(), stand)
        )
        weight = context.auto_weight(context.coherence(rows))
        self._weights[scope] = (stand, weight)
        return weight

    def _word_rows(self, reader: Reader, texts: Texts, seqs: Ints, stand: Stand) -> Floats:
        change = stand[1]
        if change != self._rows_as_of or len(self._rows) > _ROWS_KEPT:
            self._rows = {}
            self._rows_as_of = change
        missing = np.array([seq for seq in seqs.tolist() if seq not in self._rows], np.int64)
        if len(missing):
            found = texts(reader, missing)
            rows = context.lexical_rows(found)
            self._rows.update(zip(missing.tolist(), rows, strict=True))
        if not len(seqs):
            return np.zeros((0, 1), np.float64)
        return np.array([self._rows[seq] for seq in seqs.tolist()], np.float64)

    @staticmethod
    def _vector_rows(reader: Reader, vectors: VectorIndex, seqs: Ints) -> Floats:
        rows = np.zeros((len(seqs), vectors.dims), np.float64)
        if not len(seqs):
            return rows
        wanted = np.zeros(int(seqs[-1]) + 1, np.bool_)
        wanted[seqs] = True
        loose = vectors.loose_seqs(wanted)
        rows[np.searchsorted(seqs, loose)] = vectors.vectors_of(loose)
        held = np.setdiff1d(seqs, loose, assume_unique=True)
        if len(held):
            found, stored = stored_vectors(reader, vectors.embedder_id, held, vectors.dims)
            rows[np.searchsorted(seqs, found)] = stored
        return rows
