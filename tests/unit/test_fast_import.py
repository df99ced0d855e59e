"""The fast lane of ``import``, held against the slow path it replaces.

``flat_from_json`` must read every line as ``entry_from_json`` + ``flat_entry``
does (values and error messages); ``read_batches`` must number lines and report
errors as the command promises; and ``store_flat`` of parsed batches must leave
the same postings, watermark and search results as ``store_many`` of the same
entries.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import random
import sqlite3
import struct
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_memory import (
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    entry_json,
    open_store,
)
from loopctl_memory.entry_json import (
    entry_from_json,
    entry_to_json,
    flat_from_json,
    scoped_entry_from_json,
)
from loopctl_memory.flat import (
    FlatBatch,
    FlatEntry,
    flat_entry,
    tokens_of,
)
from loopctl_memory.jsonl import Batch, LineError, read_batches
from loopctl_memory.sql.lexical.inversion import invert_tags
from loopctl_memory.sql.tuning import Tuning

Parsed = tuple[FlatEntry, list[str]]

# --- one line --------------------------------------------------------------------------


def slow_flat(text: str | bytes) -> Parsed:
    """What the fast lane must equal: the full entry, flattened."""
    entry = entry_from_json(text)
    return flat_entry(entry), entry.tags


def outcome(parse: Callable[[str | bytes], Parsed], text: str | bytes) -> tuple[Any, ...]:
    """A parse's value, or the type and message of the error it raised."""
    try:
        flat, tags = parse(text)
    except InvalidEntryError as exc:
        return ("error", type(exc), str(exc))
    return ("ok", flat, tags)


def assert_same_parse(expected: Parsed, actual: Parsed) -> None:
    """Equal values of the same types; a relevance of -0.0 is not 0.0."""
    assert expected == actual
    assert [type(value) for value in expected[0]] == [type(value) for value in actual[0]]
    assert math.copysign(1, expected[0][4]) == math.copysign(1, actual[0][4])
    assert type(actual[1]) is list


