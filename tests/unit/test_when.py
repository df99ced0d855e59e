"""WHEN: an ISO date or datetime (naive means UTC) or an age back from now, always in UTC."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from loopctl_memory import InvalidArgumentError
from loopctl_memory.when import age, moment

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("12h", timedelta(hours=12)),
        ("7d", timedelta(days=7)),
        ("2w", timedelta(weeks=2)),
        ("45s", timedelta(seconds=45)),
        ("1d12h", timedelta(days=1, hours=12)),
        (" 1.5h ", timedelta(minutes=90)),
    ],
)
def test_an_age_is_a_timedelta_and_a_moment_counts_it_back_from_now(text, expected):
    assert expected == age(text)
    assert NOW - expected == moment(text, now=NOW)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-01-01", datetime(2026, 1, 1, tzinfo=UTC)),
        ("2026-01-01T10:00", datetime(2026, 1, 1, 10, 0, tzinfo=UTC)),
        ("2026-01-01 10:00:30", datetime(2026, 1, 1, 10, 0, 30, tzinfo=UTC)),
        ("2026-01-01T10:00+02:00", datetime(2026, 1, 1, 8, 0, tzinfo=UTC)),
        ("2026-01-01T10:00Z", datetime(2026, 1, 1, 10, 0, tzinfo=UTC)),
    ],
)
def test_an_iso_moment_is_read_in_utc_naive_meaning_utc(text, expected):
    found = moment(text, now=NOW)
    assert expected == found
    assert UTC == found.tzinfo


def test_an_age_counts_back_from_the_system_clock_by_default():
    before = datetime.now(UTC)
    found = moment("1h")
    assert before - timedelta(hours=1) <= found <= datetime.now(UTC) - timedelta(hours=1)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("yesterday", "is not a moment: give an ISO date"),
        ("", "is not a moment"),
        ("7 days", "is not a moment"),
        ("-7d", "is not a moment"),
        ("2026-13-01", "is not a moment"),
        ("9999999w", "before the year 1"),
        ("9" * 30 + "d", "too long a duration"),
        ("0001-01-01T00:00+01:00", "out of range in UTC"),
    ],
)
def test_a_bad_moment_is_one_line_naming_what_was_given(text, fragment):
    with pytest.raises(InvalidArgumentError, match=fragment) as raised:
        moment(text, now=NOW)
    assert "\n" not in str(raised.value)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("text", ["2026-01-01", "7", "d", "1x"])
def test_an_age_is_only_numbers_with_units(text):
    with pytest.raises(InvalidArgumentError, match="is not a duration such as 30d"):
        age(text)


def test_a_moment_is_text():
    with pytest.raises(InvalidArgumentError, match="is a str, not int"):
        moment(7)  # type: ignore[arg-type]
