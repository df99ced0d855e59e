"""LangGraph's ``BaseStore`` on this library, against LangGraph's own stores, in one run.

1. ``search`` with a query over ``--size`` natural memories in ``--namespaces``
   namespaces of a SQLite file, beside this library's own ``retrieve`` (bm25) over
   the same file's scopes, query by query in turn.
2. ``put`` and ``get`` one item at a time on files, beside LangGraph's ``SqliteStore``.
3. ``batch`` of 1,000 puts, beside ``SqliteStore``'s.
4. LoCoMo hit@5 (``--data``, ``--vectors``): this store (hybrid, and bm25) beside
   ``SqliteStore`` with sqlite-vec (and ``InMemoryStore``), all embedding through one
   function that looks each text's all-MiniLM-L6-v2 vector up in the .npz.

The section (how each is measured, the tables, the targets) is written between its
markers in ``--out``.

    .venv/bin/python -m benchmarks.langgraph_bench [--size 100k] [--queries 200]
        [--data ../shared/eval/locomo-dev.json --vectors ../shared/eval/minilm-dev.npz]
        [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import gc
import importlib
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from langgraph.store.base import BaseStore, IndexConfig, PutOp, SearchItem
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from benchmarks import quality, workloads
from benchmarks.lifecycle_bench import percentile, write_section
from benchmarks.run import ROOT, code_version, machine, parse_size, size_label
from loopctl_memory import MemoryCategory, MemoryEntry, sync
from loopctl_memory.langgraph import LangGraphStore, namespaces

LIMIT = 5
BATCH = 5_000
PUT_BATCH = 1_000
CHECKED = 20
ROOT_LABEL = "memories"
FACT = MemoryCategory.FACT
BEGIN, END = "<!-- langgraph: begin -->", "<!-- langgraph: end -->"
EVAL = ROOT.parent / "shared" / "eval"
NO_LOAD = "cannot load extensions (`pip install pysqlite3-binary` gives one that can)"

Timings = dict[str, list[float]]


def _log(message: str) -> None:
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


def p50_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1e3


def ms(values: Sequence[float]) -> str:
    """p50 / p95 of timings in seconds, as milliseconds."""
    return f"{p50_ms(values):.2f} / {percentile(values, 95) * 1e3:.2f}"


# --- 1. search at size ---


def namespace(index: int, count: int) -> tuple[str, str]:
    return (ROOT_LABEL, f"user-{index % count:03d}")


def build(db: Path, size: int, count: int) -> float:
    """Put ``size`` natural memories into ``db`` through ``batch``; the seconds it took."""
    _log(f"building {size_label(size)} items in {count} namespaces")
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
    _log(f"searching: {len(queries)} queries, alternating")
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

        _log(f"{batches} batches of {PUT_BATCH} puts a store, alternating")
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

        _log(f"{rounds} single puts, then gets, a store, alternating")
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


# --- 4. LoCoMo ---


class Vectors:
    """An ``index["embed"]`` function: each text's vector looked up in an .npz, never invented."""

    def __init__(self, path: Path) -> None:
        held = np.load(path)
        self.path = path
        self._rows = {text: row for row, text in enumerate(held["texts"].tolist())}
        self._vectors = np.asarray(held["vectors"], np.float32)
        self.dims = int(self._vectors.shape[1])
        self.looked_up = 0

    def __call__(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [text for text in texts if text not in self._rows]
        if missing:
            raise LookupError(
                f"{len(missing)} of {len(texts)} texts to embed are not in {self.path}:"
                f" {missing[0]!r} first"
            )
        self.looked_up += len(texts)
        vectors: list[list[float]] = self._vectors[[self._rows[t] for t in texts]].tolist()
        return vectors


@dataclass(frozen=True, slots=True)
class Recalled:
    """One store's LoCoMo figures: quality, search timings, how many texts it embedded."""

    name: str
    quality: quality.Quality
    timings: list[float]
    embedded: int


def locomo(
    name: str,
    store: BaseStore,
    conversations: Sequence[quality.Conversation],
    vectors: Vectors,
    fields: list[str] | None = None,
) -> Recalled:
    """Each conversation's turns put in a namespace of its own; its questions searched there."""
    before = vectors.looked_up
    answers: list[list[str]] = []
    timings: list[float] = []
    for talk in conversations:
        ns = ("locomo", talk.name)
        store.batch([PutOp(ns, t.id, {"text": t.memory}, index=fields) for t in talk.turns])
        for question in talk.questions:
            began = time.perf_counter()
            found = store.search(ns, query=question.text, limit=LIMIT)
            timings.append(time.perf_counter() - began)
            answers.append([item.key for item in found])
    questions = [question for talk in conversations for question in talk.questions]
    return Recalled(name, quality.measure(answers, questions), timings, vectors.looked_up - before)


def vec_connection() -> tuple[Any, str] | None:
    """A connection that can load sqlite-vec, and what it is (None: this Python has none)."""
    conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    if hasattr(conn, "enable_load_extension"):
        return conn, f"the standard `sqlite3` (SQLite {sqlite3.sqlite_version})"
    conn.close()
    try:
        driver = importlib.import_module("pysqlite3.dbapi2")
    except ImportError:
        return None
    conn = driver.connect(":memory:", check_same_thread=False, isolation_level=None)
    return conn, f"`pysqlite3` (SQLite {driver.sqlite_version}): this Python's `sqlite3` {NO_LOAD}"


@dataclass(frozen=True, slots=True)
class Locomo:
    """The LoCoMo rows, on what data, and how ``SqliteStore`` loaded sqlite-vec."""

    recalled: list[Recalled]
    data: str
    driver: str


def measure_locomo(data: Path, vectors_file: Path) -> Locomo:
    talks = quality.load(data)
    vectors = Vectors(vectors_file)
    index: IndexConfig = {"embed": vectors, "dims": vectors.dims, "fields": ["text"]}
    _log(f"LoCoMo: {sum(len(talk.questions) for talk in talks)} questions a store")
    found: list[Recalled] = []
    opened = vec_connection()
    driver = f"none, not measured: this Python's `sqlite3` {NO_LOAD}, and there is no `pysqlite3`"
    if opened is not None:
        conn, driver = opened
        with contextlib.closing(conn):
            sqlite_store = SqliteStore(conn, index=index)
            sqlite_store.setup()
            # index= on each put: SqliteStore reads "text_fields", not "fields"
            found.append(locomo("SqliteStore", sqlite_store, talks, vectors, ["text"]))
    found.append(locomo("InMemoryStore", InMemoryStore(index=index), talks, vectors))
    with LangGraphStore.from_conn_string(":memory:", index=index, ranking="hybrid") as hybrid:
        found.append(locomo("store, hybrid", hybrid, talks, vectors))
    with LangGraphStore.from_conn_string(":memory:") as bm25:
        found.append(locomo("store, bm25", bm25, talks, vectors))
    return Locomo(found, f"`{data.name}`, vectors `{vectors_file.name}`", driver)


# --- the report ---


def _ratio(ours: float, theirs: float, bound: float, unit: str = "ms") -> tuple[str, str]:
    ratio = ours / theirs
    verdict = "holds" if ratio <= bound else f"MISSED by {ratio / bound:.2f}x"
    return f"{ours:,.3g} {unit} vs {theirs:,.3g} {unit}: {ratio:.2f}x", verdict


def targets(searched: Searched, written: Written, recalled: list[Recalled]) -> list[str]:
    """The issue's targets: | target | measured | verdict |."""
    s, batch = searched.timings, written.batch
    rows = [
        (
            f"`search` with a query, {size_label(searched.size)} items: p50 <= 2x the library's"
            " own `retrieve` (bm25)",
            *_ratio(p50_ms(s["store"]), p50_ms(s["library"]), 2),
        )
    ]
    rows += [
        (
            f"`{what}` p50 <= 1.5x `SqliteStore`'s (files, no index)",
            *_ratio(p50_ms(timings["store"]), p50_ms(timings["SqliteStore"]), 1.5),
        )
        for what, timings in (("put", written.put), ("get", written.get))
    ]
    # entries/s over all batches >= theirs: a batch takes at most 1x theirs, on average
    per_batch = (statistics.mean(batch["store"]), statistics.mean(batch["SqliteStore"]))
    shown, verdict = _ratio(*per_batch, 1, "s")
    rates = " vs ".join(f"{PUT_BATCH / t:,.0f}" for t in per_batch)
    rows.append(
        (
            f"`batch` of {PUT_BATCH:,} puts: entries/s >= `SqliteStore`'s",
            f"{rates} entries/s (a batch on average {shown})",
            verdict,
        )
    )
    hits = {r.name: r.quality.hit_5 for r in recalled}
    if "SqliteStore" in hits:
        mine, theirs = hits["store, hybrid"], hits["SqliteStore"]
        verdict = "holds" if mine >= theirs else f"MISSED by {theirs - mine:.3f}"
        rows.append(
            (
                "LoCoMo hit@5: this store (hybrid) >= `SqliteStore` (sqlite-vec), same vectors",
                f"{mine:.3f} vs {theirs:.3f}",
                verdict,
            )
        )
    else:
        rows.append(("LoCoMo hit@5 >= `SqliteStore`'s", "not measured", "—"))
    return ["| {} | {} | {} |".format(*row) for row in rows]


LABELS = {
    "store": "`LangGraphStore`",
    "SqliteStore": "`SqliteStore`",
    "SqliteStore WAL": "`SqliteStore`, WAL + synchronous=NORMAL",
    "library": "the library's own (blocking API)",
    "floor": "the rows `LangGraphStore` wrote, by raw `sqlite3` into its schema (the floor)",
    "InMemoryStore": "`InMemoryStore` (cosine)",
    "store, hybrid": "`LangGraphStore`, hybrid",
    "store, bm25": "`LangGraphStore`, bm25 (no index)",
}


def search_rows(searched: Searched) -> list[str]:
    s, at = searched.timings, size_label(searched.size)
    return [
        f'| `LangGraphStore.search(("{ROOT_LABEL}",), query=q, limit={LIMIT})`, all {at} |'
        f" {ms(s['store'])} | {p50_ms(s['store']) / p50_ms(s['library']):.2f}x the library |",
        f'| library `scope("{ROOT_LABEL}", descendants=True).retrieve(q, {LIMIT},'
        f' ranking="bm25")`, all {at} | {ms(s["library"])} | |',
        f"| `LangGraphStore.search` in one namespace ({searched.size // searched.namespaces:,}"
        f" items) | {ms(s['store, one'])} |"
        f" {p50_ms(s['store, one']) / p50_ms(s['library, one']):.2f}x the library |",
        f"| library `retrieve` in that namespace's scope | {ms(s['library, one'])} | |",
    ]


def write_rows(written: Written) -> list[str]:
    rows = []
    for what, timings in (("put", written.put), ("get", written.get), ("batch", written.batch)):
        theirs = statistics.median(timings["SqliteStore"])
        for name, times in timings.items():
            rate = f"; {PUT_BATCH / statistics.mean(times):,.0f} entries/s" * (what == "batch")
            rows.append(
                f"| `{what}`, {LABELS[name]} | {ms(times)}{rate} |"
                f" {statistics.median(times) / theirs:.2f}x |"
            )
    return rows


def locomo_part(found: Locomo | None) -> list[str]:
    if found is None:
        return ["Not measured: no `--data` and `--vectors`."]
    return [
        f"Data: {found.data}. `SqliteStore`'s connection: {found.driver}.",
        "",
        "| store | hit@1 | hit@5 | recall@5 | questions | search p50 / p95 ms | texts embedded |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(
            f"| {LABELS[r.name]} | {r.quality.hit_1:.3f} | {r.quality.hit_5:.3f} |"
            f" {r.quality.recall_5:.3f} | {r.quality.questions} | {ms(r.timings)} |"
            f" {r.embedded:,} |"
            for r in found.recalled
        ),
    ]


