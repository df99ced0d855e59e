"""The first 100 bytes of a SQLite database file: what the file checks read of them.

See SQLite's "Database File Format", section 1.3 ("The Database Header").
"""

from __future__ import annotations

MAGIC = b"SQLite format 3\x00"
"""The 16 bytes every SQLite database file starts with."""

LENGTH = 100
"""Bytes in the header."""


def page_size(header: bytes) -> int | None:
    """The page size a database header records; None for a header that is not one."""
    if len(header) < LENGTH or not header.startswith(MAGIC):
        return None
    size = int.from_bytes(header[16:18], "big")
    return 65_536 if size == 1 else size


def in_wal_mode(header: bytes) -> bool:
    """Whether the header says write-ahead logging (file format read and write versions 2)."""
    return len(header) >= 20 and header[18:20] == b"\x02\x02"
