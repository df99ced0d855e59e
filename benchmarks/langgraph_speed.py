"""How fast ``LangGraphStore`` is, beside the library's own calls and LangGraph's ``SqliteStore``.

1. ``search`` with a query over natural memories in many namespaces of a SQLite
   file, beside the library's own ``retrieve`` (bm25) over the same file's
   scopes, query by query in turn; the first ``CHECKED`` answers must agree.
2. ``put`` and ``get`` one item at a time on files, beside ``SqliteStore``.
3. ``batch`` of ``PUT_BATCH`` puts, beside ``SqliteStore``'s and the floor: the
   same rows put back by raw ``sqlite3``.
"""

from __future__ import annotations

import gc
import random
import sqlite3
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from langgraph.store.base import BaseStore, PutOp, SearchItem
from langgraph.store.sqlite import SqliteStore

from benchmarks import workloads
from benchmarks.sizes import size_label
from loopctl_memory import MemoryCategory, MemoryEntry, sync
from loopctl_memory.langgraph import LangGraphStore, namespaces

LIMIT = 5
BATCH = 5_000
PUT_BATCH = 1_000
CHECKED = 20
ROOT_LABEL = "memories"
FACT = MemoryCategory.FACT

Timings = dict[str, list[float]]


def log(message: str) -> None:
    """A progress line on stderr."""
    print(f"[langgraph] {message}", file=sys.stderr, flush=True)


class WrongAnswerError(Exception):
    """The LangGraph store answered other than the library under it."""


# --- timing ---


def alternate(calls: dict[str, Callable[[int], object]], count: int) -> Timings:
    """Each call ``count`` times (given the round), in turn; the first of a round rotates."""
    names = list(calls)
    timings: Timings = {name: [] for name in names}
    gc.collect()
    for round_ in range(count):
        shift = round_ % len(names)
        for name in names[shift:] + names[:shift]:
            began = time.perf_counter()
            calls[name](round_)
            timings[name].append(time.perf_counter() - began)
    return timings


# --- 1. search at size ---


def namespace(index: int, count: int) -> tuple[str, str]:
    return (ROOT_LABEL, f"user-{index % count:03d}")


def build(db: Path, size: int, count: int) -> float:
    """Put ``size`` natural memories into ``db`` through ``batch``; the seconds it took."""
    log(f"building {size_label(size)} items in {count} namespaces")
    began = time.perf_counter()
    index = 0
    with LangGraphStore.from_conn_string(db) as store:
        for entries in workloads.entry_batches("natural", size, BATCH):
            ops: list[PutOp] = []
            for entry in entries:
                value = {"text": entry.memory, "kind": entry.category.value}
                ops.append(PutOp(namespace(index, count), f"m{index}", value))
                index += 1
            store.batch(ops)
    return time.perf_counter() - began


@dataclass(frozen=True, slots=True)
class Searched:
    """Search timings at one size: the build, and each call's timings."""

    size: int
    namespaces: int
    build_s: float
    timings: Timings


