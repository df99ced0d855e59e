"""BM25 speed: the store's ``ranking="bm25"`` against its reference ranking and ``bm25s``.

For each size, ONE natural-workload SQLite file is built once with ``store_many``
(``workloads.entry_batches``; entry ``i`` gets category ``i % 6`` and the tag
``t{i % 100}`` after its own, so ``MemoryFilter(tags_any=["t7"])`` keeps 1%, and the
metadata ``{"shard": "s{37 i % 100}"}``, so ``MemoryFilter(metadata={"shard": "s7"})``
keeps another 1%). Then:

1. Each measurement in a fresh child process (its peak RSS and first query its
   own): ``open_store(file, ranking=...)``, open + first query (s), ``--warmup``
   queries, then ``--queries`` natural queries timed (limit 5; at most
   ``--budget`` s): p50/p95/p99/max ms, peak RSS. A round runs ``reference``,
   ``bm25``, ``bm25`` with the 1% tag filter, then with the 1% metadata
   filter, then ``reference`` and ``bm25`` on ``workloads.skewed_queries``
   (the most common content words: every posting list long); each figure is
   the median over ``--rounds`` rounds (RSS: the largest), so every ratio is
   from one run.
2. ``bm25s`` itself (Lucene, k1 0.9, b 0.4, its English stopwords and PyStemmer
   stems) on the same documents (memory, then tags), built in a child (build s),
   then the same queries, natural and skewed (the query's tokens, its scores,
   the best 5): the static baseline at its fastest.
   ``--no-bm25s`` skips it (its 1M build takes most of a minute).
3. At sizes <= 100k, the first 20 timed queries' ids of every bm25 child
   (unfiltered, filtered, skewed) must be ``InMemoryStore(ranking="bm25")``'s, in order.
4. Issues 28's, 45's and 47's targets, printed as holds / MISSED with their figures, in the
   section ``<!-- bm25: begin -->`` ... ``<!-- bm25: end -->`` of ``--out``.

    .venv/bin/python -m benchmarks.bm25_bench [--sizes 100k,1m] [--queries 300] [--warmup 5]
        [--rounds 2] [--budget 120] [--no-bm25s] [--out benchmarks/RESULTS.md]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import json
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import workloads
from benchmarks.lifecycle_bench import write_section
from benchmarks.provenance import ROOT, code_version, machine
from benchmarks.sizes import parse_size, size_label
from benchmarks.stats import nearest_rank, peak_rss_kb
from loopctl_memory import InMemoryStore, MemoryCategory, MemoryEntry, MemoryFilter, open_store
from loopctl_memory.bm25_tokens import query_tokens

LIMIT = 5
BATCH = 5_000
CHILD = "_child"
BEGIN, END = "<!-- bm25: begin -->", "<!-- bm25: end -->"
CATEGORIES = tuple(MemoryCategory)
TAG_MODULUS = 100  # entry i holds the tag t{i % 100}
FILTER_TAG = "t7"
FILTER = MemoryFilter(tags_any=(FILTER_TAG,))  # keeps 1% of the entries
SHARDS = 100  # entry i holds the metadata {"shard": f"s{37 * i % 100}"}
METADATA_FILTER = MemoryFilter(metadata={"shard": "s7"})  # another 1%
FILTERS = {"filtered": FILTER, "metadata": METADATA_FILTER}
KINDS = {  # the serving children of a round, in order, and their rows' names
    "reference": "store, `reference`",
    "bm25": "store, `bm25`",
    "filtered": f'store, `bm25`, 1% filter `tags_any=["{FILTER_TAG}"]`',
    "metadata": 'store, `bm25`, 1% filter `metadata={"shard": "s7"}`',
    "skewed-reference": "store, `reference`, skewed queries",
    "skewed": "store, `bm25`, skewed queries",
}
SKEWED = ("skewed-reference", "skewed")  # the kinds asking workloads.skewed_queries
CHECKED = 20  # timed queries whose answers are held to InMemoryStore
CHECKED_UP_TO = 100_000  # InMemoryStore's plain Python BM25 is too slow beyond
BM25_K1, BM25_B = 0.9, 0.4


def _log(message: str) -> None:
    print(f"[bm25 {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def labelled_batches(size: int) -> Iterator[list[MemoryEntry]]:
    """The natural entries of ``size``, with a category by index and the tag ``t{index % 100}``."""
    start = 0
    for batch in workloads.entry_batches("natural", size, BATCH):
        yield [
            replace(
                entry,
                category=CATEGORIES[index % len(CATEGORIES)],
                tags=[*entry.tags, f"t{index % TAG_MODULUS}"],
                metadata={"shard": f"s{37 * index % SHARDS}"},
            )
            for index, entry in enumerate(batch, start)
        ]
        start += len(batch)


def _queries(kind: str, count: int) -> list[str]:
    """The queries a kind of child asks: natural ones, or the skewed ones."""
    if kind in SKEWED:
        return workloads.skewed_queries(count)
    return workloads.queries("natural", count)


async def _serve(db: str, kind: str, count: int, warmup: int, budget: float) -> dict[str, Any]:
    queries = _queries(kind, warmup + count)
    chosen = FILTERS.get(kind)
    ranking = "reference" if kind in {"reference", "skewed-reference"} else "bm25"
    began = time.perf_counter()
    async with open_store(db, ranking=ranking) as store:
        await store.retrieve(queries[0], LIMIT, filter=chosen)
        first_s = time.perf_counter() - began
        for query in queries[1:warmup]:
            await store.retrieve(query, LIMIT, filter=chosen)
        gc.collect()
        timings: list[float] = []
        answers: list[list[str]] = []
        started = time.perf_counter()
        for query in queries[warmup:]:
            if len(timings) >= CHECKED and time.perf_counter() - started > budget:
                break
            began = time.perf_counter()
            found = await store.retrieve(query, LIMIT, filter=chosen)
            timings.append(time.perf_counter() - began)
            if len(answers) < CHECKED:
                answers.append([str(entry.id) for entry in found])
        report = {"first_s": first_s, "timings": timings, "answers": answers}
        return report | {"count": await store.count(), "rss_kb": peak_rss_kb()}


def _bm25s(texts_file: str, count: int, warmup: int) -> dict[str, Any]:
    import bm25s  # noqa: PLC0415 - only this child loads it (the store children's RSS)
    import Stemmer  # noqa: PLC0415

    stemmer = Stemmer.Stemmer("english")
    with Path(texts_file).open(encoding="utf-8") as lines:
        texts = [json.loads(line) for line in lines]
    began = time.perf_counter()
    corpus = bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False)
    index = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene")
    index.index(corpus, show_progress=False)
    build_s = time.perf_counter() - began
    gc.collect()

    # bm25s at its fastest: the query's tokens cut as bm25s.tokenize cuts them (without
    # its per-call vocabulary building), its scores, the best LIMIT by a partition.
    def ask(query: str) -> None:
        tokens = [token for token in query_tokens(query) if token in index.vocab_dict]
        if tokens:  # bm25s cannot score a query with no known token
            scores = index.get_scores(tokens)
            best = np.argpartition(scores, -LIMIT)[-LIMIT:]
            best[np.argsort(-scores[best], kind="stable")]

    def timed(queries: list[str]) -> list[float]:
        timings: list[float] = []  # the first ``warmup`` are the warm-up's
        for query in queries:
            began = time.perf_counter()
            ask(query)
            timings.append(time.perf_counter() - began)
        return timings[warmup:]

    return {
        "first_s": build_s,
        "timings": timed(_queries("bm25", warmup + count)),
        "skewed_timings": timed(_queries("skewed", warmup + count)),
        "count": len(texts),
        "rss_kb": peak_rss_kb(),
    }


def child_main(argv: Sequence[str]) -> None:
    """The child: ``_child KIND PATH COUNT WARMUP BUDGET``; prints its report as JSON."""
    kind, path, count, warmup, budget = argv
    if kind == "bm25s":
        report = _bm25s(path, int(count), int(warmup))
    else:
        report = asyncio.run(_serve(path, kind, int(count), int(warmup), float(budget)))
    print(json.dumps(report))


def _run_child(kind: str, path: Path, options: Options) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.bm25_bench", CHILD, kind, str(path)]
    command += [str(options.queries), str(options.warmup), str(options.budget)]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"the {kind} child failed:\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout)
    return report


@dataclass(frozen=True, slots=True)
class Options:
    """What the command line asked for."""

    queries: int
    warmup: int
    rounds: int
    bm25s: bool
    budget: float


@dataclass(frozen=True, slots=True)
class Figures:
    """One kind's figures: the median over its rounds (peak RSS: the largest)."""

    first_s: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    max_ms: float
    rss_mb: float
    round_p50s: list[float]
    timed: int  # queries timed (the fewest of the rounds)

    @classmethod
    def of(cls, reports: Sequence[dict[str, Any]]) -> Figures:
        """The figures of one or more child reports."""

        def median(figure: Callable[[list[float]], float]) -> float:
            return statistics.median(figure(report["timings"]) * 1e3 for report in reports)

        return cls(
            first_s=statistics.median(report["first_s"] for report in reports),
            p50_ms=median(statistics.median),
            p95_ms=median(lambda timings: nearest_rank(timings, 95)),
            p99_ms=median(lambda timings: nearest_rank(timings, 99)),
            max_ms=median(max),
            rss_mb=max(report["rss_kb"] for report in reports) / 1024,
            round_p50s=[statistics.median(report["timings"]) * 1e3 for report in reports],
            timed=min(len(report["timings"]) for report in reports),
        )


