"""Many agents on one served memory: MCP over streamable HTTP, under load.

A ``loopctl-memory serve`` process (with a token) on a new SQLite file; ``--clients``
MCP clients at once (each its own session through the SDK's streamable HTTP
client, in this process), each making ``--calls`` calls in its own scope:
``remember`` and ``recall`` taking turns. Every call is timed from the
client's side; an error of any kind is counted. At the end each scope must
hold exactly what its client remembered, and each ``recall`` must have
returned only its own scope's memories.

The section is written between its markers in ``benchmarks/RESULTS.md``.

    .venv/bin/python -m benchmarks.serve_bench [--clients 50] [--calls 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
from mcp.client.streamable_http import streamable_http_client

from benchmarks.lifecycle_bench import percentile, write_section
from benchmarks.provenance import machine
from loopctl_memory import open_store
from mcp import ClientSession

BEGIN, END = "<!-- serve: begin -->", "<!-- serve: end -->"


def _log(message: str) -> None:
    print(f"[serve] {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def served(db: Path, token: str | None = None) -> Iterator[str]:
    """``loopctl-memory serve`` on ``db`` in a process of its own, its base URL, until the end.

    ``token``: given to it as ``LOOPCTL_MEMORY_TOKEN`` (None: none).
    """
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    environment = dict(os.environ)
    environment.pop("LOOPCTL_MEMORY_TOKEN", None)
    if token is not None:
        environment["LOOPCTL_MEMORY_TOKEN"] = token
    server = subprocess.Popen(
        [sys.executable, "-m", "loopctl_memory", "--db", str(db), "serve", "--port", str(port)],
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None  # piped above
        print(f"[serve] {server.stderr.readline().strip()}", file=sys.stderr, flush=True)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.communicate(timeout=60)


class Tally:
    """What the clients saw: each call's time by tool, the errors, the scopes seen."""

    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {"remember": [], "recall": []}
        self.errors: list[str] = []
        self.strays = 0  # recalled memories of another client's scope


async def agent(url: str, token: str, number: int, calls: int, tally: Tally) -> None:
    """One client: ``calls`` calls in scope ``agent-<number>``, remember and recall in turn."""
    scope = f"agent-{number}"
    headers = {"authorization": f"Bearer {token}"}
    try:
        async with (
            httpx2.AsyncClient(headers=headers, timeout=120) as http,
            streamable_http_client(url, http_client=http) as streams,
            ClientSession(streams[0], streams[1]) as session,
        ):
            await session.initialize()
            for call in range(calls):
                if call % 2 == 0:
                    tool = "remember"
                    arguments: dict[str, object] = {
                        "memory": f"agent {number} learned lesson {call} about deploys",
                        "category": "fact",
                        "scope": scope,
                    }
                else:
                    tool = "recall"
                    arguments = {"query": f"lesson {call - 1} deploys", "scope": scope}
                started = time.perf_counter()
                result = await session.call_tool(tool, arguments)
                tally.ms[tool].append((time.perf_counter() - started) * 1_000)
                if result.is_error:
                    tally.errors.append(f"{scope} {tool}: {result.content}")
                elif tool == "recall":
                    found = (result.structured_content or {}).get("memories", [])
                    tally.strays += sum(
                        1 for memory in found if not memory["memory"].startswith(f"agent {number} ")
                    )
    except Exception as exc:
        tally.errors.append(f"{scope}: {type(exc).__name__}: {exc}")


async def load(url: str, token: str, clients: int, calls: int) -> tuple[Tally, float]:
    """Run the clients at once against the server at ``url``; the tally and the seconds."""
    tally = Tally()
    started = time.perf_counter()
    await asyncio.gather(*(agent(url, token, number, calls, tally) for number in range(clients)))
    return tally, time.perf_counter() - started


async def scope_counts(db: Path) -> dict[str, int]:
    """How many memories each scope of ``db`` holds."""
    async with open_store(db, read_only=True) as store:
        return dict(await store.scopes())


def run(db: Path, clients: int, calls: int) -> tuple[Tally, float, dict[str, int]]:
    """Serve ``db`` from a process of its own, load it; the tally, seconds, each scope's count."""
    token = secrets.token_urlsafe()
    with served(db, token) as url:
        tally, elapsed = asyncio.run(load(f"{url}/mcp", token, clients, calls))
    return tally, elapsed, asyncio.run(scope_counts(db))


def section(tally: Tally, elapsed: float, counts: dict[str, int], clients: int, calls: int) -> str:
    """The results as a markdown section."""
    expected = {f"agent-{number}": (calls + 1) // 2 for number in range(clients)}
    exact = all(counts.get(scope) == count for scope, count in expected.items())
    rows = []
    for tool, times in tally.ms.items():
        rows.append(
            f"| {tool} | {len(times):,} | {statistics.median(times):.1f} |"
            f" {percentile(times, 95):.1f} | {percentile(times, 99):.1f} | {max(times):.1f} |"
        )
    every = [value for times in tally.ms.values() for value in times]
    return "\n".join(
        [
            BEGIN,
            "## Many agents on one served memory: MCP over streamable HTTP",
            "",
            f"{clients} MCP clients at once, {calls:,} calls each (remember and recall in turn,"
            " each client in its own scope), against one `loopctl-memory serve` process with a"
            " token, on a new SQLite file.",
            "",
            "| tool | calls | p50 ms | p95 ms | p99 ms | max ms |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
            *rows,
            "",
            f"- All calls: {len(every):,} in {elapsed:.1f} s ({len(every) / elapsed:,.0f} calls/s),"
            f" p95 {percentile(every, 95):.1f} ms.",
            f"- Errors: {len(tally.errors)}. Memories recalled from another client's scope:"
            f" {tally.strays}. Each scope holds exactly what its client remembered:"
            f" {'yes' if exact else 'NO'} ({sum(counts.values()):,} memories in"
            f" {len(counts)} scopes).",
            f"- Command: `python -m benchmarks.serve_bench --clients {clients} --calls {calls}`",
            f"- Machine: {machine()}; {dt.date.today().isoformat()}.",
            END,
        ]
    )


def main() -> None:
    """Run the load and print (and write) its section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.serve_bench")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="loopctl-serve-") as scratch:
        tally, elapsed, counts = run(Path(scratch) / "memory.db", args.clients, args.calls)
    text = section(tally, elapsed, counts, args.clients, args.calls)
    print(text)
    for error in tally.errors[:10]:
        _log(error)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
