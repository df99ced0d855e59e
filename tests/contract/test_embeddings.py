"""A store with an embedder, on every backend: no memory is lost to it, and the vectors are its.

InMemoryStore is the oracle of which entries are pending; the SQL stores must
agree with it after every write, update and ``embed_pending``. Ranking by the
vectors is held to it elsewhere.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from loopctl_memory import (
    EmbedderError,
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    MemoryFilter,
    open_store,
)
from loopctl_memory.embedding import unit_rows
from loopctl_memory.sql.tuning import Tuning
from tests.embedders import WordsEmbedder, words_vector


class Switchable(WordsEmbedder):
    """Fails every document call while ``broken``."""

    def __init__(self) -> None:
        super().__init__()
        self.broken = False

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if self.broken:
            raise ConnectionError("embedding service unavailable")
        return super().embed_documents(texts)


# Where the vectors are: all held in the process (the default at this size); in graph
# files read whole for every query (vector_exact 0 still reads views of at most
# vector_candidates whole); in graph files searched for a few candidates, the rest of
# the answer found by widening. Every one must answer as InMemoryStore does.
VECTOR_TUNINGS = {
    "held": Tuning(),
    "graphs read whole": Tuning(vector_loose=8, vector_exact=0, background_builds=False),
    "graphs searched": Tuning(
        vector_loose=8, vector_exact=0, vector_candidates=16, background_builds=False
    ),
}


async def _built(store: Any) -> None:
    """The graphs a retrieval would have had a child build (none for the reference store)."""
    build = getattr(store, "build_indexes", None)
    if build is not None:
        await build()


@pytest.fixture(params=list(VECTOR_TUNINGS))
def vectors_in(request: pytest.FixtureRequest) -> Tuning:
    """The tuning that puts the vectors where the parameter says."""
    return VECTOR_TUNINGS[request.param]


def _entries(first: int, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(MemoryCategory.FACT, f"note {n} about cache {n % 7}")
        for n in range(first, first + count)
    ]


async def test_no_entry_is_lost_and_the_pending_ones_are_inmemorystores(store_factory):
    embedders = Switchable(), Switchable()
    store = await store_factory(embedder=embedders[0])
    oracle = InMemoryStore(embedder=embedders[1])
    steps = [
        (False, _entries(0, 5)),
        (True, _entries(5, 4)),
        (True, _entries(9, 1)),
        (False, _entries(10, 1)),  # a good write makes one pending vector too
        (False, _entries(11, 3)),  # and three more
    ]
    for broken, batch in steps:
        for embedder in embedders:
            embedder.broken = broken
        for target in (store, oracle):
            if len(batch) == 1:
                await target.store(batch[0])
            else:
                await target.store_many(batch)
        assert await store.pending_embeddings() == await oracle.pending_embeddings()
    assert await store.count() == 14
    assert await store.pending_embeddings() == 1
    assert await store.embed_pending(batch_size=2) == 1
    assert await store.pending_embeddings() == 0


async def test_a_changed_memory_is_pending_until_its_new_vector_is_made(store_factory):
    embedder = Switchable()
    store = await store_factory(embedder=embedder)
    entry = MemoryEntry(MemoryCategory.FACT, "cache misses")
    await store.store(entry)
    await store.update(entry.id, relevance=0.5)  # the text stays: so does its vector
    assert await store.pending_embeddings() == 0
    embedder.broken = True
    await store.update(entry.id, memory="database locked")
    assert await store.pending_embeddings() == 1
    with pytest.raises(EmbedderError, match="unavailable"):
        await store.embed_pending()
    embedder.broken = False
    assert await store.embed_pending() == 1
    await store.update(entry.id, memory="database locked again")  # embedded in the update
    assert await store.pending_embeddings() == 0


class RefusesEmpty(WordsEmbedder):
    """An endpoint that refuses an empty text, as some do; records every text it is given."""

    def __init__(self) -> None:
        super().__init__()
        self.given: list[str] = []

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if "" in texts:
            raise ValueError("input must not be empty")
        self.given += texts
        return super().embed_documents(texts)


async def test_an_empty_memory_is_never_sent_to_the_embedder_and_never_pending(store_factory):
    embedder = RefusesEmpty()
    store = await store_factory(embedder=embedder)
    empty = MemoryEntry(MemoryCategory.FACT, "")
    await store.store_many([MemoryEntry(MemoryCategory.FACT, "cache misses"), empty])
    await store.store(MemoryEntry(MemoryCategory.FACT, ""))
    changed = MemoryEntry(MemoryCategory.FACT, "database locked")
    await store.store(changed)
    await store.update(changed.id, memory="")
    assert await store.pending_embeddings() == 0
    assert "" not in embedder.given
    assert embedder.given[-2:] == ["cache misses", "database locked"]
    found = await store.retrieve("cache misses", 10, ranking="vector")
    assert found[0].memory == "cache misses"
    assert await store.count() == 4


@pytest.mark.parametrize("backend", ["sqlite-file"], indirect=True)
async def test_the_vectors_are_the_embedders_unit_vectors_in_binary32(store_factory, tmp_path):
    store = await store_factory(embedder=WordsEmbedder())
    entries = _entries(0, 6)
    await store.store_many(entries[:5])
    await store.store(entries[5])
    with contextlib.closing(sqlite3.connect(tmp_path / "memory.db")) as db:
        rows = db.execute(
            "SELECT e.memory, v.vector FROM vectors v JOIN entries e ON e.seq = v.entry_seq"
            " ORDER BY e.seq"
        ).fetchall()
        ((name, dims),) = db.execute(
            "SELECT name, dims FROM embedders"
            " JOIN index_state ON index_state.embedder_id = embedders.id"
        ).fetchall()
    assert (name, dims) == ("fake:words", 16)
    expected = unit_rows([words_vector(e.memory, 16) for e in entries], 6, 16)
    assert [memory for memory, _ in rows] == [e.memory for e in entries]
    assert [np.frombuffer(blob, "<f4").tobytes() for _, blob in rows] == [
        row.astype("<f4").tobytes() for row in expected
    ]


@pytest.mark.parametrize("backend", ["sqlite-file"], indirect=True)
async def test_a_store_refuses_another_embedder_naming_both(store_factory, tmp_path: Path):
    first = await store_factory(embedder=WordsEmbedder())
    await first.store(MemoryEntry(MemoryCategory.FACT, "x"))
    await first.close()
    with pytest.raises(
        EmbedderError, match=r"by 'fake:words' \(16 dims\), not 'other' \(16 dims\)"
    ):
        await open_store(tmp_path / "memory.db", embedder=WordsEmbedder(name="other"))
    with pytest.raises(EmbedderError, match=r"not 'fake:words' \(8 dims\)"):
        await open_store(tmp_path / "memory.db", embedder=WordsEmbedder(dims=8))
    async with open_store(tmp_path / "memory.db") as plain:  # no embedder: lexical only
        assert await plain.pending_embeddings() == 0


QUERIES = ["cache", "note 3", "about cache 5", "zzz", ""]


async def _same_rankings(store, oracle, passes=None, *, searched=False) -> None:
    """The same answers as the oracle's, to the bit.

    ``searched``: the store's graphs were searched for fewer candidates than it
    holds, so which of several entries of one score come back may differ, but
    never the scores, and each entry's score is its own exact one.
    """
    for ranking in ("vector", "hybrid"):
        for query in QUERIES:
            every = await oracle.retrieve_scored(query, 10_000, ranking=ranking, filter=passes)
            score_of = {entry.id: score for entry, score in every}
            for limit in (0, 1, 5, 100):
                expected = await oracle.retrieve_scored(
                    query, limit, ranking=ranking, filter=passes
                )
                found = await store.retrieve_scored(query, limit, ranking=ranking, filter=passes)
                where = (ranking, query, limit)
                if not searched:
                    assert [(e.id, s) for e, s in found] == [(e.id, s) for e, s in expected], where
                    continue
                assert [s for _, s in found] == [s for _, s in expected], where
                assert all(score_of[entry.id] == score for entry, score in found), where


async def test_the_vector_and_hybrid_rankings_are_inmemorystores(store_factory, vectors_in):
    embedders = Switchable(), Switchable()
    store = await store_factory(embedder=embedders[0], tuning=vectors_in)
    oracle = InMemoryStore(embedder=embedders[1])
    batches = [_entries(0, 20), _entries(20, 10), _entries(30, 15)]
    for number, batch in enumerate(batches):
        for embedder in embedders:
            embedder.broken = number == 1  # the second batch is pending
        for target in (store, oracle):
            await target.store_many(batch)
        await _built(store)
        await _same_rankings(store, oracle, searched=vectors_in.vector_candidates < 100)
    await _same_rankings(
        store,
        oracle,
        MemoryFilter(categories=[MemoryCategory.FACT]),
        searched=vectors_in.vector_candidates < 100,
    )
    first = batches[0][0]
    for target in (store, oracle):
        await target.update(first.id, memory="a different note entirely")
        await target.delete(batches[0][1].id)
    await _same_rankings(store, oracle, searched=vectors_in.vector_candidates < 100)
    for target in (store, oracle):
        await target.embed_pending()
    await _built(store)
    await _same_rankings(store, oracle, searched=vectors_in.vector_candidates < 100)


async def test_retrieve_explained_gives_the_parts_inmemorystore_gives(store_factory, vectors_in):
    embedders = Switchable(), Switchable()
    store = await store_factory(embedder=embedders[0], tuning=vectors_in)
    oracle = InMemoryStore(embedder=embedders[1])
    batches = [_entries(0, 12), _entries(12, 4)]
    for number, batch in enumerate(batches):
        for embedder in embedders:
            embedder.broken = number == 1  # pending: BM25 part only
        for target in (store, oracle):
            await target.store_many(batch)
        await _built(store)
    for ranking in ("reference", "bm25", "vector", "hybrid"):
        for query in ("cache 3", "note 13 about", "zzz"):
            found = await store.retrieve_explained(query, 6, ranking=ranking)
            expected = await oracle.retrieve_explained(query, 6, ranking=ranking)
            assert [(e.id, p) for e, p in found] == [(e.id, p) for e, p in expected]
            scored = await store.retrieve_scored(query, 6, ranking=ranking)
            assert [(e.id, p.score) for e, p in found] == [(e.id, s) for e, s in scored]
    found = await store.retrieve_explained("note 13 about cache", 16, ranking="hybrid")
    assert any(parts.cosine is None for _, parts in found)  # the pending ones
    for _, parts in found:
        assert parts.bm25 is not None
        assert parts.bm25_max is not None
        assert parts.cosine_min is not None
        assert parts.cosine_max is not None
        cosine_part = (
            0.0
            if parts.cosine is None
            else (parts.cosine - parts.cosine_min) / (parts.cosine_max - parts.cosine_min)
        )
        assert parts.score == 0.5 * parts.bm25 / parts.bm25_max + 0.5 * cosine_part


async def test_a_filter_and_pending_entries_rank_as_in_inmemorystore(store_factory, vectors_in):
    """A filter that removes entries, with matched entries still pending: every hybrid path."""
    embedders = Switchable(), Switchable()
    store = await store_factory(embedder=embedders[0], tuning=vectors_in)
    oracle = InMemoryStore(embedder=embedders[1])
    kinds = [MemoryCategory.FACT, MemoryCategory.INSIGHT, MemoryCategory.STRATEGY]
    batches = [
        [
            MemoryEntry(kinds[n % 3], f"note {n} about cache {n % 5}", tags=[f"t{n % 4}"])
            for n in range(first, first + 15)
        ]
        for first in (0, 15, 30)
    ]
    for number, batch in enumerate(batches):
        for embedder in embedders:
            embedder.broken = number == 1
        for target in (store, oracle):
            await target.store_many(batch)
        await _built(store)
    for passes in (
        None,
        MemoryFilter(categories=[MemoryCategory.INSIGHT]),
        MemoryFilter(tags_any=["t1", "t2"]),
    ):
        await _same_rankings(store, oracle, passes, searched=vectors_in.vector_candidates < 100)


class FailsOnNote300(WordsEmbedder):
    """Fails every call given the memory of note 300."""

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if any(text.startswith("note 300 ") for text in texts):
            self.document_calls += 1
            raise ConnectionError("the call with note 300 fails")
        return super().embed_documents(texts)


async def test_a_big_write_goes_to_the_embedder_in_calls_and_only_a_failed_call_is_pending(
    store_factory, vectors_in
):
    embedders = FailsOnNote300(), FailsOnNote300()
    store = await store_factory(embedder=embedders[0], tuning=vectors_in)
    oracle = InMemoryStore(embedder=embedders[1])
    entries = _entries(0, 600)  # calls of 256, 256 and 88 texts: the second fails
    for target, embedder in zip((store, oracle), embedders, strict=True):
        before = embedder.document_calls
        await target.store_many(entries)
        assert await target.pending_embeddings() == 256
        assert embedder.document_calls - before == 3
    await _same_rankings(store, oracle, searched=vectors_in.vector_candidates < 100)
    late = _entries(600, 3)
    for target, embedder in zip((store, oracle), embedders, strict=True):
        before = embedder.document_calls  # a good write makes 3 more, in one more call
        await target.store_many(late)
        assert await target.pending_embeddings() == 253
        assert embedder.document_calls - before == 2


class RefusesPoison(WordsEmbedder):
    """Fails every call given a memory with the word "poison" in it."""

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if any("poison" in text for text in texts):
            self.document_calls += 1
            raise ValueError("this text is refused")
        return super().embed_documents(texts)


async def test_a_text_the_embedder_always_refuses_is_not_retried_by_every_write(store_factory):
    """After the embedder fails on the pending entries again, writes stop trying them until
    another embedding fails; ``embed_pending`` still tries whenever asked."""
    embedders = RefusesPoison(), RefusesPoison()
    store = await store_factory(embedder=embedders[0])
    oracle = InMemoryStore(embedder=embedders[1])
    for target, embedder in zip((store, oracle), embedders, strict=True):
        before = embedder.document_calls  # a scoped view's store was filled with it
        await target.store(MemoryEntry(MemoryCategory.FACT, "a poison note"))
        assert embedder.document_calls - before == 1
        for entry in _entries(0, 5):
            await target.store(entry)
        assert embedder.document_calls - before == 1 + 2 + 4  # the first good write retried
        await target.store(MemoryEntry(MemoryCategory.FACT, "more poison"))
        await target.store(_entries(5, 1)[0])
        assert embedder.document_calls - before == 7 + 1 + 2  # a new failure: one more retry
        with pytest.raises(EmbedderError, match="this text is refused"):
            await target.embed_pending()
        assert embedder.document_calls - before == 11
        assert await target.pending_embeddings() == 2


async def test_the_vector_rankings_list_no_memory_scored_zero_or_less(store_factory):
    store = await store_factory(embedder=WordsEmbedder())
    oracle = InMemoryStore(embedder=WordsEmbedder())
    texts = ("alpha one", "beta two", "gamma three", "delta four", "")
    for target in (store, oracle):
        await target.store_many([MemoryEntry(MemoryCategory.FACT, text) for text in texts])
    for ranking in ("vector", "hybrid"):
        for query in ("alpha", "beta two", "nothing shared"):
            found = await store.retrieve_scored(query, 10, ranking=ranking)
            assert all(score > 0 for _, score in found), (ranking, query, found)
            expected = await oracle.retrieve_scored(query, 10, ranking=ranking)
            assert [(e.memory, s) for e, s in expected] == [(e.memory, s) for e, s in found]
    hybrid = await store.retrieve("alpha", 10, ranking="hybrid")
    assert "alpha one" == hybrid[0].memory
    assert len(hybrid) < len(texts) - 1  # the farthest vector with no word in common: 0


@pytest.mark.parametrize("backend", ["sqlite-file"], indirect=True)
async def test_without_an_embedder_pending_counts_the_recorded_ones_and_embedding_refuses(
    store_factory, tmp_path: Path
):
    embedder = Switchable()
    first = await store_factory(embedder=embedder)
    await first.store(MemoryEntry(MemoryCategory.FACT, "made"))
    embedder.broken = True
    await first.store(MemoryEntry(MemoryCategory.FACT, "left pending"))
    assert 1 == await first.pending_embeddings()
    await first.close()
    async with open_store(tmp_path / "memory.db") as plain:  # no embedder
        recorded = await plain.recorded_embedder()
        assert recorded is not None
        assert 1 == recorded.pending == await plain.pending_embeddings()
        with pytest.raises(EmbedderError, match="needs an embedder"):
            await plain.embed_pending()
        assert 1 == await plain.pending_embeddings()
    with pytest.raises(EmbedderError, match="needs an embedder"):
        await InMemoryStore([MemoryEntry(MemoryCategory.FACT, "x")]).embed_pending()
    async with open_store(":memory:") as never:
        assert 0 == await never.pending_embeddings()
        with pytest.raises(EmbedderError, match="needs an embedder"):
            await never.embed_pending()
