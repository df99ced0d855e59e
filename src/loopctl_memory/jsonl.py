"""JSON Lines: one entry a line, every field, so that export -> import -> export is byte-identical.

A line is a JSON object with exactly these keys, in this order::

    {"id":"<uuid>","category":"fact","memory":"...","tags":["..."],"relevance":0.7,
     "created_at":"2025-03-03T09:12:04.318000+00:00","access_count":0,"validated":false}

followed, when they are not empty, by ``"scope"`` (relative to the exporting
store's scope; a line without one imports into the importing store's scope),
``"last_accessed"`` and ``"last_decayed"`` (timestamps like ``created_at``).

``relevance`` is written as Python's shortest repr of the float, which reads back
to the same float; ``created_at`` is ISO 8601 in UTC with microseconds; text is
UTF-8 rather than ASCII escapes; there is no whitespace between tokens.

:func:`export_jsonl` writes a store's entries in insertion order;
:func:`import_jsonl` stores a file's, a batch a transaction, and either stops at
an id already stored or skips its line (so that an import stopped half way is
finished by running it again).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Annotated, Any, Literal

import msgspec

from loopctl_memory import scopes
from loopctl_memory.binary32 import INT64_MAX
from loopctl_memory.entry import MemoryCategory, MemoryEntry, check_entry
from loopctl_memory.errors import DuplicateEntryError, InvalidEntryError, LoopMemoryError
from loopctl_memory.flat import EPOCH, MICROSECOND, FlatBatch, FlatEntry, flat_entry

if TYPE_CHECKING:
    from loopctl_memory.sql.store import SqlMemoryStore

IMPORT_BATCH = 50_000
"""Lines stored per transaction by :func:`import_jsonl` unless told otherwise.

Each batch is a block of the token index and a commit that writes every page it
touched in the id index, whose keys are random: fewer, larger batches make
fewer of both, for more memory while one is held."""

_UTF8_BOM = b"\xef\xbb\xbf"

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
)
"""The keys of a line, in the order they are written."""

OPTIONAL_FIELDS = frozenset(("scope", "last_accessed", "last_decayed"))
"""Keys a line may leave out (and that are written only when not empty)."""

_FIELD_SET = frozenset(FIELDS)
_REQUIRED = _FIELD_SET - OPTIONAL_FIELDS
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
        for name in ("last_accessed", "last_decayed")
    ]
    raw_id = data["id"]
    if type(raw_id) is not str:
        raise InvalidEntryError(f"id must be a string, not {_json_kind(raw_id)}")
    try:
        entry_id = uuid.UUID(raw_id)
    except ValueError:
        raise InvalidEntryError(f"id {raw_id!r} is not a UUID") from None
    created_at = _time(data["created_at"], "created_at")
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
            last_accessed=stamps[0],
            last_decayed=stamps[1],
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
    missing = [name for name in FIELDS if name not in keys and name not in OPTIONAL_FIELDS]
    unknown = sorted(str(name) for name in keys if name not in _FIELD_SET)
    problems = []
    if missing:
        problems.append(f"missing {_names(missing)}")
    if unknown:
        problems.append(f"unknown {_names(unknown)}")
    required = ", ".join(name for name in FIELDS if name not in OPTIONAL_FIELDS)
    optional = ", ".join(name for name in FIELDS if name in OPTIONAL_FIELDS)
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


# --- batches of lines ---------------------------------------------------------------


class LineError(InvalidEntryError):
    """A line of the input is not a valid entry; ``number`` is its line number (from 1)."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: {reason}")
        self.number = number
        self.reason = reason


@dataclass(slots=True)
class Batch:
    """Parsed lines ``first_line..last_line`` (from 1) and the bytes they took."""

    first_line: int
    last_line: int
    entries: FlatBatch
    consumed: int
    blanks: list[int] = field(default_factory=list)
    """The numbers of the blank lines among them, in order (usually none)."""

    def line_of(self, index: int) -> int:
        """The line number of entry ``index`` (from 0) of the batch."""
        number = self.first_line + index
        for blank in self.blanks:
            if blank > number:
                break
            number += 1
        return number


def read_batches(lines: Iterable[bytes], batch_size: int) -> Iterator[Batch]:
    """Parse lines into batches of ``batch_size`` entries.

    Blank lines are skipped and a UTF-8 byte order mark before the first line is
    ignored; trailing blank lines end the last batch (or make one of no entries).

    Raises:
        LineError: a line is not a valid entry; its batch is not yielded.

    """
    flat = FlatBatch([], [])
    first = 1
    consumed = 0
    number = 0
    blanks: list[int] = []
    for number, raw in enumerate(lines, start=1):
        consumed += len(raw)
        if number == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]  # noqa: PLW2901 - the BOM is not part of the line
        if not raw or raw.isspace():
            blanks.append(number)
            continue
        try:
            entry, tags = flat_from_json(raw)
        except InvalidEntryError as exc:
            raise LineError(number, str(exc)) from None
        flat.add(entry, tags)
        if len(flat) == batch_size:
            yield Batch(first, number, flat, consumed, blanks)
            flat = FlatBatch([], [])
            first = number + 1
            consumed = 0
            blanks = []
    if len(flat) or consumed:
        yield Batch(first, number, flat, consumed, blanks)


