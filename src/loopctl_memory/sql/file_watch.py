"""Watching the SQLite file a store opened: is it still that file, changed by someone else.

A change someone else made is counted whenever the store sees it, after a read
as before a write (a read never changes the file itself: only commits and
their checkpoints do). Before the next write, the file's header is checked
(:meth:`FileWatch.damage`): a file overwritten in place or truncated is
refused before the write could be acknowledged into it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

_MAGIC = b"SQLite format 3\x00"
_HEADER = 100

PAGES_AS_OF = "loopctl_pages_as_of"
"""A pooled connection's note (``info``) of the modification count its cached pages reflect."""


class FileWatch:
    """The SQLite file a store opened, watched with one ``stat`` at a time.

    It tells whether the path still names that file (same device and inode),
    and whether the file was modified since the store last looked, by some
    writer other than the store's own writes and their checkpoints: then the
    pages a connection has cached may no longer be what the file holds.
    """

    __slots__ = ("_identity", "_page_size", "_seen", "changes", "checked", "path")

    def __init__(self, file: Path) -> None:
        self.path = os.path.abspath(file)  # as opened, whatever the working directory
        found = os.stat(self.path)
        self._identity = (found.st_dev, found.st_ino)
        self._seen = (found.st_mtime_ns, found.st_size)
        self._page_size = _page_size(_read_header(self.path))
        self.changes = 0
        """How many times the file was seen modified by someone else."""
        self.checked = 0
        """Of those, how many the last check of the header followed."""

    @classmethod
    def of(cls, file: Path | None) -> FileWatch | None:
        """A watch of ``file`` (None for ``:memory:`` and servers)."""
        return None if file is None else cls(file)

    def look_before_writing(self) -> None:
        """Count a modification made since the store last looked (it then reads afresh)."""
        with contextlib.suppress(OSError):  # a vanished file: told after the write
            found = os.stat(self.path)
            if (found.st_mtime_ns, found.st_size) != self._seen:
                self.changes += 1

    def damage(self) -> str | None:
        """Why the file is no longer a database the store can write into, or None.

        Cheap (its size and first 100 bytes), and never wrong about a sound
        file: empty, not starting as a SQLite database does, or with another
        page size than it was opened with. Its size against the pages its
        header counts is not compared: another process's checkpoint writes the
        header before the pages that extend the file, and a write stopped for
        that would be refused in error. What this leaves (garbage past the
        header, a file cut at a page boundary) fails the reads and writes that
        touch those pages.
        """
        try:
            size = os.stat(self.path).st_size
            header = _read_header(self.path)
        except OSError as exc:
            return f"can no longer be read ({exc.strerror})"
        if size == 0:
            return "was truncated to 0 bytes"
        if not header.startswith(_MAGIC):
            return "was overwritten: it no longer starts as a SQLite database does"
        page_size = _page_size(header)
        if self._page_size is not None and page_size != self._page_size:
            return f"was overwritten: its header says pages of {page_size} bytes"
        return None

    def lost(self, *, wrote: bool) -> str | None:
        """After the store's work: why the path no longer names the file, or None.

        After a read (``wrote`` false), a modification is someone else's: it is
        counted, so that the next write checks the file first.
        """
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            what = "was removed or renamed"
        except OSError as exc:
            what = f"can no longer be examined ({exc.strerror})"
        else:
            if (found.st_dev, found.st_ino) == self._identity:
                seen = (found.st_mtime_ns, found.st_size)
                if not wrote and seen != self._seen:
                    self.changes += 1
                self._seen = seen
                return None
            what = "was replaced by another file"
        return (
            f"the database file {self.path} {what} while the store had it open: "
            "the store acknowledges nothing more; reopen it"
        )


def _read_header(path: str) -> bytes:
    with open(path, "rb") as file:
        return file.read(_HEADER)


def _page_size(header: bytes) -> int | None:
    """The page size a database header records; None for a header that is not one."""
    if len(header) < _HEADER or not header.startswith(_MAGIC):
        return None
    size = int.from_bytes(header[16:18], "big")
    return 65_536 if size == 1 else size
