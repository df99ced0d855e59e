"""Every failure is one line on stderr that says what to do, and a non-zero exit; no traceback."""

from __future__ import annotations

import sqlite3

import pytest

from loopctl_memory import StorageError

from .conftest import assert_fails, store_entries, stored_entries
from .test_commands import entry


@pytest.mark.parametrize("relevance", ["1.5", "-0.1", "high"])
def test_a_bad_relevance_is_a_usage_error(on_db, db, relevance):
    line = assert_fails(on_db("add", "x", "-c", "fact", "-r", relevance), 2, "'--relevance'")
    assert "(see 'loopctl-memory add --help')" in line
    assert not db.exists()


@pytest.mark.parametrize(
    "command",
    [("add", "x", "-c", "fact", "-r"), ("forget", "--yes", "--below"), ("update", "1234", "-r")],
)
def test_a_relevance_that_is_not_a_number_is_a_usage_error(on_db, db, command):
    assert_fails(on_db(*command, "nan"), 2, "'nan' is not a number from 0 to 1")
    assert not db.exists()  # refused before anything was opened


def test_an_unknown_category_is_a_usage_error_listing_the_categories(on_db):
    assert_fails(on_db("add", "x", "-c", "opinion"), 2, "'opinion' is not one of", "'fact'")


def test_a_missing_category_is_a_usage_error(on_db):
    assert_fails(on_db("add", "x"), 2, "Missing option '--category'")


def test_a_missing_import_file_is_a_usage_error(on_db, tmp_path):
    assert_fails(on_db("import", tmp_path / "nope.jsonl"), 2, "nope.jsonl", "does not exist")


@pytest.mark.parametrize(
    "given", ["42", "abc", "not-an-id", "3f2b6c1e-8d4a-4f5e-9a7b-1c2d3e4f5a6b0"]
)
def test_an_id_that_is_neither_a_uuid_nor_a_hex_prefix_is_a_usage_error(on_db, given):
    line = assert_fails(on_db("get", given), 2, f"{given!r} is not a memory id", "at least 4")
    assert "(see 'loopctl-memory get --help')" in line


def test_an_unknown_command_or_option_is_a_usage_error(invoke):
    assert_fails(invoke("remember", "x"), 2, "No such command 'remember'")
    assert_fails(invoke("--verbose", "stats"), 2, "No such option '--verbose'")


def test_a_directory_that_does_not_exist_is_named(invoke, tmp_path):
    target = tmp_path / "no" / "such" / "memory.db"
    assert_fails(
        invoke("--db", target, "add", "x", "-c", "fact"),
        1,
        f"the directory {target.parent} does not exist",
    )
    assert not target.parent.exists()


def test_an_unreachable_server_is_one_line_naming_the_setting(invoke):
    line = assert_fails(
        invoke("--db", "postgresql+asyncpg://u:secret@127.0.0.1:1/x", "stats"),
        1,
        "open postgresql+asyncpg://u:***@127.0.0.1:1/x failed",
        "--db",
    )
    assert "secret" not in line


def test_an_unsupported_url_is_refused(invoke):
    assert_fails(invoke("--db", "mysql://host/db", "stats"), 1, "unsupported database URL")


def test_a_file_that_is_not_a_database_is_refused_and_left_alone(invoke, tmp_path):
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes, not a database\n" * 100)
    assert_fails(invoke("--db", notes, "add", "x", "-c", "fact"), 1, "not a database")
    assert b"my notes, not a database\n" * 100 == notes.read_bytes()


def test_a_duplicate_id_on_import_is_one_line(on_db, db, tmp_path):
    stored = entry("once")
    store_entries(db, [stored])
    source = tmp_path / "again.jsonl"
    assert 0 == on_db("export", "-o", source).exit_code
    assert_fails(on_db("import", source), 1, "already stored", "nothing was imported")


@pytest.mark.parametrize("after_the_command", [False, True])
def test_debug_lets_a_library_error_through_for_its_traceback(invoke, tmp_path, after_the_command):
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database" * 100)
    options = ("--debug", "--db", notes)
    result = invoke("stats", *options) if after_the_command else invoke(*options, "stats")
    assert 1 == result.exit_code
    assert isinstance(result.exception, StorageError)


def test_a_busy_database_says_so_without_blaming_where_it_is(invoke, db, monkeypatch):
    assert 0 == invoke("--db", db, "init").exit_code
    monkeypatch.setattr("loopctl_memory.sql.opening.DEFAULT_BUSY_TIMEOUT", 0.05)
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        line = assert_fails(invoke("--db", db, "add", "x", "-c", "fact"), 1, "busy past")
    finally:
        blocker.close()
    assert "check it or pass --db" not in line
    assert "--busy-timeout SECONDS waits longer" in line


@pytest.mark.parametrize("given", ["option", "variable"])
def test_busy_timeout_sets_how_long_a_command_waits_for_the_lock(invoke, db, monkeypatch, given):
    assert 0 == invoke("--db", db, "init").exit_code
    monkeypatch.setattr("loopctl_memory.sql.opening.DEFAULT_BUSY_TIMEOUT", 3600.0)
    if given == "variable":
        monkeypatch.setenv("LOOPCTL_MEMORY_BUSY_TIMEOUT", "0.05")
    waiting = ["--busy-timeout", "0.05"] if given == "option" else []
    blocker = sqlite3.connect(db, isolation_level=None)
    try:
        blocker.execute("BEGIN IMMEDIATE")
        # With the default (an hour here) this would hang; 0.05 s gives up.
        assert_fails(invoke("--db", db, "add", "x", "-c", "fact", *waiting), 1, "busy past")
    finally:
        blocker.close()
    assert 0 == invoke("--db", db, "add", "x", "-c", "fact", *waiting).exit_code
    assert ["x"] == [entry.memory for entry in stored_entries(db)]


def test_a_negative_busy_timeout_is_a_usage_error(on_db):
    assert_fails(on_db("--busy-timeout", "-1", "stats"), 2, "'--busy-timeout'")


def test_an_older_schema_is_told_in_the_command_lines_words(invoke, db):
    assert 0 == invoke("--db", db, "migrate", "--to", "0011").exit_code
    line = assert_fails(invoke("--db", db, "stats"), 1, "schema revision 0011")
    assert "`loopctl-memory migrate` upgrades it" in line
    assert "migrate=True" not in line
