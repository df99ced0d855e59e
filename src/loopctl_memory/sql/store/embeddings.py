"""The SQL store's operations on vectors: embed before a write, count and fill the pending ones.

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`, kept apart so that
the store module holds the contract's operations; the rules are those of
:mod:`loopctl_memory.sql.store.embedder`.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import embedding, history
from loopctl_memory.arguments import check_batch_size
from loopctl_memory.embedding import NO_EMBEDDER
from loopctl_memory.errors import EmbedderError, StorageError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.protocol import Embedder
from loopctl_memory.rankings import check_ranking
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.history.record import Happened, record_where
from loopctl_memory.sql.history.stamps import Stamp, details
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.ranking.snapshot import Needs, take
from loopctl_memory.sql.ranking.vector_files import StoreMark, VectorFiles
from loopctl_memory.sql.rows.entry_rows import IDS_PER_STATEMENT, chunks
from loopctl_memory.sql.rows.scope_rows import ScopeIds
from loopctl_memory.sql.store import embedder as embedder_rows
from loopctl_memory.sql.store.embedder import StoreEmbedder
from loopctl_memory.sql.store.upkeep import TailUpkeep
from loopctl_memory.sql.tables import entries

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class RecordedEmbedder:
    """The embedder a store records (see ``recorded_embedder``)."""

    name: str
    dims: int
    spec: str | None
    """How the CLI and ``open_store(embedder="recorded")`` make it again (None: they cannot)."""
    pending: int
    """The view's entries without its vector."""


