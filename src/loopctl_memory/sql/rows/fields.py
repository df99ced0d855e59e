"""Metadata filters in SQL: each entry's metadata flattened into rows of ``entry_fields``.

Every path of an entry's metadata (every key, and the keys inside its objects)
is one row: the path's hash, the kind of value there (null, bool, number,
str, list, object; :data:`LONG` added for one longer than :data:`TEXT_KEY`
characters) and the value: a number in ``number`` (a bool as 0 or 1), a str
in ``text_key`` (its first :data:`TEXT_KEY` characters, which the index holds)
and ``text`` (the whole, only when longer), a list or an object as its
canonical JSON the same way. An entry with no metadata has no rows, so it
costs a write nothing. A condition of :mod:`loopctl_memory.metadata_filter`
becomes a query for the entries that have a matching row, or for those that
have none (``$ne``, ``$nin``, ``$exists: False``, equality to null): the same
answers as :func:`~loopctl_memory.metadata_filter.holds`, which the tests
hold it to.

A path is named by a 64-bit hash of its keys: two paths of a store sharing one
hash would mix their values in a filter (odds about ``n**2 / 2**65`` for ``n``
distinct paths).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol

from sqlalchemy import BigInteger, ColumnElement, Double, bindparam, delete, literal_column, text
from sqlalchemy.ext.asyncio import AsyncConnection
from sqlalchemy.types import TypeEngine

from loopctl_memory.flat import FlatBatch
from loopctl_memory.metadata import EMPTY, decoded
from loopctl_memory.metadata_filter import (
    IS_OBJECT,
    MEMBERSHIP,
    ORDERING,
    FieldCondition,
    is_number,
)
from loopctl_memory.sql.tables import entries, entry_fields
from loopctl_memory.sql.text import Utf8Text


class Driver(Protocol):
    """What writing rows asks of a backend (:class:`~loopctl_memory.sql.backend.Backend`)."""

    def encode(self, text: str) -> Any:
        """A str as the driver takes it for a ``Utf8Text`` column."""

    def sql(self, statement: str) -> str:
        """``statement``, written with ``?`` placeholders, in the driver's style."""


NULL, BOOL, NUMBER, STRING, LIST, OBJECT = range(6)
"""The kinds of value a row holds."""
LONG = 8
"""Added to the kind of a str, list or object longer than :data:`TEXT_KEY` characters:
a test on a short one then reads the index alone."""

TEXT_KEY = 100
"""Characters of a str (or of a list's or object's canonical JSON) the index holds."""

FieldRow = tuple[int, int, int, float | None, str | None, str | None]
"""(entry_seq, path_hash, kind, number, text_key, text)."""

INSERT_FIELDS = (
    "INSERT INTO entry_fields (entry_seq, path_hash, kind, number, text_key, text)"
    " VALUES (?, ?, ?, ?, ?, ?)"
)


