"""Context: memories written as a stream vouch for their neighbours in it.

Agents store memories as a stream (the turns of a conversation, the steps of
a run, a tool call and its outcome), and a memory's neighbours in that stream
tell what it is about. With a context weight ``λ`` > 0, the ``bm25``,
``vector`` and ``hybrid`` rankings score each entry as::

    score = own + λ * (left1 + right1) + λ / 2 * (left2 + right2)

where ``own`` is the entry's score in the ranking without context and
``left1``, ``right1`` (``left2``, ``right2``) are the own scores of the live
entries just before and after it (two steps away) in insertion order within
its own scope (0.0 where there is none). Exactly: ``part = λ * (left1 +
right1) + (λ / 2) * (left2 + right2)``, then ``own + part``, in binary64.

- A neighbour's own score is what it scores in the ranking whether or not it
  could compete: 0.0 for a BM25 score that is not positive; in ``vector`` its
  cosine, 0.0 while it has no vector; in ``hybrid`` its fused score (0.0 with
  neither a BM25 score nor a vector).
- A filter only decides who competes: an entry it leaves out still vouches
  for its neighbours (as it still counts in BM25's statistics). A removed
  entry is no neighbour: the entries around it become each other's.
- A view over descendants does not join scopes: each entry's neighbours are in
  its own scope, and each scope has its own weight.
- An entry competes if it competes without context, or if its neighbours give
  it a positive part (a memory no word matched, between two that did).

``"auto"`` (the default of these rankings) takes each scope's weight from how
coherent its stream is (:func:`coherence` of its last :data:`RECENT` entries,
:func:`auto_weight`): 0 for a stream whose neighbours are no more alike than any
two of its entries (a store of independent facts), :data:`FULL_WEIGHT` once
they clearly are. Chosen on the LoCoMo dev set (``../shared/eval``): two
neighbours each side, halving, at 0.25: hit@5 ``hybrid`` 0.628 -> 0.688,
``bm25`` 0.589 -> 0.652, ``vector`` 0.416 -> 0.482 in order; the same turns
stored in a random order measure no coherence (z below 2 in every
conversation, against 7-24 in order), so they rank as without context.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Final, Literal

import numpy as np
import numpy.typing as npt

from loopctl_memory.bm25_tokens import document_tokens
from loopctl_memory.errors import InvalidArgumentError

Floats = npt.NDArray[np.float64]
Context = float | Literal["auto"]
"""What ``context=`` takes: ``"auto"``, or a weight ``λ`` >= 0 (0: no context)."""

AUTO: Final = "auto"
WINDOW: Final = 2
"""Neighbours on each side that vouch for an entry."""
FULL_WEIGHT: Final = 0.25
"""``λ`` of a clearly coherent stream under ``"auto"``."""
RECENT: Final = 256
"""Entries (the newest of a scope) that :func:`coherence` measures."""
_LEAST: Final = 16  # fewer entries than this tell nothing: no context
_SURE_BELOW, _SURE_ABOVE = 3.0, 5.0  # z: no weight below, the full weight above
_LEXICAL_DIMS: Final = 256


def check_context(value: object, *, what: str = "context") -> Context:
    """``value`` if it is ``"auto"`` or a finite weight >= 0 (a float).

    Raises:
        InvalidArgumentError: anything else.

    """
    if value == AUTO and isinstance(value, str):
        return AUTO
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidArgumentError(f"{what} must be 'auto' or a weight >= 0, not {value!r}")
    if value < 0:
        raise InvalidArgumentError(f"{what} must be 'auto' or a weight >= 0, not {value!r}")
    return float(value)


def check_context_for(ranking: str, value: object) -> Context:
    """A call's ``context`` for ``ranking``, checked; a weight is refused for reference.

    Raises:
        InvalidArgumentError: ``value`` is not a context, or ``ranking`` is
            ``reference`` (which stays the seed's) and ``value`` a weight > 0.

    """
    chosen = check_context(value)
    if ranking == "reference" and chosen != AUTO and chosen > 0:
        raise InvalidArgumentError(
            "the reference ranking takes no context (it ranks as loopctl 0.1.0 does):"
            " context applies to bm25, vector and hybrid"
        )
    return chosen


def part(
    weight: Floats | float, left1: Floats, right1: Floats, left2: Floats, right2: Floats
) -> Floats:
    """The context part of each entry from its neighbours' own scores (see the module)."""
    result: Floats = weight * (left1 + right1) + (weight * 0.5) * (left2 + right2)
    return result


def in_stream(own: Floats, weight: float) -> Floats:
    """The context part of each entry of one stream, its own scores in order (the oracle's)."""
    size = len(own)
    shifted = [np.zeros(size, np.float64) for _ in range(2 * WINDOW)]
    for step in range(1, WINDOW + 1):
        if step < size:
            shifted[2 * step - 2][step:] = own[:-step]  # left
            shifted[2 * step - 1][:-step] = own[step:]  # right
    return part(weight, *shifted)


def auto_weight(z: float) -> float:
    """The weight ``"auto"`` gives a stream whose coherence is ``z`` (see :func:`coherence`)."""
    if not z > _SURE_BELOW:
        return 0.0
    if z >= _SURE_ABOVE:
        return FULL_WEIGHT
    return FULL_WEIGHT * (z - _SURE_BELOW) / (_SURE_ABOVE - _SURE_BELOW)


def coherence(rows: Floats) -> float:
    """How much more alike adjacent rows are than any two rows: a z-score (0: not at all).

    ``rows``: unit vectors (or zero rows) of a stream's entries, in order. The
    mean cosine of adjacent rows against the mean over every pair of rows,
    in standard errors of the adjacent ones'; 0.0 for fewer than 16 rows.
    """
    count = len(rows)
    if count < _LEAST:
        return 0.0
    adjacent = np.einsum("ij,ij->i", rows[1:], rows[:-1])
    total = rows.sum(axis=0)
    squares = float(np.einsum("ij,ij->", rows, rows))
    every = (float(total @ total) - squares) / (count * (count - 1))
    mean = float(adjacent.mean())
    spread = float(adjacent.std())
    if spread == 0.0:
        return math.inf if mean > every else 0.0
    return (mean - every) / (spread / math.sqrt(count - 1))


def lexical_rows(documents: Iterable[tuple[str, Sequence[str]]]) -> Floats:
    """Unit rows of each (memory, tags)'s distinct BM25 tokens, hashed: for :func:`coherence`.

    For stores without vectors: adjacent memories that share words are alike.
    """
    found = []
    for memory, tags in documents:
        row = np.zeros(_LEXICAL_DIMS, np.float64)
        for token in set(document_tokens(memory.lower(), [tag.lower() for tag in tags])):
            digest = hashlib.blake2b(token.encode(), digest_size=4).digest()
            row[int.from_bytes(digest, "little") % _LEXICAL_DIMS] += 1.0
        norm = float(np.sqrt(row @ row))
        found.append(row / norm if norm else row)
    return np.array(found, np.float64).reshape(len(found), _LEXICAL_DIMS)


def weight_of(context: Context, rows: Floats) -> float:
    """The weight a stream ranks with: ``context`` itself, or for ``"auto"`` its coherence's."""
    if context != AUTO:
        return float(context)
    return auto_weight(coherence(rows))
