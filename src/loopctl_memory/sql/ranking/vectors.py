"""Each entry's vector in a process: graph files for most, binary32 rows for the newest.

The third posting-like family of the ranking state, read on the first vector
or hybrid retrieval (the vectors of the store's embedder) and kept current by
the same refresh: new entries by seq, and every entry the change log names
(rewritten, removed, or given its vector later by ``embed_pending``) read
again.

A store with few vectors, or with no place for files (``:memory:``), holds
them all here as binary32 rows by seq, scored exactly at every retrieval.
Once more than ``Tuning.vector_loose`` are held so, a build is due: they go
into a graph file (:mod:`~loopctl_memory.sql.ranking.graph`) named by the
store's manifest (:mod:`~loopctl_memory.sql.ranking.graph_home`), shared by
every process of the machine. A retrieval never builds one (it scores the
held vectors exactly meanwhile): :meth:`VectorIndex.build_now` does, in a
child process of the store (:mod:`~loopctl_memory.sql.graph_builds`) or in
``build_indexes``. Once a graph is current, this process holds only the
vectors no current graph holds:

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

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking.graph import Graph, GraphFile, build
from loopctl_memory.sql.ranking.graph_home import GraphHome, Manifest
from loopctl_memory.sql.tuning import Tuning

Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]
Vectors = npt.NDArray[np.float32]
Progress = Callable[[int, int], object]
"""Called with (vectors put into the graph being built, how many it will hold)."""

_ROWS_PER_FETCH = 8_192
_SEQS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters
_MAX_GRAPHS = 4
_VECTORS = "SELECT entry_seq, vector FROM vectors WHERE embedder_id = ?"


@dataclass(frozen=True, slots=True)
class StoreMark:
    """What a manifest must name to be this store's as it is now."""

    store_id: str
    epoch: int
    top: int
    """The highest seq this transaction sees."""
    change: int
    """The last change-log id this transaction sees."""

    @classmethod
    def read(cls, connection: Reader, top: int, change: int) -> StoreMark:
        """The store's identity and epoch, as of ``connection``'s transaction."""
        store_id, epoch = connection.one("SELECT store_id, vector_epoch FROM index_state")
        return cls(str(store_id), int(epoch), top, change)


