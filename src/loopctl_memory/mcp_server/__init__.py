"""The memory served to agents as Model Context Protocol tools (``loopctl-memory mcp``).

:func:`serve` opens a store and serves it over stdio; :func:`build_server` gives
the SDK server whose tools work on a store. It is not named ``mcp``: wherever
``loopctl_memory``'s own directory is on ``sys.path`` (``python -m`` run from
inside it), a package of that name would hide the MCP SDK.
"""

from loopctl_memory.mcp_server.tools import build_server, serve

__all__ = ["build_server", "serve"]
