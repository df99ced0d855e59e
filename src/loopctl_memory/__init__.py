"""loopctl-memory: a durable memory for AI agent loops.

The loopctl ``LoopMemory`` contract, persistent on SQLite (a file, or
``:memory:`` for the reference behaviour) and on PostgreSQL.
"""

from importlib.metadata import PackageNotFoundError, version

from loopctl_memory.builtin import InMemoryStore
from loopctl_memory.entry import ConsolidationStats, MemoryCategory, MemoryEntry
from loopctl_memory.errors import (
    DuplicateEntryError,
    InvalidEntryError,
    LoopMemoryError,
    SchemaError,
    StorageError,
)
from loopctl_memory.protocol import LoopMemory
from loopctl_memory.sql.store import SqlMemoryStore, open_store

try:
    __version__ = version("loopctl-memory")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.0.0"

__all__ = [
    "ConsolidationStats",
    "DuplicateEntryError",
    "InMemoryStore",
    "InvalidEntryError",
    "LoopMemory",
    "LoopMemoryError",
    "MemoryCategory",
    "MemoryEntry",
    "SchemaError",
    "SqlMemoryStore",
    "StorageError",
    "__version__",
    "open_store",
]
