"""The JSON API the console reads and writes: one route a store call, its errors as HTTP.

Every route works in the server's scope or a scope below it (``scope=``,
relative, never above); no argument names a file. The routes and their
arguments are described by :data:`OPENAPI` (served at ``/api/openapi.json``).
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.errors import (
    InvalidEntryError,
    LoopMemoryError,
    ReadOnlyStoreError,
)
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.rankings import Explanation, best_ranking
from loopctl_memory.scopes import relative
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.when import moment

MAX_LIMIT = 100
"""The most memories one page or search returns."""

Handler = Callable[[Request], Awaitable[Response]]


class _BadRequestError(Exception):
    """A request the API cannot read: answered 400 with its message."""


def routes(store: SqlMemoryStore, ranking: str | None = None) -> list[Route]:
    """The API's routes over ``store`` (the server's view: its scope bounds every route).

    ``ranking``: what a search ranks by when it names none (None: the best the
    store has, ``hybrid`` with an embedder, else ``bm25``).
    """
    api = _Api(store, ranking)
    return [
        Route("/api/info", api.guarded(api.info), methods=["GET"]),
        Route("/api/scopes", api.guarded(api.scopes), methods=["GET"]),
        Route("/api/memories", api.guarded(api.memories), methods=["GET"]),
        Route("/api/memories/{id}", api.guarded(api.memory), methods=["GET"]),
        Route("/api/memories/{id}", api.guarded(api.update), methods=["PATCH"]),
        Route("/api/memories/{id}", api.guarded(api.delete), methods=["DELETE"]),
        Route("/api/history", api.guarded(api.history), methods=["GET"]),
        Route("/api/stats", api.guarded(api.stats), methods=["GET"]),
        Route("/api/forget", api.guarded(api.forget_preview), methods=["GET"]),
        Route("/api/forget", api.guarded(api.forget), methods=["POST"]),
        Route("/api/consolidate", api.guarded(api.consolidate_preview), methods=["GET"]),
        Route("/api/consolidate", api.guarded(api.consolidate), methods=["POST"]),
        Route("/api/openapi.json", api.openapi, methods=["GET"]),
    ]


class _Api:
    def __init__(self, store: SqlMemoryStore, ranking: str | None) -> None:
        self.store = store
        self.ranking = ranking or best_ranking(has_embedder=store.embedder is not None)

    def guarded(self, handler: Handler) -> Handler:
        """``handler``, its errors answered as HTTP: 400 bad input, 403 read-only, 503 storage."""

        async def answer(request: Request) -> Response:
            try:
                return await handler(request)
            except (_BadRequestError, InvalidEntryError) as exc:
                return _error(400, str(exc))
            except ReadOnlyStoreError as exc:
                return _error(403, str(exc))
            except LoopMemoryError as exc:  # the store closed, the database refused
                return _error(503, str(exc))

        return answer

    def _view(self, request: Request, *, below: bool = False) -> SqlMemoryStore:
        """The server's store narrowed to the request's ``scope`` (and with ``descendants``)."""
        name = request.query_params.get("scope", "")
        view = self.store.scope(name) if name else self.store
        if below or _flag(request, "descendants"):
            view = view.with_descendants()
        return view

    async def info(self, request: Request) -> Response:
        del request
        store = self.store
        return JSONResponse(
            {
                "scope": store.scope_name,
                "read_only": store.read_only,
                "ranking": self.ranking,
                "embedder": None if store.embedder is None else store.embedder.name,
                "max_limit": MAX_LIMIT,
            }
        )

    async def scopes(self, request: Request) -> Response:
        base = self.store.scope_name
        found = await self._view(request).scopes()
        return JSONResponse(
            [{"scope": relative(base, name), "memories": count} for name, count in found]
        )

    async def memories(self, request: Request) -> Response:
        view = self._view(request)
        limit = _int(request, "limit", 20, 1, MAX_LIMIT)
        passes = _filter(request)
        query = request.query_params.get("q", "").strip()
        base = view.scope_name
        if not query:
            page, after = await view.newest_page(
                limit, filter=passes, before=request.query_params.get("before")
            )
            return JSONResponse(
                {"memories": [_shown(entry, scope) for scope, entry in page], "next": after}
            )
        ranking = request.query_params.get("ranking") or self.ranking
        explained = await view.retrieve_explained(query, limit, ranking=ranking, filter=passes)
        where = await view.scopes_of(entry.id for entry, _ in explained)
        return JSONResponse(
            {
                "ranking": ranking,
                "memories": [
                    {
                        **_shown(entry, where.get(entry.id, "")),
                        "score": parts.score,
                        "parts": _parts(parts),
                    }
                    for entry, parts in explained
                ],
                "scope": base,
            }
        )

    async def memory(self, request: Request) -> Response:
        view = self._view(request, below=True)
        entry_id = _id(request)
        entry = await view.get(entry_id)
        events = await view.history(entry_id)
        if entry is None and not events:
            return _error(404, f"no memory with id {entry_id}")
        scope = (await view.scopes_of([entry_id])).get(entry_id, "") if entry else None
        return JSONResponse(
            {
                "memory": None if entry is None else _shown(entry, scope or ""),
                "history": [event.to_dict() for event in events],
            }
        )

    async def update(self, request: Request) -> Response:
        view = self._view(request, below=True)
        entry_id = _id(request)
        changes = await _json_object(request)
        allowed = {"memory", "category", "tags", "relevance", "validated", "metadata"}
        unknown = sorted(set(changes) - allowed)
        if unknown:
            changed = ", ".join(sorted(allowed))
            raise _BadRequestError(
                f"unknown field {', '.join(unknown)}: an update changes {changed}"
            )
        if not changes:
            raise _BadRequestError("nothing to change: give at least one field")
        updated = await view.update(entry_id, **changes)
        if updated is None:
            return _error(404, f"no memory with id {entry_id}")
        return JSONResponse({"memory": _shown(updated, "")})

    async def delete(self, request: Request) -> Response:
        view = self._view(request, below=True)
        entry_id = _id(request)
        if not await view.delete(entry_id):
            return _error(404, f"no memory with id {entry_id}")
        return JSONResponse({"deleted": str(entry_id)})

    async def history(self, request: Request) -> Response:
        view = self._view(request)
        since = request.query_params.get("since")
        kinds = request.query_params.getlist("event") or None
        events = await view.history(
            since=None if not since else moment(since),
            events=kinds,
            limit=_int(request, "limit", 50, 1, 1_000),
            newest_first=True,
        )
        return JSONResponse({"events": [event.to_dict() for event in events]})

    async def stats(self, request: Request) -> Response:
        view = self._view(request)
        summary = await view.summary()
        days = await view.created_per_day()
        return JSONResponse(
            {
                "memories": summary.entries,
                "created_per_day": [[day.isoformat(), number] for day, number in days],
                "by_category": {str(name): count for name, count in summary.by_category.items()},
                "relevance_histogram": summary.relevance_histogram,
            }
        )

    async def forget_preview(self, request: Request) -> Response:
        """How many memories the filter would forget, and the newest of them."""
        view, passes = self._view(request), _required_filter(request)
        sample: list[dict[str, Any]] = []
        async for scope, entry in view.iter_scoped_entries(
            batch_size=_SAMPLE, filter=passes, newest_first=True
        ):
            sample.append(_shown(entry, scope))
            if len(sample) == _SAMPLE:
                break
        return JSONResponse({"count": await view.count(filter=passes), "sample": sample})

    async def forget(self, request: Request) -> Response:
        """Forget what the filter passes, if it still counts what the person confirmed."""
        view, passes = self._view(request), _required_filter(request)
        expected = _int(request, "confirm", -1, 0, 2**62)
        if expected < 0:
            raise _BadRequestError("confirm=N: the count the preview showed is needed")
        counted = await view.count(filter=passes)
        if counted != expected:
            return _error(
                409, f"the filter now passes {counted} memories, not {expected}: preview again"
            )
        return JSONResponse({"forgotten": await view.forget(filter=passes)})

    async def consolidate_preview(self, request: Request) -> Response:
        """What a consolidation would merge and prune, and why."""
        preview = await self._view(request).preview_consolidation(_pass(request))
        return JSONResponse(
            {
                "stats": dataclasses.asdict(preview.stats),
                "merged": [
                    {"memory": _shown(entry, ""), "into": _shown(into, "")}
                    for entry, into in preview.merged
                ],
                "pruned": [
                    {"memory": _shown(entry, ""), "why": why} for entry, why in preview.pruned
                ],
            }
        )

    async def consolidate(self, request: Request) -> Response:
        stats = await self._view(request).consolidate(_pass(request))
        return JSONResponse({"stats": dataclasses.asdict(stats)})

    async def openapi(self, request: Request) -> Response:
        del request
        return JSONResponse(OPENAPI)


def _shown(entry: MemoryEntry, scope: str) -> dict[str, Any]:
    """A memory as the API shows it: its fields, and its scope relative to the view's."""
    return entry_to_dict(entry, scope) | {"scope": scope}


