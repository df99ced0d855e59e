"""JSON Lines into flat batches for an import, parsed in a second process when that helps.

Parsing and checking a line costs about as much as storing it, and both hold
Python's GIL, so a thread cannot overlap them. When the input has a file
descriptor and the machine more than one core, a child process (this
interpreter, running :func:`_child_main`) reads the input itself and sends back each
:class:`Batch`, tokens included, while the importing process writes
the previous batch; for a SQLite store it writes the batch's rows to a stage file
(:mod:`loopctl_memory.staging`) and sends the rest. Otherwise the same batches are
parsed in process. Either way the lines accepted, the batches and the errors are the same.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopctl_memory.errors import InvalidEntryError, LoopMemoryError
from loopctl_memory.flat import FlatBatch, Staged
from loopctl_memory.jsonl import flat_from_json
from loopctl_memory.staging import write_stage

_UTF8_BOM = b"\xef\xbb\xbf"
_HEADER = 8  # bytes of a frame's length, little-endian


@dataclass(slots=True)
class Batch:
    """Parsed lines ``first_line..last_line`` (1-based) and the bytes they took."""

    first_line: int
    last_line: int
    entries: FlatBatch
    consumed: int


class LineError(InvalidEntryError):
    """A line of the input is not a valid entry; ``number`` is its line number."""

    def __init__(self, number: int, reason: str) -> None:
        super().__init__(f"line {number}: {reason}")
        self.number = number
        self.reason = reason


def read_batches(lines: Iterable[bytes], batch_size: int, tokens: bool = False) -> Iterator[Batch]:
    """Parse lines into batches of ``batch_size`` entries, in this process.

    Blank lines are skipped and a UTF-8 byte order mark before the first line is
    ignored. ``tokens``: compute each entry's tokens too (for the index).

    Raises:
        LineError: a line is not a valid entry; its batch is not yielded.

    """
    flat: FlatBatch = FlatBatch([], [])
    first = 1
    consumed = 0
    number = 0
    for number, raw in enumerate(lines, start=1):
        consumed += len(raw)
        if number == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]  # noqa: PLW2901 - the BOM is not part of the line
        if not raw or raw.isspace():
            continue
        try:
            entry, tags = flat_from_json(raw.decode())
        except UnicodeDecodeError as exc:
            raise LineError(number, f"not valid UTF-8: {exc.reason}") from None
        except InvalidEntryError as exc:
            raise LineError(number, str(exc)) from None
        flat.add(entry, tags)
        if len(flat.entries) >= batch_size:
            yield _finished(Batch(first, number, flat, consumed), tokens)
            flat = FlatBatch([], [])
            first = number + 1
            consumed = 0
    if flat.entries or consumed:  # trailing blank lines still count as read
        yield _finished(Batch(first, number, flat, consumed), tokens)


def _finished(batch: Batch, tokens: bool) -> Batch:
    if tokens:
        batch.entries.token_postings()
        batch.entries.tag_postings()
    return batch


@contextlib.contextmanager
def parsed_batches(
    stream: IO[bytes], batch_size: int, stage_dir: Path | None = None
) -> Iterator[Iterator[Batch]]:
    """The batches of ``stream``, parsed by a child process where one can help.

    The child reads ``stream``'s file descriptor itself, from the stream's
    position (a pipe: from what the stream has not buffered yet); nothing else
    may read it meanwhile. Leaving the context stops the child.

    ``stage_dir``: the child writes each batch to a stage file there (see
    :mod:`loopctl_memory.staging`) and sends the rest; for a SQLite store, whose
    writer then binds no values. A batch whose ids repeat still comes as rows,
    for the store to refuse as usual; so do batches parsed in this process.
    The caller removes the files.

    Raises:
        LineError: (from the iterator) a line is not a valid entry.
        LoopMemoryError: (from the iterator) the child process failed.

    """
    descriptor = _descriptor(stream)
    if descriptor is None or (os.cpu_count() or 1) < 2 or not sys.executable:
        yield read_batches(stream, batch_size)
        return
    if stream.seekable():  # what this process buffered is not lost to the child
        os.lseek(descriptor, stream.tell(), os.SEEK_SET)
    # -P: the working directory never shadows a module; the package's own directory
    # goes last on the path, for a parent that imported it from somewhere unusual.
    package_root = str(Path(__file__).resolve().parents[1])
    program = (
        f"import sys; sys.path.append({package_root!r}); "
        "from loopctl_memory.jsonl_batches import _child_main; "
        f"_child_main({int(batch_size)}, {str(stage_dir) if stage_dir else None!r})"
    )
    child = subprocess.Popen(  # noqa: S603 - our own interpreter and code, no shell
        [sys.executable, "-P", "-c", program],
        stdin=descriptor,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        yield _received(child)
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def _descriptor(stream: IO[bytes]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def _received(child: subprocess.Popen[bytes]) -> Iterator[Batch]:
    assert child.stdout is not None  # noqa: S101 - opened with stdout=PIPE above
    while True:
        header = child.stdout.read(_HEADER)
        if len(header) < _HEADER:
            raise _child_failure(child)
        size = int.from_bytes(header, "little")
        payload = child.stdout.read(size)
        if len(payload) < size:  # the child died while sending
            raise _child_failure(child)
        # marshal, not pickle: plain tuples and lists of str, int, float and bool, read
        # back a third faster; only ever between this interpreter and its own child.
        try:
            message: tuple[Any, ...] = marshal.loads(payload)  # noqa: S302
        except (EOFError, ValueError, TypeError):
            raise LoopMemoryError("the JSON Lines parser process sent a garbled batch") from None
        kind = message[0]
        if kind == "batch":
            first, last, consumed, entries, tags, tokens, tag_values = message[1:]
            yield Batch(first, last, FlatBatch(entries, tags, tokens, tag_values), consumed)
        elif kind == "staged":
            first, last, consumed, path, count, tokens, tag_values = message[1:]
            staged = FlatBatch([], [], tokens, tag_values, Staged(path, count))
            yield Batch(first, last, staged, consumed)
        elif kind == "line":
            raise LineError(message[1], message[2])
        elif kind == "end":
            return
        else:
            raise LoopMemoryError(f"the JSON Lines parser failed: {message[1]}")


def _child_failure(child: subprocess.Popen[bytes]) -> LoopMemoryError:
    code = child.wait()
    detail = b""
    if child.stderr is not None:
        detail = child.stderr.read()
    last = detail.decode(errors="replace").strip().splitlines()[-1:] or [f"exit code {code}"]
    return LoopMemoryError(f"the JSON Lines parser process stopped: {last[0]}")


def _send(out: IO[bytes], message: tuple[Any, ...]) -> None:
    payload = marshal.dumps(message)
    out.write(len(payload).to_bytes(_HEADER, "little"))
    out.write(payload)
    out.flush()


def _child_main(batch_size: int, stage_dir: str | None = None) -> None:
    """Parse standard input and send every batch, then ``end`` or the first error."""
    out = sys.stdout.buffer
    try:
        for number, batch in enumerate(read_batches(sys.stdin.buffer, batch_size, tokens=True)):
            flat = batch.entries
            rows: tuple[Any, Any] = (flat.entries, flat.tags)
            kind = "batch"
            if stage_dir is not None and flat.has_unique_ids():
                staged = write_stage(Path(stage_dir) / f"batch-{number}.db", flat)
                kind, rows = "staged", (staged.path, staged.entries)
            lines = (batch.first_line, batch.last_line, batch.consumed)
            _send(out, (kind, *lines, *rows, flat.tokens, flat.tag_values))
        _send(out, ("end",))
    except LineError as exc:
        _send(out, ("line", exc.number, exc.reason))
    except BrokenPipeError:  # the importing process stopped listening
        pass
    except Exception as exc:
        _send(out, ("failed", f"{type(exc).__name__}: {exc}"))
