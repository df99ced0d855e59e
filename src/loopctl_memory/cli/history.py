"""The command that shows what happened to memories: ``history``."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.arguments import limit_option, memory_id, moment, resolve_id
from loopctl_memory.cli.messages import echo_json, example
from loopctl_memory.cli.settings import Settings, with_store
from loopctl_memory.history import EVENTS, HistoryEvent
from loopctl_memory.names import PROG

if TYPE_CHECKING:
    from datetime import datetime

    from loopctl_memory.sql.store.memory_store import SqlMemoryStore


@click.command(
    "history",
    epilog=example(
        f"{PROG} history 3f2b6c1e",
        f"{PROG} history --since 1d --event forgotten --event pruned",
        f"{PROG} --scope acme history --descendants --json",
    ),
)
@click.argument(
    "given",
    metavar="[ID]",
    required=False,
    callback=lambda ctx, param, value: None if value is None else memory_id(ctx, param, value),
)
@click.option(
    "--since",
    metavar="WHEN",
    callback=moment,
    help="Only events since WHEN: an age back from now (30m, 12h, 7d, 2w) "
    "or an ISO date or time (2026-12-01, 2026-12-01T10:00; UTC unless it has an offset).",
)
@click.option(
    "--event",
    "kinds",
    multiple=True,
    type=click.Choice(EVENTS),
    help="Only events of this kind (repeatable: any of them).",
)
@limit_option(20)
@click.option("--descendants", is_flag=True, help="Also the events of the scopes below --scope.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of the events.")
@click.pass_obj
def history_command(
    settings: Settings,
    *,
    given: uuid.UUID | str | None,
    since: datetime | None,
    kinds: tuple[str, ...],
    limit: int,
    descendants: bool,
    as_json: bool,
) -> None:
    """Show what happened to memories: stored, updated, accessed, merged, removed and why.

    With an ID, that memory's every event, oldest first; a memory that is gone
    is found by its full id (a short id reaches only the memories still
    stored). Without one, the newest events of --scope (and, with
    --descendants, of the scopes below it), newest first. Events are kept 90
    days unless the store says otherwise; `consolidate` deletes older ones.
    """

    async def work(store: SqlMemoryStore) -> list[HistoryEvent]:
        if given is None:
            return await store.history(
                since=since, events=kinds or None, limit=limit, newest_first=True
            )
        entry_id = await resolve_id(store, given)
        if entry_id is None:
            return []
        return await store.history(entry_id, since=since, events=kinds or None)

    found = with_store(settings, work, descendants=descendants or given is not None)
    if as_json:
        echo_json([event.to_dict() for event in found])
        return
    if not found:
        whose = f"memory {given}" if given is not None else "memory"
        place = f" in scope {settings.scope}" if settings.scope else ""
        click.echo(f"No events of any {whose}{place} that match.", err=True)
        return
    from loopctl_memory.rendering import console, history_table

    console().print(history_table(found))
