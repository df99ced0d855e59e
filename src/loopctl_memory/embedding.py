"""Calling the user's embedder, and what a vector score is.

An :class:`~loopctl_memory.protocol.Embedder` may be synchronous (a local
model: it runs in a worker thread, so the event loop keeps serving) or
asynchronous (an HTTP endpoint). Either way the call is bounded by a timeout
and its answer checked: one finite row of ``dims`` numbers a text. A stored
vector is that row in binary32 scaled to unit length (a zero row stays zero),
so a cosine is a dot product. The embedder never sees an empty memory: its
vector is zero.

The ``vector`` score of an entry is the cosine of its vector and the query's:
the binary64 sum of the binary32 unit vectors' products, rounded to binary32.
Every product is exact in binary64, so the score does not depend on the order
of the sum except in the last bit of rare binary64 roundings; a brute-force
numpy cosine over the same vectors is its oracle.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.errors import EmbedderError, InvalidArgumentError
from loopctl_memory.protocol import Embedder

Vectors = npt.NDArray[np.float32]
"""Unit vectors, one row a text (binary32)."""

EMBED_BATCH = 256
"""The most texts one embedder call is given on a write (see :func:`embed_in_calls`)."""

DEFAULT_TIMEOUT = 30.0
"""Seconds an embedder call may take before the write goes on without its vectors."""

NO_EMBEDDER = (
    "making vectors needs an embedder: open the store with one (embedder=, a spec or"
    " 'recorded' for the one it records; on the command line --embedder SPEC)"
)
"""What a call that must make vectors says on a store without an embedder."""

_QUERIES_KEPT = 256


def check_embedder(embedder: object) -> Embedder:
    """``embedder`` if it has what the protocol asks (a name, dims >= 1, the two methods).

    Raises:
        InvalidArgumentError: it does not.

    """
    if not isinstance(embedder, Embedder):
        raise InvalidArgumentError(
            "embedder must have name, dims, embed_documents and embed_query,"
            f" not {type(embedder).__name__}"
        )
    name, dims = embedder.name, embedder.dims
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"an embedder's name must be a non-empty str, not {name!r}")
    if isinstance(dims, bool) or not isinstance(dims, int) or dims < 1:
        raise InvalidArgumentError(f"an embedder's dims must be an int >= 1, not {dims!r}")
    return embedder


def check_timeout(timeout: object) -> float:
    """``timeout`` as seconds (a positive finite number).

    Raises:
        InvalidArgumentError: it is not.

    """
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        raise InvalidArgumentError(f"embed_timeout must be a number, not {type(timeout).__name__}")
    if not 0 < timeout < float("inf"):
        raise InvalidArgumentError(f"embed_timeout must be > 0 and finite, got {timeout!r}")
    return float(timeout)


async def embed_documents(embedder: Embedder, texts: Sequence[str], seconds: float) -> Vectors:
    """The unit vectors of ``texts``, one row each.

    Raises:
        EmbedderError: the embedder raised, took longer than ``seconds``, or
            answered in another shape or with a number not finite.

    """
    rows = np.zeros((len(texts), embedder.dims), np.float32)
    # An empty memory means nothing: its vector is zero (no cosine with any query),
    # made without a call (an endpoint may refuse "", and one refusal fails a batch).
    meant = [at for at, text in enumerate(texts) if text]
    if not meant:
        return rows
    given = texts if len(meant) == len(texts) else [texts[at] for at in meant]
    found = await _call(embedder, embedder.embed_documents, list(given), seconds)
    made = unit_rows(found, len(given), embedder.dims)
    if len(meant) == len(texts):
        return made
    rows[meant] = made
    return rows


async def embed_in_calls(
    embedder: Embedder, texts: Sequence[str], seconds: float
) -> list[Vectors | None]:
    """The unit vectors of ``texts``, :data:`EMBED_BATCH` a call: each call's rows, or None.

    A write of many entries (an import) makes several calls, each within
    ``seconds``, so that one failing call leaves only its own entries pending.
    """
    made: list[Vectors | None] = []
    for start in range(0, len(texts), EMBED_BATCH):
        try:
            made.append(
                await embed_documents(embedder, texts[start : start + EMBED_BATCH], seconds)
            )
        except EmbedderError:
            made.append(None)
    return made


async def embed_query(embedder: Embedder, text: str, seconds: float) -> Vectors:
    """The unit vector of a query (shape ``(dims,)``); raises as :func:`embed_documents`."""
    found = await _call(embedder, embedder.embed_query, text, seconds)
    rows = unit_rows([np.asarray(found)], 1, embedder.dims)
    vector: Vectors = rows[0]
    return vector


class _RaisedError(Exception):
    """The embedder's own exception, told apart from the wait's timeout (both may be one)."""


async def _call(embedder: Embedder, method: Any, argument: Any, seconds: float) -> Any:
    try:
        async with asyncio.timeout(seconds):  # no task of its own: a single store feels one
            try:
                if inspect.iscoroutinefunction(method):
                    return await method(argument)
                # A thread: a local model computes for a while, and the event loop goes on.
                return await asyncio.to_thread(method, argument)
            except Exception as exc:  # the user's code may raise anything, TimeoutError too
                raise _RaisedError from exc
    except _RaisedError as raised:
        cause = raised.__cause__
        message = f"embedder {embedder.name!r} failed: {type(cause).__name__}: {cause}"
        raise EmbedderError(message.splitlines()[0]) from cause
    except TimeoutError as exc:
        raise EmbedderError(f"embedder {embedder.name!r} took longer than {seconds:g} s") from exc


def float32_rows(
    values: Any, count: int, dims: int, source: str = "the embedder's answer"
) -> Vectors:
    """``values`` as ``count`` finite binary32 rows of ``dims`` (the array itself if it is one).

    Raises:
        EmbedderError: another shape, or a number not finite; the message names ``source``.

    """
    rows = _shaped(values, count, dims, source)
    if not np.isfinite(rows).all():
        raise _not_finite(source)
    return rows


def unit_rows(values: Any, count: int, dims: int) -> Vectors:
    """``values`` as ``count`` binary32 rows of ``dims``, each scaled to unit length.

    Raises:
        EmbedderError: another shape, or a number not finite.

    """
    rows = _shaped(values, count, dims, "the embedder's answer")
    squares = np.einsum("ij,ij->i", rows, rows, dtype=np.float64)
    # A NaN or an infinity makes the sum one; finite binary32 squares cannot overflow it.
    if not math.isfinite(float(squares.sum())):
        raise _not_finite("the embedder's answer")
    norms = np.sqrt(squares).astype(np.float32)
    if not norms.all():
        norms[norms == 0] = 1  # a zero row stays zero
    unit: Vectors = rows / norms[:, None]
    return unit


def _shaped(values: Any, count: int, dims: int, source: str) -> Vectors:
    try:
        rows: Vectors = (
            values
            if isinstance(values, np.ndarray) and values.dtype == np.float32
            else np.asarray(values, dtype=np.float32)
        )
    except (TypeError, ValueError) as exc:
        raise EmbedderError(f"{source}: no array of numbers: {exc}") from exc
    if rows.shape != (count, dims):
        raise EmbedderError(f"{source}: vectors of shape {rows.shape}, not ({count}, {dims})")
    return rows


def _not_finite(source: str) -> EmbedderError:
    return EmbedderError(f"{source}: a number that is not finite (NaN, inf or null)")


def cosines(vectors: Vectors, query: Vectors) -> npt.NDArray[np.float64]:
    """The ``vector`` score of each row of ``vectors`` for ``query`` (see the module)."""
    if not len(vectors):
        return np.empty(0, np.float64)
    exact = vectors.astype(np.float64) @ query.astype(np.float64)
    return exact.astype(np.float32).astype(np.float64)


def error_bound(dims: int) -> float:
    """How far a binary32 BLAS dot product of unit vectors may be from :func:`cosines`.

    A sum of ``dims`` products accumulated in binary32 is within ``dims`` units
    of binary32 rounding (2^-24 each, relative to the sum of the products'
    magnitudes, at most 1 for unit vectors) of the exact sum; the score's own
    rounding adds one more. Doubled, for safety.
    """
    return 2.0 * (dims + 1) * 2.0**-24


def approximate_cosines(matrix: Vectors, query: Vectors) -> npt.NDArray[np.float32]:
    """Each row's dot product with ``query`` in binary32 (BLAS): within :func:`error_bound`."""
    found: npt.NDArray[np.float32] = matrix @ query
    return found


class QueryVectors:
    """The last queries' vectors, so a repeated query does not call the embedder again."""

    def __init__(self, kept: int = _QUERIES_KEPT) -> None:
        self._kept = kept
        self._vectors: OrderedDict[tuple[str, str], Vectors] = OrderedDict()

    async def vector(self, embedder: Embedder, text: str, seconds: float) -> Vectors:
        """The unit vector of query ``text`` by ``embedder``; raises as :func:`embed_query`."""
        key = (embedder.name, text)
        found = self._vectors.get(key)
        if found is not None:
            self._vectors.move_to_end(key)
            return found
        found = await embed_query(embedder, text, seconds)
        self._vectors[key] = found
        if len(self._vectors) > self._kept:
            self._vectors.popitem(last=False)
        return found