@contextlib.contextmanager
def fallbacks_counted() -> Iterator[list[str | bytes]]:
    """Record every line ``flat_from_json`` hands to the slow path."""
    seen: list[str | bytes] = []

    def counting(text: str | bytes) -> tuple[str, MemoryEntry]:
        seen.append(text)
        return scoped_entry_from_json(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(entry_json, "scoped_entry_from_json", counting)
        yield seen


_SPICY = "\x00 \t\n\r\x0b\x0c\x1c\x1f\x85\u00a0\u2028\u3000\"\\'ßİıΣς\u0301\ufeff🦀\U0010ffff"
_texts = st.text(st.characters(codec="utf-8"), max_size=20) | st.text(
    st.sampled_from(_SPICY), max_size=8
)
_offsets = st.builds(
    timezone,
    st.timedeltas(
        min_value=-timedelta(hours=23, minutes=59, seconds=59),
        max_value=timedelta(hours=23, minutes=59, seconds=59),
    ),
)
_relevances = st.floats(0.0, 1.0) | st.sampled_from(
    [0.0, -0.0, 1.0, 5e-324, 1e-310, 2.2250738585072014e-308, math.nextafter(1.0, 0.0)]
)
generated_entries = st.builds(
    MemoryEntry,
    st.sampled_from(list(MemoryCategory)),
    _texts,
    tags=st.lists(_texts, max_size=5),
    relevance=_relevances,
    id=st.uuids(),
    created_at=st.datetimes(
        min_value=datetime(1, 1, 2),
        max_value=datetime(9999, 12, 30),
        timezones=st.just(UTC) | _offsets,
    ),
    access_count=st.integers(0, 2**63 - 1) | st.sampled_from([0, 2**63 - 1]),
    validated=st.booleans(),
)


@settings(max_examples=300, derandomize=True, database=None, deadline=None)
@given(generated_entries)
def test_a_written_line_takes_the_fast_lane_and_reads_as_the_slow_path_does(entry):
    text = entry_to_json(entry)
    with fallbacks_counted() as fallbacks:
        from_text = flat_from_json(text)
        from_bytes = flat_from_json(text.encode())
    assert [] == fallbacks
    assert_same_parse(slow_flat(text), from_text)
    assert_same_parse(slow_flat(text), from_bytes)


GOOD: dict[str, Any] = {
    "id": "0b7c6f1e-5a3d-4e2f-9c8b-7a6d5e4f3a2b",
    "category": "strategy",
    "memory": "Read the Traceback from the bottom",
    "tags": ["Debugging", "ci"],
    "relevance": 0.9,
    "created_at": "2025-03-03T09:12:04.318000+00:00",
    "access_count": 3,
    "validated": True,
}


def line(**changes: Any) -> str:
    return json.dumps(GOOD | changes, ensure_ascii=False, separators=(",", ":"))


def without(key: str) -> str:
    return json.dumps({name: value for name, value in GOOD.items() if name != key})


VARIANTS = [
    # (id, line, whether the fast lane must hand it to entry_from_json)
    ("uppercase-uuid", line(id=GOOD["id"].upper()), False),
    ("uuid-without-hyphens", line(id=GOOD["id"].replace("-", "")), False),
    ("uuid-in-braces", line(id="{" + GOOD["id"] + "}"), True),
    ("uuid-as-urn", line(id="urn:uuid:" + GOOD["id"]), True),
    ("relevance-int-0", line(relevance=0), False),
    ("relevance-int-1", line(relevance=1), False),
    ("created-at-plus-two", line(created_at="2025-03-03T11:12:04.318+02:00"), True),
    ("created-at-minus-offset", line(created_at="2025-03-03T01:12:04.318-08:00"), True),
    ("created-at-z", line(created_at="2025-03-03T09:12:04.318Z"), True),
    ("created-at-no-fraction", line(created_at="2025-03-03T09:12:04+00:00"), False),
    ("relevance-negative-zero", line(relevance=-0.0), False),
    ("relevance-subnormal", line(relevance=5e-324), False),
    ("relevance-exponent", line().replace('"relevance":0.9', '"relevance":9E-1'), False),
    ("access-count-max", line(access_count=2**63 - 1), False),
    ("access-count-beyond-64-bits", line(access_count=2**64 + 5), True),
    ("access-count-beyond-128-bits", line(access_count=2**130), True),
    ("keys-shuffled", json.dumps(dict(reversed(list(GOOD.items())))), False),
    ("extra-whitespace", " \t" + json.dumps(GOOD, indent=2).replace("\n", " ") + " \r\n", False),
    ("ascii-escapes", json.dumps(GOOD | {"memory": "caf\u00e9 \U0001f980 \x00"}), False),
    ("surrogate-pair-escape", line(memory="\U0001f980").replace("🦀", "\\ud83e\\udd80"), False),
    ("duplicate-key-last-wins", '{"category":"nope",' + line()[1:], False),
    ("nan-relevance", line(relevance=math.nan), True),
]


@pytest.mark.parametrize(
    ("text", "falls_back"), [v[1:] for v in VARIANTS], ids=[v[0] for v in VARIANTS]
)
def test_a_hand_written_line_reads_as_the_slow_path_reads_it(text, falls_back):
    with fallbacks_counted() as fallbacks:
        fast = outcome(flat_from_json, text)
    assert outcome(slow_flat, text) == fast
    assert falls_back == bool(fallbacks)
    if fast[0] == "ok":
        assert_same_parse(slow_flat(text), fast[1:])


INVALID = [
    ("not-json", "{not json}"),
    ("truncated", line()[:-5]),
    ("empty-object", "{}"),
    ("array", json.dumps([GOOD])),
    ("string", '"entry"'),
    ("null", "null"),
    ("missing-key", without("memory")),
    ("unknown-key", line(colour="red")),
    ("bad-uuid", line(id="0b7c6f1e-5a3d-4e2f-9c8b-7a6d5e4f3a2")),
    ("uuid-not-hex", line(id="0b7c6f1e-5a3d-4e2f-9c8b-7a6d5e4f3a2g")),
    ("uuid-a-number", line(id=7)),
    ("unknown-category", line(category="Strategy")),
    ("category-null", line(category=None)),
    ("relevance-above-one", line(relevance=1.5)),
    ("relevance-below-zero", line(relevance=-5e-324)),
    ("relevance-nan-string", line(relevance="NaN")),
    ("relevance-infinity", line(relevance=math.inf)),
    ("relevance-true", line(relevance=True)),
    ("relevance-huge-int", line(relevance=10**30)),
    ("created-at-without-offset", line(created_at="2025-03-03T09:12:04.318000")),
    ("created-at-date-only", line(created_at="2025-03-03")),
    ("created-at-garbage", line(created_at="yesterday")),
    ("created-at-a-number", line(created_at=1741000000)),
    ("created-at-out-of-range-in-utc", line(created_at="0001-01-01T00:00:00+05:00")),
    ("access-count-negative", line(access_count=-1)),
    ("access-count-2-63", line(access_count=2**63)),
    ("access-count-2-64", line(access_count=2**64)),
    ("access-count-float", line(access_count=1.5)),
    ("access-count-bool", line(access_count=False)),
    ("validated-yes", line(validated="yes")),
    ("validated-one", line(validated=1)),
    ("tags-not-a-list", line(tags="debugging")),
    ("tags-an-object", line(tags={"a": 1})),
    ("tag-not-a-str", line(tags=["ok", 3])),
    ("tag-null", line(tags=[None])),
    ("memory-lone-surrogate", line(memory="\ud800")),
    ("tag-lone-surrogate", line(tags=["a\udfff"])),
    ("memory-a-number", line(memory=42)),
    ("bom-inside", "\ufeff" + line()),
    ("nested-too-deep", "[" * 100_000 + "]" * 100_000),
]


@pytest.mark.parametrize("text", [v[1] for v in INVALID], ids=[v[0] for v in INVALID])
def test_an_invalid_line_raises_the_slow_paths_error(text):
    with pytest.raises(InvalidEntryError) as slow:
        entry_from_json(text)
    with pytest.raises(InvalidEntryError) as fast:
        flat_from_json(text)
    assert type(slow.value) is type(fast.value)
    assert str(slow.value) == str(fast.value)


def test_invalid_utf8_bytes_raise_the_slow_paths_error():
    raw = line(memory="caf\u00e9").encode().replace("é".encode(), b"\xff")
    with pytest.raises(InvalidEntryError) as slow:
        entry_from_json(raw)
    with pytest.raises(InvalidEntryError) as fast:
        flat_from_json(raw)
    assert "not valid UTF-8: invalid start byte" == str(slow.value) == str(fast.value)


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le"])
def test_bytes_are_read_as_utf8_never_as_a_guessed_encoding(encoding):
    raw = line().encode(encoding)
    assert json.loads(raw) == GOOD  # what the standard library alone would make of it
    with pytest.raises(InvalidEntryError) as as_text:
        flat_from_json(raw.decode())
    with pytest.raises(InvalidEntryError) as as_bytes:
        flat_from_json(raw)
    assert str(as_text.value) == str(as_bytes.value)
    assert str(as_bytes.value).startswith("not valid JSON")


@pytest.mark.parametrize("validated", [True, False])
def test_flat_entries_hold_validated_as_an_int_the_driver_binds_as_it_is(validated):
    fast, _ = flat_from_json(line(validated=validated))
    slow = flat_entry(entry_from_json(line(validated=validated)))
    for flat in (fast, slow):
        assert type(flat[7]) is int
        assert int(validated) == flat[7]


# --- batches in process ----------------------------------------------------------------


def canonical_line(number: int, memory: str = "", relevance: float = 0.5) -> bytes:
    """A line as export writes it, its id and text taken from ``number``."""
    entry = MemoryEntry(
        list(MemoryCategory)[number % len(MemoryCategory)],
        memory or f"Entry {number} shared Wörter ß {number % 7}",
        tags=[f"Tag{number % 3}", "ALL"][: number % 3],
        relevance=relevance,
        id=uuid.UUID(int=number + 1),
        created_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=number),
        access_count=number,
        validated=number % 2 == 0,
    )
    return entry_to_json(entry).encode() + b"\n"


