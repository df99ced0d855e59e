"""The LoopMemory contract (model, retrieval, consolidation, errors), the same on every backend.

Ranking tests are built so that the reference order and the most likely wrong
order differ: each states the scores it relies on, computed by hand in binary32.
"""

from __future__ import annotations

import dataclasses
import math
import os
import random
import struct
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import func, select

import loopctl_memory
from loopctl_memory import (
    ConsolidationStats,
    DuplicateEntryError,
    InvalidEntryError,
    LoopMemoryError,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
)
from loopctl_memory.sql.tables import entries, scopes, tags
from tests.conftest import POSTGRES_URL_VARIABLE, base_backend

# --- helpers -------------------------------------------------------------------


def make(category: Any = MemoryCategory.FACT, memory: Any = "m", **fields: Any) -> MemoryEntry:
    """A MemoryEntry; fields are typed Any so that invalid ones can be built too."""
    return MemoryEntry(category, memory, **fields)


def full_entry(**changes: Any) -> MemoryEntry:
    """An entry with every field set away from its default."""
    entry = MemoryEntry(
        MemoryCategory.ERROR_PATTERN,
        "Edit failures often caused by stale file content",
        tags=["zeta", "Alpha", "mid dle", "alpha"],
        relevance=0.7,
        id=uuid.UUID("12345678-1234-5678-1234-567812345678"),
        created_at=datetime(2024, 2, 29, 23, 59, 58, 123457, tzinfo=UTC),
        access_count=42,
        validated=True,
    )
    return dataclasses.replace(entry, **changes)


async def memories(store: Any, query: str, limit: int = 100) -> list[str]:
    """The memories ``retrieve`` returns, in order."""
    return [entry.memory for entry in await store.retrieve(query, limit)]


async def read_back(store: Any, how: str, entry: MemoryEntry) -> MemoryEntry:
    """Store ``entry`` alone in ``store`` and read it back with ``get`` or ``retrieve``."""
    await store.store(entry)
    if how == "get":
        found = await store.get(entry.id)
        assert found is not None
        return found  # type: ignore[no-any-return]  # store is untyped here
    [found] = await store.retrieve("", 1)
    return found  # type: ignore[no-any-return]  # store is untyped here


READ_BACK = ["get", "retrieve"]


def f32(value: float) -> float:
    """An independent binary32 rounding (not the library's), for computing expectations."""
    result: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return result


def is_utc(moment: datetime) -> bool:
    return moment.utcoffset() == timedelta(0) and moment.tzname() == "UTC"


@pytest.fixture
def sql_backend(backend: str) -> str:
    """The backend under test, for the backends that have a database."""
    if backend == "reference":
        pytest.skip("InMemoryStore has no database, no engine and nothing to close")
    return backend


@pytest.fixture
def sql_store(store: Any, sql_backend: str) -> Any:
    """The store under test, for the backends that have a database."""
    return store


async def tag_row_count(store: Any) -> int:
    """The tag rows of the entries the store (a view: of its scope) holds."""
    scope = select(scopes.c.id).where(scopes.c.name == store.scope_name).scalar_subquery()
    statement = (
        select(func.count())
        .select_from(tags.join(entries, entries.c.seq == tags.c.entry_seq))
        .where(entries.c.scope_id == scope)
    )
    async with store.engine.connect() as connection:
        return int((await connection.execute(statement)).scalar_one())


# --- the protocol ----------------------------------------------------------------


async def test_every_backend_is_a_loop_memory(store):
    assert isinstance(store, loopctl_memory.LoopMemory)


# --- round trip: every field comes back unchanged --------------------------------


@pytest.mark.parametrize("how", READ_BACK)
async def test_every_field_survives_a_round_trip(store, how):
    entry = full_entry()

    found = await read_back(store, how, full_entry())

    assert entry == found
    assert is_utc(found.created_at)


@pytest.mark.parametrize("category", list(MemoryCategory))
async def test_every_category_survives_a_round_trip(store, category):
    found = await read_back(store, "get", make(category))

    assert category is found.category


@pytest.mark.parametrize("how", READ_BACK)
async def test_tags_come_back_in_the_order_given_with_duplicates(store, how):
    tags = ["zeta", "alpha", "zeta", "", "Mid Dle", "alpha"]

    found = await read_back(store, how, make(tags=list(tags)))

    assert tags == found.tags


async def test_many_tags_come_back_in_order(store):
    tags = [f"tag {i}" for i in range(150, 0, -1)]

    found = await read_back(store, "get", make(tags=list(tags)))

    assert tags == found.tags


async def test_an_entry_without_tags_comes_back_without_tags(store):
    found = await read_back(store, "get", make(tags=[]))

    assert [] == found.tags


@pytest.mark.parametrize(
    "relevance",
    [0.0, 5e-324, 0.05, 0.1, 1 / 3, 0.7, math.nextafter(1.0, 0.0), 1.0],
)
@pytest.mark.parametrize("how", READ_BACK)
async def test_relevance_comes_back_exactly_not_as_a_float32(store, how, relevance):
    found = await read_back(store, how, make(relevance=relevance))

    assert relevance == found.relevance
    assert type(found.relevance) is float


async def test_an_integer_relevance_comes_back_as_an_equal_float(store):
    found = await read_back(store, "get", make(relevance=1))

    assert 1.0 == found.relevance
    assert type(found.relevance) is float


@pytest.mark.parametrize(
    "entry_id",
    [
        uuid.UUID(int=0),
        uuid.UUID(int=2**128 - 1),
        uuid.UUID("12345678-1234-5678-1234-567812345678"),
    ],
)
@pytest.mark.parametrize("how", READ_BACK)
async def test_id_comes_back_unchanged(store, how, entry_id):
    found = await read_back(store, how, make(id=entry_id))

    assert entry_id == found.id