# --- import and export ----------------------------------------------------------------


class ImportFailedError(LoopMemoryError):
    """An import stopped at a bad line or a refused batch; the batches before it are stored.

    The error that stopped it (a :class:`LineError`, a ``DuplicateEntryError``,
    a ``StorageError``) is chained as ``__cause__``. A batch refused for an id
    already stored, or repeated within it, is looked at again once refused, and
    the message names the first such line and its id.

    Attributes:
        lines: the bad line, or the first and last lines of the refused batch.
        resume_line: the first line not stored: where a corrected import resumes.
        imported: the entries stored before it.
        skipped: the lines skipped before it (``on_duplicate="skip"``): their id
            was already stored or on an earlier line.
        duplicate_line: the first line of the refused batch whose id was already
            stored (or on an earlier line of the batch); None when not known.
        duplicate_id: that line's id; None when not known.

    """

    def __init__(
        self,
        lines: tuple[int, int] | int,
        resume_line: int,
        imported: int,
        reason: str,
        *,
        skipped: int = 0,
        duplicate_line: int | None = None,
        duplicate_id: uuid.UUID | None = None,
    ) -> None:
        where = f"lines {lines[0]}-{lines[1]}" if isinstance(lines, tuple) else f"line {lines}"
        if imported:
            done = f"the {imported} entries before line {resume_line} were imported"
            if skipped:
                done += f" ({skipped} more were already stored)"
            done += ", none from it on"
        elif skipped:
            done = (
                f"nothing was imported (the {skipped} entries before line {resume_line}"
                " were already stored)"
            )
        else:
            done = "nothing was imported"
        super().__init__(f"{where}: {reason}; {done}")
        self.lines = lines
        self.resume_line = resume_line
        self.imported = imported
        self.skipped = skipped
        self.duplicate_line = duplicate_line
        self.duplicate_id = duplicate_id


@dataclass(frozen=True, slots=True)
class ImportReport:
    """What :func:`import_jsonl` stored, and what it skipped."""

    entries: int
    skipped: int
    """Lines not stored because their id was already stored or on an earlier line
    (``on_duplicate="skip"``)."""
    batches: int
    """Transactions: the batches that stored an entry."""
    elapsed: float
    """Seconds, from the first line read to the last batch committed."""


Progress = Callable[[int, int], None]
"""Called after each batch with the entries stored so far and the bytes the batch took."""

OnDuplicate = Literal["fail", "skip"]
"""What :func:`import_jsonl` does with a line whose id is already stored."""

_ON_DUPLICATE = ("fail", "skip")

SKIP_ATTEMPTS = 3
"""Times a batch is read and written when skipping: another writer may store one of
its ids between the read and the write, and the batch is then read again, but not
for ever."""


