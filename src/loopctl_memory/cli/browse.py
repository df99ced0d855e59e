"""The command that shows memories without a query: ``list``."""

from __future__ import annotations

import heapq
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.arguments import (
    categories_option,
    limit_option,
    tag_option,
    where_option,
)
from loopctl_memory.cli.fields import selection
from loopctl_memory.cli.messages import echo_json, example
from loopctl_memory.cli.settings import Settings, with_store
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.names import PROG

if TYPE_CHECKING:
    from loopctl_memory.rendering import SearchResult
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

_ORDERS: dict[str, Callable[[MemoryEntry], float]] = {
    "created": lambda entry: entry.created_at.timestamp(),
    "relevance": lambda entry: entry.relevance,
}


@click.command(
    "list",
    epilog=example(
        f"{PROG} list",
        f"{PROG} --scope acme/alice list --limit 50 --sort relevance",
        f"{PROG} list --descendants --category error_pattern --json",
    ),
)
@limit_option(20)
@click.option(
    "--sort",
    type=click.Choice(list(_ORDERS)),
    default="created",
    show_default=True,
    help="'created': the newest first; 'relevance': the most relevant first "
    "(ties: the newest stored first).",
)
@categories_option("Only memories of this category (repeatable: any of them).")
@tag_option("Only memories with this tag, ignoring case (repeatable: any of them).")
@where_option("Only memories whose metadata meets CONDITION, as for `search --where`.")
@click.option("--descendants", is_flag=True, help="Also the memories of the scopes below --scope.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the entries.")
@click.pass_obj
def list_command(
    settings: Settings,
    *,
    limit: int,
    sort: str,
    categories: tuple[str, ...],
    tags: tuple[str, ...],
    where: tuple[str, ...],
    descendants: bool,
    as_json: bool,
) -> None:
    """Show memories without a query: the newest (or the most relevant) first.

    For looking at what an agent stored: each with its short id (which `get`,
    `update` and `delete` take), when it was created, its category, relevance,
    tags and text (cut as `search` cuts it).
    """
    passes = selection(categories, tags, where)

    async def work(store: SqlMemoryStore) -> list[SearchResult]:
        from loopctl_memory.rendering import SearchResult

        chosen = await _largest(store.iter_entries(filter=passes, newest_first=True), limit, sort)
        ids = store.with_descendants()  # short ids as get, update and delete look them up
        return [  # the JSON has the full ids: no short ids to look up
            SearchResult(entry, entry.relevance, "" if as_json else await ids.short_id(entry.id))
            for entry in chosen
        ]

    found = with_store(settings, work, descendants=descendants)
    if as_json:
        echo_json([entry_to_dict(result.entry) for result in found])
        return
    if not found:
        place = f" in scope {settings.scope}" if settings.scope else ""
        below = " or below" if descendants else ""
        passing = "" if passes.is_empty else " that pass the filters"
        click.echo(f"No memories{place}{below}{passing}.", err=True)
        return
    from loopctl_memory.rendering import SearchResults, console

    console().print(SearchResults(found, created=True))


async def _largest(entries: AsyncIterator[MemoryEntry], limit: int, sort: str) -> list[MemoryEntry]:
    """The ``limit`` largest by ``sort``, largest first, ties in the order given.

    Streamed through a heap of ``limit``: a store of a million holds no more.
    """
    order = _ORDERS[sort]
    kept: list[tuple[float, int]] = []  # (sort key, -position): a min-heap of the largest
    held: dict[int, MemoryEntry] = {}
    position = 0
    async for entry in entries:
        item = (order(entry), -position)  # -position: the earlier of equals wins
        if len(kept) < limit:
            heapq.heappush(kept, item)
            held[position] = entry
        elif item > kept[0]:
            dropped = heapq.heapreplace(kept, item)
            del held[-dropped[1]]
            held[position] = entry
        position += 1
    return [held[-place] for _, place in sorted(kept, reverse=True)]
