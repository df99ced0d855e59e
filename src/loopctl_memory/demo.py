"""``make demo``: the main job end to end, on the embedded default (a SQLite file).

It stores about forty realistic agent memories (tool trajectories, error
patterns, strategies, facts, working notes), runs a few searches and shows them
as ``loopctl-memory search`` does, consolidates, closes the store, reopens it
and checks that every entry is still there, field for field.

Run it with ``make demo`` or ``python -m loopctl_memory.demo [DIRECTORY]``; the
database is ``DIRECTORY/memory.db`` (default ``./.demo/memory.db``), emptied
at the start of every run.
"""

from __future__ import annotations

import asyncio
import sys
import time
from importlib import resources
from pathlib import Path

from rich.console import Console
from rich.text import Text

from loopctl_memory.entry import MemoryEntry
from loopctl_memory.entry_json import entry_from_json, entry_to_json
from loopctl_memory.names import PROG
from loopctl_memory.rankings import best_ranking
from loopctl_memory.rendering import (
    SearchResult,
    SearchResults,
    StoreStats,
    consolidation_view,
    database_size,
    stats_view,
)
from loopctl_memory.sql.opening import open_store
from loopctl_memory.sql.store.memory_store import SqlMemoryStore

DEFAULT_DIRECTORY = Path(".demo")

SEARCHES = (
    ("database is locked", 3),
    ("flaky pytest", 4),
    ("rate limit http", 3),
)
"""What the demo agent asks its memory, with how many answers it wants."""

RANKING = best_ranking(has_embedder=False)
"""What the demo ranks by: the best ranking of a store with no embedder, as `search`'s."""


def demo_memories() -> list[MemoryEntry]:
    """The memories shipped with the package, in ``data/demo_memories.jsonl``."""
    text = (
        resources.files("loopctl_memory")
        .joinpath("data", "demo_memories.jsonl")
        .read_text(encoding="utf-8")
    )
    return [entry_from_json(line) for line in text.splitlines() if line.strip()]


async def _snapshot(store: SqlMemoryStore) -> list[str]:
    """Every entry as its JSON line, in insertion order: what "still there" is checked on."""
    return [entry_to_json(entry) async for entry in store.iter_entries()]


def demo_database(directory: Path) -> Path:
    """``directory/memory.db``, with the directory created."""
    directory.mkdir(parents=True, exist_ok=True)
    return (directory / "memory.db").resolve()


async def _emptied(store: SqlMemoryStore) -> int:
    """Remove what an earlier run left, through SQLite; how many memories that was.

    Never by deleting the files: another process (a server started on the
    demo's database) may have them open, and a database file or its
    write-ahead log deleted under SQLite loses what that process writes.
    """
    earlier = await store.with_descendants().forget(everything=True)
    if earlier:
        await store.consolidate(vacuum=True)
    return earlier


async def run(path: Path, console: Console) -> None:
    """Run the demo on a new database at ``path``.

    Raises:
        RuntimeError: the reopened store does not hold exactly what was closed.

    """
    started = time.perf_counter()
    console.rule("loopctl-memory demo")
    console.print(Text(f"database: {path}"))

    memories = demo_memories()
    async with open_store(path) as store:
        earlier = await _emptied(store)
        if earlier:
            console.print(f"emptied the database of an earlier run ({earlier} memories)")
        await store.store_many(memories)
        console.print(f"stored {await store.count()} memories in one transaction\n")
        for query, limit in SEARCHES:
            console.print(Text(f"search {query!r}, best {limit} by {RANKING}:", style="bold"))
            scored = await store.retrieve_scored(query, limit, ranking=RANKING)
            console.print(
                SearchResults(
                    [
                        SearchResult(entry, score, await store.short_id(entry.id))
                        for entry, score in scored
                    ]
                )
            )
            console.print()
        stats = await store.consolidate()
        console.print(consolidation_view(store.target, stats))
        console.print()
        before = await _snapshot(store)
        answers = [await store.retrieve(query, limit, ranking=RANKING) for query, limit in SEARCHES]

    console.print("closed the store; reopening it ...")
    async with open_store(path, migrate=False) as store:
        after = await _snapshot(store)
        answers_after = [
            await store.retrieve(query, limit, ranking=RANKING) for query, limit in SEARCHES
        ]
        if after != before or answers_after != answers:
            raise RuntimeError(f"the reopened store at {path} differs from what was closed")
        console.print(
            f"all {len(after)} entries are still there, every field identical, "
            "and every search gives the same answer\n"
        )
        console.print(
            stats_view(
                StoreStats(
                    database=str(path),
                    size_bytes=database_size(path),
                    schema_revision=await store.schema_revision(),
                    summary=await store.summary(),
                )
            )
        )
    console.print()
    console.rule(f"done in {time.perf_counter() - started:.2f} s")


def main(directory: Path | str | None = None, *, console: Console | None = None) -> None:
    """Run the demo in ``directory`` (default: the first argument, else ``./.demo``)."""
    if directory is None:
        directory = sys.argv[1] if len(sys.argv) > 1 else DEFAULT_DIRECTORY
    path = demo_database(Path(directory))
    console = console or Console(highlight=False)
    asyncio.run(run(path, console))
    console.print(Text(f'Try: {_script()} --db {_shown(path)} search "git push rejected"'))


def _shown(path: Path) -> Path:
    """``path`` relative to the working directory when it is inside it."""
    return path.relative_to(Path.cwd()) if path.is_relative_to(Path.cwd()) else path


def _script() -> str:
    """How to run the command line from here: the script beside this Python, if any."""
    beside = Path(sys.executable).parent / PROG
    return str(_shown(beside.absolute())) if beside.exists() else PROG


if __name__ == "__main__":
    main()
