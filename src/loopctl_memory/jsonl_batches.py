"""JSON Lines into flat batches for an import, parsed in other processes when that helps.

Parsing and checking a line costs about as much as storing it, and both hold
Python's GIL, so a thread cannot overlap them. When the input has a file
descriptor and the machine more than one core, child processes (this
interpreter, running :func:`_child_main`) read the input themselves and send
back each :class:`Batch`, tokens included, while the importing process writes
the previous one: two children taking turns at the batches of a file, which each
reads at its own offset, or one for a pipe. For a SQLite store a child writes
the batch's rows and postings to a stage file (:mod:`loopctl_memory.staging`)
and sends its path; told the seq the store will give the first entry, it
numbers the postings by seq, so that the store copies them as they are.
Otherwise the same batches are parsed in process. Either way the lines
accepted, the batches and the errors are the same.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import marshal
import os
import subprocess
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from loopctl_memory.errors import InvalidEntryError, LoopMemoryError
from loopctl_memory.flat import FlatBatch, Postings, Staged
from loopctl_memory.jsonl import flat_from_json
from loopctl_memory.staging import write_stage

_UTF8_BOM = b"\xef\xbb\xbf"
_HEADER = 8  # bytes of a frame's length, little-endian
_SEQ = 8  # bytes of the first seq on a credits pipe, little-endian


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


def read_batches(
    lines: Iterable[bytes], batch_size: int, tokens: bool = False, lane: int = 0, lanes: int = 1
) -> Iterator[Batch]:
    """Parse lines into batches of ``batch_size`` entries, in this process.

    Blank lines are skipped and a UTF-8 byte order mark before the first line is
    ignored. ``tokens``: compute each entry's tokens too (for the index).
    ``lane`` of ``lanes``: yield only the batches whose index (from 0) is ``lane``
    modulo ``lanes``; the lines of the others are counted, not parsed.

    Raises:
        LineError: a line of a yielded batch is not a valid entry; its batch is not yielded.

    """
    flat: FlatBatch = FlatBatch([], [])
    first = 1
    consumed = 0
    count = 0  # entries in the batch being read
    index = 0  # of the batch being read
    mine = lane == 0
    number = 0
    for number, raw in enumerate(lines, start=1):
        consumed += len(raw)
        if number == 1 and raw.startswith(_UTF8_BOM):
            raw = raw[len(_UTF8_BOM) :]  # noqa: PLW2901 - the BOM is not part of the line
        if not raw or raw.isspace():
            continue
        if mine:
            try:
                entry, tags = flat_from_json(raw)
            except InvalidEntryError as exc:
                raise LineError(number, str(exc)) from None
            flat.add(entry, tags)
        count += 1
        if count == batch_size:
            if mine:
                yield _finished(Batch(first, number, flat, consumed), tokens)
                flat = FlatBatch([], [])
            first = number + 1
            consumed = count = 0
            index += 1
            mine = index % lanes == lane
    if mine and (count or consumed):  # trailing blank lines still count as read
        yield _finished(Batch(first, number, flat, consumed), tokens)


def _finished(batch: Batch, tokens: bool) -> Batch:
    if tokens:
        batch.entries.token_postings()
        batch.entries.tag_postings()
    return batch


class Batches(Iterator[Batch]):
    """The batches of an input, in order, from :func:`parsed_batches`."""

    def __init__(self, batches: Iterator[Batch], credits: list[int] | None = None) -> None:
        self._batches = batches
        self._credits = credits or []
        self._told = False

    def __next__(self) -> Batch:
        if not self._told:
            self.start_at(0)
        return next(self._batches)

    def start_at(self, seq: int) -> None:
        """Tell the parsers the seq the store will give the first entry (0: not known).

        Only before the first batch is taken: it is too late after (0 is assumed
        then). A child numbers a staged batch's postings by the seqs its entries
        would then get (:attr:`Staged.origin`); where that proves wrong (another
        write came first), the store shifts them.
        """
        if self._told:
            return
        self._told = True
        for give in self._credits:
            with contextlib.suppress(BrokenPipeError):  # it died: its next message says why
                os.write(give, seq.to_bytes(_SEQ, "little"))


LANES = 2
"""Parser processes for an input that can be read at any offset: each parses every other batch."""

_CHUNK = 1 << 20  # bytes a child reads at a time from a file


@contextlib.contextmanager
def parsed_batches(
    stream: IO[bytes], batch_size: int, stage_dir: Path | None = None
) -> Iterator[Batches]:
    """The batches of ``stream``, parsed by child processes where they can help.

    The children read ``stream``'s file descriptor themselves, from the stream's
    position (a pipe: from what the stream has not buffered yet); nothing else
    may read it meanwhile. A file, which each child can read at its own offset,
    gets :data:`LANES` children taking turns at the batches; a pipe gets one.
    A child parses its next batch only once the iterator has taken the one it
    sent: the children keep at most a batch each ahead of the caller, so their
    memory, their stage files and their claim on the cores stay bounded however
    long the input. Leaving the context stops the children.

    ``stage_dir``: the children write each batch, postings included, to a stage
    file there (see :mod:`loopctl_memory.staging`) and send its path; for a
    SQLite store, whose writer then binds no values. A batch whose ids repeat
    still comes as rows, for the store to refuse as usual; so do batches parsed
    in this process. The caller removes the files, and may tell the children
    where the store's seqs start (:meth:`Batches.start_at`).

    Raises:
        LineError: (from the iterator) a line is not a valid entry.
        LoopMemoryError: (from the iterator) a child process failed.

    """
    descriptor = _descriptor(stream)
    if descriptor is None or (os.cpu_count() or 1) < 2 or not sys.executable:
        yield Batches(read_batches(stream, batch_size))
        return
    # Either way, what this process buffered is not lost to the children.
    offset: int | None = None
    lanes = 1
    if stream.seekable():
        if hasattr(os, "pread"):
            offset, lanes = stream.tell(), LANES
        else:  # pragma: no cover - every POSIX system has pread
            os.lseek(descriptor, stream.tell(), os.SEEK_SET)
    children: list[subprocess.Popen[bytes]] = []
    credits: list[int] = []  # a byte on a child's pipe: it may parse its next batch
    try:
        stage = str(stage_dir) if stage_dir else None
        for lane in range(lanes):
            where = f"lane={lane}, lanes={lanes}, offset={offset!r}"
            child, give = _spawn(f"{int(batch_size)}, {stage!r}, {where}", descriptor)
            children.append(child)
            credits.append(give)
        yield Batches(_received(children, credits), credits)
    finally:
        _stop(children, credits)


def _spawn(arguments: str, descriptor: int) -> tuple[subprocess.Popen[bytes], int]:
    """A child running ``_child_main(arguments)`` on ``descriptor``, and its credits to write."""
    # -P: the working directory never shadows a module; the package's own directory
    # goes last on the path, for a parent that imported it from somewhere unusual.
    package_root = str(Path(__file__).resolve().parents[1])
    take, give = os.pipe()
    # The collector is off from the start: a parser builds batches of tuples,
    # never a cycle, and rescanning them (and its modules) was a fiftieth of its work.
    program = (
        f"import gc; gc.disable(); import sys; sys.path.append({package_root!r}); "
        "from loopctl_memory.jsonl_batches import _child_main; "
        f"_child_main({arguments}, credits={take})"
    )
    try:
        child = subprocess.Popen(  # noqa: S603 - our own interpreter and code, no shell
            [sys.executable, "-P", "-c", program],
            stdin=descriptor,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            pass_fds=(take,),
        )
    except BaseException:
        os.close(give)
        raise
    finally:
        os.close(take)
    return child, give


def _stop(children: list[subprocess.Popen[bytes]], credits: list[int]) -> None:
    """Stop the children, done or not, and close their pipes."""
    for give in credits:
        os.close(give)  # a child waiting for its next turn sees the end and stops
    for child in children:
        if child.poll() is None:
            child.kill()
    for child in children:
        child.wait()
        for pipe in (child.stdout, child.stderr):
            if pipe is not None:
                pipe.close()


def _descriptor(stream: IO[bytes]) -> int | None:
    try:
        return stream.fileno()
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return None


def _received(children: list[subprocess.Popen[bytes]], credits: list[int]) -> Iterator[Batch]:
    """The children's batches in order: batch ``n`` comes from child ``n`` modulo their number.

    Each batch taken lets its child parse the next one (a byte on ``credits``).
    """
    for turn in itertools.count():
        lane = turn % len(children)
        message = _message(children[lane])
        kind = message[0]
        if kind in ("batch", "staged"):
            with contextlib.suppress(BrokenPipeError):  # it died: its next message says why
                os.write(credits[lane], b"\x01")
        if kind == "batch":
            first, last, consumed, entries, tags, tokens, tag_values = message[1:]
            flat = FlatBatch(entries, tags, Postings(*tokens), Postings(*tag_values))
            yield Batch(first, last, flat, consumed)
        elif kind == "staged":
            first, last, consumed, path, count, origin = message[1:]
            flat = FlatBatch([], [], staged=Staged(path, count, origin))
            yield Batch(first, last, flat, consumed)
        elif kind == "line":
            raise LineError(message[1], message[2])
        elif kind == "end":  # the child whose turn it is has no batch: there are no more
            return
        else:
            raise LoopMemoryError(f"the JSON Lines parser failed: {message[1]}")


def _message(child: subprocess.Popen[bytes]) -> tuple[Any, ...]:
    """The next message of ``child``."""
    assert child.stdout is not None  # noqa: S101 - opened with stdout=PIPE above
    header = child.stdout.read(_HEADER)
    if len(header) < _HEADER:
        raise _child_failure(child)
    size = int.from_bytes(header, "little")
    payload = child.stdout.read(size)
    if len(payload) < size:  # the child died while sending
        raise _child_failure(child)
    # marshal, not pickle: plain tuples and lists of str, int, float and bytes, read
    # back a third faster; only ever between this interpreter and its own child.
    try:
        message: tuple[Any, ...] = marshal.loads(payload)  # noqa: S302
    except (EOFError, ValueError, TypeError):
        raise LoopMemoryError("the JSON Lines parser process sent a garbled batch") from None
    return message


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


def _fields(postings: Postings) -> tuple[list[str], list[int], bytes]:
    return postings.terms, postings.counts, postings.offsets


def _told_seq(credits: int) -> int | None:
    """The first seq the importing process sends on ``credits``; None when it stopped first."""
    told = b""
    while len(told) < _SEQ:
        part = os.read(credits, _SEQ - len(told))
        if not part:
            return None
        told += part
    return int.from_bytes(told, "little")


def _lines_at(descriptor: int, offset: int) -> Iterator[bytes]:
    """The lines of a file from ``offset`` on, each with its newline.

    Read with ``pread``, which leaves the file offset alone: other processes
    read the same open file.
    """
    pending: list[bytes] = []  # the start of a line the last block cut short
    while block := os.pread(descriptor, _CHUNK, offset):
        offset += len(block)
        end = block.rfind(b"\n") + 1
        if not end:  # a line longer than a block: keep it whole, without copying it again
            pending.append(block)
            continue
        pending.append(block[:end])
        yield from io.BytesIO(b"".join(pending)).readlines()
        pending = [block[end:]]
    if rest := b"".join(pending):
        yield rest


def _child_main(
    batch_size: int,
    stage_dir: str | None = None,
    *,
    lane: int = 0,
    lanes: int = 1,
    offset: int | None = None,
    credits: int | None = None,
) -> None:
    """Parse standard input and send every batch of ``lane``, then ``end`` or the first error.

    ``offset``: standard input is a file, read from there with ``pread``.
    ``credits``: a file descriptor to read from once the first batch is parsed, the
    seq the store will give the input's first entry (:meth:`Batches.start_at`), then
    a byte after sending each batch, before parsing the next; at its end (the
    importing process stopped) the child stops.
    """
    out = sys.stdout.buffer
    lines = sys.stdin.buffer if offset is None else _lines_at(sys.stdin.fileno(), offset)
    first_seq = 0  # not told: a stage numbers its postings from 0
    try:
        batches = read_batches(lines, batch_size, tokens=True, lane=lane, lanes=lanes)
        for turn, batch in enumerate(batches):
            if turn == 0 and credits is not None:
                told = _told_seq(credits)
                if told is None:
                    return
                first_seq = told
            flat = batch.entries
            lines_read = (batch.first_line, batch.last_line, batch.consumed)
            if stage_dir is not None and flat.has_unique_ids():
                # Every batch before this one is full: its entries' seqs follow on from there.
                before = (lane + turn * lanes) * batch_size
                origin = first_seq + before if first_seq else 0
                path = Path(stage_dir) / f"lines-{batch.first_line}.db"
                staged = write_stage(path, flat, origin)
                _send(out, ("staged", *lines_read, staged.path, staged.entries, staged.origin))
            else:
                postings = (_fields(flat.token_postings()), _fields(flat.tag_postings()))
                _send(out, ("batch", *lines_read, flat.entries, flat.tags, *postings))
            if credits is not None and not os.read(credits, 1):
                return
        _send(out, ("end",))
    except LineError as exc:
        _send(out, ("line", exc.number, exc.reason))
    except BrokenPipeError:  # the importing process stopped listening
        pass
    except Exception as exc:
        _send(out, ("failed", f"{type(exc).__name__}: {exc}"))
