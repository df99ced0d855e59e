"""Watching the SQLite file a store opened: is it still that file, changed by someone else.

A change someone else made is counted whenever the store sees it, after a read
as before a write (a read never changes the file itself: only commits and
their checkpoints do). Before the next write, the file's header is checked
(:meth:`FileWatch.damage`): a file overwritten in place or truncated is
refused before the write could be acknowledged into it. The header is read
through the process's own descriptor of the file (:mod:`~loopctl_memory.sql.files.held`);
the path is only ever ``stat``-ed.
"""

from __future__ import annotations

import contextlib
import os

from loopctl_memory.sql.files import header
from loopctl_memory.sql.files.held import HeldFile

PAGES_AS_OF = "loopctl_pages_as_of"
"""A pooled connection's note (``info``) of the modification count its cached pages reflect."""


class FileWatch:
    """The SQLite file a store opened, watched with one ``stat`` at a time.

    It tells whether the path still names that file (same device and inode),
    and whether the file was modified since the store last looked, by some
    writer other than the store's own writes and their checkpoints: then the
    pages a connection has cached may no longer be what the file holds.
    """

    __slots__ = ("_file", "_page_size", "_seen", "changes", "checked", "path")

    def __init__(self, file: HeldFile) -> None:
        self._file = file
        self.path = file.path
        found = os.stat(self.path)
        self._seen = (found.st_mtime_ns, found.st_size)
        self._page_size = header.page_size(file.header())
        self.changes = 0
        """How many times the file was seen modified by someone else."""
        self.checked = 0
        """Of those, how many the last check of the header followed."""

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
            size = self._file.size()
            first = self._file.header()
        except OSError as exc:
            return f"can no longer be read ({exc.strerror})"
        if size == 0:
            return "was truncated to 0 bytes"
        if not first.startswith(header.MAGIC):
            return "was overwritten: it no longer starts as a SQLite database does"
        page_size = header.page_size(first)
        if self._page_size is not None and page_size != self._page_size:
            return f"was overwritten: its header says pages of {page_size} bytes"
        return None

    def gone(self) -> str | None:
        """Why the path no longer names the file, or None.

        Unlike :meth:`lost`, it notes nothing, so any thread may ask (the next
        :meth:`look_before_writing` sees a change all the same).
        """
        found = self._looked()
        return found if isinstance(found, str) else None

    def lost(self, *, wrote: bool) -> str | None:
        """After the store's work: why the path no longer names the file, or None.

        After a read (``wrote`` false), a modification is someone else's: it is
        counted, so that the next write checks the file first.
        """
        found = self._looked()
        if isinstance(found, str):
            return found
        seen = (found.st_mtime_ns, found.st_size)
        if not wrote and seen != self._seen:
            self.changes += 1
        self._seen = seen
        return None

    def _looked(self) -> os.stat_result | str:
        """The path's ``stat`` if it still names the file, else why it does not."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            what = "was removed or renamed"
        except OSError as exc:
            what = f"can no longer be examined ({exc.strerror})"
        else:
            if (found.st_dev, found.st_ino) == self._file.identity:
                return found
            what = "was replaced by another file"
        return (
            f"the database file {self.path} {what} while the store had it open: "
            "the store acknowledges nothing more; reopen it"
        )