BOM = b"\xef\xbb\xbf"
BLANKS = [b"\n", b"   \n", b"\r\n", b"\t \x0b\x0c\n"]


def expected_batch(lines: list[bytes]) -> FlatBatch:
    """The batch ``lines`` must give: each non-blank line read by the slow path."""
    batch = FlatBatch([], [])
    for raw in lines:
        text = raw.removeprefix(BOM)
        if text.strip():
            entry, tags = slow_flat(text.decode())
            batch.add(entry, tags)
    return batch


def assert_same_batches(expected: list[Batch], received: list[Batch]) -> None:
    assert len(expected) == len(received)
    for want, got in zip(expected, received, strict=True):
        assert_same_batch(want, got)


def assert_same_batch(expected: Batch, actual: Batch) -> None:
    assert (expected.first_line, expected.last_line, expected.consumed) == (
        actual.first_line,
        actual.last_line,
        actual.consumed,
    )
    assert expected.entries.entries == actual.entries.entries
    assert repr(expected.entries.entries) == repr(actual.entries.entries)  # -0.0 is not 0.0
    assert expected.entries.tags == actual.entries.tags


def test_batches_number_their_lines_around_blank_lines_and_a_bom():
    lines = [
        BOM + canonical_line(1),  # 1
        canonical_line(2),  # 2
        BLANKS[0],  # 3
        canonical_line(3),  # 4
        BLANKS[1],  # 5
        canonical_line(4),  # 6
        canonical_line(5),  # 7
        BLANKS[2],  # 8
        canonical_line(6),  # 9
        canonical_line(7).rstrip(b"\n"),  # 10: the last line may lack its newline
    ]
    batches = list(read_batches(iter(lines), 3))
    assert [(1, 4), (5, 9), (10, 10)] == [(b.first_line, b.last_line) for b in batches]
    assert [sum(map(len, lines[0:4])), sum(map(len, lines[4:9])), len(lines[9])] == [
        b.consumed for b in batches
    ]
    assert sum(map(len, lines)) == sum(b.consumed for b in batches)
    assert [3, 3, 1] == [len(b.entries) for b in batches]
    assert expected_batch(lines[0:4]) == batches[0].entries
    assert expected_batch(lines[4:9]) == batches[1].entries
    assert expected_batch(lines[9:]) == batches[2].entries