class VectorIndex:
    """The vectors by one embedder of every entry up to the state's highest seq."""

    def __init__(self, embedder_id: int, dims: int, home: GraphHome | None, tuning: Tuning) -> None:
        self.embedder_id = embedder_id
        self.dims = dims
        self._home = home
        self._tuning = tuning
        self.present: Mask = np.zeros(1, np.bool_)
        """Whether the entry at each seq has a vector (a pending one has none)."""
        self.holder: npt.NDArray[np.int16] = np.full(1, -1, np.int16)
        self._graph_count: int | None = None
        self.graphs: list[Graph] = []
        self._manifest: Manifest | None = None
        self._stamp: tuple[int, int] | None = None
        self.through = 0
        self.dense: Vectors = np.zeros((1, dims), np.float32)
        """Row ``n``: the vector of seq ``through + n`` (row 0 unused)."""
        self.extra: dict[int, Vectors] = {}
        self.build_due = False
        """Whether more than ``Tuning.vector_loose`` vectors are held here, outside a graph,
        where there is a place for files: a build (:meth:`build_now`) is due."""

    @classmethod
    def loaded(
        cls,
        connection: Reader,
        embedder: tuple[int, int],
        mark: StoreMark,
        home: GraphHome | None,
        tuning: Tuning,
    ) -> VectorIndex:
        """The vectors by ``embedder`` (its id and dims), read as of ``mark``."""
        vectors = cls(*embedder, home, tuning)
        with connection.backend.reading_once(connection):
            vectors.load(connection, mark)
        return vectors

    # --- reading ---

    def load(self, connection: Reader, mark: StoreMark) -> None:
        """Read every vector up to ``mark.top``, from the current graphs where they hold it.

        Never builds a graph: without one, every vector is held here (see :attr:`build_due`).
        """
        self._grow(mark.top)
        if self._home is not None:
            self._home.bind(mark.store_id)
        manifest = self._current_manifest(mark)
        if manifest is not None:
            self._use(connection, manifest, mark)
        else:
            self.read(connection, 0, mark.top)
        self._note_due()

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
            dense = np.zeros((max(rows, 2 * len(self.dense)), self.dims), np.float32)
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

    # --- graph files ---

    def refresh_graphs(self, connection: Reader, mark: StoreMark) -> None:
        """Follow the manifest if another process (or a build) replaced it; never build.

        Then :attr:`build_due` says whether a graph should be built.
        """
        home = self._home
        if home is None:
            return
        if home.stamp() != self._stamp:
            manifest = self._current_manifest(mark)
            if manifest is not None and manifest != self._manifest:
                self._use(connection, manifest, mark)
        self._note_due()

    def _note_due(self) -> None:
        self.build_due = self._home is not None and self.held_count() > self._tuning.vector_loose

    def build_now(
        self, connection: Reader, mark: StoreMark, progress: Progress | None = None
    ) -> None:
        """Put the vectors held here into a graph file now, if more than ``vector_loose`` are.

        A graph of them is added (the newest graphs merged into one where there
        would be more than four), or the graphs another process just built are
        taken. Fewer are scored exactly faster than a graph finds them, and
        stay held. The caller is a store's child process or ``build_indexes``,
        never a retrieval. Nothing without a place for files (``:memory:``).

        Raises:
            OSError: the files could not be written (the vectors stay held here).

        """
        home = self._home
        if home is None or not self.build_due:
            return
        with home.lock():
            current = self._current_manifest(mark)
            if current is not None and current != self._manifest:
                self._use(connection, current, mark)  # another process built meanwhile
                self._note_due()
                if not self.build_due:
                    return
            self._use(connection, self._add_graph(connection, mark, progress), mark)
        self._note_due()

    def _current_manifest(self, mark: StoreMark) -> Manifest | None:
        """The manifest, if it is this store's, embedder's and epoch's and its graphs open."""
        if self._home is None:
            return None
        self._stamp = self._home.stamp()
        manifest = self._home.read()
        if manifest is None or (
            manifest.store_id,
            manifest.embedder_id,
            manifest.dims,
            manifest.epoch,
        ) != (mark.store_id, self.embedder_id, self.dims, mark.epoch):
            return None
        if any(self._home.graph(record, self.dims) is None for record, _ in manifest.graphs):
            return None
        return manifest

    def _use(self, connection: Reader, manifest: Manifest, mark: StoreMark) -> None:
        """Take ``manifest``'s graphs: which seqs each holds, less what changed since it.

        Then read every vector no graph holds as it is now: those the change log
        names after the graph's position in it, and those above the graphs' seqs.
        """
        assert self._home is not None  # noqa: S101 - only with a home
        self._grow(mark.top)
        self.graphs = []
        self.holder[:] = -1
        self._graph_count = None
        for number, (record, _) in enumerate(manifest.graphs):
            graph = self._home.graph(record, self.dims)
            assert graph is not None  # noqa: S101 - checked by _current_manifest
            seqs = graph.seqs()
            self.holder[seqs[seqs < len(self.holder)]] = number
            self.graphs.append(graph)
        self.present[:] = self.holder >= 0
        self.through = max((record.through for record, _ in manifest.graphs), default=0)
        self.dense = np.zeros((max(1, mark.top - self.through + 1), self.dims), np.float32)
        self.extra = {}
        self._manifest = manifest
        self._home.forget_others({record for record, _ in manifest.graphs})
        last_change: dict[int, int] = {}
        oldest = min((change for _, change in manifest.graphs), default=mark.change)
        for rows in connection.chunks(
            "SELECT id, seq FROM changes WHERE id > ? AND id <= ? AND seq <= ?",
            (oldest, mark.change, self.through),
            _ROWS_PER_FETCH * 8,
        ):
            for number, seq in rows:
                last_change[int(seq)] = max(int(number), last_change.get(int(seq), 0))
        changes = [change for _, change in manifest.graphs]
        self.read_again(
            connection,
            [
                seq
                for seq, number in last_change.items()
                if self.holder[seq] < 0 or number > changes[int(self.holder[seq])]
            ],
        )
        self.read(connection, self.through, mark.top)

    def _add_graph(
        self, connection: Reader, mark: StoreMark, progress: Progress | None = None
    ) -> Manifest:
        """A manifest with a new graph of every vector held here (or the newest graphs merged)."""
        assert self._home is not None  # noqa: S101 - only with a home
        graphs = list(self._manifest.graphs) if self._manifest is not None else []
        if len(graphs) + 1 > _MAX_GRAPHS:
            largest = max(range(len(graphs)), key=lambda n: graphs[n][0].count)
            return self._rebuild(connection, mark, keep=largest + 1, progress=progress)
        held = self.loose_seqs(np.ones(mark.top + 1, np.bool_))
        batches = _in_batches(held, self.vectors_of)
        record = build(
            self._home.new_path(), _counted(batches, len(held), progress), self.dims, mark.top
        )
        manifest = self._manifest_with([*graphs, (record, mark.change)], mark)
        self._home.write(manifest)
        return manifest

    def _rebuild(
        self,
        connection: Reader,
        mark: StoreMark,
        *,
        keep: int,
        progress: Progress | None = None,
    ) -> Manifest:
        """A manifest of the first ``keep`` graphs and one of every stored vector above them.

        The caller holds the home's lock.
        """
        assert self._home is not None  # noqa: S101 - only with a home
        kept = list(self._manifest.graphs[:keep]) if self._manifest is not None else []
        after = max((record.through for record, _ in kept), default=0)
        batches = _stored_batches(connection, self.embedder_id, after, mark.top, self.dims)
        if progress is not None:
            (total,) = connection.one(
                "SELECT count(*) FROM vectors WHERE embedder_id = ? AND entry_seq > ?"
                " AND entry_seq <= ?",
                (self.embedder_id, after, mark.top),
            )
            batches = _counted(batches, int(total), progress)
        record = build(self._home.new_path(), batches, self.dims, mark.top)
        manifest = self._manifest_with([*kept, (record, mark.change)], mark)
        self._home.write(manifest)
        return manifest

    def _manifest_with(self, graphs: list[tuple[GraphFile, int]], mark: StoreMark) -> Manifest:
        return Manifest(mark.store_id, self.embedder_id, self.dims, mark.epoch, tuple(graphs))


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


def _counted(
    batches: Iterator[tuple[Ints, Vectors]], total: int, progress: Progress | None
) -> Iterator[tuple[Ints, Vectors]]:
    """``batches``, ``progress`` told before the first and after each has gone into the graph."""
    if progress is None:
        yield from batches
        return
    done = 0
    progress(done, total)
    for seqs, rows in batches:
        yield seqs, rows
        done += len(seqs)
        progress(done, total)


def _in_batches(seqs: Ints, vectors_of: Any) -> Iterator[tuple[Ints, Vectors]]:
    for start in range(0, len(seqs), _ROWS_PER_FETCH * 8):
        chunk = seqs[start : start + _ROWS_PER_FETCH * 8]
        yield chunk, vectors_of(chunk)


def _stored_batches(
    connection: Reader, embedder_id: int, after: int, through: int, dims: int
) -> Iterator[tuple[Ints, Vectors]]:
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
