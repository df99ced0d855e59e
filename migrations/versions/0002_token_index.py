"""Token index for retrieval; walk by relevance instead of a stored baseline score.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30
"""

import re
import struct
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

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
    _index_entries(op.get_bind())


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
            [{"score": _baseline_score(r), "relevance": r} for r in relevances],
        )
    with op.batch_alter_table("entries") as batch:
        batch.alter_column("baseline_score", server_default=None)
    op.create_index(
        "ix_entries_baseline_score_seq",
        "entries",
        [sa.literal_column("baseline_score DESC"), "seq"],
    )


# Frozen as of this revision: a copy of what the library did then (sql.index.index_tail
# and what it calls, scoring.score), which must give the same rows whatever it does later.

_TOKENS = sa.table("tokens", sa.column("id"), sa.column("token", Utf8Text()), sa.column("entries"))
_POSTINGS = sa.table(
    "postings", sa.column("token_id"), sa.column("block"), sa.column("seqs", sa.LargeBinary())
)
_TAG_VALUES = sa.table(
    "tag_values", sa.column("id"), sa.column("value", Utf8Text()), sa.column("entries")
)
_TAG_POSTINGS = sa.table(
    "tag_postings", sa.column("value_id"), sa.column("block"), sa.column("seqs", sa.LargeBinary())
)

# Rust's str::split_whitespace splits on the Unicode White_Space property.
# Python's str.split() also splits on U+001C..U+001F, which are not White_Space.
_WHITE_SPACE = re.compile(
    "[\u0009-\u000d\u0020\u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+"
)


def _tokens_of(text: str) -> set[str]:
    """The distinct tokens of a lowercase memory, split as Rust's split_whitespace does."""
    if "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text:
        return {word for word in _WHITE_SPACE.split(text) if word}
    return set(text.split())  # the same set, less U+001C..U+001F, which are absent


def _index_entries(connection: sa.Connection) -> None:
    """Index every stored entry as block 1: its tokens, and its whole lowercase tags."""
    by_token: dict[str, list[int]] = {}
    last = 0
    memories = sa.text("SELECT seq, memory_lower FROM entries WHERE seq > 0 ORDER BY seq")
    for seq, memory_lower in connection.execute(memories.columns(memory_lower=Utf8Text())):
        for token in _tokens_of(memory_lower):
            by_token.setdefault(token, []).append(seq)
        last = seq
    if not last:
        return
    by_tag: dict[str, list[int]] = {}
    tags = sa.text("SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > 0 ORDER BY entry_seq")
    for seq, tag_lower in connection.execute(tags.columns(tag_lower=Utf8Text())):
        seqs = by_tag.setdefault(tag_lower, [])
        if not seqs or seqs[-1] != seq:  # an entry carrying a tag twice is named once
            seqs.append(seq)
    _add_postings(connection, _TOKENS, _POSTINGS, by_token)
    _add_postings(connection, _TAG_VALUES, _TAG_POSTINGS, by_tag)
    connection.execute(sa.text("UPDATE index_state SET indexed_through = :last"), {"last": last})
    if connection.dialect.name == "postgresql":
        connection.execute(
            sa.text("ANALYZE entries, tags, tokens, postings, tag_values, tag_postings")
        )


def _add_postings(
    connection: sa.Connection,
    terms: sa.TableClause,
    postings: sa.TableClause,
    seqs_by_term: dict[str, list[int]],
) -> None:
    """Store the terms with their counts, in term order, then their seqs as block 1."""
    if not seqs_by_term:
        return
    term, term_id = terms.c[1], postings.c[0]
    # In stored order: str on SQLite, UTF-8 on PostgreSQL, which sort alike.
    connection.execute(
        sa.insert(terms),
        [{term.key: value, "entries": len(seqs_by_term[value])} for value in sorted(seqs_by_term)],
    )
    ids = dict(connection.execute(sa.select(term, terms.c.id)).all())
    rows = sorted((ids[value], seqs) for value, seqs in seqs_by_term.items())
    connection.execute(
        sa.insert(postings),
        [
            {term_id.key: id_, "block": 1, "seqs": struct.pack(f"<{len(seqs)}q", *seqs)}
            for id_, seqs in rows
        ],
    )


def _f32(value: float) -> float:
    """``value`` rounded to the nearest binary32."""
    rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return rounded


def _baseline_score(relevance: float) -> float:
    """The binary32 reference score of an entry that nothing in the query matches."""
    return _f32(_f32(_f32(_f32(relevance) * _f32(0.5)) + 0.0) + _f32(0.1))
