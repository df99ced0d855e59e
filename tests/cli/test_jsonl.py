"""The JSON Lines format: one entry a line, exact both ways, every bad line explained."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from loopctl_memory import (
    InvalidArgumentError,
    InvalidEntryError,
    MemoryCategory,
    MemoryEntry,
    jsonl,
    sync,
)
from loopctl_memory.entry_json import (
    FIELDS,
    OPTIONAL_FIELDS,
    entry_from_json,
    entry_to_json,
    scoped_entry_from_json,
)

from .test_import_export import awkward_entries

GOOD: dict[str, Any] = {
    "id": "0b7c6f1e-5a3d-4e2f-9c8b-7a6d5e4f3a2b",
    "category": "strategy",
    "memory": "read the traceback from the bottom",
    "tags": ["debugging"],
    "relevance": 0.9,
    "created_at": "2025-03-03T09:12:04.318000+00:00",
    "access_count": 3,
    "validated": True,
}


def line(**changes: object) -> str:
    return json.dumps(GOOD | changes)


def test_a_line_reads_into_the_entry_it_describes():
    expected = MemoryEntry(
        MemoryCategory.STRATEGY,
        "read the traceback from the bottom",
        tags=["debugging"],
        relevance=0.9,
        id=uuid.UUID(GOOD["id"]),
        created_at=datetime(2025, 3, 3, 9, 12, 4, 318_000, tzinfo=UTC),
        access_count=3,
        validated=True,
    )
    assert expected == entry_from_json(line())


@pytest.mark.parametrize("entry", awkward_entries())
def test_write_then_read_gives_the_same_entry_and_the_same_line(entry):
    text = entry_to_json(entry)
    assert "\n" not in text
    assert entry == entry_from_json(text)
    assert text == entry_to_json(entry_from_json(text))
    assert text.encode() == entry_to_json(entry_from_json(text.encode())).encode()


def test_keys_are_written_in_a_fixed_order_without_spaces_or_ascii_escapes():
    stamp = datetime(2026, 1, 2, tzinfo=UTC)
    entry = MemoryEntry(
        MemoryCategory.FACT,
        "café ☕",
        tags=["naïve"],
        relevance=0.5,
        last_accessed=stamp,
        last_decayed=stamp,
        metadata={"user": "zoë", "n": [1, 2.5, None, True]},
        key="prefs",
        expires_at=stamp,
    )
    text = entry_to_json(entry, "équipe/a")
    assert FIELDS == tuple(json.loads(text))
    assert '"memory":"café ☕","tags":["naïve"],"relevance":0.5,' in text
    assert '"scope":"équipe/a","last_accessed":"2026-01-02T00:00:00.000000+00:00",' in text
    assert ',"metadata":{"user":"zoë","n":[1,2.5,null,true]},"key":"prefs",' in text
    assert text.endswith(',"expires_at":"2026-01-02T00:00:00.000000+00:00"}')
    assert ("équipe/a", entry) == scoped_entry_from_json(text)


def test_empty_optional_keys_are_left_out_and_a_line_without_them_reads_back():
    entry = MemoryEntry(MemoryCategory.FACT, "plain")
    text = entry_to_json(entry)
    assert tuple(name for name in FIELDS if name not in OPTIONAL_FIELDS) == tuple(json.loads(text))
    assert ("", entry) == scoped_entry_from_json(text)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"scope": "a//b"}, "empty segment"),
        ({"scope": 3}, "scope must be a string"),
        ({"last_accessed": "yesterday"}, "not an ISO 8601"),
        ({"last_decayed": "2026-01-02T00:00:00"}, "no UTC offset"),
    ],
)
def test_a_bad_scope_or_stamp_is_refused_with_its_reason(extra, message):
    line = json.loads(entry_to_json(MemoryEntry(MemoryCategory.FACT, "x"))) | extra
    with pytest.raises(InvalidEntryError, match=message):
        scoped_entry_from_json(json.dumps(line))


def test_other_utc_offsets_are_read_and_written_as_utc():
    entry = entry_from_json(line(created_at="2025-03-03T11:12:04.318+02:00"))
    assert datetime(2025, 3, 3, 9, 12, 4, 318_000, tzinfo=UTC) == entry.created_at
    assert entry.created_at.utcoffset() == timedelta(0)
    assert '"created_at":"2025-03-03T09:12:04.318000+00:00"' in entry_to_json(entry)


def test_an_entry_in_another_timezone_is_written_in_utc():
    local = datetime(2025, 1, 1, 1, 0, tzinfo=timezone(timedelta(hours=1)))
    text = entry_to_json(MemoryEntry(MemoryCategory.FACT, "x", created_at=local))
    assert '"created_at":"2025-01-01T00:00:00.000000+00:00"' in text


def test_an_integer_relevance_reads_as_a_float():
    assert 1.0 == entry_from_json(line(relevance=1)).relevance


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{", "not valid JSON"),
        ("", "not valid JSON"),
        ("[1, 2]", "expected a JSON object, got an array"),
        ('"a string"', "expected a JSON object, got a string"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "memory"}), "missing key 'memory'"),
        (line(extra=1), "unknown key 'extra'"),
        (line(id=42), "id must be a string, not a number"),
        (line(id="not-a-uuid"), "id 'not-a-uuid' is not a UUID"),
        (line(created_at=None), "created_at must be a string, not null"),
        (line(created_at="yesterday"), "'yesterday' is not an ISO 8601 timestamp"),
        (line(created_at="2025-03-03T09:12:04"), "has no UTC offset"),
        (line(category="opinion"), "unknown category 'opinion'"),
        (line(memory=7), "memory must be a str"),
        (line(memory="\ud800"), "cannot be encoded as UTF-8"),
        (line(tags="debugging"), "tags must be a list"),
        (line(tags=[1]), "tag 0 must be a str"),
        (line(relevance=1.5), "relevance must be a finite number in [0, 1]"),
        (line(relevance="high"), "relevance must be a number"),
        (line(relevance=True), "relevance must be a number"),
        (line().replace("0.9", "NaN"), "finite number"),
        (line(access_count=-1), "access_count must be an int"),
        (line(access_count=1.0), "access_count must be an int"),
        (line(access_count=2**64), "got 18446744073709551616"),
        (line().replace("0.9", "1e400"), "got inf"),
        (line(validated="yes"), "validated must be a bool"),
    ],
)
def test_a_bad_line_raises_invalid_entry_error_saying_what_is_wrong(text, message):
    with pytest.raises(InvalidEntryError, match=re.escape(message)):
        entry_from_json(text)


def test_bytes_that_are_not_utf8_are_refused():
    with pytest.raises(InvalidEntryError, match="not valid"):
        entry_from_json(b"\xff\xfe{}")


def test_a_line_by_hand_needs_only_category_and_memory_and_takes_adds_defaults():
    before = datetime.now(UTC)
    entry = entry_from_json('{"category": "fact", "memory": "CI runs make test"}')
    assert (MemoryCategory.FACT, "CI runs make test") == (entry.category, entry.memory)
    assert ([], 1.0, 0, False) == (entry.tags, entry.relevance, entry.access_count, entry.validated)
    assert before <= entry.created_at <= datetime.now(UTC)
    again = entry_from_json('{"category": "fact", "memory": "CI runs make test"}')
    assert entry.id != again.id  # a new id each time: such a line imported twice is stored twice
    kept = entry_from_json('{"category": "fact", "memory": "x", "tags": ["ci"], "relevance": 0.5}')
    assert (["ci"], 0.5) == (kept.tags, kept.relevance)
    with pytest.raises(InvalidEntryError, match="missing key 'category'"):
        entry_from_json('{"memory": "x"}')


def test_the_sync_store_exports_and_imports_and_the_async_calls_refuse_it(tmp_path):
    entries = awkward_entries()
    with sync.open_store(tmp_path / "a.db") as first:
        first.store_many(entries)
        first.scope("team").store(MemoryEntry(MemoryCategory.FACT, "in a scope"))
        assert 5 == first.with_descendants().export_jsonl(tmp_path / "out.jsonl")
        with pytest.raises(InvalidArgumentError, match="SyncMemoryStore has its own") as refused:
            asyncio.run(jsonl.export_jsonl(first, tmp_path / "no.jsonl"))  # type: ignore[arg-type]
        assert "\n" not in str(refused.value)
        with pytest.raises(InvalidArgumentError, match=r"store\.import_jsonl\(\.\.\.\)"):
            asyncio.run(jsonl.import_jsonl(first, tmp_path / "out.jsonl"))  # type: ignore[arg-type]
    assert not (tmp_path / "no.jsonl").exists()
    with sync.open_store(tmp_path / "b.db") as second:
        report = second.import_jsonl(tmp_path / "out.jsonl")
        assert 5 == report.entries
        assert entries == list(second.iter_entries())
        assert ["in a scope"] == [e.memory for e in second.scope("team").iter_entries()]
        second.with_descendants().export_jsonl(tmp_path / "again.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "again.jsonl").read_bytes()
