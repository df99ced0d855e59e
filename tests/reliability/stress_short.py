"""A short-lived process of the multi-process stress, as a script's call is: open, one thing, close.

Usage: python stress_short.py TARGET SCOPE NUMBER write|read HELD

``write``: opens the store through the blocking API, stores entry NUMBER of
SCOPE, checks that BM25 finds it by its own word, closes, and prints its log
line (see :mod:`tests.reliability.stress_plan`). ``read``: opens the store
read-only, checks that SCOPE holds HELD entries and that every one it
retrieves is whole, and closes. Exits 1 with the reason on stderr when a check fails.
"""

from __future__ import annotations

import random
import sys

from loopctl_memory import sync
from tests.reliability.stress_plan import (
    BUSY_TIMEOUT,
    EMBEDDER,
    RANKINGS,
    make_entry,
    put_line,
    unique_word,
)


def write(target: str, scope: str, number: int) -> None:
    """Store one entry and read it back."""
    entry = make_entry(scope, number, random.Random(f"{scope}#{number}"))
    with sync.open_store(target, busy_timeout=BUSY_TIMEOUT, embedder=EMBEDDER) as store:
        view = store.scope(scope)
        view.store(entry)
        found = view.retrieve(unique_word(scope, number), 3, ranking="bm25")
    if found != [entry]:
        raise SystemExit(f"bm25 did not find the entry just stored: {found!r}")
    sys.stdout.write(put_line(scope, [entry]) + "\n")


def read(target: str, scope: str, held: int) -> None:
    """Count the scope's entries and retrieve from it in every ranking."""
    with sync.open_store(
        target, busy_timeout=BUSY_TIMEOUT, embedder=EMBEDDER, read_only=True
    ) as store:
        view = store.scope(scope)
        count = view.count()
        if count != held:
            raise SystemExit(f"scope {scope} holds {count} entries, not {held}")
        for ranking in RANKINGS:
            for entry in view.retrieve("deploy agent cache", 5, ranking=ranking):
                if view.get(entry.id) != entry:
                    raise SystemExit(f"{ranking} retrieved an entry get does not: {entry!r}")


if __name__ == "__main__":
    target, scope, number, kind, held = sys.argv[1:6]
    if kind == "write":
        write(target, scope, int(number))
    else:
        read(target, scope, int(held))
