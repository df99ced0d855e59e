"""Postings a block to a row; a log of removed entries; seqs never given out twice.

A process that ranks from its own copy of the index reads every block's
postings when it starts: one row per block (its term ids, how many seqs each
has, and the seqs) instead of one row per term and block, which made that
read cost a Python step per row. Appends it sees by their seq; removals it
learns from ``changes``, one row per removed entry in commit order.
``index_state.removed_through`` keeps a removed seq from being given to a new
entry, so a seq names one entry for ever.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01
"""

import struct
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
# As of this revision: (terms table, term id column, per-term postings, per-block postings).
_INDEXES = (
    ("tokens", "token_id", "postings", "token_blocks"),
    ("tag_values", "value_id", "tag_postings", "tag_blocks"),
)


def upgrade() -> None:
    """Add the change log and the removal floor; regroup the postings by block."""
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
    bind = op.get_bind()
    for _, term_id, by_term, by_block in _INDEXES:
        _create_blocks_table(by_block)
        _copy_to_blocks(bind, by_term, term_id, by_block)
        op.drop_table(by_term)


def downgrade() -> None:
    """Back to per-term postings, without the log and the floor."""
    bind = op.get_bind()
    for terms, term_id, by_term, by_block in _INDEXES:
        op.create_table(
            by_term,
            sa.Column(term_id, _ID, nullable=False),
            sa.Column("block", sa.BigInteger(), autoincrement=False, nullable=False),
            sa.Column(
                "seqs", sa.LargeBinary(), nullable=False, comment="sorted int64 seqs, little-endian"
            ),
            sa.ForeignKeyConstraint(
                [term_id], [f"{terms}.id"], name=op.f(f"fk_{by_term}_{term_id}_{terms}")
            ),
            sa.PrimaryKeyConstraint(term_id, "block", name=op.f(f"pk_{by_term}")),
            sqlite_with_rowid=False,
        )
        _copy_to_terms(bind, by_block, by_term, term_id)
        op.drop_table(by_block)
    op.drop_table("changes")
    with op.batch_alter_table("index_state", recreate="always") as batch:
        batch.drop_column("removed_through")


def _create_blocks_table(name: str) -> None:
    op.create_table(
        name,
        sa.Column(
            "block", sa.BigInteger(), autoincrement=False, nullable=False, comment="first seq"
        ),
        sa.Column(
            "term_ids", sa.LargeBinary(), nullable=False, comment="ascending int64, little-endian"
        ),
        sa.Column(
            "lengths", sa.LargeBinary(), nullable=False, comment="int64: each term's seq count"
        ),
        sa.Column(
            "seqs", sa.LargeBinary(), nullable=False, comment="int64: each term's seqs, ascending"
        ),
        sa.PrimaryKeyConstraint("block", name=op.f(f"pk_{name}")),
    )


def _blocks_table(name: str) -> sa.TableClause:
    return sa.table(
        name,
        sa.column("block", sa.BigInteger()),
        sa.column("term_ids", sa.LargeBinary()),
        sa.column("lengths", sa.LargeBinary()),
        sa.column("seqs", sa.LargeBinary()),
    )


def _pack(values: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def _copy_to_blocks(bind: sa.Connection, by_term: str, term_id: str, by_block: str) -> None:
    """One row per block: its terms in id order, each term's seqs as they were."""
    # A block at a time, through a temporary index: the rows never all sit in memory.
    op.create_index(f"ix_{by_term}_block_copy", by_term, ["block"])
    blocks = bind.execute(sa.text(f"SELECT DISTINCT block FROM {by_term} ORDER BY block"))  # noqa: S608
    target = _blocks_table(by_block)
    for block in [row[0] for row in blocks]:
        rows = bind.execute(
            sa.text(
                f"SELECT {term_id}, seqs FROM {by_term} WHERE block = :block ORDER BY {term_id}"  # noqa: S608
            ),
            {"block": block},
        ).all()
        bind.execute(
            target.insert(),
            {
                "block": block,
                "term_ids": _pack([int(row[0]) for row in rows]),
                "lengths": _pack([len(row[1]) // 8 for row in rows]),
                "seqs": b"".join(bytes(row[1]) for row in rows),
            },
        )


def _copy_to_terms(bind: sa.Connection, by_block: str, by_term: str, term_id: str) -> None:
    """One row per term and block again."""
    blocks = bind.execute(sa.text(f"SELECT block FROM {by_block} ORDER BY block"))  # noqa: S608
    target = sa.table(
        by_term, sa.column(term_id), sa.column("block"), sa.column("seqs", sa.LargeBinary())
    )
    for (block,) in blocks.all():
        term_ids, lengths, seqs = bind.execute(
            sa.text(f"SELECT term_ids, lengths, seqs FROM {by_block} WHERE block = :block"),  # noqa: S608
            {"block": block},
        ).one()
        ids = struct.unpack(f"<{len(term_ids) // 8}q", term_ids)
        counts = struct.unpack(f"<{len(lengths) // 8}q", lengths)
        data, start, per_term = bytes(seqs), 0, []
        for number, count in zip(ids, counts, strict=True):
            per_term.append(
                {term_id: number, "block": block, "seqs": data[start : start + 8 * count]}
            )
            start += 8 * count
        if per_term:
            bind.execute(target.insert(), per_term)
