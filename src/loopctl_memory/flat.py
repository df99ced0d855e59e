"""Entries flattened into plain tuples: the form bulk writes travel in.

A :class:`FlatBatch` holds checked entries as tuples of str, int, float and
bool, which are cheap to build, to send between processes and to hand to a
database driver. ``store_many`` flattens the entries it is given; an import
parses JSON Lines straight into this form (see :mod:`loopctl_memory.jsonl`),
possibly in another process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.scoring import split_whitespace

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

FlatEntry = tuple[str, str, str, str, float, int, int, bool]
"""(id as 32 hex digits, category, memory, memory.lower(), relevance,
created_at in microseconds since the epoch, access_count, validated)."""

NumberedEntry = tuple[int, str, str, str, str, float, int, int, bool]
"""(index of the entry in its batch, *FlatEntry)."""

FlatTag = tuple[int, int, str, str]
"""(index of the entry in its batch, position in its tags, tag, tag.lower())."""


@dataclass(frozen=True, slots=True)
class Staged:
    """A batch's entries and tags, written to a SQLite file of their own (see ``staging``)."""

    path: str
    entries: int
    """How many entries the file holds."""


@dataclass(slots=True)
class FlatBatch:
    """Checked entries in storage order, their tags, and optionally their tokens."""

    entries: list[NumberedEntry]
    tags: list[FlatTag]
    tokens: dict[str, list[int]] | None = None
    """Each distinct token of the lowercase memories, with the ascending indexes of
    the entries holding it, when already computed."""
    tag_values: dict[str, list[int]] | None = None
    """The same for each distinct lowercase tag."""
    staged: Staged | None = None
    """Where the entries and tags are when they are not in the lists: a stage file,
    which only a SQLite store reads. ``tokens`` and ``tag_values`` are then set."""

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

    def has_unique_ids(self) -> bool:
        """Whether no two entries of the batch share an id."""
        return len({entry[1] for entry in self.entries}) == len(self.entries)

    def token_postings(self) -> dict[str, list[int]]:
        """Each token and the entries (indexes in the batch) that hold it; computed once."""
        if self.tokens is None:
            self.tokens = invert_tokens(((entry[0], entry[4]) for entry in self.entries), {})
        return self.tokens

    def tag_postings(self) -> dict[str, list[int]]:
        """Each lowercase tag and the entries (indexes in the batch) carrying it; computed once."""
        if self.tag_values is None:
            self.tag_values = invert_tags(((tag[0], tag[3]) for tag in self.tags), {})
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
        entry.validated,
    )


def flatten(entries: Iterable[MemoryEntry]) -> FlatBatch:
    """Checked entries as a batch (tokens left to be computed when needed)."""
    batch = FlatBatch([], [])
    for entry in entries:
        batch.add(flat_entry(entry), entry.tags)
    return batch
