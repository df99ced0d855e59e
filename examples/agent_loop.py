"""An agent loop with a memory: recall before each turn, learn after each tool call, consolidate.

The agent is a fake: its "LLM" picks a shell command for a task (a command a
recalled memory recommends, else its first guess), and its one "tool" answers
from a table, as a repository whose tests and lint run through make would. Each turn:

1. retrieve the few memories most relevant to the task (BM25: only what shares a word);
2. call the tool; after each call store what was learned: the raw output as a
   working note, and a lesson: the command that worked, or the one that failed and why;
3. at the end of the run, forget the run's working notes and consolidate: a
   lesson learned twice is merged into one.

Run 1 learns by failing; run 2 (the same file, as a later process would open it)
recalls the lessons and gets each task right first time.

Run it (``--db``: a SQLite file or a database URL; by default a new temporary file)::

    python examples/agent_loop.py [--db PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
from pathlib import Path

from loopctl_memory import ConsolidationConfig, MemoryCategory, MemoryEntry, open_store

FIRST_GUESS = {"run the tests": "pytest", "lint the code": "ruff check ."}
"""What the fake LLM tries when no memory tells it better."""

SHELL = {
    "pytest": (False, "ImportError: No module named 'app'; use `make test`"),
    "make test": (True, "412 passed in 61s"),
    "ruff check .": (False, "ruff: command not found; use `make lint`"),
    "make lint": (True, "All checks passed!"),
}
"""The fake tool: a command's (success, output)."""

RECOMMENDED = re.compile(r"use `([^`]+)`")


def choose(task: str, recalled: list[MemoryEntry]) -> str:
    """The fake LLM: the first command a recalled memory recommends, else its first guess."""
    for entry in recalled:
        if found := RECOMMENDED.search(entry.memory):
            return found.group(1)
    return FIRST_GUESS[task]


async def run(db: str | os.PathLike[str], number: int, tasks: list[str]) -> None:
    """One run of the agent over ``tasks``, on the memory at ``db``."""
    print(f"run {number}")
    async with open_store(db, ranking="bm25") as memory:
        for turn, task in enumerate(tasks, 1):
            recalled = await memory.retrieve(task, 3)  # before the turn: the few most relevant
            print(f"  turn {turn}: {task}")
            for entry in recalled:
                print(f"    recalled [{entry.category}] {entry.memory}")
            if not recalled:
                print("    recalled nothing")
            command, attempts = choose(task, recalled), 0
            while True:
                ok, output = SHELL[command]
                attempts += 1
                print(f"    $ {command} -> {'ok' if ok else 'failed'}: {output}")
                # After each tool call: what it said (for this run only), and the lesson.
                note = MemoryEntry(MemoryCategory.WORKING, f"{command}: {output}")
                lesson = (
                    MemoryEntry(MemoryCategory.STRATEGY, f"to {task}, use `{command}`")
                    if ok
                    else MemoryEntry(MemoryCategory.ERROR_PATTERN, f"`{command}` fails: {output}")
                )
                await memory.store_many([note, lesson])
                if ok:
                    break
                command = choose(task, [lesson])  # the LLM reads the error for a way out
            print(f"    done in {attempts} tool call(s)")
        # End of the run: drop its working notes, then decay, merge and prune the lessons.
        print(f"  forgot {await memory.forget(category=MemoryCategory.WORKING)} working notes")
        stats = await memory.consolidate(ConsolidationConfig.full())
        print(
            f"  consolidated: {stats.entries_before} -> {stats.entries_after} memories"
            f" ({stats.merged} merged, {stats.pruned} pruned)"
        )


async def main(db: str | os.PathLike[str]) -> None:
    """Two runs of the agent on one memory: the second recalls what the first learned."""
    await run(db, 1, ["run the tests", "lint the code", "run the tests"])
    await run(db, 2, ["lint the code", "run the tests"])
    async with open_store(db) as memory:
        print("kept:")
        async for entry in memory.iter_entries():
            print(f"  [{entry.category}] {entry.memory} (relevance {entry.relevance:.2f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--db", help="SQLite file or database URL (default: a temporary file)")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        asyncio.run(main(arguments.db or Path(scratch) / "memory.db"))