def test_tags_are_numbered_by_entry_and_position_within_their_batch():
    lines = [canonical_line(n) for n in range(1, 7)]
    batches = list(read_batches(iter(lines), 4))
    # Entry n has n % 3 tags: 1 -> one, 2 -> two, 3 -> none, 4 -> one, 5 -> two, 6 -> none.
    assert [
        (0, 0, "Tag1", "tag1"),
        (1, 0, "Tag2", "tag2"),
        (1, 1, "ALL", "all"),
        (3, 0, "Tag1", "tag1"),
    ] == batches[0].entries.tags
    assert [(0, 0, "Tag2", "tag2"), (0, 1, "ALL", "all")] == batches[1].entries.tags


def test_a_tag_repeated_on_one_entry_names_the_entry_once():
    repeated = line(tags=["Dup", "x", "dup", "DUP", "x"]).encode() + b"\n"
    (batch,) = read_batches(iter([canonical_line(1), repeated, canonical_line(2)]), 3)
    assert [(1, p, t, t.lower()) for p, t in enumerate(["Dup", "x", "dup", "DUP", "x"])] == [
        tag for tag in batch.entries.tags if tag[0] == 1
    ]
    tag_values = invert_tags([(tag[0], tag[3]) for tag in batch.entries.tags]).by_term()
    assert {"tag1": [0], "dup": [1], "x": [1], "tag2": [2], "all": [2]} == tag_values


@pytest.mark.parametrize(
    "lines",
    [
        [canonical_line(1), b"\n", canonical_line(2)],
        [BOM + canonical_line(1), canonical_line(2), canonical_line(3)],
        [canonical_line(1), canonical_line(2), canonical_line(3), b"\n", b"  \n"],
        [canonical_line(1), canonical_line(2), b"\n", b"  \n"],
        [b"\n", b"\r\n"],
    ],
    ids=[
        "blank-inside",
        "bom",
        "blank-lines-after-a-partial-batch",
        "blank-lines-after-a-full-batch",
        "only-blank-lines",
    ],
)
def test_consumed_bytes_add_up_to_the_input_size(lines):
    batches = list(read_batches(iter(lines), 2))
    assert sum(map(len, lines)) == sum(b.consumed for b in batches)


