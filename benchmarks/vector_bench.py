"""Vectors at scale: vector and hybrid retrieval, recall, memory, many processes, writes.

For each ``--sizes`` size:

1. A natural file of that many entries is written by ``store_many`` with a
   384-d embedder (:class:`benchmarks.vector_serving.CalibratedVectors`: a
   model's cost without a model, neighbourhoods like a sentence embedder's);
   then ``build_indexes`` in that process builds the graph file (timed).
2. A fresh interpreter opens the file (open + first hybrid query), asks every
   query once (the query-vector cache: the embedder's time is excluded), then
   times ``vector`` and ``hybrid`` query by query (limit 10); its peak RSS is
   its own. Then ``--workers`` such processes at once on the same file.
3. recall@10: the share of the exact top 10 each answer holds. Exact
   ``vector``: numpy's binary32 cosine over every vector, ties by insertion;
   exact ``hybrid``: the same store with every vector held in memory (the
   exact path, held to InMemoryStore by the tests). Beside them, numpy's brute
   force timed (one matrix-vector product and a partition): the floor of any
   exact pass.

Then the writes: single ``store`` calls with and without an embedder that
answers at once, and ``store_many`` of ``--many`` entries with vectors made
beforehand (looked up) and without.

    .venv/bin/python -m benchmarks.vector_bench [--sizes 100k,1m] [--queries 200]
        [--workers 4] [--stores 1000] [--rounds 3] [--many 50000] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import ROOT, code_version, machine
from benchmarks.run_measure import empty_postgresql
from benchmarks.sizes import parse_size, size_label
from benchmarks.vector_serving import (
    DIMS,
    LIMIT,
    SERVE,
    CalibratedVectors,
    LookedUp,
    percentiles,
    serve_main,
)
from loopctl_memory import MemoryCategory, MemoryEntry, open_store
from loopctl_memory.sql.tuning import Tuning

BEGIN, END = "<!-- vectors: begin -->", "<!-- vectors: end -->"
RANKINGS = ["vector", "hybrid"]
_BATCH = 5_000


@dataclass(slots=True)
class Sized:
    """The figures of one size on one database."""

    size: int
    database: str = "SQLite file"
    build_rps: float = 0.0
    graph_s: float = 0.0
    first_s: float = 0.0
    rss_mb: float = 0.0
    ms: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    recall: dict[str, float] = field(default_factory=dict)
    workers: int = 0
    workers_ms: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    workers_rss_mb: float = 0.0


def _log(message: str) -> None:
    print(f"[vectors] {message}", file=sys.stderr, flush=True)


async def _build(target: str | Path, size: int) -> tuple[float, float]:
    """(entries/s of the build, seconds of ``build_indexes``: the graph's build)."""
    if isinstance(target, str):
        await empty_postgresql(target)
    began = time.perf_counter()
    async with open_store(target, embedder=CalibratedVectors()) as store:
        for batch in workloads.entry_batches("natural", size, _BATCH):
            await store.store_many(batch)
        rate = size / (time.perf_counter() - began)
        began = time.perf_counter()
        await store.build_indexes()
    return rate, time.perf_counter() - began


def _children(target: str | Path, queries_file: Path, count: int) -> list[dict[str, Any]]:
    """``count`` serving processes at once on ``target``; their reports."""
    command = [sys.executable, "-m", "benchmarks.vector_serving", SERVE, str(target)]
    command += [str(queries_file), ",".join(RANKINGS)]
    running = [
        subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(count)
    ]
    reports = []
    for child in running:
        out, err = child.communicate()
        if child.returncode != 0:
            raise SystemExit(f"a serving process failed:\n{err.decode()}")
        reports.append(json.loads(out))
    return reports


async def _exact(target: str | Path, size: int, queries: list[str]) -> dict[str, Any]:
    """The exact top 10 of each query by each ranking, and numpy's brute-force timings."""
    embedder = CalibratedVectors()
    ids: list[str] = []
    parts = []
    for batch in workloads.entry_batches("natural", size, _BATCH):
        ids += [str(entry.id) for entry in batch]
        parts.append(embedder.embed_documents([entry.memory for entry in batch]))
    matrix = np.concatenate(parts)
    del parts
    exact: dict[str, Any] = {"vector": [], "hybrid": []}
    timings = []
    for query in queries:
        wanted = embedder.embed_query(query)
        began = time.perf_counter()
        scores = matrix @ wanted
        np.argpartition(scores, -LIMIT)[-LIMIT:]
        timings.append(time.perf_counter() - began)
        best = np.lexsort((np.arange(len(scores)), -scores.astype(np.float64)))[:LIMIT]
        exact["vector"].append([ids[n] for n in best])
    exact["numpy"] = percentiles(timings)
    del matrix
    held = Tuning(vector_loose=10**9)  # every vector in memory: the exact path
    async with open_store(target, embedder=CalibratedVectors(), tuning=held) as store:
        for query in queries:
            found = await store.retrieve(query, LIMIT, ranking="hybrid")
            exact["hybrid"].append([str(entry.id) for entry in found])
    return exact


def _recall(found: list[list[str]], exact: list[list[str]]) -> float:
    shares = [len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(found, exact, strict=True)]
    return statistics.mean(shares)


def measure(  # noqa: PLR0917 - the measurement's settings
    target: str | Path,
    size: int,
    queries: list[str],
    workers: int,
    scratch: Path,
    exact: dict[str, Any] | None = None,
) -> tuple[Sized, dict[str, Any]]:
    """Every figure of one size on one database (``target``: a file path or a server's URL).

    ``exact``: the exact answers, when already known (the entries are the same
    on every database); else worked out from ``target``, a file.
    """
    sized = Sized(size, "SQLite file" if isinstance(target, Path) else "PostgreSQL")
    _log(f"building {size_label(size)} on {sized.database}")
    sized.build_rps, sized.graph_s = asyncio.run(_build(target, size))
    queries_file = scratch / "queries.json"
    queries_file.write_text(json.dumps(queries), encoding="utf-8")
    _log("serving")
    (alone,) = _children(target, queries_file, 1)
    sized.first_s = alone["first_s"]
    sized.rss_mb = alone["peak_rss_kb"] / 1024
    if exact is None:
        _log("exact answers")
        exact = asyncio.run(_exact(target, size, queries))
    for ranking in RANKINGS:
        sized.ms[ranking] = percentiles(alone[ranking]["timings"])
        sized.recall[ranking] = _recall(alone[ranking]["answers"], exact[ranking])
    if workers > 1:
        _log(f"{workers} processes at once")
        sized.workers = workers
        reports = _children(target, queries_file, workers)
        for ranking in RANKINGS:
            sized.workers_ms[ranking] = percentiles(
                [t for report in reports for t in report[ranking]["timings"]]
            )
        sized.workers_rss_mb = max(report["peak_rss_kb"] for report in reports) / 1024
    return sized, exact


class _AsyncLookedUp:
    """The looked-up vectors behind coroutine methods (as an HTTP embedder's are)."""

    name = LookedUp.name
    dims = DIMS

    def __init__(self, texts: Sequence[str]) -> None:
        self._inner = LookedUp(texts)

    async def embed_documents(self, texts: Sequence[str]) -> Any:
        return self._inner.embed_documents(texts)

    async def embed_query(self, text: str) -> Any:
        return self._inner.embed_query(text)


async def _single_stores(directory: Path, stores: int, rounds: int) -> dict[str, list[float]]:
    """Single ``store`` p50 ms a round: no embedder, an async and a sync one answering at once."""
    entries = workloads.extra_entries("natural", 0, stores * rounds)
    texts = ["warm up", *(entry.memory for entry in entries)]  # a text it cannot embed is pending
    kinds: dict[str, Any] = {"none": None, "async": _AsyncLookedUp(texts), "sync": LookedUp(texts)}
    medians: dict[str, list[float]] = {kind: [] for kind in kinds}
    for round_number in range(rounds):
        for kind, embedder in kinds.items():
            path = directory / f"single-{kind}-{round_number}.db"
            async with open_store(path, embedder=embedder) as store:
                await store.store(MemoryEntry(MemoryCategory.FACT, "warm up"))
                timings = []
                for entry in entries[round_number * stores : (round_number + 1) * stores]:
                    began = time.perf_counter()
                    await store.store(entry)
                    timings.append(time.perf_counter() - began)
            medians[kind].append(statistics.median(timings) * 1000)
    return medians


async def _store_many(directory: Path, count: int) -> dict[str, float]:
    """``store_many`` entries/s of ``count`` natural entries, without and with vectors."""
    entries = workloads.entries("natural", count, seed=7)
    looked_up = LookedUp([entry.memory for entry in entries])
    rates = {}
    for kind, embedder in (("none", None), ("embedder", looked_up)):
        async with open_store(directory / f"many-{kind}.db", embedder=embedder) as store:
            began = time.perf_counter()
            for start in range(0, count, _BATCH):
                await store.store_many(entries[start : start + _BATCH])
            rates[kind] = count / (time.perf_counter() - began)
    return rates


def _targets(
    options: argparse.Namespace,
    rows: list[tuple[Sized, Any]],
    single: dict[str, list[float]],
    many: dict[str, float],
) -> list[tuple[str, float, bool]]:
    """(target, measured, whether it holds): issue 31's, at the largest size."""
    largest = max(size for size in (row[0].size for row in rows))
    label = size_label(largest)
    none = statistics.median(single["none"])
    ratios = {kind: statistics.median(single[kind]) / none for kind in ("async", "sync")}
    targets = []
    for sized, _ in rows:
        if sized.size != largest:
            continue
        where = f"{label} {sized.database}"
        for ranking in RANKINGS:
            p50, p95, _ = sized.ms[ranking]
            targets.append((f"{where} `{ranking}` p50 <= 40 ms", p50, p50 <= 40))
            targets.append((f"{where} `{ranking}` p95 <= 80 ms", p95, p95 <= 80))
            recall = sized.recall[ranking]
            targets.append((f"{where} `{ranking}` recall@10 >= 0.99", recall, recall >= 0.99))
        targets.append((f"{where} peak RSS <= 1 GB (MB)", sized.rss_mb, sized.rss_mb <= 1024))
        targets.append((f"{where} open + first query <= 5 s", sized.first_s, sized.first_s <= 5))
        for ranking, (p50, p95, _) in sized.workers_ms.items():
            processes = f"{where}, {sized.workers} processes at once, `{ranking}`"
            targets.append((f"{processes} p50 <= 40 ms", p50, p50 <= 40))
            targets.append((f"{processes} p95 <= 80 ms", p95, p95 <= 80))
    for kind, ratio in ratios.items():
        name = f"single store with a vector ({kind} embedder) <= 1.3x one without"
        targets.append((name, ratio, ratio <= 1.3))
    rate = many["embedder"]
    targets.append(
        (f"store_many of {options.many:,} with vectors >= 20,000/s", rate, rate >= 20_000)
    )
    return targets


def section(
    options: argparse.Namespace,
    rows: list[tuple[Sized, Any]],
    single: dict[str, list[float]],
    many: dict[str, float],
) -> str:
    """The RESULTS.md section."""
    table = []
    timed: set[int] = set()  # the sizes with numpy's row
    for sized, numpy_ms in rows:
        where = f"{size_label(sized.size)} | {sized.database}"
        for ranking in RANKINGS:
            p50, p95, p99 = sized.ms[ranking]
            table.append(
                f"| {where} | `{ranking}` | {p50:.2f} | {p95:.2f} | {p99:.2f}"
                f" | {sized.recall[ranking]:.4f} | {numpy_ms[0] / p50:.1f}x |"
            )
        if sized.size not in timed:
            timed.add(sized.size)
            table.append(
                f"| {where} | numpy brute force | {numpy_ms[0]:.2f} | {numpy_ms[1]:.2f}"
                f" | {numpy_ms[2]:.2f} | 1 | 1x |"
            )
    shared = [
        f"| {size_label(sized.size)} | {sized.database} | {sized.workers} | `{ranking}`"
        f" | {p50:.2f} | {p95:.2f} | {p99:.2f} | {sized.workers_rss_mb:.0f} |"
        for sized, _ in rows
        for ranking, (p50, p95, p99) in sized.workers_ms.items()
    ]
    opened = [
        f"| {size_label(s.size)} | {s.database} | {s.build_rps:,.0f} | {s.graph_s:.1f}"
        f" | {s.first_s:.2f} | {s.rss_mb:.0f} |"
        for s, _ in rows
    ]
    command = " ".join(["python -m benchmarks.vector_bench", *options.argv])
    code, dirty = code_version()
    return "\n".join(
        [
            BEGIN,
            "## Vectors: vector and hybrid retrieval at scale, many processes, writes",
            "",
            f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            f"- Code: {code}{' (with uncommitted changes)' if dirty else ''}",
            f"- {options.queries} natural queries, limit {LIMIT}, {DIMS}-d vectors"
            " (`benchmarks.vector_serving.CalibratedVectors`)",
            "",
            "| size | database | ranking | p50 ms | p95 ms | p99 ms | recall@10"
            " | numpy p50 / p50 |",
            "| --- | --- | --- | --- | --- | --- | --- | --- |",
            *table,
            "",
            "| size | database | store_many with vectors, entries/s | graph build s"
            " | open + first hybrid s | peak RSS MB |",
            "| --- | --- | --- | --- | --- | --- |",
            *opened,
            "",
            *(
                [
                    "| size | database | processes at once | ranking | p50 ms | p95 ms | p99 ms"
                    " | largest peak RSS MB |",
                    "| --- | --- | --- | --- | --- | --- | --- | --- |",
                    *shared,
                    "",
                ]
                if shared
                else []
            ),
            f"Single `store` p50 ms ({options.stores} a round, {options.rounds} rounds):"
            f" none {', '.join(f'{v:.3f}' for v in single['none'])};"
            f" with an async embedder answering at once"
            f" {', '.join(f'{v:.3f}' for v in single['async'])}; with a sync one"
            f" {', '.join(f'{v:.3f}' for v in single['sync'])}."
            f" `store_many` of {options.many:,} natural entries: {many['none']:,.0f}/s without"
            f" vectors, {many['embedder']:,.0f}/s with (made beforehand, looked up).",
            "",
            "| target (issue 31) | measured | verdict |",
            "| --- | --- | --- |",
            *(
                f"| {name} | {got:,.2f} | {'holds' if ok else 'MISSED'} |"
                for name, got, ok in _targets(options, rows, single, many)
            ),
            END,
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the section, and write it into ``--out`` if given."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [SERVE]:
        serve_main(arguments[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.vector_bench")
    parser.add_argument(
        "--sizes", type=lambda text: [parse_size(s) for s in text.split(",")], default=[100_000]
    )
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--workers", type=int, default=4, help="processes on one file")
    parser.add_argument("--postgresql", help="also on this server (postgresql+asyncpg://...)")
    parser.add_argument("--pg-workers", type=int, default=8, help="processes on the server")
    parser.add_argument("--server-only", action="store_true", help="no file, only the server")
    parser.add_argument("--stores", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--many", type=int, default=50_000)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(arguments)
    options.argv = arguments
    queries = workloads.queries("natural", options.queries)
    with tempfile.TemporaryDirectory(prefix="vector-bench-") as scratch:
        directory = Path(scratch)
        rows = []
        for size in options.sizes:
            exact = None
            if not options.server_only:
                path = directory / f"natural-{size}.db"
                sized, exact = measure(path, size, queries, options.workers, directory)
                rows.append((sized, exact["numpy"]))
            if options.postgresql is not None:
                server, exact = measure(
                    options.postgresql, size, queries, options.pg_workers, directory, exact
                )
                rows.append((server, exact["numpy"]))
        _log("single stores")
        single = asyncio.run(_single_stores(directory, options.stores, options.rounds))
        _log("store_many")
        many = asyncio.run(_store_many(directory, options.many))
    text = section(options, rows, single, many)
    print(text)
    if options.out is not None:
        write_section(options.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
