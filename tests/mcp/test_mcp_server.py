"""`loopctl-memory mcp`, driven by the MCP SDK's own client over stdio, as a real subprocess."""

from __future__ import annotations

import asyncio
import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.scoring import score

from .conftest import ENTRY_POINT, call, error_of, server

TOOLS = {"remember", "recall", "update_memory", "forget_memory", "consolidate", "memory_stats"}


async def test_lists_six_tools_with_schemas_a_model_can_follow(db):
    async with server(db) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert TOOLS == set(tools)
    for tool in tools.values():
        assert tool.description
        assert tool.description == tool.description.strip()
        # No line keeps the indentation of the source the text came from.
        assert not any(line.startswith(" ") for line in tool.description.splitlines())
        assert tool.input_schema["type"] == "object"
    remember = tools["remember"].input_schema["properties"]
    assert "insight" == remember["category"]["default"]
    assert set(remember["category"]["enum"]) == {category.value for category in MemoryCategory}
    assert tools["remember"].input_schema["required"] == ["memory"]
    recall = tools["recall"].input_schema["properties"]
    assert 50 == recall["limit"]["maximum"]
    assert 5 == recall["limit"]["default"]
    assert recall["include_unmatched"]["default"] is False
    assert all("scope" in tool.input_schema["properties"] for tool in tools.values())
    assert tools["recall"].output_schema is not None


async def test_remember_then_recall_finds_it_with_the_reference_score(db):
    async with server(db) as client:
        made = await call(
            client, "remember", memory="CI runs make test", category="fact", tags=["ci"]
        )
        await call(client, "remember", memory="unrelated but very relevant", relevance=1.0)
        found = (await call(client, "recall", query="make test lint", ranking="reference"))[
            "memories"
        ]
    assert [made["id"]] == [memory["id"] for memory in found]
    [memory] = found
    assert score(0.5, 2, 3, False) == memory["score"]
    assert "CI runs make test" == memory["memory"]
    assert "fact" == memory["category"]
    assert ["ci"] == memory["tags"]
    assert 0.5 == memory["relevance"]
    assert memory["created_at"].endswith("+00:00")
    assert {
        "id",
        "memory",
        "score",
        "category",
        "tags",
        "relevance",
        "created_at",
        "metadata",
    } == set(memory)
    assert {} == memory["metadata"]
    async with open_store(db) as store:
        [(entry, in_process)] = await store.retrieve_scored("make test lint", 1)
    assert str(entry.id) == made["id"]
    assert in_process == memory["score"]


async def test_recall_pads_with_unmatched_only_when_asked_and_caps_the_limit(db):
    async with server(db) as client:
        for n in range(55):
            await call(client, "remember", memory=f"deploy step {n}", relevance=0.2)
        await call(client, "remember", memory="other", relevance=0.9)
        matched = (await call(client, "recall", query="other"))["memories"]
        padded = (
            await call(client, "recall", query="other", include_unmatched=True, ranking="reference")
        )["memories"]
        many = (await call(client, "recall", query="deploy", limit=1000))["memories"]
        unmatched_only = (await call(client, "recall", query="nothing"))["memories"]
    assert ["other"] == [memory["memory"] for memory in matched]
    assert 5 == len(padded)
    assert "other" == padded[0]["memory"]
    assert 50 == len(many)
    assert [f"deploy step {n}" for n in range(50)] == [memory["memory"] for memory in many]
    assert [] == unmatched_only


async def _access_count(db: Path, entry_id: str) -> tuple[int, bool]:
    """The entry's access count, and whether it has a last access time."""
    async with open_store(db) as store:
        entry = await store.get(uuid.UUID(entry_id))
    assert entry is not None
    return entry.access_count, entry.last_accessed is not None


async def test_recall_stamps_access_unless_the_server_is_told_not_to(db, tmp_path):
    async with server(db) as client:
        made = await call(client, "remember", memory="stamped on recall")
        await call(client, "recall", query="stamped")
        await call(client, "recall", query="stamped")
        await call(client, "recall", query="unrelated", include_unmatched=True)
    assert (2, True) == await _access_count(db, made["id"])
    other = tmp_path / "untracked.db"
    async with server(other, "--no-track-access") as client:
        made = await call(client, "remember", memory="never stamped")
        [found] = (await call(client, "recall", query="never"))["memories"]
    assert made["id"] == found["id"]
    assert (0, False) == await _access_count(other, made["id"])


async def test_update_and_forget(db):
    async with server(db) as client:
        made = await call(client, "remember", memory="the build uses tox", relevance=0.3)
        updated = await call(
            client, "update_memory", id=made["id"], memory="the build uses nox", validated=True
        )
        assert ("the build uses nox", True, 0.3) == (
            updated["memory"],
            updated["validated"],
            updated["relevance"],
        )
        assert [] == (await call(client, "recall", query="tox"))["memories"]
        [found] = (await call(client, "recall", query="nox"))["memories"]
        assert made["id"] == found["id"]
        assert {"forgotten": made["id"]} == await call(client, "forget_memory", id=made["id"])
        assert [] == (await call(client, "recall", query="nox"))["memories"]
        assert "no memory with id" in await error_of(client, "forget_memory", id=made["id"])


