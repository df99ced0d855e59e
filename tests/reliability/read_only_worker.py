"""Open a database as a reader without write access would, and say what happened, as JSON.

Run by tests/reliability/test_read_only.py in a process that cannot write the
database's directory: ``python read_only_worker.py DB [--cli]``.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.errors import LoopMemoryError


async def _attempt(work: Any) -> str:
    try:
        await work
    except LoopMemoryError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


async def main(db: str) -> dict[str, Any]:
    report: dict[str, Any] = {"writable_open": await _attempt(open_store(db))}
    async with open_store(db, read_only=True) as store:
        report["count"] = await store.count()
        report["found"] = [entry.memory for entry in await store.retrieve("read only", 5)]
        report["store"] = await _attempt(store.store(MemoryEntry(MemoryCategory.FACT, "no")))
        report["consolidate"] = await _attempt(store.consolidate())
        report["count_after"] = await store.count()
    return report


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
