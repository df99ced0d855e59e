"""Entries flattened into plain tuples: the form bulk writes travel in.

A :class:`FlatBatch` holds checked entries as tuples of str, int and float,
which are cheap to build, to send between processes and to hand to a database
driver. ``store_many`` flattens the entries it is given; an import parses JSON
Lines straight into this form (see :mod:`loopctl_memory.jsonl`), possibly in
another process.
"""

from __future__ import annotations

import struct
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.scoring import split_whitespace

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

FlatEntry = tuple[str, str, str, str, float, int, int, int]
"""(id as 32 hex digits, category, memory, memory.lower(), relevance,
created_at in microseconds since the epoch, access_count, validated as 0 or 1).

An int, not a bool: SQLite's driver binds an int as it is, but adapts a bool,
which cost two caught exceptions a row."""

NumberedEntry = tuple[int, str, str, str, str, float, int, int, int]
"""(index of the entry in its batch, *FlatEntry)."""

FlatTag = tuple[int, int, str, str]
"""(index of the entry in its batch, position in its tags, tag, tag.lower())."""


@dataclass(frozen=True, slots=True, eq=False)
class Postings:
    """Terms and, for each, the ascending indexes of the batch's entries holding it.

    ``offsets`` holds the indexes of every term in turn, as little-endian int64s;
    ``counts[i]`` of them belong to ``terms[i]``. Packed, not lists: cheap to send
    between processes and to turn into the index's rows (:meth:`seqs`). Equal
    when they map the same terms to the same indexes, in whatever order.
    """

    terms: list[str]
    counts: list[int]
    offsets: bytes

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Postings):
            return NotImplemented
        return self.as_dict() == other.as_dict()

    __hash__ = None  # type: ignore[assignment]  # mutable lists inside, like a dict

    @classmethod
    def of(cls, by_term: dict[str, list[int]]) -> Postings:
        """Pack term -> ascending indexes."""
        offsets = b"".join([pack(found) for found in by_term.values()])
        return cls(list(by_term), [len(found) for found in by_term.values()], offsets)

    def as_dict(self) -> dict[str, list[int]]:
        """Term -> ascending indexes."""
        values = unpack(self.offsets)
        by_term: dict[str, list[int]] = {}
        begin = 0
        for term, count in zip(self.terms, self.counts, strict=True):
            by_term[term] = values[begin : begin + count].tolist()
            begin += count
        return by_term

    def seqs(self, base: int) -> dict[str, bytes]:
        """Term -> its entries' seqs (``base`` plus their indexes), packed as the index keeps them.

        Raises:
            ValueError: a seq would not fit in 63 bits.

        """
        return {term: part for term, _, part in self._parts(rebased(self.offsets, base))}

    def rows(self, origin: int = 0) -> list[tuple[str, int, bytes]]:
        """(term, how many entries hold it, their numbers packed), in term order.

        An entry's number is ``origin`` plus its index in the batch.

        Raises:
            ValueError: a number would not fit in 63 bits.

        """
        return sorted(self._parts(rebased(self.offsets, origin) if origin else self.offsets))

    def _parts(self, packed: bytes) -> Iterator[tuple[str, int, bytes]]:
        """Each term, its count, and its part of ``packed`` (laid out as ``offsets``)."""
        begin = 0
        for term, count in zip(self.terms, self.counts, strict=True):
            end = begin + 8 * count
            yield term, count, packed[begin:end]
            begin = end


