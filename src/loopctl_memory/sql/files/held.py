"""One descriptor per SQLite file per process, kept while any store of the process has the file.

On POSIX systems, closing *any* descriptor of a file releases *every* fcntl
lock the process holds on it, including the locks SQLite's own connections
hold ("How To Corrupt An SQLite Database File", section 2.2). A check that
opened the database file and closed it again while a connection of the
process was open let other processes take the file as unlocked: a checkpoint
or a reset of the write-ahead log raced with writes, and acknowledged entries
were lost or the file destroyed.

So the library never opens and closes a database file around a read. The
first store of a process to open a file opens one read-only descriptor of it
(:func:`hold`), before its engine's first connection; every later store of the
process on the same file (same device and inode) shares that descriptor; the
file's header is read through it with ``pread`` (:meth:`HeldFile.header`),
which moves no file offset and takes no lock. When the last store lets go
(:meth:`HeldFile.release`, after its engine is disposed) the descriptor is
closed, unless SQLite still holds a lock on the file in this process (the
caller's own connection, or one a store leaked): where the system lists the
process's locks (Linux, ``/proc/locks``), it is then kept, and closed at a
later hold or release once none is left.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from loopctl_memory.sql.files import header

_PROCESS_LOCKS = Path("/proc/locks")

Identity = tuple[int, int]
"""A file as the system knows it: (device, inode)."""


@dataclass
class _Descriptor:
    """An open descriptor of one file, and how many stores of the process hold it."""

    identity: Identity
    number: int
    holders: int = 1
    spares: list[int] = field(default_factory=list)
    """Descriptors of the same file opened in a race with another hold, closed with this one."""

    def close(self) -> None:
        for number in (self.number, *self.spares):
            os.close(number)


_guard = threading.Lock()  # stores of the blocking API open and close on threads of their own
_held: dict[Identity, _Descriptor] = {}
_released: list[_Descriptor] = []  # no store holds them; SQLite still held a lock when let go


def _after_fork_in_child() -> None:
    global _guard  # noqa: PLW0603 - a lock another thread held at fork() is never let go
    _guard = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


class HeldFile:
    """A store's share of its process's descriptor of a SQLite file.

    Read through it; never close it: :meth:`release` does, once nothing in
    the process needs it.
    """

    __slots__ = ("_descriptor", "identity", "path")

    def __init__(self, path: str, descriptor: _Descriptor) -> None:
        self.path = path
        self.identity = descriptor.identity
        """(device, inode) of the file held: the one opened, wherever its path points now."""
        self._descriptor: _Descriptor | None = descriptor

    def header(self) -> bytes:
        """The file's first 100 bytes as they are on disk now (fewer if the file is shorter).

        Raises:
            OSError: the file cannot be read.

        """
        return os.pread(self._open().number, header.LENGTH, 0)

    def size(self) -> int:
        """The file's size in bytes now.

        Raises:
            OSError: the file cannot be examined.

        """
        return os.fstat(self._open().number).st_size

    def release(self) -> None:
        """Let go of the file (idempotent); the last store of the process to let go closes it."""
        with _guard:
            descriptor, self._descriptor = self._descriptor, None
            if descriptor is not None:
                descriptor.holders -= 1
                if descriptor.holders == 0:
                    del _held[descriptor.identity]
                    _released.append(descriptor)
            _close_released()

    def _open(self) -> _Descriptor:
        if self._descriptor is None:
            raise ValueError(f"{self.path} was released")
        return self._descriptor


def hold(path: str | os.PathLike[str], *, create: bool) -> HeldFile:
    """Share the process's descriptor of the SQLite file at ``path``, opening it if none is open.

    ``create``: make an empty file if there is none (as SQLite would, with
    the same permissions: 0644 less the umask).

    Raises:
        OSError: the file cannot be opened for reading (or created).

    """
    where = os.path.abspath(path)
    with _guard:
        _close_released()
        try:
            found = os.stat(where)
        except FileNotFoundError:
            pass
        else:
            known = _held.get((found.st_dev, found.st_ino)) or _take_released(
                (found.st_dev, found.st_ino)
            )
            if known is not None:
                known.holders += 1
                return HeldFile(where, known)
        flags = os.O_RDONLY | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        number = os.open(where, flags, 0o644)
        try:
            opened = os.fstat(number)
        except OSError:
            os.close(number)  # a descriptor made a moment ago, of a file no store holds yet
            raise
        identity = (opened.st_dev, opened.st_ino)
        known = _held.get(identity) or _take_released(identity)
        if known is None:
            known = _held[identity] = _Descriptor(identity, number)
        else:
            # Replaced under the path between stat and open, by a file held already:
            # closing this one now would drop the locks of the stores that hold it.
            known.holders += 1
            known.spares.append(number)
        return HeldFile(where, known)


def held_count() -> int:
    """How many files the process holds a descriptor of (for tests and diagnostics)."""
    with _guard:
        return len(_held) + len(_released)


def _take_released(identity: Identity) -> _Descriptor | None:
    """A released descriptor of ``identity``, held again (holders set to 0 for the caller)."""
    for descriptor in _released:
        if descriptor.identity == identity:
            _released.remove(descriptor)
            descriptor.holders = 0
            _held[identity] = descriptor
            return descriptor
    return None


def _close_released() -> None:
    """Close every released descriptor whose file the process holds no lock on."""
    if not _released:
        return
    locked = _locked_by_this_process()
    for descriptor in list(_released):
        if descriptor.identity not in locked:
            _released.remove(descriptor)
            descriptor.close()


def _locked_by_this_process() -> set[Identity]:
    """The files this process holds a POSIX lock on, where the system lists them (else none).

    ``/proc/locks`` names a file as ``MAJOR:MINOR:INODE``, the device numbers in hex.
    """
    try:
        listing = _PROCESS_LOCKS.read_text(encoding="ascii", errors="replace")
    except OSError:
        return set()
    me = str(os.getpid())
    locked: set[Identity] = set()
    for line in listing.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[1] == "->":  # a request waiting for a lock
            continue
        if len(parts) < 6 or parts[1] != "POSIX" or parts[4] != me:
            continue
        major, minor, inode = parts[5].split(":")
        locked.add((os.makedev(int(major, 16), int(minor, 16)), int(inode)))
    return locked
