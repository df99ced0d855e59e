"""Retrieval: the best ``limit`` entries, exactly as the reference ranks them, reading few rows.

The reference score is ``0.5·relevance + 0.4·matches/words + 0.3·tag + 0.1``,
so an entry's best possible score is bounded by its relevance and by which
query words *could* occur in it. The search uses that in three steps:

1. **Classify** each query word by how many indexed entries can contain it
   (the token vocabulary knows). A *selective* word is rare: its postings are
   read. A *dense* word is common: it is never enumerated.
2. **Check** the entries the postings name (and, when few entries have a tag
   containing the query, those), plus the unindexed tail: the database tests
   every word on them and Python scores them exactly.
3. **Walk** everything else by relevance, best first, testing the words in the
   database and scoring exactly, until no remaining entry can reach the
   ``limit``-th score. An unchecked entry contains no selective word, so its
   score is at most ``score(relevance, dense words, ...)``; with no dense word
   the walk ends after about ``limit`` rows.

Ties are exact: candidates are ranked by (score desc, seq asc), the reference's
stable order, and the walk stops only when the remaining rows can neither beat
the ``limit``-th candidate nor tie it with a smaller seq.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    case,
    exists,
    func,
    literal,
    or_,
    select,
    union_all,
)
from sqlalchemy.sql import Select

from loopctl_memory.scoring import ParsedQuery, score
from loopctl_memory.sql import index
from loopctl_memory.sql.tables import contains, entries, int_list, tag_values, tags, tokens

SELECTIVE_MAX = 5_000
"""A word (or the tag test) that can match at most this many entries is enumerated."""

_WORDS_PER_TERM = 60  # SQLite's parser limits expression depth to 1000
FIRST_CHUNK = 256
"""Rows the first step of the walk reads (more for a larger limit)."""
_MAX_CHUNK = 16_384
_FILTERED_CHUNK = 16
_MAX_SEQ = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Candidate:
    """An entry that may be in the top ``limit``: its insertion number and exact score."""

    seq: int
    score: float


@dataclass(slots=True)
class SearchStats:
    """How much of the table one search read (for tests and benchmarks)."""

    checked: int = 0
    walked: int = 0


class _Best:
    """The best ``limit`` candidates so far, by (score desc, seq asc)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._heap: list[tuple[float, int]] = []  # (score, -seq): the root is the worst kept

    def offer(self, value: float, seq: int) -> None:
        item = (value, -seq)
        if len(self._heap) < self._limit:
            heapq.heappush(self._heap, item)
        elif item > self._heap[0]:
            heapq.heapreplace(self._heap, item)

    @property
    def full(self) -> bool:
        return len(self._heap) >= self._limit

    def worst(self) -> tuple[float, int]:
        """The ``limit``-th candidate: (score, seq)."""
        value, negative_seq = self._heap[0]
        return value, -negative_seq

    def result(self) -> list[Candidate]:
        ranked = sorted(self._heap, reverse=True)
        return [Candidate(-negative_seq, value) for value, negative_seq in ranked]


