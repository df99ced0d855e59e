"""The tail indexed in a child process, so that a write never waits for indexing.

Entries above the watermark (the *tail*) are read directly by every
retrieval; indexing folds them into a block of postings. A write that leaves
``Tuning.tail_limit`` entries or more unindexed asks :class:`TailFolds` for a
child process (:mod:`loopctl_memory.sql.background.fold_child`), which opens the
database, and, while the tail is that long, reads it in one transaction,
inverts it, and writes the block in another (:func:`fold_due`), provided
nobody indexed meanwhile. The writer goes on at the speed of its inserts;
the child takes the other core.

The tail stays bounded whatever happens: a batch that would take it past
``LAG`` times ``tail_limit`` waits for the child at work (the writes outpace
it; indexing the entries itself would throw the child's block away), and
where no child runs (``:memory:``, ``Tuning.background_folds`` off, a child
that failed) the write indexes the tail in its own transaction, as every
write did before. Closing the store stops the child (a block it was writing
is never half written: it is one transaction) and indexes what is still due
itself, so a store closed after a bulk load leaves a short tail for the next
process, and a close never waits for a child to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy import Connection
from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory.sql.background.children import Child
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.lexical.block_rows import block_rows
from loopctl_memory.sql.lexical.inversion import invert_block
from loopctl_memory.sql.lexical.term_ids import KnownTerms

CHILD = "loopctl_memory.sql.background.fold_child"
"""The module a child runs (``python -m``)."""

T = TypeVar("T")

_LOOK_AGAIN_SECONDS = 0.1  # how often a lingering child looks at the tail

LAG = 4
"""How many ``tail_limit``s a write leaves unindexed while a child indexes them."""


class TailFolds(Child):
    """The child indexing a store's tail, if one runs."""

    def __init__(self, target: str, *, enabled: bool, tail_limit: int) -> None:
        """``target``: what the child opens (a file's path, or a server's URL with its password).

        ``enabled``: false, no child is ever started, and writes index as they
        always did; ``tail_limit``: the store's.
        """
        super().__init__(
            CHILD,
            enabled=enabled,
            failed="indexing the tail in the background failed (%s); writes index it"
            " themselves from now on",
        )
        self._target = target
        self._tail_limit = tail_limit
        self.asked = False
        """Whether this store ever left a long tail to a child."""

    @property
    def inline_at(self) -> int:
        """The tail a write indexes itself from (``LAG`` tail limits while a child may help)."""
        return self._tail_limit * (LAG if self.enabled else 1)

    def ask(self) -> None:
        """Have a child index the tail while it is long: start one, unless one runs."""
        self.asked = True
        self._start({"target": self._target, "tail_limit": self._tail_limit})

    def after_batch(self, size: int, tail: int) -> None:
        """After a batch of ``size`` left ``tail`` entries unindexed: ask a child if one is due.

        A bulk load (a batch of a tenth of ``tail_limit`` or more) asks from half
        the limit on, so that the child has started by the time there is a block.
        """
        limit = self._tail_limit
        if tail >= limit or (size * 10 >= limit and tail * 2 >= limit):
            self.ask()


async def fold_due(
    unit: UnitOfWork,
    tail_limit: int,
    known: KnownTerms,
    stop: asyncio.Event | None = None,
    linger: float = 0.0,
) -> int:
    """Index the tail block after block while it holds ``tail_limit`` entries; how many indexed.

    Each block is read in one transaction, its new terms created in a second,
    and its rows inserted in a third, only if the watermark and the generation
    are still those it read (else it is read again). Inverting the block and
    making its rows run outside them all, while others read and write.
    ``stop``: once set, no block is begun. ``linger``: seconds to go on looking
    at a tail too short to index before returning (a child waits for the writes
    that follow, rather than ending and being started again).
    """
    indexed, idle = 0, 0.0
    while stop is None or not stop.is_set():
        read = functools.partial(index.read_tail, at_least=tail_limit)
        tail = await unit.run("index the tail", _run_sync(read), write=False)
        if tail is None:
            if idle >= linger:
                break
            idle += _LOOK_AGAIN_SECONDS
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for((stop or asyncio.Event()).wait(), _LOOK_AGAIN_SECONDS)
            continue
        idle = 0.0
        inverted = invert_block(tail.texts, tail.tag_values)
        # The terms first, in a transaction of their own: the block's then only inserts.
        ids = await unit.run(
            "index the tail",
            _run_sync(functools.partial(index.term_ids, inverted=inverted, known=known)),
            write=True,
        )
        rows = block_rows(tail.mark + 1, tail.texts, inverted, ids, tail_limit)
        write = functools.partial(index.write_tail, tail=tail, rows=rows, row_entries=tail_limit)
        if await unit.run("index the tail", _run_sync(write), write=True):
            indexed += tail.through - tail.mark
    return indexed


def _run_sync(work: Callable[[Connection], T]) -> Callable[[AsyncConnection], Awaitable[T]]:
    """``work`` as a unit of work: run on the transaction's synchronous connection."""

    async def run(connection: AsyncConnection) -> T:
        return await connection.run_sync(work)

    return run
