"""Consolidation, access tracking, update and forget: the lifecycle package and InMemoryStore.

The first tests port loopctl's own tests of ``memory/consolidate.rs``; a
property test then holds the indexed pass to the plain quadratic port in
``consolidate_port.py``. The store-level tests (access stamps as
``memory/builtin.rs`` tests them, update, forget, a configured consolidation)
run on every backend in ``tests/contract/test_lifecycle_contract.py``.
Every time is fixed: no test reads the wall clock.
"""

from __future__ import annotations

import dataclasses
import math
import random
import struct
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loopctl_memory import InMemoryStore, InvalidEntryError, MemoryCategory, MemoryEntry
from loopctl_memory.binary32 import f32
from loopctl_memory.entry import ConsolidationStats, copy_entry
from loopctl_memory.lifecycle import (
    Cluster,
    ConsolidationConfig,
    access_matches,
    category_decay_weight,
    cluster_duplicates,
    consolidate_entries,
    decay_relevance,
    jaccard,
    merge_cluster,
    normalized_tokens,
    promote_highest_quality,
    quality_score,
)
from loopctl_memory.scoring import PRUNE_BELOW
from tests.unit import consolidate_port as port

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
INT64_MAX = 2**63 - 1


def entry(category: MemoryCategory, text: str, **fields) -> MemoryEntry:
    fields.setdefault("created_at", NOW)
    return MemoryEntry(category, text, **fields)


# --- consolidate.rs, ported --------------------------------------------------------------


def test_quality_score_weights_relevance_access_recency_and_validation():
    relevance_heavy = entry(MemoryCategory.INSIGHT, "high relevance, never touched", relevance=1.0)
    access_heavy = entry(
        MemoryCategory.INSIGHT, "low relevance, often retrieved", relevance=0.2, access_count=50
    )
    assert quality_score(relevance_heavy, NOW) > quality_score(access_heavy, NOW)
    plain = entry(MemoryCategory.INSIGHT, "baseline", relevance=0.5)
    validated = dataclasses.replace(plain, validated=True)
    assert quality_score(validated, NOW) > quality_score(plain, NOW)


def test_quality_score_components_and_their_saturation():
    fresh = entry(MemoryCategory.FACT, "x", relevance=0.0)
    assert f32(0.15) == quality_score(fresh, NOW)  # recency 1.0 is the whole score
    future = entry(MemoryCategory.FACT, "x", relevance=0.0, created_at=NOW + HOUR)
    assert f32(0.15) == quality_score(future, NOW)  # a stamp after now counts as now
    full = entry(MemoryCategory.FACT, "x", relevance=1.0, access_count=50, validated=True)
    assert 1.0 == pytest.approx(quality_score(full, NOW), abs=1e-6)
    # The crate narrows the count to u16: every count from 65,535 up scores the same.
    capped = [
        quality_score(dataclasses.replace(full, access_count=count), NOW)
        for count in (65_535, 65_536, 10**12, INT64_MAX)
    ]
    assert len(set(capped)) == 1
    month_old = entry(MemoryCategory.FACT, "x", relevance=0.0, created_at=NOW - timedelta(30))
    assert f32(f32(math.exp(-1.0)) * f32(0.15)) == pytest.approx(
        quality_score(month_old, NOW), abs=1e-7
    )
    accessed = dataclasses.replace(month_old, last_accessed=NOW)
    assert quality_score(accessed, NOW) == f32(0.15)  # the access stamp wins over creation


def test_decay_halves_per_half_life_and_weights_categories():
    half_life = HOUR
    one_half = entry(MemoryCategory.TRAJECTORY, "aged one half-life", relevance=0.8)
    one_half.created_at = NOW - half_life
    assert 0.4 == pytest.approx(decay_relevance(one_half, NOW, half_life).relevance, abs=1e-4)
    two_halves = dataclasses.replace(one_half, created_at=NOW - 2 * half_life)
    assert 0.2 == pytest.approx(decay_relevance(two_halves, NOW, half_life).relevance, abs=1e-4)
    fact = entry(MemoryCategory.FACT, "durable", relevance=0.8, created_at=NOW - half_life)
    working = entry(MemoryCategory.WORKING, "ephemeral", relevance=0.8, created_at=NOW - half_life)
    assert (
        decay_relevance(fact, NOW, half_life).relevance
        > decay_relevance(working, NOW, half_life).relevance
    )


