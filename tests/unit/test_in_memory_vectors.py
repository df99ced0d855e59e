"""InMemoryStore's vector and hybrid rankings (every backend's oracle) and its pending vectors."""

from __future__ import annotations

import random
import uuid

import numpy as np
import pytest

from loopctl_memory import (
    EmbedderError,
    InMemoryStore,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
)
from loopctl_memory import bm25 as bm25_definition
from loopctl_memory.bm25_tokens import document_tokens, query_tokens
from loopctl_memory.embedding import unit_rows
from tests.embedders import FlakyEmbedder, WordsEmbedder, words_vector

WORDS = [
    *("cache", "caching", "retry", "database", "locked", "timeout", "pytest", "make"),
    *("the", "is", "glob", "file", "search", "naïve", "über", "e3b0c442", "run_id=42"),
]
QUERIES = ["cache", "database locked", "file search glob", "the", "über naïve", "zzz", ""]


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            rng.choice(list(MemoryCategory)),
            " ".join(rng.choice(WORDS) for _ in range(rng.choice([0, 1, 2, 4, 8]))),
            tags=rng.sample(["db", "ci", "tool"], rng.randint(0, 2)),
            relevance=rng.choice([0.1, 0.5, 1.0]),
            id=uuid.UUID(int=rng.getrandbits(128)),
        )
        for _ in range(count)
    ]


def _brute_cosines(entries: list[MemoryEntry], query: str, dims: int) -> list[float]:
    """numpy brute force: float32 unit vectors, their dot products in binary64, to binary32."""
    rows = unit_rows([words_vector(entry.memory, dims) for entry in entries], len(entries), dims)
    wanted = unit_rows([words_vector(f"query {query}", dims)], 1, dims)[0]
    return [float(np.float32(row.astype(np.float64) @ wanted.astype(np.float64))) for row in rows]


def _best(scores: list[float], entries: list[MemoryEntry], keep: list[bool], limit: int):
    order = sorted(
        (n for n in range(len(entries)) if keep[n] and scores[n] > 0),  # none scored 0 or less
        key=lambda n: (-scores[n], n),
    )  # best first, ties in insertion order
    return [(entries[n].id, scores[n]) for n in order[:limit]]


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_vector_ranking_is_the_brute_force_cosine(seed):
    rng = random.Random(seed)
    entries = _entries(rng, 120)
    store = InMemoryStore(embedder=WordsEmbedder(), ranking="vector")
    await store.store_many(entries[:60])
    for entry in entries[60:]:
        await store.store(entry)
    passes = MemoryFilter(tags_any=["db"])
    for query in QUERIES:
        scores = _brute_cosines(entries, query, 16)
        for limit in (0, 1, 5, 1_000):
            found = await store.retrieve_scored(query, limit)
            assert [(e.id, s) for e, s in found] == _best(
                scores, entries, [True] * len(entries), limit
            )
            filtered = await store.retrieve_scored(query, limit, filter=passes)
            assert [(e.id, s) for e, s in filtered] == _best(
                scores, entries, [passes.matches(entry) for entry in entries], limit
            )


@pytest.mark.parametrize("seed", [4, 5])
async def test_hybrid_is_bm25_over_its_max_plus_min_max_cosine_equally(seed):
    rng = random.Random(seed)
    entries = _entries(rng, 80)
    store = InMemoryStore(entries, embedder=WordsEmbedder())
    await store.embed_pending()
    documents = [
        document_tokens(entry.memory.lower(), [t.lower() for t in entry.tags]) for entry in entries
    ]
    for query in QUERIES:
        cosine = _brute_cosines(entries, query, 16)
        lexical = bm25_definition.scores(
            query_tokens(query), documents, bm25_definition.Bm25Parameters()
        )
        top = max(lexical)
        low, high = min(cosine), max(cosine)
        expected = [
            0.5 * (score / top if top > 0 else 0.0)
            + 0.5 * ((c - low) / (high - low) if high > low else 0.0)
            for score, c in zip(lexical, cosine, strict=True)
        ]
        found = await store.retrieve_scored(query, 10, ranking="hybrid")
        assert [(e.id, s) for e, s in found] == _best(expected, entries, [True] * 80, 10)


