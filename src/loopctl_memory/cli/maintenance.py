"""The commands on the store as a whole: ``consolidate``, ``stats``, ``forget``, ``scopes``."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.arguments import (
    SHARE,
    categories_option,
    duration,
    tag_option,
    where_option,
)
from loopctl_memory.cli.fields import selection
from loopctl_memory.cli.messages import confirm, counted, echo_json, example
from loopctl_memory.cli.settings import Settings, with_store
from loopctl_memory.names import PROG

if TYPE_CHECKING:
    from loopctl_memory.entry import ConsolidationStats
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore


def _where(store: SqlMemoryStore) -> str:
    """The store, and its scope when it is not the root, for messages."""
    scope = store.scope_name
    return f"{store.target} (scope {scope})" if scope else store.target


@click.command(
    epilog=example(
        f"{PROG} consolidate",
        f"{PROG} consolidate --yes --json",
        f"{PROG} consolidate --full --half-life 7d --yes",
        f"{PROG} consolidate --yes --vacuum",
    )
)
@click.option(
    "--full",
    is_flag=True,
    help="Also decay relevance with time, merge near-duplicates and prune on quality.",
)
@click.option(
    "--half-life",
    metavar="DURATION",
    callback=duration,
    help="With --full: the time in which an untouched memory loses half its relevance "
    "(default 14d).",
)
@click.option("--no-merge", is_flag=True, help="With --full: do not merge near-duplicates.")
@click.option(
    "--vacuum",
    is_flag=True,
    help="Then give the free pages back to the disk (an older SQLite file is rewritten).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.pass_obj
def consolidate(
    settings: Settings,
    *,
    full: bool,
    half_life: timedelta | None,
    no_merge: bool,
    vacuum: bool,
    yes: bool,
    as_json: bool,
) -> None:
    """Delete every memory whose relevance is below 0.05, and print what changed.

    With --full, also decay relevance with time, merge near-duplicates and
    prune on quality (loopctl's later consolidation pass).

    The space of deleted memories stays in the file for later ones; with
    --vacuum its free pages are given back to the disk (`stats` shows them as
    "free"). A file made by an older version is rewritten whole for that, and
    no other program may write to it meanwhile.
    """
    from loopctl_memory.lifecycle import ConsolidationConfig

    if not full and (half_life is not None or no_merge):
        raise click.UsageError("--half-life and --no-merge go with --full")
    config = ConsolidationConfig()
    if full:
        config = ConsolidationConfig.full()
        config = dataclasses.replace(
            config, half_life=half_life or config.half_life, merge=not no_merge
        )

    async def work(store: SqlMemoryStore) -> tuple[str, ConsolidationStats]:
        if not yes:
            total = await store.count()
            what = (
                "Decay, merge and prune the memories"
                if full
                else "Delete every memory with relevance below 0.05"
            )
            then = ", then give the free space back" if vacuum else ""
            confirm(f"{what} of {_where(store)} ({total} stored){then}?")
        return _where(store), await store.consolidate(config, vacuum=vacuum)

    where, stats = with_store(settings, work)
    if as_json:
        echo_json(asdict(stats))
    else:
        from loopctl_memory.rendering import console, consolidation_view

        console().print(consolidation_view(where, stats))


@click.command(epilog=example(f"{PROG} stats", f"{PROG} --db ./agent.db stats --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.pass_obj
def stats(settings: Settings, as_json: bool) -> None:
    """Show how many memories there are, by category and relevance, and where they live."""
    from loopctl_memory.rendering import StoreStats, console, database_size, stats_view

    async def work(store: SqlMemoryStore) -> StoreStats:
        file = settings.sqlite_file()
        return StoreStats(
            database=store.target if file is None else str(file.resolve()),
            size_bytes=database_size(file) if file else await store.storage_bytes(),
            free_bytes=await store.free_bytes(),
            schema_revision=await store.schema_revision(),
            summary=await store.summary(),
            scope=store.scope_name,
            scopes=await store.scopes(),
            embedder=await store.recorded_embedder(),
        )

    found = with_store(settings, work, embedder=False)
    if as_json:
        echo_json(found.to_json())
    else:
        console().print(stats_view(found))


@click.command(
    epilog=example(
        f"{PROG} forget --older-than 30d --yes",
        f"{PROG} forget --older-than 7d --category working",
        f"{PROG} forget --tag scratch --tag draft --yes",
        f"{PROG} forget --where user=ann --yes",
        f"{PROG} --scope acme/agent-7 forget --everything --yes",
    )
)
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=duration,
    help="Memories created longer ago than this (30d, 12h, 2w, ...).",
)
@categories_option("Memories of this category (repeatable: any of them).")
@tag_option("Memories with this tag, ignoring case (repeatable: any of them).")
@where_option(
    "Memories whose metadata meets CONDITION, written as for `search --where` "
    "(repeatable: each must hold)."
)
@click.option("--below", type=SHARE, help="Memories whose relevance is below this.")
@click.option("--everything", is_flag=True, help="Every memory (of the scope), said explicitly.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def forget(
    settings: Settings,
    *,
    older_than: timedelta | None,
    categories: tuple[str, ...],
    tags: tuple[str, ...],
    where: tuple[str, ...],
    below: float | None,
    everything: bool,
    yes: bool,
) -> None:
    """Delete the memories that meet every condition given."""
    passes = selection(categories, tags, where)
    if older_than is None and passes.is_empty and below is None and not everything:
        raise click.UsageError(
            "say what to forget: --older-than, --category, --tag, --where, --below, or --everything"
        )

    async def work(store: SqlMemoryStore) -> tuple[str, int]:
        if not yes:
            conditions = [
                f"created more than {older_than} ago" if older_than is not None else "",
                f"of category {' or '.join(categories)}" if categories else "",
                f"tagged {' or '.join(tags)}" if tags else "",
                f"whose metadata meets {' and '.join(where)}" if where else "",
                f"with relevance below {below}" if below is not None else "",
            ]
            which = ", ".join(part for part in conditions if part) or "every memory"
            confirm(f"Delete the memories {which} from {_where(store)}?")
        forgotten = await store.forget(
            older_than=older_than,
            below=below,
            filter=None if passes.is_empty else passes,
            everything=everything,
        )
        return _where(store), forgotten

    place, forgotten = with_store(settings, work)
    click.echo(f"Forgot {counted(forgotten, 'memory', 'memories')} in {place}")


@click.command(epilog=example(f"{PROG} scopes", f"{PROG} --scope acme scopes --json"))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object of name: count.")
@click.pass_obj
def scopes(settings: Settings, as_json: bool) -> None:
    """List the scopes that hold memories (the root is ''), with how many each holds."""
    found = with_store(settings, lambda store: store.scopes())
    if as_json:
        echo_json(dict(found))
        return
    from loopctl_memory.rendering import console, scopes_table

    console().print(scopes_table(found))
