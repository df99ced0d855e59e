"""The rankings a store ranks by, and the check of a ranking's name.

``reference`` (loopctl 0.1.0's score, the default) and ``bm25`` need only the
entries; ``vector`` (cosine with the query's vector) and ``hybrid`` (BM25 and
cosine fused, :mod:`loopctl_memory.fusion`) need the store's embedder.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopctl_memory.errors import InvalidArgumentError

LEXICAL_RANKINGS = ("reference", "bm25")
"""The rankings by the words of the entries: loopctl 0.1.0's score, or BM25."""

EMBEDDING_RANKINGS = ("vector", "hybrid")
"""The rankings that need the store's embedder."""

RANKINGS = LEXICAL_RANKINGS + EMBEDDING_RANKINGS
"""Every ranking ``retrieve`` knows."""


def best_ranking(*, has_embedder: bool) -> str:
    """The best ranking a store has: ``hybrid`` with an embedder, else ``bm25``.

    What every interface for people and agents (the CLI's ``search``, the MCP
    server's ``recall``, the demo) ranks by unless told otherwise; the library's
    ``retrieve`` keeps ``reference``, loopctl 0.1.0's (the contract). Measured
    on the LoCoMo dev set in the README's tables.
    """
    return "hybrid" if has_embedder else "bm25"


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


@dataclass(frozen=True, slots=True)
class Explanation:
    """What one score of ``retrieve_explained`` is made of.

    ``bm25``: the entry's BM25 score (``bm25``: the score itself; ``hybrid``: 0.0
    when no word matched). ``cosine``: the cosine of its vector and the query's
    (``vector``: the score itself; ``hybrid``: None while it has no vector). For
    ``hybrid``, the view's largest BM25 score and cosine range, which give::

        score == 0.5 * bm25 / bm25_max + 0.5 * (cosine - cosine_min) / (cosine_max - cosine_min)

    (each part 0 where its divisor is 0 or the cosine is None). The reference
    score has no parts here: it is ``relevance * 0.5 + 0.4 * word share + 0.3 *
    tag match + 0.1``, as the README details.

    With context (:mod:`loopctl_memory.context`), ``context`` is what the
    entry's neighbours added at ``context_weight``, the other parts are the
    entry's own: ``score == own + context``, ``own`` being the score the parts
    above give. Without (a weight of 0), both are None.
    """

    score: float
    bm25: float | None = None
    cosine: float | None = None
    bm25_max: float | None = None
    cosine_min: float | None = None
    cosine_max: float | None = None
    context: float | None = None
    context_weight: float | None = None


def explain_single(ranking: str, score: float) -> Explanation:
    """The explanation of a score that is one part: BM25's, a cosine, or the reference's."""
    if ranking == "bm25":
        return Explanation(score, bm25=score)
    if ranking == "vector":
        return Explanation(score, cosine=score)
    return Explanation(score)
