"""The fast lane of ``import``, held against the slow path it replaces.

``flat_from_json`` must read every line as ``entry_from_json`` + ``flat_entry``
does (values and error messages); ``parsed_batches`` must give the batches and
errors of ``read_batches`` whether a child process parses or not; and
``store_flat`` of parsed batches must leave the same postings, watermark and
search results as ``store_many`` of the same entries.
"""

from __future__ import annotations

import contextlib
import io
import json
import math
import os
import random
import shlex
import signal
import sqlite3
import struct
import subprocess
import sys
import threading
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
    LoopMemoryError,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    jsonl_batches,
    open_store,
)
from loopctl_memory import jsonl as jsonl_module
from loopctl_memory.flat import (
    FlatBatch,
    FlatEntry,
    Postings,
    flat_entry,
    pack,
    rebased,
    tokens_of,
    unpack,
)
from loopctl_memory.jsonl import entry_from_json, entry_to_json, flat_from_json
from loopctl_memory.jsonl_batches import (
    LANES,
    Batch,
    LineError,
    _message,
    _spawn,
    parsed_batches,
    read_batches,
)
from loopctl_memory.sql import index

Parsed = tuple[FlatEntry, list[str]]

NEEDS_TWO_CORES = pytest.mark.skipif(
    (os.cpu_count() or 1) < 2,
    reason="parsed_batches parses in process on a single core: no child process to test",
)


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

    def counting(text: str | bytes) -> MemoryEntry:
        seen.append(text)
        return entry_from_json(text)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsonl_module, "entry_from_json", counting)
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
    ("missing-key", without("validated")),
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
            offset = len(batch.entries)
            batch.tags.extend((offset, spot, tag, tag.lower()) for spot, tag in enumerate(tags))
            batch.entries.append((offset, *entry))
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
    recomputed = FlatBatch(list(actual.entries.entries), list(actual.entries.tags))
    assert recomputed.token_postings() == actual.entries.token_postings()
    assert recomputed.tag_postings() == actual.entries.tag_postings()


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


def test_tokens_are_computed_only_when_asked_for():
    lines = [canonical_line(n) for n in range(1, 12)]
    without_tokens = list(read_batches(iter(lines), 5))
    with_tokens = list(read_batches(iter(lines), 5, tokens=True))
    assert [None, None, None] == [b.entries.tokens for b in without_tokens]
    assert [None, None, None] == [b.entries.tag_values for b in without_tokens]
    for plain, tokened in zip(without_tokens, with_tokens, strict=True):
        assert plain.entries.entries == tokened.entries.entries
        assert tokened.entries.tokens is not None
        assert tokened.entries.tag_values is not None
        recomputed = FlatBatch(list(plain.entries.entries), list(plain.entries.tags))
        assert recomputed.token_postings() == tokened.entries.tokens
        assert recomputed.tag_postings() == tokened.entries.tag_values
    # Entry n has n % 3 tags (Tag1; Tag2 and ALL; none): entries 1..5 are offsets 0..4.
    tag_values = with_tokens[0].entries.tag_postings().as_dict()
    assert {"tag1": [0, 3], "tag2": [1, 4], "all": [1, 4]} == tag_values
    first = with_tokens[0].entries.token_postings().as_dict()
    assert [0, 1, 2, 3, 4] == first["shared"]
    assert [0] == first["1"]  # "Entry 1 ... 1": the token "1" is listed once for the entry
    assert "wörter" in first
    assert "Wörter" not in first


def test_a_tag_repeated_on_one_entry_names_the_entry_once():
    repeated = line(tags=["Dup", "x", "dup", "DUP", "x"]).encode() + b"\n"
    (batch,) = read_batches(iter([canonical_line(1), repeated, canonical_line(2)]), 3, tokens=True)
    assert [(1, p, t, t.lower()) for p, t in enumerate(["Dup", "x", "dup", "DUP", "x"])] == [
        tag for tag in batch.entries.tags if tag[0] == 1
    ]
    tag_values = batch.entries.tag_postings().as_dict()
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
        without("tags").encode() + b"\n",
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


# --- batches from a child process --------------------------------------------------------