def test_decay_is_idempotent_across_consolidation_cadences():
    start = NOW - timedelta(hours=10)
    half_life = HOUR
    single = entry(MemoryCategory.TRAJECTORY, "decayed once", relevance=1.0, created_at=start)
    single = decay_relevance(single, start + timedelta(hours=10), half_life)
    incremental = entry(MemoryCategory.TRAJECTORY, "ten passes", relevance=1.0, created_at=start)
    durable = entry(MemoryCategory.FACT, "a durable fact", relevance=1.0, created_at=start)
    for step in range(1, 11):
        incremental = decay_relevance(incremental, start + step * HOUR, half_life)
        durable = decay_relevance(durable, start + step * HOUR, half_life)
    assert single.relevance == pytest.approx(incremental.relevance, abs=1e-5)
    assert 0.5**10 == pytest.approx(incremental.relevance, abs=1e-5)
    assert durable.relevance > incremental.relevance  # the weight applies per time, not per pass
    assert incremental.last_decayed == NOW


def test_decay_resists_for_recently_accessed_entries():
    old = NOW - timedelta(hours=24)
    untouched = entry(MemoryCategory.TRAJECTORY, "old and untouched", relevance=0.8, created_at=old)
    touched = dataclasses.replace(untouched, last_accessed=NOW)
    assert (
        decay_relevance(touched, NOW, HOUR).relevance
        > decay_relevance(untouched, NOW, HOUR).relevance
    )


def test_decay_returns_a_new_entry_and_a_future_stamp_only_moves_last_decayed():
    aged = entry(MemoryCategory.FACT, "aged", tags=["t"], relevance=0.8, created_at=NOW - HOUR)
    before = copy_entry(aged)
    decayed = decay_relevance(aged, NOW, HOUR)
    assert before == aged  # not changed in place
    assert decayed.tags is not aged.tags
    assert (decayed.id, decayed.created_at, decayed.last_decayed) == (aged.id, aged.created_at, NOW)
    future = entry(MemoryCategory.FACT, "from the future", relevance=0.3, created_at=NOW + HOUR)
    assert dataclasses.replace(future, last_decayed=NOW) == decay_relevance(future, NOW, HOUR)
    # No age: the stored float is kept (it is the same binary32).
    assert 0.3 == decay_relevance(dataclasses.replace(future, created_at=NOW), NOW, HOUR).relevance
    with pytest.raises(InvalidEntryError):
        decay_relevance(aged, NOW.replace(tzinfo=None), HOUR)


def test_category_decay_weights():
    weights = {category: category_decay_weight(category) for category in MemoryCategory}
    assert weights == {
        MemoryCategory.FACT: 0.5,
        MemoryCategory.STRATEGY: 0.5,
        MemoryCategory.INSIGHT: 0.75,
        MemoryCategory.ERROR_PATTERN: 0.75,
        MemoryCategory.TRAJECTORY: 1.0,
        MemoryCategory.WORKING: 2.0,
    }
    assert category_decay_weight("working") == 2.0
    with pytest.raises(InvalidEntryError):
        category_decay_weight("nonsense")


def test_cluster_duplicates_threshold_and_category_partition():
    near = "run cargo check after multi-file edits before declaring done"
    first = entry(MemoryCategory.STRATEGY, near)
    second = entry(MemoryCategory.STRATEGY, near, tags=["alpha"])
    paraphrase = entry(MemoryCategory.STRATEGY, "verify the build once several files have changed")
    other_category = entry(MemoryCategory.INSIGHT, near)
    clusters = cluster_duplicates([first, second, paraphrase, other_category], 0.6)
    assert 3 == len(clusters)
    assert [Cluster(first, [second]), Cluster(paraphrase), Cluster(other_category)] == clusters
    # At 0 every entry of a category joins its first cluster; at NaN or above 1, none does.
    assert [Cluster(first, [paraphrase]), Cluster(other_category)] == cluster_duplicates(
        [first, paraphrase, other_category], 0
    )
    assert 4 == len(cluster_duplicates([first, second, paraphrase, other_category], math.nan))
    assert 4 == len(cluster_duplicates([first, second, paraphrase, other_category], 1.5))
    with pytest.raises(InvalidEntryError):
        cluster_duplicates([first], "0.6")  # type: ignore[arg-type]


