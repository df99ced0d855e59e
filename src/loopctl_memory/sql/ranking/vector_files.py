"""The graph files a process's vectors follow, and building them: the vectors' upkeep.

A process's :class:`~loopctl_memory.sql.ranking.vectors.VectorIndex` holds
what a retrieval scores; this keeps it in step with the store's manifest
(:mod:`~loopctl_memory.sql.ranking.graph_home`), shared by every process of
the machine: on the first read, the current graphs hold what they hold and
every other vector is read; at each retrieval's start (one ``stat`` when
nothing moved) a manifest another process wrote is taken up. Once more than
``Tuning.vector_loose`` vectors are held outside a graph, a build is due
(:attr:`VectorFiles.build_due`); a retrieval never builds one: a child
process of the store (:mod:`~loopctl_memory.sql.background.graph_builds`) or
``build_indexes`` calls :meth:`VectorFiles.build_now`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking.graph import GraphFile, build
from loopctl_memory.sql.ranking.graph_home import GraphHome, Manifest
from loopctl_memory.sql.ranking.vectors import Ints, VectorIndex, Vectors, stored_batches
from loopctl_memory.sql.tuning import Tuning

Progress = Callable[[int, int], object]
"""Called with (vectors put into the graph being built, how many it will hold)."""

_MAX_GRAPHS = 4
_BATCH = 65_536  # vectors read or put into a graph at a time


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


class VectorFiles:
    """One process's vectors by one embedder, and the graph files they follow."""

    def __init__(self, vectors: VectorIndex, home: GraphHome | None, tuning: Tuning) -> None:
        self.vectors = vectors
        self._home = home  # where the graph files go (None: nowhere, as for ``:memory:``)
        self._tuning = tuning
        self._manifest: Manifest | None = None
        self._stamp: tuple[int, int] | None = None
        self.build_due = False
        """Whether more than ``Tuning.vector_loose`` vectors are held outside a graph,
        where there is a place for files: a build (:meth:`build_now`) is due."""

    @classmethod
    def loaded(
        cls,
        connection: Reader,
        embedder: tuple[int, int],
        mark: StoreMark,
        home: GraphHome | None,
        tuning: Tuning,
    ) -> VectorFiles:
        """The vectors by ``embedder`` (its id and dims) as of ``mark``.

        From the current graphs where they hold them, the rest read. Never
        builds a graph (see :attr:`build_due`).
        """
        files = cls(VectorIndex(*embedder), home, tuning)
        with connection.backend.reading_once(connection):
            if home is not None:
                home.bind(mark.store_id)
            manifest = files._current_manifest(mark)
            if manifest is not None:
                files._use(connection, manifest, mark)
            else:
                files.vectors.read(connection, 0, mark.top)
        files._note_due()
        return files

    def follow(self, connection: Reader, mark: StoreMark) -> None:
        """Take up the manifest if another process (or a build) replaced it; never build.

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

    def build_now(
        self, connection: Reader, mark: StoreMark, progress: Progress | None = None
    ) -> None:
        """Put the vectors held outside a graph into one now, if more than ``vector_loose`` are.

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

    def _note_due(self) -> None:
        held = self.vectors.held_count()
        self.build_due = self._home is not None and held > self._tuning.vector_loose

    def _current_manifest(self, mark: StoreMark) -> Manifest | None:
        """The manifest, if it is this store's, embedder's and epoch's and its graphs open."""
        if self._home is None:
            return None
        self._stamp = self._home.stamp()
        manifest = self._home.read()
        vectors = self.vectors
        if manifest is None or (
            manifest.store_id,
            manifest.embedder_id,
            manifest.dims,
            manifest.epoch,
        ) != (mark.store_id, vectors.embedder_id, vectors.dims, mark.epoch):
            return None
        if any(self._home.graph(record, vectors.dims) is None for record, _ in manifest.graphs):
            return None
        return manifest

    def _use(self, connection: Reader, manifest: Manifest, mark: StoreMark) -> None:
        """Take ``manifest``'s graphs: which seqs each holds, less what changed since it.

        Then read every vector no graph holds as it is now: those the change log
        names after the graph's position in it, and those above the graphs' seqs.
        """
        assert self._home is not None  # noqa: S101 - only with a home
        vectors = self.vectors
        graphs = []
        for record, _ in manifest.graphs:
            graph = self._home.graph(record, vectors.dims)
            assert graph is not None  # noqa: S101 - checked by _current_manifest
            graphs.append(graph)
        through = max((record.through for record, _ in manifest.graphs), default=0)
        vectors.hold(graphs, through, mark.top)
        self._manifest = manifest
        self._home.forget_others({record for record, _ in manifest.graphs})
        last_change: dict[int, int] = {}
        oldest = min((change for _, change in manifest.graphs), default=mark.change)
        for rows in connection.chunks(
            "SELECT id, seq FROM changes WHERE id > ? AND id <= ? AND seq <= ?",
            (oldest, mark.change, through),
            _BATCH,
        ):
            for number, seq in rows:
                last_change[int(seq)] = max(int(number), last_change.get(int(seq), 0))
        changes = [change for _, change in manifest.graphs]
        holder = vectors.holder
        vectors.read_again(
            connection,
            [
                seq
                for seq, number in last_change.items()
                if holder[seq] < 0 or number > changes[int(holder[seq])]
            ],
        )
        vectors.read(connection, through, mark.top)

    def _add_graph(
        self, connection: Reader, mark: StoreMark, progress: Progress | None = None
    ) -> Manifest:
        """A manifest with a new graph of every vector held outside one (or the newest merged)."""
        assert self._home is not None  # noqa: S101 - only with a home
        graphs = list(self._manifest.graphs) if self._manifest is not None else []
        if len(graphs) + 1 > _MAX_GRAPHS:
            largest = max(range(len(graphs)), key=lambda n: graphs[n][0].count)
            return self._rebuild(connection, mark, keep=largest + 1, progress=progress)
        vectors = self.vectors
        held = vectors.loose_seqs(np.ones(mark.top + 1, np.bool_))
        batches = (
            (chunk, vectors.vectors_of(chunk))
            for chunk in (held[start : start + _BATCH] for start in range(0, len(held), _BATCH))
        )
        record = build(
            self._home.new_path(), _counted(batches, len(held), progress), vectors.dims, mark.top
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
        embedder_id, dims = self.vectors.embedder_id, self.vectors.dims
        kept = list(self._manifest.graphs[:keep]) if self._manifest is not None else []
        after = max((record.through for record, _ in kept), default=0)
        batches = stored_batches(connection, embedder_id, after, mark.top, dims)
        if progress is not None:
            (total,) = connection.one(
                "SELECT count(*) FROM vectors WHERE embedder_id = ? AND entry_seq > ?"
                " AND entry_seq <= ?",
                (embedder_id, after, mark.top),
            )
            batches = _counted(batches, int(total), progress)
        record = build(self._home.new_path(), batches, dims, mark.top)
        manifest = self._manifest_with([*kept, (record, mark.change)], mark)
        self._home.write(manifest)
        return manifest

    def _manifest_with(self, graphs: list[tuple[GraphFile, int]], mark: StoreMark) -> Manifest:
        vectors = self.vectors
        return Manifest(mark.store_id, vectors.embedder_id, vectors.dims, mark.epoch, tuple(graphs))


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
