"""Fixtures for the MCP server: a database path, a connected client, and its answers."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from mcp import Client, StdioServerParameters

ENTRY_POINT = Path(sys.executable).parent / "loopctl-memory"


@asynccontextmanager
async def server(
    db: Path,
    *options: str,
    scope: str | None = None,
    read_only: bool = False,
    ranking: str | None = None,
    env: dict[str, str] | None = None,
) -> AsyncIterator[Client]:
    """A connected client of `loopctl-memory --db DB [--scope S] [--read-only] [--ranking R]
    mcp OPTIONS` (the client passes the server a small environment: no LOOPCTL_MEMORY_*)."""
    given = (["--scope", scope] if scope else []) + (["--read-only"] if read_only else [])
    given += ["--ranking", ranking] if ranking else []
    parameters = StdioServerParameters(
        command=str(ENTRY_POINT), args=["--db", str(db), *given, "mcp", *options], env=env
    )
    async with Client(parameters) as client:
        yield client


async def call(client: Client, tool: str, **arguments: Any) -> Any:
    """The tool's structured answer; fails the test on a tool error."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def error_of(client: Client, tool: str, **arguments: Any) -> str:
    """The one-line message of a call that must fail."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    [content] = result.content
    text = str(getattr(content, "text", ""))
    assert "\n" not in text
    assert "Traceback" not in text
    return text


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "memory.db"
