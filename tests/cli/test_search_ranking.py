"""``search --ranking`` and its filters, and the global ``--ranking`` that sets the default."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, MemoryFilter, open_store
from loopctl_memory.cli import RANKING_ENVVAR
from loopctl_memory.rendering import for_people
from tests.deploy_memories import (
    ENTRIES,
    NOW,
    OLD_ERROR,
    OLD_FACT,
    RECENT_INSIGHT,
    RECENT_STRATEGY,
    UNRELATED,
)
from tests.embedders import fake_provider

from .conftest import assert_fails, json_score, store_entries


@pytest.fixture
def stored(db: Path) -> Path:
    store_entries(db, ENTRIES)
    return db


def library(
    db: Path,
    query: str,
    ranking: str,
    passes: MemoryFilter | None = None,
    *,
    matched_only: bool = True,
) -> list[tuple[str, float]]:
    """What the library's ``retrieve_scored`` answers: (memory, score), best first.

    ``matched_only``, as ``search`` asks unless ``--include-unmatched``.
    """

    async def work() -> list[tuple[str, float]]:
        async with open_store(db, migrate=False) as store:
            found = await store.retrieve_scored(
                query, 10, ranking=ranking, filter=passes, matched_only=matched_only
            )
            return [(entry.memory, json_score(score, ranking)) for entry, score in found]

    return asyncio.run(work())


def searched(result: Any) -> list[tuple[str, float]]:
    """(memory, score) of each entry ``search --json`` printed."""
    assert 0 == result.exit_code, result.output
    return [(shown["memory"], shown["score"]) for shown in json.loads(result.stdout)]


def memories(result: Any) -> list[str]:
    return [text for text, _ in searched(result)]


def matched(result: Any) -> set[str]:
    """The memories ``search deploy --json`` printed that the query matched.

    That is all of them in BM25; the reference pads its answer with the
    unrelated memory whenever it passes the filters.
    """
    return set(memories(result)) - {UNRELATED.memory}


# --- the ranking ---


@pytest.mark.parametrize("ranking", ["reference", "bm25"])
def test_search_ranking_answers_as_the_library_ranks_scores_included(on_db, stored, ranking):
    expected = library(stored, "deploy disk", ranking)
    assert expected == searched(on_db("search", "deploy disk", "--ranking", ranking, "--json"))


def test_bm25_ranks_by_bm25_and_the_reference_does_not(on_db, stored):
    bm25 = memories(on_db("search", "deploy disk", "--ranking", "bm25", "--json"))
    reference = memories(on_db("search", "deploy disk", "--ranking", "reference", "--json"))
    padded = memories(on_db("search", "deploy disk", "--json", "--include-unmatched"))
    assert [text for text, _ in library(stored, "deploy disk", "bm25")] == bm25
    assert UNRELATED.memory not in bm25  # BM25 ranks only what shares a word with the query
    assert UNRELATED.memory not in reference  # search leaves out what no word matched
    assert UNRELATED.memory in padded  # ... unless asked: the library's retrieve pads with it
    assert reference == padded[: len(reference)]
    assert bm25 != reference[: len(bm25)]


def test_a_stopword_query_finds_nothing_in_bm25_and_pads_in_the_reference(on_db, stored):
    assert [] == searched(on_db("search", "the of and", "--ranking", "bm25", "--json"))
    padded = on_db("search", "the of and", "--json", "--include-unmatched")
    assert library(stored, "the of and", "reference", matched_only=False) == searched(padded)
    assert len(ENTRIES) == len(searched(padded))
    result = on_db("search", "the of and", "--ranking", "bm25")
    assert 0 == result.exit_code
    assert "" == result.stdout
    assert "No memories match the query.\n" == result.stderr


def test_the_global_ranking_sets_the_default_and_search_ranking_overrides_it(on_db, stored):
    bm25 = library(stored, "deploy", "bm25")
    reference = library(stored, "deploy", "reference")
    assert bm25 != reference
    assert bm25 == searched(on_db("--ranking", "bm25", "search", "deploy", "--json"))
    assert reference == searched(
        on_db("--ranking", "bm25", "search", "deploy", "--ranking", "reference", "--json")
    )
    assert reference == searched(on_db("--ranking", "reference", "search", "deploy", "--json"))


def test_the_ranking_variable_sets_the_default(on_db, stored, monkeypatch):
    monkeypatch.setenv(RANKING_ENVVAR, "reference")
    reference = library(stored, "deploy", "reference")
    assert reference == searched(on_db("search", "deploy", "--json"))
    bm25 = library(stored, "deploy", "bm25")
    assert bm25 == searched(on_db("search", "deploy", "--ranking", "bm25", "--json"))
    assert bm25 == searched(on_db("--ranking", "bm25", "search", "deploy", "--json"))


def test_search_ranks_by_bm25_without_an_embedder_not_the_reference(on_db, stored):
    """The best ranking the database has: "the" matches nothing, no unrelated padding."""
    assert library(stored, "deploy", "bm25") == searched(on_db("search", "deploy", "--json"))
    assert library(stored, "deploy", "reference") != library(stored, "deploy", "bm25")
    assert [] == searched(on_db("search", "the", "--json"))
    assert "--ranking reference" in on_db("search", "--help").stdout


def test_search_ranks_by_hybrid_with_a_recorded_embedder(on_db, db, monkeypatch):
    fake_provider(monkeypatch)
    assert 0 == on_db("init", "--embedder", "fastembed:fake-words").exit_code
    for text in ("deploying the cache node failed", "lunch at noon"):
        assert 0 == on_db("add", text, "--category", "fact").exit_code
    found = searched(on_db("search", "deploying", "--json"))
    assert ["deploying the cache node failed"] == [text for text, _ in found]

    async def hybrid() -> list[tuple[str, float]]:
        async with open_store(db, migrate=False, embedder="fastembed:fake-words") as store:
            scored = await store.retrieve_scored("deploying", 10, ranking="hybrid")
            return [(entry.memory, json_score(score, "hybrid")) for entry, score in scored]

    assert asyncio.run(hybrid()) == found


def test_include_unmatched_is_the_reference_padding_and_refused_with_another_ranking(on_db, stored):
    padded = on_db("search", "the of and", "--include-unmatched", "--ranking", "bm25")
    assert_fails(padded, 2, "--include-unmatched applies to --ranking reference only")


def test_the_table_shows_a_bm25_score_above_one_to_four_significant_digits(on_db, stored):
    [(text, score)] = library(stored, "lunch noon", "bm25")
    assert score > 1
    result = on_db("search", "lunch noon", "--ranking", "bm25")
    assert 0 == result.exit_code, result.output
    header, _rule, first, *_ = result.stdout.splitlines()
    assert "score" in header.split()  # a table, not blocks, at 100 columns
    assert for_people(score) in first.split()
    assert f"{score:.4g}" == for_people(score)
    assert text.split()[0] in first


@pytest.mark.parametrize(
    ("score", "shown"),
    [(12.345678, "12.35"), (2.0, "2.0"), (0.00012345678, "0.0001235"), (123456.7, "1.235e+05")],
)
def test_a_bm25_score_is_shown_to_four_significant_digits(score, shown):
    assert shown == for_people(score)


# --- the filters, with either ranking ---

RANKINGS = pytest.mark.parametrize("ranking", ["reference", "bm25"])


@RANKINGS
def test_category_keeps_the_memories_of_any_category_given(on_db, stored, ranking):
    passes = MemoryFilter(
        categories=frozenset({MemoryCategory.STRATEGY, MemoryCategory.ERROR_PATTERN})
    )
    expected = library(stored, "deploy", ranking, passes)
    assert {RECENT_STRATEGY.memory, OLD_ERROR.memory} == {text for text, _ in expected}
    given = ("-c", "strategy", "--category", "error_pattern")
    assert expected == searched(on_db("search", "deploy", *given, "--ranking", ranking, "--json"))


@RANKINGS
def test_tag_keeps_the_memories_with_any_tag_given_ignoring_case(on_db, stored, ranking):
    found = on_db("search", "deploy", "--tag", "DEPLOY", "--ranking", ranking, "--json")
    assert sorted([OLD_FACT.memory, RECENT_STRATEGY.memory]) == sorted(memories(found))
    either = on_db("search", "deploy", "-t", "deploy", "-t", "disk", "--ranking", ranking, "--json")
    assert {OLD_FACT.memory, OLD_ERROR.memory, RECENT_STRATEGY.memory} == set(memories(either))


@RANKINGS
@pytest.mark.parametrize(
    ("since", "expected"),
    [
        ("7d", {RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}),
        ("1w", {RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}),
        ("12h", {RECENT_INSIGHT.memory}),
        ("2025-11-01", {OLD_ERROR.memory, RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}),
        ("2025-12-01T00:00", {RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}),  # strictly after
        ("2025-12-01T00:00-01:00", {RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}),
        ("2025-12-01T00:00+01:00", {OLD_ERROR.memory, RECENT_STRATEGY.memory,
                                    RECENT_INSIGHT.memory}),
    ],
)  # fmt: skip
def test_since_keeps_the_memories_created_after_it(on_db, stored, ranking, since, expected):
    found = on_db("search", "deploy", "--since", since, "--ranking", ranking, "--json")
    assert expected == matched(found)


@RANKINGS
@pytest.mark.parametrize(
    ("until", "expected"),
    [
        ("2025-12-01", {OLD_FACT.memory}),
        ("2025-12-01T00:00:01", {OLD_FACT.memory, OLD_ERROR.memory}),
        ("3d", {OLD_FACT.memory, OLD_ERROR.memory}),
    ],
)
def test_until_keeps_the_memories_created_before_it(on_db, stored, ranking, until, expected):
    found = on_db("search", "deploy", "--until", until, "--ranking", ranking, "--json")
    assert expected == matched(found)


@RANKINGS
def test_validated_and_not_validated_keep_those_memories(on_db, stored, ranking):
    validated = on_db("search", "deploy", "--validated", "--ranking", ranking, "--json")
    assert {OLD_ERROR.memory, RECENT_STRATEGY.memory} == set(memories(validated))
    not_validated = on_db("search", "deploy", "--not-validated", "--ranking", ranking, "--json")
    assert {OLD_FACT.memory, RECENT_INSIGHT.memory} == matched(not_validated)


@RANKINGS
def test_every_filter_given_must_hold(on_db, stored, ranking):
    passes = MemoryFilter(
        categories=frozenset({MemoryCategory.STRATEGY, MemoryCategory.FACT}),
        tags_any=("disk",),
        validated=True,
        created_after=datetime(2025, 12, 2, tzinfo=UTC),
        created_before=NOW,
    )
    expected = library(stored, "deploy", ranking, passes)
    assert [RECENT_STRATEGY.memory] == [text for text, _ in expected]
    given = ["-c", "strategy", "-c", "fact", "-t", "disk", "--validated"]
    given += ["--since", "2025-12-02", "--until", NOW.isoformat(), "--ranking", ranking]
    assert expected == searched(on_db("search", "deploy", *given, "--json"))


def test_a_filter_no_memory_passes_says_so(on_db, stored):
    result = on_db("search", "deploy", "--since", "1m")
    assert 0 == result.exit_code
    assert "No memories match the query and the filters.\n" == result.stderr
    result = on_db("search", "deploy", "--since", "1m", "--ranking", "bm25")
    assert "No memories match the query and the filters.\n" == result.stderr


# --- bad values: one line, exit status 2 ---


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["--since", "yesterday"], ["'--since'", "'yesterday' is not a moment", "30d"]),
        (["--until", "2026-13-01"], ["'--until'", "'2026-13-01' is not a moment"]),
        (["--since", "-3d"], ["'--since'", "is not a moment"]),
        (["--since", "9999999w"], ["'--since'", "before the year 1"]),
        (["--since", "2026-01-02", "--until", "2026-01-01"], ["--since", "before --until"]),
        (["--ranking", "bm26"], ["'--ranking'", "'bm26' is not one of", "'bm25'"]),
        (["--category", "opinion"], ["'--category'", "'opinion' is not one of"]),
    ],
)
def test_a_bad_search_option_is_a_one_line_usage_error(on_db, stored, args, fragments):
    line = assert_fails(on_db("search", "deploy", *args), 2, *fragments)
    assert "(see 'loopctl-memory search --help')" in line


def test_a_bad_global_ranking_is_a_one_line_usage_error(on_db, stored, monkeypatch):
    assert_fails(on_db("--ranking", "tfidf", "search", "x"), 2, "'tfidf' is not one of")
    monkeypatch.setenv(RANKING_ENVVAR, "tfidf")
    assert_fails(on_db("search", "x"), 2, "'tfidf' is not one of")


def test_search_context_weighs_the_neighbours_and_zero_turns_it_off(on_db, db):
    store_entries(
        db,
        [
            MemoryEntry(MemoryCategory.FACT, text)
            for text in ("cache deploy started", "it failed twice", "lunch")
        ],
    )
    found = json.loads(
        on_db("search", "cache deploy", "--ranking", "bm25", "--context", "0.5", "--json").stdout
    )
    assert ["cache deploy started", "it failed twice", "lunch"] == [f["memory"] for f in found]
    plain = json.loads(
        on_db("search", "cache deploy", "--ranking", "bm25", "--context", "0", "--json").stdout
    )
    assert ["cache deploy started"] == [f["memory"] for f in plain]
    assert_fails(on_db("search", "x", "--ranking", "bm25", "--context", "often"), 2, "--context")
    assert_fails(on_db("search", "x", "--ranking", "bm25", "--context", "-1"), 2, "--context")
    assert_fails(
        on_db("search", "x", "--ranking", "reference", "--context", "0.5"),
        2,
        "--context applies to",
    )
