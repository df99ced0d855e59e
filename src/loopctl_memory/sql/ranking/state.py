"""What a process keeps to rank every entry without reading the entries: a copy kept current.

For each live entry, by seq (insertion order): ``half``, the binary32
``relevance * 0.5`` that starts its score (``-inf`` where no entry lives). For
each query word, the entries that contain it come from the token index: the
postings of the indexed blocks (:mod:`~loopctl_memory.sql.lexical.segments`) of the
tokens that hold it (:mod:`~loopctl_memory.sql.lexical.grams`), or for a word of one
or two code points its own rows (:mod:`~loopctl_memory.sql.lexical.pieces`), and the
tail above them (:mod:`~loopctl_memory.sql.lexical.tail`); the tag bonus likewise from
the tag postings. A new process reads the indexed entries' relevance and scope
from their blocks' rows, then what the change log names since.

Every retrieval first brings the copy up to the transaction's snapshot with
one small query (the highest seq, the last change, the watermark) and then
reads only what moved: new entries by seq, removals from the ``changes`` log,
newly indexed blocks by block number. So a write by any process, on a file or
on PostgreSQL, is seen by the next retrieval here. A removal or a newly
indexed block never costs a reload; after ``_MAX_SEGMENTS`` blocks (or a
watermark that went back) the copy is read again whole.

Each ranking's part is read the first time it is needed and kept current from
then on: the relevance in ``half`` and the token and tag postings and the tail
(the reference ranking; the postings also serve tag filters; until then
``half`` is 0.0 where an entry lives), BM25's word postings
(:mod:`~loopctl_memory.sql.ranking.words`), the columns filters test
(:mod:`~loopctl_memory.sql.ranking.columns`). A process pays in time and
memory only for the rankings it uses.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.binary32 import SCORE_RELEVANCE_WEIGHT
from loopctl_memory.errors import EmbedderError
from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.lexical.arrays import distinct, seq_type
from loopctl_memory.sql.lexical.grams import TokenFinder
from loopctl_memory.sql.lexical.segments import Ints, Runs, Segment, Seqs, load_segment
from loopctl_memory.sql.lexical.tail import RewrittenIndex, TailIndex
from loopctl_memory.sql.lexical.vocabulary import Terms
from loopctl_memory.sql.ranking.columns import FilterColumns
from loopctl_memory.sql.ranking.graph_home import GraphHome
from loopctl_memory.sql.ranking.indexed import read_indexed
from loopctl_memory.sql.ranking.query_words import QueryWords
from loopctl_memory.sql.ranking.streams import Streams
from loopctl_memory.sql.ranking.vector_files import StoreMark, VectorFiles
from loopctl_memory.sql.ranking.vectors import VectorIndex
from loopctl_memory.sql.ranking.words import WordIndex
from loopctl_memory.sql.rows.entry_rows import IDS_PER_STATEMENT, lowercase_tags
from loopctl_memory.sql.tuning import Tuning

Halves = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]
_MAX_SEGMENTS = 16
_ROWS_PER_FETCH = 65_536
_HALF = np.float32(SCORE_RELEVANCE_WEIGHT)
# What a refresh compares with its copy: the highest seq, the last change, the
# watermark, the generation, the newest scope and the store's embedder.
_WHERE_THINGS_STAND = (
    "SELECT (SELECT coalesce(max(seq), 0) FROM entries),"
    " (SELECT coalesce(max(id), 0) FROM changes),"
    " (SELECT indexed_through FROM index_state),"
    " (SELECT generation FROM index_state),"
    " (SELECT coalesce(max(id), 0) FROM scopes),"
    " (SELECT embedder_id FROM index_state)"
)
# The entries still present that the change log names: rewritten after being written.
_REWRITTEN = "SELECT DISTINCT c.seq FROM changes c JOIN entries e ON e.seq = c.seq"


@dataclass(frozen=True, slots=True)
class Members:
    """The entries a scope reads: their seqs (ascending), and a mask by seq."""

    seqs: Ints
    mask: Mask


class RankingState:
    """One store's ranking columns, postings and tail in this process.

    Not thread-safe: the store lets one retrieval at a time use it, and opens
    that retrieval's transaction only once it holds it, so the copy only ever
    moves forward in time.
    """

    def __init__(self, tuning: Tuning, graph_home: GraphHome | None = None) -> None:
        self.tuning = tuning
        self.graph_home = graph_home  # where the vectors' graph files go (None: nowhere)
        self._reset()

    def _reset(self) -> None:
        self.top = 0  # the highest seq read
        self.change = 0  # the last change applied
        self.mark = 0  # the watermark the segments reach
        self.generation = 0
        self.embedder_id = 0  # the store's embedder, whose vectors rank (0: none)
        self.half: Halves = np.full(1, -np.inf, np.float32)
        self._live: tuple[tuple[object, int], Mask] = (((), -1), np.zeros(0, np.bool_))
        self.scope_of: npt.NDArray[np.int64] = np.full(1, -1, np.int64)
        self._scope_names: dict[int, str] = {}
        self._scopes_read = -1
        self.rewritten = RewrittenIndex()
        # The lowercase memory and tags of entries of small scopes, read when first ranked.
        self._texts: dict[int, tuple[str, tuple[str, ...]]] = {}
        self.tokens = TokenFinder()
        self._query: QueryWords | None = None  # the words of the query being ranked
        self.tag_values = Terms()
        self._tags_read = 0  # the highest tag value id read
        self.token_segments: list[Segment] = []
        self.tag_segments: list[Segment] = []
        self.tail = TailIndex(0)
        # Words that took many postings to find: their distinct seqs, or a mask as bits.
        self._kept: OrderedDict[str, npt.NDArray[Any]] = OrderedDict()
        self._kept_bytes = 0
        self._loaded = False
        # Whether ``half`` holds each entry's relevance, or only whether it lives (0.0):
        # the reference ranking needs the relevance, BM25 only the entries.
        self._relevance = False
        self._lexical = False  # the token and tag postings and the tail, read on first use
        self._blocks_added = 0
        self._words: WordIndex | None = None  # BM25's postings, read on first use
        self.streams = Streams()  # each scope's stream, linked on first use (context)
        self._columns: FilterColumns | None = None  # what filters test, read on first use
        self.vector_files: VectorFiles | None = None  # the embedder's, once a ranking asks

    # --- keeping current ---

    def refresh(self, connection: Reader) -> None:
        """Bring the copy to what this transaction sees; on any failure, forget it all."""
        try:
            self._refresh(connection)
        except BaseException:
            self._reset()
            raise

    def _refresh(self, connection: Reader) -> None:
        top, change, mark, generation, newest_scope, embedder_id = connection.one(
            _WHERE_THINGS_STAND
        )
        change, mark, generation = int(change), int(mark or 0), int(generation or 0)
        # Postings may name removed entries above the newest live one: cover them too.
        top = max(int(top), mark)
        if (
            not self._loaded
            or mark < self.mark
            or generation != self.generation
            or self._blocks_added >= _MAX_SEGMENTS
        ):
            self._reset()
            self.generation = generation
            self.embedder_id = int(embedder_id or 0)
            self._read_scopes(connection, int(newest_scope))  # first: see _read_entries
            self._load(connection, top, change, mark)
            return
        self.embedder_id = int(embedder_id or 0)
        if int(newest_scope) > self._scopes_read:
            self._read_scopes(connection, int(newest_scope))
        if mark > self.mark:
            self._add_blocks(connection, mark)
        if top > self.top:
            self._read_entries(connection, self.top, top)
            if self._lexical:
                self.tail.read(connection, top)
            if self._words is not None:
                self._words.read_tail(connection, top)
            if self._columns is not None:
                self._columns.read(connection, self.top, top)
            if self.vector_files is not None:
                self.vector_files.vectors.read(connection, self.top, top)
            self.top = top
        # Last: an entry stored and rewritten since the last refresh may already be in a
        # block's postings (or the tail) under its first text.
        if change > self.change:
            self._apply_changes(connection, change)

    def _load(self, connection: Reader, top: int, change: int, mark: int) -> None:
        with connection.backend.reading_once(connection):
            self.change = change
            self.mark = mark
            self._read_columns(connection, top)
            self.top = top
            self._read_rewritten(connection, _REWRITTEN, ())
        self._loaded = True

    def lexical(self, connection: Reader) -> None:
        """Read the token and tag postings and the tail, if not yet: the reference ranks by them.

        A process that only ranks by BM25 (and filters on no tag) never reads them.
        """
        if self._lexical:
            return
        with connection.backend.reading_once(connection):
            self.token_segments = [load_segment(connection, index.TOKENS, 0, self.mark)]
            self.tag_segments = [load_segment(connection, index.TAG_VALUES, 0, self.mark)]
            self.tail = TailIndex(self.mark)
            self.tail.read(connection, self.top)
            self._read_tag_values(connection)
        self._lexical = True

    @contextmanager
    def looking_up(self, connection: Reader, words: Iterable[str]) -> Iterator[None]:
        """Around the ranking of a query's ``words`` (after :meth:`lexical`).

        Meanwhile :meth:`word_entries` finds them in ``connection``'s
        transaction, a batch of words at a time.
        """
        self._query = QueryWords(connection, words, self.tokens, self.mark, self._kept)
        try:
            yield
        finally:
            self._query = None

    def relevance(self, connection: Reader) -> None:
        """Read every entry's relevance into ``half``, if not yet: the reference ranks by it.

        Until then ``half`` only tells which entries live (0.0, or -inf where none).
        """
        if self._relevance:
            return
        self._relevance = True  # _read_columns reads it now
        try:
            with connection.backend.reading_once(connection):
                self._read_columns(connection, self.top)
        except BaseException:
            self._reset()  # some entries' relevance unread: read the copy again
            raise

    def _read_columns(self, connection: Reader, top: int) -> None:
        """Read every entry through ``top``: which live, their scope, relevance.

        The indexed ones come from their blocks' rows as indexing found them,
        then those the change log names (through ``self.change``) from the
        entries; the tail from the entries. A few rows and the log, not a row
        an entry.
        """
        if not self.mark:
            self._read_entries(connection, 0, top)
            return
        self._grow(top)
        read_indexed(
            connection,
            self.half,
            self.scope_of,
            mark=self.mark,
            change=self.change,
            relevance=self._relevance,
            scoped=self._scopes_read > 0,
        )
        self._read_entries(connection, self.mark, top)

    def _read_entries(self, connection: Reader, after: int, through: int) -> None:
        """Read the entries with ``after < seq <= through``: which live, their scope, relevance."""
        self._grow(through)
        half, scope_of = self.half, self.scope_of
        scoped = self._scopes_read > 0  # scopes other than the root exist
        if not scoped and not self._relevance and self._all_live(connection, after, through):
            half[after + 1 : through + 1] = 0.0
            scope_of[after + 1 : through + 1] = 0
            return
        # Each value fewer a row to fetch saves much of the cost.
        columns = f"seq{', relevance' if self._relevance else ''}{', scope_id' if scoped else ''}"
        for rows in connection.chunks(
            f"SELECT {columns} FROM entries WHERE seq > ? AND seq <= ?",  # noqa: S608
            (after, through),
            _ROWS_PER_FETCH,
        ):
            seqs = np.fromiter((row[0] for row in rows), np.int64, len(rows))
            if self._relevance:
                relevance = np.fromiter((row[1] for row in rows), np.float64, len(rows))
                # binary32 relevance times binary32 0.5, rounded to binary32, as the crate does
                half[seqs] = relevance.astype(np.float32) * _HALF
            else:
                half[seqs] = 0.0
            scope_of[seqs] = (
                np.fromiter((row[-1] for row in rows), np.int64, len(rows)) if scoped else 0
            )

    def _grow(self, through: int) -> None:
        """Make room in ``half`` and ``scope_of`` for seqs up to ``through``."""
        if len(self.half) > through:
            return
        size = max(through + 1, 2 * len(self.half))
        grown = np.full(size, -np.inf, np.float32)
        grown[: len(self.half)] = self.half
        self.half = grown
        grown_scopes = np.full(size, -1, np.int64)
        grown_scopes[: len(self.scope_of)] = self.scope_of
        self.scope_of = grown_scopes

    @staticmethod
    def _all_live(connection: Reader, after: int, through: int) -> bool:
        """Whether an entry lives at every seq of ``after < seq <= through``, on a first read.

        A count of the whole table walks its smallest index; no row is fetched.
        """
        if after != 0:
            return False
        (count,) = connection.one("SELECT count(*) FROM entries")
        return int(count) == through

    def _apply_changes(self, connection: Reader, change: int) -> None:
        """Read again the entries removed or rewritten since the last change applied."""
        statement = "SELECT DISTINCT seq FROM changes WHERE id > ? AND id <= ? AND seq <= ?"
        self._read_rewritten(connection, statement, (self.change, change, self.top))
        self.change = change

    def _read_rewritten(self, connection: Reader, changed: str, arguments: tuple[int, ...]) -> None:
        """Read the entries ``changed`` (a query of seqs) names: gone, or rewritten."""
        seqs = sorted(int(row[0]) for row in connection.all(changed, arguments))
        decode = connection.backend.decode
        for start in range(0, len(seqs), IDS_PER_STATEMENT):
            chunk = [seq for seq in seqs[start : start + IDS_PER_STATEMENT] if seq <= self.top]
            if not chunk:
                continue
            marks = ", ".join("?" * len(chunk))
            columns = "seq, relevance, scope_id, memory_lower, category, validated"
            rows = connection.all(
                f"SELECT {columns} FROM entries WHERE seq IN ({marks})",  # noqa: S608
                chunk,
            )
            tags = lowercase_tags(connection, chunk)
            present = set()
            for seq, relevance, scope_id, memory_lower, category, validated in rows:
                present.add(seq)
                self.half[seq] = np.float32(relevance) * _HALF
                self.scope_of[seq] = scope_id
                text, tags_lower = decode(memory_lower), tags.get(seq, [])
                self.rewritten.rewrite(seq, text, tags_lower)
                if self._words is not None:
                    self._words.rewrite(seq, text, tags_lower)
                if self._columns is not None:
                    self._columns.rewrite(seq, category, validated, relevance)
                if seq in self._texts:
                    self._texts[seq] = (text, tuple(tags_lower))
            if self.vector_files is not None:
                self.vector_files.vectors.read_again(connection, chunk)
            gone = np.array([seq for seq in chunk if seq not in present], np.int64)
            self.half[gone] = -np.inf
            self.scope_of[gone] = -1
            for seq in gone:
                self.rewritten.forget(int(seq))
                if self._words is not None:
                    self._words.forget(int(seq))

    def _read_scopes(self, connection: Reader, newest: int) -> None:
        decode = connection.backend.decode
        rows = connection.all("SELECT id, name FROM scopes WHERE id > ?", (self._scopes_read,))
        self._scope_names.update((int(number), decode(name)) for number, name in rows)
        self._scopes_read = max(newest, self._scopes_read)

    def texts(
        self, connection: Reader, seqs: npt.NDArray[np.int64]
    ) -> list[tuple[str, tuple[str, ...]]]:
        """The lowercase memory and tags of the live entries at ``seqs``, as they are now."""
        known = self._texts
        missing = [int(seq) for seq in seqs if int(seq) not in known]
        if len(known) + len(missing) > 4 * self.tuning.small_scope:
            known.clear()  # entries of scopes no longer asked about: keep memory bounded
            missing = [int(seq) for seq in seqs]
        decode = connection.backend.decode
        for start in range(0, len(missing), IDS_PER_STATEMENT):
            chunk = missing[start : start + IDS_PER_STATEMENT]
            marks = ", ".join("?" * len(chunk))
            tags = lowercase_tags(connection, chunk)
            for seq, memory_lower in connection.all(
                f"SELECT seq, memory_lower FROM entries WHERE seq IN ({marks})",  # noqa: S608
                chunk,
            ):
                known[int(seq)] = (decode(memory_lower), tuple(tags.get(int(seq), ())))
        return [known[int(seq)] for seq in seqs]

    def scope_ids(self, scope: Scope) -> npt.NDArray[np.int64] | None:
        """The ids of the scopes ``scope`` reads; None: every scope there is."""
        if scope.everything:
            return None
        held = sorted(number for number, name in self._scope_names.items() if scope.holds(name))
        if len(held) == len(self._scope_names):  # a store of one scope: nothing to leave out
            return None
        return np.array(held, np.int64)

    def members(self, scope: Scope, size: int) -> Members | None:
        """The entries below seq ``size`` that ``scope`` reads; None: every entry competes."""
        wanted = self.scope_ids(scope)
        if wanted is None:
            return None
        if not len(wanted):  # a scope that holds no entry: no pass over every entry
            return Members(np.empty(0, np.int64), np.zeros(size, np.bool_))
        scope_of = self.scope_of[:size]
        mask = scope_of == wanted[0] if len(wanted) == 1 else np.isin(scope_of, wanted)
        return Members(np.flatnonzero(mask), mask)

    def _add_blocks(self, connection: Reader, mark: int) -> None:
        self._blocks_added += 1
        if self._words is not None:
            self._words.add_blocks(connection, mark, max(self.top, mark))
        if self._lexical:
            self.token_segments.append(load_segment(connection, index.TOKENS, self.mark, mark))
            self.tag_segments.append(load_segment(connection, index.TAG_VALUES, self.mark, mark))
            self._read_tag_values(connection)  # terms are created only when blocks are indexed
            self.tokens.forget()
            tail = TailIndex(mark)
            tail.read(connection, max(self.top, mark))
            self.tail = tail
            self._kept.clear()
            self._kept_bytes = 0
        self.mark = mark

    def _read_tag_values(self, connection: Reader) -> None:
        """Add the tag values created since the last read."""
        self._tags_read = _read_terms(
            connection, self.tag_values, index.TAG_VALUES, self._tags_read
        )

    # --- looking up ---

    def words(self, connection: Reader) -> WordIndex:
        """BM25's word postings, as current as the rest (read from ``connection`` on first use)."""
        if self._words is None:
            words = WordIndex()
            rewritten = self.rewritten.seqs()
            texts = self.texts(connection, np.array(rewritten, np.int64)) if rewritten else []
            documents = [
                (seq, memory, list(tags))
                for seq, (memory, tags) in zip(rewritten, texts, strict=True)
            ]
            with connection.backend.reading_once(connection):
                words.load(connection, self.mark, self.top, documents)
            self._words = words
        return self._words

    def vectors(self, connection: Reader, embedder_id: int, dims: int) -> VectorIndex:
        """The vectors by embedder ``embedder_id``, as current as the rest (read on first use).

        Raises:
            EmbedderError: the store's vectors are now another embedder's (``reembed``).

        """
        if embedder_id != self.embedder_id:
            raise EmbedderError(
                "this store's vectors are now by another embedder (reembed replaced this"
                " one): open the store again with the new one"
            )
        mark = StoreMark.read(connection, self.top, self.change)
        files = self.vector_files
        if files is None or files.vectors.embedder_id != embedder_id:
            files = VectorFiles.loaded(
                connection, (embedder_id, dims), mark, self.graph_home, self.tuning
            )
            self.vector_files = files
        else:
            files.follow(connection, mark)
        return files.vectors

    def columns(self, connection: Reader) -> FilterColumns:
        """The columns filters test, as current as the rest (read on first use)."""
        if self._columns is None:
            columns = FilterColumns()
            with connection.backend.reading_once(connection):
                columns.read(connection, 0, self.top)
            self._columns = columns
        return self._columns

    def tag_mask(self, tag: str, size: int) -> Mask:
        """Whether each live entry below seq ``size`` has a lowercase tag equal to ``tag``."""
        wanted: Ints = np.array(self.tag_values.equal_to(tag), np.int64)
        found = self._gather(
            self.tag_segments, [segment.runs(wanted) for segment in self.tag_segments]
        )
        mask = np.zeros(size, np.bool_)
        mask[found[found < size]] = True
        mask[[seq for seq in self.tail.tag_seqs(tag, whole=True) if seq < size]] = True
        rewritten = self.rewritten
        if len(rewritten):  # their postings hold their old tags
            seqs = [seq for seq in rewritten.seqs() if seq < size]
            mask[seqs] = False
            mask[[seq for seq in rewritten.tag_seqs(tag, whole=True) if seq < size]] = True
        return mask

    def live(self, size: int) -> Mask:
        """Whether an entry lives at each seq below ``size`` (read-only; kept while unmoved)."""
        key = (self.change, self.generation, id(self.half))
        (known_key, known_top), known = self._live
        if known_key != key or known_top != self.top or len(known) != size:
            old = len(known) if known_key == key and len(known) <= size else 0
            mask = np.empty(size, np.bool_)  # entries only added since: the rest is known
            mask[:old] = known[:old]
            np.isfinite(self.half[old:size], out=mask[old:])
            mask.flags.writeable = False
            self._live = ((key, self.top), mask)
        return self._live[1]

    def word_entries(self, word: str) -> tuple[Seqs | Mask, bool]:
        """The indexed entries whose memory contains ``word``, and whether they are distinct.

        Either a mask over seqs (for a word most entries hold) or seqs, which
        may repeat unless said distinct; removed entries may be among them. A
        word that took many postings to find is kept for the next queries,
        within the budget. The tail's entries come from :meth:`word_tail`.
        """
        query = self._query
        if query is None:
            raise RuntimeError("word_entries is only for a query being ranked (looking_up)")
        kept = query.kept.get(word)
        if kept is not None:
            if word in self._kept:
                self._kept.move_to_end(word)
            if kept.dtype == np.uint8:  # a mask, a bit an entry
                return np.unpackbits(kept, count=self.mark + 1).view(np.bool_), True
            return kept, True
        size = self.top + 1
        found: Seqs | Mask
        held = query.entries_of(word)
        if held is not None:
            return self._short_word(word, held), True
        wanted = query.tokens_of(word)
        runs = [segment.runs(wanted) for segment in self.token_segments]
        postings = sum(part.postings for part in runs)
        if postings * 16 < size or not self.tuning.word_cache_bytes:
            return self._gather(self.token_segments, runs), False
        if postings * 4 >= size:
            found = np.zeros(self.mark + 1, np.bool_)
            for segment, part in zip(self.token_segments, runs, strict=True):
                segment.mark(part, found)
        else:
            found = distinct(self._gather(self.token_segments, runs), size)
        self._remember(word, found)
        return found, True

    def _short_word(self, word: str, held: Seqs | Mask) -> Seqs | Mask:
        """The entries of a word of one or two code points (distinct), kept when many."""
        size, is_mask = self.top + 1, held.dtype == np.bool_
        if (not is_mask and len(held) * 16 < size) or not self.tuning.word_cache_bytes:
            return held
        if not is_mask and len(held) * 4 >= size:
            mask = np.zeros(self.mark + 1, np.bool_)
            mask[held] = True
            held = mask
        self._remember(word, held)
        return held

    def word_tail(self, word: str) -> list[int]:
        """Seqs of the tail entries whose memory contains ``word`` (they may repeat)."""
        return self.tail.word_seqs(word)

    def tagged(self, text: str) -> Seqs:
        """Seqs of the entries with a lowercase tag containing ``text`` (they may repeat)."""
        wanted: Ints = np.array(self.tag_values.containing(text), np.int64)
        found = self._gather(
            self.tag_segments, [segment.runs(wanted) for segment in self.tag_segments]
        )
        in_tail = self.tail.tag_seqs(text)
        if in_tail:
            found = np.concatenate((found, np.array(in_tail, found.dtype)))
        return found

    def _gather(self, segments: list[Segment], runs: list[Runs]) -> Seqs:
        parts = [
            segment.gather(part)
            for segment, part in zip(segments, runs, strict=True)
            if part.postings
        ]
        if len(parts) == 1:
            return parts[0]
        return np.concatenate(parts) if parts else np.empty(0, seq_type(self.top))

    def _remember(self, word: str, found: Seqs | Mask) -> None:
        # A mask is kept as bits (unpacking it costs about a tenth of a query); seqs
        # as they are, when they take less room than bits.
        kept = np.packbits(found) if found.dtype == np.bool_ else found
        if found.dtype != np.bool_ and found.nbytes * 8 > self.mark + 1:
            mask = np.zeros(self.mark + 1, np.bool_)
            mask[found] = True
            kept = np.packbits(mask)
        self._kept[word] = kept
        self._kept_bytes += kept.nbytes
        while self._kept_bytes > self.tuning.word_cache_bytes and self._kept:
            _, dropped = self._kept.popitem(last=False)
            self._kept_bytes -= dropped.nbytes


def _read_terms(connection: Reader, terms: Terms, tables: index.TermTables, after: int) -> int:
    decode = connection.backend.decode
    rows = connection.all(
        f"SELECT id, {tables.term} FROM {tables.terms.name} WHERE id > ? ORDER BY id",  # noqa: S608
        (after,),
    )
    fresh = [(int(number), decode(text)) for number, text in rows]
    terms.add(fresh)
    return fresh[-1][0] if fresh else after
