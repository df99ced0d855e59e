"""Each scope's stream in a process: every live entry's neighbours in insertion order.

Two links by seq, to the entry before and the entry after in the same scope,
built once from the ranking state's scopes (a sort), then extended as new
entries arrive. A removed entry keeps its links; a walk steps over the dead
(:meth:`Streams.step`), so the entries around it are each other's neighbours,
and the links are built again once walks step over many.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from loopctl_memory.sql.lexical.segments import Ints
from loopctl_memory.sql.ranking.coherence import Coherence

Mask = npt.NDArray[np.bool_]

_NONE = -1
_REBUILD_AFTER = 64  # dead entries stepped over in one walk, before the links are rebuilt


class Streams:
    """The links of every scope's stream, up to the ranking state's highest seq."""

    def __init__(self) -> None:
        self._clear()

    def _clear(self) -> None:
        self._through = 0
        self.before: Ints = np.full(1, _NONE, np.int64)
        self.after: Ints = np.full(1, _NONE, np.int64)
        self._last: dict[int, int] = {}  # each scope's newest entry linked so far
        self._stale = False
        self.coherence = Coherence()
        """Each scope's ``"auto"`` weight, kept while its stream stands."""

    def current(self, scope_of: Ints, live: Mask, top: int) -> None:
        """Extend the links through seq ``top`` (``scope_of`` and ``live`` by seq, beyond it)."""
        if self._stale:
            self._clear()
        if top <= self._through:
            return
        self._grow(top)
        first = self._through + 1
        seqs = first + np.flatnonzero(live[first : top + 1])
        scopes = scope_of[seqs]
        order = np.lexsort((seqs, scopes))
        seqs, scopes = seqs[order], scopes[order]
        same = scopes[1:] == scopes[:-1]
        self.before[seqs[1:][same]] = seqs[:-1][same]
        self.after[seqs[:-1][same]] = seqs[1:][same]
        starts = np.flatnonzero(np.concatenate(([True], ~same))) if len(seqs) else seqs
        for start in starts:
            scope, seq = int(scopes[start]), int(seqs[start])
            previous = self._last.get(scope)
            if previous is not None:
                self.before[seq] = previous
                self.after[previous] = seq
        if len(seqs):
            ends = np.flatnonzero(np.concatenate((~same, [True])))
            self._last.update(zip(scopes[ends].tolist(), seqs[ends].tolist(), strict=True))
        self._through = top

    def step(self, seqs: Ints, live: Mask, *, forward: bool) -> Ints:
        """The live neighbour of each of ``seqs`` before it (or after), -1 where none."""
        links = self.after if forward else self.before
        found = np.where(seqs >= 0, links[np.maximum(seqs, 0)], _NONE)
        stepped = 0
        while True:
            dead = (found >= 0) & ~live[np.maximum(found, 0)]
            if not dead.any():
                break
            stepped += int(np.count_nonzero(dead))
            found[dead] = links[found[dead]]
        if stepped > _REBUILD_AFTER:
            self._stale = True  # answers stay right meanwhile; the next refresh rebuilds
        return found

    def neighbours(self, seqs: Ints, live: Mask) -> tuple[Ints, Ints, Ints, Ints]:
        """Each of ``seqs``' neighbours: one before, one after, two before, two after (-1: none)."""
        left1 = self.step(seqs, live, forward=False)
        right1 = self.step(seqs, live, forward=True)
        return (
            left1,
            right1,
            self.step(left1, live, forward=False),
            self.step(right1, live, forward=True),
        )

    def scopes(self) -> list[int]:
        """The scopes that have had an entry, by id."""
        return sorted(self._last)

    def last(self, scope: int) -> int:
        """The newest entry ever linked in ``scope`` (-1: none)."""
        return self._last.get(scope, _NONE)

    def newest(self, scope: int, live: Mask, count: int, keep: Mask | None = None) -> Ints:
        """The ``count`` newest live entries of ``scope`` (those ``keep`` holds), ascending."""
        found: list[int] = []
        seq = self._last.get(scope, _NONE)
        while seq >= 0 and len(found) < count:
            if live[seq] and (keep is None or (seq < len(keep) and keep[seq])):
                found.append(seq)
            seq = int(self.before[seq])
        return np.array(found[::-1], np.int64)

    def _grow(self, through: int) -> None:
        if len(self.before) > through:
            return
        size = max(through + 1, 2 * len(self.before))
        for name in ("before", "after"):
            grown = np.full(size, _NONE, np.int64)
            held = getattr(self, name)
            grown[: len(held)] = held
            setattr(self, name, grown)
