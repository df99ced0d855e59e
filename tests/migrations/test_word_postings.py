"""Revision 0006 builds BM25's word postings for a database written before it.

A database at 0005 has entries indexed (postings of tokens and tags) but no
word postings; upgrading must leave it ranking by BM25 exactly as a database
written at head does. The revision carries its own copy of the tokenizer,
held here to the library's.
"""

from __future__ import annotations

import functools
import importlib.util
import random
import uuid
from pathlib import Path
from types import ModuleType

import pytest
import Stemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, migrate, open_store
from loopctl_memory.bm25_tokens import document_tokens
from loopctl_memory.sql.tuning import Tuning
from tests.conftest import SHARED_BACKENDS, shared_target

REVISION = Path(__file__).resolve().parents[2] / "migrations" / "versions" / "0006_word_postings.py"
WORDS = ["Cache", "caching", "the", "retries", "ß", "Σίσυφος", "run_id=7", "/a/b.py", "x", "ok"]
QUERIES = ["cache", "retry retries", "the", "ß σίσυφος", "run_id", "b.py ok", "db tag"]


@functools.cache
def _revision() -> ModuleType:
    spec = importlib.util.spec_from_file_location("revision_0006", REVISION)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _entry(rng: random.Random) -> MemoryEntry:
    return MemoryEntry(
        MemoryCategory.FACT,
        " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12))),
        tags=rng.sample(["db", "Tag", "ci"], rng.randint(0, 2)),
        id=uuid.UUID(int=rng.getrandbits(128)),
    )


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
async def test_an_upgraded_database_ranks_by_bm25_as_one_written_at_head(backend, tmp_path):
    rng = random.Random(6)
    target = await shared_target(backend, tmp_path)
    reference = InMemoryStore(ranking="bm25")
    async with open_store(target, tuning=Tuning(background_folds=False, tail_limit=7)) as store:
        batch = [_entry(rng) for _ in range(80)]
        await store.store_many(batch)
        await reference.store_many(batch)
        for entry in batch[:5]:  # rewritten since indexed: the log names them
            await store.update(entry.id, memory="caching retries ok")
            await reference.update(entry.id, memory="caching retries ok")
        for entry in batch[5:9]:
            await store.delete(entry.id)
            await reference.delete(entry.id)
        async with store.engine.connect() as connection:
            assert "0005" == await connection.run_sync(migrate.upgrade_to, "0005")
    async with open_store(target, migrate=True) as upgraded:
        assert migrate.head() == await upgraded.schema_revision()
        for query in QUERIES:
            expected = await reference.retrieve_scored(query, 100)
            found = await upgraded.retrieve_scored(query, 100, ranking="bm25")
            assert [(e.id, score) for e, score in expected] == [
                (e.id, score) for e, score in found
            ], query
        assert any([await upgraded.retrieve("cache", 5, ranking="bm25")])


@settings(max_examples=300, deadline=None)
@given(st.text(), st.lists(st.text(max_size=20), max_size=3))
def test_the_revision_cuts_words_as_the_library_does(memory, tags):
    revision = _revision()
    lowered = [memory.lower(), *(tag.lower() for tag in tags)]
    assert document_tokens(memory.lower(), [tag.lower() for tag in tags]) == revision._words(
        Stemmer.Stemmer("english"), lowered
    )
