"""The rankings a store ranks by, and the check of a ranking's name.

``reference`` (loopctl 0.1.0's score, the default) and ``bm25`` need only the
entries; ``vector`` (cosine with the query's vector) and ``hybrid`` (BM25 and
cosine fused, :mod:`loopctl_memory.fusion`) need the store's embedder.
"""

from __future__ import annotations

from loopctl_memory.errors import InvalidArgumentError

LEXICAL_RANKINGS = ("reference", "bm25")
"""The rankings by the words of the entries: loopctl 0.1.0's score, or BM25."""

EMBEDDING_RANKINGS = ("vector", "hybrid")
"""The rankings that need the store's embedder."""

RANKINGS = LEXICAL_RANKINGS + EMBEDDING_RANKINGS
"""Every ranking ``retrieve`` knows."""


def check_ranking(value: object, *, has_embedder: bool = False, what: str = "ranking") -> str:
    """``value`` if it names a ranking a store (with an embedder or not) can rank by.

    Raises:
        InvalidArgumentError: it names no ranking, or an embedding one without an embedder.

    """
    if not isinstance(value, str) or value not in RANKINGS:
        names = ", ".join(repr(name) for name in RANKINGS)
        raise InvalidArgumentError(f"{what} must be one of {names}, not {value!r}")
    if value in EMBEDDING_RANKINGS and not has_embedder:
        raise InvalidArgumentError(f"{what} {value!r} needs a store with an embedder")
    return value
