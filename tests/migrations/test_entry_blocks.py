"""Revision 0010 writes the indexed entries' relevance and scope rows for a database before it.

A database at 0009 has entries indexed but no ``entry_blocks``; upgrading must
give every indexed seq its current relevance and scope (NaN where no entry
lives), and a new process must then rank exactly as the reference does.
"""

from __future__ import annotations

import math
import random
import struct
import uuid

import pytest
from sqlalchemy import text

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target

WORDS = ["cache", "retry", "glob", "a", "the", "ß", "tool", "deadbeef", "src/a.py"]
QUERIES = ["", "a", "the cache", "retry glob", "ß tool", "deadbeef", "beef src"]


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    return [
        MemoryEntry(
            MemoryCategory.FACT,
            " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 5))),
            relevance=rng.randrange(21) * 0.05,
            id=uuid.UUID(int=rng.getrandbits(128)),
        )
        for _ in range(count)
    ]


def _per_seq(connection) -> dict[int, tuple[float, int]]:
    """Each seq the rows cover: (relevance, scope id); NaN relevance where no entry lives."""
    held: dict[int, tuple[float, int]] = {}
    for block, relevance, scopes in connection.execute(
        text("SELECT block, relevance, scope_ids FROM entry_blocks ORDER BY block")
    ):
        count = len(relevance) // 8
        values = struct.unpack(f"<{count}d", bytes(relevance))
        scope_ids = struct.unpack(f"<{count}q", bytes(scopes))
        for offset in range(count):
            held[int(block) + offset] = (values[offset], scope_ids[offset])
    return held


def _current(connection) -> dict[int, tuple[float, int]]:
    """What the rows must hold for every indexed seq, from the entries as they are."""
    (mark,) = connection.execute(text("SELECT indexed_through FROM index_state")).one()
    present = {
        int(seq): (float(relevance), int(scope_id))
        for seq, relevance, scope_id in connection.execute(
            text("SELECT seq, relevance, scope_id FROM entries WHERE seq <= :mark"), {"mark": mark}
        )
    }
    return {seq: present.get(seq, (math.nan, 0)) for seq in range(1, int(mark) + 1)}


def _same_rows(found: dict[int, tuple[float, int]], expected: dict[int, tuple[float, int]]) -> None:
    assert sorted(found) == sorted(expected)
    for seq, (relevance, scope_id) in expected.items():
        got = found[seq]
        if math.isnan(relevance):
            assert math.isnan(got[0]), seq
        else:
            assert (relevance, scope_id) == got, seq


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_a_database_upgraded_to_0010_ranks_its_entries_as_they_are(backend, tmp_path):
    target = await shared_target(backend, tmp_path)
    rng = random.Random(10)
    reference = InMemoryStore()
    async with open_store(target, tuning=Tuning(background_folds=False, tail_limit=7)) as store:
        for scope in ("team/a", "team/b", "team/a"):
            batch = _entries(rng, 25)
            await store.scope(scope).store_many(batch)
            if scope == "team/a":
                await reference.store_many(batch)
        view = store.scope("team/a")
        stored = [entry async for entry in view.iter_entries()]
        for entry in rng.sample(stored, 8):  # changed after they were indexed
            relevance = rng.randrange(21) * 0.05
            await view.update(entry.id, relevance=relevance)
            await reference.update(entry.id, relevance=relevance)
        for entry in rng.sample(stored, 5):
            assert await view.delete(entry.id) == await reference.delete(entry.id)
        async with store.engine.connect() as connection:
            assert "0009" == await connection.run_sync(migrate.upgrade_to, "0009")
    async with open_store(
        target, migrate=True, tuning=Tuning(background_folds=False, tail_limit=7)
    ) as upgraded:
        async with upgraded.engine.connect() as connection:
            _same_rows(await connection.run_sync(_per_seq), await connection.run_sync(_current))
        view = upgraded.scope("team/a")
        for query in QUERIES:
            for limit in (1, 5, 100):
                expected = [(e.id, s) for e, s in await reference.retrieve_scored(query, limit)]
                found = [(e.id, s) for e, s in await view.retrieve_scored(query, limit)]
                assert expected == found, (query, limit)
