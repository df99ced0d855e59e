"""The trigram index of the token vocabulary: which tokens hold each trigram.

``token_grams`` has a row for each trigram of the tokens one indexing created:
the trigram (three 21-bit code points in one integer; a token's trigrams are
those of the token followed by two end marks, 0x110000, so each of its
positions starts one), the first token id, how many tokens the row names, and
their ids ascending as the gaps after the first: one byte giving a width (1,
2 or 4 bytes, the narrowest that holds every gap), then the gaps as
little-endian unsigned integers of that width. An upgraded database gets the
rows of every token it holds, in id order (this revision's own copy of the
encoding).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03
"""

import itertools
import struct
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_BITS = 21
_END = 0x110000
_WIDTHS = ((1 << 8, (1, "B")), (1 << 16, (2, "H")), (1 << 32, (4, "I")))
_TOKENS_PER_ROW = 50_000  # tokens whose trigrams one pass writes, a row per trigram
_TOKENS = sa.table("tokens", sa.column("id", sa.BigInteger()), sa.column("token", Utf8Text()))


def upgrade() -> None:
    """Create ``token_grams`` and fill it for the tokens already stored."""
    op.create_table(
        "token_grams",
        sa.Column(
            "gram", sa.BigInteger(), autoincrement=False, nullable=False, comment="3 code points"
        ),
        sa.Column(
            "first_id",
            sa.BigInteger(),
            autoincrement=False,
            nullable=False,
            comment="its first token",
        ),
        sa.Column("count", sa.Integer(), nullable=False, comment="how many tokens the row names"),
        sa.Column(
            "ids",
            sa.LargeBinary(),
            nullable=False,
            comment="its width (1, 2, 4), then the gaps after first_id",
        ),
        sa.PrimaryKeyConstraint("gram", "first_id", name=op.f("pk_token_grams")),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    after = 0
    while True:
        rows = bind.execute(
            sa.select(_TOKENS.c.id, _TOKENS.c.token)
            .where(_TOKENS.c.id > after)
            .order_by(_TOKENS.c.id)
            .limit(_TOKENS_PER_ROW)
        ).all()
        if not rows:
            return
        _write(bind, [(int(number), token) for number, token in rows])
        after = int(rows[-1][0])


def downgrade() -> None:
    """Drop ``token_grams``."""
    op.drop_table("token_grams")


def _write(bind: sa.Connection, tokens: list[tuple[int, str]]) -> None:
    holders: dict[int, list[int]] = {}
    for number, token in tokens:
        points = [ord(character) for character in token] + [_END, _END]
        grams = {
            (points[n] << 2 * _BITS) | (points[n + 1] << _BITS) | points[n + 2]
            for n in range(len(token))
        }
        for gram in grams:
            holders.setdefault(gram, []).append(number)  # ids ascending: tokens come in order
    statement = sa.text(
        "INSERT INTO token_grams (gram, first_id, count, ids) VALUES (:gram, :first, :count, :ids)"
    ).bindparams(sa.bindparam("ids", type_=sa.LargeBinary()))
    bind.execute(
        statement,
        [
            {"gram": gram, "first": ids[0], "count": len(ids), "ids": _gaps(ids)}
            for gram, ids in sorted(holders.items())
        ],
    )


def _gaps(ids: list[int]) -> bytes:
    if len(ids) == 1:
        return b""
    gaps = [later - earlier for earlier, later in itertools.pairwise(ids)]
    width, code = next(pair for limit, pair in _WIDTHS if max(gaps) < limit)
    return bytes((width,)) + struct.pack(f"<{len(gaps)}{code}", *gaps)
