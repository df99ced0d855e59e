"""InMemoryStore's vectors: made when entries are stored, pending when the embedder fails.

A mixin of :class:`~loopctl_memory.builtin.InMemoryStore`, kept apart so that the
store module holds the contract's operations.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable

from loopctl_memory import embedding
from loopctl_memory.arguments import check_batch_size
from loopctl_memory.embedding import NO_EMBEDDER, QueryVectors, Vectors
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.errors import EmbedderError
from loopctl_memory.protocol import Embedder


class InMemoryVectors:
    """Each entry's vector, ``embed_pending``, ``reembed`` and the store's embedder."""

    _embedder: Embedder | None
    _embed_timeout: float
    _entries: list[MemoryEntry]
    # Each entry's vector with the memory text it was made from: one made from
    # another text (the memory changed since) is no vector, and the entry pending.
    _vectors: dict[uuid.UUID, tuple[str, Vectors]]
    _query_vectors: QueryVectors
    # The embedder a reembed makes vectors with, and those it made (to resume).
    _reembedding: tuple[str, dict[uuid.UUID, tuple[str, Vectors]]]

    async def _try_embed(self, entries: list[MemoryEntry]) -> Vectors | None:
        """The vectors of ``entries``' memories; None with no embedder or when it fails."""
        if self._embedder is None or not entries:
            return None
        try:
            return await embedding.embed_documents(
                self._embedder, [entry.memory for entry in entries], self._embed_timeout
            )
        except EmbedderError:
            return None

    def _keep_vectors(self, entries: list[MemoryEntry], made: Vectors | None) -> None:
        if made is not None:
            for entry, vector in zip(entries, made, strict=True):
                self._vectors[entry.id] = (entry.memory, vector)

    def _pending(self) -> list[MemoryEntry]:
        """The entries without a vector of their current memory, in insertion order."""
        if self._embedder is None:
            return []
        vectors = self._vectors
        return [
            entry
            for entry in self._entries
            if (held := vectors.get(entry.id)) is None or held[0] != entry.memory
        ]

    async def pending_embeddings(self) -> int:
        """How many entries have no vector yet (0 without an embedder)."""
        return len(self._pending())

    async def embed_pending(self, batch_size: int = 256) -> int:
        """Make the vectors of the pending entries, ``batch_size`` at a time; return how many.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1.
            EmbedderError: the store has no embedder, or it failed; the batches
                before it are kept.

        """
        check_batch_size(batch_size)
        embedder = self._embedder
        if embedder is None:
            raise EmbedderError(NO_EMBEDDER)
        made = 0
        pending = self._pending()
        for start in range(0, len(pending), batch_size):
            batch = pending[start : start + batch_size]
            vectors = await embedding.embed_documents(
                embedder, [entry.memory for entry in batch], self._embed_timeout
            )
            self._keep_vectors(batch, vectors)
            made += len(batch)
        return made

    @property
    def embedder(self) -> Embedder | None:
        """The embedder that makes this store's vectors, or None."""
        return self._embedder

    async def reembed(
        self,
        embedder: Embedder | str,
        *,
        batch_size: int = 256,
        progress: Callable[[int, int], object] | None = None,
    ) -> int:
        """Make every entry's vector with ``embedder``, then make it the store's; how many.

        The SQL stores' contract, in memory: ``progress(done, total)`` before the
        first batch and after each; a failed reembed keeps the batches made, and
        the next one with an embedder of the same name resumes from them.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1, or
                ``embedder`` is not one.
            EmbedderError: the embedder failed.

        """
        check_batch_size(batch_size)
        if isinstance(embedder, str):
            from loopctl_memory.embedders import embedder_from_spec  # noqa: PLC0415 - a cycle

            embedder = embedder_from_spec(embedder)
        new = embedding.check_embedder(embedder)
        name, made = self._reembedding
        kept = made if name == new.name else {}
        self._reembedding = (new.name, kept)
        waiting = [e for e in self._entries if kept.get(e.id, ("",))[0] != e.memory]
        total, done = len(self._entries), len(self._entries) - len(waiting)
        if progress is not None:
            progress(done, total)
        for start in range(0, len(waiting), batch_size):
            batch = waiting[start : start + batch_size]
            vectors = await embedding.embed_documents(
                new, [entry.memory for entry in batch], self._embed_timeout
            )
            kept.update((e.id, (e.memory, v)) for e, v in zip(batch, vectors, strict=True))
            done += len(batch)
            if progress is not None:
                progress(done, total)
        self._embedder, self._vectors = new, kept
        self._reembedding = ("", {})
        self._query_vectors = QueryVectors()
        return len(waiting)
