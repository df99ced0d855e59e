"""The memories the search and recall tests of rankings and filters share.

Five memories: four about a deploy, of four categories, tagged, validated or
not, created on fixed dates or hours and days ago, and one unrelated (which
the reference pads its answers with, BM25 never).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from loopctl_memory import MemoryCategory, MemoryEntry

NOW = datetime.now(UTC)  # ages are counted back from the clock: the entries are days apart


def memory(text: str, category: str = "fact", **fields: Any) -> MemoryEntry:
    return MemoryEntry(MemoryCategory(category), text, **fields)


OLD_FACT = memory(
    "the deploy runs make release", tags=["Deploy"], created_at=datetime(2025, 6, 1, tzinfo=UTC)
)
OLD_ERROR = memory(
    "deploy failed: the disk was full",
    "error_pattern",
    tags=["disk"],
    validated=True,
    created_at=datetime(2025, 12, 1, tzinfo=UTC),
)
RECENT_STRATEGY = memory(
    "retry the deploy after freeing the disk",
    "strategy",
    tags=["deploy", "disk"],
    validated=True,
    created_at=NOW - timedelta(days=2),
)
RECENT_INSIGHT = memory(
    "deploy deploy deploy: the word a log repeats", "insight", created_at=NOW - timedelta(hours=1)
)
UNRELATED = memory("lunch is at noon", relevance=1.0, created_at=NOW - timedelta(days=30))
ENTRIES = [OLD_FACT, OLD_ERROR, RECENT_STRATEGY, RECENT_INSIGHT, UNRELATED]
