"""The lifecycle of a memory after it is stored: consolidation, access, update and forgetting.

Consolidation follows loopctl's later pass (``memory/consolidate.rs``):
category-weighted exponential decay of relevance, greedy near-duplicate
clustering with corroboration merges, and pruning below a floor. Every number
the pass compares is computed as the crate computes it, in binary32, one
rounded step at a time, so a pass here keeps and drops exactly what the crate's
would. ``ConsolidationConfig()`` does none of the new work: it is loopctl
0.1.0's rule (drop an entry whose relevance, as binary32, is below 0.05).

The binary32 steps and the elementary functions come from
:mod:`loopctl_memory.binary32`.

The clustering is the crate's greedy rule (an entry joins the first cluster of
its category whose seed is similar enough), found without comparing every pair:
seeds are indexed by a prefix of their rarest tokens, which every similar enough
set must share twice (prefix and positional filtering); the few seeds found are
compared exactly.
"""

from __future__ import annotations

import bisect
import dataclasses
import enum
import gc
import itertools
import math
import re
from collections import Counter
from collections.abc import Callable, Hashable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from loopctl_memory.binary32 import (
    INT64_MAX,
    U16_MAX,
    WHITE_SPACE,
    as_secs_f32,
    exp32,
    f32,
    half_pow32,
    ln32,
)
from loopctl_memory.entry import (
    ConsolidationStats,
    MemoryCategory,
    MemoryEntry,
    validate_entry,
)
from loopctl_memory.errors import InvalidEntryError
from loopctl_memory.scoring import PRUNE_BELOW, split_whitespace

__all__ = [
    "UNSET",
    "Cluster",
    "ConsolidationConfig",
    "ConsolidationResult",
    "ForgetRule",
    "Unset",
    "access_matches",
    "apply_update",
    "category_decay_weight",
    "check_now",
    "cluster_duplicates",
    "consolidate_entries",
    "decay_relevance",
    "forget_rule",
    "jaccard",
    "merge_cluster",
    "normalized_tokens",
    "promote_highest_quality",
    "quality_score",
]