async def import_jsonl(
    store: SqlMemoryStore,
    source: str | os.PathLike[str] | IO[bytes],
    *,
    batch_size: int = IMPORT_BATCH,
    on_progress: Progress | None = None,
    on_duplicate: OnDuplicate = "fail",
) -> ImportReport:
    """Store every entry of a JSON Lines file or binary stream, as :func:`export_jsonl` writes.

    Every line is validated; each batch of ``batch_size`` lines is one
    transaction, so a bad line stops the import before its batch is stored,
    and the batches before it stay.
    Lines are parsed on the calling event loop's thread between the writes,
    where the store's own indexing runs too: an application whose loop must
    never pause that long should run the import on a loop in another thread.

    ``on_duplicate`` says what a line whose id is already stored does (ids are
    unique across the store: an entry of any scope counts, as does a line
    earlier in the input). ``"fail"`` (the default): its batch is refused and
    the import stops, naming the line and the id. ``"skip"``: the line is
    skipped and counted in :attr:`ImportReport.skipped`, and the rest of its
    batch stored; importing a file again this way finishes an import that
    stopped half way, and stores exactly what one whole import would have.
    It costs one read of the id index a batch.

    Raises:
        ImportFailedError: a line is not a valid entry, or a batch was refused (an
            id already stored, or the database failed); what was stored before is
            kept and counted.
        InvalidEntryError: ``batch_size`` is not a positive int, or
            ``on_duplicate`` is neither ``"fail"`` nor ``"skip"``.
        OSError: the source cannot be read.

    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise InvalidEntryError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not isinstance(on_duplicate, str) or on_duplicate not in _ON_DUPLICATE:
        raise InvalidEntryError(f"on_duplicate must be 'fail' or 'skip', got {on_duplicate!r}")
    skip = on_duplicate == "skip"
    with contextlib.ExitStack() as stack:
        if isinstance(source, str | os.PathLike):
            # A local file: its reads, like the parsing, are short next to each write.
            stream: IO[bytes] = stack.enter_context(Path(source).open("rb"))  # noqa: ASYNC230
        else:
            stream = source
        started = time.perf_counter()
        batches = read_batches(stream, batch_size)
        stored = skipped = count = 0
        resume_line = 1
        try:
            for batch in batches:
                try:
                    if skip:
                        kept = await _store_new(store, batch.entries)
                    else:
                        await store.store_flat(batch.entries)
                        kept = len(batch.entries)
                except LoopMemoryError as exc:
                    refused = ImportFailedError(
                        (batch.first_line, batch.last_line),
                        resume_line,
                        stored,
                        str(exc),
                        skipped=skipped,
                    )
                    if isinstance(exc, DuplicateEntryError):
                        refused = await _named_duplicate(store, batch, refused)
                    raise refused from exc
                stored += kept
                skipped += len(batch.entries) - kept
                count += kept > 0
                resume_line = batch.last_line + 1
                if on_progress is not None:
                    on_progress(stored, batch.consumed)
        except LineError as exc:
            raise ImportFailedError(
                exc.number, resume_line, stored, exc.reason, skipped=skipped
            ) from exc
    return ImportReport(stored, skipped, count, time.perf_counter() - started)


async def _store_new(store: SqlMemoryStore, batch: FlatBatch) -> int:
    """Store, in one transaction, the entries of ``batch`` whose ids are new; return how many.

    Raises:
        DuplicateEntryError: other writers stored one of the ids between the read
            and the write, :data:`SKIP_ATTEMPTS` times in a row.

    """
    ids = [uuid.UUID(hex=entry[0]) for entry in batch.entries]
    for _ in range(SKIP_ATTEMPTS - 1):
        fresh = _new_entries(batch, await store.existing_ids(ids))
        with contextlib.suppress(DuplicateEntryError):  # stored meanwhile: read again
            await store.store_flat(fresh)
            return len(fresh)
    fresh = _new_entries(batch, await store.existing_ids(ids))
    await store.store_flat(fresh)
    return len(fresh)


def _new_entries(batch: FlatBatch, stored: set[uuid.UUID]) -> FlatBatch:
    """The entries of ``batch`` whose id is neither ``stored`` nor on an earlier entry, and tags."""
    seen = {entry_id.hex for entry_id in stored}
    kept = FlatBatch([], [])
    renumbered: dict[int, int] = {}  # an entry's index in the batch -> in kept
    for index, entry in enumerate(batch.entries):
        if entry[0] not in seen:
            seen.add(entry[0])
            renumbered[index] = len(kept.entries)
            kept.entries.append(entry)
    if len(kept) == len(batch):
        return batch
    kept.tags = [
        (renumbered[index], position, tag, lower)
        for index, position, tag, lower in batch.tags
        if index in renumbered
    ]
    return kept


async def _named_duplicate(
    store: SqlMemoryStore, batch: Batch, refused: ImportFailedError
) -> ImportFailedError:
    """``refused`` again, naming the first line of ``batch`` whose id was taken, and the id.

    Looked for only once the batch was refused, so that an import that stores
    every batch reads nothing more. When the ids cannot be read (or another
    writer removed the clashing entry meanwhile), ``refused`` as it was.
    """
    ids = [uuid.UUID(hex=entry[0]) for entry in batch.entries.entries]
    try:
        stored = await store.existing_ids(ids)
    except LoopMemoryError:
        stored = set()  # the ids repeated within the batch can still be named
    first_line: dict[uuid.UUID, int] = {}
    for index, entry_id in enumerate(ids):
        number = batch.line_of(index)
        if entry_id in stored:
            reason = f"line {number}: an entry with id {entry_id} is already stored"
        elif first_line.setdefault(entry_id, number) != number:
            reason = f"line {number}: id {entry_id} is already on line {first_line[entry_id]}"
            reason += " (the same id twice)"
        else:
            continue
        return ImportFailedError(
            refused.lines,
            refused.resume_line,
            refused.imported,
            reason,
            skipped=refused.skipped,
            duplicate_line=number,
            duplicate_id=entry_id,
        )
    return refused


async def export_jsonl(
    store: SqlMemoryStore, target: str | os.PathLike[str] | IO[bytes], *, batch_size: int = 10_000
) -> int:
    """Write every entry of ``store`` as JSON Lines, in insertion order; return how many.

    A path is written next to itself and renamed when complete, so a failed
    export never leaves half a file; a stream is written as it goes.
    """
    if not isinstance(target, str | os.PathLike):
        return await _write_entries(store, target, batch_size)
    path = Path(target)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as stream:
            written = await _write_entries(store, stream, batch_size)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written


async def _write_entries(store: SqlMemoryStore, stream: IO[bytes], batch_size: int) -> int:
    written = 0
    chunk: list[bytes] = []
    async for scope, entry in store.iter_scoped_entries(batch_size=batch_size):
        chunk.append(entry_to_json(entry, scope).encode() + b"\n")
        if len(chunk) >= batch_size:
            stream.write(b"".join(chunk))
            written += len(chunk)
            chunk.clear()
    stream.write(b"".join(chunk))
    return written + len(chunk)
