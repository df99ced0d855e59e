"""export and import: JSON Lines, byte-identical round trips, and bad lines named by number."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta

from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore
from loopctl_memory.entry_json import entry_to_json

from .conftest import assert_fails, store_entries, stored_entries
from .test_commands import entry


def awkward_entries() -> list[MemoryEntry]:
    """Entries whose text and numbers are easy to get wrong in JSON."""
    base = datetime(1999, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)
    return [
        MemoryEntry(
            MemoryCategory.TRAJECTORY,
            'quotes " and \\ backslashes, a tab\tand\nnewlines\r\n',
            tags=["pytest", "ci"],
            relevance=0.1 + 0.2,
            created_at=base,
            access_count=2**62,
            validated=True,
        ),
        MemoryEntry(
            MemoryCategory.ERROR_PATTERN,
            "ünïcödé, 漢字, emoji 🧠, RTL עברית, a NUL \x00 and U+2028 \u2028",
            tags=["ключ", "🏷️", ""],
            relevance=5e-324,
            created_at=base + timedelta(days=9000, microseconds=1),
        ),
        MemoryEntry(MemoryCategory.WORKING, "", relevance=0.0, created_at=base),
        MemoryEntry(MemoryCategory.FACT, "one", relevance=1.0, created_at=base, tags=["x"] * 5),
    ]


def test_export_writes_one_line_per_entry_with_every_field_in_order(on_db, db):
    entries = awkward_entries()
    store_entries(db, entries)
    result = on_db("export")
    assert 0 == result.exit_code, result.output
    expected = "".join(entry_to_json(e) + "\n" for e in entries).encode()
    assert expected == result.stdout_bytes
    first = json.loads(result.stdout_bytes.splitlines()[0])
    expected_keys = ["id", "category", "memory", "tags", "relevance", "created_at",
                     "access_count", "validated"]  # fmt: skip
    assert expected_keys == list(first)
    assert "1999-12-31T23:59:59.999999+00:00" == first["created_at"]
    assert 0.30000000000000004 == first["relevance"]


def test_export_import_export_is_byte_identical(invoke, tmp_path):
    source, copy = tmp_path / "source.db", tmp_path / "copy.db"
    store_entries(source, awkward_entries())
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    assert 0 == invoke("--db", source, "export", "-o", first).exit_code
    imported = invoke("--db", copy, "import", first)
    assert 0 == imported.exit_code, imported.output
    assert f"Imported 4 entries from {first}\n" == imported.stdout
    assert 0 == invoke("--db", copy, "export", "-o", second).exit_code
    assert first.read_bytes() == second.read_bytes()
    assert stored_entries(source) == stored_entries(copy)


def test_export_of_an_empty_database_is_empty(on_db):
    on_db("init")
    assert b"" == on_db("export").stdout_bytes


def test_export_to_a_file_reports_the_count(on_db, db, tmp_path):
    store_entries(db, [entry("a"), entry("b")])
    out = tmp_path / "out.jsonl"
    result = on_db("export", "-o", out)
    assert f"Exported 2 entries to {out}\n" == result.stdout
    assert 2 == len(out.read_bytes().splitlines())
    assert [out] == [p for p in tmp_path.iterdir() if "jsonl" in p.name]  # no partial file left


def test_export_to_a_missing_directory_fails_in_one_line(on_db, db, tmp_path):
    store_entries(db, [entry("a")])
    target = tmp_path / "missing" / "out.jsonl"
    assert_fails(on_db("export", "-o", target), 1, f"the directory {target.parent} does not")


def test_export_onto_or_import_from_the_database_files_is_refused_and_leaves_them(
    on_db, db, tmp_path
):
    """Exporting there would replace the database; importing from there would open and
    close the file beside SQLite, dropping SQLite's locks on it."""
    store_entries(db, [entry("a"), entry("b")])
    before = db.read_bytes()
    link = tmp_path / "another-name.db"
    link.hardlink_to(db)
    for path in (db, tmp_path / "." / db.name, link, db.with_name(f"{db.name}-wal")):
        assert_fails(on_db("export", "-o", path), 1, "is the database's own file")
    for path in (db, link):
        assert_fails(on_db("import", path), 1, "is the database's own file")
    assert before == db.read_bytes()
    assert ["a", "b"] == [e.memory for e in stored_entries(db)]


def test_import_reads_standard_input(on_db, db):
    lines = "".join(entry_to_json(e) + "\n" for e in awkward_entries())
    result = on_db("import", "-", input=lines)
    assert 0 == result.exit_code, result.output
    assert "Imported 4 entries from standard input\n" == result.stdout
    assert awkward_entries()[1].memory == stored_entries(db)[1].memory


def test_import_skips_blank_lines_and_a_byte_order_mark(on_db, db, tmp_path):
    a, b = entry("a"), entry("b")
    source = tmp_path / "in.jsonl"
    text = f"{entry_to_json(a)}\n\n   \n{entry_to_json(b)}"  # and no final newline
    source.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert 0 == on_db("import", source).exit_code
    assert [a, b] == stored_entries(db)


