"""LangGraph's long-term memory store on loopctl-memory (the ``langgraph`` extra).

>>> from loopctl_memory.langgraph import LangGraphStore
>>> store = LangGraphStore.from_conn_string(":memory:")
>>> store.put(("users", "ada"), "prefs", {"text": "likes tea, not coffee"})
>>> [item.key for item in store.search(("users",), query="tea")]
['prefs']
>>> store.close()

See :mod:`loopctl_memory.langgraph.store` for what it does where LangGraph's
own stores differ. The core package never imports LangGraph: only this one does.
"""

from __future__ import annotations

from loopctl_memory.langgraph.store import LangGraphStore

__all__ = ["LangGraphStore"]
