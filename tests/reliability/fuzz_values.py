"""Hypothesis strategies for the fuzz tests: every field of an entry, valid or not, and a judge.

The judge (:func:`verdict`) says what the error contract requires of a value, independently
of the library's own checks: ``VALID`` (must be stored and come back intact),
``INVALID`` (must be refused with InvalidEntryError or TypeError), or
``EITHER`` where the specification leaves the choice open (a bool where a number
is expected, a Fraction relevance in [0, 1], an access count past 2**63).
"""

from __future__ import annotations

import math
import operator
import uuid
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from fractions import Fraction
from typing import Any

from hypothesis import strategies as st

from loopctl_memory import MemoryCategory, MemoryEntry

VALID, INVALID, EITHER = "valid", "invalid", "either"
INT64_MAX = 2**63 - 1

# Ids shared by the seeds, the generated entries and the lookups, so that duplicates are common.
ID_POOL = [uuid.UUID(int=n) for n in range(1, 7)]
CATEGORY_VALUES = [category.value for category in MemoryCategory]


def mixture(*branches: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """One of ``branches``, each as likely; repeat a branch to weight it.

    ``st.one_of`` flattens a nested ``one_of`` into one branch per strategy it
    holds, which skews the mix; here each argument is one branch.
    """
    return st.sampled_from(range(len(branches))).flatmap(lambda index: branches[index])


# Text that is easy to get wrong: NUL, separators str.split knows but Rust does not, SQL
# wildcards and quotes, case folding that changes length, combining marks, a BOM, astral.
_SPICY = (
    "\x00 \t\n\r\x0b\x0c\x1c\x1f\x85\u00a0\u2028\u3000%_\\'\";--/*ßİıΣς\u0301\ufeff🦀\U0010ffff"
)
_chars = st.one_of(st.characters(), st.sampled_from(_SPICY))
clean_texts = st.text(_chars, max_size=16)
_surrogates = st.characters(categories=["Cs"])
dirty_texts = st.builds(lambda a, s, b: a + s + b, clean_texts, _surrogates, clean_texts)
# Up to 200,000 characters or 200 kB of UTF-8: big enough to matter, small enough to be fast.
huge_texts = st.builds(
    operator.mul, st.sampled_from(["x", "é", "🦀", "\x00", "a b "]), st.integers(10_000, 50_000)
)
texts = mixture(clean_texts, clean_texts, clean_texts, dirty_texts, huge_texts)


class Opaque:
    """An object of no type the store knows."""

    def __repr__(self) -> str:
        return "Opaque()"


junk = mixture(
    st.none(),
    st.integers(),
    st.floats(),
    st.binary(max_size=4),
    st.text(max_size=3),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
    st.tuples(st.text(max_size=2)),
    st.builds(Opaque),
    st.complex_numbers(max_magnitude=2),
)
"""Values of types no field takes."""

_offsets = st.builds(
    timezone,
    st.timedeltas(
        min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23, minutes=59)
    ),
)
aware_datetimes = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30), timezones=_offsets)
_EDGE_MOMENTS = [
    datetime.min.replace(tzinfo=UTC),
    datetime.max.replace(tzinfo=UTC),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),  # before year 1 in UTC
    datetime.max.replace(tzinfo=timezone(timedelta(hours=-5))),  # after year 9999 in UTC
    datetime.max.replace(tzinfo=timezone(timedelta(hours=5))),
]
_EDGE_RELEVANCES = [
    0.0,
    -0.0,
    5e-324,
    0.05,
    0.049999999,
    1.0,
    math.nextafter(1.0, 2.0),
    -5e-324,
    math.nan,
    math.inf,
    -math.inf,
    10**400,
]

VALID_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "category": st.sampled_from(list(MemoryCategory)) | st.sampled_from(CATEGORY_VALUES),
    "memory": st.one_of(clean_texts, clean_texts, clean_texts, huge_texts),
    "tags": st.lists(clean_texts, max_size=4),
    "relevance": st.one_of(st.floats(0, 1), st.sampled_from([0.0, 0.05, 1.0, 5e-324, 0, 1])),
    "created_at": aware_datetimes,
    "access_count": st.integers(0, INT64_MAX),
    "validated": st.booleans(),
}

