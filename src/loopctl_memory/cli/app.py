"""The ``loopctl-memory`` command group: its global options, its commands, its error lines.

Every failure is one ``Error:`` line on stderr and a non-zero exit status (2
for a usage error, 1 for anything else); ``--debug`` shows the traceback
instead.
"""

from __future__ import annotations

import errno
from typing import IO, Any, NoReturn

import click

from loopctl_memory.cli import (
    browse,
    entries,
    history,
    maintenance,
    mcp_stdio,
    schema,
    serve,
    transfer,
    vectors,
)
from loopctl_memory.cli.global_options import add_to_command, add_to_group, check_scope
from loopctl_memory.cli.messages import example, one_line
from loopctl_memory.cli.settings import Settings
from loopctl_memory.errors import (
    DatabaseBusyError,
    LoopMemoryError,
    SchemaBehindError,
    StorageError,
)
from loopctl_memory.names import DB_ENVVAR, PROG


class _UsageError(click.UsageError):
    """A usage error shown as one line that names the help to read."""

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``Error: <message> (see '<command> --help')`` on stderr."""
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {one_line(self.format_message())}{hint}", file=file, err=True)


def _reraise_usage(exc: click.UsageError) -> NoReturn:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError | _UsageError):
        raise exc
    raise _UsageError(exc.format_message(), exc.ctx) from None


def _for_people(exc: LoopMemoryError, settings: object) -> str:
    """A library error as the command line says it: in its options, not in Python's."""
    if isinstance(exc, SchemaBehindError) and isinstance(settings, Settings):
        where = settings.resolved().describe()
        if exc.revision is None:
            return f"{where} has no schema yet: `{PROG} init` creates it"
        return (
            f"{where} is at schema revision {exc.revision} and this version needs "
            f"{exc.needed}: `{PROG} migrate` upgrades it (back it up first)"
        )
    message = str(exc)
    busy = isinstance(exc, DatabaseBusyError)  # the database is right: it was busy
    if isinstance(exc, StorageError) and not busy and isinstance(settings, Settings):
        # Where the database came from, so that the user knows what to fix.
        message += f" (database from {settings.source}; check it or pass --db)"
    if busy:
        message += "; --busy-timeout SECONDS waits longer"
    return message


def _debug(ctx: click.Context) -> bool:
    """Whether ``--debug`` was given, before or after the command."""
    return bool(ctx.params.get("debug")) or (isinstance(ctx.obj, Settings) and ctx.obj.debug)


class _Cli(click.Group):
    """The command group: turns every failure into one line and an exit status."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: Any,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.UsageError as exc:
            _reraise_usage(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _reraise_usage(exc)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except LoopMemoryError as exc:
            if _debug(ctx):
                raise
            raise click.ClickException(one_line(_for_people(exc, ctx.obj))) from exc
        except OSError as exc:
            if _debug(ctx) or exc.errno == errno.EPIPE:
                raise
            where = f": {exc.filename}" if exc.filename is not None else ""
            raise click.ClickException(one_line(f"{exc.strerror or exc}{where}")) from exc
        except Exception as exc:
            if _debug(ctx):
                raise
            raise click.ClickException(
                one_line(f"unexpected {type(exc).__name__}: {exc}")
                + "; run again with --debug for the traceback"
            ) from exc


@click.group(
    name=PROG,
    cls=_Cli,
    epilog=example(
        f'{PROG} add "CI runs make test" --category fact --tag ci',
        f'{PROG} search "make test" --limit 5',
    ),
)
@click.version_option(package_name="loopctl-memory", prog_name=PROG)
@click.pass_context
def cli(
    ctx: click.Context,
    *,
    db: str | None,
    scope: str | None,
    read_only: bool,
    ranking: str | None,
    embedder: str | None,
    busy_timeout: float | None,
    debug: bool,
) -> None:
    """Durable memory for agent loops: store, search and maintain memories."""
    if scope:
        check_scope(ctx, scope)
    given = ctx.get_parameter_source("db")
    if not db:
        source = "the default location"
    elif given is click.core.ParameterSource.ENVIRONMENT:
        source = DB_ENVVAR
    else:
        source = "--db"
    ctx.obj = Settings(
        db=db or None,
        source=source,
        scope=scope or None,
        read_only=read_only,
        ranking=ranking or None,
        embedder=embedder or None,
        busy_timeout=busy_timeout,
        debug=debug,
    )


add_to_group(cli)
for command in (
    schema.init,
    schema.migrate_command,
    entries.add,
    entries.search,
    browse.list_command,
    entries.get,
    history.history_command,
    entries.delete,
    entries.update,
    maintenance.consolidate,
    maintenance.stats,
    maintenance.forget,
    maintenance.scopes,
    vectors.embed_pending,
    vectors.reembed,
    vectors.index,
    transfer.export_command,
    transfer.import_command,
    mcp_stdio.mcp,
    serve.serve_command,
):
    add_to_command(command)
    cli.add_command(command)


def main() -> None:
    """Run the command line (the ``loopctl-memory`` script and ``python -m loopctl_memory``)."""
    cli(prog_name=PROG)
