"""The commands on single memories: ``add``, ``search``, ``get``, ``delete`` and ``update``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any

import click

from loopctl_memory.cli.arguments import CATEGORIES, memory_id, resolve_id
from loopctl_memory.cli.messages import echo_json, example
from loopctl_memory.cli.names import PROG
from loopctl_memory.cli.settings import Settings, with_store
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.entry_json import entry_to_dict

if TYPE_CHECKING:
    from loopctl_memory.sql.store import SqlMemoryStore


def _show_entry(entry: MemoryEntry, *, as_json: bool) -> None:
    """Every field of one entry: a table, or a JSON object."""
    if as_json:
        echo_json(entry_to_dict(entry))
        return
    from loopctl_memory.cli.rendering import console, entry_table

    console().print(entry_table(entry))


@click.command(
    epilog=example(
        f'{PROG} add "pytest -x stops at the first failure" --category fact --tag pytest',
        f'{PROG} add "database is locked: use BEGIN IMMEDIATE" -c error_pattern -r 0.9 --validated',
    )
)
@click.argument("text")
@click.option(
    "--category", "-c", required=True, type=click.Choice(CATEGORIES), help="What kind of memory."
)
@click.option("--tag", "-t", "tags", multiple=True, metavar="TAG", help="A tag (repeatable).")
@click.option(
    "--relevance",
    "-r",
    type=click.FloatRange(0.0, 1.0),
    default=1.0,
    show_default=True,
    help="How much this memory matters, in [0, 1].",
)
@click.option("--validated", is_flag=True, help="Mark the memory as validated.")
@click.pass_obj
def add(
    settings: Settings,
    *,
    text: str,
    category: str,
    tags: tuple[str, ...],
    relevance: float,
    validated: bool,
) -> None:
    """Store one memory (TEXT) and print its new id."""
    entry = MemoryEntry(
        MemoryCategory(category), text, tags=list(tags), relevance=relevance, validated=validated
    )

    with_store(settings, lambda store: store.store(entry), create=True)
    click.echo(str(entry.id))


@click.command(
    epilog=example(f'{PROG} search "database is locked"', f"{PROG} search pytest -n 3 --json")
)
@click.argument("query")
@click.option(
    "--limit",
    "-n",
    type=click.IntRange(min=0),
    default=10,
    show_default=True,
    help="How many memories to show at most.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of the entries, each with its full id and its score.",
)
@click.pass_obj
def search(settings: Settings, query: str, limit: int, as_json: bool) -> None:
    """Show the memories that best match QUERY, best first, as the agent would see them.

    Each comes with its score and its short id: the fewest leading hex digits
    (at least 8) that no other memory's id starts with, which `get`, `update`
    and `delete` accept.
    """
    from loopctl_memory.cli.rendering import SearchResult

    async def work(store: SqlMemoryStore) -> list[SearchResult]:
        scored = await store.retrieve_scored(query, limit)
        return [  # the JSON has the full ids: no short ids to look up
            SearchResult(entry, score, "" if as_json else await store.short_id(entry.id))
            for entry, score in scored
        ]

    found = with_store(settings, work)
    if as_json:
        echo_json([entry_to_dict(result.entry) | {"score": result.score} for result in found])
    elif not found:
        click.echo("No memories stored.", err=True)
    else:
        from loopctl_memory.cli.rendering import SearchResults, console

        console().print(SearchResults(found))


@click.command(
    epilog=example(
        f"{PROG} get 3f2b6c1e",
        f"{PROG} get 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --json",
    )
)
@click.argument("given", metavar="ID", callback=memory_id)
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
@click.pass_obj
def get(settings: Settings, given: uuid.UUID | str, as_json: bool) -> None:
    """Show every field of the memory with this ID (the full id, or a short id from `search`)."""

    async def work(store: SqlMemoryStore) -> MemoryEntry | None:
        entry_id = await resolve_id(store, given)
        return None if entry_id is None else await store.get(entry_id)

    found = with_store(settings, work)
    if found is None:
        raise click.ClickException(f"no memory with id {given}; `{PROG} search` shows the ids")
    _show_entry(found, as_json=as_json)


@click.command(
    epilog=example(f"{PROG} delete 3f2b6c1e", f"{PROG} delete 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b")
)
@click.argument("given", metavar="ID", callback=memory_id)
@click.pass_obj
def delete(settings: Settings, given: uuid.UUID | str) -> None:
    """Delete the memory with this ID (the full id, or a short id from `search`)."""

    async def work(store: SqlMemoryStore) -> uuid.UUID | None:
        entry_id = await resolve_id(store, given)
        return entry_id if entry_id is not None and await store.delete(entry_id) else None

    deleted = with_store(settings, work)
    if deleted is None:
        raise click.ClickException(f"no memory with id {given}; nothing was deleted")
    click.echo(f"Deleted {deleted}")


@click.command(
    epilog=example(
        f"{PROG} update 3f2b6c1e --relevance 0.9 --validated",
        f'{PROG} update 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --text "use BEGIN IMMEDIATE"',
    )
)
@click.argument("given", metavar="ID", callback=memory_id)
@click.option("--text", help="The new memory text.")
@click.option("--category", "-c", type=click.Choice(CATEGORIES), help="The new category.")
@click.option(
    "--tag",
    "-t",
    "tags",
    multiple=True,
    metavar="TAG",
    help="The new tags (repeatable; replace all).",
)
@click.option("--relevance", "-r", type=click.FloatRange(0.0, 1.0), help="The new relevance.")
@click.option(
    "--validated/--not-validated", default=None, help="Mark the memory as validated or not."
)
@click.option("--json", "as_json", is_flag=True, help="Print the updated entry as JSON.")
@click.pass_obj
def update(
    settings: Settings,
    *,
    given: uuid.UUID | str,
    text: str | None,
    category: str | None,
    tags: tuple[str, ...],
    relevance: float | None,
    validated: bool | None,
    as_json: bool,
) -> None:
    """Change fields of the memory with this ID; it keeps its id, age and place.

    ID is the full id, or a short id from `search` (at least 4 leading hex digits).
    """
    changes: dict[str, Any] = {}
    if text is not None:
        changes["memory"] = text
    if category is not None:
        changes["category"] = MemoryCategory(category)
    if tags:
        changes["tags"] = list(tags)
    if relevance is not None:
        changes["relevance"] = relevance
    if validated is not None:
        changes["validated"] = validated
    if not changes:
        raise click.UsageError(
            "nothing to change: give --text, --category, --tag, --relevance or --validated"
        )

    async def work(store: SqlMemoryStore) -> MemoryEntry | None:
        entry_id = await resolve_id(store, given)
        return None if entry_id is None else await store.update(entry_id, **changes)

    found = with_store(settings, work)
    if found is None:
        raise click.ClickException(f"no memory with id {given}; nothing was changed")
    _show_entry(found, as_json=as_json)