def _parts(parts: Explanation) -> dict[str, float]:
    """The parts of a score that its ranking has (see :class:`Explanation`)."""
    given = dataclasses.asdict(parts)
    return {name: value for name, value in given.items() if value is not None and name != "score"}


_SAMPLE = 20  # the memories a forget preview shows


def _pass(request: Request) -> ConsolidationConfig | None:
    """The full pass with ``full=1``; the store's own (by default 0.1.0's prune) without."""
    return ConsolidationConfig.full() if _flag(request, "full") else None


def _required_filter(request: Request) -> MemoryFilter:
    passes = _filter(request)
    if passes is None:
        raise _BadRequestError(
            "give a filter (category, tag, since, until, meta): forgetting everything is"
            " not done from here"
        )
    return passes


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _id(request: Request) -> uuid.UUID:
    text = request.path_params["id"]
    try:
        return uuid.UUID(text)
    except ValueError:
        raise _BadRequestError(f"an id is a UUID, not {text!r}") from None


def _flag(request: Request, name: str) -> bool:
    return request.query_params.get(name, "").lower() in ("1", "true", "yes")


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    text = request.query_params.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise _BadRequestError(f"{name} must be a whole number, not {text!r}") from None
    if not low <= value <= high:
        raise _BadRequestError(f"{name} must be from {low} to {high}, not {value}")
    return value


