"""Ten million entries on one SQLite file: build it once, then serve it as an agent would.

Builds the file (natural workload, generated batch by batch, stored with
``store_many``) unless it exists, while computing the reference's answer to
the first ``--checked`` queries in the same pass (the exact score, the stable
order); then a fresh child process opens it, answers the queries (limit 5)
and reports open + first query, p50/p95/p99/max and peak RSS. A wrong answer
fails the run.

    .venv/bin/python -m benchmarks.ten_million --db /path/10m.db [--size 10m]
                                               [--queries 200] [--checked 2]
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import workloads
from benchmarks.run_serving import LIMIT, serve
from benchmarks.sizes import parse_size, size_label
from benchmarks.stats import nearest_rank
from loopctl_memory import open_store
from loopctl_memory.scoring import parse_query

BATCH = 50_000


async def build(db: Path, size: int, checked: list[str]) -> tuple[float, list[list[str]]]:
    """Store ``size`` entries; return the rate and the reference's answers to ``checked``."""
    parsed = [parse_query(query) for query in checked]
    # per query: the best LIMIT as (score, -seq, id); the smallest at the root
    best: list[list[tuple[float, int, str]]] = [[] for _ in checked]
    began = time.perf_counter()
    seq = 0
    async with open_store(db) as store:
        for batch in workloads.entry_batches("natural", size, BATCH):
            await store.store_many(batch)
            for entry in batch:
                seq += 1
                for query, heap in zip(parsed, best, strict=True):
                    item = (
                        query.score_of(entry.relevance, entry.memory, entry.tags),
                        -seq,
                        str(entry.id),
                    )
                    if len(heap) < LIMIT:
                        heapq.heappush(heap, item)
                    elif item > heap[0]:
                        heapq.heapreplace(heap, item)
            if seq % 1_000_000 == 0:
                print(f"  stored {seq:,}", file=sys.stderr, flush=True)
    rate = size / (time.perf_counter() - began)
    return rate, [[found[2] for found in sorted(heap, reverse=True)] for heap in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True)
    parser.add_argument("--size", type=parse_size, default=10_000_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--checked", type=int, default=2)
    args = parser.parse_args()
    queries = workloads.queries("natural", args.queries)
    checked = queries[: args.checked]
    expected: list[list[str]] | None = None
    if not args.db.exists():
        rate, expected = asyncio.run(build(args.db, args.size, checked))
        print(f"built {size_label(args.size)} at {rate:,.0f} entries/s", flush=True)
    with tempfile.TemporaryDirectory() as scratch:
        served = serve(args.db, queries, Path(scratch), warmup=5, guard=len(checked), budget=600.0)
    if expected is not None and served.answers != expected:
        raise SystemExit(f"wrong answers: {served.answers} != {expected}")
    files = sum(path.stat().st_size for path in args.db.parent.glob(f"{args.db.name}*"))
    timings = served.timings
    print(
        f"| {size_label(served.count)} | {files / 2**20:,.0f} MB | {served.first_query_s:.2f} s"
        f" | {statistics.median(timings) * 1e3:.2f} | {nearest_rank(timings, 95) * 1e3:.2f}"
        f" | {nearest_rank(timings, 99) * 1e3:.2f} | {max(timings) * 1e3:.2f}"
        f" | {served.peak_rss_mb:.0f} MB | {'checked' if expected else 'not checked'} |"
    )


if __name__ == "__main__":
    main()
