"""The global options work after the command as before: ``mcp --db m.db`` is ``--db m.db mcp``."""

from __future__ import annotations

import json

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry
from loopctl_memory.cli import DB_ENVVAR, SCOPE_ENVVAR, cli

from .conftest import assert_fails, store_entries

GLOBAL_OPTIONS = ("--db", "--scope", "--read-only", "--ranking", "--embedder", "--debug")
OWN = {("search", "--ranking"), ("init", "--embedder")}  # the command's own option of that name


def _entry(text: str) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, text)


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_every_command_shows_every_global_option_in_its_help(invoke, name):
    result = invoke(name, "--help")
    assert 0 == result.exit_code, result.output
    for option in GLOBAL_OPTIONS:
        assert option in result.output, (name, option)


@pytest.mark.parametrize("name", sorted(cli.commands))
def test_db_after_any_command_is_the_database_it_opens(invoke, tmp_path, name):
    """A missing file given after the command is the one the error names."""
    missing = tmp_path / "missing" / "here.db"
    source = tmp_path / "in.jsonl"
    source.write_text("")
    some_id = "0123abcd"
    arguments = {"add": ["x", "-c", "fact"], "get": [some_id], "delete": [some_id]}
    arguments |= {"update": [some_id, "--text", "y"], "import": [source], "search": ["x"]}
    arguments |= {"forget": ["--everything"], "reembed": ["none"], "migrate": ["--list"]}
    writes_schema = name in {"init", "migrate"}  # refused under --read-only before opening
    read_only = [] if writes_schema else ["--read-only"]
    result = invoke(name, *arguments.get(name, []), "--db", missing, *read_only)
    assert (result.exit_code == 0) == (name == "migrate"), result.output  # --list only reads
    assert str(missing) in result.output, (name, result.output)


def test_mcp_takes_db_after_the_command(invoke, tmp_path):
    missing = tmp_path / "agent.db"
    assert_fails(invoke("mcp", "--db", missing, "--read-only"), 1, f"no database at {missing}")


def test_options_after_the_command_act_as_before_it(invoke, db):
    store_entries(db, [_entry("deploys go through make release")])
    added = invoke("add", "acme builds with make", "-c", "fact", "--db", db, "--scope", "acme")
    assert 0 == added.exit_code, added.output
    before = invoke("--db", db, "--scope", "acme", "search", "make", "--json")
    after = invoke("search", "make", "--json", "--db", db, "--scope", "acme")
    assert 0 == after.exit_code, after.output
    assert before.output == after.output
    assert ["acme builds with make"] == [hit["memory"] for hit in json.loads(after.output)]


def test_the_option_after_the_command_wins_over_the_one_before_and_the_environment(
    invoke, db, tmp_path, monkeypatch
):
    store_entries(db, [_entry("the one database")])
    monkeypatch.setenv(DB_ENVVAR, str(tmp_path / "elsewhere.db"))
    monkeypatch.setenv(SCOPE_ENVVAR, "acme")
    result = invoke("--db", tmp_path / "other.db", "search", "database", "--json", "--db", db)
    assert 0 == result.exit_code, result.output
    assert [] == json.loads(result.output)  # the scope of the environment still holds
    result = invoke("search", "database", "--json", "--db", db, "--scope", "")
    assert ["the one database"] == [hit["memory"] for hit in json.loads(result.output)]


def test_read_only_after_the_command_refuses_writes(invoke, db):
    store_entries(db, [_entry("kept")])
    result = invoke("add", "more", "-c", "fact", "--db", db, "--read-only")
    assert_fails(result, 1, "read-only")


def test_a_malformed_scope_after_the_command_is_a_usage_error(invoke, db):
    assert_fails(invoke("search", "x", "--db", db, "--scope", "a//b"), 2, "--scope", "empty")


def test_ranking_after_the_command_is_the_default_ranking(invoke, db):
    store_entries(db, [_entry("alpha beta"), _entry("gamma")])
    result = invoke("search", "alpha", "--json", "--db", db, "--ranking", "bm25")
    assert 0 == result.exit_code, result.output
    assert ["alpha beta"] == [hit["memory"] for hit in json.loads(result.output)]
