"""A long-lived process of the multi-process stress: a server with many tasks at once.

Usage: python stress_worker.py TARGET ROUND WORKER GO_FILE LOG TASKS OPS

Opens the store once, prints "ready", waits until GO_FILE exists, then runs
TASKS tasks at once (more than the store's connection pool holds, so
connections open and close meanwhile), each OPS operations drawn from every
kind a store has: store, store_many, import, update, delete, forget,
consolidate, retrieve in every ranking, count. Task 0 instead opens a store of
its own for each operation (a store per request, read-only for some reads),
beside the long-lived one on the same file. Each task works in its own scope
and checks every answer against what it knows that scope holds; each
acknowledged change is appended to LOG (see :mod:`tests.reliability.stress_plan`).
Prints "done <operations>" and exits 0 when every check held, else prints each
failure on stderr and exits 1.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import random
import sys
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import IO

from loopctl_memory import MemoryEntry, SqlMemoryStore, open_store
from loopctl_memory.entry_json import entry_to_json
from loopctl_memory.jsonl import import_jsonl
from loopctl_memory.sql.tuning import Tuning
from tests.reliability.stress_plan import (
    BUSY_TIMEOUT,
    EMBEDDER,
    PRUNED_BELOW,
    RANKINGS,
    gone_line,
    make_entry,
    put_line,
    unique_word,
)


class Task:
    """One task's operations in its own scope, checked against what the scope must hold."""

    def __init__(self, store: SqlMemoryStore, target: str, label: str, log: IO[str]) -> None:
        self._store = store
        self._target = target
        self._label = label
        self._log = log
        self._rng = random.Random(label)
        self._held: dict[uuid.UUID, MemoryEntry] = {}
        self._numbers: dict[uuid.UUID, int] = {}
        self._versions: dict[uuid.UUID, int] = {}
        self._next = 0
        self.operations = 0

    async def run(self, operations: int, *, store_per_operation: bool) -> None:
        """Run ``operations`` operations drawn at random (the same ones every run)."""
        kinds: list[tuple[Callable[[SqlMemoryStore], Awaitable[None]], int]] = [
            (self._store_one, 25),
            (self._store_many, 8),
            (self._import, 5),
            (self._update, 10),
            (self._delete, 7),
            (self._forget, 4),
            (self._consolidate, 4),
            (self._retrieve, 30),
            (self._count, 7),
        ]
        actions, weights = zip(*kinds, strict=True)
        for _ in range(operations):
            action = self._rng.choices(actions, weights)[0]
            reads = action in (self._retrieve, self._count)
            read_only = store_per_operation and reads and self._rng.random() < 0.5
            async with self._view(fresh=store_per_operation, read_only=read_only) as view:
                await action(view)
            self.operations += 1

    @contextlib.asynccontextmanager
    async def _view(self, *, fresh: bool, read_only: bool) -> AsyncIterator[SqlMemoryStore]:
        if not fresh:
            yield self._store.scope(self._label)
            return
        async with open_store(
            self._target, busy_timeout=BUSY_TIMEOUT, embedder=EMBEDDER, read_only=read_only
        ) as own:
            yield own.scope(self._label)

    def _new(self) -> MemoryEntry:
        entry = make_entry(self._label, self._next, self._rng)
        self._numbers[entry.id] = self._next
        self._versions[entry.id] = 0
        self._next += 1
        return entry

    def _acknowledged(self, line: str) -> None:
        self._log.write(line + "\n")
        self._log.flush()

    def _stored(self, entries: list[MemoryEntry]) -> None:
        self._held.update((entry.id, entry) for entry in entries)
        self._acknowledged(put_line(self._label, entries))

    def _removed(self, ids: list[uuid.UUID]) -> None:
        for entry_id in ids:
            del self._held[entry_id]
        self._acknowledged(gone_line(ids))

    async def _store_one(self, view: SqlMemoryStore) -> None:
        entry = self._new()
        await view.store(entry)
        self._stored([entry])

    async def _store_many(self, view: SqlMemoryStore) -> None:
        batch = [self._new() for _ in range(self._rng.randint(2, 6))]
        await view.store_many(batch)
        self._stored(batch)

    async def _import(self, view: SqlMemoryStore) -> None:
        batch = [self._new() for _ in range(self._rng.randint(2, 4))]
        lines = "".join(entry_to_json(entry) + "\n" for entry in batch).encode()
        report = await import_jsonl(view, io.BytesIO(lines))
        _expect(len(batch), report.entries, "entries imported")
        self._stored(batch)

    async def _update(self, view: SqlMemoryStore) -> None:
        if not self._held:
            await self._store_one(view)
            return
        entry_id = self._rng.choice(sorted(self._held))
        self._versions[entry_id] += 1
        new = make_entry(
            self._label, self._numbers[entry_id], self._rng, version=self._versions[entry_id]
        )
        expected = dataclasses.replace(
            self._held[entry_id], memory=new.memory, tags=list(new.tags), relevance=new.relevance
        )
        updated = await view.update(
            entry_id, memory=new.memory, tags=list(new.tags), relevance=new.relevance
        )
        _expect(expected, updated, "the updated entry")
        self._stored([expected])

    async def _delete(self, view: SqlMemoryStore) -> None:
        if not self._held or self._rng.random() < 0.2:
            never = uuid.uuid5(uuid.NAMESPACE_URL, f"{self._label}/never/{self._next}")
            _expect(False, await view.delete(never), "delete of an id never stored")
            return
        entry_id = self._rng.choice(sorted(self._held))
        _expect(True, await view.delete(entry_id), "delete of a stored entry")
        self._removed([entry_id])

    def _prunable(self) -> list[uuid.UUID]:
        return [i for i, entry in self._held.items() if entry.relevance < PRUNED_BELOW]

    async def _forget(self, view: SqlMemoryStore) -> None:
        doomed = self._prunable()
        _expect(len(doomed), await view.forget(below=PRUNED_BELOW), "entries forgotten")
        self._removed(doomed)

    async def _consolidate(self, view: SqlMemoryStore) -> None:
        doomed = self._prunable()
        stats = await view.consolidate()
        _expect(
            (len(self._held), len(doomed)),
            (stats.entries_before, stats.pruned),
            "entries before consolidation, and pruned",
        )
        self._removed(doomed)

    async def _retrieve(self, view: SqlMemoryStore) -> None:
        ranking = RANKINGS[self.operations % len(RANKINGS)]
        query = " ".join(self._rng.sample(["deploy", "cache", "retry", "agent", "lock"], 2))
        for entry in await view.retrieve(query, 5, ranking=ranking):
            _expect(self._held.get(entry.id), entry, f"an entry {ranking} retrieved")
        if self._held:  # read your own writes: the one entry holding a word, and only it
            entry_id = self._rng.choice(sorted(self._held))
            word = unique_word(self._label, self._numbers[entry_id])
            found = await view.retrieve(word, 3, ranking="bm25")
            _expect([self._held[entry_id]], found, f"what bm25 finds for {word}")

    async def _count(self, view: SqlMemoryStore) -> None:
        _expect(len(self._held), await view.count(), "the scope's count")


