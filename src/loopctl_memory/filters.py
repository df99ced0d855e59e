"""MemoryFilter: which entries an operation reads, by their fields and their metadata.

A filter is a conjunction: an entry passes when every condition given holds.
It is checked once, when it is made, so a bad filter fails before any store
is touched, with one :class:`~loopctl_memory.errors.InvalidArgumentError`.
Every backend applies the same conditions (:meth:`MemoryFilter.matches` is
their definition); a ranking only ever loses the entries a filter removes,
its statistics (BM25's N, df, average length) stay those of the whole view.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from loopctl_memory.arguments import aware_in_utc, check_number
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.errors import InvalidArgumentError
from loopctl_memory.metadata_filter import FieldCondition, check_metadata_filter, conditions_hold


def _listed(value: object, what: str, kind: str) -> list[object] | None:
    """``value`` as a non-empty list (one str alone is a list of one), or None for None."""
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{what} must be a list of {kind}s, not {value!r}")
    given = list(value)
    if not given:
        raise InvalidArgumentError(f"{what} must hold at least one {kind}")
    return given


def _categories(value: object) -> frozenset[MemoryCategory] | None:
    given = _listed(value, "categories", "category")
    if given is None:
        return None
    chosen = set()
    for item in given:
        try:
            chosen.add(MemoryCategory(item))  # type: ignore[arg-type]
        except ValueError:
            names = ", ".join(category.value for category in MemoryCategory)
            raise InvalidArgumentError(
                f"unknown category {item!r} in the filter (one of {names})"
            ) from None
    return frozenset(chosen)


def _tags(value: object, what: str) -> tuple[str, ...] | None:
    given = _listed(value, what, "tag")
    if given is None:
        return None
    for tag in given:
        if not isinstance(tag, str):
            raise InvalidArgumentError(f"{what} must hold str tags, not {type(tag).__name__}")
    # Whole tags, compared as Python's str.lower() of both sides (as tags are indexed).
    return tuple(dict.fromkeys(str(tag).lower() for tag in given))


def _moment(value: object, what: str) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, datetime):
        raise InvalidArgumentError(f"{what} must be a datetime, not {type(value).__name__}")
    return aware_in_utc(value, what)


def _relevance(value: object, what: str) -> float | None:
    if value is None:
        return None
    number = check_number(value, what)
    if math.isnan(number):
        raise InvalidArgumentError(f"{what} must be a number, not NaN")
    return number


@dataclass(frozen=True, slots=True, init=False)
class MemoryFilter:
    """Conditions on entries; each one given must hold (none given: every entry passes).

    Args:
        categories: the entry's category is one of these (categories or their values).
        tags_any: the entry has a tag equal to one of these, ignoring case.
        tags_all: the entry has a tag equal to each of these, ignoring case.
        validated: the entry's ``validated`` flag is this.
        created_after: the entry was created strictly after this (timezone-aware) time.
        created_before: the entry was created strictly before this time.
        min_relevance: the entry's relevance is at least this.
        max_relevance: the entry's relevance is at most this.
        metadata: conditions on the entry's metadata, a dict from a dotted path
            to a value (equality) or to operators (``$eq $ne $gt $gte $lt $lte
            $in $nin $exists``); see :mod:`loopctl_memory.metadata_filter`.

    The attributes hold the checked values: categories as a frozenset, tags
    lowercased in a tuple, times in UTC, bounds as floats, metadata conditions as
    a tuple of :class:`~loopctl_memory.metadata_filter.FieldCondition`.

    Raises:
        InvalidArgumentError: an unknown category, an empty list of categories
            or tags, a naive datetime, a bound that is not a number, or bounds
            that no entry can meet (``min_relevance`` above ``max_relevance``,
            ``created_after`` not before ``created_before``), or a bad metadata
            filter (an unknown operator, an operand of the wrong kind).

    Example:
        >>> from datetime import UTC, datetime
        >>> from loopctl_memory import MemoryFilter
        >>> recent_errors = MemoryFilter(
        ...     categories=["error_pattern"], created_after=datetime(2026, 1, 1, tzinfo=UTC)
        ... )
        >>> anns_big_tasks = MemoryFilter(metadata={"user": "ann", "size": {"$gte": 3}})

    """

    categories: frozenset[MemoryCategory] | None
    tags_any: tuple[str, ...] | None
    tags_all: tuple[str, ...] | None
    validated: bool | None
    created_after: datetime | None
    created_before: datetime | None
    min_relevance: float | None
    max_relevance: float | None
    metadata: tuple[FieldCondition, ...] | None

    def __init__(
        self,
        *,
        categories: Iterable[MemoryCategory | str] | MemoryCategory | str | None = None,
        tags_any: Iterable[str] | str | None = None,
        tags_all: Iterable[str] | str | None = None,
        validated: bool | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        min_relevance: float | None = None,
        max_relevance: float | None = None,
        metadata: dict[str, object] | None = None,
    ) -> None:
        put = object.__setattr__  # frozen: set once, checked
        put(self, "categories", _categories(categories))
        put(self, "tags_any", _tags(tags_any, "tags_any"))
        put(self, "tags_all", _tags(tags_all, "tags_all"))
        if validated is not None and type(validated) is not bool:
            raise InvalidArgumentError(
                f"validated must be a bool or None, not {type(validated).__name__}"
            )
        put(self, "validated", validated)
        after = _moment(created_after, "created_after")
        before = _moment(created_before, "created_before")
        if after is not None and before is not None and after >= before:
            raise InvalidArgumentError(
                f"created_after ({after.isoformat()}) must be before "
                f"created_before ({before.isoformat()})"
            )
        put(self, "created_after", after)
        put(self, "created_before", before)
        low = _relevance(min_relevance, "min_relevance")
        high = _relevance(max_relevance, "max_relevance")
        if low is not None and high is not None and low > high:
            raise InvalidArgumentError(
                f"min_relevance ({low}) must not be above max_relevance ({high})"
            )
        put(self, "min_relevance", low)
        put(self, "max_relevance", high)
        put(self, "metadata", check_metadata_filter(metadata))

    @property
    def is_empty(self) -> bool:
        """Whether no condition is given (every entry passes)."""
        return self == MemoryFilter()

    def matches(self, entry: MemoryEntry) -> bool:  # noqa: PLR0911 - one return a condition
        """Whether ``entry`` meets every condition: the definition every backend follows."""
        if self.categories is not None and MemoryCategory(entry.category) not in self.categories:
            return False
        if self.tags_any is not None or self.tags_all is not None:
            held = {tag.lower() for tag in entry.tags}
            if self.tags_any is not None and held.isdisjoint(self.tags_any):
                return False
            if self.tags_all is not None and not held.issuperset(self.tags_all):
                return False
        if self.validated is not None and entry.validated is not self.validated:
            return False
        if self.created_after is not None and not entry.created_at > self.created_after:
            return False
        if self.created_before is not None and not entry.created_at < self.created_before:
            return False
        if self.min_relevance is not None and not entry.relevance >= self.min_relevance:
            return False
        if self.max_relevance is not None and not entry.relevance <= self.max_relevance:
            return False
        return self.metadata is None or conditions_hold(self.metadata, entry.metadata)


def check_filter(value: object) -> MemoryFilter | None:
    """``value`` if it is a filter with a condition, None for no filter (None or empty).

    Raises:
        InvalidArgumentError: ``value`` is neither None nor a MemoryFilter.

    """
    if value is None:
        return None
    if not isinstance(value, MemoryFilter):
        raise InvalidArgumentError(f"filter must be a MemoryFilter, not {type(value).__name__}")
    return None if value.is_empty else value
