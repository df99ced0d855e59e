"""A store sees what other stores (other processes) wrote, at its next retrieval.

Each store keeps its own copy of the ranking columns and of the postings, so
a second store on the same database is, to the first, exactly another
process. Stores, batches, deletions, consolidations and imports by the writer
land between the reader's retrievals, and the reader must answer as the
reference does over the entries as they now are.
"""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.jsonl import entry_to_json, import_jsonl
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import POSTGRES_URL_VARIABLE, SHARED_BACKENDS, reset_postgres

WORDS = ["cache", "Retry", "glob", "a", "the", "ß", "tool", "x%"]


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        rng.choice(list(MemoryCategory)),
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 6))),
        tags=[rng.choice(WORDS) for _ in range(rng.choice([0, 0, 1, 2]))],
        relevance=rng.choice([rng.randrange(21) * 0.05, 0.02, 0.0]),
        id=uuid.UUID(int=rng.getrandbits(128)),
    )


async def _target(backend: str, tmp_path: Path) -> str | Path:
    if backend == "sqlite-file":
        return tmp_path / "memory.db"
    url = os.environ[POSTGRES_URL_VARIABLE]
    await reset_postgres(url)
    return url


async def _same_answers(reader, reference, rng: random.Random) -> None:
    for query in ["", "a", "the cache", "retry glob x%", "ß tool", rng.choice(WORDS)]:
        for limit in (1, 5, 400):
            expected = [e.id for e in await reference.retrieve(query, limit)]
            assert expected == [e.id for e in await reader.retrieve(query, limit)], (query, limit)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_a_reader_sees_every_kind_of_write_by_another_store(backend, seed, tmp_path):
    rng = random.Random(seed)
    target = await _target(backend, tmp_path)
    tuning = Tuning(tail_limit=rng.choice([3, 20, 10_000]), word_cache_bytes=rng.choice([0, 2**20]))
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
            elif action < 0.8:
                assert await writer.consolidate() == await reference.consolidate()
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
    target = await _target(backend, tmp_path)
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
