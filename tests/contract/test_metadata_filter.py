"""Metadata filters on every backend: each answer is ``MemoryFilter.matches``'s.

The semantics are worked out by hand first (typed equality, missing paths,
orderings between kinds, nesting); then a few hundred entries with metadata
drawn from a small universe of values (so that filters meet) are filtered by
generated conditions through ``count``, ``iter_entries``, ``retrieve`` in every
ranking and ``forget``, on every backend, against the definition.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from loopctl_memory import (
    InMemoryStore,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    open_store,
)
from tests.conftest import SHARED_BACKENDS, shared_target
from tests.embedders import WordsEmbedder

LONG = "long " + "x" * 120  # longer than the indexed part of a str
LONGER = LONG + "y"
SCALARS: list[Any] = [
    None, True, False, 0, 1, 1.0, -0.0, 2.5, 3, -7, 2**53, "1", "ann", "bo", "Ann",
    "", "zoë", "\u0000", LONG, LONGER,
]  # fmt: skip
VALUES: list[Any] = [*SCALARS, [], [1], [1.0], ["1"], [1, "bo"], {}, {"a": 1}, {"a": 1.0}]
KEYS = ["user", "n", "team", "tags"]


def entry(number: int, metadata: dict[str, Any]) -> MemoryEntry:
    words = ["alpha", "beta", "gamma", "delta"]
    return MemoryEntry(
        MemoryCategory.FACT,
        f"{words[number % 4]} {words[number % 3]} note {number}",
        metadata=metadata,
        id=uuid.UUID(int=number + 1),
    )


# --- the definition, by hand ------------------------------------------------------

M = {"user": "ann", "n": 3, "f": 2.5, "ok": True, "none": None, "team": {"lead": "bo"}}


@pytest.mark.parametrize(
    ("conditions", "expected"),
    [
        ({"user": "ann"}, True),
        ({"user": "Ann"}, False),
        ({"n": 3.0}, True),
        ({"n": "3"}, False),
        ({"ok": 1}, False),
        ({"ok": True}, True),
        ({"n": True}, False),
        ({"none": None}, True),
        ({"absent": None}, True),
        ({"absent": {"$ne": None}}, False),
        ({"none": {"$exists": True}}, True),
        ({"absent": {"$exists": False}}, True),
        ({"team.lead": "bo"}, True),
        ({"team": {"lead": "bo"}}, True),
        ({"team": {}}, True),
        ({"user": {}}, False),
        ({"team": {"$eq": {"lead": "bo"}}}, True),
        ({"team": {"$eq": {}}}, False),
        ({"user.x": None}, True),
        ({"n": {"$gt": 2, "$lt": 4}}, True),
        ({"n": {"$gte": 3.0}}, True),
        ({"n": {"$gt": "2"}}, False),
        ({"user": {"$gt": "a"}}, True),
        ({"user": {"$lt": 5}}, False),
        ({"absent": {"$lt": 5}}, False),
        ({"none": {"$lte": 0}}, False),
        ({"ok": {"$gte": 0}}, False),
        ({"user": {"$in": ["bo", "ann"]}}, True),
        ({"absent": {"$in": [None]}}, True),
        ({"absent": {"$nin": ["x"]}}, True),
        ({"n": {"$nin": [3.0]}}, False),
        ({"user": {"$ne": "bo"}}, True),
        ({"absent": {"$ne": "bo"}}, True),
        ({"n": {"$in": []}}, False),
    ],
)
def test_the_definition_worked_out_by_hand(conditions, expected):
    assert expected is MemoryFilter(metadata=conditions).matches(entry(0, M))


@pytest.mark.parametrize(
    ("conditions", "words"),
    [
        ({"n": {"$gt": [1]}}, "takes a number or a str"),
        ({"n": {"$gt": None}}, "takes a number or a str"),
        ({"n": {"$in": 3}}, "takes a list"),
        ({"n": {"$exists": 1}}, "takes True or False"),
        ({"n": {"$regex": "x"}}, "unknown operator '$regex'"),
        ({"n": {"$eq": 1, "m": 2}}, "mixes operators and keys"),
        ({"a..b": 1}, "empty key"),
        ({"$and": []}, "is an operator where a path belongs"),
        ({1: 2}, "paths must be str"),
        ({"n": float("nan")}, "not a JSON number"),
        ({"n": 2**64}, "within 64 bits"),
        ({}, "at least one condition"),
        ([("n", 1)], "must be a dict"),
    ],
)
def test_a_bad_metadata_filter_is_one_error_naming_it(conditions, words):
    with pytest.raises(InvalidArgumentError, match=words.replace("$", r"\$")):
        MemoryFilter(metadata=conditions)


# --- every backend against the definition -------------------------------------------


def corpus(seed: int, count: int = 240) -> list[MemoryEntry]:
    rng = random.Random(seed)
    made = []
    for number in range(count):
        metadata: dict[str, Any] = {}
        for key in KEYS:
            roll = rng.random()
            if roll < 0.25:
                continue
            if key == "team" and roll < 0.7:
                metadata[key] = {"lead": rng.choice(VALUES), "size": rng.choice(SCALARS)}
            else:
                metadata[key] = rng.choice(VALUES)
        made.append(entry(number, metadata))
    return made


def conditions(seed: int, count: int) -> list[dict[str, Any]]:
    """Filters of one or two conditions over the corpus's paths and values."""
    rng = random.Random(seed)
    paths = [*KEYS, "team.lead", "team.size", "absent", "user.deeper"]
    operators = ["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", None]
    made: list[dict[str, Any]] = []
    while len(made) < count:
        found: dict[str, Any] = {}
        for _ in range(rng.choice([1, 1, 2])):
            path, operator = rng.choice(paths), rng.choice(operators)
            if operator is None:
                found[path] = rng.choice(VALUES)
            elif operator == "$exists":
                found[path] = {operator: rng.random() < 0.5}
            elif operator in ("$in", "$nin"):
                found[path] = {operator: rng.sample(VALUES, rng.randrange(4))}
            elif operator.startswith(("$g", "$l")):
                found[path] = {operator: rng.choice([s for s in SCALARS if _orders(s)])}
            else:
                found[path] = {operator: rng.choice(VALUES)}
        made.append(found)
    made += [{"team": {}}, {"team": {"lead": "bo"}}, {"tags": {"$eq": [1.0]}}]
    return made


