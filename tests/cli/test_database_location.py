"""Where the data lives: --db, else LOOPCTL_MEMORY_DB, else the platform's user data directory."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs

from loopctl_memory.cli import DB_ENVVAR, default_database

from .conftest import assert_fails, stored_entries


def test_db_option_names_the_file(invoke, tmp_path):
    target = tmp_path / "chosen.db"
    assert 0 == invoke("--db", target, "add", "here", "-c", "fact").exit_code
    assert ["here"] == [e.memory for e in stored_entries(target)]


def test_the_environment_variable_is_used_without_db(invoke, tmp_path, monkeypatch):
    target = tmp_path / "from-env.db"
    monkeypatch.setenv(DB_ENVVAR, str(target))
    assert 0 == invoke("add", "via env", "-c", "fact").exit_code
    assert ["via env"] == [e.memory for e in stored_entries(target)]


def test_db_wins_over_the_environment_variable(invoke, tmp_path, monkeypatch):
    monkeypatch.setenv(DB_ENVVAR, str(tmp_path / "ignored.db"))
    chosen = tmp_path / "chosen.db"
    assert 0 == invoke("--db", chosen, "add", "x", "-c", "fact").exit_code
    assert chosen.exists()
    assert not (tmp_path / "ignored.db").exists()


def test_the_default_is_memory_db_in_the_user_data_directory_created_with_its_parents(
    invoke, tmp_path
):
    expected = Path(platformdirs.user_data_dir("loopctl-memory")) / "memory.db"
    assert expected == default_database()
    assert expected.is_relative_to(tmp_path)  # the fixture pointed HOME and XDG_DATA_HOME here
    assert not expected.parent.exists()
    assert 0 == invoke("add", "by default", "-c", "fact").exit_code
    assert ["by default"] == [e.memory for e in stored_entries(expected)]
    assert str(expected) == json.loads(invoke("stats", "--json").stdout)["database"]


def test_reading_commands_never_create_the_default_database(invoke):
    line = assert_fails(invoke("search", "x"), 1, "no database at", "the default location")
    assert "loopctl-memory init" in line
    assert not default_database().parent.exists()


def test_a_missing_file_named_by_the_variable_is_reported_with_its_source(
    invoke, tmp_path, monkeypatch
):
    monkeypatch.setenv(DB_ENVVAR, str(tmp_path / "typo.db"))
    assert_fails(invoke("stats"), 1, "no database at", DB_ENVVAR)
    assert not (tmp_path / "typo.db").exists()


def test_memory_is_a_throwaway_database_for_every_command(invoke):
    added = invoke("--db", ":memory:", "add", "gone at exit", "-c", "fact")
    assert 0 == added.exit_code, added.output
    searched = invoke("--db", ":memory:", "search", "gone", "--json")
    assert 0 == searched.exit_code, searched.output
    assert [] == json.loads(searched.stdout)
    stats = json.loads(invoke("--db", ":memory:", "stats", "--json").stdout)
    assert (":memory:", 0) == (stats["database"], stats["entries"])
    assert stats["size_bytes"] > 0  # the empty schema's pages


def test_a_sqlite_url_works_like_a_path(invoke, tmp_path):
    target = tmp_path / "url.db"
    assert 0 == invoke("--db", f"sqlite+aiosqlite:///{target}", "add", "x", "-c", "fact").exit_code
    assert 1 == len(stored_entries(target))


def test_a_directory_as_the_database_is_one_line_saying_so(invoke, tmp_path):
    line = assert_fails(invoke("--db", tmp_path, "stats"), 1, "is a directory, not a database file")
    assert str(tmp_path) in line
