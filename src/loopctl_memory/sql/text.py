"""Utf8Text: text that may hold any Unicode scalar, U+0000 included, on every database.

SQLite's TEXT stores it as it is. PostgreSQL's text type refuses U+0000, so
there the column is BYTEA holding the UTF-8 encoding. Substring tests stay
exact on the bytes: UTF-8 is self-synchronising, so one encoded string occurs
inside another exactly when the text does.

Migrations import this type too, so it must never change what it stores.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sqlalchemy import LargeBinary, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator, TypeEngine


def _encode(value: str | None) -> bytes | None:
    return None if value is None else value.encode("utf-8")


def _decode(value: bytes | None) -> str | None:
    return None if value is None else bytes(value).decode("utf-8")


def _on_bytes(dialect: Dialect) -> bool:
    return dialect.name == "postgresql"


class Utf8Text(TypeDecorator[str]):
    """TEXT on SQLite; UTF-8 in BYTEA on PostgreSQL (whose text cannot hold U+0000)."""

    impl = Text
    cache_ok = True

    def load_dialect_impl(self, dialect: Dialect) -> TypeEngine[Any]:
        """BYTEA on PostgreSQL, TEXT elsewhere."""
        return dialect.type_descriptor(LargeBinary() if _on_bytes(dialect) else Text())

    # Processors rather than process_*_param, so SQLite pays no Python call per value.
    def bind_processor(self, dialect: Dialect) -> Callable[[str | None], Any] | None:
        """Encode to UTF-8 on PostgreSQL; nothing to do elsewhere."""
        return _encode if _on_bytes(dialect) else None

    def result_processor(
        self, dialect: Dialect, coltype: object
    ) -> Callable[[Any], str | None] | None:
        """Decode UTF-8 on PostgreSQL; nothing to do elsewhere."""
        return _decode if _on_bytes(dialect) else None
