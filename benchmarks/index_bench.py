"""The first vector search after a bulk load, before its graph is built and after.

Two files of ``--size`` natural entries with 384-d vectors
(:class:`benchmarks.vector_serving.CalibratedVectors`), written by ``store_many``
with no retrieval, so that neither has a graph file. Then, each in a fresh
interpreter: on the first file, open + the first ``hybrid`` query (no graph: it
scores every vector exactly, and starts a child building the graph, which the
close stops); on the second, ``store.build_indexes()`` (what ``loopctl-memory
index`` runs, as that child does), then open + the first ``hybrid`` query.

    .venv/bin/python -m benchmarks.index_bench [--size 100k] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import workloads
from benchmarks.lifecycle_bench import percentile, write_section
from benchmarks.provenance import ROOT, code_version, machine
from benchmarks.sizes import parse_size, size_label
from benchmarks.vector_serving import CalibratedVectors
from loopctl_memory import open_store

BEGIN, END = "<!-- index: begin -->", "<!-- index: end -->"
_BATCH = 5_000
_CHILD = """
import asyncio, sys, time
from benchmarks.vector_serving import CalibratedVectors
from loopctl_memory import open_store

async def main(path, build):
    began = time.perf_counter()
    async with open_store(path, embedder=CalibratedVectors()) as store:
        if build:
            await store.build_indexes()
        else:
            await store.retrieve("deploy the cache", 10, ranking="hybrid")
    print(time.perf_counter() - began)

asyncio.run(main(sys.argv[1], sys.argv[2] == "build"))
"""
_SERVING = """
import asyncio, json, sys, time
from pathlib import Path
from benchmarks import workloads
from benchmarks.vector_serving import CalibratedVectors
from loopctl_memory import open_store

async def main(path, count):
    manifest = Path(f"{path}-vectors/manifest.json")
    queries = workloads.queries("natural", count)
    async with open_store(path, embedder=CalibratedVectors()) as store:
        for query in queries:  # their vectors made once: the embedder is not timed
            store.embedder.embed_query(query)
        during = []
        while not manifest.exists() and len(during) < 10 * count:
            query = queries[len(during) % count]
            began = time.perf_counter()
            await store.retrieve(query, 10, ranking="hybrid")
            during.append(time.perf_counter() - began)
        began = time.perf_counter()
        await store.build_indexes()
        waited = time.perf_counter() - began
        after = []
        for query in queries:
            began = time.perf_counter()
            await store.retrieve(query, 10, ranking="hybrid")
            after.append(time.perf_counter() - began)
    print(json.dumps({"during": during, "waited": waited, "after": after}))

asyncio.run(main(sys.argv[1], int(sys.argv[2])))
"""


async def _load(path: Path, size: int) -> None:
    async with open_store(path, embedder=CalibratedVectors()) as store:
        for batch in workloads.entry_batches("natural", size, _BATCH):
            await store.store_many(batch)


_DROP_CACHES = Path("/proc/sys/vm/drop_caches")


def _settle() -> str:
    """Flush what the bench wrote and, where allowed (root on Linux), drop the page cache.

    The timing is then the store's from a cold start: not the disk still writing
    gigabytes back beside it, nor the kernel reclaiming the cache of the bench's
    other files for the vectors a query holds. What was done, for the table.
    """
    os.sync()
    try:
        _DROP_CACHES.write_text("3\n", "ascii")
    except OSError:
        return "flushed (`sync`)"
    return "flushed and the page cache dropped (cold)"


def _seconds(path: Path, what: str) -> float:
    """The seconds a fresh interpreter takes to open ``path`` and ``what`` (build or query)."""
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), what],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    return float(done.stdout.strip())


def _serving(path: Path, count: int) -> dict[str, Any]:
    """A fresh interpreter's hybrid query timings while its child builds the graph, and after."""
    done = subprocess.run(
        [sys.executable, "-c", _SERVING, str(path), str(count)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def _ms(timings: list[float]) -> str:
    if not timings:
        return "none (built before the first)"
    return f"{statistics.median(timings) * 1e3:.1f} / {percentile(timings, 95) * 1e3:.1f}"


def main(argv: Sequence[str] | None = None) -> None:
    """Measure both ways and print (and write) the section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.index_bench")
    parser.add_argument("--size", type=parse_size, default=100_000, help="default 100k")
    parser.add_argument("--queries", type=int, default=200, help="default 200")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="loopctl-index-") as scratch:
        searched, indexed = Path(scratch) / "searched.db", Path(scratch) / "indexed.db"
        served = Path(scratch) / "served.db"
        for path in (searched, indexed, served):
            asyncio.run(_load(path, args.size))
        settled = _settle()
        first = _seconds(searched, "query")
        _settle()
        build = _seconds(indexed, "build")
        _settle()
        after = _seconds(indexed, "query")
        _settle()
        serving = _serving(served, args.queries)
    commit, _ = code_version()
    size = size_label(args.size)
    command = " ".join(["python -m benchmarks.index_bench", *(argv or sys.argv[1:])])
    text = "\n".join(
        [
            BEGIN,
            "## The first vector search after a bulk load",
            "",
            f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            f"- Machine: {machine()}",
            f"- Code: {commit}",
            "",
            "| in a fresh process, on a file of "
            f"{size} entries with 384-d vectors and no graph yet | seconds |",
            "| --- | --- |",
            f"| open + the first `hybrid` query, no graph yet: every vector scored | {first:.2f} |",
            f"| `store.build_indexes()` (CLI `index`) | {build:.2f} |",
            f"| then open + the first `hybrid` query | {after:.2f} |",
            "",
            "A long-lived process on a third such file: `hybrid` queries (limit 10) one after"
            " another while the child its first query started builds the graph, then"
            " `build_indexes()` (which waits for the child), then each query once more.",
            "",
            "| serving | p50 / p95 ms | queries |",
            "| --- | --- | --- |",
            f"| while the child builds | {_ms(serving['during'])} | {len(serving['during'])} |",
            f"| after (`build_indexes` waited {serving['waited']:.1f} s) |"
            f" {_ms(serving['after'])} | {len(serving['after'])} |",
            "",
            "Each file written by `store_many` of natural entries (`benchmarks/workloads.py`)"
            " with `CalibratedVectors`, and no retrieval; each row a fresh interpreter,"
            f" started with every file {settled}.",
            END,
        ]
    )
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
