"""The blocking API: the same memory from plain synchronous code, and from many threads.

``loopctl_memory.sync.open_store`` takes the arguments of the async
``open_store`` and returns a ``SyncMemoryStore``: the same methods, each run to
completion on an event loop in a thread of the store's own. No ``async``,
no ``await``, and any number of threads may call one store at once.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/sync_api.py [--db PATH]
"""

from __future__ import annotations

import argparse
import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from loopctl_memory import MemoryCategory, MemoryEntry
from loopctl_memory.sync import SyncMemoryStore, open_store


def worker(memory: SyncMemoryStore, number: int) -> None:
    """What one thread of a threaded program does: store what it found, blocking."""
    memory.store(MemoryEntry(MemoryCategory.TRAJECTORY, f"worker {number} indexed shard {number}"))


def main(db: str | os.PathLike[str]) -> None:
    """Store, search, scope and count without an event loop."""
    with open_store(db) as memory:  # a SyncMemoryStore; the `with` block closes it
        memory.store(MemoryEntry(MemoryCategory.FACT, "CI runs make test").with_tag("ci"))
        memory.store_many(
            [
                MemoryEntry(MemoryCategory.INSIGHT, "make lint runs ruff and mypy"),
                MemoryEntry(MemoryCategory.FACT, "The docs build with mkdocs"),
            ]
        )
        for entry, score in memory.retrieve_scored("make test", 5, ranking="bm25"):
            print(f"{score:.3f} {entry.memory}")

        # Eight threads at once, one store: each call is one transaction.
        with ThreadPoolExecutor(max_workers=4) as pool:
            list(pool.map(lambda number: worker(memory, number), range(8)))
        print("after the threads:", memory.count())

        agent = memory.scope("team/agent-1")  # a view: same thread, same connections
        agent.store(MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over find"))
        print("agent-1 holds:", agent.count())
        print("scopes:", memory.scopes())
        shards = sum(1 for entry in memory.iter_entries() if "shard" in entry.memory)
        print("shard memories (iter_entries):", shards)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        main(arguments.db or Path(scratch) / "memory.db")
