"""The tail in memory: the entries newer than the indexed blocks, inverted as they are read.

The token index covers every entry up to its watermark; the few newer ones
(at most about the store's ``tail_limit``) are read once, split into tokens
and tag values here, and looked up the same way as the postings are.
"""

from __future__ import annotations

from collections.abc import Iterable

from loopctl_memory.flat import tokens_of
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.lexical.vocabulary import Terms

_ROWS_PER_FETCH = 8_192


class _Inverted:
    """Terms and, for each, the seqs of the entries holding it."""

    def __init__(self) -> None:
        self.terms = Terms()
        self._number: dict[str, int] = {}
        self._seqs: list[list[int]] = []

    def add(self, pairs: Iterable[tuple[int, str]]) -> None:
        """Add (seq, term) pairs; new terms join the vocabulary in one piece."""
        new: list[tuple[int, str]] = []
        for seq, term in pairs:
            number = self._number.get(term)
            if number is None:
                number = self._number[term] = len(self._seqs)
                self._seqs.append([seq])
                new.append((number, term))
            else:
                self._seqs[number].append(seq)
        self.terms.add(new)

    def seqs_containing(self, text: str, *, whole: bool = False) -> list[int]:
        """Seqs of the entries with a term containing ``text`` (``whole``: equal to it).

        An entry may come twice.
        """
        found: list[int] = []
        numbers = self.terms.equal_to(text) if whole else self.terms.containing(text)
        for number in numbers:
            found += self._seqs[number]
        return found


class TailIndex:
    """The entries with ``after < seq <= through``, inverted by token and by lowercase tag."""

    def __init__(self, after: int) -> None:
        self.through = after
        self._tokens = _Inverted()
        self._tags = _Inverted()

    def read(self, connection: Reader, through: int) -> None:
        """Add the entries up to ``through`` (those stored since the last read)."""
        if through <= self.through:
            return
        decode, window = connection.backend.decode, (self.through, through)
        texts = "SELECT seq, memory_lower FROM entries WHERE seq > ? AND seq <= ?"
        for rows in connection.chunks(texts, window, _ROWS_PER_FETCH):
            self.add((int(seq), decode(text)) for seq, text in rows)
        tags = "SELECT entry_seq, tag_lower FROM tags WHERE entry_seq > ? AND entry_seq <= ?"
        for rows in connection.chunks(tags, window, _ROWS_PER_FETCH):
            self.add_tags((int(seq), decode(tag)) for seq, tag in rows)
        self.through = through

    def add(self, texts: Iterable[tuple[int, str]]) -> None:
        """Invert (seq, lowercase memory) pairs."""
        self._tokens.add((seq, token) for seq, text in texts for token in tokens_of(text))

    def add_tags(self, tags: Iterable[tuple[int, str]]) -> None:
        """Invert (seq, lowercase tag) pairs."""
        self._tags.add(tags)

    def word_seqs(self, word: str) -> list[int]:
        """Seqs of the tail entries whose memory contains ``word`` (which has no whitespace)."""
        return self._tokens.seqs_containing(word)

    def tag_seqs(self, text: str, *, whole: bool = False) -> list[int]:
        """Seqs of the tail entries with a lowercase tag containing ``text`` (``whole``: equal)."""
        return self._tags.seqs_containing(text, whole=whole)


class RewrittenIndex:
    """Entries rewritten since their postings were written, inverted from their current text.

    Their postings (and a tail's) still hold their old words, so retrieval
    scores them from here instead. Each rewrite adds the entry again under a
    new number; the numbers of earlier versions are forgotten.
    """

    def __init__(self) -> None:
        self._tokens = _Inverted()
        self._tags = _Inverted()
        self._seq_of: list[int] = []  # by version number
        self._current: dict[int, int] = {}  # seq -> its current version number

    def __len__(self) -> int:
        return len(self._current)

    def rewrite(self, seq: int, memory_lower: str, tags_lower: Iterable[str]) -> None:
        """Hold ``seq`` with this lowercase memory and tags from now on."""
        number = len(self._seq_of)
        self._seq_of.append(seq)
        self._current[seq] = number
        self._tokens.add((number, token) for token in tokens_of(memory_lower))
        self._tags.add((number, tag) for tag in tags_lower)

    def forget(self, seq: int) -> None:
        """``seq`` was removed."""
        self._current.pop(seq, None)

    def seqs(self) -> list[int]:
        """The seqs held, ascending."""
        return sorted(self._current)

    def word_seqs(self, word: str) -> list[int]:
        """The seqs whose current memory contains ``word``, each once."""
        return self._current_seqs(self._tokens.seqs_containing(word))

    def tag_seqs(self, text: str, *, whole: bool = False) -> list[int]:
        """The seqs with a current lowercase tag containing ``text`` (``whole``: equal to it)."""
        return self._current_seqs(self._tags.seqs_containing(text, whole=whole))

    def _current_seqs(self, numbers: list[int]) -> list[int]:
        seq_of, current = self._seq_of, self._current
        return list({seq_of[n] for n in numbers if current.get(seq_of[n]) == n})