def _orders(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, int | float) and type(value) is not bool)


FILTERS = conditions(7, 80)


def test_the_generated_filters_split_the_corpus():
    """Most filters keep some entries and drop others: the comparison below means something."""
    everything = corpus(1)
    kept = [sum(MemoryFilter(metadata=f).matches(e) for e in everything) for f in FILTERS]
    assert sum(0 < n < len(everything) for n in kept) > 0.6 * len(FILTERS)


async def test_count_and_iteration_keep_what_the_definition_keeps(store):
    everything = corpus(1)
    await store.store_many(everything[:200])
    for item in everything[200:]:
        await store.store(item)
    for conditions_given in FILTERS:
        chosen = MemoryFilter(metadata=conditions_given)
        expected = [item.id for item in everything if chosen.matches(item)]
        assert len(expected) == await store.count(filter=chosen), conditions_given
        found = [item.id async for item in store.iter_entries(filter=chosen)]
        assert expected == found, conditions_given


@pytest.mark.parametrize("ranking", ["reference", "bm25", "vector", "hybrid"])
async def test_every_ranking_keeps_what_the_definition_keeps(store_factory, ranking):
    everything = corpus(2)
    store = await store_factory(embedder=WordsEmbedder(dims=32))
    oracle = InMemoryStore(embedder=WordsEmbedder(dims=32))
    for target in (store, oracle):
        await target.store_many(everything)
    for conditions_given in FILTERS[:30]:
        chosen = MemoryFilter(metadata=conditions_given)
        for query in ("alpha note", "gamma"):
            found = await store.retrieve(query, 12, ranking=ranking, filter=chosen)
            expected = await oracle.retrieve(query, 12, ranking=ranking, filter=chosen)
            assert [e.id for e in expected] == [e.id for e in found], conditions_given
            assert all(chosen.matches(item) for item in found)


async def test_an_updated_entry_is_filtered_by_its_new_metadata(store):
    first, second = entry(1, {"user": "ann", "n": 1}), entry(2, {"user": "bo"})
    await store.store_many([first, second])
    ann = MemoryFilter(metadata={"user": "ann"})
    await store.update(first.id, metadata={"user": "cy"})
    assert 0 == await store.count(filter=ann)
    await store.update(second.id, merge_metadata={"user": "ann"})
    for ranking in ("reference", "bm25"):
        found = await store.retrieve("note", 5, ranking=ranking, filter=ann)
        assert [second.id] == [item.id for item in found]
    assert 0 == await store.count(filter=MemoryFilter(metadata={"n": {"$exists": True}}))


async def test_forget_removes_what_the_definition_keeps_and_nothing_else(store):
    everything = corpus(3, 120)
    await store.store_many(everything)
    chosen = MemoryFilter(metadata={"n": {"$gte": 1}, "user": {"$ne": None}})
    removed = [item.id for item in everything if chosen.matches(item)]
    assert 0 < len(removed) < len(everything)
    assert len(removed) == await store.forget(filter=chosen)
    assert [item.id for item in everything if not chosen.matches(item)] == [
        item.id async for item in store.iter_entries()
    ]
    assert 0 == await store.count(filter=chosen)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_filter_asked_again_sees_metadata_changed_since_here_or_elsewhere(
    backend, tmp_path
):
    target = await shared_target(backend, tmp_path)
    first, second = entry(1, {"user": "ann"}), entry(2, {"user": "bo"})
    ann = MemoryFilter(metadata={"user": "ann"})
    async with open_store(target) as here, open_store(target) as elsewhere:
        await here.store_many([first, second])
        for ranking in ("reference", "bm25"):
            found = await here.retrieve("note", 5, ranking=ranking, filter=ann)
            assert [first.id] == [item.id for item in found]
        await elsewhere.update(first.id, metadata={"user": "cy"})
        await elsewhere.update(second.id, merge_metadata={"user": "ann"})
        for ranking in ("reference", "bm25"):
            found = await here.retrieve("note", 5, ranking=ranking, filter=ann)
            assert [second.id] == [item.id for item in found]
        await here.update(second.id, metadata={})
        assert [] == await here.retrieve("note", 5, ranking="bm25", filter=ann)
