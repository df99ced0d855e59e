"""The schema as SQLAlchemy Core tables; alembic migrations must match it exactly."""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SmallInteger,
    String,
    Table,
    Text,
    Uuid,
)

from loopctl_memory.entry import MemoryCategory
from loopctl_memory.sql.text import Utf8Text

metadata = MetaData(
    naming_convention={
        "ix": "ix_%(table_name)s_%(column_0_N_name)s",
        "uq": "uq_%(table_name)s_%(column_0_N_name)s",
        "ck": "ck_%(table_name)s_%(constraint_name)s",
        "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
        "pk": "pk_%(table_name)s",
    }
)

# SQLite: INTEGER PRIMARY KEY is the rowid, assigned max+1 on insert: insertion order for free.
_Seq = BigInteger().with_variant(Integer(), "sqlite")

# Comparisons, not an IN list: SQLite checks an IN list of more than two constants
# against a temporary table it builds again for every row it checks.
_CATEGORY_CHECK = " OR ".join(f"category = '{category.value}'" for category in MemoryCategory)

entries = Table(
    "entries",
    metadata,
    Column("seq", _Seq, primary_key=True, autoincrement=True, comment="insertion order"),
    Column("id", Uuid(), nullable=False, unique=True),
    Column("category", Text(), nullable=False),
    Column("memory", Utf8Text(), nullable=False),
    Column("memory_lower", Utf8Text(), nullable=False, comment="Python str.lower() of memory"),
    Column("relevance", Double(), nullable=False),
    Column("created_at_us", BigInteger(), nullable=False, comment="microseconds since epoch, UTC"),
    Column("access_count", BigInteger(), nullable=False),
    Column("validated", Boolean(), nullable=False),
    Column("last_accessed_us", BigInteger(), nullable=True, comment="microseconds, UTC"),
    Column("last_decayed_us", BigInteger(), nullable=True, comment="microseconds, UTC"),
    Column("scope_id", BigInteger(), nullable=False, server_default="0", comment="scopes.id"),
    Column("metadata", Text(), nullable=False, server_default="{}", comment="a JSON object"),
    Column("key", Utf8Text(), nullable=True, comment="the caller's key, unique in its scope"),
    Column("expires_at_us", BigInteger(), nullable=True, comment="microseconds, UTC"),
    CheckConstraint(_CATEGORY_CHECK, name="category"),
    CheckConstraint("relevance >= 0 AND relevance <= 1", name="relevance"),
)
# Retrieval walks entries best relevance first, ties in insertion order.
Index("ix_entries_relevance_seq", entries.c.relevance.desc(), entries.c.seq)
# A scope's entries in insertion order, without reading the others.
Index("ix_entries_scope_id_seq", entries.c.scope_id, entries.c.seq)
# A key names one entry of its scope. Partial, as the next one: an entry without a key
# (or an expiry) costs a write no index entry.
Index(
    "uq_entries_scope_id_key",
    entries.c.scope_id,
    entries.c.key,
    unique=True,
    sqlite_where=entries.c.key.is_not(None),
    postgresql_where=entries.c.key.is_not(None),
)
# The entries due to expire, soonest first, for the sweep.
Index(
    "ix_entries_expires_at_us",
    entries.c.expires_at_us,
    sqlite_where=entries.c.expires_at_us.is_not(None),
    postgresql_where=entries.c.expires_at_us.is_not(None),
)

scopes = Table(
    "scopes",
    metadata,
    Column("id", _Seq, primary_key=True, autoincrement=True),
    Column("name", Utf8Text(), nullable=False, unique=True, comment="'' is the root scope, id 0"),
)
"""The scope names an entry's ``scope_id`` stands for; a name, once given an id, keeps it."""