def _expect(expected: object, actual: object, what: str) -> None:
    if expected != actual:
        raise AssertionError(f"{what}: expected {expected!r}, got {actual!r}")


def _wait_for(go_file: Path) -> None:
    while not go_file.exists():
        time.sleep(0.002)


# The long-lived stores leave every few dozen entries to a child process to index,
# which then writes blocks while every process reads and writes.
FOLDING = Tuning(tail_limit=25)


async def main(
    target: str, label: str, go_file: Path, log_path: Path, shape: tuple[int, int]
) -> int:
    """Run the worker (``shape``: tasks, and operations a task); its exit status."""
    tasks, ops = shape
    with log_path.open("a", encoding="utf-8") as log:
        async with open_store(
            target, busy_timeout=BUSY_TIMEOUT, embedder=EMBEDDER, tuning=FOLDING
        ) as store:
            runs = [Task(store, target, f"{label}/t{task}", log) for task in range(tasks)]
            sys.stdout.write("ready\n")
            sys.stdout.flush()
            await asyncio.to_thread(_wait_for, go_file)
            results = await asyncio.gather(
                *(run.run(ops, store_per_operation=i == 0) for i, run in enumerate(runs)),
                return_exceptions=True,
            )
    failures = [result for result in results if isinstance(result, BaseException)]
    for failure in failures:
        sys.stderr.write(f"{type(failure).__name__}: {failure}\n")
    if failures:
        traceback.print_exception(failures[0], file=sys.stderr)
        return 1
    sys.stdout.write(f"done {sum(run.operations for run in runs)}\n")
    return 0


if __name__ == "__main__":
    target, round_, worker, go, log_file, tasks, ops = sys.argv[1:8]
    label = f"r{round_}/w{worker}"
    sys.exit(asyncio.run(main(target, label, Path(go), Path(log_file), (int(tasks), int(ops)))))