def test_merge_cluster_unions_tags_sums_access_and_caps_relevance():
    long_ago = NOW - timedelta(hours=720)
    canonical = entry(
        MemoryCategory.INSIGHT, "canonical text", tags=["core"], relevance=0.9, access_count=3
    )
    canonical.last_decayed = NOW - HOUR
    first = entry(
        MemoryCategory.INSIGHT,
        "canonical text variant",
        tags=["core", "extra"],
        relevance=0.7,
        access_count=2,
        validated=True,
        created_at=long_ago,
    )
    accessed_late = NOW - HOUR
    second = entry(
        MemoryCategory.INSIGHT,
        "canonical text variant two",
        relevance=0.7,
        access_count=4,
        created_at=long_ago,
        last_accessed=accessed_late,
    )
    merged = merge_cluster(Cluster(canonical, [first, second]))
    assert accessed_late == merged.last_accessed
    assert ["core", "extra"] == merged.tags
    assert 9 == merged.access_count
    assert merged.validated
    assert 1.0 == merged.relevance
    assert long_ago == merged.created_at
    assert (canonical.id, canonical.memory, canonical.last_decayed) == (
        merged.id,
        merged.memory,
        merged.last_decayed,
    )
    assert ["core"] == canonical.tags  # the members are not changed


def test_merge_cluster_corroborates_in_binary32_and_saturates_the_access_count():
    canonical = entry(MemoryCategory.FACT, "a", relevance=0.3, access_count=INT64_MAX - 1)
    duplicate = entry(MemoryCategory.FACT, "a", relevance=0.0, access_count=5)
    merged = merge_cluster(Cluster(canonical, [duplicate, duplicate]))
    assert f32(f32(f32(0.3) + f32(0.1)) + f32(0.1)) == merged.relevance
    assert INT64_MAX == merged.access_count
    assert 0.3 == merge_cluster(Cluster(canonical)).relevance  # no duplicate, no change


def test_promotion_needs_a_strictly_higher_quality_and_demotes_to_the_end():
    weak = entry(MemoryCategory.FACT, "weak", relevance=0.2)
    strong = entry(MemoryCategory.FACT, "strong", relevance=0.9)
    equal = entry(MemoryCategory.FACT, "equal", relevance=0.2)
    stronger = entry(MemoryCategory.FACT, "also strong", relevance=0.9)
    cluster = Cluster(weak, [equal, strong, stronger])
    assert Cluster(strong, [equal, stronger, weak]) == promote_highest_quality(cluster, NOW)
    assert Cluster(weak, [equal]) == promote_highest_quality(Cluster(weak, [equal]), NOW)
    assert [equal, strong, stronger] == cluster.duplicates  # not changed


def test_consolidate_entries_prunes_merges_and_keeps_the_valuable():
    text = "run cargo check after multi-file edits before declaring done"
    stale = entry(
        MemoryCategory.WORKING,
        "stale and hollow",
        relevance=0.3,
        created_at=NOW - timedelta(hours=8760),
    )
    duplicate_a = entry(MemoryCategory.STRATEGY, text, relevance=0.6)
    duplicate_b = entry(MemoryCategory.STRATEGY, text, relevance=0.6)
    valuable = entry(
        MemoryCategory.FACT,
        "durable, accessed, validated",
        relevance=0.8,
        validated=True,
        access_count=40,
        last_accessed=NOW,
    )
    result = consolidate_entries(
        [stale, duplicate_a, duplicate_b, valuable], ConsolidationConfig.full(), NOW
    )
    assert 4 == result.stats.entries_before
    assert 1 == result.stats.merged
    assert 1 == result.stats.pruned
    assert 2 == result.stats.entries_after
    assert [duplicate_a.id, valuable.id] == [survivor.id for survivor in result.entries]
    assert [1, 3] == result.slots
    assert len(stale.memory) + len(text) == result.stats.bytes_saved


