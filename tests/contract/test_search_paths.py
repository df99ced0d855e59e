"""Every path of the SQL search (indexed blocks, tail, word masks, tag test) ranks as the reference.

The thresholds are shrunk so that a few hundred entries exercise what a large
store does: several indexed blocks plus a tail, words counted from their
postings or from a kept mask (or a mask evicted at once), and tag bonuses
from the tag postings and from the tail.
"""

from __future__ import annotations

import random
import uuid

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql.tuning import Tuning

WORDS = ["cache", "Retry", "glob", "edit", "ß", "straße", "ΣΟΦΙΑ", "a", "to", "the", "x_%", "é"]
SPACES = [" ", "  ", "\t", "\u00a0", "\u3000", "\n"]


def _text(rng: random.Random, words: int) -> str:
    return "".join(rng.choice(WORDS) + rng.choice(SPACES) for _ in range(words)).strip()


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    made = []
    for _ in range(count):
        tags = [_text(rng, rng.randint(1, 2)) for _ in range(rng.choice([0, 0, 1, 2]))]
        made.append(
            MemoryEntry(
                rng.choice(list(MemoryCategory)),
                _text(rng, rng.randint(0, 8)),
                tags=tags,
                relevance=rng.choice([rng.randrange(21) * 0.05, rng.random(), 0.02]),
                id=uuid.UUID(int=rng.getrandbits(128)),
            )
        )
    return made


def _queries(rng: random.Random, count: int) -> list[tuple[str, int]]:
    queries = []
    for _ in range(count):
        kind = rng.random()
        if kind < 0.1:
            query = rng.choice(["", " ", "\u00a0"])
        elif kind < 0.3:
            query = rng.choice(WORDS)[: rng.randint(1, 3)]  # substrings of words
        else:
            query = _text(rng, rng.randint(1, 5))
        queries.append((query, rng.choice([0, 1, 3, 5, 10, 50, 1000])))
    return queries


@pytest.mark.parametrize("masks", [0, 64, 2**20])
async def test_every_search_path_matches_the_reference(masks, tmp_path):
    tuning = Tuning(background_folds=False, tail_limit=60, word_cache_bytes=masks)
    rng = random.Random(masks)
    reference = InMemoryStore()
    async with open_store(tmp_path / "memory.db", tuning=tuning) as store:
        for round_number in range(4):
            batch = _entries(rng, 150)
            await store.store_many(batch[:100])
            await reference.store_many(batch[:100])
            for entry in batch[100:]:  # single stores leave a tail
                await store.store(entry)
                await reference.store(entry)
            if round_number == 2:
                for entry in batch[:30]:
                    assert await reference.delete(entry.id) == await store.delete(entry.id)
                assert await reference.consolidate() == await store.consolidate()
            for query, limit in _queries(rng, 60):
                expected = [e.id for e in await reference.retrieve(query, limit)]
                assert expected == [e.id for e in await store.retrieve(query, limit)], (
                    query,
                    limit,
                )


@pytest.mark.parametrize("query", ["b\nc", "b c", "\n", "ab\ncd", "b", "", "cd\ne", "d\ne"])
async def test_a_query_spanning_two_tag_values_does_not_match_either(query):
    """The tag values are searched in one newline-joined string: a hit must end in its value."""
    tuning = Tuning(
        background_folds=False, tail_limit=1
    )  # every entry indexed: tag values from memory
    stored = [
        MemoryEntry(MemoryCategory.FACT, "first", tags=["ab"], relevance=0.5),
        MemoryEntry(MemoryCategory.FACT, "second", tags=["cd"], relevance=0.5),
        MemoryEntry(MemoryCategory.FACT, "third", tags=["cd\ne", "b c"], relevance=0.5),
        MemoryEntry(MemoryCategory.FACT, "fourth", relevance=0.9),
    ]
    reference = InMemoryStore()
    async with open_store(":memory:", tuning=tuning) as store:
        for entry in stored:  # one at a time: several blocks, the values in separate rows
            await store.store_many([entry])
            await reference.store(entry)
            assert await reference.retrieve(query, 4) == await store.retrieve(query, 4)


@pytest.mark.parametrize("masks", [0, 2**20])
async def test_ties_within_one_relevance_rank_as_the_reference(masks, tmp_path):
    """Hundreds of entries share a relevance and a score; the few that beat them lie deep.

    The limit cuts through a run of equal scores: those kept must be the
    earliest stored, and every entry that beats the run must be found.
    """
    tuning = Tuning(background_folds=False, tail_limit=60, word_cache_bytes=masks)
    rng = random.Random(7)
    made = []
    for number in range(600):
        # The first rows walked hold no common query word; the rows after them do.
        first = "note" if number < 100 else "agent"
        words = [first, "tool", *rng.sample(["file", "edit", "glob", "cache"], k=2)]
        if number in (5, 290, 451, 598):  # every query word: these beat the rest
            words += ["retry", "search"]
        elif number % 40 == 17 and number > 100:
            # A rare word instead of the common one: the same score, but found by the
            # check, and with a larger seq than rows the walk has still to read.
            words[0] = "retry"
        made.append(
            MemoryEntry(
                MemoryCategory.FACT,
                " ".join(words),
                tags=["retry search"] if number == 452 else [],
                relevance=rng.choice([1.0, 1.0, 1.0, 0.95]),
                id=uuid.UUID(int=number + 1),
            )
        )
    reference = InMemoryStore(made)
    async with open_store(tmp_path / "memory.db", tuning=tuning) as store:
        await store.store_many(made)
        for query in ["agent retry", "agent tool search", "retry search", "tool", "edit glob"]:
            for limit in (1, 3, 5, 10, 40):
                expected = [e.id for e in await reference.retrieve(query, limit)]
                assert expected == [e.id for e in await store.retrieve(query, limit)], (
                    query,
                    limit,
                )


async def test_a_word_asked_again_finds_terms_indexed_since(tmp_path):
    """The vocabulary remembers which terms hold a word; terms indexed since must still count."""
    tuning = Tuning(
        background_folds=False, tail_limit=10, word_cache_bytes=0
    )  # every word from its postings

    def entry(number: int, text: str) -> MemoryEntry:
        return MemoryEntry(
            MemoryCategory.FACT, text, relevance=0.1 + number % 7 / 10, id=uuid.UUID(int=number + 1)
        )

    reference = InMemoryStore()
    async with open_store(tmp_path / "memory.db", tuning=tuning) as store:
        for round_number in range(4):
            batch = [entry(round_number * 30 + n, f"plain words {n}") for n in range(28)]
            batch += [  # a new term holding "lph" each round, indexed by the next round
                entry(round_number * 30 + 28, f"alpha{round_number}"),
                entry(round_number * 30 + 29, f"LPH-{round_number} beta"),
            ]
            await store.store_many(batch)
            await reference.store_many(batch)
            for query in ["lph", "beta lph", "alpha1", "h-"]:
                expected = [e.id for e in await reference.retrieve(query, 5)]
                assert expected == [e.id for e in await store.retrieve(query, 5)], query
