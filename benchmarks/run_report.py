"""The report of ``benchmarks.run``: the tables, how each figure was measured, the targets.

One markdown document from the rows of :mod:`benchmarks.run_measure`: what was
run where, one table of every figure (and PostgreSQL beside SQLite when it was
measured), the notes, the issue's targets with PASS or MISS, the workloads.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlalchemy import text

from benchmarks import workloads
from benchmarks.provenance import machine
from benchmarks.run_measure import Options, Row
from benchmarks.run_serving import LIMIT, LONG_QUERY_WORDS
from benchmarks.sizes import size_label
from loopctl_memory import open_store


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
        verdict = "PASS" if target.meets(worst) else "MISS"
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
