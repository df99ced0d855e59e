"""Rankers over one ranking state: what ``retrieve`` ranks by, each ranking a module.

- :mod:`.state`: this process's copy of what ranking needs, kept current from
  the database by one probe per retrieval (new entries by seq, removals and
  rewrites from the change log, newly indexed posting blocks), and the scope
  membership of every entry (:meth:`~.state.RankingState.members`).
- :mod:`.topk`: the exact top-k of a score array, ties in insertion order.
- :mod:`.reference`: loopctl 0.1.0's score, in binary32.

A ranker is a function ``(state, query, limit, scope, reader) -> [(seq,
score)]`` that scores the entries the scope reads (all of them, the members'
seqs, or a mask) into a ``float32`` array and hands it to :mod:`.topk`. It
reads only the state (refreshed by the store before it runs) and, through
``reader``, the database in the retrieval's own transaction.
"""
