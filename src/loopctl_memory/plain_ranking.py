"""The bm25, vector and hybrid rankings of a list of entries, plainly: the SQL rankers' oracle.

``InMemoryStore`` ranks by these; the SQL store's vectorised, pruned rankers
are held to them entry for entry and bit for bit. Every entry of the list is
one stream (insertion order) for :mod:`loopctl_memory.context`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from loopctl_memory import bm25, context, fusion
from loopctl_memory.bm25_tokens import document_tokens, query_tokens
from loopctl_memory.context import Context
from loopctl_memory.embedding import Vectors
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.rankings import Explanation

Floats = npt.NDArray[np.float64]
Mask = npt.NDArray[np.bool_]


@functools.lru_cache(maxsize=1 << 16)
def _document(memory: str, tags: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(document_tokens(memory, tags))


def bm25_array(
    entries: Sequence[MemoryEntry], query: str, parameters: bm25.Bm25Parameters
) -> Floats:
    """Each entry's BM25 score, 0.0 where it is not positive (by position)."""
    documents = [_document(entry.memory, tuple(entry.tags)) for entry in entries]
    lexical = np.array(bm25.scores(query_tokens(query), documents, parameters), np.float64)
    return np.where(lexical > 0, lexical, 0.0)


@dataclass(frozen=True, slots=True)
class Cosines:
    """Which entries have a vector, and each one's cosine with the query's (by position)."""

    has_vector: Mask
    values: Floats


@dataclass(frozen=True, slots=True)
class Ranked:
    """What a ranking gives a list of entries, by position."""

    ranking: str
    scores: Floats
    own: Floats
    part: Floats
    weight: float
    competing: Mask
    lexical: Floats | None
    cosines: Cosines | None
    statistics: tuple[float, tuple[float, float]]
    """Hybrid's: the largest BM25 score and the cosines' range."""

    def explained(self, n: int) -> Explanation:
        """Entry ``n``'s score with its parts."""
        if not self.weight:
            return _explanation(
                self.ranking,
                n,
                float(self.scores[n]),
                lexical=self.lexical,
                cosines=self.cosines,
                statistics=self.statistics,
            )
        own = _explanation(
            self.ranking,
            n,
            float(self.own[n]),
            lexical=self.lexical,
            cosines=self.cosines,
            statistics=self.statistics,
        )
        return _with_context(own, float(self.scores[n]), float(self.part[n]), self.weight)


def ranked(
    ranking: str,
    lexical: Floats | None,
    cosines: Cosines | None,
    *,
    weight: float,
) -> Ranked:
    """Each entry's score in ``ranking`` (bm25, vector or hybrid) with context ``weight``.

    ``lexical``: the BM25 scores (:func:`bm25_array`; bm25 and hybrid);
    ``cosines``: the vectors' (vector and hybrid).
    """
    bm: Floats = np.zeros(0) if lexical is None else lexical
    top = float(bm.max()) if len(bm) else 0.0
    span = (0.0, 0.0)
    if ranking == "bm25":
        own, competing = bm, bm > 0
    else:
        assert cosines is not None  # noqa: S101 - the caller made them
        has_vector = cosines.has_vector
        if ranking == "vector":
            own = np.where(has_vector, cosines.values, 0.0)
            competing = has_vector.copy()
        else:
            held = cosines.values[has_vector]
            span = (float(held.min()), float(held.max())) if len(held) else (0.0, 0.0)
            own = fusion.fuse(bm, cosines.values, has_vector, top, span)
            competing = fusion.competing(bm, has_vector)
    part = context.in_stream(own, weight) if weight else np.zeros(len(own), np.float64)
    scores = own + part if weight else own
    if weight:
        competing = competing | (part > 0)
    return Ranked(ranking, scores, own, part, weight, competing, lexical, cosines, (top, span))


def _explanation(
    ranking: str,
    n: int,
    score: float,
    *,
    lexical: Floats | None,
    cosines: Cosines | None,
    statistics: tuple[float, tuple[float, float]],
) -> Explanation:
    if ranking == "bm25":
        return Explanation(score, bm25=score)
    assert cosines is not None  # noqa: S101 - as above
    cosine = float(cosines.values[n]) if cosines.has_vector[n] else None
    if ranking == "vector":
        return Explanation(score, cosine=cosine)
    assert lexical is not None  # noqa: S101 - as above
    top, (low, high) = statistics
    return Explanation(score, float(lexical[n]), cosine, top, low, high)


def _with_context(own: Explanation, score: float, part: float, weight: float) -> Explanation:
    return Explanation(
        score,
        own.bm25,
        own.cosine,
        own.bm25_max,
        own.cosine_min,
        own.cosine_max,
        context=part,
        context_weight=weight,
    )


def stream_rows(entries: Sequence[MemoryEntry], vectors: Sequence[Vectors | None] | None) -> Floats:
    """The rows :func:`loopctl_memory.context.coherence` measures of a stream of entries.

    With ``vectors`` (each entry's, None while pending): the newest
    ``context.RECENT`` entries that have one; else the newest entries' words.
    """
    if vectors is not None:
        held = [vector for vector in vectors if vector is not None][-context.RECENT :]
        if not held:
            return np.zeros((0, 1), np.float64)
        return np.array(held, np.float64)
    recent = entries[-context.RECENT :]
    return context.lexical_rows((entry.memory, entry.tags) for entry in recent)


def weight_of(
    chosen: Context,
    entries: Sequence[MemoryEntry],
    vectors: Sequence[Vectors | None] | None,
) -> float:
    """The context weight a list of entries ranks with (``"auto"``: its coherence's)."""
    if chosen != context.AUTO:
        return float(chosen)
    return context.weight_of(chosen, stream_rows(entries, vectors))