def test_garbage_thresholds_degrade_to_conservative_behaviour():
    alpha = entry(MemoryCategory.STRATEGY, "run the build before committing", relevance=0.9)
    beta = entry(MemoryCategory.STRATEGY, "totally different advice about tests", relevance=0.9)
    keeper = entry(MemoryCategory.FACT, "durable and validated", relevance=0.9, validated=True)
    full = ConsolidationConfig.full()

    result = consolidate_entries(
        [alpha, beta, keeper], dataclasses.replace(full, merge_threshold=-1.0), NOW
    )
    assert 0 == result.stats.merged
    assert 3 == len(result.entries)

    result = consolidate_entries(
        [alpha, beta, keeper], dataclasses.replace(full, prune_floor=2.0), NOW
    )
    assert result.stats.entries_after == len(result.entries) == 3
    assert any(survivor.memory == "durable and validated" for survivor in result.entries)

    result = consolidate_entries(
        [alpha, keeper],
        dataclasses.replace(full, merge_threshold=math.nan, prune_floor=math.nan),
        NOW,
    )
    assert 0 == result.stats.pruned
    assert 2 == len(result.entries)


def test_a_zero_half_life_falls_back_to_the_default_instead_of_total_decay():
    fresh = entry(
        MemoryCategory.TRAJECTORY,
        "fresh knowledge",
        relevance=1.0,
        created_at=NOW - timedelta(seconds=5),
    )
    for half_life in (timedelta(0), timedelta(milliseconds=999), timedelta(days=-3)):
        config = dataclasses.replace(ConsolidationConfig.full(), half_life=half_life)
        assert config.normalized().half_life == timedelta(days=14)
        result = consolidate_entries([fresh], config, NOW)
        assert result.entries[0].relevance > 0.99


def test_bytes_saved_is_nonzero_when_entries_are_removed():
    below_floor = entry(MemoryCategory.WORKING, "drop me", relevance=0.01)
    keeper = entry(MemoryCategory.FACT, "keep me around", relevance=0.9, validated=True)
    stats = consolidate_entries([below_floor, keeper], ConsolidationConfig.full(), NOW).stats
    assert 1 == stats.pruned
    assert stats.bytes_saved > 0


# --- beyond the crate's tests ------------------------------------------------------------


def test_bytes_saved_counts_utf8_bytes():
    pruned = entry(MemoryCategory.FACT, "süß 🦀", relevance=0.01)
    kept = entry(MemoryCategory.FACT, "Ölwechsel nötig", relevance=0.9)
    twin = entry(MemoryCategory.FACT, "Ölwechsel nötig!", relevance=0.5)
    config = ConsolidationConfig(merge=True)
    stats = consolidate_entries([pruned, kept, twin], config, NOW).stats
    assert (1, 1) == (stats.pruned, stats.merged)
    assert len("süß 🦀".encode()) + len("Ölwechsel nötig!".encode()) == stats.bytes_saved
    assert 10 + 18 == stats.bytes_saved


def test_the_default_config_is_the_0_1_0_rule_on_random_entries():
    rng = random.Random(7)
    for _ in range(20):
        entries = [
            entry(
                rng.choice(list(MemoryCategory)),
                rng.choice(["same text", "same  text", "other", ""]),
                relevance=rng.choice([0.0, 0.04, 0.0499999, 0.05, 0.050000001, rng.random()]),
                created_at=NOW - timedelta(days=rng.randint(-5, 400)),
                access_count=rng.randint(0, 3),
            )
            for _ in range(rng.randint(0, 30))
        ]
        kept = [e for e in entries if f32(e.relevance) >= PRUNE_BELOW]
        result = consolidate_entries(entries, ConsolidationConfig(), NOW)
        assert kept == result.entries
        assert all(a is b for a, b in zip(kept, result.entries, strict=True))  # untouched
        assert all(e.last_decayed is None for e in result.entries)
        assert [entries.index(e) for e in kept] == result.slots
        assert (
            ConsolidationStats(
                len(entries),
                len(kept),
                len(entries) - len(kept),
                0,
                sum(len(e.memory.encode()) for e in entries if e not in kept),
            )
            == result.stats
        )


