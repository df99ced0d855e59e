"""The store on SQLite and PostgreSQL: a folder a concept, data flowing from the top down.

- :mod:`.opening`: ``open_store``: the options checked, the engine, the schema, the store.
- :mod:`.store`: :class:`~loopctl_memory.sql.store.memory_store.SqlMemoryStore`: its
  public operations, each one unit of work; its parts (vectors, history, expiry,
  consolidation, lookups) a module each.
- :mod:`.ranking`: what ``retrieve`` ranks by: this process's copy of what ranking
  needs, and a module for each ranking.
- :mod:`.rows`: entries as rows, and every query the store runs over them.
- :mod:`.history`: each write's events recorded in its transaction, and read back.
- :mod:`.lexical`: the token index: what a write adds to it, what a query reads.
- :mod:`.background`: upkeep in child processes (indexing the tail, building graphs).
- :mod:`.database`: how a store reaches its database: engine, unit of work, errors.
- :mod:`.backend`: where SQLite and PostgreSQL differ, in one place.
- :mod:`.files`: what watches and guards a SQLite file a store opened.
- :mod:`.tables` and :mod:`.text`: the schema (what migrations import);
  :mod:`.tuning`: thresholds that set speed and memory, never answers.
"""
