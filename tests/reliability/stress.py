"""The multi-process stress: one database shared as users share it, checked after every round.

Each round starts long-lived workers (:mod:`tests.reliability.stress_worker`:
a store each, many tasks at once, every kind of operation) beside chains of
short-lived processes (the CLI's ``add`` and ``search``, and
:mod:`tests.reliability.stress_short`: open, one write or a read-only read,
close). When all have exited, the round is checked: every process exited 0,
``PRAGMA integrity_check`` says ok (a SQLite file), no id is stored twice, and
the database holds exactly what the acknowledged changes of every round say
(each entry present once, in its scope, with its last acknowledged fields;
nothing removed present; nothing unknown).

Run it on its own, repeatedly, with figures::

    python -m tests.reliability.stress --runs 20 [--target postgresql+asyncpg://...]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from loopctl_memory import open_store
from tests.reliability.stress_plan import (
    BUSY_TIMEOUT,
    EMBEDDER,
    Model,
    fields,
    make_entry,
    unique_word,
)

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CHILD_TIMEOUT = 600.0  # seconds; a hang fails the run instead of blocking the suite
CLI_RELEVANCE = 0.55


@dataclass(frozen=True)
class Shape:
    """How much a run does."""

    rounds: int = 3
    workers: int = 4
    tasks: int = 20  # a file store's pool holds 5 connections (15 with overflow)
    operations: int = 12  # per task
    chains: int = 2
    steps: int = 8  # short-lived processes per chain and round


@dataclass
class Report:
    """What a run did and what it found wrong."""

    rounds: int = 0
    operations: int = 0
    long_lived: int = 0
    short_lived: int = 0
    entries_checked: int = 0
    """Entries compared with the acknowledged changes, summed over the rounds."""
    entries_at_end: int = 0
    acknowledged: int = 0
    problems: list[str] = field(default_factory=list)

    def summary(self) -> str:
        """One line of figures."""
        return (
            f"{self.rounds} rounds, {self.long_lived} long-lived processes"
            f" ({self.operations} operations), {self.short_lived} short-lived processes,"
            f" {self.acknowledged} acknowledged changes, {self.entries_checked} entries checked"
            f" over the rounds ({self.entries_at_end} at the end)"
        )


def _environment() -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "LOOPCTL_MEMORY_EMBEDDER": EMBEDDER,
        "NO_COLOR": "1",
        "COLUMNS": "200",
    }


def _run(arguments: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(  # noqa: PLW1510 - the caller reads the status
        [sys.executable, *arguments],
        capture_output=True,
        text=True,
        env=_environment(),
        timeout=CHILD_TIMEOUT,
    )


@dataclass
class _Chain:
    """Short-lived processes one after another, as a person's or a script's CLI calls."""

    target: str
    scope: str
    steps: int
    model: Model = field(default_factory=Model)
    held: int = 0
    processes: int = 0
    problems: list[str] = field(default_factory=list)

    def run(self) -> None:
        last_added: tuple[str, str] | None = None
        for step in range(self.steps):
            kind = ("cli-add", "write", "cli-search", "read")[step % 4]
            if kind == "cli-search" and last_added is None:
                continue
            arguments = self._arguments(kind, step, last_added)
            done = _run(arguments)
            self.processes += 1
            if done.returncode != 0:
                gist = _gist(done.stderr)
                self.problems.append(f"{self.scope} {kind} exited {done.returncode}: {gist}")
                continue
            if kind == "cli-add":
                entry = make_entry(self.scope, step, random.Random(f"{self.scope}#{step}"))
                added = done.stdout.strip()
                self.model.replay(
                    json.dumps(
                        {"put": [[added, self.scope, "fact", entry.memory, ["cli"], CLI_RELEVANCE]]}
                    )
                )
                last_added = (added, unique_word(self.scope, step))
                self.held += 1
            elif kind == "write":
                self.model.replay(done.stdout)
                self.held += 1
            elif kind == "cli-search" and last_added is not None:
                found = [item["id"] for item in json.loads(done.stdout)]
                if found != [last_added[0]]:
                    self.problems.append(f"{self.scope}: search found {found}, not {last_added[0]}")

    def _arguments(self, kind: str, step: int, last_added: tuple[str, str] | None) -> list[str]:
        # A CLI call beside busy writers waits as long as they do (SQLite's lock is not fair).
        scope = ["--db", self.target, "--scope", self.scope, "--busy-timeout", str(BUSY_TIMEOUT)]
        if kind == "cli-add":
            text = make_entry(self.scope, step, random.Random(f"{self.scope}#{step}")).memory
            add = ["add", text, "-c", "fact", "-t", "cli", "-r", str(CLI_RELEVANCE)]
            return ["-m", "loopctl_memory", *scope, *add]
        if kind == "cli-search" and last_added is not None:
            search = ["search", last_added[1], "--ranking", "bm25", "--json"]
            return ["-m", "loopctl_memory", *scope, *search]
        short = str(HERE / "stress_short.py")
        return [short, self.target, self.scope, str(step), kind, str(self.held)]


def _gist(stderr: str) -> str:
    """What a failed process said, in a few lines: its one-line failures, else its last line."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    told = lines[: next((i for i, line in enumerate(lines) if line.startswith("Traceback")), 0)]
    distinct = list(dict.fromkeys(told))
    if not distinct:
        return lines[-1] if lines else "(nothing on stderr)"
    more = f" (and {len(distinct) - 3} more)" if len(distinct) > 3 else ""
    return "; ".join(distinct[:3]) + more


