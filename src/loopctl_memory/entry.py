"""The domain model: what a memory is, and what consolidation reports."""

from __future__ import annotations

import dataclasses
import enum
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.errors import InvalidArgumentError, InvalidEntryError
from loopctl_memory.metadata import check_metadata, copied


class MemoryCategory(enum.StrEnum):
    """The kind of knowledge a memory holds (the crate's six categories)."""

    TRAJECTORY = "trajectory"
    INSIGHT = "insight"
    ERROR_PATTERN = "error_pattern"
    STRATEGY = "strategy"
    FACT = "fact"
    WORKING = "working"


_CATEGORY_VALUES = frozenset(category.value for category in MemoryCategory)


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(slots=True)
class MemoryEntry:
    """One thing an agent learned.

    ``relevance`` is a number in [0, 1]; retrieval scores it as a 32-bit float,
    as the reference does, but the value you store is the value you get back.
    ``metadata`` is the caller's own JSON object (``{}``: none), stored with the
    memory and filtered on (:mod:`loopctl_memory.metadata`). ``key`` is the
    caller's name for the memory, unique within its scope: storing an entry
    with a key replaces the memory that had it (``get_by_key``, ``delete_by_key``).
    ``expires_at`` is when it expires (:mod:`loopctl_memory.expiry`).
    """

    category: MemoryCategory
    memory: str
    tags: list[str] = field(default_factory=list)
    relevance: float = 1.0
    id: uuid.UUID = field(default_factory=uuid.uuid4)
    created_at: datetime = field(default_factory=_utc_now)
    access_count: int = 0
    validated: bool = False
    last_accessed: datetime | None = None
    last_decayed: datetime | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    """The caller's own fields, a JSON object (see :mod:`loopctl_memory.metadata`)."""
    key: str | None = None
    """The caller's name for the memory, unique in its scope (None: none); see :func:`check_key`."""
    expires_at: datetime | None = None
    """When the memory expires (timezone-aware; None: never): from then on no read sees it."""

    def with_tag(self, tag: str) -> MemoryEntry:
        """Return a copy with ``tag`` appended to the tags."""
        return dataclasses.replace(self, tags=[*self.tags, tag])

    def as_validated(self) -> MemoryEntry:
        """Return a copy marked as validated."""
        return dataclasses.replace(self, tags=list(self.tags), validated=True)


@dataclass(frozen=True, slots=True)
class ConsolidationStats:
    """What one ``consolidate()`` did, counted in the same transaction."""

    entries_before: int
    entries_after: int
    pruned: int
    merged: int = 0
    bytes_saved: int = 0


@dataclass(frozen=True, slots=True)
class Summary:
    """What a store holds, in numbers."""

    entries: int
    by_category: dict[MemoryCategory, int]
    relevance_histogram: list[int]
    """Counts in ten bins of width 0.1: [0, 0.1), [0.1, 0.2), ..., [0.9, 1.0]."""


