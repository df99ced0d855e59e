"""A MemoryFilter applied: as a SQL condition, and as a mask over the ranking state's copy.

The two forms state the same conditions as :meth:`MemoryFilter.matches`:
the condition serves the operations written with SQLAlchemy Core (count,
iteration, forget); the mask serves ranking, from the columns and tag
postings the ranking state keeps, so a filtered retrieval costs a few
vectorised passes, not a scan of the table. Tags compare as Python's
``str.lower()`` of each side, whole; times as microseconds since the epoch,
as they are stored; metadata conditions read the entries' ``entry_fields`` rows
(see :mod:`loopctl_memory.sql.rows.fields`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sqlalchemy import ColumnElement, and_, exists, select, true

from loopctl_memory.filters import MemoryFilter
from loopctl_memory.flat import microseconds
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking.columns import CATEGORY_CODES
from loopctl_memory.sql.ranking.snapshot import Needs, Snapshot
from loopctl_memory.sql.ranking.state import Mask, RankingState
from loopctl_memory.sql.rows.fields import FieldQuery, field_query
from loopctl_memory.sql.rows.scope_rows import now_if_expired
from loopctl_memory.sql.tables import entries, tags

_FIELD_MASKS_KEPT = 32  # metadata conditions whose masks are kept at once (a bool an entry)


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
    conditions.extend(field_query(field).condition() for field in passes.metadata or ())
    return and_(*conditions)


def _tagged(values: list[str]) -> ColumnElement[bool]:
    return exists(
        select(tags.c.entry_seq).where(
            tags.c.entry_seq == entries.c.seq, tags.c.tag_lower.in_(values)
        )
    )


def needs(passes: MemoryFilter) -> Needs:
    """The parts of the ranking state :func:`passing` tests ``passes`` on."""
    return Needs(columns=True, tags=passes.tags_any is not None or passes.tags_all is not None)


def passing(snapshot: Snapshot, passes: MemoryFilter) -> Mask:
    """Whether each entry of the snapshot passes, from the ranking state's copy.

    ``snapshot`` is taken with (at least) :func:`needs`. Where no entry lives
    the answer is meaningless: rankers keep live entries only.
    """
    state, reader, size = snapshot.state, snapshot.reader, snapshot.size
    columns = snapshot.columns
    if columns is None:  # pragma: no cover - taken with its needs
        raise AssertionError("a filter tests a snapshot taken with its columns")
    mask = np.ones(size, np.bool_)
    if passes.categories is not None:
        allowed = np.zeros(256, np.bool_)
        allowed[[CATEGORY_CODES[category.value] for category in passes.categories]] = True
        mask &= allowed[columns.category[:size]]
    if passes.tags_any is not None:
        held = np.zeros(size, np.bool_)
        for tag in passes.tags_any:
            held |= state.tag_mask(tag, size)
        mask &= held
    for tag in passes.tags_all or ():
        mask &= state.tag_mask(tag, size)
    if passes.validated is not None:
        mask &= columns.validated[:size] == passes.validated
    created = columns.created_us[:size]
    after, before = microseconds(passes.created_after), microseconds(passes.created_before)
    if after is not None:
        mask &= created > after
    if before is not None:
        mask &= created < before
    relevance = columns.relevance[:size]
    if passes.min_relevance is not None:
        mask &= relevance >= passes.min_relevance
    if passes.max_relevance is not None:
        mask &= relevance <= passes.max_relevance
    for field in passes.metadata or ():
        mask &= _fields_pass(state, columns.field_masks, reader, field_query(field), size)
    return mask


def unexpired(
    reader: Reader, clock: Callable[[], int], size: int, allowed: Mask | None
) -> Mask | None:
    """``allowed`` (None: every entry) less the entries below ``size`` expired by ``clock()``.

    Reads of the expiry index, which holds only the entries that have an expiry:
    the soonest first, and the clock only if there is one.
    """
    # The WHERE lets the partial index serve the min (without it: a scan of every row).
    (soonest,) = reader.one(
        "SELECT min(expires_at_us) FROM entries WHERE expires_at_us IS NOT NULL"
    )
    now_us = now_if_expired(soonest, clock)
    if now_us is None:
        return allowed
    expired = reader.all(
        "SELECT seq FROM entries WHERE expires_at_us <= ? AND seq < ?", (now_us, size)
    )
    if not expired:
        return allowed
    mask = np.ones(size, np.bool_) if allowed is None else allowed.copy()
    mask[np.fromiter((seq for (seq,) in expired), np.int64, len(expired))] = False
    return mask


def _fields_pass(
    state: RankingState, kept: dict[object, Mask], reader: Reader, query: FieldQuery, size: int
) -> Mask:
    """The entries below ``size`` a metadata condition passes (read-only).

    Kept while the state does not move: an agent asks again and again within
    the same scope or project, and reading the rows costs more than ranking.
    A metadata change is logged, so it moves the state.
    """
    key = (query, size, state.top, state.change, state.generation)
    known = kept.get(key)
    if known is not None:
        return known
    statement, parameters = query.raw(reader.backend.encode, size)
    found = np.zeros(size, np.bool_)
    for rows in reader.chunks(statement, parameters, 65_536):
        found[np.fromiter((seq for (seq,) in rows), np.int64, len(rows))] = True
    passed = ~found if query.negate else found
    passed.flags.writeable = False
    if len(kept) >= _FIELD_MASKS_KEPT:
        kept.clear()
    kept[key] = passed
    return passed
