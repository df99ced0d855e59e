"""``search`` shows what matters at any width, with short ids that get, update and delete take."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, SqlMemoryStore, open_store
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.rendering import for_people

from .conftest import assert_fails, json_score, store_entries, stored_entries

LONG = (
    "database is locked under concurrent writers: a deferred transaction that upgrades "
    "to a write fails at once under WAL, so open every write with BEGIN IMMEDIATE, set a "
    "busy timeout of five seconds and retry the whole unit of work once before giving up"
)

TWINS = (
    uuid.UUID("abcdef01-2345-4000-8000-000000000001"),
    uuid.UUID("abcdef02-2345-4000-8000-000000000002"),
)
"""Two ids that share their first six hex digits, and no more."""


def fact(memory: str, **fields: Any) -> MemoryEntry:
    return MemoryEntry(MemoryCategory.FACT, memory, **fields)


def scored(db: Path, query: str, limit: int = 10) -> list[tuple[MemoryEntry, float]]:
    """What the library's ``retrieve_scored`` answers."""

    async def work() -> list[tuple[MemoryEntry, float]]:
        async with open_store(db, migrate=False) as store:
            return await store.retrieve_scored(query, limit)

    return asyncio.run(work())


def store_in_scope(db: Path, scope: str, entries: Sequence[MemoryEntry]) -> None:
    async def work() -> None:
        async with open_store(db) as store:
            await store.scope(scope).store_many(entries)

    asyncio.run(work())


def words(text: str) -> str:
    """The text's words, one space apart: what survives wrapping."""
    return " ".join(text.split())


# --- the table at 120, 80 and 40 columns ---


@pytest.fixture
def long_entry(db: Path) -> MemoryEntry:
    long = MemoryEntry(MemoryCategory.ERROR_PATTERN, LONG, tags=["sqlite"], relevance=0.95)
    store_entries(db, [long, fact("the staging database is PostgreSQL 16", tags=["postgres"])])
    return long


@pytest.mark.parametrize("width", [120, 80, 40])
def test_search_shows_the_whole_short_id_exact_score_and_memory_at_any_width(
    on_db, db, monkeypatch, long_entry, width
):
    monkeypatch.setenv("COLUMNS", str(width))
    [(first, score), _] = scored(db, "database locked")
    assert long_entry == first
    result = on_db("search", "database locked", "--ranking", "reference")
    assert 0 == result.exit_code, result.output
    lines = result.stdout.splitlines()
    assert all(len(line) <= width for line in lines)
    assert long_entry.id.hex[:8] in result.stdout.split()
    assert for_people(score) in result.stdout.split()
    assert words(LONG) in words(result.stdout)
    assert "…" not in result.stdout


@pytest.mark.parametrize(("width", "layout"), [(120, "table"), (80, "table"), (40, "blocks")])
def test_search_draws_a_table_when_the_memory_has_room_and_blocks_when_not(
    on_db, monkeypatch, long_entry, width, layout
):
    monkeypatch.setenv("COLUMNS", str(width))
    first_line = on_db("search", "database locked").stdout.splitlines()[0]
    if layout == "table":
        assert ["#", "id", "score", "category"] == first_line.split()[:4]
        assert "memory" == first_line.split()[-1]
    else:
        assert ["1", long_entry.id.hex[:8]] == first_line.split()[:2]
        assert "error_pattern" == first_line.split()[-1]


