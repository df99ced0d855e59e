"""An MCP client of ``loopctl-memory mcp``: the memory as tools, for agents outside Python.

The script starts the server as an MCP client (a desktop or coding agent) does:
a child process speaking the Model Context Protocol over stdio, here
``python -m loopctl_memory --db PATH mcp`` (the same as ``loopctl-memory --db PATH mcp``).
Through the official ``mcp`` SDK's client it lists the tools, stores memories
with ``remember``, finds them with ``recall`` (BM25 here: the database has no
embedder), reads ``memory_stats``, and shows that a bad argument is a tool
error with a one-line message while the server goes on answering.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/mcp_client.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """The tool's structured answer; a tool error raises with its message."""
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(" ".join(str(getattr(part, "text", part)) for part in result.content))
    return result.structured_content or {}


async def main(db: str | os.PathLike[str]) -> None:
    """Start the server on ``db``, remember, recall, and read its stats."""
    # An agent's configuration names the same: a command, its arguments (`mcpServers`).
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "loopctl_memory", "--db", str(db), "mcp"]
    )
    async with Client(server) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        print("tools:", ", ".join(tools))

        made = await call(
            client, "remember", memory="CI runs make test", category="fact", tags=["ci"]
        )
        print("remembered, id", made["id"])
        await call(client, "remember", memory="Prefer Glob over manual file search")
        await call(
            client,
            "remember",
            memory="Ann wants release notes by email",
            metadata={"user": "ann"},
            key="ann/contact",
        )

        found = await call(client, "recall", query="how do I run the tests", limit=3)
        for memory in found["memories"]:
            print(f"recalled: {memory['score']:.3f} [{memory['category']}] {memory['memory']}")
        anns = await call(client, "recall", query="release notes", where={"user": "ann"})
        print("recalled for ann:", [memory["memory"] for memory in anns["memories"]])
        stats = await call(client, "memory_stats")
        counts = {name: count for name, count in stats["by_category"].items() if count}
        print(f"stats: {stats['entries']} memories, {counts}")

        try:
            await call(client, "remember", memory="too sure", relevance=2)
        except RuntimeError as error:
            print("tool error:", error)
        print("the server goes on:", (await call(client, "memory_stats"))["entries"], "memories")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
