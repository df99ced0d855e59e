"""The commands that look after the database's schema: ``init`` and ``migrate``."""

from __future__ import annotations

import dataclasses

import click

from loopctl_memory.cli.messages import confirm, counted, example
from loopctl_memory.cli.settings import Settings, run_async, with_store
from loopctl_memory.errors import SchemaError
from loopctl_memory.names import NO_EMBEDDER, PROG


def _refuse_read_only(settings: Settings, command: str) -> None:
    """A command that writes the schema says so under ``--read-only``."""
    if settings.read_only:
        raise click.UsageError(f"`{command}` writes the database's schema: not with --read-only")


@click.command(
    epilog=example(
        f"{PROG} init",
        f"{PROG} --db ./agent.db init --embedder sentence-transformers:all-MiniLM-L6-v2",
    )
)
@click.option(
    "--embedder",
    metavar="SPEC",
    help="Record this embedder (see the global --embedder): later commands and the MCP "
    "server make the vectors with it without being told.",
)
@click.pass_obj
def init(settings: Settings, embedder: str | None) -> None:
    """Create the database, or bring its schema to the newest revision.

    With --embedder (or the global one), also record the embedder whose vectors
    the store keeps, and make those of the memories it already holds.
    """
    from loopctl_memory import migrate

    _refuse_read_only(settings, "init")
    spec = embedder or settings.embedder
    if spec is not None and spec != NO_EMBEDDER:
        _check_embedder(spec)  # before anything is created: a spec that fails leaves nothing
    before, after = run_async(migrate.migrate_to(settings.locate(create=True), "head"))
    where = settings.resolved().describe()
    if before is None:
        click.echo(f"Created {where} at schema revision {after}")
    elif before == after:
        click.echo(f"{where} is already at schema revision {after} (the newest)")
    else:
        click.echo(f"Upgraded {where} from schema revision {before} to {after}")
    if spec is not None and spec != NO_EMBEDDER:
        _record_embedder(dataclasses.replace(settings, embedder=spec))


def _check_embedder(spec: str) -> None:
    """Make the embedder ``spec`` names once, so that init fails before creating anything.

    Raises:
        click.ClickException: it cannot be made (the library's one line).

    """
    from loopctl_memory.embedders import embedder_from_spec
    from loopctl_memory.errors import LoopMemoryError

    try:
        embedder_from_spec(spec)
    except LoopMemoryError as exc:
        raise click.ClickException(f"{exc}; nothing was created or changed") from None


def _record_embedder(settings: Settings) -> None:
    """Open the store with ``settings.embedder``, which records it, and embed what waits."""
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

    async def work(store: SqlMemoryStore) -> tuple[str, int, int]:
        made = await store.embed_pending()
        named = store.embedder
        assert named is not None  # noqa: S101 - opened with it
        return named.name, named.dims, made

    name, dims, made = with_store(settings, work)
    made_text = f"; made the vectors of {counted(made, 'memory', 'memories')}" if made else ""
    click.echo(f"Recorded the embedder {name} ({dims} dims){made_text}")


@click.command(
    "migrate",
    epilog=example(f"{PROG} migrate --list", f"{PROG} migrate", f"{PROG} migrate --to base --yes"),
)
@click.option(
    "--to",
    "revision",
    metavar="REV",
    help="The revision to upgrade or downgrade to: an id, 'head' (the default) or 'base'.",
)
@click.option("--list", "list_only", is_flag=True, help="List the revisions; change nothing.")
@click.option("--yes", "-y", is_flag=True, help="Downgrade without asking.")
@click.pass_obj
def migrate_command(settings: Settings, revision: str | None, list_only: bool, yes: bool) -> None:
    """Upgrade (or downgrade) the database schema, or list the revisions."""
    from loopctl_memory import migrate

    context = click.get_current_context()
    if list_only:
        if revision is not None:
            raise click.UsageError("--list and --to do not go together", context)
        _list_revisions(settings)
        return
    try:
        wanted = migrate.resolve(revision or "head")
    except SchemaError as exc:
        raise click.BadParameter(str(exc), ctx=context, param_hint="'--to'") from None
    _refuse_read_only(settings, "migrate")
    target = settings.locate(create=True)
    where = settings.resolved().describe()
    if not yes:
        now = run_async(migrate.revision_of(target))
        if migrate.is_downgrade(now, wanted):
            confirm(
                f"Downgrade {where} from {now} to {wanted or 'base'}? "
                "What the newer revisions hold is dropped."
            )
    before, after = run_async(migrate.migrate_to(target, wanted or "base"))
    if before == after:
        click.echo(f"{where} is already at schema revision {after or 'base'}")
    else:
        click.echo(f"Migrated {where} from schema revision {before or 'base'} to {after or 'base'}")


def _list_revisions(settings: Settings) -> None:
    from loopctl_memory import migrate
    from loopctl_memory.rendering import console, revisions_table

    file = settings.sqlite_file()
    missing = file is not None and not file.exists()
    current = None if missing else run_async(migrate.revision_of(settings.target()))
    head = migrate.head()
    console().print(revisions_table(migrate.history(), current=current, head=head))
    where = settings.resolved().describe()
    if current is None:
        click.echo(f"{where} has no schema yet: `{PROG} init` creates it")
    elif current == head:
        click.echo(f"{where} is at {current}, the newest revision")
    else:
        click.echo(f"{where} is at {current}; `{PROG} migrate` brings it to {head}")