@pytest.mark.parametrize(
    "created_at",
    [
        datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=UTC),
        datetime(2024, 1, 2, 3, 4, 5, 1, tzinfo=UTC),
        datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
        datetime(1970, 1, 1, tzinfo=UTC),
        datetime(1, 1, 1, tzinfo=UTC),
        datetime(9999, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    ],
    ids=str,
)
@pytest.mark.parametrize("how", READ_BACK)
async def test_created_at_comes_back_to_the_microsecond_in_utc(store, how, created_at):
    found = await read_back(store, how, make(created_at=created_at))

    assert created_at == found.created_at
    assert created_at.microsecond == found.created_at.microsecond
    assert is_utc(found.created_at)


@pytest.mark.parametrize("how", READ_BACK)
async def test_a_non_utc_created_at_comes_back_as_the_same_instant_in_utc(store, how):
    india = timezone(timedelta(hours=5, minutes=30))
    created_at = datetime(2024, 1, 2, 3, 4, 5, 678901, tzinfo=india)

    found = await read_back(store, how, make(created_at=created_at))

    assert created_at == found.created_at
    assert datetime(2024, 1, 1, 21, 34, 5, 678901) == found.created_at.replace(tzinfo=None)
    assert is_utc(found.created_at)


@pytest.mark.parametrize("access_count", [0, 1, 42, 2**63 - 1])
@pytest.mark.parametrize("how", READ_BACK)
async def test_access_count_comes_back_unchanged(store, how, access_count):
    found = await read_back(store, how, make(access_count=access_count))

    assert access_count == found.access_count


@pytest.mark.parametrize("validated", [True, False])
@pytest.mark.parametrize("how", READ_BACK)
async def test_validated_comes_back_unchanged(store, how, validated):
    found = await read_back(store, how, make(validated=validated))

    assert validated is found.validated


async def test_a_default_entry_comes_back_with_its_defaults(store):
    entry = MemoryEntry(MemoryCategory.WORKING, "scratch")

    found = await read_back(store, "get", entry)

    assert entry == found
    assert ([], 1.0, 0, False) == (found.tags, found.relevance, found.access_count, found.validated)


UNUSUAL_TEXTS = {
    "empty": "",
    "emoji": "crab 🦀 rocket 🚀 family 👨‍👩‍👧",
    "nul": "before\x00after",
    "only nul": "\x00",
    "cjk": "日本語のメモ",
    "combining": "e\u0301cole",
    "rtl": "שלום עולם",
    "astral max": "\U0010ffff",
    "sql": "'; DROP TABLE entries; --",
    "wildcards": "100% _like_ \\escape\\ [x]",
    "whitespace": " \t\n\u00a0\u3000\x1f ",
    "long": "x" * 100_000,
}


@pytest.mark.parametrize("value", UNUSUAL_TEXTS.values(), ids=UNUSUAL_TEXTS.keys())
@pytest.mark.parametrize("how", READ_BACK)
async def test_unusual_memory_text_comes_back_unchanged(store, how, value):
    found = await read_back(store, how, make(memory=value))

    assert value == found.memory


@pytest.mark.parametrize("value", UNUSUAL_TEXTS.values(), ids=UNUSUAL_TEXTS.keys())
@pytest.mark.parametrize("how", READ_BACK)
async def test_unusual_tag_text_comes_back_unchanged(store, how, value):
    found = await read_back(store, how, make(tags=["first", value, "last"]))

    assert ["first", value, "last"] == found.tags


async def test_a_query_with_a_nul_character_is_answered(store):
    """Even when no stored text holds a NUL, a query may."""
    await store.store(make(memory="alpha", relevance=0.3))  # 0.15 + 0.1 = 0.25
    await store.store(make(memory="beta", relevance=0.0))  # 0.5*0.4 + 0.1 = 0.3

    assert ["beta", "alpha"] == await memories(store, "beta a\x00")


async def test_a_query_with_a_nul_character_matches_it_as_text(store):
    """NUL is an ordinary character: "a\\x00b" contains the query word "\\x00b"."""
    await store.store(make(memory="unrelated", relevance=0.5))  # 0.25 + 0.1 = 0.35
    await store.store(make(memory="a\x00b", relevance=0.0))  # 0.4 + 0.1 = 0.5
    await store.store(make(memory="ab", relevance=0.0))  # 0.1

    assert ["a\x00b", "unrelated", "ab"] == await memories(store, "\x00B")


# --- retrieval: ordering ---------------------------------------------------------


async def test_retrieve_orders_by_the_reference_score(store):
    """score = relevance*0.5 + overlap*0.4 + 0.3 if a tag holds the query + 0.1."""
    # Inserted worst first, so that insertion order and score order disagree.
    await store.store(make(memory="zzz", relevance=0.0))  # 0.1
    await store.store(make(memory="beta", relevance=0.2))  # 0.1 + 0.2 + 0.1 = 0.4
    await store.store(make(memory="alpha beta", relevance=0.0))  # 0.4 + 0.1 = 0.5
    await store.store(make(memory="yyy", relevance=1.0))  # 0.5 + 0.1 = 0.6
    await store.store(
        make(memory="alpha", relevance=0.1, tags=["x alpha beta"])
    )  # 0.05 + 0.2 + 0.3 + 0.1 = 0.65
    await store.store(
        make(memory="alpha beta", relevance=0.9, tags=["ALPHA BETA GAMMA"])
    )  # 0.45 + 0.4 + 0.3 + 0.1 = 1.25

    assert ["alpha beta", "alpha", "yyy", "alpha beta", "beta", "zzz"] == await memories(
        store, "alpha beta"
    )
    assert [0.9, 0.1, 1.0, 0.0, 0.2, 0.0] == [
        entry.relevance for entry in await store.retrieve("alpha beta", 10)
    ]


async def test_equal_scores_keep_insertion_order(store):
    ids = [uuid.UUID(int=n) for n in (5, 1, 4, 2, 3)]
    for number, entry_id in enumerate(ids):
        await store.store(make(memory=f"same {number}", relevance=0.5, id=entry_id))

    found = await store.retrieve("same", 10)

    assert ids == [entry.id for entry in found]


async def test_equal_scores_keep_batch_order_after_store_many(store):
    ids = [uuid.UUID(int=n) for n in (9, 3, 7, 1)]

    await store.store_many([make(memory="same", id=entry_id) for entry_id in ids])

    assert ids == [entry.id for entry in await store.retrieve("same", 10)]


