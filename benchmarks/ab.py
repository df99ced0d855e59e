"""Two builds measured in one run: a base revision of the package against the working tree.

For a change that must make nothing slower (a restructuring), the figures that
matter are ratios taken on the same machine at the same time. This runs the
same measurements with each build, each in a child process whose ``sys.path``
starts with that build's ``src`` (the base is extracted from git with
``git archive``; both read the same alembic revisions from their own tree):

- ``store_many`` of every natural entry into a new file (entries/s), per size;
- ``retrieve`` (limit 5) p50/p95 in a fresh process on that file, after one
  warm-up query, in ``--rounds`` rounds that alternate the builds; by the
  default ranking and by ``bm25``, and ``bm25`` after a single ``store`` each
  time (an agent's turn: what a retrieval costs when the store moved);
- single ``store`` calls, each awaited (a durable commit), p50/p95;
- MCP ``recall`` over stdio at the smallest size, p50/p95, builds alternating.

    .venv/bin/python -m benchmarks.ab --base REV [--sizes 100k,1m] [--queries 200]
                                      [--stores 1000] [--rounds 2] [--out benchmarks/RESULTS.md]

With ``--vectors SIZE`` instead: one natural file of SIZE entries with 384-d
vectors and its graph, built by the working tree, then ``vector`` and
``hybrid`` (limit 10) timed by a serving process of each build in turn
(:mod:`benchmarks.vector_serving`; the graph format is the same).
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
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from benchmarks import workloads
from benchmarks.lifecycle_bench import percentile, write_section
from benchmarks.provenance import ROOT, machine
from benchmarks.sizes import parse_size, size_label

LIMIT = 5
BATCH = 5_000
CHILD = "_child"
BEGIN, END = "<!-- ab: begin -->", "<!-- ab: end -->"


def _log(message: str) -> None:
    print(f"[ab {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- what a child process measures, with whichever build its sys.path finds ---


async def _store_many(db: str, size: int) -> list[float]:
    from loopctl_memory import open_store  # noqa: PLC0415 - the build on sys.path

    async with open_store(db) as store:
        began = time.perf_counter()
        for batch in workloads.entry_batches("natural", size, BATCH):
            await store.store_many(batch)
        return [size / (time.perf_counter() - began)]


async def _retrieve(db: str, count: int, ranking: str = "reference") -> list[float]:
    from loopctl_memory import open_store  # noqa: PLC0415 - the build on sys.path

    queries = workloads.queries("natural", count + 1)
    async with open_store(db) as store:
        # The copy loaded: time queries, not the load.
        await store.retrieve(queries[0], LIMIT, ranking=ranking)
        timings = []
        for query in queries[1:]:
            began = time.perf_counter()
            await store.retrieve(query, LIMIT, ranking=ranking)
            timings.append(time.perf_counter() - began)
        return timings


async def _retrieve_bm25(db: str, count: int) -> list[float]:
    return await _retrieve(db, count, "bm25")


async def _agent_turns(db: str, count: int) -> list[float]:
    """An agent's turns: a single ``store``, then a timed ``bm25`` retrieve, ``count`` times."""
    from loopctl_memory import open_store  # noqa: PLC0415 - the build on sys.path

    queries = workloads.queries("natural", count + 1)
    extra = [
        replace(entry, id=uuid.uuid4()) for entry in workloads.extra_entries("natural", 0, count)
    ]
    async with open_store(db) as store:
        await store.retrieve(queries[0], LIMIT, ranking="bm25")
        timings = []
        for entry, query in zip(extra, queries[1:], strict=True):
            await store.store(entry)
            began = time.perf_counter()
            await store.retrieve(query, LIMIT, ranking="bm25")
            timings.append(time.perf_counter() - began)
        return timings


async def _single_stores(db: str, count: int) -> list[float]:
    from loopctl_memory import open_store  # noqa: PLC0415 - the build on sys.path

    # New ids: each round stores the same texts into the same file again.
    extra = [
        replace(entry, id=uuid.uuid4()) for entry in workloads.extra_entries("natural", 0, count)
    ]
    async with open_store(db) as store:
        timings = []
        for entry in extra:
            began = time.perf_counter()
            await store.store(entry)
            timings.append(time.perf_counter() - began)
        return timings


