"""What the command line and the demo print: rich tables of entries, statistics and results."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.padding import Padding
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
)
from rich.table import Table
from rich.text import Text

from loopctl_memory.binary32 import f32
from loopctl_memory.entry import ConsolidationStats, MemoryEntry
from loopctl_memory.entry_json import entry_to_dict
from loopctl_memory.history import HistoryEvent, describe
from loopctl_memory.metadata import encoded

if TYPE_CHECKING:
    from loopctl_memory.entry import Summary
    from loopctl_memory.migrate import Revision
    from loopctl_memory.sql.store.embeddings import RecordedEmbedder


DIGITS = 4
"""The significant digits people are shown of a score or a relevance (``--json`` gives
each number whole)."""


def for_people(value: float) -> str:
    """A score of any ranking, or a relevance, as the tables show it: four significant digits.

    A BM25 score has no upper bound and takes 17 digits to write exactly; a
    decayed reference score or relevance (binary32) takes up to nine (0.99998277
    shows as 1.0): four keep the table narrow and the order readable (the rank
    column gives the order itself).
    """
    return _decimal(f"{value:.{DIGITS}g}")


def json_score(value: float, ranking: str) -> float:
    """A score as ``--json`` gives it: exact, and a binary32 one in its shortest form.

    A reference or ``vector`` score is a binary32 value: the shortest decimal
    that reads back as that value (0.725, not 0.7250000238418579); a BM25 or
    ``hybrid`` score, and a ``vector`` score with context, is binary64 and stays
    as it is.
    """
    if ranking in {"bm25", "hybrid"}:
        return value
    for digits in range(1, 10):
        text = f"{value:.{digits}g}"
        if f32(float(text)) == value:
            return float(text)
    return value  # not binary32: a vector score with its neighbours' part


def _decimal(text: str) -> str:
    """``text``, with ``.0`` when it would read as a whole number."""
    return text if "." in text or "e" in text else f"{text}.0"


@dataclass(frozen=True, slots=True)
class SearchResult:
    """One answer of ``search``: the entry, its score and its short id."""

    entry: MemoryEntry
    score: float
    """The score the store ranked it by, shown by :func:`for_people`."""
    short_id: str
    """The id's shortest prefix unique in the store, as ``SqlMemoryStore.short_id`` finds it."""


_MIN_MEMORY = 20
"""The narrowest memory column a table is drawn with; below it, one block per entry."""
_GAP = 2
"""The spaces between two columns of a table (padding collapsed)."""


