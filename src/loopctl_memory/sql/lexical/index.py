"""The token index: which entries hold which tokens, so retrieval reads candidates, not the table.

A query word never contains whitespace, so it occurs in a memory exactly when
it occurs inside one of the memory's lowercase whitespace-separated *tokens*.
The tokens that contain a word come from the trigram index of the vocabulary
(:mod:`loopctl_memory.sql.lexical.grams`, written here as tokens are created), and
their postings name every entry that contains the word; a word of one or two
code points, in a large share of the tokens, has its entries written here
directly (:mod:`loopctl_memory.sql.lexical.pieces`). Whole lowercase tags are indexed
the same way as tokens, for the tag bonus (a tag must contain the whole
query). Each block also keeps its entries' relevance and scope as indexing
found them (``entry_blocks``), which a new process reads instead of every entry.

Entries are indexed in blocks, not one by one: every entry with
``seq <= indexed_through`` is in the postings, and the newer *tail* is read
directly. A write that leaves the tail at the store's ``tail_limit`` or more
indexes it in the same transaction, so the tail stays small.

Each block's postings are one row: its terms' ids, how many seqs each has,
and the seqs, term after term; a process reads the blocks whole (see
:mod:`loopctl_memory.sql.lexical.segments`). The same blocks hold BM25's word
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

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection, Table, delete, func, select, update

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.bm25_tokens import document_tokens
from loopctl_memory.flat import FlatBatch
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.lexical import grams, inversion
from loopctl_memory.sql.lexical.block_rows import BlockIds, BlockRows, block_rows, insert_rows
from loopctl_memory.sql.lexical.term_ids import KnownTerms
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
    """Whether its terms' trigrams are indexed (:mod:`~loopctl_memory.sql.lexical.grams`)."""


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


def tail_length(connection: Connection) -> int:
    """How many entries are above the watermark (removed ones included)."""
    return write_position(connection).tail_after(0)


def shorten_tail(
    connection: Connection,
    tail_limit: int,
    known: KnownTerms | None = None,
    *,
    at: int | None = None,
    now: bool = False,
) -> int:
    """Index the tail if it has reached ``at`` entries (default ``tail_limit``), or ``now``.

    Returns the watermark. ``tail_limit``: the store's, the seqs a row of postings covers.
    """
    position = write_position(connection)
    if position.tail_after(0) >= (1 if now else at or tail_limit):
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
    if texts:
        tail = Tail(start, texts[-1][0], texts, tag_values)
        inverted = inversion.invert_block(texts, tag_values)
        ids = term_ids(connection, inverted, known)
        rows = block_rows(start + 1, texts, inverted, ids, row_entries)
        _write_block(connection, tail, rows, row_entries)


@dataclass(frozen=True, slots=True)
class Tail:
    """The entries above the watermark as one transaction read them, to index elsewhere.

    ``texts``: (seq, lowercase memory) for ``mark < seq <= through``, by seq;
    ``tag_values``: (seq, lowercase tag), an entry's tags in their order.
    """

    mark: int
    through: int
    texts: list[tuple[int, str]]
    tag_values: list[tuple[int, str]]
    generation: int = 0


def read_tail(connection: Connection, at_least: int) -> Tail | None:
    """The tail as this transaction sees it, if it holds ``at_least`` entries (else None)."""
    position = write_position(connection)
    if position.tail_after(0) < max(at_least, 1):
        return None
    mark, generation = _mark_and_generation(connection)
    texts, tag_values = _read_back(connection, mark, None)
    if not texts:
        return None
    return Tail(mark, texts[-1][0], texts, tag_values, generation)


def _mark_and_generation(connection: Connection) -> tuple[int, int]:
    """The watermark and the generation: what a tail read earlier must find unchanged."""
    mark, generation = connection.execute(
        select(index_state.c.indexed_through, index_state.c.generation)
    ).one()
    return int(mark), int(generation)


def term_ids(
    connection: Connection, inverted: inversion.Block, known: KnownTerms | None = None
) -> BlockIds:
    """The ids of the block's terms in each vocabulary, creating those not yet in it.

    A created token's trigrams are indexed with it. Terms are never deleted and
    keep their ids, so they may be created in a transaction of their own, ahead
    of the block's: a term that no block names costs a row and nothing else.
    ``known``: the store's term ids, learnt by its earlier writes.
    """
    known = known if known is not None else KnownTerms()
    held = []
    for vocabulary, postings in (
        (TOKENS, inverted.tokens),
        (TAG_VALUES, inverted.tags),
        (WORDS, inverted.words),
    ):
        if not postings.terms:
            held.append(np.empty(0, np.int64))
            continue
        table = vocabulary.terms
        ids, created = known.ids(connection, table.name, vocabulary.term, postings.terms)
        if vocabulary.grams:
            grams.add_tokens(connection, created)
        held.append(ids)
    return BlockIds(*held)


def write_tail(connection: Connection, tail: Tail, rows: BlockRows, *, row_entries: int) -> bool:
    """Write a tail read in an earlier transaction as the next block; whether it was.

    ``rows``: its rows, made from its terms' ids (:func:`term_ids`). Not when
    the watermark or the generation moved since it was read (another writer
    indexed, or every entry was indexed again): the caller reads the tail
    again. An entry rewritten or removed since is in the change log, which
    every process applies over the postings, as it does for one changed after
    its block was written in the same transaction.
    """
    if _mark_and_generation(connection) != (tail.mark, tail.generation):
        return False
    _write_block(connection, tail, rows, row_entries)
    return True


def _write_block(connection: Connection, tail: Tail, rows: BlockRows, row_entries: int) -> None:
    """Insert the tail's rows as the block after ``tail.mark`` and move the watermark."""
    tables = (TOKENS.blocks.name, TAG_VALUES.blocks.name, WORDS.blocks.name)
    insert_rows(connection, rows, tables)
    _add_entry_blocks(connection, tail.mark + 1, tail.through, row_entries)
    connection.execute(update(index_state).values(indexed_through=tail.through))
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
