"""One giant memory in a store: what it costs at its write and at every later retrieval.

A pasted log or a dump is one memory of megabytes. Two natural file stores of
``--size`` entries are built alike, one with a giant memory added (``--giant``
characters of distinct 12-hex-digit tokens, a line of a log each), and each is
reopened (a new store object: nothing in memory) and asked:

* the first query, from ``open_store``;
* ``--queries`` natural queries (limit 5), p50 and p95;
* one query of ``--long-words`` natural words.

The giant memory's ``store`` is timed too. Every answer of the store with it
is checked against ``InMemoryStore`` holding the same entries.

    .venv/bin/python -m benchmarks.giant_bench [--size 10k] [--giant 2000000]
        [--queries 200] [--long-words 5000] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import code_version, machine
from benchmarks.sizes import parse_size, size_label
from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, open_store

BEGIN, END = "<!-- giant: begin -->", "<!-- giant: end -->"
LIMIT = 5


def giant_memory(characters: int, seed: int = 30) -> str:
    """Distinct 12-hex-digit tokens, 13 characters each with the space, to about ``characters``."""
    rng = random.Random(seed)
    count = characters // 13
    tokens: set[str] = set()
    while len(tokens) < count:
        tokens.add(f"{rng.getrandbits(48):012x}")
    return " ".join(sorted(tokens, key=lambda _: rng.random()))


async def _build(path: Path, entries: list[MemoryEntry], giant: MemoryEntry | None) -> float:
    async with open_store(path) as store:
        for start in range(0, len(entries), 5_000):
            await store.store_many(entries[start : start + 5_000])
        if giant is None:
            return 0.0
        began = time.perf_counter()
        await store.store(giant)
        return time.perf_counter() - began


async def _ask(path: Path, queries: list[str], long_query: str) -> dict[str, float]:
    began = time.perf_counter()
    async with open_store(path) as store:
        await store.retrieve(queries[0], LIMIT)
        first = time.perf_counter() - began
        times = []
        for query in queries:
            began = time.perf_counter()
            await store.retrieve(query, LIMIT)
            times.append(time.perf_counter() - began)
        began = time.perf_counter()
        await store.retrieve(long_query, LIMIT)
        long_time = time.perf_counter() - began
    times.sort()
    return {
        "first": first,
        "p50": statistics.median(times) * 1000,
        "p95": times[int(0.95 * (len(times) - 1))] * 1000,
        "long": long_time,
    }


async def _checked(
    path: Path, entries: list[MemoryEntry], giant: MemoryEntry, queries: list[str]
) -> None:
    reference = InMemoryStore()
    await reference.store_many([*entries, giant])
    pieces = [token[3:9] for token in giant.memory.split()[:20]]
    async with open_store(path) as store:
        for query in [*queries[:20], *pieces]:
            expected = [e.id for e in await reference.retrieve(query, LIMIT)]
            if expected != [e.id for e in await store.retrieve(query, LIMIT)]:
                raise SystemExit(f"the store with a giant memory answered {query!r} wrongly")


async def _main(options: argparse.Namespace) -> str:
    entries = workloads.entries("natural", options.size)
    giant = MemoryEntry(MemoryCategory.FACT, giant_memory(options.giant))
    queries = workloads.queries("natural", options.queries)
    long_query = workloads.long_query("natural", options.long_words)
    with tempfile.TemporaryDirectory(prefix="loopctl-giant-") as scratch:
        plain, with_giant = Path(scratch) / "plain.db", Path(scratch) / "giant.db"
        await _build(plain, entries, None)
        written = await _build(with_giant, entries, giant)
        without = await _ask(plain, queries, long_query)
        held = await _ask(with_giant, queries, long_query)
        await _checked(with_giant, entries, giant, queries)
    commit, dirty = code_version()
    label = size_label(options.size)
    distinct = len(set(giant.memory.split()))
    ratio = held["p50"] / without["p50"]
    lines = [
        BEGIN,
        "### One giant memory",
        "",
        f"- Command: `python -m benchmarks.giant_bench {' '.join(options.argv)}`".rstrip() + "",
        f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC; machine: {machine()}",
        f"- Code: {commit}{' plus uncommitted changes in src/' if dirty else ''}",
        f"- A natural file store of {label} entries, and the same with one memory of"
        f" {len(giant.memory):,} characters ({distinct:,} distinct tokens) stored last;"
        " each reopened, then asked the same queries (limit 5). The store with it answered"
        " as InMemoryStore on 40 queries.",
        "",
        "| store | giant `store` s | open + first query s | p50 ms | p95 ms"
        f" | {options.long_words:,}-word query s |",
        "|---|---|---|---|---|---|",
        f"| {label} | — | {without['first']:.2f} | {without['p50']:.2f} | {without['p95']:.2f}"
        f" | {without['long']:.2f} |",
        f"| {label} + giant | {written:.2f} | {held['first']:.2f} | {held['p50']:.2f}"
        f" | {held['p95']:.2f} | {held['long']:.2f} |",
        "",
        f"- p50 with the giant memory / without: **{ratio:.2f}x** (target ≤ 1.5x);"
        f" the {options.long_words:,}-word query with it: **{held['long']:.2f} s**"
        " (target < 0.5 s).",
        END,
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure, print the section, and write it into ``--out`` if given."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.giant_bench")
    parser.add_argument("--size", type=parse_size, default=parse_size("10k"))
    parser.add_argument("--giant", type=int, default=2_000_000, help="characters")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--long-words", type=int, default=5_000)
    parser.add_argument("--out", type=Path)
    options = parser.parse_args(argv)
    options.argv = list(argv if argv is not None else sys.argv[1:])
    text = asyncio.run(_main(options))
    print(text)
    if options.out is not None:
        write_section(options.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