def top_candidates(
    connection: Connection,
    query: ParsedQuery,
    limit: int,
    vocabulary: Vocabulary | None = None,
    stats: SearchStats | None = None,
) -> list[Candidate]:
    """The best ``limit`` entries for ``query``, ranked exactly as the reference ranks them.

    ``vocabulary`` carries what earlier searches learned about words (pass the
    same one for every search of a store); ``stats`` counts the rows read.
    """
    vocabulary = vocabulary if vocabulary is not None else Vocabulary()
    stats = stats if stats is not None else SearchStats()
    if limit == 0:
        return []
    best = _Best(limit)
    scores: dict[tuple[float, int, bool], float] = {}

    def exact(relevance: float, matches: int, tagged: bool) -> float:
        key = (relevance, matches, tagged)
        found = scores.get(key)
        if found is None:
            found = scores[key] = score(relevance, matches, query.word_count, tagged)
        return found

    selective_words, selective_tokens, dense_weight = _classify_words(connection, query, vocabulary)
    tag_value_ids, tag_dense = _classify_tag(connection, query.text)
    candidates = index.entries_with_terms(connection, index.TOKENS, selective_tokens)
    candidates |= index.entries_with_terms(connection, index.TAG_VALUES, tag_value_ids)
    checked: set[int] = set()
    for seq, relevance, matches, tagged in _check(
        connection, query, candidates, selective_words, tag_dense
    ):
        checked.add(seq)
        best.offer(exact(relevance, matches, tagged), seq)
    stats.checked += len(checked)

    # Unchecked entries hold no selective word and, unless the tag test is dense, no tag bonus.
    bound_matches, bound_tag = dense_weight, tag_dense
    test_words = dense_weight > 0
    cursor: tuple[float, int] | None = None
    chunk = min(max(FIRST_CHUNK, 4 * limit), _MAX_CHUNK)
    while True:
        floor = None
        if best.full:
            # Few rows pass the floor; return them a few at a time so that each
            # raises the floor for the rest of the scan.
            floor = _Floor.of(best, query.word_count, bound_matches, bound_tag)
            chunk = max(limit, _FILTERED_CHUNK)
        rows = _next_rows(
            connection, query, cursor, chunk, test_words=test_words, test_tag=tag_dense, floor=floor
        )
        stats.walked += len(rows)
        for seq, relevance, matches, tagged in rows:
            if seq not in checked:
                best.offer(exact(relevance, matches, tagged), seq)
        if len(rows) < chunk:
            return best.result()  # nothing left that could reach the limit-th score
        last_relevance, last_seq = rows[-1][1], rows[-1][0]
        cursor = (last_relevance, last_seq)
        if best.full:
            kth_score, kth_seq = best.worst()
            bound = exact(last_relevance, bound_matches, bound_tag)
            # Rows left with the same relevance come after last_seq: they lose any tie.
            if bound < kth_score or (bound == kth_score and last_seq >= kth_seq):
                below = _next_relevance_below(connection, last_relevance)
                if below is None or exact(below, bound_matches, bound_tag) < kth_score:
                    return best.result()
                cursor = (last_relevance, _MAX_SEQ)  # skip to the next relevance
        chunk = min(2 * chunk, _MAX_CHUNK)


# The binary32 score differs from the same sum in binary64 by a few units in the
# last place (< 1e-6 for scores below 2); the SQL filter keeps this much more.
_SCORE_MARGIN = 1e-5


@dataclass(frozen=True, slots=True)
class _Floor:
    """What a walked row needs to reach the limit-th score, widened by ``_SCORE_MARGIN``.

    ``score`` is tested in SQL (in binary64) so the rows that cannot reach it are
    never read; ``relevance`` bounds the index range: below it even the best case
    (every dense word, the tag bonus if possible) stays under the score.
    """

    score: float
    relevance: float
    word_count: int

    @classmethod
    def of(cls, best: _Best, word_count: int, bound_matches: int, bound_tag: bool) -> _Floor:
        kth_score, _ = best.worst()
        floor = kth_score - _SCORE_MARGIN
        rest = 0.4 * bound_matches / max(word_count, 1) + (0.3 if bound_tag else 0.0) + 0.1
        return cls(floor, (floor - rest) / 0.5, max(word_count, 1))


@dataclass(slots=True)
class _Word:
    scanned_through: int  # the highest token id already tested for this word
    token_ids: list[int] | None  # None: the word is dense


class Vocabulary:
    """What a store has learned about query words: their tokens, or that they are dense.

    Valid for the life of a database's token table: token ids only ever grow, so
    new tokens are found by scanning ids above what was seen, and a word's entry
    count only grows, so a dense word stays dense. Open a new store after
    rebuilding the schema underneath one.
    """

    MAX_WORDS = 50_000

    def __init__(self) -> None:
        self.words: dict[str, _Word] = {}

    def start_query(self) -> None:
        """Forget everything if too many words are kept (never in the middle of a query)."""
        if len(self.words) >= self.MAX_WORDS:
            self.words.clear()


