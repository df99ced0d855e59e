"""Fuzzing ``loopctl-memory import``: all of a file, or every batch before the first bad line.

Each example writes a JSON Lines file of valid entries mixed with blank lines,
malformed JSON, wrong keys, bad values, invalid UTF-8 and ids that are already
taken, and imports it with ``--batch-size`` 1 to 4 into a copy of a database
that holds two seed entries. What must happen is computed here from the kinds
of lines, following the command's batch rule (each batch of valid lines is one
transaction; blank lines are skipped): exit status 0 with every entry stored, or
exit status 1 with one ``Error:`` line naming the first bad line (``line N``) or
the batch whose ids clash (``lines A-B``), every batch before it stored and
nothing from it on. Never a traceback.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.cli import DB_ENVVAR, cli
from loopctl_memory.entry_json import entry_to_dict, entry_to_json
from tests.reliability.fuzz_values import ID_POOL, VALID_FIELDS, clean_texts, mixture

MAX_EXAMPLES = 120
FUZZ = settings(
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,  # each example copies its own database
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

SEEDS = [
    MemoryEntry(
        MemoryCategory.FACT, "seed one", id=ID_POOL[0], created_at=datetime(2026, 1, 1, tzinfo=UTC)
    ),
    MemoryEntry(
        MemoryCategory.INSIGHT,
        "seed two",
        tags=["s"],
        id=ID_POOL[1],
        created_at=datetime(2026, 1, 2, tzinfo=UTC),
    ),
]


@dataclass(frozen=True, slots=True)
class Line:
    """One line of the file: its bytes, and what it is."""

    kind: str  # "entry", "blank" or "bad"
    raw: bytes
    entry: MemoryEntry | None = None
    why: str = ""


# --- the lines ---------------------------------------------------------------------------

json_entries = st.builds(
    MemoryEntry,
    st.sampled_from(list(MemoryCategory)),
    clean_texts,
    tags=st.lists(clean_texts, max_size=3),
    relevance=st.floats(0, 1),
    id=mixture(st.uuids(), st.sampled_from(ID_POOL)),
    created_at=VALID_FIELDS["created_at"],
    access_count=VALID_FIELDS["access_count"],
    validated=st.booleans(),
)


def _as_written(entry: MemoryEntry, style: str) -> bytes:
    """``entry`` as export writes it, or as a person or another tool might."""
    if style == "export":
        return entry_to_json(entry).encode()
    fields = entry_to_dict(entry)
    if style == "ascii, spaced, keys reversed":
        return json.dumps(dict(reversed(fields.items())), ensure_ascii=True).encode()
    return b"  " + entry_to_json(entry).encode() + b"\r"  # indented, CRLF line end


entry_lines = st.builds(
    lambda entry, style: Line("entry", _as_written(entry, style), entry),
    json_entries,
    st.sampled_from(["export", "ascii, spaced, keys reversed", "indented, CRLF"]),
)
blank_lines = st.builds(
    lambda raw: Line("blank", raw), st.sampled_from([b"", b"   ", b"\t", b"\r"])
)

_NOT_JSON = [
    b"{", b"}", b"not json", b"{'id': 1}", b"[]", b"null", b"1", b'"text"', b"{}", b"[1,2]",
    b"\xef\xbb\xbf{}", b'{"id":', b"{,}", b"NaN",
]  # fmt: skip


class _Raw:
    """A JSON value written as it is, for what json.dumps will not write (1e400)."""

    def __init__(self, text: str) -> None:
        self.text = text


_BAD_VALUES: dict[str, list[Any]] = {
    "id": ["not-a-uuid", 123, None, "", ["x"]],
    "category": ["bogus", "FACT", 1, None, ["fact"]],
    "memory": [1, None, [], {"a": 1}, "\ud800"],
    "tags": ["x", [1], None, ["\udfff"], [None], {"a": "b"}],
    "relevance": [1.5, -0.1, "0.5", None, True, float("nan"), float("inf"), -float("inf"),
                  _Raw("1e400"), 2**64],
    "created_at": ["yesterday", "2024-01-01T00:00:00", 123, None, "", "0001-01-01T00:00:00+05:00"],
    "access_count": [-1, 1.5, "3", None, True, 2**63, 2**64],
    "validated": [1, 0, "true", None, []],
}  # fmt: skip


def _with(entry: MemoryEntry, field: str, value: Any) -> bytes:
    fields = entry_to_dict(entry)
    fields[field] = "@@RAW@@" if isinstance(value, _Raw) else value
    text = json.dumps(fields, ensure_ascii=True)
    return (text.replace('"@@RAW@@"', value.text) if isinstance(value, _Raw) else text).encode()


def _without(entry: MemoryEntry, field: str) -> bytes:
    fields = entry_to_dict(entry)
    del fields[field]
    return json.dumps(fields).encode()


def _renamed(entry: MemoryEntry, field: str) -> bytes:
    fields = entry_to_dict(entry)
    fields[field.capitalize()] = fields.pop(field)
    return json.dumps(fields).encode()


def _extra(entry: MemoryEntry, _field: str) -> bytes:
    return json.dumps({**entry_to_dict(entry), "extra": 1}).encode()


def _cut(entry: MemoryEntry, share: float) -> bytes:
    whole = entry_to_json(entry).encode()
    return whole[: max(1, min(len(whole) - 1, int(len(whole) * share)))]  # an object not closed


_INVALID_UTF8 = [b"\xff", b"\xc0\xaf", b"\xed\xa0\x80", b"\xe2\x82", b"\x80"]


def _bad_utf8(entry: MemoryEntry, junk: bytes) -> bytes:
    return entry_to_json(entry).encode().replace(b'"memory":"', b'"memory":"' + junk, 1)


_fields = st.sampled_from(list(_BAD_VALUES))
bad_lines = mixture(
    st.builds(lambda raw: Line("bad", raw, why="not JSON"), st.sampled_from(_NOT_JSON)),
    st.builds(lambda e, s: Line("bad", _cut(e, s), why="cut"), json_entries, st.floats(0, 1)),
    st.builds(
        lambda e, f, make: Line("bad", make(e, f), why=f"keys: {make.__name__}"),
        json_entries,
        _fields,
        st.sampled_from([_renamed, _extra]),
    ),
    st.builds(  # only these two are needed: the other keys take add's defaults
        lambda e, f: Line("bad", _without(e, f), why="keys: _without"),
        json_entries,
        st.sampled_from(["category", "memory"]),
    ),
    _fields.flatmap(
        lambda field: st.builds(
            lambda e, v: Line("bad", _with(e, field, v), why=f"bad {field}"),
            json_entries,
            st.sampled_from(_BAD_VALUES[field]),
        )
    ),
    st.builds(
        lambda e, junk: Line("bad", _bad_utf8(e, junk), why="invalid UTF-8"),
        json_entries,
        st.sampled_from(_INVALID_UTF8),
    ),
)
lines = mixture(entry_lines, entry_lines, entry_lines, entry_lines, blank_lines, bad_lines)


# --- what must happen -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Expected:
    """The outcome of an import: exit status, what the error names, what is stored."""

    exit_code: int
    names: str  # "" on success, else "line N" or "lines A-B"
    imported: list[MemoryEntry]


def expected_import(file_lines: list[Line], batch_size: int) -> Expected:
    """Follow the import command's rule by hand: batches of valid lines, blank lines skipped."""
    taken = {seed.id for seed in SEEDS}
    imported: list[MemoryEntry] = []
    batch: list[MemoryEntry] = []
    first = 1

    def clash() -> bool:
        ids = [entry.id for entry in batch]
        return len(set(ids)) != len(ids) or bool(taken.intersection(ids))

    for number, line in enumerate(file_lines, start=1):
        if line.kind == "blank":
            continue
        if line.kind == "bad":
            return Expected(1, f"line {number}", imported)
        assert line.entry is not None
        batch.append(line.entry)
        if len(batch) == batch_size:
            if clash():
                return Expected(1, f"lines {first}-{number}", imported)
            imported += batch
            taken.update(entry.id for entry in batch)
            batch, first = [], number + 1
    if batch:
        if clash():
            return Expected(1, f"lines {first}-{len(file_lines)}", imported)
        imported += batch
    return Expected(0, "", imported)