async def test_equal_scores_keep_insertion_order_after_a_delete(store):
    first, second, third, fourth = (make(memory="same") for _ in range(4))
    for entry in (first, second, third, fourth):
        await store.store(entry)

    await store.delete(second.id)
    fifth = make(memory="same")
    await store.store(fifth)

    found = await store.retrieve("same", 10)
    assert [first.id, third.id, fourth.id, fifth.id] == [entry.id for entry in found]


async def test_an_entry_stored_after_deleting_the_newest_comes_last_in_a_tie(store):
    first, second = make(memory="same"), make(memory="same")
    await store.store(first)
    await store.store(second)
    await store.delete(second.id)

    third = make(memory="same")
    await store.store(third)

    assert [first.id, third.id] == [entry.id for entry in await store.retrieve("same", 10)]


async def test_ties_cut_by_the_limit_keep_the_earliest(store):
    ids = [uuid.UUID(int=n) for n in (8, 2, 6, 4)]
    for entry_id in ids:
        await store.store(make(memory="same", id=entry_id))

    assert ids[:2] == [entry.id for entry in await store.retrieve("same", 2)]


@pytest.mark.parametrize("matching_first", [True, False])
@pytest.mark.parametrize("limit", [1, 2])
async def test_a_matching_and_a_non_matching_entry_that_tie_keep_insertion_order(
    store, matching_first, limit
):
    """f32(0.8)*0.5 + 0.1 == 1.0*0.4 + 0.1 in binary32: the earlier one comes first."""
    assert f32(f32(0.8) * f32(0.5)) == f32(1.0 * f32(0.4))
    matching = make(memory="alpha", relevance=0.0)
    other = make(memory="zzz", relevance=0.8)
    inserted = [matching, other] if matching_first else [other, matching]
    for entry in inserted:
        await store.store(entry)

    assert inserted[:limit] == await store.retrieve("alpha", limit)


@pytest.mark.parametrize(
    "inserted",
    [("0.7 one word", "0.5 two words"), ("0.5 two words", "0.7 one word")],
    ids=["0.7-first", "0.5-first"],
)
async def test_a_float32_tie_keeps_insertion_order(store, inserted):
    """Retrieval: with 4 query words, 0.7 matching 1 and 0.5 matching 2 tie in f32, not in f64."""
    relevance = {"0.7 one word": 0.7, "0.5 two words": 0.5}
    memory = {"0.7 one word": "alpha", "0.5 two words": "alpha beta"}
    # The premise, in an independent f32: a tie in binary32, different in binary64.
    one = f32(f32(f32(f32(0.7) * f32(0.5)) + f32(f32(0.25) * f32(0.4))) + f32(0.1))
    two = f32(f32(f32(f32(0.5) * f32(0.5)) + f32(f32(0.5) * f32(0.4))) + f32(0.1))
    assert one == two
    assert 0.7 * 0.5 + 0.25 * 0.4 + 0.1 != 0.5 * 0.5 + 0.5 * 0.4 + 0.1
    for name in inserted:
        await store.store(make(memory=memory[name], relevance=relevance[name]))

    found = await store.retrieve("alpha beta gamma delta", 2)

    assert [relevance[name] for name in inserted] == [entry.relevance for entry in found]


async def test_a_duplicated_query_word_counts_twice(store):
    """Query "rust rust go" has 3 words: "rust" matches 2/3, "go" matches 1/3."""
    await store.store(make(memory="go"))  # 0.5 + (1/3)*0.4 + 0.1
    await store.store(make(memory="rust"))  # 0.5 + (2/3)*0.4 + 0.1

    assert ["rust", "go"] == await memories(store, "rust rust go")


async def test_a_word_repeated_in_the_memory_counts_once(store):
    """Both match the one query word once, so they tie and keep insertion order."""
    await store.store(make(memory="rust"))
    await store.store(make(memory="rust rust rust"))

    assert ["rust", "rust rust rust"] == await memories(store, "rust")


async def test_a_query_word_matches_as_a_substring(store):
    """ "test" is in "testing"; the match outweighs the other entry's relevance."""
    await store.store(make(memory="unrelated", relevance=0.5))  # 0.35
    await store.store(make(memory="testing things", relevance=0.0))  # 0.5

    assert ["testing things", "unrelated"] == await memories(store, "test")


async def test_a_query_word_matches_inside_another_word(store):
    await store.store(make(memory="unrelated", relevance=0.5))  # 0.35
    await store.store(make(memory="attestation", relevance=0.0))  # 0.5

    assert ["attestation", "unrelated"] == await memories(store, "test")


@pytest.mark.parametrize(
    ("query", "memory"),
    [
        ("glob", "GLOB"),
        ("GLOB", "glob"),
        ("GlOb", "gLoB"),
        ("École", "ÉCOLE"),
        ("ΣΟΦΙΑ", "σοφια"),
        ("ΟΔΟΣ", "οδος"),
        ("İstanbul", "İSTANBUL"),
    ],
)
async def test_word_matching_ignores_case(store, query, memory):
    await store.store(make(memory="unrelated", relevance=0.5))  # 0.35
    await store.store(make(memory=f"x {memory} y", relevance=0.0))  # 0.5

    assert [f"x {memory} y", "unrelated"] == await memories(store, query)


@pytest.mark.parametrize("wildcard", ["%", "_", "\\", "[", "*", "?", "'"])
async def test_sql_wildcards_in_a_query_match_only_themselves(store, wildcard):
    await store.store(make(memory="plain", relevance=0.5))  # 0.35 (0.75 if it matched)
    await store.store(make(memory=f"a{wildcard}b", relevance=0.0))  # 0.5

    assert [f"a{wildcard}b", "plain"] == await memories(store, wildcard)


