"""A child process indexes a long tail while writes go on, and no answer ever changes.

A store leaves a tail of ``tail_limit`` entries to a child process
(:mod:`loopctl_memory.sql.background.folds`). Whether a block was written by the child, by
a write, or not yet, every ranking answers as the reference (or as a store
indexing in its writes) does; a child that fails, or is killed half way,
leaves nothing half written; closing the store leaves a short tail.
"""

from __future__ import annotations

import asyncio
import json
import logging
import random
import sqlite3
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from sqlalchemy import text

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, SqlMemoryStore, open_store
from loopctl_memory.errors import DatabaseBusyError
from loopctl_memory.mcp_server.tools import start_upkeep
from loopctl_memory.sql.background import folds
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, integrity_check, shared_target

LIMIT = 40
FOLDING = Tuning(tail_limit=LIMIT)
INLINE = Tuning(tail_limit=LIMIT, background_folds=False)
WORDS = ["deploy", "friday", "ci", "cache", "flaky", "test", "retry", "db", "lock", "a", "the"]
QUERIES = ["deploy", "flaky test", "cache db lock", "retry", "a", "th", "the friday ci"]


def _entries(rng: random.Random, first: int, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) + f" n{number}",
            tags=[rng.choice(WORDS) for _ in range(rng.choice([0, 1, 2]))],
            relevance=rng.randrange(21) * 0.05,
            id=uuid.UUID(int=number + 1),
        )
        for number in range(first, first + count)
    ]


async def _watermark(store: SqlMemoryStore) -> int:
    async with store.engine.connect() as connection:
        found = await connection.execute(text("SELECT indexed_through FROM index_state"))
        return int(found.scalar_one())


