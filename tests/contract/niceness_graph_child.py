"""The graph-building child, with its build replaced by a note of its CPU niceness.

``python -m tests.contract.niceness_graph_child`` runs the real child's ``main``
(which lowers its priority before it builds); the build writes ``os.nice(0)``
to the file ``LOOPCTL_MEMORY_TEST_NICENESS`` names instead of building.
"""

from __future__ import annotations

import os
from pathlib import Path

from loopctl_memory.sql.background import graph_child


def _note() -> None:
    Path(os.environ["LOOPCTL_MEMORY_TEST_NICENESS"]).write_text(str(os.nice(0)), "utf-8")


async def _noted(*asked: object) -> int:
    del asked
    _note()
    return 0


if __name__ == "__main__":
    graph_child.build = _noted  # type: ignore[assignment]
    graph_child.main()
