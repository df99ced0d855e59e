"""What a store does to entries on a caller's request: count an access, update, forget.

Each is a rule on single entries, the same for every backend: which retrieved
entries count as accessed and how they are stamped, what an update may change,
and which entries a ``forget`` deletes.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from loopctl_memory.arguments import aware_in_utc, check_now, check_number
from loopctl_memory.binary32 import INT64_MAX, WHITE_SPACE
from loopctl_memory.entry import MemoryCategory, MemoryEntry, validate_entry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.filters import MemoryFilter, check_filter
from loopctl_memory.metadata import merged
from loopctl_memory.scoring import split_whitespace


def access_matches(query: str, entries: Sequence[MemoryEntry]) -> list[bool]:
    """For each entry, whether ``query`` really matched it, so retrieving it counts as an access.

    An entry matches when one of the query's lowercased words occurs in its
    lowercased memory, or when the lowercased query, trimmed of whitespace and
    not empty, occurs in one of its lowercased tags. A blank query matches
    nothing, so entries returned on their baseline score alone are never
    counted.
    """
    lowered = query.lower()
    words = tuple(dict.fromkeys(split_whitespace(lowered)))
    if not words:
        return [False] * len(entries)
    trimmed = lowered.strip(WHITE_SPACE)  # Rust's str::trim
    matches: list[bool] = []
    for entry in entries:
        memory = entry.memory.lower()
        matches.append(
            any(word in memory for word in words)
            or any(trimmed in tag.lower() for tag in entry.tags)
        )
    return matches


def stamp_accessed(entries: Iterable[MemoryEntry], now: datetime) -> None:
    """Stamp ``entries`` as accessed at ``now``, in place.

    Each entry's ``access_count`` rises by one, saturating at 2**63 - 1, and
    its ``last_accessed`` becomes ``now`` unless it is already later.
    """
    for entry in entries:
        entry.access_count = min(entry.access_count + 1, INT64_MAX)
        if entry.last_accessed is None or entry.last_accessed < now:
            entry.last_accessed = now


class Unset(enum.Enum):
    """The type of :data:`UNSET`: an argument not given."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = Unset.UNSET
"""The default of every :func:`apply_update` field: leave it as it is."""


def apply_update(
    entry: MemoryEntry,
    *,
    memory: str | Unset = UNSET,
    category: MemoryCategory | str | Unset = UNSET,
    tags: list[str] | Unset = UNSET,
    relevance: float | Unset = UNSET,
    validated: bool | Unset = UNSET,
    metadata: dict[str, Any] | Unset = UNSET,
    merge_metadata: dict[str, Any] | Unset = UNSET,
    expires_at: datetime | Unset | None = UNSET,
) -> MemoryEntry:
    """Return a validated copy of ``entry`` with the given fields replaced.

    The id, ``created_at``, access count and access and decay stamps are kept.
    ``metadata`` replaces the whole object; ``merge_metadata`` sets the keys it
    gives and keeps the others (:func:`loopctl_memory.metadata.merged`);
    ``expires_at`` is when it expires (None: never).

    Raises:
        InvalidEntryError: a new value is invalid (as :func:`validate_entry`
            decides; an :class:`InvalidArgumentError` for metadata, or both
            ``metadata`` and ``merge_metadata`` given).

    """
    given = {
        "memory": memory,
        "category": category,
        "tags": tags,
        "relevance": relevance,
        "validated": validated,
        "metadata": metadata,
        "expires_at": expires_at,
    }
    # Any value at all: validate_entry decides what is acceptable.
    changes: dict[str, Any] = {name: value for name, value in given.items() if value is not UNSET}
    if merge_metadata is not UNSET:
        if metadata is not UNSET:
            raise InvalidArgumentError("give metadata (to replace it) or merge_metadata, not both")
        if not isinstance(merge_metadata, dict):
            raise InvalidArgumentError(
                f"merge_metadata must be a dict, not {type(merge_metadata).__name__}"
            )
        changes["metadata"] = merged(entry.metadata, merge_metadata)
    changes.setdefault("tags", list(entry.tags))
    return validate_entry(dataclasses.replace(entry, **changes))