ANY_FIELDS: dict[str, st.SearchStrategy[Any]] = {
    "category": st.one_of(
        VALID_FIELDS["category"],
        st.sampled_from(["FACT", "Fact", " fact", "facts", "", "fact\x00", "\ud800"]),
        st.just([]),
        junk,
    ),
    "memory": st.one_of(texts, junk),
    "tags": st.one_of(
        st.lists(st.one_of(texts, texts, junk), max_size=4),
        st.tuples(clean_texts),
        clean_texts,
        junk,
    ),
    "relevance": st.one_of(
        st.floats(),
        st.sampled_from(_EDGE_RELEVANCES),
        st.integers(-3, 3),
        st.integers(),
        st.booleans(),
        st.fractions(max_denominator=10),
        st.decimals(),
        junk,
    ),
    "id": st.one_of(
        st.sampled_from(ID_POOL), st.uuids(), st.sampled_from([str(ID_POOL[0]), ID_POOL[0].hex])
    ),
    "created_at": st.one_of(
        aware_datetimes,
        st.sampled_from(_EDGE_MOMENTS),
        st.datetimes(),  # naive
        st.dates(),
        st.just("2024-01-01T00:00:00+00:00"),
        junk,
    ),
    "access_count": st.one_of(
        st.integers(),
        st.sampled_from([0, -1, INT64_MAX, INT64_MAX + 1, 2**64]),
        st.booleans(),
        st.floats(),
        junk,
    ),
    "validated": st.one_of(st.booleans(), st.integers(0, 1), junk),
}


_ids = st.one_of(st.uuids(), st.sampled_from(ID_POOL))


@st.composite
def _entry(draw: st.DrawFn, corrupt: bool) -> MemoryEntry:
    fields = {name: draw(strategy) for name, strategy in VALID_FIELDS.items()}
    fields["id"] = draw(_ids)
    if corrupt:
        for name in draw(st.sets(st.sampled_from(sorted(ANY_FIELDS)), min_size=1, max_size=2)):
            fields[name] = draw(ANY_FIELDS[name])
    category, memory = fields.pop("category"), fields.pop("memory")
    return MemoryEntry(category, memory, **fields)


valid_entries = _entry(corrupt=False)
"""Entries that are valid (their ids are often taken, though)."""

entries = mixture(valid_entries, _entry(corrupt=True), _entry(corrupt=True), junk)
"""Anything: mostly an entry with one or two fields that may hold anything, sometimes junk."""


# --- the judge -----------------------------------------------------------------------


def text_verdict(value: object) -> str:
    """VALID for a str that UTF-8 can encode, INVALID for anything else."""
    if not isinstance(value, str):
        return INVALID
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return INVALID
    return VALID


def _number_in_unit_range(value: object) -> str:
    if isinstance(value, bool):
        return EITHER  # a bool is an int in Python; the spec does not say
    if isinstance(value, int):
        return VALID if 0 <= value <= 1 else INVALID
    if isinstance(value, float):
        return VALID if math.isfinite(value) and 0 <= value <= 1 else INVALID
    if isinstance(value, Fraction):
        return EITHER if 0 <= value <= 1 else INVALID
    if isinstance(value, Decimal):
        return EITHER if value.is_finite() and 0 <= value <= 1 else INVALID
    return INVALID


def _moment(value: object) -> str:
    if not isinstance(value, datetime) or value.utcoffset() is None:
        return INVALID
    try:
        value.astimezone(UTC)
    except OverflowError:
        return INVALID
    return VALID


def _count(value: object) -> str:
    if isinstance(value, bool):
        return EITHER
    if not isinstance(value, int) or value < 0:
        return INVALID
    return VALID if value <= INT64_MAX else EITHER  # the spec sets no upper bound


def verdict(entry: object) -> str:
    """What the error contract requires of ``entry``: VALID, INVALID or EITHER."""
    if not isinstance(entry, MemoryEntry):
        return INVALID
    category = entry.category
    tags = entry.tags
    verdicts = [
        VALID if isinstance(category, str) and category in CATEGORY_VALUES else INVALID,
        text_verdict(entry.memory),
        VALID if type(tags) is list and all(text_verdict(t) == VALID for t in tags) else INVALID,
        _number_in_unit_range(entry.relevance),
        VALID if isinstance(entry.id, uuid.UUID) else INVALID,
        _moment(entry.created_at),
        _count(entry.access_count),
        VALID if isinstance(entry.validated, bool) else INVALID,
    ]
    if INVALID in verdicts:
        return INVALID
    return EITHER if EITHER in verdicts else VALID


def normalised(entry: MemoryEntry) -> MemoryEntry:
    """What the store must give back for an accepted entry."""
    return MemoryEntry(
        MemoryCategory(entry.category),
        entry.memory,
        tags=list(entry.tags),
        relevance=float(entry.relevance),
        id=entry.id,
        created_at=entry.created_at.astimezone(UTC),
        access_count=int(entry.access_count),
        validated=bool(entry.validated),
    )
