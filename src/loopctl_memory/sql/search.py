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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Connection,
    and_,
    case,
    exists,
    false,
    func,
    literal,
    not_,
    or_,
    select,
    union_all,
)
from sqlalchemy.sql import Select

from loopctl_memory.scoring import ParsedQuery, score
from loopctl_memory.sql import index
from loopctl_memory.sql.backend import backend_of, contains
from loopctl_memory.sql.tables import entries, tags
from loopctl_memory.sql.tuning import Tuning
from loopctl_memory.sql.vocabulary import Vocabulary

_WORDS_PER_TERM = 60  # SQLite's parser limits expression depth to 1000
_FILTERED_CHUNK = 5
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
    vocabulary: Vocabulary,
    tuning: Tuning,
    *,
    stats: SearchStats | None = None,
) -> list[Candidate]:
    """The best ``limit`` entries for ``query``, ranked exactly as the reference ranks them.

    ``vocabulary`` carries what earlier searches learned about words (pass the
    same one for every search of a store); ``stats`` counts the rows read.
    """
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

    watermark = vocabulary.refresh(connection)
    selective = tuning.selective_max
    selective_words, selective_tokens, dense_weight = _classify_words(query, vocabulary, selective)
    tag_value_ids, tag_dense = _classify_tag(query.text, vocabulary, selective)
    candidates = index.entries_with_terms(connection, index.TOKENS, selective_tokens)
    tagged_seqs = index.entries_with_terms(connection, index.TAG_VALUES, tag_value_ids)
    candidates |= tagged_seqs

    # Unchecked entries hold no selective word and, unless the tag test is dense, no tag bonus.
    bound_matches, bound_tag = dense_weight, tag_dense
    test_words = dense_weight > 0
    chunk = min(max(tuning.first_chunk, 4 * limit), tuning.max_chunk)
    # The walk's first chunk comes before the check, scored in full (every word, the
    # tag test): the limit-th score it gives spares the check every candidate whose
    # relevance is too low to reach it.
    rows = _next_rows(
        connection,
        query,
        None,
        chunk,
        test_words=True,
        test_tag=True,
        tags_known_through=None if tag_dense else watermark,
    )
    stats.walked += len(rows)
    checked = {row[0] for row in rows}
    for seq, relevance, matches, tagged in rows:
        best.offer(exact(relevance, matches, tagged or seq in tagged_seqs), seq)
    if len(rows) < chunk:
        return best.result()  # that was every entry
    # A candidate may hold every word, and the tag only where a tag can hold the query.
    tag_possible = tag_dense or bool(tagged_seqs)
    found = _check(
        connection,
        query,
        candidates,
        selective_words,
        watermark=watermark,
        tag_dense=tag_dense,
        tagged_seqs=tagged_seqs,
        min_relevance=_Floor.of(best, query.word_count, query.word_count, tag_possible).relevance
        if best.full
        else None,
        skip=checked,
    )
    stats.checked += len(found)
    for seq, relevance, matches, tagged in found:
        checked.add(seq)
        best.offer(exact(relevance, matches, tagged), seq)

    while True:
        last_relevance, last_seq = cursor = (rows[-1][1], rows[-1][0])
        floor, level = None, None
        if best.full:
            kth_score, kth_seq = best.worst()
            bound = exact(last_relevance, bound_matches, bound_tag)
            # Rows left with the same relevance come after last_seq: they lose any tie.
            if bound < kth_score or (bound == kth_score and last_seq >= kth_seq):
                below = _next_relevance_below(connection, last_relevance)
                if below is None or exact(below, bound_matches, bound_tag) < kth_score:
                    return best.result()
                cursor = (last_relevance, _MAX_SEQ)  # skip to the next relevance
            # Few rows pass the floor; return them a few at a time so that each
            # raises the floor for the rest of the scan.
            floor = _Floor.of(best, query.word_count, bound_matches, bound_tag)
            level = _Level.of(exact, last_relevance, best.worst(), query.word_count, tag_dense)
            chunk = max(limit, _FILTERED_CHUNK)
        else:
            chunk = min(2 * chunk, tuning.max_chunk)
        rows = _next_rows(
            connection,
            query,
            cursor,
            chunk,
            test_words=test_words,
            test_tag=tag_dense,
            floor=floor,
            level=level,
        )
        stats.walked += len(rows)
        for seq, relevance, matches, tagged in rows:
            if seq not in checked:
                best.offer(exact(relevance, matches, tagged), seq)
        if len(rows) < chunk:
            return best.result()  # nothing left that could reach the limit-th score


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


