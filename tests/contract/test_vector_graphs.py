"""Vectors in graph files, on a file and on PostgreSQL: a cache of the database, never its truth.

Past ``Tuning.vector_loose`` held vectors a graph build is due, which every
process of the machine maps once written. A retrieval never builds: it starts a
child process that does (``Tuning.background_builds``), and ``build_indexes``
builds in the process. Most tests here turn the children off and build with
``build_indexes`` where a retrieval would have started one, so that what is
built when is certain. InMemoryStore is the oracle of every answer while files
are built, followed by another process, merged, damaged, taken from another
store, made stale by a reindex, or cannot be written at all.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from sqlalchemy import text

from loopctl_memory import (
    ConsolidationConfig,
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    StorageError,
    open_store,
)
from loopctl_memory.sql.background import graph_builds
from loopctl_memory.sql.lexical import arrays
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target
from tests.contract.test_embeddings import Switchable, _entries, _same_rankings

pytestmark = pytest.mark.parametrize("backend", SHARED_BACKENDS)

IN_GRAPHS = Tuning(vector_loose=8, vector_exact=0, background_builds=False)
IN_THE_BACKGROUND = Tuning(vector_loose=8, vector_exact=0)
HELD = Tuning(vector_loose=10**9, background_builds=False)


async def _directory(store: Any, target: str | Path) -> Path:
    """Where ``store`` keeps its graph files."""
    if isinstance(target, Path):
        return target.with_name(f"{target.name}-vectors")
    async with store.engine.connect() as connection:
        store_id = (await connection.execute(text("SELECT store_id FROM index_state"))).scalar()
    return Path(os.environ["XDG_CACHE_HOME"]) / "loopctl-memory" / "vectors" / str(store_id)


async def _both(store: Any, oracle: InMemoryStore, entries: list[MemoryEntry]) -> None:
    """Store ``entries`` in the store and in the oracle."""
    for each in (store, oracle):
        await each.store_many(entries)


def _manifest(directory: Path) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((directory / "manifest.json").read_text("utf-8"))
    return found


async def _rank_then_build(store: Any, oracle: InMemoryStore) -> None:
    """The oracle's answers, then the build a retrieval would have started."""
    await _same_rankings(store, oracle)
    await store.build_indexes()


async def _pair(target: str | Path, tuning: Tuning = IN_GRAPHS) -> tuple[Any, InMemoryStore]:
    embedders = Switchable(), Switchable()
    store = await open_store(target, embedder=embedders[0], tuning=tuning)
    return store, InMemoryStore(embedder=embedders[1])


