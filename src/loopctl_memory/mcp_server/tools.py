"""The memory as Model Context Protocol tools, served over stdio (``loopctl-memory mcp``).

An agent that is not a Python process reaches the store through six tools:
``remember``, ``recall``, ``update_memory``, ``forget_memory``, ``consolidate``
and ``memory_stats``. Each takes an optional ``scope``, relative to the
server's own: a client can narrow the server's scope, never leave it (scope
names are plain segments below the server's, see :mod:`loopctl_memory.scopes`).

Bad arguments come back as tool errors carrying the library's one-line
message; the server answers the next call as before. Only protocol goes to
stdout; the SDK's logs go to stderr. The transport is :mod:`loopctl_memory.mcp_server.stdio`.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import Field

from loopctl_memory.arguments import blank_typed
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.errors import LoopMemoryError
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.mcp_server.answers import (
    Consolidated,
    Forgotten,
    Memory,
    Recalled,
    Remembered,
    Stats,
    memory_of,
    recollection_of,
)
from loopctl_memory.mcp_server.stdio import serve_stdio
from loopctl_memory.protocol import Embedder
from loopctl_memory.rankings import LEXICAL_RANKINGS, RANKINGS, best_ranking, check_ranking
from loopctl_memory.scopes import relative
from loopctl_memory.sql.opening import RECORDED, OpenOptions, open_store
from loopctl_memory.sql.store.memory_store import SqlMemoryStore
from loopctl_memory.when import age, moment

F = TypeVar("F", bound=Callable[..., Any])

_log = logging.getLogger(__name__)

RECALL_LIMIT = 50
"""The most memories one ``recall`` returns: a model's context is the budget."""

_CATEGORIES = [category.value for category in MemoryCategory]

# The schemas tell a model the valid values; the library checks them, so that a bad
# value comes back with the library's one-line message rather than a validation dump.
Category = Annotated[
    str, Field(description="The kind of memory.", json_schema_extra={"enum": _CATEGORIES})
]
Relevance = Annotated[
    float,
    Field(
        description="How much the memory matters, from 0 to 1.",
        json_schema_extra={"minimum": 0.0, "maximum": 1.0},
    ),
]
Scope = Annotated[
    str | None,
    Field(
        description="A scope below the server's, as 'team/agent-7' (default: the server's scope)."
    ),
]
EntryId = Annotated[str, Field(description="The memory's id, as `remember` or `recall` gave it.")]


def _changes(
    memory: str | None,
    category: str | None,
    tags: list[str] | None,
    relevance: float | None,
    validated: bool | None,
) -> dict[str, Any]:
    """``update_memory``'s changes: the fields given (at least one), none of them blank."""
    _refuse_blank(memory, tags)
    given = {"memory": memory, "tags": tags, "relevance": relevance, "validated": validated}
    changes: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    if category is not None:
        changes["category"] = _category(category)
    if not changes:
        raise ToolError("nothing to change: give memory, category, tags, relevance or validated")
    return changes


def _refuse_blank(memory: str | None, tags: list[str] | None) -> None:
    """A blank text or tag is an agent's mistake (the library would store it)."""
    mistake = blank_typed(memory, tags)
    if mistake is not None:
        raise ToolError(mistake)


def _entry_id(text: str) -> uuid.UUID:
    try:
        return uuid.UUID(text)
    except ValueError:
        raise ToolError(
            f"an id is a UUID as `remember` or `recall` gave it, not {text!r}"
        ) from None


