"""Deterministic benchmark workloads: memories and queries from a seeded random.Random.

Four workloads, the same shape of entry (8-25 words, 0-2 tags, relevance on a
0.05 grid, exactly 10% of entries below the pruning threshold):

* ``natural``: word-like synthetic tokens with Zipf frequencies (rank r has
  weight 1/r) over ~20,000 content words, with the ten short glue words of
  English ("the", "of", "and", "to", "a", ...) as the ten most frequent ranks.
  The first word is capitalised and the memory ends with a full stop, so
  lowercasing matters. Queries are 3-7 words drawn the same way.
* ``dense``: a vocabulary of 60 short words, drawn uniformly, so every query
  word occurs in a large share of the entries (the worst case for any index
  that narrows candidates by word). Queries are 1-5 words; one-word queries
  also meet tags that contain them.
* ``zipf2``: a second natural vocabulary, so that nothing is tuned to the
  first: 50,000 longer words, a flatter law (1/rank^0.9), no glue words.
* ``ids``: what tool output leaves in an agent's notes: 5-12 natural words,
  then a request UUID, a commit hash (40 hex digits) and a file path with a
  line number, so the vocabulary grows by about three tokens an entry. The
  hash of entry ``i`` is a function of ``i`` alone, so a query can paste a
  fragment of one (a prefix of 7-12 digits, as a short hash) without building
  the entries; a third of the queries (2-5 natural words) carry one, of an
  entry among the first 10,000.

Everything is a pure function of (workload, size, seed): entries, queries and
the extra entries used for single-``store`` timing come from independent
generators, so the same queries are asked at every size, and a child process
can rebuild the queries without building the entries.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import random
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from loopctl_memory import MemoryCategory, MemoryEntry

WORKLOADS = ("natural", "dense", "ids", "zipf2")

GLUE_WORDS = ("the", "of", "and", "to", "a", "in", "is", "for", "on", "with")
"""Common short words, most frequent first: the top ranks of the natural Zipf law."""

NATURAL_VOCABULARY = 20_000
DENSE_VOCABULARY = 60
MIN_WORDS, MAX_WORDS = 8, 25
PRUNABLE_SHARE = 10  # percent of entries with relevance < 0.05
CREATED_BASE = datetime(2025, 1, 1, tzinfo=UTC)
_CATEGORIES = tuple(MemoryCategory)

_ONSETS = (
    "b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z",
    "br", "ch", "cl", "dr", "fl", "gr", "pl", "pr", "sh", "sl", "st", "th", "tr", "",
)  # fmt: skip
_VOWELS = ("a", "e", "i", "o", "u", "a", "e", "o", "ai", "ea", "ou", "io", "y")
_CODAS = ("", "", "", "", "n", "r", "s", "t", "l", "m", "ck", "nd", "st", "ng")


def _word(rng: random.Random, syllables: int) -> str:
    return "".join(
        rng.choice(_ONSETS) + rng.choice(_VOWELS) + rng.choice(_CODAS) for _ in range(syllables)
    )


def vocabulary(size: int, seed: int, syllables: Sequence[int] = (1, 2, 2, 3, 3, 4)) -> list[str]:
    """``size`` distinct word-like tokens, shortest first (short words are the frequent ones)."""
    rng = random.Random(f"vocabulary-{size}-{seed}")
    words: dict[str, None] = {}
    reserved = set(GLUE_WORDS)
    while len(words) < size:
        word = _word(rng, rng.choice(syllables))
        if len(word) >= 2 and word not in reserved:
            words[word] = None
    return sorted(words, key=len)  # stable: generation order within a length


@dataclass(frozen=True, slots=True)
class _Words:
    """A way to draw words: a population and cumulative weights (None: uniform)."""

    population: list[str]
    cum_weights: list[float] | None

    def draw(self, rng: random.Random, count: int) -> list[str]:
        if self.cum_weights is None:
            return [self.population[rng.randrange(len(self.population))] for _ in range(count)]
        return rng.choices(self.population, cum_weights=self.cum_weights, k=count)

    def rank_of_share(self, share: float) -> int:
        """How many top-ranked words make up ``share`` of all draws."""
        if self.cum_weights is None:
            return round(share * len(self.population))
        return bisect.bisect_left(self.cum_weights, share * self.cum_weights[-1]) + 1


def _zipf(population: list[str], exponent: float = 1.0) -> _Words:
    weights = (1.0 / rank**exponent for rank in range(1, len(population) + 1))
    return _Words(population, list(itertools.accumulate(weights)))


@dataclass(frozen=True, slots=True)
class _Shape:
    """How one workload draws text, tags and queries."""

    text: _Words
    tags: _Words
    query_words: tuple[int, int]
    capitalise: bool
    words: tuple[int, int] = (MIN_WORDS, MAX_WORDS)
    paths: list[str] | None = None
    """With ids: the directories and file stems of the paths an entry names."""


def _natural(seed: int) -> _Shape:
    content = vocabulary(NATURAL_VOCABULARY, seed)
    return _Shape(
        text=_zipf([*GLUE_WORDS, *content]),
        tags=_zipf(content),
        query_words=(3, 7),
        capitalise=True,
    )


OTHER_VOCABULARY = 50_000
OTHER_EXPONENT = 0.9


def _zipf2(seed: int) -> _Shape:
    """A second Zipf law: more words, longer, a flatter law, no glue words first."""
    content = vocabulary(OTHER_VOCABULARY, seed + 2_000, syllables=(1, 2, 3, 3, 4, 5))
    return _Shape(
        text=_zipf(content, OTHER_EXPONENT),
        tags=_zipf(content[::-1], OTHER_EXPONENT),
        query_words=(3, 7),
        capitalise=True,
    )


def _dense(seed: int) -> _Shape:
    words = vocabulary(DENSE_VOCABULARY, seed, syllables=(1, 1, 2))
    uniform = _Words(words, None)
    return _Shape(text=uniform, tags=uniform, query_words=(1, 5), capitalise=False)


def _ids(seed: int) -> _Shape:
    natural = _natural(seed)
    return _Shape(
        text=natural.text,
        tags=natural.tags,
        query_words=(2, 5),
        capitalise=True,
        words=(5, 12),
        paths=vocabulary(500, seed + 1000, syllables=(1, 2)),
    )


IDS_HASHED = 10_000
"""The entries whose hashes the ``ids`` queries quote: among the first, at every size."""


def commit_hash(index: int, seed: int = 1) -> str:
    """The commit hash the ``ids`` entry at ``index`` names (40 hex digits)."""
    return hashlib.sha1(f"commit-{seed}-{index}".encode(), usedforsecurity=False).hexdigest()


def _tool_output(rng: random.Random, shape: _Shape, index: int, seed: int) -> str:
    assert shape.paths is not None
    folder, stem = rng.choice(shape.paths), rng.choice(shape.paths)
    request = uuid.UUID(int=rng.getrandbits(128), version=4)
    path = f"src/{folder}/{stem}_{rng.randrange(100)}.py:{rng.randint(1, 2000)}"
    return f" request {request} commit {commit_hash(index, seed)} in {path}"


_SHAPES: dict[str, Callable[[int], _Shape]] = {
    "natural": _natural,
    "dense": _dense,
    "ids": _ids,
    "zipf2": _zipf2,
}


def _shape(workload: str, seed: int) -> _Shape:
    try:
        return _SHAPES[workload](seed)
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; expected one of {WORKLOADS}") from None


def _sentence(rng: random.Random, shape: _Shape, count: int) -> str:
    words = shape.text.draw(rng, count)
    if shape.capitalise:
        return " ".join(words).capitalize() + "."
    return " ".join(words)


def _entries(
    shape: _Shape, rng: random.Random, count: int, first_index: int, seed: int = 1
) -> list[MemoryEntry]:
    prunable = set(rng.sample(range(count), count * PRUNABLE_SHARE // 100))
    made = []
    for index in range(count):
        if index in prunable:
            relevance = rng.choice((0.0, 0.02))
        else:
            relevance = round(rng.randint(1, 20) * 0.05, 2)
        category = rng.choice(_CATEGORIES)  # first: the older workloads' draws stay the same
        memory = _sentence(rng, shape, rng.randint(*shape.words))
        if shape.paths is not None:
            memory += _tool_output(rng, shape, first_index + index, seed)
        made.append(
            MemoryEntry(
                category,
                memory,
                tags=shape.tags.draw(rng, rng.randint(0, 2)),
                relevance=relevance,
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                created_at=CREATED_BASE + timedelta(microseconds=first_index + index),
                access_count=rng.randrange(4),
                validated=rng.random() < 0.25,
            )
        )
    return made


def entries(workload: str, size: int, seed: int = 1) -> list[MemoryEntry]:
    """The ``size`` entries of ``workload``, in insertion order."""
    rng = random.Random(f"entries-{workload}-{size}-{seed}")
    return _entries(_shape(workload, seed), rng, size, first_index=0, seed=seed)


def entry_batches(
    workload: str, size: int, batch: int, seed: int = 1
) -> Iterator[list[MemoryEntry]]:
    """``size`` entries of ``workload`` in lists of ``batch``, generated as they are asked for.

    For sizes whose entries do not fit in memory at once; not the same entries
    as :func:`entries` gives for the same size.
    """
    shape = _shape(workload, seed)
    rng = random.Random(f"batches-{workload}-{size}-{seed}")
    for start in range(0, size, batch):
        yield _entries(shape, rng, min(batch, size - start), first_index=start, seed=seed)


def extra_entries(workload: str, size: int, count: int, seed: int = 1) -> list[MemoryEntry]:
    """``count`` more entries like those of ``workload``, to store one at a time."""
    rng = random.Random(f"extra-{workload}-{size}-{seed}")
    return _entries(_shape(workload, seed), rng, count, first_index=size, seed=seed)


def queries(workload: str, count: int, seed: int = 1) -> list[str]:
    """``count`` queries for ``workload``; the same ones at every size."""
    shape = _shape(workload, seed)
    rng = random.Random(f"queries-{workload}-{seed}")
    low, high = shape.query_words
    made = []
    for _ in range(count):
        query = _sentence(rng, shape, rng.randint(low, high)).rstrip(".")
        if shape.paths is not None and rng.random() < 1 / 3:
            fragment = commit_hash(rng.randrange(IDS_HASHED), seed)[: rng.randint(7, 12)]
            query += f" {fragment}"
        made.append(query)
    return made


SKEWED_TOP = 200
"""The skewed queries' common words: the natural text's most frequent content words."""


def skewed_queries(count: int, seed: int = 1) -> list[str]:
    """``count`` natural-workload queries whose words are mostly its most common content words.

    Each is 2-5 words drawn uniformly from the ``SKEWED_TOP`` most frequent
    content words (each held by about 1-13% of the entries), then one word
    drawn by the text's own Zipf law: an agent asking about what its notes
    talk about all the time. Every query word has a long posting list, so a
    ranking that scores every posting pays for all of them.
    """
    shape = _shape("natural", seed)
    common = [word for word in shape.text.population if word not in GLUE_WORDS][:SKEWED_TOP]
    rng = random.Random(f"skewed-queries-{seed}")
    made = []
    for _ in range(count):
        words = [rng.choice(common) for _ in range(rng.randint(2, 5))]
        words += shape.text.draw(rng, 1)
        made.append(" ".join(words))
    return made


def long_query(workload: str, words: int, seed: int = 1) -> str:
    """One query of ``words`` words of ``workload``'s text: a whole prompt passed as a query."""
    rng = random.Random(f"long-query-{workload}-{seed}")
    return _sentence(rng, _shape(workload, seed), words)