async def test_a_query_of_many_words_counts_every_match(store):
    """150 distinct words (more than one SQL statement may test): 2/150 beats 1/150."""
    words = [f"word{i:04d}x" for i in range(150)]
    await store.store(make(memory="word0149x", relevance=0.0))
    await store.store(make(memory="word0000x word0075x", relevance=0.0))
    await store.store(make(memory="nothing", relevance=1.0))  # 0.6, above both

    assert ["nothing", "word0000x word0075x", "word0149x"] == await memories(store, " ".join(words))


async def test_entries_that_match_nothing_are_still_returned(store):
    """The 0.1 baseline: no entry scores zero, so every entry is a candidate."""
    await store.store(make(memory="alpha", relevance=0.2))
    await store.store(make(memory="beta", relevance=0.0))

    assert ["alpha", "beta"] == await memories(store, "zzz", 5)


async def test_entries_that_match_nothing_rank_by_relevance(store):
    await store.store(make(memory="low", relevance=0.1))
    await store.store(make(memory="high", relevance=0.9))
    await store.store(make(memory="mid", relevance=0.5))

    assert ["high", "mid", "low"] == await memories(store, "zzz", 5)


async def test_an_empty_query_ranks_untagged_entries_by_relevance(store):
    await store.store(make(memory="low", relevance=0.1))
    await store.store(make(memory="high", relevance=0.9))

    assert ["high", "low"] == await memories(store, "")


# --- retrieval: tags -------------------------------------------------------------


async def test_a_tag_containing_the_whole_query_gives_the_bonus(store):
    await store.store(make(memory="zzz", relevance=0.5))  # 0.35
    await store.store(make(memory="nothing", relevance=0.0, tags=["learn rust iterators"]))  # 0.4

    assert ["nothing", "zzz"] == await memories(store, "rust iter")


async def test_a_tag_containing_one_word_of_the_query_gives_no_bonus(store):
    await store.store(make(memory="zzz", relevance=0.5))  # 0.35
    await store.store(make(memory="nothing", relevance=0.0, tags=["rust", "iter"]))  # 0.1

    assert ["zzz", "nothing"] == await memories(store, "rust iter")


async def test_tag_matching_ignores_case(store):
    await store.store(make(memory="zzz", relevance=0.5))  # 0.35
    await store.store(make(memory="nothing", relevance=0.0, tags=["My RUST Lang"]))  # 0.4

    assert ["nothing", "zzz"] == await memories(store, "rust LANG")


async def test_the_tag_bonus_counts_once_however_many_tags_match(store):
    """With three bonuses the tagged entry would score 1.0; with one it scores 0.4 < 0.475."""
    await store.store(make(memory="zzz", relevance=0.0, tags=["rust", "rusty", "RUST"]))
    await store.store(make(memory="yyy", relevance=0.75))

    assert ["yyy", "zzz"] == await memories(store, "rust")


async def test_the_query_is_not_trimmed_for_the_tag_test(store):
    """ "rust " (trailing space) is in "rust lang" but not in "rust"."""
    await store.store(make(memory="zzz", relevance=0.5))  # 0.35
    await store.store(make(memory="a", relevance=0.0, tags=["rust"]))  # 0.1
    await store.store(make(memory="b", relevance=0.0, tags=["rust lang"]))  # 0.4

    assert ["b", "zzz", "a"] == await memories(store, "rust ")


async def test_an_empty_query_gives_every_tagged_entry_the_bonus(store):
    await store.store(make(memory="untagged", relevance=1.0))  # 0.6
    await store.store(make(memory="tagged", relevance=0.5, tags=["anything"]))  # 0.65
    await store.store(make(memory="empty tag", relevance=0.5, tags=[""]))  # 0.65

    assert ["tagged", "empty tag", "untagged"] == await memories(store, "")


async def test_tags_do_not_count_as_word_matches(store):
    """Only the memory text is searched for query words; tags only give the bonus."""
    await store.store(make(memory="zzz", relevance=0.5))  # 0.35
    await store.store(make(memory="nothing", relevance=0.0, tags=["alpha", "beta"]))  # 0.1

    assert ["zzz", "nothing"] == await memories(store, "alpha beta")


# --- retrieval: whitespace -------------------------------------------------------

# Rust's split_whitespace splits on exactly the Unicode White_Space characters.
UNICODE_WHITE_SPACE = [
    *map(chr, range(0x09, 0x0E)),
    " ",
    "\x85",
    "\xa0",
    "\u1680",
    *map(chr, range(0x2000, 0x200B)),
    "\u2028",
    "\u2029",
    "\u202f",
    "\u205f",
    "\u3000",
]
# Python's str.split() also splits on U+001C..U+001F; the others are look-alikes.
NOT_WHITE_SPACE = ["\x1c", "\x1d", "\x1e", "\x1f", "\u200b", "\u180e", "\ufeff", "\u2060"]


def _codepoint(character: str) -> str:
    return f"U+{ord(character):04X}"


@pytest.mark.parametrize("separator", UNICODE_WHITE_SPACE, ids=_codepoint)
async def test_the_query_splits_on_unicode_white_space(store, separator):
    """Split: "beta" matches 1 of 2 words, 0.4 + 0.2 + 0.1 = 0.7 beats 0.6."""
    await store.store(make(memory="xyz unrelated", relevance=1.0))  # 0.6
    await store.store(make(memory="beta", relevance=0.8))  # 0.7 if split, 0.5 if not

    assert ["beta", "xyz unrelated"] == await memories(store, f"alpha{separator}beta")


@pytest.mark.parametrize("separator", NOT_WHITE_SPACE, ids=_codepoint)
async def test_the_query_does_not_split_on_other_characters(store, separator):
    """Not split: the one word "alpha?beta" is not in "beta", 0.5 loses to 0.6."""
    await store.store(make(memory="xyz unrelated", relevance=1.0))  # 0.6
    await store.store(make(memory="beta", relevance=0.8))  # 0.7 if split, 0.5 if not

    assert ["xyz unrelated", "beta"] == await memories(store, f"alpha{separator}beta")


async def test_a_whitespace_only_query_has_no_words(store):
    """No words: no overlap for anyone, so relevance alone decides."""
    await store.store(make(memory="a b c", relevance=0.0))
    await store.store(make(memory="zzz", relevance=0.5))

    assert ["zzz", "a b c"] == await memories(store, " \t\n\u3000 ")


