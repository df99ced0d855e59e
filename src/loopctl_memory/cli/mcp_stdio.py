"""The command that serves the memory to an agent over MCP: ``mcp``."""

from __future__ import annotations

import click

from loopctl_memory.cli.messages import example
from loopctl_memory.cli.settings import Settings, run_async
from loopctl_memory.names import PROG


@click.command(
    epilog=example(
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
def mcp(settings: Settings, track_access: bool) -> None:
    """Serve the memory to an agent as MCP tools over stdio, until the client hangs up.

    The tools: remember, recall, update_memory, forget_memory, consolidate and
    memory_stats. A client may narrow --scope with a tool's `scope` argument,
    never leave it. `recall` ranks by hybrid where the database records an
    embedder (or --embedder gives one), else by bm25, unless the global
    --ranking or the call's `ranking` says otherwise. Only protocol goes to
    standard output; logs go to stderr. A database that cannot be opened is
    served all the same: every tool call answers why (a client would otherwise
    see only a closed connection). The database is created when the server
    starts (unless --read-only), so that a path that cannot hold one fails at
    once, not at the agent's first write.
    """
    from loopctl_memory.mcp_server.tools import serve, serve_unavailable

    read_only = settings.read_only
    try:
        target = settings.locate(create=not read_only)
    except click.ClickException as exc:  # served: the agent reads why in every answer
        run_async(serve_unavailable(exc.format_message()))
        raise
    run_async(
        serve(
            target,
            scope=settings.scope,
            track_access=track_access and not read_only,  # a stamp is a write
            read_only=read_only,
            ranking=settings.ranking,
            embedder=settings.embedder_option(),
            busy_timeout=settings.busy_timeout,
        )
    )