@pytest.mark.parametrize(
    "bad",
    [
        line(relevance=1.5).encode() + b"\n",
        b"{not json\n",
        b'{"id": "\xff"}\n',
        BOM + canonical_line(99),  # a BOM is skipped on line 1 only
        without("category").encode() + b"\n",
    ],
    ids=["bad-value", "not-json", "bad-utf8", "bom-after-line-1", "missing-key"],
)
def test_a_bad_line_is_reported_by_number_and_its_batch_is_not_yielded(bad):
    lines = [canonical_line(n) for n in range(1, 6)] + [b"\n", bad, canonical_line(8)]
    try:
        text: str | bytes = bad.rstrip(b"\n").decode()
    except UnicodeDecodeError:
        text = bad.rstrip(b"\n")
    with pytest.raises(InvalidEntryError) as slow:
        entry_from_json(text)  # as read_batches hands it on: decoded first
    yielded: list[Batch] = []
    with pytest.raises(LineError) as caught:
        yielded.extend(read_batches(iter(lines), 3))
    assert 7 == caught.value.number
    assert str(slow.value) == caught.value.reason
    assert f"line 7: {slow.value}" == str(caught.value)
    assert isinstance(caught.value, InvalidEntryError)
    assert [(1, 3)] == [(b.first_line, b.last_line) for b in yielded]  # not lines 4-7


def test_a_bad_first_batch_yields_nothing():
    lines = [canonical_line(1), b"[]\n", canonical_line(3)]
    iterator = read_batches(iter(lines), 100)
    with pytest.raises(LineError) as caught:
        next(iterator)
    assert 2 == caught.value.number
    assert "expected a JSON object, got an array" == caught.value.reason


# --- the index: store_flat against store_many --------------------------------------------

COMMON_WORDS = [
    "alpha", "Alpha", "ALPHA", "beta", "gamma", "delta", "epsilon", "straße", "STRASSE",
    "İstanbul", "école", "ÉCOLE", "🦀", "nul\x00byte", "a", "ab", "abc", "é", "zeta",
]  # fmt: skip
TAG_POOL = ["Tag-A", "tag-a", "tag-b", "TAG-C", "İ", "déjà vu", "x"]
SEPARATORS = [" ", "  ", "\t", "\n", " \u3000 ", "\u2028"]
QUERIES = [
    "alpha", "ALPHA", "beta gamma", "lph", "straße", "strasse", "i̇stanbul", "école",
    "🦀", "nul\x00byte", "u12", "u24999", "only42", "tag-a", "TAG-C", "dup", "déjà",
    "zeta alpha alpha", "", "no-such-word",
]  # fmt: skip
ENTRY_COUNT = 25_000
DUPLICATED_TAGS_AT = (1_500, 13_500, 21_000)
"""Entries repeating a tag. Read back from the tail by both stores; fresh in store_many's
last batch only; fresh in both."""


def index_entries() -> list[MemoryEntry]:
    """Entries with shared and unique tokens, case variants, and one entry repeating a tag."""
    rng = random.Random(25_000)
    made = []
    for number in range(ENTRY_COUNT):
        words = rng.choices(COMMON_WORDS, k=rng.randint(0, 6))
        if number % 3 == 0:
            words.append(f"u{number}")  # a token of this entry alone
        if number % 1_000 == 42:
            words.append("Only42")
        made.append(
            MemoryEntry(
                rng.choice(list(MemoryCategory)),
                rng.choice(SEPARATORS).join(words),
                tags=rng.sample(TAG_POOL, rng.randint(0, 3)),
                relevance=rng.choice([0.0, 0.25, 0.5, 1.0, rng.random()]),
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                created_at=datetime(2025, 1, 1, tzinfo=UTC) + timedelta(seconds=number),
                access_count=number,
                validated=number % 2 == 1,
            )
        )
    for at in DUPLICATED_TAGS_AT:
        made[at].tags = ["Dup", "x", "dup", "DUP", "x"]
    return made


@dataclass
class IndexContents:
    """What a database's index says, checked against its own entries and tags tables."""

    indexed_through: int
    tokens: dict[str, set[int]]
    tag_values: dict[str, set[int]]


TOKEN_TABLES = ("tokens", "token", "token_blocks")
TAG_TABLES = ("tag_values", "value", "tag_blocks")