@dataclass(slots=True)
class Result:
    """Every figure of one size."""

    size: int
    store_many_s: float
    store: dict[str, Figures] = field(default_factory=dict)
    bm25s: Figures | None = None
    bm25s_skewed: Figures | None = None
    checked: int = 0


class WrongAnswerError(Exception):
    """The store's BM25 answer differs from InMemoryStore's."""


async def _build(db: Path, texts: Path, size: int) -> float:
    """``store_many`` every labelled entry into ``db``; their documents go to ``texts``."""
    elapsed = 0.0
    with texts.open("w", encoding="utf-8") as out:
        async with open_store(db) as store:
            for batch in labelled_batches(size):
                began = time.perf_counter()
                await store.store_many(batch)
                elapsed += time.perf_counter() - began
                # bm25s's documents: the memory text, then the tags
                out.writelines(json.dumps(" ".join([e.memory, *e.tags])) + "\n" for e in batch)
            stored = await store.count()
    if stored != size:
        raise WrongAnswerError(f"store_many stored {stored} of {size} entries")
    return elapsed


async def _expected(size: int, warmup: int) -> dict[str, list[list[str]]]:
    """InMemoryStore(ranking="bm25")'s ids for each checked query: unfiltered, filtered, skewed."""
    entries = [entry for batch in labelled_batches(size) for entry in batch]
    reference = InMemoryStore(entries, ranking="bm25")
    answers: dict[str, list[list[str]]] = {}
    for kind, chosen in (("bm25", None), *FILTERS.items(), ("skewed", None)):
        answers[kind] = []
        for query in _queries(kind, warmup + CHECKED)[warmup:]:
            found = await reference.retrieve(query, LIMIT, filter=chosen)
            answers[kind].append([str(entry.id) for entry in found])
    return answers


