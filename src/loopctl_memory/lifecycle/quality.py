"""How much an entry is worth as time passes: its quality score and the decay of its relevance.

Both follow loopctl's later pass (``memory/consolidate.rs``): the quality is a
weighted sum of relevance, access count, recency and validation, and relevance
decays exponentially with age, faster or slower by category. Every number is
computed as the crate computes it, in binary32, one rounded step at a time.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from loopctl_memory.arguments import check_now
from loopctl_memory.binary32 import U16_MAX, as_secs_f32, exp32, f32, half_pow32, ln32
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.errors import InvalidArgumentError, InvalidEntryError
from loopctl_memory.metadata import copied

_RELEVANCE_WEIGHT: Final = f32(0.45)
_ACCESS_WEIGHT: Final = f32(0.30)
_RECENCY_WEIGHT: Final = f32(0.15)
_VALIDATED_WEIGHT: Final = f32(0.10)
_RECENCY_SCALE: Final = 60.0 * 60.0 * 24.0 * 30.0  # a month, in seconds (exact in binary32)

_DECAY_WEIGHTS: Final = {
    MemoryCategory.FACT: 0.5,
    MemoryCategory.STRATEGY: 0.5,
    MemoryCategory.INSIGHT: 0.75,
    MemoryCategory.ERROR_PATTERN: 0.75,
    MemoryCategory.TRAJECTORY: 1.0,
    MemoryCategory.WORKING: 2.0,
}

_access_factors: dict[int, float] = {}


def _access_factor(access_count: int) -> float:
    count = min(access_count, U16_MAX)  # the crate narrows to u16, saturating
    factor = _access_factors.get(count)
    if factor is None:
        # ln(1 + 50) in the denominator: 50 retrievals give the full access factor.
        factor = min(max(f32(ln32(f32(1.0 + count)) / ln32(51.0)), 0.0), 1.0)
        if len(_access_factors) < 4096:
            _access_factors[count] = factor
    return factor


def quality_score(entry: MemoryEntry, now: datetime) -> float:
    """The composite quality of ``entry`` at ``now``, independent of any query.

    ``relevance*0.45 + access*0.30 + recency*0.15 + validated*0.10``, in binary32,
    where ``access`` is ``ln(1 + access_count) / ln(51)`` capped at 1 (the count
    itself capped at 65,535) and ``recency`` is ``exp(-age / 30 days)`` measured
    from ``last_accessed`` or, when there is none, ``created_at`` (1.0 when that
    stamp is after ``now``). The result is in [0, 1].
    """
    stamp = entry.last_accessed if entry.last_accessed is not None else entry.created_at
    recency = 1.0
    if stamp <= now:
        recency = exp32(f32(-as_secs_f32(now - stamp) / _RECENCY_SCALE))
    total = f32(
        f32(f32(entry.relevance) * _RELEVANCE_WEIGHT)
        + f32(_access_factor(entry.access_count) * _ACCESS_WEIGHT)
    )
    total = f32(total + f32(recency * _RECENCY_WEIGHT))
    return f32(total + (_VALIDATED_WEIGHT if entry.validated else 0.0))


def category_decay_weight(category: MemoryCategory | str) -> float:
    """How many half-lives one half-life of age counts as, by category.

    Facts and strategies decay at half rate, insights and error patterns at
    three quarters, trajectories at the neutral rate, working memory at double.

    Raises:
        InvalidEntryError: ``category`` is not a known category.

    """
    try:
        return _DECAY_WEIGHTS[MemoryCategory(category)]
    except ValueError:
        raise InvalidEntryError(f"unknown category {category!r}") from None


def half_life_in_seconds(half_life: timedelta) -> float:
    """``half_life`` as binary32 seconds, as the crate takes it: at least one second.

    Raises:
        InvalidEntryError: ``half_life`` is not a timedelta.

    """
    if not isinstance(half_life, timedelta):
        raise InvalidArgumentError(f"half_life must be a timedelta, not {type(half_life).__name__}")
    return max(as_secs_f32(half_life) if half_life > timedelta(0) else 0.0, 1.0)


def decayed_to(entry: MemoryEntry, now: datetime, half_life_seconds: float) -> MemoryEntry:
    """:func:`decay_relevance` with its arguments already checked (``now`` in UTC)."""
    created = entry.created_at
    stamp = max(
        entry.last_decayed if entry.last_decayed is not None else created,
        entry.last_accessed if entry.last_accessed is not None else created,
    )
    relevance = entry.relevance
    if stamp <= now:
        weight = _DECAY_WEIGHTS[entry.category]
        half_lives = f32(f32(as_secs_f32(now - stamp) / half_life_seconds) * weight)
        factor = half_pow32(half_lives)
        decayed = min(max(f32(f32(relevance) * factor), 0.0), 1.0)
        # The crate holds relevance as binary32; a value decay leaves unchanged
        # in binary32 keeps the exact number the caller stored.
        if decayed != f32(relevance):
            relevance = decayed
    return MemoryEntry(
        category=entry.category,
        memory=entry.memory,
        tags=list(entry.tags),
        relevance=relevance,
        id=entry.id,
        created_at=created,
        access_count=entry.access_count,
        validated=entry.validated,
        last_accessed=entry.last_accessed,
        last_decayed=now,
        metadata=copied(entry.metadata),
        key=entry.key,
        expires_at=entry.expires_at,
    )


def decay_relevance(entry: MemoryEntry, now: datetime, half_life: timedelta) -> MemoryEntry:
    """Return a copy of ``entry`` decayed to ``now``; ``entry`` is not changed.

    Relevance is multiplied by ``0.5 ** (age / half_life * category weight)``
    (binary32 throughout; a half-life under one second counts as one second),
    where the age runs from the later of ``last_decayed`` and ``last_accessed``
    (each defaulting to ``created_at``), so a recent retrieval shields an entry
    and repeated passes decay each interval once: ten hourly passes equal one
    ten-hour pass. ``last_decayed`` becomes ``now``. When that stamp is after
    ``now`` only ``last_decayed`` changes. A relevance the decay leaves equal
    as binary32 is kept as given.

    Raises:
        InvalidEntryError: ``now`` is not timezone-aware or ``half_life`` is not a timedelta.

    """
    return decayed_to(entry, check_now(now), half_life_in_seconds(half_life))