def section(searched: Searched, written: Written, found: Locomo | None, command: str) -> str:
    code, dirty = code_version()
    at, settings = size_label(searched.size), written.settings
    rounds, batches = len(written.put["store"]), len(written.batch["store"])
    return "\n".join(
        [
            BEGIN,
            "## LangGraph's `BaseStore`: `loopctl_memory.langgraph.LangGraphStore`",
            "",
            f"- Command: `{command}` (from the project root, with `.venv/bin/python`)",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            f"- Code: {code}" + (" (numbers from code in progress)" if dirty else ""),
            "",
            "| target (each ratio from one run) | measured | verdict |",
            "| --- | --- | --- |",
            *targets(searched, written, found.recalled if found else []),
            "",
            f"### Search with a query, {at} items",
            "",
            "| what | p50 / p95 ms | notes |",
            "| --- | --- | --- |",
            *search_rows(searched),
            "",
            f"{at} natural memories (`benchmarks/workloads.py`, 8-25 words) put as items"
            f' `{{"text": ..., "kind": ...}}` round-robin into {searched.namespaces} namespaces'
            f' `("{ROOT_LABEL}", "user-NNN")` by `batch` of {BATCH:,} `PutOp`'
            f" ({searched.build_s:.1f} s in all; no index: the store ranks by BM25);"
            f" {len(searched.timings['store'])} natural queries (3-7 words), each asked of the"
            " four in turn, the first of a round rotating. The library's rows open the same"
            " file with `loopctl_memory.sync.open_store`: the same memories in the same scopes,"
            f" and the same hop to a store's event loop thread. The first {CHECKED} queries'"
            " ranked keys equal the library's, in order; where fewer than 5 items match,"
            " `search` adds the newest others (score None), as LangGraph's stores do.",
            "",
            "### `put`, `get`, `batch` (SQLite files)",
            "",
            "| what | p50 / p95 ms | p50 against `SqliteStore`'s |",
            "| --- | --- | --- |",
            *write_rows(written),
            "",
            f"{batches} `batch` calls a store of {PUT_BATCH:,} `PutOp` with new keys (entries/s:"
            " over all of them, so a batch that also writes an index counts), then"
            f" {rounds} single `put(ns, key, value)` (new keys, 10 namespaces), then {rounds}"
            " `get(ns, key)` of keys put; the stores in turn, the first of a round rotating."
            " `SqliteStore` as `from_conn_string` and `setup()` open it, no index:"
            f" {settings['SqliteStore']} (Python's sqlite3 defaults, autocommit: each commit"
            " syncs a rollback journal). The WAL row: the same store after `PRAGMA"
            " journal_mode=WAL; PRAGMA synchronous=NORMAL`"
            f" ({settings['SqliteStore WAL']}), this library's own settings. The library rows:"
            " `SyncMemoryStore.store`, `get_by_key`, `store_many` on a file of their own, the"
            " store beneath `LangGraphStore`. The floor: once the stores closed, the rows"
            " `LangGraphStore`'s batches left in its file (entries, tags, metadata fields) are"
            " read back and inserted by `sqlite3` `executemany` into a new file with the same"
            " schema and the store's settings, one transaction a batch: what SQLite alone spends"
            " on this store's rows, nothing made or checked in Python.",
            "",
            "### LoCoMo hit@5, the same all-MiniLM-L6-v2 vectors",
            "",
            *locomo_part(found),
            "",
            'Each conversation\'s turns are items `{"text": "Speaker: text"}` (key: the'
            ' turn\'s id) put by one `batch` into a namespace `("locomo", name)`; each question'
            f" of categories 1-4 is asked with `search(ns, query=question, limit={LIMIT})`. The"
            ' stores are given `index={"embed": lookup, "dims": 384, "fields": ["text"]}`'
            " (the bm25 row: no index); `lookup` returns each text's vector from the .npz and"
            " raises on a text it does not hold; `texts embedded`: how many it was asked for"
            " (turns and questions); the search times are each store's own, not alternated."
            " `SqliteStore` reads its config's `text_fields`, not"
            " `fields`, and would embed each value's JSON: its puts"
            ' say `index=["text"]`; it ranks by sqlite-vec\'s exact cosine. `InMemoryStore`:'
            " LangGraph's, cosine, for reference. hybrid: `0.5 * bm25 / max(bm25) + 0.5 *"
            " min-max-scaled cosine` (`loopctl_memory.fusion`).",
            "",
            END,
        ]
    )