def _check(label: str, queries: Sequence[str], want: list[list[str]], got: list[Any]) -> None:
    for number, (query, expected, actual) in enumerate(zip(queries, want, got, strict=True)):
        if expected != actual:
            raise WrongAnswerError(
                f"{label}, query {number} {query!r}: InMemoryStore(ranking='bm25') answers"
                f" {expected}, the store {actual}"
            )


def measure(size: int, options: Options, scratch: Path) -> Result:
    """Every figure of one size, in ``scratch`` (a fresh directory)."""
    label = size_label(size)
    db, texts = scratch / "store.db", scratch / "texts.jsonl"
    _log(f"{label}: store_many in batches of {BATCH}")
    result = Result(size, asyncio.run(_build(db, texts, size)))
    reports: dict[str, list[dict[str, Any]]] = {kind: [] for kind in KINDS}
    for turn in range(options.rounds):
        for kind in KINDS:
            _log(f"{label}: {kind}, round {turn + 1} of {options.rounds}")
            report = _run_child(kind, db, options)
            if report["count"] != size:
                raise WrongAnswerError(f"{label}: the {kind} child counted {report['count']}")
            reports[kind].append(report)
    result.store = {kind: Figures.of(reports[kind]) for kind in KINDS}
    if size <= CHECKED_UP_TO:
        _log(f"{label}: InMemoryStore(ranking='bm25') on {CHECKED} queries of each kind")
        expected = asyncio.run(_expected(size, options.warmup))
        for kind, answers in expected.items():
            checked = _queries(kind, options.warmup + CHECKED)[options.warmup :]
            for report in reports[kind]:
                _check(f"{label} {kind}", checked, answers, report["answers"])
        result.checked = CHECKED
    if options.bm25s:
        _log(f"{label}: bm25s (build, then the same queries, natural and skewed)")
        report = _run_child("bm25s", texts, options)
        result.bm25s = Figures.of([report])
        result.bm25s_skewed = Figures.of([report | {"timings": report["skewed_timings"]}])
    return result


