"""Near-duplicates: which entries are alike enough to merge, and how a cluster folds into one.

The clustering is the crate's greedy rule (``memory/consolidate.rs``: an entry
joins the first cluster of its category whose seed is similar enough), found
without comparing every pair: seeds are indexed by a prefix of their rarest
tokens, which every similar enough set must share twice (prefix and positional
filtering); the few seeds found are compared exactly. Similarity is the
crate's Jaccard ratio, in binary32.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import math
import re
from collections import Counter
from collections.abc import Hashable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from loopctl_memory.arguments import check_number
from loopctl_memory.binary32 import INT64_MAX, U16_MAX, f32
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.lifecycle.quality import quality_score
from loopctl_memory.metadata import combined
from loopctl_memory.scoring import split_whitespace

# What each duplicate a merge folds in adds to the relevance: the crate's corroboration.
_CORROBORATION: Final = f32(0.1)

# The first through the last alphanumeric character of a word ([^\W_] is str.isalnum).
_ALNUM_SPAN = re.compile(r"[^\W_](?:.*[^\W_])?", re.DOTALL)


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


def cluster_positions(entries: Sequence[MemoryEntry], threshold: float) -> list[list[int]]:
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
    limit = check_number(threshold, "threshold")
    return [
        Cluster(entries[members[0]], [entries[position] for position in members[1:]])
        for members in cluster_positions(entries, limit)
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
    is the earliest and ``last_accessed`` the latest of the members'. Its
    metadata has every key a member's has, with the canonical entry's value
    first, then the duplicates' in order (:func:`loopctl_memory.metadata.combined`).
    Its key is the canonical entry's, else the first duplicate's that has one;
    the members' other keys name no memory once the merge is written. It
    expires when its last member would have (never, if one never does).
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
        key=next(
            (member.key for member in (canonical, *cluster.duplicates) if member.key is not None),
            None,
        ),
        # The merge lives as long as its longest-lived member.
        expires_at=None
        if any(member.expires_at is None for member in (canonical, *cluster.duplicates))
        else max(
            member.expires_at
            for member in (canonical, *cluster.duplicates)
            if member.expires_at is not None
        ),
        metadata=combined(
            [canonical.metadata, *(duplicate.metadata for duplicate in cluster.duplicates)]
        ),
    )
