"""A child process for crash tests: stores entries and acknowledges each on stdout.

Usage: python crash_writer.py DB_PATH START MODE   (MODE: "single" or "batch")
Prints "ack <first> <last>" after each store or store_many call returns; it
runs until killed.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from datetime import UTC, datetime, timedelta

from loopctl_memory import MemoryCategory, MemoryEntry, open_store

BATCH = 50
_NAMESPACE = uuid.UUID("6f0c1c5e-7d55-4b57-9a59-8c0d7a1f2e10")
_CATEGORIES = list(MemoryCategory)


def expected_entry(index: int) -> MemoryEntry:
    """The entry number ``index``, the same in the child and in the test."""
    return MemoryEntry(
        _CATEGORIES[index % len(_CATEGORIES)],
        f"memory number {index}: ünïcødé ✓ " + "x" * (index % 97),
        tags=[f"tag{index % 7}", f"Round {index // 1000}"],
        relevance=(index % 21) * 0.05,
        id=uuid.uuid5(_NAMESPACE, str(index)),
        created_at=datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=index * 1_001),
        access_count=index % 5,
        validated=index % 2 == 0,
    )


async def _run(path: str, start: int, mode: str) -> None:
    async with open_store(path) as store:
        index = start
        while True:
            if mode == "single":
                await store.store(expected_entry(index))
                last = index
            else:
                await store.store_many(expected_entry(i) for i in range(index, index + BATCH))
                last = index + BATCH - 1
            sys.stdout.write(f"ack {index} {last}\n")
            sys.stdout.flush()
            index = last + 1


if __name__ == "__main__":
    asyncio.run(_run(sys.argv[1], int(sys.argv[2]), sys.argv[3]))
