"""The MCP tools with metadata, keys and expiry: remember takes them, recall filters on them."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime, timedelta

from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.mcp_server.tools import sweep_now_and_then

from .conftest import call, error_of, server


async def test_remember_takes_metadata_a_key_and_a_ttl_and_recall_filters(db):
    async with server(db) as client:
        first = await call(
            client, "remember", memory="deploy uses the blue cluster",
            metadata={"team": "ops", "n": 3}, key="deploy", ttl="7d",
        )  # fmt: skip
        await call(client, "remember", memory="deploy needs a review", metadata={"team": "dev"})
        found = await call(client, "recall", query="deploy", where={"team": "ops"})
        [memory] = found["memories"]
        assert first["id"] == memory["id"]
        assert {"team": "ops", "n": 3} == memory["metadata"]
        assert "deploy" == memory["key"]
        expires = datetime.fromisoformat(memory["expires_at"])
        assert timedelta(days=6.9) < expires - datetime.now(UTC) < timedelta(days=7.1)
        greater = await call(client, "recall", query="deploy", where={"n": {"$gt": 2}})
        assert [first["id"]] == [item["id"] for item in greater["memories"]]
        replaced = await call(client, "remember", memory="deploy uses green", key="deploy")
        everything = await call(client, "recall", query="deploy", limit=10)
        ids = [item["id"] for item in everything["memories"]]
        assert replaced["id"] in ids
        assert first["id"] not in ids
        message = await error_of(client, "recall", query="x", where={"n": {"$regex": "a"}})
        assert "unknown operator '$regex'" in message
        message = await error_of(client, "remember", memory="x", ttl="soon")
        assert "soon" in message


async def test_the_server_sweeps_expired_memories_now_and_then(db):
    now = datetime.now(UTC)
    async with open_store(db) as store:
        await store.store_many(
            [
                MemoryEntry(MemoryCategory.FACT, "gone", expires_at=now - timedelta(seconds=1)),
                MemoryEntry(MemoryCategory.FACT, "kept"),
            ]
        )
        turns: list[float] = []

        async def sleep(seconds: float) -> None:
            turns.append(seconds)
            if len(turns) == 2:
                raise asyncio.CancelledError

        with contextlib.suppress(asyncio.CancelledError):
            await sweep_now_and_then(store, every=60.0, sleep=sleep)
        assert [60.0, 60.0] == turns
        assert 0 == await store.sweep_expired()  # the loop swept it already
        assert 1 == await store.count()