# --- retrieval: limit ------------------------------------------------------------


@pytest.fixture
async def three(store):
    """The store, with three entries that rank c, b, a."""
    await store.store(make(memory="a", relevance=0.1))
    await store.store(make(memory="b", relevance=0.5))
    await store.store(make(memory="c", relevance=0.9))
    return store


async def test_limit_zero_returns_nothing(three):
    assert [] == await three.retrieve("a b c", 0)


async def test_limit_one_returns_the_best(three):
    assert ["c"] == await memories(three, "", 1)


async def test_limit_equal_to_the_count_returns_all(three):
    assert ["c", "b", "a"] == await memories(three, "", 3)


async def test_limit_above_the_count_returns_all(three):
    assert ["c", "b", "a"] == await memories(three, "", 4)


async def test_a_huge_limit_returns_all(three):
    assert ["c", "b", "a"] == await memories(three, "a b c", 10**12)


@pytest.mark.parametrize("limit", [2**63 - 1, 2**64 - 1], ids=["i64-max", "usize-max"])
async def test_the_largest_usize_limits_return_all(three, limit):
    """The reference's limit is a usize: up to 2**64 - 1 is a valid limit."""
    assert ["c", "b", "a"] == await memories(three, "a b c", limit)


async def test_retrieve_on_an_empty_store_returns_nothing(store):
    assert [] == await store.retrieve("", 10)


async def test_retrieve_has_no_side_effects(store):
    entry = full_entry(access_count=0)
    await store.store(entry)

    first = await store.retrieve("stale file", 5)
    second = await store.retrieve("stale file", 5)

    assert [entry] == first
    assert first == second
    assert entry == await store.get(entry.id)
    assert 1 == await store.count()


# --- retrieval: agreement with an independent port of the reference --------------

_WHITE_SPACE = frozenset(UNICODE_WHITE_SPACE)


def _split_whitespace(text_: str) -> list[str]:
    words: list[str] = []
    current = ""
    for character in text_:
        if character in _WHITE_SPACE:
            if current:
                words.append(current)
            current = ""
        else:
            current += character
    if current:
        words.append(current)
    return words


def _rust_retrieve(entries: list[MemoryEntry], query: str, limit: int) -> list[MemoryEntry]:
    """builtin.rs's retrieve, transcribed independently of loopctl_memory.scoring."""
    query_lower = query.lower()
    query_words = _split_whitespace(query_lower)
    scored = []
    for entry in entries:
        memory_lower = entry.memory.lower()
        tag_match = any(query_lower in tag.lower() for tag in entry.tags)
        word_matches = sum(1 for word in query_words if word in memory_lower)
        query_bonus = f32(word_matches / max(len(query_words), 1)) if word_matches else 0.0
        tag_bonus = f32(0.3) if tag_match else 0.0
        score = f32(f32(f32(entry.relevance) * f32(0.5)) + f32(query_bonus * f32(0.4)))
        score = f32(f32(score + tag_bonus) + f32(0.1))
        scored.append((score, entry))
    scored.sort(key=lambda pair: pair[0], reverse=True)  # stable, as Rust's sort_by
    return [entry for _, entry in scored[:limit]]


_VOCABULARY = [
    "rust", "Rust", "RUST", "iter", "iterators", "glob", "file", "search", "a", "test",
    "testing", "日本", "日本語", "ÉCOLE", "école", "straße", "🦀", "%", "_", "x\u00a0y",
]  # fmt: skip
_SEPARATORS = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1f", "\u2003", ""]


def _random_text(rng: random.Random, most: int) -> str:
    words = [rng.choice(_VOCABULARY) for _ in range(rng.randint(0, most))]
    text_ = ""
    for word in words:
        text_ += word + rng.choice(_SEPARATORS)
    return text_ if rng.random() < 0.8 else f" {text_.strip()} "


def _random_entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    return [
        make(
            rng.choice(list(MemoryCategory)),
            _random_text(rng, 6),
            tags=[_random_text(rng, 3) for _ in range(rng.randint(0, 3))],
            relevance=round(rng.randrange(21) * 0.05, 2),
        )
        for _ in range(count)
    ]


def _random_queries(rng: random.Random, entries: list[MemoryEntry], count: int) -> list[str]:
    queries = ["", " ", "zzz"]
    while len(queries) < count:
        tagged = [entry for entry in entries if entry.tags]
        if tagged and rng.random() < 0.2:
            queries.append(rng.choice(rng.choice(tagged).tags))
        else:
            queries.append(_random_text(rng, 4))
    return queries


async def test_retrieve_agrees_with_the_reference_on_random_data(store):
    """Same entries, same order, for many queries and limits, also after deletes and pruning."""
    rng = random.Random(20240229)
    entries = _random_entries(rng, 150)
    await store.store_many(entries)
    queries = _random_queries(rng, entries, 50)
    for query in queries:
        limit = rng.choice([1, 3, 10, 200])
        expected = _rust_retrieve(entries, query, limit)
        assert [e.id for e in expected] == [e.id for e in await store.retrieve(query, limit)]

    for entry in rng.sample(entries, 30):
        assert await store.delete(entry.id)
        entries.remove(entry)
    await store.consolidate()
    entries = [entry for entry in entries if f32(entry.relevance) >= f32(0.05)]
    entries.append(make(memory="rust test", relevance=0.05))
    await store.store(entries[-1])
    assert len(entries) == await store.count()
    for query in queries:
        limit = rng.choice([1, 3, 10, 200])
        expected = _rust_retrieve(entries, query, limit)
        assert [e.id for e in expected] == [e.id for e in await store.retrieve(query, limit)]


# --- consolidation -------------------------------------------------------------------

_F32_005_BITS = struct.unpack("<I", struct.pack("<f", 0.05))[0]
_BELOW_F32_005 = struct.unpack("<f", struct.pack("<I", _F32_005_BITS - 1))[0]
# Halfway between f32(0.05) and the binary32 below it; ties go to the even one, below.
_MIDPOINT = (_BELOW_F32_005 + f32(0.05)) / 2

