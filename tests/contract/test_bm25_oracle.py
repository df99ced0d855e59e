"""BM25 held to ``bm25s`` itself: the same entries, scores within 1e-5, the same order.

``bm25s.BM25(k1, b)`` (Lucene's variant) indexes the documents of the entries
a view reads (each memory followed by its tags, cut by ``bm25s.tokenize`` with
its English stopwords and PyStemmer's English stemmer) and scores each query.
The store must return exactly the entries ``bm25s`` scores above zero, with
scores equal to its within 1e-5 relative (``bm25s`` computes in binary32), in
its order wherever two scores differ by more than that. Checked on random data
in a scope, with updates, deletes, consolidations and another store writing
between queries, on SQLite and PostgreSQL, and for InMemoryStore.
"""

from __future__ import annotations

import random
import uuid
from datetime import UTC, datetime, timedelta

import bm25s
import numpy as np
import pytest
import Stemmer

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store
from loopctl_memory.lifecycle import ConsolidationConfig
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target

RELATIVE = 1e-5
NOW = datetime(2030, 1, 1, tzinfo=UTC)
NATURAL = (  # noqa: SIM905 - a sentence reads better than a list of words
    "the agent ran the tests and they failed because the database was locked by another "
    "writer so it retried after a timeout of five seconds then caching helped running "
    "faster builds with pytest and make on every branch of the repository"
).split()
IDS = [
    "3f2a9c1e-77b0-4c1d-9e2f-0a1b2c3d4e5f",
    "/usr/lib/python3.11/site-packages/foo/bar.py",
    "e3b0c44298fc1c149afbf4c8996fb924",
    "ERROR[E1102]:",
    "run_id=42",
    "ß",
    "naïve",
    "Σίσυφος",
    "x",
]
TAGS = ["db", "DB", "ci", "Flaky", "retries", "tool"]
_STEMMER = Stemmer.Stemmer("english")


def _text(rng: random.Random) -> str:
    size = rng.choice([0, 1, 2, 5, 9, 20, 60])
    return " ".join(rng.choice(NATURAL if rng.random() < 0.8 else IDS) for _ in range(size))


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        rng.choice(list(MemoryCategory)),
        _text(rng),
        tags=rng.sample(TAGS, rng.choice([0, 0, 1, 2])),
        relevance=rng.choice([0.0, 0.3, 1.0]),
        id=uuid.UUID(int=rng.getrandbits(128)),
        created_at=NOW - timedelta(days=rng.choice([0, 5, 50])),
    )


def _queries(rng: random.Random) -> list[str]:
    return [
        "database locked",
        "the",
        "retried timeout caching",
        "db",
        "retries retry",
        "ran running runs",
        IDS[0],
        "site-packages python3",
        "naïve ß Σίσυφος",
        *(_text(rng) for _ in range(4)),
    ]


def _tokens(texts: list[str]) -> list[list[str]]:
    cut: list[list[str]] = bm25s.tokenize(
        texts, stopwords="en", stemmer=_STEMMER, return_ids=False, show_progress=False
    )
    return cut


def bm25s_scores(entries: list[MemoryEntry], query: str, k1: float, b: float) -> np.ndarray:
    """``bm25s``'s score of every entry (its memory, then its tags) for ``query``."""
    documents = _tokens([" ".join([entry.memory, *entry.tags]) for entry in entries])
    (asked,) = _tokens([query])
    if not entries or not asked or not any(documents):
        return np.zeros(len(entries))
    index = bm25s.BM25(k1=k1, b=b)
    index.index(documents, show_progress=False)
    known = [token for token in asked if token in index.vocab_dict]
    if not known:
        return np.zeros(len(entries))
    return np.asarray(index.get_scores(known), np.float64)


def assert_held_to_bm25s(
    entries: list[MemoryEntry],
    query: str,
    found: list[tuple[MemoryEntry, float]],
    k1: float,
    b: float,
) -> None:
    """``found`` (every positive answer, best first) is bm25s's answer for ``query``."""
    scores = bm25s_scores(entries, query, k1, b)
    position = {entry.id: n for n, entry in enumerate(entries)}
    expected = {entries[n].id for n in np.flatnonzero(scores > 0)}
    assert expected == {entry.id for entry, _ in found}, query
    theirs = [float(scores[position[entry.id]]) for entry, _ in found]
    ours = [score for _, score in found]
    assert ours == pytest.approx(theirs, rel=RELATIVE), query
    for n in range(len(found) - 1):
        assert ours[n] >= ours[n + 1]
        if theirs[n + 1] - theirs[n] > RELATIVE * theirs[n]:  # bm25s puts the next one first
            pytest.fail(f"{query!r}: {found[n + 1][0].memory!r} ranks above {found[n][0].memory!r}")
        if ours[n] == ours[n + 1]:  # a tie: insertion order
            assert position[found[n][0].id] < position[found[n + 1][0].id]


@pytest.mark.parametrize(("k1", "b"), [(0.9, 0.4), (1.5, 0.75), (1.2, 0.0), (0.0, 1.0)])
async def test_in_memory_bm25_is_bm25s(k1, b):
    rng = random.Random(int(k1 * 10 + b * 100))
    store = InMemoryStore(ranking="bm25", bm25_k1=k1, bm25_b=b)
    entries = [_entry(rng) for _ in range(300)]
    await store.store_many(entries)
    for query in _queries(rng):
        assert_held_to_bm25s(entries, query, await store.retrieve_scored(query, 10_000), k1, b)


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
@pytest.mark.parametrize("seed", [1, 2])
async def test_a_scope_ranks_as_bm25s_over_its_entries_through_every_change(
    backend, seed, tmp_path
):
    rng = random.Random(seed)
    k1, b = rng.choice([(0.9, 0.4), (1.5, 0.75)])
    target = await shared_target(backend, tmp_path)
    async with (
        open_store(
            target,
            ranking="bm25",
            bm25_k1=k1,
            bm25_b=b,
            tuning=Tuning(background_folds=False, tail_limit=rng.choice([7, 50])),
        ) as reading,
        open_store(target, tuning=Tuning(reindex_above=rng.choice([0, 1_000]))) as writing,
    ):
        reader, writer = reading.scope("team/a"), writing.scope("team/a")
        elsewhere = writing.scope("team/b")
        for _ in range(12):
            action = rng.random()
            if action < 0.4:
                await writer.store_many([_entry(rng) for _ in range(rng.randint(1, 40))])
                await elsewhere.store_many([_entry(rng) for _ in range(rng.randint(0, 20))])
            elif action < 0.55:
                await reader.store(_entry(rng))
            elif action < 0.7:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), 5)):
                    await writer.update(entry.id, memory=_text(rng), tags=rng.sample(TAGS, 1))
            elif action < 0.85:
                stored = [entry async for entry in writer.iter_entries()]
                for entry in rng.sample(stored, min(len(stored), 4)):
                    await writer.delete(entry.id)
            else:
                config = rng.choice([ConsolidationConfig(), ConsolidationConfig.full()])
                await writer.consolidate(config)
            entries = [entry async for entry in reader.iter_entries()]
            for query in rng.sample(_queries(rng), 5):
                found = await reader.retrieve_scored(query, 10_000)
                assert_held_to_bm25s(entries, query, found, k1, b)
