"""Every script in examples/ runs as its docstring says, and shows what it is there to show.

Each example runs as a user runs it: a process of its own, ``python
examples/NAME.py --db PATH``. It must exit 0 with nothing on stderr (an
unclosed store's ResourceWarning included), and print the lines that prove its
point. An example that no test runs fails :func:`test_every_example_is_run_by_a_test`.
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from loopctl_memory import sync

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

RUN_ELSEWHERE = {"langgraph_memory.py": EXAMPLES.parent / "tests/langgraph/test_example.py"}
"""Examples that another test file runs (it names them)."""


def run_example(name: str, *arguments: str, **environment: str) -> list[str]:
    """The lines the example prints; fails the test unless it exits 0 with a clean stderr."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("LOOPCTL_")}
    done = subprocess.run(
        [sys.executable, "-W", "default::ResourceWarning", str(EXAMPLES / name), *arguments],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, **environment},
        check=False,
    )
    assert 0 == done.returncode, done.stderr
    assert "" == done.stderr
    return done.stdout.splitlines()


def section(lines: list[str], header: str) -> list[str]:
    """The lines below ``header`` that are indented deeper than it."""
    start = lines.index(header)
    depth = len(header) - len(header.lstrip())
    end = start + 1
    while end < len(lines) and len(lines[end]) - len(lines[end].lstrip()) > depth:
        end += 1
    return lines[start + 1 : end]


def check_quickstart(lines: list[str], db: Path) -> None:
    assert [
        "stored: 3",
        "retrieved: [insight] Prefer Glob over manual file search",
        "after reopening: 3",
        "retrieved: [fact] CI runs make test",
    ] == lines
    with sync.open_store(db) as store:  # the memories are in the file --db named
        assert 3 == store.count()


def check_agent_loop(lines: list[str], db: Path) -> None:
    del db
    run_1, run_2 = section(lines, "run 1"), section(lines, "run 2")
    assert [
        "    recalled nothing",
        "    $ pytest -> failed: ImportError: No module named 'app'; use `make test`",
        "    $ make test -> ok: 412 passed in 61s",
        "    done in 2 tool call(s)",
    ] == section(run_1, "  turn 1: run the tests")
    assert "    done in 2 tool call(s)" == section(run_1, "  turn 2: lint the code")[-1]
    # The third turn recalls what the first learned, and gets it right first time.
    third = section(run_1, "  turn 3: run the tests")
    assert "    recalled [strategy] to run the tests, use `make test`" == third[0]
    assert ["    $ make test -> ok: 412 passed in 61s", "    done in 1 tool call(s)"] == third[-2:]
    assert [
        "  forgot 5 working notes",
        "  consolidated: 5 -> 4 memories (1 merged, 0 pruned)",
    ] == run_1[-2:]
    # A later run on the same file: every task right first time, from the lessons.
    for turn, task, lesson in (
        (1, "lint the code", "[strategy] to lint the code, use `make lint`"),
        (2, "run the tests", "[strategy] to run the tests, use `make test`"),
    ):
        done = section(run_2, f"  turn {turn}: {task}")
        assert f"    recalled {lesson}" == done[0]
        assert "    done in 1 tool call(s)" == done[-1]
        assert not any("failed" in line for line in done if line.startswith("    $"))
    assert [
        "  forgot 2 working notes",
        "  consolidated: 6 -> 4 memories (2 merged, 0 pruned)",
    ] == run_2[-2:]
    kept = section(lines, "kept:")
    assert 4 == len(kept)
    assert not any("[working]" in line for line in kept)
    assert "  [strategy] to run the tests, use `make test` (relevance 1.00)" in kept


def check_sync_api(lines: list[str], db: Path) -> None:
    del db
    assert re.fullmatch(r"\d\.\d{3} CI runs make test", lines[0])
    assert lines[1].endswith(" make lint runs ruff and mypy")
    assert float(lines[0].split()[0]) > float(lines[1].split()[0])
    assert [
        "after the threads: 11",
        "agent-1 holds: 1",
        "scopes: [('', 11), ('team/agent-1', 1)]",
        "shard memories (iter_entries): 8",
    ] == lines[2:]


def check_scopes(lines: list[str], db: Path) -> None:
    del db
    assert [
        "alice: ['Alice prefers contact by email']",
        "acme/support and below: ['Alice prefers contact by email',"
        " 'Bob wants contact by phone only']",
        "root only: ['Support hours: contact us 9-17 CET']",
        "everyone: 4",
        "bob's id from alice's view: None",
        "bob's id from the team's view: Bob wants contact by phone only",
        "scopes: [('', 1), ('acme/sales/carol', 1), ('acme/support/alice', 1),"
        " ('acme/support/bob', 1)]",
        "scopes under acme/support: [('acme/support/alice', 1), ('acme/support/bob', 1)]",
    ] == lines


def check_metadata_keys_expiry(lines: list[str], db: Path) -> None:
    del db
    assert [
        "ann's metadata: {'user': 'ann', 'n': 3, 'via': {'tool': 'ui'}}",
        "ann's memory expires in: 7 days, 0:00:00",
        "mode, ann's only: ['Ann prefers dark mode']",
        "n >= 3: 1",
        "prefs: theme: light",
        "stored twice under prefs, kept: ['theme: light']",
        "deploy, now: ['deploy frozen']",
        "deploy, 2 hours later: [] None",  # expired: invisible at once, before any sweep
        "live memories: 3",
        "8 days later, live memories: 0",  # the ttl of everything else
        "swept expired rows: 4",
    ] == lines


