"""What a SQL store and its views share: the unit of work, the ranking copy, the options."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from loopctl_memory.bm25 import Bm25Parameters
from loopctl_memory.context import Context
from loopctl_memory.embedding import DEFAULT_TIMEOUT
from loopctl_memory.flat import EPOCH, MICROSECOND
from loopctl_memory.history import KEEP_HISTORY
from loopctl_memory.lifecycle import ConsolidationConfig, check_now
from loopctl_memory.sql.background.folds import TailFolds
from loopctl_memory.sql.background.graph_builds import GraphBuilds
from loopctl_memory.sql.database.unit_of_work import UnitOfWork
from loopctl_memory.sql.history.stamps import Stamp
from loopctl_memory.sql.lexical.term_ids import KnownTerms
from loopctl_memory.sql.ranking.state import RankingState
from loopctl_memory.sql.store.embedder import StoreEmbedder
from loopctl_memory.sql.tuning import Tuning


@dataclass(slots=True)
class SharedState:
    """What a store and its views share: the unit of work, the copy for retrieval, options."""

    unit: UnitOfWork
    tuning: Tuning
    track_access: bool
    consolidation: ConsolidationConfig
    clock: Callable[[], datetime]
    ranking: RankingState
    graph_builds: GraphBuilds  # the child building vector graphs, when one is due
    folds: TailFolds  # the child indexing a long tail, when one is due
    ranks_by: str  # the ranking retrieve uses when a call names none
    bm25: Bm25Parameters
    context: Context = "auto"  # the context weight retrieve uses when a call names none
    # One retrieval at a time uses the copy, and opens its transaction only once it
    # holds the lock: the copy then only ever moves forward in time.
    ranking_lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    watermark_seen: int = 0  # when single stores should check the tail's length
    tail_seen: int = 0  # the tail's length after this process's last batch
    # A scope name (and a term) keeps its id for ever, so a view asks for it once.
    scope_ids: dict[str, int] = field(default_factory=lambda: {"": 0})
    term_ids: KnownTerms = field(default_factory=KnownTerms)
    embed_timeout: float = DEFAULT_TIMEOUT  # for an embedder bound later (reembed)
    embedder: StoreEmbedder | None = None
    maybe_pending: bool = True  # whether entries may wait for vectors (see store/embeddings.py)
    ttl: timedelta | None = None  # an entry stored without an expiry expires this long after
    refresh_on_read: bool = False  # reads move what they return to ttl from now
    history: bool = True  # each write records its events (see loopctl_memory.history)
    keep_history: timedelta | None = KEEP_HISTORY  # a consolidation deletes older events

    def stamp(self, cause: str) -> Stamp | None:
        """What the events of a write by ``cause`` record, now; None when keeping no history."""
        return Stamp(self.now_us(), cause) if self.history else None

    def now_us(self) -> int:
        """The store's clock, checked, as microseconds since the epoch (as times are stored)."""
        return (check_now(self.clock()) - EPOCH) // MICROSECOND

    def expiry_us(self) -> int:
        """The expiry of an entry written or refreshed now: ``ttl`` from the clock's now."""
        assert self.ttl is not None  # noqa: S101 - asked only of a store with a ttl
        return self.now_us() + self.ttl // MICROSECOND
