"""Which tokens hold a query word comes from the trigram index, and ranks exactly as the reference.

The memories here are what agents write: hashes, uuids, paths, and text in any
script (astral code points, NUL, one-letter tokens). Queries are pieces of
their tokens of every length: one or two code points (a range of trigrams),
three (one trigram, exact), and longer (the rarest trigrams, then each
candidate's text checked) — including words whose trigrams all occur in a
token that does not hold the word.
"""

from __future__ import annotations

import random
import uuid

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.sql import grams
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target

# Each holds the trigrams of "abcd" (abc, bcd) without "abcd"; and the other way round.
TRAPS = ["abcxbcd", "zabcd", "bcdabc", "xabcdx", "ab", "cd"]
ODD = [
    "ß",
    "straße",
    "ΣΟΦΙΑ",
    "é",
    "x",
    "\x00nul\x00",
    "\U0001d518\U0001d52b\U0001d526",
    "😀😀a",
    "日本語",
    "a\x00b",
]


def _hash(rng: random.Random) -> str:
    return "%040x" % rng.getrandbits(160)  # noqa: UP031 - a fixed width


def _memory(rng: random.Random) -> str:
    parts = rng.sample(ODD, rng.randint(0, 2)) + rng.sample(TRAPS, rng.randint(0, 2))
    parts += [
        f"request {uuid.UUID(int=rng.getrandbits(128))}",
        f"commit {_hash(rng)[: rng.randint(6, 40)]}",
        f"src/pkg_{rng.randrange(20)}/file_{rng.randrange(50)}.py:{rng.randrange(900)}",
    ][: rng.randint(0, 3)]
    rng.shuffle(parts)
    return " ".join(parts)


def _piece(rng: random.Random, memories: list[str]) -> str:
    tokens = [token for memory in memories for token in memory.split()]
    token = rng.choice(tokens) if tokens else "abc"
    size = rng.choice([1, 2, 3, 4, 5, 8, 12])
    start = rng.randrange(max(1, len(token) - size + 1))
    return token[start : start + size]


def _queries(rng: random.Random, memories: list[str]) -> list[str]:
    made = [
        "abcd",
        "bcda",
        "abc",
        "bcd",
        "cx",
        "a",
        "\x00",
        "\U0001d52b",
        "😀a",
        "日本",
        "zzzz",
        "src/",
    ]
    made += [" ".join(_piece(rng, memories) for _ in range(rng.randint(1, 4))) for _ in range(60)]
    return made


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            _memory(rng),
            relevance=rng.randrange(21) * 0.05,
            id=uuid.UUID(int=rng.getrandbits(128)),
        )
        for _ in range(count)
    ]


async def _same(store, reference: InMemoryStore, queries: list[str]) -> None:
    for query in queries:
        expected = [(e.id, s) for e, s in await reference.retrieve_scored(query, 20)]
        assert expected == [(e.id, s) for e, s in await store.retrieve_scored(query, 20)], query


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_pieces_of_ids_and_odd_tokens_rank_as_the_reference(backend, tmp_path):
    rng = random.Random(30)
    target = await shared_target(backend, tmp_path)
    reference = InMemoryStore()
    async with open_store(target, tuning=Tuning(tail_limit=40, word_cache_bytes=0)) as store:
        for _ in range(4):  # several indexings, each creating tokens, and a tail
            batch = _entries(rng, 55)
            await store.store_many(batch)
            await reference.store_many(batch)
            await _same(store, reference, _queries(rng, [e.memory for e in batch]))


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_process_that_looked_words_up_sees_tokens_another_indexed(backend, tmp_path):
    path = await shared_target(backend, tmp_path)
    tuning = Tuning(tail_limit=10, word_cache_bytes=0)
    reference = InMemoryStore()
    async with open_store(path, tuning=tuning) as reader, open_store(path, tuning=tuning) as writer:
        for round_number in range(3):
            batch = [
                MemoryEntry(
                    MemoryCategory.FACT,
                    f"deadbeef{round_number}{n} \U0001d518{round_number} word",
                    id=uuid.UUID(int=round_number * 100 + n + 1),
                )
                for n in range(12)
            ]
            await writer.store_many(batch)
            await reference.store_many(batch)
            await _same(
                reader, reference, ["deadbeef", "dbeef1", "\U0001d518", "\U0001d5182", "f2"]
            )


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_database_upgraded_to_0009_finds_the_tokens_it_held(backend, tmp_path):
    path = await shared_target(backend, tmp_path)
    rng = random.Random(9)
    reference = InMemoryStore()
    batch = _entries(rng, 120)
    async with open_store(path, tuning=Tuning(tail_limit=30)) as store:
        await store.store_many(batch)
        await reference.store_many(batch)
        async with store.engine.connect() as connection:
            written = await connection.run_sync(_decoded_rows)
        async with store.engine.connect() as connection:
            assert "0008" == await connection.run_sync(migrate.upgrade_to, "0008")
    async with open_store(path, migrate=True, tuning=Tuning(tail_limit=30)) as upgraded:
        async with upgraded.engine.connect() as connection:
            assert written == await connection.run_sync(_decoded_rows)
        await _same(upgraded, reference, _queries(rng, [e.memory for e in batch]))


