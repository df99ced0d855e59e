"""WHEN: a moment a user types, absolute or an age.

A moment is an ISO 8601 date or datetime (``2026-01-01``, ``2026-01-01T10:00``,
``2026-01-01T10:00+02:00``; a date is its midnight, a time without an offset
is UTC) or an age counted back from now (``30m``, ``12h``, ``7d``, ``2w``, or
a sum such as ``1d12h``; ``s`` is seconds). The command line
(``search --since/--until``, ``forget --older-than``, ``consolidate
--half-life``) and the MCP ``recall`` (``since``) read them here, so that both
accept the same text and refuse it with the same one-line message.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from loopctl_memory.errors import InvalidArgumentError

_SECONDS = {"w": 604_800, "d": 86_400, "h": 3_600, "m": 60, "s": 1}
_AGE = re.compile(r"(?:\d+(?:\.\d+)?[wdhms])+")
_PART = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")

AGE_EXAMPLES = "30d, 12h, 90m, 45s, 2w or 1d12h"
"""What an age looks like, for messages and help."""


def age(text: str) -> timedelta:
    """The timedelta ``text`` writes: ``30d``, ``12h``, ``90m``, ``45s``, ``2w`` or a sum.

    Raises:
        InvalidArgumentError: ``text`` is not an age, or one too long for a timedelta.

    """
    given = _text(text).strip()
    if _AGE.fullmatch(given) is None:
        raise InvalidArgumentError(f"{text!r} is not a duration such as {AGE_EXAMPLES}")
    seconds = sum(float(number) * _SECONDS[unit] for number, unit in _PART.findall(given))
    try:
        return timedelta(seconds=seconds)
    except OverflowError:
        raise InvalidArgumentError(f"{text!r} is too long a duration") from None


def moment(text: str, *, now: datetime | None = None) -> datetime:
    """The moment ``text`` names, in UTC: an ISO date or datetime, or ``now`` less an age.

    Args:
        text: ``2026-01-01``, ``2026-01-01T10:00`` (UTC), ``2026-01-01T10:00+02:00``,
            or an age such as ``7d`` (see :func:`age`).
        now: the moment an age counts back from (default: the system clock, UTC).

    Raises:
        InvalidArgumentError: ``text`` is neither, or it lies outside the years 1 to 9999.

    """
    given = _text(text).strip()
    if _AGE.fullmatch(given) is not None:
        start = datetime.now(UTC) if now is None else now
        try:
            return start - age(given)
        except OverflowError:
            raise InvalidArgumentError(f"{text!r} reaches back before the year 1") from None
    try:
        found = datetime.fromisoformat(given)
    except ValueError:
        raise InvalidArgumentError(
            f"{text!r} is not a moment: give an ISO date or time "
            f"(2026-01-01, 2026-01-01T10:00, UTC unless an offset follows) "
            f"or an age ({AGE_EXAMPLES})"
        ) from None
    if found.utcoffset() is None:
        return found.replace(tzinfo=UTC)
    try:
        return found.astimezone(UTC)
    except OverflowError:
        raise InvalidArgumentError(f"{text!r} is out of range in UTC") from None


def _text(value: object) -> str:
    if not isinstance(value, str):
        raise InvalidArgumentError(f"a moment or a duration is a str, not {type(value).__name__}")
    return value
