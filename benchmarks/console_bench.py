"""The console's pages at scale: its list and search requests against a served million.

A SQLite file of ``--size`` natural entries (built by ``store_many``), served by
``loopctl-memory serve`` in a process of its own; from this process, one
request at a time over HTTP, as the console sends them:

- the newest page (``/api/memories?limit=20``), ``--requests`` times;
- the statistics the console draws (``/api/stats``), a tenth as often;
- ``--requests`` pages walked back from the newest, each by the cursor the one
  before gave;
- a page filtered by category;
- ``--requests`` searches (``q=``, natural queries, the best ranking), and
  each memory's page (its fields and history) for the first found.

The section is written between its markers in ``benchmarks/RESULTS.md``.

    .venv/bin/python -m benchmarks.console_bench [--size 1m] [--requests 200] [--out FILE]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import tempfile
import time
from pathlib import Path

import httpx2

from benchmarks import workloads
from benchmarks.lifecycle_bench import percentile, write_section
from benchmarks.provenance import machine
from benchmarks.serve_bench import served
from benchmarks.sizes import parse_size, size_label
from loopctl_memory import open_store

BEGIN, END = "<!-- console: begin -->", "<!-- console: end -->"
BATCH = 50_000
TARGET_MS = 200.0


def _log(message: str) -> None:
    print(f"[console] {message}", file=sys.stderr, flush=True)


async def build(db: Path, size: int) -> None:
    _log(f"building {size_label(size)} entries")
    async with open_store(db) as store:
        for batch in workloads.entry_batches("natural", size, BATCH):
            await store.store_many(batch)
        await store.build_indexes()


def timed(client: httpx2.Client, path: str, params: dict[str, str]) -> tuple[float, dict]:  # type: ignore[type-arg]
    started = time.perf_counter()
    answer = client.get(path, params=params)
    elapsed = (time.perf_counter() - started) * 1_000
    answer.raise_for_status()
    return elapsed, answer.json()


def measure(url: str, requests: int, queries: list[str]) -> dict[str, list[float]]:
    """Each kind of request's times, ms."""
    times: dict[str, list[float]] = {}
    with httpx2.Client(base_url=url, timeout=60) as client:
        timed(client, "/api/memories", {"q": queries[0]})  # the first query reads the index
        times["newest page (20)"] = [
            timed(client, "/api/memories", {"limit": "20"})[0] for _ in range(requests)
        ]
        walked: list[float] = []
        params = {"limit": "20"}
        for _ in range(requests):
            elapsed, page = timed(client, "/api/memories", params)
            walked.append(elapsed)
            params = {"limit": "20", "before": page["next"]}
        times[f"{requests} pages walked back by cursor"] = walked
        times["newest page of one category"] = [
            timed(client, "/api/memories", {"limit": "20", "category": "insight"})[0]
            for _ in range(requests)
        ]
        searched: list[float] = []
        opened: list[float] = []
        for query in queries[:requests]:
            elapsed, found = timed(client, "/api/memories", {"q": query, "limit": "20"})
            searched.append(elapsed)
            if found["memories"]:
                first = found["memories"][0]["id"]
                opened.append(timed(client, f"/api/memories/{first}", {})[0])
        times["search (q=, best ranking, 20)"] = searched
        times["a memory's page (fields and history)"] = opened
        times["statistics (by category, day, relevance)"] = [
            timed(client, "/api/stats", {})[0] for _ in range(max(1, requests // 10))
        ]
    return times


def section(times: dict[str, list[float]], size: int, requests: int) -> str:
    rows = []
    for what, values in times.items():
        p95 = percentile(values, 95)
        verdict = "holds" if p95 <= TARGET_MS else "MISSED"
        if what.startswith("statistics"):  # drawn beside the list: no page waits for it
            verdict = "(not a page: no target)"
        rows.append(
            f"| {what} | {len(values)} | {percentile(values, 50):.1f} | {p95:.1f} |"
            f" {max(values):.1f} | {verdict} |"
        )
    return "\n".join(
        [
            BEGIN,
            f"## The console at {size_label(size)} memories",
            "",
            f"`loopctl-memory serve` on a SQLite file of {size:,} natural memories, in a process"
            " of its own; one request at a time from this process, as the console sends them"
            f" (target: p95 <= {TARGET_MS:.0f} ms).",
            "",
            "| request | count | p50 ms | p95 ms | max ms | p95 <= 200 ms |",
            "| --- | ---: | ---: | ---: | ---: | --- |",
            *rows,
            "",
            f"- Command: `python -m benchmarks.console_bench --size {size_label(size)}"
            f" --requests {requests}`",
            f"- Machine: {machine()}; {dt.date.today().isoformat()}.",
            END,
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.console_bench")
    parser.add_argument("--size", type=parse_size, default=1_000_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    queries = workloads.queries("natural", args.requests)
    with tempfile.TemporaryDirectory(prefix="loopctl-console-") as scratch:
        db = Path(scratch) / "memory.db"
        asyncio.run(build(db, args.size))
        with served(db) as url:
            times = measure(url, args.requests, queries)
    text = section(times, args.size, args.requests)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
