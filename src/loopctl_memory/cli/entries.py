"""The commands on single memories: ``add``, ``search``, ``get``, ``delete`` and ``update``."""

from __future__ import annotations

import sys
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from loopctl_memory import scopes as scope_names
from loopctl_memory.cli.arguments import (
    CATEGORIES,
    SHARE,
    categories_option,
    duration,
    limit_option,
    memory_id,
    moment,
    no_blank_text,
    resolve_id,
    tag_option,
    where_option,
)
from loopctl_memory.cli.fields import metadata_of, selection
from loopctl_memory.cli.messages import echo_json, example
from loopctl_memory.cli.settings import Settings, need_embedder, with_store
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter
from loopctl_memory.names import PROG
from loopctl_memory.rankings import EMBEDDING_RANKINGS, RANKINGS, best_ranking

if TYPE_CHECKING:
    from loopctl_memory.context import Context
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore


def _text_of(text: str | None, from_file: str | None) -> str:
    """``add``'s memory: TEXT, standard input for ``-``, or the file; never blank.

    A file's (or standard input's) last line break is not part of the memory.
    """
    if (text is None) == (from_file is None):
        raise click.UsageError(
            "give the memory as TEXT ('-': read standard input) or as --file PATH, one of them"
        )
    if text is not None and text != "-":
        given = text
    else:
        if text == "-" or from_file == "-":
            given = sys.stdin.read()
        else:
            assert from_file is not None  # noqa: S101 - one of the two, checked above
            given = Path(from_file).read_text(encoding="utf-8")
        given = given.removesuffix("\n").removesuffix("\r")
    checked = no_blank_text(None, None, given)
    assert checked is not None  # noqa: S101 - given
    return checked


def _where(settings: Settings, *, below: bool) -> str:
    """Where a lookup looked, for its error: `` in scope S (or below)``, or nothing at the root."""
    if settings.scope is None:
        return ""
    return f" in scope {settings.scope}{' or below' if below else ''}"


def _show_entry(entry: MemoryEntry, *, as_json: bool) -> None:
    """Every field of one entry: a table, or a JSON object."""
    if as_json:
        echo_json(entry_to_dict(entry))
        return
    from loopctl_memory.rendering import console, entry_table

    console().print(entry_table(entry))


@click.command(
    epilog=example(
        f'{PROG} add "pytest -x stops at the first failure" --category fact --tag pytest',
        f'{PROG} add "database is locked: use BEGIN IMMEDIATE" -c error_pattern -r 0.9 --validated',
        f'{PROG} add "Ann prefers dark mode" -c fact --meta user=ann --meta n=3 --key prefs/ann',
        f'{PROG} add "deploy frozen until Friday" -c working --ttl 3d',
        f"git log -1 --format=%B | {PROG} add - -c trajectory",
        f"{PROG} add --file notes/incident.md -c insight",
    )
)
@click.argument("text", required=False)
@click.option(
    "--file",
    "from_file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Read the memory's text from this file ('-': standard input) instead of TEXT.",
)
@click.option(
    "--category", "-c", required=True, type=click.Choice(CATEGORIES), help="What kind of memory."
)
@tag_option("A tag (repeatable).", stored=True)
@click.option(
    "--relevance",
    "-r",
    type=SHARE,
    default=1.0,
    show_default=True,
    help="How much this memory matters, in [0, 1].",
)
@click.option("--validated", is_flag=True, help="Mark the memory as validated.")
@click.option(
    "--meta",
    "meta",
    multiple=True,
    metavar="KEY=VALUE",
    help="A field of the memory's metadata (repeatable); VALUE is read as JSON when it is "
    "JSON (3, true, null, [1, 2]) and as text otherwise.",
)
@click.option(
    "--key",
    help="A name for the memory, unique in its scope: a memory that already has it is replaced.",
)
@click.option(
    "--ttl",
    metavar="AGE",
    callback=duration,
    help="Expire the memory this long from now (30m, 12h, 7d, 2w): no read sees it after.",
)
@click.pass_obj
def add(
    settings: Settings,
    *,
    text: str | None,
    from_file: str | None,
    category: str,
    tags: tuple[str, ...],
    relevance: float,
    validated: bool,
    meta: tuple[str, ...],
    key: str | None,
    ttl: timedelta | None,
) -> None:
    """Store one memory (TEXT, or '-' to read it from standard input) and print its new id."""
    entry = MemoryEntry(
        MemoryCategory(category),
        _text_of(text, from_file),
        tags=list(tags),
        relevance=relevance,
        validated=validated,
        metadata=metadata_of(meta),
        key=key,
        expires_at=None if ttl is None else datetime.now(UTC) + ttl,
    )

    with_store(settings, lambda store: store.store(entry), create=True)
    click.echo(str(entry.id))


