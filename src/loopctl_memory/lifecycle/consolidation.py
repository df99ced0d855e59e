"""One consolidation pass over a store's entries: decay, merge near-duplicates, prune.

The pass follows loopctl's later pass (``memory/consolidate.rs``):
category-weighted exponential decay of relevance, greedy near-duplicate
clustering with corroboration merges, and pruning below a floor. Every number
the pass compares is computed as the crate computes it, in binary32, one
rounded step at a time, so a pass here keeps and drops exactly what the crate's
would. ``ConsolidationConfig()`` does none of the new work: it is loopctl
0.1.0's rule (drop an entry whose relevance, as binary32, is below 0.05).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Final

from loopctl_memory.arguments import check_now, check_number
from loopctl_memory.binary32 import f32
from loopctl_memory.entry import ConsolidationStats, MemoryEntry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.lifecycle.clustering import (
    Cluster,
    cluster_positions,
    merge_cluster,
    promote_highest_quality,
)
from loopctl_memory.lifecycle.quality import decayed_to, half_life_in_seconds, quality_score
from loopctl_memory.scoring import PRUNE_BELOW

_DEFAULT_HALF_LIFE: Final = timedelta(days=14)
_DEFAULT_MERGE_THRESHOLD: Final = 0.6
_DEFAULT_PRUNE_FLOOR: Final = 0.05


def _within_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0  # NaN and the infinities fail


def _utf8_length(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


@dataclass(frozen=True, slots=True)
class ConsolidationConfig:
    """What a consolidation pass does.

    The default does only what loopctl 0.1.0 did: drop every entry whose
    relevance, as binary32, is below ``prune_floor`` (0.05). :meth:`full` is
    the later crate's default pass.

    Attributes:
        decay: decay every relevance by age first (see :func:`decay_relevance`).
        half_life: the age that halves a neutral-category relevance.
        merge: fold near-duplicates into their best member (see :func:`merge_cluster`).
        merge_threshold: the Jaccard similarity at which two texts are near-duplicates.
        prune_floor: entries whose relevance (binary32) is below it are dropped.
        prune_on_quality: also drop entries whose :func:`quality_score` is below the floor.

    A threshold or floor outside [0, 1], or not finite, and a half-life under a
    second are not errors: the pass uses the defaults instead (see
    :meth:`normalized`), which can only make it do less.

    Raises:
        InvalidArgumentError: a field has the wrong type.

    """

    decay: bool = False
    half_life: timedelta = _DEFAULT_HALF_LIFE
    merge: bool = False
    merge_threshold: float = _DEFAULT_MERGE_THRESHOLD
    prune_floor: float = _DEFAULT_PRUNE_FLOOR
    prune_on_quality: bool = False

    def __post_init__(self) -> None:
        for name in ("decay", "merge", "prune_on_quality"):
            value = getattr(self, name)
            if type(value) is not bool:
                raise InvalidArgumentError(f"{name} must be a bool, not {type(value).__name__}")
        if not isinstance(self.half_life, timedelta):
            raise InvalidArgumentError(
                f"half_life must be a timedelta, not {type(self.half_life).__name__}"
            )
        for name in ("merge_threshold", "prune_floor"):
            object.__setattr__(self, name, check_number(getattr(self, name), name))

    @classmethod
    def full(cls) -> ConsolidationConfig:
        """The crate's full pass: decay (14 days), merge at 0.6, prune below 0.05 on quality too."""
        return cls(decay=True, merge=True, prune_on_quality=True)

    def normalized(self) -> ConsolidationConfig:
        """The config a pass runs: out-of-range values replaced by the defaults."""
        return ConsolidationConfig(
            decay=self.decay,
            half_life=(
                self.half_life if self.half_life >= timedelta(seconds=1) else _DEFAULT_HALF_LIFE
            ),
            merge=self.merge,
            merge_threshold=(
                self.merge_threshold
                if _within_unit(self.merge_threshold)
                else _DEFAULT_MERGE_THRESHOLD
            ),
            prune_floor=(
                self.prune_floor if _within_unit(self.prune_floor) else _DEFAULT_PRUNE_FLOOR
            ),
            prune_on_quality=self.prune_on_quality,
        )

    @property
    def is_reference(self) -> bool:
        """Whether a pass with this config is exactly loopctl 0.1.0's (relevance < 0.05 only)."""
        runs = self.normalized()
        return (
            not runs.decay
            and not runs.merge
            and not runs.prune_on_quality
            and f32(runs.prune_floor) == PRUNE_BELOW
        )


@dataclass(frozen=True, slots=True)
class ConsolidationResult:
    """What :func:`consolidate_entries` leaves.

    Attributes:
        entries: the survivors, in order; a merged entry stands where its
            cluster's first member stood.
        slots: for each survivor, the input position it stands at (its
            cluster's first member); strictly increasing.
        stats: the counts of the pass.
        merged: for each input position folded into another, the position of
            the member whose id the merged memory keeps.
        pruned: each dropped memory as it was when dropped, with the input
            position whose id it has.

    """

    entries: list[MemoryEntry]
    slots: list[int]
    stats: ConsolidationStats
    merged: dict[int, int] = field(default_factory=dict)
    pruned: list[tuple[int, MemoryEntry]] = field(default_factory=list)