class EmbeddingOperations(TailUpkeep):
    """``pending_embeddings``, ``embed_pending``, and the embedding around every write."""

    def _check_ranking(self, ranking: object) -> str:
        """``ranking`` if this store can rank by it (the embedding ones need an embedder).

        Raises:
            InvalidArgumentError: it cannot.

        """
        return check_ranking(ranking, has_embedder=self._embedder() is not None)

    async def _query_vector(self, query: str) -> embedding.Vectors:
        """The query's vector (cached), made before the read.

        Raises:
            EmbedderError: it could not be made.

        """
        embedder = self._embedder()
        assert embedder is not None  # noqa: S101 - checked with the ranking
        return await embedder.queries.vector(embedder.embedder, query, embedder.seconds)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder that makes this store's vectors, or None (no vector ranking)."""
        found = self._embedder()
        return None if found is None else found.embedder

    async def _bind_embedder(self, embedder: StoreEmbedder, *, record: bool) -> None:
        """Use ``embedder``, recording it where the store names none (see ``open_store``).

        Raises:
            EmbedderError: the store's vectors are another embedder's.

        """
        found = await self._unit.run(
            "open", lambda c: embedder_rows.bound(c, embedder.embedder, embedder.spec), write=False
        )
        if found is None:
            found = await self._unit.run(
                "open",
                lambda c: embedder_rows.bind(
                    c, embedder.embedder, record=record, spec=embedder.spec
                ),
                write=record,
            )
        embedder.embedder_id = found
        self._shared.embedder = embedder

    def _embedder(self) -> StoreEmbedder | None:
        found: StoreEmbedder | None = self._shared.embedder
        return found if found is not None and found.embedder_id else None

    async def _embed(self, batch: FlatBatch) -> bool:
        """Make the batch's vectors before its transaction; whether they were made."""
        embedder = self._embedder()
        if embedder is None or not len(batch):
            return False
        if await embedder.attach(batch):
            return True
        self._shared.maybe_pending = True
        return False

    async def _embed_text(self, memory: str) -> tuple[int, str, bytes] | None:
        """(embedder id, ``memory``, its vector) for an update, or None (none, or it failed)."""
        embedder = self._embedder()
        if embedder is None:
            return None
        made = await embedder.try_embed([memory])
        if made is None:
            self._shared.maybe_pending = True
            return None
        return embedder.embedder_id, memory, embedder_rows.stored(made[0])

    async def _after_embedded_write(self, written: int) -> None:
        """A write's embedding worked: make up to as many pending vectors (one call), if any wait.

        Best effort: the write is committed, so a failure here only leaves them pending.
        Only while some may wait (this process saw an embedding fail, or has not
        looked since it opened): looking costs a pass over the entries. When the
        embedder fails on them again, later writes stop trying until another
        embedding fails: a text it always refuses would otherwise cost every
        write a call (``embed_pending`` still tries them whenever asked).
        """
        shared = self._shared
        if not shared.maybe_pending:
            return
        try:
            if not await self._fill(min(written, embedding.EMBED_BATCH), every=False):
                shared.maybe_pending = False
        except EmbedderError:
            shared.maybe_pending = False
        except StorageError:
            return

    async def recorded_embedder(self) -> RecordedEmbedder | None:
        """The embedder the store's vectors are by, as recorded, and the view's pending entries.

        None when the store records none. Needs no embedder: ``stats`` shows it.
        """

        async def read(connection: AsyncConnection, scope: ScopeIds) -> RecordedEmbedder | None:
            named = await embedder_rows.recorded(connection)
            if named is None:
                return None
            pending = await embedder_rows.pending_count(connection, named.embedder_id, scope)
            return RecordedEmbedder(named.name, named.dims, named.spec, pending)

        return await self._in_scope("read the embedder", read, write=False)

    async def pending_embeddings(self) -> int:
        """How many entries of the view have no vector yet from the store's embedder.

        The store's: the one it was opened with, else the one it records (a store
        opened without an embedder still has entries waiting for the recorded
        one's vectors); 0 when it records none.
        """
        embedder = self._embedder()
        if embedder is None:
            recorded = await self.recorded_embedder()
            return 0 if recorded is None else recorded.pending
        made_by = embedder.embedder_id
        return await self._in_scope(
            "count pending embeddings",
            lambda c, ids: embedder_rows.pending_count(c, made_by, ids),
            write=False,
        )

    async def start_upkeep(self) -> None:
        """Start the index upkeep that is due in the background, without waiting for it.

        For a long-running process, at its start (the MCP server does): a child
        indexes a long tail, and a child builds the vector graphs due, so that no
        retrieval finds them due later. It reads the store's vectors as a first
        vector retrieval would (seconds on a file with a million vectors outside
        a graph); nothing on a read-only store's tail, nothing without an embedder.

        Raises:
            StorageError: the database could not be read.
            EmbedderError: the store's vectors are now another embedder's (``reembed``).

        """
        shared = self._shared
        if not self._unit.read_only:
            tail = await self._unit.run(
                "index", lambda c: c.run_sync(index.tail_length), write=False
            )
            if tail >= shared.tuning.tail_limit:
                shared.folds.ask()
        embedder = self._embedder()
        due = await self._with_vectors(lambda vectors, reader: vectors.build_due)
        if due and embedder is not None:
            shared.graph_builds.start(embedder.embedder.name, embedder.embedder.dims)

    async def build_indexes(self, progress: Callable[[int, int], object] | None = None) -> int:
        """Index a long tail, build the graph files a store's vectors are due; what they hold.

        Past ``Tuning.vector_loose`` vectors outside a graph (50,000 by
        default; fewer are scored exactly faster than a graph finds them), a
        retrieval by ``vector`` or ``hybrid`` scores them all exactly and
        starts a build in a child process of the store, which closing the store
        stops (so a short-lived process rarely finishes one); it never builds
        itself. This builds here and now, as ``loopctl-memory index`` does,
        once a child building meanwhile has ended. The files are a cache beside
        a SQLite file (in the user's cache for PostgreSQL), shared by every
        process of the machine. ``progress(done, total)`` is called as vectors
        go into a graph. 0 without an embedder, for ``:memory:`` (it keeps its
        vectors in memory), or while no graph is due.

        Raises:
            StorageError: the files or the database could not be read or written.
            EmbedderError: the store's vectors are now another embedder's (``reembed``).

        """
        shared = self._shared
        await shared.folds.finish()  # a child indexing the tail: its block is not redone
        await self._fold_tail()
        await shared.graph_builds.finish()  # a child building now: what it builds is not redone
        state = shared.ranking

        def build(files: VectorFiles, reader: Reader) -> int:
            files.build_now(reader, StoreMark.read(reader, state.top, state.change), progress)
            return files.vectors.graph_count()

        built = await self._with_vectors(build)
        return 0 if built is None else built

    async def _with_vectors(self, work: Callable[[VectorFiles, Reader], T]) -> T | None:
        """``work`` on this process's vectors and their files, current, in a read transaction.

        None without an embedder, or for a store with no place for graph files (``:memory:``).
        """
        embedder, state = self._embedder(), self._shared.ranking
        if embedder is None or state.graph_home is None:
            return None
        embedder_id, dims = embedder.embedder_id, embedder.embedder.dims

        def follow(reader: Reader) -> T:
            take(state, reader, Needs(vectors=(embedder_id, dims)))
            assert state.vector_files is not None  # noqa: S101 - taken with the vectors
            return work(state.vector_files, reader)

        async with self._shared.ranking_lock:
            return await self._unit.read("index", follow)

    async def embed_pending(self, batch_size: int = 256) -> int:
        """Make the vectors of the view's pending entries, ``batch_size`` at a time; how many.

        Each batch is embedded outside any transaction, then written in one,
        for the entries that still hold the text it was made from.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1.
            EmbedderError: the store was opened without an embedder (nothing can
                make a vector), or the embedder failed; the batches before it are kept.
            StorageError: the database refused a read or a write.

        """
        check_batch_size(batch_size)
        if self._embedder() is None:
            raise EmbedderError(NO_EMBEDDER)
        return await self._fill(batch_size, every=True)

    async def reembed(
        self,
        embedder: Embedder | str,
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], object] | None = None,
    ) -> int:
        """Make every entry's vector with ``embedder``, then make it the store's; how many made.

        ``embedder`` is an embedder or a spec (as ``open_store`` takes them). The
        store need not have an embedder, nor be able to make its old one. Every
        entry of the store counts, whatever this view's scope.

        While it runs, retrieval and writes go on with the store's embedder: the
        new vectors are written beside the old ones (a vector is kept by entry
        and embedder), ``batch_size`` entries a transaction, each batch embedded
        outside any transaction, so a reembed that stops (an error, a kill)
        resumes where it stopped when called again. Once every entry has its new
        vector, one transaction makes ``embedder`` the store's and deletes the
        old vectors; a query vector is never compared with another model's.
        This store then embeds with it; another process still open with the old
        one gets EmbedderError from its vector rankings and writes no vectors
        (its entries are pending) until it opens the store again. The entries
        written meanwhile are embedded last, or stay pending if that fails.

        ``progress(done, total)`` is called before the first batch and after each.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1, or
                ``embedder`` is not one.
            EmbedderError: the embedder failed (the batches before it are kept),
                or an embedder of its name is recorded with other dims.
            ReadOnlyStoreError: the store is read-only.
            StorageError: the database refused a read or a write.

        """
        check_batch_size(batch_size)
        new = StoreEmbedder.made(embedder, self._shared.embed_timeout)
        made_by = await self._unit.run(
            "reembed",
            lambda c: embedder_rows.register(c, new.embedder, new.spec),
            write=True,
        )
        every = ScopeIds(None)
        total, waiting = await self._unit.run(
            "reembed",
            lambda c: embedder_rows.reembed_counts(c, made_by, every),
            write=False,
        )
        done = total - waiting
        if progress is not None:
            progress(done, total)
        after, made = 0, 0
        while True:
            batch = await self._unit.run(
                "reembed",
                functools.partial(
                    _pending_entries, scope=every, made_by=made_by, after=after, limit=batch_size
                ),
                write=False,
            )
            if not batch:
                break
            rows = await _embedded(new, batch)
            await self._unit.run(
                "reembed",
                functools.partial(
                    _add_next_vectors,
                    made_by=made_by,
                    rows=rows,
                    happened=_reembedded(self._shared.stamp("reembed"), new),
                ),
                write=True,
            )
            made, after, done = made + len(rows), batch[-1][0], min(total, done + len(rows))
            if progress is not None:
                progress(done, total)
        await self._unit.run("reembed", lambda c: embedder_rows.switch(c, made_by), write=True)
        new.embedder_id = made_by
        self._shared.embedder = new
        self._shared.maybe_pending = True
        # Entries written with the old embedder meanwhile; if this fails, they stay pending.
        with contextlib.suppress(EmbedderError, StorageError):
            made += await self._fill(batch_size, every=True)
        return made

    async def _fill(self, batch_size: int, *, every: bool) -> int:
        embedder = self._embedder()
        if embedder is None:
            return 0
        made_by, after, made = embedder.embedder_id, 0, 0
        while True:
            waiting = await self._in_scope(
                "read pending embeddings",
                functools.partial(_pending_entries, made_by=made_by, after=after, limit=batch_size),
                write=False,
            )
            if not waiting:
                return made
            rows = await _embedded(embedder, waiting)
            await self._in_scope(
                "store embeddings",
                functools.partial(_add_vectors, made_by=made_by, rows=rows),
                write=True,
            )
            made += len(rows)
            after = waiting[-1][0]
            if not every:
                return made


