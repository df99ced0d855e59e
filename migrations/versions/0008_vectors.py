"""Vectors: the embedders a store's vectors came from, and each entry's vector by one.

``embedders`` records each embedder by name and dims (and the spec the command
line makes it from); ``index_state.embedder_id`` names the one whose vectors
rank. ``vectors`` holds an entry's vector by an embedder (binary32, unit
length), deleted with the entry. A store upgraded to this revision has no
vector yet: its entries are made pending once it is opened with an embedder.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the embedders and vectors tables; name no embedder yet."""
    op.create_table(
        "embedders",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("name", Utf8Text(), nullable=False, comment="the model's id"),
        sa.Column("dims", sa.Integer(), nullable=False, comment="numbers a vector"),
        sa.Column(
            "spec", Utf8Text(), nullable=True, comment="how the CLI makes it again, if it can"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_embedders")),
        sa.UniqueConstraint("name", name=op.f("uq_embedders_name")),
    )
    op.create_table(
        "vectors",
        sa.Column("entry_seq", _ID, nullable=False),
        sa.Column("embedder_id", sa.BigInteger(), nullable=False),
        sa.Column(
            "vector",
            sa.LargeBinary(),
            nullable=False,
            comment="binary32 little-endian, unit length",
        ),
        sa.ForeignKeyConstraint(
            ["entry_seq"],
            ["entries.seq"],
            name=op.f("fk_vectors_entry_seq_entries"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["embedder_id"],
            ["embedders.id"],
            name=op.f("fk_vectors_embedder_id_embedders"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("entry_seq", "embedder_id", name=op.f("pk_vectors")),
        sqlite_with_rowid=False,
    )
    # Rebuilt, not altered, so that SQLite's stored DDL is that of a created database.
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.add_column(
            sa.Column(
                "embedder_id",
                sa.BigInteger(),
                nullable=True,
                comment="the embedder whose vectors rank",
            )
        )


def downgrade() -> None:
    """Drop the vectors and the embedders (the entries stay)."""
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.drop_column("embedder_id")
    op.drop_table("vectors")
    op.drop_table("embedders")
