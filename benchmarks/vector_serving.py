"""The vector benchmark's embedders and its serving child (a fresh interpreter per measurement).

``CalibratedVectors`` gives each text a 384-d vector drawn from a generator
seeded by the text's hash: a model's cost without a model. Random draws from
an isotropic normal would have no neighbourhoods at all (every pair nearly
orthogonal), the hardest case for a graph index and nothing like a sentence
embedder; these are drawn from a normal whose mean and spectrum are those of
all-MiniLM-L6-v2 on the LoCoMo dev set (``../shared/eval/minilm-dev.npz``:
the mean's norm 0.53, total variance 0.72, eigenvalues falling as rank^-1.15
over the first 200, where 1,834 vectors measure them well), in a fixed random
basis. Mean pairwise cosine 0.29 (the dev set's 0.28).

The serving child opens the store, asks one hybrid query (open + first query),
asks every query once (the query-vector cache), then times ``vector`` and
``hybrid`` query by query, and prints its figures, its answers and its peak
RSS as JSON.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.stats import peak_rss_kb
from loopctl_memory import open_store

DIMS = 384
LIMIT = 10
SERVE = "_serve"
Vector = np.ndarray[Any, np.dtype[np.float32]]

_MEAN_NORM = 0.53
_TOTAL_VARIANCE = 0.72
_EXPONENT = -1.15


def _basis() -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    rng = np.random.default_rng(384)
    q, r = np.linalg.qr(rng.standard_normal((DIMS, DIMS)))
    basis = q * np.sign(np.diag(r))
    spectrum = np.arange(1, DIMS + 1, dtype=np.float64) ** _EXPONENT
    spectrum *= _TOTAL_VARIANCE / spectrum.sum()
    return basis, np.sqrt(spectrum)


_BASIS, _SCALE = _basis()
_MEAN = _BASIS[:, -1] * _MEAN_NORM


class CalibratedVectors:
    """A text's vector: a normal draw seeded by its hash, shaped like a sentence embedder's."""

    name = "bench:calibrated-384"
    dims = DIMS

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        draws = np.empty((len(texts), DIMS), np.float64)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "little")
            draws[row] = np.random.default_rng(seed).standard_normal(DIMS)
        vectors = (_MEAN + (draws * _SCALE) @ _BASIS.T).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        made: Vector = vectors
        return made

    def embed_query(self, text: str) -> Vector:
        made: Vector = self.embed_documents([text])[0]
        return made


class LookedUp:
    """Vectors made beforehand, looked up by text: what a write costs the store itself."""

    name = CalibratedVectors.name
    dims = DIMS

    def __init__(self, texts: Sequence[str]) -> None:
        made = CalibratedVectors().embed_documents(texts)
        self._vectors = {text: made[row : row + 1] for row, text in enumerate(texts)}

    def embed_documents(self, texts: Sequence[str]) -> Vector:
        if len(texts) == 1:  # a single store's: the answer as it was made, at once
            return self._vectors[texts[0]]
        found: Vector = np.concatenate([self._vectors[text] for text in texts])
        return found

    def embed_query(self, text: str) -> Vector:
        return CalibratedVectors().embed_query(text)


def percentiles(seconds: Sequence[float]) -> tuple[float, float, float]:
    """p50, p95 and p99 in milliseconds."""
    ordered = sorted(seconds)

    def at(share: float) -> float:
        return ordered[min(len(ordered) - 1, int(share * len(ordered)))] * 1000

    return at(0.5), at(0.95), at(0.99)


async def _serve(target: str | Path, queries: list[str], rankings: list[str]) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    began = time.perf_counter()
    async with open_store(target, embedder=CalibratedVectors()) as store:
        await store.retrieve(queries[0], LIMIT, ranking=rankings[-1])
        figures["first_s"] = time.perf_counter() - began
        for query in queries:  # every query vector made once: the cache answers later
            await store.retrieve(query, LIMIT, ranking=rankings[0])
        for ranking in rankings:
            timings = []
            answers = []
            for query in queries:
                began = time.perf_counter()
                found = await store.retrieve(query, LIMIT, ranking=ranking)
                timings.append(time.perf_counter() - began)
                answers.append([str(entry.id) for entry in found])
            figures[ranking] = {"timings": timings, "answers": answers}
    figures["peak_rss_kb"] = peak_rss_kb()
    return figures


def serve_main(argv: Sequence[str]) -> None:
    """The child: ``_serve TARGET QUERIES_JSON RANKING[,RANKING]``; prints JSON on stdout."""
    target, queries_file, rankings = argv
    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    where = target if "://" in target else Path(target)
    print(json.dumps(asyncio.run(_serve(where, queries, rankings.split(",")))))


if __name__ == "__main__":
    serve_main(sys.argv[2:] if sys.argv[1:2] == [SERVE] else sys.argv[1:])
