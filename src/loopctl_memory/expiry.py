"""Expiry: memories that no read sees from a given time on.

A memory with ``expires_at`` is live before that time and expired from it on.
An expired memory is invisible at once to every read of every store:
``retrieve`` in every ranking, ``count``, ``get``, ``get_by_key``,
``iter_entries``, ``stats``, the CLI and the MCP server; and to ``update``,
``delete`` and ``forget``, which act on what a read sees. "Now" is the store's
clock (``open_store(clock=...)``), so tests need no sleeping. Like a filter,
expiry only takes memories out of what a read returns: until the expired rows
are deleted, BM25's statistics and the neighbours that give context are those
of every stored memory. ``sweep_expired()`` deletes them (the MCP server calls
it on a timer), and so does ``consolidate``, first.

A store opened with ``ttl`` gives each entry stored without an ``expires_at``
one: the time of the write plus ``ttl``. With ``refresh_on_read`` (which needs
``ttl``), ``retrieve``, ``get`` and ``get_by_key`` move the expiry of each
memory they return, if it has one, to the time of the read plus ``ttl``, as
LangGraph's ``TTLConfig(refresh_on_read=True)`` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.errors import InvalidArgumentError


def check_ttl(ttl: object) -> timedelta | None:
    """``ttl`` if it is None or a positive timedelta.

    Raises:
        InvalidArgumentError: it is neither.

    """
    if ttl is None:
        return None
    if not isinstance(ttl, timedelta):
        raise InvalidArgumentError(f"ttl must be a timedelta or None, not {type(ttl).__name__}")
    if ttl <= timedelta(0):
        raise InvalidArgumentError(f"ttl must be positive, not {ttl}")
    return ttl


def check_refresh(refresh_on_read: object, ttl: timedelta | None) -> bool:
    """``refresh_on_read`` if it is a bool that ``ttl`` allows.

    Raises:
        InvalidArgumentError: not a bool, or True without a ``ttl`` to refresh by.

    """
    if type(refresh_on_read) is not bool:
        raise InvalidArgumentError(
            f"refresh_on_read must be a bool, not {type(refresh_on_read).__name__}"
        )
    if refresh_on_read and ttl is None:
        raise InvalidArgumentError("refresh_on_read needs a ttl to refresh by")
    return refresh_on_read


def is_live(entry: MemoryEntry, now: datetime) -> bool:
    """Whether a read at ``now`` sees ``entry``."""
    return entry.expires_at is None or entry.expires_at > now


def any_expiring(entries: Iterable[MemoryEntry]) -> bool:
    """Whether any of ``entries`` has an expiry (else no read needs the clock)."""
    return any(entry.expires_at is not None for entry in entries)
