"""A log of removed entries, and seqs never given out twice, for processes that keep a copy.

A process that ranks from its own copy of the ranking columns sees appends by
their seq; removals it learns from ``changes``, one row per removed entry in
commit order. ``index_state.removed_through`` keeps a removed seq from being
given to a new entry, so a seq names one entry for ever. Postings get an index
on ``block`` so that the blocks indexed since a process last looked are read
alone.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add the change log, the removal floor and the block indexes."""
    # Rebuilt, not altered, so that SQLite's stored DDL is that of a created database.
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.add_column(
            sa.Column(
                "removed_through",
                sa.BigInteger(),
                nullable=False,
                server_default="0",
                comment="the highest seq ever removed: seqs are never given out twice",
            )
        )
    op.create_table(
        "changes",
        sa.Column("id", _ID, autoincrement=True, nullable=False, comment="commit order"),
        sa.Column(
            "seq", sa.BigInteger(), nullable=False, comment="an entry removed (or rewritten)"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_changes")),
    )
    op.create_index("ix_postings_block", "postings", ["block"])
    op.create_index("ix_tag_postings_block", "tag_postings", ["block"])


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("ix_tag_postings_block", table_name="tag_postings")
    op.drop_index("ix_postings_block", table_name="postings")
    op.drop_table("changes")
    with op.batch_alter_table("index_state") as batch:
        batch.drop_column("removed_through")