def _default(name: str) -> Path | None:
    path = EVAL / name
    return path if path.exists() else None


def main(argv: Sequence[str] | None = None) -> None:
    """Run the LangGraph store benchmark and print (and write) its section."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.langgraph_bench")
    parser.add_argument("--size", type=parse_size, default=100_000, help="default 100k")
    parser.add_argument("--namespaces", type=int, default=100, help="default 100")
    parser.add_argument("--queries", type=int, default=200, help="default 200")
    parser.add_argument("--rounds", type=int, default=300, help="single puts and gets (300)")
    parser.add_argument("--batches", type=int, default=10, help="batches of 1000 a store (10)")
    parser.add_argument("--data", type=Path, default=_default("locomo-dev.json"))
    parser.add_argument("--vectors", type=Path, default=_default("minilm-dev.npz"))
    parser.add_argument("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(argv)
    queries = workloads.queries("natural", args.queries)
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="loopctl-langgraph-") as scratch:
        where = Path(scratch)
        searched = measure_search(where / "s.db", args.size, args.namespaces, queries)
        written = measure_writes(where, args.rounds, args.batches)
    found = None
    if args.data is not None and args.vectors is not None:
        found = measure_locomo(args.data, args.vectors)
    _log(f"done in {time.perf_counter() - began:.0f} s")
    command = " ".join(["python -m benchmarks.langgraph_bench", *(argv or sys.argv[1:])])
    text = section(searched, written, found, command)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)
        _log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
