"""The benchmark runner: our store against its baselines, on the same data, in one table.

For each workload (``natural``, ``dense``) and size, in a fresh temporary directory:

1. ``store_many`` every entry into a new SQLite file, in batches (rows/s), and raw
   ``sqlite3`` ``executemany`` of the same entries into a plain entries + tags schema.
2. Serve: a fresh child process opens the file and runs every query (limit 5)
   after a warm-up: ``retrieve`` p50/p95 and the process's peak RSS (VmHWM).
3. Guard: the first ``--guard`` queries' answers must be exactly the ids that
   ``InMemoryStore`` (the reference port) returns, in the same order; a wrong
   answer fails the run. The same queries time the baselines: ``InMemoryStore``,
   the raw SQL query that scores every row, and the compiled Rust reference.
4. ``consolidate`` (10% of the entries are prunable), then single ``store`` calls
   (one awaited call each, a durable commit), against one-row raw ``aiosqlite``
   transactions.

Only the public API of ``loopctl_memory`` is used.

    .venv/bin/python -m benchmarks.run [--sizes 10k,100k,1m] [--workloads natural,dense,ids,zipf2]
                                       [--queries 200] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import math
import os
import platform
import resource
import shlex
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import text

from benchmarks import baselines, workloads
from loopctl_memory import InMemoryStore, MemoryEntry, migrate, open_store

LIMIT = 5
ROOT = baselines.ROOT
SIZE_SUFFIXES = {"k": 1_000, "m": 1_000_000}
SERVE = "_serve"  # the hidden first argument of the serving child process
LONG_QUERY_WORDS = 100_000  # a whole prompt or tool output passed as the query


def _log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def parse_size(text: str) -> int:
    """``10k`` -> 10000, ``1m`` -> 1000000, ``2500`` -> 2500."""
    text = text.strip().lower()
    factor = SIZE_SUFFIXES.get(text[-1:], 1)
    digits = text[:-1] if text[-1:] in SIZE_SUFFIXES else text
    try:
        size = int(float(digits) * factor)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 10k, 100k, 1m)") from None
    if size < LIMIT:
        raise argparse.ArgumentTypeError(f"size {text!r} is below the retrieve limit {LIMIT}")
    return size


def size_label(size: int) -> str:
    """The inverse of :func:`parse_size` for round sizes."""
    for suffix, factor in sorted(SIZE_SUFFIXES.items(), key=lambda item: -item[1]):
        if size % factor == 0:
            return f"{size // factor}{suffix}"
    return str(size)


def _p(values: Sequence[float], percent: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(percent / 100 * len(ordered)) - 1)]


# --- the serving child ----------------------------------------------------


def _peak_rss_kb() -> int:
    """This process's peak resident set (VmHWM), in KiB."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux


async def _serve(
    db: str | Path, queries: list[str], warmup: int, guard: int, budget: float
) -> object:
    began = time.perf_counter()
    async with open_store(db) as store:
        await store.retrieve(queries[0], LIMIT)
        first_query_s = time.perf_counter() - began  # what a new agent process waits
        for query in queries[:warmup]:
            await store.retrieve(query, LIMIT)
        gc.collect()
        timings: list[float] = []
        answers: list[list[str]] = []
        started = time.perf_counter()
        for number, query in enumerate(queries):
            began = time.perf_counter()
            found = await store.retrieve(query, LIMIT)
            timings.append(time.perf_counter() - began)
            if number < guard:
                answers.append([str(entry.id) for entry in found])
            if number + 1 >= guard and time.perf_counter() - started > budget:
                break
        warm: list[float] = []  # the same queries again: every word seen before
        for query in queries[: len(timings)]:
            began = time.perf_counter()
            await store.retrieve(query, LIMIT)
            warm.append(time.perf_counter() - began)
        began = time.perf_counter()
        await store.retrieve(workloads.long_query("natural", LONG_QUERY_WORDS), LIMIT)
        long_query_s = time.perf_counter() - began
        count = await store.count()
    return {
        "long_query_s": long_query_s,
        "warm": warm,
        "timings": timings,
        "answers": answers,
        "count": count,
        "peak_rss_kb": _peak_rss_kb(),
        "first_query_s": first_query_s,
    }


