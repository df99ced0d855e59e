"""The console's page shell and assets: no build step, no memory in them.

The page is one HTML shell and a small script that reads and writes through
the JSON API (:mod:`~loopctl_memory.web.api`), sending the token a person
typed (kept in the tab's session storage) as ``Authorization: Bearer``. The
shell and its assets hold no memory, so they are served without a token; the
assets are read from the package by fixed names, never from a path a client sends.
"""

from __future__ import annotations

from importlib import resources

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route

ASSETS = "/assets/"
"""Where the script and the style sheet are served."""

OPEN_PATHS = frozenset(("/", "/favicon.ico"))
"""The paths served without a token (with everything under :data:`ASSETS`)."""

_FILES = {"console.js": "text/javascript", "console.css": "text/css"}
_SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self';"
        " frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
    ),
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
}


def _asset(name: str) -> bytes:
    return (resources.files("loopctl_memory.web") / "assets" / name).read_bytes()


async def page(request: Request) -> Response:
    """The console's HTML shell."""
    del request
    return Response(_asset("console.html"), media_type="text/html", headers=_SECURITY_HEADERS)


async def asset(request: Request) -> Response:
    """One of the console's fixed assets, by name."""
    name = request.path_params["name"]
    if name not in _FILES:
        return PlainTextResponse("not found", status_code=404)
    return Response(_asset(name), media_type=_FILES[name], headers=_SECURITY_HEADERS)


async def no_icon(request: Request) -> Response:
    """No icon: an empty answer, so that a browser asks no more."""
    del request
    return Response(status_code=204)


def routes() -> list[Route]:
    """The console's routes."""
    return [
        Route("/", page, methods=["GET"]),
        Route(ASSETS + "{name}", asset, methods=["GET"]),
        Route("/favicon.ico", no_icon, methods=["GET"]),
    ]
