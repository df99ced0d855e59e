"""The ``loopctl-memory`` command line: a thin layer over the library.

Each command opens the store, calls one or two of its methods and renders the
result. Every failure is one ``Error:`` line on stderr and a non-zero exit
status (2 for a usage error, 1 for anything else); ``--debug`` shows the
traceback instead.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NoReturn, TypeVar

import click
import platformdirs

from loopctl_memory.entry import ConsolidationStats, MemoryCategory, MemoryEntry, id_range
from loopctl_memory.errors import InvalidEntryError, LoopMemoryError, SchemaError, StorageError
from loopctl_memory.jsonl import IMPORT_BATCH, entry_to_dict

if TYPE_CHECKING:
    from loopctl_memory.sql.engine import Target
    from loopctl_memory.sql.store import SqlMemoryStore

# SQLAlchemy, alembic and rich load inside the commands that use them: `--help` starts at once.

T = TypeVar("T")

PROG = "loopctl-memory"
DB_ENVVAR = "LOOPCTL_MEMORY_DB"
"""The environment variable naming the database when ``--db`` is not given."""
SCOPE_ENVVAR = "LOOPCTL_MEMORY_SCOPE"
"""The environment variable naming the scope when ``--scope`` is not given."""

_CATEGORIES = [category.value for category in MemoryCategory]


def default_database() -> Path:
    """``memory.db`` in the platform's user data directory for loopctl-memory."""
    return Path(platformdirs.user_data_dir("loopctl-memory")) / "memory.db"


def _example(*lines: str) -> str:
    """An epilog that ends ``--help`` with example invocations, kept as written."""
    return "\b\nExample:\n" + "\n".join(f"  {line}" for line in lines)


# --- where the database is, and opening it ---------------------------------------------


@dataclass(frozen=True, slots=True)
class _Settings:
    db: str | None
    source: str
    """Where ``db`` came from, for messages: "--db", the variable, or "the default"."""
    scope: str | None = None
    """The scope every command works in (None: the root)."""
    read_only: bool = False
    """Open the database without writing anything (``--read-only``)."""

    def target(self) -> str:
        """The database as given, or the default file."""
        return self.db if self.db is not None else str(default_database())

    def resolved(self) -> Target:
        """The database as the library sees it (never connects)."""
        from loopctl_memory.sql.engine import resolve_target

        return resolve_target(self.target())

    def sqlite_file(self) -> Path | None:
        """The SQLite file the database is, or None for ``:memory:`` and servers."""
        return self.resolved().sqlite_file

    def locate(self, *, create: bool) -> str:
        """The target to open; for ``create``, make the default directory if needed.

        Raises:
            click.ClickException: a SQLite file that does not exist and may not be created.

        """
        if self.db is None and create:
            default_database().parent.mkdir(parents=True, exist_ok=True)
        file = self.sqlite_file()
        if file is not None:
            if create and not file.parent.is_dir():
                raise click.ClickException(
                    f"cannot create {file}: the directory {file.parent} does not exist; "
                    f"create it or choose another database ({self.source})"
                )
            if not create and not file.exists():
                raise click.ClickException(
                    f"no database at {file} ({self.source}): "
                    f"create it with `{PROG} init`, or choose another with --db"
                )
        return self.target()

    def is_memory(self) -> bool:
        """Whether the database is a throwaway ``:memory:`` one."""
        return self.db is not None and self.resolved().is_memory


@contextlib.asynccontextmanager
async def _opened(
    settings: _Settings, *, create: bool, descendants: bool = False
) -> AsyncIterator[SqlMemoryStore]:
    """The store (or the view of ``--scope``, with ``descendants``), closed on exit.

    A new database gets the schema when ``create`` is true; an existing one is
    never upgraded behind the user's back: that is what ``migrate`` is for.
    """
    from loopctl_memory.sql.opening import open_store

    create = create and not settings.read_only
    target = settings.locate(create=create)
    async with open_store(
        target,
        migrate="create" if create or settings.is_memory() else False,
        read_only=settings.read_only,
    ) as store:
        view = store if settings.scope is None else store.scope(settings.scope)
        yield view.with_descendants() if descendants else view


def _with_store(
    settings: _Settings,
    work: Callable[[SqlMemoryStore], Awaitable[T]],
    *,
    create: bool = False,
    descendants: bool = False,
) -> T:
    """Open the store, run one library call on it, close it; return what the call returned."""

    async def run() -> T:
        async with _opened(settings, create=create, descendants=descendants) as store:
            return await work(store)

    return _run(run())


