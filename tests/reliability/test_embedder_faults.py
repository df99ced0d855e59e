"""An embedder that fails under load loses no memory, and every pending vector is made after.

The issue's target: "an embedder that raises on every 3rd call during a 10,000-entry
import and 8 concurrent writers: every entry stored, every pending one filled by
``embed_pending``, no error reaching the caller but the ones documented".

One task imports a JSON Lines file while writers, each with a store of its own on
the same database (so that they contend for its write lock), store entries one at a
time; every store has its own faulty embedder, failing every third document call.
Each writer writes into a scope of its own (the import into the root): a write
whose embedding works fills pending entries of its own view only, so how many
entries of each scope are left pending does not depend on how the tasks interleave,
and an ``InMemoryStore`` fed the same writes with the same embedder (the oracle of
``tests/contract/test_embeddings.py``) says how many.
"""

from __future__ import annotations

import asyncio
import math
import random
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from sqlalchemy import select

from loopctl_memory import (
    EmbedderError,
    InMemoryStore,
    MemoryCategory,
    MemoryEntry,
    SqlMemoryStore,
    open_store,
)
from loopctl_memory.embedding import DEFAULT_TIMEOUT, unit_rows
from loopctl_memory.entry_json import entry_to_json
from loopctl_memory.jsonl import import_jsonl
from loopctl_memory.sql.tables import entries as entries_table
from loopctl_memory.sql.tables import vectors as vectors_table
from tests.conftest import NEEDS_POSTGRES, shared_target
from tests.embedders import FlakyEmbedder, WordsEmbedder, words_vector

DIMS = 64  # wide enough that no two of the generated memories share a vector
BUSY_TIMEOUT = 120.0  # seconds a writer may wait for the lock: a hang fails, a slow machine not
EMBED_TIMEOUT = 0.2  # seconds, in the timeout test; a hanging call sleeps far longer
HANG = 30.0
SPOT_CHECKS = 40  # pending entries checked by a vector search of their exact text
GET_EVERY = 8  # every 8th entry is also read back by id (every one is by iteration)


@dataclass(frozen=True)
class Load:
    """How much is written: an import of ``imported`` entries, ``batch`` a transaction,
    and ``writers`` tasks storing ``per_writer`` entries each, one at a time.

    Odd numbers of batches and of stores per writer: with every third call failing,
    the last write of each is a failed one, so every scope ends with entries pending.
    """

    imported: int
    batch: int
    writers: int
    per_writer: int

    @property
    def batches(self) -> int:
        return math.ceil(self.imported / self.batch)


FULL = Load(imported=10_000, batch=80, writers=8, per_writer=251)  # 125 batches
POSTGRES = Load(imported=2_040, batch=40, writers=8, per_writer=51)  # 51 batches
SMALL = Load(imported=1_000, batch=40, writers=4, per_writer=51)  # 25 batches


def every_third(call: int) -> bool:
    return call % 3 == 0


class EveryThirdRaises(FlakyEmbedder):
    """Raises ConnectionError on document calls 3, 6, 9, ...; counts the failures."""

    def __init__(self) -> None:
        super().__init__(every_third, dims=DIMS)
        self.failed = 0

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        try:
            return super().embed_documents(texts)
        except ConnectionError:
            self.failed += 1
            raise


class EveryThirdHangs(WordsEmbedder):
    """Asynchronous; document calls 3, 6, 9, ... sleep ``HANG`` seconds (a timeout cancels them).

    The other calls answer without awaiting anything, so no timeout can cut them
    short however slow the machine: only the hanging calls fail.
    """

    def __init__(self) -> None:
        super().__init__(DIMS)
        self.calls = 0
        self.failed = 0

    async def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:  # type: ignore[override]
        self.calls += 1
        if every_third(self.calls):
            self.failed += 1
            await asyncio.sleep(HANG)
        return super().embed_documents(texts)

    async def embed_query(self, text: str) -> npt.NDArray[np.float32]:  # type: ignore[override]
        return words_vector(text, DIMS)


class ExactWords(WordsEmbedder):
    """The faulty embedders' documents' vectors, and a query's vector is its text's.

    So a vector search for an entry's exact memory finds it with score 1.0. Same
    name and dims as the faulty ones: a store opened with it reads their vectors.
    """

    def __init__(self) -> None:
        super().__init__(DIMS)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.query_calls += 1
        return words_vector(text, DIMS)


