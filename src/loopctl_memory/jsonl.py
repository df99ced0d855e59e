"""JSON Lines files: a store's entries exported one a line, and imported a batch a transaction.

Each line is one entry as :mod:`loopctl_memory.entry_json` writes it, every
field, so that export -> import -> export is byte-identical.

:func:`export_jsonl` writes a store's entries in insertion order;
:func:`import_jsonl` stores a file's, a batch a transaction, and either stops at
an id already stored or skips its line (so that an import stopped half way is
finished by running it again).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Literal

from loopctl_memory.arguments import check_batch_size
from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import HISTORY_FIELD, entry_to_dict, entry_to_json, flat_from_json
from loopctl_memory.errors import (
    DuplicateEntryError,
    InvalidArgumentError,
    InvalidEntryError,
    LoopMemoryError,
)
from loopctl_memory.flat import FlatBatch

if TYPE_CHECKING:
    from loopctl_memory.sql.store.memory_store import SqlMemoryStore

IMPORT_BATCH = 50_000
"""Lines stored per transaction by :func:`import_jsonl` unless told otherwise.

Each batch is a block of the token index and a commit that writes every page it
touched in the id index, whose keys are random: fewer, larger batches make
fewer of both, for more memory while one is held."""

EXPORT_BATCH = 10_000
"""Entries read per transaction by :func:`export_jsonl` unless told otherwise."""

_UTF8_BOM = b"\xef\xbb\xbf"


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
        InvalidArgumentError: ``batch_size`` is not a positive int,
            ``on_duplicate`` is neither ``"fail"`` nor ``"skip"``, or ``store``
            is not an async store (a ``SyncMemoryStore`` has its own ``import_jsonl``).
        OSError: the source cannot be read.

    """
    _check_store(store, "import_jsonl")
    check_batch_size(batch_size)
    if not isinstance(on_duplicate, str) or on_duplicate not in _ON_DUPLICATE:
        raise InvalidArgumentError(f"on_duplicate must be 'fail' or 'skip', got {on_duplicate!r}")
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
    store: SqlMemoryStore,
    target: str | os.PathLike[str] | IO[bytes],
    *,
    batch_size: int = EXPORT_BATCH,
    history: bool = False,
) -> int:
    """Write every entry of ``store`` as JSON Lines, in insertion order; return how many.

    A path is written next to itself and renamed when complete, so a failed
    export never leaves half a file; a stream is written as it goes. With
    ``history``, each line also holds the memory's events under ``"history"``
    (:meth:`HistoryEvent.to_dict`, oldest first), which an import skips.

    Raises:
        InvalidArgumentError: ``store`` is not an async store (a
            ``SyncMemoryStore`` has its own ``export_jsonl`` method).
        OSError: the target cannot be written.

    """
    _check_store(store, "export_jsonl")
    if not isinstance(target, str | os.PathLike):
        return await _write_entries(store, target, batch_size, history=history)
    path = Path(target)
    partial = path.with_name(f".{path.name}.partial")
    try:
        with partial.open("wb") as stream:
            written = await _write_entries(store, stream, batch_size, history=history)
        partial.replace(path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return written


async def _write_entries(
    store: SqlMemoryStore, stream: IO[bytes], batch_size: int, *, history: bool
) -> int:
    written = 0
    chunk: list[tuple[str, MemoryEntry]] = []
    async for scoped in store.iter_scoped_entries(batch_size=batch_size):
        chunk.append(scoped)
        if len(chunk) >= batch_size:
            written += await _write_chunk(store, stream, chunk, history=history)
            chunk.clear()
    return written + await _write_chunk(store, stream, chunk, history=history)


async def _write_chunk(
    store: SqlMemoryStore,
    stream: IO[bytes],
    chunk: list[tuple[str, MemoryEntry]],
    *,
    history: bool,
) -> int:
    """Write the lines of ``chunk`` (each entry's events too, with ``history``); how many."""
    if not history:
        stream.write(
            b"".join(entry_to_json(entry, scope).encode() + b"\n" for scope, entry in chunk)
        )
        return len(chunk)
    events = await store.history_of(entry.id for _, entry in chunk)
    lines = []
    for scope, entry in chunk:
        fields = entry_to_dict(entry, scope)
        fields[HISTORY_FIELD] = [
            {name: value for name, value in event.to_dict().items() if name not in ("id", "scope")}
            for event in events.get(entry.id, [])
        ]
        lines.append(json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
    stream.write(b"".join(lines))
    return len(chunk)


def _check_store(store: object, call: str) -> None:
    """Refuse anything but the async store, in one line (a coroutine would fail later)."""
    if not inspect.iscoroutinefunction(getattr(store, "count", None)):
        raise InvalidArgumentError(
            f"{call} takes the async store (open_store), not {type(store).__name__}; a"
            f" SyncMemoryStore has its own: store.{call}(...)"
        )
