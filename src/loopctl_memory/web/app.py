"""The served application: MCP over streamable HTTP, the JSON API and the console, one guard.

:func:`build_app` assembles them over one store; :func:`serve` runs it with
uvicorn until interrupted. Which addresses may serve without a token, and what
every request must show, is :mod:`~loopctl_memory.web.guard`.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import uvicorn
from starlette.applications import Starlette
from starlette.types import ASGIApp

from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.mcp_server.tools import build_server, start_upkeep, sweep_now_and_then
from loopctl_memory.protocol import Embedder
from loopctl_memory.sql.opening import RECORDED, OpenOptions, open_store
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.web import api, console
from loopctl_memory.web.guard import MAX_BODY, Guard, Rules, loopback_hosts

MIN_TOKEN = 16
"""Characters a token has at least: a guessable one guards nothing."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) is reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_token(host: str, token: str | None) -> str | None:
    """The token a server on ``host`` needs, checked.

    Raises:
        InvalidArgumentError: a server beyond loopback without a token, or a
            token shorter than :data:`MIN_TOKEN` characters or with whitespace.

    """
    if token is None:
        if not is_loopback(host):
            raise InvalidArgumentError(
                f"serving on {host} (beyond this machine) needs a token: give --token or"
                " LOOPCTL_MEMORY_TOKEN, and every client then sends Authorization: Bearer <token>"
            )
        return None
    if len(token) < MIN_TOKEN or any(character.isspace() for character in token):
        raise InvalidArgumentError(
            f"a token has at least {MIN_TOKEN} characters and no whitespace"
            " (`python -c 'import secrets; print(secrets.token_urlsafe())'` makes one)"
        )
    return token


def build_app(
    store: SqlMemoryStore,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    ranking: str | None = None,
    max_body: int = MAX_BODY,
) -> ASGIApp:
    """The application over ``store`` (its scope bounds every route and tool).

    ``host`` and ``port``: where it is served (a loopback host answers only
    to loopback names); ``token``: what every request must carry (needed
    beyond loopback); ``ranking``: what MCP ``recall`` ranks by when a call
    names none; ``max_body``: bytes of a request body.

    Raises:
        InvalidArgumentError: as :func:`check_token`.

    """
    token = check_token(host, token)
    mcp = build_server(store, ranking=ranking).streamable_http_app(
        streamable_http_path="/mcp", host=host, max_request_body_size=max_body
    )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with mcp.router.lifespan_context(app):
            yield

    app = Starlette(
        routes=[*api.routes(store, ranking), *console.routes(), *mcp.routes], lifespan=lifespan
    )
    rules = Rules(
        hosts=loopback_hosts(port) if is_loopback(host) else None,
        token=token,
        open_paths=console.OPEN_PATHS,
        open_prefixes=(console.ASSETS,),
        max_body=max_body,
    )
    return Guard(app, rules)


async def serve(
    target: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    token: str | None = None,
    scope: str | None = None,
    read_only: bool = False,
    ranking: str | None = None,
    embedder: Embedder | str | None = RECORDED,
    busy_timeout: float | None = None,
    ready: Callable[[str], object] | None = None,
) -> None:
    """Open the store at ``target`` and serve it over HTTP on ``host``:``port`` until stopped.

    As the stdio server (:func:`loopctl_memory.mcp_server.tools.serve`): a new
    database is created, an existing one never migrated; ``read_only`` serves
    every read and refuses every write. ``ready(url)`` is called once the
    server listens.

    Raises:
        InvalidArgumentError: as :func:`check_token` (before anything is opened).
        LoopMemoryError: the store could not be opened.

    """
    token = check_token(host, token)
    options = OpenOptions(
        migrate=False if read_only else "create",
        track_access=not read_only,
        read_only=read_only,
        embedder=embedder,
    )
    if busy_timeout is not None:
        options["busy_timeout"] = busy_timeout
    async with open_store(target, **options) as store:
        view = store if scope is None else store.scope(scope)
        app = build_app(view, host=host, port=port, token=token, ranking=ranking)
        config = uvicorn.Config(
            app, host=host, port=port, log_level="warning", access_log=False, lifespan="on"
        )
        server = uvicorn.Server(config)
        upkeep = asyncio.create_task(start_upkeep(store))
        sweeping = None if read_only else asyncio.create_task(sweep_now_and_then(view))
        announce = asyncio.create_task(_announce(server, host, port, ready))
        try:
            await server.serve()
        finally:
            for task in (upkeep, sweeping, announce):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task


async def _announce(
    server: uvicorn.Server, host: str, port: int, ready: Callable[[str], object] | None
) -> None:
    while not server.started:  # noqa: ASYNC110 - uvicorn says it only by this flag
        await asyncio.sleep(0.05)
    if ready is not None:
        shown = f"[{host}]" if ":" in host else host
        ready(f"http://{shown}:{port}/")
