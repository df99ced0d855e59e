"""What a store keeps in memory for its searches: the vocabularies of tokens and tag values.

A search asks which terms contain a word and how many entries those terms are
in, without a query: both vocabularies are loaded once and then brought up to
date by reading only what was added since.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable

from sqlalchemy import ColumnElement, Connection, Table, select

from loopctl_memory.sql import index
from loopctl_memory.sql.tables import tag_values, tokens

_REMEMBERED_WORDS = 4_096  # words whose matching terms a vocabulary keeps
_REMEMBERED_IDS = 10_000  # at most this many terms each


class _Terms:
    """One vocabulary table in memory: its terms, and how many entries hold each.

    Every term followed by a newline, in one string, searched with ``str.find``;
    a hit counts only if it ends inside its term, so any text may be sought (a
    query word, which has no whitespace, never spans two terms anyway). Terms
    are only ever added, with growing ids, so the copy is brought up to date by
    reading the ids above the last one seen. Entry counts grow when a block is
    indexed, so they are read again when the watermark moves.
    """

    def __init__(self, table: Table, term: ColumnElement[str]) -> None:
        self._table = table
        self._term = term
        self._text = ""
        self._starts = array("q")  # where each term starts in _text
        self._ids = array("q")  # its id
        self._loaded_through = 0
        self._counts: dict[int, int] = {}  # term id -> entries indexed with it
        self._counted_at: int | None = None  # the watermark the counts were read at
        # text -> (how much of _text was searched, the ids found there): a word asked
        # again only searches the terms added since.
        self._found: dict[str, tuple[int, list[int]]] = {}

    def refresh(self, connection: Connection, mark: int) -> None:
        """Read what changed since the last refresh, as this transaction sees it."""
        term_id, term, count = self._table.c.id, self._term, self._table.c.entries
        rows = connection.execute(
            select(term_id, term, count).where(term_id > self._loaded_through).order_by(term_id)
        ).all()
        # Another search may have read some of them while this one waited.
        fresh = [row for row in rows if row[0] > self._loaded_through]
        if fresh:
            offset = len(self._text)
            for number, text, entries_with in fresh:
                self._starts.append(offset)
                self._ids.append(number)
                self._counts[number] = entries_with
                offset += len(text) + 1
            self._text += "".join(f"{text}\n" for _, text, _ in fresh)
            self._loaded_through = fresh[-1][0]
        if mark != self._counted_at:
            if self._counted_at is not None:  # blocks were indexed since: counts grew
                self._counts = {
                    int(number): int(entries_with)
                    for number, entries_with in connection.execute(select(term_id, count))
                }
            self._counted_at = mark

    def containing(self, text: str) -> list[int]:
        """The ids of every loaded term that contains ``text``."""
        whole = self._text  # a refresh in another thread may replace it meanwhile
        searched, found = self._found.get(text, (0, []))
        if searched < len(whole):
            found = found + self._containing(text, whole, searched)
            if len(found) <= _REMEMBERED_IDS:
                if len(self._found) >= _REMEMBERED_WORDS:
                    self._found.clear()
                self._found[text] = (len(whole), found)
        return found

    def _containing(self, text: str, whole: str, start: int) -> list[int]:
        """The ids of the terms of ``whole`` from ``start`` (a term's start) that hold ``text``."""
        found: list[int] = []
        starts, size = self._starts, len(text)
        position = whole.find(text, start)
        while position != -1:
            number = bisect.bisect_right(starts, position) - 1
            following = number + 1
            end = starts[following] - 1 if following < len(starts) else len(whole) - 1
            if position + size <= end:
                found.append(self._ids[number])
                if following == len(starts):
                    break
                position = whole.find(text, starts[following])  # one id per term
            else:  # the hit runs past its term: look further on
                position = whole.find(text, position + 1)
        return found

    def entries_with(self, term_ids: Iterable[int]) -> int:
        """At most how many indexed entries hold one of these terms."""
        counts = self._counts
        return sum(counts.get(term_id, 0) for term_id in term_ids)


class Vocabulary:
    """What a store keeps in memory for its searches: the tokens, the tag values, dense words.

    Counts only decide whether a word is enumerated or bounded, and either is
    exact, so a count from another moment costs time, never correctness. A word
    once found dense stays dense. Open a new store after rebuilding the schema
    underneath one.
    """

    MAX_DENSE = 50_000

    def __init__(self) -> None:
        self.tokens = _Terms(tokens, tokens.c.token)
        self.tag_values = _Terms(tag_values, tag_values.c.value)
        self.dense: set[str] = set()

    def refresh(self, connection: Connection) -> int:
        """Bring both vocabularies up to date for this transaction; return the watermark."""
        mark = index.watermark(connection)
        self.tokens.refresh(connection, mark)
        self.tag_values.refresh(connection, mark)
        if len(self.dense) >= self.MAX_DENSE:
            self.dense.clear()
        return mark
