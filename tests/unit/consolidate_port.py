"""A plain, quadratic port of the crate's consolidation pass: the oracle for the lifecycle package.

Each function follows ``memory/consolidate.rs`` step for step, with straight
loops and no index, so that its results can be trusted by reading it. Numbers
are binary32 as in the crate: every arithmetic step goes through ``f32`` and
the elementary functions are the ones ``binary32`` takes from the C library
(the crate calls the same ones).

Where the Python library deliberately differs from the crate, this port
follows the library, and says so:

* a decay that leaves the binary32 relevance unchanged keeps the stored float;
* access counts saturate at 2**63 - 1 (the stored range), not at u64::MAX;
* the pass also reports, for each survivor, the input position it stands at.
"""

from __future__ import annotations

import dataclasses
import math
from datetime import datetime, timedelta

from loopctl_memory.binary32 import exp32, f32, half_pow32, ln32
from loopctl_memory.entry import ConsolidationStats, MemoryCategory, MemoryEntry
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.scoring import split_whitespace

INT64_MAX = 2**63 - 1
U16_MAX = 65_535


def as_secs_f32(span: timedelta) -> float:
    seconds = span.days * 86_400 + span.seconds
    nanos = span.microseconds * 1000
    return f32(f32(float(seconds)) + f32(f32(float(nanos)) / f32(1e9)))


def quality_score(entry: MemoryEntry, now: datetime) -> float:
    access_count = f32(float(min(entry.access_count, U16_MAX)))
    access_factor = f32(ln32(f32(1.0 + access_count)) / ln32(f32(1.0 + 50.0)))
    access_factor = min(max(access_factor, 0.0), 1.0)
    stamp = entry.last_accessed if entry.last_accessed is not None else entry.created_at
    if now >= stamp:
        recency = exp32(f32(-as_secs_f32(now - stamp) / f32(60.0 * 60.0 * 24.0 * 30.0)))
    else:
        recency = 1.0
    validated = 1.0 if entry.validated else 0.0
    total = f32(f32(entry.relevance) * f32(0.45))
    total = f32(total + f32(access_factor * f32(0.30)))
    total = f32(total + f32(recency * f32(0.15)))
    return f32(total + f32(validated * f32(0.10)))


def category_decay_weight(category: MemoryCategory) -> float:
    if category in (MemoryCategory.FACT, MemoryCategory.STRATEGY):
        return 0.5
    if category in (MemoryCategory.INSIGHT, MemoryCategory.ERROR_PATTERN):
        return 0.75
    if category == MemoryCategory.TRAJECTORY:
        return 1.0
    return 2.0


def decay_relevance(entry: MemoryEntry, now: datetime, half_life: timedelta) -> MemoryEntry:
    entry = dataclasses.replace(entry, tags=list(entry.tags))
    decayed_from = entry.last_decayed if entry.last_decayed is not None else entry.created_at
    accessed = entry.last_accessed if entry.last_accessed is not None else entry.created_at
    stamp = max(decayed_from, accessed)
    if now < stamp:
        entry.last_decayed = now
        return entry
    half_life_seconds = max(as_secs_f32(half_life), 1.0)
    half_lives = f32(as_secs_f32(now - stamp) / half_life_seconds)
    half_lives = f32(half_lives * category_decay_weight(entry.category))
    factor = half_pow32(max(half_lives, 0.0))
    relevance = min(max(f32(f32(entry.relevance) * factor), 0.0), 1.0)
    if relevance != f32(entry.relevance):  # the library keeps an unchanged stored float
        entry.relevance = relevance
    entry.last_decayed = now
    return entry


def normalized_tokens(text: str) -> set[str]:
    tokens = set()
    for word in split_whitespace(text.lower()):
        start = 0
        end = len(word)
        while start < end and not word[start].isalnum():
            start += 1
        while end > start and not word[end - 1].isalnum():
            end -= 1
        if start < end:
            tokens.add(word[start:end])
    return tokens


def unit_ratio(numerator: int, denominator: int) -> float:
    if denominator == 0:
        return 0.0
    scale = max(denominator, numerator) // (U16_MAX + 1) + 1
    numerator_scaled = numerator // scale
    if numerator > 0 and numerator_scaled == 0:
        numerator_scaled = 1
    denominator_scaled = denominator // scale
    if denominator > 0 and denominator_scaled == 0:
        denominator_scaled = 1
    numerator_scaled = min(numerator_scaled, U16_MAX)
    denominator_scaled = min(denominator_scaled, U16_MAX)
    return f32(f32(float(numerator_scaled)) / f32(float(denominator_scaled)))


def jaccard(first: set[str], second: set[str]) -> float:
    if not first and not second:
        return 1.0
    return unit_ratio(len(first & second), len(first | second))