def read_postings(
    db: sqlite3.Connection, tables: tuple[str, str, str], mark: int
) -> dict[str, set[int]]:
    """term -> seqs named by its postings; checks each block's row, and that every term has some."""
    terms, term, blocks = tables
    found: dict[str, set[int]] = {}
    names = dict(db.execute(f"SELECT id, {term} FROM {terms}").fetchall())  # noqa: S608
    rows = db.execute(f"SELECT block, term_ids, lengths, seqs FROM {blocks}").fetchall()  # noqa: S608
    for block, term_ids, lengths, blob in rows:
        ids, sizes, every = _unpack(term_ids), _unpack(lengths), _unpack(blob)
        assert ids == sorted(set(ids)), block
        assert sum(sizes) == len(every), block
        start = 0
        for term_id, size in zip(ids, sizes, strict=True):
            value, seqs = names[term_id], every[start : start + size]
            start += size
            assert seqs, value
            assert all(a < b for a, b in pairwise(seqs)), (value, block)
            assert block <= seqs[0], (value, block)
            assert seqs[-1] <= mark, (value, block)
            before = found.setdefault(value, set())
            assert before.isdisjoint(seqs), (value, block)  # blocks never repeat an entry
            before.update(seqs)
    assert set(names.values()) == set(found)  # every term has postings here
    return found


def read_index(path: Path) -> IndexContents:
    """Read ``path`` with the stdlib; assert the postings are the tables' tokens and tags."""
    with contextlib.closing(sqlite3.connect(path)) as db:
        (mark,) = db.execute("SELECT indexed_through FROM index_state").fetchone()
        want_tokens: dict[str, set[int]] = {}
        for seq, lower in db.execute(
            "SELECT seq, memory_lower FROM entries WHERE seq <= ?", (mark,)
        ):
            for token in lower.split():
                want_tokens.setdefault(token, set()).add(seq)
        want_tags: dict[str, set[int]] = {}
        for seq, tag in db.execute(
            "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq <= ?", (mark,)
        ):
            want_tags.setdefault(tag, set()).add(seq)
        tokens = read_postings(db, TOKEN_TABLES, mark)
        values = read_postings(db, TAG_TABLES, mark)
    assert want_tokens == tokens
    assert want_tags == values
    return IndexContents(mark, tokens, values)


async def search_all(store: SqlMemoryStore) -> list[list[uuid.UUID]]:
    return [
        [entry.id for entry in await store.retrieve(query, limit)]
        for query in QUERIES
        for limit in (10, 200)
    ]


async def test_an_import_indexes_exactly_as_store_many(tmp_path):
    """Batches of parsed lines leave the same postings and answers as store_many's batches."""
    made = index_entries()
    many_path, flat_path = tmp_path / "many.db", tmp_path / "flat.db"
    tuning = Tuning(background_folds=False)  # each write indexes as it goes
    async with open_store(many_path, tuning=tuning) as store:
        start = 0
        for size in (3_000, 10_000, 12_000):  # the second indexes a tail of older entries too
            await store.store_many(made[start : start + size])
            start += size
        many_results = await search_all(store)

    data = b"".join(entry_to_json(entry).encode() + b"\n" for entry in made)
    async with open_store(flat_path, tuning=tuning) as store:
        for batch in read_batches(io.BytesIO(data), 4_000):
            await store.store_flat(batch.entries)
        assert ENTRY_COUNT == await store.count()
        flat_results = await search_all(store)  # 1,000 entries still in the tail

    assert many_results == flat_results
    assert any(len(ids) == 200 for ids in many_results)
    many = read_index(many_path)
    flat = read_index(flat_path)
    assert ENTRY_COUNT == many.indexed_through
    assert 24_000 == flat.indexed_through
    assert {at + 1 for at in DUPLICATED_TAGS_AT} == many.tag_values["dup"]
    assert through(many.tokens, 24_000) == flat.tokens
    assert through(many.tag_values, 24_000) == flat.tag_values


def through(postings: dict[str, set[int]], last: int) -> dict[str, set[int]]:
    """The postings of the entries up to ``last``."""
    kept = {term: {seq for seq in seqs if seq <= last} for term, seqs in postings.items()}
    return {term: seqs for term, seqs in kept.items() if seqs}


# --- packed postings -------------------------------------------------------------------


def _unpack(blob: bytes) -> list[int]:
    return list(struct.unpack(f"<{len(blob) // 8}q", blob))


def test_tokens_split_as_rusts_split_whitespace():
    # U+001C..U+001F: Python's str.split() splits there, Rust's split_whitespace does not.
    for separator in ("\x1c", "\x1d", "\x1e", "\x1f"):
        assert {f"a{separator}b", "c"} == tokens_of(f"a{separator}b c")
    assert {"a", "b", "c", "d"} == tokens_of("a\u2028b\u3000c\x85d")
    assert {"a", "b"} == tokens_of(" a\t\nb a ")