def test_config_defaults_full_normalization_and_types():
    assert ConsolidationConfig().is_reference
    assert ConsolidationConfig(prune_floor=0.0500000001).is_reference  # the same binary32
    assert ConsolidationConfig(merge_threshold=7.0, half_life=timedelta(0)).is_reference
    assert ConsolidationConfig(prune_floor=math.inf).is_reference  # normalized back to 0.05
    assert not ConsolidationConfig(prune_floor=0.1).is_reference
    assert not ConsolidationConfig(decay=True).is_reference
    assert not ConsolidationConfig(merge=True).is_reference
    assert not ConsolidationConfig(prune_on_quality=True).is_reference
    full = ConsolidationConfig.full()
    assert (full.decay, full.merge, full.prune_on_quality) == (True, True, True)
    assert (full.half_life, full.merge_threshold, full.prune_floor) == (
        timedelta(days=14),
        0.6,
        0.05,
    )
    garbage = ConsolidationConfig(merge_threshold=-0.1, prune_floor=1.5, half_life=timedelta(0))
    assert ConsolidationConfig() == garbage.normalized()
    edges = ConsolidationConfig(merge_threshold=0, prune_floor=1)
    assert (0.0, 1.0) == (edges.normalized().merge_threshold, edges.normalized().prune_floor)
    assert isinstance(edges.merge_threshold, float)
    for bad in (
        {"decay": 1},
        {"merge": "yes"},
        {"prune_on_quality": None},
        {"half_life": 3600},
        {"merge_threshold": "0.6"},
        {"prune_floor": True},
    ):
        with pytest.raises(InvalidEntryError):
            ConsolidationConfig(**bad)
    with pytest.raises(InvalidEntryError):
        consolidate_entries([], "full", NOW)  # type: ignore[arg-type]
    with pytest.raises(InvalidEntryError):
        consolidate_entries([], full, NOW.replace(tzinfo=None))


def test_normalized_tokens_trim_what_is_not_alphanumeric():
    assert frozenset({"run", "cargo", "multi-file", "edits"}) == normalized_tokens(
        "Run `cargo` (multi-file) EDITS... run!"
    )
    assert frozenset() == normalized_tokens(" -- ... \u3000 ")
    assert frozenset({"a\x1fb"}) == normalized_tokens("a\x1fb")  # U+001F is not White_Space
    # Letter numbers (Nl) and other numbers (No) are alphanumeric for Rust and Python alike.
    assert frozenset({"ⅻ", "x²", "½"}) == normalized_tokens("(Ⅻ) x² ½!")
    # Rust also counts Other_Alphabetic marks and symbols; they are trimmed here.
    assert frozenset({"ab"}) == normalized_tokens("ⓐab")
    assert frozenset({"हिंद"}) == normalized_tokens("हिंदी")


def test_jaccard_is_binary32_and_the_boundary_rounds_up():
    assert 1.0 == jaccard(frozenset(), frozenset())
    assert 0.0 == jaccard(frozenset({"a"}), frozenset())
    assert f32(2 / 3) == jaccard(frozenset("ab"), frozenset("abc"))
    # f32(2/3) is above 2/3: a pair at exactly 2/3 reaches the threshold 2/3 as binary32.
    assert f32(2 / 3) > 2 / 3
    pair = [entry(MemoryCategory.FACT, "a b"), entry(MemoryCategory.FACT, "a b c")]
    assert 1 == len(cluster_duplicates(pair, 2 / 3))
    assert 2 == len(cluster_duplicates(pair, _next_binary32(f32(2 / 3))))


def _next_binary32(value: float) -> float:
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    (above,) = struct.unpack("<f", struct.pack("<I", bits + 1))
    return float(above)


