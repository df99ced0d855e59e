"""The child process that builds a store's vector graphs (:mod:`.graph_builds` starts it).

``python -m loopctl_memory.sql.background.graph_child`` reads one JSON object on stdin
(``target``, the embedder's ``name`` and ``dims`` the parent's store records,
and its ``vector_loose``), opens the database read-only and runs
``build_indexes``. It makes no vector: the embedder it names is a stand-in
that refuses to embed. Exit status 0 once the manifest names the graphs (or
another process built them first); 1 with the reason on stderr otherwise.
"""

from __future__ import annotations

import os
from typing import Any, NoReturn

from loopctl_memory.errors import EmbedderError
from loopctl_memory.sql.background.children import run_child
from loopctl_memory.sql.background.graph_builds import request
from loopctl_memory.sql.opening import open_store
from loopctl_memory.sql.tuning import Tuning


class RecordedName:
    """The store's embedder by name and size only: the build reads vectors, it makes none."""

    def __init__(self, name: str, dims: int) -> None:
        self.name = name
        self.dims = dims

    def embed_documents(self, texts: list[str]) -> Any:
        """Never called by a build."""
        del texts
        raise EmbedderError("the graph builder makes no vectors")

    def embed_query(self, text: str) -> Any:
        """Never called by a build."""
        del text
        raise EmbedderError("the graph builder makes no vectors")


async def build(target: str, name: str, dims: int, vector_loose: int) -> int:
    """Open ``target`` read-only, build the graphs due past ``vector_loose``; what they hold."""
    async with await open_store(
        target,
        read_only=True,
        migrate=False,
        embedder=RecordedName(name, dims),
        tuning=Tuning(vector_loose=vector_loose, background_builds=False),
    ) as store:
        return await store.build_indexes()


_NICENESS = 10  # a build's CPU goes to the parent's queries first


def main() -> NoReturn:
    """Build what stdin names, at a lower CPU priority; exit 0, or 1 saying why on stderr.

    A build takes minutes of every core it can use; a retrieval beside it (the
    parent's, or any process's on the machine) scores exactly what has no graph
    yet and is waited for by someone. Niced, the build yields to it.
    """
    if hasattr(os, "nice"):  # POSIX
        os.nice(_NICENESS)
    run_child(lambda asked: build(*request(asked)))


if __name__ == "__main__":
    main()