@dataclass(frozen=True, slots=True)
class _Level:
    """What a row at the cursor's relevance needs to enter the best ``limit``, exactly.

    At one relevance the score only grows with the (weighted) matches, so for
    each tag state there is a least number of matches that beats the limit-th
    candidate (``win``) and one that ties it (``tie``, enough with a smaller
    seq). None: no number does. Scored in Python with the reference's binary32
    arithmetic, so the database compares integers only: rows that merely tie
    the limit-th score and lose on seq are never read.
    """

    win: tuple[int | None, int | None]  # by tagged: (False, True)
    tie: tuple[int | None, int | None]
    kth_seq: int

    @classmethod
    def of(
        cls,
        exact: Callable[[float, int, bool], float],
        relevance: float,
        kth: tuple[float, int],
        word_count: int,
        tag_tested: bool,
    ) -> _Level:
        kth_score, kth_seq = kth

        def least(tagged: bool, enough: Callable[[float], bool]) -> int | None:
            if tagged and not tag_tested:
                return None  # such rows are scored untagged
            return next(
                (m for m in range(word_count + 1) if enough(exact(relevance, m, tagged))), None
            )

        beats, ties = (lambda value: value > kth_score), (lambda value: value >= kth_score)
        return cls(
            (least(False, beats), least(True, beats)),
            (least(False, ties), least(True, ties)),
            kth_seq,
        )

    def condition(
        self, total: ColumnElement[Any], tagged: ColumnElement[Any]
    ) -> ColumnElement[bool] | None:
        """The rows that can enter, or None if none can."""
        states: list[ColumnElement[bool]] = []
        for state, (win, tie) in enumerate(zip(self.win, self.tie, strict=True)):
            enough: list[ColumnElement[bool]] = []
            if win is not None:
                enough.append(total >= win)
            if tie is not None and tie != win:
                enough.append(and_(total >= tie, entries.c.seq < self.kth_seq))
            if enough:
                states.append(and_(tagged if state else not_(tagged), or_(*enough)))
        return or_(*states) if states else None


def _classify_words(
    query: ParsedQuery, vocabulary: Vocabulary, selective_max: int
) -> tuple[list[str], list[int], int]:
    """The selective words, their token ids, and the total weight of the dense words."""
    selective: list[str] = []
    token_ids: list[int] = []
    dense_weight = 0
    for word, weight in zip(query.words, query.weights, strict=True):
        ids = None if word in vocabulary.dense else vocabulary.tokens.containing(word)
        if ids is not None and vocabulary.tokens.entries_with(ids) > selective_max:
            vocabulary.dense.add(word)
            ids = None
        if ids is None:
            dense_weight += weight
        else:
            selective.append(word)
            token_ids.extend(ids)
    return selective, token_ids, dense_weight


def _classify_tag(text: str, vocabulary: Vocabulary, selective_max: int) -> tuple[list[int], bool]:
    """Ids of the tag values that contain the query, or (nothing, True) if there are too many."""
    ids = vocabulary.tag_values.containing(text)
    if vocabulary.tag_values.entries_with(ids) > selective_max:
        return [], True
    return ids, False


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
    # all() fetches the rows in one call; iterating the result fetches them one by one.
    rows = connection.execute(statement).all()
    return [(row[0], row[1], sum(row[3:]), bool(row[2])) for row in rows]


