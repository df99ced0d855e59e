"""Deterministic stand-ins for a user's embedder: no model, no network.

``WordsEmbedder`` hashes each lowercase word of a text into one of ``dims``
buckets, so texts that share words have a positive cosine (a crude, stable
"meaning"); ``FlakyEmbedder`` fails on chosen calls; ``AsyncWordsEmbedder``
is the same model behind coroutine methods, as an HTTP endpoint would be.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

_WORD = re.compile(r"\w+")


def words_vector(text: str, dims: int) -> npt.NDArray[np.float32]:
    vector = np.zeros(dims, np.float32)
    for word in _WORD.findall(text.lower()):
        digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
        bucket = int.from_bytes(digest[:4], "little") % dims
        vector[bucket] += 1.0 if digest[4] % 2 else 0.5
    return vector


class WordsEmbedder:
    """Bag of hashed words; counts every call it answers."""

    def __init__(self, dims: int = 16, name: str = "fake:words") -> None:
        self._dims = dims
        self._name = name
        self.document_calls = 0
        self.query_calls = 0

    @property
    def name(self) -> str:
        return self._name

    @property
    def dims(self) -> int:
        return self._dims

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.document_calls += 1
        return np.stack([words_vector(text, self._dims) for text in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        self.query_calls += 1
        return words_vector(f"query {text}", self._dims)


class AsyncWordsEmbedder(WordsEmbedder):
    """The same vectors, from coroutine methods."""

    async def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().embed_documents(texts)

    async def embed_query(self, text: str) -> npt.NDArray[np.float32]:  # type: ignore[override]
        await asyncio.sleep(0)
        return super().embed_query(text)


class FlakyEmbedder(WordsEmbedder):
    """Raises on the document calls ``fails(n)`` picks (n counts from 1)."""

    def __init__(self, fails: Callable[[int], bool], dims: int = 16) -> None:
        super().__init__(dims)
        self._fails = fails
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.calls += 1
        if self._fails(self.calls):
            raise ConnectionError(f"embedding service unavailable (call {self.calls})")
        return super().embed_documents(texts)


def next_model() -> WordsEmbedder:
    """Another model (24 dims, ``fake:next``), for ``python:tests.embedders:next_model``."""
    return WordsEmbedder(dims=24, name="fake:next")


FAKE_SPECS = {"fastembed:fake-words": 16, "fastembed:fake-next": 24}
"""Specs of a known provider that :func:`fake_provider` answers with a WordsEmbedder (dims)."""


def fake_provider(monkeypatch: Any) -> None:
    """Make ``embedder_from_spec`` answer :data:`FAKE_SPECS` with fakes named by the spec.

    So that a spec the store records is made again by ``embedder="recorded"``
    (which never makes a ``python:`` one) without a model.
    """
    from loopctl_memory import embedders  # noqa: PLC0415 - only the tests that fake it

    real = embedders.embedder_from_spec

    def made(spec: str, **options: Any) -> Any:
        if spec in FAKE_SPECS:
            return WordsEmbedder(dims=FAKE_SPECS[spec], name=spec)
        return real(spec, **options)

    monkeypatch.setattr(embedders, "embedder_from_spec", made)
