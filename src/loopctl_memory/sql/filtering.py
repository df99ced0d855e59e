"""A MemoryFilter in SQL: as a SQLAlchemy condition, and as the seqs of the entries it passes.

The two forms state the same conditions as :meth:`MemoryFilter.matches`:
the condition serves the operations written with SQLAlchemy Core (count,
iteration, forget); the seqs serve ranking, read through the driver in the
retrieval's own transaction. Tags compare as stored ``tag_lower`` (Python's
``str.lower()`` of the tag) with the filter's lowercased tags; times as
microseconds since the epoch, as they are stored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlalchemy import ColumnElement, and_, exists, select, true

from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import microseconds
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.segments import Ints
from loopctl_memory.sql.tables import entries, tags


def condition(passes: MemoryFilter | None) -> ColumnElement[bool]:
    """The entries ``passes`` passes (every entry for None), as a condition on ``entries``."""
    if passes is None:
        return true()
    conditions: list[ColumnElement[bool]] = []
    if passes.categories is not None:
        conditions.append(entries.c.category.in_(sorted(str(c) for c in passes.categories)))
    if passes.tags_any is not None:
        conditions.append(_tagged(list(passes.tags_any)))
    conditions.extend(_tagged([tag]) for tag in passes.tags_all or ())
    if passes.validated is not None:
        conditions.append(entries.c.validated == passes.validated)
    if passes.created_after is not None:
        conditions.append(entries.c.created_at_us > microseconds(passes.created_after))
    if passes.created_before is not None:
        conditions.append(entries.c.created_at_us < microseconds(passes.created_before))
    if passes.min_relevance is not None:
        conditions.append(entries.c.relevance >= passes.min_relevance)
    if passes.max_relevance is not None:
        conditions.append(entries.c.relevance <= passes.max_relevance)
    return and_(*conditions)


def _tagged(values: list[str]) -> ColumnElement[bool]:
    return exists(
        select(tags.c.entry_seq).where(
            tags.c.entry_seq == entries.c.seq, tags.c.tag_lower.in_(values)
        )
    )


def passing_seqs(reader: Reader, passes: MemoryFilter) -> Ints:
    """The seqs of every entry ``passes`` passes, ascending, in the reader's transaction."""
    encode = reader.backend.encode
    clauses: list[str] = []
    arguments: list[object] = []

    def among(column: str, values: Sequence[object]) -> str:
        arguments.extend(values)
        return f"{column} IN ({', '.join('?' * len(values))})"

    if passes.categories is not None:
        clauses.append(among("category", sorted(str(c) for c in passes.categories)))
    tag_sets = [list(passes.tags_any)] if passes.tags_any is not None else []
    tag_sets += [[tag] for tag in passes.tags_all or ()]
    for values in tag_sets:
        inner = among("t.tag_lower", [encode(value) for value in values])
        clauses.append(
            f"EXISTS (SELECT 1 FROM tags t WHERE t.entry_seq = entries.seq AND {inner})"  # noqa: S608
        )
    for clause, value in (
        ("validated = ?", passes.validated),
        ("created_at_us > ?", microseconds(passes.created_after)),
        ("created_at_us < ?", microseconds(passes.created_before)),
        ("relevance >= ?", passes.min_relevance),
        ("relevance <= ?", passes.max_relevance),
    ):
        if value is not None:
            clauses.append(clause)
            arguments.append(value)
    where = " AND ".join(clauses) or "1 = 1"
    statement = f"SELECT seq FROM entries WHERE {where} ORDER BY seq"  # noqa: S608 - our own SQL
    found = [row[0] for rows in reader.chunks(statement, arguments, 65_536) for row in rows]
    return np.array(found, np.int64)