tags = Table(
    "tags",
    metadata,
    Column(
        "entry_seq",
        _Seq,
        ForeignKey(entries.c.seq, ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", Integer(), primary_key=True, autoincrement=False),
    Column("tag", Utf8Text(), nullable=False),
    Column("tag_lower", Utf8Text(), nullable=False, comment="Python str.lower() of tag"),
    sqlite_with_rowid=False,  # the primary key is the table: one B-tree, not two
)


entry_fields = Table(
    "entry_fields",
    metadata,
    Column(
        "entry_seq",
        _Seq,
        ForeignKey(entries.c.seq, ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("path_hash", BigInteger(), primary_key=True, autoincrement=False),
    Column(
        "kind",
        SmallInteger(),
        nullable=False,
        comment="0 null 1 bool 2 number 3 str 4 list 5 object, +8 if long",
    ),
    Column("number", Double(), nullable=True, comment="a number, or a bool as 0 or 1"),
    Column("text_key", Utf8Text(), nullable=True, comment="a str's first 100 characters"),
    Column("text", Utf8Text(), nullable=True, comment="the whole str, when longer"),
    sqlite_with_rowid=False,
)
"""Each path of an entry's metadata and the value there (see ``sql.fields``)."""
# A filter reads one path's rows by value; entry_seq closes the index, so the filter
# reads no table row.
Index(
    "ix_entry_fields_path_hash_kind_number",
    entry_fields.c.path_hash,
    entry_fields.c.kind,
    entry_fields.c.number,
    entry_fields.c.entry_seq,
)
Index(
    "ix_entry_fields_path_hash_kind_text_key",
    entry_fields.c.path_hash,
    entry_fields.c.kind,
    entry_fields.c.text_key,
    entry_fields.c.entry_seq,
)


ENTRY_FIELDS = (
    "seq",
    "id",
    "category",
    "memory",
    "memory_lower",
    "relevance",
    "created_at_us",
    "access_count",
    "validated",
    "last_accessed_us",
    "last_decayed_us",
    "scope_id",
    "metadata",
    "key",
    "expires_at_us",
)
"""The entries columns a write gives, in the order of a backend's entry rows (see
``flat.FlatEntry``)."""

# Batch inserts go to the driver's executemany directly, with rows as tuples:
# SQLAlchemy's per-row parameter processing costs more than the database's work.
INSERT_ENTRIES = (
    f"INSERT INTO entries ({', '.join(ENTRY_FIELDS)}) "  # noqa: S608 - our own names only
    f"VALUES ({', '.join('?' * len(ENTRY_FIELDS))})"
)
INSERT_TAGS = "INSERT INTO tags (entry_seq, position, tag, tag_lower) VALUES (?, ?, ?, ?)"
# Only while the embedder is the store's: a process still open with one that reembed
# replaced writes no vector (its entries are pending for the new one).
INSERT_VECTORS = (
    "INSERT INTO vectors (entry_seq, embedder_id, vector)"
    " SELECT ?, embedder_id, ? FROM index_state WHERE embedder_id = ?"
)

# --- the token index (see loopctl_memory.sql.lexical.index) ---------------------------

index_state = Table(
    "index_state",
    metadata,
    Column("id", Integer(), primary_key=True, autoincrement=False),
    Column(
        "indexed_through",
        BigInteger(),
        nullable=False,
        comment="every entry with seq <= this is in the postings",
    ),
    Column(
        "removed_through",
        BigInteger(),
        nullable=False,
        server_default="0",
        comment="the highest seq ever removed: seqs are never given out twice",
    ),
    Column(
        "generation",
        BigInteger(),
        nullable=False,
        server_default="0",
        comment="raised by a change to many entries at once: every copy is read again",
    ),
    Column("embedder_id", BigInteger(), nullable=True, comment="the embedder whose vectors rank"),
    Column(
        "store_id",
        String(36),
        nullable=False,
        server_default="",
        comment="a random UUID naming the store to the files kept outside it",
    ),
    Column(
        "vector_epoch",
        BigInteger(),
        nullable=False,
        server_default="0",
        comment="raised when vectors change unlogged: vector index files go stale",
    ),
    CheckConstraint("id = 1", name="single_row"),
)

changes = Table(
    "changes",
    metadata,
    Column("id", _Seq, primary_key=True, autoincrement=True, comment="commit order"),
    Column("seq", BigInteger(), nullable=False, comment="an entry removed (or rewritten)"),
)
"""What changed besides appends, for the processes that keep a copy of the ranking columns."""


history = Table(
    "history",
    metadata,
    Column("id", _Seq, primary_key=True, autoincrement=True, comment="commit order"),
    Column(
        "entry_seq",
        BigInteger(),
        nullable=False,
        comment="the entry's seq: where its history lives, while it lives and after",
    ),
    Column("entry_id", Uuid(), nullable=True, comment="set on the event that removed the entry"),
    Column("scope_id", BigInteger(), nullable=False, comment="scopes.id"),
    Column("at_us", BigInteger(), nullable=False, comment="microseconds since epoch, UTC"),
    Column("event", Text(), nullable=False, comment="see loopctl_memory.history.EVENTS"),
    Column("cause", Text(), nullable=True, comment="the operation that did it"),
    Column("relevance", Double(), nullable=True, comment="the entry's, when removed"),
    Column("count", BigInteger(), nullable=True, comment="accessed: the reads that UTC day"),
    Column("detail", Text(), nullable=True, comment="a JSON object: what the event changed"),
)
"""What happened to each entry (see :mod:`loopctl_memory.history`)."""
# An entry's events: a store appends at the end of both B-trees (seqs only grow).
Index("ix_history_entry_seq", history.c.entry_seq)
# A removed entry's events are found by its id, from the event that removed it; partial,
# so that a store (most events) costs no entry here.
Index(
    "ix_history_entry_id",
    history.c.entry_id,
    sqlite_where=history.c.entry_id.is_not(None),
    postgresql_where=history.c.entry_id.is_not(None),
)


def _vocabulary(name: str, term: str, what: str, blocks_name: str) -> tuple[Table, Table]:
    """A table of distinct terms, and the postings of each indexed block in one row."""
    terms = Table(
        name,
        metadata,
        Column("id", _Seq, primary_key=True, autoincrement=True),
        Column(term, Utf8Text(), nullable=False, unique=True, comment=what),
    )
    blocks = Table(
        blocks_name,
        metadata,
        Column("block", BigInteger(), primary_key=True, autoincrement=False, comment="first seq"),
        Column("term_ids", LargeBinary(), nullable=False, comment="ascending int64, little-endian"),
        Column("lengths", LargeBinary(), nullable=False, comment="int64: each term's seq count"),
        Column("seqs", LargeBinary(), nullable=False, comment="int64: each term's seqs, ascending"),
    )
    return terms, blocks


entry_blocks = Table(
    "entry_blocks",
    metadata,
    Column("block", BigInteger(), primary_key=True, autoincrement=False, comment="first seq"),
    Column(
        "relevance",
        LargeBinary(),
        nullable=False,
        comment="float64, little-endian: each seq's relevance when indexed, NaN for no entry",
    ),
    Column("scope_ids", LargeBinary(), nullable=False, comment="int64: each seq's scope_id"),
)
"""The ranking columns of each indexed block's entries, as indexing found them: a new
process reads them in a few rows, then the change log for what moved since."""


tokens, token_blocks = _vocabulary("tokens", "token", "lowercase, no whitespace", "token_blocks")
tag_values, tag_blocks = _vocabulary("tag_values", "value", "a whole lowercase tag", "tag_blocks")

token_grams = Table(
    "token_grams",
    metadata,
    Column("gram", BigInteger(), primary_key=True, autoincrement=False, comment="3 code points"),
    Column(
        "first_id", BigInteger(), primary_key=True, autoincrement=False, comment="its first token"
    ),
    Column("count", Integer(), nullable=False, comment="how many tokens the row names"),
    Column(
        "ids",
        LargeBinary(),
        nullable=False,
        comment="its width (1, 2, 4), then the gaps after first_id",
    ),
    sqlite_with_rowid=False,  # read by gram: the primary key is the table
)
"""Which tokens hold each trigram: rows written as indexing creates tokens (see ``grams``)."""

piece_blocks = Table(
    "piece_blocks",
    metadata,
    Column(
        "piece", BigInteger(), primary_key=True, autoincrement=False, comment="1 or 2 code points"
    ),
    Column("block", BigInteger(), primary_key=True, autoincrement=False, comment="first seq"),
    Column(
        "seqs",
        LargeBinary(),
        nullable=False,
        comment="0 then a bitmap from block on, or a width (2, 4) then offsets from block",
    ),
    sqlite_with_rowid=False,  # read by piece: the primary key is the table
)
"""Which entries of each block row hold each piece of their tokens (see ``pieces``)."""


words = Table(
    "words",
    metadata,
    Column("id", _Seq, primary_key=True, autoincrement=True),
    Column("word", Utf8Text(), nullable=False, unique=True, comment="a BM25 token (a stem)"),
)
"""BM25's terms (see :mod:`loopctl_memory.bm25_tokens`), each with an id for the postings."""

word_blocks = Table(
    "word_blocks",
    metadata,
    Column("block", BigInteger(), primary_key=True, autoincrement=False, comment="first seq"),
    Column("term_ids", LargeBinary(), nullable=False, comment="ascending int64, little-endian"),
    Column("lengths", LargeBinary(), nullable=False, comment="int64: each term's seq count"),
    Column("seqs", LargeBinary(), nullable=False, comment="int64: each term's seqs, ascending"),
    Column("counts", LargeBinary(), nullable=False, comment="int32: the term's count in each"),
    Column(
        "document_lengths",
        LargeBinary(),
        nullable=False,
        comment="int32: the words of each seq's document, from block on",
    ),
)
"""The word postings of each indexed block: which entries hold each BM25 term, how often."""

# --- vectors (see loopctl_memory.embedding) ------------------------------------

embedders = Table(
    "embedders",
    metadata,
    Column("id", _Seq, primary_key=True, autoincrement=True),
    Column("name", Utf8Text(), nullable=False, unique=True, comment="the model's id"),
    Column("dims", Integer(), nullable=False, comment="numbers a vector"),
    Column("spec", Utf8Text(), nullable=True, comment="how the CLI makes it again, if it can"),
)
"""Every embedder a store's vectors came from; ``index_state`` names the one that ranks."""

vectors = Table(
    "vectors",
    metadata,
    Column(
        "entry_seq",
        _Seq,
        ForeignKey(entries.c.seq, ondelete="CASCADE"),
        primary_key=True,
    ),
    Column(
        "embedder_id",
        BigInteger(),
        ForeignKey(embedders.c.id, ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("vector", LargeBinary(), nullable=False, comment="binary32 little-endian, unit length"),
    sqlite_with_rowid=False,
)
"""An entry's vector by an embedder, made from its current memory (a rewrite deletes it)."""
