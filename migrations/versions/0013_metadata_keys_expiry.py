"""A memory's own fields, its key and its expiry.

``entries.metadata`` holds the caller's JSON object as compact JSON text
(``'{}'``: none, what every existing entry gets); ``entries.key`` a caller's
name for the entry, unique within its scope (NULL: none, every existing
entry's); ``entries.expires_at_us`` when it expires, microseconds since the
epoch, UTC (NULL: never, every existing entry's). ``entry_fields`` holds each
path of an entry's metadata and the value there, for metadata filters (none
for the existing entries, whose metadata is empty).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06
"""

from collections.abc import Sequence
from typing import Literal

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the metadata ('{}'), the key and the expiry (none) of every entry."""
    # Rebuilt, not altered, so that SQLite's stored DDL is that of a created database;
    # the expression (DESC) index stays outside batch mode, which cannot copy it.
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries", recreate=_rebuilt_on_sqlite()) as batch:
        batch.add_column(
            sa.Column(
                "metadata", sa.Text(), server_default="{}", nullable=False, comment="a JSON object"
            )
        )
        batch.add_column(
            sa.Column(
                "key", Utf8Text(), nullable=True, comment="the caller's key, unique in its scope"
            )
        )
        batch.add_column(
            sa.Column("expires_at_us", sa.BigInteger(), nullable=True, comment="microseconds, UTC")
        )
    _relevance_index()
    # Partial: an entry without a key (or an expiry) costs a write no index entry.
    keyed = sa.text('"key" IS NOT NULL')  # quoted, as a created database has it
    op.create_index(
        "uq_entries_scope_id_key",
        "entries",
        ["scope_id", "key"],
        unique=True,
        sqlite_where=keyed,
        postgresql_where=keyed,
    )
    expiring = sa.text("expires_at_us IS NOT NULL")
    op.create_index(
        "ix_entries_expires_at_us",
        "entries",
        ["expires_at_us"],
        unique=False,
        sqlite_where=expiring,
        postgresql_where=expiring,
    )

    op.create_table(
        "entry_fields",
        sa.Column("entry_seq", _SEQ, nullable=False),
        sa.Column("path_hash", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column(
            "kind",
            sa.SmallInteger(),
            nullable=False,
            comment="0 null 1 bool 2 number 3 str 4 list 5 object, +8 if long",
        ),
        sa.Column("number", sa.Double(), nullable=True, comment="a number, or a bool as 0 or 1"),
        sa.Column("text_key", Utf8Text(), nullable=True, comment="a str's first 100 characters"),
        sa.Column("text", Utf8Text(), nullable=True, comment="the whole str, when longer"),
        sa.ForeignKeyConstraint(
            ["entry_seq"],
            ["entries.seq"],
            name=op.f("fk_entry_fields_entry_seq_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entry_seq", "path_hash", name=op.f("pk_entry_fields")),
        sqlite_with_rowid=False,
    )
    for column in ("number", "text_key"):
        op.create_index(
            f"ix_entry_fields_path_hash_kind_{column}",
            "entry_fields",
            ["path_hash", "kind", column, "entry_seq"],
        )


def downgrade() -> None:
    """Drop the metadata, the keys and the expiry."""
    op.drop_table("entry_fields")
    op.drop_index("ix_entries_expires_at_us", table_name="entries")
    op.drop_index("uq_entries_scope_id_key", table_name="entries")
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries", recreate=_rebuilt_on_sqlite()) as batch:
        batch.drop_column("expires_at_us")
        batch.drop_column("key")
        batch.drop_column("metadata")
    _relevance_index()


_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def _rebuilt_on_sqlite() -> Literal["always", "auto"]:
    # PostgreSQL alters in place: a rebuilt entries table would drop the key tags refer to.
    return "always" if op.get_bind().dialect.name == "sqlite" else "auto"


def _relevance_index() -> None:
    op.create_index(
        "ix_entries_relevance_seq", "entries", [sa.literal_column("relevance DESC"), "seq"]
    )