def varied_lines(count: int, seed: int) -> list[bytes]:
    """Export-shaped lines with blank lines, CRLF endings and a BOM, and a -0.0 relevance."""
    rng = random.Random(seed)
    lines = [BOM + canonical_line(0, relevance=-0.0)]
    for number in range(1, count):
        words = rng.choices(["Alpha", "beta", "ΓΆΜΜΑ", "straße", "🦀", "x\x00y", "İ"], k=5)
        raw = canonical_line(number, " ".join(words) + f" u{number}", rng.random())
        if number % 11 == 0:
            raw = raw[:-1] + b"\r\n"
        lines.append(raw)
        if number % 17 == 0:
            lines.append(rng.choice(BLANKS))
    return lines


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(lines))
    return path


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[subprocess.Popen[bytes]]:
    """Every child process parsed_batches starts during the test."""
    started: list[subprocess.Popen[bytes]] = []
    real_popen = subprocess.Popen

    def spawn(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child: subprocess.Popen[bytes] = real_popen(*args, **kwargs)
        started.append(child)
        return child

    monkeypatch.setattr(subprocess, "Popen", spawn)
    return started


def collect(batches: Iterator[Batch]) -> tuple[list[Batch], LineError | None]:
    """Every batch up to the end or the first LineError."""
    got: list[Batch] = []
    try:
        got.extend(batches)
    except LineError as exc:
        return got, exc
    return got, None


@pytest.mark.parametrize("lanes", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [1, 2, 3, 4, 7])
def test_lanes_take_turns_at_the_batches(lanes, batch_size):
    lines = [canonical_line(n) for n in range(1, 9)]
    lines[3:3] = [b"\n", b"  \n"]  # blank lines inside a batch and at a boundary
    lines.append(b"\n")  # a trailing blank line still counts as read
    expected = list(read_batches(iter(lines), batch_size, tokens=True))
    by_lane = [
        list(read_batches(iter(lines), batch_size, tokens=True, lane=lane, lanes=lanes))
        for lane in range(lanes)
    ]
    assert [len(range(lane, len(expected), lanes)) for lane in range(lanes)] == [
        len(mine) for mine in by_lane
    ]
    turns = [by_lane[number % lanes][number // lanes] for number in range(len(expected))]
    assert_same_batches(expected, turns)
    for want, got in zip(expected, turns, strict=True):
        assert want.entries.tokens == got.entries.tokens


def test_a_lane_skips_the_bad_lines_of_other_lanes_batches():
    lines = [canonical_line(n) for n in range(1, 7)]
    lines[4] = b"{not json}\n"  # line 5: in the third batch of two
    first_lane = read_batches(iter(lines), 2, lane=0, lanes=2)
    assert 1 == next(first_lane).first_line
    with pytest.raises(LineError) as caught:
        next(first_lane)
    assert 5 == caught.value.number
    assert [3] == [b.first_line for b in read_batches(iter(lines), 2, lane=1, lanes=2)]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1 << 20])
def test_a_child_reads_a_file_from_its_offset_line_by_line(tmp_path, monkeypatch, chunk):
    lines = [b"skipped\n", b"first\n", b"a\rb\r\n", b"\n", canonical_line(1), b"no newline"]
    path = write_lines(tmp_path / "in.jsonl", lines)
    monkeypatch.setattr(jsonl_batches, "_CHUNK", chunk)
    with path.open("rb") as stream:
        got = list(jsonl_batches._lines_at(stream.fileno(), len(lines[0])))
        assert 0 == stream.tell()  # pread: the shared offset is left alone
    assert lines[1:] == got


@NEEDS_TWO_CORES
def test_the_child_processes_yield_the_in_process_batches(tmp_path, children):
    lines = varied_lines(3_000, seed=1)
    path = write_lines(tmp_path / "in.jsonl", lines)
    expected = list(read_batches(iter(lines), 256, tokens=True))
    with path.open("rb") as stream, parsed_batches(stream, 256) as batches:
        received, error = collect(batches)
    assert error is None
    assert LANES == len(children)
    assert all(child.poll() is not None for child in children)
    assert_same_batches(expected, received)
    assert [want.entries.tokens for want in expected] == [got.entries.tokens for got in received]
    assert path.stat().st_size == sum(b.consumed for b in received)
    assert -0.0 == received[0].entries.entries[0][5]
    assert -1.0 == math.copysign(1, received[0].entries.entries[0][5])


@NEEDS_TWO_CORES
def test_the_child_process_reports_a_bad_line_as_the_in_process_parser_does(tmp_path, children):
    lines = varied_lines(3_000, seed=2)
    bad_at = 2_718
    lines[bad_at - 2] = b"\n"
    lines[bad_at - 1] = line(created_at="2025-03-03T09:12:04").encode() + b"\n"
    path = write_lines(tmp_path / "in.jsonl", lines)
    expected, expected_error = collect(read_batches(iter(lines), 200, tokens=True))
    with path.open("rb") as stream, parsed_batches(stream, 200) as batches:
        received, error = collect(batches)
    assert LANES == len(children)
    assert expected_error is not None
    assert error is not None
    assert bad_at == error.number == expected_error.number
    assert expected_error.reason == error.reason
    assert "created_at '2025-03-03T09:12:04' has no UTC offset (add +00:00)" == error.reason
    assert_same_batches(expected, received)
    assert received[-1].last_line < bad_at


@NEEDS_TWO_CORES
def test_the_children_start_where_the_stream_stands_not_where_its_buffer_ends(tmp_path, children):
    lines = varied_lines(1_500, seed=8)
    path = write_lines(tmp_path / "in.jsonl", lines)
    expected = list(read_batches(iter(lines[1:]), 200, tokens=True))
    with path.open("rb") as stream:
        assert lines[0] == stream.readline()  # buffers far more than the line
        with parsed_batches(stream, 200) as batches:
            received, error = collect(batches)
    assert error is None
    assert LANES == len(children)
    assert_same_batches(expected, received)


@NEEDS_TWO_CORES
def test_a_pipe_is_parsed_by_one_child_process(children):
    lines = varied_lines(2_000, seed=7)
    expected = list(read_batches(iter(lines), 300, tokens=True))
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as pipe:
            pipe.write(b"".join(lines))

    feeder = threading.Thread(target=feed)
    feeder.start()
    try:
        with os.fdopen(read_end, "rb") as stream, parsed_batches(stream, 300) as batches:
            received, error = collect(batches)
    finally:
        feeder.join()
    assert error is None
    assert 1 == len(children)
    assert_same_batches(expected, received)


def test_a_stream_without_a_descriptor_is_parsed_in_process(children):
    lines = varied_lines(700, seed=3)
    expected = list(read_batches(iter(lines), 128))
    with parsed_batches(io.BytesIO(b"".join(lines)), 128) as batches:
        received, error = collect(batches)
    assert error is None
    assert [] == children
    assert_same_batches(expected, received)


def test_a_file_on_a_single_core_is_parsed_in_process(tmp_path, children, monkeypatch):
    lines = varied_lines(700, seed=3)
    path = write_lines(tmp_path / "in.jsonl", lines)
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    expected = list(read_batches(iter(lines), 128))
    with path.open("rb") as stream, parsed_batches(stream, 128) as batches:
        received, error = collect(batches)
    assert error is None
    assert [] == children
    assert_same_batches(expected, received)


@NEEDS_TWO_CORES
@pytest.mark.parametrize("leave", ["break", "raise"])
def test_leaving_the_context_early_stops_the_child(tmp_path, children, leave):
    # Megabytes of batches: far more than a pipe holds, so the child is still writing.
    path = write_lines(tmp_path / "in.jsonl", varied_lines(20_000, seed=4))
    with (
        path.open("rb") as stream,
        contextlib.suppress(KeyError),
        parsed_batches(stream, 100) as batches,
    ):
        for batch in batches:
            assert (1, 100) == (batch.first_line, len(batch.entries))
            assert children[0].poll() is None  # still writing: not stopped by chance
            if leave == "raise":
                raise KeyError(leave)
            break
    assert LANES == len(children)
    for child in children:
        assert child.poll() is not None
        assert child.stdout is not None
        assert child.stdout.closed
        assert child.stderr is not None
        assert child.stderr.closed


def spawn_child(tmp_path: Path, lines: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    """A child parsing a file of ``lines`` varied lines in staged batches of 100.

    Returns the child, its credits to write and its stage directory.
    """
    path = write_lines(tmp_path / "in.jsonl", varied_lines(lines, seed=4))
    stage = tmp_path / "stage"
    stage.mkdir()
    with path.open("rb") as stream:
        child, credits = _spawn(f"100, {str(stage)!r}, offset=0", stream.fileno())
    return child, credits, stage


def assert_stopped_quietly(child: subprocess.Popen[bytes]) -> None:
    """The child exits 0 without sending anything more; its pipes are closed after."""
    assert 0 == child.wait()
    assert child.stdout is not None
    assert b"" == child.stdout.read()
    for pipe in (child.stdout, child.stderr):
        assert pipe is not None
        pipe.close()


def test_a_child_parses_its_next_batch_only_once_the_last_is_taken(tmp_path):
    child, credits, stage = spawn_child(tmp_path, 1_000)
    try:
        os.write(credits, (0).to_bytes(8, "little"))  # the first seq, unknown
        first = _message(child)
        assert ("staged", 1) == first[:2]
        os.write(credits, b"\x01")  # taken: the child may parse the second batch
        second = _message(child)
        assert ("staged", first[2] + 1) == second[:2]
    finally:
        os.close(credits)  # the second is never taken: the child stops, parsing no third
    assert_stopped_quietly(child)
    staged = {f"lines-{first[1]}.db", f"lines-{second[1]}.db"}
    assert staged == {path.name for path in stage.iterdir()}


def test_a_child_waits_to_be_told_the_first_seq_and_stops_untold(tmp_path):
    child, credits, stage = spawn_child(tmp_path, 300)
    os.close(credits)  # the importing process stopped before it knew where seqs start
    assert_stopped_quietly(child)  # not even its first batch sent
    assert [] == list(stage.iterdir())


def fake_interpreter(tmp_path: Path, body: str) -> str:
    """An executable that runs ``body`` with this interpreter, ignoring its arguments."""
    script = tmp_path / "fake_child.py"
    script.write_text(body)
    launcher = tmp_path / "fake-python"
    launcher.write_text(
        f"#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))}\n"
    )
    launcher.chmod(0o755)
    return str(launcher)


def assert_parser_failure(path: Path) -> LoopMemoryError:
    """Read ``path`` through parsed_batches; return the LoopMemoryError it must end with."""
    with (
        path.open("rb") as stream,
        parsed_batches(stream, 50) as batches,
        pytest.raises(LoopMemoryError) as caught,
    ):
        for _ in batches:
            pass
    assert not isinstance(caught.value, InvalidEntryError)
    assert "the JSON Lines parser process stopped" in str(caught.value)
    return caught.value


@NEEDS_TWO_CORES
def test_a_child_killed_before_it_writes_raises_loop_memory_error(tmp_path, children, monkeypatch):
    started = subprocess.Popen  # the fixture's recorder

    def spawn_and_kill(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        child: subprocess.Popen[bytes] = started(*args, **kwargs)
        child.send_signal(signal.SIGKILL)
        child.wait()
        return child

    monkeypatch.setattr(subprocess, "Popen", spawn_and_kill)
    path = write_lines(tmp_path / "in.jsonl", varied_lines(500, seed=5))
    error = assert_parser_failure(path)
    assert str(error).endswith(f"exit code {-signal.SIGKILL}")
    assert LANES == len(children)


@NEEDS_TWO_CORES
def test_a_child_that_exits_silently_raises_loop_memory_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", fake_interpreter(tmp_path, "raise SystemExit(3)\n"))
    path = write_lines(tmp_path / "in.jsonl", varied_lines(50, seed=6))
    error = assert_parser_failure(path)
    assert "the JSON Lines parser process stopped: exit code 3" == str(error)


@NEEDS_TWO_CORES
def test_a_child_that_says_why_it_failed_is_quoted(tmp_path, monkeypatch):
    body = "import sys\nsys.stderr.write('Traceback ...\\nMemoryError: out of memory\\n')\n"
    body += "raise SystemExit(3)\n"
    monkeypatch.setattr(sys, "executable", fake_interpreter(tmp_path, body))
    path = write_lines(tmp_path / "in.jsonl", varied_lines(50, seed=7))
    error = assert_parser_failure(path)
    assert "the JSON Lines parser process stopped: MemoryError: out of memory" == str(error)


CUT_SHORT = """\
import os, pickle, signal, sys
payload = pickle.dumps(("batch", list(range(100_000))), protocol=pickle.HIGHEST_PROTOCOL)
sys.stdout.buffer.write(len(payload).to_bytes(8, "little") + payload[: len(payload) // 2])
sys.stdout.buffer.flush()
os.kill(os.getpid(), signal.SIGKILL)  # as the OOM killer would, halfway through a batch
"""


@NEEDS_TWO_CORES
def test_a_child_killed_while_sending_a_batch_raises_loop_memory_error(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "executable", fake_interpreter(tmp_path, CUT_SHORT))
    path = write_lines(tmp_path / "in.jsonl", varied_lines(50, seed=8))
    error = assert_parser_failure(path)
    assert str(error).endswith(f"exit code {-signal.SIGKILL}")


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


TOKEN_TABLES = ("tokens", "token", "postings", "token_id")
TAG_TABLES = ("tag_values", "value", "tag_postings", "value_id")


def read_postings(
    db: sqlite3.Connection, tables: tuple[str, str, str, str], mark: int
) -> dict[str, set[int]]:
    """term -> seqs named by its postings; checks each blob and each term's count."""
    terms, term, postings, term_id = tables
    found: dict[str, set[int]] = {}
    posted: dict[str, int] = {}
    counts = dict(db.execute(f"SELECT {term}, entries FROM {terms}").fetchall())  # noqa: S608
    rows = db.execute(
        f"SELECT t.{term}, p.block, p.seqs FROM {postings} p "  # noqa: S608
        f"JOIN {terms} t ON t.id = p.{term_id}"
    ).fetchall()
    for value, block, blob in rows:
        seqs = list(unpack(blob))
        assert seqs, value
        assert all(a < b for a, b in pairwise(seqs)), (value, block)
        assert block <= seqs[0], (value, block)
        assert seqs[-1] <= mark, (value, block)
        before = found.setdefault(value, set())
        assert before.isdisjoint(seqs), (value, block)  # blocks never repeat an entry
        before.update(seqs)
        posted[value] = posted.get(value, 0) + len(seqs)
    assert counts == posted  # every term has postings, and its count is exact here
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


IndexCall = tuple[int, int | None, int]


@pytest.fixture
def index_calls(monkeypatch: pytest.MonkeyPatch) -> list[IndexCall]:
    """(watermark before, fresh.first_seq, len(fresh.batch)) of every index_tail call."""
    calls: list[IndexCall] = []
    real = index.index_tail

    def recording(connection: Any, fresh: index.Fresh | None = None) -> int:
        first = None if fresh is None else fresh.first_seq
        calls.append((index.watermark(connection), first, 0 if fresh is None else len(fresh.batch)))
        return real(connection, fresh)

    monkeypatch.setattr(index, "index_tail", recording)
    return calls


async def test_store_flat_indexes_exactly_as_store_many(tmp_path, index_calls):
    made = index_entries()
    many_path, flat_path = tmp_path / "many.db", tmp_path / "flat.db"

    async with open_store(many_path) as store:
        index_calls.clear()  # the migration that creates the index indexes the empty table
        start = 0
        for size in (3_000, 10_000, 12_000):
            await store.store_many(made[start : start + size])
            start += size
        many_results = await search_all(store)
    # With the 3,000 older tail rows before the fresh batch, then with none.
    assert [(0, 3_001, 10_000), (13_000, 13_001, 12_000)] == index_calls

    data = b"".join(entry_to_json(entry).encode() + b"\n" for entry in made)
    async with open_store(flat_path) as store:
        index_calls.clear()
        for batch in read_batches(io.BytesIO(data), 4_000, tokens=True):
            assert batch.entries.tokens is not None
            await store.store_flat(batch.entries)
        assert ENTRY_COUNT == await store.count()
        flat_results = await search_all(store)  # 1,000 entries still in the tail
    assert [(0, 8_001, 4_000), (12_000, 20_001, 4_000)] == index_calls

    assert many_results == flat_results
    assert any(len(ids) == 200 for ids in many_results)
    many = read_index(many_path)
    flat = read_index(flat_path)
    assert ENTRY_COUNT == many.indexed_through
    assert 24_000 == flat.indexed_through
    assert {at + 1 for at in DUPLICATED_TAGS_AT} == many.tag_values["dup"]

    # Index the rest of the tail as a single store would: no fresh batch, all read back.
    async with open_store(flat_path) as store:
        index_calls.clear()
        async with store.engine.begin() as connection:
            assert 1_000 == await connection.run_sync(index.index_tail)
        assert many_results == await search_all(store)
    assert [(24_000, None, 0)] == index_calls
    flat = read_index(flat_path)
    assert ENTRY_COUNT == flat.indexed_through
    assert many.tokens == flat.tokens
    assert many.tag_values == flat.tag_values


# --- packed postings -------------------------------------------------------------------


def test_postings_pack_and_unpack_term_by_term():
    by_term = {"b": [0, 2, 5], "a": [1], "x\x00y": [3, 4], "empty-text": [2**40]}
    packed = Postings.of(by_term)
    assert ["b", "a", "x\x00y", "empty-text"] == packed.terms
    assert [3, 1, 2, 1] == packed.counts
    assert 8 * 7 == len(packed.offsets)
    assert by_term == packed.as_dict()
    assert Postings.of(dict(reversed(by_term.items()))) == packed  # equal in any order
    assert Postings.of(by_term | {"a": [2]}) != packed


@pytest.mark.parametrize("base", [0, 1, 255, 256, 2**32 - 1, 2**40 + 7, 2**63 - 2**41])
def test_postings_seqs_add_the_base_to_every_index(base):
    by_term = {"b": [0, 2, 255], "a": [1, 256, 2**32 - 1], "c": [2**40]}
    seqs = Postings.of(by_term).seqs(base)
    assert list(by_term) == list(seqs)
    for term, found in by_term.items():
        assert pack([base + offset for offset in found]) == seqs[term]
        assert [base + offset for offset in found] == unpack(seqs[term]).tolist()


def test_postings_rows_give_each_term_its_count_and_packed_indexes_in_term_order():
    by_term = {"b": [0, 2, 5], "a": [1], "x\x00y": [3, 4], "ä": [2**40]}
    rows = Postings.of(by_term).rows()
    assert ["a", "b", "x\x00y", "ä"] == [term for term, _, _ in rows]
    assert [(term, len(found), pack(found)) for term, found in sorted(by_term.items())] == rows
    assert [] == Postings.of({}).rows()
    numbered = Postings.of(by_term).rows(origin=1_000)
    want = [
        (t, len(found), pack([1_000 + i for i in found])) for t, found in sorted(by_term.items())
    ]
    assert want == numbered


@pytest.mark.parametrize("shift", [0, 1, 2**32 - 1, 2**63 - 2**41, -1, -(2**32), -(2**40 - 2)])
def test_rebased_adds_the_shift_to_every_packed_number(shift):
    numbers = [2**40 - 2, 2**40, 2**40 + 3]  # a borrow from the next lane would show
    assert pack([shift + number for number in numbers]) == rebased(pack(numbers), shift)
    assert b"" == rebased(b"", shift)


@pytest.mark.parametrize(
    ("numbers", "shift"),
    [
        pytest.param([0, 4], 2**63 - 4, id="the last beyond 63 bits"),
        pytest.param([4, 0], 2**63 - 4, id="the first beyond 63 bits"),
        pytest.param([5, 3], -4, id="the last below 0"),
        pytest.param([3, 5], -4, id="the first below 0"),
        pytest.param([0], -1, id="one below 0"),
        pytest.param([0], 2**63, id="a shift beyond 63 bits"),
    ],
)
def test_rebased_refuses_numbers_shifted_out_of_0_to_63_bits(numbers, shift):
    with pytest.raises(ValueError, match="fall outside"):
        rebased(pack(numbers), shift)


def test_pack_writes_little_endian_int64s_and_refuses_wider_values():
    assert b"" == pack([])
    assert (1).to_bytes(8, "little") + (2**63 - 1).to_bytes(8, "little") == pack([1, 2**63 - 1])
    assert [-(2**63), 0, 2**63 - 1] == unpack(pack([-(2**63), 0, 2**63 - 1])).tolist()
    with pytest.raises(struct.error):
        pack([2**63])


def test_tokens_split_as_rusts_split_whitespace():
    # U+001C..U+001F: Python's str.split() splits there, Rust's split_whitespace does not.
    for separator in ("\x1c", "\x1d", "\x1e", "\x1f"):
        assert {f"a{separator}b", "c"} == tokens_of(f"a{separator}b c")
    assert {"a", "b", "c", "d"} == tokens_of("a\u2028b\u3000c\x85d")
    assert {"a", "b"} == tokens_of(" a\t\nb a ")


def test_postings_seqs_refuse_seqs_beyond_63_bits():
    packed = Postings.of({"a": [0, 1]})
    assert {} == Postings.of({}).seqs(2**62)
    assert [2**63 - 2, 2**63 - 1] == unpack(packed.seqs(2**63 - 2)["a"]).tolist()
    with pytest.raises(ValueError, match="fall outside"):
        packed.seqs(2**63 - 1)
    with pytest.raises(ValueError, match="fall outside"):
        packed.seqs(-1)
