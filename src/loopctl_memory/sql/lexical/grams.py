"""The trigram index of the token vocabulary: which tokens contain a query word, without a scan.

The reference ranking needs, for each query word, every token that contains
it. A vocabulary of agent memories grows with the store (ids, hashes, paths),
so a scan of it costs each query word time in proportion to the store, and
reading it costs every new process its whole size. Instead, indexing keeps,
for each trigram, the ids of the tokens that hold it:

* A token of ``n`` code points has ``n`` trigrams: those of the token followed
  by two end marks, code points no text holds, so each of its positions
  starts one. A trigram is one integer (three 21-bit code points).
* Each indexing adds, for every trigram of the tokens it created, a row:
  the trigram, the first token id, the count, and the ids (ascending, as
  gaps of the narrowest width of 1, 2 or 4 bytes that holds them). Term ids
  only grow, so a trigram's rows in ``first_id`` order list its tokens in id
  order.

A word of three code points is exactly the tokens of its trigram; a longer one
is among those of its rarest trigrams, and each candidate's text is checked.
A word of one or two code points is in a large share of the tokens: its
entries come from its own rows instead (:mod:`~loopctl_memory.sql.lexical.pieces`).

The writing half runs in the indexing transaction (a synchronous connection);
the reading half, :class:`TokenFinder`, in a retrieval's read transaction.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
from sqlalchemy import Connection

from loopctl_memory.sql.backend import Reader, backend_of
from loopctl_memory.sql.lexical.arrays import distinct, run_positions, seq_type

Ints = npt.NDArray[np.int64]

_BITS = 21  # a code point: at most 0x10FFFF
_END = 0x110000  # above every code point: the marks after each token
_GRAMS_TO_INTERSECT = 3  # a long word's rarest trigrams read
_PER_STATEMENT = 10_000  # bound parameters, under SQLite's limit
_FOUND_BYTES = 16 * 2**20  # token ids a process keeps of the words it looked up
_IDS_AT_ONCE = 1_000_000  # token ids of trigram rows read together, a few times their bytes
_INSERT = "INSERT INTO token_grams (gram, first_id, count, ids) VALUES (?, ?, ?, ?)"


def gram_codes(text: str) -> list[int]:
    """The trigrams of a query word of three code points or more, as integers, in order."""
    points = [ord(character) for character in text]
    return [
        (points[n] << 2 * _BITS) | (points[n + 1] << _BITS) | points[n + 2]
        for n in range(len(points) - 2)
    ]


def token_trigrams(ids: Ints, texts: list[str]) -> tuple[Ints, Ints]:
    """Each distinct (trigram, token id) of the tokens, sorted by trigram then id.

    ``ids[n]`` names ``texts[n]``, ascending; every token has at least one code point.
    """
    lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    points = np.frombuffer("".join(texts).encode("utf-32-le", "surrogatepass"), "<u4")
    # Each token, then its two end marks, one after the other.
    padded_starts = np.concatenate(([0], np.cumsum(lengths + 2)[:-1]))
    padded = np.full(int(lengths.sum()) + 2 * len(texts), _END, np.int64)
    owner = np.repeat(np.arange(len(texts)), lengths)
    where = np.arange(len(points)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    where += padded_starts[owner]
    padded[where] = points
    grams = (padded[where] << 2 * _BITS) | (padded[where + 1] << _BITS) | padded[where + 2]
    token_ids = ids[owner]
    order = np.argsort(grams, kind="stable")  # ids ascending within a trigram, as given
    grams, token_ids = grams[order], token_ids[order]
    fresh = np.ones(len(grams), np.bool_)
    fresh[1:] = (grams[1:] != grams[:-1]) | (token_ids[1:] != token_ids[:-1])
    return grams[fresh], token_ids[fresh]


def add_tokens(connection: Connection, created: dict[str, int]) -> None:
    """Index the trigrams of tokens this transaction created (token -> id); one row a trigram."""
    if not created:
        return
    ordered = sorted(created.items(), key=lambda pair: pair[1])
    texts = [text for text, _ in ordered]
    ids = np.fromiter((number for _, number in ordered), np.int64, len(ordered))
    grams, token_ids = token_trigrams(ids, texts)
    cuts = np.flatnonzero(grams[1:] != grams[:-1]) + 1
    starts, ends = np.concatenate(([0], cuts)), np.append(cuts, len(grams))
    # Each row's gaps, in the narrowest width that holds its largest: 1, 2 or 4 bytes.
    gaps = np.diff(token_ids, append=token_ids[-1])  # a row's last gap crosses to the next
    gaps[ends - 1] = 0
    widest = np.maximum.reduceat(gaps, starts)
    widths = np.where(widest < 1 << 8, 1, np.where(widest < 1 << 16, 2, 4)).tolist()
    by_width = {width: gaps.astype(f"<u{width}").tobytes() for width in set(widths)}
    rows = [
        (
            gram,
            first,
            end - start,
            bytes((width,)) + by_width[width][start * width : (end - 1) * width]
            if end - start > 1
            else b"",
        )
        for gram, first, start, end, width in zip(
            grams[starts].tolist(),
            token_ids[starts].tolist(),
            starts.tolist(),
            ends.tolist(),
            widths,
            strict=True,
        )
    ]
    connection.exec_driver_sql(backend_of(connection).sql(_INSERT), rows)


def _decoded(rows: list[tuple[int, bytes]]) -> tuple[Ints, Ints]:
    """The token ids of rows of ``(first_id, ids)``, row after row, and how many each holds.

    One pass of numpy over all the rows (see :func:`add_tokens` for the layout):
    a common trigram has a row for each indexing that created tokens holding it.
    """
    firsts = np.fromiter((first for first, _ in rows), np.int64, len(rows))
    widths = np.fromiter((packed[0] if packed else 1 for _, packed in rows), np.int64, len(rows))
    sizes = np.fromiter((len(packed) for _, packed in rows), np.int64, len(rows))
    counts = np.where(sizes > 0, (sizes - 1) // widths, 0) + 1
    starts = np.cumsum(counts) - counts
    values = np.empty(int(counts.sum()), np.int64)
    values[starts] = firsts
    for width in np.unique(widths).tolist():
        of_width = np.flatnonzero((widths == width) & (counts > 1))
        if not len(of_width):
            continue
        joined = b"".join(rows[n][1][1:] for n in of_width.tolist())
        lengths = counts[of_width] - 1
        values[run_positions(starts[of_width] + 1, lengths)] = np.frombuffer(joined, f"<u{width}")
    running = np.cumsum(values, out=values)
    # Each row's sums start again from its first id.
    running -= np.repeat(running[starts] - firsts, counts)
    return running, counts


class TokenFinder:
    """The ids of the tokens that contain each query word, looked up in the trigram index.

    Words are looked up in batches (:meth:`look_up`), a few statements for a
    whole query however many words it has, and the answers kept for the next
    queries within a budget. New tokens come only with newly indexed blocks: the
    caller then calls :meth:`forget`. Not thread-safe, like the state that
    holds it.
    """

    def __init__(self, budget: int = _FOUND_BYTES) -> None:
        self._budget = budget
        self._found: OrderedDict[str, npt.NDArray[np.signedinteger[Any]]] = OrderedDict()
        self._bytes = 0
        # Trigram -> its tokens: words of one query (or of the next) share common trigrams.
        self._lists: OrderedDict[int, npt.NDArray[np.signedinteger[Any]]] = OrderedDict()
        self._list_bytes = 0

    def forget(self) -> None:
        """Drop what was found: the vocabulary grew."""
        self._found.clear()
        self._bytes = 0
        self._lists.clear()
        self._list_bytes = 0

    def look_up(self, reader: Reader, words: Iterable[str]) -> dict[str, Ints]:
        """The ids of the tokens that contain each word (three code points or more), ascending.

        What is not yet known is read for the whole batch at once.
        """
        wanted = list(dict.fromkeys(words))
        found = {word: self._found[word].astype(np.int64) for word in wanted if word in self._found}
        for word in found:
            self._found.move_to_end(word)
        missing = [word for word in wanted if word not in found]
        if missing:
            found.update(self._of_long(reader, missing))
        for word in missing:
            self._keep(word, found[word])
        return found

    def _keep(self, word: str, ids: Ints) -> None:
        kept = _narrow(ids)
        self._found[word] = kept
        self._bytes += kept.nbytes
        while self._bytes > self._budget and self._found:
            _, dropped = self._found.popitem(last=False)
            self._bytes -= dropped.nbytes

    def _of_long(self, reader: Reader, words: list[str]) -> dict[str, Ints]:
        grams_of = {word: gram_codes(word) for word in words}
        counts = _counts(reader, {gram for grams in grams_of.values() for gram in grams})
        chosen = {
            word: sorted(set(grams), key=lambda gram: counts.get(gram, 0))[:_GRAMS_TO_INTERSECT]
            for word, grams in grams_of.items()
        }
        # Words whose trigram rows name at most _IDS_AT_ONCE ids are found together: memory
        # stays bounded, however many words (a whole prompt) come at once.
        found: dict[str, Ints] = {}
        group: list[str] = []
        held = 0
        for word in words:
            size = sum(counts.get(gram, 0) for gram in chosen[word])
            if group and held + size > _IDS_AT_ONCE:
                found.update(self._found_together(reader, {each: chosen[each] for each in group}))
                group, held = [], 0
            group.append(word)
            held += size
        found.update(self._found_together(reader, {each: chosen[each] for each in group}))
        return found

    def _found_together(self, reader: Reader, chosen: dict[str, list[int]]) -> dict[str, Ints]:
        """The tokens holding each word, from the rows of its ``chosen`` trigrams (all held)."""
        return _intersected(reader, chosen, self._gram_lists(reader, chosen))

    def _gram_lists(self, reader: Reader, chosen: dict[str, list[int]]) -> dict[int, Ints]:
        """The tokens holding each trigram ``chosen`` names: kept ones, then the rest read."""
        wanted = {gram for grams in chosen.values() for gram in grams}
        lists = {gram: self._lists[gram].astype(np.int64) for gram in wanted if gram in self._lists}
        for gram in lists:
            self._lists.move_to_end(gram)
        for gram, ids in _lists(reader, wanted - lists.keys()).items():
            lists[gram] = ids
            self._lists[gram] = kept = _narrow(ids)
            self._list_bytes += kept.nbytes
        while self._list_bytes > self._budget // 2 and self._lists:
            _, dropped = self._lists.popitem(last=False)
            self._list_bytes -= dropped.nbytes
        return lists


def _narrow(ids: Ints) -> npt.NDArray[np.signedinteger[Any]]:
    """A copy of ``ids`` to keep: int32 while they fit (half the memory), never a view.

    A view would keep a whole batch's rows alive.
    """
    narrowed: npt.NDArray[np.signedinteger[Any]] = ids.astype(
        seq_type(int(ids[-1]) if len(ids) else 0)
    )
    return narrowed


def _intersected(
    reader: Reader, chosen: dict[str, list[int]], lists: dict[int, Ints]
) -> dict[str, Ints]:
    """The tokens holding each word: those of all its ``chosen`` trigrams, then checked."""
    candidates: dict[str, Ints] = {}
    for word, grams in chosen.items():
        held = [lists.get(gram, _NONE) for gram in grams]
        held.sort(key=len)
        ids = held[0]
        for other in held[1:]:
            ids = ids[np.isin(ids, other, assume_unique=True)]
        candidates[word] = ids
    return _checked(reader, candidates)


_NONE: Ints = np.empty(0, np.int64)


def _rows_in(reader: Reader, statement: str, values: set[int]) -> Iterator[Any]:
    """The rows of ``statement`` (its ``{}`` an IN list) for ``values``, a chunk at a time."""
    ordered = sorted(values)
    for start in range(0, len(ordered), _PER_STATEMENT):
        chunk = ordered[start : start + _PER_STATEMENT]
        yield from reader.all(statement.format(", ".join("?" * len(chunk))), chunk)


def _counts(reader: Reader, grams: set[int]) -> dict[int, int]:
    """How many tokens hold each trigram (absent: none)."""
    statement = "SELECT gram, sum(count) FROM token_grams WHERE gram IN ({}) GROUP BY gram"
    return {int(gram): int(count) for gram, count in _rows_in(reader, statement, grams)}


def _lists(reader: Reader, grams: set[int]) -> dict[int, Ints]:
    """The ids of the tokens holding each trigram, ascending."""
    statement = (
        "SELECT gram, first_id, ids FROM token_grams WHERE gram IN ({}) ORDER BY gram, first_id"
    )
    rows = list(_rows_in(reader, statement, grams))
    ids, counts = _decoded([(int(first), bytes(packed)) for _, first, packed in rows])
    # Rows come by trigram: each trigram's ids are one stretch of ``ids``.
    of_row = np.fromiter((gram for gram, _, _ in rows), np.int64, len(rows))
    firsts = np.flatnonzero(np.diff(of_row, prepend=-1)) if rows else np.empty(0, np.int64)
    bounds = np.append(np.cumsum(counts)[firsts] - counts[firsts], len(ids))
    return {
        int(of_row[row]): ids[low:high]
        for row, low, high in zip(
            firsts.tolist(), bounds[:-1].tolist(), bounds[1:].tolist(), strict=True
        )
    }


def _checked(reader: Reader, candidates: dict[str, Ints]) -> dict[str, Ints]:
    """Of each word's candidates, the tokens that do contain it (a word of 3: all of them).

    The candidates of every word are read once, a chunk of ids at a time, so the
    texts in memory stay bounded however many words and candidates there are.
    """
    long = {word: ids for word, ids in candidates.items() if len(word) > 3 and len(ids)}
    if not long:
        return candidates
    joined = np.concatenate(list(long.values()))
    every = distinct(joined, int(joined.max()) + 1)
    firsts = every[::_PER_STATEMENT]
    # For each chunk of ids: the words with candidates in it, and where they lie.
    by_chunk: list[list[tuple[str, int, int]]] = [[] for _ in firsts]
    for word, ids in long.items():
        cuts = np.append(np.searchsorted(ids, firsts), len(ids)).tolist()
        for chunk, (low, high) in enumerate(itertools.pairwise(cuts)):
            if high > low:
                by_chunk[chunk].append((word, low, high))
    kept: dict[str, list[int]] = {word: [] for word in long}
    decode = reader.backend.decode
    statement = "SELECT id, token FROM tokens WHERE id IN ({})"
    for chunk, start in enumerate(range(0, len(every), _PER_STATEMENT)):
        numbers = every[start : start + _PER_STATEMENT].tolist()
        rows = reader.all(statement.format(", ".join("?" * len(numbers))), numbers)
        texts = {int(number): decode(token) for number, token in rows}
        for word, low, high in by_chunk[chunk]:
            kept[word] += [n for n in long[word][low:high].tolist() if word in texts[n]]
    return {
        word: np.array(kept[word], np.int64) if word in long else ids
        for word, ids in candidates.items()
    }
