"""Token index for retrieval; walk by relevance instead of a stored baseline score.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from loopctl_memory.scoring import baseline_score
from loopctl_memory.sql import index
from loopctl_memory.sql.text import Utf8Text

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Replace the baseline index with a relevance index; add and fill the token index."""
    # Expression (DESC) indexes stay outside batch mode, which cannot copy them.
    op.drop_index("ix_entries_baseline_score_seq", table_name="entries")
    with op.batch_alter_table("entries") as batch:
        batch.drop_column("baseline_score")
    op.create_index(
        "ix_entries_relevance_seq", "entries", [sa.literal_column("relevance DESC"), "seq"]
    )
    op.create_table(
        "index_state",
        sa.Column("id", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column(
            "indexed_through",
            sa.BigInteger(),
            nullable=False,
            comment="every entry with seq <= this is in the postings",
        ),
        sa.CheckConstraint("id = 1", name=op.f("ck_index_state_single_row")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_index_state")),
    )
    for vocabulary, term, postings, term_id, what in (
        ("tokens", "token", "postings", "token_id", "lowercase, no whitespace"),
        ("tag_values", "value", "tag_postings", "value_id", "a whole lowercase tag"),
    ):
        op.create_table(
            vocabulary,
            sa.Column("id", _ID, autoincrement=True, nullable=False),
            sa.Column(term, Utf8Text(), nullable=False, comment=what),
            sa.Column(
                "entries",
                sa.BigInteger(),
                nullable=False,
                comment="entries indexed with it, at most",
            ),
            sa.PrimaryKeyConstraint("id", name=op.f(f"pk_{vocabulary}")),
            sa.UniqueConstraint(term, name=op.f(f"uq_{vocabulary}_{term}")),
        )
        op.create_table(
            postings,
            sa.Column(term_id, _ID, nullable=False),
            sa.Column("block", sa.BigInteger(), autoincrement=False, nullable=False),
            sa.Column(
                "seqs", sa.LargeBinary(), nullable=False, comment="sorted int64 seqs, little-endian"
            ),
            sa.ForeignKeyConstraint(
                [term_id], [f"{vocabulary}.id"], name=op.f(f"fk_{postings}_{term_id}_{vocabulary}")
            ),
            sa.PrimaryKeyConstraint(term_id, "block", name=op.f(f"pk_{postings}")),
            sqlite_with_rowid=False,
        )
    op.execute("INSERT INTO index_state (id, indexed_through) VALUES (1, 0)")
    index.index_tail(op.get_bind())  # index the entries already stored


def downgrade() -> None:
    """Drop the token index; restore and fill the baseline score and its index."""
    for table in ("tag_postings", "tag_values", "postings", "tokens", "index_state"):
        op.drop_table(table)
    op.drop_index("ix_entries_relevance_seq", table_name="entries")
    with op.batch_alter_table("entries") as batch:
        batch.add_column(
            sa.Column("baseline_score", sa.Double(), nullable=False, server_default="0")
        )
    connection = op.get_bind()
    relevances = list(
        connection.execute(sa.text("SELECT DISTINCT relevance FROM entries")).scalars()
    )
    if relevances:
        connection.execute(
            sa.text("UPDATE entries SET baseline_score = :score WHERE relevance = :relevance"),
            [{"score": baseline_score(r), "relevance": r} for r in relevances],
        )
    with op.batch_alter_table("entries") as batch:
        batch.alter_column("baseline_score", server_default=None)
    op.create_index(
        "ix_entries_baseline_score_seq",
        "entries",
        [sa.literal_column("baseline_score DESC"), "seq"],
    )
