"""A block of the token index as the rows it is written as, made outside any transaction.

Indexing a block costs most in making its rows (sorting postings, packing
them into bytes, marking pieces), not in writing them. So the rows are made
from the inverted block and its terms' ids alone (:func:`block_rows`), and
the transaction that writes them (:func:`insert_rows`) only inserts: a child
indexing the tail holds the write lock for the inserts, not for the work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.lexical import inversion, pieces

INT32_MAX = (1 << 31) - 1

Ints = npt.NDArray[np.int64]
Row = tuple[Any, ...]

_POSTINGS = "block, term_ids, lengths, seqs"
_COUNTED = _POSTINGS + ", counts, document_lengths"


@dataclass(frozen=True, slots=True)
class BlockIds:
    """The id of each term of an inverted block, in the order of each vocabulary's terms."""

    tokens: Ints
    tags: Ints
    words: Ints


@dataclass(frozen=True, slots=True)
class BlockRows:
    """A block's rows: postings of tokens, tag values and words, and pieces."""

    tokens: list[Row]
    tags: list[Row]
    words: list[Row]
    pieces: list[Row]


def block_rows(
    block: int,
    texts: list[tuple[int, str]],
    inverted: inversion.Block,
    ids: BlockIds,
    row_entries: int,
) -> BlockRows:
    """The rows of the block from seq ``block`` on: a row each ``row_entries`` seqs, a table."""
    return BlockRows(
        tokens=_posting_rows(block, inverted.tokens, ids.tokens, row_entries),
        tags=_posting_rows(block, inverted.tags, ids.tags, row_entries),
        words=_posting_rows(block, inverted.words, ids.words, row_entries, inverted.lengths),
        pieces=pieces.piece_rows(block, texts, row_entries),
    )


def insert_rows(connection: Connection, rows: BlockRows, tables: tuple[str, str, str]) -> None:
    """Insert the rows: postings into ``tables`` (tokens', tag values', words'), and pieces."""
    backend = backend_of(connection)
    for table, values, columns in zip(
        tables, (rows.tokens, rows.tags, rows.words), (_POSTINGS, _POSTINGS, _COUNTED), strict=True
    ):
        if values:
            marks = ", ".join("?" * len(columns.split(", ")))
            statement = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608
            connection.exec_driver_sql(backend.sql(statement), values)
    pieces.insert_rows(connection, rows.pieces)


def _posting_rows(
    block: int,
    postings: inversion.BlockPostings,
    ids: Ints,
    row_entries: int,
    lengths: inversion.DocumentLengths | None = None,
) -> list[Row]:
    """One vocabulary's postings as rows, given the id of each of its terms.

    A row for each ``row_entries`` seqs from ``block`` on, numbered by its
    first: its term ids ascending, each term's count of seqs, the seqs term
    after term. A counted vocabulary's row also holds each posting's count and
    the document ``lengths`` of its seqs, from its first to the last with a word.
    """
    if not postings.terms:
        return []
    term_ids = ids[postings.term_of]
    seqs, counts = postings.seqs, postings.counts
    row_entries = max(row_entries, 1)
    rows = block + (seqs - block) // row_entries * row_entries
    order = np.lexsort((seqs, term_ids, rows))
    rows, term_ids, seqs, counts = rows[order], term_ids[order], seqs[order], counts[order]
    cuts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
    values = []
    for first, end in zip(
        np.concatenate(([0], cuts)).tolist(), np.append(cuts, len(rows)).tolist(), strict=True
    ):
        held = term_ids[first:end]
        starts = np.flatnonzero(np.concatenate(([True], held[1:] != held[:-1])))
        row = int(rows[first])
        value: Row = (
            row,
            _int64s(held[starts]),
            _int64s(np.diff(np.append(starts, len(held)))),
            _int64s(seqs[first:end]),
        )
        if lengths is not None:
            value += (
                _int32s(counts[first:end]),
                _int32s(_row_lengths(lengths, row, row + row_entries)),
            )
        values.append(value)
    return values


def _row_lengths(lengths: inversion.DocumentLengths, row: int, end: int) -> Ints:
    """The document lengths of seqs ``row`` to the last with a word below ``end`` (0 for none)."""
    low, high = np.searchsorted(lengths.seqs, [row, end]).tolist()
    if low == high:
        return np.empty(0, np.int64)
    held = np.zeros(int(lengths.seqs[high - 1]) - row + 1, np.int64)
    held[lengths.seqs[low:high] - row] = lengths.lengths[low:high]
    return held


def _int64s(values: Ints) -> bytes:
    return values.astype("<i8", copy=False).tobytes()


def _int32s(values: Ints) -> bytes:
    """As little-endian int32s, which counts and lengths are stored as.

    Raises:
        OverflowError: a value does not fit (a document of over 2^31 words).

    """
    if len(values) and int(values.max()) > INT32_MAX:
        raise OverflowError(f"{int(values.max())} does not fit in a 32-bit count")
    return values.astype("<i4").tobytes()
