"""Where a benchmark ran and on which code: the checkout, the machine, the commit.

Every report names the machine (:func:`machine`) and the code measured
(:func:`code_version`); ``ROOT`` is the checkout the benchmarks run from.
"""

from __future__ import annotations

import os
import platform
import shutil
import sqlite3
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def machine() -> str:
    """nproc, CPU, Python, SQLite, OS."""
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return (
        f"{os.cpu_count()} cores ({cpu}), "
        f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}"
    )


def code_version() -> tuple[str, bool]:
    """The commit measured, and whether src/ had uncommitted changes."""
    git = shutil.which("git")
    if git is None:
        return "unknown (no git)", False
    head = subprocess.run(
        [git, "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        [git, "status", "--porcelain", "--", "src"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    suffix = " plus uncommitted changes in src/" if dirty else ""
    return f"commit {head or 'unknown'}{suffix}", bool(dirty)
