"""What watching the file costs: single ``store`` and ``retrieve`` with the checks and without.

A SQLite store looks at its file around each operation (a ``stat`` after each,
one more before a write) to notice a file removed, renamed or replaced, and a
file modified by someone else (then a write reads its pages afresh). This
times single stores and retrieves on two stores of the same ``--size`` entries,
alternating call by call, one of them with the watch switched off (the state
of a store before the checks existed; switched off through a private field,
which only a benchmark does), and prints the medians and their ratio. A
third row times a single store right after the file's modification time moved
(as another process's checkpoint moves it): the watched store then checks the
file's header (read through the process's one descriptor of the file) and
drops its cached pages before writing.

    .venv/bin/python -m benchmarks.checks_bench [--size 100k] [--calls 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import machine
from benchmarks.sizes import parse_size, size_label
from loopctl_memory import MemoryCategory, MemoryEntry, open_store


async def measure(db: Path, size: int, calls: int) -> list[str]:
    async with open_store(db) as store:
        for batch in workloads.entry_batches("natural", size, 5_000):
            await store.store_many(batch)
    unwatched = db.with_name("unwatched.db")
    shutil.copyfile(db, unwatched)
    queries = workloads.queries("natural", calls)
    kinds = ("store", "get", "after")
    timings: dict[str, list[float]] = {
        kind + suffix: [] for kind in kinds for suffix in ("", "_off")
    }
    async with open_store(db) as watched, open_store(unwatched) as plain:
        plain._unit.file = None  # the store as it was before the checks
        for store in (watched, plain):
            await store.retrieve(queries[0], 5)
        pairs = ((watched, db, ""), (plain, unwatched, "_off"))
        for n, query in enumerate(queries):
            for store, file, suffix in pairs:
                entry = MemoryEntry(MemoryCategory.FACT, f"single store {n} of the checks bench")
                began = time.perf_counter()
                await store.store(entry)
                timings["store" + suffix].append(time.perf_counter() - began)
                began = time.perf_counter()
                await store.retrieve(query, 5)
                timings["get" + suffix].append(time.perf_counter() - began)
                os.utime(file, ns=(time.time_ns(), time.time_ns() + n))  # as by someone else
                entry = MemoryEntry(MemoryCategory.FACT, f"single store {n} after a change")
                began = time.perf_counter()
                await store.store(entry)
                timings["after" + suffix].append(time.perf_counter() - began)
    median = {key: statistics.median(values) for key, values in timings.items()}
    label = size_label(size)
    return [
        f"| single `store`, {label} | {median['store'] * 1e6:.0f} µs |"
        f" {median['store_off'] * 1e6:.0f} µs | {median['store'] / median['store_off']:.3f}x |",
        f"| `retrieve`, {label} | {median['get'] * 1e3:.2f} ms |"
        f" {median['get_off'] * 1e3:.2f} ms | {median['get'] / median['get_off']:.3f}x |",
        f"| single `store` after someone else modified the file, {label} |"
        f" {median['after'] * 1e6:.0f} µs |"
        f" {median['after_off'] * 1e6:.0f} µs | {median['after'] / median['after_off']:.3f}x |",
    ]


BEGIN, END = "<!-- checks: begin -->", "<!-- checks: end -->"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.checks_bench")
    parser.add_argument("--size", type=parse_size, default=100_000, help="default 100k")
    parser.add_argument("--calls", type=int, default=2_000, help="default 2000")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loopctl-checks-") as scratch:
        rows = asyncio.run(measure(Path(scratch) / "watched.db", args.size, args.calls))
    command = " ".join(["python -m benchmarks.checks_bench", *(argv or sys.argv[1:])])
    text = "\n".join(
        [
            BEGIN,
            "## What watching the file costs",
            "",
            f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            f"- Machine: {machine()}",
            "",
            "| operation | with the checks (median) | without | ratio |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "The checks: a `stat` after every operation (is the path still the file opened?) and"
            " one before every write (did someone else modify it, now or as seen after a read?"
            " then the write checks the file's header and reads its pages afresh). On a file"
            " nobody else touches, no check of the header ever runs: the same two `stat`s as"
            " before. After someone else modified the file (the last row: its modification time"
            " moved, as another process's checkpoint moves it) every write checks the header,"
            " read with `pread` through the process's one descriptor of the file, and drops its"
            " cached pages. The two stores take turns call by call.",
            "",
            END,
        ]
    )
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
