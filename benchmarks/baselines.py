"""What the store is compared with, measured on the same data in the same run.

* raw ``sqlite3``: ``executemany`` into a plain entries + tags schema, one
  transaction per batch, WAL and ``synchronous=NORMAL`` (as the store runs);
  and the straightforward query that scores every row in SQL.
* raw ``aiosqlite``: one row (with its tags) per ``BEGIN IMMEDIATE`` ... ``COMMIT``.
* the Rust reference (``tests/reference/reference.rs``), compiled with ``rustc -O``,
  in its ``bench`` mode: the crate's own ``retrieve`` over the same entries and queries.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import shutil
import sqlite3
import statistics
import struct
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiosqlite

from benchmarks.provenance import ROOT
from loopctl_memory import MemoryEntry

RUST_SOURCE = ROOT / "tests" / "reference" / "reference.rs"
CACHE = Path(__file__).resolve().parent / ".cache"

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)

_SCHEMA = (
    """CREATE TABLE entries (
        seq INTEGER PRIMARY KEY,
        id TEXT NOT NULL UNIQUE,
        category TEXT NOT NULL,
        memory TEXT NOT NULL,
        memory_lower TEXT NOT NULL,
        relevance REAL NOT NULL,
        created_at_us INTEGER NOT NULL,
        access_count INTEGER NOT NULL,
        validated INTEGER NOT NULL
    )""",
    """CREATE TABLE tags (
        entry_seq INTEGER NOT NULL REFERENCES entries(seq) ON DELETE CASCADE,
        position INTEGER NOT NULL,
        tag TEXT NOT NULL,
        tag_lower TEXT NOT NULL,
        PRIMARY KEY (entry_seq, position)
    ) WITHOUT ROWID""",
)
_INSERT_ENTRY = "INSERT INTO entries VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
_INSERT_TAG = "INSERT INTO tags VALUES (?, ?, ?, ?)"

Rows = tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]


def _rows(batch: Sequence[MemoryEntry], first_seq: int) -> Rows:
    """Entry and tag rows of the plain schema (SQLite's lower() is ASCII-only: lower in Python)."""
    entry_rows: list[tuple[Any, ...]] = []
    tag_rows: list[tuple[Any, ...]] = []
    for seq, entry in enumerate(batch, start=first_seq):
        entry_rows.append(
            (
                seq,
                str(entry.id),
                str(entry.category),
                entry.memory,
                entry.memory.lower(),
                entry.relevance,
                (entry.created_at - _EPOCH) // _MICROSECOND,
                entry.access_count,
                int(entry.validated),
            )
        )
        tag_rows.extend(
            (seq, position, tag, tag.lower()) for position, tag in enumerate(entry.tags)
        )
    return entry_rows, tag_rows


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=NORMAL")
    connection.execute("PRAGMA foreign_keys=ON")
    connection.execute("PRAGMA cache_size=-65536")  # 64 MiB, as the store sets
    return connection


@dataclass(frozen=True, slots=True)
class BulkLoad:
    """How fast raw sqlite3 loaded the entries, in rows (entries) per second."""

    rows_per_s: float
    """Converting the MemoryEntry objects to row tuples and executemany, end to end."""
    executemany_rows_per_s: float
    """executemany alone, rows already built."""
    megabytes: float


def raw_load(path: Path, entries: Sequence[MemoryEntry], batch: int) -> BulkLoad:
    """Create the plain schema at ``path`` and insert ``entries``, one transaction per batch."""
    connection = _connect(path)
    try:
        for statement in _SCHEMA:
            connection.execute(statement)
        converting = inserting = 0.0
        for start in range(0, len(entries), batch):
            began = time.perf_counter()
            entry_rows, tag_rows = _rows(entries[start : start + batch], start + 1)
            built = time.perf_counter()
            connection.execute("BEGIN IMMEDIATE")
            connection.executemany(_INSERT_ENTRY, entry_rows)
            connection.executemany(_INSERT_TAG, tag_rows)
            connection.execute("COMMIT")
            done = time.perf_counter()
            converting += built - began
            inserting += done - built
    finally:
        connection.close()  # the last connection checkpoints and removes the WAL
    count = len(entries)
    return BulkLoad(
        rows_per_s=count / (converting + inserting),
        executemany_rows_per_s=count / inserting,
        megabytes=path.stat().st_size / 2**20,
    )


def raw_import(path: Path, source: Path, batch: int) -> float:
    """Lines/s of a raw import of ``source`` (JSON Lines, the export format) into the plain
    schema at ``path``: ``json.loads`` each line, its row tuples, ``executemany`` a batch a
    transaction. What ``loopctl-memory import`` does, less its checks and its indexing."""
    connection = _connect(path)
    count = 0
    try:
        for statement in _SCHEMA:
            connection.execute(statement)
        began = time.perf_counter()
        with source.open("rb") as lines:
            while chunk := list(itertools.islice(lines, batch)):
                entry_rows: list[tuple[Any, ...]] = []
                tag_rows: list[tuple[Any, ...]] = []
                for line in chunk:
                    count += 1
                    item = json.loads(line)
                    memory = item["memory"]
                    entry_rows.append(
                        (
                            count,
                            item["id"],
                            item["category"],
                            memory,
                            memory.lower(),
                            item["relevance"],
                            int(
                                (datetime.fromisoformat(item["created_at"]) - _EPOCH) / _MICROSECOND
                            ),
                            item["access_count"],
                            int(item["validated"]),
                        )
                    )
                    tag_rows.extend(
                        (count, position, tag, tag.lower())
                        for position, tag in enumerate(item["tags"])
                    )
                connection.execute("BEGIN IMMEDIATE")
                connection.executemany(_INSERT_ENTRY, entry_rows)
                connection.executemany(_INSERT_TAG, tag_rows)
                connection.execute("COMMIT")
        elapsed = time.perf_counter() - began
    finally:
        connection.close()
    return count / elapsed


def raw_prune(path: Path) -> None:
    """Delete the entries with relevance below 0.05 (their tags cascade)."""
    connection = _connect(path)
    try:
        connection.execute("DELETE FROM entries WHERE relevance < 0.05")
    finally:
        connection.close()


async def raw_single_inserts(path: Path, entries: Sequence[MemoryEntry], warmup: int) -> float:
    """Median µs of one-entry write transactions through raw aiosqlite (after ``warmup``)."""
    timings: list[float] = []
    async with aiosqlite.connect(path, isolation_level=None) as connection:
        await connection.execute("PRAGMA synchronous=NORMAL")
        await connection.execute("PRAGMA foreign_keys=ON")
        async with connection.execute("SELECT coalesce(max(seq), 0) FROM entries") as cursor:
            row = await cursor.fetchone()
        top = int(row[0]) if row is not None else 0
        for number, entry in enumerate(entries, start=1):
            entry_rows, tag_rows = _rows([entry], top + number)
            began = time.perf_counter()
            await connection.execute("BEGIN IMMEDIATE")
            await connection.execute(_INSERT_ENTRY, entry_rows[0])
            if tag_rows:
                await connection.executemany(_INSERT_TAG, tag_rows)
            await connection.execute("COMMIT")
            timings.append(time.perf_counter() - began)
    return statistics.median(timings[warmup:]) * 1e6


def scan_sql(words: int) -> str:
    """The query that scores every row in SQL (binary64, not the reference's binary32).

    Parameters: the ``words`` lowercased query words (duplicates included), then
    the whole lowercased query for the tag test.
    """
    hits = " + ".join(f"(instr(e.memory_lower, ?{n}) > 0)" for n in range(1, words + 1)) or "0"
    tag = f"?{words + 1}"
    return (
        f"SELECT e.seq, e.relevance * 0.5 + ({hits}) * 1.0 / {max(words, 1)} * 0.4"
        f" + CASE WHEN EXISTS (SELECT 1 FROM tags t WHERE t.entry_seq = e.seq"
        f" AND instr(t.tag_lower, {tag}) > 0) THEN 0.3 ELSE 0.0 END + 0.1 AS score"
        " FROM entries e ORDER BY score DESC, e.seq LIMIT ?"
    )


def raw_scan(path: Path, queries: Sequence[str], limit: int, warmup: int) -> list[float]:
    """Seconds per query of the score-every-row SQL, each query once (after ``warmup``)."""
    connection = _connect(path)
    try:
        timings: list[float] = []
        for number, query in enumerate([*queries[:warmup], *queries]):
            text = query.lower()
            words = text.split()  # the generated queries are ASCII, single-spaced
            began = time.perf_counter()
            connection.execute(scan_sql(len(words)), (*words, text, limit)).fetchall()
            if number >= warmup:
                timings.append(time.perf_counter() - began)
        return timings
    finally:
        connection.close()


# --- the Rust reference ---------------------------------------------------


def rust_reference() -> tuple[Path | None, str]:
    """The compiled reference (built once into benchmarks/.cache), or None and why not."""
    rustc = shutil.which("rustc")
    if rustc is None:
        return None, "rustc is not on PATH: the Rust reference column is skipped"
    digest = hashlib.sha256(RUST_SOURCE.read_bytes()).hexdigest()[:16]
    binary = CACHE / f"reference-{digest}"
    if not binary.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        building = binary.with_suffix(".building")
        built = subprocess.run(
            [rustc, "-O", "--edition", "2021", str(RUST_SOURCE), "-o", str(building)],
            capture_output=True,
            text=True,
            check=False,
        )
        if built.returncode != 0:
            return None, f"rustc failed on {RUST_SOURCE.name}: {built.stderr.strip()[:300]}"
        building.replace(binary)
    return binary, f"rustc -O --edition 2021 {RUST_SOURCE.relative_to(ROOT)}"


def _wire(text: str) -> str:
    return "x" + text.encode("utf-8").hex()


def _f32_bits(value: float) -> str:
    (bits,) = struct.unpack("<I", struct.pack("<f", value))
    return f"{bits:08x}"


@dataclass(frozen=True, slots=True)
class RustTiming:
    """Milliseconds a query of the Rust reference: the crate as written, and without its clone."""

    literal_ms: float
    borrowed_ms: float


def rust_bench(
    binary: Path,
    entries: Sequence[MemoryEntry],
    queries: Sequence[str],
    limit: int,
    scratch: Path,
) -> RustTiming:
    """Run the reference's ``bench`` mode over ``entries`` and ``queries``.

    The input (hundreds of MB at 1M entries) is streamed to a file in ``scratch`` first.
    """
    script = scratch / "rust-input.txt"
    with script.open("w", encoding="ascii") as out:
        for entry in entries:
            tags = "".join(f" {_wire(tag)}" for tag in entry.tags)
            out.write(
                f"entry {_f32_bits(entry.relevance)} {_wire(entry.memory)} {len(entry.tags)}"
                f"{tags}\n"
            )
        out.writelines(f"retrieve {limit} {_wire(query)}\n" for query in queries)
    with script.open("rb") as source:
        completed = subprocess.run(
            [str(binary), "bench", "1"],
            stdin=source,
            capture_output=True,
            text=True,
            check=False,
        )
    script.unlink()
    if completed.returncode != 0:
        raise RuntimeError(f"the Rust reference failed: {completed.stderr.strip()[:300]}")
    report = dict(re.findall(r"(\w+)=([\d.]+)", completed.stdout))
    return RustTiming(
        literal_ms=float(report["literal_ms_per_query"]),
        borrowed_ms=float(report["borrowed_ms_per_query"]),
    )
