"""The schema as SQLAlchemy Core tables; alembic migrations must match it exactly."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    Uuid,
)
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.compiler import SQLCompiler
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import Boolean as BooleanType

from loopctl_memory.entry import MemoryCategory

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

_CATEGORIES = ", ".join(f"'{category.value}'" for category in MemoryCategory)

entries = Table(
    "entries",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True, comment="insertion order"),
    Column("id", Uuid(), nullable=False, unique=True),
    Column("category", Text(), nullable=False),
    Column("memory", Text(), nullable=False),
    Column("memory_lower", Text(), nullable=False, comment="Python str.lower() of memory"),
    Column("relevance", Double(), nullable=False),
    Column(
        "baseline_score",
        Double(),
        nullable=False,
        comment="binary32 reference score when nothing in the query matches",
    ),
    Column("created_at_us", BigInteger(), nullable=False, comment="microseconds since epoch, UTC"),
    Column("access_count", BigInteger(), nullable=False),
    Column("validated", Boolean(), nullable=False),
    CheckConstraint(f"category IN ({_CATEGORIES})", name="category"),
    CheckConstraint("relevance >= 0 AND relevance <= 1", name="relevance"),
)
Index("ix_entries_baseline_score_seq", entries.c.baseline_score.desc(), entries.c.seq)

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
    Column("tag", Text(), nullable=False),
    Column("tag_lower", Text(), nullable=False, comment="Python str.lower() of tag"),
    sqlite_with_rowid=False,  # the primary key is the table: one B-tree, not two
)


class contains(FunctionElement[bool]):  # noqa: N801  # reads as SQL: contains(haystack, needle)
    """``needle`` occurs in ``haystack``, case-sensitively, as a plain substring.

    Unlike LIKE it has no wildcards and no escaping to get wrong.
    """

    type = BooleanType()
    name = "contains"
    inherit_cache = True


@compiles(contains, "sqlite")
def _contains_sqlite(element: contains, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(instr({compiler.process(element.clauses, **kw)}) > 0)"


@compiles(contains, "postgresql")
def _contains_postgresql(element: contains, compiler: SQLCompiler, **kw: Any) -> str:
    return f"(strpos({compiler.process(element.clauses, **kw)}) > 0)"