Faulty = EveryThirdRaises | EveryThirdHangs

# --- realistic memories, the same on every run ---

_PHRASES = (
    "user prefers concise answers",
    "always run make test before pushing",
    "never force push to main",
    "the api returns 429 when rate limited: use exponential backoff with jitter",
    "logs show connection reset by peer under load",
    "docker compose up fails on arm64: pin the base image",
    "the embedding model's dims changed, so reembed",
    "ci cache key includes the lockfile hash",
    "release notes go in the changelog",
    "reviewer asked for tests of the retry path",
    "flaky test in staging after the schema migration",
    "token refresh races with the expired session check",
    "vacuum after a bulk delete to give back free pages",
    "the worker queue deadlocks when the lock is taken twice",
    "p95 latency of the index query doubled since the last deploy",
)
_WORDS = sorted({word for phrase in _PHRASES for word in phrase.replace(":", "").split()})
_DIRS = ("src/app", "src/core", "tests/unit", "tests/e2e", "scripts", "deploy/k8s", "docs")
_TOOLS = ("pytest", "uv", "docker", "kubectl", "alembic", "psql", "git", "make")
_TAGS = ("ci", "deploy", "db", "perf", "user-pref", "bug", "infra", "api", "ünïcode")
_CATEGORIES = list(MemoryCategory)
_BASE = datetime(2026, 3, 1, tzinfo=UTC)


def _memory(rng: random.Random, ref: str) -> str:
    words = [*rng.sample(_PHRASES, rng.randint(0, 2)), *rng.choices(_WORDS, k=rng.randint(2, 8))]
    extras = [
        f"{rng.choice(_DIRS)}/{rng.choice(_WORDS)}_{rng.randrange(100)}.py",
        f"`{rng.choice(_TOOLS)} {rng.choice(_WORDS)}`",
        f"PR #{rng.randrange(1, 9_000)}",
        f"commit {rng.getrandbits(28):07x}",
        f"line {rng.randrange(1, 2_000)}",
    ]
    for extra in rng.sample(extras, rng.randint(0, 3)):
        words.insert(rng.randrange(len(words) + 1), extra)
    return " ".join(words) + f" (ref {ref})"  # a word of its own: no two memories alike


def _entries(rng: random.Random, count: int) -> list[MemoryEntry]:
    made = []
    for _ in range(count):
        entry_id = uuid.UUID(int=rng.getrandbits(128), version=4)
        made.append(
            MemoryEntry(
                rng.choice(_CATEGORIES),
                _memory(rng, entry_id.hex[:12]),
                tags=rng.sample(_TAGS, rng.randint(0, 3)),
                relevance=round(rng.uniform(0.05, 1.0), 4),
                id=entry_id,
                created_at=_BASE + timedelta(microseconds=rng.randrange(10**13)),
                access_count=rng.randrange(4),
                validated=rng.random() < 0.3,
            )
        )
    return made


def _writer_scope(writer: int) -> str:
    return f"writers/w{writer}"


@dataclass(frozen=True)
class Workload:
    """The import's entries, each writer's, and where they go."""

    imported: list[MemoryEntry]
    written: list[list[MemoryEntry]]

    @classmethod
    def of(cls, load: Load, seed: int) -> Workload:
        rng = random.Random(seed)
        imported = _entries(rng, load.imported)
        return cls(imported, [_entries(rng, load.per_writer) for _ in range(load.writers)])

    def expected(self) -> dict[uuid.UUID, MemoryEntry]:
        every = [*self.imported, *(entry for own in self.written for entry in own)]
        return {entry.id: entry for entry in every}


# --- the concurrent phase ---


async def _create(target: str | Path) -> None:
    """Create the schema and record the embedder before the writers race to open it."""
    async with open_store(target, embedder=ExactWords(), busy_timeout=BUSY_TIMEOUT):
        pass


def _write_jsonl(path: Path, entries: list[MemoryEntry]) -> None:
    """The file an import reads: one entry a line, as ``export`` writes them."""
    path.write_text("".join(entry_to_json(entry) + "\n" for entry in entries), encoding="utf-8")


