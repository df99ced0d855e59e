"""The MCP ``recall``: BM25 by default, the reference on request, and its filters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import MemoryCategory, MemoryFilter, open_store
from tests.deploy_memories import (
    ENTRIES,
    OLD_ERROR,
    OLD_FACT,
    RECENT_INSIGHT,
    RECENT_STRATEGY,
)

from .conftest import call, error_of, server


@pytest.fixture
async def stored(db: Path) -> Path:
    async with open_store(db) as store:
        await store.store_many(ENTRIES)
    return db


async def library(
    db: Path, query: str, ranking: str, passes: MemoryFilter | None = None
) -> list[tuple[str, float]]:
    """(id, score) of what ``retrieve_scored`` answers, only the entries the query matched."""
    async with open_store(db) as store:
        found = await store.retrieve_scored(
            query, 5, ranking=ranking, filter=passes, matched_only=True
        )
    return [(str(entry.id), score) for entry, score in found]


async def recall(client: Any, query: str, **arguments: Any) -> list[tuple[str, float]]:
    """(id, score) of each memory ``recall`` answers."""
    found = (await call(client, "recall", query=query, **arguments))["memories"]
    return [(shown["id"], shown["score"]) for shown in found]


async def recalled(client: Any, query: str, **arguments: Any) -> set[str]:
    """The texts of the memories ``recall`` answers."""
    found = (await call(client, "recall", query=query, **arguments))["memories"]
    return {shown["memory"] for shown in found}


async def test_recall_schema_names_the_rankings_and_the_filters(db):
    async with server(db) as client:
        [tool] = [tool for tool in (await client.list_tools()).tools if tool.name == "recall"]
    properties = tool.input_schema["properties"]
    assert "bm25" == properties["ranking"]["default"]
    assert ["reference", "bm25"] == properties["ranking"]["enum"]
    assert {category.value for category in MemoryCategory} == set(properties["category"]["enum"])
    assert {"category", "tags", "since"} <= set(properties)
    assert ["query"] == tool.input_schema["required"]
    assert tool.description is not None
    assert all(word in tool.description for word in ("bm25", "reference", "since"))


async def test_recall_ranks_by_bm25_unless_asked_for_the_reference(stored):
    # Both rankings agree on what matched "deploy disk"; they order and score it differently.
    bm25 = await library(stored, "deploy disk", "bm25")
    reference = await library(stored, "deploy disk", "reference")
    assert [entry_id for entry_id, _ in bm25] != [entry_id for entry_id, _ in reference]
    async with server(stored, "--no-track-access") as client:
        assert bm25 == await recall(client, "deploy disk")
        assert bm25 == await recall(client, "deploy disk", ranking="bm25")
        assert reference == await recall(client, "deploy disk", ranking="reference")


async def test_a_stopword_query_recalls_nothing_in_bm25_and_pads_in_the_reference(stored):
    async with server(stored, "--no-track-access") as client:
        assert [] == await recall(client, "the of and")
        assert [] == await recall(client, "the of and", include_unmatched=True)
        padded = await recall(client, "the of and", include_unmatched=True, ranking="reference")
    assert 5 == len(padded)


async def test_the_global_ranking_sets_the_servers_default(stored):
    reference = await library(stored, "deploy disk", "reference")
    async with server(stored, "--no-track-access", ranking="reference") as client:
        [tool] = [tool for tool in (await client.list_tools()).tools if tool.name == "recall"]
        assert "reference" == tool.input_schema["properties"]["ranking"]["default"]
        assert reference == await recall(client, "deploy disk")
        assert await library(stored, "deploy disk", "bm25") == await recall(
            client, "deploy disk", ranking="bm25"
        )


@pytest.mark.parametrize("ranking", ["bm25", "reference"])
async def test_category_tags_and_since_keep_only_what_passes_them(stored, ranking):
    async with server(stored, "--no-track-access") as client:
        assert {RECENT_STRATEGY.memory} == await recalled(
            client, "deploy", category="strategy", ranking=ranking
        )
        assert {OLD_FACT.memory, RECENT_STRATEGY.memory} == await recalled(
            client, "deploy", tags=["DEPLOY"], ranking=ranking
        )
        assert {OLD_FACT.memory, OLD_ERROR.memory, RECENT_STRATEGY.memory} == await recalled(
            client, "deploy", tags=["deploy", "disk"], ranking=ranking
        )
        recent = {RECENT_STRATEGY.memory, RECENT_INSIGHT.memory}
        assert recent == await recalled(client, "deploy", since="7d", ranking=ranking)
        assert recent == await recalled(client, "deploy", since="2025-12-01", ranking=ranking)
        assert recent | {OLD_ERROR.memory} == await recalled(
            client, "deploy", since="2025-11-30T23:00", ranking=ranking
        )
        assert {RECENT_STRATEGY.memory} == await recalled(
            client, "deploy", category="strategy", tags=["disk"], since="2w", ranking=ranking
        )
        everything = await recalled(client, "deploy", ranking=ranking)
        assert everything == await recalled(client, "deploy", tags=[], ranking=ranking)
        assert 4 == len(everything)


async def test_the_filters_keep_the_scores_of_the_whole_view(stored):
    """A filter removes memories from the ranking; BM25's statistics stay the view's."""
    passes = MemoryFilter(categories=frozenset({MemoryCategory.STRATEGY}))
    expected = await library(stored, "deploy disk", "bm25", passes)
    async with server(stored, "--no-track-access") as client:
        assert expected == await recall(client, "deploy disk", category="strategy")


async def test_bad_recall_arguments_are_one_line_tool_errors(stored):
    async with server(stored) as client:
        assert (
            "ranking must be one of 'reference', 'bm25', 'vector', 'hybrid', not 'bm26'"
            in await error_of(client, "recall", query="deploy", ranking="bm26")
        )
        assert "unknown category 'opinion'" in await error_of(
            client, "recall", query="deploy", category="opinion"
        )
        assert "'yesterday' is not a moment" in await error_of(
            client, "recall", query="deploy", since="yesterday"
        )
        assert "before the year 1" in await error_of(
            client, "recall", query="deploy", since="9999999w"
        )
        assert 4 == len(await recalled(client, "deploy"))  # the server goes on answering