def test_import_of_an_empty_file_imports_nothing(on_db, db, tmp_path):
    source = tmp_path / "empty.jsonl"
    source.write_bytes(b"")
    result = on_db("import", source)
    assert "Imported 0 entries" in result.stdout
    assert [] == stored_entries(db)


def lines_with_a_bad_one(count: int, bad_at: int, bad: str) -> str:
    lines = [entry_to_json(entry(f"entry {n}", id=uuid.uuid4())) for n in range(1, count + 1)]
    lines[bad_at - 1] = bad
    return "\n".join(lines) + "\n"


def test_a_malformed_line_is_named_and_nothing_is_imported(on_db, db, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text(lines_with_a_bad_one(10, 7, '{"id": oops}'), encoding="utf-8")
    line = assert_fails(on_db("import", source), 1, f"{source} line 7: not valid JSON")
    assert "nothing was imported" in line
    assert [] == stored_entries(db)


def test_a_bad_line_stops_its_batch_but_earlier_batches_stay(on_db, db, tmp_path):
    source = tmp_path / "in.jsonl"
    bad = entry_to_json(entry("too relevant")).replace('"relevance":1.0', '"relevance":1.5')
    source.write_text(lines_with_a_bad_one(9, 8, bad), encoding="utf-8")
    line = assert_fails(
        on_db("import", "--batch-size", "3", source),
        1,
        f"{source} line 8: relevance must be a finite number in [0, 1], got 1.5",
        "the 6 entries before line 7 were imported",
        f"tail -n +7 {source} | loopctl-memory import -",
    )
    assert line.count("\n") == 0
    assert [f"entry {n}" for n in range(1, 7)] == [e.memory for e in stored_entries(db)]


def test_invalid_utf8_is_named_by_line(on_db, tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_bytes(entry_to_json(entry("fine")).encode() + b"\n\xff\xfe{}\n")
    assert_fails(on_db("import", source), 1, "line 2: not valid UTF-8")


def test_a_duplicate_id_within_the_file_imports_nothing_from_its_batch(on_db, db, tmp_path):
    twice = entry("twice")
    source = tmp_path / "in.jsonl"
    source.write_text(f"{entry_to_json(twice)}\n{entry_to_json(twice)}\n", encoding="utf-8")
    assert_fails(on_db("import", source), 1, "lines 1-2", "same id")
    assert [] == stored_entries(db)


def test_a_failed_export_leaves_no_file_behind(invoke, tmp_path):
    out = tmp_path / "out.jsonl"
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database" * 100)
    assert_fails(invoke("--db", notes, "export", "-o", out), 1, "not a database")
    assert [notes] == list(tmp_path.iterdir())


def test_ctrl_c_during_import_says_what_was_kept_and_how_to_finish(
    on_db, db, tmp_path, monkeypatch
):
    source = tmp_path / "in.jsonl"
    source.write_text(
        "".join(entry_to_json(entry(f"entry {n}")) + "\n" for n in range(1, 10)), encoding="utf-8"
    )
    calls = 0
    store_flat = SqlMemoryStore.store_flat

    async def interrupted_at_the_third_batch(self, entries):
        nonlocal calls
        calls += 1
        if calls == 3:
            raise KeyboardInterrupt
        return await store_flat(self, entries)

    monkeypatch.setattr(SqlMemoryStore, "store_flat", interrupted_at_the_third_batch)
    result = on_db("import", "--batch-size", "3", source)
    assert 130 == result.exit_code, result.output
    assert (
        f"Error: interrupted: at least 6 entries of {source} were stored (each batch of 3"
        " whole or not at all); import it again with --on-duplicate skip to store the rest\n"
    ) == result.stderr
    assert 6 == len(stored_entries(db))
    monkeypatch.setattr(SqlMemoryStore, "store_flat", store_flat)
    finished = on_db("import", "--on-duplicate", "skip", source)
    assert 0 == finished.exit_code, finished.output
    assert [f"entry {n}" for n in range(1, 10)] == [e.memory for e in stored_entries(db)]


def test_import_takes_lines_of_only_category_and_memory(on_db, db):
    lines = '{"category": "fact", "memory": "CI runs make test"}\n' + (
        '{"category": "insight", "memory": "prefer glob", "tags": ["tools"], "scope": "team"}\n'
    )
    result = on_db("import", "-", input=lines)
    assert 0 == result.exit_code, result.output
    found = json.loads(on_db("search", "make test", "--json").stdout)
    assert [("fact", "CI runs make test", [], 1.0)] == [
        (hit["category"], hit["memory"], hit["tags"], hit["relevance"]) for hit in found
    ]
    team = json.loads(on_db("--scope", "team", "search", "glob", "--json").stdout)
    assert ["prefer glob"] == [hit["memory"] for hit in team]