def consolidate_entries(
    entries: Sequence[MemoryEntry], config: ConsolidationConfig, now: datetime
) -> ConsolidationResult:
    """Run one consolidation pass over ``entries`` (valid entries); they are not changed.

    In order, as the config (normalized) asks: decay every entry to ``now``;
    cluster near-duplicates, promote each cluster's best-quality member and
    merge the cluster into it; then drop every entry whose relevance, as
    binary32, is below the floor, or (with ``prune_on_quality``) whose quality
    score is. Entries no step changed are returned as the given objects.

    ``stats.merged`` counts the entries folded into another, ``stats.pruned``
    those dropped, and ``stats.bytes_saved`` the UTF-8 length of both groups'
    texts.

    Raises:
        InvalidArgumentError: ``config`` is not a ConsolidationConfig or ``now`` is
            not a timezone-aware datetime.

    """
    if not isinstance(config, ConsolidationConfig):
        raise InvalidArgumentError(
            f"config must be a ConsolidationConfig, not {type(config).__name__}"
        )
    now = check_now(now)
    runs = config.normalized()
    # The pass allocates a few objects per entry, none of them in a cycle; the
    # cyclic collector would rescan every live entry many times over (a third
    # of the pass at 100,000 entries) and find nothing.
    paused = gc.isenabled()
    gc.disable()
    try:
        return _consolidate(entries, runs, now)
    finally:
        if paused:
            gc.enable()


def _consolidate(
    entries: Sequence[MemoryEntry], runs: ConsolidationConfig, now: datetime
) -> ConsolidationResult:
    work: Sequence[MemoryEntry] = entries
    if runs.decay:
        half_life = half_life_in_seconds(runs.half_life)
        work = [decayed_to(entry, now, half_life) for entry in entries]

    merged = 0
    saved = 0
    slots: list[int]
    kept: list[MemoryEntry]
    merged_into: dict[int, int] = {}
    owners: list[int]  # the input position whose id each kept memory has
    if runs.merge:
        owners = []
        kept = []
        slots = []
        for members in cluster_positions(work, runs.merge_threshold):
            seed = members[0]
            slots.append(seed)
            if len(members) == 1:
                kept.append(work[seed])
                owners.append(seed)
                continue
            cluster = promote_highest_quality(
                Cluster(work[seed], [work[position] for position in members[1:]]), now
            )
            merged += len(cluster.duplicates)
            saved += sum(_utf8_length(duplicate.memory) for duplicate in cluster.duplicates)
            owner = next(p for p in members if work[p].id == cluster.canonical.id)
            merged_into.update((p, owner) for p in members if p != owner)
            owners.append(owner)
            kept.append(merge_cluster(cluster))
    else:
        kept = list(work)
        slots = list(range(len(kept)))
        owners = slots

    floor = f32(runs.prune_floor)
    prunable: Callable[[MemoryEntry], bool]
    if runs.prune_on_quality:

        def prunable(entry: MemoryEntry) -> bool:
            return f32(entry.relevance) < floor or quality_score(entry, now) < floor

    else:

        def prunable(entry: MemoryEntry) -> bool:
            return f32(entry.relevance) < floor

    survivors: list[MemoryEntry] = []
    survivor_slots: list[int] = []
    dropped: list[tuple[int, MemoryEntry]] = []
    for entry, slot, owner in zip(kept, slots, owners, strict=True):
        if prunable(entry):
            saved += _utf8_length(entry.memory)
            dropped.append((owner, entry))
        else:
            survivors.append(entry)
            survivor_slots.append(slot)
    pruned = len(kept) - len(survivors)
    return ConsolidationResult(
        survivors,
        survivor_slots,
        ConsolidationStats(
            entries_before=len(entries),
            entries_after=len(survivors),
            pruned=pruned,
            merged=merged,
            bytes_saved=saved,
        ),
        merged_into,
        dropped,
    )


@dataclass(frozen=True, slots=True)
class ConsolidationPreview:
    """What a consolidation pass would do, and why, before it runs.

    Attributes:
        stats: the counts the pass would return.
        merged: each memory that would be folded into another, and that one
            (as it stands now).
        pruned: each memory that would be dropped (as it would be then: decayed,
            or merged), and why.

    """

    stats: ConsolidationStats
    merged: list[tuple[MemoryEntry, MemoryEntry]]
    pruned: list[tuple[MemoryEntry, str]]


def preview_entries(
    entries: Sequence[MemoryEntry], config: ConsolidationConfig, now: datetime
) -> ConsolidationPreview:
    """What :func:`consolidate_entries` would do to ``entries``, each merge and prune explained.

    Raises:
        InvalidArgumentError: as :func:`consolidate_entries`.

    """
    result = consolidate_entries(entries, config, now)
    runs = config.normalized()
    floor = f32(runs.prune_floor)

    def why(entry: MemoryEntry) -> str:
        if f32(entry.relevance) < floor:
            return f"relevance {entry.relevance:.4g} is below the floor {runs.prune_floor:g}"
        quality = quality_score(entry, now)
        return f"quality {quality:.4g} is below the floor {runs.prune_floor:g}"

    return ConsolidationPreview(
        result.stats,
        [(entries[position], entries[into]) for position, into in sorted(result.merged.items())],
        [(entry, why(entry)) for _, entry in result.pruned],
    )