async def test_an_entry_is_stored_whatever_the_embedder_does_and_pending_until_embedded():
    rng = random.Random(6)
    entries = _entries(rng, 30)
    embedder = FlakyEmbedder(lambda call: call % 2 == 0)  # every other call fails
    store = InMemoryStore(embedder=embedder)
    for entry in entries[:20]:
        await store.store(entry)
    await store.store_many(entries[20:])
    assert await store.count() == 30
    pending = await store.pending_embeddings()
    assert 0 < pending < 30
    seen = await store.retrieve_scored("cache", 1_000, ranking="vector")
    assert len(await store.retrieve("cache", 1_000, ranking="bm25")) == len(
        await InMemoryStore(entries).retrieve("cache", 1_000, ranking="bm25")
    )  # the lexical rankings see every entry
    embedder._fails = lambda call: False  # the service is back
    assert await store.embed_pending(batch_size=4) == pending
    assert await store.pending_embeddings() == 0
    after = await store.retrieve_scored("cache", 1_000, ranking="vector")
    positive = [score for score in _brute_cosines(entries, "cache", 16) if score > 0]
    assert len(after) == len(positive)  # every entry scored above 0, once all have a vector
    assert {(e.id, s) for e, s in seen} < {(e.id, s) for e, s in after}  # none pending before


async def test_a_successful_write_also_embeds_the_pending_entries():
    embedder = FlakyEmbedder(lambda call: call == 1)
    store = InMemoryStore(embedder=embedder)
    await store.store(MemoryEntry(MemoryCategory.FACT, "first"))
    assert await store.pending_embeddings() == 1
    await store.store(MemoryEntry(MemoryCategory.FACT, "second"))
    assert await store.pending_embeddings() == 0


async def test_embed_pending_raises_when_the_embedder_fails_and_keeps_what_it_made():
    embedder = FlakyEmbedder(lambda call: call == 1 or call >= 3)
    store = InMemoryStore(embedder=embedder)
    await store.store_many([MemoryEntry(MemoryCategory.FACT, f"note {n}") for n in range(4)])
    assert await store.pending_embeddings() == 4
    with pytest.raises(EmbedderError, match="ConnectionError"):
        await store.embed_pending(batch_size=2)  # call 2 succeeds, call 3 fails
    assert await store.pending_embeddings() == 2


async def test_a_changed_memory_is_pending_until_its_new_vector_is_made():
    embedder = FlakyEmbedder(lambda call: call == 2)
    store = InMemoryStore(embedder=embedder, ranking="vector")
    entry = MemoryEntry(MemoryCategory.FACT, "cache misses")
    await store.store(entry)
    await store.update(entry.id, memory="database locked")  # call 2 fails
    assert await store.pending_embeddings() == 1
    assert await store.retrieve("database", 5) == []
    await store.embed_pending()
    [(found, score)] = await store.retrieve_scored("database locked", 5)
    assert found.memory == "database locked"
    assert score == _brute_cosines([found], "database locked", 16)[0]


async def test_a_query_whose_vector_cannot_be_made_is_an_embedder_error():
    class NoQueries(WordsEmbedder):
        def embed_query(self, text):
            raise TimeoutError("model server gone")

    store = InMemoryStore([MemoryEntry(MemoryCategory.FACT, "cache")], embedder=NoQueries())
    with pytest.raises(EmbedderError, match="model server gone"):
        await store.retrieve("cache", 5, ranking="hybrid")
    assert len(await store.retrieve("cache", 5, ranking="bm25")) == 1


async def test_the_embedding_rankings_need_an_embedder():
    with pytest.raises(
        InvalidArgumentError, match="ranking 'vector' needs a store with an embedder"
    ):
        InMemoryStore(ranking="vector")
    with pytest.raises(InvalidArgumentError, match="ranking 'hybrid' needs"):
        await InMemoryStore().retrieve("x", 5, ranking="hybrid")
    assert await InMemoryStore().pending_embeddings() == 0
