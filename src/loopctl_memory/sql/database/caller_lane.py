"""The caller's lane: a point read on the calling thread, for the blocking API.

A blocking call otherwise crosses two threads: to the store's event loop, then
to the driver's thread (about 0.2 ms of a lookup by key's 0.5 ms, the rest
being the pool and the tasks around it). A lookup by key is one indexed
statement, so where the database is a SQLite file the blocking API reads it on
the caller's own thread instead, through one more SQLite connection of the
same file (:meth:`~loopctl_memory.sql.backend.Backend.caller_connection`),
opened on first use and shared by the threads that call (one read at a time,
as a lookup takes some tens of microseconds).

What it reads is what the store's own connections would: every statement runs
in a read transaction that sees every commit made before it began, the store's
own included (a blocking write returns after its commit). The connection is
SQLite's, opened and closed by SQLite like the store's others, so it takes
part in SQLite's locking of the file (closing it never drops a lock another
connection of the process holds), and it is set ``query_only``: it never writes.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from loopctl_memory.errors import StoreClosedError
from loopctl_memory.sql.backend import Backend, Reader

T = TypeVar("T")


class CallerLane:
    """Read transactions on the calling thread, through one connection opened on first use."""

    def __init__(self, connect: Callable[[], Any], backend: Backend, where: str) -> None:
        self._connect = connect
        self._backend = backend
        self._where = where
        self._connection: Any = None
        self._closed = False
        self._lock = threading.Lock()

    def read(self, answer: Callable[[Reader], T]) -> T:
        """``answer`` in one read transaction, on this thread; others wait their turn.

        Raises:
            StoreClosedError: the lane was closed (the store closed meanwhile).
            sqlite3.Error: as the driver raises it (the unit of work translates it).

        """
        with self._lock:
            if self._closed:
                raise StoreClosedError(f"the store at {self._where} is closed")
            connection = self._connection
            if connection is None:
                connection = self._connection = self._connect()
            return Reader.in_transaction(connection, self._backend, answer, memory=False)

    def close(self) -> None:
        """Close the connection (once any read under way has ended). Idempotent."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()
