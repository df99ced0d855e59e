"""Watching the SQLite file a store opened: is it still that file, changed by someone else."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

PAGES_AS_OF = "loopctl_pages_as_of"
"""A pooled connection's note (``info``) of the modification count its cached pages reflect."""


class FileWatch:
    """The SQLite file a store opened, watched with one ``stat`` at a time.

    It tells whether the path still names that file (same device and inode),
    and whether the file was modified since the store last looked, by some
    writer other than the store's own writes and their checkpoints: then the
    pages a connection has cached may no longer be what the file holds.
    """

    __slots__ = ("_identity", "_seen", "changes", "path")

    def __init__(self, file: Path) -> None:
        self.path = os.path.abspath(file)  # as opened, whatever the working directory
        found = os.stat(self.path)
        self._identity = (found.st_dev, found.st_ino)
        self._seen = (found.st_mtime_ns, found.st_size)
        self.changes = 0
        """How many times the file was seen modified by someone else."""

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

    def lost(self) -> str | None:
        """After the store's work: why the path no longer names the file, or None."""
        try:
            found = os.stat(self.path)
        except FileNotFoundError:
            what = "was removed or renamed"
        except OSError as exc:
            what = f"can no longer be examined ({exc.strerror})"
        else:
            if (found.st_dev, found.st_ino) == self._identity:
                self._seen = (found.st_mtime_ns, found.st_size)
                return None
            what = "was replaced by another file"
        return (
            f"the database file {self.path} {what} while the store had it open: "
            "the store acknowledges nothing more; reopen it"
        )