@functools.lru_cache(maxsize=4096)  # a store's memories share a few paths
def path_hash(path: tuple[str, ...]) -> int:
    """The signed 64-bit name of a path of keys."""
    spelled = json.dumps(path, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return int.from_bytes(hashlib.blake2b(spelled, digest_size=8).digest(), "big", signed=True)


def canonical(value: Any) -> str:
    """One text per value under typed equality: numbers as floats, object keys sorted."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_number(value):
        return repr(float(value) + 0.0)  # + 0.0: -0.0 equals 0.0
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        items = (f"{canonical(key)}:{canonical(value[key])}" for key in sorted(value))
        return "{" + ",".join(items) + "}"
    return "[" + ",".join(canonical(item) for item in value) + "]"


def field_rows(seq: int, stored_metadata: str) -> list[FieldRow]:
    """The rows of the entry at ``seq`` whose metadata is stored as ``stored_metadata``."""
    if stored_metadata == EMPTY:
        return []
    rows: list[FieldRow] = []
    _flatten(seq, decoded(stored_metadata), (), rows)
    return rows


def driver_rows(
    encode: Callable[[str], Any], entries_metadata: Iterable[tuple[int, str]]
) -> list[tuple[Any, ...]]:
    """The rows of each (seq, stored metadata), texts as ``encode`` gives them to the driver."""
    return [
        (seq, path, kind, number, _encoded(encode, key), _encoded(encode, whole))
        for entry_seq, stored in entries_metadata
        for seq, path, kind, number, key, whole in field_rows(entry_seq, stored)
    ]


def batch_rows(
    encode: Callable[[str], Any], batch: FlatBatch, first_seq: int
) -> list[tuple[Any, ...]]:
    """The rows of a batch stored from ``first_seq`` on (none for entries without metadata)."""
    return driver_rows(
        encode,
        (
            (first_seq + index, entry[11])
            for index, entry in enumerate(batch.entries)
            if entry[11] != EMPTY
        ),
    )


def _encoded(encode: Callable[[str], Any], text: str | None) -> Any:
    return None if text is None else encode(text)


def _flatten(seq: int, value: dict[str, Any], above: tuple[str, ...], into: list[FieldRow]) -> None:
    for key, item in value.items():
        path = (*above, key)
        kind, number, spelled = _kind_of(item)
        key_part, rest = _split(spelled)
        stored_kind = kind if rest is None else kind + LONG
        into.append((seq, path_hash(path), stored_kind, number, key_part, rest))
        if kind == OBJECT:
            _flatten(seq, item, path, into)


def _kind_of(value: Any) -> tuple[int, float | None, str | None]:
    if value is None:
        return NULL, None, None
    if isinstance(value, bool):
        return BOOL, float(value), None
    if is_number(value):
        return NUMBER, float(value), None
    if isinstance(value, str):
        return STRING, None, value
    if isinstance(value, dict):
        return OBJECT, None, canonical(value)
    return LIST, None, canonical(value)


def _split(spelled: str | None) -> tuple[str | None, str | None]:
    if spelled is None:
        return None, None
    return spelled[:TEXT_KEY], (spelled if len(spelled) > TEXT_KEY else None)


async def write_again(
    connection: AsyncConnection, backend: Driver, entries_metadata: list[tuple[int, str]]
) -> None:
    """Replace the rows of each (seq, stored metadata) by those of its metadata now."""
    seqs = [seq for seq, _ in entries_metadata]
    for start in range(0, len(seqs), 10_000):
        chunk = seqs[start : start + 10_000]
        await connection.execute(delete(entry_fields).where(entry_fields.c.entry_seq.in_(chunk)))
    rows = driver_rows(backend.encode, entries_metadata)
    if rows:
        await connection.exec_driver_sql(backend.sql(INSERT_FIELDS), rows)


# --- conditions -------------------------------------------------------------------


_conditions_made = itertools.count()


@dataclass(frozen=True, slots=True)
class FieldQuery:
    """The entries that have a row matching ``where`` (or, ``negate``: that have none).

    ``where`` is SQL on ``entry_fields`` with ``?`` placeholders for ``parameters``,
    each (value, "int" | "float" | "text").
    """

    where: str
    parameters: tuple[tuple[Any, str], ...]
    negate: bool

    def raw(self, encode: Callable[[str], Any], below: int) -> tuple[str, list[Any]]:
        """A ``SELECT entry_seq`` of the matching rows of entries below seq ``below``."""
        values = [encode(value) if kind == "text" else value for value, kind in self.parameters]
        statement = f"SELECT entry_seq FROM entry_fields WHERE {self.where} AND entry_seq < ?"  # noqa: S608
        return statement, [*values, below]

    def condition(self) -> ColumnElement[bool]:
        """The same, as a condition on ``entries`` (for SQLAlchemy Core statements)."""
        # Names of their own: one statement may hold several of these conditions.
        prefix = f"field{next(_conditions_made)}_"
        pieces = self.where.split("?")
        named = "".join(
            piece + (f":{prefix}{index}" if index < len(self.parameters) else "")
            for index, piece in enumerate(pieces)
        )
        types: dict[str, TypeEngine[Any]] = {
            "int": BigInteger(),
            "float": Double(),
            "text": Utf8Text(),
        }
        subquery = (
            text(f"SELECT entry_seq FROM entry_fields WHERE {named}")  # noqa: S608 - ours
            .bindparams(
                *(
                    bindparam(f"{prefix}{index}", value, type_=types[kind])
                    for index, (value, kind) in enumerate(self.parameters)
                )
            )
            .columns(literal_column("entry_seq"))
        )
        seq = entries.c.seq
        return seq.not_in(subquery) if self.negate else seq.in_(subquery)


def field_query(condition: FieldCondition) -> FieldQuery:
    """The query that answers ``condition`` (see the module)."""
    operator, operand = condition.operator, condition.value
    where, parameters, negate = _row_test(operator, operand)
    return FieldQuery(
        f"path_hash = ? AND ({where})",
        ((path_hash(condition.path), "int"), *parameters),
        negate,
    )


Test = tuple[str, list[tuple[Any, str]], bool]


def _row_test(operator: str, operand: Any) -> Test:
    if operator == "$exists":
        return "1 = 1", [], not operand
    if operator == IS_OBJECT:
        return f"kind IN ({OBJECT}, {OBJECT + LONG})", [], False
    if operator in ORDERING:
        return _ordered(operator, operand)
    if operator in MEMBERSHIP:
        where, parameters, members = _one_of(operand)
        return where, parameters, members is (operator == "$nin")
    if operand is None:  # null or missing
        return f"kind <> {NULL}", [], operator == "$eq"
    where, parameters = _equal(operand)
    return where, parameters, operator == "$ne"


def _one_of(items: tuple[Any, ...]) -> Test:
    """Rows equal to an item, and True: they are the members.

    With None among the items (which a missing path equals too): the non-null
    rows equal to none of them, and False.
    """
    tests = [_equal(item) for item in items if item is not None]
    where = " OR ".join(f"({test})" for test, _ in tests) or "1 = 0"
    parameters = [parameter for _, listed in tests for parameter in listed]
    if None in items:
        return f"kind <> {NULL} AND NOT ({where})", parameters, False
    return where, parameters, True


def _equal(value: Any) -> tuple[str, list[tuple[Any, str]]]:
    """Rows holding ``value`` (not None), spelled as :func:`_flatten` stores it."""
    kind, number, spelled = _kind_of(value)
    if number is not None:
        return f"kind = {kind} AND number = ?", [(number, "float")]
    key_part, rest = _split(spelled)
    if rest is None:
        return f"kind = {kind} AND text_key = ?", [(key_part, "text")]
    where = f"kind = {kind + LONG} AND text_key = ? AND text = ?"
    return where, [(key_part, "text"), (rest, "text")]


_SQL_ORDER = {"$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}


def _ordered(operator: str, operand: Any) -> Test:
    order = _SQL_ORDER[operator]
    if is_number(operand):
        return f"kind = {NUMBER} AND number {order} ?", [(float(operand), "float")], False
    # A str's first characters order as the whole does, never against it: the index
    # narrows on them, the whole decides.
    bound = ">=" if operator in ("$gt", "$gte") else "<="
    key_part = operand[:TEXT_KEY]
    where = (
        f"kind IN ({STRING}, {STRING + LONG}) AND text_key {bound} ?"
        f" AND coalesce(text, text_key) {order} ?"
    )
    return where, [(key_part, "text"), (operand, "text")], False