def build_server(
    store: SqlMemoryStore, *, ranking: str | None = None, unavailable: str | None = None
) -> MCPServer:
    """An MCP server whose tools work on ``store`` (a view: its scope bounds every tool).

    ``ranking`` is what ``recall`` ranks by when a call names none (default:
    ``hybrid`` on a store with an embedder, else ``bm25``). ``unavailable``:
    why the memory could not be opened; every tool call answers with it (an
    agent then sees why, rather than a connection that closed), ``store`` a
    stand-in for the tools' schemas.

    Raises:
        InvalidArgumentError: ``ranking`` names no ranking the store can rank by.

    """

    def tool_errors() -> _ToolErrors:
        return _ToolErrors(unavailable)

    offered, default_ranking = _recall_rankings(ranking, has_embedder=store.embedder is not None)
    server: MCPServer = MCPServer(
        name="loopctl-memory",
        instructions=(
            "A durable memory shared across runs. Call `recall` with the task's key words "
            "before acting, and `remember` what you learn after a tool call: a fact, an "
            "insight, a strategy that worked, or an error pattern to avoid."
        ),
        version=version("loopctl-memory"),
        log_level="WARNING",
    )

    def view(scope: str | None) -> SqlMemoryStore:
        return store if scope is None else store.scope(scope)

    reads = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False)

    @_tool(server, reads)
    async def remember(
        memory: Annotated[str, Field(description="What was learned, in one or two sentences.")],
        *,
        category: Category = "insight",
        tags: Annotated[list[str] | None, Field(description="Short labels to find it by.")] = None,
        relevance: Relevance = 0.5,
        validated: Annotated[bool, Field(description="Whether it was confirmed.")] = False,
        metadata: Annotated[
            dict[str, Any] | None,
            Field(description='Your own fields, a JSON object (e.g. {"user": "ann"}).'),
        ] = None,
        key: Annotated[
            str | None,
            Field(description="A name for it, unique in its scope: replaces the memory with it."),
        ] = None,
        ttl: Annotated[
            str | None,
            Field(description="Forget it this long from now: '30m', '12h', '7d', '2w'."),
        ] = None,
        scope: Scope = None,
    ) -> Remembered:
        """Store a memory; answer its id.

        Remember what will help a later turn or run: a fact about the project, an
        insight, a strategy that worked, an error and its fix. Keep it short and
        specific; put the words a later search would use in it or in its tags.
        metadata holds fields recall can filter on; storing again with a key
        replaces the memory that had it; after ttl no recall sees it.
        """
        _refuse_blank(memory, tags)
        with tool_errors():
            entry = MemoryEntry(
                _category(category),
                memory,
                tags=list(tags or []),
                relevance=relevance,
                validated=validated,
                metadata={} if metadata is None else metadata,
                key=key,
                expires_at=None if ttl is None else datetime.now(UTC) + age(ttl),
            )
            await view(scope).store(entry)
            return Remembered(id=str(entry.id))

    async def recall(
        query: Annotated[str, Field(description="Key words of what you need to know.")],
        *,
        limit: Annotated[
            int,
            Field(
                description=f"How many memories at most (capped at {RECALL_LIMIT}).",
                json_schema_extra={"minimum": 0, "maximum": RECALL_LIMIT},
            ),
        ] = 5,
        include_unmatched: Annotated[
            bool,
            Field(
                description="With ranking 'reference': also return memories no word of "
                "the query matched."
            ),
        ] = False,
        category: Annotated[
            str | None,
            Field(
                description="Only memories of this kind.", json_schema_extra={"enum": _CATEGORIES}
            ),
        ] = None,
        tags: Annotated[
            list[str] | None,
            Field(description="Only memories with one of these tags (ignoring case)."),
        ] = None,
        since: Annotated[
            str | None,
            Field(
                description="Only memories created after this: an ISO date or time "
                "('2026-01-01', '2026-01-01T10:00', UTC unless it has an offset) "
                "or an age back from now ('30m', '12h', '7d', '2w')."
            ),
        ] = None,
        where: Annotated[
            dict[str, Any] | None,
            Field(
                description="Only memories whose metadata meets these conditions: "
                '{"user": "ann"} (equal), {"n": {"$gte": 3}}, with $eq $ne $gt $gte $lt '
                "$lte $in $nin $exists; a path may go into objects with dots ('team.lead')."
            ),
        ] = None,
        ranking: str = default_ranking,  # its schema: below
        scope: Scope = None,
    ) -> Recalled:
        """Find the memories that best match the query, best first, each with its score.

        With ranking "bm25", a memory scores by BM25 over the words of its text
        and tags: rare words count most, common ones ("the", "of") not at all,
        and the score has no upper bound; only memories that share a word with
        the query come back. Where the server has an embedder, "vector" scores
        by closeness in meaning (cosine, -1 to 1) and "hybrid" (then the
        default) by both, 0 to 1: memories that share no word with the query
        come back too. With ranking "reference", a memory
        scores relevance*0.5 + 0.4 * (the share of the query's words it contains)
        + 0.3 if a tag contains the whole query + 0.1; only memories a word or a
        tag matched come back unless include_unmatched is true. Memories stored
        one after another as a stream (a conversation, a run's steps) vouch for
        each other: except in "reference", a memory stored just before or after
        ones that match scores higher, and may come back itself.

        category, tags, since and where narrow what is ranked: each one given
        must hold. When nothing matches in the scope, "elsewhere" counts the
        matches in the scopes below it, by scope: recall again with one as scope.
        """
        with tool_errors():
            here = view(scope)

            async def ranked(searched: SqlMemoryStore) -> list[tuple[MemoryEntry, float]]:
                return await searched.retrieve_scored(
                    query,
                    min(limit, RECALL_LIMIT) if isinstance(limit, int) else limit,
                    ranking=ranking,
                    filter=_recall_filter(category, tags, since, where),
                    matched_only=not include_unmatched,
                )

            found = await ranked(here)
            recalled = Recalled(memories=[recollection_of(entry, score) for entry, score in found])
            if not found:
                below = await ranked(here.with_descendants())
                matched = await store.with_descendants().scopes_of(entry.id for entry, _ in below)
                if matched:
                    recalled["elsewhere"] = dict(Counter(matched.values()).most_common())
            return recalled

    _add_recall(server, recall, offered, reads)

    @_tool(server, reads)
    async def update_memory(
        id: EntryId,
        *,
        memory: Annotated[str | None, Field(description="The new text.")] = None,
        category: Annotated[
            str | None, Field(description="The new kind.", json_schema_extra={"enum": _CATEGORIES})
        ] = None,
        tags: Annotated[list[str] | None, Field(description="The new tags (replace all).")] = None,
        relevance: Annotated[
            float | None,
            Field(
                description="The new relevance, 0 to 1.",
                json_schema_extra={"minimum": 0.0, "maximum": 1.0},
            ),
        ] = None,
        validated: Annotated[bool | None, Field(description="Whether it was confirmed.")] = None,
        scope: Scope = None,
    ) -> Memory:
        """Change fields of a memory (it keeps its id and age); answer it updated.

        The id reaches the memories of the scope and of every scope below it.
        """
        entry_id = _entry_id(id)
        changes = _changes(memory, category, tags, relevance, validated)
        with tool_errors():
            found = await view(scope).with_descendants().update(entry_id, **changes)
            if found is None:
                raise ToolError(f"no memory with id {entry_id}")
            return memory_of(found)

    @_tool(server, ToolAnnotations(destructive_hint=True, idempotent_hint=True))
    async def forget_memory(id: EntryId, scope: Scope = None) -> Forgotten:
        """Delete a memory that is wrong or no longer true.

        The id reaches the memories of the scope and of every scope below it.
        """
        entry_id = _entry_id(id)
        with tool_errors():
            if not await view(scope).with_descendants().delete(entry_id):
                raise ToolError(f"no memory with id {entry_id}")
            return Forgotten(forgotten=str(entry_id))

    @_tool(server, ToolAnnotations(destructive_hint=True))
    async def consolidate(
        full: Annotated[
            bool,
            Field(
                description="Also decay unused memories and merge near-duplicates "
                "(default: only prune memories of relevance below 0.05)."
            ),
        ] = False,
        scope: Scope = None,
    ) -> Consolidated:
        """Tidy the memory at the end of a run; answer what was pruned and merged."""
        with tool_errors():
            stats = await view(scope).consolidate(ConsolidationConfig.full() if full else None)
            return Consolidated(
                entries_before=stats.entries_before,
                entries_after=stats.entries_after,
                pruned=stats.pruned,
                merged=stats.merged,
            )

    @_tool(server, ToolAnnotations(read_only_hint=True))
    async def memory_stats(scope: Scope = None) -> Stats:
        """Count the memories: in all, by category, and by scope (this one and those below)."""
        with tool_errors():
            here = view(scope)
            summary = await here.summary()
            return Stats(
                entries=summary.entries,
                by_category={str(k): v for k, v in summary.by_category.items()},
                scopes={
                    relative(store.scope_name, name): count for name, count in await here.scopes()
                },
            )

    return server


