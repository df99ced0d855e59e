"""``list``: memories without a query, newest or most relevant first."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

from loopctl_memory import MemoryCategory, MemoryEntry, open_store

from .conftest import assert_fails, store_entries

NOW = datetime(2026, 6, 1, tzinfo=UTC)


def fact(memory: str, days_ago: int, relevance: float = 0.5, **fields: object) -> MemoryEntry:
    return MemoryEntry(
        MemoryCategory.FACT,
        memory,
        created_at=NOW - timedelta(days=days_ago),
        relevance=relevance,
        **fields,  # type: ignore[arg-type]
    )


def listed(on_db, *args: str) -> list[str]:
    result = on_db("list", *args, "--json")
    assert 0 == result.exit_code, result.output
    return [entry["memory"] for entry in json.loads(result.stdout)]


def test_list_shows_the_newest_created_first_or_the_most_relevant(on_db, db):
    store_entries(
        db,
        [
            fact("old but vital", 30, 0.9),
            fact("newest", 1, 0.2),
            fact("middle", 10, 0.9),  # relevance ties "old but vital": the later stored first
            fact("imported late, created early", 60, 0.1),
        ],
    )
    assert ["newest", "middle", "old but vital", "imported late, created early"] == listed(on_db)
    assert ["middle", "old but vital"] == listed(on_db, "--sort", "relevance", "--limit", "2")
    assert ["newest"] == listed(on_db, "-n", "1")
    table = on_db("list")
    assert "created" in table.stdout.split()
    assert "2026-05-31 00:00" in table.stdout


def test_list_filters_and_reaches_below_as_asked(on_db, db):
    store_entries(db, [fact("root one", 1, tags=["ci"]), fact("root two", 2)])
    asyncio.run(_store_in(db, "acme/alice", fact("alice's", 3)))
    assert ["root one"] == listed(on_db, "--tag", "CI")
    assert ["root one", "root two"] == listed(on_db)
    assert ["root one", "root two", "alice's"] == listed(on_db, "--descendants")
    below = on_db("--scope", "acme", "list", "--descendants", "--json")
    assert ["alice's"] == [entry["memory"] for entry in json.loads(below.stdout)]
    empty = on_db("--scope", "nobody", "list")
    assert ("", "No memories in scope nobody.\n") == (
        empty.stdout,
        empty.stderr,
    )
    assert_fails(on_db("list", "--limit", "0"), 2, "--limit")


async def _store_in(db, scope: str, entry: MemoryEntry) -> None:
    async with open_store(db) as store:
        await store.scope(scope).store(entry)
