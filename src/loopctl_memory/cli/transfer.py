"""The commands that move memories in and out as JSON Lines: ``export`` and ``import``."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from loopctl_memory.cli.messages import counted, example, one_line
from loopctl_memory.cli.settings import Settings, with_store
from loopctl_memory.jsonl import IMPORT_BATCH
from loopctl_memory.names import PROG

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore


class _Interrupted(click.ClickException):
    """Ctrl-C: the shell's status for an interrupted command (128 + SIGINT)."""

    exit_code = 130


def _not_the_database(settings: Settings, path: Path) -> None:
    """Refuse a JSON Lines file that is the database itself, or its ``-wal``, ``-shm`` or journal.

    Exporting there would replace the database; importing from there would
    open and close it beside SQLite, which drops SQLite's locks on it.
    """
    database = settings.sqlite_file()
    if database is None:
        return
    base = os.path.realpath(database)
    own = [base, *(f"{base}{suffix}" for suffix in ("-wal", "-shm", "-journal"))]
    if os.path.realpath(path) in own or any(_same_file(path, file) for file in own):
        raise click.ClickException(
            f"{path} is the database's own file ({database}): choose another file"
        )


def _same_file(one: Path, other: str) -> bool:
    try:
        return os.path.samefile(one, other)
    except OSError:  # either does not exist
        return False


@click.command(
    "export",
    epilog=example(f"{PROG} export -o memories.jsonl", f"{PROG} export | gzip > memories.jsonl.gz"),
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write to this file instead of standard output.",
)
@click.option(
    "--history",
    "with_history",
    is_flag=True,
    help='Also each memory\'s events (what `history ID` shows), under "history" '
    "on its line; `import` takes such lines, their history left out.",
)
@click.pass_obj
def export_command(settings: Settings, output: Path | None, with_history: bool) -> None:
    """Write every memory as JSON Lines, one entry a line, in the order they were stored.

    Every scope is written (with --scope: that scope and those below it), each
    line naming its scope; `import` puts each back in its place.
    """
    from loopctl_memory.jsonl import export_jsonl

    if output is not None and not output.parent.is_dir():
        raise click.ClickException(
            f"cannot write {output}: the directory {output.parent} does not exist"
        )
    if output is not None:
        _not_the_database(settings, output)

    target = sys.stdout.buffer if output is None else output
    written = with_store(
        settings,
        lambda store: export_jsonl(store, target, history=with_history),
        descendants=True,
    )
    if output is None:
        sys.stdout.buffer.flush()
    else:
        click.echo(f"Exported {counted(written, 'entry', 'entries')} to {output}")


@click.command(
    "import",
    epilog=example(
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
def import_command(settings: Settings, file: Path, batch_size: int, on_duplicate: str) -> None:
    """Store every entry of a JSON Lines FILE ('-' for standard input), as `export` writes them.

    Each batch of lines is one transaction: a bad line stops the import before
    its batch is stored, and the error names the line. So does a line whose id
    is already stored, unless --on-duplicate skip: then such lines are skipped
    and counted, and importing a file again finishes an import that stopped
    half way.
    """
    from loopctl_memory.errors import DuplicateEntryError
    from loopctl_memory.jsonl import ImportFailedError, ImportReport, OnDuplicate, import_jsonl
    from loopctl_memory.rendering import ImportProgress

    piped = str(file) == "-"
    if not piped:
        _not_the_database(settings, file)
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
            report = with_store(settings, work, create=True)
    except KeyboardInterrupt:
        raise _Interrupted(
            f"interrupted: at least {progress.stored} entries of {name} were stored (each "
            f"batch of {batch_size} whole or not at all); import it again with "
            "--on-duplicate skip to store the rest"
        ) from None
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
        raise click.ClickException(one_line(f"{name} {exc}: {advice}")) from exc
    skipped = f", skipped {report.skipped} already stored" if mode == "skip" else ""
    click.echo(f"Imported {counted(report.entries, 'entry', 'entries')} from {name}{skipped}")