def _row(label: str, name: str, figures: Figures, first: str) -> str:
    rounds = ", ".join(f"{value:.2f}" for value in figures.round_p50s)
    name = f"{name} ({figures.timed} queries)"
    return (
        f"| {label} | {name} | {first} | {figures.p50_ms:.2f} | {figures.p95_ms:.2f}"
        f" | {figures.p99_ms:.2f} | {figures.max_ms:.2f} | {rounds} | {figures.rss_mb:.0f} |"
    )


def table(results: Sequence[Result]) -> list[str]:
    """The serving figures, one row per store ranking (and bm25s) and size."""
    lines = [
        "| size | what | open + first query s | p50 ms | p95 ms | p99 ms | max ms"
        " | rounds' p50 ms | peak RSS MB |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        label = size_label(result.size)
        for kind, figures in result.store.items():
            lines.append(_row(label, KINDS[kind], figures, f"{figures.first_s:.2f}"))
        if result.bm25s is not None:
            built = f"(build {result.bm25s.first_s:.1f})"
            lines.append(_row(label, "`bm25s`, static index, k=5", result.bm25s, built))
        if result.bm25s_skewed is not None:
            lines.append(_row(label, "`bm25s`, skewed queries", result.bm25s_skewed, "(same)"))
    return lines


def _ratio(numerator: float, denominator: float | None) -> str:
    return "—" if denominator is None else f"{numerator / denominator:.2f}x"


def ratios(results: Sequence[Result]) -> list[str]:
    """The ratios of one run, per size."""
    lines = [
        "| size | store_many s | bm25 / reference p50 | filter 1% / bm25 p50"
        " | metadata filter 1% / bm25 p50 | bm25 / bm25s p50 | bm25 / bm25s p95"
        " | answers checked |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for result in results:
        bm25, bm25s = result.store["bm25"], result.bm25s
        checked = f"{result.checked} x 4 (plain, filtered, skewed)" if result.checked else "—"
        lines.append(
            f"| {size_label(result.size)} | {result.store_many_s:.1f}"
            f" | {_ratio(bm25.p50_ms, result.store['reference'].p50_ms)}"
            f" | {_ratio(result.store['filtered'].p50_ms, bm25.p50_ms)}"
            f" | {_ratio(result.store['metadata'].p50_ms, bm25.p50_ms)}"
            f" | {_ratio(bm25.p50_ms, bm25s.p50_ms if bm25s else None)}"
            f" | {_ratio(bm25.p95_ms, bm25s.p95_ms if bm25s else None)} | {checked} |"
        )
    return lines


def _bm25(result: Result) -> Figures:
    return result.store["bm25"]


def _p50s(result: Result, kind: str, other: str) -> tuple[float, float]:
    return result.store[kind].p50_ms, result.store[other].p50_ms


def _vs_bm25s(name: str) -> Callable[[Result], tuple[float, float] | None]:
    def figures(result: Result) -> tuple[float, float] | None:
        ours, theirs = _bm25(result), result.bm25s
        return None if theirs is None else (getattr(ours, name), getattr(theirs, name))

    return figures


def _vs_bm25s_skewed(result: Result) -> tuple[float, float] | None:
    theirs = result.bm25s_skewed
    return None if theirs is None else (result.store["skewed"].p50_ms, theirs.p50_ms)


@dataclass(frozen=True, slots=True)
class Target:
    """One target of issue 28: the measured figure against its bound."""

    text: str  # "{size}": once for each size measured
    size: int | None  # the size it reads; None: every size
    figures: Callable[[Result], tuple[float, float] | None]  # (measured, bound); None: not run
    unit: str = "ms"
    strict: bool = False


MILLION = 1_000_000
TARGETS = (
    Target("bm25 1M p50 <= reference 1M p50", MILLION, lambda r: _p50s(r, "bm25", "reference")),
    Target("bm25 1M p95 <= 3 x p50", MILLION, lambda r: (_bm25(r).p95_ms, 3 * _bm25(r).p50_ms)),
    Target("bm25 100k p50 <= 3 ms", 100_000, lambda r: (_bm25(r).p50_ms, 3.0)),
    Target("bm25 {size} p50 <= bm25s p50", None, _vs_bm25s("p50_ms")),
    Target("bm25 {size} p95 < bm25s p95", None, _vs_bm25s("p95_ms"), strict=True),
    Target("bm25 {size} filter-1% p50 <= unfiltered", None, lambda r: _p50s(r, "filtered", "bm25")),
    Target(
        "bm25 {size} metadata filter-1% p50 <= unfiltered",
        None,
        lambda r: _p50s(r, "metadata", "bm25"),
    ),
    Target("peak RSS serving 1M (bm25) <= 400 MB", MILLION, lambda r: (_bm25(r).rss_mb, 400), "MB"),
    Target("bm25 1M open + first query <= 2.5 s", MILLION, lambda r: (_bm25(r).first_s, 2.5), "s"),
    Target(
        "bm25 1M skewed p50 <= reference skewed p50",
        MILLION,
        lambda r: _p50s(r, "skewed", "skewed-reference"),
    ),
    Target("bm25 1M skewed p50 <= bm25s skewed p50", MILLION, _vs_bm25s_skewed),
    Target(
        "bm25 1M skewed p95 <= 3 x p50",
        MILLION,
        lambda r: (r.store["skewed"].p95_ms, 3 * r.store["skewed"].p50_ms),
    ),
)


def targets(results: Sequence[Result]) -> list[tuple[str, str, str]]:
    """Issue 28's targets: (target, figures, holds / MISSED / — for not measured)."""
    verdicts: list[tuple[str, str, str]] = []
    for target in TARGETS:
        chosen = [result for result in results if target.size in (None, result.size)]
        if not chosen:
            verdicts.append((target.text, "not measured", "—"))
        for result in chosen:
            text = target.text.format(size=size_label(result.size))
            figures = target.figures(result)
            if figures is None:
                verdicts.append((text, "not measured (--no-bm25s)", "—"))
                continue
            measured, bound = figures
            digits = 0 if target.unit == "MB" else 2
            shown = f"{measured:.{digits}f} {target.unit} vs {bound:.{digits}f} {target.unit}"
            holds = measured < bound if target.strict else measured <= bound
            verdicts.append((text, shown, "holds" if holds else "MISSED"))
    return verdicts


def section(results: Sequence[Result], options: Options, command: str) -> str:
    """The RESULTS.md section: how it was run, on what, the tables and the targets."""
    code, dirty = code_version()
    rows = ["| {} | {} | {} |".format(*verdict) for verdict in targets(results)]
    return "\n".join(
        [
            BEGIN,
            "## BM25 speed",
            "",
            f"- Command: `{command}` (from the project root, with `.venv/bin/python`)",
            f"- Date: {dt.datetime.now(dt.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
            f"- Machine: {machine()}",
            f"- Code: {code}" + (" (numbers from code in progress)" if dirty else ""),
            "",
            *table(results),
            "",
            *ratios(results),
            "",
            f"- One natural file a size, built once by `store_many`; entry i has category i mod"
            f" {len(CATEGORIES)} and the tag `t{{i mod {TAG_MODULUS}}}` besides its own. Store"
            f" rows: a fresh child process each, {options.warmup} warm-up queries (the first"
            " timed from `open_store`: `open + first query`), then"
            f" {options.queries} queries (limit {LIMIT}) timed one by one; {options.rounds}"
            " rounds of reference, bm25, bm25 filtered twice (natural queries), then reference"
            f" and bm25 on skewed queries ({workloads.SKEWED_TOP}"
            " most common content words, 2-5 a query, then one natural word), each figure the"
            " median of the rounds'"
            f" (peak RSS, VmHWM: the largest). A child stops timing after {options.budget:g} s"
            f" (once {CHECKED} were timed): `(n queries)` is how many were.",
            f"- `bm25s`: bm25s itself (Lucene, k1 {BM25_K1}, b {BM25_B}, `bm25s.tokenize` with its"
            " English stopwords and PyStemmer stems) on the same documents (memory, then tags);"
            " `build`: tokenize + index, s; a query: its tokens (the store's tokenizer, equal to"
            " `bm25s.tokenize`'s, without its per-call vocabulary), `get_scores`, the best 5 by"
            " a partition: bm25s at its fastest.",
            f"- Answers: the first {CHECKED} timed queries' ids of every bm25 child (unfiltered,"
            " filtered, skewed) equal `InMemoryStore(ranking='bm25')`'s, in order (sizes <= 100k).",
            "- What bounds `open + first query`: a process that ranks by BM25 first learns which"
            " entries live from one count (rows only where seqs are missing, or for their scopes"
            " where there are scopes) and reads BM25's word postings, most of the time; the"
            " reference reads every entry's relevance row by row and its token postings. The"
            " file's pages are not always in the OS cache here.",
            "",
            "### Targets (issues 28, 45, 47)",
            "",
            "| target | measured | verdict |",
            "| --- | --- | --- |",
            *rows,
            "",
            END,
        ]
    )


def _sizes(text: str) -> list[int]:
    return [parse_size(part) for part in text.split(",") if part.strip()]


def main(argv: Sequence[str] | None = None) -> None:
    """Run the benchmark; print (and write) its section."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == [CHILD]:
        child_main(arguments[1:])
        return
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.bm25_bench",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add = parser.add_argument
    add("--sizes", type=_sizes, default=[100_000, 1_000_000], help="default 100k,1m")
    add("--queries", type=int, default=300, help="queries timed a process (default 300)")
    add("--warmup", type=int, default=5, help="untimed queries first, at least 1 (default 5)")
    add("--rounds", type=int, default=2, help="rounds of the store children (default 2)")
    add("--budget", type=float, default=120, help="s of timed queries a child (default 120)")
    add("--no-bm25s", action="store_true", help="skip bm25s (its 1M build takes ~1 min)")
    add("--out", type=Path, help="write the section into this markdown file")
    args = parser.parse_args(arguments)
    if args.warmup < 1 or args.queries < CHECKED or args.rounds < 1:
        parser.error(f"need --warmup >= 1, --queries >= {CHECKED}, --rounds >= 1")
    options = Options(args.queries, args.warmup, args.rounds, not args.no_bm25s, args.budget)
    results = []
    for size in args.sizes:
        with tempfile.TemporaryDirectory(prefix="loopctl-bm25-") as scratch:
            try:
                results.append(measure(size, options, Path(scratch)))
            except WrongAnswerError as exc:
                raise SystemExit(f"bm25 benchmark FAILED: {exc}") from None
    command = shlex.join(["python", "-m", "benchmarks.bm25_bench", *arguments])
    text = section(results, options, command)
    print(text)
    if args.out is not None:
        write_section(args.out, text, BEGIN, END)


if __name__ == "__main__":
    main()
