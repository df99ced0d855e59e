"""What every request to ``loopctl-memory serve`` passes first: who may ask, and how much.

One ASGI middleware in front of the whole application (the JSON API, the
console and MCP at ``/mcp`` alike), so that no route can forget a check:

- **Host**: on a loopback address only ``127.0.0.1``, ``localhost`` and
  ``[::1]`` at the server's port are served, so that a web page whose name was
  pointed at this machine (DNS rebinding) is refused.
- **Origin**: a request a browser sends from another origin is refused
  (``Origin`` not this server's own, or ``Sec-Fetch-Site: cross-site``), whatever
  its method: another site's page can neither change nor read the memory.
- **Token**: with one, every request but the console's page shell and its
  assets (which hold no memory) carries ``Authorization: Bearer <token>``,
  compared in constant time. A token is never read from a URL or a cookie,
  so a link or another site's form cannot carry it.
- **Sizes**: a query string past :data:`MAX_QUERY` bytes is refused (414), a
  body past the server's limit too (413), before the application reads it.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Collection
from dataclasses import dataclass

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

MAX_QUERY = 8_192
"""Bytes of a query string: a search query and its filters fit many times over."""

MAX_BODY = 1_048_576
"""Bytes of a request body by default: a memory, an update or an MCP call."""

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
"""The names a loopback server answers to."""

_NO_BODY = frozenset(("GET", "HEAD", "OPTIONS"))


@dataclass(frozen=True, slots=True)
class Rules:
    """What the guard checks.

    ``hosts``: the Host headers served (None: any, for a server bound beyond
    loopback, where the token guards it); ``token``: the bearer token every
    request must carry (None: none, loopback only); ``open_paths``: the paths
    served without a token (the page shell and its assets); ``max_body``:
    bytes of a request body.
    """

    hosts: frozenset[str] | None
    token: str | None
    open_paths: Collection[str] = ()
    open_prefixes: tuple[str, ...] = ()
    max_body: int = MAX_BODY


def loopback_hosts(port: int) -> frozenset[str]:
    """The Host headers a loopback server at ``port`` answers."""
    return frozenset(f"{name}:{port}" for name in LOOPBACK_NAMES)


class Guard:
    """The ASGI middleware that applies :class:`Rules` to every HTTP request."""

    def __init__(self, app: ASGIApp, rules: Rules) -> None:
        self.app = app
        self.rules = rules
        self._expected = None if rules.token is None else f"Bearer {rules.token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse the request with one JSON line, or pass it (and its checked body) on."""
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websockets are served
            await _refuse(send, 404, "not found")
            return
        refusal = self._refusal(scope)
        if refusal is not None:
            status, message = refusal
            await _refuse(send, status, message, bearer=status == 401)
            return
        if scope["method"] in _NO_BODY:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive, self.rules.max_body)
        if body is None:
            await _refuse(
                send, 413, f"the request body is larger than {self.rules.max_body:,} bytes"
            )
            return
        await self.app(scope, _replay(body, receive), send)

    def _refusal(self, scope: Scope) -> tuple[int, str] | None:
        headers = Headers(scope=scope)
        host = headers.get("host", "")
        if self.rules.hosts is not None and host not in self.rules.hosts:
            return 421, f"this server does not answer to the host {host!r}"
        if len(scope.get("query_string", b"")) > MAX_QUERY:
            return 414, f"the query string is longer than {MAX_QUERY:,} bytes"
        origin = headers.get("origin")
        scheme = scope.get("scheme", "http")
        if (origin is not None and origin != f"{scheme}://{host}") or headers.get(
            "sec-fetch-site"
        ) == "cross-site":
            return 403, "requests from another origin are refused"
        if self._expected is not None and not self._is_open(scope["path"]):
            given = headers.get("authorization", "").encode()
            if not hmac.compare_digest(given, self._expected):
                return 401, "this server needs its token: Authorization: Bearer <token>"
        return None

    def _is_open(self, path: str) -> bool:
        return path in self.rules.open_paths or path.startswith(self.rules.open_prefixes)


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The whole request body, or None once it passes ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the client sends next."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def _refuse(send: Send, status: int, message: str, *, bearer: bool = False) -> None:
    body = json.dumps({"error": message}).encode()
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    if bearer:
        headers.append((b"www-authenticate", b'Bearer realm="loopctl-memory"'))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