def _filter(request: Request) -> MemoryFilter | None:
    """The filter the query string gives: category, tag (each repeatable), since, until, meta."""
    params = request.query_params
    meta = params.get("meta")
    metadata = None
    if meta:
        try:
            metadata = json.loads(meta)
        except ValueError:
            raise _BadRequestError("meta must be a JSON object of metadata conditions") from None
    since, until = params.get("since"), params.get("until")
    passes = MemoryFilter(
        categories=params.getlist("category") or None,
        tags_any=params.getlist("tag") or None,
        created_after=_moment(since),
        created_before=_moment(until),
        metadata=metadata,
    )
    return None if passes.is_empty else passes


def _moment(text: str | None) -> datetime | None:
    return None if not text else moment(text)


async def _json_object(request: Request) -> dict[str, Any]:
    try:
        given = json.loads(await request.body())
    except ValueError:
        raise _BadRequestError("the body must be a JSON object") from None
    if not isinstance(given, dict):
        raise _BadRequestError("the body must be a JSON object")
    return given


OPENAPI: dict[str, Any] = {
    "openapi": "3.1.0",
    "info": {"title": "loopctl-memory", "version": "1"},
    "components": {
        "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
    },
    "security": [{"token": []}],
    "paths": {
        "/api/info": {"get": {"summary": "The server's scope, mode and default ranking."}},
        "/api/scopes": {"get": {"summary": "The scopes at and below the server's, with counts."}},
        "/api/memories": {
            "get": {
                "summary": "Search (q) or list the newest memories, filtered.",
                "parameters": [
                    {"name": name, "in": "query", "schema": {"type": kind}}
                    for name, kind in (
                        ("q", "string"),
                        ("ranking", "string"),
                        ("scope", "string"),
                        ("descendants", "boolean"),
                        ("category", "string"),
                        ("tag", "string"),
                        ("since", "string"),
                        ("until", "string"),
                        ("meta", "string"),
                        ("limit", "integer"),
                        ("before", "string"),
                    )
                ],
            }
        },
        "/api/memories/{id}": {
            "get": {"summary": "A memory's fields and its history (a removed one's history)."},
            "patch": {"summary": "Change memory, category, tags, relevance, validated, metadata."},
            "delete": {"summary": "Delete the memory."},
        },
        "/api/history": {"get": {"summary": "The newest events (since, event, limit)."}},
        "/api/stats": {
            "get": {"summary": "Counts by category and by day created, a relevance histogram."}
        },
        "/api/forget": {
            "get": {"summary": "How many memories a filter would forget, and the newest."},
            "post": {"summary": "Forget them: confirm=N, the count the preview showed."},
        },
        "/api/consolidate": {
            "get": {"summary": "What a pass (full=1: the full one) would merge and prune, why."},
            "post": {"summary": "Run the pass."},
        },
    },
}
