"""Entries flattened into plain tuples: the form batch writes travel in.

A :class:`FlatBatch` holds checked entries as tuples of str, int and float,
which are cheap to build and to hand to a database driver. ``store_many``
flattens the entries it is given; an import parses JSON Lines straight into
this form (see :mod:`loopctl_memory.jsonl`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.metadata import encoded
from loopctl_memory.scoring import split_whitespace

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROSECOND = timedelta(microseconds=1)

FlatEntry = tuple[
    str,
    str,
    str,
    str,
    float,
    int,
    int,
    int,
    int | None,
    int | None,
    str,
    str,
    str | None,
    int | None,
]
"""(id as 32 hex digits, category, memory, memory.lower(), relevance,
created_at in microseconds since the epoch, access_count, validated as 0 or 1,
last_accessed and last_decayed in microseconds or None, scope, metadata as
its stored JSON text, key or None, expires_at in microseconds or None).

An int, not a bool: SQLite's driver binds an int as it is, but adapts a bool.
The scope is relative to the store that writes the batch: ``""`` is its own."""

FlatTag = tuple[int, int, str, str]
"""(index of its entry in the batch, position in the entry's tags, tag, tag.lower())."""


@dataclass(slots=True)
class FlatBatch:
    """Checked entries in storage order, their tags, and (when made) their vectors."""

    entries: list[FlatEntry]
    tags: list[FlatTag]
    vectors: list[bytes | None] | None = None
    """Each entry's vector (binary32 little-endian, unit length), by ``embedder_id``'s."""
    embedder_id: int = 0

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, entry: FlatEntry, tags: list[str]) -> None:
        """Append one entry and its tags."""
        index = len(self.entries)
        self.entries.append(entry)
        if tags:
            self.tags.extend(
                (index, position, tag, tag.lower()) for position, tag in enumerate(tags)
            )

    def holds_memory_of(self, characters: int) -> bool:
        """Whether an entry's memory has at least ``characters`` characters."""
        return any(len(entry[2]) >= characters for entry in self.entries)

    def has_unique_ids(self) -> bool:
        """Whether no two entries of the batch share an id."""
        return len({entry[0] for entry in self.entries}) == len(self.entries)


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


def flat_entry(entry: MemoryEntry, scope: str = "") -> FlatEntry:
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
        microseconds(entry.last_accessed),
        microseconds(entry.last_decayed),
        scope,
        encoded(entry.metadata),
        entry.key,
        microseconds(entry.expires_at),
    )


def microseconds(moment: datetime | None) -> int | None:
    """A time as microseconds since the epoch (how times are stored), or None."""
    return None if moment is None else (moment - EPOCH) // MICROSECOND


def moment(stored: int | None) -> datetime | None:
    """What :func:`microseconds` gave, as a UTC time again."""
    return None if stored is None else EPOCH + stored * MICROSECOND


def flatten(entries: Iterable[MemoryEntry]) -> FlatBatch:
    """Checked entries as a batch."""
    batch = FlatBatch([], [])
    for entry in entries:
        batch.add(flat_entry(entry), entry.tags)
    return batch
