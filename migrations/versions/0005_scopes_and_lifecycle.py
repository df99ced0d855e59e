"""Scopes, access and decay stamps, and a generation that makes every copy read again.

An entry belongs to a scope (``entries.scope_id``, a name in ``scopes``; the
root scope ``""`` is id 0, which every existing entry joins). It carries when
it was last returned by a retrieval and last decayed (microseconds since the
epoch, UTC, or NULL). ``index_state.generation`` is raised by a change to many
entries at once (a decay pass): a process that keeps a copy of the ranking
columns then reads them again instead of the change log.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-02
"""

from collections.abc import Sequence
from typing import Literal

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add the scopes, the stamps and the generation; every entry is in the root scope."""
    op.create_table(
        "scopes",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("name", Utf8Text(), nullable=False, comment="'' is the root scope, id 0"),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_scopes")),
        sa.UniqueConstraint("name", name=op.f("uq_scopes_name")),
    )
    op.execute("INSERT INTO scopes (id, name) VALUES (0, '')")
    # Rebuilt, not altered, so that SQLite's stored DDL is that of a created database;
    # the expression (DESC) index stays outside batch mode, which cannot copy it.
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries", recreate=_rebuilt_on_sqlite()) as batch:
        batch.add_column(
            sa.Column(
                "last_accessed_us", sa.BigInteger(), nullable=True, comment="microseconds, UTC"
            )
        )
        batch.add_column(
            sa.Column(
                "last_decayed_us", sa.BigInteger(), nullable=True, comment="microseconds, UTC"
            )
        )
        batch.add_column(
            sa.Column(
                "scope_id",
                sa.BigInteger(),
                server_default="0",
                nullable=False,
                comment="scopes.id",
            )
        )
    _relevance_index()
    op.create_index("ix_entries_scope_id_seq", "entries", ["scope_id", "seq"], unique=False)
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.add_column(
            sa.Column(
                "generation",
                sa.BigInteger(),
                server_default="0",
                nullable=False,
                comment="raised by a change to many entries at once: every copy is read again",
            )
        )


def downgrade() -> None:
    """Drop the scopes (every entry stays, unscoped), the stamps and the generation."""
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.drop_column("generation")
    op.drop_index("ix_entries_scope_id_seq", table_name="entries")
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries", recreate=_rebuilt_on_sqlite()) as batch:
        batch.drop_column("scope_id")
        batch.drop_column("last_decayed_us")
        batch.drop_column("last_accessed_us")
    _relevance_index()
    op.drop_table("scopes")


def _rebuilt_on_sqlite() -> Literal["always", "auto"]:
    # PostgreSQL alters in place: a rebuilt entries table would drop the key tags refer to.
    return "always" if op.get_bind().dialect.name == "sqlite" else "auto"


def _relevance_index() -> None:
    op.create_index(
        "ix_entries_relevance_seq", "entries", [sa.literal_column("relevance DESC"), "seq"]
    )
