"""The LangGraph section of ``RESULTS.md``: the targets, the tables, how each was measured.

Made from the figures of :mod:`benchmarks.langgraph_speed` and
:mod:`benchmarks.langgraph_locomo`; written between ``BEGIN`` and ``END``.
"""

from __future__ import annotations

import datetime as dt
import statistics
from collections.abc import Sequence

from benchmarks.langgraph_locomo import Locomo, Recalled
from benchmarks.langgraph_speed import (
    BATCH,
    CHECKED,
    LIMIT,
    PUT_BATCH,
    ROOT_LABEL,
    Searched,
    Written,
)
from benchmarks.lifecycle_bench import percentile
from benchmarks.provenance import code_version, machine
from benchmarks.sizes import size_label

BEGIN, END = "<!-- langgraph: begin -->", "<!-- langgraph: end -->"


def p50_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1e3


def ms(values: Sequence[float]) -> str:
    """p50 / p95 of timings in seconds, as milliseconds."""
    return f"{p50_ms(values):.2f} / {percentile(values, 95) * 1e3:.2f}"


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