@click.command(
    epilog=example(
        f'{PROG} search "database is locked"',
        f"{PROG} search pytest -n 3 --json",
        f'{PROG} search "flaky test" --ranking bm25 --category error_pattern --since 7d',
        f'{PROG} search "why did the deploy fail" --ranking hybrid',
        f"{PROG} search deploy --tag ci --tag release --until 2026-01-01 --validated",
        f"{PROG} search theme --where user=ann --where 'n>=3'",
    )
)
@click.argument("query")
@limit_option(10)
@click.option(
    "--ranking",
    type=click.Choice(RANKINGS),
    help="Rank by this for this search: 'reference' (loopctl 0.1.0's score; memories a "
    "word or a tag matched, unless --include-unmatched), 'bm25' (only memories that share a "
    "word with the query), "
    "'vector' (cosine with the query's vector: memories that have one) or 'hybrid' "
    "(BM25 and cosine fused; the best quality). The last two need an embedder. "
    "Default: the global --ranking, else the best the database has: hybrid with an "
    "embedder, bm25 without. --ranking reference ranks as the Python library's retrieve "
    "does by default.",
)
@categories_option("Only memories of this category (repeatable: any of them).")
@tag_option("Only memories with this tag, ignoring case (repeatable: any of them).")
@click.option(
    "--since",
    metavar="WHEN",
    callback=moment,
    help="Only memories created after WHEN: an age back from now (30m, 12h, 7d, 2w) "
    "or an ISO date or time (2026-01-01, 2026-01-01T10:00; UTC unless it has an offset).",
)
@click.option(
    "--until",
    metavar="WHEN",
    callback=moment,
    help="Only memories created before WHEN (written as for --since).",
)
@click.option(
    "--validated/--not-validated",
    default=None,
    help="Only validated memories, or only those not validated.",
)
@click.option(
    "--context",
    "weighing",
    metavar="auto|WEIGHT",
    callback=lambda _ctx, _param, value: _context(value),
    help="How much each memory's neighbours (those stored just before and after it in its "
    "scope) count with ranking bm25, vector or hybrid: 'auto' (the default: as much as the "
    "scope's memories read as a stream) or a weight (0: not at all).",
)
@where_option(
    "Only memories whose metadata meets CONDITION (repeatable: each must hold): "
    "PATH=VALUE, PATH!=VALUE, PATH>VALUE, PATH>=VALUE, PATH<VALUE, PATH<=VALUE, PATH? "
    "(present) or PATH!? (absent); PATH is keys joined by dots, VALUE JSON or text."
)
@click.option(
    "--include-unmatched",
    is_flag=True,
    help="Rank by 'reference' and also show the memories no word of the query matched, "
    "as the library's retrieve pads its answer with them (not with another --ranking).",
)
@click.option(
    "--descendants",
    is_flag=True,
    help="Also search the scopes below --scope (acme: acme/bob, acme/support/agent-7, ...).",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of the entries, each with its full id and its score.",
)
@click.pass_obj
def search(
    settings: Settings,
    query: str,
    *,
    limit: int,
    ranking: str | None,
    categories: tuple[str, ...],
    tags: tuple[str, ...],
    since: datetime | None,
    until: datetime | None,
    validated: bool | None,
    weighing: Context | None,
    where: tuple[str, ...],
    include_unmatched: bool,
    descendants: bool,
    as_json: bool,
) -> None:
    """Show the memories that best match QUERY, best first, as the agent would see them.

    Each comes with its score and its short id: the fewest leading hex digits
    (at least 8) that no other memory's id starts with, which `get`, `update`
    and `delete` accept. The filters (--category, --tag, --since, --until,
    --validated) only remove memories from the ranking; each one given must hold.
    """
    from loopctl_memory.rendering import SearchResult

    if since is not None and until is not None and since >= until:
        raise click.UsageError(
            f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})"
        )
    asked = ranking or settings.ranking
    if include_unmatched:  # the reference's padding: it ranks by the reference
        if asked not in (None, "reference"):
            raise click.UsageError("--include-unmatched applies to --ranking reference only")
        asked = "reference"
    passes = selection(
        categories, tags, where, validated=validated, created_after=since, created_before=until
    )

    async def work(store: SqlMemoryStore) -> tuple[list[SearchResult], str, str]:
        chosen = asked or best_ranking(has_embedder=store.embedder is not None)
        if chosen in EMBEDDING_RANKINGS:
            need_embedder(store)
        if weighing is not None and chosen == "reference" and weighing != "auto" and weighing > 0:
            raise click.UsageError("--context applies to --ranking bm25, vector or hybrid")

        async def ranked(view: SqlMemoryStore) -> list[tuple[MemoryEntry, float]]:
            return await view.retrieve_scored(
                query,
                limit,
                ranking=chosen,
                filter=passes,
                matched_only=not include_unmatched,
                context=weighing,
            )

        scored = await ranked(store)
        ids = store.with_descendants()  # short ids as get, update and delete look them up
        found = [  # the JSON has the full ids: no short ids to look up
            SearchResult(entry, score, "" if as_json else await ids.short_id(entry.id))
            for entry, score in scored
        ]
        why = ""
        if not found and not as_json:
            why = await _nothing_found(store, chosen, passes, None if descendants else ranked)
        return found, why, chosen

    found, why, chosen = with_store(settings, work, descendants=descendants)
    if as_json:
        from loopctl_memory.rendering import json_score

        echo_json(
            [
                entry_to_dict(result.entry) | {"score": json_score(result.score, chosen)}
                for result in found
            ]
        )
    elif not found:
        click.echo(why, err=True)
    else:
        from loopctl_memory.rendering import SearchResults, console

        console().print(SearchResults(found))