async def _import_and_write_at_once(
    target: str | Path,
    *,
    load: Load,
    work: Workload,
    source: Path,
    faulty: Callable[[], Faulty],
    embed_timeout: float = DEFAULT_TIMEOUT,
) -> list[Faulty]:
    """Run the import and the writers concurrently, each on its own store; their embedders.

    Any exception from any of them propagates (a TaskGroup cancels the others).
    """
    _write_jsonl(source, work.imported)
    await _create(target)
    embedders = [faulty() for _ in range(1 + load.writers)]
    stores: list[SqlMemoryStore] = []
    try:
        for embedder in embedders:  # a store each: they contend for the database's write lock
            opened = open_store(
                target, embedder=embedder, busy_timeout=BUSY_TIMEOUT, embed_timeout=embed_timeout
            )
            stores.append(await opened)
        importer, *writers = stores

        async def write(store: SqlMemoryStore, own: Sequence[MemoryEntry]) -> None:
            for entry in own:
                await store.store(entry)

        async with asyncio.TaskGroup() as group:
            imported = group.create_task(import_jsonl(importer, source, batch_size=load.batch))
            for number, (store, own) in enumerate(zip(writers, work.written, strict=True)):
                group.create_task(write(store.scope(_writer_scope(number)), own))
    finally:
        for store in stores:
            await store.close()
    report = imported.result()
    assert (load.imported, 0, load.batches) == (report.entries, report.skipped, report.batches)
    return embedders


async def _oracle_pending(load: Load, work: Workload) -> dict[str, int]:
    """How many entries of each scope an InMemoryStore leaves pending after the same writes."""
    pending: dict[str, int] = {}
    importer = InMemoryStore(embedder=EveryThirdRaises())
    for start in range(0, load.imported, load.batch):
        await importer.store_many(work.imported[start : start + load.batch])
    pending[""] = await importer.pending_embeddings()
    for number, own in enumerate(work.written):
        writer = InMemoryStore(embedder=EveryThirdRaises())
        for entry in own:
            await writer.store(entry)
        pending[_writer_scope(number)] = await writer.pending_embeddings()
    return pending


# --- the checks after it ---


def _view(store: SqlMemoryStore, scope: str) -> SqlMemoryStore:
    return store if not scope else store.scope(scope)


async def _vectors_by_id(store: SqlMemoryStore) -> dict[uuid.UUID, bytes]:
    """Every stored vector, by its entry's id (the store has a single embedder)."""
    joined = entries_table.join(vectors_table, vectors_table.c.entry_seq == entries_table.c.seq)
    async with store.engine.connect() as connection:
        rows = await connection.execute(
            select(entries_table.c.id, vectors_table.c.vector).select_from(joined)
        )
        return {entry_id: bytes(vector) for entry_id, vector in rows}


async def _check_every_entry_stored(every: SqlMemoryStore, work: Workload) -> None:
    expected = work.expected()
    assert len(expected) == await every.count()
    stored = {entry.id: entry async for entry in every.iter_entries()}
    assert [] == [entry_id for entry_id in expected if stored.get(entry_id) != expected[entry_id]]
    assert len(expected) == len(stored)
    for number, own in enumerate(work.written):  # each writer's entries went to its scope
        view = every.scope(_writer_scope(number))
        assert [entry.id for entry in own] == [entry.id async for entry in view.iter_entries()]
    # By id too: a sample (a get costs milliseconds; the pending ones are checked later).
    sample = list(expected.values())[::GET_EVERY]
    assert [] == [entry.id for entry in sample if entry != await every.get(entry.id)]


async def _check_pending(
    store: SqlMemoryStore, expected_pending: dict[str, int], work: Workload
) -> list[MemoryEntry]:
    """Check the pending counts (the oracle's, and some); return the pending entries."""
    pending = {scope: await _view(store, scope).pending_embeddings() for scope in expected_pending}
    assert expected_pending == pending
    total = await store.with_descendants().pending_embeddings()
    assert sum(pending.values()) == total
    assert total > 0  # the failures left entries pending: there is something to fill
    vectors = await _vectors_by_id(store)
    waiting = [entry for entry in work.expected().values() if entry.id not in vectors]
    assert total == len(waiting)
    every = store.with_descendants()
    assert [] == [entry.id for entry in waiting if entry != await every.get(entry.id)]
    for entry in waiting[:SPOT_CHECKS]:
        # No vector: the vector ranking does not see it; a lexical one finds it.
        assert entry.id not in [
            e.id for e in await every.retrieve(entry.memory, 3, ranking="vector")
        ]
        assert entry.id in [e.id for e in await every.retrieve(entry.memory, 3, ranking="bm25")]
    return waiting


