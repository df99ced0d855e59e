"""The console's JSON API and MCP over HTTP, on a real server: what each route does to the store."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import httpx2
from mcp.client.streamable_http import streamable_http_client

from loopctl_memory import MemoryCategory, MemoryEntry
from mcp import ClientSession

from .conftest import TOKEN, serving


def _entry(text: str, **fields: object) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text, **fields)  # type: ignore[arg-type]


async def test_search_ranks_by_the_best_ranking_and_explains_each_score(store):
    await store.store_many(
        [_entry("the cache lives in redis", tags=["ops"]), _entry("tests run in ci")]
    )
    async with serving(store) as served:
        answer = (await served.client.get("/api/memories", params={"q": "cache"})).json()
        assert "bm25" == answer["ranking"]
        (found,) = answer["memories"]
        assert ("the cache lives in redis", "") == (found["memory"], found["scope"])
        assert found["score"] == found["parts"]["bm25"] > 0
        reference = await served.client.get(
            "/api/memories", params={"q": "cache", "ranking": "reference", "limit": 1}
        )
        assert ["the cache lives in redis"] == [m["memory"] for m in reference.json()["memories"]]
        newest = (await served.client.get("/api/memories")).json()["memories"]
        assert ["tests run in ci", "the cache lives in redis"] == [m["memory"] for m in newest]
        tagged = await served.client.get("/api/memories", params={"tag": "OPS"})
        assert ["the cache lives in redis"] == [m["memory"] for m in tagged.json()["memories"]]
        for bad in ({"limit": "0"}, {"limit": "x"}, {"ranking": "best"}, {"meta": "{"}):
            refused = await served.client.get("/api/memories", params={"q": "cache", **bad})
            assert 400 == refused.status_code, bad


async def test_a_memory_is_edited_and_deleted_and_its_history_shows_both(store):
    entry = _entry("the cache lives in redis")
    await store.store(entry)
    async with serving(store) as served:
        path = f"/api/memories/{entry.id}"
        edited = await served.client.patch(path, json={"memory": "the cache lives in valkey"})
        assert "the cache lives in valkey" == edited.json()["memory"]["memory"]
        shown = (await served.client.get(path)).json()
        assert ["stored", "updated"] == [event["event"] for event in shown["history"]]
        assert ["the cache lives in redis", "the cache lives in valkey"] == shown["history"][1][
            "details"
        ]["changed"]["memory"]
        refused = await served.client.patch(path, json={"id": str(uuid.uuid4())})
        assert 400 == refused.status_code
        assert 200 == (await served.client.delete(path)).status_code
        gone = (await served.client.get(path)).json()
        assert gone["memory"] is None
        assert ["stored", "updated", "deleted"] == [event["event"] for event in gone["history"]]
        assert 404 == (await served.client.delete(path)).status_code
        recent = (await served.client.get("/api/history", params={"event": "deleted"})).json()
        assert [str(entry.id)] == [event["id"] for event in recent["events"]]
    assert await store.get(entry.id) is None


async def test_scopes_are_counted_and_a_request_stays_within_the_servers_scope(store):
    await store.scope("acme").store(_entry("acme's"))
    await store.scope("acme/bob").store(_entry("bob's"))
    await store.scope("other").store(_entry("other's"))
    async with serving(store.scope("acme")) as served:
        scopes = (await served.client.get("/api/scopes")).json()
        assert [{"scope": "", "memories": 1}, {"scope": "bob", "memories": 1}] == scopes
        below = await served.client.get("/api/memories", params={"descendants": "1"})
        assert {"acme's", "bob's"} == {m["memory"] for m in below.json()["memories"]}
        for outside in ("..", "../other", "/other"):
            refused = await served.client.get("/api/memories", params={"scope": outside})
            assert 400 == refused.status_code, outside


async def test_agents_share_one_memory_over_mcp_with_the_token(store):
    async with serving(store, token=TOKEN) as served:

        async def agent(number: int) -> list[str]:
            headers = {"authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers) as http,
                streamable_http_client(f"{served.url}/mcp", http_client=http) as streams,
                ClientSession(streams[0], streams[1]) as session,
            ):
                await session.initialize()
                await session.call_tool(
                    "remember",
                    {
                        "memory": f"agent {number} learned fact {number}",
                        "category": "fact",
                        "scope": f"agent-{number}",
                    },
                )
                recalled = await session.call_tool(
                    "recall", {"query": "learned fact", "scope": f"agent-{number}"}
                )
                assert not recalled.is_error
                found = recalled.structured_content or {}
                return [memory["memory"] for memory in found["memories"]]

        answers = await asyncio.gather(*(agent(number) for number in range(4)))
    assert [[f"agent {n} learned fact {n}"] for n in range(4)] == answers
    assert 4 == await store.with_descendants().count()


async def test_forget_by_filter_needs_the_count_its_preview_showed(store):
    await store.store_many(
        [_entry("flaky ci one", tags=["ci"]), _entry("flaky ci two", tags=["ci"]), _entry("kept")]
    )
    async with serving(store) as served:
        preview = (await served.client.get("/api/forget", params={"tag": "ci"})).json()
        assert 2 == preview["count"]
        assert {"flaky ci one", "flaky ci two"} == {m["memory"] for m in preview["sample"]}
        assert 400 == (await served.client.post("/api/forget", params={"tag": "ci"})).status_code
        everything = await served.client.post("/api/forget", params={"confirm": "3"})
        assert 400 == everything.status_code
        await store.store(_entry("flaky ci three", tags=["ci"]))
        stale = await served.client.post("/api/forget", params={"tag": "ci", "confirm": "2"})
        assert 409 == stale.status_code
        assert 4 == await store.count()
        done = await served.client.post("/api/forget", params={"tag": "ci", "confirm": "3"})
        assert {"forgotten": 3} == done.json()
    assert ["kept"] == [entry.memory async for entry in store.iter_entries()]


async def test_a_consolidation_is_previewed_with_its_reasons_then_run(store):
    faint = _entry("an old note", relevance=0.01)
    await store.store_many(
        [faint, _entry("deploy uses blue green"), _entry("deploy uses blue green now")]
    )
    async with serving(store) as served:
        preview = (await served.client.get("/api/consolidate", params={"full": "1"})).json()
        assert 1 == preview["stats"]["merged"]
        assert [str(faint.id)] == [item["memory"]["id"] for item in preview["pruned"]]
        assert "below the floor" in preview["pruned"][0]["why"]
        assert 3 == await store.count()
        ran = (await served.client.post("/api/consolidate", params={"full": "1"})).json()
        assert preview["stats"] == ran["stats"]
        stats = (await served.client.get("/api/stats")).json()
        assert (1, 1, 0) == (
            stats["memories"],
            stats["by_category"]["fact"],
            stats["by_category"]["working"],
        )
        assert 10 == len(stats["relevance_histogram"])


async def test_the_newest_memories_come_a_page_at_a_time(store):
    await store.store_many([_entry(f"note {number}") for number in range(7)])
    async with serving(store) as served:
        seen: list[str] = []
        params: dict[str, str] = {"limit": "3"}
        while True:
            page = (await served.client.get("/api/memories", params=params)).json()
            seen += [memory["memory"] for memory in page["memories"]]
            if page["next"] is None:
                break
            params["before"] = page["next"]
        assert [f"note {number}" for number in range(6, -1, -1)] == seen
        refused = await served.client.get("/api/memories", params={"before": "nope"})
        assert 400 == refused.status_code


async def test_filters_on_dates_and_metadata_and_the_memories_per_day(store):
    old = _entry(
        "an old ann note", created_at=datetime(2026, 1, 5, tzinfo=UTC), metadata={"user": "ann"}
    )
    new = _entry(
        "a new bob note", created_at=datetime(2026, 3, 5, tzinfo=UTC), metadata={"user": "bob"}
    )
    await store.store_many([old, new])
    async with serving(store) as served:

        async def listed(**params: str) -> list[str]:
            answer = await served.client.get("/api/memories", params=params)
            return [memory["memory"] for memory in answer.json()["memories"]]

        assert ["a new bob note"] == await listed(since="2026-02-01")
        assert ["an old ann note"] == await listed(until="2026-02-01")
        assert ["an old ann note"] == await listed(meta='{"user": "ann"}')
        assert ["an old ann note"] == await listed(q="note", meta='{"user": "ann"}')
        stats = (await served.client.get("/api/stats")).json()
        assert [["2026-01-05", 1], ["2026-03-05", 1]] == stats["created_per_day"]


async def test_the_servers_ranking_is_the_consoles_default(store):
    await store.store_many([_entry("the cache lives in redis"), _entry("tests run in ci")])
    async with serving(store, ranking="reference") as served:
        assert "reference" == (await served.client.get("/api/info")).json()["ranking"]
        found = (await served.client.get("/api/memories", params={"q": "cache"})).json()
        assert "reference" == found["ranking"]
        assert {} == found["memories"][0]["parts"]  # the reference score has no parts