async def test_consolidate_and_stats(db):
    async with server(db) as client:
        await call(client, "remember", memory="keep me", category="fact", relevance=0.9)
        await call(client, "remember", memory="prune me", relevance=0.01)
        await call(client, "remember", memory="in a scope", category="strategy", scope="a/b")
        stats = await call(client, "memory_stats")
        assert 2 == stats["entries"]
        assert 1 == stats["by_category"]["fact"]
        assert 1 == stats["by_category"]["insight"]
        assert {"": 2, "a/b": 1} == stats["scopes"]
        done = await call(client, "consolidate")
        assert {"entries_before": 2, "entries_after": 1, "pruned": 1, "merged": 0} == done
        await call(client, "remember", memory="keep me", category="fact", relevance=0.9)
        full = await call(client, "consolidate", full=True)
        assert (2, 1, 1) == (full["entries_before"], full["entries_after"], full["merged"])
        assert 1 == (await call(client, "memory_stats", scope="a/b"))["entries"]


async def test_a_client_can_narrow_the_servers_scope_but_never_leave_it(db):
    async with open_store(db) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "root secret"))
        await store.scope("team-2").store(MemoryEntry(MemoryCategory.FACT, "team-2 secret"))
    async with server(db, scope="team") as client:
        made = await call(client, "remember", memory="team note")
        await call(client, "remember", memory="agent note", scope="agent-7")
        assert [] == (await call(client, "recall", query="secret"))["memories"]
        for escape in ("..", "../team-2", "/team-2", "", "a//b", ".", "agent-7/../../team-2"):
            result = await client.call_tool("recall", {"query": "secret", "scope": escape})
            assert result.is_error or [] == result.structured_content["memories"], escape
        assert "'..'" in await error_of(client, "remember", memory="x", scope="a/../b")
        [note] = (await call(client, "recall", query="note", scope="agent-7"))["memories"]
        assert "agent note" == note["memory"]
        assert {"": 1, "agent-7": 1} == (await call(client, "memory_stats"))["scopes"]
        assert {"agent-7": 1} == (await call(client, "memory_stats", scope="agent-7"))["scopes"]
    async with open_store(db) as store:
        assert [("team note", "team")] == [
            (entry.memory, "team") for entry in await store.scope("team").retrieve("note", 5)
        ]
        assert 1 == await store.count()
        found = await store.scope("team").get(uuid.UUID(made["id"]))
        assert found is not None


async def test_bad_input_is_a_tool_error_and_the_server_keeps_answering(db):
    async with server(db) as client:
        assert "unknown category 'nope'" in await error_of(
            client, "remember", memory="x", category="nope"
        )
        assert "relevance" in await error_of(client, "remember", memory="x", relevance=7)
        assert "limit" in await error_of(client, "recall", query="x", limit=-1)
        missing = "3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b"
        assert f"no memory with id {missing}" in await error_of(
            client, "update_memory", id=missing, memory="y"
        )
        assert "UUID" in await error_of(client, "forget_memory", id="not-an-id")
        assert "nothing to change" in await error_of(client, "update_memory", id=missing)
        assert "scope" in await error_of(client, "remember", memory="x", scope="a//b")
        # Blank text or tags: the library would store them; an agent surely erred.
        for blank in ("", "   \n"):
            assert "text is blank" in await error_of(client, "remember", memory=blank)
            assert "text is blank" in await error_of(
                client, "update_memory", id=missing, memory=blank
            )
        assert "tag is blank" in await error_of(client, "remember", memory="x", tags=["ok", ""])
        assert "tag is blank" in await error_of(client, "update_memory", id=missing, tags=[" "])
        assert 0 == (await call(client, "memory_stats"))["entries"]
        made = await call(client, "remember", memory="still answering")
        assert made["id"]


async def test_two_servers_on_one_file_see_each_others_writes(db):
    async with server(db) as first, server(db) as second:
        made = await call(first, "remember", memory="written by the first server")
        [found] = (await call(second, "recall", query="first"))["memories"]
        assert made["id"] == found["id"]
        await call(second, "update_memory", id=made["id"], memory="rewritten by the second")
        [again] = (await call(first, "recall", query="second"))["memories"]
        assert made["id"] == again["id"]
        await call(second, "forget_memory", id=made["id"])
        assert [] == (await call(first, "recall", query="second"))["memories"]


def _rpc(message_id: int, method: str, params: dict[str, Any]) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": message_id, "method": method, "params": params})


