"""A store sees what other stores (other processes) wrote, at its next retrieval.

Each store keeps its own copy of the ranking columns and of the postings, so
a second store on the same database is, to the first, exactly another
process. Stores, batches, deletions, consolidations and imports by the writer
land between the reader's retrievals, and the reader must answer as the
reference does over the entries as they now are.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import os
import random
import subprocess
import sys
import textwrap
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, MemoryFilter, open_store
from loopctl_memory.entry_json import entry_to_json
from loopctl_memory.jsonl import import_jsonl
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.rankings import LEXICAL_RANKINGS as RANKINGS
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target

WORDS = ["cache", "Retry", "glob", "a", "the", "ß", "tool", "x%", "caching", "retries", "Tools"]


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        rng.choice(list(MemoryCategory)),
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))),
        tags=[rng.choice(WORDS) for _ in range(rng.choice([0, 0, 1, 2]))],
        relevance=rng.choice([rng.randrange(21) * 0.05, 0.02, 0.0]),
        id=uuid.UUID(int=rng.getrandbits(128)),
    )


def _changes(rng: random.Random) -> dict[str, Any]:
    """Some of an update's fields, new values drawn like an entry's."""
    fresh = _entry(rng)
    every = {
        "memory": fresh.memory,
        "tags": fresh.tags,
        "relevance": fresh.relevance,
        "category": fresh.category,
        "validated": rng.random() < 0.5,
    }
    chosen = rng.sample(sorted(every), rng.randint(1, len(every)))
    return {name: every[name] for name in chosen}


FILTERS = [
    None,
    MemoryFilter(tags_any=["cache", "RETRY"]),
    MemoryFilter(tags_all=["the"], validated=False),
    MemoryFilter(categories=["fact", "insight", "working"], min_relevance=0.3),
]


async def _same_answers(reader, reference, rng: random.Random) -> None:
    """The same entries and scores as the reference store, in every ranking, filtered or not."""
    for query in ["", "a", "the cache", "retry glob x%", "ß tool", rng.choice(WORDS)]:
        for limit in (1, 5, 400):
            for ranking in RANKINGS:
                passes = rng.choice(FILTERS)
                expected = await reference.retrieve_scored(
                    query, limit, ranking=ranking, filter=passes
                )
                found = await reader.retrieve_scored(query, limit, ranking=ranking, filter=passes)
                assert [(e.id, score) for e, score in expected] == [
                    (e.id, score) for e, score in found
                ], (query, limit, ranking, passes)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_reader_sees_every_kind_of_write_by_another_store(backend, seed, tmp_path):
    rng = random.Random(seed)
    target = await shared_target(backend, tmp_path)
    tuning = Tuning(
        background_folds=False,
        tail_limit=rng.choice([3, 20, 10_000]),
        word_cache_bytes=rng.choice([0, 2**20]),
    )
    reference = InMemoryStore()
    async with open_store(target, tuning=tuning) as reader, open_store(target) as writer:
        await _same_answers(reader, reference, rng)  # the reader's copy starts empty
        for _ in range(25):
            action = rng.random()
            if action < 0.35:
                entry = _entry(rng)
                await writer.store(entry)
                await reference.store(entry)
            elif action < 0.55:
                batch = [_entry(rng) for _ in range(rng.randint(1, 40))]
                await writer.store_many(batch)
                await reference.store_many(batch)
            elif action < 0.7:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), rng.randint(1, 5))):
                    assert await writer.delete(entry.id) == await reference.delete(entry.id)
            elif action < 0.75:
                assert await writer.consolidate() == await reference.consolidate()
            elif action < 0.8:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), rng.randint(1, 4))):
                    changes = _changes(rng)
                    assert await reference.update(entry.id, **changes) == await writer.update(
                        entry.id, **changes
                    )
            elif action < 0.9:
                batch = [_entry(rng) for _ in range(rng.randint(1, 30))]
                lines = "".join(entry_to_json(entry) + "\n" for entry in batch)
                await import_jsonl(writer, io.BytesIO(lines.encode()))
                await reference.store_many(batch)
            else:  # the reader writes too: its own copy must follow its own writes
                entry = _entry(rng)
                await reader.store(entry)
                await reference.store(entry)
            await _same_answers(reader, reference, rng)
            async with open_store(target, tuning=tuning) as fresh:  # a new process
                await _same_answers(fresh, reference, rng)


_CHILD = textwrap.dedent(
    """
    import asyncio, sys, uuid
    from loopctl_memory import MemoryCategory, MemoryEntry, open_store

    async def main(target, action):
        async with open_store(target) as store:
            if action == "store":
                await store.store_many(
                    [MemoryEntry(MemoryCategory.FACT, f"child wrote zebra {n}", relevance=0.9,
                                 id=uuid.UUID(int=10_000 + n)) for n in range(3)]
                )
            elif action == "delete":
                await store.delete(uuid.UUID(int=10_001))
            else:
                await store.consolidate()

    asyncio.run(main(sys.argv[1], sys.argv[2]))
    """
)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_reader_sees_what_another_process_wrote(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}

    def child(action: str) -> None:
        subprocess.run([sys.executable, "-c", _CHILD, str(target), action], check=True, env=env)

    async with open_store(target) as reader:
        await reader.store(MemoryEntry(MemoryCategory.FACT, "zebra crossing", relevance=0.01))
        assert [e.memory for e in await reader.retrieve("zebra", 5)] == ["zebra crossing"]
        child("store")
        assert [e.memory for e in await reader.retrieve("zebra", 5)] == [
            "child wrote zebra 0",
            "child wrote zebra 1",
            "child wrote zebra 2",
            "zebra crossing",
        ]
        child("delete")
        child("consolidate")  # prunes the 0.01 entry
        assert [e.memory for e in await reader.retrieve("zebra", 5)] == [
            "child wrote zebra 0",
            "child wrote zebra 2",
        ]
        assert [e.memory for e in await reader.retrieve("zebra child", 5, ranking="bm25")] == [
            "child wrote zebra 0",
            "child wrote zebra 2",
        ]


NOW = datetime(2030, 1, 1, tzinfo=UTC)


def _aged(rng: random.Random) -> MemoryEntry:
    entry = _entry(rng)
    entry.created_at = NOW - timedelta(days=rng.choice([0, 1, 10, 40, 400]))
    if rng.random() < 0.3:
        entry.last_accessed = NOW - timedelta(days=rng.choice([0, 2, 30]))
    entry.access_count = rng.choice([0, 0, 1, 5, 60])
    return entry


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
@pytest.mark.parametrize("seed", [4, 5])
async def test_a_scoped_reader_sees_updates_and_full_passes_by_another_store(
    backend, seed, tmp_path
):
    """Rewritten, removed, merged and decayed entries rank as the reference's, in a scope too.

    Both in the reader, which keeps its copy current, and in a new process after
    each write, which reads the indexed entries' relevance and scope from their
    blocks' rows and what changed since from the change log.
    """
    rng = random.Random(seed)
    target = await shared_target(backend, tmp_path)
    tuning = Tuning(
        background_folds=False,
        tail_limit=rng.choice([3, 20]),
        word_cache_bytes=rng.choice([0, 2**20]),
        small_scope=rng.choice([0, 20_000]),
    )
    reference = InMemoryStore(clock=lambda: NOW)
    async with (
        open_store(target, tuning=tuning, clock=lambda: NOW) as reading,
        open_store(
            target, tuning=Tuning(reindex_above=0 if seed % 2 else 1_000), clock=lambda: NOW
        ) as writing,
    ):
        reader, writer = reading.scope("team/a"), writing.scope("team/a")
        elsewhere = writing.scope("team/b")
        for _ in range(20):
            action = rng.random()
            if action < 0.4:
                batch = [_aged(rng) for _ in range(rng.randint(1, 30))]
                await writer.store_many(batch)
                await reference.store_many(batch)
                await elsewhere.store_many([_aged(rng) for _ in range(rng.randint(0, 10))])
            elif action < 0.6:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), rng.randint(1, 6))):
                    changes = _changes(rng)
                    assert await reference.update(entry.id, **changes) == await writer.update(
                        entry.id, **changes
                    )
            elif action < 0.7:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), rng.randint(1, 5))):
                    assert await writer.delete(entry.id) == await reference.delete(entry.id)
            elif action < 0.85:
                config = ConsolidationConfig.full()
                assert await reference.consolidate(config) == await writer.consolidate(config)
            else:
                config = ConsolidationConfig(merge=True, merge_threshold=rng.choice([0.3, 0.6]))
                assert await reference.consolidate(config) == await writer.consolidate(config)
            assert [e async for e in reference.iter_entries()] == [
                e async for e in writer.iter_entries()
            ]
            await _same_answers(reader, reference, rng)
            # A scope of a new process ranked from the postings, not from its texts.
            fresh_tuning = Tuning(small_scope=0)
            async with open_store(target, tuning=fresh_tuning, clock=lambda: NOW) as fresh:
                await _same_answers(fresh.scope("team/a"), reference, rng)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_full_pass_never_undoes_a_write_made_while_it_was_worked_out(backend, tmp_path):
    """The pass is worked out before its write transaction; a write landing in between wins."""
    rng = random.Random(9)
    target = await shared_target(backend, tmp_path)
    hours = itertools.count()
    keeper = MemoryEntry(
        MemoryCategory.FACT,
        "the keeper",
        relevance=1.0,
        validated=True,
        created_at=NOW - timedelta(days=10),
    )
    async with (
        open_store(target, clock=lambda: NOW + timedelta(hours=next(hours))) as passing,
        open_store(target) as other,
    ):
        await passing.store_many([keeper, *(_aged(rng) for _ in range(300))])
        for round_number in range(12):
            marker = f"marker {round_number}"

            async def write(text: str = marker) -> None:
                await asyncio.sleep(0)
                await other.update(keeper.id, memory=text)

            await asyncio.gather(passing.consolidate(ConsolidationConfig.full()), write())
            found = await other.get(keeper.id)
            assert found is not None
            assert marker == found.memory
