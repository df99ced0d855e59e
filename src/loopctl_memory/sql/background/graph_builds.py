"""Vector graphs built in a child process, so that no retrieval waits for one.

A retrieval that finds more vectors outside a graph than it should
(``Tuning.vector_loose``) answers exactly from them all the same, and asks
:class:`GraphBuilds` to start a build: a child process
(:mod:`loopctl_memory.sql.background.graph_child`) opens the database read-only and runs
``build_indexes``, which holds the graph directory's lock (one build per store
and machine). Retrievals take the new graphs once its manifest appears.

A child, not a thread (see :mod:`.children`): usearch takes the GIL back for
every vector it adds, so a build in a thread crawls whenever the process runs
Python (measured: 20,000 vectors in 2.5 s alone, 15 s beside one busy
thread), and slows the retrievals it is meant to spare. Closing the store
stops it: a build cut short leaves only a temporary file, which the next
manifest written removes, and no manifest ever names it. After a child
failed, ``build_indexes`` builds in the process and raises what goes wrong.
"""

from __future__ import annotations

from typing import Any

from loopctl_memory.sql.background.children import Child

CHILD = "loopctl_memory.sql.background.graph_child"
"""The module a child runs (``python -m``)."""


class GraphBuilds(Child):
    """The child building a store's vector graphs, if one runs."""

    def __init__(self, target: str, *, enabled: bool, vector_loose: int = 0) -> None:
        """``target``: what the child opens (a file's path, or a server's URL with its password).

        ``enabled``: false, no child is ever started (``Tuning.background_builds``);
        ``vector_loose``: the store's, past which the child builds.
        """
        super().__init__(
            CHILD,
            enabled=enabled,
            failed="building the vector graphs in the background failed (%s); retrievals stay"
            " exact, scoring every vector outside a graph; build_indexes() (CLI index) builds"
            " them here and says what goes wrong",
        )
        self._target = target
        self._vector_loose = vector_loose

    def start(self, name: str, dims: int) -> None:
        """Start a child building the graphs of the vectors by embedder ``name`` (``dims``).

        Nothing when one runs, when none may start, or after one failed.
        """
        asked = {"target": self._target, "name": name, "dims": dims}
        self._start({**asked, "vector_loose": self._vector_loose})


def request(payload: dict[str, Any]) -> tuple[str, str, int, int]:
    """(target, embedder name, dims, vector_loose) from what a parent wrote to its child."""
    asked = payload["target"], payload["name"], payload["dims"], payload["vector_loose"]
    return str(asked[0]), str(asked[1]), int(asked[2]), int(asked[3])
