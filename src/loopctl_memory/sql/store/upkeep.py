"""The store's part that writes batches into the tail and keeps the tail short.

Every write leaves its entries above the watermark, in the *tail* that each
retrieval reads directly (:mod:`loopctl_memory.sql.lexical.index`). Past
``Tuning.tail_limit`` entries a child process indexes it
(:mod:`loopctl_memory.sql.background.folds`) while writes go on; past ``inline_at`` (or
where no child can run) the write indexes it in its own transaction.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from loopctl_memory.errors import DatabaseBusyError, LoopMemoryError
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.background.folds import fold_due
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.rows import repository
from loopctl_memory.sql.store.part import StorePart

T = TypeVar("T")

_POLL_SECONDS = 0.02  # how often a write held back by a long tail looks at it again
_BUSY_BESIDE_CHILD = 3  # more busy timeouts a write waits while the store's own child runs


class TailUpkeep(StorePart):
    """Writing into the tail, and indexing it: after a write, on demand, and at close."""

    async def _fold_tail(self, stop: asyncio.Event | None = None, linger: float = 0.0) -> int:
        """Index the entries above the watermark while they number ``tail_limit`` or more.

        What a child of the store does in the background
        (:mod:`~loopctl_memory.sql.background.folds`); ``build_indexes`` and closing the
        store do it too. Each block is inverted outside any transaction, then written if
        nobody indexed meanwhile.
        ``stop``: once set, no block is begun; ``linger``: seconds to wait for
        more writes once the tail is short. How many entries were indexed (0
        on a read-only store).

        Raises:
            StorageError: the database could not be read or written.

        """
        shared = self._shared
        if self._unit.read_only:
            return 0
        limit, known = shared.tuning.tail_limit, shared.term_ids
        return await fold_due(self._unit, limit, known, stop, linger)

    async def _write(self, batch: FlatBatch) -> None:
        """Insert ``batch`` in one transaction, leaving its entries in the tail for upkeep.

        In one hop to the driver where the backend can; otherwise through the
        connection lane, which indexes a tail grown past ``inline_at`` in the
        same transaction.
        """
        base, shared = self._scope.name, self._shared
        await self._make_room(len(batch))
        stamp = shared.stamp("store")
        stored = await self._beside_child(
            lambda: self._unit.store_batch(batch, base, shared.scope_ids, stamp)
        )
        if stored is None:
            tuning, at = shared.tuning, shared.folds.inline_at
            shared.watermark_seen, last, ids = await self._beside_child(
                lambda: self._unit.run_keyed_write(
                    "store",
                    lambda c: repository.insert_entries(
                        c,
                        batch,
                        tuning,
                        base,
                        shared.scope_ids,
                        term_ids=shared.term_ids,
                        fold_at=at,
                        stamp=stamp,
                    ),
                )
            )
            shared.scope_ids.update(ids)  # once committed: a name keeps its id for ever
        else:
            shared.scope_ids.update(stored.scope_ids)
            shared.watermark_seen, last = stored.indexed_through, stored.last_seq
            await self._after_stored(last, batch)
        shared.tail_seen = last - shared.watermark_seen
        shared.folds.after_batch(len(batch), shared.tail_seen)

    async def _beside_child(self, write: Callable[[], Awaitable[T]]) -> T:
        """Run ``write`` (one transaction), waiting longer while this store's own child indexes.

        The child holds the write lock for a block at a time. On a loaded machine
        (a niced bulk load beside busy processes) its transactions can outlast
        the busy timeout, and a write must not fail because of the store's own
        upkeep: while the child runs, a busy write is tried again, up to
        ``_BUSY_BESIDE_CHILD`` more times (the child's backlog is a few blocks).

        Raises:
            DatabaseBusyError: still busy, or busy with no child of this store at work.

        """
        tries = 0
        while True:
            try:
                return await write()
            except DatabaseBusyError:
                tries += 1
                if tries > _BUSY_BESIDE_CHILD or not self._shared.folds.running:
                    raise

    async def _make_room(self, size: int) -> None:
        """Before a batch of ``size``: wait while a child indexes, the tail near ``inline_at``.

        Writes that outpace the child wait for it rather than index the same entries
        themselves (which would throw its block away): the tail stays bounded, and
        the two cores both work. Where no child runs, the write indexes it itself.
        """
        shared = self._shared
        folds, limit = shared.folds, shared.tuning.tail_limit
        # Only while the child has a block to index: a batch of more than the room left
        # above a short tail indexes itself rather than wait for a child with nothing to do.
        while (
            folds.running
            and limit <= shared.tail_seen
            and shared.tail_seen + size >= folds.inline_at
        ):
            await asyncio.sleep(_POLL_SECONDS)
            shared.tail_seen = await self._unit.run(
                "index", lambda c: c.run_sync(index.tail_length), write=False
            )

    async def _after_stored(self, seq: int, batch: FlatBatch) -> None:
        """After a batch stored up to ``seq`` in one hop: index the tail, or ask a child, if due.

        The tail is measured from the watermark the write's own transaction read;
        indexing reads it again (a child may have indexed since).
        """
        shared = self._shared
        tail, folds = seq - shared.watermark_seen, shared.folds
        if batch.holds_memory_of(shared.tuning.giant_memory):
            await self._shorten_tail(seq, now=True)
        elif tail >= shared.tuning.tail_limit and (not folds.running or tail >= folds.inline_at):
            await self._shorten_tail(seq)

    async def _shorten_tail(self, seq: int, *, now: bool = False) -> None:
        """Index the tail here past ``inline_at`` (or ``now``); past ``tail_limit``, ask a child."""
        shared = self._shared
        limit, at = shared.tuning.tail_limit, shared.folds.inline_at
        shared.watermark_seen = await self._unit.run(
            "index",
            lambda c: c.run_sync(index.shorten_tail, limit, shared.term_ids, at=at, now=now),
            write=True,
        )
        if seq - shared.watermark_seen >= limit:
            shared.folds.ask()

    async def _finish_upkeep(self) -> None:
        """On closing: stop the child indexing (if one runs); index what is still due here.

        So a store closed after a bulk load leaves a short tail, as it found it.
        A block the child was writing is one transaction: stopped, it is not written.
        """
        folds = self._shared.folds
        await folds.stop()
        if folds.asked and not self._unit.closed:
            with contextlib.suppress(LoopMemoryError):  # an unusable store closes all the same
                await self._fold_tail()
