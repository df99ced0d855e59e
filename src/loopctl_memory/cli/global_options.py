"""The global options, before the command or after it.

Each of ``--db``, ``--scope``, ``--read-only``, ``--ranking``, ``--embedder``,
``--busy-timeout`` and ``--debug`` is accepted before the command
(``loopctl-memory --db m.db mcp``) and after it (``loopctl-memory mcp --db m.db``),
with the same meaning; given in both places, the one after the command wins.
The command group reads the environment variables; a command's copy only
takes what is typed after it.
A command with an option of the same name of its own (``search --ranking``,
``init --embedder``) keeps its own.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import click

from loopctl_memory.cli.settings import Settings
from loopctl_memory.errors import LoopMemoryError
from loopctl_memory.names import (
    BUSY_TIMEOUT_ENVVAR,
    DB_ENVVAR,
    EMBEDDER_ENVVAR,
    RANKING_ENVVAR,
    SCOPE_ENVVAR,
)
from loopctl_memory.rankings import RANKINGS

_HELP = {
    "db": "The database: a SQLite file, ':memory:', or a URL "
    "(sqlite+aiosqlite:///..., postgresql+asyncpg://...). "
    "Default: memory.db in the user data directory.",
    "scope": "Work in this scope ('acme/support/agent-7'): its memories only; "
    "`export`, `stats` and `scopes` cover the scopes below it too. Default: the root.",
    "read_only": "Open the database without writing anything (a read-only file, mount or "
    "directory): reads work, writes are refused.",
    "ranking": "The ranking of `search` and of the MCP tool `recall`: 'bm25' (Lucene BM25; "
    "the default without an embedder), 'hybrid' (BM25 and cosine fused; the default with "
    "one), 'vector' (cosine of the embedder's vectors) or 'reference' (loopctl 0.1.0's "
    "score, the Python library's default). `search --ranking` chooses for one search.",
    "embedder": "The embedder that makes the vectors: 'sentence-transformers:MODEL', "
    "'fastembed:MODEL', 'openai:MODEL', 'ollama:MODEL' or 'python:MODULE:NAME'; "
    "'none' for no embedder. Default: the one `init --embedder` recorded in the database.",
    "busy_timeout": "Seconds to wait while other processes hold the database's write lock "
    "before giving up with 'database is locked' (default 5): more for a script beside "
    "busy writers.",
    "debug": "Show the full traceback of an error.",
}


def _options(*, on_group: bool) -> list[click.Option]:
    """The global options, as the group declares them or as a command repeats them."""

    def option(name: str, envvar: str | None = None, **settings: Any) -> click.Option:
        if on_group:
            settings |= {"envvar": envvar, "show_envvar": envvar is not None}
        else:
            settings |= {"expose_value": False, "callback": _typed_after_command}
        key = name.removeprefix("--").replace("-", "_")
        return click.Option([name], help=_HELP[key], **settings)

    return [
        option("--db", DB_ENVVAR, metavar="PATH|URL"),
        option("--scope", SCOPE_ENVVAR, metavar="NAME"),
        option("--read-only", is_flag=True),
        option("--ranking", RANKING_ENVVAR, type=click.Choice(RANKINGS)),
        option("--embedder", EMBEDDER_ENVVAR, metavar="SPEC"),
        option(
            "--busy-timeout",
            BUSY_TIMEOUT_ENVVAR,
            type=click.FloatRange(min=0),
            metavar="SECONDS",
        ),
        option("--debug", is_flag=True),
    ]


def add_to_group(group: click.Group) -> None:
    """Declare the global options on the command group (where the environment is read)."""
    group.params[:0] = _options(on_group=True)


def add_to_command(command: click.Command) -> None:
    """Let ``command`` take the global options after its name, unless it has one of that name."""
    own = {name for param in command.params for name in param.opts}
    command.params += [option for option in _options(on_group=False) if not own & set(option.opts)]


def check_scope(ctx: click.Context, scope: str) -> None:
    """Refuse a malformed ``--scope`` as a usage error naming the option."""
    from loopctl_memory.scopes import check_name

    try:
        check_name(scope)
    except LoopMemoryError as exc:
        raise click.BadParameter(str(exc), ctx=ctx, param_hint="'--scope'") from None


def _typed_after_command(ctx: click.Context, param: click.Parameter, value: Any) -> None:
    """A global option typed after the command: it replaces what the group was given."""
    if param.name is None or (
        ctx.get_parameter_source(param.name) is not click.core.ParameterSource.COMMANDLINE
    ):
        return
    root = ctx.find_root()
    settings = root.obj
    if not isinstance(settings, Settings):  # pragma: no cover - the group always sets it
        return
    if param.name == "scope" and value:
        check_scope(ctx, value)
    changes: dict[str, Any] = {param.name: value or None}
    if param.name in {"read_only", "debug"}:
        changes = {param.name: bool(value)}
    if param.name == "busy_timeout":
        changes = {param.name: value}  # 0 is a timeout, not "not given"
    if param.name == "db":
        changes["source"] = "--db" if value else "the default location"
    root.obj = ctx.obj = dataclasses.replace(settings, **changes)