def measure_search(db: Path, size: int, count: int, queries: list[str]) -> Searched:
    build_s = build(db, size, count)
    one = namespace(count // 2, count)
    log(f"searching: {len(queries)} queries, alternating")
    with LangGraphStore.from_conn_string(db) as store, sync.open_store(db) as library:
        everything = library.scope(ROOT_LABEL, descendants=True)
        alone = library.scope(namespaces.scope_of(one))

        def keys(items: Sequence[SearchItem]) -> list[str]:  # the ranked (others follow)
            return [item.key for item in items if item.score is not None]

        for query in queries[:CHECKED]:  # also loads both copies: time queries, not loads
            for prefix, view in (((ROOT_LABEL,), everything), (one, alone)):
                got = keys(store.search(prefix, query=query, limit=LIMIT))
                want = [str(e.key) for e in view.retrieve(query, LIMIT, ranking="bm25")]
                if got != want:
                    raise WrongAnswerError(f"{prefix} {query!r}: {got} != {want}")
        timings = alternate(
            {
                "store": lambda n: store.search((ROOT_LABEL,), query=queries[n], limit=LIMIT),
                "library": lambda n: everything.retrieve(queries[n], LIMIT, ranking="bm25"),
                "store, one": lambda n: store.search(one, query=queries[n], limit=LIMIT),
                "library, one": lambda n: alone.retrieve(queries[n], LIMIT, ranking="bm25"),
            },
            len(queries),
        )
    return Searched(size, count, build_s, timings)


# --- 2, 3. put, get and batch on files ---


@dataclass(frozen=True, slots=True)
class Written:
    """Timings of put, get and batch, by store; how each SqliteStore file was set."""

    put: Timings
    get: Timings
    batch: Timings
    settings: dict[str, str]


def _pragmas(store: SqliteStore) -> str:
    journal = store.conn.execute("PRAGMA journal_mode").fetchone()[0]
    synchronous = store.conn.execute("PRAGMA synchronous").fetchone()[0]
    return f"journal_mode={journal}, synchronous={synchronous}"


_ROWS = {  # the tables a put writes, and how each batch's rows are found in them
    "entries": "seq BETWEEN ? AND ?",
    "tags": "entry_seq BETWEEN ? AND ?",
    "entry_fields": "entry_seq BETWEEN ? AND ?",
}


def replay(written: Path, into: Path, batches: int) -> list[float]:
    """The floor under a batch: its rows as ``written`` holds them, put back by raw ``sqlite3``.

    A new file with ``written``'s schema and the store's settings (8 KiB pages,
    WAL, synchronous=NORMAL, foreign keys) takes the rows of each of the first
    ``batches`` batches of ``PUT_BATCH`` entries (entries, tags, metadata
    fields) by ``executemany``, one transaction a batch: what SQLite alone
    spends on the store's rows, with nothing made or checked in Python. The
    seconds of each batch.
    """
    source = sqlite3.connect(f"file:{written}?mode=ro", uri=True)
    schema = [
        sql
        for (sql,) in source.execute(
            "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%'"
            " ORDER BY type = 'index', rowid"
        )
    ]
    seqs = [seq for (seq,) in source.execute("SELECT seq FROM entries ORDER BY seq")]
    target = sqlite3.connect(into, isolation_level=None)
    for pragma in ("page_size=8192", "journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
        target.execute(f"PRAGMA {pragma}")
    for sql in schema:
        target.execute(sql)
    times = []
    for first in seqs[: batches * PUT_BATCH : PUT_BATCH]:
        last = first + PUT_BATCH - 1
        rows = {
            table: source.execute(f"SELECT * FROM {table} WHERE {where}", (first, last)).fetchall()
            for table, where in _ROWS.items()
        }
        began = time.perf_counter()
        target.execute("BEGIN IMMEDIATE")
        for table, found in rows.items():
            if found:
                marks = ", ".join("?" * len(found[0]))
                target.executemany(f"INSERT INTO {table} VALUES ({marks})", found)
        target.execute("COMMIT")
        times.append(time.perf_counter() - began)
    source.close()
    target.close()
    return times


def measure_writes(scratch: Path, rounds: int, batches: int) -> Written:
    """Batches, then single puts, then gets, each store in turn."""
    texts = [entry.memory for entry in workloads.entries("natural", rounds + PUT_BATCH, seed=3)]
    with (
        LangGraphStore.from_conn_string(scratch / "langgraph.db") as ours,
        sync.open_store(scratch / "library.db") as library,
        SqliteStore.from_conn_string(str(scratch / "sqlite.db")) as plain,
        SqliteStore.from_conn_string(str(scratch / "sqlite-wal.db")) as wal,
    ):
        plain.setup()
        wal.setup()
        wal.conn.execute("PRAGMA journal_mode=WAL")
        wal.conn.execute("PRAGMA synchronous=NORMAL")
        stores: dict[str, BaseStore] = {"store": ours, "SqliteStore": plain, "SqliteStore WAL": wal}
        settings = {"SqliteStore": _pragmas(plain), "SqliteStore WAL": _pragmas(wal)}
        chunk = texts[:PUT_BATCH]
        ops = [
            [PutOp(("batch", f"r{n}"), f"b{j}", {"text": text}) for j, text in enumerate(chunk)]
            for n in range(batches)
        ]
        entries = [
            [
                MemoryEntry(FACT, text, key=f"b{j}", metadata={"text": text})
                for j, text in enumerate(chunk)
            ]
            for _ in range(batches)
        ]
        scopes = [library.scope(f"batch/r{n}") for n in range(batches)]

        def batch_of(store: BaseStore) -> Callable[[int], object]:
            return lambda n: store.batch(ops[n])

        log(f"{batches} batches of {PUT_BATCH} puts a store, alternating")
        calls = {name: batch_of(store) for name, store in stores.items()}
        calls["library"] = lambda n: scopes[n].store_many(entries[n])
        batch = alternate(calls, batches)

        users = [("users", f"u{n}") for n in range(10)]
        views = [library.scope(f"users/u{n}") for n in range(10)]
        chosen = random.Random(5).choices(range(rounds), k=rounds)  # the keys to get, once put

        def put_of(store: BaseStore) -> Callable[[int], object]:
            return lambda n: store.put(users[n % 10], f"p{n}", {"text": texts[PUT_BATCH + n]})

        def get_of(store: BaseStore) -> Callable[[int], object]:
            return lambda n: store.get(users[chosen[n] % 10], f"p{chosen[n]}")

        log(f"{rounds} single puts, then gets, a store, alternating")
        calls = {name: put_of(store) for name, store in stores.items()}
        calls["library"] = lambda n: views[n % 10].store(
            MemoryEntry(FACT, texts[PUT_BATCH + n], key=f"p{n}")
        )
        put = alternate(calls, rounds)
        calls = {name: get_of(store) for name, store in stores.items()}
        calls["library"] = lambda n: views[chosen[n] % 10].get_by_key(f"p{chosen[n]}")
        for name, call in calls.items():
            if call(0) is None:
                raise WrongAnswerError(f"{name} lost the item p{chosen[0]}")
        get = alternate(calls, rounds)
    batch["floor"] = replay(scratch / "langgraph.db", scratch / "replayed.db", batches)
    return Written(put, get, batch, settings)
