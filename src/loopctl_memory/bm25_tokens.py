r"""The BM25 tokens of a memory and of a query: the words BM25 counts, as ``bm25s`` cuts them.

A text's tokens are exactly those of ``bm25s.tokenize(texts, stopwords="en",
stemmer=Stemmer.Stemmer("english"))`` for that text, in its order of
operations: the whole text lowercased (``str.lower``), its words found with
the regular expression ``(?u)\b\w\w+\b``, the words of :data:`ENGLISH_STOPWORDS`
dropped (compared before stemming), and each remaining word replaced by its
Snowball English stem (PyStemmer). Repeated words give repeated tokens, in the
order they appear in the text.

A memory's document is its text followed by its tags. Cutting each part on
its own gives the tokens of the parts joined by single spaces: a space is no
word character, so no word runs across it, and no case-ignorable one, so it
ends the context in which ``str.lower`` picks the Greek final sigma.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable

import Stemmer

ENGLISH_STOPWORDS = frozenset(
    # bm25s's STOPWORDS_EN (bm25s/stopwords.py, MIT licence; the list of Lucene's
    # EnglishAnalyzer), which bm25s.tokenize removes for stopwords="en".
    (
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "but",
        "by",
        "for",
        "if",
        "in",
        "into",
        "is",
        "it",
        "no",
        "not",
        "of",
        "on",
        "or",
        "such",
        "that",
        "the",
        "their",
        "then",
        "there",
        "these",
        "they",
        "this",
        "to",
        "was",
        "will",
        "with",
    )
)
"""The lowercased words that are never tokens."""

# bm25s's ``(?u)\b\w\w+\b`` finds exactly the runs of two or more word characters
# this finds (a run is maximal, so its ends are word boundaries), a third faster.
WORD = re.compile(r"\w\w+")

# Stems kept: a natural vocabulary's words all stay; a store of rare words (identifiers,
# hashes) empties the cache now and then instead of growing it without bound.
_STEM_CACHE_SIZE = 1 << 17

# PyStemmer's own cache is off: ours in front of it answers every repeated word first.
_STEMMER = Stemmer.Stemmer("english", 0)
# A Stemmer keeps state while it stems and must not be called from two threads at once.
_STEMMER_LOCK = threading.Lock()
# Word -> stem. A plain dict: a hit is one lookup inline, the cost that matters when
# every stored entry is cut into words. Single dict operations are atomic.
_STEMS: dict[str, str] = {}


def _stem(word: str) -> str:
    with _STEMMER_LOCK:
        stem = str(_STEMMER.stemWord(word))
    if len(_STEMS) >= _STEM_CACHE_SIZE:
        _STEMS.clear()
    _STEMS[word] = stem
    return stem


def query_tokens(text: str) -> list[str]:
    """The BM25 tokens of ``text``, in order (repeats kept): ``bm25s.tokenize``'s for it."""
    stems, stopwords = _STEMS, ENGLISH_STOPWORDS
    tokens = []
    for word in WORD.findall(text.lower()):
        if word not in stopwords:
            stem = stems.get(word)
            tokens.append(_stem(word) if stem is None else stem)
    return tokens


def stems_of(words: Iterable[str]) -> dict[str, str | None]:
    """Each lowercase word's token: its stem, or None for a stopword (never a token)."""
    stems, stopwords = _STEMS, ENGLISH_STOPWORDS
    held: dict[str, str | None] = {}
    for word in words:
        if word in stopwords:
            held[word] = None
        else:
            stem = stems.get(word)
            held[word] = _stem(word) if stem is None else stem
    return held


def document_tokens(memory: str, tags: Iterable[str]) -> list[str]:
    """The BM25 tokens of a memory's document: those of ``memory``, then of each tag in order.

    Equal to :func:`query_tokens` of ``memory`` and the tags joined by single spaces,
    which is how they are cut.
    """
    if not isinstance(tags, list | tuple):
        tags = list(tags)
    return query_tokens(" ".join((memory, *tags)) if tags else memory)
