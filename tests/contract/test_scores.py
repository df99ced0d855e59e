"""`retrieve_scored`: `retrieve`'s answer with each entry's reference score, on every backend."""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.scoring import baseline_score, parse_query
from loopctl_memory.sql.tuning import Tuning

WORDS = ["cache", "Retry", "glob", "edit", "straße", "ΣΟΦΙΑ", "a", "the", "x_%"]


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    def text(words: int) -> str:
        return " ".join(rng.choice(WORDS) for _ in range(words))

    return [
        MemoryEntry(
            rng.choice(list(MemoryCategory)),
            text(rng.randint(0, 6)),
            tags=[text(rng.randint(1, 2)) for _ in range(rng.choice([0, 0, 1, 2]))],
            relevance=rng.choice([rng.randrange(21) * 0.05, rng.random()]),
            id=uuid.UUID(int=rng.getrandbits(128)),
        )
        for _ in range(count)
    ]


def _queries(rng: random.Random, count: int) -> list[tuple[str, int]]:
    queries = [("", 5), ("zzz", 5), ("cache", 0)]
    for _ in range(count):
        words = rng.sample(WORDS, rng.randint(1, 3))
        query = " ".join(word[: rng.randint(1, len(word))] for word in words)
        queries.append((query, rng.choice([1, 3, 5, 20, 1000])))
    return queries


def _expected(
    ranked: list[MemoryEntry], query: str, limit: int, *, matched_only: bool
) -> list[tuple[uuid.UUID, float]]:
    """The reference ranking of every entry, each with its score computed on its own."""
    parsed = parse_query(query)
    scored = [(e.id, parsed.score_of(e.relevance, e.memory, e.tags), e.relevance) for e in ranked]
    if matched_only:
        scored = [item for item in scored if item[1] > baseline_score(item[2])]
    return [(entry_id, score) for entry_id, score, _ in scored[:limit]]


async def test_retrieve_scored_is_retrieve_with_the_reference_score(store):
    rng = random.Random(11)
    made = _entries(rng, 120)
    await store.store_many(made[:100])
    for entry in made[100:]:
        await store.store(entry)
    for entry in made[:10]:  # rewritten entries are scored from their new text
        await store.update(entry.id, memory=entry.memory + " glob", tags=["edit"])
    reference = InMemoryStore()
    async for entry in store.iter_entries():
        await reference.store(entry)
    for query, limit in _queries(rng, 40):
        every = await reference.retrieve(query, 10_000)
        scored = await store.retrieve_scored(query, limit)
        assert [entry.id for entry in await store.retrieve(query, limit)] == [
            entry.id for entry, _ in scored
        ]
        assert _expected(every, query, limit, matched_only=False) == [
            (entry.id, score) for entry, score in scored
        ], query
        matched = await store.retrieve_scored(query, limit, matched_only=True)
        assert _expected(every, query, limit, matched_only=True) == [
            (entry.id, score) for entry, score in matched
        ], query


async def test_the_score_is_the_binary32_value(store):
    await store.store(MemoryEntry(MemoryCategory.FACT, "alpha beta gamma", relevance=0.3))
    [(_, score)] = await store.retrieve_scored("alpha delta zeta", 1)
    # 0.3*0.5 + (1/3)*0.4 + 0.1, each step rounded to binary32 as the crate does
    assert 0.38333335518836975 == score


async def test_matched_only_keeps_tag_matches_and_drops_padding(store):
    tagged = MemoryEntry(MemoryCategory.FACT, "unrelated", tags=["deploy steps"], relevance=0.1)
    worded = MemoryEntry(MemoryCategory.FACT, "how to deploy", relevance=0.0)
    padding = MemoryEntry(MemoryCategory.FACT, "something else", relevance=1.0)
    await store.store_many([padding, tagged, worded])
    found = await store.retrieve_scored("deploy", 10, matched_only=True)
    assert [worded.id, tagged.id] == [entry.id for entry, _ in found]
    everything = await store.retrieve_scored("deploy", 10)
    assert [padding.id, worded.id, tagged.id] == [entry.id for entry, _ in everything]
    assert [] == await store.retrieve_scored("nothing", 10, matched_only=True)
    assert [] == await store.retrieve_scored("deploy", 0, matched_only=True)


@pytest.mark.parametrize("small_scope", [0, 10_000])
async def test_every_scoped_search_path_scores_as_the_reference(small_scope):
    """A scope ranked from its texts, from its postings, or from every score masked."""
    rng = random.Random(small_scope)
    tuning = Tuning(background_folds=False, tail_limit=50, small_scope=small_scope)
    async with open_store(":memory:", tuning=tuning) as store:
        sizes = {"": 300, "tiny": 20, "half": 500}
        references = {}
        for name, size in sizes.items():
            made = _entries(rng, size)
            view = store.scope(name) if name else store
            await view.store_many(made[: size // 2])
            for entry in made[size // 2 :]:
                await view.store(entry)
            references[name] = made
        await store.scope("tiny").update(references["tiny"][0].id, memory="cache glob")
        for name in references:
            view = store.scope(name) if name else store
            reference = InMemoryStore()
            async for entry in view.iter_entries():
                await reference.store(entry)
            for query, limit in _queries(rng, 15):
                every = await reference.retrieve(query, 10_000)
                for matched_only in (False, True):
                    found = await view.retrieve_scored(query, limit, matched_only=matched_only)
                    assert _expected(every, query, limit, matched_only=matched_only) == [
                        (entry.id, score) for entry, score in found
                    ], (name, query, limit, matched_only)