async def _recall(db: str, count: int) -> list[float]:
    from mcp import Client, StdioServerParameters  # noqa: PLC0415 - only this child needs it

    queries = workloads.queries("natural", count + 1)
    server = StdioServerParameters(
        command=sys.executable,
        args=["-m", "loopctl_memory", "--db", db, "mcp"],
        env={"PYTHONPATH": os.environ["PYTHONPATH"], "PATH": os.environ.get("PATH", "")},
    )
    async with Client(server) as client:
        await client.call_tool("recall", {"query": queries[0], "limit": LIMIT})
        timings = []
        for query in queries[1:]:
            began = time.perf_counter()
            answer = await client.call_tool("recall", {"query": query, "limit": LIMIT})
            timings.append(time.perf_counter() - began)
            if answer.is_error:
                raise SystemExit(f"recall failed for {query!r}: {answer.content}")
        return timings


async def _vector_build(db: str, count: int) -> list[float]:
    """A natural file of ``count`` entries with 384-d vectors, its graph built: entries/s."""
    from benchmarks.vector_serving import CalibratedVectors  # noqa: PLC0415 - this child only
    from loopctl_memory import open_store  # noqa: PLC0415 - the build on sys.path

    began = time.perf_counter()
    async with open_store(db, embedder=CalibratedVectors()) as store:
        for batch in workloads.entry_batches("natural", count, BATCH):
            await store.store_many(batch)
        rate = count / (time.perf_counter() - began)
        await store.build_indexes()
    return [rate]


MEASURES: dict[str, Callable[[str, int], Coroutine[Any, Any, list[float]]]] = {
    "store_many": _store_many,
    "retrieve": _retrieve,
    "retrieve_bm25": _retrieve_bm25,
    "turns_bm25": _agent_turns,
    "single": _single_stores,
    "vector_build": _vector_build,
    "recall": _recall,
}


def child_main(argv: Sequence[str]) -> None:
    kind, db, count = argv
    print(json.dumps(asyncio.run(MEASURES[kind](db, int(count)))))


def _in_child(build: Path, arguments: list[str]) -> Any:
    """What ``python -m ARGUMENTS`` prints as JSON, run with ``build``'s package."""
    environment = {**os.environ, "PYTHONPATH": f"{build / 'src'}{os.pathsep}{ROOT}"}
    done = subprocess.run(
        [sys.executable, "-m", *arguments],
        env=environment,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        raise SystemExit(f"{arguments[1]} with {build} failed:\n{done.stderr}")
    return json.loads(done.stdout)


def _measure(build: Path, kind: str, db: Path, count: int) -> list[float]:
    values: list[float] = _in_child(build, ["benchmarks.ab", CHILD, kind, str(db), str(count)])
    return values


# --- the parent: builds, alternation, the table ---


def _extract(revision: str, into: Path) -> Path:
    archive = into / "base.tar"
    with archive.open("wb") as out:
        subprocess.run(
            ["git", "archive", revision, "src", "migrations"],  # noqa: S607 - git from PATH
            cwd=ROOT,
            stdout=out,
            check=True,
        )
    with tarfile.open(archive) as tar:
        tar.extractall(into / "base", filter="data")
    return into / "base"


def _ms(values: Sequence[float]) -> str:
    return f"{statistics.median(values) * 1e3:.2f} / {percentile(values, 95) * 1e3:.2f}"


def _row(what: str, base: Sequence[float], new: Sequence[float], *, rate: bool = False) -> str:
    if rate:
        ratio = statistics.median(new) / statistics.median(base)
        return (
            f"| {what} | {base[0]:,.0f} /s | {new[0]:,.0f} /s | {ratio:.2f}x (higher is faster) |"
        )
    p50 = statistics.median(new) / statistics.median(base)
    p95 = percentile(new, 95) / percentile(base, 95)
    return f"| {what} | {_ms(base)} | {_ms(new)} | p50 {p50:.2f}x, p95 {p95:.2f}x |"


def _alternating(
    builds: dict[str, Path], files: dict[str, Path], kind: str, count: int, rounds: int
) -> dict[str, list[float]]:
    """``kind`` measured ``rounds`` times with each build, the order reversed every round."""
    found: dict[str, list[float]] = {name: [] for name in builds}
    for turn in range(rounds):
        for name in list(builds)[:: 1 if turn % 2 == 0 else -1]:
            _log(f"{name}: {kind} on {files[name].name}, round {turn + 1}")
            found[name] += _measure(builds[name], kind, files[name], count)
    return found


def run(revision: str, sizes: list[int], queries: int, stores: int, rounds: int) -> list[str]:
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="loopctl-ab-") as scratch:
        work = Path(scratch)
        builds = {"base": _extract(revision, work), "new": ROOT}
        for size in sizes:
            label = size_label(size)
            files = {name: work / f"{name}-{label}.db" for name in builds}
            rates: dict[str, list[float]] = {}
            for name in builds if size == sizes[0] else reversed(builds):
                _log(f"{name}: store_many {label}")
                rates[name] = _measure(builds[name], "store_many", files[name], size)
            measured = [
                (f"`store_many`, {label} natural", rates),
                (
                    f"`retrieve` p50 / p95 ms, {label}",
                    _alternating(builds, files, "retrieve", queries, rounds),
                ),
                (
                    f"`retrieve` bm25 p50 / p95 ms, {label}",
                    _alternating(builds, files, "retrieve_bm25", queries, rounds),
                ),
                (
                    f"a `store` then a bm25 `retrieve` (the retrieve) p50 / p95 ms, {label}",
                    _alternating(builds, files, "turns_bm25", queries, rounds),
                ),
            ]
            if size == sizes[0]:
                recalls = _alternating(builds, files, "recall", queries, rounds)
                measured.append((f"MCP `recall` p50 / p95 ms, {label}", recalls))
            singles = _alternating(builds, files, "single", stores, rounds)
            measured.append((f"single `store` p50 / p95 ms, {label}", singles))
            rows += [
                _row(what, found["base"], found["new"], rate=what.startswith("`store_many`"))
                for what, found in measured
            ]
    return rows


