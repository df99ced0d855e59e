"""The serving child of ``benchmarks.run``: a fresh process opens the store and times retrieve.

:func:`serve` starts ``python -m benchmarks.run _serve DB QUERIES_JSON WARMUP
GUARD BUDGET`` (``benchmarks.run`` hands that to :func:`serve_main`), so the
peak RSS is the serving process's alone; the child answers every query after a
warm-up, the same queries again (warm), one very long query, and prints its
figures as JSON.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from benchmarks import workloads
from benchmarks.provenance import ROOT
from benchmarks.sizes import SMALLEST
from benchmarks.stats import peak_rss_kb
from loopctl_memory import open_store

LIMIT = SMALLEST  # retrieve's limit; no benchmark size is below it
SERVE = "_serve"  # the hidden first argument of the serving child process
LONG_QUERY_WORDS = 100_000  # a whole prompt or tool output passed as the query


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
        "peak_rss_kb": peak_rss_kb(),
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


def serve(
    db: str | Path, queries: list[str], scratch: Path, *, warmup: int, guard: int, budget: float
) -> Served:
    """Run the serving phase in a fresh interpreter, so its peak RSS is the server's alone.

    ``warmup`` untimed queries first; the first ``guard`` queries' answers are
    returned; timing stops after ``budget`` seconds once the guard ran.
    """
    queries_file = scratch / "queries.json"
    queries_file.write_text(json.dumps(queries), encoding="utf-8")
    command = [sys.executable, "-m", "benchmarks.run", SERVE, str(db), str(queries_file)]
    command += [str(warmup), str(guard), str(budget)]
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