def rebased(numbers: bytes, shift: int) -> bytes:
    """Packed numbers (see :func:`pack`) with ``shift``, which may be negative, added to each.

    Raises:
        ValueError: a result would be negative or not fit in 63 bits.

    """
    if not -(2**63) < shift < 2**63:
        raise _outside(shift)
    size = len(numbers)
    # Shifts every int64 at once: the buffer read as a single integer, plus or minus
    # the shift in each 8-byte lane. While every lane stays within 0..2**63-1, none
    # carries into the next or borrows from it; the first lane to leave that range
    # shows as its top bit set, or, the last one, as a negative whole.
    each = int.from_bytes(abs(shift).to_bytes(8, "little") * (size // 8), "little")
    whole = int.from_bytes(numbers, "little") + (each if shift >= 0 else -each)
    if whole < 0:
        raise _outside(shift)
    packed = whole.to_bytes(size, "little")
    if not packed[7::8].isascii():  # a lane's top byte >= 0x80
        raise _outside(shift)
    return packed


def _outside(shift: int) -> ValueError:
    # Built only to be raised: rebased runs once a term, as SQL, when a stage is shifted.
    return ValueError(f"numbers shifted by {shift} fall outside 0..2**63-1")


@dataclass(frozen=True, slots=True)
class Staged:
    """A batch's entries and tags, written to a SQLite file of their own (see ``staging``)."""

    path: str
    entries: int
    """How many entries the file holds."""
    origin: int = 0
    """The number its postings give the batch's first entry (the next ones count on
    from there): the seq the store was expected to give it, or 0."""


@dataclass(slots=True)
class FlatBatch:
    """Checked entries in storage order, their tags, and optionally their tokens."""

    entries: list[NumberedEntry]
    tags: list[FlatTag]
    tokens: Postings | None = None
    """Each distinct token of the lowercase memories, with the ascending indexes of
    the entries holding it, when already computed."""
    tag_values: Postings | None = None
    """The same for each distinct lowercase tag."""
    staged: Staged | None = None
    """Where the entries, their tags and both postings are when they are not here: a
    stage file (see ``staging``), which only a SQLite store reads."""

    def __len__(self) -> int:
        return len(self.entries) if self.staged is None else self.staged.entries

    def add(self, entry: FlatEntry, tags: list[str]) -> None:
        """Append one entry and its tags, numbered after the entries already here."""
        offset = len(self.entries)
        self.entries.append((offset, *entry))
        if tags:
            self.tags.extend(
                (offset, position, tag, tag.lower()) for position, tag in enumerate(tags)
            )

    def _not_staged(self) -> None:
        if self.staged is not None:
            raise ValueError("a staged batch's postings are in its stage file, not computed here")

    def has_unique_ids(self) -> bool:
        """Whether no two entries of the batch share an id."""
        return len({entry[1] for entry in self.entries}) == len(self.entries)

    def token_postings(self) -> Postings:
        """Each token and the entries (indexes in the batch) that hold it; computed once.

        Raises:
            ValueError: the batch is staged: its postings are in its stage file.

        """
        if self.tokens is None:
            self._not_staged()
            by_token = invert_tokens(((entry[0], entry[4]) for entry in self.entries), {})
            self.tokens = Postings.of(by_token)
        return self.tokens

    def tag_postings(self) -> Postings:
        """Each lowercase tag and the entries (indexes in the batch) carrying it; computed once.

        Raises:
            ValueError: the batch is staged: its postings are in its stage file.

        """
        if self.tag_values is None:
            self._not_staged()
            by_tag = invert_tags(((tag[0], tag[3]) for tag in self.tags), {})
            self.tag_values = Postings.of(by_tag)
        return self.tag_values


def invert_tokens(
    texts: Iterable[tuple[int, str]], into: dict[str, list[int]]
) -> dict[str, list[int]]:
    """Add each (number, lowercase memory) to ``into``, token -> numbers, in the order given."""
    for number, text in texts:
        for token in tokens_of(text):
            found = into.get(token)
            if found is None:
                into[token] = [number]
            else:
                found.append(number)
    return into


def invert_tags(
    values: Iterable[tuple[int, str]], into: dict[str, list[int]]
) -> dict[str, list[int]]:
    """Add each (number, lowercase tag) to ``into``, tag -> numbers, in the order given.

    An entry's tags come together, so one carrying the same tag twice is named once.
    """
    for number, value in values:
        found = into.get(value)
        if found is None:
            into[value] = [number]
        elif found[-1] != number:
            found.append(number)
    return into


def tokens_of(memory_lower: str) -> set[str]:
    """The distinct whitespace-separated tokens of a lowercase memory."""
    return set(split_whitespace(memory_lower))


def pack(values: Sequence[int]) -> bytes:
    """Integers as little-endian int64s: how postings travel and are stored.

    Raises:
        struct.error: a value does not fit in a signed 64-bit integer.

    """
    # struct reads each int directly; array("q", ...) parsed every one as a call's argument.
    return struct.pack(f"<{len(values)}q", *values)


def unpack(blob: bytes) -> array[int]:
    """The integers :func:`pack` wrote."""
    values = array("q")
    values.frombytes(blob)
    if sys.byteorder != "little":  # pragma: no cover
        values.byteswap()
    return values


def flat_entry(entry: MemoryEntry) -> FlatEntry:
    """One checked entry as a tuple (see :data:`FlatEntry`)."""
    memory = entry.memory
    return (
        entry.id.hex,
        str(entry.category),
        memory,
        memory.lower(),
        float(entry.relevance),
        (entry.created_at - EPOCH) // MICROSECOND,
        entry.access_count,
        int(entry.validated),
    )


def flatten(entries: Iterable[MemoryEntry]) -> FlatBatch:
    """Checked entries as a batch (tokens left to be computed when needed)."""
    batch = FlatBatch([], [])
    for entry in entries:
        batch.add(flat_entry(entry), entry.tags)
    return batch
