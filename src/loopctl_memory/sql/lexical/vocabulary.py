"""A vocabulary in memory: which of its terms contain a given text, found with ``str.find``.

The tag bonus needs the tags that contain the whole query, and the tail (the
few entries not yet indexed) the tokens that contain a query word. Both ask
"which terms contain this text" of a bounded set of distinct terms: a
substring search of their concatenation answers it at C speed. (The indexed
vocabulary grows with the store: it is searched by trigrams, see
:mod:`loopctl_memory.sql.lexical.grams`.)
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Iterable

_REMEMBERED_TEXTS = 4_096  # texts whose matching terms a vocabulary keeps
_REMEMBERED_IDS = 10_000  # at most this many terms each


class Terms:
    """Distinct terms with integer ids, only ever added to.

    Every term followed by a newline, in one string, searched with ``str.find``;
    a hit counts only if it ends inside its term, so any text may be sought (a
    query word, which has no whitespace, never spans two terms anyway). A text
    asked again only searches the terms added since.
    """

    def __init__(self) -> None:
        self._text = ""
        self._starts = array("q")  # where each term starts in _text
        self._ids = array("q")  # its id
        # text -> (how much of _text was searched, the ids found there)
        self._found: dict[str, tuple[int, list[int]]] = {}

    def add(self, terms: Iterable[tuple[int, str]]) -> None:
        """Append (id, term) pairs."""
        offset = len(self._text)
        pieces: list[str] = []
        for number, text in terms:
            self._starts.append(offset)
            self._ids.append(number)
            pieces.append(text)
            offset += len(text) + 1
        if pieces:
            self._text += "\n".join(pieces) + "\n"

    def containing(self, text: str) -> list[int]:
        """The ids of every term that contains ``text``."""
        whole = self._text  # an add in another thread may replace it meanwhile
        searched, found = self._found.get(text, (0, []))
        if searched < len(whole):
            found = found + self._containing(text, whole, searched)
            if len(found) <= _REMEMBERED_IDS:
                if len(self._found) >= _REMEMBERED_TEXTS:
                    self._found.clear()
                self._found[text] = (len(whole), found)
        return found

    def equal_to(self, text: str) -> list[int]:
        """The ids of the terms equal to ``text`` (one at most, terms being distinct)."""
        whole, starts = self._text, self._starts
        position = whole.find(text + "\n")
        while position != -1:
            number = bisect.bisect_right(starts, position) - 1
            if starts[number] == position and (
                number + 1 == len(starts) or starts[number + 1] == position + len(text) + 1
            ):
                return [self._ids[number]]
            position = whole.find(text + "\n", position + 1)
        return []

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
