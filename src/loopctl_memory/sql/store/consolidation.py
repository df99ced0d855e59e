"""The SQL store's consolidation: a pass over the view's entries, or a preview of one.

A mixin of :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`, kept apart so that
the store module holds the contract's other operations.
"""

from __future__ import annotations

import asyncio
import dataclasses

from loopctl_memory import lifecycle
from loopctl_memory.entry import ConsolidationStats
from loopctl_memory.errors import InvalidArgumentError, StorageError
from loopctl_memory.lifecycle import ConsolidationConfig, ConsolidationPreview
from loopctl_memory.sql.rows import repository
from loopctl_memory.sql.store.consolidation_pass import consolidate_scope
from loopctl_memory.sql.store.part import StorePart


class ConsolidationOperations(StorePart):
    """``consolidate`` and ``preview_consolidation``."""

    async def consolidate(
        self, config: ConsolidationConfig | None = None, *, vacuum: bool = False
    ) -> ConsolidationStats:
        """Run a consolidation pass over the view's entries, in one transaction.

        ``config`` (default: the store's, set by ``open_store(consolidation=...)``,
        itself by default ``ConsolidationConfig()``, the 0.1.0 rule: delete every
        entry whose relevance, as binary32, is below 0.05).
        ``ConsolidationConfig.full()`` also decays, merges near-duplicates and
        prunes on quality (see :mod:`loopctl_memory.lifecycle`).

        On a SQLite file created by this version (``auto_vacuum=INCREMENTAL``)
        the whole pages the pass freed are cut off the file right after it, in
        a short write of its own; the room removed entries leave in part-full
        pages stays for later writes. ``vacuum=True`` gives back all the
        database's free space once the pass has committed (every scope's,
        earlier deletes' too):

        - SQLite: a full ``VACUUM`` rewrites the whole file packed. It takes
          about as long as copying the file, needs room on disk for twice the
          result, and needs the file to itself for writing meanwhile: other
          writers wait. Then a checkpoint empties the write-ahead log.
        - ``:memory:``: nothing to do.
        - PostgreSQL: a plain ``VACUUM`` of the store's tables makes the space
          reusable; it does not shrink the files.

        Raises:
            InvalidArgumentError: ``config`` is not a ConsolidationConfig, or
                ``vacuum`` not a bool.
            StorageError: the pass failed (nothing changed), or, with ``vacuum``,
                another connection holds the SQLite file: the pass was committed,
                the file is as it was.

        """
        if type(vacuum) is not bool:
            raise InvalidArgumentError(f"vacuum must be a bool, not {type(vacuum).__name__}")
        shared = self._shared
        stats = await consolidate_scope(
            self._unit,
            self._scope,
            shared.consolidation if config is None else config,
            clock=shared.clock,
            tuning=shared.tuning,
            expiry_clock=shared.now_us,
            stamp=shared.stamp("consolidate"),
            keep_history=shared.keep_history,
        )
        if (stats.pruned or stats.merged) and not vacuum:
            await self._unit.give_back_free_pages()
        if vacuum:
            try:
                await self._unit.vacuum()
            except StorageError as exc:
                raise StorageError(
                    f"consolidate: the pass was committed ({stats.entries_before} entries,"
                    f" {stats.entries_after} now), but: {exc}"
                ) from exc
        return stats

    async def preview_consolidation(
        self, config: ConsolidationConfig | None = None
    ) -> ConsolidationPreview:
        """What :meth:`consolidate` with ``config`` would do now, and why; nothing is written.

        Each memory a merge would fold into another, with that one; each memory
        that would be dropped, with the relevance or quality that drops it. One
        read transaction, then the pass worked out in a thread (a read-only
        store previews too). Expired memories, which the pass deletes first,
        are not in it.

        Raises:
            InvalidArgumentError: ``config`` is not a ConsolidationConfig.

        """
        shared = self._shared
        chosen = shared.consolidation if config is None else config
        if not isinstance(chosen, ConsolidationConfig):
            raise InvalidArgumentError(
                f"config must be a ConsolidationConfig, not {type(chosen).__name__}"
            )
        now = lifecycle.check_now(shared.clock())
        _, entries = await self._in_scope(
            "preview consolidation", repository.entries_with_seqs, write=False
        )
        preview = await asyncio.to_thread(lifecycle.preview_entries, entries, chosen, now)
        if not chosen.is_reference:
            return preview
        # 0.1.0's pass is one DELETE here, and its stats count no bytes (as the crate's).
        stats = preview.stats
        reference = ConsolidationStats(stats.entries_before, stats.entries_after, stats.pruned)
        return dataclasses.replace(preview, stats=reference)
