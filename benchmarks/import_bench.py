"""How fast `loopctl-memory import` stores a 100,000-line JSON Lines file.

Generates the file (deterministic: seeded, realistic lengths and tags; --text
natural for the Zipf text of benchmarks.run's natural workload), then runs
the real command, in-process by default or as a subprocess of the installed
entry point with --subprocess (--terminal: with its standard error a terminal,
so that it draws its progress bar as a user sees it), a few times on a fresh
SQLite file each, and prints entries/s for every run, the best and the median.
The goal is >= 30,000 entries/s for the median run on natural text: what a
user typically sees, on a machine whose speed moves by a quarter from one
minute to the next.

    .venv/bin/python benchmarks/import_bench.py [--lines 100000] [--runs 3]
                                                [--subprocess | --terminal]
                                                [--text developer|natural]
"""

from __future__ import annotations

import argparse
import compileall
import os
import pty
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner

import loopctl_memory
from loopctl_memory.cli import cli
from loopctl_memory.entry import MemoryCategory, MemoryEntry
from loopctl_memory.entry_json import entry_to_json

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script, or -m
from benchmarks.baselines import raw_import

GOAL = 30_000
# fmt: off
WORDS = (
    "pytest", "failed", "flaky", "retry", "timeout", "database", "locked", "sqlite",
    "postgres", "migration", "schema", "commit", "push", "rebase", "lint", "ruff", "mypy",
    "import", "module", "venv", "install", "cache", "token", "api", "http", "rate", "limit",
    "backoff", "refactor", "parser", "test", "fixture", "strategy", "plan", "agent", "tool",
)
# fmt: on


def generate(path: Path, lines: int, seed: int = 7) -> None:
    """Write ``lines`` entries in the export format, as a real export would."""
    rng = random.Random(seed)
    start = datetime(2025, 1, 1, tzinfo=UTC)
    categories = list(MemoryCategory)
    with path.open("w", encoding="utf-8", newline="\n") as out:
        for number in range(lines):
            entry = MemoryEntry(
                rng.choice(categories),
                " ".join(rng.choices(WORDS, k=rng.randint(8, 30))),
                tags=rng.sample(WORDS, k=rng.randint(0, 4)),
                relevance=round(rng.random(), 2),
                id=uuid.UUID(int=rng.getrandbits(128), version=4),
                created_at=start + timedelta(seconds=number, microseconds=rng.randrange(10**6)),
                access_count=rng.randrange(20),
                validated=rng.random() < 0.3,
            )
            out.write(entry_to_json(entry) + "\n")


def generate_natural(path: Path, lines: int) -> None:
    """Write ``lines`` entries of ``benchmarks.run``'s natural workload, as an export would.

    Zipf text over 20,000 words (see ``benchmarks.workloads``): a vocabulary the
    size of real notes', where the default lines draw on 36 words.
    """
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:  # run as a script: the project's root is not on the path
        sys.path.insert(0, root)
    from benchmarks import workloads  # noqa: PLC0415 - after the path, and only when asked

    with path.open("w", encoding="utf-8", newline="\n") as out:
        out.writelines(entry_to_json(entry) + "\n" for entry in workloads.entries("natural", lines))


def run_in_process(database: Path, source: Path) -> float:
    started = time.perf_counter()
    result = CliRunner().invoke(cli, ["--db", str(database), "import", str(source)])
    elapsed = time.perf_counter() - started
    if result.exit_code != 0:
        raise SystemExit(f"import failed: {result.output}")
    return elapsed


def run_subprocess(database: Path, source: Path, **options: Any) -> float:
    """The installed command as a new process; ``options`` go to ``subprocess.run``."""
    program = shutil.which("loopctl-memory", path=str(Path(sys.executable).parent))
    if program is None:
        raise SystemExit("loopctl-memory is not installed next to this Python")
    started = time.perf_counter()
    subprocess.run(
        [program, "--db", str(database), "import", str(source)],
        check=True,
        stdout=subprocess.DEVNULL,
        **options,
    )
    return time.perf_counter() - started


def run_on_terminal(database: Path, source: Path) -> float:
    """As :func:`run_subprocess`, with standard error a pseudo-terminal: the bar is drawn."""
    primary, secondary = pty.openpty()
    drawn: list[bytes] = []
    reader = threading.Thread(target=_drain, args=(primary, drawn))
    reader.start()
    try:
        terminal = {**os.environ, "TERM": "xterm", "COLUMNS": "100"}
        elapsed = run_subprocess(database, source, stderr=secondary, env=terminal)
    finally:
        os.close(secondary)  # the reader sees the end once the command's copy is closed too
        reader.join()
        os.close(primary)
    if "━" not in b"".join(drawn).decode(errors="replace"):
        raise SystemExit("the import drew no progress bar on the terminal")
    return elapsed


def _drain(descriptor: int, into: list[bytes]) -> None:
    while True:
        try:
            chunk = os.read(descriptor, 65536)
        except OSError:  # EIO: every copy of the terminal's other end is closed
            return
        if not chunk:
            return
        into.append(chunk)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--subprocess", action="store_true", help="run the installed script")
    mode.add_argument(
        "--terminal", action="store_true", help="as --subprocess, drawing its bar on a pty"
    )
    parser.add_argument(
        "--text",
        choices=("developer", "natural"),
        default="developer",
        help="the lines' words: 36 developer words (default) or the natural workload's",
    )
    options = parser.parse_args()
    run, how = run_in_process, "in-process"
    if options.subprocess:
        run, how = run_subprocess, "subprocess"
    elif options.terminal:
        run, how = run_on_terminal, "subprocess, stderr a terminal"
    # As after any install, or any first run: the package's modules are already compiled
    # (a shell with PYTHONDONTWRITEBYTECODE set would compile them at every start).
    compileall.compile_dir(Path(loopctl_memory.__file__).parent, quiet=1)
    with tempfile.TemporaryDirectory() as scratch:
        source = Path(scratch) / "memories.jsonl"
        (generate_natural if options.text == "natural" else generate)(source, options.lines)
        size = source.stat().st_size / 2**20
        print(f"{options.lines} lines of {options.text} text, {size:.1f} MiB; {how}")
        rates = []
        for attempt in range(1, options.runs + 1):
            database = Path(scratch) / f"run{attempt}.db"
            elapsed = run(database, source)
            rates.append(options.lines / elapsed)
            print(f"  run {attempt}: {elapsed:6.2f} s  {rates[-1]:>9,.0f} entries/s")
        raws = []
        for attempt in range(1, options.runs + 1):  # the same lines, without the store
            raws.append(raw_import(Path(scratch) / f"raw{attempt}.db", source, 5_000))
            print(f"  raw json.loads + executemany {attempt}: {raws[-1]:>9,.0f} entries/s")
        median = statistics.median(rates)
        verdict = "meets" if median >= GOAL else "MISSES"
        print(f"best {max(rates):,.0f} entries/s, median {median:,.0f} entries/s")
        print(f"the median run {verdict} the goal of {GOAL:,} entries/s")
        ratio = median / statistics.median(raws)
        print(f"median import / median raw: {ratio:.2f}x (the goal: 0.5x)")


if __name__ == "__main__":
    main()