def _context(value: str | None) -> Context | None:
    """``--context``: ``auto`` or a weight >= 0 (None: the store's)."""
    from loopctl_memory.context import check_context

    if value is None:
        return None
    try:
        return check_context(value if value == "auto" else float(value), what="--context")
    except (ValueError, InvalidArgumentError) as exc:
        raise click.BadParameter(f"{value!r} is neither 'auto' nor a weight >= 0") from exc


async def _nothing_found(
    store: SqlMemoryStore,
    ranking: str,
    passes: MemoryFilter,
    ranked: Callable[[SqlMemoryStore], Awaitable[list[tuple[MemoryEntry, float]]]] | None,
) -> str:
    """Why ``search`` found nothing, and where matches are if the scopes below hold some.

    ``ranked``: the search itself, asked again of the scopes below (None: it searched them).
    """
    where = f" in scope {store.scope_name}" if store.scope_name else ""
    filtered = not passes.is_empty
    held = await store.count()
    if not held:
        said = f"No memories stored{where}."
    elif ranking == "vector":
        passing = " that pass the filters" if filtered else ""
        said = f"No memories{where}{passing} have a vector yet (see `{PROG} embed-pending`)."
    else:
        said = f"No memories{where} match the query{' and the filters' if filtered else ''}."
    if ranked is not None:
        below = store.with_descendants()
        found = await ranked(below)
        if found:
            said += _elsewhere(
                store.scope_name, await below.scopes_of(entry.id for entry, _ in found)
            )
    return said


