"""The token index: which entries hold which tokens, so retrieval reads candidates, not the table.

A query word never contains whitespace, so it occurs in a memory exactly when
it occurs inside one of the memory's lowercase whitespace-separated *tokens*.
The tokens that contain a word come from the trigram index of the vocabulary
(:mod:`loopctl_memory.sql.grams`, written here as tokens are created), and
their postings name every entry that contains the word; a word of one or two
code points, in a large share of the tokens, has its entries written here
directly (:mod:`loopctl_memory.sql.pieces`). Whole lowercase tags are indexed
the same way as tokens, for the tag bonus (a tag must contain the whole
query). Each block also keeps its entries' relevance and scope as indexing
found them (``entry_blocks``), which a new process reads instead of every entry.

Entries are indexed in blocks, not one by one: every entry with
``seq <= indexed_through`` is in the postings, and the newer *tail* is read
directly. A write that leaves the tail at the store's ``tail_limit`` or more
indexes it in the same transaction, so the tail stays small.

Each block's postings are one row: its terms' ids, how many seqs each has,
and the seqs, term after term; a process reads the blocks whole (see
:mod:`loopctl_memory.sql.segments`). The same blocks hold BM25's word
postings (:mod:`loopctl_memory.bm25_tokens`), each seq with how many times the
entry's document holds the word, and each block row also holds the length of
each of its entries' documents, so a process reads lengths with the postings
instead of summing counts. Postings of deleted entries stay behind:
retrieval knows which entries live, so they cost a little space and nothing
else. Seqs are never given out twice (see ``write_position``).

These functions take a synchronous connection inside the caller's transaction
(``AsyncConnection.run_sync``); none of them commits.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Table, delete, func, select, update

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.bm25_tokens import document_tokens
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql import grams, inversion, pieces
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.tables import (
    changes,
    entries,
    entry_blocks,
    index_state,
    piece_blocks,
    tag_blocks,
    tag_values,
    tags,
    token_blocks,
    token_grams,
    tokens,
    word_blocks,
    words,
)
from loopctl_memory.sql.term_ids import KnownTerms

INT32_MAX = (1 << 31) - 1

Ints = npt.NDArray[np.int64]


@dataclass(frozen=True, slots=True)
class TermTables:
    """A vocabulary table (distinct terms, and its column of them) and its block postings."""

    terms: Table
    term: str
    blocks: Table
    counted: bool = False
    """Whether each posting also holds a count (the blocks' ``counts`` column)."""
    grams: bool = False
    """Whether its terms' trigrams are indexed (:mod:`~loopctl_memory.sql.grams`)."""


TOKENS = TermTables(tokens, "token", token_blocks, grams=True)
TAG_VALUES = TermTables(tag_values, "value", tag_blocks)
WORDS = TermTables(words, "word", word_blocks, counted=True)
_ANALYZED = [
    table.name
    for table in (
        entries,
        tags,
        tokens,
        token_grams,
        token_blocks,
        piece_blocks,
        tag_values,
        tag_blocks,
        words,
        word_blocks,
    )
]


def word_counts(memory_lower: str, tags_lower: Iterable[str]) -> dict[str, int]:
    """Each BM25 word of a document (lowercase memory, then tags) and how many times it holds it.

    The document's length is the sum of the counts.
    """
    held: dict[str, int] = {}
    for word in document_tokens(memory_lower, tags_lower):  # a dict counts faster than a Counter
        held[word] = held.get(word, 0) + 1
    return held


def watermark(connection: Connection) -> int:
    """The highest seq whose entry is in the postings (0 before any indexing)."""
    value = connection.execute(select(index_state.c.indexed_through)).scalar_one_or_none()
    return int(value or 0)


@dataclass(frozen=True, slots=True)
class WritePosition:
    """Where the next write goes: the first free seq, and the watermark."""

    next_seq: int
    indexed_through: int

    def tail_after(self, written: int) -> int:
        """How many entries are unindexed once ``written`` more are stored."""
        return self.next_seq + written - 1 - self.indexed_through


def write_position(connection: Connection) -> WritePosition:
    """Read the first free insertion number in one query.

    It is above every entry, the watermark and every removed seq: a seq names
    one entry for ever, so neither the postings nor a process's copy of the
    ranking columns can mistake a new entry for a removed one.
    """
    top, mark, removed = connection.execute(
        select(
            func.max(entries.c.seq),
            select(index_state.c.indexed_through).scalar_subquery(),
            select(index_state.c.removed_through).scalar_subquery(),
        )
    ).one()
    mark = int(mark or 0)
    return WritePosition(max(int(top or 0), mark, int(removed or 0)) + 1, mark)


def shorten_tail(
    connection: Connection, tail_limit: int, known: KnownTerms | None = None, *, now: bool = False
) -> int:
    """Index the tail if it has reached ``tail_limit`` entries, or ``now``; return the watermark."""
    position = write_position(connection)
    if position.tail_after(0) >= (1 if now else tail_limit):
        index_tail(connection, row_entries=tail_limit, known=known)
        return watermark(connection)
    return position.indexed_through


def rebuild(connection: Connection, *, row_entries: int) -> None:
    """Index every entry again from its current text and tags, and empty the change log.

    For after many entries were rewritten at once: their postings held their
    old words. Every process must then read its copy again (the caller raises
    the generation); the log it would have read is gone, so the vector epoch
    rises too: a vector index file can no longer learn from it what changed.
    """
    for table in (token_blocks, piece_blocks, tag_blocks, word_blocks, entry_blocks, changes):
        connection.execute(delete(table))
    connection.execute(
        update(index_state).values(indexed_through=0, vector_epoch=index_state.c.vector_epoch + 1)
    )
    index_tail(connection, row_entries=row_entries)


def write_entry_blocks_again(connection: Connection, *, row_entries: int) -> None:
    """Write the indexed entries' relevance and scope rows again, from the entries as they are.

    For a change to many entries' relevance that is not logged (a decay pass):
    the caller raises the generation, and every process reads the rows again.
    """
    connection.execute(delete(entry_blocks))
    mark = watermark(connection)
    if mark:
        _add_entry_blocks(connection, 1, mark, row_entries)


def index_tail(
    connection: Connection,
    fresh: FlatBatch | None = None,
    first_seq: int = 0,
    *,
    row_entries: int,
    known: KnownTerms | None = None,
) -> None:
    """Add every entry above the watermark to the postings.

    ``fresh``: the tail's newest entries, stored from ``first_seq`` on in this
    transaction, whose texts and tags are taken from memory; the older rest of
    the tail is read back. ``row_entries``: the most seqs one row of postings
    covers (the store's ``tail_limit``), so that rows stay far below the
    databases' limits on a value's size however large one write is.
    ``known``: the store's term ids, learnt by its earlier writes.
    """
    start = watermark(connection)
    read_before = first_seq if fresh is not None else None
    texts, tag_values = _read_back(connection, start, read_before)
    if fresh is not None and len(fresh):
        texts.extend((first_seq + n, entry[3]) for n, entry in enumerate(fresh.entries))
        tag_values.extend((first_seq + tag[0], tag[3]) for tag in fresh.tags)
    if not texts:
        return
    known = known if known is not None else KnownTerms()
    block = start + 1
    inverted = inversion.invert_block(texts, tag_values)
    _add_postings(connection, TOKENS, block, inverted.tokens, row_entries, known=known)
    pieces.add_pieces(connection, block, texts, row_entries)
    _add_postings(connection, TAG_VALUES, block, inverted.tags, row_entries, known=known)
    _add_postings(connection, WORDS, block, inverted.words, row_entries, inverted.lengths, known)
    _add_entry_blocks(connection, block, texts[-1][0], row_entries)
    connection.execute(update(index_state).values(indexed_through=texts[-1][0]))
    backend_of(connection).after_indexing(connection, _ANALYZED)


def _read_back(
    connection: Connection, after: int, before: int | None
) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """Stored entries ``after < seq < before``: (seq, lowercase memory), (seq, lowercase tag).

    Both in seq order, an entry's tags in their order.
    """
    if before is not None and before <= after + 1:
        return [], []
    backend = backend_of(connection)
    decode = backend.decode
    limit = before if before is not None else INT64_MAX
    # Through the driver: SQLAlchemy's per-row result processing would cost more than the rest.
    rows = connection.exec_driver_sql(
        backend.sql("SELECT seq, memory_lower FROM entries WHERE seq > ? AND seq < ? ORDER BY seq"),
        (after, limit),
    ).all()
    tag_rows = connection.exec_driver_sql(
        backend.sql(
            "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > ? AND entry_seq < ? "
            "ORDER BY entry_seq, position"
        ),
        (after, limit),
    ).all()
    return (
        [(int(seq), decode(text)) for seq, text in rows],
        [(int(seq), decode(value)) for seq, value in tag_rows],
    )


def _add_postings(  # noqa: PLR0917 - the block and its postings, as they are written
    connection: Connection,
    vocabulary: TermTables,
    block: int,
    postings: inversion.BlockPostings,
    row_entries: int,
    lengths: inversion.DocumentLengths | None = None,
    known: KnownTerms | None = None,
) -> None:
    """Add one block's postings, creating the terms not yet in the vocabulary.

    A row for each ``row_entries`` seqs from ``block`` on, numbered by its
    first: its term ids ascending, each term's count of seqs, the seqs term
    after term. A counted vocabulary's row also holds each posting's count and
    the document ``lengths`` of its seqs, from its first to the last with a word.
    """
    terms = postings.terms
    if not terms:
        return
    known = known if known is not None else KnownTerms()
    ids, created = known.ids(connection, vocabulary.terms.name, vocabulary.term, terms)
    if vocabulary.grams:
        grams.add_tokens(connection, created)
    term_ids = ids[postings.term_of]
    seqs, counts = postings.seqs, postings.counts
    row_entries = max(row_entries, 1)
    rows = block + (seqs - block) // row_entries * row_entries
    order = np.lexsort((seqs, term_ids, rows))
    rows, term_ids, seqs, counts = rows[order], term_ids[order], seqs[order], counts[order]
    cuts = np.flatnonzero(rows[1:] != rows[:-1]) + 1
    columns = "block, term_ids, lengths, seqs"
    if lengths is not None:
        columns += ", counts, document_lengths"
    marks = ", ".join("?" * (len(columns.split(", "))))
    values = []
    for first, end in zip(
        np.concatenate(([0], cuts)).tolist(), np.append(cuts, len(rows)).tolist(), strict=True
    ):
        held = term_ids[first:end]
        starts = np.flatnonzero(np.concatenate(([True], held[1:] != held[:-1])))
        row = int(rows[first])
        value: tuple[Any, ...] = (
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
    backend = backend_of(connection)
    connection.exec_driver_sql(
        backend.sql(
            f"INSERT INTO {vocabulary.blocks.name} ({columns}) VALUES ({marks})"  # noqa: S608
        ),
        values,
    )


def _add_entry_blocks(connection: Connection, block: int, through: int, row_entries: int) -> None:
    """Write the relevance and scope of the entries ``block <= seq <= through`` as they are now.

    A row for each ``row_entries`` seqs from ``block`` on, like the postings:
    a new process reads these few rows instead of every entry (see
    ``tables.entry_blocks``); what changes later is in the change log.
    """
    backend = backend_of(connection)
    rows = connection.exec_driver_sql(
        backend.sql("SELECT seq, relevance, scope_id FROM entries WHERE seq >= ? AND seq <= ?"),
        (block, through),
    ).all()
    seqs = np.fromiter((row[0] for row in rows), np.int64, len(rows)) - block
    relevance = np.full(through - block + 1, np.nan, "<f8")
    relevance[seqs] = np.fromiter((row[1] for row in rows), np.float64, len(rows))
    scope_ids = np.zeros(through - block + 1, "<i8")
    scope_ids[seqs] = np.fromiter((row[2] for row in rows), np.int64, len(rows))
    row_entries = max(row_entries, 1)
    connection.exec_driver_sql(
        backend.sql("INSERT INTO entry_blocks (block, relevance, scope_ids) VALUES (?, ?, ?)"),
        [
            (
                block + start,
                relevance[start : start + row_entries].tobytes(),
                scope_ids[start : start + row_entries].tobytes(),
            )
            for start in range(0, through - block + 1, row_entries)
        ],
    )


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