def test_very_large_token_sets_are_compared_as_the_crate_scales_them():
    # Unions above 65,535 tokens make the crate scale both counts before dividing.
    words = [f"w{index}" for index in range(70_002)]
    texts = [
        " ".join(words[:49_999]),
        " ".join(words[20_001:70_002]),
        " ".join(words[:20_000]),
        " ".join(words[:3]),
        " ".join(words[:49_991]),
        " ".join(words[5_000:25_000]),
    ]
    entries = [entry(MemoryCategory.FACT, text) for text in texts]
    for threshold in (0.4285, 0.6, 0.9998):
        expected = [[e for _, e in c] for c in port.cluster_duplicates(entries, threshold)]
        clusters = cluster_duplicates(entries, threshold)
        assert expected == [[c.canonical, *c.duplicates] for c in clusters]


def test_results_slots_follow_each_clusters_first_member():
    a1 = entry(MemoryCategory.FACT, "alpha beta gamma", relevance=0.2)
    b1 = entry(MemoryCategory.FACT, "delta epsilon", relevance=0.9)
    a2 = entry(MemoryCategory.FACT, "alpha beta gamma!", relevance=0.9, access_count=3)
    c1 = entry(MemoryCategory.INSIGHT, "alpha beta gamma", relevance=0.01)
    result = consolidate_entries([a1, b1, a2, c1], ConsolidationConfig(merge=True), NOW)
    # The better duplicate is promoted; the merged entry stands where a1 stood.
    assert [a2.id, b1.id] == [survivor.id for survivor in result.entries]
    assert [0, 1] == result.slots
    assert (1, 1) == (result.stats.merged, result.stats.pruned)


# --- the indexed pass against the plain port ---------------------------------------------

_VOCABULARY = ["deploy", "Deploy", "build", "tests", "rust", "cache", "fix", "the", "a", "ok"]
_PUNCTUATION = ["", "", "", ".", ",", "!", "(", ")", "--", "…"]
_THRESHOLDS = st.one_of(
    st.sampled_from([0.0, 0.3, 0.5, 0.6, 1.0, -1.0, 2.0, math.nan]),
    st.floats(0.0, 1.0),
    st.builds(lambda k, m: k / m, st.integers(1, 7), st.integers(1, 9)),
)


@st.composite
def _texts(draw: st.DrawFn) -> str:
    words = draw(st.lists(st.sampled_from(_VOCABULARY), max_size=9))
    decorated = [
        draw(st.sampled_from(_PUNCTUATION)) + word + draw(st.sampled_from(_PUNCTUATION))
        for word in words
    ]
    separator = draw(st.sampled_from([" ", "  ", "\t", "\u00a0", "\u2003"]))
    return separator.join(decorated)


_STAMPS = st.builds(
    lambda seconds: NOW + timedelta(seconds=seconds),
    st.one_of(st.integers(-90 * 86_400, 3_600), st.floats(-90 * 86_400, 3_600)),
)


@st.composite
def _entries(draw: st.DrawFn) -> list[MemoryEntry]:
    texts = draw(st.lists(_texts(), min_size=1, max_size=6))
    categories = draw(
        st.lists(st.sampled_from(list(MemoryCategory)), min_size=1, max_size=3, unique=True)
    )
    return [
        MemoryEntry(
            draw(st.sampled_from(categories)),
            draw(st.sampled_from(texts)),
            tags=draw(st.lists(st.sampled_from(["x", "y", "z", "X"]), max_size=3)),
            relevance=draw(
                st.one_of(
                    st.builds(lambda k: k * 0.05, st.integers(0, 20)),
                    st.floats(0.0, 1.0),
                    st.sampled_from([0.0499999999, 0.05, 1.0]),
                )
            ),
            id=uuid.UUID(int=draw(st.integers(0, 2**128 - 1))),
            created_at=draw(_STAMPS),
            access_count=draw(
                st.one_of(st.integers(0, 60), st.sampled_from([65_535, 65_536, INT64_MAX]))
            ),
            validated=draw(st.booleans()),
            last_accessed=draw(st.none() | _STAMPS),
            last_decayed=draw(st.none() | _STAMPS),
        )
        for _ in range(draw(st.integers(0, 24)))
    ]


