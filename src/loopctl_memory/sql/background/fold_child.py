"""The child process that indexes a store's tail (:mod:`.folds` starts it).

``python -m loopctl_memory.sql.background.fold_child`` reads one JSON object on stdin
(``target`` and the parent's ``tail_limit``), opens the database, and indexes
the tail block after block while it holds ``tail_limit`` entries or more. It
stops once the tail has been shorter for a few seconds, or once its standard input ends (the parent
closed its store or ended), after the block it is writing. Exit status 0; 1
with the reason on stderr when it could not index.
"""

from __future__ import annotations

from typing import NoReturn

from loopctl_memory.sql.background.children import parent_gone, run_child
from loopctl_memory.sql.opening import open_store
from loopctl_memory.sql.tuning import Tuning

LINGER_SECONDS = 5.0
"""How long a child waits for more writes once the tail is short, before it ends."""


async def fold(target: str, tail_limit: int) -> int:
    """Open ``target`` and index its tail while it is long; how many entries were indexed."""
    gone = parent_gone()
    tuning = Tuning(tail_limit=tail_limit, background_folds=False, background_builds=False)
    async with await open_store(target, migrate=False, tuning=tuning) as store:
        return await store._fold_tail(stop=gone, linger=LINGER_SECONDS)  # its own child


def main() -> NoReturn:
    """Index what stdin names; exit 0, or 1 saying why on stderr."""
    run_child(lambda asked: fold(str(asked["target"]), int(asked["tail_limit"])))


if __name__ == "__main__":
    main()
