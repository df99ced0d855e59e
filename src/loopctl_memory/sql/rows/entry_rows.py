"""An entry as rows hold it: its columns, and the reads that load whole entries.

:func:`entry_of` makes a :class:`~loopctl_memory.entry.MemoryEntry` of the
values of :data:`ENTRY_NAMES`; :func:`entries_by_seq` and :func:`keyed_entry`
read entries with their tags in one statement through a read transaction's
:class:`~loopctl_memory.sql.backend.Reader` (the driver's own cursors);
:func:`scopes_of` says where entries live; :func:`lowercase_tags` reads their
tags as the rankings compare them.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.flat import EPOCH, MICROSECOND, microseconds, moment
from loopctl_memory.metadata import decoded
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import Backend, Reader
from loopctl_memory.sql.rows.scope_rows import Clock
from loopctl_memory.sql.tables import ENTRY_FIELDS

T = TypeVar("T")

IDS_PER_STATEMENT = 10_000
"""Keeps IN (...) lists under SQLite's limit on bound parameters (32766)."""

# What a MemoryEntry is read from: every column but the lowercase copy (kept for search)
# and the scope (a view's, not the entry's).
ENTRY_NAMES = tuple(name for name in ENTRY_FIELDS if name not in ("memory_lower", "scope_id"))


def entry_of(fields: Sequence[Any], entry_tags: list[str]) -> MemoryEntry:
    """An entry from its ``ENTRY_NAMES`` values, in that order, as Python values."""
    (
        _,
        entry_id,
        category,
        memory,
        relevance,
        created_us,
        access_count,
        validated,
        accessed_us,
        decayed_us,
        stored_metadata,
        key,
        expires_us,
    ) = fields[: len(ENTRY_NAMES)]
    return MemoryEntry(
        category=MemoryCategory(category),
        memory=memory,
        tags=entry_tags,
        relevance=relevance,
        id=entry_id,
        created_at=EPOCH + created_us * MICROSECOND,
        access_count=access_count,
        validated=bool(validated),
        last_accessed=moment(accessed_us),
        last_decayed=moment(decayed_us),
        metadata=decoded(stored_metadata),
        key=key,
        expires_at=moment(expires_us),
    )


_ENTRIES_WITH_TAGS = (
    f"SELECT {', '.join(f'e.{name}' for name in ENTRY_NAMES)}, t.tag"  # noqa: S608
    " FROM entries e LEFT JOIN tags t ON t.entry_seq = e.seq"
    " WHERE e.seq IN ({}) ORDER BY e.seq, t.position"
)


_SCOPES_OF = (
    "SELECT e.id, s.name, e.expires_at_us FROM entries e JOIN scopes s ON s.id = e.scope_id"
    " WHERE e.id IN ({})"
)
_KEYED_WITH_TAGS = (
    f"SELECT {', '.join(f'e.{name}' for name in ENTRY_NAMES)}, t.tag"  # noqa: S608
    " FROM entries e JOIN scopes s ON s.id = e.scope_id"
    " LEFT JOIN tags t ON t.entry_seq = e.seq"
    " WHERE s.name = ? AND e.key = ? ORDER BY t.position"
)


def entries_by_seq(reader: Reader, seqs: Sequence[int]) -> list[MemoryEntry]:
    """The entries with these insertion numbers, in the order given (all must exist).

    One statement (per ``IDS_PER_STATEMENT``) reads the entries joined with their tags.
    """
    found: dict[int, MemoryEntry] = {}
    for chunk in chunks(seqs, IDS_PER_STATEMENT):
        statement = _ENTRIES_WITH_TAGS.format(", ".join("?" * len(chunk)))
        _gather(reader.backend, reader.all(statement, chunk), found)
    return [found[seq] for seq in seqs]


def keyed_entry(reader: Reader, scope_name: str, key: str, clock: Clock) -> MemoryEntry | None:
    """The entry of scope ``scope_name`` holding ``key`` and live at ``clock()``, or None.

    One statement (the scope found by its name, the entry by the unique key, its
    tags joined); the clock is read only when the entry found has an expiry.
    """
    encode = reader.backend.encode
    found: dict[int, MemoryEntry] = {}
    _gather(reader.backend, reader.all(_KEYED_WITH_TAGS, (encode(scope_name), encode(key))), found)
    if not found:
        return None
    (entry,) = found.values()
    expires_us = microseconds(entry.expires_at)
    return None if expires_us is not None and expires_us <= clock() else entry


def _gather(backend: Backend, rows: Iterable[Sequence[Any]], found: dict[int, MemoryEntry]) -> None:
    """The entries of rows of an entry's columns and one of its tags (None: none), by seq."""
    decode, decode_uuid = backend.decode, backend.decode_uuid
    for seq, entry_id, category, memory, *rest, stored_key, expires, tag in rows:
        entry = found.get(seq)
        if entry is None:
            key = None if stored_key is None else decode(stored_key)
            fields = (seq, decode_uuid(entry_id), category, decode(memory), *rest, key, expires)
            entry = found[seq] = entry_of(fields, [])
        if tag is not None:  # a tag is never NULL: None is the outer join's "no tag"
            entry.tags.append(decode(tag))


def scopes_of(
    reader: Reader, ids: Sequence[uuid.UUID], view: Scope, clock: Clock
) -> dict[uuid.UUID, str]:
    """The scope name of each of ``ids`` that ``view`` reads live at ``clock()``.

    One statement per ``IDS_PER_STATEMENT`` ids (the unique id index); the clock
    is read only if an entry found has an expiry.
    """
    backend = reader.backend
    found: dict[uuid.UUID, str] = {}
    now: int | None = None
    for chunk in chunks(ids, IDS_PER_STATEMENT):
        statement = _SCOPES_OF.format(", ".join("?" * len(chunk)))
        for stored_id, name, expires in reader.all(
            statement, [backend.encode_uuid(i) for i in chunk]
        ):
            scope_name = backend.decode(name)
            if not view.holds(scope_name):
                continue
            if expires is not None:
                now = clock() if now is None else now
                if expires <= now:
                    continue
            found[backend.decode_uuid(stored_id)] = scope_name
    return found


def lowercase_tags(reader: Reader, seqs: list[int]) -> dict[int, list[str]]:
    """The lowercase tags of the entries at ``seqs`` (at most ``IDS_PER_STATEMENT``), in order."""
    decode = reader.backend.decode
    tags: dict[int, list[str]] = {}
    marks = ", ".join("?" * len(seqs))
    for seq, tag in reader.all(
        f"SELECT entry_seq, tag_lower FROM tags WHERE entry_seq IN ({marks})"  # noqa: S608
        " ORDER BY entry_seq, position",
        seqs,
    ):
        tags.setdefault(int(seq), []).append(decode(tag))
    return tags


def chunks(items: Sequence[T], size: int) -> Iterable[Sequence[T]]:
    """``items`` ``size`` at a time."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
