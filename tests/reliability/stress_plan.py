"""What the multi-process stress runs, shared by its processes and the test that checks them.

Every writer works in scopes of its own (a long-lived worker's task in
``r<round>/w<worker>/t<task>``, a short-lived process in ``cli/r<round>/c<chain>``),
so that what a scope must hold follows from what its writer was told was done:
each process appends one line per acknowledged change to a log of its own
(:func:`put_line`, :func:`gone_line`), and :class:`Model` replays the logs.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from loopctl_memory import MemoryCategory, MemoryEntry

EMBEDDER = "python:tests.embedders:WordsEmbedder"
"""Every process opens the store with this embedder, so ``vector`` and ``hybrid`` rank too."""

BUSY_TIMEOUT = 60.0
RANKINGS = ("reference", "bm25", "vector", "hybrid")
PRUNED_BELOW = 0.05  # what forget(below=...) and the default consolidation remove

_NAMESPACE = uuid.UUID("5f0c2d7e-8a41-4b3c-9e6d-2f1a0b9c8d7e")
_WORDS = [
    *("deploy", "cache", "retry", "timeout", "postgres", "index", "agent", "tool", "memory"),
    *("error", "schema", "lock", "queue", "worker", "budget", "token", "trace", "refund"),
    *("invoice", "alert"),
]
_CATEGORIES = list(MemoryCategory)
_RELEVANCES = (0.01, 0.3, 0.55, 0.9)  # 0.01: removed by forget and consolidate


def unique_word(label: str, number: int) -> str:
    """A word that only this entry's text holds (BM25 finds exactly it)."""
    return "u" + uuid.uuid5(_NAMESPACE, f"{label}#{number}").hex[:12]


def make_entry(label: str, number: int, rng: random.Random, *, version: int = 0) -> MemoryEntry:
    """Entry ``number`` of the writer ``label`` (its id never changes; ``version`` its text)."""
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(3, 9)))
    return MemoryEntry(
        rng.choice(_CATEGORIES),
        f"{unique_word(label, number)} v{version} {words}",
        tags=rng.sample(_WORDS, rng.randint(0, 2)),
        relevance=rng.choice(_RELEVANCES),
        id=uuid.uuid5(_NAMESPACE, f"{label}/{number}"),
        created_at=datetime(2026, 3, 1, tzinfo=UTC) + timedelta(milliseconds=number),
    )


def fields(entry: MemoryEntry) -> list[Any]:
    """What the check compares of an entry (as the log writes it)."""
    return [entry.category.value, entry.memory, list(entry.tags), entry.relevance]


def put_line(scope: str, entries: list[MemoryEntry]) -> str:
    """A log line: these entries are stored in ``scope``, as they are now."""
    return json.dumps({"put": [[str(e.id), scope, *fields(e)] for e in entries]})


def gone_line(ids: list[uuid.UUID]) -> str:
    """A log line: these entries were removed."""
    return json.dumps({"gone": [str(entry_id) for entry_id in ids]})


@dataclass
class Model:
    """What the database must hold: every acknowledged change replayed, by id."""

    entries: dict[str, list[Any]] = field(default_factory=dict)
    acknowledged: int = 0
    """Acknowledged changes replayed (a batch counts each of its entries)."""

    def replay(self, lines: str) -> None:
        """Apply a log's lines in order (a torn last line, of a process that died, is left out)."""
        for line in lines.splitlines():
            try:
                change = json.loads(line)
            except json.JSONDecodeError:
                continue
            for entry_id, scope, *rest in change.get("put", ()):
                self.entries[entry_id] = [scope, *rest]
                self.acknowledged += 1
            for entry_id in change.get("gone", ()):
                self.entries.pop(entry_id, None)
                self.acknowledged += 1
