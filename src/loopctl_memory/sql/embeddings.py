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
from sqlalchemy import and_, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import embedding
from loopctl_memory.embedding import QueryVectors, Vectors
from loopctl_memory.errors import EmbedderError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.protocol import Embedder
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.repository import ScopeIds
from loopctl_memory.sql.tables import changes, embedders, entries, index_state, vectors

_ADD_IF_CURRENT = (
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
    queries: QueryVectors = field(default_factory=QueryVectors)

    async def attach(self, batch: FlatBatch) -> bool:
        """Make the batch's vectors before its transaction; whether they were made.

        A failing embedder leaves the batch without vectors (its entries pending).
        """
        if not len(batch) or not self.embedder_id:
            return False
        made = await self.try_embed([entry[2] for entry in batch.entries])
        if made is None:
            return False
        batch.vectors = [stored(row) for row in made]
        batch.embedder_id = self.embedder_id
        return True

    async def try_embed(self, texts: list[str]) -> Vectors | None:
        """The vectors of ``texts``, or None when the embedder failed."""
        try:
            return await embedding.embed_documents(self.embedder, texts, self.seconds)
        except EmbedderError:
            return None


def stored(vector: Vectors) -> bytes:
    """A unit vector as the ``vectors.vector`` column holds it: little-endian binary32."""
    return np.asarray(vector, dtype="<f4").tobytes()


async def bind(connection: AsyncConnection, embedder: Embedder, *, record: bool) -> int:
    """The id of ``embedder`` in the store, recording it where the store names none.

    ``record`` false (a read-only store): nothing is written, and a store that
    names no embedder gives 0.

    Raises:
        EmbedderError: the store's vectors are another embedder's (name or dims).

    """
    named = (
        await connection.execute(
            select(embedders.c.id, embedders.c.name, embedders.c.dims).select_from(
                index_state.join(embedders, embedders.c.id == index_state.c.embedder_id)
            )
        )
    ).first()
    if named is not None:
        if (named.name, named.dims) != (embedder.name, embedder.dims):
            raise EmbedderError(
                f"this store's vectors are by {named.name!r} ({named.dims} dims), not"
                f" {embedder.name!r} ({embedder.dims} dims): open it with that embedder,"
                " or make every vector again with reembed"
            )
        return int(named.id)
    if not record:
        return 0
    known = (
        await connection.execute(select(embedders.c.id).where(embedders.c.name == embedder.name))
    ).scalar_one_or_none()
    if known is None:
        result = await connection.execute(
            insert(embedders).values(name=embedder.name, dims=embedder.dims)
        )
        known = result.inserted_primary_key[0] if result.inserted_primary_key else None
    await connection.execute(update(index_state).values(embedder_id=known))
    return int(known or 0)


def _pending(embedder_id: int, scope: ScopeIds) -> Any:
    has_vector = exists().where(
        and_(vectors.c.entry_seq == entries.c.seq, vectors.c.embedder_id == embedder_id)
    )
    return and_(scope.condition(), ~has_vector)


async def pending_count(connection: AsyncConnection, embedder_id: int, scope: ScopeIds) -> int:
    """How many entries of the view have no vector by the embedder."""
    statement = select(func.count()).select_from(entries).where(_pending(embedder_id, scope))
    return int((await connection.execute(statement)).scalar_one())


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
    connection: AsyncConnection, embedder_id: int, made: list[tuple[int, str, bytes]]
) -> None:
    """Write each (seq, memory it was made from, vector) where the entry still holds that memory.

    The seqs go to the change log: a process that holds the vectors reads theirs.
    """
    if not made:
        return
    backend = backend_of(connection)
    await connection.exec_driver_sql(
        backend.sql(_ADD_IF_CURRENT),
        [(embedder_id, vector, seq, backend.encode(memory)) for seq, memory, vector in made],
    )
    await connection.execute(insert(changes), [{"seq": seq} for seq, _, _ in made])
