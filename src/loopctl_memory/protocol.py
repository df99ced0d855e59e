"""The LoopMemory contract that every backend implements."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

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