def cluster_duplicates(
    entries: list[MemoryEntry], threshold: float
) -> list[list[tuple[int, MemoryEntry]]]:
    """Clusters as lists of (input position, entry), the first member first."""
    limit = f32(threshold) if math.isfinite(threshold) else threshold
    clusters: list[list[tuple[int, MemoryEntry]]] = []
    seed_tokens: list[set[str]] = []
    for position, entry in enumerate(entries):
        tokens = normalized_tokens(entry.memory)
        placed = False
        for cluster, other in zip(clusters, seed_tokens, strict=True):
            if cluster[0][1].category == entry.category and jaccard(tokens, other) >= limit:
                cluster.append((position, entry))
                placed = True
                break
        if not placed:
            clusters.append([(position, entry)])
            seed_tokens.append(tokens)
    return clusters


def promote_highest_quality(
    canonical: MemoryEntry, duplicates: list[MemoryEntry], now: datetime
) -> tuple[MemoryEntry, list[MemoryEntry]]:
    best_index = None
    best_score = quality_score(canonical, now)
    for index, duplicate in enumerate(duplicates):
        score = quality_score(duplicate, now)
        if score > best_score:
            best_score = score
            best_index = index
    if best_index is None:
        return canonical, duplicates
    duplicates = list(duplicates)
    promoted = duplicates.pop(best_index)
    duplicates.append(canonical)
    return promoted, duplicates


def merge_cluster(canonical: MemoryEntry, duplicates: list[MemoryEntry]) -> MemoryEntry:
    merged = dataclasses.replace(canonical, tags=list(canonical.tags))
    earliest = merged.created_at
    for duplicate in duplicates:
        earliest = min(earliest, duplicate.created_at)
    merged.created_at = earliest
    latest = merged.last_accessed
    for duplicate in duplicates:
        if duplicate.last_accessed is not None and (
            latest is None or duplicate.last_accessed > latest
        ):
            latest = duplicate.last_accessed
    merged.last_accessed = latest
    for duplicate in duplicates:
        merged.relevance = min(f32(f32(merged.relevance) + f32(0.1)), 1.0)
        merged.access_count = min(merged.access_count + duplicate.access_count, INT64_MAX)
        merged.validated = merged.validated or duplicate.validated
        for tag in duplicate.tags:
            if tag not in merged.tags:
                merged.tags.append(tag)
    return merged


def normalized(config: ConsolidationConfig) -> ConsolidationConfig:
    def unit_or(value: float, default: float) -> float:
        return value if math.isfinite(value) and 0.0 <= value <= 1.0 else default

    half_life = config.half_life
    if half_life < timedelta(seconds=1):
        half_life = timedelta(days=14)
    return ConsolidationConfig(
        decay=config.decay,
        half_life=half_life,
        merge=config.merge,
        merge_threshold=unit_or(config.merge_threshold, 0.6),
        prune_floor=unit_or(config.prune_floor, 0.05),
        prune_on_quality=config.prune_on_quality,
    )


def consolidate_entries(
    entries: list[MemoryEntry], config: ConsolidationConfig, now: datetime
) -> tuple[list[MemoryEntry], list[int], ConsolidationStats]:
    """The pass: (survivors, the input position each stands at, stats)."""
    config = normalized(config)
    entries_before = len(entries)
    work = list(entries)
    positions = list(range(len(work)))
    if config.decay:
        work = [decay_relevance(entry, now, config.half_life) for entry in work]
    merged = 0
    merged_away_text = 0
    if config.merge:
        consolidated = []
        consolidated_positions = []
        for cluster in cluster_duplicates(work, config.merge_threshold):
            canonical, duplicates = promote_highest_quality(
                cluster[0][1], [entry for _, entry in cluster[1:]], now
            )
            for duplicate in duplicates:
                merged_away_text += len(duplicate.memory.encode("utf-8"))
            merged += len(duplicates)
            consolidated.append(merge_cluster(canonical, duplicates))
            consolidated_positions.append(cluster[0][0])
        work = consolidated
        positions = consolidated_positions
    floor = f32(config.prune_floor)
    before_prune = len(work)
    pruned_text = 0
    survivors = []
    survivor_positions = []
    for entry, position in zip(work, positions, strict=True):
        prunable = f32(entry.relevance) < floor
        if config.prune_on_quality and quality_score(entry, now) < floor:
            prunable = True
        if prunable:
            pruned_text += len(entry.memory.encode("utf-8"))
        else:
            survivors.append(entry)
            survivor_positions.append(position)
    stats = ConsolidationStats(
        entries_before=entries_before,
        entries_after=len(survivors),
        pruned=before_prune - len(survivors),
        merged=merged,
        bytes_saved=pruned_text + merged_away_text,
    )
    return survivors, survivor_positions, stats
