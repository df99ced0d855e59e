"""LangGraph's ``BaseStore`` on this library, against LangGraph's own stores, in one run.

1. ``search`` with a query over ``--size`` natural memories in ``--namespaces``
   namespaces of a SQLite file, beside this library's own ``retrieve`` (bm25) over
   the same file's scopes, query by query in turn.
2. ``put`` and ``get`` one item at a time on files, beside LangGraph's ``SqliteStore``.
3. ``batch`` of 1,000 puts, beside ``SqliteStore``'s.
4. LoCoMo hit@5 (``--data``, ``--vectors``): this store (hybrid, and bm25) beside
   ``SqliteStore`` with sqlite-vec (and ``InMemoryStore``), all embedding through one
   function that looks each text's all-MiniLM-L6-v2 vector up in the .npz.

The section (how each is measured, the tables, the targets) is written between its
markers in ``--out``. This module is the command line: 1-3 are measured by
:mod:`benchmarks.langgraph_speed`, 4 by :mod:`benchmarks.langgraph_locomo`, and the
section is :mod:`benchmarks.langgraph_report`.

    .venv/bin/python -m benchmarks.langgraph_bench [--size 100k] [--queries 200]
        [--data ../shared/eval/locomo-dev.json --vectors ../shared/eval/minilm-dev.npz]
        [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import workloads
from benchmarks.langgraph_locomo import measure_locomo
from benchmarks.langgraph_report import BEGIN, END, section
from benchmarks.langgraph_speed import log, measure_search, measure_writes
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import ROOT
from benchmarks.sizes import parse_size

EVAL = ROOT.parent / "shared" / "eval"


def _default(name: str) -> Path | None:
    path = EVAL / name
    return path if path.exists() else None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the LangGraph store benchmark and print (and write) its section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.langgraph_bench")
    parser.add_argument("--size", type=parse_size, default=100_000, help="default 100k")
    parser.add_argument("--namespaces", type=int, default=100, help="default 100")
    parser.add_argument("--queries", type=int, default=200, help="default 200")
    parser.add_argument("--rounds", type=int, default=300, help="single puts and gets (300)")
    parser.add_argument("--batches", type=int, default=10, help="batches of 1000 a store (10)")
    parser.add_argument("--data", type=Path, default=_default("locomo-dev.json"))
    parser.add_argument("--vectors", type=Path, default=_default("minilm-dev.npz"))
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    queries = workloads.queries("natural", args.queries)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loopctl-langgraph-") as scratch:
        where = Path(scratch)
        searched = measure_search(where / "s.db", args.size, args.namespaces, queries)
        written = measure_writes(where, args.rounds, args.batches)
    found = None
    if args.data is not None and args.vectors is not None:
        found = measure_locomo(args.data, args.vectors)
    log(f"done in {time.perf_counter() - began:.0f} s")
    command = " ".join(["python -m benchmarks.langgraph_bench", *(argv or sys.argv[1:])])
    text = section(searched, written, found, command)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