def _decoded_rows(connection) -> dict[int, list[int]]:
    """Trigram -> the token ids of its rows, in order (however the rows are cut)."""
    held: dict[int, list[int]] = {}
    for gram, first, packed in connection.execute(
        text("SELECT gram, first_id, ids FROM token_grams ORDER BY gram, first_id")
    ):
        held.setdefault(int(gram), []).extend(grams._unpacked(int(first), bytes(packed)).tolist())
    return held


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(min_size=1, max_size=12), min_size=1, max_size=20, unique=True))
def test_each_token_is_indexed_under_exactly_its_trigrams(tokens):
    ids = np.arange(3, 3 + len(tokens), dtype=np.int64)
    found, holders = grams.token_trigrams(ids, tokens)
    expected = set()
    for number, token in zip(ids.tolist(), tokens, strict=True):
        padded = [ord(c) for c in token] + [0x110000, 0x110000]
        for n in range(len(token)):
            expected.add(((padded[n] << 42) | (padded[n + 1] << 21) | padded[n + 2], number))
    assert sorted(expected) == list(zip(found.tolist(), holders.tolist(), strict=True))
    for token in tokens:  # a word of one or two code points is found by its range
        for size in (1, 2):
            piece = token[:size]
            if len(piece) == size:
                low, high = grams.prefix_range(piece)
                named = {int(h) for g, h in zip(found, holders, strict=True) if low <= g < high}
                assert named == {
                    number for number, t in zip(ids.tolist(), tokens, strict=True) if piece in t
                }


@pytest.mark.parametrize("one_by_one", [True, False])
async def test_a_giant_memory_is_indexed_by_its_own_write(one_by_one, tmp_path):
    rng = random.Random(65)
    reference = InMemoryStore()
    tuning = Tuning(tail_limit=1_000, giant_memory=300)
    async with open_store(tmp_path / "memory.db", tuning=tuning) as store:
        small = _entries(rng, 20)
        await store.store_many(small)
        await reference.store_many(small)
        assert 0 == await _watermark(store)  # a short tail stays a tail
        giant = MemoryEntry(MemoryCategory.FACT, " ".join(_hash(rng) for _ in range(40)))
        if one_by_one:
            await store.store(giant)
        else:
            await store.store_many([giant])
        await reference.store(giant)
        assert 21 == await _watermark(store)  # indexed with the tail before it, at once
        pieces = [token[5:17] for token in giant.memory.split()[:10]]
        await _same(store, reference, [*pieces, " ".join(pieces), *_queries(rng, [giant.memory])])


async def _watermark(store) -> int:
    async with store.engine.connect() as connection:
        return int(
            (await connection.execute(text("SELECT indexed_through FROM index_state"))).scalar_one()
        )
