"""Space given back, measured: what ``auto_vacuum=INCREMENTAL`` costs and what a vacuum returns.

1. The cost: ``--size`` natural entries by ``store_many`` (batches of 5,000) into a
   new file, which this version creates ``auto_vacuum=INCREMENTAL``, and into a
   file made ``auto_vacuum=NONE`` as older versions made them (the pragma set on
   an empty scratch file before ``open_store`` creates the schema); then the
   median of ``--single-stores`` single ``store()`` calls, alternating between the
   two files (5 warm-up calls each excluded).
2. The space: ``--prune-size`` natural entries (exactly 10% below the pruning
   threshold) into each kind of file, then ``consolidate()`` (prunes the 10%),
   then ``consolidate(vacuum=True)`` (prunes nothing; gives the space back). The
   sizes are of the files once the store is closed (SQLite then checkpoints and
   removes the write-ahead log), and of database + log while it is still open.
   On the INCREMENTAL file the removal itself gives back the whole pages it freed;
   ``vacuum=True`` is a full ``VACUUM`` on both, which packs the part-full pages too.

Prints a markdown table; writes nothing else (the files live in a temporary
directory unless ``--dir`` is given).

    .venv/bin/python -m benchmarks.space_bench [--size 1m] [--prune-size 300k]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import machine
from benchmarks.sizes import parse_size, size_label
from loopctl_memory import MemoryEntry, open_store

BATCH = 5_000
WARMUP = 5
MODES = ("INCREMENTAL", "NONE")


def _files(db: Path) -> int:
    """Bytes of the database and its write-ahead log."""
    paths = (db, db.with_name(db.name + "-wal"))
    return sum(path.stat().st_size for path in paths if path.exists())


def _remove(directory: Path, pattern: str) -> None:
    for path in directory.glob(pattern):
        path.unlink()


def _mb(size: float) -> str:
    return f"{size / 2**20:,.1f}"


def _auto_vacuum(db: Path) -> str:
    raw = sqlite3.connect(db)
    try:
        (mode,) = raw.execute("PRAGMA auto_vacuum").fetchone()
    finally:
        raw.close()
    return {0: "NONE", 1: "FULL", 2: "INCREMENTAL"}[mode]


def _new_file(db: Path, mode: str) -> None:
    """An empty database file: NONE as older versions created them; INCREMENTAL: nothing yet."""
    for path in (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")):
        path.unlink(missing_ok=True)
    if mode == "INCREMENTAL":
        return  # open_store creates every new file so
    raw = sqlite3.connect(db, isolation_level=None)
    try:
        raw.execute("PRAGMA page_size=8192")
        raw.execute("PRAGMA auto_vacuum=NONE")
        raw.execute("CREATE TABLE scratch (x)")  # fixes the mode; open_store sees no table
        raw.execute("DROP TABLE scratch")
    finally:
        raw.close()


async def _load(db: Path, entries: Sequence[MemoryEntry], mode: str) -> None:
    """Store ``entries`` in batches into a new file of ``mode``."""
    _new_file(db, mode)
    async with open_store(db) as store:
        for start in range(0, len(entries), BATCH):
            await store.store_many(entries[start : start + BATCH])
    _check_mode(db, mode)


def _check_mode(db: Path, mode: str) -> None:
    found = _auto_vacuum(db)
    if found != mode:
        raise SystemExit(f"{db} is auto_vacuum={found}, not {mode}")


@dataclass
class Cost:
    """Part 1, one kind of file."""

    mode: str
    load_s: float = 0.0
    size: int = 0
    store_us: float = 0.0


async def measure_cost(directory: Path, workload: str, size: int, singles: int) -> list[Cost]:
    """Bulk load and single stores, INCREMENTAL and NONE, batch by batch and call by call in turn.

    Taking turns spreads the machine's drifts over both files alike.
    """
    entries = workloads.entries(workload, size)
    extra = workloads.extra_entries(workload, size, WARMUP + singles)
    costs = [Cost(mode) for mode in MODES]
    paths = [directory / f"cost-{mode}.db" for mode in MODES]
    for path, mode in zip(paths, MODES, strict=True):
        _new_file(path, mode)
    gc.collect()
    timings: dict[str, list[float]] = {mode: [] for mode in MODES}
    async with open_store(paths[0]) as first, open_store(paths[1]) as second:
        pairs = list(zip(costs, (first, second), strict=True))
        for number, start in enumerate(range(0, size, BATCH)):
            for cost, store in pairs[:: 1 if number % 2 == 0 else -1]:
                began = time.perf_counter()
                await store.store_many(entries[start : start + BATCH])
                cost.load_s += time.perf_counter() - began
        print("  loaded", file=sys.stderr)
        for number, entry in enumerate(extra):
            for cost, store in pairs[:: 1 if number % 2 == 0 else -1]:
                began = time.perf_counter()
                await store.store(entry)
                timings[cost.mode].append(time.perf_counter() - began)
    for cost, path in zip(costs, paths, strict=True):
        _check_mode(path, cost.mode)
        cost.size = _files(path)
        cost.store_us = statistics.median(timings[cost.mode][WARMUP:]) * 1e6
    return costs


@dataclass
class Space:
    """Part 2, one row."""

    label: str
    loaded: int = 0
    removed: int = 0
    remove_s: float = 0.0
    open_after: int = 0
    free_after: int = 0
    closed_after: int = 0
    vacuum_s: float = 0.0
    pass_s: float = 0.0
    open_vacuumed: int = 0
    closed_vacuumed: int = 0
    mode_after: str = ""


async def _space_row(db: Path, entries: Sequence[MemoryEntry], mode: str, *, oldest: bool) -> Space:
    """Load, remove 10% (pruned by consolidate, or the oldest by forget), then vacuum."""
    if oldest:  # nothing below the pruning threshold: the vacuum's pass prunes nothing
        entries = [
            dataclasses.replace(entry, relevance=0.5) if entry.relevance < 0.05 else entry
            for entry in entries
        ]
    await _load(db, entries, mode)
    how = "forget the oldest 10%" if oldest else "consolidate: prune 10%"
    row = Space(f"{mode}, {how}", loaded=_files(db))
    async with open_store(db) as store:
        began = time.perf_counter()
        if oldest:
            cut = workloads.CREATED_BASE + dt.timedelta(microseconds=len(entries) // 10)
            row.removed = await store.forget(older_than=cut)
        else:
            row.removed = (await store.consolidate()).pruned
        row.remove_s = time.perf_counter() - began
        row.open_after = _files(db)
        row.free_after = await store.free_bytes() or 0
    row.closed_after = _files(db)
    async with open_store(db) as store:
        began = time.perf_counter()
        stats = await store.consolidate(vacuum=True)  # prunes nothing: the vacuum, and a pass
        row.vacuum_s = time.perf_counter() - began
        row.open_vacuumed = _files(db)
        still = await store.free_bytes()
        if stats.pruned or still:
            raise SystemExit(f"{db}: {stats}, {still} bytes still free")
        began = time.perf_counter()
        await store.consolidate()  # the same pass without the vacuum
        row.pass_s = time.perf_counter() - began
    row.closed_vacuumed = _files(db)
    row.mode_after = _auto_vacuum(db)
    print(f"  {row.label}: done", file=sys.stderr)
    return row


async def measure_space(directory: Path, workload: str, size: int) -> list[Space]:
    """10% removed, then vacuumed, on each kind of file; then the oldest 10% forgotten."""
    entries = workloads.entries(workload, size)
    db = directory / "space.db"
    rows = [await _space_row(db, entries, mode, oldest=False) for mode in MODES]
    rows.append(await _space_row(db, entries, "INCREMENTAL", oldest=True))
    return rows


def report(
    costs: list[Cost], spaces: list[Space], *, workload: str, size: int, prune: int, command: str
) -> str:
    """The markdown section."""
    base = costs[1]
    lines = [
        "## Space given back: auto_vacuum=INCREMENTAL and consolidate(vacuum=True)",
        "",
        f"- Command: `{command}`",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine()}",
        "",
        f"The cost, {workload} {size_label(size)}: `store_many` in batches of {BATCH:,}, the two"
        " files taking turns batch by batch; then single `store()` calls, taking turns, median"
        f" after {WARMUP} warm-up calls each:",
        "",
        "| file | store_many s | rows/s | vs NONE | single store µs | vs NONE | file MB |",
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {cost.mode} | {cost.load_s:.1f} | {size / cost.load_s:,.0f}"
        f" | {cost.load_s / base.load_s:.2f}x | {cost.store_us:.0f}"
        f" | {cost.store_us / base.store_us:.2f}x | {_mb(cost.size)} |"
        for cost in costs
    ]
    lines += [
        "",
        f"The space, {workload} {size_label(prune)}: 10% removed, then"
        " `consolidate(vacuum=True)` (which then prunes nothing); MB of database +"
        " write-ahead log, once the store is closed (SQLite then checkpoints and removes"
        " the log) and while it is still open:",
        "",
        "| file, removal | loaded MB | removed | removal s | not vacuumed: closed MB | open MB"
        " | free MB | consolidate(vacuum=True) s | same pass, no vacuum s | vacuumed: closed MB"
        " | open MB | given back | auto_vacuum after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in spaces:
        given = 1 - row.closed_vacuumed / row.closed_after
        lines.append(
            f"| {row.label} | {_mb(row.loaded)} | {row.removed:,} | {row.remove_s:.2f}"
            f" | {_mb(row.closed_after)} | {_mb(row.open_after)} | {_mb(row.free_after)}"
            f" | {row.vacuum_s:.2f} | {row.pass_s:.2f}"
            f" | {_mb(row.closed_vacuumed)} | {_mb(row.open_vacuumed)}"
            f" | {given:.1%} | {row.mode_after} |"
        )
    lines += [
        "",
        "- `consolidate(vacuum=True) s`: the whole call, a pass over the entries (pruning"
        " nothing) and the vacuum; `same pass, no vacuum`: `consolidate()` right after, for"
        " comparison.",
        "- `not vacuumed`: on an INCREMENTAL file the removal itself cut off the whole pages"
        " it freed (`free MB` is what is left free); `given back`: the share of the closed"
        " file the vacuum (a full `VACUUM`) then removed.",
    ]
    return "\n".join(lines)


BEGIN, END = "<!-- space: begin -->", "<!-- space: end -->"


def main(argv: Sequence[str] | None = None) -> None:
    """Run both parts and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=parse_size, default=parse_size("1m"))
    parser.add_argument("--prune-size", type=parse_size, default=parse_size("300k"))
    parser.add_argument("--single-stores", type=int, default=200)
    parser.add_argument("--workload", choices=workloads.WORKLOADS, default="natural")
    parser.add_argument("--dir", type=Path, help="keep the files here (default: a temp dir)")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    options = parser.parse_args(argv)
    command = "python -m benchmarks.space_bench " + " ".join(sys.argv[1:] if argv is None else argv)

    async def run(directory: Path) -> str:
        costs = await measure_cost(directory, options.workload, options.size, options.single_stores)
        _remove(directory, "cost-*")  # room on disk for the second part
        spaces = await measure_space(directory, options.workload, options.prune_size)
        return report(
            costs,
            spaces,
            workload=options.workload,
            size=options.size,
            prune=options.prune_size,
            command=command.strip(),
        )

    if options.dir is not None:
        options.dir.mkdir(parents=True, exist_ok=True)
        text = asyncio.run(run(options.dir))
    else:
        with tempfile.TemporaryDirectory(prefix="space-bench-") as directory:
            text = asyncio.run(run(Path(directory)))
    print(text)
    if options.out is not None:
        write_section(options.out, f"{BEGIN}\n{text}\n\n{END}", BEGIN, END)


if __name__ == "__main__":
    main()
