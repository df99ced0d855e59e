"""Bulk writes against raw SQLite: the tail indexed by a child process, and by the writes.

For each size: ``store_many`` of natural entries (``benchmarks/workloads.py``)
in batches of 5,000 into a new file, with the store's default (a child process
indexes the tail, ``Tuning.background_folds``) and with every write indexing
its own tail (``background_folds=False``), against raw ``sqlite3``
``executemany`` of the same entries into a plain entries + tags schema
(``benchmarks.baselines.raw_load``), in one run. Each figure is the rate until
the last ``store_many`` returned, and until ``close`` returned (by then the
tail is short again: the child finished its block, the close indexed the rest).
Then ``store_many`` of 100,000 entries with vectors from a looked-up embedder.

    .venv/bin/python -m benchmarks.write_bench [--sizes 100k,1m] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import baselines, workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import code_version, machine
from benchmarks.sizes import parse_size, size_label
from benchmarks.vector_serving import LookedUp
from loopctl_memory import MemoryEntry, open_store
from loopctl_memory.protocol import Embedder
from loopctl_memory.sql.tuning import Tuning

BEGIN, END = "<!-- writes: begin -->", "<!-- writes: end -->"
_BATCH = 5_000


async def _rates(
    path: Path, entries: Sequence[MemoryEntry], tuning: Tuning, embedder: Embedder | None = None
) -> tuple[float, float]:
    """Entries/s until the last ``store_many`` returned, and until ``close`` returned."""
    store = await open_store(path, tuning=tuning, embedder=embedder)
    began = time.perf_counter()
    try:
        for start in range(0, len(entries), _BATCH):
            await store.store_many(entries[start : start + _BATCH])
        written = time.perf_counter() - began
    finally:
        await store.close()
    closed = time.perf_counter() - began
    return len(entries) / written, len(entries) / closed


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print (and write) the section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.write_bench")
    parser.add_argument("--sizes", default="100k,1m", help="default 100k,1m")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory(prefix="loopctl-writes-") as scratch:
        folder = Path(scratch)
        for size in (parse_size(text) for text in args.sizes.split(",")):
            entries = workloads.entries("natural", size)
            raw = baselines.raw_load(folder / f"raw-{size}.db", entries, _BATCH).rows_per_s
            child = asyncio.run(_rates(folder / f"child-{size}.db", entries, Tuning()))
            inline = asyncio.run(
                _rates(folder / f"inline-{size}.db", entries, Tuning(background_folds=False))
            )
            rows.append((size, raw, child, inline))
            print(size, raw, child, inline, flush=True)
        entries = workloads.entries("natural", 100_000, seed=7)
        looked_up = LookedUp([entry.memory for entry in entries])
        vectors = asyncio.run(_rates(folder / "vectors.db", entries, Tuning(), looked_up))
    commit, _ = code_version()
    lines = [
        BEGIN,
        "## Bulk writes: the tail indexed by a child process",
        "",
        "- Command: `python -m benchmarks.write_bench --out benchmarks/RESULTS.md`",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
        f"- Machine: {machine()}",
        f"- Code: {commit}",
        "",
        "| size | raw executemany rows/s | a child indexes: returned / closed rows/s | ratio"
        " to raw | each write indexes: returned / closed rows/s | ratio to raw |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for size, raw, child, inline in rows:
        lines.append(
            f"| {size_label(size)} | {raw:,.0f} | {child[0]:,.0f} / {child[1]:,.0f} |"
            f" {child[0] / raw:.2f}x / {child[1] / raw:.2f}x | {inline[0]:,.0f} /"
            f" {inline[1]:,.0f} | {inline[0] / raw:.2f}x / {inline[1] / raw:.2f}x |"
        )
    lines += [
        "",
        f"`store_many` of 100,000 natural entries with vectors (a looked-up embedder, the"
        f" child indexing): {vectors[0]:,.0f} entries/s until it returned,"
        f" {vectors[1]:,.0f} until closed.",
        "",
        "`store_many` in batches of 5,000 into a new file; raw: `sqlite3` `executemany` into"
        " a plain entries + tags schema, row tuples made from the same entries inside the"
        " timing (`benchmarks.baselines.raw_load`). Returned: until the last `store_many`"
        " returned; closed: until `close` returned, the tail then short again.",
        END,
    ]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