async def _embedded(
    embedder: StoreEmbedder, waiting: list[tuple[int, str]]
) -> list[tuple[int, str, bytes]]:
    """(seq, memory, vector) of each (seq, memory), embedded in one call.

    Raises:
        EmbedderError: the embedder failed.

    """
    vectors = await embedding.embed_documents(
        embedder.embedder, [memory for _, memory in waiting], embedder.seconds
    )
    return [
        (seq, memory, embedder_rows.stored(vector))
        for (seq, memory), vector in zip(waiting, vectors, strict=True)
    ]


async def _pending_entries(
    connection: AsyncConnection, scope: ScopeIds, *, made_by: int, after: int, limit: int
) -> list[tuple[int, str]]:
    return await embedder_rows.pending_entries(connection, made_by, scope, after, limit)


async def _add_vectors(
    connection: AsyncConnection,
    scope: ScopeIds,
    *,
    made_by: int,
    rows: list[tuple[int, str, bytes]],
) -> None:
    del scope  # a vector goes to its entry whatever the view
    await embedder_rows.add_vectors(connection, made_by, rows)


def _reembedded(stamp: Stamp | None, new: StoreEmbedder) -> Happened | None:
    """The event ``reembed`` records of each entry it makes a vector for (None: none)."""
    if stamp is None:
        return None
    return Happened(stamp, history.REEMBEDDED, details(embedder=new.embedder.name))


async def _add_next_vectors(
    connection: AsyncConnection,
    *,
    made_by: int,
    rows: list[tuple[int, str, bytes]],
    happened: Happened | None,
) -> None:
    """Write the next embedder's vectors beside the store's, each entry's event with them."""
    await embedder_rows.add_vectors(connection, made_by, rows, current=False)
    if happened is not None:
        seqs = [seq for seq, _, _ in rows]
        for chunk in chunks(seqs, IDS_PER_STATEMENT):
            await record_where(connection, happened, entries.c.seq.in_(chunk))
