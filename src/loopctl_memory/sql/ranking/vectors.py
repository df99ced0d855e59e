"""Each entry's vector in a process: graph files for most, binary32 rows for the newest.

The third posting-like family of the ranking state, read on the first vector
or hybrid retrieval (the vectors of the store's embedder) and kept current by
the same refresh: new entries by seq, and every entry the change log names
(rewritten, removed, or given its vector later by ``embed_pending``) read
again.

A store with few vectors, or with no place for files (``:memory:``), holds
them all here as binary32 rows by seq, scored exactly at every retrieval.
Which graph files hold the others, and building them, is
:mod:`~loopctl_memory.sql.ranking.vector_files`'s. This process holds only
the vectors no current graph holds:

- ``dense``: the vectors of the seqs above ``through``, the highest seq any
  graph covers;
- ``extra``: the vectors of seqs at or below it that no graph holds as they are
  now (given or changed after that graph was built).

``holder`` says, by seq, which graph holds an entry's current vector (-1:
none). A graph's copy of a vector stops counting once the change log names
the entry after the graph's position in it, so a graph never answers for a
vector it does not hold.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical.arrays import zeroed_rows
from loopctl_memory.sql.ranking.graph import Graph

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Vectors = npt.NDArray[np.float32]
_ROWS_PER_FETCH = 8_192
_SEQS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters
_VECTORS = "SELECT entry_seq, vector FROM vectors WHERE embedder_id = ?"


class VectorIndex:
    """The vectors by one embedder of every entry up to the state's highest seq."""

    def __init__(self, embedder_id: int, dims: int) -> None:
        self.embedder_id = embedder_id
        self.dims = dims
        self.present: Mask = np.zeros(1, np.bool_)
        """Whether the entry at each seq has a vector (a pending one has none)."""
        self.holder: npt.NDArray[np.int16] = np.full(1, -1, np.int16)
        self._graph_count: int | None = None
        self.graphs: list[Graph] = []
        self.through = 0
        self.dense: Vectors = np.zeros((1, dims), np.float32)
        """Row ``n``: the vector of seq ``through + n`` (row 0 unused)."""
        self.extra: dict[int, Vectors] = {}

    # --- reading ---

    def hold(self, graphs: list[Graph], through: int, top: int) -> None:
        """Let ``graphs`` hold every vector they have, up to seq ``through``; forget the rest.

        The caller then reads the vectors no graph holds as they are now
        (:meth:`read_again`, :meth:`read`), up to ``top``.
        """
        self._grow(top)
        self.graphs = list(graphs)
        self.holder[:] = -1
        self._graph_count = None
        for number, graph in enumerate(graphs):
            seqs = graph.seqs()
            self.holder[seqs[seqs < len(self.holder)]] = number
        self.present[:] = self.holder >= 0
        self.through = through
        self.dense = zeroed_rows(max(1, top - through + 1), self.dims)
        self.extra = {}

    def read(self, connection: Reader, after: int, through: int) -> None:
        """Read the vectors of the entries with ``after < seq <= through`` (new ones)."""
        self._grow(through)
        for rows in connection.chunks(
            f"{_VECTORS} AND entry_seq > ? AND entry_seq <= ?",
            (self.embedder_id, max(after, self.through), through),
            _ROWS_PER_FETCH,
        ):
            self._place(rows)

    def read_again(self, connection: Reader, seqs: list[int]) -> None:
        """Read again the vectors of ``seqs`` (rewritten, removed, or embedded since)."""
        known = [seq for seq in seqs if seq < len(self.present)]
        if not known:
            return
        chunk = np.array(known, np.int64)
        self.present[chunk] = False
        self.holder[chunk] = -1
        self._graph_count = None
        for seq in known:
            self.extra.pop(seq, None)
        self._place(stored_rows(connection, self.embedder_id, known))

    def _place(self, rows: Sequence[Any]) -> None:
        seqs, vectors = _decoded(rows, self.dims)
        if not len(seqs):
            return
        first = int(seqs[0])
        if first > self.through and bool((np.diff(seqs) == 1).all()):
            # A run of new seqs in order, each with its vector (a load): one block copy.
            self.dense[first - self.through : first - self.through + len(seqs)] = vectors
            self.present[first : first + len(seqs)] = True
            return
        above = seqs > self.through
        self.dense[seqs[above] - self.through] = vectors[above]
        for seq, vector in zip(seqs[~above].tolist(), vectors[~above], strict=True):
            self.extra[seq] = vector.copy()
        self.present[seqs] = True

    def _grow(self, through: int) -> None:
        if len(self.present) <= through:
            size = max(through + 1, 2 * len(self.present))
            self.present = _grown(self.present, size, False)
            self.holder = _grown(self.holder, size, -1)
        rows = through - self.through + 1
        if len(self.dense) < rows:
            dense = zeroed_rows(max(rows, 2 * len(self.dense)), self.dims)
            dense[: len(self.dense)] = self.dense
            self.dense = dense

    # --- what a retrieval asks ---

    def loose_seqs(self, universe: Mask) -> Ints:
        """The seqs of ``universe`` (a mask by seq) whose vectors are held here, ascending."""
        size = min(len(universe), len(self.present))
        extra = sorted(seq for seq in self.extra if seq < size and universe[seq])
        start = self.through + 1
        dense = np.flatnonzero(universe[start:size] & self.present[start:size]) + start
        if not extra:
            return dense
        return np.concatenate([np.array(extra, np.int64), dense])

    def rough_cosines(self, seqs: Ints, query: Vectors) -> npt.NDArray[np.float32]:
        """Binary32 dot products of the held vectors of ``seqs`` (ascending) with ``query``."""
        split = int(np.searchsorted(seqs, self.through, side="right"))
        found = np.empty(len(seqs), np.float32)
        if split:
            found[:split] = self.vectors_of(seqs[:split]) @ query
        if split < len(seqs):
            rows = seqs[split:] - self.through
            if len(rows) * 4 < int(rows[-1]):  # few: gather them
                found[split:] = self.dense[rows] @ query
            else:  # most: one pass over the rows, no copy
                found[split:] = (self.dense[: int(rows[-1]) + 1] @ query)[rows]
        return found

    def vectors_of(self, seqs: Ints) -> Vectors:
        """The held vectors of ``seqs`` (each held here), as rows."""
        if not len(seqs):
            return np.zeros((0, self.dims), np.float32)
        above = seqs > self.through
        if above.all():
            return self.dense[seqs - self.through]
        rows = np.empty((len(seqs), self.dims), np.float32)
        rows[above] = self.dense[seqs[above] - self.through]
        for row in np.flatnonzero(~above).tolist():
            rows[row] = self.extra[int(seqs[row])]
        return rows

    def held_count(self) -> int:
        """How many vectors this process holds itself (not in a graph)."""
        return len(self.extra) + int(np.count_nonzero(self.present[self.through + 1 :]))

    def graph_seqs(self, universe: Mask) -> Ints:
        """The seqs of ``universe`` whose current vectors a graph holds, ascending."""
        if not self.graphs:
            return np.empty(0, np.int64)
        size = min(len(universe), self.through + 1)
        return np.flatnonzero(universe[:size] & (self.holder[:size] >= 0))

    def graph_count(self) -> int:
        """How many entries' current vectors the graphs hold."""
        if self._graph_count is None:
            self._graph_count = int(np.count_nonzero(self.holder >= 0))
        return self._graph_count

    def graph_count_in(self, universe: Mask) -> int:
        """How many entries of ``universe`` have their current vectors in the graphs."""
        if not self.graphs:
            return 0
        size = min(len(universe), self.through + 1)
        return int(np.count_nonzero(universe[:size] & (self.holder[:size] >= 0)))

    def search(
        self, query: Vectors, count: int, eligible: Mask
    ) -> tuple[Ints, npt.NDArray[np.float64]]:
        """Up to ``count`` seqs of ``eligible`` the graphs find nearest ``query``, nearest first.

        With the graphs' cosines, approximate (see ``graph.APPROXIMATION``).
        """
        seqs_found: list[Ints] = []
        cosines_found: list[npt.NDArray[np.float64]] = []
        size = min(len(eligible), len(self.holder))
        for number, graph in enumerate(self.graphs):
            seqs, cosines = graph.search(query, count)
            inside = seqs < size
            seqs, cosines = seqs[inside], cosines[inside]
            keep = (self.holder[seqs] == number) & eligible[seqs]
            seqs_found.append(seqs[keep])
            cosines_found.append(cosines[keep])
        if not seqs_found:
            return np.empty(0, np.int64), np.empty(0, np.float64)
        seqs = np.concatenate(seqs_found)
        cosines = np.concatenate(cosines_found)
        order = np.argsort(-cosines, kind="stable")[:count]
        return seqs[order], cosines[order]

    def graph_cosines(self, seqs: Ints, query: Vectors) -> npt.NDArray[np.float64]:
        """The graphs' cosines of graph-held ``seqs`` with ``query``: approximate."""
        found = np.empty(len(seqs), np.float64)
        holders = self.holder[seqs]
        for number, graph in enumerate(self.graphs):
            mine = np.flatnonzero(holders == number)
            if len(mine):
                found[mine] = graph.vectors(seqs[mine]) @ query
        return found


