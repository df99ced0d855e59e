"""The database boundary: driver and SQLAlchemy errors become our own, once, here."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import exc as sa_exc

from loopctl_memory.errors import (
    DatabaseBusyError,
    DuplicateEntryError,
    LoopMemoryError,
    StorageError,
)

_DUPLICATE_ID_MARKERS = ("uq_entries_id", "entries.id")
_KEY_MARKERS = ("uq_entries_scope_id_key", "entries.scope_id, entries.key")


KEY_RACE_ATTEMPTS = 8
"""How often a write whose key another write took meanwhile is tried (PostgreSQL)."""


class KeyRaceError(StorageError):
    """Another transaction stored an entry with a key this write gives meanwhile.

    Only where writers run at once (PostgreSQL): the write is tried again, and
    then replaces that entry.
    """


@contextmanager
def translate_errors(action: str) -> Iterator[None]:
    """Re-raise any database error inside the block as a LoopMemoryError.

    Args:
        action: what was being done, for the message ("store", "retrieve", ...).

    Raises:
        DuplicateEntryError: a unique violation on the entry id.
        StorageError: anything else the database or driver refused (cause chained).

    """
    try:
        yield
    except LoopMemoryError:
        raise
    except (sa_exc.IntegrityError, sqlite3.IntegrityError) as exc:
        message = str(exc.orig if isinstance(exc, sa_exc.IntegrityError) else exc)
        if any(marker in message for marker in _DUPLICATE_ID_MARKERS):
            raise DuplicateEntryError(f"{action}: an entry with this id is already stored") from exc
        if any(marker in message for marker in _KEY_MARKERS):
            raise KeyRaceError(f"{action}: another write took one of its keys; try again") from exc
        raise StorageError(f"{action}: the database refused the data: {message}") from exc
    except sa_exc.DBAPIError as exc:
        raise _refused(action, _describe(exc.orig)) from exc
    except (sa_exc.SQLAlchemyError, sqlite3.Error, OSError) as exc:
        raise _refused(action, _describe(exc)) from exc


def _refused(action: str, described: str) -> StorageError:
    if described in _BUSY:
        return DatabaseBusyError(
            f"{action} failed: {described}: another connection kept it busy past the busy "
            "timeout; nothing was done, try again"
        )
    return StorageError(f"{action} failed: {described}")


_BUSY = frozenset({"database is locked", "database table is locked"})
"""SQLite's words when another connection held the database past the busy timeout."""


def _describe(error: BaseException | None) -> str:
    text = str(error).strip() if error is not None else ""
    return text.splitlines()[0] if text else type(error).__name__
