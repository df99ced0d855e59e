"""``serve`` is safe by default: hosts, origins, the token, sizes and read-only, each refused.

Every check applies to every route, MCP at ``/mcp`` included.
"""

from __future__ import annotations

import uuid

import pytest

from loopctl_memory import InvalidArgumentError, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.web.app import check_token
from loopctl_memory.web.guard import MAX_QUERY

from .conftest import TOKEN, serving

MCP_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}


async def test_a_loopback_server_answers_only_to_loopback_names(store):
    async with serving(store) as served:
        for name in ("127.0.0.1", "localhost"):
            answer = await served.client.get("/api/info", headers={"host": f"{name}:{served.port}"})
            assert 200 == answer.status_code
        for host in ("evil.example", f"evil.example:{served.port}", "127.0.0.1:1"):
            answer = await served.client.get("/api/info", headers={"host": host})
            assert 421 == answer.status_code, host
            assert "does not answer to the host" in answer.json()["error"]
        mcp = await served.client.post(
            "/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, "host": "evil.example"}
        )
        assert 421 == mcp.status_code


@pytest.mark.parametrize("method", ["GET", "PATCH", "DELETE", "POST"])
async def test_a_request_from_another_origin_is_refused_whatever_its_method(store, method):
    entry = MemoryEntry(MemoryCategory.FACT, "kept")
    await store.store(entry)
    async with serving(store) as served:
        for headers in (
            {"origin": "http://evil.example"},
            {"origin": f"http://127.0.0.1:{served.port + 1}"},
            {"sec-fetch-site": "cross-site"},
        ):
            answer = await served.client.request(
                method, f"/api/memories/{entry.id}", headers=headers, json={"relevance": 0.1}
            )
            assert 403 == answer.status_code, headers
            assert "another origin" in answer.json()["error"]
        own = await served.client.get(f"/api/memories/{entry.id}", headers={"origin": served.url})
        assert 200 == own.status_code
        mcp = await served.client.post(
            "/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, "origin": "http://evil.example"}
        )
        assert 403 == mcp.status_code
    assert (await store.get(entry.id)) == entry


async def test_with_a_token_every_request_but_the_page_shell_carries_it(store):
    async with serving(store, token=TOKEN) as served:
        for headers in ({}, {"authorization": "Bearer wrong"}, {"authorization": TOKEN}):
            answer = await served.client.get("/api/info", headers=headers)
            assert 401 == answer.status_code, headers
            assert answer.headers["www-authenticate"].startswith("Bearer")
        in_url = await served.client.get(f"/api/info?token={TOKEN}&access_token={TOKEN}")
        assert 401 == in_url.status_code
        cookie = await served.client.get("/api/info", headers={"cookie": f"token={TOKEN}"})
        assert 401 == cookie.status_code
        right = {"authorization": f"Bearer {TOKEN}"}
        assert 200 == (await served.client.get("/api/info", headers=right)).status_code
        mcp = await served.client.post("/mcp", json=MCP_INITIALIZE, headers=MCP_HEADERS)
        assert 401 == mcp.status_code
        mcp = await served.client.post(
            "/mcp", json=MCP_INITIALIZE, headers={**MCP_HEADERS, **right}
        )
        assert 200 == mcp.status_code
        for open_path in ("/", "/assets/console.js", "/assets/console.css"):
            shell = await served.client.get(open_path)
            assert 200 == shell.status_code, open_path
            assert TOKEN not in shell.text


async def test_bodies_and_query_strings_are_bounded(store):
    entry = MemoryEntry(MemoryCategory.FACT, "kept")
    await store.store(entry)
    async with serving(store, max_body=10_000) as served:
        long_query = await served.client.get("/api/memories", params={"q": "x" * (MAX_QUERY + 1)})
        assert 414 == long_query.status_code
        big = await served.client.patch(f"/api/memories/{entry.id}", json={"memory": "y" * 20_000})
        assert 413 == big.status_code
        assert "larger than 10,000 bytes" in big.json()["error"]
        mcp = await served.client.post(
            "/mcp",
            json={**MCP_INITIALIZE, "params": {"padding": "z" * 20_000}},
            headers=MCP_HEADERS,
        )
        assert 413 == mcp.status_code
    assert (await store.get(entry.id)) == entry


async def test_a_read_only_server_serves_reads_and_refuses_every_write(store, tmp_path):
    entry = MemoryEntry(MemoryCategory.FACT, "the cache lives in redis")
    await store.store(entry)
    await store.close()
    async with open_store(tmp_path / "memory.db", read_only=True) as read_only:
        async with serving(read_only) as served:
            assert served.client is not None
            info = (await served.client.get("/api/info")).json()
            assert info["read_only"] is True
            found = await served.client.get("/api/memories", params={"q": "cache"})
            assert [str(entry.id)] == [memory["id"] for memory in found.json()["memories"]]
            for method, body in (("PATCH", {"relevance": 0.1}), ("DELETE", None)):
                answer = await served.client.request(method, f"/api/memories/{entry.id}", json=body)
                assert 403 == answer.status_code
                assert "read-only" in answer.json()["error"]
        assert (await read_only.get(entry.id)) == entry


def test_beyond_loopback_a_server_needs_a_long_token():
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        assert check_token(host, None) is None
    with pytest.raises(InvalidArgumentError, match="needs a token"):
        check_token("0.0.0.0", None)  # noqa: S104 - the address refused
    with pytest.raises(InvalidArgumentError, match="needs a token"):
        check_token("192.168.1.5", None)
    with pytest.raises(InvalidArgumentError, match="at least 16"):
        check_token("0.0.0.0", "short")  # noqa: S104
    with pytest.raises(InvalidArgumentError, match="whitespace"):
        check_token("0.0.0.0", "a token with spaces in it")  # noqa: S104
    assert TOKEN == check_token("0.0.0.0", TOKEN)  # noqa: S104


async def test_nothing_a_client_sends_names_a_file(store):
    async with serving(store) as served:
        for path in (
            "/assets/../../pyproject.toml",
            "/assets/%2e%2e%2fapp.py",
            "/assets/console.html/..",
            "/assets/app.py",
        ):
            answer = await served.client.get(path)
            assert answer.status_code == 404, path
        bad_id = await served.client.get("/api/memories/..%2f..%2fetc")
        assert bad_id.status_code in (400, 404)
        unknown = await served.client.get(f"/api/memories/{uuid.uuid4()}")
        assert 404 == unknown.status_code
