"""Which indexed entries hold each piece of one or two code points: ``piece_blocks``.

A row for each piece (one code point, or two adjacent ones of a whitespace
token, as an integer: the first code point shifted left by 21 bits, or-ed
with the second or with 0x110000 for none) and each stretch of seqs from
``block``. Its ``seqs``: a byte 0 then a bitmap of the stretch (bit ``n`` of
byte ``n // 8``, least significant first), or a byte 2 or 4 then the offsets
from ``block`` of the entries holding the piece, little-endian unsigned
integers of that width, ascending. An upgraded database gets rows of 10,000
seqs for every entry through ``indexed_through``, from their lowercase
memories as they are now (this revision's own copy of the encoding).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04
"""

import itertools
from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0011"
down_revision: str | Sequence[str] | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_SEQS_PER_ROW = 10_000
_ENTRIES = sa.table(
    "entries", sa.column("seq", sa.BigInteger()), sa.column("memory_lower", Utf8Text())
)
_BITS = 21
_ALONE = 0x110000
# Unicode White_Space, which tokens are split on (Rust's str::split_whitespace).
_WHITE_SPACE = frozenset(
    "\u0009\u000a\u000b\u000c\u000d\u0020\u0085\u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)


def upgrade() -> None:
    """Create ``piece_blocks`` and fill it for the entries already indexed."""
    op.create_table(
        "piece_blocks",
        sa.Column(
            "piece",
            sa.BigInteger(),
            autoincrement=False,
            nullable=False,
            comment="1 or 2 code points",
        ),
        sa.Column(
            "block", sa.BigInteger(), autoincrement=False, nullable=False, comment="first seq"
        ),
        sa.Column(
            "seqs",
            sa.LargeBinary(),
            nullable=False,
            comment="0 then a bitmap from block on, or a width (2, 4) then offsets from block",
        ),
        sa.PrimaryKeyConstraint("piece", "block", name=op.f("pk_piece_blocks")),
        sqlite_with_rowid=False,
    )
    bind = op.get_bind()
    through = int(
        bind.execute(sa.text("SELECT indexed_through FROM index_state")).scalar_one_or_none() or 0
    )
    statement = sa.text(
        "INSERT INTO piece_blocks (piece, block, seqs) VALUES (:piece, :block, :seqs)"
    ).bindparams(sa.bindparam("seqs", type_=sa.LargeBinary()))
    for block in range(1, through + 1, _SEQS_PER_ROW):
        holders: dict[int, list[int]] = {}
        rows = bind.execute(
            sa.select(_ENTRIES.c.seq, _ENTRIES.c.memory_lower)
            .where(
                _ENTRIES.c.seq >= block,
                _ENTRIES.c.seq <= min(block + _SEQS_PER_ROW - 1, through),
            )
            .order_by(_ENTRIES.c.seq)
        )
        for seq, memory_lower in rows:
            offset = int(seq) - block
            for piece in _pieces(memory_lower):
                holders.setdefault(piece, []).append(offset)
        if not holders:
            continue
        span = max(offsets[-1] for offsets in holders.values()) + 1
        bind.execute(
            statement,
            [
                {"piece": piece, "block": block, "seqs": _encoded(offsets, span)}
                for piece, offsets in sorted(holders.items())
            ],
        )


def downgrade() -> None:
    """Drop ``piece_blocks``."""
    op.drop_table("piece_blocks")


def _pieces(text: str) -> set[int]:
    """The pieces of one and two code points of the text's whitespace tokens."""
    white = _WHITE_SPACE
    held = {(ord(character) << _BITS) | _ALONE for character in set(text) if character not in white}
    held.update(
        (ord(first) << _BITS) | ord(second)
        for first, second in itertools.pairwise(text)
        if first not in white and second not in white
    )
    return held


def _encoded(offsets: list[int], span: int) -> bytes:
    width = 2 if span <= 1 << 16 else 4
    if len(offsets) * width * 8 >= span:
        bitmap = bytearray((span + 7) // 8)
        for offset in offsets:
            bitmap[offset // 8] |= 1 << (offset % 8)
        return bytes((0,)) + bytes(bitmap)
    return bytes((width,)) + b"".join(offset.to_bytes(width, "little") for offset in offsets)