def describe(workload: str, seed: int = 1) -> str:
    """One line on the workload's vocabulary, for the report."""
    shape = _shape(workload, seed)
    if workload == "natural":
        half = shape.text.rank_of_share(0.5)
        return (
            f"natural: {len(shape.text.population):,} words, Zipf (1/rank), glue words "
            f"{', '.join(GLUE_WORDS)} first; the top {half:,} words are half of all text; "
            f"{MIN_WORDS}-{MAX_WORDS} words an entry, 0-2 tags, 3-7-word queries"
        )
    if workload == "zipf2":
        half = shape.text.rank_of_share(0.5)
        return (
            f"zipf2: {len(shape.text.population):,} words of 1-5 syllables, Zipf"
            f" (1/rank^{OTHER_EXPONENT}), no glue words; the top {half:,} words are half of all"
            f" text; {MIN_WORDS}-{MAX_WORDS} words an entry, 0-2 tags, 3-7-word queries"
        )
    if workload == "ids":
        return (
            "ids: 5-12 natural words, then a request UUID, a 40-digit commit hash and a "
            "src/DIR/FILE_N.py:LINE path an entry (about three new tokens each); 2-5-word "
            "queries, a third with a 7-12-digit hash prefix of one of the first "
            f"{IDS_HASHED:,} entries"
        )
    return (
        f"dense: {len(shape.text.population)} short words, uniform; "
        f"{MIN_WORDS}-{MAX_WORDS} words an entry, 0-2 tags, 1-5-word queries"
    )