class SearchResults:
    """The ``search`` view: a table that gives the memory the width, or blocks when narrow.

    The table has rank, short id, score (never cut), category, relevance, tags
    (one a line, cut to a narrow column) and the memory (its metadata, if any, on
    a dim line below), which takes the width left and wraps. When that leaves the
    memory fewer than 20 columns, each entry is a block instead: a line with
    rank, id, score and category, then the memory wrapped, then the relevance
    and the tags. Nothing is cut but tags, and a memory (or its metadata) longer
    than :data:`SHOWN_CHARACTERS`.
    """

    def __init__(self, results: Sequence[SearchResult], *, created: bool = False) -> None:
        """``created``: the column shows when each was created, not a score (``list``)."""
        self._results = list(results)
        self._header = "created" if created else "score"
        self._scores = [
            f"{result.entry.created_at:%Y-%m-%d %H:%M}" if created else for_people(result.score)
            for result in results
        ]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        """The table when the memory gets enough columns, else the blocks."""
        width = options.max_width
        table = self._table(width)
        if table is not None:
            yield table
            return
        for rank, (result, score) in enumerate(zip(self._results, self._scores, strict=True), 1):
            if rank > 1:
                yield Text()
            yield from self._block(rank, result, score)

    def _table(self, width: int) -> Table | None:
        results = self._results
        ranks = [str(rank) for rank in range(1, len(results) + 1)]
        ids = [result.short_id for result in results]
        categories = [str(result.entry.category) for result in results]
        relevances = [for_people(result.entry.relevance) for result in results]
        tags = [result.entry.tags for result in results]
        widest_tag = max((len(tag) for entry_tags in tags for tag in entry_tags), default=0)
        tags_width = min(max(4, widest_tag), max(8, width // 10))

        def widest(header: str, cells: list[str]) -> int:
            return max(len(header), *map(len, cells))

        fixed = [widest("#", ranks), widest("id", ids), widest(self._header, self._scores)]
        fixed += [widest("category", categories), tags_width]
        left = width - sum(fixed) - _GAP * 6
        relevance = "relevance"
        if left - widest(relevance, relevances) < 2 * _MIN_MEMORY:
            relevance = "rel."  # the long header costs the memory too much
        left -= widest(relevance, relevances)
        if left < _MIN_MEMORY:
            return None

        table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False, collapse_padding=True)
        table.add_column("#", justify="right", no_wrap=True)
        table.add_column("id", no_wrap=True)
        table.add_column(self._header, justify="right", no_wrap=True)
        table.add_column("category", no_wrap=True)
        table.add_column(relevance, justify="right", no_wrap=True)
        table.add_column("tags", width=tags_width, no_wrap=True)
        table.add_column("memory", max_width=left)
        columns = (ranks, ids, self._scores, categories, relevances)
        for *cells, entry_tags, result in zip(*columns, tags, results, strict=True):
            table.add_row(
                *cells,
                Text("\n".join(entry_tags), no_wrap=True, overflow="ellipsis"),
                _memory_cell(result.entry),
            )
        return table

    @staticmethod
    def _block(rank: int, result: SearchResult, score: str) -> list[RenderableType]:
        entry = result.entry
        indent = len(str(rank)) + 2
        header = Text(f"{rank}  {result.short_id}  {score}  {entry.category}", style="bold")
        details = f"relevance {for_people(entry.relevance)}"
        if entry.tags:
            details += f"  tags {', '.join(entry.tags)}"
        return [
            header,
            Padding(_memory_cell(entry), (0, 0, 0, indent), expand=False),
            Padding(Text(details, overflow="fold"), (0, 0, 0, indent), expand=False),
        ]


SHOWN_CHARACTERS = 1_000
"""The most of a memory (and of its metadata) a search's table shows; `get` and --json: all."""


def _memory_cell(entry: MemoryEntry) -> Text:
    """The memory, then its metadata as compact JSON on a dim line of its own, if any.

    Each cut to :data:`SHOWN_CHARACTERS`, saying how much more there is.
    """
    cell = Text(_cut(entry.memory), overflow="fold")
    if entry.metadata:
        cell.append("\n" + _cut(encoded(entry.metadata)), style="dim")
    return cell


def _cut(text: str) -> str:
    """``text``, or its first :data:`SHOWN_CHARACTERS` and how many more (`get` shows them)."""
    if len(text) <= SHOWN_CHARACTERS:
        return text
    return f"{text[:SHOWN_CHARACTERS]}… ({len(text) - SHOWN_CHARACTERS:,} more characters: get)"


def entry_table(entry: MemoryEntry) -> Table:
    """Every field of one entry, one a row, the memory in full."""
    table = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    table.add_column("field", style="bold", no_wrap=True)
    table.add_column("value")
    for name, value in entry_to_dict(entry).items():
        shown = ", ".join(value) if name == "tags" else str(value)
        if name == "relevance":
            shown = for_people(value)
        elif name == "metadata":
            shown = encoded(value)
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
    free_bytes: int | None = None
    """Of ``size_bytes``, the free pages kept for later writes (None: not known)."""
    embedder: RecordedEmbedder | None = None
    """The embedder the store records, and the entries still without its vector."""

    def to_json(self) -> dict[str, Any]:
        """The machine-readable form printed by ``stats --json``."""
        return {
            "database": self.database,
            "size_bytes": self.size_bytes,
            "free_bytes": self.free_bytes,
            "schema_revision": self.schema_revision,
            "scope": self.scope,
            "entries": self.summary.entries,
            "by_category": {str(c): n for c, n in self.summary.by_category.items()},
            "relevance_histogram": list(self.summary.relevance_histogram),
            "scopes": dict(self.scopes),
            "embedder": None
            if self.embedder is None
            else {
                "name": self.embedder.name,
                "dims": self.embedder.dims,
                "spec": self.embedder.spec,
                "pending": self.embedder.pending,
            },
        }


def stats_view(stats: StoreStats) -> Group:
    """The ``stats`` tables: the database, the counts by category, the relevance histogram."""
    size = "-" if stats.size_bytes is None else _human_size(stats.size_bytes)
    overview = Table(box=box.SIMPLE, show_header=False, show_edge=False, pad_edge=False)
    overview.add_column("what", style="bold", no_wrap=True)
    overview.add_column("value")
    overview.add_row("database", Text(stats.database))
    overview.add_row("size", size)
    if stats.free_bytes is not None:  # a SQLite file's free pages, kept for later writes
        hint = " (given back by consolidate --vacuum)" if stats.free_bytes else ""
        overview.add_row("free", _human_size(stats.free_bytes) + hint)
    overview.add_row("schema revision", str(stats.schema_revision))
    if stats.scope:
        overview.add_row("scope", Text(stats.scope))
    below = sum(number for name, number in stats.scopes if name != stats.scope)
    under = f"the scopes below {stats.scope}" if stats.scope else "scopes"
    more = f" (and {below} in {under}: see the last table)" if below else ""
    overview.add_row("entries", f"{stats.summary.entries}{more}")
    if stats.embedder is not None:
        named = stats.embedder
        overview.add_row("embedder", Text(f"{named.spec or named.name} ({named.dims} dims)"))
        hint = " (embed-pending makes their vectors)" if named.pending else ""
        overview.add_row("pending vectors", f"{named.pending}{hint}")

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
        self.stored = 0
        """Entries stored so far (as of the last batch committed and reported)."""

    def advance(self, stored: int, consumed: int) -> None:
        """After a batch: ``stored`` entries in all, ``consumed`` more bytes read."""
        self.stored = stored
        self._bar.update(self._task, advance=consumed, entries=stored)

    def __enter__(self) -> ImportProgress:
        self._bar.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._bar.stop()


class CountedProgress:
    """A progress bar of a count on stderr (``reembed``, ``index``), drawn only on a terminal."""

    def __init__(self, doing: str) -> None:
        err = console(stderr=True)
        self._bar = Progress(
            TextColumn(doing),
            BarColumn(),
            MofNCompleteColumn(),
            TimeRemainingColumn(),
            console=err,
            disable=not err.is_terminal,
        )
        self._task = self._bar.add_task(doing, total=None)

    def update(self, done: int, total: int) -> None:
        """``done`` of ``total`` are done."""
        self._bar.update(self._task, completed=done, total=total)

    def __enter__(self) -> CountedProgress:
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


def history_table(events: Sequence[HistoryEvent]) -> Table:
    """``history``: each event's time (UTC), kind, memory (short id), scope, cause, effect."""
    table = Table(box=box.SIMPLE_HEAD, show_edge=False, pad_edge=False)
    table.add_column("at (UTC)", no_wrap=True)
    table.add_column("event", no_wrap=True)
    table.add_column("memory", no_wrap=True)
    table.add_column("scope", no_wrap=True)
    table.add_column("cause", no_wrap=True)
    table.add_column("what", overflow="fold")
    for event in events:
        table.add_row(
            event.at.strftime("%Y-%m-%d %H:%M:%S"),
            Text(event.event, style="red" if event.removed else ""),
            event.entry_id.hex[:8],
            Text(event.scope) if event.scope else Text("(own)", style="italic"),
            event.cause or "",
            Text(describe(event)),
        )
    return table
