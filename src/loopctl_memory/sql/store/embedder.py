"""A SQL store's embedder: recorded with its vectors, called before each write, never losing one.

A store opened with an embedder records it (name and dims) the first time,
and from then on refuses another with an :class:`EmbedderError` naming both.
Each write embeds its entries' memories *before* its transaction (never
holding the write lock over a model or a network call) and writes each
entry's vector in the entry's own transaction (:attr:`FlatBatch.vectors`).
When the embedder fails or times out, the entries are written all the same
and are *pending*: no vector of theirs exists, so the vector ranking does not
see them, and :func:`pending_count` counts them until :func:`add_vectors`
(``embed_pending``, or the next write whose embedding succeeds) writes theirs.

A vector is only ever written next to the memory it was made from: a rewrite
of an entry's memory deletes its vectors in the rewrite's transaction
(``repository.rewrite``), and a vector made for a pending entry is written
only if the entry still holds the text it was made from.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sqlalchemy import and_, delete, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import embedders as adapters
from loopctl_memory import embedding
from loopctl_memory.embedding import QueryVectors, Vectors
from loopctl_memory.errors import EmbedderError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.protocol import Embedder
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.rows.scope_rows import ScopeIds
from loopctl_memory.sql.tables import changes, embedders, entries, index_state, vectors

_ADD_IF_CURRENT = (
    "INSERT INTO vectors (entry_seq, embedder_id, vector)"
    " SELECT seq, ?, ? FROM entries WHERE seq = ? AND memory = ?"
    " AND EXISTS (SELECT 1 FROM index_state WHERE embedder_id = ?)"
    " ON CONFLICT (entry_seq, embedder_id) DO NOTHING"
)
_ADD_BESIDE = (
    "INSERT INTO vectors (entry_seq, embedder_id, vector)"
    " SELECT seq, ?, ? FROM entries WHERE seq = ? AND memory = ?"
    " ON CONFLICT (entry_seq, embedder_id) DO NOTHING"
)


@dataclass(slots=True)
class StoreEmbedder:
    """The embedder a store was opened with, and its id in the store (0 until bound)."""

    embedder: Embedder
    seconds: float
    embedder_id: int = 0
    spec: str | None = None
    """How :func:`loopctl_memory.embedders.embedder_from_spec` makes it again, if known."""
    queries: QueryVectors = field(default_factory=QueryVectors)

    @classmethod
    def made(cls, given: object, seconds: float) -> StoreEmbedder:
        """The store's embedder from an ``embedder`` argument: an embedder, or a spec to make one.

        Raises:
            InvalidArgumentError: it is neither (or a malformed spec).
            EmbedderError: the spec names an embedder that cannot be made.

        """
        if isinstance(given, str):
            # Looked up when called: tests fake the provider on the module.
            return cls(adapters.embedder_from_spec(given), seconds, spec=given)
        return cls(embedding.check_embedder(given), seconds)

    async def attach(self, batch: FlatBatch) -> bool:
        """Make the batch's vectors before its transaction; whether all were made.

        The entries of a call that failed have none (they are pending). The
        store calls it only for a bound embedder and a batch of entries.
        """
        texts = [entry[2] for entry in batch.entries]
        vectors: list[bytes | None] = []
        for made in await embedding.embed_in_calls(self.embedder, texts, self.seconds):
            size = min(embedding.EMBED_BATCH, len(texts) - len(vectors))
            vectors += [None] * size if made is None else [stored(row) for row in made]
        batch.vectors = vectors
        batch.embedder_id = self.embedder_id
        return None not in vectors

    async def try_embed(self, texts: list[str]) -> Vectors | None:
        """The vectors of ``texts``, or None when the embedder failed."""
        try:
            return await embedding.embed_documents(self.embedder, texts, self.seconds)
        except EmbedderError:
            return None


def stored(vector: Vectors) -> bytes:
    """A unit vector as the ``vectors.vector`` column holds it: little-endian binary32."""
    return np.asarray(vector, dtype="<f4").tobytes()


@dataclass(frozen=True, slots=True)
class Recorded:
    """The embedder a store's vectors are by, as the store records it."""

    embedder_id: int
    name: str
    dims: int
    spec: str | None


async def recorded(connection: AsyncConnection) -> Recorded | None:
    """The embedder the store's vectors are by, or None if it names none."""
    row = (
        await connection.execute(
            select(
                embedders.c.id, embedders.c.name, embedders.c.dims, embedders.c.spec
            ).select_from(index_state.join(embedders, embedders.c.id == index_state.c.embedder_id))
        )
    ).first()
    return None if row is None else Recorded(int(row.id), row.name, int(row.dims), row.spec)


async def bound(connection: AsyncConnection, embedder: Embedder, spec: str | None) -> int | None:
    """The id of ``embedder`` if the store records it as ``bind`` would leave it, else None.

    A read alone: an open that finds its embedder recorded takes no write lock.

    Raises:
        EmbedderError: the store's vectors are another embedder's (name or dims).

    """
    named = await recorded(connection)
    if named is None:
        return None
    _check_same(named, embedder)
    return None if spec is not None and named.spec is None else named.embedder_id


