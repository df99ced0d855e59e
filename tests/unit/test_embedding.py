"""Calling an embedder: sync or async, bounded, its answer checked and made unit length."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from loopctl_memory import Embedder, EmbedderError, InvalidArgumentError
from loopctl_memory.embedding import (
    QueryVectors,
    check_embedder,
    check_timeout,
    cosines,
    embed_documents,
    embed_query,
    unit_rows,
)
from tests.embedders import AsyncWordsEmbedder, FlakyEmbedder, WordsEmbedder


def test_rows_are_binary32_unit_vectors_and_a_zero_row_stays_zero():
    rows = unit_rows([[3.0, 4.0], [0.0, 0.0], [1e-30, 0.0]], 3, 2)
    assert rows.dtype == np.float32
    assert rows.tolist() == [[0.6000000238418579, 0.800000011920929], [0.0, 0.0], [1.0, 0.0]]


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([[1.0, 2.0]], r"shape \(1, 2\), not \(2, 2\)"),
        ([[1.0], [2.0]], r"shape \(2, 1\), not \(2, 2\)"),
        ([[1.0, float("nan")], [1.0, 2.0]], "not finite"),
        ([[1.0, float("inf")], [1.0, 2.0]], "not finite"),
        ([["a", "b"], [1.0, 2.0]], "no array of numbers"),
    ],
)
def test_a_wrong_answer_is_an_embedder_error(values, message):
    with pytest.raises(EmbedderError, match=message):
        unit_rows(values, 2, 2)


@pytest.mark.parametrize("embedder", [WordsEmbedder(), AsyncWordsEmbedder()], ids=["sync", "async"])
async def test_sync_and_async_embedders_give_the_same_vectors(embedder):
    texts = ["cache misses", "database is locked", ""]
    found = await embed_documents(embedder, texts, 5.0)
    expected = unit_rows(WordsEmbedder().embed_documents(texts), 3, 16)
    assert found.tobytes() == expected.tobytes()
    query = await embed_query(embedder, "locked", 5.0)
    assert query.shape == (16,)
    assert abs(float(np.linalg.norm(query)) - 1.0) < 1e-6
    assert (await embed_documents(embedder, [], 5.0)).shape == (0, 16)


async def test_an_embedder_that_raises_is_an_embedder_error_with_its_cause():
    embedder = FlakyEmbedder(lambda call: True)
    with pytest.raises(EmbedderError, match="'fake:words' failed: ConnectionError") as raised:
        await embed_documents(embedder, ["x"], 5.0)
    assert isinstance(raised.value.__cause__, ConnectionError)


async def test_an_embedder_that_never_answers_times_out():
    class Stuck(WordsEmbedder):
        async def embed_documents(self, texts):  # type: ignore[override]
            await asyncio.Event().wait()

    with pytest.raises(EmbedderError, match=r"took longer than 0\.01 s"):
        await embed_documents(Stuck(), ["x"], 0.01)


async def test_a_repeated_query_does_not_call_the_embedder_again():
    embedder = WordsEmbedder()
    kept = QueryVectors(kept=2)
    first = await kept.vector(embedder, "a", 5.0)
    assert (await kept.vector(embedder, "a", 5.0)) is first
    assert embedder.query_calls == 1
    await kept.vector(embedder, "b", 5.0)
    await kept.vector(embedder, "c", 5.0)  # "a" is the oldest: dropped
    await kept.vector(embedder, "a", 5.0)
    assert embedder.query_calls == 4


def test_cosines_are_binary32_dot_products_of_unit_vectors():
    rng = np.random.default_rng(3)
    rows = unit_rows(rng.normal(size=(50, 8)), 50, 8)
    query = unit_rows(rng.normal(size=(1, 8)), 1, 8)[0]
    found = cosines(rows, query)
    brute = np.array([float(np.float32(np.dot(row.astype(np.float64), query))) for row in rows])
    assert found.tolist() == brute.tolist()
    assert cosines(rows[:0], query).shape == (0,)


def test_an_embedder_is_checked():
    assert isinstance(WordsEmbedder(), Embedder)
    assert check_embedder(WordsEmbedder()) is not None
    with pytest.raises(InvalidArgumentError, match="must have name, dims"):
        check_embedder(object())
    with pytest.raises(InvalidArgumentError, match="dims must be an int >= 1"):
        check_embedder(WordsEmbedder(dims=0))
    with pytest.raises(InvalidArgumentError, match="name must be a non-empty str"):
        check_embedder(WordsEmbedder(name=""))
    with pytest.raises(InvalidArgumentError, match="embed_timeout must be > 0"):
        check_timeout(0)
    with pytest.raises(InvalidArgumentError, match="embed_timeout must be a number"):
        check_timeout("1")
