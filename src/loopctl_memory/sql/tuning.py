"""The thresholds of the token index and of retrieval: they set speed and memory, never answers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tuning:
    """How a store balances writing the token index against reading at retrieval.

    Every value gives the same answers; tests pass small ones so that each path
    of the index and of the search runs on a few entries.
    """

    tail_limit: int = 10_000
    """Entries a write may leave unindexed before they are indexed into a block; a process
    inverts about this many itself (up to ``folds.LAG`` times as many while a child indexes)."""
    background_folds: bool = True
    """Whether a file or PostgreSQL store leaves a tail of ``tail_limit`` entries to a child
    process to index (:mod:`~loopctl_memory.sql.background.folds`), the write going on at
    the speed of its inserts, instead of indexing it in the write's transaction. Off (tests
    set this), every such write indexes, as ``:memory:`` always does."""
    word_cache_bytes: int = 64 * 2**20
    """Memory for the entries of the words that took many postings to find, kept for later
    queries (a mask of one byte per entry for the commonest, else their seqs)."""
    giant_memory: int = 65_536
    """A write holding a memory of at least this many characters indexes the tail at once:
    its tokens then cost their size once, at the write, not at every later retrieval."""
    small_scope: int = 20_000
    """A scope of at most this many entries is ranked from its entries' texts, kept in
    memory once read, instead of from the postings of every entry (0: never)."""
    reindex_above: int = 1_000
    """A consolidation pass that rewrites more entries than this builds the token index
    again, instead of every process scoring them apart from their stale postings."""
    vector_loose: int = 50_000
    """Vectors a process holds itself as binary32 rows and scores exactly at every vector
    retrieval; beyond them, a store with a place for files puts them into a graph file,
    shared by the processes of the machine (``:memory:`` holds every vector)."""
    background_builds: bool = True
    """Whether a retrieval that finds a graph build due (past ``vector_loose``) starts one
    in a child process of the store. Off, only ``build_indexes`` builds (tests set this)."""
    vector_candidates: int = 1_024
    """Entries a vector retrieval asks the graphs for (the search's breadth): more finds the
    exact best more often, at a cost in time. At a million 384-d vectors (graphs built with
    128 candidates), recall@10 0.982 at 512, 0.991 at 768, 0.9945 at 1,024, 0.9985 at 1,536,
    0.9995 at 2,048. A hybrid retrieval starts from half as many and
    asks for more when its bound says an entry left out could still belong."""
    vector_exact: int = 16_384
    """A view or filter whose entries in the graphs number at most this many has them all
    scored exactly from their stored vectors, instead of searching the graphs."""
