"""The MCP ``recall`` on a store with an embedder: hybrid by default, as the library ranks.

The server is a child process: it makes the test suite's fake embedder from the
``python:`` spec its environment gives (``tests`` on its ``PYTHONPATH``; such a
spec is never made from the database alone), never a model.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loopctl_memory import open_store
from tests.deploy_memories import ENTRIES

from .conftest import call, server
from .test_recall import recall

SPEC = "python:tests.embedders:WordsEmbedder"
ROOT = Path(__file__).resolve().parents[2]
ENV = {"PYTHONPATH": str(ROOT), "LOOPCTL_MEMORY_EMBEDDER": SPEC}


@pytest.fixture
async def recorded(db: Path) -> Path:
    async with open_store(db, embedder=SPEC) as store:
        await store.store_many(ENTRIES)
    return db


async def _library(db: Path, query: str, ranking: str) -> list[tuple[str, float]]:
    async with open_store(db, embedder=SPEC) as store:
        found = await store.retrieve_scored(query, 5, ranking=ranking, matched_only=True)
    return [(str(entry.id), score) for entry, score in found]


async def test_recall_ranks_hybrid_by_default_and_offers_the_vector_rankings(recorded):
    async with server(recorded, env=ENV) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        ranking = tools["recall"].input_schema["properties"]["ranking"]
        assert ranking["default"] == "hybrid"
        assert ranking["enum"] == ["reference", "bm25", "vector", "hybrid"]
        for query in ("deploy failed", "why is the cache cold"):
            assert await recall(client, query) == await _library(recorded, query, "hybrid")
            assert await recall(client, query, ranking="vector") == await _library(
                recorded, query, "vector"
            )
        remembered = await call(client, "remember", memory="the cache node was rebooted")
        found = await recall(client, "cache node rebooted", ranking="vector", limit=1)
        assert [memory_id for memory_id, _ in found] == [remembered["id"]]


async def test_without_an_embedder_recall_offers_the_lexical_rankings(db):
    async with open_store(db) as store:
        await store.store_many(ENTRIES)
    async with server(db) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        ranking = tools["recall"].input_schema["properties"]["ranking"]
        assert ranking["default"] == "bm25"
        assert ranking["enum"] == ["reference", "bm25"]