PRUNE_CASES = {
    "0.0": 0.0,
    "smallest subnormal": 5e-324,
    "0.01": 0.01,
    "0.04999999": 0.04999999,
    "f32 below 0.05": _BELOW_F32_005,
    "midpoint, rounds down": _MIDPOINT,
    "above midpoint, rounds up": math.nextafter(_MIDPOINT, 1.0),
    "0.0499999999": 0.0499999999,
    "0.05": 0.05,
    "f32(0.05)": f32(0.05),
    "0.050000001": 0.050000001,
    "0.9": 0.9,
    "1.0": 1.0,
}


@pytest.mark.parametrize("relevance", PRUNE_CASES.values(), ids=PRUNE_CASES.keys())
async def test_consolidate_prunes_exactly_what_is_below_0_05_in_float32(store, relevance):
    """The reference compares the f32 relevance: pruned iff f32(relevance) < f32(0.05)."""
    kept = f32(relevance) >= f32(0.05)
    entry = make(relevance=relevance)
    await store.store(entry)

    stats = await store.consolidate()

    assert int(not kept) == stats.pruned
    assert (entry if kept else None) == await store.get(entry.id)


def test_the_prune_cases_straddle_the_float32_boundary():
    """The cases above really test both sides: 0.04999999 is pruned, 0.0499999999 kept."""
    assert f32(0.04999999) < f32(0.05)
    assert f32(_MIDPOINT) < f32(0.05)
    assert f32(math.nextafter(_MIDPOINT, 1.0)) == f32(0.05)
    assert f32(0.0499999999) == f32(0.05)


async def test_consolidate_reports_its_stats(store):
    for relevance in (0.9, 0.0, 0.05, 0.01, 1.0):
        await store.store(make(relevance=relevance))

    stats = await store.consolidate()

    assert (
        ConsolidationStats(entries_before=5, entries_after=3, pruned=2, merged=0, bytes_saved=0)
        == stats
    )
    assert 3 == await store.count()


async def test_consolidate_on_an_empty_store_reports_zeros(store):
    assert ConsolidationStats(0, 0, 0, 0, 0) == await store.consolidate()


async def test_consolidate_twice_prunes_nothing_the_second_time(store):
    await store.store(make(relevance=0.0))
    await store.store(make(relevance=0.5))
    await store.consolidate()

    assert ConsolidationStats(1, 1, 0, 0, 0) == await store.consolidate()


async def test_pruned_entries_are_no_longer_retrieved(store):
    await store.store(make(memory="kept one", relevance=0.5))
    await store.store(make(memory="pruned", relevance=0.01, tags=["kept"]))
    await store.store(make(memory="kept two", relevance=0.5))

    await store.consolidate()

    assert ["kept one", "kept two"] == await memories(store, "kept")


async def test_consolidate_deletes_the_tags_of_pruned_entries(sql_store):
    kept = make(relevance=0.5, tags=["a", "b"])
    await sql_store.store(kept)
    await sql_store.store(make(relevance=0.0, tags=["c", "d", "e"]))

    await sql_store.consolidate()

    assert 2 == await tag_row_count(sql_store)
    assert kept == await sql_store.get(kept.id)


async def test_consolidate_leaves_no_tags_when_every_entry_is_pruned(sql_store):
    await sql_store.store(make(relevance=0.0, tags=["c", "d", "e"]))

    await sql_store.consolidate()

    assert 0 == await tag_row_count(sql_store)


async def test_a_pruned_id_can_be_stored_again(store):
    entry = make(memory="old", relevance=0.0)
    await store.store(entry)
    await store.consolidate()

    await store.store(dataclasses.replace(entry, memory="new", relevance=0.5))

    found = await store.get(entry.id)
    assert found is not None
    assert "new" == found.memory


async def test_a_new_entry_does_not_inherit_the_tags_of_a_pruned_one(store):
    await store.store(make(memory="old", relevance=0.5))
    await store.store(make(memory="newest", relevance=0.0, tags=["secret"]))
    await store.consolidate()

    entry = make(memory="fresh", relevance=0.5)
    await store.store(entry)

    assert entry == await store.get(entry.id)
    assert ["old", "fresh"] == await memories(store, "secret")


# --- count, get, delete ------------------------------------------------------------


async def test_count_and_is_empty_follow_stores_and_deletes(store):
    first, second = make(), make()
    assert (0, True) == (await store.count(), await store.is_empty())

    await store.store(first)
    await store.store(second)
    assert (2, False) == (await store.count(), await store.is_empty())

    await store.delete(first.id)
    await store.delete(second.id)
    assert (0, True) == (await store.count(), await store.is_empty())


async def test_get_of_an_unknown_id_returns_none(store):
    await store.store(make())

    assert await store.get(uuid.uuid4()) is None


async def test_delete_returns_true_then_false(store):
    entry = make()
    await store.store(entry)

    assert (True, False) == (await store.delete(entry.id), await store.delete(entry.id))


async def test_delete_of_an_unknown_id_returns_false_and_changes_nothing(store):
    entry = make()
    await store.store(entry)

    assert await store.delete(uuid.uuid4()) is False
    assert [entry] == await store.retrieve("", 10)


async def test_a_deleted_entry_is_no_longer_counted_got_or_retrieved(store):
    kept, deleted = make(memory="kept"), make(memory="deleted", tags=["deleted"])
    await store.store(kept)
    await store.store(deleted)

    await store.delete(deleted.id)

    assert 1 == await store.count()
    assert await store.get(deleted.id) is None
    assert ["kept"] == await memories(store, "deleted")


async def test_delete_removes_the_entry_tags(sql_store):
    kept, deleted = make(tags=["a"]), make(tags=["b", "c"])
    await sql_store.store(kept)
    await sql_store.store(deleted)

    await sql_store.delete(deleted.id)

    assert 1 == await tag_row_count(sql_store)