def updater(**fields: Any) -> Callable[[MemoryEntry], MemoryEntry]:
    """:func:`apply_update` with these fields, checked now (before any I/O) on a blank entry.

    Raises:
        InvalidEntryError: as :func:`apply_update`.

    """

    def changed(entry: MemoryEntry) -> MemoryEntry:
        return apply_update(entry, **fields)

    changed(MemoryEntry(MemoryCategory.FACT, ""))  # invalid input: an error for any id
    return changed


_BEFORE_EVERYTHING: Final = datetime.min.replace(tzinfo=UTC)


def _cutoff(older_than: object, now: datetime) -> datetime:
    """The instant an ``older_than`` argument of ``forget`` stands for, in UTC."""
    if isinstance(older_than, timedelta):
        if older_than < timedelta(0):
            raise InvalidArgumentError(f"older_than must not be negative, got {older_than}")
        try:
            return now - older_than
        except OverflowError:  # older than any representable time: nothing is
            return _BEFORE_EVERYTHING
    if isinstance(older_than, datetime):
        return aware_in_utc(older_than, "older_than")
    raise InvalidArgumentError(
        f"older_than must be a datetime or a timedelta, not {type(older_than).__name__}"
    )


@dataclass(frozen=True, slots=True)
class ForgetRule:
    """Which entries a ``forget`` deletes: those meeting every condition set.

    Attributes:
        created_before: entries created strictly before this (UTC) instant.
        category: entries of this category.
        below: entries whose relevance is strictly below this.

    With no condition set, every entry matches.

    """

    created_before: datetime | None = None
    category: MemoryCategory | None = None
    below: float | None = None
    filter: MemoryFilter | None = None

    @property
    def is_everything(self) -> bool:
        """Whether the rule has no condition, so it matches every entry."""
        return (
            self.created_before is None
            and self.category is None
            and self.below is None
            and self.filter is None
        )

    def matches(self, entry: MemoryEntry) -> bool:
        """Whether ``entry`` meets every condition of the rule."""
        return (
            (self.created_before is None or entry.created_at < self.created_before)
            and (self.category is None or entry.category == self.category)
            and (self.below is None or entry.relevance < self.below)
            and (self.filter is None or self.filter.matches(entry))
        )


def forget_rule(  # noqa: PLR0917 - forget's own arguments
    older_than: datetime | timedelta | None,
    category: MemoryCategory | str | None,
    below: float | None,
    everything: bool,
    now: datetime,
    filter: MemoryFilter | None = None,
) -> ForgetRule:
    """Check the arguments of ``forget`` and return the rule they describe.

    Args:
        older_than: a timezone-aware instant, or an age (a non-negative
            timedelta, counted back from ``now``); entries created before it match.
        category: a category (or its value); entries of it match.
        below: a finite number; entries with a lower relevance match.
        filter: a MemoryFilter; the entries it passes match (an empty one is no condition).
        everything: must be True to forget with no condition at all; with
            conditions it changes nothing.
        now: the current time, timezone-aware.

    Raises:
        InvalidEntryError: an argument has the wrong type or value, or no
            condition is given and ``everything`` is not True.

    """
    now = check_now(now)
    if type(everything) is not bool:
        raise InvalidArgumentError(f"everything must be a bool, not {type(everything).__name__}")
    created_before = None if older_than is None else _cutoff(older_than, now)
    chosen: MemoryCategory | None = None
    if category is not None:
        try:
            chosen = MemoryCategory(category)
        except ValueError:
            known = ", ".join(member.value for member in MemoryCategory)
            raise InvalidArgumentError(
                f"unknown category {category!r}; expected one of {known}"
            ) from None
    limit: float | None = None
    if below is not None:
        limit = check_number(below, "below")
        if not math.isfinite(limit):
            raise InvalidArgumentError(f"below must be finite, got {limit}")
    rule = ForgetRule(created_before, chosen, limit, check_filter(filter))
    if rule.is_everything and not everything:
        raise InvalidArgumentError(
            "forget needs a condition (older_than, category, below or filter), or everything=True"
        )
    return rule
