"""Every command on a SQLite file: what it prints and what it changes."""

from __future__ import annotations

import json
import sqlite3
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, migrate
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.rendering import for_people
from loopctl_memory.scoring import parse_query

from .conftest import assert_fails, store_entries, stored_entries

WHEN = datetime(2025, 3, 3, 9, 12, 4, 318_000, tzinfo=UTC)


def entry(
    memory: str, category: MemoryCategory = MemoryCategory.FACT, **fields: Any
) -> MemoryEntry:
    fields.setdefault("created_at", WHEN)
    return MemoryEntry(category, memory, **fields)


# --- init and migrate ---


def test_init_creates_the_database_at_the_newest_revision(on_db, db):
    result = on_db("init")
    assert 0 == result.exit_code, result.output
    assert f"Created {db} at schema revision {migrate.head()}\n" == result.stdout
    assert db.exists()


def test_init_twice_says_the_database_is_already_current(on_db):
    on_db("init")
    result = on_db("init")
    assert 0 == result.exit_code
    assert "already at schema revision" in result.stdout


def test_migrate_list_changes_nothing_and_shows_there_is_no_schema_yet(on_db, db):
    result = on_db("migrate", "--list")
    assert 0 == result.exit_code, result.output
    assert migrate.head() in result.stdout
    assert "no schema yet" in result.stdout
    assert not db.exists()


def test_migrate_list_marks_the_current_revision(on_db):
    on_db("init")
    result = on_db("migrate", "--list")
    assert 0 == result.exit_code
    assert "current, head" in result.stdout
    assert "the newest revision" in result.stdout


def test_migrate_creates_the_schema_then_reports_it_is_current(on_db):
    first = on_db("migrate")
    assert 0 == first.exit_code, first.output
    assert f"from schema revision base to {migrate.head()}" in first.stdout
    again = on_db("migrate", "--to", "head")
    assert "already at schema revision" in again.stdout


def test_migrate_down_to_base_with_yes_drops_the_schema(on_db, db):
    store_entries(db, [entry("about to go")])
    result = on_db("migrate", "--to", "base", "--yes")
    assert 0 == result.exit_code, result.output
    assert f"from schema revision {migrate.head()} to base" in result.stdout
    assert_fails(on_db("stats"), 1, "has no schema yet", "`loopctl-memory init` creates it")


def test_migrate_down_asks_first_and_no_keeps_everything(on_db, db):
    store_entries(db, [entry("stays")])
    result = on_db("migrate", "--to", "base", input="n\n")
    assert 1 == result.exit_code
    assert "Downgrade" in result.stderr
    assert "Aborted: nothing was changed." in result.stderr
    assert 1 == len(stored_entries(db))


def test_a_database_from_a_newer_version_is_refused(on_db, db):
    on_db("init")
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE alembic_version SET version_num = 'ffff'")
    connection.close()
    assert_fails(on_db("stats"), 1, "revision 'ffff'", "upgrade loopctl-memory")
    assert_fails(on_db("add", "x", "-c", "fact"), 1, "revision 'ffff'")


def test_add_gives_a_database_without_schema_the_schema(on_db, db):
    on_db("init")
    on_db("migrate", "--to", "base", "--yes")
    assert 0 == on_db("add", "x", "-c", "fact").exit_code
    assert ["x"] == [e.memory for e in stored_entries(db)]


def test_migrate_rejects_an_unknown_revision_as_a_usage_error(on_db):
    assert_fails(on_db("migrate", "--to", "nope"), 2, "unknown revision 'nope'", "--help")


def test_migrate_list_and_to_do_not_go_together(on_db):
    assert_fails(on_db("migrate", "--list", "--to", "head"), 2, "do not go together")


# --- add, get, delete ---


