"""Several processes on one memory through LangGraphStore, as LangGraph deployments run it.

Three long-lived workers (each 8 threads and 8 async tasks, reading their own
writes and searching everyone's) beside short-lived processes running the
example graph, on one SQLite file and on PostgreSQL. At the end every
acknowledged write is there, exactly, and the file passes ``PRAGMA integrity_check``.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from loopctl_memory.langgraph import LangGraphStore
from tests.conftest import SHARED_BACKENDS, shared_target

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "langgraph_memory.py"
STEPS = 12
CHILD_TIMEOUT = 300.0


def _run_example(target: str, number: int) -> None:
    user, messages = f"user{number}", [f"I like tea number {number}.", "What do I like?"]
    said = subprocess.run(
        [sys.executable, str(EXAMPLE), "--db", target, "--user", user, "--json", *messages],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT,
        check=True,
    )
    answers = [json.loads(line)["answer"] for line in said.stdout.splitlines()]
    assert answers[-1] == f"You told me: I like tea number {number}."


@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_processes_threads_and_tasks_lose_nothing_and_leave_the_file_whole(
    backend: str, tmp_path: Path
) -> None:
    target = str(asyncio.run(shared_target(backend, tmp_path)))
    workers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.langgraph.processes_worker", target, str(n), str(STEPS)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(3)
    ]
    try:
        for number in range(3):  # short-lived processes meanwhile: the example graph, twice each
            _run_example(target, number)
    finally:  # every worker waited for (and its pipes closed), whatever failed
        finished = [worker.communicate(timeout=CHILD_TIMEOUT) for worker in workers]
    expected: dict[str, dict[str, object]] = {}
    for worker, (out, err) in zip(workers, finished, strict=True):
        assert worker.returncode == 0, err[-3000:]
        expected.update(json.loads(out))
    with LangGraphStore.from_conn_string(target) as store:
        for name, owned in expected.items():
            namespace = tuple(name.split("/"))
            found = store.search(namespace, limit=100)
            assert {item.key: item.value for item in found} == owned, name
        assert len(store.list_namespaces(prefix=("w",), limit=1000)) == sum(
            1 for owned in expected.values() if owned
        )
        assert len(store.list_namespaces(prefix=("users",), limit=10)) == 3
    if backend == "sqlite-file":
        raw = sqlite3.connect(target)  # every store of this process is closed
        try:
            assert raw.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        finally:
            raw.close()
