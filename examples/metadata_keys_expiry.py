"""Your own fields (metadata) and filters on them, memories with a name (keys), and expiry.

- ``metadata``: a JSON object stored with each memory; ``update`` merges into
  it or replaces it, and ``MemoryFilter(metadata=...)`` filters ``retrieve`` and
  ``count`` on it (dotted paths, ``$in``, ``$gte`` and the other operators).
- ``key``: a name unique in its scope; storing another memory with it replaces the old one.
- ``expires_at`` and ``open_store(ttl=...)``: from its expiry on, no read sees a
  memory. "Now" is the store's clock, here an injected one that the script
  moves forward, so nothing sleeps.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/metadata_keys_expiry.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from loopctl_memory import MemoryCategory, MemoryEntry, MemoryFilter, open_store


class Clock:
    """A clock the script moves by hand: the store asks it what time it is."""

    def __init__(self) -> None:
        self.now = datetime.now(UTC)

    def __call__(self) -> datetime:
        """The time now, as the store reads it."""
        return self.now


async def main(db: str | os.PathLike[str]) -> None:
    """Metadata, then keys, then expiry, on one store."""
    clock = Clock()
    # ttl: every memory stored without an expires_at expires a week after it is stored.
    async with open_store(db, ranking="bm25", clock=clock, ttl=timedelta(days=7)) as store:
        ann = MemoryEntry(
            MemoryCategory.FACT, "Ann prefers dark mode", metadata={"user": "ann", "n": 3}
        )
        await store.store(ann)
        await store.store(
            MemoryEntry(MemoryCategory.FACT, "Bob prefers light mode", metadata={"user": "bob"})
        )
        # merge_metadata sets the keys it gives and keeps the rest; metadata= replaces all.
        updated = await store.update(ann.id, merge_metadata={"via": {"tool": "ui"}})
        if updated is None:  # update answers None when no memory has that id
            raise SystemExit("ann's memory is gone")
        print("ann's metadata:", updated.metadata)
        print("ann's memory expires in:", updated.expires_at and updated.expires_at - clock.now)
        anns = MemoryFilter(metadata={"user": "ann", "via.tool": {"$in": ["ui", "cli"]}})
        found = await store.retrieve("mode", 5, filter=anns)
        print("mode, ann's only:", [entry.memory for entry in found])
        print("n >= 3:", await store.count(filter=MemoryFilter(metadata={"n": {"$gte": 3}})))

        await store.store(MemoryEntry(MemoryCategory.FACT, "theme: dark", key="prefs"))
        await store.store(MemoryEntry(MemoryCategory.FACT, "theme: light", key="prefs"))
        keyed = await store.get_by_key("prefs")
        print("prefs:", keyed.memory if keyed else None)
        named = [entry.memory async for entry in store.iter_entries() if entry.key == "prefs"]
        print("stored twice under prefs, kept:", named)

        soon = clock.now + timedelta(hours=1)
        frozen = MemoryEntry(MemoryCategory.WORKING, "deploy frozen", expires_at=soon)
        await store.store(frozen)
        print("deploy, now:", [entry.memory for entry in await store.retrieve("deploy", 5)])
        clock.now += timedelta(hours=2)
        gone = await store.retrieve("deploy", 5), await store.get(frozen.id)
        print("deploy, 2 hours later:", *gone)  # invisible at once: no sweep needed
        print("live memories:", await store.count())
        clock.now += timedelta(days=8)  # past the ttl of everything else
        print("8 days later, live memories:", await store.count())
        print("swept expired rows:", await store.sweep_expired())


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
