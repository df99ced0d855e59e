"""Each entry's history: what happened to it, when, and what did it.

``history`` holds one row an event (see ``loopctl_memory.history``), found by
the entry's seq (``ix_history_entry_seq``) and, for an entry removed, by its
id on the row that removed it (``ix_history_entry_id``, partial). Every
existing entry gets its first event, ``stored``, dated at its ``created_at``
(the time it was stored is not known) with the cause ``upgrade``.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-07
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SEQ = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the history, each existing entry's first event in it."""
    op.create_table(
        "history",
        sa.Column("id", _SEQ, autoincrement=True, nullable=False, comment="commit order"),
        sa.Column(
            "entry_seq",
            sa.BigInteger(),
            nullable=False,
            comment="the entry's seq: where its history lives, while it lives and after",
        ),
        sa.Column(
            "entry_id", sa.Uuid(), nullable=True, comment="set on the event that removed the entry"
        ),
        sa.Column("scope_id", sa.BigInteger(), nullable=False, comment="scopes.id"),
        sa.Column(
            "at_us", sa.BigInteger(), nullable=False, comment="microseconds since epoch, UTC"
        ),
        sa.Column("event", sa.Text(), nullable=False, comment="see loopctl_memory.history.EVENTS"),
        sa.Column("cause", sa.Text(), nullable=True, comment="the operation that did it"),
        sa.Column("relevance", sa.Double(), nullable=True, comment="the entry's, when removed"),
        sa.Column(
            "count", sa.BigInteger(), nullable=True, comment="accessed: the reads that UTC day"
        ),
        sa.Column(
            "detail", sa.Text(), nullable=True, comment="a JSON object: what the event changed"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_history")),
    )
    op.create_index("ix_history_entry_seq", "history", ["entry_seq"])
    removal = sa.text("entry_id IS NOT NULL")
    op.create_index(
        "ix_history_entry_id",
        "history",
        ["entry_id"],
        sqlite_where=removal,
        postgresql_where=removal,
    )
    op.execute(
        "INSERT INTO history (entry_seq, scope_id, at_us, event, cause)"
        " SELECT seq, scope_id, created_at_us, 'stored', 'upgrade' FROM entries ORDER BY seq"
    )


def downgrade() -> None:
    """Drop the history."""
    op.drop_table("history")
