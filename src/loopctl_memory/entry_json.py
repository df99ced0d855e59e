"""An entry as JSON: one entry <-> one JSON object, a line of a backup, with every field.

A line is a JSON object with these keys, written in this order::

    {"id":"<uuid>","category":"fact","memory":"...","tags":["..."],"relevance":0.7,
     "created_at":"2025-03-03T09:12:04.318000+00:00","access_count":0,"validated":false}

followed, when they are not empty, by ``"scope"`` (relative to the exporting
store's scope; a line without one imports into the importing store's scope),
``"last_accessed"`` and ``"last_decayed"`` (timestamps like ``created_at``),
``"metadata"`` (the caller's JSON object; a line without one has none),
``"key"`` (the caller's key; a line without one has none) and ``"expires_at"``
(a timestamp like ``created_at``; a line without one never expires).
A line written by hand needs only ``"category"`` and ``"memory"``: the keys
of :data:`DEFAULTED_FIELDS` left out take ``add``'s defaults (a new id, so that
importing such a line twice stores it twice).

``relevance`` is written as Python's shortest repr of the float, which reads back
to the same float; ``created_at`` is ISO 8601 in UTC with microseconds; text is
UTF-8 rather than ASCII escapes; there is no whitespace between tokens.

:func:`entry_to_json` writes one (and :func:`entry_to_dict` gives its fields);
:func:`entry_from_json` and :func:`scoped_entry_from_json` read one strictly into
a validated entry; :func:`flat_from_json` reads one straight into the flat form
an import stores. Files of such lines are :mod:`loopctl_memory.jsonl`.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Annotated, Any

import msgspec

from loopctl_memory import scopes
from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.entry import MemoryCategory, MemoryEntry, check_entry
from loopctl_memory.errors import InvalidEntryError
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatEntry, flat_entry
from loopctl_memory.metadata import EMPTY, copied

FIELDS = (
    "id",
    "category",
    "memory",
    "tags",
    "relevance",
    "created_at",
    "access_count",
    "validated",
    "scope",
    "last_accessed",
    "last_decayed",
    "metadata",
    "key",
    "expires_at",
)
"""The keys of a line, in the order they are written."""

OPTIONAL_FIELDS = frozenset(
    ("scope", "last_accessed", "last_decayed", "metadata", "key", "expires_at")
)
"""Keys a line may leave out (and that are written only when not empty)."""

DEFAULTED_FIELDS = frozenset(("id", "tags", "relevance", "created_at", "access_count", "validated"))
"""Keys every written line has but a line written by hand may leave out: a new id, no
tags, relevance 1.0, created now, never accessed, not validated (as ``add`` stores)."""

HISTORY_FIELD = "history"
"""The key of a memory's events on a line ``export --history`` writes: a line may hold it;
reading a line skips it (an import records each memory's own ``stored`` event)."""

_FIELD_SET = frozenset((*FIELDS, HISTORY_FIELD))
_REQUIRED = frozenset(FIELDS) - OPTIONAL_FIELDS - DEFAULTED_FIELDS
_CATEGORY_VALUES = frozenset(category.value for category in MemoryCategory)
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
    access_count: Annotated[int, msgspec.Meta(ge=0, le=INT64_MAX)]
    validated: bool
    scope: str = ""
    last_accessed: str | None = None
    last_decayed: str | None = None
    metadata: dict[str, Any] | None = None
    key: str | None = None
    expires_at: str | None = None
    history: Any = None  # skipped (see HISTORY_FIELD)


_LINE = msgspec.json.Decoder(_Line)


def entry_to_dict(entry: MemoryEntry, scope: str = "") -> dict[str, Any]:
    """The JSON-ready fields of ``entry``, in the order of :data:`FIELDS`, empty ones left out."""
    fields: dict[str, Any] = {
        "id": str(entry.id),
        "category": str(entry.category),
        "memory": entry.memory,
        "tags": list(entry.tags),
        "relevance": float(entry.relevance),
        "created_at": timestamp(entry.created_at),
        "access_count": entry.access_count,
        "validated": entry.validated,
    }
    if scope:
        fields["scope"] = scope
    if entry.last_accessed is not None:
        fields["last_accessed"] = timestamp(entry.last_accessed)
    if entry.last_decayed is not None:
        fields["last_decayed"] = timestamp(entry.last_decayed)
    if entry.metadata:
        fields["metadata"] = copied(entry.metadata)
    if entry.key is not None:
        fields["key"] = entry.key
    if entry.expires_at is not None:
        fields["expires_at"] = timestamp(entry.expires_at)
    return fields


def timestamp(moment: datetime) -> str:
    """``moment`` in UTC, ISO 8601 to the microsecond, as every export writes it."""
    return moment.astimezone(UTC).isoformat(timespec="microseconds")


def entry_to_json(entry: MemoryEntry, scope: str = "") -> str:
    """One line of JSON (without the newline) that :func:`entry_from_json` reads back exactly.

    ``scope``: the entry's scope relative to the exporting store's (``""``: its own).
    """
    return _ENCODER.encode(entry_to_dict(entry, scope))


def entry_from_json(line: str | bytes) -> MemoryEntry:
    """Read one line written by :func:`entry_to_json` (or by hand) into a validated entry.

    The line's scope is checked and left out: :func:`scoped_entry_from_json` gives it.

    Raises:
        InvalidEntryError: the line is not a JSON object with the keys of
            :data:`FIELDS` (the optional ones may be left out), or a value is
            of the wrong type or out of range (a bad UUID or timestamp, an
            unknown category, a relevance outside [0, 1], a bad scope, ...).
            The message says which.

    """
    return scoped_entry_from_json(line)[1]


def scoped_entry_from_json(line: str | bytes) -> tuple[str, MemoryEntry]:
    """Read one line into its scope (relative, ``""`` when absent) and a validated entry.

    Raises:
        InvalidEntryError: as :func:`entry_from_json`.

    """
    try:
        data = msgspec.json.decode(line)
    # UnicodeEncodeError: a str holding a lone surrogate; RecursionError: nested too deeply.
    except (msgspec.DecodeError, UnicodeEncodeError, RecursionError):
        data = _loads_strictly_as_stdlib(line)
    if type(data) is not dict:
        raise InvalidEntryError(f"expected a JSON object, got {_json_kind(data)}")
    keys = data.keys()
    if not (_REQUIRED <= keys <= _FIELD_SET):
        raise InvalidEntryError(_describe_keys(keys))
    scope = data.get("scope", "")
    if type(scope) is not str:
        raise InvalidEntryError(f"scope must be a string, not {_json_kind(scope)}")
    if scope:
        scopes.check_name(scope)
    stamps = [
        None if data.get(name) is None else _time(data[name], name, or_null=True)
        for name in ("last_accessed", "last_decayed", "expires_at")
    ]
    entry_id = _id(data["id"]) if "id" in keys else uuid.uuid4()
    created_at = (
        _time(data["created_at"], "created_at") if "created_at" in keys else datetime.now(UTC)
    )
    entry = check_entry(
        MemoryEntry(
            data["category"],
            data["memory"],
            tags=data.get("tags", []),
            relevance=data.get("relevance", 1.0),
            id=entry_id,
            created_at=created_at,
            access_count=data.get("access_count", 0),
            validated=data.get("validated", False),
            last_accessed=stamps[0],
            last_decayed=stamps[1],
            metadata=data.get("metadata", {}),
            key=data.get("key"),
            expires_at=stamps[2],
        )
    )
    # The entry is fresh, so normalising it in place shares nothing with anyone.
    entry.category = MemoryCategory(entry.category)
    entry.relevance = float(entry.relevance)
    if created_at.utcoffset():
        entry.created_at = created_at.astimezone(UTC)
    entry.last_accessed = None if stamps[0] is None else stamps[0].astimezone(UTC)
    entry.last_decayed = None if stamps[1] is None else stamps[1].astimezone(UTC)
    return scope, entry


def _id(raw: object) -> uuid.UUID:
    """The UUID a line's ``id`` holds."""
    if type(raw) is not str:
        raise InvalidEntryError(f"id must be a string, not {_json_kind(raw)}")
    try:
        return uuid.UUID(raw)
    except ValueError:
        raise InvalidEntryError(f"id {raw!r} is not a UUID") from None


def _time(raw: object, name: str, *, or_null: bool = False) -> datetime:
    """The timestamp ``raw`` (a line's field ``name``), with its UTC offset."""
    if type(raw) is not str:
        kind = "a string or null" if or_null else "a string"
        raise InvalidEntryError(f"{name} must be {kind}, not {_json_kind(raw)}")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        raise InvalidEntryError(f"{name} {raw!r} is not an ISO 8601 timestamp") from None
    if moment.tzinfo is None:
        raise InvalidEntryError(f"{name} {raw!r} has no UTC offset (add +00:00)")
    return moment


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
    scope, entry = scoped_entry_from_json(line)
    return flat_entry(entry, scope), entry.tags


def _flat_if_canonical(fields: _Line) -> FlatEntry | None:
    """The flat entry of a line as :func:`entry_to_json` writes it; None: the slow path.

    The UUID may also be in capitals or without hyphens. msgspec has checked
    every type, both ranges, and that the text is valid UTF-8.
    """
    if fields.category not in _CATEGORY_VALUES:
        return None
    if fields.scope or fields.last_accessed is not None or fields.last_decayed is not None:
        return None  # checked on the slow path
    if fields.metadata is not None or fields.key is not None or fields.expires_at is not None:
        return None  # likewise
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
        None,
        None,
        "",
        EMPTY,
        None,
        None,
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
    missing = [name for name in FIELDS if name not in keys and name in _REQUIRED]
    unknown = sorted(str(name) for name in keys if name not in _FIELD_SET)
    problems = []
    if missing:
        problems.append(f"missing {_names(missing)}")
    if unknown:
        problems.append(f"unknown {_names(unknown)}")
    required = ", ".join(name for name in FIELDS if name in _REQUIRED)
    optional = ", ".join(name for name in FIELDS if name not in _REQUIRED)
    problem = " and ".join(problems)
    return f"{problem}; a line has the keys {required} (and may have {optional})"


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