@pytest.mark.usefixtures("long_entry")
def test_at_80_columns_the_memory_gets_the_width_the_other_columns_leave(on_db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    header, rule, *rows = on_db("search", "database locked").stdout.splitlines()
    start = header.index("memory")
    assert 80 == len(rule)
    assert 80 - start >= 25
    assert 80 - start - 12 <= max(len(row[start:].rstrip()) for row in rows)


def test_a_word_wider_than_the_memory_column_is_folded_not_cut(on_db, db, monkeypatch):
    url = "https://example.com/" + "x" * 70
    store_entries(db, [fact(f"see {url}")])
    monkeypatch.setenv("COLUMNS", "40")
    result = on_db("search", "see")
    assert url in "".join(line.strip() for line in result.stdout.splitlines())


def test_long_tags_are_cut_in_the_table_and_whole_in_the_blocks(on_db, db, monkeypatch):
    tag = "a-tag-far-too-long-for-its-narrow-column"
    store_entries(db, [fact("tagged", tags=[tag])])
    monkeypatch.setenv("COLUMNS", "80")
    table = on_db("search", "tagged").stdout
    assert tag not in table
    assert "a-tag-f…" in table
    monkeypatch.setenv("COLUMNS", "40")
    blocks = on_db("search", "tagged").stdout
    assert tag in "".join(line.strip() for line in blocks.splitlines())  # folded, not cut


def test_the_blocks_never_read_memories_as_markup(on_db, db, monkeypatch):
    store_entries(db, [fact("[bold]not bold[/bold] :smile:")])
    monkeypatch.setenv("COLUMNS", "40")
    assert "[bold]not bold[/bold] :smile:" in on_db("search", "bold").stdout


# --- the scores: computed once, by the store ---


@pytest.mark.usefixtures("long_entry")
def test_search_json_gives_each_entry_its_score_from_retrieve_scored(on_db, db):
    expected = [
        entry_to_dict(entry) | {"score": json_score(score)}
        for entry, score in scored(db, "database")
    ]
    result = on_db("search", "database", "--json", "--ranking", "reference")
    assert 0 == result.exit_code, result.output
    assert expected == json.loads(result.stdout)


@pytest.mark.usefixtures("long_entry")
# --- short ids ---


def test_the_short_id_grows_until_no_other_id_starts_with_it(on_db, db, monkeypatch):
    near = (
        uuid.UUID("0123456789ab4000800000000000000a"),
        uuid.UUID("0123456789ac4000800000000000000b"),
    )
    store_entries(db, [fact("near one", id=near[0]), fact("near two", id=near[1])])
    monkeypatch.setenv("COLUMNS", "120")
    shown = on_db("search", "near").stdout.split()
    assert "0123456789ab" in shown
    assert "0123456789ac" in shown


def test_a_short_id_costs_one_lookup_when_eight_digits_are_unique(on_db, db, monkeypatch):
    store_entries(db, [fact(f"memory {n}") for n in range(5)])
    lookups: list[str] = []
    ids_with_prefix = SqlMemoryStore.ids_with_prefix

    async def counted(self: SqlMemoryStore, prefix: str, limit: int = 2) -> list[uuid.UUID]:
        lookups.append(prefix)
        return await ids_with_prefix(self, prefix, limit)

    monkeypatch.setattr(SqlMemoryStore, "ids_with_prefix", counted)
    assert 0 == on_db("search", "memory").exit_code
    assert 5 == len(lookups)
    assert all(8 == len(prefix) for prefix in lookups)


def test_a_short_id_is_unique_in_the_scope_and_below_where_get_looks(on_db, db, monkeypatch):
    store_entries(db, [fact("root twin", id=uuid.UUID("abcdef0123" + "0" * 22))])
    store_in_scope(db, "team", [fact("team twin", id=uuid.UUID("abcdef0123" + "f" * 22))])
    monkeypatch.setenv("COLUMNS", "120")
    assert "abcdef01230" in on_db("search", "twin").stdout.split()  # team/ holds a twin
    assert "abcdef01" in on_db("--scope", "team", "search", "twin").stdout.split()
    assert "root twin" in on_db("get", "abcdef01230").stdout


# --- get, update and delete take a full id or a unique prefix ---

FORMS = {
    "short id": lambda entry_id: entry_id.hex[:8],
    "four digits": lambda entry_id: entry_id.hex[:4],
    "prefix with a dash": lambda entry_id: str(entry_id)[:13],
    "upper case": lambda entry_id: entry_id.hex[:10].upper(),
    "full id": str,
    "full id without dashes": lambda entry_id: entry_id.hex,
}


@pytest.fixture(params=list(FORMS), ids=list(FORMS))
def form(request: pytest.FixtureRequest) -> Any:
    return FORMS[request.param]


@pytest.fixture
def pair(db: Path) -> tuple[MemoryEntry, MemoryEntry]:
    wanted = fact("wanted", id=uuid.UUID("1234abcd-0000-4000-8000-000000000001"))
    other = fact("other", id=uuid.UUID("5678abcd-0000-4000-8000-000000000002"))
    store_entries(db, [wanted, other])
    return wanted, other


def test_get_takes_a_full_id_or_a_unique_prefix(on_db, pair, form):
    wanted, _ = pair
    result = on_db("get", form(wanted.id), "--json")
    assert 0 == result.exit_code, result.output
    assert entry_to_dict(wanted) == json.loads(result.stdout)


def test_update_takes_a_full_id_or_a_unique_prefix(on_db, db, pair, form):
    wanted, _ = pair
    result = on_db("update", form(wanted.id), "--text", "changed", "--json")
    assert 0 == result.exit_code, result.output
    assert str(wanted.id) == json.loads(result.stdout)["id"]
    assert ["changed", "other"] == [entry.memory for entry in stored_entries(db)]


def test_delete_takes_a_full_id_or_a_unique_prefix_and_names_the_full_id(on_db, db, pair, form):
    wanted, other = pair
    result = on_db("delete", form(wanted.id))
    assert 0 == result.exit_code, result.output
    assert f"Deleted {wanted.id}\n" == result.stdout
    assert [other.id] == [entry.id for entry in stored_entries(db)]


def test_a_full_id_is_not_looked_up_by_prefix(on_db, pair, monkeypatch):
    wanted, _ = pair

    async def refused(*_args: object, **_kwargs: object) -> list[uuid.UUID]:
        raise AssertionError("a full id needs no prefix lookup")

    monkeypatch.setattr(SqlMemoryStore, "ids_with_prefix", refused)
    assert 0 == on_db("get", wanted.id).exit_code
    assert 0 == on_db("update", wanted.id, "-r", "0.5").exit_code
    assert 0 == on_db("delete", wanted.id).exit_code


@pytest.fixture
def twins(db: Path) -> None:
    store_entries(db, [fact("first twin", id=TWINS[0]), fact("second twin", id=TWINS[1])])


@pytest.mark.usefixtures("twins")
@pytest.mark.parametrize(
    "command",
    [("get",), ("delete",), ("update", "--relevance", "0.5")],
    ids=["get", "delete", "update"],
)
@pytest.mark.parametrize("prefix", ["abcdef", "ABCD-EF", "abcd"])
def test_an_ambiguous_prefix_is_one_line_asking_for_more_digits(on_db, db, command, prefix):
    name, *options = command
    assert_fails(
        on_db(name, prefix, *options),
        1,
        f"id {prefix} matches several memories; give more digits",
    )
    assert [1.0, 1.0] == [entry.relevance for entry in stored_entries(db)]


@pytest.mark.usefixtures("twins")
def test_one_more_digit_tells_the_twins_apart(on_db, db):
    assert "second twin" == json.loads(on_db("get", "abcdef02", "--json").stdout)["memory"]
    assert 0 == on_db("delete", "abcd-ef01").exit_code
    assert [TWINS[1]] == [entry.id for entry in stored_entries(db)]


@pytest.mark.usefixtures("twins")
def test_search_shows_the_twins_by_their_unique_eight_digits(on_db, monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")
    shown = on_db("search", "twin").stdout.split()
    assert {"abcdef01", "abcdef02"} <= set(shown)


def test_a_prefix_reaches_below_the_scope_never_beside_or_above_it(on_db, db):
    store_entries(db, [fact("root", id=TWINS[0])])
    store_in_scope(db, "team", [fact("team", id=TWINS[1])])
    store_in_scope(
        db, "other", [fact("other", id=uuid.UUID("abcdef03-2345-4000-8000-000000000003"))]
    )
    assert_fails(on_db("get", "abcdef"), 1, "matches several memories")
    assert "team" == json.loads(on_db("get", "abcdef02", "--json").stdout)["memory"]
    assert (
        "team" == json.loads(on_db("--scope", "team", "get", "abcdef", "--json").stdout)["memory"]
    )
    assert_fails(on_db("--scope", "team", "get", "abcdef01"), 1, "in scope team or below")


@pytest.mark.usefixtures("twins")
@pytest.mark.parametrize(
    ("command", "message"),
    [
        (("get",), "no memory with id 9999; `loopctl-memory search` shows the ids"),
        (("delete",), "no memory with id 9999; nothing was deleted"),
        (("update", "-r", "0.5"), "no memory with id 9999; nothing was changed"),
    ],
    ids=["get", "delete", "update"],
)
def test_an_unknown_prefix_keeps_the_no_memory_message(on_db, command, message):
    name, *options = command
    assert_fails(on_db(name, "9999", *options), 1, message)


@pytest.mark.parametrize("command", ["get", "delete", "update"])
@pytest.mark.parametrize("given", ["xyz1", "abc", "ab-c", "abcd/ef", ""])
def test_a_prefix_that_is_not_four_hex_digits_is_a_usage_error(on_db, command, given):
    options = ["-r", "0.5"] if command == "update" else []
    line = assert_fails(on_db(command, given, *options), 2, f"{given!r} is not a memory id")
    assert f"(see 'loopctl-memory {command} --help')" in line


# --- numbers for people, and exact ones in JSON ---


def test_json_gives_a_binary32_score_in_its_shortest_form(on_db, db):
    store_entries(db, [fact("alpha beta", relevance=0.85)])
    result = on_db("search", "alpha zeta", "--json", "--ranking", "reference")
    assert 0 == result.exit_code, result.output
    assert '"score": 0.725' in result.stdout  # 0.85*0.5 + 0.4/2 + 0.1, in binary32
    assert "0.7250000238418579" not in result.stdout


def test_a_decayed_relevance_shows_four_digits_in_the_table_and_whole_in_json(on_db, db):
    decayed = float(np.float32(0.9999827742576599))
    store_entries(db, [fact("alpha beta", relevance=decayed, id=TWINS[0])])
    for shown in (on_db("search", "alpha"), on_db("get", str(TWINS[0]))):
        assert 0 == shown.exit_code, shown.output
        assert "0.99998" not in shown.stdout
        assert "1.0" in shown.stdout.split()
    whole = json.loads(on_db("get", str(TWINS[0]), "--json").stdout)
    assert decayed == whole["relevance"]


# --- scopes below, and memories no word matched ---


def test_a_scope_with_nothing_found_says_where_the_memories_are(on_db, db):
    store_in_scope(db, "acme/bob", [fact("the build uses make"), fact("lunch at noon")])
    result = on_db("--scope", "acme", "search", "build")
    assert 0 == result.exit_code, result.output
    assert "" == result.stdout
    assert (
        "No memories stored in scope acme. Scopes below match: acme/bob (1). Add --descendants"
        " to search them too, or --scope NAME to search one.\n"
    ) == result.stderr
    below = on_db("--scope", "acme", "search", "build", "--descendants", "--json")
    assert ["the build uses make"] == [hit["memory"] for hit in json.loads(below.stdout)]
    padded = on_db("--scope", "acme", "search", "build", "--descendants", "--include-unmatched")
    assert "lunch at noon" in padded.stdout


def test_a_search_at_the_root_says_which_scopes_below_match(on_db, db):
    store_in_scope(db, "acme/support/alice", [fact("refund within 30 days")])
    store_in_scope(db, "acme/bob", [fact("refund denied"), fact("refund again")])
    store_in_scope(db, "other", [fact("lunch at noon")])
    store_entries(db, [fact("the root's own note")])
    result = on_db("search", "refund")
    assert (
        "",
        "No memories match the query. Scopes below match: acme/bob (2),"
        " acme/support/alice (1). Add --descendants to search them too, or --scope NAME"
        " to search one.\n",
    ) == (result.stdout, result.stderr)
    nothing = on_db("search", "zebra")
    assert "No memories match the query.\n" == nothing.stderr


def test_an_id_reaches_every_scope_below_the_one_worked_in(on_db, db):
    alice, bob = fact("refund within 30 days"), fact("refund denied")
    store_in_scope(db, "acme/support/alice", [alice])
    store_in_scope(db, "acme/bob", [bob])
    found = json.loads(on_db("search", "refund", "--descendants", "--json").stdout)
    assert {str(alice.id), str(bob.id)} == {hit["id"] for hit in found}
    short = str(alice.id)[:8]
    assert "refund within 30 days" in on_db("get", short).stdout
    assert "refund within 30 days" in on_db("--scope", "acme", "get", short).stdout
    assert_fails(on_db("--scope", "acme/bob", "get", short), 1, "in scope acme/bob or below")
    updated = on_db("--scope", "acme", "update", str(alice.id), "--relevance", "0.25", "--json")
    assert 0.25 == json.loads(updated.stdout)["relevance"]
    assert_fails(on_db("--scope", "other", "delete", str(bob.id)), 1, "nothing was deleted")
    assert f"Deleted {bob.id}" in on_db("delete", str(bob.id)[:8]).stdout
    assert [str(alice.id)] == [
        hit["id"] for hit in json.loads(on_db("search", "refund", "--descendants", "--json").stdout)
    ]


def test_search_asks_for_at_least_one_memory(on_db, db):
    store_entries(db, [fact("alpha")])
    assert_fails(on_db("search", "alpha", "--limit", "0"), 2, "--limit")


def test_search_leaves_out_what_no_word_matched_unless_asked(on_db, db):
    store_entries(db, [fact("alpha"), fact("beta")])
    result = on_db("search", "gamma")
    assert ("", "No memories match the query.\n") == (result.stdout, result.stderr)
    assert ["alpha", "beta"] == [
        hit["memory"]
        for hit in json.loads(on_db("search", "gamma", "--include-unmatched", "--json").stdout)
    ]


def test_search_cuts_a_huge_memory_in_the_table_and_json_and_get_show_it_whole(on_db, db):
    huge = "refund " + "policy " * 20_000  # 140 KB
    store_entries(db, [fact(huge)])
    table = on_db("search", "refund")
    assert 0 == table.exit_code, table.output
    assert len(table.stdout) < 5_000
    assert "139,007 more characters: get)" in " ".join(table.stdout.split())
    [hit] = json.loads(on_db("search", "refund", "--json").stdout)
    assert huge == hit["memory"]
    assert huge == json.loads(on_db("get", hit["id"], "--json").stdout)["memory"]