def _unit_ratio(numerator: int, denominator: int) -> float:
    """``numerator / denominator`` as binary32, as the crate's ``unit_ratio`` computes it.

    Counts above 65,535 are first divided by a shared scale (a positive count
    never scales down to zero), so a ratio of huge counts is close, not exact;
    a zero denominator gives 0.0.
    """
    if denominator == 0:
        return 0.0
    scale = max(numerator, denominator) // (U16_MAX + 1) + 1
    if scale > 1:
        numerator = max(numerator // scale, 1) if numerator > 0 else 0
        denominator = max(denominator // scale, 1)
    return f32(min(numerator, U16_MAX) / min(denominator, U16_MAX))


def _utf8_length(text: str) -> int:
    if text.isascii():
        return len(text)
    return len(text.encode("utf-8", "surrogatepass"))


def check_now(now: object) -> datetime:
    """Check that ``now`` is a timezone-aware datetime; return it in UTC.

    Raises:
        InvalidEntryError: it is anything else.

    """
    if not isinstance(now, datetime):
        raise InvalidEntryError(f"now must be a datetime, not {type(now).__name__}")
    if now.utcoffset() is None:
        raise InvalidEntryError("now must be timezone-aware (UTC)")
    try:
        return now.astimezone(UTC)
    except OverflowError:
        raise InvalidEntryError(f"now {now} is out of range in UTC") from None


def _check_number(value: object, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidEntryError(f"{what} must be a number, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int beyond any float: out of every range as infinity is
        return math.inf if value > 0 else -math.inf


# ---------------------------------------------------------------------------
# Quality and decay
# ---------------------------------------------------------------------------

_RELEVANCE_WEIGHT: Final = f32(0.45)
_ACCESS_WEIGHT: Final = f32(0.30)
_RECENCY_WEIGHT: Final = f32(0.15)
_VALIDATED_WEIGHT: Final = f32(0.10)
_RECENCY_SCALE: Final = 60.0 * 60.0 * 24.0 * 30.0  # a month, in seconds (exact in binary32)
_CORROBORATION: Final = f32(0.1)

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


def _half_life_seconds(half_life: timedelta) -> float:
    if not isinstance(half_life, timedelta):
        raise InvalidEntryError(f"half_life must be a timedelta, not {type(half_life).__name__}")
    return max(as_secs_f32(half_life) if half_life > timedelta(0) else 0.0, 1.0)


def _decayed(entry: MemoryEntry, now: datetime, half_life_seconds: float) -> MemoryEntry:
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
    return _decayed(entry, check_now(now), _half_life_seconds(half_life))


# ---------------------------------------------------------------------------
# Near-duplicates
# ---------------------------------------------------------------------------

# The first through the last alphanumeric character of a word ([^\W_] is str.isalnum).
_ALNUM_SPAN = re.compile(r"[^\W_](?:.*[^\W_])?", re.DOTALL)


def normalized_tokens(text: str) -> frozenset[str]:
    """The distinct words of ``text``, lowercased, with punctuation trimmed from both ends.

    Words are split as Rust's ``split_whitespace`` splits them; a word with no
    alphanumeric character is dropped. Alphanumeric is ``str.isalnum``, which
    agrees with Rust's ``char::is_alphanumeric`` on every letter and number;
    Rust also counts the combining marks and symbols of Unicode's
    Other_Alphabetic property (Devanagari vowel signs, circled letters), which
    are trimmed here when they end a word.
    """
    tokens = set(split_whitespace(text.lower()))
    untrimmed = [word for word in tokens if not word.isalnum()]
    if untrimmed:
        tokens.difference_update(untrimmed)
        for word in untrimmed:
            span = _ALNUM_SPAN.search(word)
            if span is not None:
                tokens.add(span.group())
    return frozenset(tokens)


def jaccard(first: frozenset[str] | set[str], second: frozenset[str] | set[str]) -> float:
    """Shared tokens over all tokens, in binary32; two empty sets are identical (1.0)."""
    return _jaccard(first, second)


def _jaccard(first: AbstractSet[Hashable], second: AbstractSet[Hashable]) -> float:
    if not first and not second:
        return 1.0
    shared = len(first & second)
    return _unit_ratio(shared, len(first) + len(second) - shared)


@dataclass(slots=True)
class Cluster:
    """Entries judged near-duplicates: the canonical one and the rest.

    Attributes:
        canonical: the entry a merge keeps (its id and text survive).
        duplicates: the other members, in the order they were met.

    """

    canonical: MemoryEntry
    duplicates: list[MemoryEntry] = dataclasses.field(default_factory=list)


# Sets this large make the crate scale its counts (see _unit_ratio); they are compared
# exhaustively instead of through the prefix index, whose bounds assume exact ratios.
_LARGE_SET = (U16_MAX - 1) // 2
# Widens the similarity bounds by far more than one binary32 rounding (2**-24), so a
# ratio that rounds up to the threshold is never filtered out.
_MARGIN = 1.0 - 1e-6


@dataclass(slots=True)
class _CategorySeeds:
    """The seeds (first members) of one category's clusters, indexed by prefix token.

    ``postings`` maps a token number to two parallel lists, sorted by the
    first: minus each seed's slack at that token (see :class:`_PrefixClustering`),
    and the seed's cluster.
    """

    postings: dict[int, tuple[list[float], list[int]]] = dataclasses.field(default_factory=dict)
    large: list[int] = dataclasses.field(default_factory=list)
    non_empty: list[int] = dataclasses.field(default_factory=list)
    first_empty: int | None = None


def _cluster_positions(entries: Sequence[MemoryEntry], threshold: float) -> list[list[int]]:
    """The crate's greedy clustering, as lists of input positions, seed first.

    Clusters come in creation order; each entry joins the first cluster of its
    category whose seed's token set reaches ``threshold`` Jaccard similarity.
    """
    if math.isnan(threshold):  # nothing reaches it, not even an identical text
        return [[position] for position in range(len(entries))]
    limit = f32(min(max(threshold, -2.0), 2.0))  # the crate holds it as binary32
    if limit > 1.0:  # no similarity reaches it either
        return [[position] for position in range(len(entries))]
    clusters: list[list[int]] = []
    if limit <= 0.0:  # everything reaches it: a category is one cluster
        first_of: dict[Hashable, int] = {}
        for position, entry in enumerate(entries):
            found = first_of.get(entry.category)
            if found is None:
                first_of[entry.category] = len(clusters)
                clusters.append([position])
            else:
                clusters[found].append(position)
        return clusters
    return _PrefixClustering(entries, limit).run(entries)


class _PrefixClustering:
    """The greedy clustering for a threshold t in (0, 1], without comparing every pair.

    Tokens are numbered rarest first and a set is held as its numbers, in
    order. Sets of sizes a and b reach t only if they share O >= s(a+b)
    tokens, s = t/(1+t), and O >= t*max(a, b). Their k-th shared token then
    sits within the first size - O + k tokens of each set, with at least
    O - k + 1 tokens from it to the end (positional filtering).

    So each seed is indexed under its first size - ceil(t*size) + 2 tokens,
    each with its slack there: tokens from it to the end, less s*size. When
    O >= 2 is certain (t*a > 1), an entry of size a looks up as many of its
    own tokens and keeps the seeds met at least twice with a slack of at
    least s*a - 1 (the second shared token's bound). Otherwise one meeting
    within its first a - ceil(t*a) + 1 tokens with a slack of s*a will do.
    The few seeds kept are compared exactly, oldest first.
    """

    def __init__(self, entries: Sequence[MemoryEntry], limit: float) -> None:
        self.limit = limit
        self.low = limit * _MARGIN
        self.share = self.low / (1.0 + self.low)
        words: dict[str, frozenset[str]] = {}
        for entry in entries:
            if entry.memory not in words:
                words[entry.memory] = normalized_tokens(entry.memory)
        frequency = Counter(itertools.chain.from_iterable(words.values()))
        ordered = sorted(frequency, key=lambda token: (frequency[token], token))
        number = {token: position for position, token in enumerate(ordered)}
        # Equal texts share one token set; equal numbers are one int object, so
        # intersecting sets compares identities.
        self.tokens_of: dict[str, tuple[list[int], frozenset[int]]] = {}
        for text, tokens in words.items():
            numbers = sorted(map(number.__getitem__, tokens))
            self.tokens_of[text] = (numbers, frozenset(numbers))
        self.seed_tokens: list[frozenset[int]] = []
        self.least_shared: dict[tuple[int, int], int] = {}
        self.prefixes: dict[int, int] = {}

    def prefix_length(self, size: int) -> int:
        """How many of a set's rarest tokens a set similar enough must share one of."""
        length = self.prefixes.get(size)
        if length is None:
            length = self.prefixes[size] = size - max(1, math.ceil(size * self.low)) + 1
        return length

    def add_seed(
        self, seeds: _CategorySeeds, cluster: int, ordered: list[int], tokens: frozenset[int]
    ) -> None:
        """Record ``tokens`` (``ordered`` rarest first) as the seed of the new ``cluster``."""
        self.seed_tokens.append(tokens)
        size = len(tokens)
        if size == 0:
            seeds.first_empty = cluster
            return
        seeds.non_empty.append(cluster)
        if size > _LARGE_SET:
            seeds.large.append(cluster)
            return
        postings = seeds.postings
        key = self.share * size - size  # minus the slack at the first token
        for token in ordered[: self.prefix_length(size) + 1]:
            posting = postings.get(token)
            if posting is None:
                postings[token] = ([key], [cluster])
            else:
                keys, clusters = posting
                at = bisect.bisect_right(keys, key)
                keys.insert(at, key)
                clusters.insert(at, cluster)
            key += 1.0

    def shared_needed(self, size: int, other_size: int) -> int:
        """The fewest shared tokens for which the crate's binary32 Jaccard reaches the limit."""
        needed = self.least_shared.get((size, other_size))
        if needed is None:
            total = size + other_size
            needed = max(1, math.ceil(self.share * total))
            while needed <= min(size, other_size) and (
                _unit_ratio(needed, total - needed) < self.limit
            ):
                needed += 1
            self.least_shared[size, other_size] = needed
        return needed

    def candidates(self, ordered: list[int], seeds: _CategorySeeds) -> set[int]:
        """The seeds that may reach the limit with the set ``ordered`` (non-empty, not large)."""
        size = len(ordered)
        postings = seeds.postings
        found: set[int] = set(seeds.large)
        if self.low * size <= 1.0:  # one shared token may be enough
            bound = -self.share * size
            for token in ordered[: self.prefix_length(size)]:
                posting = postings.get(token)
                if posting is not None:
                    keys, clusters = posting
                    found.update(clusters[: bisect.bisect_right(keys, bound)])
            return found
        bound = 1.0 - self.share * size
        met: set[int] = set()
        for token in ordered[: self.prefix_length(size) + 1]:
            posting = postings.get(token)
            if posting is not None:
                keys, clusters = posting
                reached = clusters[: bisect.bisect_right(keys, bound)]
                if met:
                    found.update(met.intersection(reached))
                met.update(reached)
        return found

    def first_match(
        self, ordered: list[int], tokens: frozenset[int], seeds: _CategorySeeds
    ) -> int | None:
        """The oldest cluster of these seeds that ``tokens`` (non-empty) reaches the limit with."""
        size = len(tokens)
        seed_tokens = self.seed_tokens
        if size > _LARGE_SET:
            for cluster in seeds.non_empty:
                if _jaccard(tokens, seed_tokens[cluster]) >= self.limit:
                    return cluster
            return None
        for cluster in sorted(self.candidates(ordered, seeds)):
            other = seed_tokens[cluster]
            if len(other) > _LARGE_SET:
                if _jaccard(tokens, other) >= self.limit:
                    return cluster
            elif len(tokens & other) >= self.shared_needed(size, len(other)):
                return cluster
        return None

    def run(self, entries: Sequence[MemoryEntry]) -> list[list[int]]:
        """Cluster ``entries``: input positions, cluster by cluster, seed first."""
        clusters: list[list[int]] = []
        seeds_of: dict[Hashable, _CategorySeeds] = {}
        # An entry whose text (or token set) was met before goes where that one went:
        # it fails every older cluster that one failed, and reaches the same seed.
        by_text: dict[tuple[Hashable, str], int] = {}
        by_tokens: dict[tuple[Hashable, frozenset[int]], int] = {}
        for position, entry in enumerate(entries):
            category: Hashable = entry.category
            cluster = by_text.get((category, entry.memory))
            if cluster is None:
                ordered, tokens = self.tokens_of[entry.memory]
                cluster = by_tokens.get((category, tokens))
                if cluster is None:
                    seeds = seeds_of.get(category)
                    if seeds is None:
                        seeds = seeds_of[category] = _CategorySeeds()
                    if tokens:
                        cluster = self.first_match(ordered, tokens, seeds)
                    else:  # an empty set reaches only an empty seed (Jaccard 1.0)
                        cluster = seeds.first_empty
                    if cluster is None:
                        cluster = len(clusters)
                        clusters.append([])
                        self.add_seed(seeds, cluster, ordered, tokens)
                    by_tokens[category, tokens] = cluster
                by_text[category, entry.memory] = cluster
            clusters[cluster].append(position)
        return clusters


def cluster_duplicates(entries: Sequence[MemoryEntry], threshold: float) -> list[Cluster]:
    """Partition ``entries`` into near-duplicate clusters, greedily, in one pass.

    Each entry, in order, joins the first cluster (in creation order) of its
    category whose first member's :func:`normalized_tokens` have a Jaccard
    similarity (binary32) of at least ``threshold`` with its own; otherwise it
    starts a new cluster. Every entry lands in exactly one cluster; a singleton
    has no duplicates. A threshold <= 0 puts each category in one cluster; NaN
    or one above 1 leaves every entry alone. The clusters hold the given
    entry objects.

    Raises:
        InvalidEntryError: ``threshold`` is not a number.

    """
    limit = _check_number(threshold, "threshold")
    return [
        Cluster(entries[members[0]], [entries[position] for position in members[1:]])
        for members in _cluster_positions(entries, limit)
    ]


def promote_highest_quality(cluster: Cluster, now: datetime) -> Cluster:
    """Return ``cluster`` with its best :func:`quality_score` member as the canonical one.

    A duplicate replaces the canonical entry only with a strictly higher score
    (the first such best wins); the replaced canonical entry moves to the end of
    the duplicates. ``cluster`` itself is not changed.
    """
    best_score = quality_score(cluster.canonical, now)
    best: int | None = None
    for position, duplicate in enumerate(cluster.duplicates):
        score = quality_score(duplicate, now)
        if score > best_score:
            best_score = score
            best = position
    if best is None:
        return Cluster(cluster.canonical, list(cluster.duplicates))
    duplicates = list(cluster.duplicates)
    canonical = duplicates.pop(best)
    duplicates.append(cluster.canonical)
    return Cluster(canonical, duplicates)


def merge_cluster(cluster: Cluster) -> MemoryEntry:
    """Fold a cluster into one new entry; the cluster's entries are not changed.

    The result keeps the canonical entry's id, category, text and
    ``last_decayed``; each duplicate adds 0.1 to the relevance (binary32, capped
    at 1.0) and its access count (saturating at 2**63 - 1), and its tags not yet
    present, in order. ``validated`` is true if any member's is; ``created_at``
    is the earliest and ``last_accessed`` the latest of the members'.
    """
    canonical = cluster.canonical
    relevance = canonical.relevance
    access_count = canonical.access_count
    validated = canonical.validated
    created_at = canonical.created_at
    last_accessed = canonical.last_accessed
    tags = list(canonical.tags)
    present = set(tags)
    for duplicate in cluster.duplicates:
        relevance = min(f32(f32(relevance) + _CORROBORATION), 1.0)
        access_count = min(access_count + duplicate.access_count, INT64_MAX)
        validated = validated or duplicate.validated
        created_at = min(created_at, duplicate.created_at)
        if duplicate.last_accessed is not None and (
            last_accessed is None or duplicate.last_accessed > last_accessed
        ):
            last_accessed = duplicate.last_accessed
        for tag in duplicate.tags:
            if tag not in present:
                present.add(tag)
                tags.append(tag)
    return MemoryEntry(
        category=canonical.category,
        memory=canonical.memory,
        tags=tags,
        relevance=relevance,
        id=canonical.id,
        created_at=created_at,
        access_count=access_count,
        validated=validated,
        last_accessed=last_accessed,
        last_decayed=canonical.last_decayed,
    )


# ---------------------------------------------------------------------------
# The pass
# ---------------------------------------------------------------------------

_DEFAULT_HALF_LIFE: Final = timedelta(days=14)
_DEFAULT_MERGE_THRESHOLD: Final = 0.6
_DEFAULT_PRUNE_FLOOR: Final = 0.05


def _within_unit(value: float) -> bool:
    return 0.0 <= value <= 1.0  # NaN and the infinities fail


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
        InvalidEntryError: a field has the wrong type.

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
                raise InvalidEntryError(f"{name} must be a bool, not {type(value).__name__}")
        if not isinstance(self.half_life, timedelta):
            raise InvalidEntryError(
                f"half_life must be a timedelta, not {type(self.half_life).__name__}"
            )
        for name in ("merge_threshold", "prune_floor"):
            object.__setattr__(self, name, _check_number(getattr(self, name), name))

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

    """

    entries: list[MemoryEntry]
    slots: list[int]
    stats: ConsolidationStats


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
        InvalidEntryError: ``config`` is not a ConsolidationConfig or ``now`` is
            not a timezone-aware datetime.

    """
    if not isinstance(config, ConsolidationConfig):
        raise InvalidEntryError(
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
        half_life = _half_life_seconds(runs.half_life)
        work = [_decayed(entry, now, half_life) for entry in entries]

    merged = 0
    saved = 0
    slots: list[int]
    kept: list[MemoryEntry]
    if runs.merge:
        kept = []
        slots = []
        for members in _cluster_positions(work, runs.merge_threshold):
            seed = members[0]
            slots.append(seed)
            if len(members) == 1:
                kept.append(work[seed])
                continue
            cluster = promote_highest_quality(
                Cluster(work[seed], [work[position] for position in members[1:]]), now
            )
            merged += len(cluster.duplicates)
            saved += sum(_utf8_length(duplicate.memory) for duplicate in cluster.duplicates)
            kept.append(merge_cluster(cluster))
    else:
        kept = list(work)
        slots = list(range(len(kept)))

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
    for entry, slot in zip(kept, slots, strict=True):
        if prunable(entry):
            saved += _utf8_length(entry.memory)
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
    )


# ---------------------------------------------------------------------------
# Access, update, forgetting
# ---------------------------------------------------------------------------


def access_matches(query: str, entries: Sequence[MemoryEntry]) -> list[bool]:
    """For each entry, whether ``query`` really matched it, so retrieving it counts as an access.

    An entry matches when one of the query's lowercased words occurs in its
    lowercased memory, or when the lowercased query, trimmed of whitespace and
    not empty, occurs in one of its lowercased tags. A blank query matches
    nothing, so entries returned on their baseline score alone are never
    counted.
    """
    lowered = query.lower()
    words = tuple(dict.fromkeys(split_whitespace(lowered)))
    if not words:
        return [False] * len(entries)
    trimmed = lowered.strip(WHITE_SPACE)  # Rust's str::trim
    matches: list[bool] = []
    for entry in entries:
        memory = entry.memory.lower()
        matches.append(
            any(word in memory for word in words)
            or any(trimmed in tag.lower() for tag in entry.tags)
        )
    return matches


class Unset(enum.Enum):
    """The type of :data:`UNSET`: an argument not given."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""The default of every :func:`apply_update` field: leave it as it is."""


def apply_update(
    entry: MemoryEntry,
    *,
    memory: str | Unset = UNSET,
    category: MemoryCategory | str | Unset = UNSET,
    tags: list[str] | Unset = UNSET,
    relevance: float | Unset = UNSET,
    validated: bool | Unset = UNSET,
) -> MemoryEntry:
    """Return a validated copy of ``entry`` with the given fields replaced.

    The id, ``created_at``, access count and access and decay stamps are kept.

    Raises:
        InvalidEntryError: a new value is invalid (as :func:`validate_entry` decides).

    """
    given = {
        "memory": memory,
        "category": category,
        "tags": tags,
        "relevance": relevance,
        "validated": validated,
    }
    # Any value at all: validate_entry decides what is acceptable.
    changes: dict[str, Any] = {name: value for name, value in given.items() if value is not UNSET}
    changes.setdefault("tags", list(entry.tags))
    return validate_entry(dataclasses.replace(entry, **changes))


_BEFORE_EVERYTHING: Final = datetime.min.replace(tzinfo=UTC)


def _cutoff(older_than: object, now: datetime) -> datetime:
    """The instant an ``older_than`` argument of ``forget`` stands for, in UTC."""
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise InvalidEntryError(f"older_than must not be negative, got {older_than}")
        try:
            return now - older_than
        except OverflowError:  # older than any representable time: nothing is
            return _BEFORE_EVERYTHING
    if isinstance(older_than, datetime):
        if older_than.utcoffset() is None:
            raise InvalidEntryError("older_than must be timezone-aware (UTC)")
        try:
            return older_than.astimezone(UTC)
        except OverflowError:
            raise InvalidEntryError(f"older_than {older_than} is out of range in UTC") from None
    raise InvalidEntryError(
        f"older_than must be a datetime or a timedelta, not {type(older_than).__name__}"
    )


@dataclass(frozen=True, slots=True)
class ForgetRule:
    """Which entries a ``forget`` deletes: those meeting every condition set.

    Attributes:
        created_before: entries created strictly before this (UTC) instant.
        category: entries of this category.
        below: entries whose relevance is strictly below this.

    With no condition set, every entry matches.

    """

    created_before: datetime | None = None
    category: MemoryCategory | None = None
    below: float | None = None

    @property
    def is_everything(self) -> bool:
        """Whether the rule has no condition, so it matches every entry."""
        return self.created_before is None and self.category is None and self.below is None

    def matches(self, entry: MemoryEntry) -> bool:
        """Whether ``entry`` meets every condition of the rule."""
        return (
            (self.created_before is None or entry.created_at < self.created_before)
            and (self.category is None or entry.category == self.category)
            and (self.below is None or entry.relevance < self.below)
        )


def forget_rule(
    older_than: datetime | timedelta | None,
    category: MemoryCategory | str | None,
    below: float | None,
    everything: bool,
    now: datetime,
) -> ForgetRule:
    """Check the arguments of ``forget`` and return the rule they describe.

    Args:
        older_than: a timezone-aware instant, or an age (a non-negative
            timedelta, counted back from ``now``); entries created before it match.
        category: a category (or its value); entries of it match.
        below: a finite number; entries with a lower relevance match.
        everything: must be True to forget with no condition at all; with
            conditions it changes nothing.
        now: the current time, timezone-aware.

    Raises:
        InvalidEntryError: an argument has the wrong type or value, or no
            condition is given and ``everything`` is not True.

    """
    now = check_now(now)
    if type(everything) is not bool:
        raise InvalidEntryError(f"everything must be a bool, not {type(everything).__name__}")
    created_before = None if older_than is None else _cutoff(older_than, now)
    chosen: MemoryCategory | None = None
    if category is not None:
        try:
            chosen = MemoryCategory(category)
        except ValueError:
            known = ", ".join(member.value for member in MemoryCategory)
            raise InvalidEntryError(
                f"unknown category {category!r}; expected one of {known}"
            ) from None
    limit: float | None = None
    if below is not None:
        limit = _check_number(below, "below")
        if not math.isfinite(limit):
            raise InvalidEntryError(f"below must be finite, got {limit}")
    rule = ForgetRule(created_before, chosen, limit)
    if rule.is_everything and not everything:
        raise InvalidEntryError(
            "forget needs a condition (older_than, category or below), or everything=True"
        )
    return rule
