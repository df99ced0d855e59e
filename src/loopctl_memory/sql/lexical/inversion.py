"""A block's postings built from its entries in a few array passes: which seqs hold each term.

Indexing a block turns thousands of entries into postings for three
vocabularies: whitespace tokens (the reference ranking), lowercase tags (its
tag bonus and the tag filters) and BM25 words. Each entry costs one C-level
split of its text; every later step (naming the terms, removing repeats,
counting, ordering) is a numpy pass over all the block's occurrences at once,
where a loop a term would cost more than writing the block.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from loopctl_memory.bm25_tokens import WORD, stems_of
from loopctl_memory.scoring import split_whitespace

Ints = npt.NDArray[np.int64]

Document = tuple[int, str, list[str]]
"""An entry to index: its seq, its lowercase memory, its lowercase tags in order."""


@dataclass(frozen=True, slots=True)
class BlockPostings:
    """The postings of one vocabulary for some entries, term by term, each term's seqs ascending.

    Posting ``n`` says entry ``seqs[n]`` holds ``terms[term_of[n]]``,
    ``counts[n]`` times (which only BM25 words keep: the other vocabularies
    name an entry once, however often it holds the term).
    """

    terms: list[str]
    """The distinct terms, in no particular order."""
    term_of: Ints
    seqs: Ints
    counts: Ints

    def entries_per_term(self) -> Ints:
        """How many seqs hold each term, in the order of ``terms``."""
        return np.bincount(self.term_of, minlength=len(self.terms))

    def by_term(self) -> dict[str, list[int]]:
        """Term -> its seqs, ascending (for tests and small callers)."""
        held: dict[str, list[int]] = {}
        for term, seq in zip(self.term_of.tolist(), self.seqs.tolist(), strict=True):
            held.setdefault(self.terms[term], []).append(seq)
        return held


@dataclass(frozen=True, slots=True)
class DocumentLengths:
    """How many BM25 words each document holds: those with at least one, ascending by seq."""

    seqs: Ints
    lengths: Ints


@dataclass(frozen=True, slots=True)
class Block:
    """A block's postings in each vocabulary, and its documents' lengths."""

    tokens: BlockPostings
    tags: BlockPostings
    words: BlockPostings
    lengths: DocumentLengths


def invert_block(texts: Sequence[tuple[int, str]], tag_values: Sequence[tuple[int, str]]) -> Block:
    """The token, tag and BM25 word postings of a block's entries, and each document's length.

    ``texts``: (seq, lowercase memory); ``tag_values``: (seq, lowercase tag),
    an entry's tags in their order. Each memory is split into whitespace
    tokens once; a document's BM25 words are those of its tokens, in order, then
    those of its tags (whitespace is no word character, so no word runs across
    a token's end), so each distinct token and tag value is cut into words,
    stemmed or dropped only once, and every occurrence takes its words from it.
    """
    pieces = [split_whitespace(text) for _, text in texts]
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    seq_of = np.repeat(np.fromiter((seq for seq, _ in texts), np.int64, len(texts)), sizes)
    tokens, token_of = _numbered(list(itertools.chain.from_iterable(pieces)))
    values, value_of = _numbered([value for _, value in tag_values])
    value_seqs = np.fromiter((seq for seq, _ in tag_values), np.int64, len(tag_values))
    stems, (token_words, value_words) = _stemmed((tokens, values))
    word_of, word_seqs = _expanded(token_words, token_of, seq_of)
    tag_word_of, tag_word_seqs = _expanded(value_words, value_of, value_seqs)
    word_of = np.concatenate((word_of, tag_word_of))
    word_seqs = np.concatenate((word_seqs, tag_word_seqs))
    held = np.unique(word_seqs, return_counts=True)
    return Block(
        tokens=_postings(tokens, token_of, seq_of),
        tags=_postings(values, value_of, value_seqs),
        words=_postings(stems, word_of, word_seqs),
        lengths=DocumentLengths(held[0], held[1].astype(np.int64)),
    )


def invert_tags(values: Sequence[tuple[int, str]]) -> BlockPostings:
    """The tag postings of each (seq, lowercase tag): an entry with a tag twice is named once."""
    return invert_block([], values).tags


def _numbered(occurrences: list[str]) -> tuple[list[str], Ints]:
    """The distinct strings in first-seen order, and each occurrence's number among them."""
    distinct = list(dict.fromkeys(occurrences))
    number = dict(zip(distinct, range(len(distinct)), strict=True))
    return distinct, np.fromiter(map(number.__getitem__, occurrences), np.int64, len(occurrences))


@dataclass(frozen=True, slots=True)
class _Words:
    """The BM25 words of each of some strings, as numbers among the stems.

    String ``n``'s are ``stems[starts[n]:starts[n] + counts[n]]``.
    """

    stems: Ints
    starts: Ints
    counts: Ints


def _stemmed(groups: tuple[list[str], ...]) -> tuple[list[str], list[_Words]]:
    """The distinct stems of the strings of every group, and each group's strings' words."""
    cut = [[_words_of(text) for text in texts] for texts in groups]
    flats = [list(itertools.chain.from_iterable(words)) for words in cut]
    stem_of = stems_of(set(itertools.chain.from_iterable(flats)))
    terms = sorted({stem for stem in stem_of.values() if stem is not None})
    number = {stem: n for n, stem in enumerate(terms)}
    index_of = {word: -1 if stem is None else number[stem] for word, stem in stem_of.items()}
    held = []
    for words, flat in zip(cut, flats, strict=True):
        counts = np.fromiter(map(len, words), np.int64, len(words))
        stems = np.fromiter(map(index_of.__getitem__, flat), np.int64, len(flat))
        kept = stems >= 0  # a stopword is no word
        owners = np.repeat(np.arange(len(words), dtype=np.int64), counts)[kept]
        counts = np.bincount(owners, minlength=len(words)).astype(np.int64)
        held.append(_Words(stems[kept], np.cumsum(counts) - counts, counts))
    return terms, held


def _words_of(text: str) -> list[str]:
    r"""The words :data:`~loopctl_memory.bm25_tokens.WORD` finds in ``text``.

    A text of word characters alone (``str.isalnum``: the letters and numbers
    ``\w`` matches, which is them and ``_``) is one word, or none when it is one
    character: no regular expression for the most of a vocabulary.
    """
    if text.isalnum():
        return [text] if len(text) > 1 else []
    return WORD.findall(text)


def _expanded(words: _Words, string_of: Ints, seq_of: Ints) -> tuple[Ints, Ints]:
    """The words of each string occurrence (``string_of[n]``, held by ``seq_of[n]``), with seqs."""
    counts = words.counts[string_of]
    total = int(counts.sum())
    firsts = np.cumsum(counts) - counts  # where each occurrence's words begin in the result
    at = np.arange(total, dtype=np.int64) + np.repeat(words.starts[string_of] - firsts, counts)
    return words.stems[at], np.repeat(seq_of, counts)


def _postings(terms: list[str], term_of: Ints, seq_of: Ints) -> BlockPostings:
    """Occurrences (a term, a seq; repeats allowed) as postings, sorted by term then seq."""
    if not len(term_of):
        empty = np.empty(0, np.int64)
        return BlockPostings([], empty, empty, empty)
    first = int(seq_of.min())
    span = int(seq_of.max()) - first + 1
    keys: npt.NDArray[Any]
    if span * len(terms) < 1 << 62:
        keys, counts = np.unique(term_of * span + (seq_of - first), return_counts=True)
        return BlockPostings(terms, keys // span, keys % span + first, counts.astype(np.int64))
    order = np.lexsort((seq_of, term_of))  # pragma: no cover - seqs over 2^62 / terms apart
    term_of, seq_of = term_of[order], seq_of[order]
    starts = np.flatnonzero(
        np.concatenate(([True], (term_of[1:] != term_of[:-1]) | (seq_of[1:] != seq_of[:-1])))
    )
    counts = np.diff(np.append(starts, len(term_of)))
    return BlockPostings(terms, term_of[starts], seq_of[starts], counts.astype(np.int64))
