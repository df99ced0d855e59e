"""The SQL store's id lookups: short ids as the CLI shows them, and which ids are stored.

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`, kept apart so that
the store module holds the contract's operations.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable

from loopctl_memory import scopes as scope_names
from loopctl_memory.entry import MemoryEntry, check_key, id_range, shortest_id, validate_id
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.rows import entry_rows, removals, repository
from loopctl_memory.sql.store.part import StorePart


class IdLookups(StorePart):
    """``ids_with_prefix``, ``short_id``, ``existing_ids``, ``scopes_of``, lookups by key."""

    async def get_by_key(self, key: str) -> MemoryEntry | None:
        """The entry of the store's own scope holding ``key``, or None.

        See :mod:`loopctl_memory.keys`: storing an entry with a key replaces the
        one that held it.

        Raises:
            InvalidArgumentError: ``key`` is not a str of 1 to 1,024 characters.

        """
        found = await self._unit.read("get", self._keyed(key))
        return await self._refreshed(found)

    def _keyed(self, key: str) -> Callable[[Reader], MemoryEntry | None]:
        """The read of the entry of the store's own scope holding ``key`` (checked)."""
        key, name, clock = check_key(key), self._scope.name, self._shared.now_us
        return lambda reader: entry_rows.keyed_entry(reader, name, key, clock)

    @property
    def reads_here(self) -> bool:
        """Whether :meth:`get_by_key_here` can answer on the calling thread.

        Where the database is a SQLite file and reads write nothing (no
        ``refresh_on_read``): see :mod:`~loopctl_memory.sql.database.caller_lane`.
        """
        shared = self._shared
        refreshes = shared.refresh_on_read and shared.ttl is not None and not self._unit.read_only
        return self._unit.reads_here and not refreshes

    def get_by_key_here(self, key: str) -> MemoryEntry | None:
        """:meth:`get_by_key` on the calling thread, blocking it: for the blocking API.

        Only where :attr:`reads_here`; the same answer and errors as :meth:`get_by_key`.
        """
        return self._unit.read_here("get", self._keyed(key))

    async def delete_by_key(self, key: str) -> bool:
        """Delete the entry of the store's own scope holding ``key``; whether there was one."""
        key, name, clock = check_key(key), self._scope.name, self._shared.now_us
        stamp = self._shared.stamp("delete_by_key")
        return await self._unit.run(
            "delete", lambda c: removals.delete_keyed(c, name, key, clock, stamp), write=True
        )

    async def ids_with_prefix(self, prefix: str, limit: int = 2) -> list[uuid.UUID]:
        """Up to ``limit`` ids of the view whose hexadecimal form starts with ``prefix``.

        ``prefix`` is hexadecimal digits, dashes ignored, any case: a short id as
        the CLI shows it. A lookup of the unique id index.

        Raises:
            InvalidArgumentError: ``prefix`` is empty, longer than an id or not hexadecimal.

        """
        low, high = id_range(prefix)
        return await self._in_scope(
            "find ids",
            lambda c, ids: repository.ids_between(c, low, high, ids, limit),
            write=False,
        )

    async def short_id(self, entry_id: uuid.UUID) -> str:
        """The fewest leading hex digits (at least 8) of ``entry_id`` no other id in the view has.

        One lookup when 8 digits are unique, as they nearly always are (among a
        million ids, about one in 4,300 shares its first 8 digits with another);
        each further lookup skips to the first digit at which the ids found differ.
        :meth:`ids_with_prefix` finds the entry again by it.

        Raises:
            InvalidEntryError: ``entry_id`` is not a ``uuid.UUID``.

        """
        return await shortest_id(entry_id, self.ids_with_prefix)

    async def existing_ids(self, ids: Iterable[uuid.UUID]) -> set[uuid.UUID]:
        """Which of ``ids`` are already stored, in any scope: ids are unique across the store.

        Unlike :meth:`get`, it looks beyond the view's scopes, as a write would
        (an import skipping what it finds here cannot then clash). One read
        transaction, one lookup of the id index per 10,000 ids.

        Raises:
            InvalidEntryError: an id is not a ``uuid.UUID``.

        """
        wanted = [validate_id(entry_id) for entry_id in ids]
        if not wanted:
            return set()
        return await self._unit.run(
            "find stored ids", lambda c: repository.existing_ids(c, wanted), write=False
        )

    async def scopes_of(self, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, str]:
        """The scope of each of ``ids`` the view reads, relative to the view (``""``: its own).

        An id the view does not read (absent, in a scope outside it, expired) is
        left out. One read transaction: what a caller of :meth:`retrieve` on a
        view over descendants asks to know where each entry found lives.

        Raises:
            InvalidEntryError: an id is not a ``uuid.UUID``.

        """
        wanted = [validate_id(entry_id) for entry_id in ids]
        if not wanted:
            return {}
        base, view, clock = self._scope.name, self._scope, self._shared.now_us
        found = await self._unit.read(
            "find scopes", lambda r: entry_rows.scopes_of(r, wanted, view, clock)
        )
        return {entry_id: scope_names.relative(base, name) for entry_id, name in found.items()}