def _run(work: Coroutine[Any, Any, T]) -> T:
    import asyncio

    return asyncio.run(work)


# --- errors: one line each -------------------------------------------------------------


def _one_line(text: str) -> str:
    return " ".join(text.split())


class _UsageError(click.UsageError):
    """A usage error shown as one line that names the help to read."""

    def show(self, file: IO[Any] | None = None) -> None:
        """Print ``Error: <message> (see '<command> --help')`` on stderr."""
        hint = f" (see '{self.ctx.command_path} --help')" if self.ctx is not None else ""
        click.echo(f"Error: {_one_line(self.format_message())}{hint}", file=file, err=True)


def _reraise_usage(exc: click.UsageError) -> NoReturn:
    if isinstance(exc, click.exceptions.NoArgsIsHelpError | _UsageError):
        raise exc
    raise _UsageError(exc.format_message(), exc.ctx) from None


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
        debug = bool(ctx.params.get("debug"))
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _reraise_usage(exc)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except LoopMemoryError as exc:
            if debug:
                raise
            message = str(exc)
            if isinstance(exc, StorageError) and isinstance(ctx.obj, _Settings):
                # Where the database came from, so that the user knows what to fix.
                message += f" (database from {ctx.obj.source}; check it or pass --db)"
            raise click.ClickException(_one_line(message)) from exc
        except OSError as exc:
            if debug or exc.errno == errno.EPIPE:
                raise
            where = f": {exc.filename}" if exc.filename is not None else ""
            raise click.ClickException(_one_line(f"{exc.strerror or exc}{where}")) from exc
        except Exception as exc:
            if debug:
                raise
            raise click.ClickException(
                _one_line(f"unexpected {type(exc).__name__}: {exc}")
                + "; run again with --debug for the traceback"
            ) from exc


def _echo_json(value: object) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


# --- ids: full, or short ---------------------------------------------------------------

MIN_PREFIX_DIGITS = 4
"""The fewest hex digits of an id that ``get``, ``update`` and ``delete`` accept."""


def _memory_id(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str
) -> uuid.UUID | str:
    """A full id (any form ``uuid.UUID`` reads) as a UUID, or a prefix of its hex digits as given.

    A prefix is 4 to 31 hex digits, any case, dashes ignored; :func:`_resolve`
    looks it up in the store.
    """
    text = value.strip()
    with contextlib.suppress(ValueError):
        return uuid.UUID(text)
    try:
        id_range(text)  # the store's own rule for a prefix: hex digits, dashes ignored
        digits = len(text.replace("-", ""))
    except InvalidEntryError:
        digits = 0
    if digits < MIN_PREFIX_DIGITS:
        raise click.BadParameter(
            f"{value!r} is not a memory id: give the full id or at least "
            f"{MIN_PREFIX_DIGITS} of its leading hex digits (`{PROG} search` shows them)"
        )
    return text


async def _resolve(store: SqlMemoryStore, given: uuid.UUID | str) -> uuid.UUID | None:
    """The id ``given`` names in the store's view, or None; a full id is not looked up.

    Raises:
        click.ClickException: the prefix starts the ids of several memories.

    """
    if isinstance(given, uuid.UUID):
        return given
    found = await store.ids_with_prefix(given, limit=2)
    if len(found) > 1:
        raise click.ClickException(
            f"id {given} matches several memories; give more digits "
            f"(`{PROG} search` shows each id with enough of them)"
        )
    return found[0] if found else None


# --- the commands ----------------------------------------------------------------------


def _show_entry(entry: MemoryEntry, *, as_json: bool) -> None:
    """Every field of one entry: a table, or a JSON object."""
    if as_json:
        _echo_json(entry_to_dict(entry))
        return
    from loopctl_memory.views import console, entry_table

    console().print(entry_table(entry))


def _refuse_read_only(settings: _Settings, command: str) -> None:
    """A command that writes the schema says so under ``--read-only``."""
    if settings.read_only:
        raise click.UsageError(f"`{command}` writes the database's schema: not with --read-only")


