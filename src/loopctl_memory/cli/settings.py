"""Where a command's database is, and opening the store there for one command."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click
import platformdirs

from loopctl_memory.names import NO_EMBEDDER, PROG

if TYPE_CHECKING:
    from loopctl_memory.sql.database.engine import Target
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

T = TypeVar("T")


def default_database() -> Path:
    """``memory.db`` in the platform's user data directory for loopctl-memory."""
    return Path(platformdirs.user_data_dir("loopctl-memory")) / "memory.db"


@dataclass(frozen=True, slots=True)
class Settings:
    """The global options every command works with: the database, scope, read-only, ranking."""

    db: str | None
    source: str
    """Where ``db`` came from, for messages: "--db", the variable, or "the default"."""
    scope: str | None = None
    """The scope every command works in (None: the root)."""
    read_only: bool = False
    """Open the database without writing anything (``--read-only``)."""
    ranking: str | None = None
    """The default ranking ``--ranking`` chose (None: not given, each command keeps its own)."""
    embedder: str | None = None
    """``--embedder``'s spec, or ``none`` (None: not given, the one the store recorded)."""
    busy_timeout: float | None = None
    """Seconds to wait for another process's lock (``--busy-timeout``; None: the library's)."""
    debug: bool = False
    """Show the traceback of an error (``--debug``)."""

    def embedder_option(self) -> str | None:
        """The ``embedder`` option of ``open_store``: the spec given, none, or the recorded one."""
        from loopctl_memory.sql.opening import RECORDED

        if self.embedder is None:
            return RECORDED
        return None if self.embedder == NO_EMBEDDER else self.embedder

    def target(self) -> str:
        """The database as given, or the default file."""
        return self.db if self.db is not None else str(default_database())

    def resolved(self) -> Target:
        """The database as the library sees it (never connects)."""
        from loopctl_memory.sql.database.engine import resolve_target

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
    settings: Settings, *, create: bool, descendants: bool = False, embedder: bool = True
) -> AsyncIterator[SqlMemoryStore]:
    """The store (or the view of ``--scope``, with ``descendants``), closed on exit.

    Its default ranking is ``--ranking``'s when given, else the library's. Its
    embedder is ``--embedder``'s, else the one the store recorded; with
    ``embedder`` false, none (``reembed`` replaces it without making it).

    A new database gets the schema when ``create`` is true; an existing one is
    never upgraded behind the user's back: that is what ``migrate`` is for.
    """
    from loopctl_memory.sql.opening import OpenOptions, open_store

    create = create and not settings.read_only
    target = settings.locate(create=create)
    options = OpenOptions(
        migrate="create" if create or settings.is_memory() else False,
        read_only=settings.read_only,
    )
    if settings.ranking is not None:
        options["ranking"] = settings.ranking
    if settings.busy_timeout is not None:
        options["busy_timeout"] = settings.busy_timeout
    if embedder:
        options["embedder"] = settings.embedder_option()
    async with open_store(target, **options) as store:
        view = store if settings.scope is None else store.scope(settings.scope)
        yield view.with_descendants() if descendants else view


def with_store(
    settings: Settings,
    work: Callable[[SqlMemoryStore], Awaitable[T]],
    *,
    create: bool = False,
    descendants: bool = False,
    embedder: bool = True,
) -> T:
    """Open the store, run one library call on it, close it; return what the call returned.

    ``embedder`` false: without one, whatever ``--embedder`` or the store say.
    """

    async def run() -> T:
        async with _opened(
            settings, create=create, descendants=descendants, embedder=embedder
        ) as store:
            return await work(store)

    return run_async(run())


def need_embedder(store: SqlMemoryStore) -> None:
    """Refuse a store opened without an embedder, saying how to give it one.

    Raises:
        click.ClickException: it has none.

    """
    if store.embedder is None:
        raise click.ClickException(
            "the database records no embedder: pass --embedder SPEC, or record one with "
            f"`{PROG} init --embedder SPEC`"
        )


def run_async(work: Coroutine[Any, Any, T]) -> T:
    """Run ``work`` to its end in a new event loop (asyncio loads only when a command runs)."""
    import asyncio

    return asyncio.run(work)
