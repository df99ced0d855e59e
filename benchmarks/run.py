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

Only the public API of ``loopctl_memory`` is used. This module is the command
line; one (workload, size) is measured by :mod:`benchmarks.run_measure` (its
serving child is :mod:`benchmarks.run_serving`, started as ``python -m
benchmarks.run _serve ...``) and the document is :mod:`benchmarks.run_report`.

    .venv/bin/python -m benchmarks.run [--sizes 10k,100k,1m] [--workloads natural,dense,ids,zipf2]
                                       [--queries 200] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import baselines, workloads
from benchmarks.provenance import code_version
from benchmarks.run_measure import Options, WrongAnswerError, log, measure
from benchmarks.run_report import report
from benchmarks.run_serving import SERVE, serve_main
from benchmarks.sizes import parse_size


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
        log(rust_note)
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
                    log("WRONG ANSWER")
                    raise SystemExit(f"benchmark FAILED: {exc}") from None
    log(f"all done in {time.perf_counter() - started:.0f} s")
    document = report(rows, options, rust_note, version)
    print(document)
    if args.out is not None:
        args.out.write_text(document, encoding="utf-8")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