@click.group(
    name=PROG,
    cls=_Cli,
    epilog=_example(
        f'{PROG} add "CI runs make test" --category fact --tag ci',
        f'{PROG} search "make test" --limit 5',
    ),
)
@click.option(
    "--db",
    metavar="PATH|URL",
    envvar=DB_ENVVAR,
    show_envvar=True,
    help="The database: a SQLite file, ':memory:', or a URL "
    "(sqlite+aiosqlite:///..., postgresql+asyncpg://...). "
    "Default: memory.db in the user data directory.",
)
@click.option(
    "--scope",
    metavar="NAME",
    envvar=SCOPE_ENVVAR,
    show_envvar=True,
    help="Work in this scope ('acme/support/agent-7'): its memories only; "
    "`export`, `stats` and `scopes` cover the scopes below it too. Default: the root.",
)
@click.option(
    "--read-only",
    is_flag=True,
    help="Open the database without writing anything (a read-only file, mount or "
    "directory): reads work, writes are refused.",
)
@click.option("--debug", is_flag=True, help="Show the full traceback of an error.")
@click.version_option(package_name="loopctl-memory", prog_name=PROG)
@click.pass_context
def cli(
    ctx: click.Context, db: str | None, scope: str | None, read_only: bool, debug: bool
) -> None:
    """Durable memory for agent loops: store, search and maintain memories."""
    del debug  # read by _Cli.invoke, which handles the errors
    if scope:
        from loopctl_memory.scopes import check_name

        try:
            check_name(scope)
        except LoopMemoryError as exc:
            raise click.BadParameter(str(exc), ctx=ctx, param_hint="'--scope'") from None
    given = ctx.get_parameter_source("db")
    if not db:
        source = "the default location"
    elif given is click.core.ParameterSource.ENVIRONMENT:
        source = DB_ENVVAR
    else:
        source = "--db"
    ctx.obj = _Settings(db=db or None, source=source, scope=scope or None, read_only=read_only)


@cli.command(epilog=_example(f"{PROG} init", f"{PROG} --db ./agent.db init"))
@click.pass_obj
def init(settings: _Settings) -> None:
    """Create the database, or bring its schema to the newest revision."""
    from loopctl_memory import migrate

    _refuse_read_only(settings, "init")
    before, after = _run(migrate.migrate_to(settings.locate(create=True), "head"))
    where = settings.resolved().describe()
    if before is None:
        click.echo(f"Created {where} at schema revision {after}")
    elif before == after:
        click.echo(f"{where} is already at schema revision {after} (the newest)")
    else:
        click.echo(f"Upgraded {where} from schema revision {before} to {after}")


