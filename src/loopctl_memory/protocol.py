"""The LoopMemory contract that every backend implements."""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from loopctl_memory.entry import ConsolidationStats, MemoryEntry


@runtime_checkable
class LoopMemory(Protocol):
    """A memory an agent loop stores into after each tool call and retrieves from before each turn.

    The Python form of loopctl's ``LoopMemory`` trait (``len()`` is ``count()``).
    """

    async def store(self, entry: MemoryEntry) -> None:
        """Store ``entry``; raise ``InvalidEntryError`` and change nothing if it is not valid."""
        ...

    async def retrieve(self, query: str, limit: int) -> list[MemoryEntry]:
        """Return up to ``limit`` entries, best reference score first, ties in insertion order."""
        ...

    async def consolidate(self) -> ConsolidationStats:
        """Prune every entry whose relevance (as binary32) is below 0.05."""
        ...

    async def count(self) -> int:
        """Return the number of stored entries."""
        ...

    async def is_empty(self) -> bool:
        """Return whether no entry is stored."""
        ...


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors: the user's model, which the store calls (and records by name).

    Either method may be a coroutine function (an HTTP endpoint) or a plain
    one (a local model; the store runs it in a worker thread). Asymmetric
    models prompt queries and documents differently, hence two methods.
    """

    @property
    def name(self) -> str:
        """The model's id, recorded with the store's vectors.

        Say ``"sentence-transformers:all-MiniLM-L6-v2"``: a store refuses an
        embedder of another name until its vectors are made again.
        """
        ...

    @property
    def dims(self) -> int:
        """How many numbers each vector has."""
        ...

    def embed_documents(self, texts: list[str]) -> Any:
        """One vector a text, in order: an array-like of shape ``(len(texts), dims)``."""
        ...

    def embed_query(self, text: str) -> Any:
        """The vector of a query: an array-like of shape ``(dims,)``."""
        ...
