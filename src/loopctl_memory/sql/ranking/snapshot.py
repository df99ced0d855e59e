"""What one retrieval ranks, brought up to date once, at its start.

Upkeep happens here and nowhere else on a query's path: :func:`take`
refreshes the ranking state in the retrieval's transaction (reading what any
process wrote since), loads the parts the retrieval's ranking needs on their
first use (:class:`Needs`), takes up the graph files a build finished, and
links the scopes' streams. The rankers then score the :class:`Snapshot` it
returns: they read what the transaction sees (stored vectors, texts, a
filter's rows) but never move the state, load a part or touch a graph.
"""

from __future__ import annotations

from dataclasses import dataclass

from loopctl_memory.scopes import Scope
from loopctl_memory.sql.backend import Reader
from loopctl_memory.sql.ranking.columns import FilterColumns
from loopctl_memory.sql.ranking.state import Mask, Members, RankingState
from loopctl_memory.sql.ranking.vectors import VectorIndex
from loopctl_memory.sql.ranking.words import WordIndex
from loopctl_memory.sql.tuning import Tuning


@dataclass(frozen=True, slots=True)
class Needs:
    """The parts of the ranking state a retrieval ranks by."""

    reference: bool = False
    """Every entry's relevance and the token and tag postings (the reference ranking)."""
    words: bool = False
    """BM25's word postings (``bm25``, ``hybrid``)."""
    vectors: tuple[int, int] | None = None
    """The (id, dims) of the embedder whose vectors rank (``vector``, ``hybrid``)."""
    context: tuple[int, int] | None = None
    """Context is weighed: the scopes' streams, and the vectors of this embedder
    ((id, dims); (0, 0): none) if they are still the store's (``"auto"``)."""
    columns: bool = False
    """The columns a filter tests."""
    tags: bool = False
    """The tag postings (a filter on tags)."""


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The ranking state as one transaction sees it, with the parts a retrieval needs loaded."""

    state: RankingState
    reader: Reader
    """The retrieval's transaction: what the rankers read, they read as of the state."""
    size: int
    """Seq arrays' length: the highest seq read, plus one."""
    live: Mask
    """Whether an entry lives at each seq below ``size`` (read-only)."""
    words: WordIndex | None = None
    vectors: VectorIndex | None = None
    """The ranking embedder's vectors, or (``"auto"`` context) the store's current ones."""
    columns: FilterColumns | None = None

    @property
    def tuning(self) -> Tuning:
        """The store's tuning."""
        return self.state.tuning

    def members(self, scope: Scope) -> Members | None:
        """The entries ``scope`` reads; None: every entry competes."""
        return self.state.members(scope, self.size)

    def word_index(self) -> WordIndex:
        """BM25's word postings (taken with ``Needs.words``)."""
        if self.words is None:  # pragma: no cover - a ranking states its needs
            raise AssertionError("BM25 ranks a snapshot taken with its words")
        return self.words

    def vector_index(self) -> VectorIndex:
        """The ranking embedder's vectors (taken with ``Needs.vectors``)."""
        if self.vectors is None:  # pragma: no cover - a ranking states its needs
            raise AssertionError("the vector rankings rank a snapshot taken with vectors")
        return self.vectors


def take(state: RankingState, reader: Reader, needs: Needs) -> Snapshot:
    """Bring ``state`` to what ``reader``'s transaction sees, with ``needs`` loaded.

    The caller holds the state's lock for as long as it uses the snapshot.
    A part that failed to load is not kept (it is read again next time); a
    failed refresh makes the state forget its whole copy.

    Raises:
        EmbedderError: ``needs.vectors`` names an embedder whose vectors the
            store no longer holds (``reembed`` replaced it).

    """
    state.refresh(reader)
    if needs.reference or needs.tags:
        state.lexical(reader)
    if needs.reference:
        state.relevance(reader)
    words = state.words(reader) if needs.words else None
    vectors = state.vectors(reader, *needs.vectors) if needs.vectors is not None else None
    size = state.top + 1
    live = state.live(size)
    if needs.context is not None:
        embedder_id, dims = needs.context
        # A process left behind by a reembed weighs by words: its model's vectors are gone.
        if vectors is None and embedder_id and embedder_id == state.embedder_id:
            vectors = state.vectors(reader, embedder_id, dims)
        state.streams.current(state.scope_of, live, state.top)
    columns = state.columns(reader) if needs.columns else None
    return Snapshot(state, reader, size, live, words, vectors, columns)