async def bind(
    connection: AsyncConnection, embedder: Embedder, *, record: bool, spec: str | None = None
) -> int:
    """The id of ``embedder`` in the store, recording it (and ``spec``) where the store names none.

    ``record`` false (a read-only store): nothing is written, and a store that
    names no embedder gives 0.

    Raises:
        EmbedderError: the store's vectors are another embedder's (name or dims).

    """
    named = await recorded(connection)
    if named is not None:
        _check_same(named, embedder)
        if record and spec is not None and named.spec is None:
            await connection.execute(
                update(embedders).where(embedders.c.id == named.embedder_id).values(spec=spec)
            )
        return named.embedder_id
    if not record:
        return 0
    known = await register(connection, embedder, spec)
    await connection.execute(update(index_state).values(embedder_id=known))
    return known


def _check_same(named: Recorded, embedder: Embedder) -> None:
    if (named.name, named.dims) != (embedder.name, embedder.dims):
        raise EmbedderError(
            f"this store's vectors are by {named.name!r} ({named.dims} dims), not"
            f" {embedder.name!r} ({embedder.dims} dims): open it with that embedder,"
            " or make every vector again with reembed"
        )


async def register(connection: AsyncConnection, embedder: Embedder, spec: str | None) -> int:
    """The id of ``embedder`` in the ``embedders`` table, adding it (and ``spec``) if new.

    Raises:
        EmbedderError: an embedder of that name is recorded with other dims.

    """
    row = (
        await connection.execute(
            select(embedders.c.id, embedders.c.dims, embedders.c.spec).where(
                embedders.c.name == embedder.name
            )
        )
    ).first()
    if row is not None:
        if int(row.dims) != embedder.dims:
            raise EmbedderError(
                f"an embedder named {embedder.name!r} is recorded with {row.dims} dims,"
                f" not {embedder.dims}: give the new one another name"
            )
        if spec is not None and row.spec is None:
            await connection.execute(
                update(embedders).where(embedders.c.id == row.id).values(spec=spec)
            )
        return int(row.id)
    result = await connection.execute(
        insert(embedders).values(name=embedder.name, dims=embedder.dims, spec=spec)
    )
    return int(result.inserted_primary_key[0]) if result.inserted_primary_key else 0


async def switch(connection: AsyncConnection, embedder_id: int) -> None:
    """Make ``embedder_id`` the store's embedder and delete every other's vectors.

    The generation rises: every process reads its copy again, and one still
    holding another embedder finds out (its vector rankings raise). So does the
    vector epoch: the new embedder's vectors were written unlogged, so an index
    file of an earlier time with it is stale.
    """
    await connection.execute(
        update(index_state).values(
            embedder_id=embedder_id,
            generation=index_state.c.generation + 1,
            vector_epoch=index_state.c.vector_epoch + 1,
        )
    )
    await connection.execute(delete(vectors).where(vectors.c.embedder_id != embedder_id))


def _pending(embedder_id: int, scope: ScopeIds) -> Any:
    has_vector = exists().where(
        and_(vectors.c.entry_seq == entries.c.seq, vectors.c.embedder_id == embedder_id)
    )
    return and_(scope.condition(), ~has_vector)


async def pending_count(connection: AsyncConnection, embedder_id: int, scope: ScopeIds) -> int:
    """How many entries of the view have no vector by the embedder."""
    statement = select(func.count()).select_from(entries).where(_pending(embedder_id, scope))
    return int((await connection.execute(statement)).scalar_one())


async def reembed_counts(
    connection: AsyncConnection, embedder_id: int, scope: ScopeIds
) -> tuple[int, int]:
    """(entries, entries without a vector by the embedder) of the view."""
    statement = select(func.count(), func.count().filter(_pending(embedder_id, scope))).where(
        scope.condition()
    )
    counted = (await connection.execute(statement.select_from(entries))).one()
    return int(counted[0]), int(counted[1])


async def pending_entries(
    connection: AsyncConnection, embedder_id: int, scope: ScopeIds, after: int, limit: int
) -> list[tuple[int, str]]:
    """Up to ``limit`` (seq, memory) of the view's pending entries above seq ``after``, by seq."""
    rows = await connection.execute(
        select(entries.c.seq, entries.c.memory)
        .where(_pending(embedder_id, scope), entries.c.seq > after)
        .order_by(entries.c.seq)
        .limit(limit)
    )
    return [(int(seq), str(memory)) for seq, memory in rows]


async def add_vectors(
    connection: AsyncConnection,
    embedder_id: int,
    made: list[tuple[int, str, bytes]],
    *,
    current: bool = True,
) -> None:
    """Write each (seq, memory it was made from, vector) where the entry still holds that memory.

    ``current``: only while ``embedder_id`` is the store's embedder (a process
    still open with an embedder that ``reembed`` replaced writes none), and the
    seqs go to the change log: a process that holds the vectors reads theirs.
    Otherwise (``reembed`` making the next embedder's) beside the store's.
    """
    if not made:
        return
    backend = backend_of(connection)
    if current:
        await connection.exec_driver_sql(
            backend.sql(_ADD_IF_CURRENT),
            [
                (embedder_id, vector, seq, backend.encode(memory), embedder_id)
                for seq, memory, vector in made
            ],
        )
        await connection.execute(insert(changes), [{"seq": seq} for seq, _, _ in made])
    else:
        await connection.exec_driver_sql(
            backend.sql(_ADD_BESIDE),
            [(embedder_id, vector, seq, backend.encode(memory)) for seq, memory, vector in made],
        )
