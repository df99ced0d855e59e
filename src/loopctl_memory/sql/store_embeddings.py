"""The SQL store's operations on vectors: embed before a write, count and fill the pending ones.

A mixin of :class:`~loopctl_memory.sql.store.SqlMemoryStore`, kept apart so that
the store module holds the contract's operations; the rules are those of
:mod:`loopctl_memory.sql.embeddings`.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import embedding
from loopctl_memory.bm25 import check_ranking
from loopctl_memory.errors import EmbedderError, InvalidArgumentError, StorageError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql import embeddings
from loopctl_memory.sql.repository import ScopeIds
from loopctl_memory.sql.store_part import StorePart

if TYPE_CHECKING:
    from loopctl_memory.sql.embeddings import StoreEmbedder


class EmbeddingOperations(StorePart):
    """``pending_embeddings``, ``embed_pending``, and the embedding around every write."""

    def _check_ranking(self, ranking: object) -> str:
        """``ranking`` if this store can rank by it (the embedding ones need an embedder).

        Raises:
            InvalidArgumentError: it cannot.

        """
        if isinstance(ranking, str) and ranking in embedding.EMBEDDING_RANKINGS:
            if self._embedder() is None:
                raise InvalidArgumentError(f"ranking {ranking!r} needs a store with an embedder")
            return ranking
        return check_ranking(ranking)

    async def _query_vector(self, query: str) -> embedding.Vectors:
        """The query's vector (cached), made before the read.

        Raises:
            EmbedderError: it could not be made.

        """
        embedder = self._embedder()
        assert embedder is not None  # noqa: S101 - checked with the ranking
        return await embedder.queries.vector(embedder.embedder, query, embedder.seconds)

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
        return embedder.embedder_id, memory, embeddings.stored(made[0])

    async def _after_embedded_write(self, written: int) -> None:
        """A write's embedding worked: make up to as many pending vectors, if any wait.

        Best effort: the write is committed, so a failure here only leaves them pending.
        Only while some may wait (this process saw an embedding fail, or has not
        looked since it opened): looking costs a pass over the entries.
        """
        shared = self._shared
        if not shared.maybe_pending:
            return
        try:
            if not await self._fill(written, every=False):
                shared.maybe_pending = False
        except (EmbedderError, StorageError):
            return

    async def pending_embeddings(self) -> int:
        """How many entries of the view have no vector yet (0 without an embedder)."""
        embedder = self._embedder()
        if embedder is None:
            return 0
        made_by = embedder.embedder_id
        return await self._in_scope(
            "count pending embeddings",
            lambda c, ids: embeddings.pending_count(c, made_by, ids),
            write=False,
        )

    async def embed_pending(self, batch_size: int = 256) -> int:
        """Make the vectors of the view's pending entries, ``batch_size`` at a time; how many.

        Each batch is embedded outside any transaction, then written in one,
        for the entries that still hold the text it was made from.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1.
            EmbedderError: the embedder failed; the batches before it are kept.
            StorageError: the database refused a read or a write.

        """
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")
        return await self._fill(batch_size, every=True)

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
            vectors = await embedding.embed_documents(
                embedder.embedder, [memory for _, memory in waiting], embedder.seconds
            )
            rows = [
                (seq, memory, embeddings.stored(vector))
                for (seq, memory), vector in zip(waiting, vectors, strict=True)
            ]
            await self._in_scope(
                "store embeddings",
                functools.partial(_add_vectors, made_by=made_by, rows=rows),
                write=True,
            )
            made += len(rows)
            after = waiting[-1][0]
            if not every:
                return made


async def _pending_entries(
    connection: AsyncConnection, scope: ScopeIds, *, made_by: int, after: int, limit: int
) -> list[tuple[int, str]]:
    return await embeddings.pending_entries(connection, made_by, scope, after, limit)


async def _add_vectors(
    connection: AsyncConnection,
    scope: ScopeIds,
    *,
    made_by: int,
    rows: list[tuple[int, str, bytes]],
) -> None:
    del scope  # a vector goes to its entry whatever the view
    await embeddings.add_vectors(connection, made_by, rows)
