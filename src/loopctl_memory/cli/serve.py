"""The command that serves the memory over HTTP to agents and people: ``serve``."""

from __future__ import annotations

import click

from loopctl_memory.cli.messages import example
from loopctl_memory.cli.settings import Settings, run_async
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.names import PROG

TOKEN_ENVVAR = "LOOPCTL_MEMORY_TOKEN"  # noqa: S105 - the variable's name, not a token


@click.command(
    "serve",
    epilog=example(
        f"{PROG} --db ~/agent-memory.db serve",
        f"{PROG} --read-only serve --port 9000",
        f"{PROG} serve --host 0.0.0.0  # with LOOPCTL_MEMORY_TOKEN set",
    ),
)
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="The address to listen on. Beyond loopback (127.0.0.1, ::1, localhost) a token is needed.",
)
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True)
@click.option(
    "--token",
    envvar=TOKEN_ENVVAR,
    show_envvar=True,
    help="The token every request must carry as 'Authorization: Bearer <token>' "
    "(at least 16 characters). Prefer the environment variable: a command line is seen by others.",
)
@click.pass_obj
def serve_command(settings: Settings, host: str, port: int, token: str | None) -> None:
    """Serve the memory over HTTP: MCP at /mcp for agents, a console at / for people.

    The console searches, shows each memory with its history, edits and deletes.
    Agents connect to http://HOST:PORT/mcp with MCP's streamable HTTP transport
    and get the six tools of `mcp`. Safe by default: only this machine can reach
    127.0.0.1; any other address needs --token, and then every request (MCP too)
    must carry it; requests from another site's pages are refused. --read-only
    serves everything but writes. Stop it with Ctrl-C.
    """
    from loopctl_memory.web.app import check_token, serve

    try:
        check_token(host, token)
    except InvalidArgumentError as exc:  # before anything is opened
        raise click.UsageError(str(exc)) from exc
    read_only = settings.read_only
    target = settings.locate(create=not read_only)

    where = settings.resolved().describe()

    def ready(url: str) -> None:
        click.echo(f"Serving {where} at {url} (MCP: {url}mcp). Ctrl-C stops.", err=True)

    run_async(
        serve(
            target,
            host=host,
            port=port,
            token=token,
            scope=settings.scope,
            read_only=read_only,
            ranking=settings.ranking,
            embedder=settings.embedder_option(),
            busy_timeout=settings.busy_timeout,
            ready=ready,
        )
    )