def _served(build: Path, db: Path, queries: Path) -> dict[str, list[float]]:
    """One serving process of ``build`` on ``db``: its vector and hybrid timings."""
    command = ["benchmarks.vector_serving", "_serve", str(db), str(queries), "vector,hybrid"]
    figures = _in_child(build, command)
    return {ranking: figures[ranking]["timings"] for ranking in ("vector", "hybrid")}


def run_vectors(revision: str, size: int, queries: int, rounds: int) -> list[str]:
    """``vector`` and ``hybrid`` on one file (built by the working tree) served by each build."""
    with tempfile.TemporaryDirectory(prefix="loopctl-ab-") as scratch:
        work = Path(scratch)
        builds = {"base": _extract(revision, work), "new": ROOT}
        label = size_label(size)
        db = work / f"vectors-{label}.db"
        _log(f"new: a {label} file with vectors, and its graph")
        _measure(ROOT, "vector_build", db, size)
        asked = work / "queries.json"
        asked.write_text(json.dumps(workloads.queries("natural", queries)), encoding="utf-8")
        found: dict[str, dict[str, list[float]]] = {name: {} for name in builds}
        for turn in range(rounds):
            for name in list(builds)[:: 1 if turn % 2 == 0 else -1]:
                _log(f"{name}: vector and hybrid on {db.name}, round {turn + 1}")
                for ranking, timings in _served(builds[name], db, asked).items():
                    found[name].setdefault(ranking, []).extend(timings)
        return [
            _row(
                f"`retrieve` {ranking} p50 / p95 ms, {label}",
                found["base"][ranking],
                found["new"][ranking],
            )
            for ranking in ("vector", "hybrid")
        ]


def section(rows: list[str], revision: str, command: str) -> str:
    described = subprocess.run(
        ["git", "describe", "--always", "--dirty"],  # noqa: S607 - git from PATH
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return "\n".join(
        [
            BEGIN,
            "## Before and after, in one run",
            "",
            f"- Command: `{command}`",
            f"- Base: `{revision}`; new: `{described}`",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            "",
            "| what | base | new | new / base |",
            "| --- | --- | --- | --- |",
            *rows,
            "",
            "Each build runs in child processes of its own, alternating round by round, on"
            " files it built itself from the same entries (with `--vectors`: on one file the"
            " working tree built, graph included); ratios below 1 are faster (for rates, above"
            " 1). The machine is shared: a few percent either way is noise.",
            "",
            END,
        ]
    )


def main(argv: Sequence[str] | None = None) -> None:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [CHILD]:
        child_main(arguments[1:])
        return
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab", description=__doc__)
    parser.add_argument("--base", required=True, help="the git revision to compare with")
    parser.add_argument("--sizes", default="100k,1m", help="default 100k,1m")
    parser.add_argument("--queries", type=int, default=200, help="default 200")
    parser.add_argument("--stores", type=int, default=1_000, help="single stores; default 1000")
    parser.add_argument("--rounds", type=int, default=2, help="default 2")
    parser.add_argument(
        "--vectors",
        help="instead: vector and hybrid on one file of this size with vectors (such as 1m)",
    )
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    options = parser.parse_args(arguments)
    sizes = [parse_size(size) for size in options.sizes.split(",")]
    if options.vectors:
        rows = run_vectors(
            options.base, parse_size(options.vectors), options.queries, options.rounds
        )
    else:
        rows = run(options.base, sizes, options.queries, options.stores, options.rounds)
    text = section(rows, options.base, "python -m benchmarks.ab " + " ".join(arguments))
    print(text)
    if options.out is not None:
        write_section(options.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