def check_lifecycle(lines: list[str], db: Path) -> None:
    del db
    assert [
        "would merge: 'deploy failed, disk full on host b7'"
        " into 'Deploy failed: disk full on host b7'",
        "would prune: 'scratch: rerun job 812' (relevance 0.02 is below the floor 0.05)",
        "after the preview: 5 memories",
        "consolidated: 5 -> 3 (1 merged, 1 pruned, 57 bytes saved)",
        "kept: 'Deploy failed: disk full on host b7', relevance 0.70",
        "forgot: 1",
        "left: ['Deploy failed: disk full on host b7', 'Prune docker images before builds']",
        "history of 'Deploy failed: disk full on host b7': stored, absorbed",
        "history of 'deploy failed, disk full on host b7': stored, merged",
        "history of 'scratch: rerun job 812': stored, pruned",
        "history of 'Clean the docker cache before builds': stored, updated",
        "history of 'Ran the release checklist': stored, forgotten",
        "the update changed (old, new): {'memory': ['Clean the docker cache before builds',"
        " 'Prune docker images before builds'], 'validated': [False, True]}",
        "forgotten by the rule: {'category': 'trajectory'}",
    ] == lines


def check_rankings(lines: list[str], db: Path) -> None:
    del db
    assert "query: 'why did the release break'" == lines[0]

    def texts(ranking: str) -> list[str]:
        return [line.split(maxsplit=1)[1] for line in section(lines, ranking)]

    release, deploy = "Release notes live in docs/CHANGES.md", "Deploy failed: disk full on host b7"
    # The reference pads to the limit: "the" is a substring of "the main branch".
    assert [
        release,
        "Ship builds only from the main branch",
        "The staging database restarts nightly",
    ] == texts("reference")
    assert [release] == texts("bm25")  # the one memory that shares a word
    assert deploy == texts("vector")[0]  # no word in common: the toy embedder's "meaning"
    assert {release, deploy} <= set(texts("hybrid"))
    explained = section(
        lines, "hybrid, explained: 0.5 * bm25 / bm25_max + 0.5 * (cosine - min) / (max - min)"
    )
    assert 3 == len(explained)
    number = r"(-?\d+\.\d{3})"
    for line in explained:
        found = re.match(
            rf"  {number} = 0\.5 \* {number} / {number} \+ 0\.5 \* \({number} - {number}\)"
            rf" / \({number} - {number}\)  ",
            line,
        )
        assert found, line
        score, bm25, bm25_max, cosine, low, high, _ = (float(part) for part in found.groups())
        assert score == pytest.approx(
            0.5 * bm25 / bm25_max + 0.5 * (cosine - low) / (high - low), abs=0.005
        )
    assert f"hybrid, error patterns only: [{deploy!r}]" == lines[-1]


def check_mcp_client(lines: list[str], db: Path) -> None:
    assert (
        "tools: consolidate, forget_memory, memory_stats, recall, remember, update_memory"
        == lines[0]
    )
    assert re.fullmatch(
        r"remembered, id [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", lines[1]
    )
    recalled = [line for line in lines if line.startswith("recalled: ")]
    assert 1 == len(recalled)
    assert re.fullmatch(r"recalled: \d+\.\d{3} \[fact\] CI runs make test", recalled[0])
    assert "recalled for ann: ['Ann wants release notes by email']" in lines
    assert "stats: 3 memories, {'insight': 2, 'fact': 1}" in lines
    [error] = [line for line in lines if line.startswith("tool error:")]
    assert "relevance must be a finite number in [0, 1]" in error
    assert "the server goes on: 3 memories" == lines[-1]
    with sync.open_store(db) as store:  # the server wrote the file --db named
        keyed = store.get_by_key("ann/contact")
        assert keyed is not None
        assert {"user": "ann"} == keyed.metadata
        assert 3 == store.count()


CHECKS: dict[str, Callable[[list[str], Path], None]] = {
    "quickstart.py": check_quickstart,
    "agent_loop.py": check_agent_loop,
    "sync_api.py": check_sync_api,
    "scopes.py": check_scopes,
    "metadata_keys_expiry.py": check_metadata_keys_expiry,
    "lifecycle.py": check_lifecycle,
    "rankings.py": check_rankings,
    "mcp_client.py": check_mcp_client,
}
"""Each example this file runs, and what its output must show."""


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_the_example_runs_and_shows_its_point(name, tmp_path):
    db = tmp_path / "memory.db"
    CHECKS[name](run_example(name, "--db", str(db)), db)
    run_example(name, "--db", str(db))  # again, on what the first run left: it still works


def test_every_example_is_run_by_a_test():
    examples = {path.name for path in EXAMPLES.glob("*.py")}
    covered = set(CHECKS) | set(RUN_ELSEWHERE)
    assert set() == examples - covered, "no test runs these: add a check of each to CHECKS"
    assert set() == covered - examples, "these examples are gone: drop their checks"
    for name, test in RUN_ELSEWHERE.items():
        assert name in test.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.py")), ids=lambda path: path.name)
def test_each_example_says_what_it_shows_and_how_to_run_it(path):
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert docstring is not None
    assert f"python examples/{path.name}" in docstring
    assert "--db" in docstring


@pytest.mark.parametrize("name", sorted(CHECKS))
def test_without_db_the_example_uses_a_temporary_file_it_removes(name, tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    lines = run_example(name, TMPDIR=str(scratch))
    assert lines
    assert [] == list(scratch.iterdir())
