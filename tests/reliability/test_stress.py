"""Many processes, each with many tasks, beside short-lived ones: nothing lost, nothing damaged.

The stress of :mod:`tests.reliability.stress`, as users run the store: long-lived
processes (a server's store, more tasks than its connection pool, every kind
of operation mixed) beside a stream of short-lived ones (CLI calls and scripts,
a write or a read-only read each), for several rounds, each round ending with
``PRAGMA integrity_check`` and every acknowledged write present exactly once.
Run it alone, repeatedly, with ``python -m tests.reliability.stress --runs 20``.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from tests.conftest import POSTGRES_URL_VARIABLE, SHARED_BACKENDS, reset_postgres
from tests.reliability.stress import Shape, run_stress

SHAPES = {
    "sqlite-file": Shape(),
    # No file to damage: the same contract, in fewer rounds.
    "postgresql": Shape(rounds=1),
}


@pytest.mark.slow
@pytest.mark.parametrize("backend", SHARED_BACKENDS)
def test_processes_with_many_tasks_beside_short_lived_ones_lose_and_damage_nothing(
    tmp_path: Path, backend: str
) -> None:
    shape = SHAPES[backend]
    target: str | Path = tmp_path / "memory.db"
    if backend == "postgresql":
        target = os.environ[POSTGRES_URL_VARIABLE]
        asyncio.run(reset_postgres(target))
    report = run_stress(target, tmp_path, shape)
    assert [] == report.problems, report.summary()
    assert shape.rounds == report.rounds
    assert shape.rounds * shape.workers * shape.tasks * shape.operations == report.operations
    assert shape.rounds * shape.chains * shape.steps == report.short_lived
    assert report.entries_checked > shape.rounds * shape.workers * shape.tasks
