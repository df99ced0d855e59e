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

from loopctl_memory.bm25_tokens import document_words, stems_of
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


def invert_tokens(texts: Sequence[tuple[int, str]]) -> BlockPostings:
    """The token postings of each (seq, lowercase memory): its distinct whitespace tokens."""
    pieces = [split_whitespace(text) for _, text in texts]
    return _invert(pieces, [seq for seq, _ in texts])


def invert_tags(values: Sequence[tuple[int, str]]) -> BlockPostings:
    """The tag postings of each (seq, lowercase tag): an entry with a tag twice is named once."""
    terms = [value for _, value in values]
    return _invert_flat(terms, np.fromiter((seq for seq, _ in values), np.int64, len(values)))


def invert_words(documents: Sequence[Document]) -> tuple[BlockPostings, DocumentLengths]:
    """The BM25 word postings of each document, with counts, and each document's length.

    A document's words are :func:`loopctl_memory.bm25_tokens.document_tokens`'s: its
    raw words are cut here, each distinct one stemmed (or dropped) once.
    """
    pieces = [document_words(memory, tags) for _, memory, tags in documents]
    owners = np.fromiter((seq for seq, _, _ in documents), np.int64, len(documents))
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    raw = list(itertools.chain.from_iterable(pieces))
    stem_of = stems_of(set(raw))
    terms = sorted({stem for stem in stem_of.values() if stem is not None})
    number = {stem: n for n, stem in enumerate(terms)}
    index_of = {word: -1 if stem is None else number[stem] for word, stem in stem_of.items()}
    term_of = np.fromiter(map(index_of.__getitem__, raw), np.int64, len(raw))
    seq_of = np.repeat(owners, sizes)
    kept = term_of >= 0
    term_of, seq_of = term_of[kept], seq_of[kept]
    held = np.unique(seq_of, return_counts=True)
    return _postings(terms, term_of, seq_of), DocumentLengths(held[0], held[1].astype(np.int64))


def _invert(pieces: list[list[str]], owners: list[int]) -> BlockPostings:
    """Postings of the terms in ``pieces[n]``, each held by seq ``owners[n]``."""
    sizes = np.fromiter(map(len, pieces), np.int64, len(pieces))
    seq_of = np.repeat(np.asarray(owners, dtype=np.int64), sizes)
    return _invert_flat(list(itertools.chain.from_iterable(pieces)), seq_of)


def _invert_flat(occurrences: list[str], seq_of: Ints) -> BlockPostings:
    terms = sorted(set(occurrences))
    number = {term: n for n, term in enumerate(terms)}
    term_of = np.fromiter(map(number.__getitem__, occurrences), np.int64, len(occurrences))
    return _postings(terms, term_of, seq_of)


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
