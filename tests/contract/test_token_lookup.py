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
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlalchemy import create_engine, text

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.scoring import split_whitespace
from loopctl_memory.sql.lexical import grams, pieces
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
    async with open_store(
        target, tuning=Tuning(background_folds=False, tail_limit=40, word_cache_bytes=0)
    ) as store:
        for _ in range(4):  # several indexings, each creating tokens, and a tail
            batch = _entries(rng, 55)
            await store.store_many(batch)
            await reference.store_many(batch)
            await _same(store, reference, _queries(rng, [e.memory for e in batch]))


async def test_a_query_of_hundreds_of_words_is_looked_up_in_batches_and_ranks_the_same(tmp_path):
    """Its words are found a batch at a time (by count, then by trigram rows read at once)."""
    rng = random.Random(31)
    reference = InMemoryStore()
    async with open_store(
        tmp_path / "m.db", tuning=Tuning(background_folds=False, tail_limit=40)
    ) as store:
        batch = _entries(rng, 150)
        await store.store_many(batch)
        await reference.store_many(batch)
        memories = [e.memory for e in batch]
        words = [_piece(rng, memories) for _ in range(700)]
        with patch.object(grams, "_IDS_AT_ONCE", 50):
            await _same(store, reference, [" ".join(words), " ".join(words[::-1][:300])])


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_process_that_looked_words_up_sees_tokens_another_indexed(backend, tmp_path):
    path = await shared_target(backend, tmp_path)
    tuning = Tuning(background_folds=False, tail_limit=10, word_cache_bytes=0)
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
@pytest.mark.parametrize(
    ("before", "rows"),
    [("0008", "trigram rows"), ("0010", "piece rows")],
)
async def test_a_database_upgraded_finds_the_words_it_held(backend, before, rows, tmp_path):
    """0009 writes the trigram rows of the tokens held, 0011 the pieces of the entries held."""
    read_rows = _decoded_rows if rows == "trigram rows" else _piece_holders
    path = await shared_target(backend, tmp_path)
    rng = random.Random(int(before))
    reference = InMemoryStore()
    batch = _entries(rng, 120)
    async with open_store(path, tuning=Tuning(background_folds=False, tail_limit=30)) as store:
        await store.store_many(batch)
        await reference.store_many(batch)
        async with store.engine.connect() as connection:
            written = await connection.run_sync(read_rows)
        async with store.engine.connect() as connection:
            assert before == await connection.run_sync(migrate.upgrade_to, before)
    async with open_store(
        path, migrate=True, tuning=Tuning(background_folds=False, tail_limit=30)
    ) as upgraded:
        async with upgraded.engine.connect() as connection:
            assert written == await connection.run_sync(read_rows)
        memories = [e.memory for e in batch]
        short = [_piece(rng, memories)[:size] for size in (1, 2) for _ in range(30)]
        await _same(upgraded, reference, [*short, *_queries(rng, memories)])


def _piece_holders(connection) -> set[tuple[int, int]]:
    """Each (piece, seq) the rows name (however the rows are cut)."""
    return {
        (int(piece), seq)
        for piece, block, packed in connection.execute(
            text("SELECT piece, block, seqs FROM piece_blocks")
        )
        for seq in pieces.decoded_rows(np.array([int(block)]), [bytes(packed)]).tolist()
    }