def _classify_words(
    connection: Connection, query: ParsedQuery, vocabulary: Vocabulary
) -> tuple[list[str], list[int], int]:
    """The selective words, their token ids, and the total weight of the dense words."""
    top_id = int(connection.execute(select(func.coalesce(func.max(tokens.c.id), 0))).scalar_one())
    vocabulary.start_query()
    for word in query.words:
        if word not in vocabulary.words:
            # Assume selective: one scan finds its tokens, and their counts say if it is dense.
            vocabulary.words[word] = _Word(0, [])
    _find_new_tokens(connection, query.words, vocabulary, top_id)
    selective: list[str] = []
    token_ids: list[int] = []
    dense_weight = 0
    known_ids = {i for w in query.words for i in (vocabulary.words[w].token_ids or ())}
    counts = _entry_counts(connection, known_ids)
    for word, weight in zip(query.words, query.weights, strict=True):
        known = vocabulary.words[word]
        if known.token_ids is not None and (
            sum(counts.get(i, 0) for i in known.token_ids) > SELECTIVE_MAX
        ):
            known.token_ids = None  # it has grown dense
        if known.token_ids is None:
            dense_weight += weight
        else:
            selective.append(word)
            token_ids.extend(known.token_ids)
    return selective, token_ids, dense_weight


def _find_new_tokens(
    connection: Connection, words: Sequence[str], vocabulary: Vocabulary, top_id: int
) -> None:
    """Add the tokens with ids up to ``top_id`` not yet tested to each selective word."""
    pending = [
        word
        for word in words
        if vocabulary.words[word].token_ids is not None
        and vocabulary.words[word].scanned_through < top_id
    ]
    for group, _ in _word_groups(pending, (1,) * len(pending)):
        since = min(vocabulary.words[word].scanned_through for word in group)
        found = connection.execute(
            select(tokens.c.id, *(contains(tokens.c.token, word) for word in group)).where(
                tokens.c.id > since,
                tokens.c.id <= top_id,
                or_(*(contains(tokens.c.token, word) for word in group)),
            )
        ).all()
        for position, word in enumerate(group, start=1):
            known = vocabulary.words[word]
            if known.token_ids is None:  # pragma: no cover - pending holds selective words only
                continue
            known.token_ids.extend(
                row[0] for row in found if row[position] and row[0] > known.scanned_through
            )
            known.scanned_through = top_id


def _entry_counts(connection: Connection, token_ids: set[int]) -> dict[int, int]:
    if not token_ids:
        return {}
    rows = connection.execute(
        select(tokens.c.id, tokens.c.entries).where(
            tokens.c.id.in_(int_list(token_ids, connection.dialect))
        )
    )
    return {int(row[0]): int(row[1]) for row in rows}


def _classify_tag(connection: Connection, text: str) -> tuple[list[int], bool]:
    """Ids of the tag values that contain the query, or (nothing, True) if there are too many."""
    rows = connection.execute(
        select(tag_values.c.id, tag_values.c.entries).where(contains(tag_values.c.value, text))
    ).all()
    if sum(row.entries for row in rows) > SELECTIVE_MAX:
        return [], True
    return [row.id for row in rows], False


def _word_groups(
    words: Sequence[str], weights: Sequence[int]
) -> Iterable[tuple[Sequence[str], Sequence[int]]]:
    for start in range(0, len(words), _WORDS_PER_TERM):
        end = start + _WORDS_PER_TERM
        yield words[start:end], weights[start:end]


def _matches_column(query: ParsedQuery) -> list[ColumnElement[Any]]:
    """Columns whose sum is the weighted number of query words found in the memory."""
    columns: list[ColumnElement[Any]] = []
    for words, weights in _word_groups(query.words, query.weights):
        terms = [
            case((contains(entries.c.memory_lower, word), weight), else_=0)
            for word, weight in zip(words, weights, strict=True)
        ]
        total: ColumnElement[Any] = terms[0]
        for term in terms[1:]:
            total = total + term
        columns.append(total)
    return columns or [literal(0)]


