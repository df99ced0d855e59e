"""The lifecycle: update, preview a consolidation and run it, forget, and each memory's history.

- ``update`` changes a memory in place (same id, same place in insertion order).
- ``preview_consolidation(config)`` says what ``consolidate(config)`` would
  merge and prune, and why, without writing anything; ``ConsolidationConfig.full()``
  decays, merges near-duplicates (+0.1 relevance a duplicate) and prunes
  below 0.05 (the default, ``ConsolidationConfig()``, only prunes).
- ``forget`` deletes what meets every condition given (here: a category).
- ``history(id)`` tells what happened to a memory, after it is gone too.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/lifecycle.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
from pathlib import Path

from loopctl_memory import ConsolidationConfig, MemoryCategory, MemoryEntry, open_store


async def main(db: str | os.PathLike[str]) -> None:
    """Five memories through an update, a consolidation and a forget."""
    entries = [
        MemoryEntry(MemoryCategory.FACT, "Deploy failed: disk full on host b7", relevance=0.6),
        MemoryEntry(MemoryCategory.FACT, "deploy failed, disk full on host b7", relevance=0.4),
        MemoryEntry(MemoryCategory.WORKING, "scratch: rerun job 812", relevance=0.02),
        MemoryEntry(MemoryCategory.INSIGHT, "Clean the docker cache before builds", relevance=0.9),
        MemoryEntry(MemoryCategory.TRAJECTORY, "Ran the release checklist", relevance=0.7),
    ]
    names = {entry.id: entry.memory for entry in entries}
    async with open_store(db) as memory:
        await memory.store_many(entries)
        insight = entries[3]
        await memory.update(insight.id, memory="Prune docker images before builds", validated=True)

        full = ConsolidationConfig.full()
        preview = await memory.preview_consolidation(full)  # nothing written
        for merged, into in preview.merged:
            print(f"would merge: {merged.memory!r} into {into.memory!r}")
        for pruned, why in preview.pruned:
            print(f"would prune: {pruned.memory!r} ({why})")
        print("after the preview:", await memory.count(), "memories")

        stats = await memory.consolidate(full)
        print(
            f"consolidated: {stats.entries_before} -> {stats.entries_after}"
            f" ({stats.merged} merged, {stats.pruned} pruned, {stats.bytes_saved} bytes saved)"
        )
        kept = await memory.get(entries[0].id)
        print(f"kept: {kept.memory!r}, relevance {kept.relevance:.2f}" if kept else "kept nothing")
        print("forgot:", await memory.forget(category=MemoryCategory.TRAJECTORY))
        print("left:", [entry.memory async for entry in memory.iter_entries()])

        for entry in entries:
            events = await memory.history(entry.id)  # found after it is gone too
            print(f"history of {names[entry.id]!r}: {', '.join(event.event for event in events)}")
        [updated] = await memory.history(insight.id, events=["updated"])  # of one kind
        print("the update changed (old, new):", dict(updated.details["changed"]))
        [forgotten] = await memory.history(entries[4].id, events=["forgotten"])
        print("forgotten by the rule:", dict(forgotten.details["rule"]))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
