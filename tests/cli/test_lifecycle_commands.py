"""The command line's scopes and lifecycle: --scope, scopes, update, forget, consolidate --full."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.cli import SCOPE_ENVVAR
from tests.cli.conftest import store_entries


def fact(memory: str, **fields: object) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, memory, **fields)  # type: ignore[arg-type]


def _memories(db: Path, scope: str | None = None) -> list[str]:
    async def work() -> list[str]:
        async with open_store(db) as store:
            view = store.scope(scope) if scope else store
            return [entry.memory async for entry in view.iter_entries()]

    return asyncio.run(work())


def test_scope_option_and_variable_put_and_find_memories_in_their_scope(on_db, db, monkeypatch):
    assert 0 == on_db("--scope", "acme/alice", "add", "alice likes tea", "-c", "fact").exit_code
    monkeypatch.setenv(SCOPE_ENVVAR, "acme/bob")
    assert 0 == on_db("add", "bob likes coffee", "-c", "fact").exit_code
    monkeypatch.delenv(SCOPE_ENVVAR)

    alice = json.loads(on_db("--scope", "acme/alice", "search", "likes", "--json").stdout)
    assert ["alice likes tea"] == [entry["memory"] for entry in alice]
    assert "No memories stored." in on_db("search", "likes").stderr
    assert ["bob likes coffee"] == _memories(db, "acme/bob")


@pytest.mark.parametrize("bad", ["a//b", "/a", "x" * 256, "../etc", "a/./b"])
def test_a_bad_scope_is_a_usage_error(on_db, bad):
    result = on_db("--scope", bad, "stats")
    assert 2 == result.exit_code
    assert "--scope" in result.stderr


def test_scopes_lists_each_scope_with_its_count(on_db, db):
    store_entries(db, [fact("root")])
    on_db("--scope", "team/a", "add", "one", "-c", "fact")
    on_db("--scope", "team/a", "add", "two", "-c", "fact")
    on_db("--scope", "team/b", "add", "three", "-c", "fact")

    assert {"": 1, "team/a": 2, "team/b": 1} == json.loads(on_db("scopes", "--json").stdout)
    assert {"team/b": 1} == json.loads(on_db("--scope", "team/b", "scopes", "--json").stdout)
    table = on_db("scopes").stdout
    assert "(root)" in table
    assert "team/a" in table


def test_stats_counts_the_scope_and_lists_the_scopes_below(on_db, db):
    on_db("--scope", "team", "add", "one", "-c", "fact")
    on_db("--scope", "team/a", "add", "two", "-c", "fact")
    stats = json.loads(on_db("--scope", "team", "stats", "--json").stdout)
    assert "team" == stats["scope"]
    assert 1 == stats["entries"]
    assert {"team": 1, "team/a": 1} == stats["scopes"]


def test_stats_of_a_scope_says_how_many_memories_the_scopes_below_hold(on_db):
    on_db("--scope", "acme/bob", "add", "build uses make", "-c", "fact")
    on_db("--scope", "acme/ann", "add", "deploy on fridays", "-c", "fact")
    shown = on_db("--scope", "acme", "stats").stdout
    assert "0 (and 2 in the scopes below acme: see the last table)" in " ".join(shown.split())
    root = on_db("stats").stdout
    assert "0 (and 2 in scopes: see the last table)" in " ".join(root.split())


def test_update_changes_the_fields_given_and_keeps_the_rest(on_db, db):
    entry = fact("old text", tags=["keep"], relevance=0.3)
    store_entries(db, [entry])

    result = on_db(
        "update", entry.id, "--text", "new text", "--relevance", "0.9", "--validated", "--json"
    )

    assert 0 == result.exit_code, result.stderr
    shown = json.loads(result.stdout)
    assert ("new text", 0.9, True, ["keep"]) == (
        shown["memory"],
        shown["relevance"],
        shown["validated"],
        shown["tags"],
    )
    assert ["new text"] == _memories(db)


def test_forget_takes_tags_categories_and_metadata_as_search_does(on_db, db):
    store_entries(
        db,
        [
            fact("scratch one", tags=["Scratch"]),
            fact("draft two", tags=["draft"]),
            fact("kept", tags=["keep"], metadata={"user": "bob"}),
            fact("ann's", metadata={"user": "ann"}),
            MemoryEntry(MemoryCategory.WORKING, "a working note"),
            MemoryEntry(MemoryCategory.STRATEGY, "a strategy"),
        ],
    )
    result = on_db("forget", "--tag", "scratch", "--tag", "draft", "--yes")
    assert "Forgot 2 memories in" in result.stdout
    result = on_db("forget", "--where", "user=ann", "--yes")
    assert "Forgot 1 memory in" in result.stdout
    result = on_db("forget", "-c", "working", "-c", "strategy", "--yes")
    assert "Forgot 2 memories in" in result.stdout
    assert ["kept"] == _memories(db)
    asked = on_db("forget", "--tag", "keep", "--where", "user=bob", input="n\n")
    assert "tagged keep, whose metadata meets user=bob" in asked.stderr
    assert ["kept"] == _memories(db)
    assert 2 == on_db("forget", "--where", "no operator", "--yes").exit_code


def test_update_with_nothing_to_change_or_an_unknown_id_fails(on_db, db):
    store_entries(db, [fact("x")])
    assert 2 == on_db("update", uuid.uuid4()).exit_code
    missing = on_db("update", uuid.uuid4(), "--relevance", "0.5")
    assert 1 == missing.exit_code
    assert "no memory with id" in missing.stderr


def test_forget_older_than_deletes_only_the_old_after_asking(on_db, db):
    now = datetime.now(UTC)
    store_entries(
        db,
        [
            fact("ancient", created_at=now - timedelta(days=40)),
            fact("recent", created_at=now - timedelta(days=2)),
            MemoryEntry(MemoryCategory.WORKING, "old work", created_at=now - timedelta(days=40)),
        ],
    )

    refused = on_db("forget", "--older-than", "30d", input="n\n")
    assert 1 == refused.exit_code
    assert 3 == len(_memories(db))

    result = on_db("forget", "--older-than", "30d", "--category", "working", "--yes")
    assert 0 == result.exit_code, result.stderr
    assert "Forgot 1 memory in" in result.stdout
    assert ["ancient", "recent"] == _memories(db)
    assert 0 == on_db("forget", "--older-than", "4w", "--yes").exit_code
    assert ["recent"] == _memories(db)


@pytest.mark.parametrize("args", [[], ["--older-than", "soon"], ["--older-than", "30"]])
def test_forget_without_a_condition_or_with_a_bad_duration_is_a_usage_error(on_db, args):
    assert 2 == on_db("forget", "--yes", *args).exit_code


def test_forget_everything_empties_only_the_scope(on_db, db):
    on_db("--scope", "a", "add", "one", "-c", "fact")
    on_db("add", "root", "-c", "fact")
    assert 0 == on_db("--scope", "a", "forget", "--everything", "--yes").exit_code
    assert {"": 1} == json.loads(on_db("scopes", "--json").stdout)


def test_consolidate_full_merges_duplicates_and_reports_it(on_db, db):
    store_entries(
        db,
        [
            fact("run the tests before every commit", relevance=0.6),
            fact("run the tests before every commit", relevance=0.6),
            fact("something else entirely", relevance=0.9),
        ],
    )
    result = on_db("consolidate", "--full", "--yes", "--json")
    assert 0 == result.exit_code, result.stderr
    stats = json.loads(result.stdout)
    assert (3, 2, 1) == (stats["entries_before"], stats["entries_after"], stats["merged"])
    assert len("run the tests before every commit") == stats["bytes_saved"]

    no_merge = on_db("consolidate", "--full", "--no-merge", "--half-life", "1d", "--yes")
    assert 0 == no_merge.exit_code, no_merge.stderr


def test_half_life_without_full_is_a_usage_error(on_db):
    assert 2 == on_db("consolidate", "--half-life", "7d", "--yes").exit_code


def test_export_and_import_carry_every_scope(on_db, invoke, tmp_path):
    on_db("add", "root", "-c", "fact")
    on_db("--scope", "team/a", "add", "scoped", "-c", "fact")
    exported = tmp_path / "all.jsonl"
    assert 0 == on_db("export", "-o", exported).exit_code
    lines = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert [None, "team/a"] == [line.get("scope") for line in lines]

    other = tmp_path / "other.db"
    assert 0 == invoke("--db", other, "--scope", "copy", "import", exported).exit_code
    assert {"copy": 1, "copy/team/a": 1} == json.loads(
        invoke("--db", other, "scopes", "--json").stdout
    )