@cli.command(
    "migrate",
    epilog=_example(f"{PROG} migrate --list", f"{PROG} migrate", f"{PROG} migrate --to base --yes"),
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
def migrate_command(settings: _Settings, revision: str | None, list_only: bool, yes: bool) -> None:
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
        now = _run(migrate.revision_of(target))
        if migrate.is_downgrade(now, wanted):
            _confirm(
                f"Downgrade {where} from {now} to {wanted or 'base'}? "
                "What the newer revisions hold is dropped."
            )
    before, after = _run(migrate.migrate_to(target, wanted or "base"))
    if before == after:
        click.echo(f"{where} is already at schema revision {after or 'base'}")
    else:
        click.echo(f"Migrated {where} from schema revision {before or 'base'} to {after or 'base'}")


def _list_revisions(settings: _Settings) -> None:
    from loopctl_memory import migrate
    from loopctl_memory.views import console, revisions_table

    file = settings.sqlite_file()
    missing = file is not None and not file.exists()
    current = None if missing else _run(migrate.revision_of(settings.target()))
    head = migrate.head()
    console().print(revisions_table(migrate.history(), current=current, head=head))
    where = settings.resolved().describe()
    if current is None:
        click.echo(f"{where} has no schema yet: `{PROG} init` creates it")
    elif current == head:
        click.echo(f"{where} is at {current}, the newest revision")
    else:
        click.echo(f"{where} is at {current}; `{PROG} migrate` brings it to {head}")


@cli.command(
    epilog=_example(
        f'{PROG} add "pytest -x stops at the first failure" --category fact --tag pytest',
        f'{PROG} add "database is locked: use BEGIN IMMEDIATE" -c error_pattern -r 0.9 --validated',
    )
)
@click.argument("text")
@click.option(
    "--category", "-c", required=True, type=click.Choice(_CATEGORIES), help="What kind of memory."
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
    settings: _Settings,
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

    _with_store(settings, lambda store: store.store(entry), create=True)
    click.echo(str(entry.id))


@cli.command(
    epilog=_example(f'{PROG} search "database is locked"', f"{PROG} search pytest -n 3 --json")
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
def search(settings: _Settings, query: str, limit: int, as_json: bool) -> None:
    """Show the memories that best match QUERY, best first, as the agent would see them.

    Each comes with its score and its short id: the fewest leading hex digits
    (at least 8) that no other memory's id starts with, which `get`, `update`
    and `delete` accept.
    """
    from loopctl_memory.views import SearchResult

    async def work(store: SqlMemoryStore) -> list[SearchResult]:
        scored = await store.retrieve_scored(query, limit)
        return [  # the JSON has the full ids: no short ids to look up
            SearchResult(entry, score, "" if as_json else await store.short_id(entry.id))
            for entry, score in scored
        ]

    found = _with_store(settings, work)
    if as_json:
        _echo_json([entry_to_dict(result.entry) | {"score": result.score} for result in found])
    elif not found:
        click.echo("No memories stored.", err=True)
    else:
        from loopctl_memory.views import SearchResults, console

        console().print(SearchResults(found))


@cli.command(
    epilog=_example(
        f"{PROG} get 3f2b6c1e",
        f"{PROG} get 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --json",
    )
)
@click.argument("given", metavar="ID", callback=_memory_id)
@click.option("--json", "as_json", is_flag=True, help="Print the entry as JSON.")
@click.pass_obj
def get(settings: _Settings, given: uuid.UUID | str, as_json: bool) -> None:
    """Show every field of the memory with this ID (the full id, or a short id from `search`)."""

    async def work(store: SqlMemoryStore) -> MemoryEntry | None:
        entry_id = await _resolve(store, given)
        return None if entry_id is None else await store.get(entry_id)

    found = _with_store(settings, work)
    if found is None:
        raise click.ClickException(f"no memory with id {given}; `{PROG} search` shows the ids")
    _show_entry(found, as_json=as_json)


@cli.command(
    epilog=_example(
        f"{PROG} delete 3f2b6c1e", f"{PROG} delete 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b"
    )
)
@click.argument("given", metavar="ID", callback=_memory_id)
@click.pass_obj
def delete(settings: _Settings, given: uuid.UUID | str) -> None:
    """Delete the memory with this ID (the full id, or a short id from `search`)."""

    async def work(store: SqlMemoryStore) -> uuid.UUID | None:
        entry_id = await _resolve(store, given)
        return entry_id if entry_id is not None and await store.delete(entry_id) else None

    deleted = _with_store(settings, work)
    if deleted is None:
        raise click.ClickException(f"no memory with id {given}; nothing was deleted")
    click.echo(f"Deleted {deleted}")


def _where(store: SqlMemoryStore) -> str:
    """The store, and its scope when it is not the root, for messages."""
    scope = store.scope_name
    return f"{store.target} (scope {scope})" if scope else store.target


def _confirm(question: str) -> None:
    """Ask on stderr; stop with exit status 1 unless the answer is yes."""
    try:
        agreed = click.confirm(question, err=True)
    except click.Abort:
        click.echo(err=True)  # the question is still on its line
        raise click.ClickException(
            "no answer to the confirmation question (no terminal?): nothing was changed; "
            "pass --yes to go ahead without asking"
        ) from None
    if not agreed:
        click.echo("Aborted: nothing was changed.", err=True)
        raise click.exceptions.Exit(1)


def _duration(
    _ctx: click.Context | None, _param: click.Parameter | None, value: str | None
) -> timedelta | None:
    """``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or a sum: ``1d12h``) as a timedelta."""
    if value is None:
        return None
    units = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
    parts = re.fullmatch(r"(?:\d+(?:\.\d+)?[wdhms])+", value.strip())
    if parts is None:
        raise click.BadParameter(
            f"{value!r} is not a duration such as 30d, 12h, 90m, 45s, 2w or 1d12h"
        )
    seconds = sum(
        float(number) * units[unit]
        for number, unit in re.findall(r"(\d+(?:\.\d+)?)([wdhms])", value)
    )
    return timedelta(seconds=seconds)


@cli.command(
    epilog=_example(
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
    callback=_duration,
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
    settings: _Settings,
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
            _confirm(f"{what} of {_where(store)} ({total} stored){then}?")
        return _where(store), await store.consolidate(config, vacuum=vacuum)

    where, stats = _with_store(settings, work)
    if as_json:
        _echo_json(asdict(stats))
    else:
        from loopctl_memory.views import console, consolidation_view

        console().print(consolidation_view(where, stats))


@cli.command(epilog=_example(f"{PROG} stats", f"{PROG} --db ./agent.db stats --json"))
@click.option("--json", "as_json", is_flag=True, help="Print the statistics as JSON.")
@click.pass_obj
def stats(settings: _Settings, as_json: bool) -> None:
    """Show how many memories there are, by category and relevance, and where they live."""
    from loopctl_memory.views import StoreStats, console, database_size, stats_view

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
        )

    found = _with_store(settings, work)
    if as_json:
        _echo_json(found.to_json())
    else:
        console().print(stats_view(found))


@cli.command(
    "export",
    epilog=_example(
        f"{PROG} export -o memories.jsonl", f"{PROG} export | gzip > memories.jsonl.gz"
    ),
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of standard output.",
)
@click.pass_obj
def export_command(settings: _Settings, output: Path | None) -> None:
    """Write every memory as JSON Lines, one entry a line, in the order they were stored.

    Every scope is written (with --scope: that scope and those below it), each
    line naming its scope; `import` puts each back in its place.
    """
    from loopctl_memory.jsonl import export_jsonl

    if output is not None and not output.parent.is_dir():
        raise click.ClickException(
            f"cannot write {output}: the directory {output.parent} does not exist"
        )

    target = sys.stdout.buffer if output is None else output
    written = _with_store(settings, lambda store: export_jsonl(store, target), descendants=True)
    if output is None:
        sys.stdout.buffer.flush()
    else:
        click.echo(f"Exported {written} entries to {output}")


@cli.command(
    "import",
    epilog=_example(
        f"{PROG} import memories.jsonl",
        f"{PROG} import --on-duplicate skip memories.jsonl",
        f"tail -n +5001 memories.jsonl | {PROG} import -",
    ),
)
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    default=IMPORT_BATCH,
    show_default=True,
    help="Entries stored per transaction.",
)
@click.option(
    "--on-duplicate",
    type=click.Choice(["fail", "skip"]),
    default="fail",
    show_default=True,
    help="A line whose id is already stored (in any scope) or on an earlier line: "
    "stop the import there, or skip the line.",
)
@click.pass_obj
def import_command(settings: _Settings, file: Path, batch_size: int, on_duplicate: str) -> None:
    """Store every entry of a JSON Lines FILE ('-' for standard input), as `export` writes them.

    Each batch of lines is one transaction: a bad line stops the import before
    its batch is stored, and the error names the line. So does a line whose id
    is already stored, unless --on-duplicate skip: then such lines are skipped
    and counted, and importing a file again finishes an import that stopped
    half way.
    """
    from loopctl_memory.errors import DuplicateEntryError
    from loopctl_memory.jsonl import ImportFailedError, ImportReport, OnDuplicate, import_jsonl
    from loopctl_memory.views import ImportProgress

    piped = str(file) == "-"
    name = "standard input" if piped else str(file)
    progress = ImportProgress(None if piped else file.stat().st_size)
    mode: OnDuplicate = "skip" if on_duplicate == "skip" else "fail"

    def work(store: SqlMemoryStore) -> Awaitable[ImportReport]:
        source = sys.stdin.buffer if piped else file
        return import_jsonl(
            store, source, batch_size=batch_size, on_progress=progress.advance, on_duplicate=mode
        )

    try:
        with progress:
            report = _with_store(settings, work, create=True)
    except ImportFailedError as exc:
        duplicate = isinstance(exc.__cause__, DuplicateEntryError)
        if duplicate and mode == "fail":
            advice = "to skip the lines whose id is already stored, import it again"
            advice += " with --on-duplicate skip"
        elif duplicate:
            advice = "another writer stored the same ids meanwhile; import it again"
            advice += " with --on-duplicate skip"
        elif mode == "skip":
            advice = "fix the input and import it again with --on-duplicate skip"
        elif not exc.imported:
            advice = "fix the input and import it again"
        elif piped:
            advice = f"fix the input and import its lines from {exc.resume_line} on"
        else:
            advice = f"fix the file, then `tail -n +{exc.resume_line} {file} | {PROG} import -`"
        raise click.ClickException(_one_line(f"{name} {exc}: {advice}")) from exc
    skipped = f", skipped {report.skipped} already stored" if mode == "skip" else ""
    click.echo(f"Imported {report.entries} entries from {name}{skipped}")


@cli.command(
    epilog=_example(
        f"{PROG} update 3f2b6c1e --relevance 0.9 --validated",
        f'{PROG} update 3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b --text "use BEGIN IMMEDIATE"',
    )
)
@click.argument("given", metavar="ID", callback=_memory_id)
@click.option("--text", help="The new memory text.")
@click.option("--category", "-c", type=click.Choice(_CATEGORIES), help="The new category.")
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
    settings: _Settings,
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
        entry_id = await _resolve(store, given)
        return None if entry_id is None else await store.update(entry_id, **changes)

    found = _with_store(settings, work)
    if found is None:
        raise click.ClickException(f"no memory with id {given}; nothing was changed")
    _show_entry(found, as_json=as_json)


@cli.command(
    epilog=_example(
        f"{PROG} forget --older-than 30d --yes",
        f"{PROG} forget --older-than 7d --category working",
        f"{PROG} --scope acme/agent-7 forget --everything --yes",
    )
)
@click.option(
    "--older-than",
    metavar="DURATION",
    callback=_duration,
    help="Memories created longer ago than this (30d, 12h, 2w, ...).",
)
@click.option("--category", "-c", type=click.Choice(_CATEGORIES), help="Memories of this category.")
@click.option(
    "--below", type=click.FloatRange(0.0, 1.0), help="Memories whose relevance is below this."
)
@click.option("--everything", is_flag=True, help="Every memory (of the scope), said explicitly.")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def forget(
    settings: _Settings,
    *,
    older_than: timedelta | None,
    category: str | None,
    below: float | None,
    everything: bool,
    yes: bool,
) -> None:
    """Delete the memories that meet every condition given."""
    if older_than is None and category is None and below is None and not everything:
        raise click.UsageError(
            "say what to forget: --older-than, --category, --below, or --everything"
        )

    async def work(store: SqlMemoryStore) -> tuple[str, int]:
        if not yes:
            conditions = [
                f"created more than {older_than} ago" if older_than is not None else "",
                f"of category {category}" if category is not None else "",
                f"with relevance below {below}" if below is not None else "",
            ]
            which = ", ".join(part for part in conditions if part) or "every memory"
            _confirm(f"Delete the memories {which} from {_where(store)}?")
        forgotten = await store.forget(
            older_than=older_than, category=category, below=below, everything=everything
        )
        return _where(store), forgotten

    where, forgotten = _with_store(settings, work)
    click.echo(f"Forgot {forgotten} memories in {where}")


@cli.command(epilog=_example(f"{PROG} scopes", f"{PROG} --scope acme scopes --json"))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON object of name: count.")
@click.pass_obj
def scopes(settings: _Settings, as_json: bool) -> None:
    """List the scopes that hold memories (the root is ''), with how many each holds."""
    found = _with_store(settings, lambda store: store.scopes())
    if as_json:
        _echo_json(dict(found))
        return
    from loopctl_memory.views import console, scopes_table

    console().print(scopes_table(found))


@cli.command(
    epilog=_example(
        f"{PROG} --db ~/agent-memory.db mcp",
        f"{PROG} --scope acme/agent-7 mcp --no-track-access",
    )
)
@click.option(
    "--track-access/--no-track-access",
    default=True,
    show_default=True,
    help="Stamp the memories `recall` returns (access count and time), "
    "which full consolidation uses to keep what is used.",
)
@click.pass_obj
def mcp(settings: _Settings, track_access: bool) -> None:
    """Serve the memory to an agent as MCP tools over stdio, until the client hangs up.

    The tools: remember, recall, update_memory, forget_memory, consolidate and
    memory_stats. A client may narrow --scope with a tool's `scope` argument,
    never leave it. Only protocol goes to standard output; logs go to stderr.
    """
    from loopctl_memory.mcp_server import serve

    read_only = settings.read_only
    target = settings.locate(create=not read_only)
    _run(
        serve(
            target,
            scope=settings.scope,
            track_access=track_access and not read_only,  # a stamp is a write
            read_only=read_only,
        )
    )


def main() -> None:
    """Run the command line (the ``loopctl-memory`` script and ``python -m loopctl_memory``)."""
    cli(prog_name=PROG)
