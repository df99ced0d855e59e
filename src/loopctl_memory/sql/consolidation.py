"""A consolidation pass over a view's entries: planned outside the write, written in one.

loopctl 0.1.0's rule (``ConsolidationConfig()``) is one ``DELETE``. A fuller pass
(decay, merges, quality pruning: :mod:`loopctl_memory.lifecycle`) is worked out
from a read, in a thread, before the write transaction, so that other writers
wait only for the pass to be written; if the view's entries changed meanwhile,
the write transaction works the pass out again from what it reads.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import lifecycle
from loopctl_memory.entry import ConsolidationStats, MemoryEntry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.scopes import Scope
from loopctl_memory.sql import index, repository
from loopctl_memory.sql.scope_rows import Clock, ScopeIds, scope_ids
from loopctl_memory.sql.tuning import Tuning
from loopctl_memory.sql.unit_of_work import UnitOfWork


async def consolidate_scope(
    unit: UnitOfWork,
    scope: Scope,
    config: ConsolidationConfig,
    *,
    clock: Callable[[], datetime],
    tuning: Tuning,
    expiry_clock: Clock | None = None,
) -> ConsolidationStats:
    """Run the pass ``config`` describes over the entries ``scope`` reads, in one write.

    ``clock`` gives the time the pass decays to; ``expiry_clock`` (the same, in
    microseconds) the time at which expired entries are deleted, first, in the
    pass's transaction.

    Raises:
        InvalidArgumentError: ``config`` is not a ConsolidationConfig.

    """
    if not isinstance(config, ConsolidationConfig):
        raise InvalidArgumentError(
            f"config must be a ConsolidationConfig, not {type(config).__name__}"
        )
    config = config.normalized()
    if config.is_reference:

        async def prune(connection: AsyncConnection) -> tuple[int, int]:
            ids = await scope_ids(connection, scope, expiry_clock)
            before = await repository.count(connection, ids)
            await repository.sweep_expired(connection, ids)
            return before, await repository.prune(connection, ids)

        before, pruned = await unit.run("consolidate", prune, write=True)
        return ConsolidationStats(
            entries_before=before, entries_after=before - pruned, pruned=pruned
        )
    now = lifecycle.check_now(clock())

    async def read(connection: AsyncConnection) -> _Plan:
        ids = await scope_ids(connection, scope, expiry_clock)
        version = await repository.scope_version(connection, ids)
        return _Plan(ids, version, *await repository.entries_with_seqs(connection, ids))

    planned = await unit.run("consolidate", read, write=False)
    result = await asyncio.to_thread(lifecycle.consolidate_entries, planned.entries, config, now)

    async def write(connection: AsyncConnection) -> ConsolidationStats:
        ids = await scope_ids(connection, scope, expiry_clock)
        await repository.sweep_expired(connection, ids)  # unseen by the plan: gone first
        if ids.read == planned.ids.read and planned.version == await repository.scope_version(
            connection, ids
        ):
            return await _write_pass(
                connection, planned.seqs, planned.entries, result, config, tuning=tuning
            )
        seqs, entries = await repository.entries_with_seqs(connection, ids)
        again = lifecycle.consolidate_entries(entries, config, now)
        return await _write_pass(connection, seqs, entries, again, config, tuning=tuning)

    return await unit.run("consolidate", write, write=True)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a pass works from: the view's entries, and how to tell they changed."""

    ids: ScopeIds
    version: tuple[int, ...]
    seqs: list[int]
    entries: list[MemoryEntry]


async def _write_pass(
    connection: AsyncConnection,
    seqs: list[int],
    before: list[MemoryEntry],
    result: lifecycle.ConsolidationResult,
    config: ConsolidationConfig,
    *,
    tuning: Tuning,
) -> ConsolidationStats:
    """Write what a pass over ``before`` (the entries at ``seqs``) made of them.

    Each survivor is written at the seq of its cluster's first member (so it
    keeps that place in insertion order); the others are removed. Other
    processes learn of rewritten entries from the change log (or, when many
    were rewritten, the index is built again), and read every entry again when
    a decay changed them all (from the indexed entries' rows, written again).
    """
    kept = {seqs[slot] for slot in result.slots}
    gone = [seq for seq in seqs if seq not in kept]
    for start in range(0, len(gone), 10_000):
        await repository.remove_seqs(connection, gone[start : start + 10_000])
    rows: list[tuple[int, MemoryEntry]] = []
    log: list[int] = []
    retagged: list[int] = []
    rewritten: list[int] = []
    refielded: list[int] = []
    for slot, after in zip(result.slots, result.entries, strict=True):
        seq, old = seqs[slot], before[slot]
        if after == old:
            continue
        rows.append((seq, after))
        if old.tags != after.tags:
            retagged.append(seq)
        if old.metadata != after.metadata:
            refielded.append(seq)
        if old.memory != after.memory:
            rewritten.append(seq)
        text_changed = (old.memory, old.tags) != (after.memory, after.tags)
        if text_changed or (not config.decay and old.relevance != after.relevance):
            log.append(seq)
    reindex = len(log) > tuning.reindex_above
    await repository.rewrite(
        connection,
        rows,
        log=[] if reindex else log,
        tags_of=retagged,
        fields_of=refielded,
        texts_changed=rewritten,
    )
    if reindex:
        await connection.run_sync(index.rebuild, row_entries=tuning.tail_limit)
    elif config.decay and rows:  # unlogged: the indexed entries' rows must hold it
        await connection.run_sync(index.write_entry_blocks_again, row_entries=tuning.tail_limit)
    if reindex or (config.decay and rows):
        await repository.raise_generation(connection)
    return result.stats