def _tagged_column(text: str) -> ColumnElement[Any]:
    return exists().where(tags.c.entry_seq == entries.c.seq, contains(tags.c.tag_lower, text))


def _scored_rows(
    connection: Connection, statement: Select[Any]
) -> list[tuple[int, float, int, bool]]:
    return [(row[0], row[1], sum(row[3:]), bool(row[2])) for row in connection.execute(statement)]


def _check(
    connection: Connection,
    query: ParsedQuery,
    seqs: set[int],
    selective_words: Sequence[str],
    tag_dense: bool,
) -> list[tuple[int, float, int, bool]]:
    """(seq, relevance, matches, tagged) of these entries and of the tail entries that matter.

    In the unindexed tail, those are the entries that hold a selective word (or,
    unless the tag test is dense, a tag holding the query); the rest of the tail
    is like any unchecked entry, and the walk reads it.
    """
    columns = (
        entries.c.seq,
        entries.c.relevance,
        _tagged_column(query.text),
        *_matches_column(query),
    )
    tail_tests: list[ColumnElement[bool]] = [
        or_(*(contains(entries.c.memory_lower, word) for word in words))
        for words, _ in _word_groups(selective_words, (1,) * len(selective_words))
    ]
    if not tag_dense:
        tail_tests.append(_tagged_column(query.text))
    parts = []
    if tail_tests:
        parts.append(
            select(*columns).where(entries.c.seq > index.watermark(connection), or_(*tail_tests))
        )
    if seqs:
        parts.append(select(*columns).where(entries.c.seq.in_(int_list(seqs, connection.dialect))))
    if not parts:
        return []
    statement = parts[0] if len(parts) == 1 else union_all(*parts)
    return _scored_rows(connection, statement)  # type: ignore[arg-type]


def _next_rows(
    connection: Connection,
    query: ParsedQuery,
    cursor: tuple[float, int] | None,
    count: int,
    *,
    test_words: bool,
    test_tag: bool,
    floor: _Floor | None = None,
) -> list[tuple[int, float, int, bool]]:
    """The next ``count`` entries in (relevance desc, seq asc) order after ``cursor``.

    With a ``floor``, only entries that may reach its score, down to its relevance.
    """
    tagged = _tagged_column(query.text) if test_tag else literal(False)
    matches = _matches_column(query) if test_words else [literal(0)]
    columns = (entries.c.seq, entries.c.relevance, tagged, *matches)
    conditions: list[ColumnElement[bool]] = []
    if floor is not None:
        total = matches[0]
        for column in matches[1:]:
            total = total + column
        # 0.5·relevance + 0.4·matches/n + 0.3·tag + 0.1 >= score, solved for relevance:
        # no arithmetic on relevance itself, which PostgreSQL refuses to underflow.
        tag_bonus = case((tagged, 0.6), else_=0.0) if test_tag else literal(0.0)
        needed = 2 * (floor.score - 0.1) - (0.8 / floor.word_count) * total - tag_bonus
        conditions += [entries.c.relevance >= floor.relevance, entries.c.relevance >= needed]
    order = (entries.c.relevance.desc(), entries.c.seq)
    if cursor is None:
        statement = select(*columns).where(*conditions).order_by(*order).limit(count)
        return _scored_rows(connection, statement)
    relevance, seq = cursor
    rows = _scored_rows(
        connection,
        select(*columns)
        .where(entries.c.relevance == relevance, entries.c.seq > seq, *conditions)
        .order_by(entries.c.seq)
        .limit(count),
    )
    if len(rows) < count:
        rows += _scored_rows(
            connection,
            select(*columns)
            .where(entries.c.relevance < relevance, *conditions)
            .order_by(*order)
            .limit(count - len(rows)),
        )
    return rows


def _next_relevance_below(connection: Connection, relevance: float) -> float | None:
    value = connection.execute(
        select(func.max(entries.c.relevance)).where(entries.c.relevance < relevance)
    ).scalar_one_or_none()
    return None if value is None else float(value)