def test_stdout_carries_protocol_only(db):
    """Every line the server writes on stdout is a JSON-RPC message, errors included."""
    requests = [
        _rpc(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "test", "version": "1"},
            },
        ),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        _rpc(2, "tools/call", {"name": "remember", "arguments": {"memory": "x", "relevance": 7}}),
        _rpc(3, "tools/call", {"name": "recall", "arguments": {"query": 5}}),
        _rpc(4, "tools/call", {"name": "no_such_tool", "arguments": {}}),
        _rpc(5, "tools/call", {"name": "remember", "arguments": {"memory": "stored"}}),
    ]
    with subprocess.Popen(
        [str(ENTRY_POINT), "--db", str(db), "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdin is not None
        assert process.stdout is not None
        assert process.stderr is not None
        process.stdin.write("\n".join(requests) + "\n")
        process.stdin.flush()
        # Answers may come in any order; stdin stays open until all are read (at end of
        # input the server stops, cancelling what is still running).
        lines = [process.stdout.readline() for _ in range(5)]
        process.stdin.close()
        rest = process.stdout.read()
        stderr = process.stderr.read()
        assert 0 == process.wait(timeout=60), stderr
    answers = {answer["id"]: answer for answer in map(json.loads, lines)}
    assert "" == rest
    assert {1, 2, 3, 4, 5} == set(answers)
    assert [True, True, True] == [answers[n]["result"]["isError"] for n in (2, 3, 4)]
    assert answers[5]["result"]["isError"] is False
    assert "Traceback" not in stderr


def test_a_database_that_cannot_be_opened_is_one_line_on_stderr(tmp_path):
    missing = tmp_path / "no-such-directory" / "memory.db"
    done = subprocess.run(
        [str(ENTRY_POINT), "--db", str(missing), "mcp"],
        input="",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert 0 != done.returncode
    assert "" == done.stdout
    assert "Traceback" not in done.stderr
    assert str(missing.parent) in done.stderr


async def test_concurrent_calls_on_one_server(db):
    async with server(db) as client:
        made = await asyncio.gather(
            *(call(client, "remember", memory=f"parallel note {n}") for n in range(20))
        )
        found = (await call(client, "recall", query="parallel", limit=50))["memories"]
    assert {memory["id"] for memory in made} == {memory["id"] for memory in found}


async def test_a_read_only_server_recalls_and_refuses_writes(db):
    async with open_store(db) as store:
        await store.store(MemoryEntry(MemoryCategory.FACT, "served read only"))
    before = db.read_bytes()
    async with server(db, read_only=True) as client:
        [found] = (await call(client, "recall", query="served"))["memories"]
        assert "served read only" == found["memory"]
        assert "read-only" in await error_of(client, "remember", memory="refused")
        assert "read-only" in await error_of(client, "forget_memory", id=found["id"])
        assert 1 == (await call(client, "memory_stats"))["entries"]
    assert before == db.read_bytes()


async def test_recall_says_which_scopes_below_match_and_ids_reach_below(tmp_path: Path):
    db = tmp_path / "memory.db"
    alice = MemoryEntry(MemoryCategory.FACT, "refund within 30 days")
    async with open_store(db) as store:
        await store.scope("acme/support/alice").store(alice)
        await store.scope("acme/bob").store(MemoryEntry(MemoryCategory.FACT, "refund denied"))
        await store.store(MemoryEntry(MemoryCategory.FACT, "the root's own note"))
    async with server(db) as client:
        assert {"memories": [], "elsewhere": {"acme/bob": 1, "acme/support/alice": 1}} == (
            await call(client, "recall", query="refund")
        )
        assert {"memories": []} == await call(client, "recall", query="zebra")
        [found] = (await call(client, "recall", query="refund", scope="acme/support/alice"))[
            "memories"
        ]
        assert str(alice.id) == found["id"]
        updated = await call(client, "update_memory", id=str(alice.id), relevance=0.25)
        assert 0.25 == updated["relevance"]
        assert "no memory" in await error_of(
            client, "forget_memory", id=str(alice.id), scope="acme/bob"
        )
        assert {"forgotten": str(alice.id)} == await call(
            client, "forget_memory", id=str(alice.id), scope="acme"
        )
    async with server(db, scope="acme") as client:
        assert {"memories": [], "elsewhere": {"bob": 1}} == await call(
            client, "recall", query="refund"
        )


async def test_a_database_that_cannot_be_opened_is_served_and_every_call_says_why(
    tmp_path: Path,
):
    missing = tmp_path / "no-such-directory" / "memory.db"
    async with server(missing) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"remember", "recall", "memory_stats"} <= names
        said = await error_of(client, "recall", query="anything")
        assert "the memory is unavailable: cannot create" in said
        assert "no-such-directory" in said
        why = said.partition("the memory is unavailable")[2]
        assert why in await error_of(client, "remember", memory="x")
    not_a_database = tmp_path / "notes.db"
    not_a_database.write_text("these are my notes, not a database\n" * 100)
    async with server(not_a_database) as client:
        said = await error_of(client, "memory_stats")
        assert "the memory is unavailable:" in said
    async with server(tmp_path / "absent.db", read_only=True) as client:
        assert "no database at" in await error_of(client, "recall", query="x")
    assert not (tmp_path / "absent.db").exists()


def test_the_help_says_when_the_database_is_created_and_why():
    done = subprocess.run(
        [str(ENTRY_POINT), "mcp", "--help"], capture_output=True, text=True, check=True
    )
    said = " ".join(done.stdout.split())
    assert "The database is created when the server starts (unless --read-only)" in said
    assert "every tool call answers why" in said
