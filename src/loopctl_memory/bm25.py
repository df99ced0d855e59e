"""BM25 as the store defines it: the parameters, the formula, and a plain Python ranking by it.

For a query with BM25 tokens ``q`` (:func:`~loopctl_memory.bm25_tokens.query_tokens`)
and an entry whose document (memory text, then tags) has ``dl`` tokens, of which
``tf(t)`` are ``t``::

    score = sum over distinct t in q with tf(t) > 0 of
            (count of t in q * idf(t)) * (tf(t) / (tf(t) + k1 * (1 - b + b * dl / avgdl)))
    idf(t) = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

N, df and ``avgdl`` (the mean ``dl``) are those of the entries the view reads,
whatever filter applies. Only entries with a positive score are ranked; best
first, ties in insertion order. This is Lucene's BM25 as ``bm25s`` computes it
(a query token given twice counts twice), in binary64, each operation in the
order written above: the SQL store's vectorised ranker performs the same
operations in the same order, so both give the same scores to the last bit.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from loopctl_memory.errors import InvalidArgumentError

DEFAULT_K1 = 0.9
DEFAULT_B = 0.4
"""Anserini's defaults: memories are short and uneven, so less length normalisation pays."""


@dataclass(frozen=True, slots=True)
class Bm25Parameters:
    """BM25's ``k1`` (term saturation, finite, >= 0) and ``b`` (length normalisation, 0 to 1).

    Raises:
        InvalidArgumentError: either is out of range or not a number.

    """

    k1: float = DEFAULT_K1
    b: float = DEFAULT_B

    def __post_init__(self) -> None:
        for name, low, high in (("bm25_k1", 0.0, math.inf), ("bm25_b", 0.0, 1.0)):
            value = self.k1 if name == "bm25_k1" else self.b
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InvalidArgumentError(f"{name} must be a number, not {type(value).__name__}")
            if not (low <= value <= high) or math.isinf(value):
                bound = f"between {low} and {high}" if high < math.inf else f">= {low} and finite"
                raise InvalidArgumentError(f"{name} must be {bound}, got {value!r}")
        object.__setattr__(self, "k1", float(self.k1))
        object.__setattr__(self, "b", float(self.b))


def idf(documents: int, holding: int) -> float:
    """Lucene's idf of a term that ``holding`` of ``documents`` documents hold."""
    return math.log(1.0 + (documents - holding + 0.5) / (holding + 0.5))


def query_weights(tokens: Sequence[str]) -> Counter[str]:
    """Each distinct query token and how many times the query holds it, in first-seen order."""
    return Counter(tokens)


def scores(
    query: Sequence[str], documents: Sequence[Sequence[str]], parameters: Bm25Parameters
) -> list[float]:
    """The BM25 score of each document (its tokens) for ``query`` (its tokens), over them all."""
    count = len(documents)
    if not count:
        return []
    frequencies = [Counter(document) for document in documents]
    lengths = [len(document) for document in documents]
    average = sum(lengths) / count
    k1, b = parameters.k1, parameters.b
    result = [0.0] * count
    for token, times in query_weights(query).items():
        holding = sum(1 for counted in frequencies if token in counted)
        if not holding:
            continue
        weight = times * idf(count, holding)
        for n, counted in enumerate(frequencies):
            tf = counted.get(token, 0)
            if tf:
                norm = k1 * (1.0 - b + b * lengths[n] / average)
                result[n] += weight * (tf / (tf + norm))
    return result