async def _same_answers(store: SqlMemoryStore, reference: InMemoryStore, twin: SqlMemoryStore):
    """The reference ranking as loopctl 0.1.0's; BM25 as a store indexing in its writes."""
    for query in QUERIES:
        for limit in (3, 50):
            expected = [entry.id for entry in await reference.retrieve(query, limit)]
            assert expected == [entry.id for entry in await store.retrieve(query, limit)]
            assert await twin.retrieve_scored(
                query, limit, ranking="bm25"
            ) == await store.retrieve_scored(query, limit, ranking="bm25")


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_child_indexes_the_tail_while_the_store_writes_and_answers(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    rng = random.Random(5)
    reference = InMemoryStore()
    written = 0
    async with open_store(":memory:", tuning=INLINE) as twin:
        async with open_store(target, tuning=FOLDING) as store:
            for _ in range(12):
                batch = _entries(rng, written, 30)
                written += len(batch)
                for each in (store, reference, twin):
                    await each.store_many(batch)
                await _same_answers(store, reference, twin)
            # Only the child moves the watermark now: wait for it (not a measure of time).
            for _ in range(1_200):
                if written - await _watermark(store) < LIMIT:
                    break
                await asyncio.sleep(0.05)
            assert written - await _watermark(store) < LIMIT, "the child indexed the tail"
            await _same_answers(store, reference, twin)
        async with open_store(target, tuning=INLINE) as again:  # a new process's copy
            await _same_answers(again, reference, twin)
    if backend == "sqlite-file":
        assert isinstance(target, Path)
        assert ["ok"] == integrity_check(target)


async def test_closing_the_store_leaves_a_short_tail(tmp_path):
    path = tmp_path / "memory.db"
    rng = random.Random(6)
    async with open_store(path, tuning=FOLDING) as store:
        for first in range(0, 600, 150):  # batches a child cannot keep up with
            await store.store_many(_entries(rng, first, 150))
    async with open_store(path, tuning=INLINE, read_only=True) as again:
        assert 600 - await _watermark(again) < LIMIT
        assert 600 == await again.count()
    assert ["ok"] == integrity_check(path)


async def test_a_child_that_fails_is_warned_of_once_and_writes_index_themselves(
    tmp_path, monkeypatch, caplog
):
    monkeypatch.setattr(folds, "CHILD", "tests.contract.failing_fold_child")
    path = tmp_path / "memory.db"
    rng = random.Random(7)
    reference = InMemoryStore()
    async with (
        open_store(path, tuning=FOLDING) as store,
        open_store(":memory:", tuning=INLINE) as twin,
    ):
        first = _entries(rng, 0, 30)
        for each in (store, reference, twin):
            await each.store_many(first)
        with caplog.at_level(logging.WARNING, "loopctl_memory.sql.background.children"):
            await store.build_indexes()  # waits for the child, which failed
        assert ["it exited with 3: RuntimeError: this child cannot index"] == [
            record.getMessage().split("(", 1)[1].split(")", 1)[0] for record in caplog.records
        ]
        caplog.clear()
        for number in range(30, 330, 30):
            batch = _entries(rng, number, 30)
            for each in (store, reference, twin):
                await each.store_many(batch)
            assert number + 30 - await _watermark(store) < LIMIT  # indexed by the write
        await _same_answers(store, reference, twin)
    assert [] == caplog.records, "a failure is warned of once"


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
@pytest.mark.parametrize("delay", [0.2, 0.5, 0.8, 1.1, 1.4])
async def test_a_child_killed_at_any_point_leaves_the_index_whole(backend, delay, tmp_path):
    """Killed while it reads, inverts, creates terms or inserts a block: nothing half written."""
    target = await shared_target(backend, tmp_path)
    rng = random.Random(8)
    reference = InMemoryStore()
    async with open_store(":memory:", tuning=INLINE) as twin:
        async with open_store(target, tuning=Tuning(tail_limit=100_000)) as store:
            for first in range(0, 2_000, 500):
                batch = _entries(rng, first, 500)
                for each in (store, reference, twin):
                    await each.store_many(batch)
            url = store.engine.url.render_as_string(hide_password=False)
        child = subprocess.Popen(  # noqa: ASYNC220 - killed below, at some point of its work
            [sys.executable, "-m", folds.CHILD], stdin=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert child.stdin is not None
        where = str(target) if isinstance(target, Path) else url
        child.stdin.write(json.dumps({"target": where, "tail_limit": 10}).encode() + b"\n")
        child.stdin.flush()
        await asyncio.sleep(delay)  # wherever it is then: every point must be safe
        child.kill()
        child.communicate()
        async with open_store(target, tuning=INLINE) as again:
            await _same_answers(again, reference, twin)
            batch = _entries(rng, 2_000, 30)  # the next block follows on
            for each in (again, reference, twin):
                await each.store_many(batch)
            await _same_answers(again, reference, twin)
    if backend == "sqlite-file":
        assert isinstance(target, Path)
        assert ["ok"] == integrity_check(target)


async def test_start_upkeep_has_a_child_index_a_tail_left_long(tmp_path, caplog):
    """A tail left long by a store that indexes later: a long-running process starts on it."""
    path = tmp_path / "memory.db"
    rng = random.Random(9)
    async with open_store(path, tuning=Tuning(tail_limit=10_000)) as writer:
        await writer.store_many(_entries(rng, 0, 300))
    async with open_store(path, tuning=FOLDING) as store:
        assert 0 == await _watermark(store)
        with caplog.at_level(logging.WARNING):
            await store.start_upkeep()  # returns at once: a child indexes
            for _ in range(1_200):  # not a measure of time: until the child has indexed
                if 300 - await _watermark(store) < LIMIT:
                    break
                await asyncio.sleep(0.05)
        assert 300 - await _watermark(store) < LIMIT
        assert [] == caplog.records


async def test_the_mcp_servers_upkeep_at_start_logs_a_failure_and_goes_on(tmp_path, caplog):
    store = await open_store(tmp_path / "memory.db")
    await store.close()
    with caplog.at_level(logging.WARNING, "loopctl_memory.mcp_server.tools"):
        await start_upkeep(store)  # a closed store: logged, not raised
    assert ["starting the index upkeep failed"] == [
        record.getMessage().split(":", 1)[0] for record in caplog.records
    ]


@pytest.mark.parametrize("child_at_work", [True, False])
async def test_a_write_busy_while_its_own_child_runs_waits_for_it(
    tmp_path, monkeypatch, child_at_work: bool
):
    path = tmp_path / "memory.db"
    first, second = _entries(random.Random(5), 0, 2)
    async with open_store(path) as store:
        await store.store(first)
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the lock, held past the busy timeout (0 here)

    def running(_: folds.TailFolds) -> bool:
        if child_at_work and holder.in_transaction:
            holder.execute("COMMIT")  # the child's block is written: the lock is free
        return child_at_work

    monkeypatch.setattr(folds.TailFolds, "running", property(running))
    try:
        async with open_store(path, busy_timeout=0) as store:
            if child_at_work:
                await store.store(second)
            else:
                with pytest.raises(DatabaseBusyError):
                    await store.store(second)
    finally:
        holder.close()
    async with open_store(path) as store:
        held = [entry async for entry in store.iter_entries()]
    assert held == ([first, second] if child_at_work else [first])
    assert integrity_check(path) == ["ok"]
