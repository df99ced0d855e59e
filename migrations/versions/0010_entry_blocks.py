"""The ranking columns of the indexed entries in a few rows: ``entry_blocks``.

A row for a stretch of consecutive seqs, numbered by its first (``block``):
each seq's relevance as float64 (little-endian; NaN where no entry lives) and
its ``scope_id`` as int64, as they were when the stretch was indexed; what
changed since is in the change log. A new process reads these rows instead of
a row an entry. An upgraded database gets rows of 10,000 seqs for every seq
through ``indexed_through``, from the entries as they are now.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-04
"""

import math
import struct
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SEQS_PER_ROW = 10_000


def upgrade() -> None:
    """Create ``entry_blocks`` and fill it for the entries already indexed."""
    op.create_table(
        "entry_blocks",
        sa.Column(
            "block", sa.BigInteger(), autoincrement=False, nullable=False, comment="first seq"
        ),
        sa.Column(
            "relevance",
            sa.LargeBinary(),
            nullable=False,
            comment="float64, little-endian: each seq's relevance when indexed, NaN for no entry",
        ),
        sa.Column(
            "scope_ids", sa.LargeBinary(), nullable=False, comment="int64: each seq's scope_id"
        ),
        sa.PrimaryKeyConstraint("block", name=op.f("pk_entry_blocks")),
    )
    bind = op.get_bind()
    through = int(
        bind.execute(sa.text("SELECT indexed_through FROM index_state")).scalar_one_or_none() or 0
    )
    statement = sa.text(
        "INSERT INTO entry_blocks (block, relevance, scope_ids)"
        " VALUES (:block, :relevance, :scopes)"
    ).bindparams(
        sa.bindparam("relevance", type_=sa.LargeBinary()),
        sa.bindparam("scopes", type_=sa.LargeBinary()),
    )
    for block in range(1, through + 1, _SEQS_PER_ROW):
        last = min(block + _SEQS_PER_ROW - 1, through)
        relevance = [math.nan] * (last - block + 1)
        scopes = [0] * (last - block + 1)
        for seq, value, scope_id in bind.execute(
            sa.text(
                "SELECT seq, relevance, scope_id FROM entries WHERE seq >= :low AND seq <= :high"
            ),
            {"low": block, "high": last},
        ):
            relevance[int(seq) - block] = float(value)
            scopes[int(seq) - block] = int(scope_id)
        bind.execute(
            statement,
            {
                "block": block,
                "relevance": struct.pack(f"<{len(relevance)}d", *relevance),
                "scopes": struct.pack(f"<{len(scopes)}q", *scopes),
            },
        )


def downgrade() -> None:
    """Drop ``entry_blocks``."""
    op.drop_table("entry_blocks")
