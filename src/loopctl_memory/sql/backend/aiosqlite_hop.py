"""The one place that touches aiosqlite's private API: a whole transaction in one hop.

aiosqlite runs every call on a worker thread of its own, one round trip each;
a single store makes a dozen of them through SQLAlchemy. aiosqlite has no
public call that runs a function on that thread, so :func:`run_in_one_hop`
uses its ``Connection._execute`` and ``Connection._conn``
(``tests/unit/test_single_store.py`` pins the versions it is known on). Where
they are missing, :data:`AVAILABLE` is false and the store takes the public
path (SQLAlchemy's connection) instead.

:func:`connect` is ``aiosqlite.connect`` that also waits for the worker thread
to stop when opening fails (it reaches the thread through ``_thread`` where
the connection is not the thread itself, and skips the wait where neither is).
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import aiosqlite

T = TypeVar("T")

AVAILABLE: bool = callable(getattr(aiosqlite.Connection, "_execute", None))
"""Whether this aiosqlite has the private call :func:`run_in_one_hop` needs."""


async def run_in_one_hop(
    driver: aiosqlite.Connection, work: Callable[..., T], *arguments: Any
) -> T:
    """``work(connection, *arguments)`` on the driver's thread, ``connection`` its ``sqlite3`` one.

    Only where :data:`AVAILABLE`.
    """
    execute = cast("Callable[..., Awaitable[T]]", driver._execute)
    connection: sqlite3.Connection = driver._conn
    return await execute(work, connection, *arguments)


async def connect(*args: Any, **kwargs: Any) -> aiosqlite.Connection:
    """``aiosqlite.connect``, which on failure also waits for the worker thread to stop.

    When opening fails (a missing directory, a file it may not read), aiosqlite
    queues the stop of its worker thread without waiting for it; the thread then
    hands the stop's result to the event loop, and if the loop has closed
    meanwhile (``asyncio.run`` returning, a test ending) it dies with "Event loop
    is closed". Waiting here keeps the loop open until then. A file that opens
    but is not a database fails here too: its header is read before the
    connection is handed out (SQLite reads nothing until a first statement).
    """
    connection = aiosqlite.connect(*args, **kwargs)
    # Before 0.22 the connection is the thread itself.
    worker = (
        connection
        if isinstance(connection, threading.Thread)
        else getattr(connection, "_thread", None)
    )
    if isinstance(worker, threading.Thread):
        worker.daemon = True  # as SQLAlchemy makes the threads it starts: never keep the process
    try:
        opened = await connection
    except BaseException:
        await _stopped(worker)
        raise
    try:
        cursor = await opened.execute("PRAGMA schema_version")
        await cursor.close()
    except BaseException:
        await opened.close()
        await _stopped(worker)
        raise
    return opened


async def _stopped(worker: object) -> None:
    """Wait for a worker thread told to stop: it has nothing left to do but stop."""
    if isinstance(worker, threading.Thread):
        await asyncio.to_thread(worker.join, 1.0)
