"""Changing models: ``reembed`` on every backend, the recorded spec, and a process left behind.

InMemoryStore is the oracle of the rankings after a reembed; the SQL stores
must also resume an interrupted one, and never let a process still holding
the old embedder compare its query vectors with the new model's.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import text

from loopctl_memory import (
    EmbedderError,
    InMemoryStore,
    InvalidArgumentError,
    MemoryCategory,
    MemoryEntry,
    open_store,
)
from tests.conftest import SCOPED, SHARED_BACKENDS, shared_target
from tests.contract.test_embeddings import Switchable, _entries, _same_rankings
from tests.embedders import WordsEmbedder, fake_provider

SPEC = "python:tests.embedders:WordsEmbedder"
KNOWN = "fastembed:fake-words"  # a known provider's spec, made by tests.embedders.fake_provider


class FailsOnCall(WordsEmbedder):
    """The next model (24 dims): raises on document call ``failing`` (from 1), if any."""

    def __init__(self, failing: int = 0) -> None:
        super().__init__(dims=24, name="fake:next")
        self._failing = failing

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        if self.document_calls + 1 == self._failing:
            self.document_calls += 1
            raise ConnectionError("the new model's service is down")
        return super().embed_documents(texts)


async def _filled(targets, first: list[MemoryEntry], pending: list[MemoryEntry]) -> None:
    for target in targets:
        embedder = target.embedder
        await target.store_many(first)
        embedder.broken = True
        await target.store_many(pending)  # pending with the old model: made by the new one
        embedder.broken = False


def _outside(backend: str) -> int:
    """The entries of the store outside the view under test (a reembed makes theirs too)."""
    return 15 if backend.endswith(SCOPED) else 0  # conftest's five scopes of three


async def test_reembed_makes_every_vector_anew_and_ranks_as_inmemorystore(backend, store_factory):
    store = await store_factory(embedder=Switchable())
    oracle = InMemoryStore(embedder=Switchable())
    await _filled((store, oracle), _entries(0, 12), _entries(12, 3))
    seen: list[tuple[int, int]] = []
    made = await store.reembed(FailsOnCall(), batch_size=4, progress=lambda *p: seen.append(p))
    assert made - _outside(backend) == await oracle.reembed(FailsOnCall(), batch_size=4) == 15
    total = seen[0][1]
    assert seen[0] == (0, total)
    assert seen[-1] == (total, total)
    assert [done for done, _ in seen] == sorted(done for done, _ in seen)
    assert store.embedder is not None
    assert (store.embedder.name, store.embedder.dims) == ("fake:next", 24)
    assert await store.pending_embeddings() == 0
    await _same_rankings(store, oracle)
    entry = MemoryEntry(MemoryCategory.FACT, "a note written after the change")
    for target in (store, oracle):  # writes embed with the new model
        await target.store(entry)
    await _same_rankings(store, oracle)


async def test_a_failed_reembed_changes_nothing_and_the_next_one_resumes(backend, store_factory):
    store = await store_factory(embedder=Switchable())
    oracle = InMemoryStore(embedder=Switchable())
    await _filled((store, oracle), _entries(0, 12), _entries(12, 3))
    before = await store.retrieve_scored("cache 3", 5, ranking="vector")
    for target in (store, oracle):
        with pytest.raises(EmbedderError, match="service is down"):
            await target.reembed(FailsOnCall(failing=3), batch_size=4)
    assert store.embedder is not None
    assert store.embedder.name == "fake:words"
    assert await store.retrieve_scored("cache 3", 5, ranking="vector") == before
    seen: list[tuple[int, int]] = []
    made = await store.reembed(FailsOnCall(), batch_size=4, progress=lambda *p: seen.append(p))
    assert made - _outside(backend) == await oracle.reembed(FailsOnCall(), batch_size=4) == 7
    assert seen[0][0] == 8
    await _same_rankings(store, oracle)


async def test_a_store_without_an_embedder_can_take_one_by_reembed(backend, store_factory):
    store = await store_factory()
    oracle = InMemoryStore()
    entries = _entries(0, 9)
    for target in (store, oracle):
        await target.store_many(entries)
        with pytest.raises(InvalidArgumentError, match="needs a store with an embedder"):
            await target.retrieve("cache", 3, ranking="hybrid")
    assert await oracle.reembed(FailsOnCall(), batch_size=2) == 9
    assert await store.reembed(FailsOnCall(), batch_size=2) == 9 + _outside(backend)
    assert await store.pending_embeddings() == 0
    await _same_rankings(store, oracle)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_process_left_with_the_old_model_never_ranks_by_it(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    async with (
        open_store(target, embedder=WordsEmbedder()) as changing,
        open_store(target, embedder=WordsEmbedder()) as behind,
    ):
        early = _entries(0, 6)
        await changing.store_many(early)
        assert len(await behind.retrieve("cache", 3, ranking="vector")) == 3
        await changing.reembed(FailsOnCall())
        for ranking in ("vector", "hybrid"):
            with pytest.raises(EmbedderError, match="reembed replaced this one"):
                await behind.retrieve("cache", 3, ranking=ranking)
        assert len(await behind.retrieve("cache", 3, ranking="bm25")) == 3
        late = MemoryEntry(MemoryCategory.FACT, "stored by the process left behind")
        await behind.store(late)  # stored, with no vector of the old model
        assert await changing.get(late.id) == late
        await behind.update(early[0].id, memory="rewritten by the process left behind")
        assert await changing.pending_embeddings() == 2
        assert await changing.embed_pending() == 2
        async with changing.engine.connect() as connection:  # no vector of the old model left
            held = await connection.execute(text("SELECT count(*) FROM vectors"))
            assert held.scalar_one() == await changing.count() == 7
        found = await changing.retrieve_scored(late.memory, 1, ranking="vector")
        assert [e.id for e, _ in found] == [late.id]
    with pytest.raises(EmbedderError, match=r"by 'fake:next' \(24 dims\), not 'fake:words'"):
        await open_store(target, embedder=WordsEmbedder())
    async with open_store(target, embedder=FailsOnCall()) as reopened:
        assert await reopened.pending_embeddings() == 0


def _spec_of(path: Path) -> list[tuple[str, int, str | None]]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return db.execute(
            "SELECT name, dims, spec FROM embedders"
            " JOIN index_state ON index_state.embedder_id = embedders.id"
        ).fetchall()


async def test_a_spec_is_recorded_and_recorded_makes_it_again(tmp_path, monkeypatch):
    fake_provider(monkeypatch)
    path = tmp_path / "memory.db"
    async with open_store(path, embedder=KNOWN) as store:
        await store.store_many(_entries(0, 4))
        assert store.embedder is not None
        assert store.embedder.name == KNOWN
    assert _spec_of(path) == [(KNOWN, 16, KNOWN)]
    async with open_store(path, embedder="recorded") as again:
        assert again.embedder is not None
        assert (again.embedder.name, again.embedder.dims) == (KNOWN, 16)
        found = await again.retrieve_scored("note 2 about cache 2", 1, ranking="vector")
        assert found[0][0].memory == "note 2 about cache 2"
    async with open_store(path) as plain:  # no embedder needed to read what is recorded
        recorded = await plain.recorded_embedder()
        assert recorded is not None
        assert (recorded.name, recorded.dims, recorded.spec, recorded.pending) == (
            KNOWN,
            16,
            KNOWN,
            0,
        )
        assert plain.embedder is None


async def test_a_recorded_python_spec_is_made_only_when_given(tmp_path):
    """A database file is data: the code a python: spec names runs only when the caller says."""
    path = tmp_path / "memory.db"
    async with open_store(path, embedder=SPEC) as store:
        await store.store_many(_entries(0, 2))
    assert _spec_of(path) == [("fake:words", 16, SPEC)]
    with pytest.raises(EmbedderError, match="is code to run, which is never made from the data"):
        await open_store(path, embedder="recorded")
    async with open_store(path, embedder=SPEC) as given:
        assert await given.pending_embeddings() == 0


async def test_recorded_with_nothing_recorded_is_no_embedder(tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path, embedder="recorded") as store:
        assert store.embedder is None
        assert await store.recorded_embedder() is None
    with pytest.raises(InvalidArgumentError, match="'hybrid' needs a store with an embedder"):
        await open_store(path, embedder="recorded", ranking="hybrid")
    async with open_store(path, embedder=WordsEmbedder()) as unnamed:  # an object: no spec
        await unnamed.store(MemoryEntry(MemoryCategory.FACT, "x"))
    async with open_store(path, embedder="recorded") as store:
        assert store.embedder is None  # the store cannot make it: writes leave entries pending
        await store.store(MemoryEntry(MemoryCategory.FACT, "y"))
        recorded = await store.recorded_embedder()
        assert recorded is not None
        assert (recorded.spec, recorded.pending) == (None, 1)


async def test_a_recorded_spec_that_no_longer_works_is_an_embedder_error(tmp_path):
    path = tmp_path / "memory.db"
    async with open_store(path, embedder=SPEC):
        pass
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.execute("UPDATE embedders SET spec = 'fastembed:not-a-model-here'")
    with pytest.raises(EmbedderError, match="'fastembed:not-a-model-here' cannot be made"):
        await open_store(path, embedder="recorded")
    async with open_store(path) as plain:  # without it, the store opens
        assert await plain.count() == 0


async def test_a_bad_spec_is_refused_before_anything_is_written(tmp_path):
    path = tmp_path / "memory.db"
    with pytest.raises(InvalidArgumentError, match="PROVIDER:MODEL"):
        await open_store(path, embedder="no-such-provider")
    assert not path.exists()


@pytest.mark.parametrize("embedder", [KNOWN, "recorded"])
async def test_opening_with_the_recorded_embedder_waits_for_no_writer(
    tmp_path, monkeypatch, embedder
):
    fake_provider(monkeypatch)
    path = tmp_path / "memory.db"
    async with open_store(path, embedder=KNOWN) as store:
        await store.store_many(_entries(0, 2))
    writer = sqlite3.connect(path, isolation_level=None)
    try:
        writer.execute("BEGIN IMMEDIATE")  # another process, mid-write, for as long as it likes
        async with open_store(path, embedder=embedder, busy_timeout=0) as again:
            assert again.embedder is not None
            assert 2 == await again.count()
    finally:
        writer.close()
