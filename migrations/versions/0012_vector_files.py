"""What a store's vector index files check against: the store's identity and a vector epoch.

``index_state.store_id`` names the store (a random UUID, written once), so
that index files kept outside the database (beside a SQLite file, or in the
user's cache directory for PostgreSQL) are never taken for another store's.
``index_state.vector_epoch`` rises whenever vectors change in a way the
change log does not name (the log emptied by a reindex): an index file built
before it is stale. An upgraded store gets a new identity and epoch 0.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04
"""

import uuid
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the store's identity (a new UUID) and the vector epoch (0)."""
    # Rebuilt, not altered, so that SQLite's stored DDL is that of a created database.
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.add_column(
            sa.Column(
                "store_id",
                sa.String(36),
                nullable=False,
                server_default="",
                comment="a random UUID naming the store to the files kept outside it",
            )
        )
        batch.add_column(
            sa.Column(
                "vector_epoch",
                sa.BigInteger(),
                nullable=False,
                server_default="0",
                comment="raised when vectors change unlogged: vector index files go stale",
            )
        )
    op.execute(
        sa.text("UPDATE index_state SET store_id = :made").bindparams(made=str(uuid.uuid4()))
    )


def downgrade() -> None:
    """Drop the identity and the epoch."""
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.drop_column("vector_epoch")
        batch.drop_column("store_id")