def _check_text(value: object, what: str) -> str:
    if type(value) is str and value.isascii():  # the common case, without encoding a copy
        return value
    if not isinstance(value, str):
        raise InvalidEntryError(f"{what} must be a str, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidEntryError(f"{what} cannot be encoded as UTF-8: {exc.reason}") from None
    return value


def validate_query(query: object, limit: object) -> tuple[str, int]:
    """Check the arguments of ``retrieve``; return them unchanged.

    Raises:
        InvalidEntryError: ``query`` is not a UTF-8-encodable str, or ``limit``
            is not an int >= 0.

    """
    _check_text(query, "query")
    if not isinstance(limit, int) or isinstance(limit, bool):
        raise InvalidEntryError(f"limit must be an int, not {type(limit).__name__}")
    if limit < 0:
        raise InvalidEntryError(f"limit must be >= 0, got {limit}")
    return query, limit  # type: ignore[return-value]  # checked just above


def validate_id(entry_id: object) -> uuid.UUID:
    """Check that ``entry_id`` is a ``uuid.UUID``; return it.

    Raises:
        InvalidEntryError: it is anything else (a str is not accepted, so a typo
            can never silently miss).

    """
    if not isinstance(entry_id, uuid.UUID):
        raise InvalidEntryError(f"an entry id is a uuid.UUID, not {type(entry_id).__name__}")
    return entry_id


_HEX_DIGITS = frozenset("0123456789abcdef")


def id_range(prefix: object) -> tuple[uuid.UUID, uuid.UUID]:
    """The lowest and highest ids whose hexadecimal form starts with ``prefix``.

    Dashes in ``prefix`` are ignored and letters may be of either case.

    Raises:
        InvalidArgumentError: ``prefix`` is not a str of 1 to 32 hexadecimal digits.

    """
    if not isinstance(prefix, str):
        raise InvalidArgumentError(f"an id prefix is a str, not {type(prefix).__name__}")
    digits = prefix.replace("-", "").lower()
    if not digits or len(digits) > 32 or not _HEX_DIGITS.issuperset(digits):
        raise InvalidArgumentError(f"an id prefix is 1 to 32 hexadecimal digits, not {prefix!r}")
    return uuid.UUID(digits.ljust(32, "0")), uuid.UUID(digits.ljust(32, "f"))


SHORT_ID_DIGITS = 8
"""The fewest hex digits of a short id (more where 8 are not unique in the view)."""


def shared_prefix_length(one: str, other: str) -> int:
    """How many leading characters the two strings have in common."""
    return next(
        (at for at, (a, b) in enumerate(zip(one, other, strict=False)) if a != b),
        min(len(one), len(other)),
    )


async def shortest_id(
    entry_id: uuid.UUID, ids_with_prefix: Callable[[str], Awaitable[list[uuid.UUID]]]
) -> str:
    """The fewest leading hex digits (at least 8) of ``entry_id`` that no other id found has.

    ``ids_with_prefix`` finds (at least two of) the ids starting with a prefix.
    Each further lookup skips to the first digit at which the ids found differ.
    """
    digits = validate_id(entry_id).hex
    length = SHORT_ID_DIGITS
    while length < len(digits):
        others = [
            other.hex for other in await ids_with_prefix(digits[:length]) if other != entry_id
        ]
        if not others:
            break
        length = max(length, *(shared_prefix_length(digits, other) for other in others)) + 1
    return digits[:length]


def _check_time(value: object, what: str = "created_at") -> None:
    if not isinstance(value, datetime):
        raise InvalidEntryError(f"{what} must be a datetime, not {type(value).__name__}")
    offset = value.utcoffset()
    if offset is None:
        raise InvalidEntryError(f"{what} must be timezone-aware (UTC)")
    if offset:  # only a non-zero offset can carry a time out of range in UTC
        try:
            value.astimezone(UTC)
        except OverflowError:
            raise InvalidEntryError(f"{what} {value} is out of range in UTC") from None


def _check_times(entry: MemoryEntry) -> None:
    _check_time(entry.created_at)
    if entry.last_accessed is not None:
        _check_time(entry.last_accessed, "last_accessed")
    if entry.last_decayed is not None:
        _check_time(entry.last_decayed, "last_decayed")
    if entry.expires_at is not None:
        _check_time(entry.expires_at, "expires_at")


def _utc_or_none(value: datetime | None) -> datetime | None:
    return None if value is None else value.astimezone(UTC)


def _shown(number: object) -> str:
    """A number for a message; an int too long for str() is described instead."""
    try:
        return repr(number)
    except ValueError:  # ints beyond sys.get_int_max_str_digits()
        return f"an integer of about {int.bit_length(number) * 3 // 10:,} digits"  # type: ignore[arg-type]


def check_entry(entry: object) -> MemoryEntry:  # noqa: PLR0912 - one branch a field
    """Check every field of ``entry`` and return it, unchanged.

    A str category, an int relevance and a non-UTC ``created_at`` are accepted;
    :func:`validate_entry` normalises them.

    Raises:
        InvalidEntryError: a field is of the wrong type or out of range.

    """
    # The `type(...) is` tests are fast paths for the usual types; the general
    # test after each decides every other value.
    if not isinstance(entry, MemoryEntry):
        raise InvalidEntryError(f"expected a MemoryEntry, not {type(entry).__name__}")
    category = entry.category
    if type(category) is not MemoryCategory:
        try:
            known_category = category in _CATEGORY_VALUES
        except TypeError:  # unhashable
            known_category = False
        if not known_category:
            known = ", ".join(member.value for member in MemoryCategory)
            raise InvalidEntryError(f"unknown category {category!r}; expected one of {known}")
    _check_text(entry.memory, "memory")
    if type(entry.tags) is not list:
        raise InvalidEntryError(f"tags must be a list, not {type(entry.tags).__name__}")
    for position, tag in enumerate(entry.tags):
        _check_text(tag, f"tag {position}")
    relevance = entry.relevance
    if type(relevance) is not float and (
        isinstance(relevance, bool) or not isinstance(relevance, int | float)
    ):
        raise InvalidEntryError(f"relevance must be a number, not {type(relevance).__name__}")
    if not (0.0 <= relevance <= 1.0):  # NaN fails every comparison
        raise InvalidEntryError(
            f"relevance must be a finite number in [0, 1], got {_shown(relevance)}"
        )
    if type(entry.id) is not uuid.UUID and not isinstance(entry.id, uuid.UUID):
        raise InvalidEntryError(f"id must be a uuid.UUID, not {type(entry.id).__name__}")
    _check_times(entry)
    count = entry.access_count
    if type(count) is not int and (isinstance(count, bool) or not isinstance(count, int)):
        raise InvalidEntryError(f"access_count must be an int in [0, 2**63), got {_shown(count)}")
    if not 0 <= count <= INT64_MAX:
        raise InvalidEntryError(f"access_count must be an int in [0, 2**63), got {_shown(count)}")
    if type(entry.validated) is not bool:  # bool cannot be subclassed
        raise InvalidEntryError(f"validated must be a bool, not {type(entry.validated).__name__}")
    check_metadata(entry.metadata)
    if entry.key is not None:
        check_key(entry.key, error=InvalidEntryError)
    return entry


MAX_KEY = 1_024
"""The most characters a key may have."""


def check_key(key: object, *, error: type[InvalidEntryError] = InvalidArgumentError) -> str:
    """``key`` if it is a key: a str of 1 to :data:`MAX_KEY` characters, valid UTF-8.

    Raises:
        InvalidArgumentError: (or ``error``) it is not one.

    """
    if not isinstance(key, str):
        raise error(f"key must be a str, not {type(key).__name__}")
    if not 0 < len(key) <= MAX_KEY:
        raise error(f"key must have 1 to {MAX_KEY} characters, not {len(key)}")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise error(f"key cannot be encoded as UTF-8: {exc.reason}") from None
    return key


def validate_entry(entry: object) -> MemoryEntry:
    """Check every field of ``entry``; return a normalised, independent copy.

    The copy has a ``MemoryCategory`` category, a fresh tags list, a float
    relevance and a UTC ``created_at``, so the caller's object is never shared.

    Raises:
        InvalidEntryError: a field is of the wrong type or out of range.

    """
    checked = check_entry(entry)
    return MemoryEntry(
        MemoryCategory(checked.category),
        checked.memory,
        tags=list(checked.tags),
        relevance=float(checked.relevance),
        id=checked.id,
        created_at=checked.created_at.astimezone(UTC),
        access_count=checked.access_count,
        validated=checked.validated,
        last_accessed=_utc_or_none(checked.last_accessed),
        last_decayed=_utc_or_none(checked.last_decayed),
        metadata=copied(checked.metadata),
        key=checked.key,
        expires_at=_utc_or_none(checked.expires_at),
    )


def copy_entry(entry: MemoryEntry) -> MemoryEntry:
    """Return a copy that shares no mutable state with ``entry``."""
    return dataclasses.replace(entry, tags=list(entry.tags), metadata=copied(entry.metadata))
