r"""BM25's word postings: each indexed entry's words, how often it holds each, a block a row.

``words`` gives each BM25 term (a stem) an id; ``word_blocks`` holds, for a
block of seqs, each term's seqs and how many times each entry's document (its
lowercase memory, then its lowercase tags) holds it. An upgraded database gets
the postings of every entry up to the watermark, cut into words as this
revision does it (its own copy of the tokenizer: lowercase, the words of
``(?u)\b\w\w+\b``, the English stopwords of bm25s dropped, PyStemmer's
English stems); the tail above the watermark is cut by each process.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03
"""

import re
import struct
from collections.abc import Iterable, Sequence

import sqlalchemy as sa
import Stemmer
from alembic import op

from loopctl_memory.sql.text import Utf8Text

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_ROW_ENTRIES = 10_000  # seqs a row of postings covers
_WORD = re.compile(r"(?u)\b\w\w+\b")
_STOPWORDS = frozenset(  # bm25s's English stopwords, as of this revision
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into"),
        *("is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then"),
        *("there", "these", "they", "this", "to", "was", "will", "with"),
    )
)


def upgrade() -> None:
    """Create the word tables and fill them for the entries already indexed."""
    op.create_table(
        "words",
        sa.Column("id", _ID, autoincrement=True, nullable=False),
        sa.Column("word", Utf8Text(), nullable=False, comment="a BM25 token (a stem)"),
        sa.Column(
            "entries", sa.BigInteger(), nullable=False, comment="entries indexed with it, at most"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_words")),
        sa.UniqueConstraint("word", name=op.f("uq_words_word")),
    )
    op.create_table(
        "word_blocks",
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
        sa.Column(
            "counts", sa.LargeBinary(), nullable=False, comment="int32: the term's count in each"
        ),
        sa.Column(
            "document_lengths",
            sa.LargeBinary(),
            nullable=False,
            comment="int32: the words of each seq's document, from block on",
        ),
        sa.PrimaryKeyConstraint("block", name=op.f("pk_word_blocks")),
    )
    _index_existing(op.get_bind())


def downgrade() -> None:
    """Drop the word tables."""
    op.drop_table("word_blocks")
    op.drop_table("words")


def _index_existing(bind: sa.Connection) -> None:
    mark = bind.execute(sa.text("SELECT indexed_through FROM index_state")).scalar_one_or_none()
    if not mark:
        return
    entries = sa.table(
        "entries", sa.column("seq", sa.BigInteger()), sa.column("memory_lower", Utf8Text())
    )
    tags = sa.table(
        "tags",
        sa.column("entry_seq", sa.BigInteger()),
        sa.column("position", sa.Integer()),
        sa.column("tag_lower", Utf8Text()),
    )
    stemmer = Stemmer.Stemmer("english")
    known: dict[str, int] = {}
    totals: dict[str, int] = {}
    for low in range(1, int(mark) + 1, _ROW_ENTRIES):
        high = min(low + _ROW_ENTRIES - 1, int(mark))
        texts = bind.execute(
            sa.select(entries.c.seq, entries.c.memory_lower)
            .where(entries.c.seq >= low, entries.c.seq <= high)
            .order_by(entries.c.seq)
        ).all()
        tagged: dict[int, list[str]] = {}
        for seq, tag in bind.execute(
            sa.select(tags.c.entry_seq, tags.c.tag_lower)
            .where(tags.c.entry_seq >= low, tags.c.entry_seq <= high)
            .order_by(tags.c.entry_seq, tags.c.position)
        ):
            tagged.setdefault(int(seq), []).append(tag)
        by_word: dict[str, tuple[list[int], list[int]]] = {}
        lengths: dict[int, int] = {}
        for seq, memory in texts:
            held: dict[str, int] = {}
            found = _words(stemmer, [memory, *tagged.get(int(seq), [])])
            if found:
                lengths[int(seq)] = len(found)
            for word in found:
                held[word] = held.get(word, 0) + 1
            for word, times in held.items():
                postings = by_word.setdefault(word, ([], []))
                postings[0].append(int(seq))
                postings[1].append(times)
        if by_word:
            _write_row(bind, low, by_word, known, lengths)
            for word, (seqs, _) in by_word.items():
                totals[word] = totals.get(word, 0) + len(seqs)
    if totals:
        bind.execute(
            sa.update(_WORDS)
            .where(_WORDS.c.id == sa.bindparam("word_id"))
            .values(entries=sa.bindparam("total")),
            [{"word_id": known[word], "total": total} for word, total in totals.items()],
        )


def _words(stemmer: Stemmer.Stemmer, parts: Iterable[str]) -> list[str]:
    found = []
    for part in parts:
        kept = [word for word in _WORD.findall(part.lower()) if word not in _STOPWORDS]
        found += stemmer.stemWords(kept)
    return found


_WORDS = sa.table(
    "words",
    sa.column("id", sa.BigInteger()),
    sa.column("word", Utf8Text()),
    sa.column("entries", sa.BigInteger()),
)


def _ids(bind: sa.Connection, names: list[str], known: dict[str, int]) -> None:
    """Give each of ``names`` not in ``known`` an id in ``words``; add them all to ``known``."""
    fresh = [word for word in names if word not in known]
    if not fresh:
        return
    bind.execute(sa.insert(_WORDS), [{"word": word, "entries": 0} for word in fresh])
    for start in range(0, len(fresh), 5_000):
        chunk = fresh[start : start + 5_000]
        known.update(
            (word, int(number))
            for number, word in bind.execute(
                sa.select(_WORDS.c.id, _WORDS.c.word).where(_WORDS.c.word.in_(chunk))
            )
        )


def _write_row(
    bind: sa.Connection,
    block: int,
    by_word: dict[str, tuple[list[int], list[int]]],
    known: dict[str, int],
    lengths: dict[int, int],
) -> None:
    _ids(bind, sorted(by_word), known)
    last = max(lengths)
    ordered = sorted((known[word], word) for word in by_word)
    bind.execute(
        sa.text(
            "INSERT INTO word_blocks (block, term_ids, lengths, seqs, counts, document_lengths) "
            "VALUES (:block, :term_ids, :lengths, :seqs, :counts, :document_lengths)"
        ).bindparams(
            sa.bindparam("term_ids", type_=sa.LargeBinary()),
            sa.bindparam("lengths", type_=sa.LargeBinary()),
            sa.bindparam("seqs", type_=sa.LargeBinary()),
            sa.bindparam("counts", type_=sa.LargeBinary()),
            sa.bindparam("document_lengths", type_=sa.LargeBinary()),
        ),
        {
            "block": block,
            "term_ids": _pack([number for number, _ in ordered]),
            "lengths": _pack([len(by_word[word][0]) for _, word in ordered]),
            "seqs": b"".join(_pack(by_word[word][0]) for _, word in ordered),
            "counts": b"".join(_pack32(by_word[word][1]) for _, word in ordered),
            "document_lengths": _pack32([lengths.get(seq, 0) for seq in range(block, last + 1)]),
        },
    )


def _pack(values: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(values)}q", *values)


def _pack32(values: Sequence[int]) -> bytes:
    return struct.pack(f"<{len(values)}i", *values)
