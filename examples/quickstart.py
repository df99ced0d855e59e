"""Quick start: open a memory, store a few things an agent learned, retrieve them, count them.

The memory is a SQLite file: what one run stores, the next run (or another
process) finds. This script opens it, stores three memories, asks for the
ones about "file search", counts them, closes the store, and opens the file
again to show that they are still there.

Run it (``--db``: a SQLite file or a ``postgresql+asyncpg://`` URL; by
default a new file in a temporary directory, removed at the end)::

    python examples/quickstart.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from loopctl_memory import MemoryCategory, MemoryEntry, open_store


async def main(db: str | os.PathLike[str]) -> None:
    """Store, retrieve and count on ``db``, then reopen it."""
    # Created and migrated on first use. ranking="bm25" returns only what shares a word
    # with the query, best first; the default, "reference", is loopctl 0.1.0's ranking.
    memory = await open_store(db, ranking="bm25")
    try:
        await memory.store(
            MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over manual file search").with_tag(
                "tools"
            )
        )
        await memory.store_many(  # one transaction: all of them or none
            [
                MemoryEntry(MemoryCategory.FACT, "CI runs make test", tags=["ci"]),
                MemoryEntry(MemoryCategory.ERROR_PATTERN, "grep -r times out on node_modules"),
            ]
        )
        print("stored:", await memory.count())
        for entry in await memory.retrieve("file search", 5):  # best first
            print(f"retrieved: [{entry.category}] {entry.memory}")
    finally:
        await memory.close()

    # Another run, or another process: the memories are in the file.
    async with open_store(db, ranking="bm25") as memory:
        print("after reopening:", await memory.count())
        [entry] = await memory.retrieve("how does CI test", 1)
        print(f"retrieved: [{entry.category}] {entry.memory}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
