"""The reference score, exactly as loopctl 0.1.0 computes it, used by every backend.

The reference works in 32-bit floats: ``relevance`` is an ``f32`` and every
multiplication, division and addition rounds to ``f32``, left to right::

    score = relevance*0.5 + overlap*0.4 + tag_bonus + 0.1

Each step rounds through :func:`loopctl_memory.binary32.f32`, which gives the
binary32 result exactly.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass

from loopctl_memory.binary32 import (
    SCORE_BASELINE,
    SCORE_OVERLAP_WEIGHT,
    SCORE_RELEVANCE_WEIGHT,
    SCORE_TAG_BONUS,
    WHITE_SPACE,
    f32,
    next_down32,
)

# Rust's str::split_whitespace splits on the Unicode White_Space property.
# None of its characters is special in a character class.
_WHITE_SPACE_RUN = re.compile(f"[{WHITE_SPACE}]+")


def split_whitespace(text: str) -> list[str]:
    """Split ``text`` exactly as Rust's ``str::split_whitespace`` does."""
    # Four substring tests (memchr each) are far cheaper than a regex search of the text.
    if "\x1c" in text or "\x1d" in text or "\x1e" in text or "\x1f" in text:
        return [word for word in _WHITE_SPACE_RUN.split(text) if word]
    return text.split()  # the same set, less U+001C..U+001F, which are absent


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    """A query as the reference sees it.

    Attributes:
        text: the lowercased query, untrimmed; a tag matches when it contains it whole.
        word_count: how many whitespace-separated words it has, duplicates included.
        words: the distinct words, in first-seen order.
        weights: how often each distinct word occurs (a duplicated word counts twice).

    """

    text: str
    word_count: int
    words: tuple[str, ...]
    weights: tuple[int, ...]

    def matches(self, memory_lower: str) -> int:
        """Count the query words found in ``memory_lower`` (substring test)."""
        return sum(
            weight
            for word, weight in zip(self.words, self.weights, strict=True)
            if word in memory_lower
        )

    def tag_matches(self, tags: Iterable[str]) -> bool:
        """Whether any tag, lowercased, contains the whole lowercased query."""
        return any(self.text in tag.lower() for tag in tags)

    def score_of(self, relevance: float, memory: str, tags: Iterable[str]) -> float:
        """The reference score of one entry for this query."""
        return score(
            relevance, self.matches(memory.lower()), self.word_count, self.tag_matches(tags)
        )


def parse_query(query: str) -> ParsedQuery:
    """Lowercase and split ``query`` as the reference does."""
    text = query.lower()
    words = split_whitespace(text)
    counts = Counter(words)
    return ParsedQuery(
        text=text,
        word_count=len(words),
        words=tuple(counts),
        weights=tuple(counts.values()),
    )


def score(relevance: float, matches: int, word_count: int, tagged: bool) -> float:
    """The reference score of one entry, binary32-exact.

    Args:
        relevance: the entry's relevance (rounded to binary32 first, as the crate stores it).
        matches: how many query words (duplicates counted) occur in the memory.
        word_count: how many words the query has.
        tagged: whether a tag contains the whole query.

    """
    overlap = f32(matches / max(word_count, 1)) if matches > 0 else 0.0
    total = f32(f32(f32(relevance) * SCORE_RELEVANCE_WEIGHT) + f32(overlap * SCORE_OVERLAP_WEIGHT))
    if tagged:
        total = f32(total + SCORE_TAG_BONUS)
    return f32(total + SCORE_BASELINE)


def baseline_score(relevance: float) -> float:
    """The score of an entry that nothing in the query matches."""
    return score(relevance, 0, 1, False)


def _prune_threshold() -> float:
    """The binary64 value T such that ``f32(x) < f32(0.05)`` exactly when ``x < T``."""
    limit = f32(0.05)
    below = next_down32(limit)
    # Halfway between two adjacent binary32 values, x rounds to the one with an
    # even significand; everything strictly below the midpoint rounds down.
    midpoint = (below + limit) / 2
    return midpoint if f32(midpoint) == limit else math.nextafter(midpoint, math.inf)


PRUNE_BELOW = f32(0.05)
"""Consolidation prunes every entry whose relevance, as binary32, is below this."""

PRUNE_THRESHOLD = _prune_threshold()
"""The same test on binary64 values: ``f32(r) < PRUNE_BELOW`` iff ``r < PRUNE_THRESHOLD``."""
