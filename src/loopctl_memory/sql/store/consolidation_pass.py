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
from datetime import datetime, timedelta

from sqlalchemy.ext.asyncio import AsyncConnection

from loopctl_memory import history, lifecycle
from loopctl_memory.entry import ConsolidationStats, MemoryEntry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.history import record as history_record
from loopctl_memory.sql.history import stamps as history_stamps
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.rows import removals, repository
from loopctl_memory.sql.rows.scope_rows import Clock, ScopeIds, scope_ids
from loopctl_memory.sql.tuning import Tuning


async def consolidate_scope(
    unit: UnitOfWork,
    scope: Scope,
    config: ConsolidationConfig,
    *,
    clock: Callable[[], datetime],
    tuning: Tuning,
    expiry_clock: Clock | None = None,
    stamp: Stamp | None = None,
    keep_history: timedelta | None = None,
) -> ConsolidationStats:
    """Run the pass ``config`` describes over the entries ``scope`` reads, in one write.

    ``clock`` gives the time the pass decays to; ``expiry_clock`` (the same, in
    microseconds) the time at which expired entries are deleted, first, in the
    pass's transaction. ``stamp``: the pass's events (None: none recorded);
    the events of the view's scopes older than ``keep_history`` are deleted
    in the same transaction (None: none are).

    Raises:
        InvalidArgumentError: ``config`` is not a ConsolidationConfig.

    """
    if not isinstance(config, ConsolidationConfig):
        raise InvalidArgumentError(
            f"config must be a ConsolidationConfig, not {type(config).__name__}"
        )
    config = config.normalized()
    now = lifecycle.check_now(clock())
    kept_since = None if keep_history is None else now - keep_history
    if config.is_reference:

        async def prune(connection: AsyncConnection) -> tuple[int, int]:
            ids = await scope_ids(connection, scope, expiry_clock)
            before = await repository.count(connection, ids)
            await _sweep(connection, ids, stamp, kept_since)
            return before, await removals.prune(connection, ids, stamp)

        before, pruned = await unit.run("consolidate", prune, write=True)
        return ConsolidationStats(
            entries_before=before, entries_after=before - pruned, pruned=pruned
        )

    async def read(connection: AsyncConnection) -> _Plan:
        ids = await scope_ids(connection, scope, expiry_clock)
        version = await repository.scope_version(connection, ids)
        return _Plan(ids, version, *await repository.entries_with_seqs(connection, ids))

    planned = await unit.run("consolidate", read, write=False)
    result = await asyncio.to_thread(lifecycle.consolidate_entries, planned.entries, config, now)

    async def write(connection: AsyncConnection) -> ConsolidationStats:
        ids = await scope_ids(connection, scope, expiry_clock)
        await _sweep(connection, ids, stamp, kept_since)  # unseen by the plan: gone first
        if ids.read == planned.ids.read and planned.version == await repository.scope_version(
            connection, ids
        ):
            return await _write_pass(
                connection, planned, result, config, tuning=tuning, stamp=stamp
            )
        seqs, entries = await repository.entries_with_seqs(connection, ids)
        again = lifecycle.consolidate_entries(entries, config, now)
        return await _write_pass(
            connection, _Plan(ids, (), seqs, entries), again, config, tuning=tuning, stamp=stamp
        )

    return await unit.run("consolidate", write, write=True)


@dataclass(frozen=True, slots=True)
class _Plan:
    """What a pass works from: the view's entries, and how to tell they changed."""

    ids: ScopeIds
    version: tuple[int, ...]
    seqs: list[int]
    entries: list[MemoryEntry]


async def _sweep(
    connection: AsyncConnection,
    ids: ScopeIds,
    stamp: Stamp | None,
    kept_since: datetime | None,
) -> None:
    """Before a pass: remove the expired entries, and the events older than ``kept_since``."""
    await removals.sweep_expired(connection, ids, stamp)
    if kept_since is not None:
        await history_record.sweep(connection, ids, (kept_since - EPOCH) // MICROSECOND)


async def _write_pass(
    connection: AsyncConnection,
    planned: _Plan,
    result: lifecycle.ConsolidationResult,
    config: ConsolidationConfig,
    *,
    tuning: Tuning,
    stamp: Stamp | None,
) -> ConsolidationStats:
    """Write what a pass over the planned entries made of them.

    Each survivor is written at the seq of its cluster's first member (so it
    keeps that place in insertion order); the others are removed. Other
    processes learn of rewritten entries from the change log (or, when many
    were rewritten, the index is built again), and read every entry again when
    a decay changed them all (from the indexed entries' rows, written again).
    """
    seqs, before = planned.seqs, planned.entries
    if stamp is not None:
        await _record_pass(connection, stamp, planned, result)
    kept = {seqs[slot] for slot in result.slots}
    gone = [seq for seq in seqs if seq not in kept]
    for start in range(0, len(gone), 10_000):
        await removals.remove_seqs(connection, gone[start : start + 10_000])
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


async def _record_pass(
    connection: AsyncConnection,
    stamp: Stamp,
    planned: _Plan,
    result: lifecycle.ConsolidationResult,
) -> None:
    """Record what a pass does to each entry, before it is written.

    A merged memory written at another member's seq takes its history along
    (the two histories swap seqs); each member folded into it records
    ``merged``, it ``absorbed``; each memory dropped, ``pruned``.
    """
    seqs, before = planned.seqs, planned.entries
    if not result.merged and not result.pruned:
        return
    position_of = {entry.id: position for position, entry in enumerate(before)}
    moved: list[tuple[int, int]] = []
    for slot, after in zip(result.slots, result.entries, strict=True):
        owner = position_of[after.id]
        if owner != slot:
            moved.append((seqs[slot], seqs[owner]))
    await history_record.swap_histories(connection, moved)
    home = dict(moved) | {second: first for first, second in moved}
    folded: dict[int, list[int]] = {}
    for position, owner in result.merged.items():
        folded.setdefault(owner, []).append(position)
    scope_of = await repository.scope_ids_of(connection, _seqs_involved(seqs, result))
    rows: list[dict[str, object]] = []
    for owner, members in sorted(folded.items()):
        seq = home.get(seqs[owner], seqs[owner])
        rows.append(
            {
                "entry_seq": seq,
                "scope_id": scope_of[seqs[owner]],
                "event": history.ABSORBED,
                "detail": history_stamps.details(
                    merged=[str(before[member].id) for member in sorted(members)]
                ),
            }
        )
        rows.extend(
            _removal(
                home.get(seqs[member], seqs[member]),
                scope_of[seqs[member]],
                history.MERGED,
                before[member],
                history_stamps.details(into=str(before[owner].id)),
            )
            for member in sorted(members)
        )
    rows.extend(
        _removal(seqs[owner], scope_of[seqs[owner]], history.PRUNED, entry, None)
        for owner, entry in result.pruned
    )
    await history_record.record(connection, stamp, rows)


def _seqs_involved(seqs: list[int], result: lifecycle.ConsolidationResult) -> list[int]:
    """The seqs of every entry a pass merges or prunes, or merges into."""
    involved = {seqs[position] for position in result.merged}
    involved.update(seqs[owner] for owner in result.merged.values())
    involved.update(seqs[owner] for owner, _ in result.pruned)
    return sorted(involved)


def _removal(
    seq: int, scope_id: int, event: str, entry: MemoryEntry, detail: str | None
) -> dict[str, object]:
    return {
        "entry_seq": seq,
        "entry_id": entry.id,
        "scope_id": scope_id,
        "event": event,
        "relevance": entry.relevance,
        "detail": detail,
    }
