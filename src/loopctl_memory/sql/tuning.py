"""The thresholds of the token index and of retrieval: they set speed, never answers."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Tuning:
    """How a store balances writing the token index against reading at retrieval.

    Every value gives the same answers; tests pass small ones so that each path
    of the index and of the search runs on a few entries.
    """

    tail_limit: int = 10_000
    """Entries a write may leave unindexed; retrieval reads at most about this many directly."""
    selective_max: int = 5_000
    """A word (or the tag test) that can match at most this many entries is enumerated."""
    first_chunk: int = 256
    """Rows the first step of the relevance walk reads (more for a larger limit)."""
    max_chunk: int = 16_384
    """Rows one later step of the walk reads at most."""
