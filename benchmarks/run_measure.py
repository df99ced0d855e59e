"""Every figure of one (workload, size): the store, its baselines, and the correctness guard.

In a fresh directory: ``store_many`` against raw ``sqlite3``; retrieve in the
serving child (:mod:`benchmarks.run_serving`); the first ``--guard`` answers
checked against ``InMemoryStore`` and the same queries timed on the baselines
(:mod:`benchmarks.baselines`); then ``consolidate`` and single ``store`` calls.
With ``--postgresql`` the same loads, queries and guard also run there.
"""

from __future__ import annotations

import asyncio
import gc
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import baselines, workloads
from benchmarks.run_serving import LIMIT, Served, serve
from benchmarks.sizes import size_label
from benchmarks.stats import nearest_rank
from loopctl_memory import InMemoryStore, MemoryEntry, migrate, open_store


def log(message: str) -> None:
    """A timestamped progress line on stderr."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


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
    row.p95_ms = nearest_rank(served.timings, 95) * 1e3
    row.p99_ms = nearest_rank(served.timings, 99) * 1e3
    row.max_ms = max(served.timings) * 1e3
    row.first_query_s = served.first_query_s
    row.warm_p50_ms = statistics.median(served.warm) * 1e3
    row.warm_p99_ms = nearest_rank(served.warm, 99) * 1e3
    row.warm_max_ms = max(served.warm) * 1e3
    row.long_query_s = served.long_query_s


def measure(workload: str, size: int, options: Options, scratch: Path) -> Row:
    """Every figure of one (workload, size), in ``scratch`` (a fresh directory)."""
    label = f"{workload} {size_label(size)}"
    row = Row(workload, size)
    log(f"{label}: generating")
    entries = workloads.entries(workload, size)
    queries = workloads.queries(workload, options.queries)
    checked = queries[: options.guard]
    expected_pruned = sum(1 for entry in entries if entry.relevance < 0.05)

    db, raw_db = scratch / "store.db", scratch / "raw.db"
    log(f"{label}: store_many in batches of {options.batch}")
    gc.collect()
    row.store_many_rps = asyncio.run(_store_many(db, entries, options.batch))
    row.db_mb = _files_mb(db)
    log(f"{label}: raw sqlite3 executemany")
    gc.collect()
    load = baselines.raw_load(raw_db, entries, options.batch)
    row.raw_rps, row.raw_executemany_rps, row.raw_db_mb = (
        load.rows_per_s,
        load.executemany_rows_per_s,
        load.megabytes,
    )

    log(f"{label}: serving {len(queries)} queries in a child process")
    served = serve(
        db,
        queries,
        scratch,
        warmup=options.warmup,
        guard=options.guard,
        budget=options.serve_budget,
    )
    if served.count != size:
        raise WrongAnswerError(f"{label}: the serving process counted {served.count} entries")
    _record_serving(row, served)
    row.timed_queries = len(served.timings)
    row.peak_rss_mb = served.peak_rss_mb
    row.guard_p50_ms = statistics.median(served.timings[: len(checked)]) * 1e3
    row.guard_mean_ms = statistics.fmean(served.timings[: len(checked)]) * 1e3

    log(f"{label}: InMemoryStore on {len(checked)} queries (the correctness guard)")
    expected, memory_timings = asyncio.run(_reference_answers(entries, checked))
    _check_answers(label, checked, expected, served.answers)
    row.memory_p50_ms = statistics.median(memory_timings) * 1e3

    log(f"{label}: raw SQL scoring every row, {len(checked)} queries")
    row.scan_p50_ms = statistics.median(baselines.raw_scan(raw_db, checked, LIMIT, 2)) * 1e3
    if options.rust is not None:
        log(f"{label}: the Rust reference, {len(checked)} queries")
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
        log(f"{label}: back to SQLite")
    del entries
    gc.collect()
    log(f"{label}: consolidate, then {options.single_stores} single stores")
    row.consolidate_s, row.store_us = asyncio.run(
        _consolidate_then_store(db, expected_pruned, extra, options.warmup)
    )
    baselines.raw_prune(raw_db)  # the same 10% go, so both tables hold the same rows
    row.raw_store_us = asyncio.run(baselines.raw_single_inserts(raw_db, extra, options.warmup))
    log(f"{label}: done")
    return row


async def empty_postgresql(url: str) -> None:
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
    asyncio.run(empty_postgresql(url))
    log(f"{label}: store_many in batches of {options.batch}")
    row.pg_store_many_rps = asyncio.run(_store_many(url, entries, options.batch))
    log(f"{label}: serving {len(queries)} queries in a child process")
    with tempfile.TemporaryDirectory(prefix="loopctl-bench-pg-") as scratch:
        served = serve(
            url,
            queries,
            Path(scratch),
            warmup=options.warmup,
            guard=options.guard,
            budget=options.serve_budget,
        )
    _check_answers(label, queries[: len(expected)], expected, served.answers)
    row.pg_p50_ms = statistics.median(served.timings) * 1e3
    row.pg_p95_ms = nearest_rank(served.timings, 95) * 1e3
    expected_pruned = sum(1 for entry in entries if entry.relevance < 0.05)
    log(f"{label}: consolidate, then {options.single_stores} single stores")
    row.pg_consolidate_s, row.pg_store_us = asyncio.run(
        _consolidate_then_store(url, expected_pruned, extra, options.warmup)
    )
    asyncio.run(empty_postgresql(url))
