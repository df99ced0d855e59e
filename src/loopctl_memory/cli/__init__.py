"""The ``loopctl-memory`` command line: a thin layer over the library.

Each command opens the store, calls one or two of its methods and renders the
result. Every failure is one ``Error:`` line on stderr and a non-zero exit
status (2 for a usage error, 1 for anything else); ``--debug`` shows the
traceback instead.

The command group (``cli``) and ``main`` load on first use, so that a module
of this package (the rendering the demo shares) imports without defining the
commands.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from loopctl_memory.cli.settings import default_database
from loopctl_memory.names import DB_ENVVAR, PROG, RANKING_ENVVAR, SCOPE_ENVVAR

if TYPE_CHECKING:
    from loopctl_memory.cli.app import cli, main

__all__ = [
    "DB_ENVVAR",
    "PROG",
    "RANKING_ENVVAR",
    "SCOPE_ENVVAR",
    "cli",
    "default_database",
    "main",
]

# SQLAlchemy, alembic and rich load inside the commands that use them: `--help` starts at once.


def __getattr__(name: str) -> object:
    """``cli`` and ``main``, from :mod:`loopctl_memory.cli.app` when first asked for."""
    if name in {"cli", "main"}:
        from loopctl_memory.cli import app

        return getattr(app, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