def _integrity(path: Path) -> list[str]:
    """What ``PRAGMA integrity_check`` and a count of repeated ids find wrong in the file."""
    try:
        raw = sqlite3.connect(path)
        try:
            checked = [row[0] for row in raw.execute("PRAGMA integrity_check")]
            repeated = raw.execute(
                "SELECT count(*) FROM (SELECT id FROM entries GROUP BY id HAVING count(*) > 1)"
            ).fetchone()[0]
        finally:
            raw.close()
    except sqlite3.Error as exc:
        return [f"the file cannot be checked: {exc}"]
    problems = [] if checked == ["ok"] else [f"integrity_check: {checked[:5]}"]
    if repeated:
        problems.append(f"{repeated} ids stored more than once")
    return problems


async def _stored(target: str) -> dict[str, list[object]]:
    async with open_store(target, busy_timeout=BUSY_TIMEOUT, embedder=EMBEDDER) as store:
        return {
            str(entry.id): [scope, *fields(entry)]
            async for scope, entry in store.with_descendants().iter_scoped_entries()
        }


def _compare(model: Model, stored: dict[str, list[object]]) -> list[str]:
    missing = sorted(set(model.entries) - set(stored))
    unknown = sorted(set(stored) - set(model.entries))
    changed = sorted(i for i in set(model.entries) & set(stored) if model.entries[i] != stored[i])
    problems = []
    for what, ids in (
        ("acknowledged entries missing", missing),
        ("entries present that were never acknowledged or were removed", unknown),
        ("entries whose fields are not the last acknowledged", changed),
    ):
        if ids:
            problems.append(f"{len(ids)} {what} (such as {ids[0]})")
    return problems


def _start_workers(
    target: str, round_: int, shape: Shape, directory: Path
) -> tuple[list[subprocess.Popen[str]], list[Path], Path]:
    go = directory / f"go-{round_}"
    logs = [directory / f"log-{round_}-{worker}.jsonl" for worker in range(shape.workers)]
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "stress_worker.py"),
                target,
                str(round_),
                str(worker),
                str(go),
                str(logs[worker]),
                str(shape.tasks),
                str(shape.operations),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=_environment(),
        )
        for worker in range(shape.workers)
    ]
    return workers, logs, go


def _round(target: str, round_: int, shape: Shape, directory: Path, model: Model) -> Report:
    report = Report(rounds=1, long_lived=shape.workers)
    workers, logs, go = _start_workers(target, round_, shape, directory)
    chains = [_Chain(target, f"cli/r{round_}/c{c}", shape.steps) for c in range(shape.chains)]
    try:
        for worker in workers:
            assert worker.stdout is not None
            line = worker.stdout.readline()
            if line != "ready\n":
                report.problems.append(f"a worker did not start: {line!r}")
        go.touch()
        with ThreadPoolExecutor(len(chains)) as pool:
            for ran in [pool.submit(chain.run) for chain in chains]:
                ran.result()
        for number, worker in enumerate(workers):
            out, err = worker.communicate(timeout=CHILD_TIMEOUT)
            if worker.returncode != 0:
                report.problems.append(f"worker {number} exited {worker.returncode}: {_gist(err)}")
            elif out.startswith("done "):
                report.operations += int(out.split()[1])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.kill()
                worker.communicate()
    for log in logs:
        if log.exists():
            model.replay(log.read_text(encoding="utf-8"))
    for chain in chains:
        model.entries.update(chain.model.entries)
        model.acknowledged += chain.model.acknowledged
        report.short_lived += chain.processes
        report.problems.extend(chain.problems)
    return report


def run_stress(target: str | Path, directory: Path, shape: Shape = Shape()) -> Report:
    """Run ``shape.rounds`` rounds on ``target`` (a SQLite file or a PostgreSQL URL) and check each.

    Stops after the first round that finds a problem.
    """
    file = Path(target) if isinstance(target, Path) else None
    where = str(target)
    asyncio.run(_create(where))
    model = Model()
    total = Report()
    for round_ in range(shape.rounds):
        report = _round(where, round_, shape, directory, model)
        if file is not None:
            report.problems.extend(_integrity(file))
        try:
            stored = asyncio.run(_stored(where))
        except Exception as exc:  # a damaged database is a finding, not a crash
            report.problems.append(f"the database cannot be read: {type(exc).__name__}: {exc}")
        else:
            report.problems.extend(_compare(model, stored))
            report.entries_checked = len(stored)
        total.rounds += 1
        total.operations += report.operations
        total.long_lived += report.long_lived
        total.short_lived += report.short_lived
        total.entries_checked += report.entries_checked
        total.entries_at_end = report.entries_checked
        total.problems.extend(f"round {round_ + 1}: {p}" for p in report.problems)
        if report.problems:
            break
    total.acknowledged = model.acknowledged
    return total


async def _create(target: str) -> None:
    async with open_store(target, embedder=EMBEDDER):
        pass


def main() -> None:
    """Run the stress ``--runs`` times, each on a new database; print each run's figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=Shape.rounds)
    parser.add_argument("--target", help="a PostgreSQL URL (default: a new SQLite file each run)")
    arguments = parser.parse_args()
    failed = 0
    for run in range(1, arguments.runs + 1):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as scratch:
            directory = Path(scratch)
            target: str | Path = arguments.target or directory / "memory.db"
            if arguments.target:
                from tests.conftest import reset_postgres  # noqa: PLC0415 - only for a server

                asyncio.run(reset_postgres(arguments.target))
            report = run_stress(target, directory, Shape(rounds=arguments.rounds))
        seconds = time.perf_counter() - started
        verdict = "ok" if not report.problems else "FAILED"
        print(f"run {run}: {verdict} in {seconds:.0f} s: {report.summary()}")
        for problem in report.problems:
            print(f"  {problem[:2000]}")
        failed += bool(report.problems)
    print(f"{arguments.runs - failed} of {arguments.runs} runs passed")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