_NAMED = 3  # the scopes a hint names, most matches first


def _elsewhere(base: str, scopes: dict[uuid.UUID, str]) -> str:
    """Where the matches of a search below ``base`` live, and how to see them."""
    counts = Counter(scope_names.join(base, name) if name else base for name in scopes.values())
    named = ", ".join(f"{name} ({count})" for name, count in counts.most_common(_NAMED))
    more = f" and {len(counts) - _NAMED} more" if len(counts) > _NAMED else ""
    return (
        f" Scopes below match: {named}{more}. Add --descendants to search them too,"
        " or --scope NAME to search one."
    )


@click.command(
    epilog=example(
        f"{PROG} get 3f2b6c1e",
        f"{PROG} get 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --json",
        f"{PROG} get --key prefs/ann",
    )
)
@click.argument(
    "given",
    metavar="ID",
    callback=lambda ctx, param, value: None if value is None else memory_id(ctx, param, value),
    required=False,
)
@click.option("--key", help="The memory with this key (instead of an ID).")
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
@click.pass_obj
def get(settings: Settings, given: uuid.UUID | str | None, key: str | None, as_json: bool) -> None:
    """Show every field of the memory with this ID (the full id, or a short id from `search`).

    An ID reaches the memories of --scope and of every scope below it (at the
    root: all of them); --key those of --scope itself.
    """
    if (given is None) == (key is None):
        raise click.UsageError("give an ID or --key, not both")

    async def work(store: SqlMemoryStore) -> MemoryEntry | None:
        if key is not None:
            return await store.get_by_key(key)
        assert given is not None  # noqa: S101 - one of the two, checked above
        entry_id = await resolve_id(store, given)
        return None if entry_id is None else await store.get(entry_id)

    found = with_store(settings, work, descendants=key is None)
    if found is None:
        named = f"key {key!r}" if key is not None else f"id {given}"
        raise click.ClickException(
            f"no memory with {named}{_where(settings, below=key is None)}; "
            f"`{PROG} search` shows the ids"
        )
    _show_entry(found, as_json=as_json)


@click.command(
    epilog=example(f"{PROG} delete 3f2b6c1e", f"{PROG} delete 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b")
)
@click.argument("given", metavar="ID", callback=memory_id)
@click.pass_obj
def delete(settings: Settings, given: uuid.UUID | str) -> None:
    """Delete the memory with this ID (the full id, or a short id from `search`).

    An ID reaches the memories of --scope and of every scope below it (at the root: all).
    """

    async def work(store: SqlMemoryStore) -> uuid.UUID | None:
        entry_id = await resolve_id(store, given)
        return entry_id if entry_id is not None and await store.delete(entry_id) else None

    deleted = with_store(settings, work, descendants=True)
    if deleted is None:
        raise click.ClickException(
            f"no memory with id {given}{_where(settings, below=True)}; nothing was deleted"
        )
    click.echo(f"Deleted {deleted}")


@click.command(
    epilog=example(
        f"{PROG} update 3f2b6c1e --relevance 0.9 --validated",
        f'{PROG} update 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --text "use BEGIN IMMEDIATE"',
    )
)
@click.argument("given", metavar="ID", callback=memory_id)
@click.option("--text", callback=no_blank_text, help="The new memory text.")
@click.option("--category", "-c", type=click.Choice(CATEGORIES), help="The new category.")
@tag_option("The new tags (repeatable; replace all).", stored=True)
@click.option("--relevance", "-r", type=SHARE, help="The new relevance.")
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

    ID is the full id, or a short id from `search` (at least 4 leading hex digits); it
    reaches the memories of --scope and of every scope below it (at the root: all).
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

    found = with_store(settings, work, descendants=True)
    if found is None:
        raise click.ClickException(
            f"no memory with id {given}{_where(settings, below=True)}; nothing was changed"
        )
    _show_entry(found, as_json=as_json)
