"""What the MCP tools answer: typed dictionaries, so that clients see their schemas.

Each is a tool's structured result (:mod:`.tools`); times are ISO 8601 in UTC.
"""

from __future__ import annotations

from typing import Any, NotRequired  # pydantic needs typing_extensions' TypedDict below 3.12

from typing_extensions import TypedDict

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import timestamp


class Remembered(TypedDict):
    """What ``remember`` answers."""

    id: str


class Recollection(TypedDict):
    """A memory as ``recall`` shows it: what a model needs to use it, and its score."""

    id: str
    memory: str
    score: float
    category: str
    tags: list[str]
    relevance: float
    created_at: str
    metadata: dict[str, Any]
    key: NotRequired[str]
    expires_at: NotRequired[str]


class Recalled(TypedDict):
    """What ``recall`` answers: the memories, best first.

    ``elsewhere``, only when none matched here: how many of the scopes below
    match, by scope (as the ``scope`` argument names them).
    """

    memories: list[Recollection]
    elsewhere: NotRequired[dict[str, int]]


class Memory(TypedDict, total=False):
    """Every field of a memory (``last_accessed`` only once it was recalled)."""

    id: str
    memory: str
    category: str
    tags: list[str]
    relevance: float
    created_at: str
    access_count: int
    validated: bool
    last_accessed: str


class Forgotten(TypedDict):
    """What ``forget_memory`` answers."""

    forgotten: str


class Consolidated(TypedDict):
    """What one consolidation pass did."""

    entries_before: int
    entries_after: int
    pruned: int
    merged: int


class Stats(TypedDict):
    """What a scope holds; ``scopes`` names them as the ``scope`` argument does."""

    entries: int
    by_category: dict[str, int]
    scopes: dict[str, int]


def memory_of(entry: MemoryEntry) -> Memory:
    """Every field of ``entry``, as ``update_memory`` answers it."""
    shown = Memory(
        id=str(entry.id),
        memory=entry.memory,
        category=entry.category.value,
        tags=list(entry.tags),
        relevance=float(entry.relevance),
        created_at=timestamp(entry.created_at),
        access_count=entry.access_count,
        validated=entry.validated,
    )
    if entry.last_accessed is not None:
        shown["last_accessed"] = timestamp(entry.last_accessed)
    return shown


def recollection_of(entry: MemoryEntry, score: float) -> Recollection:
    """``entry`` with its ``score``, as ``recall`` lists it."""
    shown = Recollection(
        id=str(entry.id),
        memory=entry.memory,
        score=score,
        category=entry.category.value,
        tags=list(entry.tags),
        relevance=float(entry.relevance),
        created_at=timestamp(entry.created_at),
        metadata=entry.metadata,
    )
    if entry.key is not None:
        shown["key"] = entry.key
    if entry.expires_at is not None:
        shown["expires_at"] = timestamp(entry.expires_at)
    return shown
