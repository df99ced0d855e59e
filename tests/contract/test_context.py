"""Context on every backend: neighbours in a scope's stream vouch for an entry, as the oracle says.

``InMemoryStore`` computes context plainly over its one stream
(:mod:`loopctl_memory.plain_ranking`); every SQL backend, view and the sync
store must give the same entries with the same scores and parts, to the bit,
in ``bm25``, ``vector`` and ``hybrid``, with ``"auto"``, 0 and a fixed weight,
with and without a filter.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from loopctl_memory import (
    InMemoryStore,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    open_store,
)
from loopctl_memory.context import FULL_WEIGHT
from tests.conftest import AnyStore, StoreFactory
from tests.embedders import WordsEmbedder

CONTEXT_RANKINGS = ("bm25", "vector", "hybrid")
TOPICS = [
    ["deploy", "release", "rollback", "staging"],
    ["cache", "redis", "eviction", "ttl"],
    ["database", "locked", "retry", "transaction"],
    ["pytest", "fixture", "flaky", "timeout"],
    ["invoice", "refund", "customer", "billing"],
]
NOISE = ["today", "later", "again", "maybe", "checked", "noted", "ok"]
QUERIES = ["deploy rollback", "redis ttl", "locked retry", "flaky fixture", "refund", "ok", ""]


def stream(seed: int, *, coherent: bool, count: int = 90) -> list[MemoryEntry]:
    """Runs of entries on one topic each (coherent), or every entry on a random topic."""
    rng = random.Random(seed)
    entries = []
    topic = rng.randrange(len(TOPICS))
    for n in range(count):
        if not coherent or n % 10 == 0:
            topic = rng.randrange(len(TOPICS))
        words = rng.sample(TOPICS[topic], 3) + rng.sample(NOISE, 1)
        if n % 7 == 3:  # an entry no topic word names: only its neighbours tell
            words = rng.sample(NOISE, 3)
        rng.shuffle(words)
        entries.append(
            MemoryEntry(
                MemoryCategory.FACT,
                " ".join(words),
                tags=["odd"] if n % 2 else [],
                id=uuid.UUID(int=seed * 1_000 + n + 1),
            )
        )
    return entries


async def _both(
    store_factory: StoreFactory, entries: list[MemoryEntry], **options: Any
) -> tuple[AnyStore, InMemoryStore]:
    store = await store_factory(embedder=WordsEmbedder(dims=64), **options)
    await store.store_many(entries)
    oracle = InMemoryStore(embedder=WordsEmbedder(dims=64), **options)
    await oracle.store_many(entries)
    return store, oracle


@pytest.mark.parametrize("ranking", CONTEXT_RANKINGS)
@pytest.mark.parametrize("coherent", [True, False], ids=["a-stream", "independent"])
async def test_context_ranks_as_the_plain_definition(store_factory, ranking, coherent):
    store, oracle = await _both(store_factory, stream(3, coherent=coherent))
    odd = MemoryFilter(tags_any=["odd"])
    for context in ("auto", 0.0, 0.3):
        for query in QUERIES:
            for passes in (None, odd):
                expected = await oracle.retrieve_explained(
                    query, 7, ranking=ranking, context=context, filter=passes
                )
                found = await store.retrieve_explained(
                    query, 7, ranking=ranking, context=context, filter=passes
                )
                assert [(e.id, p) for e, p in expected] == [(e.id, p) for e, p in found]


async def test_auto_weighs_a_stream_fully(store_factory):
    store, _ = await _both(store_factory, stream(5, coherent=True))
    found = await store.retrieve_explained("deploy redis locked flaky refund", 5, ranking="bm25")
    assert {FULL_WEIGHT} == {parts.context_weight for _, parts in found}


async def test_auto_ranks_independent_entries_as_without_context(store_factory):
    store, _ = await _both(store_factory, stream(6, coherent=False))
    for ranking in CONTEXT_RANKINGS:
        for query in QUERIES:
            plain = await store.retrieve_scored(query, 10, ranking=ranking, context=0)
            assert plain == await store.retrieve_scored(query, 10, ranking=ranking)


def _run(*texts: str) -> list[MemoryEntry]:
    return [MemoryEntry(MemoryCategory.FACT, text) for text in texts]


async def test_a_memory_no_word_matched_is_found_by_its_neighbours(store_factory):
    store = await store_factory()
    entries = _run(
        "unrelated note about lunch",
        "the deploy of the cache layer started",
        "it failed twice and then went through",
        "cache deploy finished at noon",
        "another unrelated note",
    )
    await store.store_many(entries)
    found = await store.retrieve_explained("cache deploy", 5, ranking="bm25", context=0.25)
    parts = {entry.memory: explained for entry, explained in found}
    middle = parts["it failed twice and then went through"]
    assert 0.0 == middle.bm25
    assert 0.0 < middle.context == middle.score
    assert 0.25 == middle.context_weight
    own = {e.memory: p.bm25 for e, p in found}
    assert middle.context == 0.25 * (
        own["the deploy of the cache layer started"] + own["cache deploy finished at noon"]
    )
    for explained in parts.values():
        assert explained.score == explained.bm25 + explained.context
    plain = await store.retrieve("cache deploy", 5, ranking="bm25", context=0)
    assert entries[2] not in plain


async def test_a_filtered_out_neighbour_still_vouches_and_a_removed_one_does_not(store_factory):
    store = await store_factory()
    entries = _run("cache deploy started", "it failed twice", "then it went through")
    entries[1].tags.append("kept")
    await store.store_many(entries)
    kept = MemoryFilter(tags_any=["kept"])
    found = await store.retrieve_explained(
        "cache deploy", 5, ranking="bm25", context=0.5, filter=kept
    )
    assert [entries[1].id] == [entry.id for entry, _ in found]
    assert found[0][1].context > 0  # from the entry the filter left out
    await store.delete(entries[0].id)
    assert [] == await store.retrieve("cache deploy", 5, ranking="bm25", context=0.5, filter=kept)


async def test_the_reference_ranking_takes_no_context(store_factory):
    store = await store_factory()
    await store.store_many(_run("cache deploy", "it failed"))
    plain = await store.retrieve_scored("cache", 5, ranking="reference")
    assert plain == await store.retrieve_scored("cache", 5, ranking="reference", context="auto")
    assert plain == await store.retrieve_scored("cache", 5, ranking="reference", context=0)
    with pytest.raises(InvalidArgumentError, match="reference ranking takes no context"):
        await store.retrieve("cache", 5, ranking="reference", context=0.25)


@pytest.mark.parametrize("bad", ["sometimes", -0.1, float("nan"), float("inf"), True])
async def test_a_context_that_is_neither_auto_nor_a_weight_is_refused(store_factory, bad):
    store = await store_factory()
    with pytest.raises(InvalidArgumentError, match="context"):
        await store.retrieve("cache", 5, ranking="bm25", context=bad)
    with pytest.raises(InvalidArgumentError, match="context"):
        await store_factory(context=bad)


async def test_a_view_over_descendants_keeps_each_scope_its_own_stream(tmp_path):
    async with open_store(tmp_path / "memory.db") as store:
        first, second = store.scope("team/a"), store.scope("team/b")
        for n in range(3):  # interleaved: in seq order a0 b0 a1 b1 a2 b2
            await first.store(MemoryEntry(MemoryCategory.FACT, ["cache deploy", "x", "y"][n]))
            await second.store(MemoryEntry(MemoryCategory.FACT, ["z", "cache deploy", "w"][n]))
        view = store.scope("team", descendants=True)
        found = await view.retrieve_explained("cache deploy", 10, ranking="bm25", context=0.5)
        matched = [p.bm25 for entry, p in found if entry.memory == "cache deploy"]
        assert 2 == len(matched)
        assert matched[0] == matched[1]
        score = matched[0]
        assert score is not None
        # a1 ("x") is one after a0; a2 ("y") two after; b0 ("z") and b2 ("w") one from b1.
        assert {"x": 0.5 * score, "z": 0.5 * score, "y": 0.25 * score, "w": 0.5 * score} == {
            entry.memory: p.context for entry, p in found if entry.memory != "cache deploy"
        }


async def test_the_store_ranks_with_the_context_it_was_opened_with(store_factory):
    store = await store_factory(context=0.5)
    await store.store_many(_run("cache deploy started", "it failed twice", "then it went through"))
    found = await store.retrieve_explained("cache deploy", 5, ranking="bm25")
    assert {0.5} == {parts.context_weight for _, parts in found}
    assert 3 == len(found)  # the second one step from the match, the third two steps
    assert [found[0][0]] == await store.retrieve("cache deploy", 5, ranking="bm25", context=0)


class FailsOnWord(WordsEmbedder):
    """Fails every call one of whose texts holds ``word`` (the same calls in any store)."""

    def __init__(self, word: str, dims: int) -> None:
        super().__init__(dims)
        self._word = word
        self.broken = True

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self.broken and any(self._word in text for text in texts):
            raise ConnectionError("embedding service unavailable")
        return super().embed_documents(texts)


@pytest.mark.parametrize("ranking", ["vector", "hybrid"])
async def test_pending_entries_are_vouched_for_and_vouch_by_their_own_score(store_factory, ranking):
    """An entry without a vector scores 0 in vector (its BM25 part in hybrid) and competes
    when its neighbours give it a part; the embedder fails on the middle batch's texts."""
    embedders = (FailsOnWord("offline", dims=64), FailsOnWord("offline", dims=64))
    store = await store_factory(embedder=embedders[0])
    oracle = InMemoryStore(embedder=embedders[1])
    entries = stream(9, coherent=True, count=60)
    for n in range(20, 40):
        entries[n] = dataclasses.replace(entries[n], memory=f"{entries[n].memory} offline")
    for start in range(0, len(entries), 20):
        await store.store_many(entries[start : start + 20])
        await oracle.store_many(entries[start : start + 20])
    assert 0 < await oracle.pending_embeddings() == await store.pending_embeddings()
    for fixed in (False, True):  # then the same once the pending entries have their vectors
        if fixed:
            for embedder in embedders:
                embedder.broken = False
            assert await oracle.embed_pending() == await store.embed_pending() > 0
        for context in ("auto", 0.0, 0.5):
            for query in QUERIES:
                expected = await oracle.retrieve_explained(
                    query, 60, ranking=ranking, context=context
                )
                found = await store.retrieve_explained(query, 60, ranking=ranking, context=context)
                assert [(e.id, p) for e, p in expected] == [(e.id, p) for e, p in found]


@pytest.mark.parametrize("ranking", CONTEXT_RANKINGS)
async def test_context_beyond_the_first_candidates_ranks_as_the_plain_definition(
    store_factory, ranking
):
    """Hundreds of matches and a heavy weight: the candidates widen until none left out can win."""
    store, oracle = await _both(store_factory, stream(11, coherent=True, count=400))
    for context in (0.25, 2.0):
        for query in ("deploy redis locked flaky refund", "ok maybe", "retry"):
            for limit in (1, 3, 30):
                expected = await oracle.retrieve_scored(
                    query, limit, ranking=ranking, context=context
                )
                found = await store.retrieve_scored(query, limit, ranking=ranking, context=context)
                assert [(e.id, s) for e, s in expected] == [(e.id, s) for e, s in found]


async def test_a_store_opened_with_a_weight_still_ranks_by_the_reference(store_factory):
    """The store's own weight applies to the rankings that take context, not to the seed's."""
    store = await store_factory(context=0.5)
    await store.store_many(_run("cache deploy started", "it failed twice"))
    found = await store.retrieve_scored("cache", 5, ranking="reference", context=0)
    assert found == await store.retrieve_scored("cache", 5, ranking="reference")
