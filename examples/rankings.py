"""The rankings side by side: reference, bm25, vector and hybrid, with scores and their parts.

- ``reference`` (the default): loopctl 0.1.0's score; any substring counts
  ("the" matches "then") and the answer is padded to ``limit``.
- ``bm25``: only memories that share a word (a stem) with the query.
- ``vector``: cosine with the query's vector, from the store's embedder.
- ``hybrid``: BM25 and cosine, each scaled over the store, weighted equally.

The embedder is defined here: a toy that maps a few words to one concept
("release", "ship" and "deploy" are one) and hashes each word into one of 64
numbers, so "why did the release break" finds a failed deploy that shares no
word with it. Bring a real model with ``embedder="sentence-transformers:..."``.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/rankings.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import re
import tempfile
from pathlib import Path

import numpy as np
import numpy.typing as npt

from loopctl_memory import MemoryCategory, MemoryEntry, MemoryFilter, open_store

CONCEPTS = {"release": "deploy", "ship": "deploy", "break": "fail", "failed": "fail"}


class ToyEmbedder:
    """Bag of hashed words (their concept, if any), deterministic: no model, no network."""

    name = "example:toy-words"  # the store records it, and refuses another embedder's vectors
    dims = 64

    def _vector(self, text: str) -> npt.NDArray[np.float32]:
        vector = np.zeros(self.dims, np.float32)
        for word in re.findall(r"\w+", text.lower()):
            # blake2b, not hash(): Python salts hash() per process, and vectors must not change.
            digest = hashlib.blake2b(CONCEPTS.get(word, word).encode(), digest_size=4).digest()
            vector[int.from_bytes(digest, "little") % self.dims] += 1.0
        return vector

    def embed_documents(self, texts: list[str]) -> npt.NDArray[np.float32]:
        """One vector a memory."""
        return np.stack([self._vector(text) for text in texts])

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector."""
        return self._vector(text)


MEMORIES = [
    (MemoryCategory.ERROR_PATTERN, "Deploy failed: disk full on host b7"),
    (MemoryCategory.FACT, "Release notes live in docs/CHANGES.md"),
    (MemoryCategory.STRATEGY, "Ship builds only from the main branch"),
    (MemoryCategory.FACT, "The staging database restarts nightly"),
    (MemoryCategory.INSIGHT, "Run make test before pushing"),
]
QUERY = "why did the release break"


async def main(db: str | os.PathLike[str]) -> None:
    """Five memories, one query, four rankings."""
    # context=0: rank each memory on its own (by default its neighbours in insertion order
    # count too, as much as the scope reads as one stream of related memories).
    async with open_store(db, embedder=ToyEmbedder(), ranking="hybrid", context=0) as store:
        await store.store_many(MemoryEntry(category, text) for category, text in MEMORIES)
        print(f"query: {QUERY!r}")
        for ranking in ("reference", "bm25", "vector", "hybrid"):
            print(ranking)
            for entry, score in await store.retrieve_scored(QUERY, 3, ranking=ranking):
                print(f"  {score:.3f}  {entry.memory}")

        print("hybrid, explained: 0.5 * bm25 / bm25_max + 0.5 * (cosine - min) / (max - min)")
        for entry, why in await store.retrieve_explained(QUERY, 3):  # the store's: hybrid
            print(
                f"  {why.score:.3f} = 0.5 * {why.bm25 or 0:.3f} / {why.bm25_max or 0:.3f}"
                f" + 0.5 * ({why.cosine or 0:.3f} - {why.cosine_min or 0:.3f})"
                f" / ({why.cosine_max or 0:.3f} - {why.cosine_min or 0:.3f})  {entry.memory}"
            )

        errors = MemoryFilter(categories=["error_pattern"])  # filters work in every ranking
        found = await store.retrieve("release", 5, filter=errors)
        print("hybrid, error patterns only:", [entry.memory for entry in found])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