def _recall_filter(
    category: str | None,
    tags: list[str] | None,
    since: str | None,
    where: dict[str, Any] | None = None,
) -> MemoryFilter:
    """``recall``'s filter: ``category``, one of ``tags``, after ``since``, meeting ``where``.

    Raises:
        ToolError: an unknown category.
        InvalidArgumentError: ``since`` is not a moment (:mod:`loopctl_memory.when`).

    """
    return MemoryFilter(
        categories=None if category is None else frozenset({_category(category)}),
        tags_any=tuple(tags) if tags else None,
        created_after=None if since is None else moment(since),
        metadata=where,
    )


def _category(value: str) -> MemoryCategory:
    try:
        return MemoryCategory(value)
    except ValueError:
        raise ToolError(f"unknown category {value!r}: one of {', '.join(_CATEGORIES)}") from None


class _ToolErrors:
    """Turn the library's errors into tool errors carrying their one-line message.

    With ``unavailable`` (why the memory could not be opened), refuse at once with it.
    """

    def __init__(self, unavailable: str | None) -> None:
        self._unavailable = unavailable

    def __enter__(self) -> None:
        if self._unavailable is not None:
            raise ToolError(self._unavailable)

    def __exit__(self, kind: object, error: BaseException | None, trace: object) -> None:
        if isinstance(error, LoopMemoryError):
            message = str(error).splitlines()
            raise ToolError(message[0] if message else type(error).__name__) from error


