"""Scopes and the memory lifecycle, measured: what a shared store and a full pass cost.

1. Retrieve in a small scope of a large store: ``--scope-size`` entries in scope
   ``team/agent-7`` of a store of ``--size`` natural entries (the rest at the
   root), p50/p95 of scoped ``retrieve`` beside p50/p95 over the whole root,
   the scoped answers checked against ``InMemoryStore`` over the scope's entries.
2. ``retrieve`` with ``track_access=True`` beside ``False`` on the same file
   (``--pass-size`` entries), p50/p95, alternating.
3. ``update`` latency (relevance only, and a new text) on that file, p50/p95.
4. ``consolidate(ConsolidationConfig.full())`` over ``--pass-size`` natural
   entries of which a fifth are reworded near-copies of earlier ones: the whole
   pass in one transaction, and the pure clustering step alone.

The report is written between the markers of a section of ``benchmarks/RESULTS.md``
(appended if they are absent), so the main benchmark's tables stay as they are.

    .venv/bin/python -m benchmarks.lifecycle_bench [--size 1m] [--pass-size 100k]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import gc
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from benchmarks import workloads
from benchmarks.provenance import machine
from benchmarks.sizes import parse_size, size_label
from loopctl_memory import InMemoryStore, MemoryEntry, open_store
from loopctl_memory.lifecycle import ConsolidationConfig, cluster_duplicates

LIMIT = 5
BATCH = 5_000
SCOPE = "team/agent-7"
BEGIN, END = "<!-- lifecycle: begin -->", "<!-- lifecycle: end -->"


def _log(message: str) -> None:
    print(f"[lifecycle] {message}", file=sys.stderr, flush=True)


def percentile(values: Sequence[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]


def timings_ms(values: Sequence[float]) -> str:
    """p50 / p95 of timings in seconds, as milliseconds."""
    return f"{statistics.median(values) * 1e3:.2f} / {percentile(values, 95) * 1e3:.2f}"


async def _timed(calls: Sequence[object]) -> list[float]:
    timings = []
    for call in calls:
        began = time.perf_counter()
        await call  # type: ignore[misc]  # coroutines
        timings.append(time.perf_counter() - began)
    return timings


async def scoped_retrieve(db: Path, size: int, scope_size: int, queries: list[str]) -> list[str]:
    """Rows of the scope table: scoped and whole-root retrieve at ``size``."""
    _log(f"building {size_label(size)} root entries and {scope_size} in {SCOPE}")
    scoped = workloads.extra_entries("natural", size, scope_size, seed=7)
    async with open_store(db) as store:
        for batch in workloads.entry_batches("natural", size, BATCH):
            await store.store_many(batch)
        await store.scope(SCOPE).store_many(scoped)
    reference = InMemoryStore(scoped)
    async with open_store(db) as store:
        view = store.scope(SCOPE)
        await view.retrieve(queries[0], LIMIT)
        await store.retrieve(queries[0], LIMIT)  # both copies loaded: time queries, not loads
        for query in queries[:20]:
            want = [entry.id for entry in await reference.retrieve(query, LIMIT)]
            got = [entry.id for entry in await view.retrieve(query, LIMIT)]
            if want != got:
                raise SystemExit(f"WRONG ANSWER in the scope for {query!r}: {got} != {want}")
        in_scope = await _timed([view.retrieve(query, LIMIT) for query in queries])
        everything = await _timed([store.retrieve(query, LIMIT) for query in queries])
    ratio = statistics.median(everything) / statistics.median(in_scope)
    return [
        f"| retrieve in a {scope_size:,}-entry scope of {size_label(size)} |"
        f" {timings_ms(in_scope)} |"
        f" whole root: {timings_ms(everything)}; the scope is {ratio:.1f}x faster |",
    ]


async def access_and_update(db: Path, size: int, queries: list[str]) -> list[str]:
    """Rows: retrieve with tracking on and off, and update latency."""
    _log(f"building {size_label(size)} entries for track_access and update")
    entries = workloads.entries("natural", size)
    async with open_store(db) as store:
        for start in range(0, size, BATCH):
            await store.store_many(entries[start : start + BATCH])
    async with open_store(db) as plain, open_store(db, track_access=True) as tracking:
        await plain.retrieve(queries[0], LIMIT)
        await tracking.retrieve(queries[0], LIMIT)
        off: list[float] = []
        on: list[float] = []
        for query in queries:  # alternating, so that both see the same machine
            off += await _timed([plain.retrieve(query, LIMIT)])
            on += await _timed([tracking.retrieve(query, LIMIT)])
        rng = random.Random(3)
        chosen = rng.sample(entries, min(200, size))
        relevance = await _timed(
            [plain.update(entry.id, relevance=rng.randrange(21) * 0.05) for entry in chosen]
        )
        texts = await _timed(
            [plain.update(entry.id, memory=entry.memory + " revised") for entry in chosen]
        )
        after = await _timed([plain.retrieve(query, LIMIT) for query in queries])
    overhead = statistics.median(on) / statistics.median(off)
    return [
        f"| retrieve, `track_access=False`, {size_label(size)} | {timings_ms(off)} | |",
        f"| retrieve, `track_access=True`, {size_label(size)} | {timings_ms(on)} |"
        f" {overhead:.2f}x the median without |",
        f"| `update` (relevance), {size_label(size)} | {timings_ms(relevance)} | one transaction |",
        f"| `update` (text), {size_label(size)} | {timings_ms(texts)} | one transaction |",
        f"| retrieve after {len(chosen)} rewritten entries, {size_label(size)} |"
        f" {timings_ms(after)} |"
        " rewritten entries are scored from their new text |",
    ]


def near_copies(size: int) -> list[MemoryEntry]:
    """Natural entries, a fifth of them an earlier entry with one word changed."""
    entries = workloads.entries("natural", size, seed=11)
    rng = random.Random(5)
    for index in range(1, size):
        if rng.random() < 0.2:
            source = entries[rng.randrange(index)]
            words = source.memory.split()
            words[rng.randrange(len(words))] = rng.choice(words)
            entries[index] = dataclasses.replace(
                entries[index], memory=" ".join(words), category=source.category
            )
    return entries


async def full_pass(db: Path, size: int, queries: list[str]) -> list[str]:
    """Rows: the full consolidation pass, and its clustering alone."""
    _log(f"building {size_label(size)} entries with near-copies for the full pass")
    entries = near_copies(size)
    gc.collect()
    began = time.perf_counter()
    clusters = cluster_duplicates(entries, 0.6)
    clustering_s = time.perf_counter() - began
    now = max(entry.created_at for entry in entries) + dt.timedelta(days=30)
    async with open_store(db) as store:
        for start in range(0, size, BATCH):
            await store.store_many(entries[start : start + BATCH])
    async with open_store(db, clock=lambda: now) as store:
        began = time.perf_counter()
        stats = await store.consolidate(ConsolidationConfig.full())
        pass_s = time.perf_counter() - began
        began = time.perf_counter()
        await store.retrieve("the cache", LIMIT)
        reload_s = time.perf_counter() - began
        after = await _timed([store.retrieve(query, LIMIT) for query in queries])
    merged = sum(len(cluster.duplicates) for cluster in clusters)
    return [
        f"| clustering alone (Jaccard >= 0.6), {size_label(size)} | {clustering_s:.2f} s |"
        f" {len(clusters):,} clusters, {merged:,} near-copies |",
        f"| `consolidate(ConsolidationConfig.full())`, {size_label(size)} | {pass_s:.2f} s |"
        f" decayed all, merged {stats.merged:,}, pruned {stats.pruned:,},"
        f" {stats.bytes_saved:,} bytes saved; one transaction |",
        f"| first retrieve after the pass, {size_label(size)} | {reload_s:.2f} s |"
        " a decay changes every entry: the copy is read again |",
        f"| retrieve after the pass, {size_label(size)} | {timings_ms(after)} |"
        " the merged entries were indexed again with the pass |",
    ]


def section(rows: list[str], command: str) -> str:
    return "\n".join(
        [
            BEGIN,
            "## Scopes and the lifecycle",
            "",
            f"- Command: `{command}`",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            "",
            "| what | p50 / p95 ms (or time) | notes |",
            "| --- | --- | --- |",
            *rows,
            "",
            "What bounds these figures:",
            "",
            "- A scope's retrieval finds its entries with one pass over a column of scope ids"
            " (about 1 ms at 1M), then ranks them from their texts, kept in memory once read.",
            "- `update` is one write transaction of five statements through SQLAlchemy;"
            " `track_access` adds one `UPDATE` to the retrieval's own hop on SQLite.",
            "- The full pass is bounded by the greedy clustering in Python (each entry against"
            " the seeds that share its rarest tokens) and by writing every decayed row back;"
            " it is worked out before its write transaction, which holds the lock only for the"
            " writing (and, when it rewrote more than `Tuning.reindex_above` entries, for"
            " building the token index again). The next retrieval reads the whole copy again"
            " (a decay changes every entry's relevance).",
            "",
            END,
        ]
    )


def write_section(out: Path, text: str, begin: str = BEGIN, end: str = END) -> None:
    """Replace the section between the markers ``begin`` and ``end`` in ``out``, or append it."""
    document = out.read_text(encoding="utf-8") if out.exists() else ""
    if begin in document and end in document:
        head, rest = document.split(begin, 1)
        document = head + text + rest.split(end, 1)[1]
    else:
        document = document.rstrip("\n") + "\n\n" + text + "\n"
    out.write_text(document, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    """Run the lifecycle benchmark and print (and write) its section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.lifecycle_bench")
    parser.add_argument("--size", type=parse_size, default=1_000_000, help="default 1m")
    parser.add_argument("--scope-size", type=int, default=1_000, help="default 1000")
    parser.add_argument("--pass-size", type=parse_size, default=100_000, help="default 100k")
    parser.add_argument("--queries", type=int, default=200, help="default 200")
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    queries = workloads.queries("natural", args.queries)
    rows: list[str] = []
    with tempfile.TemporaryDirectory(prefix="loopctl-lifecycle-") as scratch:
        where = Path(scratch)
        rows += asyncio.run(
            scoped_retrieve(where / "scoped.db", args.size, args.scope_size, queries)
        )
        rows += asyncio.run(access_and_update(where / "access.db", args.pass_size, queries))
        rows += asyncio.run(full_pass(where / "pass.db", args.pass_size, queries))
    command = " ".join(["python -m benchmarks.lifecycle_bench", *(argv or sys.argv[1:])])
    text = section(rows, command)
    print(text)
    if args.out is not None:
        write_section(args.out, text)
        _log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