def test_add_prints_the_new_id_and_stores_every_option(on_db, db):
    result = on_db(
        "add", "use BEGIN IMMEDIATE", "--category", "error_pattern",
        "--tag", "sqlite", "-t", "locking", "--relevance", "0.9", "--validated",
    )  # fmt: skip
    assert 0 == result.exit_code, result.output
    new_id = uuid.UUID(result.stdout.strip())
    [stored] = stored_entries(db)
    assert new_id == stored.id
    assert MemoryCategory.ERROR_PATTERN == stored.category
    assert "use BEGIN IMMEDIATE" == stored.memory
    assert ["sqlite", "locking"] == stored.tags
    assert 0.9 == stored.relevance
    assert stored.validated


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["", "-c", "fact"], "text is blank"),
        (["   ", "-c", "fact"], "text is blank"),
        (["foo", "-c", "fact", "-t", ""], "tag is blank"),
        (["foo", "-c", "fact", "-t", "ok", "-t", "\t"], "tag is blank"),
    ],
)
def test_add_refuses_a_blank_text_or_tag_and_stores_nothing(on_db, db, arguments, said):
    on_db("add", "kept", "-c", "fact")
    assert_fails(on_db("add", *arguments), 2, said)
    assert ["kept"] == [entry.memory for entry in stored_entries(db)]


@pytest.mark.parametrize(("option", "value"), [("--text", ""), ("--text", " "), ("-t", "")])
def test_update_refuses_a_blank_text_or_tag_and_changes_nothing(on_db, db, option, value):
    on_db("add", "kept", "-c", "fact", "-t", "ok")
    [before] = stored_entries(db)
    assert_fails(on_db("update", str(before.id), option, value), 2, "blank")
    assert [before] == stored_entries(db)


def test_add_defaults_to_relevance_one_no_tags_not_validated(on_db, db):
    on_db("add", "plain", "-c", "fact")
    [stored] = stored_entries(db)
    assert (1.0, [], False) == (stored.relevance, stored.tags, stored.validated)


def test_get_shows_every_field(on_db, db):
    stored = entry("the full text of a long memory " * 8, tags=["a", "b"], relevance=0.25)
    store_entries(db, [stored])
    result = on_db("get", stored.id)
    assert 0 == result.exit_code, result.output
    flat = " ".join(result.stdout.split())
    for value in (str(stored.id), "fact", "a, b", "0.25", "2025-03-03T09:12:04.318000+00:00"):
        assert value in flat
    assert " ".join(stored.memory.split()) in flat


def test_get_json_prints_the_entry_as_export_does(on_db, db):
    stored = entry("json me", tags=["ü"], relevance=0.3)
    store_entries(db, [stored])
    result = on_db("get", stored.id, "--json")
    assert entry_to_dict(stored) == json.loads(result.stdout)


def test_get_shows_the_metadata_as_json_and_get_json_gives_it_whole(on_db, db):
    stored = entry("with fields", tags=[])
    stored.metadata = {"user": "zoë", "n": [1, 2.5, None, True]}
    store_entries(db, [stored])
    shown = on_db("get", stored.id)
    assert 0 == shown.exit_code, shown.output
    assert '{"user":"zoë","n":[1,2.5,null,true]}' in shown.stdout
    printed = json.loads(on_db("get", stored.id, "--json").stdout)
    assert {"user": "zoë", "n": [1, 2.5, None, True]} == printed["metadata"]


def test_get_an_unknown_id_fails(on_db):
    on_db("init")
    missing = uuid.uuid4()
    assert_fails(on_db("get", missing), 1, f"no memory with id {missing}")


def test_delete_removes_the_entry_and_a_second_delete_fails(on_db, db):
    kept, gone = entry("kept"), entry("gone")
    store_entries(db, [kept, gone])
    result = on_db("delete", gone.id)
    assert 0 == result.exit_code
    assert f"Deleted {gone.id}\n" == result.stdout
    assert [kept.id] == [e.id for e in stored_entries(db)]
    assert_fails(on_db("delete", gone.id), 1, "nothing was deleted")


# --- search ---


def test_search_shows_rank_short_id_exact_score_category_relevance_tags_and_text(on_db, db):
    first_entry = entry("alpha beta", relevance=0.5, tags=["greek"])
    second_entry = entry("gamma", relevance=0.7, category=MemoryCategory.STRATEGY)
    store_entries(db, [first_entry, second_entry])
    result = on_db("search", "alpha", "--include-unmatched")
    assert 0 == result.exit_code, result.output
    header, _rule, first, second = result.stdout.splitlines()
    assert ["#", "id", "score", "category", "relevance", "tags", "memory"] == header.split()
    short = first_entry.id.hex[:8]
    assert ["1", short, "0.75", "fact", "0.5", "greek", "alpha", "beta"] == first.split()
    expected = for_people(parse_query("alpha").score_of(0.7, "gamma", []))
    assert ["2", second_entry.id.hex[:8], expected, "strategy", "0.7", "gamma"] == second.split()