async def _check_filled(store: SqlMemoryStore, work: Workload, waiting: list[MemoryEntry]) -> None:
    """Check every entry now has the vector the working embedder makes of its memory."""
    every = store.with_descendants()
    assert 0 == await every.pending_embeddings()
    expected = list(work.expected().values())
    made = unit_rows([words_vector(entry.memory, DIMS) for entry in expected], len(expected), DIMS)
    vectors = await _vectors_by_id(store)
    assert len(expected) == len(vectors)
    assert [] == [
        entry.id
        for entry, row in zip(expected, made, strict=True)
        if vectors.get(entry.id) != row.astype("<f4").tobytes()
    ]
    for entry in waiting[:SPOT_CHECKS]:  # found by its exact text, as any other entry
        [(found, score)] = await every.retrieve_scored(entry.memory, 1, ranking="vector")
        assert entry.id == found.id
        assert score == pytest.approx(1.0, abs=1e-6)


def _check_every_embedder_failed(embedders: list[Faulty]) -> None:
    assert [] == [number for number, embedder in enumerate(embedders) if not embedder.failed]


# --- the tests ---


@pytest.mark.slow
@pytest.mark.parametrize(
    ("backend", "load"),
    [("sqlite-file", FULL), pytest.param("postgresql", POSTGRES, marks=NEEDS_POSTGRES)],
    ids=["sqlite-file", "postgresql"],
)
async def test_an_embedder_failing_every_third_call_loses_nothing_under_load(
    backend: str, load: Load, tmp_path: Path
) -> None:
    """An import and 8 writers at once, each embedder raising on every third call.

    No exception reaches any of them; afterwards every entry is stored intact, each
    scope has as many pending entries as the oracle says (some), a lexical ranking
    finds them and the vector ranking does not; ``embed_pending`` with a working
    embedder fills exactly those, and every vector is then the embedder's.
    """
    target = await shared_target(backend, tmp_path)
    work = Workload.of(load, seed=20260301)
    embedders = await _import_and_write_at_once(
        target, load=load, work=work, source=tmp_path / "import.jsonl", faulty=EveryThirdRaises
    )
    _check_every_embedder_failed(embedders)
    async with open_store(target, embedder=ExactWords(), busy_timeout=BUSY_TIMEOUT) as store:
        await _check_every_entry_stored(store.with_descendants(), work)
        waiting = await _check_pending(store, await _oracle_pending(load, work), work)
        assert len(waiting) == await store.with_descendants().embed_pending()
        await _check_filled(store, work, waiting)


@pytest.mark.slow
async def test_an_embedder_hanging_every_third_call_loses_nothing(tmp_path: Path) -> None:
    """The same with calls that hang past ``embed_timeout`` instead of raising.

    The writes go on without their vectors; ``embed_pending`` with the hanging
    embedder raises the one documented error, EmbedderError, keeping the batches
    made before it; a working embedder then fills the rest.
    """
    target = tmp_path / "memory.db"
    load = SMALL
    work = Workload.of(load, seed=20260302)
    embedders = await _import_and_write_at_once(
        target,
        load=load,
        work=work,
        source=tmp_path / "import.jsonl",
        faulty=EveryThirdHangs,
        embed_timeout=EMBED_TIMEOUT,
    )
    _check_every_embedder_failed(embedders)
    async with open_store(target, embedder=ExactWords()) as store:
        await _check_every_entry_stored(store.with_descendants(), work)
        waiting = await _check_pending(store, await _oracle_pending(load, work), work)
    batch = 8
    assert len(waiting) > 2 * batch  # so that the third call comes before the end
    hanging = EveryThirdHangs()
    async with open_store(target, embedder=hanging, embed_timeout=EMBED_TIMEOUT) as store:
        with pytest.raises(EmbedderError, match=f"took longer than {EMBED_TIMEOUT:g} s"):
            await store.with_descendants().embed_pending(batch_size=batch)
        assert (3, 1) == (hanging.calls, hanging.failed)
        assert len(waiting) - 2 * batch == await store.with_descendants().pending_embeddings()
    async with open_store(target, embedder=ExactWords()) as store:
        assert len(waiting) - 2 * batch == await store.with_descendants().embed_pending()
        await _check_filled(store, work, waiting)