async def test_a_store_past_the_held_limit_writes_graphs_that_a_new_process_uses(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    try:
        for first in (0, 20, 40):
            await _both(store, oracle, _entries(first, 20))
            await _rank_then_build(store, oracle)
        directory = await _directory(store, target)
        graphs = _manifest(directory)["graphs"]
        assert graphs, "the vectors went into graph files"
        assert sum(graph["count"] for graph in graphs) == 60
        assert len(list(directory.glob("*.usearch"))) == len(graphs)
    finally:
        await store.close()
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _same_rankings(again, oracle)
    assert _manifest(directory)["graphs"] == graphs, "a new process builds nothing"


async def test_a_new_process_takes_what_changed_after_the_graphs_from_the_database(
    backend, tmp_path
):
    """Entries rewritten (one left pending), embedded again or removed since the graphs."""
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    try:
        batch = _entries(0, 36)
        await _both(store, oracle, batch)
        await _rank_then_build(store, oracle)  # the graphs hold all 36
        for each in (store, oracle):
            embedder = each.embedder
            assert isinstance(embedder, Switchable)
            await each.update(batch[5].id, memory="an entirely different note")
            await each.delete(batch[4].id)
            embedder.broken = True
            await each.update(batch[3].id, memory="a note left pending")
            embedder.broken = False
    finally:
        await store.close()
    for tuning in (IN_GRAPHS, Tuning(vector_loose=8, vector_exact=0, vector_candidates=16)):
        async with open_store(target, embedder=Switchable(), tuning=tuning) as again:
            assert await again.pending_embeddings() == 1
            await _same_rankings(again, oracle, searched=tuning.vector_candidates < 100)


async def test_a_second_process_follows_the_graphs_the_first_one_builds(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as second:
        try:
            for first in (0, 30):
                await _both(store, oracle, _entries(first, 30))
                await _rank_then_build(store, oracle)  # the first one builds
                await _same_rankings(second, oracle)  # the second one follows
            for each in (store, oracle):
                await each.update((await each.retrieve("note 3 about", 1))[0].id, memory="zz")
                await each.delete((await each.retrieve("note 40 about", 1))[0].id)
            await _same_rankings(second, oracle)
            await _same_rankings(store, oracle)
        finally:
            await store.close()


async def test_graphs_are_merged_when_there_would_be_more_than_four(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    try:
        counts = []
        for first in range(0, 120, 12):
            await _both(store, oracle, _entries(first, 12))
            await _rank_then_build(store, oracle)
            counts.append(len(_manifest(await _directory(store, target))["graphs"]))
        assert max(counts) <= 4
        assert counts[-1] < max(counts), "the newest graphs were merged"
    finally:
        await store.close()


@pytest.mark.parametrize("damage", ["truncated", "a byte flipped", "removed", "manifest garbled"])
async def test_damaged_graph_files_are_built_again_and_never_answer(backend, tmp_path, damage):
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    try:
        await _both(store, oracle, _entries(0, 40))
        await _rank_then_build(store, oracle)
        directory = await _directory(store, target)
    finally:
        await store.close()
    name = _manifest(directory)["graphs"][0]["name"]
    path = directory / name
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:100])
    elif damage == "a byte flipped":
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    elif damage == "removed":
        path.unlink()
    else:
        (directory / "manifest.json").write_text("{not json", "utf-8")
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _rank_then_build(again, oracle)
    rebuilt = _manifest(directory)["graphs"]
    assert rebuilt
    assert name not in {graph["name"] for graph in rebuilt}
    assert not path.exists() or damage == "manifest garbled"


async def test_another_stores_graphs_are_never_used(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    other = str(uuid.uuid4())  # another store: a new one each run, as a server outlives it
    store, oracle = await _pair(target)
    try:
        await _both(store, oracle, _entries(0, 40))
        await _rank_then_build(store, oracle)
        directory = await _directory(store, target)
        async with store.engine.begin() as connection:  # as if another store were here now
            await connection.execute(
                text("UPDATE index_state SET store_id = :other"), {"other": other}
            )
    finally:
        await store.close()
    before = _manifest(directory)
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _rank_then_build(again, oracle)
        moved = await _directory(again, target)
    assert _manifest(moved)["store_id"] == other
    assert moved != directory or _manifest(moved)["graphs"] != before["graphs"]


async def test_a_reindex_makes_the_graphs_stale_and_they_are_built_again(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    config = ConsolidationConfig(merge=True, merge_threshold=0.3)
    embedders = Switchable(), Switchable()
    tuning = Tuning(vector_loose=8, vector_exact=0, reindex_above=0, background_builds=False)
    store = await open_store(target, embedder=embedders[0], tuning=tuning, consolidation=config)
    oracle = InMemoryStore(embedder=embedders[1], consolidation=config)
    try:
        entries = [
            MemoryEntry(MemoryCategory.FACT, f"note {n} about cache {n % 7}", relevance=0.2)
            for n in range(40)
        ]
        for each in (store, oracle):
            await each.store_many(entries)
        await _rank_then_build(store, oracle)
        directory = await _directory(store, target)
        epoch = _manifest(directory)["epoch"]
        later = _entries(100, 12)
        for each in (store, oracle):
            await each.consolidate()  # merges many: their texts rewritten, a reindex
            await each.store_many(later)
        await _rank_then_build(store, oracle)
        assert _manifest(directory)["epoch"] == epoch + 1
    finally:
        await store.close()


async def test_vectors_held_in_plain_pages_answer_as_inmemorystore(backend, tmp_path, monkeypatch):
    """Held vectors in a mapping of their own (as a million are) give the oracle's answers.

    Each batch grows the held rows, which are then copied into a larger mapping.
    """
    monkeypatch.setattr(arrays, "_PLAIN_PAGES_FROM", 0)
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target, HELD)
    try:
        for first in (0, 30, 60):
            await _both(store, oracle, _entries(first, 30))
            await _same_rankings(store, oracle)
    finally:
        await store.close()


async def test_graphs_that_cannot_be_written_leave_every_vector_held(backend, tmp_path, caplog):
    if backend != "sqlite-file":
        pytest.skip("the place of a file store's graphs is beside it")
    target = await shared_target(backend, tmp_path)
    Path(f"{target}-vectors").write_bytes(b"a file where the directory would go")  # noqa: ASYNC240
    store, oracle = await _pair(target, IN_THE_BACKGROUND)
    try:
        for first in (0, 30):
            await _both(store, oracle, _entries(first, 30))
            await _same_rankings(store, oracle)  # a child is started: it cannot write them
        with (
            caplog.at_level(logging.WARNING, "loopctl_memory.sql.background.children"),
            pytest.raises(StorageError, match="-vectors"),
        ):
            await store.build_indexes()  # waits for the child, then fails here
        assert [True] == [
            record.getMessage().startswith("building the vector graphs in the background failed")
            for record in caplog.records
        ]
        await _same_rankings(store, oracle)
    finally:
        await store.close()


class Points:
    """Each text ``p<n>`` is point ``n`` of a fixed random set; any other text is a query."""

    name = "fake:points"
    dims = 24

    def __init__(self, points: np.ndarray) -> None:
        self._points = points

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        return np.stack([self._points[int(t[1:])] for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        seed = int(text.rsplit(maxsplit=1)[-1])
        return np.random.default_rng(seed).standard_normal(self.dims).astype(np.float32)


async def test_searched_graphs_find_nearly_every_exact_neighbour(backend, tmp_path):
    """Asked for 64 candidates among 3,000, the answers hold at least 95% of numpy's top 10."""
    target = await shared_target(backend, tmp_path)
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((30, 24))
    points = (centres[rng.integers(0, 30, 3000)] + 0.5 * rng.standard_normal((3000, 24))).astype(
        np.float32
    )
    unit = points / np.linalg.norm(points, axis=1, keepdims=True)
    tuning = Tuning(vector_loose=100, vector_exact=0, vector_candidates=64)
    found_share = []
    async with open_store(target, embedder=Points(points), tuning=tuning) as store:
        entries = [MemoryEntry(MemoryCategory.FACT, f"p{n}") for n in range(3000)]
        await store.store_many(entries)
        index_of = {entry.id: n for n, entry in enumerate(entries)}
        for seed in random.Random(3).sample(range(10_000), 40):
            query = Points(points).embed_query(f"q {seed}")
            scores = unit @ (query / np.linalg.norm(query))
            exact = set(np.argsort(-scores, kind="stable")[:10].tolist())
            found = await store.retrieve_scored(f"q {seed}", 10, ranking="vector")
            assert [s for _, s in found] == sorted((s for _, s in found), reverse=True)
            found_share.append(len(exact & {index_of[e.id] for e, _ in found}) / 10)
    assert np.mean(found_share) >= 0.95


async def test_a_build_cut_short_leaves_nothing_that_answers(backend, tmp_path):
    """What a process killed while building leaves (a half-written file) is never read."""
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    try:
        await _both(store, oracle, _entries(0, 20))
        await _rank_then_build(store, oracle)
        directory = await _directory(store, target)
        half = directory / "graph-0123456789abcdef0123456789abcdef.usearch.tmp"
        half.write_bytes(b"\x00" * 1000)
        later = _entries(20, 20)
        for each in (store, oracle):
            await each.store_many(later)
        await _rank_then_build(store, oracle)  # another graph: the manifest is replaced
        assert not half.exists(), "a new manifest clears what a build cut short left"
    finally:
        await store.close()
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _same_rankings(again, oracle)


async def test_build_indexes_builds_what_is_due_before_any_retrieval(backend, tmp_path):
    """Past the held limit only; a new process then builds nothing and answers the same."""
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target)
    told: list[tuple[int, int]] = []
    try:
        await _both(store, oracle, _entries(0, 30))
        assert 30 == await store.build_indexes(progress=lambda *done: told.append(done))
        assert (0, 30) == told[0]
        assert (30, 30) == told[-1]
        directory = await _directory(store, target)
        graphs = _manifest(directory)["graphs"]
        assert [30] == [graph["count"] for graph in graphs]
        assert 30 == await store.build_indexes(), "nothing held outside a graph: nothing built"
        await _both(store, oracle, _entries(30, 5))
        assert 30 == await store.build_indexes(), "5 held, within the limit: no graph due"
        assert graphs == _manifest(directory)["graphs"]
        await _same_rankings(store, oracle)
        await _both(store, oracle, _entries(35, 5))
        assert 40 == await store.build_indexes()
        assert [30, 10] == [graph["count"] for graph in _manifest(directory)["graphs"]]
        graphs = _manifest(directory)["graphs"]
    finally:
        await store.close()
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _same_rankings(again, oracle)
        assert 40 == await again.build_indexes()
    assert graphs == _manifest(directory)["graphs"], "a new process builds nothing"


async def test_build_indexes_builds_the_first_graph_a_retrieval_would_with_its_progress(
    backend, tmp_path
):
    """A new process past the held limit: the graph of every stored vector, told as it goes."""
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target, HELD)
    try:
        await _both(store, oracle, _entries(0, 40))
    finally:
        await store.close()
    told: list[tuple[int, int]] = []
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        assert 40 == await again.build_indexes(progress=lambda *done: told.append(done))
        assert [(0, 40), (40, 40)] == [told[0], told[-1]]
        graphs = _manifest(await _directory(again, target))["graphs"]
        assert [40] == [graph["count"] for graph in graphs]
        await _same_rankings(again, oracle)


async def test_build_indexes_without_an_embedder_or_files_builds_nothing(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    async with open_store(target) as plain:
        await plain.store_many(_entries(0, 3))
        assert 0 == await plain.build_indexes()
    async with open_store(":memory:", embedder=Switchable(), tuning=IN_GRAPHS) as memory:
        await memory.store_many(_entries(0, 30))
        assert 0 == await memory.build_indexes()


@pytest.mark.parametrize("start", ["a retrieval", "start_upkeep"])
async def test_a_child_process_not_a_retrieval_builds_the_graphs_due(
    backend, start, tmp_path, caplog
):
    """Past the held limit a retrieval answers exactly and starts a child that builds them all.

    ``start_upkeep`` starts it before any retrieval (what a long-running process calls first).
    """
    target = await shared_target(backend, tmp_path)
    store, oracle = await _pair(target, IN_THE_BACKGROUND)
    told: list[tuple[int, int]] = []
    try:
        await _both(store, oracle, _entries(0, 40))
        with caplog.at_level(logging.WARNING):
            if start == "a retrieval":
                await _same_rankings(store, oracle)  # the first one starts the child
            else:
                await store.start_upkeep()  # returns at once: the child builds
            assert 40 == await store.build_indexes(progress=lambda *done: told.append(done))
        assert [] == told, "the child built every graph: nothing was left to build here"
        assert [] == caplog.records
        graphs = _manifest(await _directory(store, target))["graphs"]
        assert [40] == [graph["count"] for graph in graphs]
        await store.start_upkeep()  # nothing due now: no child, nothing built
        assert 40 == await store.build_indexes(progress=lambda *done: told.append(done))
        assert [] == told
        await _same_rankings(store, oracle)
    finally:
        await store.close()
    async with open_store(target, embedder=Switchable(), tuning=IN_GRAPHS) as again:
        await _same_rankings(again, oracle)


def _child_replaced(monkeypatch, tmp_path: Path, module: str, told: str) -> Path:
    """The graph child replaced by ``tests.contract.<module>``; the file it tells what it saw.

    ``told``: the end of the variable naming that file (``LOOPCTL_MEMORY_TEST_<told>``).
    """
    path = tmp_path / module
    monkeypatch.setattr(graph_builds, "CHILD", f"tests.contract.{module}")
    monkeypatch.setenv(f"LOOPCTL_MEMORY_TEST_{told}", str(path))
    return path


@pytest.mark.skipif(not hasattr(os, "nice"), reason="CPU niceness is POSIX's")
async def test_the_child_builds_at_a_lower_priority_than_the_queries_beside_it(
    backend, tmp_path, monkeypatch
):
    target = await shared_target(backend, tmp_path)
    told = _child_replaced(monkeypatch, tmp_path, "niceness_graph_child", "NICENESS")
    store, oracle = await _pair(target, IN_THE_BACKGROUND)
    try:
        await _both(store, oracle, _entries(0, 40))
        await _same_rankings(store, oracle)  # starts the child
        await store.build_indexes()  # waits for it
    finally:
        await store.close()
    assert int(told.read_text("utf-8")) > os.nice(0)


async def test_closing_the_store_stops_the_child_still_building(
    backend, tmp_path, caplog, monkeypatch
):
    target = await shared_target(backend, tmp_path)
    told = _child_replaced(monkeypatch, tmp_path, "hanging_graph_child", "CHILD_PID")
    store, oracle = await _pair(target, IN_THE_BACKGROUND)
    try:
        await _both(store, oracle, _entries(0, 40))
        await _same_rankings(store, oracle)  # starts the child, which never ends on its own
        for _ in range(600):  # until it has started: a wait, not a measure of time
            if told.exists() and told.read_text("utf-8"):
                break
            await asyncio.sleep(0.1)
        pid = int(told.read_text("utf-8"))
    finally:
        with caplog.at_level(logging.WARNING):
            await store.close()
    assert [] == caplog.records, "a child stopped by closing is no failure"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # stopped and reaped
