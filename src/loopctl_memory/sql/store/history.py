"""The SQL store's ``history``: what happened to its memories (see :mod:`loopctl_memory.history`).

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`, kept apart so that
the store module holds the contract's operations.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta

from loopctl_memory.arguments import aware_in_utc
from loopctl_memory.entry import validate_id
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter, check_filter
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.history import EVENTS, HistoryEvent
from loopctl_memory.sql.history import read as history_read
from loopctl_memory.sql.store.part import StorePart


class HistoryOperations(StorePart):
    """``history``."""

    async def history(
        self,
        entry_id: uuid.UUID | None = None,
        *,
        filter: MemoryFilter | None = None,
        since: datetime | timedelta | None = None,
        events: Iterable[str] | None = None,
        limit: int | None = None,
        newest_first: bool = False,
    ) -> list[HistoryEvent]:
        """The events of the view's memories, oldest first: of one memory, or of those asked.

        ``entry_id``: only this memory's (found after it is gone too, by the
        event that removed it); ``filter``: only the memories it passes now
        (a memory removed passes no filter); ``since``: only the events at or
        after this time (or this long before now); ``events``: only these kinds
        (:data:`loopctl_memory.history.EVENTS`); ``limit``: at most this many
        (None: all); ``newest_first``: the newest first. Only the events of the
        view's scopes, each with its scope relative to the view. One read
        transaction.

        Raises:
            InvalidEntryError: ``entry_id`` is not a ``uuid.UUID``.
            InvalidArgumentError: ``since`` is a naive datetime or a negative
                timedelta, an unknown event, or ``limit`` is not an int >= 1.

        """
        question = history_read.Question(
            entry_id=None if entry_id is None else validate_id(entry_id),
            passes=check_filter(filter),
            since_us=self._since_us(since),
            kinds=_kinds(events),
            limit=_limit(limit),
            newest_first=_flag(newest_first),
        )
        base = self._scope.name
        return await self._in_scope(
            "history",
            lambda c, ids: history_read.read(c, ids, base, question),
            write=False,
        )

    async def history_of(
        self, entry_ids: Iterable[uuid.UUID]
    ) -> dict[uuid.UUID, list[HistoryEvent]]:
        """The events of each of ``entry_ids`` the view stores, oldest first, in one read.

        An id not stored in the view is left out (:meth:`history` finds a removed
        memory's). What ``export --history`` writes with each memory.

        Raises:
            InvalidEntryError: an id is not a ``uuid.UUID``.

        """
        wanted = [validate_id(entry_id) for entry_id in entry_ids]
        if not wanted:
            return {}
        base = self._scope.name
        return await self._in_scope(
            "history",
            lambda c, ids: history_read.read_each(c, ids, base, wanted),
            write=False,
        )

    def _since_us(self, since: datetime | timedelta | None) -> int | None:
        if since is None:
            return None
        if isinstance(since, timedelta):
            if since < timedelta(0):
                raise InvalidArgumentError(f"since must not be a negative timedelta: {since}")
            return self._shared.now_us() - since // MICROSECOND
        if not isinstance(since, datetime):
            raise InvalidArgumentError(
                f"since must be a datetime or a timedelta, not {type(since).__name__}"
            )
        return (aware_in_utc(since, "since") - EPOCH) // MICROSECOND


def _kinds(events: Iterable[str] | None) -> frozenset[str] | None:
    if events is None:
        return None
    if isinstance(events, str):
        events = [events]
    kinds = frozenset(events)
    unknown = sorted(str(kind) for kind in kinds - set(EVENTS))
    if unknown:
        raise InvalidArgumentError(
            f"unknown event {', '.join(map(repr, unknown))}: the events are {', '.join(EVENTS)}"
        )
    if not kinds:
        raise InvalidArgumentError("events must name at least one event (None: every one)")
    return kinds


def _limit(limit: int | None) -> int | None:
    if limit is None:
        return None
    if type(limit) is not int or limit < 1:
        raise InvalidArgumentError(f"limit must be an int >= 1 or None, not {limit!r}")
    return limit


def _flag(value: bool) -> bool:
    if type(value) is not bool:
        raise InvalidArgumentError(f"newest_first must be a bool, not {type(value).__name__}")
    return value