def stored_rows(connection: Reader, embedder_id: int, seqs: list[int]) -> list[Any]:
    """The (seq, vector) rows of ``seqs`` that have a vector by the embedder."""
    found: list[Any] = []
    for start in range(0, len(seqs), _SEQS_PER_LOOKUP):
        chunk = seqs[start : start + _SEQS_PER_LOOKUP]
        marks = ", ".join("?" * len(chunk))
        found += connection.all(
            f"{_VECTORS} AND entry_seq IN ({marks})",
            (embedder_id, *chunk),
        )
    return found


def stored_vectors(
    connection: Reader, embedder_id: int, seqs: Ints, dims: int
) -> tuple[Ints, Vectors]:
    """The seqs of ``seqs`` with a stored vector (ascending) and those vectors."""
    rows = sorted(stored_rows(connection, embedder_id, seqs.tolist()), key=lambda row: int(row[0]))
    return _decoded(rows, dims)


def stored_batches(
    connection: Reader, embedder_id: int, after: int, through: int, dims: int
) -> Iterator[tuple[Ints, Vectors]]:
    """The stored vectors of the entries with ``after < seq <= through``, a batch at a time."""
    for rows in connection.chunks(
        f"{_VECTORS} AND entry_seq > ? AND entry_seq <= ?",
        (embedder_id, after, through),
        _ROWS_PER_FETCH * 8,
    ):
        yield _decoded(rows, dims)


def _decoded(rows: Sequence[Any], dims: int) -> tuple[Ints, Vectors]:
    """(seq, vector column) rows as their seqs and a matrix of their binary32 vectors."""
    held = list(rows)
    seqs = np.fromiter((int(row[0]) for row in held), np.int64, len(held))
    blob = b"".join(bytes(row[1]) for row in held)
    return seqs, np.frombuffer(blob, "<f4").reshape(len(held), dims)


def _grown(values: npt.NDArray[Any], size: int, fill: Any) -> npt.NDArray[Any]:
    grown = np.full(size, fill, values.dtype)
    grown[: len(values)] = values
    return grown