# --- the test ---------------------------------------------------------------------------


@pytest.fixture
def seeded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A database holding the seeds, to copy for each example."""
    monkeypatch.delenv(DB_ENVVAR, raising=False)
    template = tmp_path / "template.db"
    asyncio.run(_store_seeds(template))
    return template


async def _store_seeds(path: Path) -> None:
    async with open_store(path) as store:
        await store.store_many(SEEDS)


async def _stored(path: Path) -> list[MemoryEntry]:
    async with open_store(path, migrate=False) as store:
        return [entry async for entry in store.iter_entries()]


def _remove_database(path: Path) -> None:
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        path.with_name(name).unlink(missing_ok=True)


@FUZZ
@given(
    file_lines=st.lists(lines, max_size=12),
    batch_size=st.integers(1, 4),
    bom=st.booleans(),
    final_newline=st.booleans(),
)
def test_an_import_stores_every_batch_before_the_first_bad_line(
    seeded, file_lines, batch_size, bom, final_newline
):
    source = seeded.with_name("input.jsonl")
    raw = b"\n".join(line.raw for line in file_lines) + (b"\n" if final_newline else b"")
    source.write_bytes((b"\xef\xbb\xbf" if bom else b"") + raw)
    database = seeded.with_name("import.db")
    shutil.copyfile(seeded, database)
    try:
        expected = expected_import(file_lines, batch_size)
        result = CliRunner().invoke(
            cli, ["--db", str(database), "import", "--batch-size", str(batch_size), str(source)]
        )
        outcome = {"": "everything", "line": "up to a bad line", "lines": "up to a clash"}
        event(outcome[expected.names.split(" ")[0]])
        assert "Traceback" not in result.output
        assert isinstance(result.exception, SystemExit | None), repr(result.exception)
        assert expected.exit_code == result.exit_code, result.output
        if expected.exit_code == 0:
            count = len(expected.imported)
            noun = "entry" if count == 1 else "entries"
            assert f"Imported {count} {noun} from {source}\n" == result.stdout
        else:
            [message] = result.stderr.splitlines()
            assert message.startswith(f"Error: {source} {expected.names}: "), message
        assert [*SEEDS, *expected.imported] == asyncio.run(_stored(database))
    finally:
        _remove_database(database)


def test_the_judge_follows_the_batch_rule():
    """The hand-made expectation itself, on a file whose outcome is known."""
    first, second, third = (MemoryEntry(MemoryCategory.FACT, str(n)) for n in range(3))
    good = [Line("entry", b"", entry) for entry in (first, second, third)]
    blank, bad = Line("blank", b""), Line("bad", b"{")
    assert Expected(0, "", [first, second, third]) == expected_import(good, 2)
    assert Expected(1, "line 4", [first, second]) == expected_import([*good[:2], blank, bad], 2)
    assert Expected(1, "line 3", []) == expected_import([*good[:2], bad], 3)
    taken = Line("entry", b"", MemoryEntry(MemoryCategory.FACT, "x", id=ID_POOL[0]))
    assert Expected(1, "lines 3-5", [first, second]) == expected_import(
        [*good[:2], blank, good[2], taken], 2
    )


DEEP = b"[" * 100_000
LONG_INT = entry_to_json(MemoryEntry(MemoryCategory.FACT, "m", id=uuid.UUID(int=99))).replace(
    '"access_count":0', '"access_count":' + "1" * 5000
)


@pytest.mark.parametrize(
    "bad", [DEEP, LONG_INT.encode()], ids=["nested-too-deep", "5000-digit-int"]
)
def test_a_line_python_cannot_decode_is_named_by_its_number(seeded, bad):
    source = seeded.with_name("input.jsonl")
    fine = entry_to_json(MemoryEntry(MemoryCategory.FACT, "fine")).encode()
    source.write_bytes(fine + b"\n" + bad + b"\n")
    result = CliRunner().invoke(cli, ["--db", str(seeded), "import", str(source)])
    assert 1 == result.exit_code
    assert result.stderr.startswith(f"Error: {source} line 2: ")