async def test_a_new_entry_does_not_inherit_the_tags_of_a_deleted_one(store):
    await store.store(make(memory="old"))
    newest = make(memory="newest", tags=["secret", "other"])
    await store.store(newest)
    await store.delete(newest.id)

    entry = make(memory="fresh")
    await store.store(entry)

    assert [] == (await store.get(entry.id)).tags
    assert ["old", "fresh"] == await memories(store, "secret")


async def test_a_deleted_id_can_be_stored_again(store):
    entry = make(memory="old")
    await store.store(entry)
    await store.delete(entry.id)

    await store.store(dataclasses.replace(entry, memory="new"))

    assert ["new"] == await memories(store, "")


# --- store_many: all or nothing ------------------------------------------------------


async def test_store_many_stores_every_entry_in_order(store):
    batch = [make(memory=f"entry {n}") for n in range(5)]

    await store.store_many(batch)

    assert batch == await store.retrieve("entry", 10)


async def test_store_many_of_nothing_stores_nothing(store):
    await store.store_many([])

    assert await store.is_empty()


async def test_store_many_with_an_invalid_third_entry_stores_nothing(store):
    existing = make(memory="existing")
    await store.store(existing)
    batch = [make(memory="one"), make(memory="two"), make(relevance=math.nan), make()]

    with pytest.raises(InvalidEntryError):
        await store.store_many(batch)

    assert [existing] == await store.retrieve("", 10)


async def test_store_many_with_a_duplicate_id_inside_stores_nothing(store):
    existing = make(memory="existing")
    await store.store(existing)
    twin = make(memory="twin")
    batch = [make(memory="one"), twin, make(memory="two"), dataclasses.replace(twin)]

    with pytest.raises(DuplicateEntryError):
        await store.store_many(batch)

    assert [existing] == await store.retrieve("", 10)


async def test_store_many_clashing_with_a_stored_id_stores_nothing(store):
    existing = make(memory="existing")
    await store.store(existing)
    batch = [
        make(memory="one", tags=["a", "b"]),
        make(memory="two", tags=["c"]),
        dataclasses.replace(existing, memory="x", tags=["d"]),
    ]

    with pytest.raises(DuplicateEntryError):
        await store.store_many(batch)

    assert [existing] == await store.retrieve("", 10)


# --- bad input ---------------------------------------------------------------------


def _invalid_entries() -> dict[str, MemoryEntry]:
    return {
        "relevance NaN": make(relevance=math.nan),
        "relevance inf": make(relevance=math.inf),
        "relevance -inf": make(relevance=-math.inf),
        "relevance -0.1": make(relevance=-0.1),
        "relevance just below 0": make(relevance=-5e-324),
        "relevance 1.5": make(relevance=1.5),
        "relevance just above 1": make(relevance=math.nextafter(1.0, 2.0)),
        "relevance a str": make(relevance="0.5"),
        "relevance a bool": make(relevance=True),
        "relevance None": make(relevance=None),
        "unknown category": make("bogus"),
        "category None": make(None),
        "memory bytes": make(memory=b"bytes"),
        "memory None": make(memory=None),
        "memory an int": make(memory=42),
        "tag an int": make(tags=["ok", 7]),
        "tag bytes": make(tags=[b"x"]),
        "tag None": make(tags=[None]),
        "memory lone surrogate": make(memory="bad \ud800 text"),
        "tag lone surrogate": make(tags=["ok", "\ud800"]),
        "created_at naive": make(created_at=datetime(2024, 1, 1, 12, 0)),
        "created_at a str": make(created_at="2024-01-01T00:00:00Z"),
        "id a str": make(id="12345678-1234-5678-1234-567812345678"),
        "access_count negative": make(access_count=-1),
    }


INVALID_ENTRIES = _invalid_entries()


@pytest.mark.parametrize("bad", INVALID_ENTRIES.values(), ids=INVALID_ENTRIES.keys())
async def test_store_of_an_invalid_entry_raises_and_changes_nothing(store, bad):
    existing = make(memory="existing", tags=["t"])
    await store.store(existing)

    with pytest.raises(InvalidEntryError):
        await store.store(bad)

    assert [existing] == await store.retrieve("", 10)


@pytest.mark.parametrize("bad", INVALID_ENTRIES.values(), ids=INVALID_ENTRIES.keys())
async def test_store_many_of_an_invalid_entry_raises_and_changes_nothing(store, bad):
    existing = make(memory="existing", tags=["t"])
    await store.store(existing)

    with pytest.raises(InvalidEntryError):
        await store.store_many([make(memory="valid"), bad])

    assert [existing] == await store.retrieve("", 10)


async def test_a_created_at_that_is_out_of_range_in_utc_raises_invalid_entry_error(store):
    """0001-01-01 00:00 at UTC+05:00 is before the first datetime once converted to UTC."""
    bad = make(created_at=datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=5))))

    with pytest.raises(InvalidEntryError):
        await store.store(bad)

    assert await store.is_empty()


async def test_bad_input_is_a_value_error(store):
    assert issubclass(InvalidEntryError, ValueError)
    assert issubclass(InvalidEntryError, LoopMemoryError)
    with pytest.raises(ValueError, match="relevance"):
        await store.store(make(relevance=1.5))


async def test_storing_the_same_id_twice_raises_duplicate_entry_error(store):
    first = make(memory="first")
    await store.store(first)

    with pytest.raises(DuplicateEntryError):
        await store.store(dataclasses.replace(first, memory="second"))

    assert [first] == await store.retrieve("", 10)


def test_a_duplicate_entry_error_is_an_invalid_entry_error():
    assert issubclass(DuplicateEntryError, InvalidEntryError)


@pytest.mark.parametrize(
    ("query", "limit"),
    [
        ("x", -1),
        ("x", -(2**70)),
        ("x", 2.0),
        ("x", True),
        ("x", False),
        ("x", None),
        ("x", "3"),
        (None, 5),
        (b"x", 5),
        (5, 5),
        (["x"], 5),
        ("bad \ud800", 5),
        ("\udfff", 5),
    ],
    ids=repr,
)
async def test_retrieve_with_bad_arguments_raises_invalid_entry_error(store, query, limit):
    await store.store(make(memory="x"))

    with pytest.raises(InvalidEntryError):
        await store.retrieve(query, limit)


