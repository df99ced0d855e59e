"""Every ranking on every backend: the same answers as InMemoryStore, filters as a predicate.

InMemoryStore computes each ranking plainly (the reference port; BM25 in plain
Python, itself held to ``bm25s`` in ``test_bm25_oracle``); every SQL backend,
view and the sync store must return the same entries with the same scores, to
the bit, in every ranking, with and without a filter. A filter is held to
:meth:`MemoryFilter.matches` over the entries, for ``count``,
``iter_entries``, ``forget`` and the rankings.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from loopctl_memory import (
    InMemoryStore,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    open_store,
    sync,
)
from loopctl_memory.rankings import LEXICAL_RANKINGS as RANKINGS

pytestmark = pytest.mark.parametrize("ranking", RANKINGS)

NOW = datetime(2030, 1, 1, tzinfo=UTC)
WORDS = [
    *("cache", "caching", "Cached", "retry", "retries", "database", "locked", "timeout"),
    *("the", "a", "is", "of", "and", "x", "ß", "naïve", "Σίσυφος", "über"),
    *("3f2a9c1e-77b0-4c1d-9e2f-0a1b2c3d4e5f", "/usr/lib/python3.11/site.py", "e3b0c442"),
    *("ERROR:", "pytest", "run_id=42", "make", "test", "glob"),
]
TAGS = ["db", "DB", "ci", "Flaky", "flaky", "tool", ""]
QUERIES = [
    "",
    "the",
    "cache",
    "caching retries",
    "database locked timeout",
    "DB",
    "flaky",
    "pytest make test glob",
    "3f2a9c1e-77b0-4c1d-9e2f-0a1b2c3d4e5f",
    "site.py python3",
    "ß naïve über",
    "retry retry retry",
    "a",
]


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        rng.choice(list(MemoryCategory)),
        " ".join(rng.choice(WORDS) for _ in range(rng.choice([0, 1, 3, 6, 12, 30]))),
        tags=[rng.choice(TAGS) for _ in range(rng.choice([0, 0, 1, 2, 3]))],
        relevance=rng.choice([0.0, 0.02, 0.25, 0.5, 0.75, 1.0, rng.random()]),
        id=uuid.UUID(int=rng.getrandbits(128)),
        created_at=NOW - timedelta(days=rng.choice([0, 1, 3, 10, 40])),
        validated=rng.random() < 0.3,
    )


def _filter(rng: random.Random) -> MemoryFilter:
    """A random filter: each condition given or not."""
    choices: dict[str, object] = {}
    if rng.random() < 0.3:
        choices["categories"] = rng.sample(list(MemoryCategory), rng.randint(1, 3))
    if rng.random() < 0.3:
        choices["tags_any"] = rng.sample(["db", "Flaky", "ci", "none"], rng.randint(1, 2))
    if rng.random() < 0.2:
        choices["tags_all"] = rng.sample(["DB", "flaky", "tool"], rng.randint(1, 2))
    if rng.random() < 0.3:
        choices["validated"] = rng.random() < 0.5
    if rng.random() < 0.3:
        choices["created_after"] = NOW - timedelta(days=rng.choice([11, 20]))
    if rng.random() < 0.2:
        choices["created_before"] = NOW - timedelta(days=rng.choice([0, 5]))
    if rng.random() < 0.3:
        choices["min_relevance"] = rng.choice([0.0, 0.25, 0.5])
    if rng.random() < 0.2:
        choices["max_relevance"] = rng.choice([0.5, 0.75, 1.0])
    return MemoryFilter(**choices)  # type: ignore[arg-type]


async def _same(store, reference: InMemoryStore, query: str, ranking: str, **choices) -> None:
    for limit in (0, 1, 5, 1_000):
        expected = await reference.retrieve_scored(query, limit, ranking=ranking, **choices)
        found = await store.retrieve_scored(query, limit, ranking=ranking, **choices)
        assert [(e.id, score) for e, score in expected] == [(e.id, score) for e, score in found], (
            query,
            limit,
            choices,
        )


@pytest.mark.parametrize("seed", [1, 2])
async def test_the_same_entries_and_scores_as_in_memory(store, ranking, seed):
    rng = random.Random(seed)
    reference = InMemoryStore()
    for _ in range(4):
        batch = [_entry(rng) for _ in range(rng.randint(1, 60))]
        await store.store_many(batch)
        await reference.store_many(batch)
        for query in QUERIES:
            await _same(store, reference, query, ranking)
    stored = [entry async for entry in reference.iter_entries()]
    for entry in rng.sample(stored, 10):
        memory, tags = _entry(rng).memory, ["db", "Flaky"]
        assert await reference.update(entry.id, memory=memory, tags=tags) == await store.update(
            entry.id, memory=memory, tags=list(tags)
        )
    for entry in rng.sample(stored, 10):
        assert await reference.delete(entry.id) == await store.delete(entry.id)
    for query in QUERIES:
        await _same(store, reference, query, ranking)


@pytest.mark.parametrize("gaps", [False, True], ids=["every-seq-lives", "some-removed"])
async def test_a_ranking_first_used_after_the_other_gives_the_same(store, ranking, gaps):
    # A process reads only what its first ranking needs (BM25: which entries live, not
    # their relevance); the other ranking, used later, must read the rest.
    rng = random.Random(7)
    reference = InMemoryStore()
    batch = [_entry(rng) for _ in range(80)]
    await store.store_many(batch)
    await reference.store_many(batch)
    if gaps:
        for entry in batch[::7]:
            assert await reference.delete(entry.id) == await store.delete(entry.id)
    other = next(name for name in RANKINGS if name != ranking)
    await _same(store, reference, "cache database", other)
    more = [_entry(rng) for _ in range(20)]
    await store.store_many(more)
    await reference.store_many(more)
    for query in QUERIES:
        await _same(store, reference, query, ranking)
        await _same(store, reference, query, other)


@pytest.mark.parametrize("seed", [3, 4])
async def test_a_filter_only_removes_entries_from_the_ranking(store, ranking, seed):
    rng = random.Random(seed)
    reference = InMemoryStore()
    batch = [_entry(rng) for _ in range(150)]
    await store.store_many(batch)
    await reference.store_many(batch)
    for _ in range(12):
        passes = _filter(rng)
        expected = [entry for entry in batch if passes.matches(entry)]
        assert len(expected) == await store.count(filter=passes)
        assert [e.id for e in expected] == [e.id async for e in store.iter_entries(filter=passes)]
        for query in rng.sample(QUERIES, 4):
            await _same(store, reference, query, ranking, filter=passes)
            found = await store.retrieve(query, 1_000, ranking=ranking, filter=passes)
            assert all(passes.matches(entry) for entry in found)


async def test_bm25_statistics_ignore_the_filter(store, ranking):
    """A filter that keeps one entry leaves its score as it was without the filter."""
    del ranking
    entries = [
        MemoryEntry(MemoryCategory.FACT, f"database {n} locked", tags=["db"] if n == 3 else [])
        for n in range(8)
    ]
    await store.store_many(entries)
    whole = {
        e.id: score for e, score in await store.retrieve_scored("locked db", 10, ranking="bm25")
    }
    only = await store.retrieve_scored(
        "locked db", 10, ranking="bm25", filter=MemoryFilter(tags_any=["DB"])
    )
    assert [(entries[3].id, whole[entries[3].id])] == [(e.id, score) for e, score in only]


async def test_forget_with_a_filter_deletes_exactly_what_it_passes(store, ranking):
    del ranking
    rng = random.Random(7)
    batch = [_entry(rng) for _ in range(120)]
    await store.store_many(batch)
    passes = MemoryFilter(tags_any=["flaky"], max_relevance=0.5)
    doomed = {entry.id for entry in batch if passes.matches(entry)}
    assert doomed
    assert len(doomed) == await store.forget(filter=passes)
    assert [e.id for e in batch if e.id not in doomed] == [e.id async for e in store.iter_entries()]
    with pytest.raises(InvalidArgumentError, match="forget needs a condition"):
        await store.forget(filter=MemoryFilter())


async def test_bad_rankings_and_filters_are_one_line_errors(store, ranking):
    await store.store(MemoryEntry(MemoryCategory.FACT, "anything"))
    with pytest.raises(InvalidArgumentError, match="ranking must be one of") as raised:
        await store.retrieve("anything", 3, ranking="bm-25")
    assert "\n" not in str(raised.value)
    with pytest.raises(InvalidArgumentError, match="filter must be a MemoryFilter"):
        await store.retrieve("anything", 3, ranking=ranking, filter={"validated": True})
    with pytest.raises(InvalidArgumentError, match="filter must be a MemoryFilter"):
        await store.count(filter="fact")


async def test_an_empty_filter_is_no_filter(store, ranking):
    entries = [MemoryEntry(MemoryCategory.FACT, f"retry {n}") for n in range(5)]
    await store.store_many(entries)
    plain = await store.retrieve_scored("retry", 5, ranking=ranking)
    assert plain == await store.retrieve_scored("retry", 5, ranking=ranking, filter=MemoryFilter())
    assert 5 == await store.count(filter=MemoryFilter())


@pytest.mark.parametrize(
    ("choices", "message"),
    [
        ({"categories": ["facts"]}, "unknown category 'facts'"),
        ({"categories": []}, "at least one category"),
        ({"tags_any": []}, "tags_any must hold at least one tag"),
        ({"tags_all": [3]}, "tags_all must hold str tags"),
        ({"created_after": datetime(2026, 1, 1)}, "created_after must be timezone-aware"),
        ({"created_before": "2026-01-01"}, "created_before must be a datetime"),
        ({"min_relevance": 0.8, "max_relevance": 0.2}, "must not be above max_relevance"),
        ({"min_relevance": float("nan")}, "not NaN"),
        ({"validated": 1}, "validated must be a bool"),
        ({"created_after": NOW, "created_before": NOW}, "must be before created_before"),
    ],
)
def test_a_bad_filter_fails_when_made(ranking, choices, message):
    del ranking
    with pytest.raises(InvalidArgumentError, match=message) as raised:
        MemoryFilter(**choices)
    assert isinstance(raised.value, ValueError)
    assert "\n" not in str(raised.value)


async def test_the_store_default_ranking_is_what_retrieve_uses(ranking, tmp_path):
    entries = [
        MemoryEntry(MemoryCategory.FACT, "the the the", relevance=1.0),
        MemoryEntry(MemoryCategory.FACT, "cache misses", relevance=0.1),
    ]
    expected = ["cache misses"] if ranking == "bm25" else ["the the the", "cache misses"]
    memory = InMemoryStore(ranking=ranking)
    await memory.store_many(entries)
    assert expected == [e.memory for e in await memory.retrieve("the cache", 5)]
    async with open_store(tmp_path / "a.db", ranking=ranking) as opened:
        await opened.store_many(entries)
        assert expected == [e.memory for e in await opened.retrieve("the cache", 5)]
        other = "reference" if ranking == "bm25" else "bm25"
        assert expected != [e.memory for e in await opened.retrieve("the cache", 5, ranking=other)]
    with sync.open_store(tmp_path / "a.db", ranking=ranking) as blocking:
        assert expected == [e.memory for e in blocking.retrieve("the cache", 5)]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"ranking": "cosine"}, "ranking must be one of"),
        ({"bm25_k1": -1}, "bm25_k1 must be"),
        ({"bm25_b": 1.5}, "bm25_b must be between"),
        ({"bm25_k1": "0.9"}, "bm25_k1 must be a number"),
    ],
)
async def test_bad_ranking_options_fail_at_open(ranking, options, message):
    del ranking
    with pytest.raises(InvalidArgumentError, match=message):
        await open_store(":memory:", **options)
    with pytest.raises(InvalidArgumentError, match=message):
        InMemoryStore(**options)
