"""Entries and tags.

Revision ID: 0001
Revises:
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text  # TEXT on SQLite, BYTEA on PostgreSQL

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the entries table and its tags child table."""
    op.create_table(
        "entries",
        sa.Column("seq", _SEQ, autoincrement=True, nullable=False, comment="insertion order"),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column("category", sa.Text(), nullable=False),
        sa.Column("memory", Utf8Text(), nullable=False),
        sa.Column(
            "memory_lower", Utf8Text(), nullable=False, comment="Python str.lower() of memory"
        ),
        sa.Column("relevance", sa.Double(), nullable=False),
        sa.Column(
            "baseline_score",
            sa.Double(),
            nullable=False,
            comment="binary32 reference score when nothing in the query matches",
        ),
        sa.Column(
            "created_at_us",
            sa.BigInteger(),
            nullable=False,
            comment="microseconds since epoch, UTC",
        ),
        sa.Column("access_count", sa.BigInteger(), nullable=False),
        sa.Column("validated", sa.Boolean(), nullable=False),
        sa.CheckConstraint(
            "category IN ('trajectory', 'insight', 'error_pattern', 'strategy', 'fact', 'working')",
            name=op.f("ck_entries_category"),
        ),
        sa.CheckConstraint("relevance >= 0 AND relevance <= 1", name=op.f("ck_entries_relevance")),
        sa.PrimaryKeyConstraint("seq", name=op.f("pk_entries")),
        sa.UniqueConstraint("id", name=op.f("uq_entries_id")),
    )
    op.create_index(
        "ix_entries_baseline_score_seq",
        "entries",
        [sa.literal_column("baseline_score DESC"), "seq"],
    )
    op.create_table(
        "tags",
        sa.Column("entry_seq", _SEQ, nullable=False),
        sa.Column("position", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("tag", Utf8Text(), nullable=False),
        sa.Column("tag_lower", Utf8Text(), nullable=False, comment="Python str.lower() of tag"),
        sa.ForeignKeyConstraint(
            ["entry_seq"],
            ["entries.seq"],
            name=op.f("fk_tags_entry_seq_entries"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entry_seq", "position", name=op.f("pk_tags")),
        sqlite_with_rowid=False,
    )


def downgrade() -> None:
    """Drop both tables."""
    op.drop_table("tags")
    op.drop_index("ix_entries_baseline_score_seq", table_name="entries")
    op.drop_table("entries")
