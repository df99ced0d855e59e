"""What the command line and the demo print: rich tables of entries, statistics and results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, Group
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from loopctl_memory.entry import ConsolidationStats, MemoryEntry
from loopctl_memory.jsonl import entry_to_dict
from loopctl_memory.scoring import f32, parse_query

if TYPE_CHECKING:
    from loopctl_memory.migrate import Revision
    from loopctl_memory.sql.repository import Summary


def format_score(value: float) -> str:
    """The shortest decimal that reads back as the same binary32 score."""
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if f32(float(text)) == value:
            return text if "." in text or "e" in text else f"{text}.0"
    return repr(value)  # pragma: no cover - nine digits always round-trip binary32


def _cell(text: str) -> Text:
    """User text, never read as rich markup, cut to its column on one line."""
    return Text(text, no_wrap=True, overflow="ellipsis")


def results_table(query: str, entries: Sequence[MemoryEntry]) -> Table:
    """The ``search`` table: rank, exact score, category, relevance, tags and the memory.

    The memory is cut to the width the console leaves it, one line per entry.
    """
    parsed = parse_query(query)
    tag_texts = [", ".join(entry.tags) for entry in entries]
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("score", justify="right", no_wrap=True)
    table.add_column("category", no_wrap=True)
    table.add_column("relevance", justify="right", no_wrap=True)
    table.add_column("tags", width=min(18, max([4, *map(len, tag_texts)])))
    table.add_column("memory")
    for rank, (entry, tags) in enumerate(zip(entries, tag_texts, strict=True), start=1):
        table.add_row(
            str(rank),
            format_score(parsed.score_of(entry.relevance, entry.memory, entry.tags)),
            str(entry.category),
            repr(entry.relevance),
            _cell(tags),
            _cell(entry.memory),
        )
    return table


def entry_table(entry: MemoryEntry) -> Table:
    """Every field of one entry, one a row, the memory in full."""
    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value")
    for name, value in entry_to_dict(entry).items():
        shown = ", ".join(value) if name == "tags" else str(value)
        table.add_row(name, Text(shown))
    return table


@dataclass(frozen=True, slots=True)
class StoreStats:
    """What ``stats`` reports."""

    database: str
    size_bytes: int | None
    schema_revision: str | None
    summary: Summary
    scope: str = ""
    scopes: Sequence[tuple[str, int]] = ()
    """(name, entries) of the scope and each below it that holds entries."""

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form printed by ``stats --json``."""
        return {
            "database": self.database,
            "size_bytes": self.size_bytes,
            "schema_revision": self.schema_revision,
            "scope": self.scope,
            "entries": self.summary.entries,
            "by_category": {str(c): n for c, n in self.summary.by_category.items()},
            "relevance_histogram": list(self.summary.relevance_histogram),
            "scopes": dict(self.scopes),
        }


def stats_view(stats: StoreStats) -> Group:
    """The ``stats`` tables: the database, the counts by category, the relevance histogram."""
    size = "-" if stats.size_bytes is None else _human_size(stats.size_bytes)
    overview = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    overview.add_column("what", style="bold", no_wrap=True)
    overview.add_column("value")
    overview.add_row("database", Text(stats.database))
    overview.add_row("size", size)
    overview.add_row("schema revision", str(stats.schema_revision))
    if stats.scope:
        overview.add_row("scope", Text(stats.scope))
    overview.add_row("entries", str(stats.summary.entries))

    categories = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    categories.add_column("category", no_wrap=True)
    categories.add_column("entries", justify="right")
    for category, number in stats.summary.by_category.items():
        categories.add_row(str(category), str(number))

    histogram = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    histogram.add_column("relevance", no_wrap=True)
    histogram.add_column("entries", justify="right")
    histogram.add_column("", no_wrap=True)
    biggest = max(stats.summary.relevance_histogram, default=0) or 1
    for low, number in enumerate(stats.summary.relevance_histogram):
        closing = "]" if low == 9 else ")"
        bar = "█" * math.ceil(30 * number / biggest) if number else ""
        histogram.add_row(f"[{low / 10:.1f}, {(low + 1) / 10:.1f}{closing}", str(number), bar)
    parts: list[Any] = [overview, Text(), categories, Text(), histogram]
    if len(stats.scopes) > 1 or (stats.scopes and stats.scopes[0][0] != stats.scope):
        parts += [Text(), scopes_table(stats.scopes)]
    return Group(*parts)


def scopes_table(found: Sequence[tuple[str, int]]) -> Table:
    """``scopes``: each scope's name (the root shown as ``(root)``) and its number of entries."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("scope", no_wrap=True)
    table.add_column("entries", justify="right")
    for name, number in found:
        table.add_row(Text(name) if name else Text("(root)", style="italic"), str(number))
    return table


def consolidation_view(target: str, stats: ConsolidationStats) -> Group:
    """What ``consolidate`` did."""
    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    table.add_column("what", style="bold", no_wrap=True)
    table.add_column("value", justify="right")
    for name, value in asdict(stats).items():
        table.add_row(name.replace("_", " "), str(value))
    return Group(Text(f"consolidated {target}:"), table)


def _human_size(size: int) -> str:
    amount = float(size)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if amount < 1024 or unit == "GiB":
            return f"{size} bytes" if unit == "bytes" else f"{amount:.1f} {unit}"
        amount /= 1024
    return f"{size} bytes"  # pragma: no cover - the loop always returns


class ImportProgress:
    """The ``import`` progress bar on stderr, drawn only when stderr is a terminal."""

    def __init__(self, total_bytes: int | None) -> None:
        err = console(stderr=True)
        self._bar = Progress(
            TextColumn("importing {task.fields[entries]} entries"),
            BarColumn(),
            DownloadColumn(),
            TimeRemainingColumn(),
            console=err,
            disable=not err.is_terminal,
        )
        self._task = self._bar.add_task("importing", total=total_bytes, entries=0)

    def advance(self, stored: int, consumed: int) -> None:
        """After a batch: ``stored`` entries in all, ``consumed`` more bytes read."""
        self._bar.update(self._task, advance=consumed, entries=stored)

    def __enter__(self) -> ImportProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._bar.stop()


def console(*, stderr: bool = False) -> Console:
    """A console that prints text as given: no highlighting, no emoji codes."""
    return Console(stderr=stderr, highlight=False, emoji=False)


def database_size(file: Path) -> int:
    """The bytes a SQLite file takes, with its write-ahead log."""
    parts = (file, file.with_name(f"{file.name}-wal"))
    return sum(part.stat().st_size for part in parts if part.exists())


def revisions_table(history: Sequence[Revision], *, current: str | None, head: str) -> Table:
    """``migrate --list``: every revision, oldest first, marking the current one and head."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("revision", no_wrap=True)
    table.add_column("description")
    table.add_column("", no_wrap=True)
    for script in history:
        marks = [
            mark
            for mark, on in (
                ("current", script.revision == current),
                ("head", script.revision == head),
            )
            if on
        ]
        table.add_row(script.revision, Text(script.message), ", ".join(marks))
    return table
