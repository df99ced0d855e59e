"""The schema as SQLAlchemy Core tables; alembic migrations must match it exactly."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sqlalchemy import (
    ARRAY,
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    Uuid,
    func,
    literal,
    select,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import ColumnElement, Select
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import Boolean as BooleanType

from loopctl_memory.entry import MemoryCategory
from loopctl_memory.sql.text import Utf8Text

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite: INTEGER PRIMARY KEY is the rowid, assigned max+1 on insert: insertion order for free.
_Seq = BigInteger().with_variant(Integer(), "sqlite")

# Comparisons, not an IN list: SQLite checks an IN list of more than two constants
# against a temporary table it builds again for every row (migration 0003).
_CATEGORY_CHECK = " OR ".join(f"category = '{category.value}'" for category in MemoryCategory)

entries = Table(
    "entries",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True, comment="insertion order"),
    Column("id", Uuid(), nullable=False, unique=True),
    Column("category", Text(), nullable=False),
    Column("memory", Utf8Text(), nullable=False),
    Column("memory_lower", Utf8Text(), nullable=False, comment="Python str.lower() of memory"),
    Column("relevance", Double(), nullable=False),
    Column("created_at_us", BigInteger(), nullable=False, comment="microseconds since epoch, UTC"),
    Column("access_count", BigInteger(), nullable=False),
    Column("validated", Boolean(), nullable=False),
    CheckConstraint(_CATEGORY_CHECK, name="category"),
    CheckConstraint("relevance >= 0 AND relevance <= 1", name="relevance"),
)
# Retrieval walks entries best relevance first, ties in insertion order.
Index("ix_entries_relevance_seq", entries.c.relevance.desc(), entries.c.seq)

tags = Table(
    "tags",
    metadata,
    Column(
        "entry_seq",
        _Seq,
        ForeignKey(entries.c.seq, ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", Integer(), primary_key=True, autoincrement=False),
    Column("tag", Utf8Text(), nullable=False),
    Column("tag_lower", Utf8Text(), nullable=False, comment="Python str.lower() of tag"),
    sqlite_with_rowid=False,  # the primary key is the table: one B-tree, not two
)


def int_list(values: Iterable[int], dialect: Dialect) -> Select[Any]:
    """A subquery of integers passed as one parameter, for ``column.in_(...)``.

    One parameter instead of one per value: no limit on how many, and one
    statement shape for the cache. SQLite reads a JSON array, PostgreSQL an array.
    """
    ordered = sorted(values)
    if dialect.name == "postgresql":
        return select(func.unnest(literal(ordered, ARRAY(BigInteger()))))
    return select(func.json_each(json.dumps(ordered)).table_valued("value"))


def contains(haystack: ColumnElement[str], needle: str) -> _Contains:
    """``needle`` occurs in the column ``haystack``, case-sensitively, as a plain substring.

    Unlike LIKE it has no wildcards and no escaping to get wrong. The needle is
    bound with the column's type, so it is stored the way the column is.
    """
    return _Contains(haystack, literal(needle, haystack.type))


class _Contains(FunctionElement[bool]):
    """See :func:`contains`."""

    type = BooleanType()
    name = "contains"
    inherit_cache = True


@compiles(_Contains, "sqlite")
def _contains_sqlite(element: _Contains, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(instr({compiler.process(element.clauses, **kw)}) > 0)"


@compiles(_Contains, "postgresql")
def _contains_postgresql(element: _Contains, compiler: SQLCompiler, **kw: Any) -> str:
    haystack, needle = (compiler.process(clause, **kw) for clause in element.clauses)
    return f"(position({needle} IN {haystack}) > 0)"  # on bytes: see Utf8Text


# --- the token index (see loopctl_memory.sql.index) ---------------------------

index_state = Table(
    "index_state",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=False),
    Column(
        "indexed_through",
        BigInteger(),
        nullable=False,
        comment="every entry with seq <= this is in the postings",
    ),
    CheckConstraint("id = 1", name="single_row"),
)


def _vocabulary(name: str, term: str, what: str, postings_name: str) -> tuple[Table, Table]:
    """A table of distinct terms and the table of their postings, one row per (term, block)."""
    terms = Table(
        name,
        metadata,
        Column("id", _Seq, primary_key=True, autoincrement=True),
        Column(term, Utf8Text(), nullable=False, unique=True, comment=what),
        Column("entries", BigInteger(), nullable=False, comment="entries indexed with it, at most"),
    )
    postings = Table(
        postings_name,
        metadata,
        Column(f"{term}_id", _Seq, ForeignKey(terms.c.id), primary_key=True),
        Column("block", BigInteger(), primary_key=True, autoincrement=False),
        Column("seqs", LargeBinary(), nullable=False, comment="sorted int64 seqs, little-endian"),
        sqlite_with_rowid=False,
    )
    return terms, postings


tokens, postings = _vocabulary("tokens", "token", "lowercase, no whitespace", "postings")
tag_values, tag_postings = _vocabulary(
    "tag_values", "value", "a whole lowercase tag", "tag_postings"
)
