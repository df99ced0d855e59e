"""The schema's revisions: open fast at head, create new databases, upgrade with alembic.

The migrations live in the repository's ``migrations/`` and ship inside the
wheel as ``loopctl_memory/migrations`` (see :func:`script_location`), so this
works from an installed wheel in any working directory. Every function takes a
synchronous SQLAlchemy connection (use ``AsyncConnection.run_sync``) that is
not yet in a transaction; each runs in one transaction of its own.

Opening a database already at :data:`HEAD_REVISION` and creating a new one never
load alembic (a large part of a command's start-up); only upgrades, downgrades,
listings and the drift check do.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypeVar

from sqlalchemy import (
    Column,
    Connection,
    MetaData,
    PrimaryKeyConstraint,
    String,
    Table,
    insert,
    inspect,
    select,
)
from sqlalchemy.schema import CreateIndex, CreateTable, SetColumnComment, SetTableComment

from loopctl_memory.errors import SchemaBehindError, SchemaError
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.tables import index_state, metadata, scopes

T = TypeVar("T")

if TYPE_CHECKING:
    from alembic.config import Config
    from alembic.script import ScriptDirectory


def script_location() -> Path:
    """The migration scripts: ``migrations`` beside this package if there, else the repository's.

    A wheel ships them inside the package (``loopctl_memory/migrations``); an editable
    install runs the package from ``src/``, and they stay at the repository's top level.
    (Tested by env.py, not the directory: a checkout from before the move may keep an
    untracked ``src/loopctl_memory/migrations/__pycache__``.)
    """
    package = Path(__file__).resolve().parent
    shipped = package / "migrations"
    return shipped if (shipped / "env.py").is_file() else package.parents[1] / "migrations"


HEAD_REVISION = "0014"
"""The newest migration; a test checks it against the migration scripts."""

# alembic's own version table, exactly as alembic creates it (a test compares the two).
_version_table = Table(
    "alembic_version",
    MetaData(),
    Column("version_num", String(32), nullable=False),
    PrimaryKeyConstraint("version_num", name="alembic_version_pkc"),
)


@dataclass(frozen=True, slots=True)
class Revision:
    """One migration, for listings."""

    revision: str
    down_revision: str | None
    message: str


def _config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config()
    # A path, not package:resource; the ini value interpolates %, so a literal one is %%.
    config.set_main_option("script_location", str(script_location()).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _scripts() -> ScriptDirectory:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(_config())


def head() -> str:
    """The newest revision this version of the library knows."""
    revision = _scripts().get_current_head()
    if revision is None:  # pragma: no cover - the package always ships migrations
        raise SchemaError("the package ships no migrations")
    return revision


def history() -> list[Revision]:
    """Every known revision, oldest first."""
    return [
        Revision(
            revision=script.revision,
            down_revision=script.down_revision if isinstance(script.down_revision, str) else None,
            message=script.doc,
        )
        for script in reversed(list(_scripts().walk_revisions()))
    ]


def current(connection: Connection) -> str | None:
    """The revision the database is at, or None for a database without our schema."""
    with _transaction(connection, write=False):
        return _stored_revision(connection)


def ensure_schema(connection: Connection, *, upgrade: bool, create: bool | None = None) -> str:
    """Make sure the database is at head, creating or upgrading it when ``upgrade`` is true.

    ``create`` (default: as ``upgrade``): create the schema in a database without
    one; with ``create=True, upgrade=False`` a new database is created but an
    existing older one is never upgraded behind its owner's back.

    A database at head costs one read, without the write lock. A new one (no tables of
    ours) is created from the table definitions and stamped at head in one
    transaction, as alembic's cookbook does; an older one is upgraded by alembic.

    Returns:
        The revision the database is at afterwards (always head).

    Raises:
        SchemaError: the database is at an unknown or newer revision, holds
            tables that are not ours, or is older than head and ``upgrade`` is false.
            The database is left untouched.

    """
    with _transaction(connection, write=False):
        if _stored_revision(connection) == HEAD_REVISION:
            return HEAD_REVISION
    with backend_of(connection).migrating(connection), _transaction(connection, write=True):
        # Read again under the write lock: another process may have just created it.
        revision = _checked_revision(connection)
        if revision == HEAD_REVISION:
            return HEAD_REVISION
        creating = revision is None and create is not None
        if not (create if creating else upgrade):
            where = f"at revision {revision}" if revision else "not initialised"
            raise SchemaBehindError(
                f"the database is {where}; this version needs {HEAD_REVISION}: "
                "run `loopctl-memory migrate` (or open it with migrate=True)",
                revision=revision,
                needed=HEAD_REVISION,
            )
        if revision is None:
            _create(connection)
        else:
            _run_alembic(connection, "upgrade", "head")
    return HEAD_REVISION


def upgrade_to(connection: Connection, revision: str = "head") -> str | None:
    """Upgrade or downgrade the database to ``revision`` ("head", "base" or an id)."""
    with backend_of(connection).migrating(connection), _transaction(connection, write=True):
        now = _checked_revision(connection)
        target = None if revision == "base" else _scripts().get_revision(revision)
        target_id = target.revision if target is not None else None
        if target_id == now:
            return now
        ancestors = {
            script.revision for script in _scripts().iterate_revisions(now or "base", "base")
        }
        if target_id is None or target_id in ancestors:
            _run_alembic(connection, "downgrade", target_id or "base")
        else:
            _run_alembic(connection, "upgrade", target_id)
        return target_id


def check(connection: Connection) -> None:
    """Raise SchemaError if the tables and the migrations disagree (``alembic check``)."""
    from alembic import command
    from alembic.util.exc import AutogenerateDiffsDetected

    with _transaction(connection, write=False):
        try:
            command.check(_config(connection))
        except AutogenerateDiffsDetected as exc:
            raise SchemaError(f"the schema has drifted from the migrations: {exc}") from exc


def _stored_revision(connection: Connection) -> str | None:
    """What the version table says, read without alembic."""
    if not inspect(connection).has_table(_version_table.name):
        return None
    found = list(connection.execute(select(_version_table.c.version_num)).scalars())
    if len(found) > 1:
        raise SchemaError(
            f"the database records {len(found)} schema revisions at once "
            f"({', '.join(sorted(found))}); this version knows a single line of revisions"
        )
    return found[0] if found else None


def _checked_revision(connection: Connection) -> str | None:
    revision = _stored_revision(connection)
    if revision is None:
        strangers = [
            name for name in inspect(connection).get_table_names() if name != _version_table.name
        ]
        if strangers:
            raise SchemaError(
                f"not a loopctl-memory database: it has tables {sorted(strangers)[:5]} "
                "but no schema revision"
            )
        return None
    if revision != HEAD_REVISION and revision not in {known.revision for known in history()}:
        raise SchemaError(
            f"the database is at revision {revision!r}, which this version does not know "
            f"(newest known: {HEAD_REVISION}); upgrade loopctl-memory"
        )
    return revision


def _create(connection: Connection) -> None:
    """The schema at head from the table definitions, with the rows the migrations add."""
    # Table by table, each table's indexes by name: SQLAlchemy keeps a table's indexes in
    # a set, and the order SQLite holds them in decides how much work each write does,
    # which must not vary from one process to the next.
    dialect = connection.dialect
    separate_comments = dialect.supports_comments and not dialect.inline_comments
    for table in metadata.sorted_tables:
        connection.execute(CreateTable(table))
        for index in sorted(table.indexes, key=lambda index: str(index.name)):
            connection.execute(CreateIndex(index))
        if separate_comments:  # PostgreSQL: as create_all, one statement a comment
            if table.comment is not None:
                connection.execute(SetTableComment(table))
            for column in table.columns:
                if column.comment is not None:
                    connection.execute(SetColumnComment(column))
    _version_table.create(connection, checkfirst=True)  # left behind by a downgrade to base
    connection.execute(
        insert(index_state).values(id=1, indexed_through=0, store_id=str(uuid.uuid4()))
    )
    connection.execute(insert(scopes).values(id=0, name=""))
    connection.execute(insert(_version_table).values(version_num=HEAD_REVISION))


def _run_alembic(connection: Connection, action: Literal["upgrade", "downgrade"], to: str) -> None:
    from alembic import command
    from alembic.util.exc import CommandError

    step = command.upgrade if action == "upgrade" else command.downgrade
    try:
        step(_config(connection), to)
    except CommandError as exc:
        raise SchemaError(f"migration failed: {exc}") from exc


@contextmanager
def _transaction(connection: Connection, *, write: bool) -> Iterator[None]:
    """One transaction: commit on success, roll back on any exception."""
    backend = backend_of(connection)
    if write:
        connection.execution_options(**backend.begin_options(write=True))
    try:
        with connection.begin():
            yield
    finally:
        if write:
            connection.execution_options(**backend.begin_options(write=False))


# --- on a target, for tools such as the command line ----------------------------------


async def _on_target(target: str | os.PathLike[str], work: Callable[[Connection], T]) -> T:
    """Run ``work`` on a plain connection to ``target``: for migrations, never for entries."""
    from loopctl_memory.sql.database.boundary import translate_errors
    from loopctl_memory.sql.database.engine import (
        DEFAULT_BUSY_TIMEOUT,
        create_engine,
        resolve_target,
    )

    resolved = resolve_target(target)
    action = f"open {resolved.describe()}"
    with translate_errors(action):
        engine = create_engine(resolved, busy_timeout=DEFAULT_BUSY_TIMEOUT)
    try:
        with translate_errors(action):
            async with engine.connect() as connection:
                return await connection.run_sync(work)
    finally:
        await engine.dispose()


async def revision_of(target: str | os.PathLike[str]) -> str | None:
    """The revision the database at ``target`` is at; None if it has no schema (or is new).

    Raises:
        StorageError: the database cannot be read.

    """
    return await _on_target(target, current)


def resolve(revision: str) -> str | None:
    """A revision as :func:`migrate_to` takes it: an id, "head" or "base" (None).

    Raises:
        SchemaError: no such revision.

    """
    known = [script.revision for script in history()]
    if revision == "head":
        return known[-1]
    if revision == "base":
        return None
    if revision not in known:
        raise SchemaError(f"unknown revision {revision!r}; known: base, {', '.join(known)}, head")
    return revision


def is_downgrade(before: str | None, after: str | None) -> bool:
    """Whether going from ``before`` to ``after`` (both known, None for base) drops revisions."""
    known = [script.revision for script in history()]

    def position(revision: str | None) -> int:
        return known.index(revision) if revision in known else -1

    if before is not None and before not in known:
        return False  # an unknown revision: migrate_to refuses it with the reason
    return position(after) < position(before)


async def migrate_to(
    target: str | os.PathLike[str], revision: str = "head"
) -> tuple[str | None, str | None]:
    """Upgrade or downgrade the database at ``target``; return the revisions before and after.

    Raises:
        SchemaError: an unknown revision, or a database that is not ours.
        StorageError: the database cannot be opened or written.

    """
    wanted = resolve(revision)

    def work(connection: Connection) -> tuple[str | None, str | None]:
        return current(connection), upgrade_to(connection, wanted or "base")

    return await _on_target(target, work)
