"""JSON Lines: one entry a line, every field, so that export -> import -> export is byte-identical.

A line is a JSON object with exactly these keys, in this order::

    {"id":"<uuid>","category":"fact","memory":"...","tags":["..."],"relevance":0.7,
     "created_at":"2025-03-03T09:12:04.318000+00:00","access_count":0,"validated":false}

``relevance`` is written as Python's shortest repr of the float, which reads back
to the same float; ``created_at`` is ISO 8601 in UTC with microseconds; text is
UTF-8 rather than ASCII escapes; there is no whitespace between tokens.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from loopctl_memory.entry import MemoryCategory, MemoryEntry, check_entry
from loopctl_memory.errors import InvalidEntryError
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatEntry, flat_entry

FIELDS = (
    "id",
    "category",
    "memory",
    "tags",
    "relevance",
    "created_at",
    "access_count",
    "validated",
)
"""The keys of every line, in the order they are written."""

_FIELD_SET = frozenset(FIELDS)
_CATEGORY_VALUES = frozenset(category.value for category in MemoryCategory)
_INT64_MAX = 2**63 - 1
_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Line(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    """A line as the fast lane of :func:`flat_from_json` takes it: every key, in any order.

    msgspec reads a UUID as 32 hex digits, hyphens optional, in either case: a
    subset of what ``uuid.UUID`` reads, to the same value.
    """

    id: uuid.UUID
    category: str
    memory: str
    tags: list[str]
    relevance: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    created_at: str
    access_count: Annotated[int, msgspec.Meta(ge=0, le=_INT64_MAX)]
    validated: bool


_LINE = msgspec.json.Decoder(_Line)


def entry_to_dict(entry: MemoryEntry) -> dict[str, Any]:
    """The JSON-ready fields of ``entry``, in the order of :data:`FIELDS`."""
    return {
        "id": str(entry.id),
        "category": str(entry.category),
        "memory": entry.memory,
        "tags": list(entry.tags),
        "relevance": float(entry.relevance),
        "created_at": entry.created_at.astimezone(UTC).isoformat(timespec="microseconds"),
        "access_count": entry.access_count,
        "validated": entry.validated,
    }


def entry_to_json(entry: MemoryEntry) -> str:
    """One line of JSON (without the newline) that :func:`entry_from_json` reads back exactly."""
    return _ENCODER.encode(entry_to_dict(entry))


def entry_from_json(line: str | bytes) -> MemoryEntry:
    """Read one line written by :func:`entry_to_json` (or by hand) into a validated entry.

    Raises:
        InvalidEntryError: the line is not a JSON object with exactly the keys of
            :data:`FIELDS`, or a value is of the wrong type or out of range
            (a bad UUID or timestamp, an unknown category, a relevance outside
            [0, 1], ...). The message says which.

    """
    try:
        data = msgspec.json.decode(line)
    # UnicodeEncodeError: a str holding a lone surrogate; RecursionError: nested too deeply.
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        data = _loads_strictly_as_stdlib(line)
    if type(data) is not dict:
        raise InvalidEntryError(f"expected a JSON object, got {_json_kind(data)}")
    if data.keys() != _FIELD_SET:
        raise InvalidEntryError(_describe_keys(data.keys()))
    raw_id = data["id"]
    if type(raw_id) is not str:
        raise InvalidEntryError(f"id must be a string, not {_json_kind(raw_id)}")
    try:
        entry_id = uuid.UUID(raw_id)
    except ValueError:
        raise InvalidEntryError(f"id {raw_id!r} is not a UUID") from None
    raw_time = data["created_at"]
    if type(raw_time) is not str:
        raise InvalidEntryError(f"created_at must be a string, not {_json_kind(raw_time)}")
    try:
        created_at = datetime.fromisoformat(raw_time)
    except ValueError:
        raise InvalidEntryError(f"created_at {raw_time!r} is not an ISO 8601 timestamp") from None
    if created_at.tzinfo is None:
        raise InvalidEntryError(f"created_at {raw_time!r} has no UTC offset (add +00:00)")
    entry = check_entry(
        MemoryEntry(
            data["category"],
            data["memory"],
            tags=data["tags"],
            relevance=data["relevance"],
            id=entry_id,
            created_at=created_at,
            access_count=data["access_count"],
            validated=data["validated"],
        )
    )
    # The entry is fresh, so normalising it in place shares nothing with anyone.
    entry.category = MemoryCategory(entry.category)
    entry.relevance = float(entry.relevance)
    if created_at.utcoffset():
        entry.created_at = created_at.astimezone(UTC)
    return entry


def flat_from_json(line: str | bytes) -> tuple[FlatEntry, list[str]]:
    """Read one line as :func:`entry_from_json` does, straight into its flat form and its tags.

    The fast lane of an import: a line in the shape :func:`entry_to_json` writes
    (a UUID as hex digits, a timestamp ending in ``+00:00``, each value of its
    JSON type) is checked field by field here; any other line is read by
    :func:`entry_from_json`, so the same lines are accepted, with the same errors.
    Bytes are read as UTF-8 (never as UTF-16 or -32).

    Raises:
        InvalidEntryError: as :func:`entry_from_json`, or bytes that are not UTF-8.

    """
    try:
        fields = _LINE.decode(line)
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):  # ValidationError too
        pass
    else:
        flat = _flat_if_canonical(fields)
        if flat is not None:
            return flat, fields.tags
    if isinstance(line, bytes):  # as text: the standard library would guess UTF-16 or -32
        try:
            line = line.decode()
        except UnicodeDecodeError as exc:
            raise InvalidEntryError(f"not valid UTF-8: {exc.reason}") from None
    entry = entry_from_json(line)
    return flat_entry(entry), entry.tags


def _flat_if_canonical(fields: _Line) -> FlatEntry | None:
    """The flat entry of a line as :func:`entry_to_json` writes it; None: the slow path.

    The UUID may also be in capitals or without hyphens. msgspec has checked
    every type, both ranges, and that the text is valid UTF-8.
    """
    if fields.category not in _CATEGORY_VALUES:
        return None
    if not fields.created_at.endswith("+00:00"):  # in UTC, so the parsed time is too
        return None
    try:
        created_at = datetime.fromisoformat(fields.created_at)
    except ValueError:
        return None
    memory = fields.memory
    return (
        "%032x" % fields.id.int,  # noqa: UP031 - UUID.hex without its call; f"" parses more
        fields.category,
        memory,
        memory.lower(),
        fields.relevance,
        (created_at - EPOCH) // MICROSECOND,
        fields.access_count,
        int(fields.validated),
    )


def _loads_strictly_as_stdlib(line: str | bytes) -> Any:
    """Decode with the standard library: the errors (and rare values) every line is judged by.

    msgspec reads the common line faster; a line it refuses (a lone surrogate
    escape, NaN, a float beyond range, bad UTF-8) is decoded again here, so that
    what is accepted and every message stay the same.
    """
    try:
        return json.loads(line)
    except UnicodeDecodeError as exc:
        raise InvalidEntryError(f"not valid UTF-8: {exc.reason}") from None
    except json.JSONDecodeError as exc:
        raise InvalidEntryError(f"not valid JSON: {exc.msg} (column {exc.colno})") from None
    except RecursionError:
        raise InvalidEntryError("not a valid entry: JSON nested too deeply") from None
    except ValueError as exc:  # e.g. an integer longer than Python reads from text
        raise InvalidEntryError(f"not a valid entry: {exc}") from None


def _describe_keys(keys: Any) -> str:
    missing = [name for name in FIELDS if name not in keys]
    unknown = sorted(str(name) for name in keys if name not in _FIELD_SET)
    problems = []
    if missing:
        problems.append(f"missing {_names(missing)}")
    if unknown:
        problems.append(f"unknown {_names(unknown)}")
    return f"{' and '.join(problems)}; a line has exactly the keys {', '.join(FIELDS)}"


def _names(names: list[str]) -> str:
    label = "key" if len(names) == 1 else "keys"
    return f"{label} {', '.join(repr(name) for name in names)}"


def _json_kind(value: object) -> str:
    """The JSON name of a decoded value's type, for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"