def _tool(server: MCPServer, hints: ToolAnnotations) -> Callable[[F], F]:
    """Register a tool whose description is its docstring without the source's indentation."""

    def register(function: F) -> F:
        server.tool(annotations=hints, description=inspect.cleandoc(function.__doc__ or ""))(
            function
        )
        return function

    return register


def _add_recall(
    server: MCPServer, recall: Callable[..., Any], offered: list[str], hints: ToolAnnotations
) -> None:
    """Add ``recall``, its ``ranking`` offering the rankings this store has.

    Set here as an object: a string annotation could not name ``build_server``'s locals.
    """
    recall.__annotations__["ranking"] = _ranking_schema(offered)
    _tool(server, hints)(recall)


def _ranking_schema(offered: list[str]) -> Any:
    """``recall``'s ``ranking`` argument: a str, one of ``offered``."""
    extra: dict[str, Any] = {"enum": offered}
    described = "'bm25' (BM25 over the words of text and tags), 'reference' (loopctl 0.1.0's score)"
    if "hybrid" in offered:
        described += ", 'vector' (closeness in meaning) or 'hybrid' (bm25 and vector fused)"
    return Annotated[str, Field(description=described + ".", json_schema_extra=extra)]


def _recall_rankings(ranking: str | None, *, has_embedder: bool) -> tuple[list[str], str]:
    """The rankings ``recall`` offers, and its default (``ranking``, else the usual one)."""
    default = ranking or best_ranking(has_embedder=has_embedder)
    offered = RANKINGS if has_embedder else LEXICAL_RANKINGS
    return list(offered), check_ranking(default, has_embedder=has_embedder)


async def serve(
    target: str,
    *,
    scope: str | None = None,
    track_access: bool = True,
    read_only: bool = False,
    ranking: str | None = None,
    embedder: Embedder | str | None = RECORDED,
    busy_timeout: float | None = None,
) -> None:
    """Open the store at ``target`` and serve it over stdio until the client hangs up.

    A new database is created; an existing one is never migrated behind its
    owner's back. A store that cannot be opened is served by
    :func:`serve_unavailable`, then its error raised. ``read_only``: the tools
    that write answer with an error.
    ``ranking``: what ``recall`` ranks by when a call names none (see
    :func:`build_server`). ``embedder``: as ``open_store`` takes it; by default
    the one the store recorded. ``busy_timeout``: as ``open_store`` takes it
    (None: its default).
    """
    options = OpenOptions(
        migrate=False if read_only else "create",
        track_access=track_access,
        read_only=read_only,
        embedder=embedder,
    )
    if busy_timeout is not None:
        options["busy_timeout"] = busy_timeout
    try:
        opened = await open_store(target, **options)
    except LoopMemoryError as exc:
        await serve_unavailable(str(exc))
        raise  # once the client hung up: the server failed at its job
    async with opened as store:
        view = store if scope is None else store.scope(scope)
        upkeep = asyncio.create_task(start_upkeep(store))
        sweeping = None if read_only else asyncio.create_task(sweep_now_and_then(view))
        try:
            await serve_stdio(build_server(view, ranking=ranking))
        finally:
            for task in (upkeep, sweeping):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task


async def serve_unavailable(why: str) -> None:
    """Serve the tools over stdio, each call answering that the memory is unavailable, and why.

    What a server whose database cannot be opened does: the client lists the
    tools as usual, and the agent reads the reason in each answer (it is also
    logged on stderr), instead of a connection that closed with nothing said.
    """
    said = f"the memory is unavailable: {' '.join(why.split())}"
    _log.error("%s", said)
    async with await open_store(":memory:") as stand_in:  # the tools' schemas only
        await serve_stdio(build_server(stand_in, unavailable=said))


async def start_upkeep(store: SqlMemoryStore) -> None:
    """Start the index upkeep due (a graph build, a long tail's indexing), logging a failure.

    The server's first requests then find no graph build due that a client waits behind.
    """
    try:
        await store.start_upkeep()
    except LoopMemoryError as exc:
        _log.warning("starting the index upkeep failed: %s", exc)


SWEEP_EVERY = 300.0
"""Seconds between the server's sweeps of expired memories."""


async def sweep_now_and_then(
    store: SqlMemoryStore,
    every: float = SWEEP_EVERY,
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
) -> None:
    """Delete ``store``'s expired memories now and every ``every`` seconds, until cancelled.

    A sweep that fails (the database busy, say) is logged and tried at the next
    turn: expired memories are invisible meanwhile, only their room waits.
    """
    while True:
        try:
            await store.sweep_expired()
        except LoopMemoryError as exc:
            _log.warning("sweeping expired memories failed: %s", exc)
        await sleep(every)