def _check(
    connection: Connection,
    query: ParsedQuery,
    seqs: set[int],
    selective_words: Sequence[str],
    *,
    watermark: int,
    tag_dense: bool,
    tagged_seqs: set[int],
    min_relevance: float | None = None,
    skip: set[int] | frozenset[int] = frozenset(),
) -> list[tuple[int, float, int, bool]]:
    """(seq, relevance, matches, tagged) of these entries and of the tail entries that matter.

    ``min_relevance``: leave out the indexed entries below it (they cannot reach
    the score it was derived from). ``skip``: entries already scored.

    In the unindexed tail, those are the entries that hold a selective word (or,
    unless the tag test is dense, a tag holding the query); the rest of the tail
    is like any unchecked entry, and the walk reads it. Unless the tag test is
    dense, ``tagged_seqs`` names every indexed entry with a tag holding the query
    (its postings), so indexed entries skip the tags table.
    """
    tagged = _tagged_column(query.text)
    matches = _matches_column(query)
    tail_tests: list[ColumnElement[bool]] = [
        or_(*(contains(entries.c.memory_lower, word) for word in words))
        for words, _ in _word_groups(selective_words, (1,) * len(selective_words))
    ]
    if not tag_dense:
        tail_tests.append(tagged)
    parts = []
    if tail_tests:
        parts.append(
            select(entries.c.seq, entries.c.relevance, tagged, *matches).where(
                entries.c.seq > watermark, or_(*tail_tests)
            )
        )
    seqs = seqs - skip
    if seqs:
        indexed_tagged = tagged if tag_dense else literal(False)
        in_list = backend_of(connection).int_list(list(seqs))
        wanted: list[ColumnElement[bool]] = [entries.c.seq.in_(in_list)]
        if min_relevance is not None:
            wanted.append(entries.c.relevance >= min_relevance)
        parts.append(
            select(entries.c.seq, entries.c.relevance, indexed_tagged, *matches).where(*wanted)
        )
    if not parts:
        return []
    statement = parts[0] if len(parts) == 1 else union_all(*parts)
    rows = _scored_rows(connection, statement)  # type: ignore[arg-type]
    if skip:  # the tail's part may name them again
        rows = [row for row in rows if row[0] not in skip]
    if not tagged_seqs:
        return rows
    return [
        (seq, relevance, matches, tagged or seq in tagged_seqs)
        for seq, relevance, matches, tagged in rows
    ]


def _next_rows(
    connection: Connection,
    query: ParsedQuery,
    cursor: tuple[float, int] | None,
    count: int,
    *,
    test_words: bool,
    test_tag: bool,
    floor: _Floor | None = None,
    level: _Level | None = None,
    tags_known_through: int | None = None,
) -> list[tuple[int, float, int, bool]]:
    """The next ``count`` entries in (relevance desc, seq asc) order after ``cursor``.

    With a ``floor``, only entries that may reach its score, down to its relevance;
    with a ``level``, at the cursor's relevance only the rows it lets in. With
    ``tags_known_through``, the tag test runs only on the entries above it (the
    caller knows the others' from the tag postings) and reads False on them.
    """
    tagged = _tagged_column(query.text) if test_tag else literal(False)
    if test_tag and tags_known_through is not None:
        tagged = and_(entries.c.seq > tags_known_through, tagged)
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
    same_level = [entries.c.relevance == relevance, entries.c.seq > seq]
    if level is not None:
        total = matches[0]
        for column in matches[1:]:
            total = total + column
        entering = level.condition(total, tagged)
        same_level.append(entering if entering is not None else false())
    else:
        same_level += conditions
    rows = _scored_rows(
        connection,
        select(*columns).where(*same_level).order_by(entries.c.seq).limit(count),
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
