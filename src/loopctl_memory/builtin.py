"""InMemoryStore: the reference port in a list, no database; every ranking computed plainly."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np

from loopctl_memory import bm25, embedding, expiry, lifecycle, plain_ranking
from loopctl_memory.arguments import check_batch_size
from loopctl_memory.binary32 import f32
from loopctl_memory.builtin_vectors import InMemoryVectors
from loopctl_memory.context import Context, check_context, check_context_for
from loopctl_memory.embedding import EMBED_BATCH, QueryVectors, Vectors
from loopctl_memory.entry import (
    ConsolidationStats,
    MemoryCategory,
    MemoryEntry,
    check_key,
    copy_entry,
    validate_entry,
    validate_id,
    validate_query,
)
from loopctl_memory.errors import DuplicateEntryError, InvalidArgumentError
from loopctl_memory.filters import MemoryFilter, check_filter
from loopctl_memory.keys import keyed, replaced_ids
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.protocol import Embedder
from loopctl_memory.rankings import EMBEDDING_RANKINGS, Explanation, check_ranking
from loopctl_memory.scoring import PRUNE_BELOW, baseline_score, parse_query


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _check_config(config: object) -> ConsolidationConfig:
    if not isinstance(config, ConsolidationConfig):
        raise InvalidArgumentError(
            f"config must be a ConsolidationConfig, not {type(config).__name__}"
        )
    return config


class InMemoryStore(InMemoryVectors):
    """loopctl 0.1.0's ``InMemoryStore``, ported line for line, and the later crate's lifecycle.

    Entries live in a list in insertion order and are lost with the process.
    It validates input exactly as the SQL store does, so on valid input both
    return the same entries in the same order, in every ranking: BM25 here is
    :func:`loopctl_memory.bm25.scores` over every entry, the plain definition
    the SQL store's vectorised ranker is held to.

    Args:
        entries: entries to start with (validated and copied).
        consolidation: what :meth:`consolidate` does by default; the default,
            ``ConsolidationConfig()``, is loopctl 0.1.0's pruning rule.
        track_access: whether :meth:`retrieve` records an access of each
            returned entry the query matched (see :func:`lifecycle.access_matches`).
        clock: the current time (timezone-aware) for decay, access stamps and
            ``forget(older_than=timedelta)``; default ``datetime.now(UTC)``.
        ranking: what :meth:`retrieve` ranks by when a call names none:
            ``"reference"`` (loopctl 0.1.0, the default), ``"bm25"``, or, with
            an embedder, ``"vector"`` or ``"hybrid"``.
        bm25_k1, bm25_b: BM25's parameters (see :mod:`loopctl_memory.bm25`).
        context: how much each entry's neighbours in insertion order count in
            the ``bm25``, ``vector`` and ``hybrid`` rankings (see
            :mod:`loopctl_memory.context`): ``"auto"`` (the default: by how
            coherent the stream is) or a weight >= 0 (0: none).
        embedder: makes each entry's vector when it is stored or its memory
            changes (see :mod:`loopctl_memory.embedding`); an entry whose vector
            could not be made is stored anyway and pending until
            :meth:`embed_pending` (or a later write) makes it.
        embed_timeout: seconds an embedder call may take (default 30).
        ttl: each entry stored without ``expires_at`` expires this long after
            it is stored (None, the default: never); see :mod:`loopctl_memory.expiry`.
        refresh_on_read: ``retrieve``, ``get`` and ``get_by_key`` move the
            expiry of what they return to ``ttl`` from now (needs ``ttl``).

    Example:
        >>> import asyncio
        >>> from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry
        >>> store = InMemoryStore()
        >>> entry = MemoryEntry(MemoryCategory.INSIGHT, "Prefer Glob over manual file search")
        >>> asyncio.run(store.store(entry))
        >>> len(asyncio.run(store.retrieve("file search", 5)))
        1

    """

    def __init__(
        self,
        entries: Iterable[MemoryEntry] | None = None,
        *,
        consolidation: ConsolidationConfig | None = None,
        track_access: bool = False,
        clock: Callable[[], datetime] | None = None,
        ranking: str = "reference",
        bm25_k1: float = bm25.DEFAULT_K1,
        bm25_b: float = bm25.DEFAULT_B,
        embedder: Embedder | None = None,
        embed_timeout: float = embedding.DEFAULT_TIMEOUT,
        context: Context = "auto",
        ttl: timedelta | None = None,
        refresh_on_read: bool = False,
    ) -> None:
        if type(track_access) is not bool:
            raise InvalidArgumentError(
                f"track_access must be a bool, not {type(track_access).__name__}"
            )
        if clock is not None and not callable(clock):
            raise InvalidArgumentError(f"clock must be callable, not {type(clock).__name__}")
        self._consolidation = (
            ConsolidationConfig() if consolidation is None else _check_config(consolidation)
        )
        self._track_access = track_access
        self._embedder = None if embedder is None else embedding.check_embedder(embedder)
        self._embed_timeout = embedding.check_timeout(embed_timeout)
        # Each entry's vector with the memory text it was made from: one made from
        # another text (the memory changed since) is no vector, and the entry pending.
        self._vectors: dict[uuid.UUID, tuple[str, Vectors]] = {}
        # Whether a write fills pending entries: not once the embedder failed on them,
        # until another embedding fails (as the SQL stores do).
        self._retry_pending = True
        self._query_vectors = QueryVectors()
        # The embedder a reembed makes vectors with, and those it made (to resume).
        self._reembedding: tuple[str, dict[uuid.UUID, tuple[str, Vectors]]] = ("", {})
        self._ranking = self._check_ranking(ranking)
        self._bm25 = bm25.Bm25Parameters(bm25_k1, bm25_b)
        self._context = check_context(context)
        self._clock: Callable[[], datetime] = _utc_now if clock is None else clock
        self._ttl = expiry.check_ttl(ttl)
        self._refresh = expiry.check_refresh(refresh_on_read, self._ttl)
        self._entries: list[MemoryEntry] = []
        self._ids: set[uuid.UUID] = set()
        if entries is not None:
            self._append_all([validate_entry(entry) for entry in entries])

    def _append_all(self, entries: list[MemoryEntry]) -> None:
        replaced = replaced_ids(self._entries, entries)
        seen: set[uuid.UUID] = set()
        for entry in entries:
            if (entry.id in self._ids and entry.id not in replaced) or entry.id in seen:
                raise DuplicateEntryError(f"an entry with id {entry.id} is already stored")
            seen.add(entry.id)
        if replaced:
            self._entries = [entry for entry in self._entries if entry.id not in replaced]
            self._ids -= replaced
            for entry_id in replaced:
                self._vectors.pop(entry_id, None)
        self._entries.extend(entries)
        self._ids.update(seen)

    def _check_ranking(self, ranking: object) -> str:
        return check_ranking(ranking, has_embedder=self._embedder is not None)

    async def store(self, entry: MemoryEntry) -> None:
        """Append ``entry`` (a copy of it); make its vector, or leave it pending."""
        await self.store_many([entry])

    async def store_many(self, entries: Iterable[MemoryEntry]) -> None:
        """Append every entry, or none if any is invalid; make their vectors, or leave them pending.

        An embedder that fails never fails the write. The memories go to it
        ``EMBED_BATCH`` a call; when every call succeeds, one more makes the
        vectors of entries left pending before (as many again, at most one call's).
        """
        checked = [validate_entry(entry) for entry in entries]
        if self._ttl is not None and not all(entry.expires_at for entry in checked):
            expires_at = self._now() + self._ttl
            for entry in checked:
                entry.expires_at = entry.expires_at or expires_at
        calls = (
            []
            if self._embedder is None
            else await embedding.embed_in_calls(
                self._embedder, [entry.memory for entry in checked], self._embed_timeout
            )
        )
        self._append_all(checked)
        for number, made in enumerate(calls):
            chunk = checked[number * EMBED_BATCH : (number + 1) * EMBED_BATCH]
            self._keep_vectors(chunk, made)
        if any(made is None for made in calls):
            self._retry_pending = True
        elif calls and self._retry_pending:  # all worked: fill some pending
            pending = self._pending()[: min(len(checked), EMBED_BATCH)]
            if pending:
                made = await self._try_embed(pending)
                self._keep_vectors(pending, made)
                self._retry_pending = made is not None

    def _now(self) -> datetime:
        return lifecycle.check_now(self._clock())

    async def retrieve(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        context: Context | None = None,
    ) -> list[MemoryEntry]:
        """Return the best ``limit`` entries by the ranking (the store's by default), stably.

        Only the entries ``filter`` passes compete; it never changes BM25's
        statistics. ``context`` (default: the store's) weighs the neighbours
        of each entry in insertion order (:mod:`loopctl_memory.context`; not
        for ``reference``). With ``track_access``, each returned entry the query
        matched first has its ``access_count`` raised by one (saturating at
        2**63 - 1) and its ``last_accessed`` moved to now (never back); it is
        returned so stamped.
        """
        found = await self.retrieve_scored(
            query, limit, ranking=ranking, filter=filter, context=context
        )
        return [entry for entry, _ in found]

    async def retrieve_scored(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, float]]:
        """:meth:`retrieve` with each entry's score (reference: its binary32 value, as a float).

        With ``matched_only``, only the entries a word or a tag of the query
        raised above their baseline score compete (BM25 returns only those
        anyway); the ranking among them is unchanged.
        """
        found = await self.retrieve_explained(
            query, limit, ranking=ranking, filter=filter, matched_only=matched_only, context=context
        )
        return [(entry, parts.score) for entry, parts in found]

    async def retrieve_explained(
        self,
        query: str,
        limit: int,
        *,
        ranking: str | None = None,
        filter: MemoryFilter | None = None,
        matched_only: bool = False,
        context: Context | None = None,
    ) -> list[tuple[MemoryEntry, Explanation]]:
        """:meth:`retrieve_scored`, each score with its parts (:class:`Explanation`)."""
        validate_query(query, limit)
        chosen = self._ranking if ranking is None else self._check_ranking(ranking)
        # A store's own weight applies to the rankings it can; a call's is checked.
        weighing = self._context if context is None else check_context_for(chosen, context)
        passes = check_filter(filter)
        scored: list[tuple[float, MemoryEntry, int]]
        found: plain_ranking.Ranked | None = None
        if chosen == "reference":
            parsed = parse_query(query)
            scored = []
            for n, entry in enumerate(self._entries):
                score = parsed.score_of(entry.relevance, entry.memory, entry.tags)
                if not matched_only or score > baseline_score(entry.relevance):
                    scored.append((score, entry, n))
        else:
            found = await self._ranked(query, chosen, weighing)
            scored = [
                (float(found.scores[n]), self._entries[n], int(n))
                for n in np.flatnonzero(found.competing)
            ]
        if chosen in EMBEDDING_RANKINGS:  # a score of 0 or less: nothing in common
            scored = [item for item in scored if item[0] > 0.0]
        if passes is not None:
            scored = [item for item in scored if passes.matches(item[1])]
        if expiry.any_expiring(self._entries):
            now = self._now()
            scored = [item for item in scored if expiry.is_live(item[1], now)]
        scored.sort(key=lambda item: item[0], reverse=True)  # stable: ties keep insertion order
        chosen_entries = scored[:limit]
        if self._track_access:
            entries = [entry for _, entry, _ in chosen_entries]
            matches = (
                lifecycle.access_matches(query, entries)
                if chosen == "reference"
                else [True] * len(entries)
            )
            accessed = [entry for entry, matched in zip(entries, matches, strict=True) if matched]
            if accessed:  # the clock is read only when there is something to stamp
                lifecycle.stamp_accessed(accessed, self._now())
        self._refreshed([entry for _, entry, _ in chosen_entries])
        return [
            (copy_entry(entry), Explanation(score) if found is None else found.explained(n))
            for score, entry, n in chosen_entries
        ]

    async def _ranked(self, query: str, ranking: str, weighing: Context) -> plain_ranking.Ranked:
        """Every entry's score in ``ranking`` (bm25, vector or hybrid), by position.

        Raises:
            EmbedderError: the query's vector could not be made.

        """
        entries = self._entries
        lexical = (
            None if ranking == "vector" else plain_ranking.bm25_array(entries, query, self._bm25)
        )
        cosines = None if ranking == "bm25" else await self._cosines(query)
        vectors = None if self._embedder is None else [self._vector_of(e) for e in entries]
        weight = plain_ranking.weight_of(weighing, entries, vectors)
        return plain_ranking.ranked(ranking, lexical, cosines, weight=weight)

    def _vector_of(self, entry: MemoryEntry) -> Vectors | None:
        """The vector of ``entry``'s current memory, or None while it is pending."""
        held = self._vectors.get(entry.id)
        return held[1] if held is not None and held[0] == entry.memory else None

    async def _cosines(self, query: str) -> plain_ranking.Cosines:
        """Which entries have a vector, and each one's cosine with the query's (by position)."""
        embedder = self._embedder
        assert embedder is not None  # noqa: S101 - checked with the ranking
        wanted = await self._query_vectors.vector(embedder, query, self._embed_timeout)
        entries = self._entries
        has_vector = np.zeros(len(entries), np.bool_)
        rows = np.zeros((len(entries), embedder.dims), np.float32)
        for n, entry in enumerate(entries):
            vector = self._vector_of(entry)
            if vector is not None:
                has_vector[n] = True
                rows[n] = vector
        return plain_ranking.Cosines(has_vector, embedding.cosines(rows, wanted))

    async def consolidate(
        self, config: ConsolidationConfig | None = None, *, vacuum: bool = False
    ) -> ConsolidationStats:
        """Run a consolidation pass; return what it did.

        ``config`` defaults to the store's (by default loopctl 0.1.0's rule:
        drop every entry whose relevance, as binary32, is below 0.05). Any
        other config runs :func:`lifecycle.consolidate_entries`: merged entries
        take the place of their cluster's first member. ``vacuum`` is accepted
        for the SQL store's sake and does nothing: a list has no free pages.

        Raises:
            InvalidArgumentError: ``config`` is not a ConsolidationConfig.

        """
        del vacuum
        config = self._consolidation if config is None else _check_config(config)
        await self.sweep_expired()
        if not config.is_reference:
            result = lifecycle.consolidate_entries(self._entries, config, self._now())
            self._entries = result.entries
            self._ids = {entry.id for entry in result.entries}
            self._forget_vectors()  # a merged entry's new text is pending
            return result.stats
        before = len(self._entries)
        kept = [entry for entry in self._entries if f32(entry.relevance) >= PRUNE_BELOW]
        self._entries = kept
        self._ids = {entry.id for entry in kept}
        self._forget_vectors()
        return ConsolidationStats(
            entries_before=before, entries_after=len(kept), pruned=before - len(kept)
        )

    def _live(self) -> list[MemoryEntry]:
        """The entries a read sees now (see :mod:`loopctl_memory.expiry`)."""
        if not expiry.any_expiring(self._entries):
            return self._entries
        now = self._now()
        return [entry for entry in self._entries if expiry.is_live(entry, now)]

    def _sees(self, entry: MemoryEntry) -> bool:
        """Whether a read now sees ``entry``."""
        return entry.expires_at is None or expiry.is_live(entry, self._now())

    def _refreshed(self, found: list[MemoryEntry]) -> None:
        """With ``refresh_on_read``: each of ``found`` with an expiry expires ttl from now."""
        if self._refresh and self._ttl is not None and expiry.any_expiring(found):
            expires_at = self._now() + self._ttl
            for entry in found:
                if entry.expires_at is not None:
                    entry.expires_at = expires_at

    async def sweep_expired(self) -> int:
        """Delete every expired entry; return how many."""
        if not expiry.any_expiring(self._entries):
            return 0
        live = self._live()
        swept = len(self._entries) - len(live)
        self._entries = live
        self._ids = {entry.id for entry in live}
        self._forget_vectors()
        return swept

    async def count(self, *, filter: MemoryFilter | None = None) -> int:
        """Return the number of entries (that ``filter`` passes)."""
        passes = check_filter(filter)
        live = self._live()
        if passes is None:
            return len(live)
        return sum(1 for entry in live if passes.matches(entry))

    async def is_empty(self) -> bool:
        """Return whether there are no entries."""
        return not self._live()

    async def get(self, entry_id: uuid.UUID) -> MemoryEntry | None:
        """Return the entry with this id, or None."""
        validate_id(entry_id)
        found = next((entry for entry in self._live() if entry.id == entry_id), None)
        return self._read_out(found)

    def _read_out(self, found: MemoryEntry | None) -> MemoryEntry | None:
        if found is None:
            return None
        self._refreshed([found])
        return copy_entry(found)

    async def get_by_key(self, key: str) -> MemoryEntry | None:
        """Return the entry holding ``key``, or None (see :mod:`loopctl_memory.keys`)."""
        return self._read_out(keyed(self._live(), check_key(key)))

    async def delete_by_key(self, key: str) -> bool:
        """Remove the entry holding ``key``; return whether there was one."""
        found = keyed(self._live(), check_key(key))
        return found is not None and await self.delete(found.id)

    async def delete(self, entry_id: uuid.UUID) -> bool:
        """Remove the entry with this id; return whether there was one."""
        validate_id(entry_id)
        for index, entry in enumerate(self._entries):
            if entry.id == entry_id and self._sees(entry):
                del self._entries[index]
                self._ids.discard(entry_id)
                self._vectors.pop(entry_id, None)
                return True
        return False

    async def iter_entries(
        self,
        batch_size: int = 1_000,
        *,
        filter: MemoryFilter | None = None,
        newest_first: bool = False,
    ) -> AsyncIterator[MemoryEntry]:
        """Yield a copy of every entry in insertion order, as the SQL store's ``iter_entries``.

        The entries are those stored when iteration starts; ``batch_size`` is
        accepted for the same signature (it must be an int >= 1).
        ``newest_first``: in the reverse order.

        Raises:
            InvalidArgumentError: ``batch_size`` is not an int >= 1.

        """
        check_batch_size(batch_size)
        passes = check_filter(filter)
        live = list(self._live())
        for entry in reversed(live) if newest_first else live:
            if passes is None or passes.matches(entry):
                yield copy_entry(entry)

    async def update(
        self,
        entry_id: uuid.UUID,
        *,
        memory: str | lifecycle.Unset = lifecycle.UNSET,
        category: MemoryCategory | str | lifecycle.Unset = lifecycle.UNSET,
        tags: list[str] | lifecycle.Unset = lifecycle.UNSET,
        relevance: float | lifecycle.Unset = lifecycle.UNSET,
        validated: bool | lifecycle.Unset = lifecycle.UNSET,
        metadata: dict[str, Any] | lifecycle.Unset = lifecycle.UNSET,
        merge_metadata: dict[str, Any] | lifecycle.Unset = lifecycle.UNSET,
        expires_at: datetime | lifecycle.Unset | None = lifecycle.UNSET,
    ) -> MemoryEntry | None:
        """Change the given fields of the entry with this id; return it updated, or None.

        The entry keeps its id, ``created_at``, access stamps and place in
        insertion order. A new memory gets a new vector, or is pending.
        ``metadata`` replaces the object, ``merge_metadata`` sets only the keys it
        gives; ``expires_at`` sets when it expires (None: never).

        Raises:
            InvalidEntryError: a new value is invalid (whether or not the id is
                stored); nothing changes.

        """
        validate_id(entry_id)
        changed = lifecycle.updater(
            memory=memory,
            category=category,
            tags=tags,
            relevance=relevance,
            validated=validated,
            metadata=metadata,
            merge_metadata=merge_metadata,
            expires_at=expires_at,
        )
        for index, entry in enumerate(self._entries):
            if entry.id == entry_id and self._sees(entry):
                self._entries[index] = updated = changed(entry)
                if updated.memory != entry.memory:  # its vector is of the old text: make another
                    made = await self._try_embed([updated])
                    self._keep_vectors([updated], made)
                    self._retry_pending = self._retry_pending or made is None
                return copy_entry(updated)
        return None

    async def forget(
        self,
        *,
        older_than: datetime | timedelta | None = None,
        category: MemoryCategory | str | None = None,
        below: float | None = None,
        filter: MemoryFilter | None = None,
        everything: bool = False,
    ) -> int:
        """Delete the entries that meet every condition given; return how many.

        ``older_than``: created before this time (or this long before now);
        ``category``: of this category; ``below``: relevance below this;
        ``filter``: the entries it passes.

        Raises:
            InvalidArgumentError: no condition is given and ``everything`` is not
                True, or a condition is invalid; nothing changes.

        """
        rule = lifecycle.forget_rule(
            older_than=older_than,
            category=category,
            below=below,
            filter=filter,
            everything=everything,
            now=self._now(),
        )
        live = {entry.id for entry in self._live()}
        kept = [e for e in self._entries if not (e.id in live and rule.matches(e))]
        forgotten = len(self._entries) - len(kept)
        if forgotten:
            self._entries = kept
            self._ids = {entry.id for entry in kept}
            self._forget_vectors()
        return forgotten

    def _forget_vectors(self) -> None:
        """Drop the vectors of entries no longer stored."""
        ids = self._ids
        self._vectors = {key: held for key, held in self._vectors.items() if key in ids}

    async def close(self) -> None:
        """Nothing to release; present so every backend closes the same way."""