NOT_UUIDS = ["not-a-uuid", "12345678-1234-5678-1234-567812345678", 5, None]


@pytest.mark.parametrize("entry_id", NOT_UUIDS, ids=repr)
async def test_get_with_a_non_uuid_raises_invalid_entry_error(store, entry_id):
    """The error contract: every backend validates the same way, InMemoryStore included."""
    await store.store(make(id=uuid.UUID("12345678-1234-5678-1234-567812345678")))

    with pytest.raises(InvalidEntryError):
        await store.get(entry_id)


@pytest.mark.parametrize("entry_id", NOT_UUIDS, ids=repr)
async def test_delete_with_a_non_uuid_raises_invalid_entry_error(store, entry_id):
    """The error contract: every backend validates the same way, InMemoryStore included."""
    await store.store(make(id=uuid.UUID("12345678-1234-5678-1234-567812345678")))

    with pytest.raises(InvalidEntryError):
        await store.delete(entry_id)

    assert 1 == await store.count()


# --- isolation: the store holds its own copy ------------------------------------------


async def test_mutating_an_entry_after_storing_it_does_not_change_the_store(store):
    entry = full_entry()
    await store.store(entry)

    entry.tags.append("added")
    entry.tags[0] = "changed"
    entry.memory = "changed"
    entry.relevance = 0.0
    entry.validated = False

    assert full_entry() == await store.get(entry.id)
    assert [full_entry()] == await store.retrieve("", 10)


async def test_mutating_a_batch_entry_after_store_many_does_not_change_the_store(store):
    entry = full_entry()
    await store.store_many([entry])

    entry.tags.clear()
    entry.memory = "changed"

    assert full_entry() == await store.get(entry.id)


@pytest.mark.parametrize("how", READ_BACK)
async def test_mutating_a_returned_entry_does_not_change_the_store(store, how):
    returned = await read_back(store, how, full_entry())

    returned.tags.append("added")
    returned.tags[0] = "changed"
    returned.memory = "changed"
    returned.access_count = 7

    assert full_entry() == await store.get(full_entry().id)
    assert [full_entry()] == await store.retrieve("", 10)


# --- the builders --------------------------------------------------------------------


def test_with_tag_returns_a_copy_with_the_tag_appended():
    original = make(tags=["a"])

    tagged = original.with_tag("b")

    assert ["a", "b"] == tagged.tags
    assert ["a"] == original.tags
    assert dataclasses.replace(original, tags=["a", "b"]) == tagged


def test_with_tag_copy_does_not_share_the_tags_list():
    original = make(tags=["a"])

    original.with_tag("b").tags.append("c")

    assert ["a"] == original.tags


def test_as_validated_returns_a_validated_copy():
    original = make(tags=["a"])

    validated = original.as_validated()

    assert validated.validated is True
    assert original.validated is False
    assert dataclasses.replace(original, validated=True) == validated


def test_as_validated_copy_does_not_share_the_tags_list():
    original = make(tags=["a"])

    original.as_validated().tags.append("b")

    assert ["a"] == original.tags


def test_builders_chain_like_the_crate():
    entry = MemoryEntry(MemoryCategory.STRATEGY, "use iterators").with_tag("rust").as_validated()

    assert (["rust"], True) == (entry.tags, entry.validated)


# --- durability and lifecycle --------------------------------------------------------


async def test_sqlite_file_keeps_everything_after_close_and_reopen(backend, store_factory):
    if base_backend(backend) != "sqlite-file":
        pytest.skip("only a SQLite file outlives its store; the others start empty when opened")
    first = await store_factory()
    entries = [
        full_entry(),
        make(memory="same", tags=["b", "a"], relevance=0.5),
        make(memory="same", relevance=0.5, created_at=datetime(1999, 1, 1, 0, 0, 0, 1, UTC)),
        make(memory="ünïcode 🦀 \x00", tags=["", "🦀"], relevance=0.05),
    ]
    await first.store_many(entries)
    before = await first.retrieve("same stale", 10)
    await first.close()

    second = await store_factory()

    assert len(entries) == await second.count()
    for entry in entries:
        assert entry == await second.get(entry.id)
    assert before == await second.retrieve("same stale", 10)


def _sql_target(backend: str, tmp_path: Any) -> str:
    backend = base_backend(backend)
    if backend == "sqlite-memory":
        return ":memory:"
    if backend == "sqlite-file":
        return str(tmp_path / "other.db")
    return os.environ[POSTGRES_URL_VARIABLE]


CLOSED_OPERATIONS = {
    "store": lambda s: s.store(make()),
    "store_many": lambda s: s.store_many([make()]),
    "retrieve": lambda s: s.retrieve("x", 5),
    "consolidate": lambda s: s.consolidate(),
    "count": lambda s: s.count(),
    "is_empty": lambda s: s.is_empty(),
    "get": lambda s: s.get(uuid.uuid4()),
    "delete": lambda s: s.delete(uuid.uuid4()),
}


@pytest.mark.parametrize("operation", CLOSED_OPERATIONS.values(), ids=CLOSED_OPERATIONS.keys())
async def test_operations_after_close_raise_storage_error(sql_store, operation):
    await sql_store.close()

    with pytest.raises(StorageError):
        await operation(sql_store)


async def test_close_is_idempotent(sql_store):
    await sql_store.close()
    await sql_store.close()

    with pytest.raises(StorageError):
        await sql_store.count()


async def test_async_with_open_store_closes_the_store_on_exit(sql_backend, tmp_path):
    async with open_store(_sql_target(sql_backend, tmp_path)) as opened:
        await opened.store(make())
        assert 1 <= await opened.count()

    with pytest.raises(StorageError):
        await opened.count()


async def test_async_with_open_store_closes_the_store_when_the_block_raises(sql_backend, tmp_path):
    class BlockError(Exception):
        pass

    with pytest.raises(BlockError):
        async with open_store(_sql_target(sql_backend, tmp_path)) as opened:
            raise BlockError

    with pytest.raises(StorageError):
        await opened.count()