def test_search_never_reads_memories_as_markup(on_db, db):
    store_entries(db, [entry("[bold]not bold[/bold] :smile:")])
    result = on_db("search", "bold")
    assert "[bold]not bold[/bold] :smile:" in result.stdout


def test_search_json_lists_the_entries_best_first(on_db, db):
    low, high = entry("match", relevance=0.1), entry("match", relevance=0.9)
    store_entries(db, [low, high, entry("other", relevance=0.0)])
    result = on_db("search", "match", "--limit", "2", "--json", "--ranking", "reference")
    assert 0 == result.exit_code, result.output
    found = json.loads(result.stdout)
    assert [entry_to_dict(high), entry_to_dict(low)] == [
        {key: value for key, value in shown.items() if key != "score"} for shown in found
    ]


def test_search_json_on_an_empty_database_is_an_empty_list(on_db):
    on_db("init")
    assert [] == json.loads(on_db("search", "anything", "--json").stdout)


def test_search_on_an_empty_database_says_so(on_db):
    on_db("init")
    result = on_db("search", "anything")
    assert 0 == result.exit_code
    assert "" == result.stdout
    assert "No memories" in result.stderr


# --- consolidate ---


@pytest.fixture
def prunable(db):
    store_entries(db, [entry("keep", relevance=0.5), entry("stale", relevance=0.01)])


@pytest.mark.usefixtures("prunable")
def test_consolidate_asks_and_yes_prunes(on_db, db):
    result = on_db("consolidate", input="y\n")
    assert 0 == result.exit_code, result.output
    assert "Delete every memory with relevance below 0.05" in result.stderr
    assert "(2 stored)?" in result.stderr
    assert ["entries", "before", "2"] == result.stdout.splitlines()[1].split()
    assert ["pruned", "1"] == result.stdout.splitlines()[3].split()
    assert ["keep"] == [e.memory for e in stored_entries(db)]


@pytest.mark.usefixtures("prunable")
def test_consolidate_asks_and_no_changes_nothing(on_db, db):
    result = on_db("consolidate", input="n\n")
    assert 1 == result.exit_code
    assert "Aborted: nothing was changed." in result.stderr
    assert 2 == len(stored_entries(db))


@pytest.mark.usefixtures("prunable")
def test_consolidate_without_an_answer_changes_nothing_and_names_yes(on_db, db):
    result = on_db("consolidate")
    assert 1 == result.exit_code
    assert isinstance(result.exception, SystemExit)
    last = result.stderr.splitlines()[-1]
    assert last.startswith("Error: no answer")
    assert "--yes" in last
    assert 2 == len(stored_entries(db))


@pytest.mark.usefixtures("prunable")
def test_consolidate_yes_json_does_not_ask_and_prints_the_stats(on_db, db):
    result = on_db("consolidate", "--yes", "--json")
    assert 0 == result.exit_code, result.output
    assert "" == result.stderr
    expected = {
        "entries_before": 2,
        "entries_after": 1,
        "pruned": 1,
        "merged": 0,
        "bytes_saved": 0,
    }
    assert expected == json.loads(result.stdout)


# --- stats ---


def test_stats_json_counts_by_category_and_relevance_with_path_size_and_revision(on_db, db):
    store_entries(
        db,
        [
            entry("a", relevance=0.0),
            entry("b", relevance=0.95, category=MemoryCategory.WORKING),
            entry("c", relevance=1.0, category=MemoryCategory.WORKING),
        ],
    )
    result = on_db("stats", "--json")
    assert 0 == result.exit_code, result.output
    stats = json.loads(result.stdout)
    assert str(db.resolve()) == stats["database"]
    assert stats["size_bytes"] >= db.stat().st_size > 0
    assert migrate.head() == stats["schema_revision"]
    assert 3 == stats["entries"]
    assert {c.value: 0 for c in MemoryCategory} | {"fact": 1, "working": 2} == stats["by_category"]
    assert [1, 0, 0, 0, 0, 0, 0, 0, 0, 2] == stats["relevance_histogram"]


def test_stats_shows_the_same_in_tables(on_db, db):
    store_entries(db, [entry("a", relevance=0.35, category=MemoryCategory.INSIGHT)])
    result = on_db("stats")
    assert 0 == result.exit_code, result.output
    rows = [line.split() for line in result.stdout.splitlines()]
    assert ["database", str(db.resolve())] in rows
    assert ["schema", "revision", migrate.head()] in rows
    assert ["entries", "1"] in rows
    assert ["insight", "1"] in rows
    assert ["[0.3,", "0.4)", "1", "█" * 30] in rows


