"""Checking plain arguments of our operations: the current time, moments, numbers, batch sizes."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import UTC, datetime

from loopctl_memory.errors import InvalidArgumentError


def check_now(now: object) -> datetime:
    """Check that ``now`` is a timezone-aware datetime; return it in UTC.

    Raises:
        InvalidEntryError: it is anything else.

    """
    if not isinstance(now, datetime):
        raise InvalidArgumentError(f"now must be a datetime, not {type(now).__name__}")
    return aware_in_utc(now, "now")


def aware_in_utc(moment: datetime, what: str) -> datetime:
    """Check that ``moment`` (the argument named ``what``) is timezone-aware; return it in UTC.

    Raises:
        InvalidEntryError: it is naive, or out of range in UTC.

    """
    if moment.utcoffset() is None:
        raise InvalidArgumentError(f"{what} must be timezone-aware (UTC)")
    try:
        return moment.astimezone(UTC)
    except OverflowError:
        raise InvalidArgumentError(f"{what} {moment} is out of range in UTC") from None


def check_number(value: object, what: str) -> float:
    """Check that ``value`` (the argument named ``what``) is a real number; return it as a float.

    An int too large for a float is returned as the infinity of its sign.

    Raises:
        InvalidEntryError: it is a bool or not a number at all.

    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InvalidArgumentError(f"{what} must be a number, not {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:  # an int beyond any float: out of every range as infinity is
        return math.inf if value > 0 else -math.inf


def check_batch_size(batch_size: object) -> int:
    """Check that ``batch_size`` is an int >= 1 (not a bool); return it.

    Raises:
        InvalidArgumentError: it is anything else.

    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be an int >= 1, got {batch_size!r}")
    return batch_size


def blank_typed(memory: str | None, tags: Iterable[str] | None) -> str | None:
    """Why a memory's text or tags, as a person or an agent typed them, are a mistake; or None.

    The library keeps the reference's rule (an empty text or tag is valid), but
    at a command or a tool call a blank one is almost surely an error: an empty
    tag ranks first for an empty query. ``None``: that part was not given.
    """
    if memory is not None and not memory.strip():
        return "the memory's text is blank: give the words to remember"
    blank = [tag for tag in tags or () if not tag.strip()]
    if blank:
        return f"a tag is blank ({blank[0]!r}): give each tag a word, or no tag"
    return None
