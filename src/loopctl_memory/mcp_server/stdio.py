"""The stdio transport of the MCP server: JSON-RPC over stdin and stdout pipes, on the event loop.

The one place that reaches past the MCP SDK's public API, twice: it runs the
SDK's private ``MCPServer._lowlevel_server`` itself, and it hands the SDK's
``stdio_server`` streams that are not the ``anyio.AsyncFile`` it declares,
relying on it only iterating stdin's lines and calling ``write`` and ``flush``
on stdout. Where the private name is missing (a later SDK) or stdin and stdout
are not pipes, the server runs on the SDK's public ``run_stdio_async()``.
stdout's flow control is asyncio's ``streams.FlowControlMixin``, which asyncio
does not export either.
"""

from __future__ import annotations

import asyncio
import os
import stat
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, cast

from mcp.server.stdio import stdio_server

if TYPE_CHECKING:
    import anyio
    from mcp.server.lowlevel import Server
    from mcp.server.mcpserver import MCPServer


async def serve_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout until the client hangs up.

    The SDK's own stdio transport reads and writes each message through a
    worker thread, three thread hops a call; where stdin and stdout are pipes
    (as an MCP client starts a server), they are read and written on the event
    loop instead, which spares every call those hops.
    """
    # Private to the SDK: None where a release renamed it, and then the public path.
    lowlevel: Server[Any] | None = getattr(server, "_lowlevel_server", None)
    async with _pipes() as streams:
        if streams is None or lowlevel is None:
            await server.run_stdio_async()
            return
        lines, writer = streams
        # Duck-typed: stdio_server only iterates stdin and writes and flushes stdout.
        stdin = cast("anyio.AsyncFile[str]", lines)
        stdout = cast("anyio.AsyncFile[str]", writer)
        async with stdio_server(stdin, stdout) as (read_stream, write_stream):
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


class _PipeLines:
    """stdin as the SDK's stdio transport reads it: an async iterator of text lines."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _PipeWriter:
    """stdout as the SDK's stdio transport writes it, with flow control."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))
        await self._writer.drain()

    async def flush(self) -> None:
        return None


@asynccontextmanager
async def _pipes() -> AsyncIterator[tuple[_PipeLines, _PipeWriter] | None]:
    """Stdin and stdout as event-loop pipes, or None where they are not pipes.

    While serving, file descriptor 1 points at stderr, so that stray output of
    any library lands there rather than in the protocol (as the SDK does).
    """
    if not (stat.S_ISFIFO(os.fstat(0).st_mode) and stat.S_ISFIFO(os.fstat(1).st_mode)):
        yield None
        return
    loop = asyncio.get_running_loop()
    saved_stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        reader = asyncio.StreamReader(limit=_LINE_LIMIT, loop=loop)
        # The transports own (and close) these duplicates of the wire's ends.
        reading, _ = await loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader, loop=loop),
            os.fdopen(os.dup(0), "rb", buffering=0),
        )
        writing, protocol = await loop.connect_write_pipe(
            lambda: asyncio.streams.FlowControlMixin(loop=loop),
            os.fdopen(os.dup(saved_stdout), "wb", buffering=0),
        )
        try:
            yield (
                _PipeLines(reader),
                _PipeWriter(asyncio.StreamWriter(writing, protocol, None, loop)),
            )
        finally:
            reading.close()
            writing.close()
    finally:
        os.dup2(saved_stdout, 1)
        os.close(saved_stdout)


_LINE_LIMIT = 1 << 30
"""The longest message line read from stdin (a memory is not bounded in length)."""