def serve_main(argv: Sequence[str]) -> None:
    """The child: ``_serve DB QUERIES_JSON WARMUP GUARD BUDGET``; prints JSON on stdout."""
    db, queries_file, warmup, guard, budget = argv
    queries = json.loads(Path(queries_file).read_text(encoding="utf-8"))
    target = db if "://" in db else Path(db)
    report = asyncio.run(_serve(target, queries, int(warmup), int(guard), float(budget)))
    print(json.dumps(report))


@dataclass(frozen=True, slots=True)
class Served:
    """What the serving child measured."""

    timings: list[float]
    warm: list[float]
    long_query_s: float
    answers: list[list[str]]
    count: int
    peak_rss_mb: float
    first_query_s: float


def serve(db: str | Path, queries: list[str], options: Options, scratch: Path) -> Served:
    """Run the serving phase in a fresh interpreter, so its peak RSS is the server's alone."""
    queries_file = scratch / "queries.json"
    queries_file.write_text(json.dumps(queries), encoding="utf-8")
    command = [sys.executable, "-m", "benchmarks.run", SERVE, str(db), str(queries_file)]
    command += [str(options.warmup), str(options.guard), str(options.serve_budget)]
    completed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if completed.returncode != 0:
        raise SystemExit(f"the serving process failed:\n{completed.stderr}")
    report = json.loads(completed.stdout)
    return Served(
        timings=report["timings"],
        warm=report["warm"],
        long_query_s=report["long_query_s"],
        answers=report["answers"],
        count=report["count"],
        peak_rss_mb=report["peak_rss_kb"] / 1024,
        first_query_s=report["first_query_s"],
    )


# --- one (workload, size) -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Options:
    """What the command line asked for."""

    queries: int
    guard: int
    warmup: int
    batch: int
    single_stores: int
    serve_budget: float
    rust: Path | None
    postgresql: str | None = None


@dataclass(slots=True)
class Row:
    """Every figure of one (workload, size)."""

    workload: str
    size: int
    store_us: float = math.nan
    raw_store_us: float = math.nan
    store_many_rps: float = math.nan
    raw_rps: float = math.nan
    raw_executemany_rps: float = math.nan
    p50_ms: float = math.nan
    p95_ms: float = math.nan
    p99_ms: float = math.nan
    max_ms: float = math.nan
    first_query_s: float = math.nan
    warm_p50_ms: float = math.nan
    warm_p99_ms: float = math.nan
    warm_max_ms: float = math.nan
    long_query_s: float = math.nan
    timed_queries: int = 0
    guard_p50_ms: float = math.nan
    guard_mean_ms: float = math.nan
    memory_p50_ms: float = math.nan
    scan_p50_ms: float = math.nan
    rust_ms: float = math.nan
    rust_borrowed_ms: float = math.nan
    consolidate_s: float = math.nan
    db_mb: float = math.nan
    raw_db_mb: float = math.nan
    peak_rss_mb: float = math.nan
    pg_store_us: float = math.nan
    pg_store_many_rps: float = math.nan
    pg_p50_ms: float = math.nan
    pg_p95_ms: float = math.nan
    pg_consolidate_s: float = math.nan


class WrongAnswerError(Exception):
    """The store returned something other than what the reference returns."""


