"""The installed script and ``python -m loopctl_memory``, as real processes."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from loopctl_memory import MemoryCategory, MemoryEntry, __version__
from loopctl_memory.entry_json import entry_to_json

SCRIPT = shutil.which("loopctl-memory", path=str(Path(sys.executable).parent))

COMMANDS = [
    pytest.param([SCRIPT], id="script"),
    pytest.param([sys.executable, "-m", "loopctl_memory"], id="python -m"),
]


def run(
    command: Sequence[str | None], *args: object, **options: Any
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(part) for part in (*command, *args)],
        capture_output=True,
        text=True,
        check=False,
        **options,
    )


def test_the_script_is_installed_next_to_python():
    assert SCRIPT is not None


@pytest.mark.parametrize("command", COMMANDS)
def test_a_round_trip_through_a_real_process(command, tmp_path):
    db = tmp_path / "memory.db"
    added = run(command, "--db", db, "add", "from a real process", "-c", "fact", "-t", "e2e")
    assert 0 == added.returncode, added.stderr
    found = run(command, "--db", db, "search", "real process", "--json")
    assert 0 == found.returncode, found.stderr
    [entry] = json.loads(found.stdout)
    assert (added.stdout.strip(), ["e2e"]) == (entry["id"], entry["tags"])


@pytest.mark.parametrize("command", COMMANDS)
def test_version(command):
    result = run(command, "--version")
    assert 0 == result.returncode
    assert f"loopctl-memory, version {__version__}\n" == result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_a_failure_is_one_line_without_traceback(command, tmp_path):
    result = run(command, "--db", tmp_path / "missing" / "memory.db", "add", "x", "-c", "fact")
    assert 1 == result.returncode
    assert "" == result.stdout
    [line] = result.stderr.splitlines()
    assert line.startswith("Error: cannot create")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_usage_error_exits_2_in_one_line(command):
    result = run(command, "search")
    assert 2 == result.returncode
    assert ["Error: Missing argument 'QUERY'. (see 'loopctl-memory search --help')"] == (
        result.stderr.splitlines()
    )


def test_the_database_variable_reaches_a_real_process(tmp_path):
    db = tmp_path / "env.db"
    env = {**os.environ, "LOOPCTL_MEMORY_DB": str(db)}
    assert 0 == run([SCRIPT], "init", env=env).returncode
    assert db.exists()


def test_help_loads_neither_sqlalchemy_nor_rich():
    """`--help` answers at once: the commands import the store and rich when they run."""
    script = (
        "import sys\n"
        "from loopctl_memory.cli import main\n"
        "sys.argv = ['loopctl-memory', '--help']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted({name.split('.')[0] for name in sys.modules} & "
        "{'sqlalchemy', 'alembic', 'rich', 'aiosqlite'}), file=sys.stderr)\n"
    )
    result = run([sys.executable, "-c", script])
    assert "[]" == result.stderr.strip()
    assert "Usage: loopctl-memory" in result.stdout


def _read_all(descriptor: int) -> bytes:
    chunks = []
    while True:
        try:
            chunk = os.read(descriptor, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks)


def test_import_shows_a_progress_bar_on_a_terminal(tmp_path):
    """On a terminal (stderr a pty) the real command draws its bar and ends at every entry."""
    source = tmp_path / "memories.jsonl"
    lines = [
        entry_to_json(MemoryEntry(MemoryCategory.FACT, f"memory {n}", tags=["t"]))
        for n in range(3_000)
    ]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert SCRIPT is not None
    primary, secondary = pty.openpty()
    try:
        process = subprocess.Popen(
            [SCRIPT, "--db", tmp_path / "memory.db", "import", "--batch-size", "1000", source],
            stdout=subprocess.PIPE,
            stderr=secondary,
            env={**os.environ, "TERM": "xterm", "COLUMNS": "100"},
        )
        os.close(secondary)
        terminal = _read_all(primary).decode(errors="replace")
        stdout, _ = process.communicate()
    finally:
        os.close(primary)
    assert 0 == process.returncode, terminal
    assert f"Imported 3000 entries from {source}\n" == stdout.decode()
    assert "importing 3000 entries" in terminal
    assert "━" in terminal  # the bar itself
    assert "Traceback" not in terminal


def test_import_draws_no_bar_when_stderr_is_not_a_terminal(tmp_path):
    source = tmp_path / "memories.jsonl"
    source.write_text(entry_to_json(MemoryEntry(MemoryCategory.FACT, "one")) + "\n", "utf-8")
    result = run([SCRIPT], "--db", tmp_path / "memory.db", "import", source)
    assert 0 == result.returncode
    assert "" == result.stderr
