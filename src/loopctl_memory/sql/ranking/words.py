"""BM25's word postings in a process: which entries hold each word, how often, and their lengths.

The second posting family of the ranking state (the first, tokens, serves the
reference ranking). The indexed blocks' word postings come from the database
with their counts (:mod:`loopctl_memory.sql.lexical.index`); the tail above the
watermark and the entries rewritten since they were indexed are cut into words
here, from their current text. Each entry's document length comes with the
blocks' postings, or from its words where it is cut here.

The state loads this family on the first BM25 retrieval and from then on
keeps it current through the same refresh as the rest (new blocks, the tail,
the change log), so a process that never ranks by BM25 never pays for it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical import index
from loopctl_memory.sql.lexical.segments import Segment, Seqs, load_segment

Tallies = npt.NDArray[np.integer[Any]]
"""How many times each entry holds a word (bytes while every count fits)."""
Lengths = npt.NDArray[np.int32]
"""Document lengths by seq (four bytes each: half the memory a gather reads of eight)."""
Document = tuple[int, str, list[str]]
"""(seq, lowercase memory, lowercase tags in order)."""

_ROWS_PER_FETCH = 8_192


class WordIndex:
    """The word postings of every entry up to the state's highest seq, kept current."""

    def __init__(self) -> None:
        self._ids: dict[str, int] = {}
        self._ids_read = 0  # the highest word id read
        self.mark = 0
        self._segments: list[Segment] = []
        self.lengths: Lengths = np.zeros(1, np.int32)
        """Each entry's document length, by seq (0 where none lives)."""
        self._tail_through = 0
        self._tail: dict[str, tuple[list[int], list[int]]] = {}
        # Entries rewritten since indexed: their words now; their postings are stale.
        self._rewritten: dict[int, dict[str, int]] = {}
        self._rewritten_by_word: dict[str, set[int]] = {}
        self._stale: npt.NDArray[np.bool_] = np.zeros(1, np.bool_)
        self.statistics: dict[object, tuple[int, int, int]] = {}
        """BM25's (seqs counted, N, total length) by (state position, scope), for the ranker."""
        self._sums: npt.NDArray[np.float64] = np.zeros(0, np.float64)
        self._chosen: npt.NDArray[np.bool_] = np.zeros(0, np.bool_)

    def sums(self, size: int) -> npt.NDArray[np.float64]:
        """BM25's dense scores by seq for ``size`` seqs: all zero, and to be left all zero."""
        if len(self._sums) < size:
            self._sums = np.zeros(max(size, 2 * len(self._sums)), np.float64)
        return self._sums[:size]

    def chosen(self, size: int) -> npt.NDArray[np.bool_]:
        """BM25's dense marks by seq for ``size`` seqs: all false, and to be left all false."""
        if len(self._chosen) < size:
            self._chosen = np.zeros(max(size, 2 * len(self._chosen)), np.bool_)
        return self._chosen[:size]

    # --- keeping current (called by the ranking state) ---

    def load(self, connection: Reader, mark: int, top: int, rewritten: list[Document]) -> None:
        """Read the blocks up to ``mark`` and the tail up to ``top``; hold ``rewritten`` as now."""
        self._grow(top)
        self.add_blocks(connection, mark, top)
        for seq, memory, tags in rewritten:
            self.rewrite(seq, memory, tags)

    def add_blocks(self, connection: Reader, mark: int, top: int) -> None:
        """Read the blocks newly indexed up to ``mark``; read the tail above it again."""
        self._grow(max(top, mark))
        self._read_ids(connection)
        lengths = self.lengths
        lengths[self.mark + 1 : self._tail_through + 1] = 0  # the old tail's, now in the blocks
        segment = load_segment(connection, index.WORDS, self.mark, mark, lengths_into=lengths)
        self._segments.append(segment)
        self.mark = mark
        self._tail = {}
        self._tail_through = mark
        self.read_tail(connection, max(top, mark))
        for seq, held in self._rewritten.items():
            lengths[seq] = sum(held.values())

    def read_tail(self, connection: Reader, through: int) -> None:
        """Cut the entries stored above the tail read so far, up to ``through``, into words."""
        if through <= self._tail_through:
            return
        self._grow(through)
        window = (self._tail_through, through)
        decode = connection.backend.decode
        texts: dict[int, str] = {}
        for rows in connection.chunks(
            "SELECT seq, memory_lower FROM entries WHERE seq > ? AND seq <= ?",
            window,
            _ROWS_PER_FETCH,
        ):
            texts.update((int(seq), decode(text)) for seq, text in rows)
        tags: dict[int, list[str]] = {}
        for rows in connection.chunks(
            "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > ? AND entry_seq <= ? "
            "ORDER BY entry_seq, position",
            window,
            _ROWS_PER_FETCH,
        ):
            for seq, tag in rows:
                tags.setdefault(int(seq), []).append(decode(tag))
        tail, lengths = self._tail, self.lengths
        for seq in sorted(texts):
            held = index.word_counts(texts[seq], tags.get(seq, []))
            lengths[seq] = sum(held.values())
            for word, times in held.items():
                found = tail.get(word)
                if found is None:
                    tail[word] = ([seq], [times])
                else:
                    found[0].append(seq)
                    found[1].append(times)
        self._tail_through = through

    def rewrite(self, seq: int, memory_lower: str, tags_lower: Iterable[str]) -> None:
        """Entry ``seq`` holds this lowercase memory and these tags from now on."""
        self.forget(seq)
        self._grow(seq)
        held = index.word_counts(memory_lower, tags_lower)
        self._rewritten[seq] = held
        for word in held:
            self._rewritten_by_word.setdefault(word, set()).add(seq)
        self._stale[seq] = True
        self.lengths[seq] = sum(held.values())

    def forget(self, seq: int) -> None:
        """Entry ``seq`` was removed (or is about to be held anew)."""
        held = self._rewritten.pop(seq, None)
        for word in held or ():
            holders = self._rewritten_by_word[word]
            holders.discard(seq)
            if not holders:
                del self._rewritten_by_word[word]

    def _grow(self, through: int) -> None:
        if len(self.lengths) <= through:
            size = max(through + 1, 2 * len(self.lengths))
            lengths = np.zeros(size, np.int32)
            lengths[: len(self.lengths)] = self.lengths
            stale = np.zeros(size, np.bool_)
            stale[: len(self._stale)] = self._stale
            self.lengths, self._stale = lengths, stale

    def _read_ids(self, connection: Reader) -> None:
        decode = connection.backend.decode
        rows = connection.all(
            "SELECT id, word FROM words WHERE id > ? ORDER BY id", (self._ids_read,)
        )
        for number, word in rows:
            self._ids[decode(word)] = int(number)
        if rows:
            self._ids_read = int(rows[-1][0])

    # --- looking up ---

    def postings(self, word: str) -> tuple[Seqs, Tallies]:
        """The seqs (ascending) of the entries whose document holds ``word`` now, and how often.

        Removed entries may be among them (the caller keeps the live ones); each
        live entry comes once, with its current count.
        """
        seqs: list[Seqs] = []
        counts: list[Tallies] = []
        number = self._ids.get(word)
        if number is not None:
            for segment in self._segments:
                run = segment.run_of(number)
                if run is not None:
                    seqs.append(run[0])
                    counts.append(run[1])
        in_tail = self._tail.get(word)
        if in_tail is not None:
            seqs.append(np.array(in_tail[0], np.int64))
            counts.append(np.array(in_tail[1], np.int32))
        found, times = _joined(seqs, np.int64), _joined(counts, np.int32)
        if self._rewritten:
            current = ~self._stale[found]
            found, times = found[current], times[current]
            holders = sorted(self._rewritten_by_word.get(word, ()))
            if holders:
                held = [self._rewritten[seq][word] for seq in holders]
                found = np.concatenate((found, np.array(holders, np.int64)))
                times = np.concatenate((times, np.array(held, np.int32)))
                order = np.argsort(found, kind="stable")
                found, times = found[order], times[order]
        return found, times


def _joined(parts: list[Any], empty: type[np.integer[Any]]) -> Any:
    """The parts one after the other (the one part itself, without a copy)."""
    if len(parts) == 1:
        return parts[0]
    return np.concatenate(parts) if parts else np.empty(0, empty)
