"""``loopctl-memory serve``: one HTTP server for agents (MCP at ``/mcp``) and people (a console).

:mod:`~loopctl_memory.web.app` assembles it; :mod:`~loopctl_memory.web.guard`
checks every request first; :mod:`~loopctl_memory.web.api` is the JSON API.
"""
