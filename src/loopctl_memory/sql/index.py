"""The token index: which entries hold which tokens, so retrieval reads candidates, not the table.

A query word never contains whitespace, so it occurs in a memory exactly when
it occurs inside one of the memory's lowercase whitespace-separated *tokens*.
The vocabulary of distinct tokens is small, so a substring scan of it is cheap,
and the postings of the tokens that contain a word name every entry that
contains the word. Whole lowercase tags are indexed the same way, for the tag
bonus (a tag must contain the whole query).

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

import bisect
import itertools
import struct
import sys
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from sqlalchemy import Connection, Table, delete, func, select, update

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.bm25_tokens import document_tokens
from loopctl_memory.flat import FlatBatch, invert_tags, invert_tokens
from loopctl_memory.sql.backend import backend_of
from loopctl_memory.sql.tables import (
    changes,
    entries,
    index_state,
    tag_blocks,
    tag_values,
    tags,
    token_blocks,
    tokens,
    word_blocks,
    words,
)

_TERMS_PER_LOOKUP = 10_000  # under SQLite's limit on bound parameters


def pack32(values: Sequence[int]) -> bytes:
    """Integers as little-endian int32s: how word counts and document lengths are stored.

    Raises:
        struct.error: a value does not fit in a signed 32-bit integer.

    """
    return struct.pack(f"<{len(values)}i", *values)


def pack_all(lists: Iterable[Sequence[int]], code: str = "q") -> bytes:
    """Lists of integers one after the other, each packed as :func:`pack` or :func:`pack32` does.

    ``code`` "q" for int64s, "i" for int32s: one pass in C, where a call a list
    would cost more than the packing.

    Raises:
        OverflowError: a value does not fit.

    """
    packed = array(code, itertools.chain.from_iterable(lists))
    if sys.byteorder != "little":  # pragma: no cover - every platform we run on is little
        packed.byteswap()
    return packed.tobytes()


def pack(values: Sequence[int]) -> bytes:
    """Integers as little-endian int64s: how postings are stored.

    Raises:
        struct.error: a value does not fit in a signed 64-bit integer.

    """
    return struct.pack(f"<{len(values)}q", *values)


@dataclass(frozen=True, slots=True)
class TermTables:
    """A vocabulary table (distinct terms, and its column of them) and its block postings."""

    terms: Table
    term: str
    blocks: Table
    counted: bool = False
    """Whether each posting also holds a count (the blocks' ``counts`` column)."""


TOKENS = TermTables(tokens, "token", token_blocks)
TAG_VALUES = TermTables(tag_values, "value", tag_blocks)
WORDS = TermTables(words, "word", word_blocks, counted=True)
_ANALYZED = [
    table.name
    for table in (entries, tags, tokens, token_blocks, tag_values, tag_blocks, words, word_blocks)
]

Postings = dict[str, list[int]]
"""Term -> the seqs holding it, ascending."""


@dataclass(slots=True)
class WordCounts:
    """What word postings carry beyond their seqs: counts, and each document's length."""

    counts: dict[str, list[int]] = field(default_factory=dict)
    """Word -> how many times each seq of its postings holds it."""
    lengths: dict[int, int] = field(default_factory=dict)
    """Seq -> how many words its document has (those with none are left out)."""


def word_counts(memory_lower: str, tags_lower: Iterable[str]) -> dict[str, int]:
    """Each BM25 word of a document (lowercase memory, then tags) and how many times it holds it.

    The document's length is the sum of the counts.
    """
    held: dict[str, int] = {}
    for word in document_tokens(memory_lower, tags_lower):  # a dict counts faster than a Counter
        held[word] = held.get(word, 0) + 1
    return held


def invert_words(documents: Iterable[tuple[int, str, list[str]]], into: Postings) -> WordCounts:
    """Add each (seq, lowercase memory, lowercase tags)'s BM25 words; return their counts."""
    counted = WordCounts()
    counts, lengths = counted.counts, counted.lengths
    for seq, memory, tags_lower in documents:
        held = word_counts(memory, tags_lower)
        if not held:
            continue
        lengths[seq] = sum(held.values())
        for word, times in held.items():
            found = into.get(word)
            if found is None:
                into[word] = [seq]
                counts[word] = [times]
            else:
                found.append(seq)
                counts[word].append(times)
    return counted


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


def shorten_tail(connection: Connection, tail_limit: int) -> int:
    """Index the tail if it has reached ``tail_limit`` entries; return the watermark after."""
    position = write_position(connection)
    if position.tail_after(0) >= tail_limit:
        index_tail(connection, row_entries=tail_limit)
        return watermark(connection)
    return position.indexed_through


def rebuild(connection: Connection, *, row_entries: int) -> None:
    """Index every entry again from its current text and tags, and empty the change log.

    For after many entries were rewritten at once: their postings held their
    old words. Every process must then read its copy again (the caller raises
    the generation); the log it would have read is gone.
    """
    for table in (token_blocks, tag_blocks, word_blocks, changes):
        connection.execute(delete(table))
    connection.execute(update(index_state).values(indexed_through=0))
    index_tail(connection, row_entries=row_entries)


def index_tail(
    connection: Connection,
    fresh: FlatBatch | None = None,
    first_seq: int = 0,
    *,
    row_entries: int,
) -> None:
    """Add every entry above the watermark to the postings.

    ``fresh``: the tail's newest entries, stored from ``first_seq`` on in this
    transaction, whose tokens and tags are taken from memory; the older rest of
    the tail is read back. ``row_entries``: the most seqs one row of postings
    covers (the store's ``tail_limit``), so that rows stay far below the
    databases' limits on a value's size however large one write is.
    """
    start = watermark(connection)
    by_token: Postings = {}
    by_tag: Postings = {}
    documents: list[tuple[int, str, list[str]]] = []
    read_before = first_seq if fresh is not None else None
    last = _read_back(connection, start, read_before, by_token, by_tag, documents)
    if fresh is not None and len(fresh):
        invert_tokens(
            ((first_seq + n, entry[3]) for n, entry in enumerate(fresh.entries)), by_token
        )
        invert_tags(((first_seq + tag[0], tag[3]) for tag in fresh.tags), by_tag)
        fresh_tags: dict[int, list[str]] = {}
        for tag in fresh.tags:
            fresh_tags.setdefault(tag[0], []).append(tag[3])
        documents.extend(
            (first_seq + n, entry[3], fresh_tags.get(n, []))
            for n, entry in enumerate(fresh.entries)
        )
        last = first_seq + len(fresh) - 1
    if last == start:
        return
    by_word: Postings = {}
    word_counts = invert_words(documents, by_word)
    _add_postings(connection, TOKENS, start + 1, by_token, row_entries)
    _add_postings(connection, TAG_VALUES, start + 1, by_tag, row_entries)
    _add_postings(connection, WORDS, start + 1, by_word, row_entries, word_counts)
    connection.execute(update(index_state).values(indexed_through=last))
    backend_of(connection).after_indexing(connection, _ANALYZED)


def _read_back(  # noqa: PLR0917 - one caller, the ranges and the three outputs
    connection: Connection,
    after: int,
    before: int | None,
    by_token: Postings,
    by_tag: Postings,
    documents: list[tuple[int, str, list[str]]],
) -> int:
    """Invert the stored entries with ``after < seq < before``; return the last seq read.

    Their (seq, lowercase memory, lowercase tags) go to ``documents``, for the word postings.
    """
    if before is not None and before <= after + 1:
        return after
    backend = backend_of(connection)
    decode = backend.decode
    limit = before if before is not None else INT64_MAX
    # Through the driver: SQLAlchemy's per-row result processing would cost more than the rest.
    rows = connection.exec_driver_sql(
        backend.sql("SELECT seq, memory_lower FROM entries WHERE seq > ? AND seq < ? ORDER BY seq"),
        (after, limit),
    ).all()
    texts = [(int(seq), decode(text)) for seq, text in rows]
    invert_tokens(texts, by_token)
    tag_rows = connection.exec_driver_sql(
        backend.sql(
            "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > ? AND entry_seq < ? "
            "ORDER BY entry_seq, position"
        ),
        (after, limit),
    )
    tags_of: dict[int, list[str]] = {}
    for seq, stored in tag_rows:
        tags_of.setdefault(int(seq), []).append(decode(stored))
    invert_tags(((seq, tag) for seq, held in tags_of.items() for tag in held), by_tag)
    documents.extend((seq, text, tags_of.get(seq, [])) for seq, text in texts)
    return int(rows[-1][0]) if rows else after


def _add_postings(  # noqa: PLR0917 - the block and its postings, as they are written
    connection: Connection,
    vocabulary: TermTables,
    block: int,
    by_term: Postings,
    row_entries: int,
    counted: WordCounts | None = None,
) -> None:
    """Add one block's postings (ascending seqs by term), creating or counting the terms.

    A row for each ``row_entries`` seqs from ``block`` on, numbered by its first.
    ``counted``: for a counted vocabulary, each posting's count and each
    document's length (the row holds those of its seqs, from its first to the
    last with a word).
    """
    if not by_term:
        return
    backend = backend_of(connection)
    table, term = vocabulary.terms.name, vocabulary.term
    # In key order: each B-tree is then written front to back, not at random.
    counts = sorted((backend.encode(text), len(seqs)) for text, seqs in by_term.items())
    # Upsert (SQLite >= 3.24 and PostgreSQL): new terms get an id, known ones a larger count.
    connection.exec_driver_sql(
        backend.sql(
            f"INSERT INTO {table} ({term}, entries) VALUES (?, ?) "  # noqa: S608
            f"ON CONFLICT ({term}) DO UPDATE SET entries = {table}.entries + excluded.entries"
        ),
        counts,
    )
    # Bound parameters, not a JSON list: terms may hold NUL, which SQLite's JSON cuts short.
    known = [stored for stored, _ in counts]
    ids: dict[str, int] = {}
    for start in range(0, len(known), _TERMS_PER_LOOKUP):
        chunk = known[start : start + _TERMS_PER_LOOKUP]
        marks = ", ".join(["?"] * len(chunk))
        found = connection.exec_driver_sql(
            backend.sql(f"SELECT {term}, id FROM {table} WHERE {term} IN ({marks})"),  # noqa: S608
            tuple(chunk),
        )
        ids.update((backend.decode(text), term_id) for text, term_id in found)
    row_entries = max(row_entries, 1)
    rows: dict[int, list[tuple[int, list[int], list[int]]]] = {}
    for term_id, text in sorted((ids[text], text) for text in by_term):
        seqs = by_term[text]
        held = counted.counts[text] if counted is not None else seqs
        start = 0
        while start < len(seqs):
            row = block + (seqs[start] - block) // row_entries * row_entries
            end = bisect.bisect_left(seqs, row + row_entries, start)
            rows.setdefault(row, []).append((term_id, seqs[start:end], held[start:end]))
            start = end
    columns = "block, term_ids, lengths, seqs"
    if counted is not None:
        columns += ", counts, document_lengths"
    marks = ", ".join("?" * (len(columns.split(", "))))
    connection.exec_driver_sql(
        backend.sql(
            f"INSERT INTO {vocabulary.blocks.name} ({columns}) VALUES ({marks})"  # noqa: S608
        ),
        [
            (
                row,
                pack([term_id for term_id, _, _ in terms]),
                pack([len(seqs) for _, seqs, _ in terms]),
                pack_all(seqs for _, seqs, _ in terms),
            )
            + (() if counted is None else _counts_and_lengths(counted, row, terms, row_entries))
            for row, terms in sorted(rows.items())
        ],
    )


def _counts_and_lengths(
    counted: WordCounts, row: int, terms: list[tuple[int, list[int], list[int]]], row_entries: int
) -> tuple[bytes, bytes]:
    """A word row's counts, term after term, and the lengths of its seqs from ``row`` on."""
    lengths = counted.lengths
    last = max((seq for seq in range(row, row + row_entries) if seq in lengths), default=row - 1)
    return (
        pack_all((held for _, _, held in terms), "i"),
        pack32([lengths.get(seq, 0) for seq in range(row, last + 1)]),
    )
