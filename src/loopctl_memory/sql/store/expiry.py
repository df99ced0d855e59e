"""The SQL store's expiry: the store's default ttl on writes, and ``sweep_expired``.

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`; reads leave expired
entries out through the view (:class:`~loopctl_memory.sql.rows.scope_rows.ScopeIds`)
and the retrieval mask, and refresh what they return in
:meth:`StorePart._refresh`. See :mod:`loopctl_memory.expiry`.
"""

from __future__ import annotations

from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.rows import removals
from loopctl_memory.sql.store.part import StorePart


async def _is_due(now_us: int | None) -> bool:
    return now_us is not None


class ExpiryOperations(StorePart):
    """``sweep_expired``, and the expiry a write gives entries that have none."""

    async def sweep_expired(self) -> int:
        """Delete the view's entries that have expired; return how many.

        Expired entries are invisible to reads already; this gives their room
        back. A long-running process calls it now and then (the MCP server does,
        on a timer); ``consolidate`` does it first.
        """
        # A read first: no write (and no wait for another writer) when nothing expired.
        due = await self._in_scope(
            "sweep expired", lambda _c, ids: _is_due(ids.now_us), write=False
        )
        if not due:
            return 0
        stamp = self._shared.stamp("sweep_expired")
        return await self._in_scope(
            "sweep expired", lambda c, ids: removals.sweep_expired(c, ids, stamp), write=True
        )

    def _with_default_expiry(self, batch: FlatBatch) -> FlatBatch:
        """``batch``, each entry without an expiry given the store's ttl from now (if any)."""
        ttl = self._shared.ttl
        if ttl is None or all(entry[13] is not None for entry in batch.entries):
            return batch
        expires_us = self._shared.expiry_us()
        batch.entries = [
            entry if entry[13] is not None else (*entry[:13], expires_us) for entry in batch.entries
        ]
        return batch
