"""A real server in the test's event loop: uvicorn on a loopback socket the test bound."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import uvicorn

from loopctl_memory import SqlMemoryStore, open_store
from loopctl_memory.web.app import build_app

TOKEN = "a-test-token-of-some-length"  # noqa: S105 - the tests' own


@dataclass
class Served:
    """A running server: its store, its base URL, and a client of it."""

    store: SqlMemoryStore
    url: str
    port: int
    client: httpx2.AsyncClient


@contextlib.asynccontextmanager
async def serving(
    store: SqlMemoryStore, *, host: str = "127.0.0.1", **options: Any
) -> AsyncIterator[Served]:
    """Serve ``store`` on a loopback port until the block ends."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", 0))
    port = listening.getsockname()[1]
    app = build_app(store, host=host, port=port, **options)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(server.serve(sockets=[listening]))
    while not server.started:
        await asyncio.sleep(0.01)
        if task.done():
            task.result()
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx2.AsyncClient(base_url=url) as client:
            yield Served(store, url, port, client)
    finally:
        server.should_exit = True
        await task
        listening.close()


ServeFactory = Callable[..., contextlib.AbstractAsyncContextManager[Served]]


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SqlMemoryStore]:
    async with open_store(tmp_path / "memory.db", track_access=True) as opened:
        yield opened


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """Note on the test whether its call failed (the browser test keeps a screenshot then)."""
    report = yield
    if report.when == "call":
        item.failed_call = report.failed  # type: ignore[attr-defined]
    return report