def _decoded_rows(connection) -> dict[int, list[int]]:
    """Trigram -> the token ids of its rows, in order (however the rows are cut)."""
    rows = connection.execute(
        text("SELECT gram, first_id, ids FROM token_grams ORDER BY gram, first_id")
    ).all()
    # Every row decoded in one call, as a lookup does: rows of every width side by side.
    ids, counts = grams._decoded([(int(first), bytes(packed)) for _, first, packed in rows])
    held: dict[int, list[int]] = {}
    ends = np.cumsum(counts).tolist()
    for (gram, _, _), low, high in zip(rows, [0, *ends[:-1]], ends, strict=True):
        held.setdefault(int(gram), []).extend(ids[low:high].tolist())
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


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.tuples(st.text(alphabet="abcé", min_size=1, max_size=5), st.integers(1, 100_000)),
        min_size=1,
        max_size=40,
        unique_by=lambda pair: pair[0],
    ),
    st.integers(0, 40),
)
def test_trigram_rows_of_any_id_gaps_read_back_as_their_tokens(pairs, cut):
    """Gaps of 1, 2 and 4 bytes, rows of every width decoded together, a trigram in two rows."""
    ids = np.cumsum([gap for _, gap in pairs]).astype(np.int64)
    created = {token: int(number) for (token, _), number in zip(pairs, ids, strict=True)}
    engine = create_engine("sqlite://")
    with engine.begin() as connection:
        connection.exec_driver_sql(
            "CREATE TABLE token_grams (gram INTEGER, first_id INTEGER, count INTEGER, ids BLOB)"
        )
        ordered = list(created.items())
        grams.add_tokens(connection, dict(ordered[:cut]))  # two indexings: two rows a trigram
        grams.add_tokens(connection, dict(ordered[cut:]))
        held = _decoded_rows(connection)
    found, holders = grams.token_trigrams(ids, [token for token, _ in pairs])
    expected: dict[int, list[int]] = {}
    for gram, number in zip(found.tolist(), holders.tolist(), strict=True):
        expected.setdefault(gram, []).append(number)
    assert held == expected


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("ab\x00é😀日 \t\u3000\x1c\u2029"), max_size=12)))
def test_each_memory_holds_exactly_the_pieces_of_its_tokens(texts):
    """Tokens are split on Unicode White_Space (not U+001C..U+001F), as the reference splits."""
    seqs, codes = pieces.text_pieces([(n + 1, text) for n, text in enumerate(texts)])
    expected = {
        (n + 1, pieces.piece_code(token[start : start + size]))
        for n, text in enumerate(texts)
        for token in split_whitespace(text)
        for size in (1, 2)
        for start in range(len(token) - size + 1)
    }
    assert expected == set(zip(seqs.tolist(), codes.tolist(), strict=True))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 5), st.integers(0, 200_000)), min_size=1, max_size=300),
    st.integers(1, 10**12),
)
def test_a_block_rows_pieces_read_back_as_the_entries_holding_them(pairs, block):
    """Bitmaps for common pieces, 2- or 4-byte offsets for rare ones, over any span."""
    distinct = np.array([7, 11, 13, 17, 19, 23], np.int64)
    held = np.array([piece for piece, _ in pairs], np.int64)
    offsets = np.array([offset for _, offset in pairs], np.int64)
    expected: dict[int, set[int]] = {}
    for piece, offset in pairs:
        expected.setdefault(int(distinct[piece]), set()).add(block + offset)
    for cells_at_once in (pieces._CELLS_AT_ONCE, 1):  # all pieces in one pass, or one a pass
        with patch.object(pieces, "_CELLS_AT_ONCE", cells_at_once):
            rows = pieces._row_values(distinct, held, offsets, block)
        assert {code for code, _, _ in rows} == set(expected)
        for code, row, packed in rows:
            assert row == block
            assert pieces.decoded_rows(np.array([row]), [packed]).tolist() == sorted(expected[code])
    # A piece's rows of several block rows, of any forms, decoded together as a lookup does:
    # the same rows again at two later block rows, the second holding only the first half.
    later = block + 200_001
    half = len(pairs) // 2
    again = pieces._row_values(distinct, held, offsets, later)
    if half:
        again += pieces._row_values(distinct, held[:half], offsets[:half], later + 200_001)
    for code, seqs in expected.items():
        chosen = [(row, packed) for each, row, packed in rows + again if each == code]
        union = seqs | {later + seq - block for seq in seqs}
        union |= {
            later + 200_001 + int(offsets[n]) for n in range(half) if distinct[held[n]] == code
        }
        found = pieces.decoded_rows(
            np.array([row for row, _ in chosen], np.int64), [packed for _, packed in chosen]
        )
        assert found.tolist() == sorted(union)


def test_a_common_pieces_mask_holds_block_rows_narrower_than_a_byte():
    """Rows of three entries: each bitmap's byte reaches into the next row, in any order."""
    distinct = np.array([7], np.int64)
    rows = []
    for block in (1, 4, 7):  # the first and third entry of each block row hold the piece
        rows += pieces._row_values(distinct, np.zeros(2, np.int64), np.array([0, 2]), block)
    assert all(packed[0] == 0 for _, _, packed in rows)  # bitmaps
    for ordered in (rows, rows[::-1]):
        mask = pieces._marked([row for _, row, _ in ordered], [each for _, _, each in ordered], 9)
        assert len(mask) == 10
        assert np.flatnonzero(mask).tolist() == [1, 3, 4, 6, 7, 9]


@pytest.mark.parametrize("one_by_one", [True, False])
async def test_a_giant_memory_is_indexed_by_its_own_write(one_by_one, tmp_path):
    rng = random.Random(65)
    reference = InMemoryStore()
    tuning = Tuning(background_folds=False, tail_limit=1_000, giant_memory=300)
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
