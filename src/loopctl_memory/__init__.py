"""loopctl-memory: a durable memory for AI agent loops.

The loopctl ``LoopMemory`` contract, persistent on SQLite (a file, or
``:memory:`` for the reference behaviour) and on PostgreSQL.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from loopctl_memory.entry import ConsolidationStats, MemoryCategory, MemoryEntry, Summary
from loopctl_memory.errors import (
    DuplicateEntryError,
    EmbedderError,
    InvalidArgumentError,
    InvalidEntryError,
    LoopMemoryError,
    ReadOnlyStoreError,
    SchemaError,
    StorageError,
    StoreClosedError,
)
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.protocol import Embedder, LoopMemory
from loopctl_memory.rankings import Explanation

if TYPE_CHECKING:
    from loopctl_memory import sync as sync  # the blocking API, a module of its own
    from loopctl_memory.builtin import InMemoryStore
    from loopctl_memory.history import HistoryEvent
    from loopctl_memory.lifecycle import ConsolidationConfig
    from loopctl_memory.sql.opening import OpenOptions, open_store
    from loopctl_memory.sql.store.embeddings import RecordedEmbedder
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

if TYPE_CHECKING:
    __version__: str

__all__ = [
    "ConsolidationConfig",
    "ConsolidationStats",
    "DuplicateEntryError",
    "Embedder",
    "EmbedderError",
    "Explanation",
    "HistoryEvent",
    "InMemoryStore",
    "InvalidArgumentError",
    "InvalidEntryError",
    "LoopMemory",
    "LoopMemoryError",
    "MemoryCategory",
    "MemoryEntry",
    "MemoryFilter",
    "OpenOptions",
    "ReadOnlyStoreError",
    "RecordedEmbedder",
    "SchemaError",
    "SqlMemoryStore",
    "StorageError",
    "StoreClosedError",
    "Summary",
    "__version__",
    "open_store",
]


_LAZY = {
    "ConsolidationConfig": "loopctl_memory.lifecycle",
    "HistoryEvent": "loopctl_memory.history",
    "InMemoryStore": "loopctl_memory.builtin",
    "OpenOptions": "loopctl_memory.sql.opening",
    "RecordedEmbedder": "loopctl_memory.sql.store.embeddings",
    "SqlMemoryStore": "loopctl_memory.sql.store.memory_store",
    "open_store": "loopctl_memory.sql.opening",
}


def __getattr__(name: str) -> Any:
    # The SQL store pulls in SQLAlchemy, and the version importlib.metadata: loaded on
    # first use, so that what needs neither (the command line's --help) starts fast.
    import importlib  # noqa: PLC0415 - see above

    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "sync":  # `loopctl_memory.sync` without importing it first
        return importlib.import_module("loopctl_memory.sync")
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version  # noqa: PLC0415

        try:
            return version("loopctl-memory")
        except PackageNotFoundError:  # pragma: no cover - a source tree without install
            return "0.0.0"
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