# --- metadata, keys and expiry ---


def test_add_takes_metadata_a_key_and_a_ttl(on_db, db):
    result = on_db(
        "add", "Ann prefers dark mode", "-c", "fact",
        "--meta", "user=ann", "--meta", "n=3", "--meta", 'quoted="3"', "--meta", "team.lead=bo",
        "--key", "prefs/ann", "--ttl", "7d",
    )  # fmt: skip
    assert 0 == result.exit_code, result.output
    [stored] = stored_entries(db)
    assert {"user": "ann", "n": 3, "quoted": "3", "team.lead": "bo"} == stored.metadata
    assert "prefs/ann" == stored.key
    assert stored.expires_at is not None
    assert 6.9 < (stored.expires_at - datetime.now(UTC)).total_seconds() / 86_400 < 7.1
    again = on_db("add", "Ann prefers light mode", "-c", "fact", "--key", "prefs/ann")
    assert 0 == again.exit_code, again.output
    assert ["Ann prefers light mode"] == [entry.memory for entry in stored_entries(db)]
    shown = json.loads(on_db("get", "--key", "prefs/ann", "--json").stdout)
    assert "Ann prefers light mode" == shown["memory"]
    assert_fails(on_db("get", "--key", "nobody"), 1, "no memory with key 'nobody'")
    assert_fails(on_db("get"), 2, "give an ID or --key")
    assert_fails(on_db("add", "x", "-c", "fact", "--meta", "novalue"), 2, "is not KEY=VALUE")


def test_search_where_filters_on_metadata(on_db, db):
    store_entries(
        db,
        [
            entry("theme dark", metadata={"user": "ann", "n": 3}),
            entry("theme light", metadata={"user": "bo", "n": 5}),
            entry("theme blue", metadata={"user": "ann", "n": 9, "team": {"lead": "cy"}}),
            entry("theme none"),
        ],
    )

    def found(*where: str) -> list[str]:
        arguments = [part for condition in where for part in ("--where", condition)]
        result = on_db("search", "theme", "--json", "--ranking", "bm25", *arguments)
        assert 0 == result.exit_code, result.output
        return sorted(item["memory"] for item in json.loads(result.stdout))

    assert ["theme blue", "theme dark"] == found("user=ann")
    assert ["theme dark"] == found("user=ann", "n<5")
    assert ["theme blue", "theme light"] == found("n>=5")
    assert ["theme blue"] == found("team.lead=cy")
    assert ["theme blue", "theme light", "theme none"] == found("n!=3")
    assert ["theme none"] == found("user!?")
    assert ["theme blue"] == found("team?")
    assert [] == found('n="3"')  # a number never equals its text
    shown = on_db("search", "theme", "--ranking", "bm25", "--where", "user=bo")
    assert '{"user":"bo","n":5}' in shown.stdout  # the table shows the metadata
    assert_fails(on_db("search", "theme", "--where", "just-a-path"), 2, "--where")
    assert_fails(on_db("search", "theme", "--where", "a..b=1"), 2, "empty key")


def test_add_reads_the_text_from_standard_input_or_a_file(on_db, db, tmp_path):
    big = "line one of a long note\n" + "x" * 1_000_000 + "\nlast line"
    result = on_db("add", "-", "-c", "fact", input=big + "\n")
    assert 0 == result.exit_code, result.output
    from_stdin = uuid.UUID(result.stdout.strip())
    note = tmp_path / "note.md"
    note.write_text("a note kept in a file\r\n", encoding="utf-8")
    result = on_db("add", "--file", note, "-c", "insight")
    assert 0 == result.exit_code, result.output
    from_file = uuid.UUID(result.stdout.strip())
    texts = {entry.id: entry.memory for entry in stored_entries(db)}
    assert big == texts[from_stdin]
    assert "a note kept in a file" == texts[from_file]
    assert_fails(on_db("add", "-c", "fact"), 2, "TEXT", "--file")
    assert_fails(on_db("add", "x", "--file", note, "-c", "fact"), 2, "one of them")
    assert_fails(on_db("add", "-", "-c", "fact", input=" \n"), 2, "blank")
    assert 2 == len(stored_entries(db))