def _files_mb(db: Path) -> float:
    paths = (db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm"))
    return sum(path.stat().st_size for path in paths if path.exists()) / 2**20


async def _store_many(db: str | Path, entries: Sequence[MemoryEntry], batch: int) -> float:
    async with open_store(db) as store:
        began = time.perf_counter()
        for start in range(0, len(entries), batch):
            await store.store_many(entries[start : start + batch])
        elapsed = time.perf_counter() - began
        stored = await store.count()
    if stored != len(entries):
        raise WrongAnswerError(f"store_many stored {stored} of {len(entries)} entries")
    return len(entries) / elapsed


async def _consolidate_then_store(
    db: str | Path, expected_pruned: int, extra: Sequence[MemoryEntry], warmup: int
) -> tuple[float, float]:
    """Seconds to consolidate, then the median µs of single ``store`` calls."""
    async with open_store(db) as store:
        before = await store.count()
        began = time.perf_counter()
        stats = await store.consolidate()
        consolidate_s = time.perf_counter() - began
        if stats.pruned != expected_pruned or stats.entries_before != before:
            raise WrongAnswerError(f"consolidate: {stats}, expected {expected_pruned} pruned")
        timings = []
        for entry in extra:
            began = time.perf_counter()
            await store.store(entry)
            timings.append(time.perf_counter() - began)
    return consolidate_s, statistics.median(timings[warmup:]) * 1e6


async def _reference_answers(
    entries: Sequence[MemoryEntry], queries: Sequence[str]
) -> tuple[list[list[str]], list[float]]:
    reference = InMemoryStore(entries)
    answers, timings = [], []
    for query in queries:
        began = time.perf_counter()
        found = await reference.retrieve(query, LIMIT)
        timings.append(time.perf_counter() - began)
        answers.append([str(entry.id) for entry in found])
    return answers, timings


def _check_answers(
    label: str, queries: Sequence[str], expected: list[list[str]], actual: list[list[str]]
) -> None:
    wrong = [
        f"  query {number} {query!r}:\n    InMemoryStore: {want}\n    store:         {got}"
        for number, (query, want, got) in enumerate(zip(queries, expected, actual, strict=True))
        if want != got
    ]
    if wrong:
        raise WrongAnswerError(
            f"{label}: the store's answer differs from InMemoryStore on {len(wrong)} of "
            f"{len(expected)} checked queries (exactness is a product requirement):\n"
            + "\n".join(wrong[:5])
        )


def _record_serving(row: Row, served: Served) -> None:
    row.p50_ms = statistics.median(served.timings) * 1e3
    row.p95_ms = _p(served.timings, 95) * 1e3
    row.p99_ms = _p(served.timings, 99) * 1e3
    row.max_ms = max(served.timings) * 1e3
    row.first_query_s = served.first_query_s
    row.warm_p50_ms = statistics.median(served.warm) * 1e3
    row.warm_p99_ms = _p(served.warm, 99) * 1e3
    row.warm_max_ms = max(served.warm) * 1e3
    row.long_query_s = served.long_query_s


def measure(workload: str, size: int, options: Options, scratch: Path) -> Row:
    """Every figure of one (workload, size), in ``scratch`` (a fresh directory)."""
    label = f"{workload} {size_label(size)}"
    row = Row(workload, size)
    _log(f"{label}: generating")
    entries = workloads.entries(workload, size)
    queries = workloads.queries(workload, options.queries)
    checked = queries[: options.guard]
    expected_pruned = sum(1 for entry in entries if entry.relevance < 0.05)

    db, raw_db = scratch / "store.db", scratch / "raw.db"
    _log(f"{label}: store_many in batches of {options.batch}")
    gc.collect()
    row.store_many_rps = asyncio.run(_store_many(db, entries, options.batch))
    row.db_mb = _files_mb(db)
    _log(f"{label}: raw sqlite3 executemany")
    gc.collect()
    load = baselines.raw_load(raw_db, entries, options.batch)
    row.raw_rps, row.raw_executemany_rps, row.raw_db_mb = (
        load.rows_per_s,
        load.executemany_rows_per_s,
        load.megabytes,
    )

    _log(f"{label}: serving {len(queries)} queries in a child process")
    served = serve(db, queries, options, scratch)
    if served.count != size:
        raise WrongAnswerError(f"{label}: the serving process counted {served.count} entries")
    _record_serving(row, served)
    row.timed_queries = len(served.timings)
    row.peak_rss_mb = served.peak_rss_mb
    row.guard_p50_ms = statistics.median(served.timings[: len(checked)]) * 1e3
    row.guard_mean_ms = statistics.fmean(served.timings[: len(checked)]) * 1e3

    _log(f"{label}: InMemoryStore on {len(checked)} queries (the correctness guard)")
    expected, memory_timings = asyncio.run(_reference_answers(entries, checked))
    _check_answers(label, checked, expected, served.answers)
    row.memory_p50_ms = statistics.median(memory_timings) * 1e3

    _log(f"{label}: raw SQL scoring every row, {len(checked)} queries")
    row.scan_p50_ms = statistics.median(baselines.raw_scan(raw_db, checked, LIMIT, 2)) * 1e3
    if options.rust is not None:
        _log(f"{label}: the Rust reference, {len(checked)} queries")
        rust = baselines.rust_bench(options.rust, entries, checked, LIMIT, scratch)
        row.rust_ms, row.rust_borrowed_ms = rust.literal_ms, rust.borrowed_ms

    extra = workloads.extra_entries(workload, size, options.warmup + options.single_stores)
    if options.postgresql is not None:
        _measure_postgresql(
            row,
            options.postgresql,
            entries=entries,
            queries=queries,
            expected=expected,
            extra=extra,
            options=options,
        )
        _log(f"{label}: back to SQLite")
    del entries
    gc.collect()
    _log(f"{label}: consolidate, then {options.single_stores} single stores")
    row.consolidate_s, row.store_us = asyncio.run(
        _consolidate_then_store(db, expected_pruned, extra, options.warmup)
    )
    baselines.raw_prune(raw_db)  # the same 10% go, so both tables hold the same rows
    row.raw_store_us = asyncio.run(baselines.raw_single_inserts(raw_db, extra, options.warmup))
    _log(f"{label}: done")
    return row


async def _empty_postgresql(url: str) -> None:
    """Drop our schema (every entry) from the scratch database; open_store recreates it."""
    async with open_store(url) as stale, stale.engine.connect() as connection:
        await connection.run_sync(migrate.upgrade_to, "base")


def _measure_postgresql(
    row: Row,
    url: str,
    *,
    entries: Sequence[MemoryEntry],
    queries: list[str],
    expected: list[list[str]],
    extra: Sequence[MemoryEntry],
    options: Options,
) -> None:
    """The same loads, queries and guard on PostgreSQL, into the ``pg_*`` figures of ``row``."""
    label = f"{row.workload} {size_label(row.size)} on PostgreSQL"
    asyncio.run(_empty_postgresql(url))
    _log(f"{label}: store_many in batches of {options.batch}")
    row.pg_store_many_rps = asyncio.run(_store_many(url, entries, options.batch))
    _log(f"{label}: serving {len(queries)} queries in a child process")
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-pg-") as scratch:
        served = serve(url, queries, options, Path(scratch))
    _check_answers(label, queries[: len(expected)], expected, served.answers)
    row.pg_p50_ms = statistics.median(served.timings) * 1e3
    row.pg_p95_ms = _p(served.timings, 95) * 1e3
    expected_pruned = sum(1 for entry in entries if entry.relevance < 0.05)
    _log(f"{label}: consolidate, then {options.single_stores} single stores")
    row.pg_consolidate_s, row.pg_store_us = asyncio.run(
        _consolidate_then_store(url, expected_pruned, extra, options.warmup)
    )
    asyncio.run(_empty_postgresql(url))


# --- the report -----------------------------------------------------------


def _num(value: float, digits: int = 1) -> str:
    if math.isnan(value):
        return "—"
    if abs(value) >= 10_000:
        return f"{value:,.0f}"
    return f"{value:,.{digits}f}"


def _ratio(value: float) -> str:
    if math.isnan(value):
        return "—"
    return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


COLUMNS = (
    "workload",
    "size",
    "store µs",
    "raw aiosqlite µs",
    "store/raw",
    "store_many rows/s",
    "raw executemany rows/s",
    "store_many/raw",
    "retrieve p50 ms",
    "retrieve p95 ms",
    "retrieve p99 ms",
    "retrieve max ms",
    "warm p50 / p99 / max ms",
    "open + first query s",
    "100,000-word query s",
    "InMemoryStore p50 ms",
    "speed-up",
    "raw SQL scan p50 ms",
    "speed-up",
    "Rust ref ms/query (no clone)",
    "store/Rust (no clone)",
    "consolidate s",
    "db MB (raw)",
    "peak RSS MB",
)


def _markdown(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def table(rows: Sequence[Row]) -> str:
    """The one markdown table."""
    return _markdown(COLUMNS, [_cells(row) for row in rows])


def _cells(row: Row) -> tuple[str, ...]:
    return (
        row.workload,
        size_label(row.size),
        _num(row.store_us, 0),
        _num(row.raw_store_us, 0),
        _ratio(row.store_us / row.raw_store_us),
        _num(row.store_many_rps, 0),
        _num(row.raw_rps, 0),
        _ratio(row.store_many_rps / row.raw_rps),
        _num(row.p50_ms, 2),
        _num(row.p95_ms, 2),
        _num(row.p99_ms, 2),
        _num(row.max_ms, 2),
        f"{_num(row.warm_p50_ms, 2)} / {_num(row.warm_p99_ms, 2)} / {_num(row.warm_max_ms, 2)}",
        _num(row.first_query_s, 2),
        _num(row.long_query_s, 2),
        _num(row.memory_p50_ms),
        _ratio(row.memory_p50_ms / row.guard_p50_ms),
        _num(row.scan_p50_ms),
        _ratio(row.scan_p50_ms / row.guard_p50_ms),
        f"{_num(row.rust_ms, 2)} ({_num(row.rust_borrowed_ms, 2)})",
        f"{_ratio(row.guard_mean_ms / row.rust_ms)}"
        f" ({_ratio(row.guard_mean_ms / row.rust_borrowed_ms)})",
        _num(row.consolidate_s, 3),
        f"{_num(row.db_mb)} ({_num(row.raw_db_mb)})",
        _num(row.peak_rss_mb, 0),
    )


PG_COLUMNS = (
    "workload",
    "size",
    "store µs SQLite",
    "store µs PostgreSQL",
    "store_many rows/s SQLite",
    "store_many rows/s PostgreSQL",
    "retrieve p50 ms SQLite",
    "retrieve p50 ms PostgreSQL",
    "retrieve p95 ms SQLite",
    "retrieve p95 ms PostgreSQL",
    "consolidate s SQLite",
    "consolidate s PostgreSQL",
)


def postgresql_table(rows: Sequence[Row]) -> str:
    """SQLite's figures beside PostgreSQL's, for the rows measured on both."""
    return _markdown(PG_COLUMNS, [_postgresql_cells(row) for row in rows])


def _postgresql_cells(row: Row) -> tuple[str, ...]:
    return (
        row.workload,
        size_label(row.size),
        _num(row.store_us, 0),
        _num(row.pg_store_us, 0),
        _num(row.store_many_rps, 0),
        _num(row.pg_store_many_rps, 0),
        _num(row.p50_ms, 2),
        _num(row.pg_p50_ms, 2),
        _num(row.p95_ms, 2),
        _num(row.pg_p95_ms, 2),
        _num(row.consolidate_s, 3),
        _num(row.pg_consolidate_s, 3),
    )


@dataclass(frozen=True, slots=True)
class Target:
    """One target of the issue: which rows it reads, and the figure it checks."""

    text: str
    rows: Callable[[Row], bool]
    figure: Callable[[Row], float]
    show: Callable[[float], str]
    meets: Callable[[float], bool]
    worst: Callable[[Sequence[float]], float] = max
    informative: bool = False
    """Shown as a ratio, with no threshold to pass."""


def _at(workload: str | None, size: int | None) -> Callable[[Row], bool]:
    return lambda row: (workload in (None, row.workload)) and (size in (None, row.size))


def _faster(
    baseline: Callable[[Row], float], ours: Callable[[Row], float]
) -> Callable[[Row], float]:
    return lambda row: baseline(row) / ours(row)


def _rust(row: Row) -> float:
    return row.rust_borrowed_ms


def _at_least(times: float) -> Callable[[float], bool]:
    return lambda value: value >= times


TARGETS = (
    Target(
        "natural 1M: p50 ≥ 12x faster than the compiled reference's scan (borrowed entries)",
        _at("natural", 1_000_000),
        _faster(_rust, lambda row: row.p50_ms),
        _ratio,
        _at_least(12),
        worst=min,
    ),
    Target(
        "natural 1M: p95 ≥ 6x faster than the compiled reference's scan",
        _at("natural", 1_000_000),
        _faster(_rust, lambda row: row.p95_ms),
        _ratio,
        _at_least(6),
        worst=min,
    ),
    Target(
        "natural 1M: p99 ≥ 3x faster than the compiled reference's scan",
        _at("natural", 1_000_000),
        _faster(_rust, lambda row: row.p99_ms),
        _ratio,
        _at_least(3),
        worst=min,
    ),
    Target(
        "natural 1M: the slowest query ≤ 3x the median",
        _at("natural", 1_000_000),
        lambda row: row.max_ms / row.p50_ms,
        _ratio,
        lambda value: value <= 3,
    ),
    Target(
        "natural 1M, warm (the same queries again): the slowest query ≤ 3x the median",
        _at("natural", 1_000_000),
        lambda row: row.warm_max_ms / row.warm_p50_ms,
        _ratio,
        lambda value: value <= 3,
    ),
    Target(
        "natural 100k: p50 ≥ 50x faster than InMemoryStore",
        _at("natural", 100_000),
        _faster(lambda row: row.memory_p50_ms, lambda row: row.guard_p50_ms),
        _ratio,
        _at_least(50),
        worst=min,
    ),
    Target(
        "natural 100k: p50 ≥ 5x faster than the compiled reference's scan",
        _at("natural", 100_000),
        _faster(_rust, lambda row: row.p50_ms),
        _ratio,
        _at_least(5),
        worst=min,
    ),
    Target(
        "dense 1M: p50 ≥ 50x faster than the raw SQL query scoring every row",
        _at("dense", 1_000_000),
        _faster(lambda row: row.scan_p50_ms, lambda row: row.guard_p50_ms),
        _ratio,
        _at_least(50),
        worst=min,
    ),
    Target(
        "store_many ≥ 1/3 of raw sqlite3 executemany (every row; the worst shown)",
        _at(None, None),
        lambda row: row.store_many_rps / row.raw_rps,
        _ratio,
        _at_least(1 / 3),
        worst=min,
    ),
    Target(
        "single durable store ≤ 2x a raw aiosqlite one-row transaction (worst row)",
        _at(None, None),
        lambda row: row.store_us / row.raw_store_us,
        _ratio,
        lambda value: value <= 2,
    ),
    Target(
        "1M: opening the store and answering its first query ≤ 2 s",
        _at(None, 1_000_000),
        lambda row: row.first_query_s,
        lambda value: f"{value:.2f} s",
        lambda value: value <= 2,
    ),
    Target(
        "peak RSS of a process serving a 1M-entry file store ≤ 300 MB",
        _at(None, 1_000_000),
        lambda row: row.peak_rss_mb,
        lambda value: f"{value:.0f} MB",
        lambda value: value <= 300,
    ),
    Target(
        "consolidate of 1M with 10% prunable ≤ 2 s",
        _at(None, 1_000_000),
        lambda row: row.consolidate_s,
        lambda value: f"{value:.3f} s",
        lambda value: value <= 2,
    ),
)


def targets(rows: Sequence[Row]) -> str:
    """The targets with their measured values: PASS, MISS, or not measured."""
    lines = ["| target | measured | verdict |", "|---|---|---|"]
    for target in TARGETS:
        values = [target.figure(row) for row in rows if target.rows(row)]
        values = [value for value in values if not math.isnan(value)]
        if not values:
            lines.append(f"| {target.text} | not measured in this run | — |")
            continue
        worst = target.worst(values)
        verdict = "(ratio)" if target.informative else "PASS" if target.meets(worst) else "MISS"
        lines.append(f"| {target.text} | {target.show(worst)} | {verdict} |")
    return "\n".join(lines)


def notes(rows: Sequence[Row], options: Options, rust_note: str) -> str:
    """How each figure was measured."""
    timed = ", ".join(f"{row.workload} {size_label(row.size)}: {row.timed_queries}" for row in rows)
    return "\n".join(
        [
            f"- `store µs`: median of {options.single_stores} single awaited `store()` calls"
            f" (each its own durable commit, WAL, synchronous=NORMAL) into the loaded store"
            f" after `consolidate`, {options.warmup} warm-up calls excluded; `raw aiosqlite µs`:"
            " the same entries as one `BEGIN IMMEDIATE`/INSERT entry + tags/`COMMIT` each.",
            f"- `store_many rows/s`: `store_many` in batches of {options.batch:,} into a new file"
            " store; `raw executemany rows/s`: `sqlite3` executemany into a plain entries + tags"
            " schema (UNIQUE id, lowercased copies), one transaction per batch, row tuples built"
            " from the same `MemoryEntry` objects inside the timing (executemany alone: "
            + ", ".join(
                f"{row.workload} {size_label(row.size)} {_num(row.raw_executemany_rps, 0)}"
                for row in rows
            )
            + " rows/s).",
            f"- `retrieve`: limit {LIMIT}, each query once, after {options.warmup} warm-up"
            " queries, in a fresh child process that only opens the file store and serves"
            f" (`peak RSS MB` is that process's VmHWM). Queries timed: {timed}. `warm`: the"
            " same queries again in the same process, every word seen before (a word many"
            " entries hold costs its postings the first time it is seen, then comes from"
            " memory). `open + first query`: from `open_store` to the first answer, which"
            f" reads the whole index. `{LONG_QUERY_WORDS:,}-word query`: one query of that many"
            " words of the natural text (13,174 distinct), once, at the end.",
            f"- Baselines and the correctness guard use the first {options.guard} queries; the"
            " store's p50 (or mean, for Rust) over those same queries is the denominator of each"
            " speed-up and ratio. Every one of them returned exactly InMemoryStore's ids, in"
            " order.",
            "- `raw SQL scan`: one SELECT scoring every row in binary64 (`relevance*0.5 +"
            " sum(instr(memory_lower, ?) > 0)/n*0.4 + EXISTS(tag)*0.3 + 0.1 ORDER BY score DESC,"
            " seq LIMIT 5`) on the raw schema; a speed baseline, not binary32-exact.",
            f"- `Rust ref ms/query`: {rust_note}, `bench` mode, mean over the checked queries:"
            " the crate's code as written (it clones every entry per query) and, in parentheses,"
            " the same scoring and stable sort over borrowed entries. `store/Rust` is the"
            " store's mean over the same queries divided by it: below 1 the store is faster.",
            "- `consolidate s`: one `consolidate()` pruning exactly 10% of the entries;"
            " `db MB`: the store's file after loading (raw schema's in parentheses).",
        ]
    )


def _postgresql_section(rows: Sequence[Row], options: Options) -> list[str]:
    if options.postgresql is None:
        return []
    return [
        "## PostgreSQL beside SQLite",
        "",
        postgresql_table(rows),
        "",
        "- The same entries, queries (and correctness guard), consolidation and single stores,"
        f" on {_server_version(options.postgresql)} on this machine, over TCP on 127.0.0.1;"
        " SQLite is the file store of the table above.",
        "",
    ]


def _server_version(url: str) -> str:
    async def ask() -> str:
        async with open_store(url) as store, store.engine.connect() as connection:
            return str((await connection.execute(text("SHOW server_version"))).scalar_one())

    return f"PostgreSQL {asyncio.run(ask()).split()[0]}"


def machine() -> str:
    """nproc, CPU, Python, SQLite, OS."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )


def code_version() -> tuple[str, bool]:
    """The commit measured, and whether src/ had uncommitted changes."""
    git = shutil.which("git")
    if git is None:
        return "unknown (no git)", False
    head = subprocess.run(
        [git, "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        [git, "status", "--porcelain", "--", "src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    suffix = " plus uncommitted changes in src/" if dirty else ""
    return f"commit {head or 'unknown'}{suffix}", bool(dirty)


def report(rows: Sequence[Row], options: Options, rust_note: str, version: tuple[str, bool]) -> str:
    """The whole markdown document: what was run where, the table, the targets."""
    command = shlex.join(["python", "-m", "benchmarks.run", *sys.argv[1:]])
    code, dirty = version
    parts = ["# Benchmark results", ""]
    if dirty:
        parts += [
            "**These numbers are from a snapshot of code in progress** (uncommitted changes"
            " in `src/` when the run started); rerun `make bench` on a clean tree.",
            "",
        ]
    parts += [
        f"- Command: `{command}` (from the project root, with `.venv/bin/python`)",
        f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- Machine: {machine()}",
        f"- Code: {code}",
        "",
        table(rows),
        "",
        notes(rows, options, rust_note),
        "",
        *_postgresql_section(rows, options),
        "## Targets",
        "",
        targets(rows),
        "",
        "## Workloads",
        "",
        *(f"- {workloads.describe(name)}" for name in dict.fromkeys(row.workload for row in rows)),
        "",
    ]
    return "\n".join(parts)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.run",
        description="Benchmark the store against InMemoryStore, raw SQLite and the Rust reference.",
    )

    def sizes(text: str) -> list[int]:
        return [parse_size(part) for part in text.split(",") if part.strip()]

    def names(text: str) -> list[str]:
        chosen = [part.strip() for part in text.split(",") if part.strip()]
        unknown = set(chosen) - set(workloads.WORKLOADS)
        if unknown or not chosen:
            raise argparse.ArgumentTypeError(f"workloads are {', '.join(workloads.WORKLOADS)}")
        return chosen

    add = parser.add_argument
    add(
        "--sizes", type=sizes, default=[10_000, 100_000], help="e.g. 10k,100k,1m (default 10k,100k)"
    )
    add(
        "--workloads",
        type=names,
        default=list(workloads.WORKLOADS),
        help=", ".join(workloads.WORKLOADS),
    )
    add("--queries", type=int, default=200, help="retrieve calls timed for p50/p95 (default 200)")
    add(
        "--guard",
        type=int,
        default=20,
        help="queries checked against InMemoryStore and timed on the baselines (default 20)",
    )
    add("--warmup", type=int, default=5, help="untimed retrieve and store calls first (default 5)")
    add("--batch", type=int, default=5_000, help="entries per store_many call (default 5000)")
    add("--single-stores", type=int, default=200, help="single store() calls timed (default 200)")
    add(
        "--serve-budget",
        type=float,
        default=60.0,
        help="stop timing retrieve after this many seconds (once the guard ran; default 60)",
    )
    add(
        "--postgresql",
        metavar="URL",
        help="also measure on this PostgreSQL database (postgresql+asyncpg://...); it is a"
        " scratch database: the store's tables in it are dropped",
    )
    add("--no-rust", action="store_true", help="skip the compiled Rust reference")
    add("--out", type=Path, help="also write the report (markdown) to this file")
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark and print the report."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [SERVE]:
        serve_main(arguments[1:])
        return
    parser = _parser()
    args = parser.parse_args(arguments)
    if args.postgresql is not None and not args.postgresql.startswith("postgresql"):
        parser.error("--postgresql takes a postgresql+asyncpg://user@host/database URL")
    if args.guard < 1 or args.queries < args.guard:
        parser.error("need 1 <= --guard <= --queries")
    rust, rust_note = (None, "skipped (--no-rust)") if args.no_rust else baselines.rust_reference()
    if rust is None:
        _log(rust_note)
    options = Options(
        queries=args.queries,
        guard=args.guard,
        warmup=args.warmup,
        batch=args.batch,
        single_stores=args.single_stores,
        serve_budget=args.serve_budget,
        rust=rust,
        postgresql=args.postgresql,
    )
    rows = []
    version = code_version()
    started = time.perf_counter()
    for workload in args.workloads:
        for size in args.sizes:
            with tempfile.TemporaryDirectory(prefix="loopctl-bench-") as scratch:
                try:
                    rows.append(measure(workload, size, options, Path(scratch)))
                except WrongAnswerError as exc:
                    _log("WRONG ANSWER")
                    raise SystemExit(f"benchmark FAILED: {exc}") from None
    _log(f"all done in {time.perf_counter() - started:.0f} s")
    document = report(rows, options, rust_note, version)
    print(document)
    if args.out is not None:
        args.out.write_text(document, encoding="utf-8")
        _log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