_CONFIGS = st.builds(
    ConsolidationConfig,
    decay=st.booleans(),
    half_life=st.sampled_from(
        [timedelta(0), timedelta(seconds=1), HOUR, timedelta(days=1), timedelta(days=14)]
    ),
    merge=st.booleans(),
    merge_threshold=_THRESHOLDS,
    prune_floor=st.one_of(
        st.sampled_from([0.05, 0.0, 0.3, 0.6, 1.0, math.nan, -0.5]), st.floats(0.0, 1.0)
    ),
    prune_on_quality=st.booleans(),
)


@settings(
    max_examples=400,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(entries=_entries(), config=_CONFIGS)
def test_the_indexed_pass_equals_the_plain_port(entries, config):
    given_entries = [copy_entry(e) for e in entries]
    result = consolidate_entries(entries, config, NOW)
    expected, slots, stats = port.consolidate_entries(entries, config, NOW)
    assert expected == result.entries
    assert slots == result.slots
    assert stats == result.stats
    assert given_entries == entries  # the input is not changed
    assert all(a < b for a, b in zip(result.slots, result.slots[1:], strict=False))


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(entries=_entries(), threshold=_THRESHOLDS)
def test_the_indexed_clustering_equals_the_plain_port(entries, threshold):
    expected = [[e for _, e in c] for c in port.cluster_duplicates(entries, threshold)]
    clusters = cluster_duplicates(entries, threshold)
    assert expected == [[c.canonical, *c.duplicates] for c in clusters]


def test_the_indexed_clustering_equals_the_port_on_longer_texts():
    rng = random.Random(11)
    vocabulary = [f"word{index}" for index in range(60)]
    weights = [1 / (rank + 1) for rank in range(len(vocabulary))]
    originals = [
        " ".join(rng.choices(vocabulary, weights, k=rng.randint(1, 30))) for _ in range(150)
    ]
    texts = []
    for _ in range(600):
        words = rng.choice(originals).split()
        for _ in range(rng.randint(0, 4)):
            words[rng.randrange(len(words))] = rng.choice(vocabulary)
        texts.append(" ".join(words))
    entries = [entry(rng.choice(list(MemoryCategory)[:2]), text) for text in texts]
    for threshold in (0.0, 0.2, 0.3, 0.45, 0.5, 0.6, 2 / 3, 0.75, 0.8, 0.95, 1.0):
        expected = [[e for _, e in c] for c in port.cluster_duplicates(entries, threshold)]
        clusters = cluster_duplicates(entries, threshold)
        assert expected == [[c.canonical, *c.duplicates] for c in clusters], threshold


# --- access, update, forget ---------------------------------------------------------------


def test_access_matches_words_or_a_trimmed_query_inside_a_tag():
    entries = [
        entry(MemoryCategory.FACT, "Deploy checklist nightly"),
        entry(MemoryCategory.FACT, "unrelated", tags=["Rust-lang"]),
        entry(MemoryCategory.FACT, "unrelated", tags=["docs"]),
    ]
    assert [True, False, False] == access_matches("DEPLOY", entries)
    assert [False, True, False] == access_matches(" rust ", entries)
    assert [False, False, False] == access_matches("", entries)
    assert [False, False, False] == access_matches(" \t\u3000", entries)
    assert [True, False, False] == access_matches("nightly rust-lang", entries)  # not a word
    assert [] == access_matches("anything", [])


async def test_iter_entries_yields_copies_in_insertion_order():
    entries = [entry(MemoryCategory.FACT, "one", relevance=0.1), entry(MemoryCategory.FACT, "two")]
    store = InMemoryStore(entries)
    listed = [e async for e in store.iter_entries(batch_size=1)]
    assert entries == listed
    listed[0].tags.append("changed")
    assert [] == (await store.get(entries[0].id)).tags  # type: ignore[union-attr]
    for bad in (0, -1, True, 1.5):
        with pytest.raises(InvalidEntryError):
            [e async for e in store.iter_entries(bad)]  # type: ignore[arg-type]
